"""Chat and embedding models on the ``openai`` SDK: Azure OpenAI with Microsoft Entra ID, or any
OpenAI-compatible endpoint.

* :class:`OpenAIChatModel` implements :class:`~memory_core.ports.ChatModel`. Structured output goes
  through ``chat.completions.parse`` with the pydantic schema as ``response_format`` (a strict
  ``json_schema``); the answer is validated by the same schema. Transport retries (429 honouring
  ``retry-after``, 408/409, 5xx, timeouts, connection errors) are the SDK's bounded, exponential ones
  (``max_retries``); what still fails afterwards becomes :class:`~memory_core.errors.TransientError`.
  An answer that is not JSON or breaks the schema becomes :class:`~memory_core.errors.ValidationError`;
  other refusals (4xx, content filter) become :class:`~memory_core.errors.PermanentError`.
* :class:`OpenAIEmbedder` (formerly ``AzureOpenAIEmbedder``, still importable) implements
  :class:`~memory_core.ports.Embedder` on an Azure OpenAI deployment, OpenAI or an OpenAI-compatible
  server (float32 unit vectors).

Azure clients authenticate with a bearer token provider from ``azure.identity.aio`` (no API keys), on
either Azure endpoint: the versioned one (``/openai/deployments/NAME/...?api-version=...``) or the
``/openai/v1`` one (API version ``v1``, or an endpoint that ends in ``/openai/v1``). Each object closes
only what it created itself: a client passed in stays open. Each chat model counts its calls, tokens
and seconds (:attr:`OpenAIChatModel.usage`).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import openai
import pydantic
from openai import AsyncAzureOpenAI, AsyncOpenAI

from memory_core.errors import ConfigurationError, PermanentError, TransientError, ValidationError

__all__ = [
    "AZURE_OPENAI_SCOPE",
    "AZURE_OPENAI_V1",
    "AzureOpenAIEmbedder",
    "ModelUsage",
    "OpenAIChatModel",
    "OpenAIEmbedder",
    "azure_openai_client",
    "azure_token_provider",
    "azure_v1_base_url",
]

logger = logging.getLogger(__name__)

#: The Entra ID scope of Azure OpenAI (Cognitive Services) data-plane calls.
AZURE_OPENAI_SCOPE = "https://cognitiveservices.azure.com/.default"

#: The ``AZURE_OPENAI_API_VERSION`` that selects Azure OpenAI's version-less ``/openai/v1`` endpoint.
AZURE_OPENAI_V1 = "v1"

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


def azure_v1_base_url(endpoint: str, api_version: str) -> str | None:
    """The ``/openai/v1/`` base URL of an Azure OpenAI resource, when the endpoint or the API version asks
    for it (``None``: the versioned endpoint).

    ``https://NAME.openai.azure.com`` with version ``v1`` and ``https://NAME.openai.azure.com/openai/v1``
    with any version both give ``https://NAME.openai.azure.com/openai/v1/``.
    """
    root = endpoint.strip().rstrip("/")
    if root.endswith("/openai/v1"):
        return f"{root}/"
    if api_version.strip().lower() != AZURE_OPENAI_V1:
        return None
    if root.endswith("/openai"):
        root = root[: -len("/openai")]
    return f"{root}/openai/v1/"


def _azure_client(
    endpoint: str,
    deployment: str,
    api_version: str,
    token_provider: TokenProvider | None,
    client_id: str | None,
    timeout: float,
    max_retries: int,
    headers: Mapping[str, str] | None = None,
) -> tuple[AsyncOpenAI, Any]:
    """An Azure OpenAI client with Entra ID tokens, and the credential it created (``None`` if given a provider).

    On the ``/openai/v1`` endpoint this is a plain ``AsyncOpenAI`` client whose key is the token provider
    (the SDK sends it as the bearer token); otherwise an ``AsyncAzureOpenAI`` client on the deployment.
    """
    credential: Any = None
    if token_provider is None:
        token_provider, credential = azure_token_provider(client_id)
    v1 = azure_v1_base_url(endpoint, api_version)
    client: AsyncOpenAI
    if v1 is not None:
        client = AsyncOpenAI(
            base_url=v1,
            api_key=token_provider,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=dict(headers or {}) or None,
        )
    else:
        client = AsyncAzureOpenAI(
            azure_endpoint=endpoint,
            azure_deployment=deployment,
            api_version=api_version,
            azure_ad_token_provider=token_provider,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=dict(headers or {}) or None,
        )
    return client, credential


def _compatible_client(
    base_url: str, api_key: str | None, timeout: float, max_retries: int, headers: Mapping[str, str] | None
) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` client on ``base_url``; an endpoint without authentication gets a placeholder key
    (the SDK would otherwise read ``OPENAI_API_KEY`` itself)."""
    return AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or "unused",
        timeout=timeout,
        max_retries=max_retries,
        default_headers=dict(headers or {}) or None,
    )


