"""Microsoft Entra ID access tokens, validated in code with PyJWT: the HTTP API's :class:`Authenticator`.

A bearer token is accepted when all of these hold:

- it is a JWT signed with RS256 by one of the tenant's published keys (the ``jwks_uri`` of the
  tenant's OpenID configuration, ``{authority}/{tenant}/v2.0/.well-known/openid-configuration``);
  any other algorithm (``none``, ``HS256``, ...) is refused before a key is looked at;
- its issuer is the tenant's: ``{authority}/{tenant}/v2.0`` (v2 tokens), ``https://sts.windows.net/{tenant}/``
  (v1 tokens) or the ``issuer`` the OpenID configuration names;
- its audience is one of the configured ones (the API's application ID URI and/or client id);
- ``exp`` and ``nbf`` hold, within a small leeway for clock skew;
- its ``tid`` is the configured tenant.

Keys are cached: a known ``kid`` costs no network. An unknown ``kid`` (a key rotation) refreshes the
keys, at most once per :data:`MIN_REFRESH_SECONDS`; keys older than :data:`MAX_KEY_AGE_SECONDS` are
refreshed on the next request (the old ones are kept if that fails). Documents are fetched with the
standard library on a worker thread, so the event loop never waits on the network. When the keys
cannot be fetched the validator fails closed with a :class:`~memory_core.errors.TransientError` (the
API answers 503 with ``Retry-After``), never by accepting the token.

Error messages say what is wrong and never contain the token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import jwt

from memory_core.domain.access import Principal, PrincipalKind, bearer_token
from memory_core.domain.network import is_loopback
from memory_core.domain.validation import validate_scope_id
from memory_core.errors import AuthenticationError, TransientError, ValidationError

__all__ = [
    "DEFAULT_AUTHORITY",
    "DEFAULT_LEEWAY_SECONDS",
    "FAILED_FETCH_RETRY_SECONDS",
    "MAX_KEY_AGE_SECONDS",
    "MIN_REFRESH_SECONDS",
    "V1_ISSUER",
    "EntraTokenValidator",
    "metadata_url",
]

logger = logging.getLogger(__name__)

#: The public cloud's authority (sovereign clouds: ``https://login.microsoftonline.us``, ...).
DEFAULT_AUTHORITY = "https://login.microsoftonline.com"
#: Issuer of v1 access tokens (``accessTokenAcceptedVersion`` 1 or null) in the public cloud.
V1_ISSUER = "https://sts.windows.net/{tenant}/"
#: Seconds of clock skew tolerated on ``exp`` and ``nbf``.
DEFAULT_LEEWAY_SECONDS = 60.0
#: An unknown ``kid`` refreshes the keys at most this often.
MIN_REFRESH_SECONDS = 60.0
#: Keys older than this are refreshed on the next request.
MAX_KEY_AGE_SECONDS = 24 * 3600.0
#: After a failed fetch, the next attempt waits this long (and the API's ``Retry-After`` says so).
FAILED_FETCH_RETRY_SECONDS = 5.0
#: Seconds one document fetch may take.
FETCH_TIMEOUT_SECONDS = 10.0
#: Largest OpenID configuration or key set read.
MAX_DOCUMENT_BYTES = 1024 * 1024
_ALGORITHM = "RS256"

Fetch = Callable[[str], Awaitable[Mapping[str, Any]]]


def metadata_url(authority: str, tenant_id: str) -> str:
    """The tenant's OpenID configuration URL under ``authority``."""
    return f"{authority.rstrip('/')}/{tenant_id}/v2.0/.well-known/openid-configuration"


