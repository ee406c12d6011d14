"""A capturing ``azure-core`` transport: records every request and answers from a script.

Tests hand an instance to the Azure SDK clients (``transport=...``). Each request is recorded as a
:class:`Captured` (method, path, query, headers, parsed JSON body) and answered by the next scripted
:class:`Scripted` response (or raises the next scripted exception). ``sleep`` is recorded instead of
slept, so retry and back-off paths run instantly and their delays can be asserted.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from azure.core.pipeline.transport import AsyncHttpTransport
from azure.core.rest import HttpRequest
from azure.core.rest._http_response_impl_async import AsyncHttpResponseImpl
from azure.core.utils import CaseInsensitiveDict

__all__ = ["Captured", "CapturingTransport", "Scripted", "json_response"]


@dataclass(frozen=True)
class Captured:
    """One request as it left the SDK pipeline."""

    method: str
    url: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any

    @property
    def api_version(self) -> str | None:
        values = self.query.get("api-version")
        return values[0] if values else None


@dataclass
class Scripted:
    """A canned response: status, JSON body (or raw bytes) and headers."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int = 200, body: Any = None, **headers: str) -> Scripted:
    """A scripted JSON response (header names use ``_`` for ``-``)."""
    return Scripted(status, body, {k.replace("_", "-"): v for k, v in headers.items()})


class _Response(AsyncHttpResponseImpl):
    def __init__(self, request: HttpRequest, scripted: Scripted) -> None:
        raw = scripted.body
        content = raw if isinstance(raw, bytes) else (b"" if raw is None else json.dumps(raw).encode())
        headers = CaseInsensitiveDict(scripted.headers)
        if content and "Content-Type" not in headers:
            headers["Content-Type"] = "application/json; charset=utf-8"
        super().__init__(
            request=request,
            internal_response=None,
            status_code=scripted.status,
            reason={200: "OK", 201: "Created", 204: "No Content", 207: "Multi-Status"}.get(
                scripted.status, "Error"
            ),
            content_type=headers.get("Content-Type"),
            headers=headers,
            stream_download_generator=None,
        )
        self._content = content
        self._is_closed = True
        self._is_stream_consumed = True

    async def close(self) -> None:
        return None


Step = Scripted | BaseException | Callable[[Captured], Scripted]


class CapturingTransport(AsyncHttpTransport):  # type: ignore[misc]
    """Records requests and replies from a FIFO script.

    Args:
        script: Responses (or exceptions to raise, or callables building a response from the
            captured request), consumed one per request.
        fallback: Answers every request once the script is used up (a simulated service).
    """

    def __init__(
        self, script: Iterable[Step] = (), fallback: Callable[[Captured], Scripted] | None = None
    ) -> None:
        self.script: deque[Step] = deque(script)
        self.fallback = fallback
        self.requests: list[Captured] = []
        self.sleeps: list[float] = []
        self.closed = False

    def add(self, *steps: Step) -> None:
        self.script.extend(steps)

    async def __aenter__(self) -> CapturingTransport:
        return self

    async def __aexit__(self, *args: Any) -> None:
        await self.close()

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        self.closed = True

    async def sleep(self, duration: float) -> None:
        self.sleeps.append(duration)

    async def send(self, request: HttpRequest, **kwargs: Any) -> _Response:
        parts = urlsplit(request.url)
        raw = request.content if hasattr(request, "content") else request.data
        if isinstance(raw, bytes | bytearray):
            raw = raw.decode()
        body = json.loads(raw) if raw else None
        captured = Captured(
            method=request.method,
            url=request.url,
            path=unquote(parts.path),
            query=parse_qs(parts.query),
            headers=dict(request.headers),
            body=body,
        )
        self.requests.append(captured)
        if not self.script and self.fallback is not None:
            return _Response(request, self.fallback(captured))
        if not self.script:
            raise AssertionError(f"unexpected request (script exhausted): {request.method} {request.url}")
        step = self.script.popleft()
        if isinstance(step, BaseException):
            raise step
        scripted = step(captured) if callable(step) else step
        return _Response(request, scripted)
