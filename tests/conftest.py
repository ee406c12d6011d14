"""Shared test setup: make the helper packages under ``tests/`` importable (``contract``, ...)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

# Deterministic, small thread pools for numeric code in every test process.
os.environ.setdefault("OMP_NUM_THREADS", "1")
