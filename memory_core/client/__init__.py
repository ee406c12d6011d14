"""How an agent reaches memory: one client interface, a local and a remote implementation."""
