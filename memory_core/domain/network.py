"""Whether an address names only this machine: the one test the settings, the token validator, the
remote client and the embedded server all make before trusting plain http or an open port; and the
request checks the two local HTTP servers (``memory-core serve`` and ``memory-core mcp``) share: the
``Host`` and ``Origin`` rules against web pages, and the bearer token."""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

__all__ = ["bearer_matches", "cross_site_refusal", "host_name", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``127.0.0.0/8``, ``::1`` with or without brackets,
    ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """The name part of a ``Host`` header (``127.0.0.1:7071`` → ``127.0.0.1``, ``[::1]:7071`` → ``::1``)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def cross_site_refusal(host: str, origin: str, *, loopback: bool) -> str | None:
    """Why a request from a web page must be refused, or ``None``.

    A page in the user's browser can send requests to 127.0.0.1 (a form POST needs no preflight) and,
    by pointing its own host name at 127.0.0.1 (DNS rebinding), read the answers. So on a loopback
    address (``loopback``) the ``Host`` must name this machine, and anywhere an ``Origin`` (which
    browsers send on such requests) must be the server's own.

    Args:
        host: The request's ``Host`` header (empty when absent).
        origin: Its ``Origin`` header (empty when absent).
        loopback: Whether the server is bound to a loopback address.
    """
    host, origin = host.strip(), origin.strip()
    if loopback and host and not is_loopback(host_name(host)):
        return f"the Host {host[:100]!r} is not this machine; this server answers requests to 127.0.0.1 only"
    if origin:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not host or parts.netloc.lower() != host.lower():
            return f"cross-site request from {origin[:100]!r} refused"
    return None


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header is ``Bearer <token>`` (constant-time comparison)."""
    if not header:
        return False
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode("utf-8"), token.encode("utf-8"))
