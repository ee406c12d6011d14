"""Messages: turns, the candidates extraction makes of them, decisions, history and recall updates."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from memory_core.domain.records import (
    FORGOTTEN_TEXT,
    MemoryRecord,
    Scope,
    SpeakerName,
    check_event_span,
    forgotten_state,
)
from memory_core.domain.validation import (
    MAX_MEMORY_CHARS,
    MESSAGE_CONTROL_CHARACTERS,
    RESERVED_METADATA_KEYS,
    AgentId,
    CategoryName,
    UserId,
    UtcDateTime,
    check_metadata_depth,
    describe_value,
    validate_caller_metadata,
    validate_memory_id,
    validate_scope_id,
)
from memory_core.language.secrets import redact_secrets

__all__ = [
    "MAX_RECALL_IDS",
    "MAX_TURN_BYTES",
    "RECALL_SCHEMA",
    "TURN_SCHEMA",
    "CandidateKind",
    "Decision",
    "HistoryEntry",
    "MemoryCandidate",
    "MemoryEvent",
    "MessageRole",
    "QueueDeadLetter",
    "RecallUpdate",
    "Turn",
    "TurnMessage",
    "message_id_for",
    "session_id_for",
    "turn_json_bytes",
]


TURN_SCHEMA = "memory-core.turn.v1"


#: Turn ids double as Service Bus message ids (at most 128 characters).
TURN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


MAX_TURN_MESSAGES = 100


def _expect_schema(value: str, schema: str) -> str:
    """``value``, if it names ``schema``; a ``ValueError`` otherwise."""
    if value != schema:
        raise ValueError(f"unsupported schema {describe_value(value)}; expected {schema!r}")
    return value


def _message_id(value: str, field: str, more: str = "") -> str:
    """``value``, if it is an id :data:`TURN_ID_PATTERN` allows; a ``ValueError`` naming ``field`` (and
    saying ``more``) otherwise."""
    if not TURN_ID_PATTERN.fullmatch(value):
        raise ValueError(f"{field} {describe_value(value)} must be 1-128 letters, digits, _ . : -{more}")
    return value


MAX_MESSAGE_CHARS = 32000


#: The most a turn's JSON may take (UTF-8): under the HTTP API's 256 KiB body and a Service Bus
#: Standard message (256 KiB, headers included), with room to spare for both.
MAX_TURN_BYTES = 192 * 1024


class MessageRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class TurnMessage(BaseModel):
    """One message of a turn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: MessageRole
    text: str = Field(
        max_length=MAX_MESSAGE_CHARS,
        # the JSON schema says what the validator below checks (no control characters but tab, LF, CR)
        json_schema_extra={"pattern": "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"},
    )
    #: Who said it, when the role alone does not tell (two people in one conversation).
    name: SpeakerName | None = None

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        found = MESSAGE_CONTROL_CHARACTERS.search(value)
        if found:
            raise ValueError(
                f"contains the control character U+{ord(found.group()):04X} at position {found.start()}; "
                "only tab, line feed and carriage return are allowed"
            )
        # Secrets (passwords, PINs, API keys, card numbers, national identifiers) are withheld as the
        # message is made, so no queue, journal or memory ever holds them.
        return redact_secrets(value)[0][:MAX_MESSAGE_CHARS]