def _fetchable(url: str) -> bool:
    """Whether ``url`` is https, or http on a loopback host (a local stand-in)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return True
    return parts.scheme == "http" and is_loopback(parts.hostname or "")


def _get_json(url: str, timeout: float) -> Mapping[str, Any]:
    """GET one JSON object (blocking; run on a worker thread)."""
    if not _fetchable(url):
        raise TransientError(f"refusing to fetch {url!r}: only https (or http on loopback) is allowed")
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "memory-core"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (scheme checked above)
            body = response.read(MAX_DOCUMENT_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise TransientError(f"GET {url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise TransientError(f"GET {url} failed: {reason}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise TransientError(f"GET {url} returned more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise TransientError(f"GET {url} did not return JSON") from None
    if not isinstance(data, dict):
        raise TransientError(f"GET {url} did not return a JSON object")
    return data


def _strings(value: Any) -> frozenset[str]:
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()


class EntraTokenValidator:
    """Validates Microsoft Entra ID access tokens and maps their claims to a :class:`Principal`.

    Args:
        tenant_id: The directory (tenant) id tokens must come from (``tid``).
        audiences: Accepted ``aud`` values: the API's application ID URI and/or client id.
        user_id_claim: The claim a delegated token's user id is taken from (``oid`` by default).
        agent_bindings: App client id (``azp`` / ``appid``) -> the agent ids it may act for
            (``"*"``: every agent).
        authority: The Microsoft Entra authority (sovereign clouds, or a local stand-in in tests).
        leeway: Seconds of clock skew tolerated on ``exp`` and ``nbf``.
        fetch: Coroutine that GETs a JSON object (default: urllib on a worker thread).
        clock: Monotonic seconds, for the key cache's timing.
        fetch_timeout: Seconds one fetch may take (the default ``fetch``).
    """

    def __init__(
        self,
        *,
        tenant_id: str,
        audiences: Iterable[str],
        user_id_claim: str = "oid",
        agent_bindings: Mapping[str, Iterable[str]] | None = None,
        authority: str = DEFAULT_AUTHORITY,
        leeway: float = DEFAULT_LEEWAY_SECONDS,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.monotonic,
        fetch_timeout: float = FETCH_TIMEOUT_SECONDS,
    ) -> None:
        self.tenant_id = tenant_id.lower()
        self.audiences = tuple(audiences)
        if not tenant_id or not self.audiences:
            raise ValueError("a tenant id and at least one audience are required")
        self.user_id_claim = user_id_claim
        self.authority = authority.rstrip("/")
        self.metadata_url = metadata_url(self.authority, self.tenant_id)
        self.leeway = leeway
        self._bindings = {client: frozenset(agents) for client, agents in (agent_bindings or {}).items()}
        self._fetch = fetch or self._default_fetch
        self._fetch_timeout = fetch_timeout
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._issuers = frozenset(
            {f"{self.authority}/{self.tenant_id}/v2.0", V1_ISSUER.format(tenant=self.tenant_id)}
        )
        self._fetched_at: float | None = None
        self._next_attempt = float("-inf")
        self._last_error: str | None = None
        self._lock: asyncio.Lock | None = None

    # -- the port -------------------------------------------------------------------------------
    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """The principal of the request's ``Authorization: Bearer`` token.

        Raises:
            AuthenticationError: No token, or a token that does not validate (401).
            TransientError: The tenant's keys could not be fetched (503; fail closed).
        """
        return self.principal(await self.validate(bearer_token(headers)))

    # -- validation -----------------------------------------------------------------------------
    async def validate(self, token: str) -> dict[str, Any]:
        """The claims of ``token`` once signature, issuer, audience, lifetime and tenant are checked.

        Raises:
            AuthenticationError: The token is not acceptable; the message says why.
            TransientError: The tenant's keys could not be fetched.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationError("the bearer token is not a well-formed JWT") from None
        algorithm = header.get("alg")
        if algorithm != _ALGORITHM:
            shown = repr(algorithm)[:24] if isinstance(algorithm, str) else "none given"
            raise AuthenticationError(f"the token is signed with {shown}; only {_ALGORITHM} is accepted")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise AuthenticationError("the token names no signing key (kid)")
        key = await self._signing_key(kid)
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[_ALGORITHM],
                audience=self.audiences,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "tid"]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthenticationError("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise AuthenticationError("the token is not valid yet (nbf is in the future)") from None
        except jwt.InvalidAudienceError:
            raise AuthenticationError(
                f"the token is for another audience; this API accepts {', '.join(self.audiences)}"
            ) from None
        except jwt.InvalidSignatureError:
            raise AuthenticationError("the token's signature does not verify with the tenant's key") from None
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationError(f"the token has no {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"the token is not valid ({type(exc).__name__})") from None
        if claims.get("iss") not in self._issuers:
            raise AuthenticationError(
                f"the token was not issued by Microsoft Entra ID for tenant {self.tenant_id}"
            )
        if str(claims.get("tid")).lower() != self.tenant_id:
            raise AuthenticationError(f"the token was issued for another tenant, not {self.tenant_id}")
        return claims

    def principal(self, claims: Mapping[str, Any]) -> Principal:
        """Map validated claims to a principal.

        The identity type comes from what the token says, never from a claim it lacks
        (:func:`identity_type`): a delegated token is a user whose id comes from :attr:`user_id_claim`;
        an app-only token (``idtyp`` ``app``) is an app, identified by ``azp`` (v2) or ``appid`` (v1)
        and bound to the agent ids of that client id.

        Raises:
            AuthenticationError: The token does not say which kind it is, or the claim the user id or
                client id comes from is missing or unusable.
        """
        roles = _strings(claims.get("roles"))
        if identity_type(claims) == "user":
            claim = self.user_id_claim
            raw = claims.get(claim)
            if not isinstance(raw, str) or not raw:
                raise AuthenticationError(
                    f"the token has no {claim!r} claim to take the user id from (MEMORY_AUTH_USER_ID_CLAIM)"
                )
            try:
                user_id = validate_scope_id(raw, claim)
            except ValidationError as exc:
                raise AuthenticationError(
                    f"the token's {claim!r} claim is not a usable user id: {exc.message}"
                ) from None
            scopes = frozenset(str(claims.get("scp") or "").split())
            subject = claims.get("oid") or claims.get("sub") or user_id
            return Principal(str(subject), PrincipalKind.USER, roles, scopes, user_id=user_id)
        client = claims.get("azp") or claims.get("appid")
        if not isinstance(client, str) or not client:
            raise AuthenticationError("the app-only token has no azp or appid claim naming the client")
        return Principal(client, PrincipalKind.APP, roles, agent_ids=self._bindings.get(client, frozenset()))

    # -- keys -----------------------------------------------------------------------------------
    async def _signing_key(self, kid: str) -> jwt.PyJWK:
        key = self._keys.get(kid)
        if key is None or self._stale():
            await self._refresh(kid)
            key = self._keys.get(kid)
        if key is None:
            raise AuthenticationError(
                "the token is signed with a key the tenant does not publish (unknown kid)"
            )
        return key

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= MAX_KEY_AGE_SECONDS

    async def _refresh(self, kid: str) -> None:
        """Fetch the keys if allowed now; raise when the keys ``kid`` needs cannot be had."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if kid in self._keys and not self._stale():
                return  # another request refreshed meanwhile
            now = self._clock()
            if now < self._next_attempt:
                if self._last_error is not None and kid not in self._keys:
                    raise TransientError(f"the tenant's signing keys are unavailable: {self._last_error}")
                return  # refreshed less than a minute ago: an unknown kid stays unknown
            try:
                keys, issuer = await self._download()
            except TransientError as exc:
                self._next_attempt = now + FAILED_FETCH_RETRY_SECONDS
                self._last_error = str(exc)
                if kid in self._keys:  # a routine refresh failed: keep serving with the cached keys
                    logger.warning(
                        "refreshing the tenant's signing keys failed; the cached keys stay: %s", exc
                    )
                    return
                logger.error("the tenant's signing keys could not be fetched: %s", exc)
                raise TransientError(f"the tenant's signing keys are unavailable: {exc}") from None
            self._keys = keys
            if issuer:
                self._issuers = self._issuers | {issuer.replace("{tenantid}", self.tenant_id)}
            self._fetched_at = now
            self._next_attempt = now + MIN_REFRESH_SECONDS
            self._last_error = None
            logger.info("fetched %s signing keys of tenant %s", len(keys), self.tenant_id)

    async def _download(self) -> tuple[dict[str, jwt.PyJWK], str | None]:
        config = await self._fetch(self.metadata_url)
        jwks_uri = config.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not _fetchable(jwks_uri):
            raise TransientError(f"the OpenID configuration at {self.metadata_url} has no usable jwks_uri")
        issuer = config.get("issuer")
        document = await self._fetch(jwks_uri)
        keys: dict[str, jwt.PyJWK] = {}
        entries = document.get("keys")
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or entry.get("kty") != "RSA" or entry.get("use", "sig") != "sig":
                continue
            kid = entry.get("kid")
            if not isinstance(kid, str) or not kid:
                continue
            try:
                keys[kid] = jwt.PyJWK(entry, algorithm=_ALGORITHM)
            except jwt.PyJWTError as exc:
                logger.warning("skipping signing key %s of %s: %s", kid, jwks_uri, exc)
        if not keys:
            raise TransientError(f"the key set at {jwks_uri} has no RSA signing key")
        return keys, issuer if isinstance(issuer, str) and issuer else None

    async def _default_fetch(self, url: str) -> Mapping[str, Any]:
        return await asyncio.to_thread(_get_json, url, self._fetch_timeout)


def identity_type(claims: Mapping[str, Any]) -> str:
    """``"user"`` or ``"app"``: what kind of caller a validated token stands for.

    Microsoft Entra ID says it in the ``idtyp`` optional claim (requested for access tokens by the app
    registration, ``infra/app/api-identity.bicep``): ``app`` for an app-only token, ``user`` for a
    delegated one. Without ``idtyp``, only a delegated token is recognised, by its ``scp`` claim (every
    delegated token has one; an app-only token never does). A token is never taken for app-only
    because a claim is missing: one with neither ``idtyp`` nor ``scp``, with an ``idtyp`` of another
    value, or with ``idtyp`` ``app`` beside an ``scp`` is refused.

    Raises:
        AuthenticationError: The token is ambiguous.
    """
    idtyp = claims.get("idtyp")
    delegated = "scp" in claims
    if idtyp == "app" and not delegated:
        return "app"
    if idtyp == "user" or (idtyp is None and delegated):
        return "user"
    if idtyp is None:
        raise AuthenticationError(
            "the token says neither whether it is app-only (no 'idtyp' claim) nor delegated (no 'scp' "
            "claim); request the idtyp optional claim in the API's app registration"
        )
    if idtyp == "app":
        raise AuthenticationError("the token says it is app-only (idtyp 'app') but carries a delegated 'scp'")
    raise AuthenticationError(f"the token's 'idtyp' claim is {str(idtyp)[:20]!r}, not 'app' or 'user'")
