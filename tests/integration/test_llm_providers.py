"""Every chat-model flavour the settings offer, built by ``bootstrap`` and driven through the service.

Extraction and consolidation talk to a local chat-completions server over a real socket with the real
``openai`` client, configured only through environment settings (``MEMORY_LLM_PROVIDER`` and friends):
Azure OpenAI on its deployment endpoint and on ``/openai/v1`` (Microsoft Entra ID tokens), OpenAI with a
key and extra headers, a compatible server without authentication and without ``json_schema`` support,
and a model that rejects ``temperature``. Each memory and decision names the model that made it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest
from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

from memory_core.adapters.models import openai_chat, openai_clients
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.bootstrap import build_chat_model, build_embedder, build_service, load_settings
from memory_core.domain.records import Scope
from memory_core.errors import ConfigurationError, PermanentError
from memory_core.ports import FixedClock

SCOPE = Scope.of("u1", "travel")
TOKEN = "entra-token-for-tests"


class FakeCredential:
    closed = False

    async def close(self) -> None:
        FakeCredential.closed = True


@pytest.fixture()
def entra(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``DefaultAzureCredential`` replaced by a provider of a fixed token (no Azure here)."""

    async def provider() -> str:
        return TOKEN

    FakeCredential.closed = False
    monkeypatch.setattr(
        openai_clients, "azure_token_provider", lambda client_id=None: (provider, FakeCredential())
    )
    yield


@pytest.fixture()
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def turn(turn_id: str, text: str) -> dict[str, Any]:
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": turn_id,
        "user_id": SCOPE.user_id,
        "agent_id": SCOPE.agent_id,
        "occurred_at": datetime(2026, 11, 1, 9, tzinfo=UTC).isoformat(),
        "messages": [{"role": "user", "text": text}, {"role": "assistant", "text": "わかりました。"}],
    }


FACT = {
    "memories": [
        {
            "kind": "fact",
            "memory": "紅茶が好き",
            "category": "preference",
            "importance": 0.8,
            "confidence": 0.9,
            "expires_at": None,
            "evidence": "紅茶が好きです。",
        }
    ]
}
DECISION = {"event": "ADD", "target_id": None, "memory": "紅茶が好き", "reason": "new preference"}


def ingest_one(tmp_path: Path, env: dict[str, str]) -> tuple[str, str]:
    """One turn through a service built from ``env``: the new memory's source and its history reason."""

    async def scenario() -> tuple[str, str]:
        settings = load_settings(
            {"MEMORY_EMBEDDER": "hash", "MEMORY_EPISODES": "false", **env}, sqlite_path=str(tmp_path / "m.db")
        )
        service = build_service(
            settings, clock=FixedClock(datetime(2026, 11, 2, tzinfo=UTC)), embedder=HashingEmbedder()
        )
        try:
            result = await service.process_message(turn("t1", "紅茶が好きです。"))
            assert result.ingest is not None and result.ingest.extraction_path == "llm"
            (step,) = result.ingest.steps
            assert step.path == "llm" and step.decision.after is not None
            (entry,) = await service.history_of(SCOPE, step.decision.memory_id or "")
            return step.decision.after.source, entry.reason
        finally:
            await service.close()

    return asyncio.run(scenario())


def chats(server: FakeOpenAIServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path.endswith("/chat/completions")]


def test_azure_deployment_endpoint_with_entra_id(
    tmp_path: Path, server: FakeOpenAIServer, entra: None
) -> None:
    server.script(Reply.json(FACT), Reply.json(DECISION))
    source, reason = ingest_one(
        tmp_path,
        {
            "AZURE_OPENAI_ENDPOINT": server.origin,
            "AZURE_OPENAI_CHAT_DEPLOYMENT": "chat-mini",
            "AZURE_OPENAI_API_VERSION": "2024-10-21",
        },
    )
    assert source == "llm.chat-mini" and reason.startswith("[llm chat-mini] ")
    requests = chats(server)
    assert len(requests) == 2
    for r in requests:
        assert r.path == "/openai/deployments/chat-mini/chat/completions"
        assert r.query["api-version"] == ["2024-10-21"]
        assert r.headers["authorization"] == f"Bearer {TOKEN}"
        assert "api-key" not in r.headers
        assert "temperature" not in r.body and r.body["response_format"]["type"] == "json_schema"
    assert FakeCredential.closed  # the credential the service created is closed with it


