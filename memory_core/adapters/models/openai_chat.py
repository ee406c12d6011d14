"""The chat model on the ``openai`` SDK (Azure OpenAI with Microsoft Entra ID, or any OpenAI-compatible
endpoint): :class:`OpenAIChatModel` implements :class:`~memory_core.ports.ChatModel`.

Structured output goes through ``chat.completions.parse`` with the pydantic schema as
``response_format`` (a strict ``json_schema``); the answer is validated by the same schema. Transport
retries (429 honouring ``retry-after``, 408/409, 5xx, timeouts, connection errors) are the SDK's bounded,
exponential ones (``max_retries``); what still fails afterwards becomes
:class:`~memory_core.errors.TransientError`. An answer that is not JSON or breaks the schema becomes
:class:`~memory_core.errors.ValidationError`; other refusals (4xx, content filter) become
:class:`~memory_core.errors.PermanentError`. Each chat model counts its calls, tokens and seconds
(:attr:`OpenAIChatModel.usage`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
import pydantic
from openai import AsyncOpenAI

from memory_core.adapters.models.openai_clients import (
    AzureOpenAIConnection,
    ClientOwner,
    CompatibleConnection,
)
from memory_core.adapters.models.openai_errors import (
    invalid_answer,
    rejected_parameter,
    rejects_structured_output,
    translate_error,
)
from memory_core.errors import ConfigurationError, PermanentError, ValidationError

__all__ = ["ModelUsage", "OpenAIChatModel"]

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=pydantic.BaseModel)


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


class OpenAIChatModel(ClientOwner):
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
        super().__init__(client, owns_client=owns_client, credential=credential)
        self._model = model
        self._max_completion_tokens = max_completion_tokens
        #: Optional parameters this model rejected; never sent again (for the life of this object).
        self._rejected: set[str] = set()
        #: Whether the server takes ``json_schema`` structured output (until it says it does not).
        self._structured = True
        self.usage = ModelUsage()

    @classmethod
    def azure(cls, connection: AzureOpenAIConnection, *, deployment: str) -> OpenAIChatModel:
        """A chat model on an Azure OpenAI deployment with Microsoft Entra ID tokens.

        Args:
            connection: The resource and how to reach it.
            deployment: The chat deployment (``AZURE_OPENAI_CHAT_DEPLOYMENT``).
        """
        if not connection.endpoint or not deployment:
            raise ConfigurationError("Azure OpenAI needs an endpoint and a chat deployment")
        client, credential = connection.client(deployment)
        return cls(client, model=deployment, owns_client=True, credential=credential)

    @classmethod
    def openai_compatible(cls, connection: CompatibleConnection, *, model: str) -> OpenAIChatModel:
        """A chat model on OpenAI or any OpenAI-compatible endpoint (``.../v1``).

        Args:
            connection: The endpoint and how to reach it.
            model: Model name.
        """
        if not connection.base_url or not model:
            raise ConfigurationError("an OpenAI-compatible chat model needs a base URL and a model name")
        return cls(connection.client(), model=model, owns_client=True)

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
            ValidationError: The answer is not JSON, breaks the schema, is empty or was cut off, or the
                reply is no chat completion at all (a gateway's page with status 200).
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
            return await self._ask(system, user, schema, optional)
        except pydantic.ValidationError as exc:
            raise invalid_answer(exc) from None
        except openai.LengthFinishReasonError:
            raise ValidationError("answer", "was cut off at the token limit") from None
        except openai.ContentFilterFinishReasonError:
            raise PermanentError("the answer was stopped by the content filter") from None
        except openai.OpenAIError as exc:
            raise translate_error(exc, "chat completion") from exc
        except (json.JSONDecodeError, TypeError, AttributeError, KeyError) as exc:
            # A 200 that is no completion (a gateway's HTML page, a body cut off, another API's JSON):
            # an unusable answer like any other, so the rules take over instead of the turn retrying.
            logger.warning("model %s answered something that is not a chat completion: %r", self._model, exc)
            raise ValidationError("answer", f"is not a chat completion ({type(exc).__name__}: {str(exc)[:120]})") from None

    async def _ask(self, system: str, user: str, schema: type[T], optional: dict[str, Any]) -> T:
        """Ask for structured output; on a 400 that refuses it, in JSON mode from now on; on a 400 that
        refuses an optional parameter, once more without it (and never again with it)."""
        if not self._structured:
            return await self._json_mode(system, user, schema, optional)
        try:
            completion = await self._parse(system, user, schema, optional)
        except openai.BadRequestError as exc:
            if rejects_structured_output(exc):
                logger.warning("model %s takes no json_schema output; using JSON mode", self._model)
                self._structured = False
                return await self._json_mode(system, user, schema, optional)
            rejected = rejected_parameter(exc, optional)
            if rejected is None:
                raise
            logger.warning("model %s rejects %r; asking again without it", self._model, rejected)
            self._rejected.add(rejected)
            completion = await self._parse(system, user, schema, optional)
        parsed: T = _parsed_answer(completion)
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


def _parsed_answer(completion: Any) -> Any:
    """The parsed answer of a structured-output completion, or why there is none."""
    if not completion.choices:
        raise ValidationError("answer", "has no choices")
    message = completion.choices[0].message
    if message.refusal:
        raise PermanentError(f"the model refused: {message.refusal[:200]}")
    if message.parsed is None:
        raise ValidationError("answer", "is empty")
    return message.parsed
