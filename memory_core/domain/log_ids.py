"""How user, agent and session ids appear in logs: as short keyed hashes, never as written.

User ids may be email addresses, and a queue session id is ``user_id|agent_id``. A log line names a
scope as ``u:<12 hex>/a:<12 hex>``: the same scope always gets the same tag (so lines correlate),
and the tag does not give the id back.

The hash is HMAC-SHA-256 under the process's key (:func:`use_log_key`, set by
:func:`memory_core.bootstrap.configure_log_ids` and, in the Function App, from the key its instances
share): with a secret key, someone who has only the logs
cannot confirm a guessed address by hashing it. Without a key it is a plain SHA-256 (domain
separated), which keeps ids out of logs but can be matched against a list of candidate addresses.
See docs/security.md, "Ids in logs".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from urllib.parse import parse_qs, unquote, unquote_plus

__all__ = [
    "agent_tag",
    "keyed",
    "path_ids",
    "redact",
    "redact_path",
    "scope_tag",
    "session_tag",
    "use_log_key",
    "user_tag",
]

#: Hex digits of a tag: 48 bits, so two of a million ids share a tag with a chance of about 2e-3.
TAG_HEX = 12

_UNKEYED_PREFIX = b"memory-core log id\x1f"

#: What looks like an email address in free text (an exception's message, a URL, ``@`` or ``%40``).
_EMAIL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]*(?:@|%40)[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")

#: A tag this module made.
_TAG = re.compile(rf"[uas]:[0-9a-f]{{{TAG_HEX}}}")

#: An id an error message quotes after its name (``user_id 'alice'``, ``user 'alice'``, ``agent_id='bot'``).
_QUOTED = re.compile(r"\b(user_id|agent_id|user|agent)( ?=? ?| eq )(['\"])([A-Za-z0-9][A-Za-z0-9_.@:\-]{0,127})\3")

#: A path segment after one of these is an id (``/api/users/{user_id}/agents/{agent_id}/...``).
_ID_SEGMENTS = {"users": "u", "agents": "a"}

#: Query parameters whose values are ids.
_ID_PARAMETERS = {"user_id": "u", "agent_id": "a"}

_lock = threading.Lock()
_key: list[bytes | None] = [None]


def use_log_key(key: bytes | str | None) -> None:
    """Hash ids under ``key`` from now on (``None`` or empty: the unkeyed hash)."""
    with _lock:
        _key[0] = (key.encode("utf-8") if isinstance(key, str) else key) or None


def keyed() -> bool:
    """Whether tags are keyed (a secret key is set)."""
    return _key[0] is not None


def _digest(kind: str, value: str) -> str:
    data = f"{kind}\x1f{value}".encode()
    key = _key[0]
    if key is None:
        return hashlib.sha256(_UNKEYED_PREFIX + data).hexdigest()[:TAG_HEX]
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:TAG_HEX]


def user_tag(user_id: str | None) -> str:
    """``u:`` and the hash of a user id (``u:*`` for none: every user)."""
    return "u:*" if user_id is None else f"u:{_digest('u', user_id)}"


def agent_tag(agent_id: str | None) -> str:
    """``a:`` and the hash of an agent id (``a:*`` for none: every agent)."""
    return "a:*" if agent_id is None else f"a:{_digest('a', agent_id)}"


def scope_tag(user_id: str | None, agent_id: str | None = None) -> str:
    """``u:<hash>/a:<hash>``: a scope as a log names it (``a:*`` when ``agent_id`` is ``None``)."""
    return f"{user_tag(user_id)}/{agent_tag(agent_id)}"


def session_tag(session_id: str | None) -> str:
    """A queue session as a log names it: a scope's ``user|agent`` session as its :func:`scope_tag`
    (so it matches the scope's other lines), any other (a long pair's ``h:`` session, an unkeyed hash
    of the pair that a guess could be checked against) as ``s:`` and its keyed hash."""
    if not session_id:
        return "-"
    user, bar, agent = session_id.partition("|")
    if bar:
        return scope_tag(user, agent)
    return f"s:{_digest('s', session_id)}"


def _email(match: re.Match[str]) -> str:
    return user_tag(unquote(match.group(0)))


def redact(
    text: object, user_id: str | None = None, agent_id: str | None = None, *, session_id: str | None = None
) -> str:
    """``text`` (an exception, a message) with the ids it may carry replaced by their tags: ``user_id``,
    ``agent_id``, the session and the ids its ``user|agent`` form names, and every email-shaped word."""
    out = str(text)
    found: dict[str, str] = {}
    if session_id:
        found[session_id] = session_tag(session_id)
        user, bar, agent = session_id.partition("|")
        if bar:
            found.setdefault(user, user_tag(user))
            found.setdefault(agent, agent_tag(agent))
    if user_id:
        found[user_id] = user_tag(user_id)
    if agent_id:
        found.setdefault(agent_id, agent_tag(agent_id))
    if found:  # one pass, longest first: a session before the ids inside it, never inside a tag
        names = "|".join(re.escape(value) for value in sorted(found, key=len, reverse=True))
        pattern = re.compile(rf"(?<![A-Za-z0-9_@\-])(?:{names})(?![A-Za-z0-9_@\-])")
        out = pattern.sub(lambda match: found[match.group(0)], out)
    out = _QUOTED.sub(_quoted, out)
    return _EMAIL.sub(_email, out)


def _quoted(match: re.Match[str]) -> str:
    name, between, quote, value = match.groups()
    if _TAG.fullmatch(value):
        return match.group(0)
    tag = agent_tag(value) if name.startswith("agent") else user_tag(value)
    return f"{name}{between}{quote}{tag}{quote}"


def path_ids(path: str) -> tuple[str | None, str | None]:
    """The user and agent ids a request path (and query) names, or ``None``."""
    base, _, query = path.partition("?")
    found: dict[str, str] = {}
    segments = base.split("/")
    for index in range(1, len(segments)):
        kind = _ID_SEGMENTS.get(segments[index - 1])
        if kind is not None and segments[index]:
            found.setdefault(kind, unquote(segments[index]))
    for name, values in parse_qs(query).items():
        kind = _ID_PARAMETERS.get(name)
        if kind is not None and values:
            found.setdefault(kind, values[0])
    return found.get("u"), found.get("a")


def redact_path(path: str) -> str:
    """A request path (and query) with the ids it carries replaced by tags: the segment after
    ``users`` or ``agents`` and the values of ``user_id`` and ``agent_id``."""
    base, question, query = path.partition("?")
    segments = base.split("/")
    for index in range(1, len(segments)):
        kind = _ID_SEGMENTS.get(segments[index - 1])
        if kind is not None and segments[index]:
            value = unquote(segments[index])
            segments[index] = user_tag(value) if kind == "u" else agent_tag(value)
    if question:
        query = "&".join(_redact_parameter(part) for part in query.split("&"))
    return _EMAIL.sub(_email, "/".join(segments) + question + query)


def _redact_parameter(part: str) -> str:
    name, equals, value = part.partition("=")
    kind = _ID_PARAMETERS.get(name)
    if kind is None or not equals:
        return part
    raw = unquote_plus(value)
    return f"{name}={user_tag(raw) if kind == 'u' else agent_tag(raw)}"