@pytest.mark.parametrize(
    "endpoint_suffix, version", [("", "v1"), ("/openai/v1", "2024-10-21"), ("/openai/v1/", "")]
)
def test_azure_v1_endpoint_with_entra_id(
    tmp_path: Path, server: FakeOpenAIServer, entra: None, endpoint_suffix: str, version: str
) -> None:
    server.script(Reply.json(FACT), Reply.json(DECISION))
    env = {
        "MEMORY_LLM_PROVIDER": "azure",
        "AZURE_OPENAI_ENDPOINT": server.origin + endpoint_suffix,
        "AZURE_OPENAI_CHAT_DEPLOYMENT": "gpt-chat",
    }
    if version:
        env["AZURE_OPENAI_API_VERSION"] = version
    source, reason = ingest_one(tmp_path, env)
    assert source == "llm.gpt-chat" and reason.startswith("[llm gpt-chat] ")
    for r in chats(server):
        assert r.path == "/openai/v1/chat/completions"
        assert "api-version" not in r.query
        assert r.headers["authorization"] == f"Bearer {TOKEN}"
        assert r.body["model"] == "gpt-chat"


def test_openai_with_a_key_and_extra_headers(tmp_path: Path, server: FakeOpenAIServer) -> None:
    server.script(Reply.json(FACT), Reply.json(DECISION))
    source, reason = ingest_one(
        tmp_path,
        {
            "MEMORY_LLM_PROVIDER": "openai",
            "MEMORY_LLM_BASE_URL": server.base_url,  # OpenAI's own root by default
            "MEMORY_LLM_MODEL": "gpt-small",
            "MEMORY_LLM_API_KEY": "sk-test-key",
            "MEMORY_LLM_HEADERS": '{"X-Team": "memory", "OpenAI-Project": "proj_1"}',
        },
    )
    assert source == "llm.gpt-small" and reason.startswith("[llm gpt-small] ")
    for r in chats(server):
        assert r.path == "/v1/chat/completions"
        assert r.headers["authorization"] == "Bearer sk-test-key"
        assert r.headers["x-team"] == "memory" and r.headers["openai-project"] == "proj_1"
        assert r.body["model"] == "gpt-small" and "temperature" not in r.body