def azure_openai_client(
    *,
    endpoint: str,
    deployment: str,
    api_version: str = AZURE_OPENAI_V1,
    client_id: str | None = None,
    timeout: float = 30.0,
    max_retries: int = 3,
) -> tuple[AsyncOpenAI, Any]:
    """An ``openai`` client on an Azure OpenAI deployment with Microsoft Entra ID (``DefaultAzureCredential``),
    on the ``/openai/v1`` endpoint (``api_version="v1"``) or the versioned one, for code that wants the
    client itself (an agent's own chat model).

    Returns:
        ``(client, credential)``: close both when done.
    """
    return _azure_client(endpoint, deployment, api_version, None, client_id, timeout, max_retries)


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


@dataclass(slots=True)
class ModelUsage:
    """What a chat model has cost so far (this process): requests sent, tokens the server reported,
    and seconds spent in :meth:`OpenAIChatModel.complete_json` (retries included)."""

    calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, completion: Any) -> None:
        """Count one answered request and the tokens its ``usage`` reports (if any)."""
        self.requests += 1
        usage = getattr(completion, "usage", None)
        if usage is not None:
            self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)

    def as_dict(self) -> dict[str, float]:
        return {
            "calls": self.calls,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": self.seconds,
        }


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
    here; this object then uses JSON mode for that model from then on. :attr:`usage` counts calls,
    requests, tokens and seconds.
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
        self.usage = ModelUsage()

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
        headers: Mapping[str, str] | None = None,
    ) -> OpenAIChatModel:
        """A chat model on an Azure OpenAI deployment with Microsoft Entra ID tokens.

        Args:
            endpoint: ``https://NAME.openai.azure.com``, or ``https://NAME.openai.azure.com/openai/v1``
                (``AZURE_OPENAI_ENDPOINT``).
            deployment: The chat deployment (``AZURE_OPENAI_CHAT_DEPLOYMENT``).
            api_version: Data-plane API version (``AZURE_OPENAI_API_VERSION``); ``v1`` for the
                ``/openai/v1`` endpoint.
            token_provider: Async callable returning a bearer token; when ``None`` one is made from
                ``DefaultAzureCredential`` (with ``client_id``) and closed with this object.
            client_id: User-assigned managed identity (``AZURE_CLIENT_ID``), when no provider is given.
            timeout: Seconds per HTTP attempt.
            max_retries: Transport retries after the first attempt.
            headers: Extra HTTP headers on every request (for example a gateway's).
        """
        if not endpoint or not deployment:
            raise ConfigurationError("Azure OpenAI needs an endpoint and a chat deployment")
        client, credential = _azure_client(
            endpoint, deployment, api_version, token_provider, client_id, timeout, max_retries, headers
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
        headers: Mapping[str, str] | None = None,
    ) -> OpenAIChatModel:
        """A chat model on OpenAI or any OpenAI-compatible endpoint (``.../v1``).

        Args:
            base_url: The API root, for example ``https://api.openai.com/v1`` or
                ``http://127.0.0.1:11434/v1``.
            model: Model name.
            api_key: Bearer key if the endpoint wants one; endpoints without authentication get a
                placeholder.
            timeout: Seconds per HTTP attempt.
            max_retries: Transport retries after the first attempt.
            headers: Extra HTTP headers on every request.
        """
        if not base_url or not model:
            raise ConfigurationError("an OpenAI-compatible chat model needs a base URL and a model name")
        client = _compatible_client(base_url, api_key, timeout, max_retries, headers)
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
        started = time.perf_counter()
        self.usage.calls += 1
        try:
            return await self._complete_json(system, user, schema, temperature)
        finally:
            self.usage.seconds += time.perf_counter() - started

    async def _complete_json(self, system: str, user: str, schema: type[T], temperature: float | None) -> T:
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
        self.usage.add(completion)
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
        completion = await self._client.chat.completions.parse(
            model=self._model,
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            response_format=schema,
            **{name: value for name, value in optional.items() if name not in self._rejected},
        )
        self.usage.add(completion)
        return completion

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


