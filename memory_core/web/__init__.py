"""The memory inspector: a static page (HTML, ES modules, CSS) that reads and acts through the JSON API.

The files ship inside the package (nothing is fetched from a CDN, nothing is built) and hold no data:
the page calls the same ``/api`` routes as any client, with the same credentials (``memory-core serve``:
its token, asked once and kept in the tab's ``sessionStorage``; the Function App: an Entra ID access
token or the Functions key). Memory text is untrusted and is only ever set as text, never as markup.

``memory-core serve`` answers ``/`` with the page and ``/ui/<file>`` with its assets; the Function App
answers ``/api/inspector/`` and ``/api/inspector/ui/<file>`` (the page refers to its assets by relative
URLs, so both work). Every response carries :data:`SECURITY_HEADERS`: a strict Content-Security-Policy
(scripts, styles and images from the page's own origin only, no inline script, no framing),
``X-Content-Type-Options: nosniff`` and no referrer.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

__all__ = ["ASSET_PREFIX", "CONTENT_SECURITY_POLICY", "SECURITY_HEADERS", "StaticFile", "static_file"]

#: Folder (and URL segment) of the page's assets, beside the page.
ASSET_PREFIX = "ui/"
#: The page's policy: nothing but its own scripts, styles, images and API calls; no inline script, no
#: plugins, no ``<base>``, no form posts, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_ASSET_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}\.(?:js|css|svg)")


@dataclass(frozen=True, slots=True)
class StaticFile:
    """One file of the inspector, ready to send.

    Attributes:
        body: The file's bytes.
        content_type: Its ``Content-Type``.
    """

    body: bytes
    content_type: str

    @property
    def headers(self) -> dict[str, str]:
        """``Content-Type`` and :data:`SECURITY_HEADERS`."""
        return {"Content-Type": self.content_type, **SECURITY_HEADERS}


@functools.cache
def _read(name: str) -> StaticFile | None:
    resource = resources.files(__name__)
    for part in name.split("/"):
        resource = resource.joinpath(part)
    if not resource.is_file():
        return None
    suffix = name[name.rfind(".") :]
    return StaticFile(resource.read_bytes(), _CONTENT_TYPES[suffix])


def static_file(path: str) -> StaticFile | None:
    """The inspector's file at ``path`` (relative to where the page is served), or ``None``.

    ``""`` and ``index.html`` are the page; ``ui/<name>`` an asset, where ``<name>`` is a lower-case
    file name ending in ``.js``, ``.css`` or ``.svg`` (nothing else is ever looked up, so no path can
    reach beyond the package's folder).
    """
    if path in ("", "index.html"):
        return _read("index.html")
    if path.startswith(ASSET_PREFIX) and _ASSET_NAME.fullmatch(path[len(ASSET_PREFIX) :]):
        return _read(path)
    return None
