"""The newcomer test exercises the installed package, not the source tree it was installed from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import memory_core

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.environ.get("MEMORY_NEWCOMER") != "1", reason="only in CI's newcomer job (MEMORY_NEWCOMER=1)")
def test_memory_core_is_imported_from_the_installation() -> None:
    location = Path(memory_core.__file__).resolve()
    assert not location.is_relative_to(REPOSITORY), f"memory_core comes from the clone: {location}"
    assert "site-packages" in location.parts, location
