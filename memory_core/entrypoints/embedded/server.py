"""The embedded HTTP server: :class:`~memory_core.entrypoints.http.dispatcher.MemoryApi` at ``/api/...`` on 127.0.0.1.

A stdlib :class:`http.server.ThreadingHTTPServer` reads each request on its own thread and hands it
to the runtime's single asyncio loop (where the memory service lives) with
:func:`asyncio.run_coroutine_threadsafe`, then writes the JSON response. It binds to the loopback
interface by default; with a token (``MEMORY_API_TOKEN``) every route but ``/api/health`` needs
``Authorization: Bearer <token>`` (401 otherwise, compared in constant time), and only with one may it
bind another interface (:func:`check_binding`).

Identity: the token (or, without one, the loopback binding) is the only credential this server knows,
so whoever passes it acts as the token holder, an administrator of every scope (the API it serves has
no authenticator; :class:`~memory_core.domain.access.Principal.token_holder`). The request headers are passed
through, so an API built with an authenticator (per-user tokens, Microsoft Entra ID) decides per
request instead.

The memory inspector (:mod:`memory_core.web`) is served beside the API: ``GET /`` is its page and
``GET /ui/<file>`` its scripts, styles and icon. They are static and hold no data, so they need no
token (the page asks for it and sends it with its API calls); the ``Host`` and ``Origin`` rules below
apply to them as to the API, and they carry the page's Content-Security-Policy.

Transport rules (before the API sees a request): at most ``max_connections`` connections are served at
once (the others are answered 503 with ``Retry-After`` and closed), each request must arrive whole
within ``read_timeout`` seconds (408 and closed otherwise; :mod:`.connections`), a request whose body's
end is ambiguous is 400 and closed (:mod:`.framing`), any other path outside ``/api`` is 404, a body
needs a ``Content-Length`` (411 without one), a ``Content-Length`` over the API's limit is 413 without
reading the body, and a request the loop does not answer within ``request_timeout`` is 503. Every API
answer carries :data:`~memory_core.entrypoints.http.kit.API_HEADERS` (``Cache-Control: no-store``,
``X-Content-Type-Options: nosniff``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from memory_core import telemetry
from memory_core.contract.routes import API_PREFIX, ROUTES, api_path, route
from memory_core.domain.log_ids import path_ids, redact, redact_path
from memory_core.domain.network import bearer_matches, cross_site_refusal, is_loopback
from memory_core.entrypoints.embedded.connections import ConnectionGuard, Deadline
from memory_core.entrypoints.embedded.framing import FramingError, body_length
from memory_core.entrypoints.http.dispatcher import MemoryApi, match
from memory_core.entrypoints.http.kit import (
    ApiRequest,
    ApiResponse,
    Headers,
    HttpError,
    error_response,
    with_api_headers,
)
from memory_core.errors import ConfigurationError
from memory_core.web import StaticFile, static_file

__all__ = ["MAX_CONNECTIONS", "MIN_TOKEN_CHARS", "READ_TIMEOUT_SECONDS", "ApiServer", "check_binding", "is_loopback"]

logger = logging.getLogger(__name__)

#: The routes a token does not guard (the anonymous ones: process liveness, which shows no user data).
OPEN_ROUTES = frozenset(API_PREFIX + r.path for r in ROUTES if r.anonymous)
#: Cheap routes that never wait for a turn behind other requests (health, and queuing a turn, which
#: only writes it to the queue: an agent's after_run must not wait behind a crowd of searches).
UNQUEUED_ROUTES = OPEN_ROUTES | {api_path("post_turn")}
_SEARCH = route("search")
#: The shortest token accepted (a guessable token guards nothing).
MIN_TOKEN_CHARS = 16
#: Connections served at once by default (each holds a thread); ``serve --max-connections``.
MAX_CONNECTIONS = 256
#: Seconds a client has by default to send a whole request, or to start one on an idle connection.
READ_TIMEOUT_SECONDS = 30.0


def check_binding(host: str, token: str | None, *, authenticated: bool = False) -> None:
    """Refuse what would open every user's memories to the network (``authenticated``: the API checks
    every request's own credential, a Microsoft Entra ID token, so no shared token is needed).

    Raises:
        ConfigurationError: A token shorter than :data:`MIN_TOKEN_CHARS`, or a non-loopback ``host``
            without a token or an authenticating API.
    """
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigurationError(
            f"MEMORY_API_TOKEN must be at least {MIN_TOKEN_CHARS} characters (for example the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    if not token and not authenticated and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve on {host} without a token: anyone who can reach it could read, change and "
            "erase every user's memories; set MEMORY_API_TOKEN (or --token), or bind 127.0.0.1"
        )


class _Refused(Exception):
    """A request answered before the API sees it."""

    def __init__(self, response: ApiResponse) -> None:
        super().__init__(response.status)
        self.response = response


def _timed_out() -> ApiResponse:
    return error_response(503, "unavailable", "the request timed out", **{"Retry-After": "5"})


def _late() -> ApiResponse:
    return error_response(408, "request_timeout", "the request did not arrive in time")


def _single_values(text: str) -> dict[str, str]:
    """The query parameters, each named once (which of repeated ones would count is a guess: 400)."""
    pairs = parse_qsl(text, keep_blank_values=True)
    query = dict(pairs)
    if len(query) != len(pairs):
        repeated = next(name for name in query if sum(1 for n, _ in pairs if n == name) > 1)
        raise _Refused(error_response(400, "bad_request", f"the query parameter {repeated!r} is repeated"))
    return query


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    deadline: Deadline
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds one read or write of the connection may wait (the request's own clock: .connections)
    wbufsize = -1  # buffer the response: headers and body leave in one write
    disable_nagle_algorithm = True
    server_version = "memory-core"
    sys_version = ""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the HTTP layer finds before the API sees a request (a request line or headers too long,
        a malformed request line) in the API's JSON error shape instead of the standard library's HTML."""
        self.close_connection = True
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "Error"
        text = message or explain or phrase
        self._write(error_response(code, phrase.lower().replace(" ", "_").replace("-", "_"), text[:300]))

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), redact(format % args, *path_ids(getattr(self, "path", ""))))

    def setup(self) -> None:
        super().setup()
        self.deadline = self.server.connections.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.connections.untrack(self.deadline)

    def handle_one_request(self) -> None:
        self.server.connections.expect(self.deadline)  # the next request, whole, within read_timeout
        super().handle_one_request()

    def parse_request(self) -> bool:
        """The request line and headers, unless they did not arrive in time (408, then closed)."""
        if not self.deadline.expired and not super().parse_request():
            return False  # malformed: answered already
        if self.deadline.expired:  # cut short (the line or the headers)
            self.close_connection = True
            self.command, self.request_version = getattr(self, "command", None) or "", self.protocol_version
            self.requestline = str(getattr(self, "raw_requestline", b"")[:100], "latin-1").rstrip("\r\n")
            self._write(_late())
            return False
        return True

    def _dispatch(self) -> None:
        try:
            response = self._respond()
        except Exception:  # a transport bug must not kill the connection thread silently
            logger.exception("%s %s failed in the HTTP layer", self.command, redact_path(self.path))
            response = error_response(500, "internal_error", "the request failed unexpectedly")
            self.close_connection = True
        self._write(response)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = _dispatch

    def do_HEAD(self) -> None:
        self.close_connection = True  # its body (if any) is not read
        self._write(error_response(405, "method_not_allowed", "HEAD is not supported"), head=True)

    def _respond(self) -> ApiResponse | StaticFile:
        try:
            self._length = body_length(self.headers)
        except FramingError as refused:
            self.close_connection = True  # where the body ends is unknown: nothing after it can be read
            return error_response(refused.status, refused.code, refused.message)
        parts = urlsplit(self.path)
        if parts.path != API_PREFIX and not parts.path.startswith(API_PREFIX + "/"):
            return self._static(parts.path)
        try:
            self._check_caller(parts.path)
            body = self._read_body()
            query = _single_values(parts.query)
        except _Refused as refused:
            return refused.response
        return self._call_api(parts.path, query, body)

    def _static(self, path: str) -> ApiResponse | StaticFile:
        """A file of the inspector (outside the API), or why not."""
        self._discard_body()
        page = static_file(path[1:]) if path.startswith("/") else None
        if page is None:
            return error_response(
                404, "no_route", f"no route for {path[:100]!r}; the API lives under {API_PREFIX}, the inspector at /"
            )
        refused = self._cross_site()
        if refused is not None:
            return error_response(403, "forbidden", refused)
        if self.command != "GET":
            return error_response(
                405, "method_not_allowed", f"{self.command} is not allowed on {path[:100]}; use GET", Allow="GET"
            )
        return page

    def _check_caller(self, path: str) -> None:
        """Refuse a request from another site's page (403) or without the token (401), its body unread."""
        refused = self._cross_site()
        if refused is not None:
            self._discard_body()
            raise _Refused(error_response(403, "forbidden", refused))
        token = self.server.token
        if token and path.rstrip("/") not in OPEN_ROUTES and not bearer_matches(self.headers.get("Authorization"), token):
            self._discard_body()
            raise _Refused(
                error_response(
                    401,
                    "unauthorized",
                    "this server needs Authorization: Bearer <MEMORY_API_TOKEN>",
                    **{"WWW-Authenticate": 'Bearer realm="memory-core"'},
                )
            )

    def _read_body(self) -> bytes:
        """The request body, within the API's limit, JSON and whole in time (413, 415, 408)."""
        length = self._content_length()
        if length and not _is_json(self.headers.get("Content-Type")):
            self.close_connection = True  # the unread body makes the connection unusable
            raise _Refused(error_response(415, "unsupported_media_type", "send the body as Content-Type: application/json"))
        body = self.rfile.read(length) if length else b""
        if self.deadline.expired or len(body) < length:
            self.close_connection = True
            raise _Refused(_late())
        return body

    def _content_length(self) -> int:
        length = self._length  # (framing: .framing.body_length)
        limit = self.server.api.max_body_bytes
        if length > limit:
            self.close_connection = True  # the unread body makes the connection unusable
            raise _Refused(error_response(413, "payload_too_large", f"the body is {length} bytes; the maximum is {limit}"))
        return length

    def _call_api(self, path: str, query: dict[str, str], body: bytes) -> ApiResponse:
        """The API's answer, handed to the runtime's loop (after admission, within the timeout)."""
        self.server.connections.received(self.deadline)
        token = self.server.token
        request = ApiRequest(
            method=self.command,
            path=path[len(API_PREFIX) :] or "/",
            query=query,
            body=body,
            headers=Headers(self.headers.items()),
            anonymous=bool(token) and not bearer_matches(self.headers.get("Authorization"), token or ""),
        )
        started = time.perf_counter()
        admission = self.server.admission if _waits_its_turn(request) else None
        if admission is not None and not admission.acquire(timeout=self.server.request_timeout):
            return _timed_out()
        try:
            future = asyncio.run_coroutine_threadsafe(self.server.api.handle(request), self.server.loop)
            try:
                response = future.result(timeout=self.server.request_timeout - (time.perf_counter() - started))
            except concurrent.futures.TimeoutError:
                future.cancel()
                return _timed_out()
        finally:
            if admission is not None:
                admission.release()
        if request.method == _SEARCH.method and request.path == _SEARCH.path and response.status == 200:
            _record_search(body, response, time.perf_counter() - started)
        return response

    def _cross_site(self) -> str | None:
        """Why a request from a web page must be refused, or ``None`` (:func:`~memory_core.domain.network.cross_site_refusal`)."""
        return cross_site_refusal(
            self.headers.get("Host") or "", self.headers.get("Origin") or "", loopback=self.server.loopback
        )

    def _discard_body(self) -> None:
        length = self._length  # (framing refused already: .framing.body_length)
        if 0 < length <= self.server.api.max_body_bytes:
            if len(self.rfile.read(length)) < length:
                self.close_connection = True
        elif length != 0:
            self.close_connection = True

    def _write(self, response: ApiResponse | StaticFile, *, head: bool = False) -> None:
        self.server.connections.received(self.deadline)  # the clock is for reading, not for answering
        if isinstance(response, StaticFile):
            self._send(200, response.headers, response.body, head=head)
            return
        try:
            payload = response.json_bytes()
        except (TypeError, ValueError):
            logger.exception("%s %s: the response is not JSON-serializable", self.command, redact_path(self.path))
            response = error_response(500, "internal_error", "the response could not be serialized")
            payload = response.json_bytes()
        self._send(response.status, with_api_headers(response.headers), payload, head=head)

    def _send(self, status: int, headers: Mapping[str, str], payload: bytes, *, head: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in {"content-length", "connection"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(payload)


def _waits_its_turn(request: ApiRequest) -> bool:
    """Whether a request waits for one of the loop's turns (:attr:`_Server.admission`): all but health,
    ``POST /turns`` (:data:`UNQUEUED_ROUTES`) and the heavy operations, which the API bounds itself
    (:attr:`MemoryApi.heavy_gate <memory_core.entrypoints.http.dispatcher.MemoryApi>`), so that they
    never hold the turns searches wait for."""
    if API_PREFIX + request.path.rstrip("/") in UNQUEUED_ROUTES:
        return False
    try:
        target, _ = match(request.method.upper(), request.path)
    except HttpError:
        return True
    return not target.heavy


def _busy_answer() -> bytes:
    """The whole answer to a connection over the limit, written before it is closed."""
    response = error_response(
        503, "unavailable", "the server has too many connections open; retry later", **{"Retry-After": "5"}
    )
    payload = response.json_bytes()
    headers = {**with_api_headers(response.headers), "Content-Length": str(len(payload)), "Connection": "close"}
    head = "HTTP/1.1 503 Service Unavailable\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + payload


def _is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is JSON (``application/json``, any parameters)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64  # the listen backlog (the default 5 resets bursts of connections)

    def __init__(
        self,
        address: tuple[str, int],
        api: MemoryApi,
        loop: asyncio.AbstractEventLoop,
        request_timeout: float,
        token: str | None,
        concurrency: int | None,
        connections: ConnectionGuard,
    ) -> None:
        super().__init__(address, _Handler)
        self.connections = connections
        self.refused = 0
        self._refusal_logged = 0.0
        self._busy = _busy_answer()
        self.admission = threading.BoundedSemaphore(concurrency) if concurrency else None
        self.api = api
        self.loop = loop
        self.request_timeout = request_timeout
        self.token = token
        self.loopback = is_loopback(address[0])

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, or refuse it at once when the limit is reached."""
        if not self.connections.admit():
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release()

    def _refuse(self, request: socket.socket) -> None:
        """503 with ``Retry-After`` to a connection over the limit, then closed (never waits on it)."""
        self.refused += 1
        request.setblocking(False)
        with contextlib.suppress(OSError):
            request.recv(65536)  # what already arrived, so closing does not reset the answer away
        with contextlib.suppress(OSError):
            request.send(self._busy)
        self.shutdown_request(request)
        now = time.monotonic()
        if now - self._refusal_logged >= 60:
            self._refusal_logged = now
            logger.warning(
                "HTTP: %d connection(s) refused so far: %d are open, the limit (--max-connections)",
                self.refused, self.connections.limit,
            )


class ApiServer:
    """Serves a :class:`MemoryApi` over HTTP on a background thread.

    Args:
        api: The handlers.
        loop: The running event loop the handlers run on.
        host: Interface to bind (loopback by default).
        port: Port to bind; 0 picks a free one (see :attr:`port`).
        request_timeout: Seconds a request may take before it is answered with 503.
        token: The bearer token every route but health requires (``None``: none, loopback only).
        concurrency: Requests handed to the loop at once (``None``: no limit); the others wait on
            their connection's thread, so a crowd of requests cannot crowd the queue workers out of
            the loop. Health and ``POST /turns`` are never held back (:data:`UNQUEUED_ROUTES`), nor
            the heavy operations, which the API bounds on its own and refuses beyond its bound.
        max_connections: Connections served at once (each holds a thread); more are answered 503.
        read_timeout: Seconds a client has to send a whole request (or start one on an idle connection).

    Raises:
        ConfigurationError: See :func:`check_binding`.
    """

    def __init__(
        self,
        api: MemoryApi,
        loop: asyncio.AbstractEventLoop,
        *,
        host: str = "127.0.0.1",
        port: int = 7071,
        request_timeout: float = 120.0,
        token: str | None = None,
        concurrency: int | None = None,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
    ) -> None:
        check_binding(host, token or None, authenticated=api.authenticator is not None)
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._connections = ConnectionGuard(max_connections, read_timeout)
        self._server = _Server(
            (host, port), api, loop, request_timeout, token or None, concurrency, self._connections
        )
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The API's base URL (``http://127.0.0.1:7071/api``)."""
        return f"http://{self.host}:{self.port}{API_PREFIX}"

    @property
    def inspector_url(self) -> str:
        """The memory inspector's address, served beside the API (``http://127.0.0.1:7071/``)."""
        return f"http://{self.host}:{self.port}/"

    def start(self) -> None:
        """Start accepting requests on a background thread."""
        self._connections.start()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="memory-core-http",
            daemon=True,
        )
        self._thread.start()
        logger.info("HTTP API listening on %s", self.url)

    def stop(self) -> None:
        """Stop accepting requests and close the socket (requests in progress finish)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._connections.stop()
        self._server.server_close()


def _record_search(body: bytes, response: ApiResponse, seconds: float) -> None:
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return
    if isinstance(request, dict) and isinstance(response.body, dict):
        telemetry.record_search_exchange(request, response.body, seconds)
