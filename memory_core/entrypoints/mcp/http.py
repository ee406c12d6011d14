"""The MCP server's streamable HTTP transport and the guard in front of it (Host, Origin, token).

Streamable HTTP at ``/mcp``, bound to 127.0.0.1 by default. As with ``memory-core serve``, another
interface needs a bearer token (``--token`` or ``MEMORY_MCP_TOKEN``;
:func:`~memory_core.entrypoints.embedded.server.check_binding`), which every request must then carry.
Against DNS rebinding, on a loopback address the ``Host`` must name this machine, and an ``Origin``
(which browsers send) must be the server's own; the SDK's transport security settings allow loopback
hosts and origins only, on top of that.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from memory_core.domain.network import bearer_matches, cross_site_refusal, is_loopback
from memory_core.domain.records import Scope
from memory_core.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server import MCPServer

__all__ = ["HTTP_PATH", "serve_http"]

#: The streamable HTTP endpoint.
HTTP_PATH = "/mcp"


def _security_settings(loopback: bool) -> Any:
    """The SDK's DNS rebinding protection: loopback hosts and origins only (off elsewhere, where the
    token guards every request and :class:`_HttpGuard` checks the origin)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if not loopback:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ["127.0.0.1", "localhost", "[::1]"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[
            f"{scheme}://{n}{port}" for scheme in ("http", "https") for n in names for port in ("", ":*")
        ],
    )


async def serve_http(
    server: MCPServer[Any], *, host: str, port: int, token: str | None, scope: Scope, out: TextIO
) -> None:
    """Serve ``server`` on ``host:port`` at :data:`HTTP_PATH` until the process is interrupted; the
    "listening" line (with the port chosen for 0) goes to ``out``.

    Raises:
        ConfigurationError: The address cannot be bound.
    """
    import uvicorn

    loopback = is_loopback(host)
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH, transport_security=_security_settings(loopback), host=host
    )
    guarded = _HttpGuard(app, token=token, loopback=loopback)
    sock = _listen(host, port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(guarded, log_config=None, access_log=False, log_level="warning", lifespan="on")
    out.write(
        f"memory-core MCP server (streamable HTTP) on http://{shown}:{port}{HTTP_PATH} for user "
        f"{scope.user_id!r}, agent {scope.agent_id!r}{'' if token else ' (no token: loopback only)'}\n"
    )
    out.flush()
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (bound before the server starts, so the port is known).

    Raises:
        ConfigurationError: It cannot be bound (in use, no such interface).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigurationError(f"cannot serve on {host}:{port}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"cannot serve on {host}:{port}: {exc}") from exc
    sock.setblocking(False)
    return sock


_HttpHandler = Callable[
    [dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]


class _HttpGuard:
    """ASGI middleware in front of the MCP endpoint: the rules of ``memory-core serve``.

    On a loopback address the ``Host`` must name this machine (DNS rebinding); an ``Origin`` must be
    this server's own (a web page elsewhere cannot call it); with a token, every request needs
    ``Authorization: Bearer <token>`` (compared in constant time).
    """

    def __init__(self, app: _HttpHandler, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self.refusal(headers)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        extra = [(b"www-authenticate", b'Bearer realm="memory-core"')] if status == 401 else []
        body = ('{"error": ' + json.dumps(message, ensure_ascii=False) + "}").encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json; charset=utf-8"),
                    (b"content-length", str(len(body)).encode("ascii")),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """``(status, message)`` for a request to refuse, else ``None``."""
        refused = cross_site_refusal(
            headers.get("host", ""), headers.get("origin", ""), loopback=self.loopback
        )
        if refused is not None:
            return 403, refused
        if self.token is not None and not bearer_matches(headers.get("authorization"), self.token):
            return 401, "this MCP server needs Authorization: Bearer <token> (MEMORY_MCP_TOKEN)"
        return None
