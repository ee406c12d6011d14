"""Adapters: one module per vendor or technology behind each port."""
