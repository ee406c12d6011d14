"""How ids appear in logs: short, stable, keyed tags (memory_core.domain.log_ids)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

import pytest

from memory_core.domain import log_ids
from memory_core.domain.log_ids import (
    agent_tag,
    path_ids,
    redact,
    redact_path,
    scope_tag,
    session_tag,
    use_log_key,
    user_tag,
)
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import Scope

EMAIL = "alice.smith@example.com"
TAG = re.compile(r"u:[0-9a-f]{12}")


@pytest.fixture(autouse=True)
def _unkeyed() -> Iterator[None]:
    use_log_key(None)
    yield
    use_log_key(None)


def test_a_tag_is_short_stable_and_not_the_id() -> None:
    tag = user_tag(EMAIL)
    assert TAG.fullmatch(tag) and EMAIL not in tag
    assert user_tag(EMAIL) == tag
    assert user_tag("bob@example.com") != tag
    assert agent_tag(EMAIL) != "a:" + tag[2:]  # kinds are kept apart
    assert user_tag(None) == "u:*" and scope_tag(EMAIL) == f"{tag}/a:*"


def test_a_plain_sha256_of_the_address_is_not_the_tag() -> None:
    # A dictionary of hashed addresses made without memory-core's prefix does not match.
    assert tag_hex(user_tag(EMAIL)) != hashlib.sha256(EMAIL.encode()).hexdigest()[:12]


def test_a_key_changes_every_tag_and_the_same_key_gives_the_same_tags() -> None:
    unkeyed = user_tag(EMAIL)
    use_log_key(b"k" * 32)
    keyed = user_tag(EMAIL)
    assert keyed != unkeyed and log_ids.keyed()
    use_log_key(b"other" * 8)
    assert user_tag(EMAIL) != keyed
    use_log_key(b"k" * 32)
    assert user_tag(EMAIL) == keyed
    use_log_key("")
    assert user_tag(EMAIL) == unkeyed and not log_ids.keyed()


def test_a_session_is_tagged_as_its_scope() -> None:
    scope = Scope.of(EMAIL, "agent-1")
    assert session_tag(session_id_for(scope)) == scope_tag(EMAIL, "agent-1")
    long = Scope.of(EMAIL, "agent-" + "x" * 122)
    hashed = session_id_for(long)
    assert hashed.startswith("h:") and session_tag(hashed).startswith("s:")
    assert hashed[2:14] not in session_tag(hashed)  # the session's own (unkeyed) hash is not shown
    assert session_tag(None) == "-"
    assert session_tag("other").startswith("s:")


def test_redact_replaces_named_ids_quoted_ids_and_addresses() -> None:
    text = redact(
        f"user 'bob' acts only for their own user_id 'bob', not for user_id '{EMAIL}'; "
        f"filter user_id eq '{EMAIL}' and agent_id eq 'bot-7'; session {EMAIL}|bot-7; mail carol@example.org; url /x/carol%40example.org/y",
        session_id=f"{EMAIL}|bot-7",
    )
    for raw in (EMAIL, "'bob'", "bot-7", "carol@example.org", "carol%40example.org"):
        assert raw not in text, text
    assert user_tag(EMAIL) in text and agent_tag("bot-7") in text and user_tag("carol@example.org") in text
    assert f"session {scope_tag(EMAIL, 'bot-7')}" in text
    assert text.count(user_tag("carol@example.org")) == 2  # written either way, the same tag


def test_redact_leaves_other_words_alone() -> None:
    assert redact("a bot said abc", "a", "bot") == "u:" + tag_hex(user_tag("a")) + " " + agent_tag("bot") + " said abc"
    assert redact("nothing to hide (turn-1, 3 decisions)") == "nothing to hide (turn-1, 3 decisions)"


def test_paths_are_redacted_and_read() -> None:
    path = "/api/users/alice.smith%40example.com/export?agent_id=bot-7&limit=3"
    assert path_ids(path) == (EMAIL, "bot-7")
    assert redact_path(path) == f"/api/users/{user_tag(EMAIL)}/export?agent_id={agent_tag('bot-7')}&limit=3"
    assert redact_path("/api/memories/search") == "/api/memories/search"


def tag_hex(tag: str) -> str:
    return tag.split(":", 1)[1]
