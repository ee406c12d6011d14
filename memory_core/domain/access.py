"""Who may act for which scope: the authorisation model of the HTTP API, written down and enforced here.

Pure domain: no I/O and no SDK. An :class:`Authenticator` (an adapter, such as the Microsoft Entra ID
token validator) turns a request's headers into a :class:`Principal`; :func:`authorize` then decides,
in this one place, whether that principal may perform an :class:`Action` on a scope.

The model (``docs/security.md`` explains it with the threat model):

- ``Memory.Agent`` (an app-only token, such as an agent process): search, read (list, get), delete and
  post turns, only for the agent ids its client id is bound to, for any user of those agents.
- ``Memory.User`` or the delegated scope ``Memory.ReadWrite`` (a signed-in user): search, read,
  delete, post turns, export and purge, only for the user id taken from the token (never from the
  request), with any agent.
- ``Memory.Admin`` (a user or an app): everything, including forgetting (its report lists every
  tenant's ids) and cross-user export and purge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from memory_core.errors import AuthenticationError, ForbiddenError

__all__ = [
    "ADMIN_ACTIONS",
    "ADMIN_SCOPE",
    "AGENT_ACTIONS",
    "ANY_AGENT",
    "ROLE_ADMIN",
    "ROLE_AGENT",
    "ROLE_USER",
    "USER_ACTIONS",
    "USER_SCOPE",
    "Action",
    "Authenticator",
    "Principal",
    "PrincipalKind",
    "authorize",
    "bearer_token",
]

#: App role of an agent process (app-only token): acts for the agent ids it is bound to.
ROLE_AGENT = "Memory.Agent"
#: App role of a signed-in user (delegated token): acts for their own user id only.
ROLE_USER = "Memory.User"
#: Delegated permission (``scp``) that gives a signed-in user the same rights as :data:`ROLE_USER`.
USER_SCOPE = "Memory.ReadWrite"
#: App role of an administrator (user or app): every action on every scope.
ROLE_ADMIN = "Memory.Admin"
#: Delegated permission (``scp``, admin consent only) without which a signed-in user's
#: :data:`ROLE_ADMIN` does not count: a user's token lists their app roles whichever client app asked
#: for it, so an app consented for :data:`USER_SCOPE` alone must not act with its user's admin rights.
ADMIN_SCOPE = "Memory.Admin.All"
#: An agent binding that covers every agent id.
ANY_AGENT = "*"


class Action(StrEnum):
    """What a request does, as far as authorisation is concerned (one per protected route)."""

    SEARCH = "search"
    READ = "read"
    DELETE = "delete"
    POST_TURN = "post_turn"
    ADD = "add"
    UPDATE = "update"
    EXPORT = "export"
    PURGE = "purge"
    FORGET = "forget"


#: What an agent identity may do, for the agent ids it is bound to.
AGENT_ACTIONS = frozenset(
    {Action.SEARCH, Action.READ, Action.DELETE, Action.POST_TURN, Action.ADD, Action.UPDATE}
)
#: What a signed-in user may do, for their own user id.
USER_ACTIONS = frozenset(
    {
        Action.SEARCH,
        Action.READ,
        Action.DELETE,
        Action.POST_TURN,
        Action.ADD,
        Action.UPDATE,
        Action.EXPORT,
        Action.PURGE,
    }
)
#: What an administrator may do, on every scope.
ADMIN_ACTIONS = frozenset(Action)


class PrincipalKind(StrEnum):
    """How the caller authenticated."""

    USER = "user"
    """A signed-in user (a delegated token)."""
    APP = "app"
    """An application acting as itself (an app-only token), such as an agent process."""
    ADMIN_TOKEN = "admin-token"  # noqa: S105 (the name of a kind, not a secret)
    """The holder of the embedded server's token, or an embedded caller that gates access itself."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    Attributes:
        subject: Who it is, for logs and messages: the user's object id, the app's client id, or a
            fixed name for the embedded server's token.
        kind: How it authenticated.
        roles: App roles the token carries (``Memory.Agent``, ``Memory.User``, ``Memory.Admin``).
        scopes: Delegated permissions the token carries (``scp``; empty for app-only tokens).
        user_id: The user id a delegated token acts for (from the configured claim), else ``None``.
        agent_ids: The agent ids an app is bound to (:data:`ANY_AGENT` for all).
    """

    subject: str
    kind: PrincipalKind
    roles: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    user_id: str | None = None
    agent_ids: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def token_holder(cls, subject: str = "memory-core") -> Principal:
        """The embedded server's caller: the ``MEMORY_API_TOKEN`` holder (or, without a token, any
        loopback caller), who may do everything."""
        return cls(subject=subject, kind=PrincipalKind.ADMIN_TOKEN, roles=frozenset({ROLE_ADMIN}))

    @property
    def is_admin(self) -> bool:
        """Whether the principal acts as an administrator: :data:`ROLE_ADMIN` in an app-only token, or in
        a signed-in user's token that also carries the admin-consented scope :data:`ADMIN_SCOPE`."""
        if ROLE_ADMIN not in self.roles:
            return False
        return self.kind is not PrincipalKind.USER or ADMIN_SCOPE in self.scopes

    @property
    def acts_as_user(self) -> bool:
        """Whether the principal is a signed-in user with :data:`ROLE_USER` or :data:`USER_SCOPE`."""
        return self.kind is PrincipalKind.USER and (ROLE_USER in self.roles or USER_SCOPE in self.scopes)

    @property
    def acts_as_agent(self) -> bool:
        """Whether the principal is an app with :data:`ROLE_AGENT`."""
        return self.kind is PrincipalKind.APP and ROLE_AGENT in self.roles

    def bound_to(self, agent_id: str) -> bool:
        """Whether the app is bound to ``agent_id``."""
        return ANY_AGENT in self.agent_ids or agent_id in self.agent_ids

    def describe(self) -> str:
        """``user 'oid'`` / ``app 'client-id'`` / ``token holder 'name'``, for messages and logs."""
        label = {PrincipalKind.USER: "user", PrincipalKind.APP: "app"}.get(self.kind, "token holder")
        return f"{label} {self.subject!r}"


