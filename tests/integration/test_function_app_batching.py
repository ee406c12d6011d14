"""The Functions app built from its settings batches embeddings across concurrent sessions.

The host runs up to ``maxConcurrentSessions`` (host.json) Service Bus trigger invocations at once in
one worker process; passages they ask for while the embedder is busy go to it in one call, and what
is stored is the same as when the invocations come one at a time. The service is built by the app
itself (``function_app.runtime``, from the environment), on the embedded store, with the hashing
embedder counting its calls.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from azure.functions.servicebus import ServiceBusMessage
from functions_env import NOW, turn_body

import function_app
from memory_core.adapters.models import hash_embedder
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import Scope

USERS = [f"u{n}" for n in range(8)]  # as many sessions as host.json's maxConcurrentSessions
TEXTS = ["I love green tea. I live in Kyoto.", "Actually I prefer coffee now. I have 2 cats."]


@pytest.fixture(autouse=True)
def _app_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The app settings of an embedded deployment with the hashing embedder; a fresh runtime."""
    monkeypatch.setenv("MEMORY_STORE", "sqlite")
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    for name in (
        "ServiceBusConnection__fullyQualifiedNamespace",
        "MEMORY_HISTORY_TABLE_ENDPOINT",
        "MEMORY_LLM_PROVIDER",
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "MEMORY_AUTH_TENANT_ID",
        "MEMORY_AUTH_AUDIENCE",
    ):
        monkeypatch.delenv(name, raising=False)
    function_app.runtime.use(None)  # type: ignore[arg-type]
    yield
    function_app.runtime.use(None)  # type: ignore[arg-type]


@pytest.fixture
def model_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The passages of every call of the embedder the app builds (MEMORY_EMBEDDER=hash, counting)."""
    calls: list[list[str]] = []

    class CountingEmbedder(HashingEmbedder):
        """The hashing embedder; a passage call takes a moment, as a remote model's does, and is recorded."""

        async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
            if texts:
                calls.append(list(texts))
            await asyncio.sleep(0.005)
            return await super().embed_passages(texts)

    monkeypatch.setattr(hash_embedder, "HashingEmbedder", CountingEmbedder)
    return calls


def message(user: str, round_: int) -> ServiceBusMessage:
    turn_id = f"turn-{user}-{round_}"
    text = f"{TEXTS[round_]} My code is {user}-{round_}."
    body = turn_body(turn_id, text, user=user, at=NOW.replace(minute=round_))
    return ServiceBusMessage(
        body=json.dumps(body).encode(),
        message_id=turn_id,
        session_id=session_id_for(Scope.of(user, "a1")),
        content_type="application/json",
        delivery_count=1,
        enqueued_time_utc=NOW,
        sequence_number=round_,
        application_properties={},
        user_properties={},
    )


async def _stored() -> dict[str, list[dict[str, Any]]]:
    service = await function_app.runtime.service()
    found = {}
    for user in USERS:
        page = await service.list(Scope.of(user, "a1"))
        # (a read shows the retention at the moment of reading; the stored inputs must agree)
        found[user] = [r.model_dump(mode="json", exclude={"retention_score"}) for r in page.records]
    return found


def test_concurrent_sessions_share_model_calls_and_store_what_one_at_a_time_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_calls: list[list[str]]
) -> None:
    async def together() -> dict[str, list[dict[str, Any]]]:
        try:
            for round_ in (0, 1):  # each session's second turn after its first, as Service Bus hands them out
                await asyncio.gather(*(function_app.ingest_turns(message(user, round_)) for user in USERS))
            return await _stored()
        finally:
            await function_app.runtime.close()

    async def one_at_a_time() -> dict[str, list[dict[str, Any]]]:
        try:
            for round_ in (0, 1):
                for user in USERS:
                    await function_app.ingest_turns(message(user, round_))
            return await _stored()
        finally:
            await function_app.runtime.close()

    monkeypatch.setenv("MEMORY_SQLITE_PATH", str(tmp_path / "together.db"))
    batched = asyncio.run(together())
    calls_together = list(model_calls)
    model_calls.clear()
    monkeypatch.setenv("MEMORY_SQLITE_PATH", str(tmp_path / "alone.db"))
    alone = asyncio.run(one_at_a_time())

    assert batched == alone
    assert all(len(records) >= 3 for records in batched.values())
    assert sorted(t for c in calls_together for t in c) == sorted(t for c in model_calls for t in c)
    assert len(model_calls) >= 2 * len(USERS)  # one at a time: at least a call per turn
    assert len(calls_together) < len(USERS)  # together: 16 turns in fewer calls than 8

    def sessions(call: list[str]) -> set[str]:
        return {m.group(1) for text in call if (m := re.search(r"My code is (u\d+)-", text))}

    assert max(len(sessions(call)) for call in calls_together) >= 2  # one call held several sessions' passages
