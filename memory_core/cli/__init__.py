"""``memory-core``: the command line, one module per command group."""
