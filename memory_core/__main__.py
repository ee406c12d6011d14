"""``python -m memory_core``: the ``memory-core`` command line."""

from .cli import main

raise SystemExit(main())
