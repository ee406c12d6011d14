"""Consolidation: how a new candidate changes what is already remembered."""