class Turn(BaseModel):
    """A conversation turn as published to the queue (``memory-core.turn.v1``)."""

    schema_: str = Field(default=TURN_SCHEMA, alias="schema")
    turn_id: str
    user_id: UserId
    agent_id: AgentId
    session_id: str | None = None
    occurred_at: UtcDateTime
    messages: list[TurnMessage] = Field(min_length=1, max_length=MAX_TURN_MESSAGES)
    #: The caller's own key-value data, merged into the metadata of every memory this turn adds or
    #: updates (a key memory-core writes itself, :data:`RESERVED_METADATA_KEYS`, is refused). Left out
    #: of the JSON when empty.
    metadata: dict[str, JsonValue] = Field(
        default_factory=dict,
        json_schema_extra={
            "propertyNames": {
                "pattern": "^[^\\x00-\\x1f\\x7f]{1,128}$",
                "not": {"enum": [key for key in sorted(RESERVED_METADATA_KEYS)]},
            }
        },
    )

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, value: str) -> str:
        return _expect_schema(value, TURN_SCHEMA)

    @field_validator("turn_id")
    @classmethod
    def _turn_id(cls, value: str) -> str:
        return _message_id(value, "turn_id", " (starting with a letter or digit)")

    @field_validator("session_id")
    @classmethod
    def _session(cls, value: str | None) -> str | None:
        return None if value is None else validate_scope_id(value, "session_id")

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_depth(cls, value: object) -> object:
        check_metadata_depth(value)  # before pydantic walks it: a deep value is refused in one line
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        return validate_caller_metadata(value)

    @model_validator(mode="after")
    def _size(self) -> Turn:
        size = turn_json_bytes(self.to_json_dict())
        if size > MAX_TURN_BYTES:
            raise ValueError(
                f"the turn is {size} bytes of JSON; the maximum is {MAX_TURN_BYTES} (leave out older "
                "messages or shorten them; the agent provider does so itself)"
            )
        return self

    @property
    def scope(self) -> Scope:
        return Scope.model_construct(user_id=self.user_id, agent_id=self.agent_id)

    def user_message_with(self, words: str) -> int | None:
        """The index of the first user message whose text holds ``words`` (``None`` for none, or for no
        words): where a statement a model quoted was said."""
        if not words:
            return None
        return next(
            (i for i, m in enumerate(self.messages) if m.role is MessageRole.USER and words in m.text), None
        )

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True)
        if not data.get("metadata"):
            data.pop("metadata", None)
        for message in data["messages"]:
            if message.get("name") is None:
                message.pop("name", None)
        return data


def turn_json_bytes(data: Any) -> int:
    """The UTF-8 size of ``data`` as compact JSON (how a turn travels on the queue)."""
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class CandidateKind(StrEnum):
    """A durable statement to remember, a request to forget something, or the episode of a message."""

    FACT = "fact"
    FORGET = "forget"
    EPISODE = "episode"


class MemoryCandidate(BaseModel):
    """Something extraction found in a turn, before consolidation decides what to do with it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: CandidateKind = CandidateKind.FACT
    memory: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)
    category: CategoryName = "general"
    importance: float = Field(default=0.65, ge=0.0, le=1.0)
    confidence: float = Field(default=0.55, ge=0.0, le=1.0)
    expires_at: UtcDateTime | None = None
    #: When what it says happened or will happen (the span's first instant, and the first after it).
    event_at: UtcDateTime | None = None
    event_until: UtcDateTime | None = None
    source: str = "rule-fallback"
    #: The sentence of the turn the candidate came from.
    evidence: str = ""
    #: Index of the message it came from, and who said it.
    message: int = Field(default=0, ge=0)
    speaker: SpeakerName | None = None

    @model_validator(mode="after")
    def _event_span(self) -> MemoryCandidate:
        check_event_span(self.event_at, self.event_until)
        return self

    def forgotten(self, redact: Callable[[str], str] | None = None) -> MemoryCandidate:
        """This candidate as a turn's journal keeps it once a forget request took what it said: without
        the words ``redact`` takes out of its text and evidence, or, without ``redact``, without any
        (the text :data:`~memory_core.domain.records.FORGOTTEN_TEXT`)."""
        memory = (redact(self.memory) if redact is not None else "") or FORGOTTEN_TEXT
        evidence = redact(self.evidence) if redact is not None and self.evidence else ""
        return self.model_copy(update={"memory": memory, "evidence": evidence})

class MemoryEvent(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NONE = "NONE"


class Decision(BaseModel):
    """What consolidation decided for one candidate, and why."""

    model_config = ConfigDict(frozen=True)

    event: MemoryEvent
    candidate: MemoryCandidate
    memory_id: str | None = None
    before: MemoryRecord | None = None
    after: MemoryRecord | None = None
    reason: str


#: The reason a recorded change of a memory forgotten on request keeps.
FORGOTTEN_REASON = "withheld: the memory was forgotten on request"


class HistoryEntry(BaseModel):
    """One recorded change to a memory (kept forever, readable per memory and per turn)."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    user_id: UserId
    agent_id: AgentId
    event: MemoryEvent
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str
    turn_id: str | None = None
    at: datetime

    def forgotten(self, redact: Callable[[str], str] | None = None) -> HistoryEntry:
        """This entry of a memory forgotten on request: the event, time and turn stay, and the reason
        (which may quote what was said) says only that it was forgotten. Its states lose their words
        (:func:`~memory_core.domain.records.forgotten_state`), or, with ``redact``, only the words
        ``redact`` takes out of their text (a memory that lost part of what it said)."""
        return self.model_copy(
            update={
                "before": forgotten_state(self.before, redact),
                "after": forgotten_state(self.after, redact),
                "reason": FORGOTTEN_REASON,
            }
        )

    @classmethod
    def of_change(
        cls,
        event: MemoryEvent,
        scope: Scope,
        memory_id: str,
        before: MemoryRecord | None,
        after: MemoryRecord | None,
        *,
        reason: str,
        at: datetime,
        turn_id: str | None = None,
    ) -> HistoryEntry:
        """The entry of one change of a memory (its states without embeddings)."""
        return cls(
            memory_id=memory_id,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            event=event,
            before=None if before is None else before.to_json_dict(include_embedding=False),
            after=None if after is None else after.to_json_dict(include_embedding=False),
            reason=reason,
            turn_id=turn_id,
            at=at,
        )


