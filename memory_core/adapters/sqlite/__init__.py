"""The embedded adapters on SQLite: the memory store, its search structures, the history and the queue."""
