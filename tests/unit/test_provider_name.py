"""The provider's name: ``MemoryCoreContextProvider``, with ``MemoryContextProvider`` kept as an alias."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("agent_framework")

import agent_framework

import memory_core
import memory_core.integrations
from memory_core.integrations import agent_framework as provider_module


def test_the_alias_is_the_same_class_object() -> None:
    assert provider_module.MemoryContextProvider is provider_module.MemoryCoreContextProvider
    assert provider_module.MemoryCoreContextProvider.__name__ == "MemoryCoreContextProvider"
    assert {"MemoryContextProvider", "MemoryCoreContextProvider"} <= set(provider_module.__all__)


def test_both_names_import_from_the_package_root_and_the_integrations_package() -> None:
    from memory_core import MemoryContextProvider, MemoryCoreContextProvider
    from memory_core.integrations import MemoryContextProvider as FromIntegrations
    from memory_core.integrations import MemoryCoreContextProvider as NewFromIntegrations

    assert MemoryCoreContextProvider is provider_module.MemoryCoreContextProvider
    assert MemoryContextProvider is MemoryCoreContextProvider
    assert FromIntegrations is NewFromIntegrations is MemoryCoreContextProvider
    assert "MemoryCoreContextProvider" in memory_core.integrations.__all__


def test_it_is_not_agent_frameworks_own_file_based_provider() -> None:
    own = getattr(agent_framework, "MemoryContextProvider", None)
    assert own is not provider_module.MemoryCoreContextProvider
    assert issubclass(provider_module.MemoryCoreContextProvider, agent_framework.ContextProvider)


def test_the_package_root_does_not_load_agent_framework_until_asked() -> None:
    probe = (
        "import sys, memory_core\n"
        "assert 'memory_core.integrations.agent_framework' not in sys.modules\n"
        "assert 'MemoryCoreContextProvider' not in memory_core.__all__\n"
        "from memory_core import MemoryCoreContextProvider\n"
        "assert 'memory_core.integrations.agent_framework' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
