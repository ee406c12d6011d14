"""The version of memory-core."""

__version__ = "0.1.0"  # the only place the version is written: pyproject.toml reads it (keep it a plain string)
