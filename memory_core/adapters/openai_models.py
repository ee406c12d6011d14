"""Chat and embedding models on the ``openai`` SDK: Azure OpenAI with Microsoft Entra ID, or any
OpenAI-compatible endpoint.

* :class:`OpenAIChatModel` implements :class:`~memory_core.ports.ChatModel`. Structured output goes
  through ``chat.completions.parse`` with the pydantic schema as ``response_format`` (a strict
  ``json_schema``); the answer is validated by the same schema. Transport retries (429 honouring
  ``retry-after``, 408/409, 5xx, timeouts, connection errors) are the SDK's bounded, exponential ones
  (``max_retries``); what still fails afterwards becomes :class:`~memory_core.errors.TransientError`.
  An answer that is not JSON or breaks the schema becomes :class:`~memory_core.errors.ValidationError`;
  other refusals (4xx, content filter) become :class:`~memory_core.errors.PermanentError`.
* :class:`AzureOpenAIEmbedder` implements :class:`~memory_core.ports.Embedder` with an embeddings
  deployment (float32 unit vectors).

Azure clients authenticate with a bearer token provider from ``azure.identity.aio`` (no API keys). Each
object closes only what it created itself: a client passed in stays open.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import openai
import pydantic
from openai import AsyncAzureOpenAI, AsyncOpenAI

from ..errors import ConfigurationError, PermanentError, TransientError, ValidationError

__all__ = [
    "AZURE_OPENAI_SCOPE",
    "AzureOpenAIEmbedder",
    "OpenAIChatModel",
    "azure_token_provider",
]

logger = logging.getLogger(__name__)

#: The Entra ID scope of Azure OpenAI (Cognitive Services) data-plane calls.
AZURE_OPENAI_SCOPE = "https://cognitiveservices.azure.com/.default"

T = TypeVar("T", bound=pydantic.BaseModel)
TokenProvider = Callable[[], Awaitable[str]]

_TRANSIENT_STATUS = frozenset({408, 409, 429})


def azure_token_provider(client_id: str | None = None) -> tuple[TokenProvider, Any]:
    """A bearer token provider for Azure OpenAI from ``DefaultAzureCredential`` (async).

    Args:
        client_id: Client id of a user-assigned managed identity; ``None`` or empty for the default.

    Returns:
        ``(provider, credential)``; whoever created them closes ``credential`` (``await
        credential.close()``).
    """
    from azure.identity.aio import DefaultAzureCredential, get_bearer_token_provider

    try:
        credential = DefaultAzureCredential(managed_identity_client_id=client_id or None)
    except ImportError as exc:  # azure-core's async transport needs aiohttp
        raise ConfigurationError(
            f"Microsoft Entra ID for Azure OpenAI needs an async HTTP transport for azure-identity: {exc}"
        ) from exc
    return get_bearer_token_provider(credential, AZURE_OPENAI_SCOPE), credential


def _azure_client(
    endpoint: str,
    deployment: str,
    api_version: str,
    token_provider: TokenProvider | None,
    client_id: str | None,
    timeout: float,
    max_retries: int,
) -> tuple[AsyncAzureOpenAI, Any]:
    """An Azure OpenAI client with Entra ID tokens, and the credential it created (``None`` if given a provider)."""
    credential: Any = None
    if token_provider is None:
        token_provider, credential = azure_token_provider(client_id)
    client = AsyncAzureOpenAI(
        azure_endpoint=endpoint,
        azure_deployment=deployment,
        api_version=api_version,
        azure_ad_token_provider=token_provider,
        timeout=timeout,
        max_retries=max_retries,
    )
    return client, credential


def _translate(exc: openai.OpenAIError, what: str) -> Exception:
    """The project error for an SDK error raised after the SDK's own retries."""
    if isinstance(exc, openai.APITimeoutError):
        return TransientError(f"{what} timed out (after retries)")
    if isinstance(exc, openai.APIConnectionError):
        return TransientError(f"{what} could not connect: {exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in _TRANSIENT_STATUS or status >= 500:
            return TransientError(f"{what} failed with HTTP {status} (after retries): {exc.message}")
        return PermanentError(f"{what} failed with HTTP {status}: {exc.message}")
    return PermanentError(f"{what} failed: {exc}")


def _invalid_answer(exc: pydantic.ValidationError) -> ValidationError:
    errors = exc.errors()
    if not errors:
        return ValidationError("answer", "does not match the schema")
    first = errors[0]
    location = ".".join(str(part) for part in first.get("loc", ())) or "answer"
    if first.get("type") == "json_invalid":
        return ValidationError("answer", "is not valid JSON")
    return ValidationError(f"answer.{location}" if location != "answer" else location, first.get("msg", ""))


class OpenAIChatModel:
    """:class:`~memory_core.ports.ChatModel` on an ``openai`` async client.

    Prefer the constructors :meth:`azure` and :meth:`openai_compatible`.

    Args:
        client: An ``AsyncOpenAI`` or ``AsyncAzureOpenAI`` client.
        model: Model name, or the deployment name on Azure.
        owns_client: Close ``client`` in :meth:`close` (only for clients this object created).
        credential: An async credential to close in :meth:`close` (one this object created).
        max_completion_tokens: Upper bound of the answer's length; ``None`` (default) sends none, which
            every API version accepts.

    Optional parameters (``temperature``, ``max_completion_tokens``) are sent only when asked for. A
    model that rejects one (HTTP 400 naming it, as reasoning models do with ``temperature``) is asked
    again once without it, and the parameter is not sent to that model again by this object. A server
    that does not take structured output (``response_format`` of type ``json_schema``, which many local
    servers lack) is asked again in JSON mode with the schema in the system prompt, the answer validated
    here; this object then uses JSON mode for that model from then on.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        model: str,
        owns_client: bool = False,
        credential: Any = None,
        max_completion_tokens: int | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("a chat model or deployment name is required")
        self._client = client
        self._model = model
        self._owns_client = owns_client
        self._credential = credential
        self._max_completion_tokens = max_completion_tokens
        #: Optional parameters this model rejected; never sent again (for the life of this object).
        self._rejected: set[str] = set()
        #: Whether the server takes ``json_schema`` structured output (until it says it does not).
        self._structured = True

    @classmethod
    def azure(
        cls,
        *,
        endpoint: str,
        deployment: str,
        api_version: str,
        token_provider: TokenProvider | None = None,
        client_id: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
    ) -> OpenAIChatModel:
        """A chat model on an Azure OpenAI deployment with Microsoft Entra ID tokens.

        Args:
            endpoint: ``https://NAME.openai.azure.com`` (``AZURE_OPENAI_ENDPOINT``).
            deployment: The chat deployment (``AZURE_OPENAI_CHAT_DEPLOYMENT``).
            api_version: Data-plane API version (``AZURE_OPENAI_API_VERSION``).
            token_provider: Async callable returning a bearer token; when ``None`` one is made from
                ``DefaultAzureCredential`` (with ``client_id``) and closed with this object.
            client_id: User-assigned managed identity (``AZURE_CLIENT_ID``), when no provider is given.
            timeout: Seconds per HTTP attempt.
            max_retries: Transport retries after the first attempt.
        """
        if not endpoint or not deployment:
            raise ConfigurationError("Azure OpenAI needs an endpoint and a chat deployment")
        client, credential = _azure_client(
            endpoint, deployment, api_version, token_provider, client_id, timeout, max_retries
        )
        return cls(client, model=deployment, owns_client=True, credential=credential)

    @classmethod
    def openai_compatible(
        cls,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
    ) -> OpenAIChatModel:
        """A chat model on any OpenAI-compatible endpoint (``.../v1``).

        Args:
            base_url: The API root, for example ``http://localhost:8000/v1``.
            model: Model name.
            api_key: Bearer key if the endpoint wants one; endpoints without authentication get a
                placeholder.
            timeout: Seconds per HTTP attempt.
            max_retries: Transport retries after the first attempt.
        """
        client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=max_retries
        )
        return cls(client, model=model, owns_client=True)

    @property
    def name(self) -> str:
        """The model or deployment name."""
        return self._model

    async def complete_json(
        self, *, system: str, user: str, schema: type[T], temperature: float | None = None
    ) -> T:
        """Ask once (plus the SDK's transport retries, and once more without an optional parameter the
        model rejects) for JSON validated into ``schema``.

        Args:
            system: The system prompt.
            user: The user prompt.
            schema: The pydantic model of the answer (sent as a JSON schema).
            temperature: Sampling temperature; ``None`` (default) sends none (the model's default).

        Raises:
            TransientError: Timeouts, throttling, 5xx and connection failures that outlived the retries.
            ValidationError: The answer is not JSON, breaks the schema, is empty or was cut off.
            PermanentError: Any other refusal (4xx, content filter, refusal message).
        """
        optional: dict[str, Any] = {}
        if temperature is not None:
            optional["temperature"] = temperature
        if self._max_completion_tokens is not None:
            optional["max_completion_tokens"] = self._max_completion_tokens
        try:
            if not self._structured:
                return await self._json_mode(system, user, schema, optional)
            try:
                completion = await self._parse(system, user, schema, optional)
            except openai.BadRequestError as exc:
                if _rejects_structured_output(exc):
                    logger.warning("model %s takes no json_schema output; using JSON mode", self._model)
                    self._structured = False
                    return await self._json_mode(system, user, schema, optional)
                rejected = _rejected_parameter(exc, optional)
                if rejected is None:
                    raise
                logger.warning("model %s rejects %r; asking again without it", self._model, rejected)
                self._rejected.add(rejected)
                completion = await self._parse(system, user, schema, optional)
        except pydantic.ValidationError as exc:
            raise _invalid_answer(exc) from None
        except openai.LengthFinishReasonError:
            raise ValidationError("answer", "was cut off at the token limit") from None
        except openai.ContentFilterFinishReasonError:
            raise PermanentError("the answer was stopped by the content filter") from None
        except openai.OpenAIError as exc:
            raise _translate(exc, "chat completion") from exc
        if not completion.choices:
            raise ValidationError("answer", "has no choices")
        message = completion.choices[0].message
        if message.refusal:
            raise PermanentError(f"the model refused: {message.refusal[:200]}")
        if message.parsed is None:
            raise ValidationError("answer", "is empty")
        parsed: T = message.parsed
        return parsed

    async def _json_mode(self, system: str, user: str, schema: type[T], optional: dict[str, Any]) -> T:
        """Ask in JSON mode (``response_format`` ``json_object``) with the schema in the system prompt,
        and validate the answer here."""
        instructions = (
            f"{system}\n\nAnswer with one JSON object and nothing else, matching this JSON schema:\n"
            f"{json.dumps(schema.model_json_schema(), ensure_ascii=False)}"
        )
        completion = await self._client.chat.completions.create(
            model=self._model,
            messages=[{"role": "system", "content": instructions}, {"role": "user", "content": user}],
            response_format={"type": "json_object"},
            **{name: value for name, value in optional.items() if name not in self._rejected},
        )
        if not completion.choices:
            raise ValidationError("answer", "has no choices")
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise ValidationError("answer", "was cut off at the token limit")
        content = choice.message.content
        if not content or not content.strip():
            raise ValidationError("answer", "is empty")
        return schema.model_validate_json(content)

    async def _parse(self, system: str, user: str, schema: type[T], optional: dict[str, Any]) -> Any:
        return await self._client.chat.completions.parse(
            model=self._model,
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            response_format=schema,
            **{name: value for name, value in optional.items() if name not in self._rejected},
        )

    async def close(self) -> None:
        """Close the client and credential this object created (never ones passed in)."""
        if self._owns_client:
            await self._client.close()
        if self._credential is not None:
            await self._credential.close()


def _error_detail(exc: openai.BadRequestError) -> tuple[str | None, str]:
    """The ``param`` and the message of an OpenAI-format error (whether or not the SDK unwrapped ``error``)."""
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error")
    error: dict[str, Any] = inner if isinstance(inner, dict) else body
    param = getattr(exc, "param", None) or error.get("param")
    return (param if isinstance(param, str) else None), str(error.get("message") or exc.message or "")


def _rejects_structured_output(exc: openai.BadRequestError) -> bool:
    """A 400 that says the server does not take ``response_format`` / ``json_schema``."""
    param, message = _error_detail(exc)
    return param == "response_format" or bool(re.search(r"response_format|json_schema", message))


def _rejected_parameter(exc: openai.BadRequestError, sent: dict[str, Any]) -> str | None:
    """The optional parameter a 400 says the model does not take (``param``, or its name in the
    message), if it was sent; ``None`` for any other bad request."""
    param, message = _error_detail(exc)
    if param is not None and param in sent:
        return param
    named = [name for name in sent if f"'{name}'" in message or f"`{name}`" in message or f'"{name}"' in message]
    return named[0] if len(named) == 1 and re.search(r"unsupported|not support", message, re.IGNORECASE) else None


class AzureOpenAIEmbedder:
    """:class:`~memory_core.ports.Embedder` on an Azure OpenAI (or OpenAI-compatible) embeddings model.

    Queries and passages are embedded the same way. Vectors are re-normalized to unit length.

    Args:
        client: An ``AsyncOpenAI`` or ``AsyncAzureOpenAI`` client.
        model: Model name, or the embeddings deployment on Azure.
        dimensions: Vector size; sent as ``dimensions`` (text-embedding-3 models can shorten vectors).
        owns_client: Close ``client`` in :meth:`close`.
        credential: An async credential to close in :meth:`close`.
        batch_size: Texts per request.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        model: str,
        dimensions: int,
        owns_client: bool = False,
        credential: Any = None,
        batch_size: int = 64,
    ) -> None:
        if dimensions < 1:
            raise ConfigurationError("embedding dimensions must be positive")
        self._client = client
        self._model = model
        self._dimensions = dimensions
        self._owns_client = owns_client
        self._credential = credential
        self._batch_size = max(1, batch_size)

    @classmethod
    def azure(
        cls,
        *,
        endpoint: str,
        deployment: str,
        api_version: str,
        dimensions: int = 1536,
        token_provider: TokenProvider | None = None,
        client_id: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
    ) -> AzureOpenAIEmbedder:
        """An embedder on an Azure OpenAI embeddings deployment with Microsoft Entra ID tokens."""
        if not endpoint or not deployment:
            raise ConfigurationError("Azure OpenAI embeddings need an endpoint and a deployment")
        client, credential = _azure_client(
            endpoint, deployment, api_version, token_provider, client_id, timeout, max_retries
        )
        return cls(client, model=deployment, dimensions=dimensions, owns_client=True, credential=credential)

    @property
    def name(self) -> str:
        return f"azure-openai-{self._model}-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed_query(self, text: str) -> np.ndarray:
        """One unit vector for a query."""
        vectors = await self.embed_passages([text])
        vector: np.ndarray = vectors[0]
        return vector

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for ``texts`` (``(len(texts), dimensions)``, float32)."""
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [t if t.strip() else " " for t in texts[start : start + self._batch_size]]
            try:
                response = await self._client.embeddings.create(
                    model=self._model, input=batch, dimensions=self._dimensions
                )
            except openai.OpenAIError as exc:
                raise _translate(exc, "embedding") from exc
            items = sorted(response.data, key=lambda item: item.index)
            if len(items) != len(batch):
                raise PermanentError(f"embedding returned {len(items)} vectors for {len(batch)} texts")
            for item in items:
                vector = np.asarray(item.embedding, dtype=np.float32)
                if vector.shape != (self._dimensions,):
                    raise PermanentError(
                        f"embedding has {vector.shape[0]} dimensions; expected {self._dimensions}"
                    )
                norm = float(np.linalg.norm(vector))
                rows.append(vector / norm if norm > 0 else vector)
        matrix: np.ndarray = np.stack(rows).astype(np.float32, copy=False)
        return matrix

    async def close(self) -> None:
        """Close the client and credential this object created (never ones passed in)."""
        if self._owns_client:
            await self._client.close()
        if self._credential is not None:
            await self._credential.close()
