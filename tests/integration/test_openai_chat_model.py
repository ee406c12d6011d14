"""The real ``openai`` client against a local chat-completions server: structured output, retries,
timeouts, Azure Entra ID headers, and the extractor's fallback to rules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
import pytest
from fake_openai_server import FakeOpenAIServer, Reply
from openai import AsyncOpenAI

from memory_core.adapters.models.openai_chat import OpenAIChatModel
from memory_core.adapters.models.openai_clients import AzureOpenAIConnection, CompatibleConnection
from memory_core.adapters.models.openai_embedder import AzureOpenAIEmbedder
from memory_core.domain.messages import MessageRole, Turn, TurnMessage
from memory_core.errors import ConfigurationError, PermanentError, TransientError, ValidationError
from memory_core.ports import ChatModel, Embedder
from memory_core.service.extraction.extractor import MemoryExtractor
from memory_core.service.prompts.consolidation import (
    ConsolidationDecision,
    ShownMemory,
    build_consolidation_system_prompt,
    build_consolidation_user_prompt,
    short_ids,
)
from memory_core.service.prompts.extraction import RECALL_HEADER, ExtractionOutput

R = TypeVar("R")

VALID = {
    "memories": [
        {
            "kind": "fact",
            "memory": "コーヒーが好き",
            "category": "preference",
            "importance": 0.7,
            "confidence": 0.9,
            "expires_at": None,
            "evidence": "コーヒーが好きです。",
        }
    ]
}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def run(factory: Callable[[], Awaitable[R]]) -> R:
    return asyncio.run(_run(factory))


async def _run(factory: Callable[[], Awaitable[R]]) -> R:
    return await factory()


def model_for(server: FakeOpenAIServer, *, timeout: float = 5.0, max_retries: int = 2) -> OpenAIChatModel:
    connection = CompatibleConnection(base_url=server.base_url, timeout=timeout, max_retries=max_retries)
    return OpenAIChatModel.openai_compatible(connection, model="gpt-test")


async def ask(model: OpenAIChatModel, schema: type[Any] = ExtractionOutput) -> Any:
    try:
        return await model.complete_json(system="sys", user="usr", schema=schema)
    finally:
        await model.close()


# --------------------------------------------------------------------------------------------
# OpenAIChatModel on the wire
# --------------------------------------------------------------------------------------------


def test_valid_answer_and_the_request_on_the_wire(server: FakeOpenAIServer) -> None:
    server.script(Reply.json(VALID))
    model = model_for(server)
    assert isinstance(model, ChatModel)
    answer = run(lambda: ask(model))
    assert isinstance(answer, ExtractionOutput)
    assert answer.memories[0].memory == "コーヒーが好き"

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "gpt-test"
    assert "temperature" not in request.body  # sampling parameters only when asked for
    assert "max_completion_tokens" not in request.body
    assert request.messages() == [{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}]
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["name"] == "ExtractionOutput"
    inner = response_format["json_schema"]["schema"]["$defs"]["ExtractedMemory"]
    assert inner["additionalProperties"] is False
    assert set(inner["required"]) == set(inner["properties"])


def test_invalid_json_is_a_validation_error_without_transport_retry(server: FakeOpenAIServer) -> None:
    server.script(Reply.text("I think the user likes coffee"))
    with pytest.raises(ValidationError) as info:
        run(lambda: ask(model_for(server)))
    assert info.value.field == "answer" and "not valid JSON" in info.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
        (b"<html><body>Please sign in</body></html>", "application/json"),  # a gateway that lies
        (b'{"id": "x", "choices": [', "application/json"),  # cut off
        (b'{"unexpected": true}', "application/json"),  # JSON, but no completion
    ],
)
def test_a_200_that_is_no_completion_is_an_invalid_answer(server: FakeOpenAIServer, body: bytes, content_type: str) -> None:
    server.script(Reply.page(body, content_type=content_type))
    with pytest.raises(ValidationError) as info:  # the rules take over, the turn is not retried
        run(lambda: ask(model_for(server)))
    assert info.value.field == "answer"
    assert len(server.requests) == 1


def test_schema_violation_names_the_field(server: FakeOpenAIServer) -> None:
    bad = {"memories": [{**VALID["memories"][0], "importance": 1.7}]}
    server.script(Reply.json(bad))
    with pytest.raises(ValidationError) as info:
        run(lambda: ask(model_for(server)))
    assert info.value.field == "answer.memories.0.importance"


def test_truncated_answer_is_invalid(server: FakeOpenAIServer) -> None:
    server.script(Reply.text('{"memories": [', finish_reason="length"))
    with pytest.raises(ValidationError, match="cut off"):
        run(lambda: ask(model_for(server)))


def test_refusal_is_permanent(server: FakeOpenAIServer) -> None:
    server.script(Reply.refused("I can't help with that."))
    with pytest.raises(PermanentError, match="refused"):
        run(lambda: ask(model_for(server)))


def test_429_is_retried_after_retry_after(server: FakeOpenAIServer) -> None:
    server.script(Reply.status(429, retry_after="0.4"), Reply.json(VALID))
    started = time.monotonic()
    answer = run(lambda: ask(model_for(server)))
    elapsed = time.monotonic() - started
    assert answer.memories[0].memory == "コーヒーが好き"
    assert len(server.requests) == 2
    assert elapsed >= 0.4  # the client waited as told


def test_persistent_429_becomes_transient_after_bounded_retries(server: FakeOpenAIServer) -> None:
    server.script(*[Reply.status(429, retry_after="0.01")] * 5)
    with pytest.raises(TransientError, match="429"):
        run(lambda: ask(model_for(server, max_retries=2)))
    assert len(server.requests) == 3  # one attempt plus two retries, no more
    assert server.remaining == 2


def test_500_is_retried_then_transient(server: FakeOpenAIServer) -> None:
    server.script(Reply.status(500, retry_after="0.01"), Reply.json(VALID))
    assert run(lambda: ask(model_for(server))).memories
    server.script(*[Reply.status(503, retry_after="0.01")] * 2)
    with pytest.raises(TransientError, match="503"):
        run(lambda: ask(model_for(server, max_retries=1)))
    assert len(server.requests) == 4


def test_slow_answer_times_out_and_is_transient(server: FakeOpenAIServer) -> None:
    server.script(Reply.json(VALID, delay=1.5), Reply.json(VALID, delay=1.5))
    started = time.monotonic()
    with pytest.raises(TransientError, match="timed out"):
        run(lambda: ask(model_for(server, timeout=0.3, max_retries=1)))
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 2


def test_bad_request_is_permanent_and_not_retried(server: FakeOpenAIServer) -> None:
    server.script(Reply.status(400, message="the prompt is too long"))
    with pytest.raises(PermanentError, match="HTTP 400") as info:
        run(lambda: ask(model_for(server)))
    assert not isinstance(info.value, TransientError | ValidationError)
    assert len(server.requests) == 1


def test_unreachable_endpoint_is_transient() -> None:
    with FakeOpenAIServer() as gone:
        base_url = gone.base_url
    model = OpenAIChatModel.openai_compatible(
        CompatibleConnection(base_url=base_url, timeout=1.0, max_retries=0), model="m"
    )
    with pytest.raises(TransientError, match="connect"):
        run(lambda: ask(model))


# --------------------------------------------------------------------------------------------
# Azure flavour: Entra ID token, deployment path, api-version
# --------------------------------------------------------------------------------------------


def test_azure_uses_bearer_token_and_deployment_path(server: FakeOpenAIServer) -> None:
    issued: list[str] = []

    async def token_provider() -> str:
        issued.append("token")
        return "fake-entra-token"

    server.script(Reply.json(VALID))
    model = OpenAIChatModel.azure(
        AzureOpenAIConnection(
            endpoint=server.origin,
            api_version="2024-10-21",
            token_provider=token_provider,
            timeout=5.0,
            max_retries=0,
        ),
        deployment="chat-deploy",
    )
    run(lambda: ask(model))
    (request,) = server.requests
    assert request.path == "/openai/deployments/chat-deploy/chat/completions"
    assert request.query == {"api-version": ["2024-10-21"]}
    assert request.headers["authorization"] == "Bearer fake-entra-token"
    assert "api-key" not in request.headers
    assert issued == ["token"]


def test_close_leaves_a_client_passed_in_open(server: FakeOpenAIServer) -> None:
    async def scenario() -> tuple[bool, bool]:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k")
        borrowed = OpenAIChatModel(client, model="m")
        await borrowed.close()
        still_open = not client.is_closed()
        await client.close()
        owned = model_for(server)
        await owned.close()
        return still_open, owned._client.is_closed()

    assert run(scenario) == (True, True)


# --------------------------------------------------------------------------------------------
# Consolidation schema over the wire (invented ids are well-formed; the consolidator rejects them)
# --------------------------------------------------------------------------------------------


def test_consolidation_answer_with_an_invented_id(server: FakeOpenAIServer) -> None:
    from memory_core.domain.messages import MemoryCandidate

    ids = short_ids(["rec-coffee"])
    shown = [ShownMemory(short_id="m1", memory="コーヒーが好き", category="preference")]
    user = build_consolidation_user_prompt(MemoryCandidate(memory="紅茶が好き", category="preference"), shown)
    server.script(
        Reply.json({"event": "UPDATE", "target_id": "m7", "memory": "紅茶が好き", "reason": "changed"})
    )

    async def scenario() -> ConsolidationDecision:
        model = model_for(server)
        try:
            return await model.complete_json(
                system=build_consolidation_system_prompt(), user=user, schema=ConsolidationDecision
            )
        finally:
            await model.close()

    decision = run(scenario)
    assert decision.event == "UPDATE" and decision.target_id == "m7"
    assert decision.target_id not in ids  # the consolidator's id check has something to reject
    assert server.requests[0].body["response_format"]["json_schema"]["name"] == "ConsolidationDecision"


def test_consolidation_answer_with_a_real_id_instead_of_a_short_one_is_invalid(
    server: FakeOpenAIServer,
) -> None:
    server.script(Reply.json({"event": "DELETE", "target_id": "rec-coffee", "memory": None, "reason": "r"}))
    with pytest.raises(ValidationError) as info:
        run(lambda: ask(model_for(server), ConsolidationDecision))
    assert info.value.field == "answer.target_id"


# --------------------------------------------------------------------------------------------
# The extractor end to end: retries and fallback
# --------------------------------------------------------------------------------------------


def turn(text: str) -> Turn:
    return Turn(
        turn_id="t-42",
        user_id="u1",
        agent_id="travel",
        occurred_at=datetime(2026, 11, 26, 9, 0, tzinfo=UTC),
        messages=[
            TurnMessage(role=MessageRole.USER, text=text),
            TurnMessage(role=MessageRole.ASSISTANT, text="あなたは紅茶が好きですね。"),
        ],
    )


def extract_with(server: FakeOpenAIServer, text: str, **options: Any) -> Any:
    async def scenario() -> Any:
        model = model_for(
            server, timeout=options.pop("timeout", 5.0), max_retries=options.pop("max_retries", 2)
        )
        try:
            return await MemoryExtractor(chat_model=model, **options).extract(turn(text))
        finally:
            await model.close()

    return run(scenario)


def test_extractor_llm_path(server: FakeOpenAIServer) -> None:
    server.script(Reply.json(VALID))
    result = extract_with(server, f"{RECALL_HEADER}\n- 京都に住んでいる\n\nコーヒーが好きです。")
    assert result.path == "llm" and result.fallback_reason is None
    assert [(c.memory, c.source) for c in result.candidates] == [("コーヒーが好き", "llm.gpt-test")]
    sent = server.requests[0].messages()[1]["content"]
    assert "京都に住んでいる" not in sent  # recall text stripped before the model sees it
    assert "コーヒーが好きです。" in sent


def test_extractor_retries_invalid_json_then_uses_the_valid_answer(server: FakeOpenAIServer) -> None:
    server.script(Reply.text("not json"), Reply.json(VALID))
    result = extract_with(server, "コーヒーが好きです。")
    assert result.path == "llm" and result.attempts == 2
    assert (
        "previous answer was rejected: answer: is not valid JSON"
        in server.requests[1].messages()[1]["content"]
    )


def test_extractor_falls_back_to_rules_after_invalid_answers(server: FakeOpenAIServer) -> None:
    server.script(Reply.text("not json"), Reply.json({"memories": [{"kind": "fact"}]}))
    result = extract_with(server, "コーヒーが好きです。")
    assert result.path == "rules" and result.attempts == 2
    assert "invalid answer after 2 attempts" in result.fallback_reason
    assert [(c.memory, c.source) for c in result.candidates] == [("コーヒーが好きです", "rule-fallback")]
    assert len(server.requests) == 2


def test_extractor_survives_throttling_through_client_retries(server: FakeOpenAIServer) -> None:
    server.script(
        Reply.status(429, retry_after="0.05"), Reply.status(429, retry_after="0.05"), Reply.json(VALID)
    )
    result = extract_with(server, "コーヒーが好きです。")
    assert result.path == "llm" and result.attempts == 1
    assert len(server.requests) == 3


def test_extractor_falls_back_when_the_model_stays_unavailable(server: FakeOpenAIServer) -> None:
    server.script(*[Reply.status(429, retry_after="0.01")] * 3)
    result = extract_with(server, "I live in Osaka.", max_retries=2)
    assert result.path == "rules"
    assert result.fallback_reason.startswith("chat model unavailable")
    assert [c.memory for c in result.candidates] == ["I live in Osaka"]


def test_extractor_falls_back_on_timeout(server: FakeOpenAIServer) -> None:
    server.script(Reply.json(VALID, delay=1.0))
    result = extract_with(server, "I live in Osaka.", timeout=0.2, max_retries=0)
    assert result.path == "rules" and "timed out" in result.fallback_reason


def test_extractor_can_raise_transient_errors_for_redelivery(server: FakeOpenAIServer) -> None:
    server.script(Reply.status(500, retry_after="0.01"))
    with pytest.raises(TransientError):
        extract_with(server, "I live in Osaka.", max_retries=0, on_transient="raise")


# --------------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------------


def test_azure_embedder_returns_unit_vectors(server: FakeOpenAIServer) -> None:
    async def token_provider() -> str:
        return "tok"

    server.script(Reply.embeddings([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]]), Reply.embeddings([[1.0, 1.0, 1.0]]))

    async def scenario() -> tuple[np.ndarray, np.ndarray, AzureOpenAIEmbedder]:
        embedder = AzureOpenAIEmbedder.azure(
            AzureOpenAIConnection(
                endpoint=server.origin, api_version="2024-10-21", token_provider=token_provider, max_retries=0
            ),
            deployment="emb",
            dimensions=3,
        )
        try:
            return await embedder.embed_passages(["a", "b"]), await embedder.embed_query("q"), embedder
        finally:
            await embedder.close()

    passages, query, embedder = run(scenario)
    assert isinstance(embedder, Embedder)
    assert embedder.name == "azure-openai-emb-3" and embedder.dimensions == 3
    assert passages.dtype == np.float32 and passages.shape == (2, 3)
    np.testing.assert_allclose(passages, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(query), 1.0, atol=1e-6)
    first = server.requests[0]
    assert first.path == "/openai/deployments/emb/embeddings"
    assert first.body["input"] == ["a", "b"] and first.body["dimensions"] == 3
    assert first.headers["authorization"] == "Bearer tok"


def test_azure_without_a_provider_owns_a_default_credential(server: FakeOpenAIServer) -> None:
    pytest.importorskip("aiohttp", reason="azure.identity.aio needs aiohttp as its transport")
    from azure.identity.aio import DefaultAzureCredential

    async def scenario() -> list[str]:
        connection = AzureOpenAIConnection(endpoint=server.origin, api_version="2024-10-21")
        model = OpenAIChatModel.azure(connection, deployment="d")
        credential = model._credential
        assert isinstance(credential, DefaultAzureCredential)
        closed: list[str] = []
        original = credential.close

        async def spy() -> None:
            closed.append("credential")
            await original()

        credential.close = spy  # type: ignore[method-assign]
        await model.close()
        return closed

    assert run(scenario) == ["credential"]
    assert server.requests == []  # building it asked nothing of the network


def test_azure_without_a_provider_or_transport_is_a_configuration_error(server: FakeOpenAIServer) -> None:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("aiohttp is installed; the credential can be built")
    connection = AzureOpenAIConnection(endpoint=server.origin, api_version="2024-10-21")
    with pytest.raises(ConfigurationError, match="aiohttp"):
        OpenAIChatModel.azure(connection, deployment="d")


def test_a_model_that_rejects_a_parameter_is_asked_again_without_it_and_never_again(
    server: FakeOpenAIServer,
) -> None:
    rejected = Reply(
        status_code=400,
        body={
            "error": {
                "message": "Unsupported value: 'temperature' does not support 0.2 with this model. "
                "Only the default (1) value is supported.",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "unsupported_value",
            }
        },
    )
    server.script(rejected, Reply.json(VALID), Reply.json(VALID))
    model = model_for(server)

    async def twice() -> None:
        for _ in range(2):
            answer = await model.complete_json(system="sys", user="usr", schema=ExtractionOutput, temperature=0.2)
            assert answer.memories[0].memory == "コーヒーが好き"

    run(twice)
    first, retried, later = server.requests
    assert first.body["temperature"] == 0.2
    assert "temperature" not in retried.body and "temperature" not in later.body  # the lesson is kept


def test_any_other_bad_request_is_permanent_and_not_retried(server: FakeOpenAIServer) -> None:
    server.script(Reply.status(400, message="The prompt is too long"))
    model = model_for(server)
    with pytest.raises(PermanentError, match="HTTP 400"):
        run(lambda: model.complete_json(system="sys", user="usr", schema=ExtractionOutput, temperature=0.2))
    assert len(server.requests) == 1


def test_a_server_without_structured_output_is_asked_in_json_mode_and_the_answer_checked_here(
    server: FakeOpenAIServer,
) -> None:
    no_schema = Reply(
        status_code=400,
        body={"error": {"message": "response_format of type 'json_schema' is not supported", "type": "invalid_request_error"}},
    )
    server.script(no_schema, Reply.json(VALID), Reply.text('{"memories": "not a list"}'))
    model = model_for(server)

    async def twice() -> None:
        answer = await model.complete_json(system="sys", user="usr", schema=ExtractionOutput)
        assert answer.memories[0].memory == "コーヒーが好き"
        with pytest.raises(ValidationError):  # validated here, against the same schema
            await model.complete_json(system="sys", user="usr", schema=ExtractionOutput)

    run(twice)
    first, json_mode, later = server.requests
    assert first.body["response_format"]["type"] == "json_schema"
    for request in (json_mode, later):  # the lesson is kept for this model
        assert request.body["response_format"] == {"type": "json_object"}
        system = request.messages()[0]["content"]
        assert system.startswith("sys") and '"memories"' in system  # the schema rides in the prompt
