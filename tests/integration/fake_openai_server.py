"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests of the real ``openai`` client.

It speaks the wire format of ``POST .../chat/completions``, ``POST .../responses`` (the Responses API,
non-streaming: what Agent Framework's ``OpenAIChatClient`` sends) and ``POST .../embeddings`` (plain
OpenAI paths and Azure deployment paths alike) over a real socket. Each request takes the next scripted
:class:`Reply` in order; every request is recorded (method, path, query, headers, JSON body) so tests
can assert what the client sent. When the script runs out the server answers 500 with
``x-should-retry: false`` and says so in the body, which makes a missing script line fail loudly.

Usage::

    with FakeOpenAIServer() as server:
        server.script(Reply.json({"memories": []}), Reply.status(429, retry_after="0.05"))
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=2)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any

    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of a chat-completions request."""
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    def texts(self) -> list[str]:
        """Every text the request gave the model, in order: the instructions, then each message's
        text (chat completions: ``messages``; Responses API: ``instructions`` and ``input``)."""
        if not isinstance(self.body, dict):
            return []
        found: list[str] = []
        if isinstance(self.body.get("instructions"), str):
            found.append(self.body["instructions"])
        items = self.body.get("messages", self.body.get("input", []))
        for item in [items] if isinstance(items, str) else items:
            content = item.get("content") if isinstance(item, dict) else item
            if isinstance(content, str):
                found.append(content)
            elif isinstance(content, list):
                found += [part["text"] for part in content if isinstance(part, dict) and "text" in part]
        return found


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    status_code: int = 200
    content: str | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    finish_reason: str = "stop"
    refusal: str | None = None
    #: Sent as is, with this content type (a gateway's HTML page, a truncated body).
    raw: tuple[str, bytes] | None = None

    @classmethod
    def json(cls, answer: Any, *, delay: float = 0.0) -> Reply:
        """A chat completion whose message content is ``answer`` serialized as JSON."""
        return cls(content=json.dumps(answer, ensure_ascii=False), delay=delay)

    @classmethod
    def text(cls, content: str, *, finish_reason: str = "stop") -> Reply:
        """A chat completion whose message content is ``content`` as is (for invalid JSON)."""
        return cls(content=content, finish_reason=finish_reason)

    @classmethod
    def refused(cls, refusal: str) -> Reply:
        """A chat completion that refuses to answer."""
        return cls(refusal=refusal)

    @classmethod
    def status(
        cls, status_code: int, *, retry_after: str | None = None, message: str = "scripted error"
    ) -> Reply:
        """An error response in the OpenAI error format, optionally with ``retry-after``."""
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        body = {"error": {"message": message, "type": "scripted", "code": str(status_code)}}
        return cls(status_code=status_code, body=body, headers=headers)

    @classmethod
    def page(cls, body: bytes, *, content_type: str = "text/html", status_code: int = 200) -> Reply:
        """A body that is no OpenAI answer at all (a proxy's or gateway's page), sent as is."""
        return cls(status_code=status_code, raw=(content_type, body))

    @classmethod
    def embeddings(cls, vectors: list[list[float]]) -> Reply:
        """An embeddings response with one item per vector."""
        body = {
            "object": "list",
            "model": "fake-embedding",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
        return cls(body=body)


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": reply.finish_reason,
                "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def _response(reply: Reply, model: str) -> dict[str, Any]:
    """A Responses API answer (``object: response``) whose output is one assistant message."""
    content: list[dict[str, Any]] = []
    if reply.refusal is not None:
        content.append({"type": "refusal", "refusal": reply.refusal})
    if reply.content is not None:
        content.append({"type": "output_text", "text": reply.content, "annotations": []})
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed" if reply.finish_reason == "stop" else "incomplete",
        "incomplete_details": None if reply.finish_reason == "stop" else {"reason": "max_output_tokens"},
        "error": None,
        "model": model,
        "instructions": None,
        "metadata": {},
        "output": [
            {"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant", "content": content}
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        },
    }


class FakeOpenAIServer:
    """A threaded HTTP server on an ephemeral port of 127.0.0.1 that answers from a script."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                parts = urlsplit(self.path)
                recorded = RecordedRequest(
                    method="POST",
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with server._lock:
                    server.requests.append(recorded)
                    reply = server._replies.popleft() if server._replies else None
                if reply is None:
                    self._send(
                        500,
                        {"error": {"message": "fake server: no scripted reply left", "type": "script"}},
                        {"x-should-retry": "false"},
                    )
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    self._send_raw(reply.status_code, *reply.raw)
                    return
                if reply.body is not None:
                    payload = reply.body
                else:
                    model = body.get("model", "fake") if isinstance(body, dict) else "fake"
                    answer = _response if parts.path.rstrip("/").endswith("/responses") else _completion
                    payload = answer(reply, model)
                self._send(reply.status_code, payload, reply.headers)

            def _send_raw(self, status: int, content_type: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT`` (for Azure's ``azure_endpoint``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (for ``AsyncOpenAI(base_url=...)``)."""
        return f"{self.origin}/v1"

    def script(self, *replies: Reply) -> None:
        """Append replies; each request takes the next one."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._replies)

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
