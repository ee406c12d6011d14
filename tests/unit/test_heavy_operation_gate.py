"""The bound on heavy operations as data and as a count, and the export's cursor."""

from __future__ import annotations

import pytest

from memory_core.config import Settings
from memory_core.contract.routes import ROUTES
from memory_core.entrypoints.http.gate import HeavyGate
from memory_core.errors import ConfigurationError, ValidationError
from memory_core.service.export_pages import ExportPosition


def test_the_heavy_routes_are_the_ones_that_read_or_remove_many_memories() -> None:
    heavy = {r.operation for r in ROUTES if r.heavy}
    assert heavy == {"export", "purge", "forgetting", "forgetting_preview", "forget_entity", "export_entity"}
    for r in ROUTES:
        assert (429 in {reply.status for reply in r.replies}) == r.heavy, r.operation


def test_the_gate_lets_its_limit_in_and_refuses_one_more_until_one_leaves() -> None:
    gate = HeavyGate(2)
    assert gate.try_enter() and gate.try_enter()
    assert not gate.try_enter() and gate.running == 2
    gate.leave()
    assert gate.try_enter() and not gate.try_enter()
    with pytest.raises(ValueError):
        HeavyGate(0)


def test_the_setting_must_allow_one_heavy_operation() -> None:
    assert Settings.from_env({}).heavy_operations == 2
    assert Settings.from_env({"MEMORY_HEAVY_OPERATIONS": "1"}).heavy_operations == 1
    with pytest.raises(ConfigurationError, match="MEMORY_HEAVY_OPERATIONS must be at least 1"):
        Settings.from_env({"MEMORY_HEAVY_OPERATIONS": "0"})


@pytest.mark.parametrize(
    "position",
    [
        ExportPosition("a1"),
        ExportPosition("agent.v2:eu", "m", "0f" * 16),
        ExportPosition("someone@example.com", "h", offset=12_345),
    ],
)
def test_a_cursor_names_its_position_in_url_safe_characters(position: ExportPosition) -> None:
    cursor = position.encode()
    assert cursor.replace("-", "").replace("_", "").isalnum() and cursor.isascii()
    assert ExportPosition.decode(cursor) == position


@pytest.mark.parametrize("cursor", ["", "!!", "YQ", ExportPosition("a1", "h", offset=1).encode()[:-2] + "zz"])
def test_a_cursor_it_did_not_issue_is_refused(cursor: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ExportPosition.decode(cursor)
    assert raised.value.field == "cursor"
