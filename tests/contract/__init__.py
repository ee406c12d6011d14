"""The store contract: one suite of behaviours every ``MemoryStore`` adapter must pass."""
