"""The HTTP kit of the API, independent of the web framework: requests, responses, query parsing, errors."""

from __future__ import annotations

import json
import logging
import re
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from pydantic import ValidationError as PydanticValidationError

from memory_core.contract.views import ErrorDetail, ErrorResponse, Problem
from memory_core.domain.log_ids import path_ids, redact, redact_path
from memory_core.domain.records import DEFAULT_AGENT_ID, Scope
from memory_core.domain.validation import validate_scope_id, validation_error_of
from memory_core.errors import (
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TransientError,
    UnsupportedError,
    ValidationError,
)

__all__ = [
    "API_HEADERS",
    "JSON_HEADERS",
    "RETRY_AFTER_SECONDS",
    "ApiRequest",
    "ApiResponse",
    "Headers",
    "HttpError",
    "Query",
    "error_response",
    "failure_response",
    "invalid_response",
    "json_body",
    "with_api_headers",
]

logger = logging.getLogger(__name__)

#: Seconds a client is asked to wait after a transient failure (``Retry-After``).
RETRY_AFTER_SECONDS = 5
JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
#: What every API answer carries, on both faces (the embedded server, the Function App): answers hold
#: users' memories, so no cache keeps them, and their type is never sniffed into another one.
API_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_INTEGER = re.compile(r"-?[0-9]{1,19}")
_E = TypeVar("_E", bound=Enum)


class Headers(Mapping[str, str]):
    """Request headers; names are looked up in any case (the last of repeated ones wins).

    Args:
        values: A mapping or ``(name, value)`` pairs.
    """

    def __init__(self, values: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        pairs = values.items() if isinstance(values, Mapping) else values
        self._values = {name.lower(): value for name, value in pairs}

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:  # never print credentials
        return f"Headers({sorted(self._values)})"


@dataclass(frozen=True)
class ApiRequest:
    """One HTTP request, independent of the web framework.

    Attributes:
        method: The HTTP method (any case).
        path: The URL path after the ``/api`` prefix, still percent-encoded (``/memories/search``).
        query: Query parameters (one value each: the embedded server refuses a repeated parameter
            with 400; the Azure Functions host keeps the last one).
        body: The raw request body.
        headers: The request headers (any mapping is turned into :class:`Headers`, so names are
            looked up in any case); ``Authorization`` is what the authenticator reads.
        anonymous: The transport let it in without checking a credential (an open route of a server
            that has one, such as health): without an authenticator, the API shows such a caller
            nothing meant for the token holder.
    """

    method: str
    path: str
    query: Mapping[str, str]
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=Headers, repr=False)
    anonymous: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.headers, Headers):
            object.__setattr__(self, "headers", Headers(self.headers))


@dataclass(frozen=True)
class ApiResponse:
    """One HTTP response: status, a JSON-able body and headers (``Content-Type`` included)."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=lambda: dict(JSON_HEADERS))

    def json_bytes(self) -> bytes:
        """The body serialized as compact UTF-8 JSON."""
        return json.dumps(self.body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
            "utf-8"
        )


class HttpError(Exception):
    """A request the API answers with an error of its own status (400, 404, 405, 413)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = dict(headers or {})


def with_api_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with :data:`API_HEADERS` (which win over any of the same name)."""
    return {**headers, **API_HEADERS}


def error_response(status: int, code: str, message: str, field: str | None = None, **headers: str) -> ApiResponse:
    """The API's error answer: ``{"error": {"code", "message", "field"}}``."""
    body = ErrorResponse(error=ErrorDetail(code=code, message=message, field=field)).model_dump(mode="json")
    del body["error"]["problems"]  # only an invalid request's answer lists problems
    return ApiResponse(status, body, {**JSON_HEADERS, **headers})


def invalid_response(exc: ValidationError) -> ApiResponse:
    """The answer to an invalid request: ``error_response``'s, with every problem in ``problems``."""
    problems = [Problem(field=where, message=what) for where, what in exc.problems]
    detail = ErrorDetail(code="validation_error", message=exc.message, field=exc.field, problems=problems)
    return ApiResponse(422, ErrorResponse(error=detail).model_dump(mode="json"), dict(JSON_HEADERS))


class Query:
    """Typed access to query parameters; every problem is a :class:`ValidationError` naming the parameter."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values

    def text(self, name: str, *, required: bool = False, max_length: int = 256) -> str | None:
        value = self._values.get(name)
        if value is None or value == "":
            if required:
                raise ValidationError(name, "is a required query parameter")
            return None
        if len(value) > max_length:
            raise ValidationError(name, f"is {len(value)} characters; the maximum is {max_length}")
        return value

    def scope_id(self, name: str, *, required: bool = True) -> str | None:
        value = self.text(name, required=required)
        return None if value is None else validate_scope_id(value, name)

    def scope(self) -> Scope:
        """``user_id`` (required) and ``agent_id`` (:data:`DEFAULT_AGENT_ID` when absent)."""
        return Scope.of(self.scope_id("user_id"), self.scope_id("agent_id", required=False) or DEFAULT_AGENT_ID)

    def integer(self, name: str, *, default: int | None, low: int, high: int) -> int | None:
        raw = self.text(name, max_length=20)
        if raw is None:
            return default
        # Strict: ASCII digits with an optional minus; no spaces, "+", "_" or other scripts' digits
        # (which Python's int() would take).
        if not _INTEGER.fullmatch(raw):
            raise ValidationError(name, f"{raw!r} is not an integer (ASCII digits only)")
        value = int(raw)
        if not low <= value <= high:
            raise ValidationError(name, f"must be between {low} and {high}, got {value}")
        return value

    def choice(self, name: str, enum: type[_E]) -> _E | None:
        """One of ``enum``'s values (exactly as written), or ``None`` when absent."""
        raw = self.text(name, max_length=32)
        if raw is None:
            return None
        try:
            return enum(raw)
        except ValueError:
            raise ValidationError(name, f"{raw!r} is not one of {', '.join(repr(e.value) for e in enum)}") from None

    def boolean(self, name: str, *, default: bool) -> bool:
        raw = self.text(name, max_length=8)
        if raw is None:
            return default
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise ValidationError(name, f"{raw!r} is not a boolean (true or false)")


