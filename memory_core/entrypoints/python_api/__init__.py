"""The Python API: :class:`Memory` and :class:`AsyncMemory`."""