def test_compatible_server_without_auth_and_without_json_schema(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    server.script(
        Reply.status(400, message="response_format json_schema is not supported by this server"),
        Reply.json(FACT),
        Reply.json(DECISION),  # JSON mode is kept for this model: no second rejection
    )
    source, reason = ingest_one(
        tmp_path,
        {
            "MEMORY_LLM_PROVIDER": "compatible",
            "MEMORY_LLM_BASE_URL": server.base_url,
            "MEMORY_LLM_MODEL": "qwen3:4b",
        },
    )
    # the source is a token (``llm_source``): the model's name with its ':' made '-'; history keeps it as is
    assert source == "llm.qwen3-4b" and reason.startswith("[llm qwen3:4b] ")
    first, *json_mode = chats(server)
    assert first.body["response_format"]["type"] == "json_schema"
    assert [r.body["response_format"] for r in json_mode] == [{"type": "json_object"}] * 2
    # the schema travels in the system prompt instead
    assert all(
        '"memories"' in r.messages()[0]["content"] or '"event"' in r.messages()[0]["content"]
        for r in json_mode
    )
    assert all(r.headers["authorization"] == "Bearer unused" for r in chats(server))


def test_a_model_that_rejects_temperature_is_never_sent_one(tmp_path: Path, server: FakeOpenAIServer) -> None:
    """Reasoning models answer 400 to ``temperature``; extraction and consolidation send none (the retry
    without a rejected parameter is covered in ``test_openai_chat_model.py``)."""
    server.script(Reply.json(FACT), Reply.json(DECISION))
    ingest_one(
        tmp_path,
        {
            "MEMORY_LLM_PROVIDER": "compatible",
            "MEMORY_LLM_BASE_URL": server.base_url,
            "MEMORY_LLM_MODEL": "o-mini",
        },
    )
    assert all(
        not {"temperature", "top_p", "max_tokens", "max_completion_tokens"} & r.body.keys()
        for r in chats(server)
    )


def test_no_provider_means_rules() -> None:
    assert build_chat_model(load_settings({})) is None
    assert (
        build_chat_model(load_settings({"MEMORY_LLM_PROVIDER": "none", "AZURE_OPENAI_ENDPOINT": "https://x"}))
        is None
    )


@pytest.mark.parametrize(
    "env, message",
    [
        ({"MEMORY_LLM_PROVIDER": "ollama"}, "MEMORY_LLM_PROVIDER must be one of"),
        ({"MEMORY_LLM_PROVIDER": "azure"}, "needs AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_CHAT_DEPLOYMENT"),
        (
            {"MEMORY_LLM_PROVIDER": "openai", "MEMORY_LLM_MODEL": "m"},
            "MEMORY_LLM_PROVIDER=openai needs MEMORY_LLM_API_KEY",
        ),
        ({"MEMORY_LLM_PROVIDER": "openai", "MEMORY_LLM_API_KEY": "k"}, "needs MEMORY_LLM_MODEL"),
        ({"MEMORY_LLM_PROVIDER": "compatible", "MEMORY_LLM_MODEL": "m"}, "needs MEMORY_LLM_BASE_URL"),
        (
            {
                "MEMORY_LLM_PROVIDER": "compatible",
                "MEMORY_LLM_MODEL": "m",
                "MEMORY_LLM_BASE_URL": "localhost:11434",
            },
            "must be an http(s) URL",
        ),
        ({"MEMORY_LLM_HEADERS": "X-Team: memory"}, "MEMORY_LLM_HEADERS is not JSON"),
        ({"MEMORY_LLM_HEADERS": '{"X-Team": 1}'}, "JSON object of header names to strings"),
        ({"MEMORY_LLM_HEADERS": '{"Bad Name": "x"}'}, "invalid header: 'Bad Name'"),
        ({"MEMORY_LLM_TIMEOUT_SECONDS": "0"}, "MEMORY_LLM_TIMEOUT_SECONDS must be positive"),
        (
            {"MEMORY_EMBEDDER": "openai", "MEMORY_LLM_API_KEY": "k"},
            "MEMORY_EMBEDDER=openai needs MEMORY_EMBEDDING_MODEL",
        ),
        (
            {"MEMORY_EMBEDDER": "compatible", "MEMORY_EMBEDDING_MODEL": "e"},
            "MEMORY_EMBEDDER=compatible needs MEMORY_LLM_BASE_URL",
        ),
    ],
)
def test_settings_say_what_is_wrong(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_settings(env)


def test_compatible_embedder_checks_dimensions_and_openai_asks_for_them(server: FakeOpenAIServer) -> None:
    async def scenario() -> None:
        compatible = build_embedder(
            load_settings(
                {
                    "MEMORY_EMBEDDER": "compatible",
                    "MEMORY_LLM_BASE_URL": server.base_url,
                    "MEMORY_EMBEDDING_MODEL": "nomic-embed-text",
                    "MEMORY_EMBEDDING_DIMENSIONS": "3",
                }
            )
        )
        openai_embedder = build_embedder(
            load_settings(
                {
                    "MEMORY_EMBEDDER": "openai",
                    "MEMORY_LLM_BASE_URL": server.base_url,
                    "MEMORY_LLM_API_KEY": "sk-test",
                    "MEMORY_EMBEDDING_MODEL": "text-embedding-3-small",
                    "MEMORY_EMBEDDING_DIMENSIONS": "3",
                }
            )
        )
        try:
            assert compatible.name == "compatible-nomic-embed-text-3"
            assert openai_embedder.name == "openai-text-embedding-3-small-3"
            server.script(Reply.embeddings([[3.0, 0.0, 4.0]]), Reply.embeddings([[0.0, 2.0, 0.0]]))
            assert np.allclose(await compatible.embed_query("紅茶"), [0.6, 0.0, 0.8])
            assert np.allclose(await openai_embedder.embed_query("tea"), [0.0, 1.0, 0.0])
            sent_compatible, sent_openai = server.requests[-2:]
            assert "dimensions" not in sent_compatible.body and sent_openai.body["dimensions"] == 3
            assert sent_openai.headers["authorization"] == "Bearer sk-test"
            server.script(Reply.embeddings([[1.0, 0.0]]))
            with pytest.raises(
                PermanentError, match=r"returned 2 dimensions; expected 3 \(MEMORY_EMBEDDING_DIMENSIONS\)"
            ):
                await compatible.embed_query("x")
        finally:
            await compatible.close()
            await openai_embedder.close()

    asyncio.run(scenario())


def test_usage_counts_calls_requests_and_tokens(server: FakeOpenAIServer) -> None:
    async def scenario() -> None:
        model = build_chat_model(
            load_settings(
                {
                    "MEMORY_LLM_PROVIDER": "compatible",
                    "MEMORY_LLM_BASE_URL": server.base_url,
                    "MEMORY_LLM_MODEL": "m",
                }
            )
        )
        assert isinstance(model, openai_chat.OpenAIChatModel)
        try:
            from memory_core.service.prompts.extraction import ExtractionOutput

            server.script(Reply.status(400, message="response_format is not supported"), Reply.json(FACT))
            await model.complete_json(system="s", user="u", schema=ExtractionOutput)
            assert model.usage.as_dict() == {
                "calls": 1,
                "requests": 1,  # the rejected request produced no completion
                "prompt_tokens": 10,
                "completion_tokens": 10,
                "seconds": pytest.approx(model.usage.seconds),
            }
            assert model.usage.seconds > 0
        finally:
            await model.close()

    asyncio.run(scenario())


def test_local_client_takes_a_chat_model_and_leaves_it_open(tmp_path: Path, server: FakeOpenAIServer) -> None:
    from memory_core.client.local import LocalMemoryClient
    from memory_core.domain.messages import Turn

    async def scenario() -> None:
        connection = openai_clients.CompatibleConnection(base_url=server.base_url)
        model = openai_chat.OpenAIChatModel.openai_compatible(connection, model="mine")
        client = LocalMemoryClient.open(
            sqlite_path=tmp_path / "m.db", embedder=HashingEmbedder(), chat_model=model, episodes=False
        )
        try:
            server.script(Reply.json(FACT), Reply.json(DECISION))
            await client.publish_turn(Turn.model_validate(turn("t1", "紅茶が好きです。")))
            records = (await client.service.list(SCOPE)).records
            assert [(r.memory, r.source) for r in records] == [("紅茶が好き", "llm.mine")]
        finally:
            await client.close()
        server.script(Reply.json({"memories": []}))  # the model still works: the client did not close it
        answer = await model.complete_json(system="s", user="u", schema=_Memories)
        assert answer.memories == []
        await model.close()

    asyncio.run(scenario())


class _Memories(pydantic.BaseModel):
    memories: list[dict[str, Any]]


def test_secrets_stay_out_of_the_settings_repr() -> None:
    settings = load_settings(
        {
            "MEMORY_LLM_PROVIDER": "openai",
            "MEMORY_LLM_MODEL": "m",
            "MEMORY_LLM_API_KEY": "sk-very-secret",
            "MEMORY_API_TOKEN": "token-very-secret-0123",
            "AZURE_SEARCH_API_KEY": "search-very-secret",
        }
    )
    assert "very-secret" not in repr(settings)


def test_a_short_serve_token_is_refused_when_settings_load() -> None:
    with pytest.raises(ConfigurationError, match="MEMORY_API_TOKEN must be at least 16 characters"):
        load_settings({"MEMORY_API_TOKEN": "short"})


def test_a_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "memory_core.adapters.models.openai_chat", None)
    settings = load_settings(
        {
            "MEMORY_LLM_PROVIDER": "compatible",
            "MEMORY_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "MEMORY_LLM_MODEL": "m",
        }
    )
    with pytest.raises(
        ConfigurationError,
        match=r"MEMORY_LLM_PROVIDER=compatible needs the openai package: pip install 'memory-core\[llm\]'",
    ):
        build_chat_model(settings)