def json_body(request: ApiRequest) -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        HttpError: No body, a body that is not UTF-8 JSON, or JSON that is not an object (400).
    """
    if not request.body:
        raise HttpError(400, "bad_request", "a JSON object body is required", "body")

    def no_constants(token: str) -> Any:
        raise ValueError(f"{token} is not valid JSON")

    try:
        data = json.loads(request.body.decode("utf-8"), parse_constant=no_constants)
    except RecursionError:
        raise HttpError(400, "bad_request", "the body nests JSON too deeply to be read", "body") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise HttpError(400, "bad_request", f"the body is not valid UTF-8 JSON ({exc})", "body") from None
    if not isinstance(data, dict):
        raise HttpError(400, "bad_request", "the body must be a JSON object", "body")
    return data


# ------------------------------------------------------------------------------------------------
# Failures: each kind of exception and the answer it gets
# ------------------------------------------------------------------------------------------------


def _challenge(error: str | None, description: str) -> str:
    """A ``WWW-Authenticate: Bearer`` challenge (RFC 6750), the description reduced to quotable ASCII."""
    if error is None:
        return 'Bearer realm="memory-core"'
    text = "".join(
        c if " " <= c <= "~" and c not in {'"', "\\"} else "'" if c == '"' else " " for c in description
    )
    return f'Bearer realm="memory-core", error="{error}", error_description="{text[:300]}"'


def _logged(text: object, path: str) -> str:
    """``text`` with the ids of the request's path (and any email-shaped word) replaced by tags."""
    return redact(text, *path_ids(path))


def _http_error(exc: HttpError, method: str, path: str) -> ApiResponse:
    return error_response(exc.status, exc.code, exc.message, exc.field, **exc.headers)


def _unauthorized(exc: AuthenticationError, method: str, path: str) -> ApiResponse:
    logger.info("%s %s: not authenticated: %s", method, redact_path(path), _logged(exc, path))
    return error_response(401, "unauthorized", str(exc), None, **{"WWW-Authenticate": _challenge(exc.error, str(exc))})


def _forbidden(exc: ForbiddenError, method: str, path: str) -> ApiResponse:
    logger.info("%s %s: forbidden: %s", method, redact_path(path), _logged(exc, path))
    challenge = _challenge("insufficient_scope", str(exc))
    return error_response(403, "forbidden", str(exc), None, **{"WWW-Authenticate": challenge})


def _invalid(exc: ValidationError, method: str, path: str) -> ApiResponse:
    return invalid_response(exc)


def _invalid_model(exc: PydanticValidationError, method: str, path: str) -> ApiResponse:
    return _invalid(validation_error_of(exc), method, path)


def _unavailable(exc: TransientError, method: str, path: str) -> ApiResponse:
    logger.warning("%s %s: transient failure: %s", method, redact_path(path), _logged(exc, path))
    return error_response(503, "unavailable", str(exc), None, **{"Retry-After": str(RETRY_AFTER_SECONDS)})


def _misconfigured(exc: ConfigurationError, method: str, path: str) -> ApiResponse:
    logger.error("%s %s: configuration error: %s", method, redact_path(path), _logged(exc, path))
    return error_response(500, "configuration_error", str(exc))


def _plain(status: int, code: str) -> Callable[[Exception, str, str], ApiResponse]:
    def answer(exc: Exception, method: str, path: str) -> ApiResponse:
        return error_response(status, code, str(exc))

    return answer


#: Each kind of failure and its answer; the first that ``isinstance`` matches wins (subclasses first).
_FAILURES: tuple[tuple[type[Exception], Callable[[Any, str, str], ApiResponse]], ...] = (
    (HttpError, _http_error),
    (AuthenticationError, _unauthorized),
    (ForbiddenError, _forbidden),
    (ValidationError, _invalid),
    (PydanticValidationError, _invalid_model),
    (NotFoundError, _plain(404, "not_found")),
    (UnsupportedError, _plain(501, "not_supported")),
    (ConflictError, _plain(409, "conflict")),
    (PermanentError, _plain(400, "bad_request")),
    (TransientError, _unavailable),
    (ConfigurationError, _misconfigured),
)


def failure_response(exc: Exception, method: str, path: str) -> ApiResponse:
    """The JSON error answer to a request that raised ``exc`` (call it while handling ``exc``).

    Anything :data:`_FAILURES` does not name is a bug: logged with its traceback, answered 500.
    """
    for kind, answer in _FAILURES:
        if isinstance(exc, kind):
            return answer(exc, method, path)
    logger.error("%s %s failed\n%s", method, redact_path(path), _logged(traceback.format_exc(), path))
    return error_response(500, "internal_error", "the request failed unexpectedly; see the server log")
