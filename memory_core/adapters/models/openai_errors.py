"""What the ``openai`` SDK's errors and answers mean as the project's errors."""

from __future__ import annotations

import re
from typing import Any

import openai
import pydantic

from memory_core.errors import PermanentError, TransientError, ValidationError

__all__ = [
    "invalid_answer",
    "rejected_parameter",
    "rejects_structured_output",
    "translate_error",
]

#: Statuses that the SDK retries and that may succeed later (timeout, conflict, throttling).
_TRANSIENT_STATUS = frozenset({408, 409, 429})


def translate_error(exc: openai.OpenAIError, what: str) -> Exception:
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


def invalid_answer(exc: pydantic.ValidationError) -> ValidationError:
    errors = exc.errors()
    if not errors:
        return ValidationError("answer", "does not match the schema")
    first = errors[0]
    location = ".".join(str(part) for part in first.get("loc", ())) or "answer"
    if first.get("type") == "json_invalid":
        return ValidationError("answer", "is not valid JSON")
    return ValidationError(f"answer.{location}" if location != "answer" else location, first.get("msg", ""))


def _error_detail(exc: openai.BadRequestError) -> tuple[str | None, str]:
    """The ``param`` and the message of an OpenAI-format error (whether or not the SDK unwrapped ``error``)."""
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error")
    error: dict[str, Any] = inner if isinstance(inner, dict) else body
    param = getattr(exc, "param", None) or error.get("param")
    return (param if isinstance(param, str) else None), str(error.get("message") or exc.message or "")


def rejects_structured_output(exc: openai.BadRequestError) -> bool:
    """A 400 that says the server does not take ``response_format`` / ``json_schema``."""
    param, message = _error_detail(exc)
    return param == "response_format" or bool(re.search(r"response_format|json_schema", message))


def rejected_parameter(exc: openai.BadRequestError, sent: dict[str, Any]) -> str | None:
    """The optional parameter a 400 says the model does not take (``param``, or its name in the
    message), if it was sent; ``None`` for any other bad request."""
    param, message = _error_detail(exc)
    if param is not None and param in sent:
        return param
    named = [name for name in sent if f"'{name}'" in message or f"`{name}`" in message or f'"{name}"' in message]
    return named[0] if len(named) == 1 and re.search(r"unsupported|not support", message, re.IGNORECASE) else None
