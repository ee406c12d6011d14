"""Models behind the ports: chat models and embedders (OpenAI-compatible, local e5, hashing)."""
