"""The HTTP API's dispatcher: a request is routed through the route table, authenticated, authorised
on the scope it names, and handed to its route's handler."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from memory_core.contract.openapi import build_openapi
from memory_core.contract.parameters import MAX_BODY_BYTES
from memory_core.contract.routes import ROUTES, Route
from memory_core.domain.access import Authenticator, Principal, authorize
from memory_core.entrypoints.http.gate import HeavyGate
from memory_core.entrypoints.http.handlers import HANDLERS, Handler, HealthStatus
from memory_core.entrypoints.http.kit import (
    RETRY_AFTER_SECONDS,
    ApiRequest,
    ApiResponse,
    HttpError,
    failure_response,
)
from memory_core.entrypoints.http.targets import READERS, Subject

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = ["MemoryApi", "match"]

#: The caller of an API without an authenticator (the embedded server, whose token or loopback
#: binding already gates access; in-process callers): allowed everything.
_TOKEN_HOLDER = Principal.token_holder()
#: The facts of ``GET /health`` an anonymous caller sees: verdicts only, never an error's text, a path or
#: a setting (an administrator's credential shows every fact).
PUBLIC_HEALTH_FACTS = ("ingestion",)


def match(method: str, path: str) -> tuple[Route, dict[str, str]]:
    """The route of ``method`` (upper case) on ``path`` (below ``/api``, percent-encoded) and its parameters.

    Raises:
        HttpError: No route has this path (404), or none of its routes this method (405, with ``Allow``).
    """
    raw = path.split("?", 1)[0]
    if not raw.startswith("/"):
        raise HttpError(404, "no_route", f"no route for {path[:100]!r}")
    parts = [unquote(p, errors="replace") for p in raw[1:].split("/")]
    allowed: list[str] = []
    for route in ROUTES:
        params = route.match(parts)
        if params is None:
            continue
        if route.method == method:
            return route, params
        allowed.append(route.method)
    if allowed:
        methods = ", ".join(sorted(set(allowed)))
        raise HttpError(
            405,
            "method_not_allowed",
            f"{method} is not allowed on {raw[:100]}; use {methods}",
            None,
            {"Allow": methods},
        )
    raise HttpError(404, "no_route", f"no route for {raw[:100]!r}")


def _handlers() -> dict[str, Handler]:
    """The handler of every route, by operation.

    Raises:
        LookupError: A route has no handler, or a handler no route.
    """
    operations = {r.operation for r in ROUTES}
    if operations != set(HANDLERS):
        raise LookupError(
            f"routes without a handler: {sorted(operations - set(HANDLERS))}; "
            f"handlers without a route: {sorted(set(HANDLERS) - operations)}"
        )
    return HANDLERS


class MemoryApi:
    """The HTTP contract of memory-core, independent of the web framework.

    The embedded server (:mod:`memory_core.entrypoints.embedded.server`) and the Azure Functions HTTP
    triggers both turn their request into an :class:`ApiRequest`, await :meth:`handle` and write the
    :class:`ApiResponse` back. Routes (below the ``/api`` prefix) are those of
    :data:`~memory_core.contract.routes.ROUTES`, described by :meth:`openapi`.

    Errors are JSON ``{"error": {"code", "message", "field"}}``: a body that is not a JSON object is
    400 (``bad_request``); a value that breaks a rule (bad id, out-of-range number, missing field,
    unknown enum value, purge without ``confirm=true``) is 422 (``validation_error``); an unknown
    memory is 404 (``not_found``); an unknown path 404 (``no_route``); a known path with another
    method 405 (``method_not_allowed``, with ``Allow``); a body over ``max_body_bytes`` 413
    (``payload_too_large``); a store conflict 409 (``conflict``); what this deployment's store cannot do
    501 (``not_supported``: listing users on Azure AI Search); one heavy operation more than
    ``heavy_operations`` 429 (``busy``, with ``Retry-After``); a transient failure 503 (``unavailable``,
    with ``Retry-After``). Only a bug is a 500.

    Identity: with an ``authenticator`` every route but health needs credentials it accepts (401
    ``unauthorized`` with ``WWW-Authenticate: Bearer`` otherwise; 503 when it cannot decide, for example
    because the identity provider's keys cannot be fetched), and each request is then authorised once,
    by :func:`~memory_core.domain.access.authorize`, on the scope it names, before the service is touched
    (403 ``forbidden``, saying what is missing). Without one, every caller acts as the token holder (all
    actions allowed): for embedded callers that gate access themselves, such as ``memory-core serve``.

    Args:
        service: The memory service.
        max_body_bytes: Largest request body accepted.
        health_details: Optional extra facts for ``GET /health`` (queue depth, ...).
        authenticator: Turns request headers into a principal (``None``: no authentication).
        healthy: Decides from those facts whether the service works; ``False`` answers ``GET /health``
            with 503 and ``"status": "unhealthy"`` (``None``: always 200 ``ok``).
        heavy_operations: Heavy operations (:attr:`~memory_core.contract.routes.Route.heavy`: export
            pages, purge, forgetting) served at once; one more is answered 429 (``busy``) with
            ``Retry-After``, after authentication and authorisation (``None``: no bound).
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        health_details: Callable[[], Mapping[str, Any]] | None = None,
        authenticator: Authenticator | None = None,
        healthy: Callable[[Mapping[str, Any]], bool] | None = None,
        heavy_operations: int | None = None,
    ) -> None:
        self.service = service
        self.heavy_gate = HeavyGate(heavy_operations) if heavy_operations is not None else None
        self.max_body_bytes = max_body_bytes
        self.authenticator = authenticator
        self._health_details = health_details
        self._healthy = healthy
        self._openapi: dict[str, Any] | None = None
        self._handlers = _handlers()

    async def handle(self, request: ApiRequest) -> ApiResponse:
        """Route one request and turn every failure into a JSON error response."""
        method = request.method.upper()
        try:
            if len(request.body) > self.max_body_bytes:
                raise HttpError(
                    413,
                    "payload_too_large",
                    f"the body is {len(request.body)} bytes; the maximum is {self.max_body_bytes}",
                    "body",
                )
            route, params = match(method, request.path)
            subject = await self._admit(route, request, params)
            handler = self._handlers[route.operation]
            if not route.heavy or self.heavy_gate is None:
                return await handler(self, request, subject)
            if not self.heavy_gate.try_enter():
                raise self._busy()
            try:
                return await handler(self, request, subject)
            finally:
                self.heavy_gate.leave()
        except Exception as exc:
            return failure_response(exc, method, request.path)

    def _busy(self) -> HttpError:
        """The 429 refusing one heavy operation more than the gate lets run."""
        limit = self.heavy_gate.limit if self.heavy_gate is not None else 0
        return HttpError(
            429,
            "busy",
            f"{limit} heavy operation(s) (export pages, purges, forgetting runs) are already running, the most "
            f"this server runs at once (MEMORY_HEAVY_OPERATIONS); retry after {RETRY_AFTER_SECONDS} seconds "
            "(searches are not held back)",
            None,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    async def _admit(self, route: Route, request: ApiRequest, params: dict[str, str]) -> Subject:
        """Authenticate and authorise one request: the only gate between a route and the service.

        The caller is authenticated first (so an unknown caller learns nothing from validation), the
        route's target (the scope it acts on) is read, and the route's action is authorised on it.

        Raises:
            AuthenticationError: No acceptable credentials.
            ForbiddenError: The caller may not perform the route's action on that scope.
        """
        read = READERS[route.target]
        if route.anonymous:
            return read(request, params)
        principal = await self._authenticate(request)
        subject = read(request, params)
        if route.action is not None:
            authorize(principal, route.action, user_id=subject.user_id, agent_id=subject.agent_id)
        return subject

    async def _authenticate(self, request: ApiRequest) -> Principal:
        if self.authenticator is None:
            return _TOKEN_HOLDER
        return await self.authenticator.authenticate(request.headers)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Whether the service works (``healthy`` on the facts), and the facts for ``GET /health``."""
        details = dict(self._health_details()) if self._health_details is not None else {}
        return self._healthy is None or self._healthy(details), details

    async def public_health(self, request: ApiRequest) -> tuple[HealthStatus, dict[str, Any]]:
        """:meth:`health` as ``request``'s caller may see it: the status (``unhealthy`` when the service
        does not work, ``degraded`` when it works with a fact saying ``degraded``, else ``ok``), with
        every fact for an administrator (the token holder, or an Entra ID administrator) and only
        :data:`PUBLIC_HEALTH_FACTS` for anyone else."""
        ok, details = self.health()
        status: HealthStatus = "unhealthy" if not ok else "degraded" if details.get("degraded") else "ok"
        if not await self._is_admin(request):
            details = {k: details[k] for k in PUBLIC_HEALTH_FACTS if k in details}
        return status, details

    async def _is_admin(self, request: ApiRequest) -> bool:
        """Whether the caller of an anonymous route showed an administrator's credential."""
        if self.authenticator is None:
            return not request.anonymous
        try:
            principal = await self.authenticator.authenticate(request.headers)
        except Exception:  # no credential, a wrong one, or none checkable now: anonymous
            return False
        return principal.is_admin

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI 3.1 document of every route, generated from the route table and the views."""
        if self._openapi is None:
            self._openapi = build_openapi(self.max_body_bytes)
        return json.loads(json.dumps(self._openapi))  # type: ignore[no-any-return]