class OpenAIEmbedder:
    """:class:`~memory_core.ports.Embedder` on an Azure OpenAI, OpenAI or OpenAI-compatible embeddings model.

    Queries and passages are embedded the same way. Vectors are re-normalized to unit length.

    Args:
        client: An ``AsyncOpenAI`` or ``AsyncAzureOpenAI`` client.
        model: Model name, or the embeddings deployment on Azure.
        dimensions: Vector size. Sent as ``dimensions`` when ``send_dimensions`` (text-embedding-3
            models can shorten vectors); otherwise only checked against what the model returns.
        owns_client: Close ``client`` in :meth:`close`.
        credential: An async credential to close in :meth:`close`.
        batch_size: Texts per request.
        send_dimensions: Ask the model for ``dimensions`` (many compatible servers reject the parameter).
        provider: The first part of :attr:`name` (``azure-openai``, ``openai``, ``compatible``).
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
        send_dimensions: bool = True,
        provider: str = "azure-openai",
    ) -> None:
        if dimensions < 1:
            raise ConfigurationError("embedding dimensions must be positive")
        if not model:
            raise ConfigurationError("an embedding model or deployment name is required")
        self._client = client
        self._model = model
        self._dimensions = dimensions
        self._owns_client = owns_client
        self._credential = credential
        self._batch_size = max(1, batch_size)
        self._send_dimensions = send_dimensions
        self._provider = provider

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
        headers: Mapping[str, str] | None = None,
    ) -> OpenAIEmbedder:
        """An embedder on an Azure OpenAI embeddings deployment with Microsoft Entra ID tokens (either
        endpoint, as for :meth:`OpenAIChatModel.azure`)."""
        if not endpoint or not deployment:
            raise ConfigurationError("Azure OpenAI embeddings need an endpoint and a deployment")
        client, credential = _azure_client(
            endpoint, deployment, api_version, token_provider, client_id, timeout, max_retries, headers
        )
        return cls(client, model=deployment, dimensions=dimensions, owns_client=True, credential=credential)

    @classmethod
    def openai_compatible(
        cls,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        send_dimensions: bool = False,
        provider: str = "compatible",
        timeout: float = 30.0,
        max_retries: int = 3,
        headers: Mapping[str, str] | None = None,
    ) -> OpenAIEmbedder:
        """An embedder on OpenAI or an OpenAI-compatible endpoint (``.../v1/embeddings``).

        Args:
            base_url: The API root.
            model: Model name.
            dimensions: The model's vector size (or the size to ask for, with ``send_dimensions``).
            api_key: Bearer key if the endpoint wants one.
            send_dimensions: Send ``dimensions`` (OpenAI's text-embedding-3 models take it).
            provider: The first part of :attr:`name`.
            timeout: Seconds per HTTP attempt.
            max_retries: Transport retries after the first attempt.
            headers: Extra HTTP headers on every request.
        """
        if not base_url:
            raise ConfigurationError("an OpenAI-compatible embedder needs a base URL")
        client = _compatible_client(base_url, api_key, timeout, max_retries, headers)
        return cls(
            client,
            model=model,
            dimensions=dimensions,
            owns_client=True,
            send_dimensions=send_dimensions,
            provider=provider,
        )

    @property
    def name(self) -> str:
        return f"{self._provider}-{self._model}-{self._dimensions}"

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
                if self._send_dimensions:
                    response = await self._client.embeddings.create(
                        model=self._model, input=batch, dimensions=self._dimensions
                    )
                else:
                    response = await self._client.embeddings.create(model=self._model, input=batch)
            except openai.OpenAIError as exc:
                raise _translate(exc, "embedding") from exc
            items = sorted(response.data, key=lambda item: item.index)
            if len(items) != len(batch):
                raise PermanentError(f"embedding returned {len(items)} vectors for {len(batch)} texts")
            for item in items:
                vector = np.asarray(item.embedding, dtype=np.float32)
                if vector.shape != (self._dimensions,):
                    raise PermanentError(
                        f"embedding model {self._model!r} returned {vector.shape[0]} dimensions; "
                        f"expected {self._dimensions} (MEMORY_EMBEDDING_DIMENSIONS)"
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


#: The former name of :class:`OpenAIEmbedder` (it always took any OpenAI-compatible client).
AzureOpenAIEmbedder = OpenAIEmbedder
