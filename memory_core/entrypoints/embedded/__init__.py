"""``memory-core serve``: the embedded host and its HTTP server on 127.0.0.1."""