RECALL_SCHEMA = "memory-core.recall.v1"


#: Memory ids one recall update may carry.
MAX_RECALL_IDS = 1000


class RecallUpdate(BaseModel):
    """Memories returned to an agent, sent on the scope's ordered queue path (``memory-core.recall.v1``).

    Applying one reinforces each memory once; ``recall_id`` (with the scope, :func:`message_id_for`) is
    the message id, so a redelivered update is recognised.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: str = Field(default=RECALL_SCHEMA, alias="schema")
    recall_id: str = Field(default_factory=lambda: f"recall-{uuid.uuid4().hex}")
    user_id: UserId
    agent_id: AgentId
    memory_ids: list[str] = Field(min_length=1, max_length=MAX_RECALL_IDS)
    at: UtcDateTime

    @field_validator("schema_")
    @classmethod
    def _schema(cls, value: str) -> str:
        return _expect_schema(value, RECALL_SCHEMA)

    @field_validator("recall_id")
    @classmethod
    def _recall_id(cls, value: str) -> str:
        return _message_id(value, "recall_id")

    @field_validator("memory_ids")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        return [validate_memory_id(v, "memory_ids") for v in value]

    @property
    def scope(self) -> Scope:
        return Scope.model_construct(user_id=self.user_id, agent_id=self.agent_id)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def message_id_for(scope: Scope, kind: Literal["turn", "recall"], item_id: str) -> str:
    """The queue message id of a turn or recall update: unique per scope, so duplicate detection (which
    the queue applies to every message id it saw in its window) drops a repeat of the same scope's
    turn and never another user's turn that happens to reuse the id.

    ``turn:`` or ``recall:`` and the SHA-256 of ``user_id``, ``agent_id`` and the id (69 or 71 characters; Service
    Bus allows 128).
    """
    import hashlib

    digest = hashlib.sha256(f"{scope.user_id}\x1f{scope.agent_id}\x1f{item_id}".encode()).hexdigest()
    return f"{kind}:{digest}"


def session_id_for(scope: Scope) -> str:
    """The queue session of a scope: every write of one scope is processed in order, one at a time.

    Service Bus session ids are at most 128 characters; scope ids can be 128 each, so long pairs are
    hashed (stable across processes).
    """
    import hashlib

    raw = f"{scope.user_id}|{scope.agent_id}"
    if len(raw) <= 128:
        return raw
    return "h:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class QueueDeadLetter:
    """A message the broker dead-lettered itself (Service Bus's dead-letter sub-queue), as peeked.

    Attributes:
        sequence_number: Its number in the dead-letter sub-queue (what a replay names).
        message_id: The message id (:func:`message_id_for`).
        session_id: The queue session (:func:`session_id_for`).
        subject: The schema the publisher set (:data:`TURN_SCHEMA`, :data:`RECALL_SCHEMA`).
        reason: Why the broker dead-lettered it (``MaxDeliveryCountExceeded``, ``TTLExpiredException``, ...).
        description: The broker's description of the reason.
        delivery_count: Deliveries before it was dead-lettered.
        enqueued_at: When it was enqueued.
        body: The message body (what it says is for the pipeline, never printed whole).
    """

    sequence_number: int
    message_id: str
    session_id: str | None
    subject: str | None
    reason: str
    description: str
    delivery_count: int | None
    enqueued_at: datetime | None
    body: bytes