class Authenticator(Protocol):
    """Turns a request's headers into a :class:`Principal` (a port; adapters implement it)."""

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """Who sent the request.

        Args:
            headers: The request headers (names in any case).

        Raises:
            AuthenticationError: No credentials, or credentials that do not validate (401).
            TransientError: The keys needed to decide could not be fetched (503, fail closed).
        """
        ...


def bearer_token(headers: Mapping[str, str]) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (header name in any case).

    Raises:
        AuthenticationError: There is no such header, or it is of another scheme (``error`` is
            ``None``: no bearer credentials), or it has no token.
    """
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if value is None or not value.strip():
        raise AuthenticationError(
            "this API needs Authorization: Bearer <access token> (a Microsoft Entra ID token for the API)",
            error=None,
        )
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise AuthenticationError(
            "the Authorization header must be 'Bearer <access token>'; no other scheme is accepted",
            error=None,
        )
    if not token.strip():
        raise AuthenticationError("the Authorization header has no token after 'Bearer'")
    return token.strip()


def _names(actions: frozenset[Action]) -> str:
    return ", ".join(a.value for a in Action if a in actions)


def authorize(principal: Principal, action: Action, *, user_id: str | None, agent_id: str | None) -> None:
    """Allow ``principal`` to perform ``action`` on the scope ``(user_id, agent_id)``, or refuse.

    Args:
        principal: The authenticated caller.
        action: What the request does.
        user_id: The user whose memories it touches (``None``: no single user, as in forgetting).
        agent_id: The agent whose memories it touches (``None``: every agent of ``user_id``, or none).

    Raises:
        ForbiddenError: The principal may not; the message says which role, scope or binding is missing.
    """
    if principal.is_admin:
        return
    who = principal.describe()
    if action is Action.FORGET:
        raise ForbiddenError(
            f"{who} may not run forgetting: it needs the {ROLE_ADMIN} role (its report lists every "
            "tenant's user, agent and memory ids, and applying it changes every tenant)"
        )
    if principal.acts_as_user:
        if action not in USER_ACTIONS:
            raise ForbiddenError(
                f"{who} may not {action.value}: it needs the {ROLE_ADMIN} role; a signed-in user may "
                f"{_names(USER_ACTIONS)} their own memories"
            )
        if principal.user_id is None or user_id != principal.user_id:
            target = "every user" if user_id is None else f"user_id {user_id!r}"
            raise ForbiddenError(
                f"{who} acts only for their own user_id {principal.user_id!r}, not for {target}; "
                f"acting for other users needs the {ROLE_ADMIN} role"
            )
        return
    if principal.acts_as_agent:
        if action not in AGENT_ACTIONS:
            raise ForbiddenError(
                f"{who} may not {action.value}: an agent identity ({ROLE_AGENT}) may "
                f"{_names(AGENT_ACTIONS)} for its agent ids; {action.value} needs a signed-in user "
                f"({ROLE_USER}) for their own memories or the {ROLE_ADMIN} role"
            )
        if agent_id is None or not principal.bound_to(agent_id):
            bound = ", ".join(sorted(principal.agent_ids)) or "none"
            target = "every agent" if agent_id is None else f"agent_id {agent_id!r}"
            raise ForbiddenError(
                f"{who} is not bound to {target} (bound to: {bound}); bind its client id to the agent id "
                "in MEMORY_AUTH_AGENT_BINDINGS"
            )
        return
    roles = ", ".join(sorted(principal.roles)) or "none"
    raise ForbiddenError(
        f"{who} holds no grant of this API (roles: {roles}): an app-only token needs the {ROLE_AGENT} "
        f"role, a signed-in user the {ROLE_USER} role or the {USER_SCOPE} scope, an administrator the "
        f"{ROLE_ADMIN} role"
    )
