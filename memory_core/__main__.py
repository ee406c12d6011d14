"""``python -m memory_core``: the ``memory-core`` command line."""

from memory_core.cli.main import main

raise SystemExit(main())
