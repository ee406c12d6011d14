"""Memory records: what is remembered, with its scope, status, kind and provenance.

Pure data with validation; no I/O. Timestamps are timezone-aware UTC datetimes. Scope ids, memory ids
and categories are validated against short, documented character sets before they reach any filter
or SQL (see :func:`validate_scope_id`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from memory_core.domain.validation import (
    CATEGORY_PATTERN,
    CONTROL_CHARACTERS,
    MAX_MEMORY_CHARS,
    MAX_STATUS_REASON,
    MAX_SUMMARY_CHARS,
    AgentId,
    CategoryName,
    UserId,
    UtcDateTime,
    check_length,
    new_memory_id,
    unit_interval,
    validate_memory_id,
    validate_scope_id,
)

__all__ = [
    "FORGOTTEN_TEXT",
    "IMMUTABLE_FIELDS",
    "MAX_PROVENANCE",
    "QUOTING_METADATA",
    "MemoryKind",
    "MemoryRecord",
    "MemoryStatus",
    "Provenance",
    "Scope",
    "check_event_span",
    "deleted_on_request",
    "forgotten_record",
    "forgotten_state",
    "status_note",
]


class MemoryStatus(StrEnum):
    """Lifecycle of a memory. ``deleted`` is a soft delete: never returned by search."""

    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"


def check_event_span(start: datetime | None, end: datetime | None) -> None:
    """An event time is a span: ``event_until`` needs ``event_at`` and comes after it.

    Raises:
        ValueError: Saying which of the two is wrong.
    """
    if end is None:
        return
    if start is None:
        raise ValueError("event_until needs event_at (the start of the span it ends)")
    if end <= start:
        raise ValueError(f"event_until ({end.isoformat()}) must be later than event_at ({start.isoformat()})")


#: The ``agent_id`` every face (Python API, command line, HTTP API, MCP) uses when none is given.
DEFAULT_AGENT_ID = "default"


class Scope(BaseModel):
    """The ``(user_id, agent_id)`` pair every memory belongs to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: UserId
    agent_id: AgentId

    @classmethod
    def of(cls, user_id: object, agent_id: object) -> Scope:
        """Build a validated scope; raises :class:`ValidationError` naming the bad field."""
        return cls.model_construct(
            user_id=validate_scope_id(user_id, "user_id"),
            agent_id=validate_scope_id(agent_id, "agent_id"),
        )


class MemoryKind(StrEnum):
    """The two kinds of long-term memory (DESIGN section 7).

    ``fact``: what extraction distils from what was said (a preference, a constraint, a plan...);
    ``episode``: the user's own words from one turn, dated, with the speaker.
    """

    FACT = "fact"
    EPISODE = "episode"


#: Most provenance entries a memory keeps (the most recent; a restated fact gains one per restatement).
MAX_PROVENANCE = 20
#: A speaker's name: 1-64 characters, no control characters.
SpeakerName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")]


class Provenance(BaseModel):
    """Where a memory came from: one turn, the message in it, and the span of that message's text.

    Attributes:
        turn_id: The turn.
        message: Index of the message in the turn.
        start: Start of the span in the message's text (characters).
        end: End of the span (exclusive); ``start == end == 0`` when the span is not known.
        speaker: Who said it (the message's ``name``, else its role).
        session_id: The conversation session the turn belonged to, when the turn named one (left out
            of the JSON when unknown, so records without one read and write as before).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str = Field(min_length=1, max_length=128)
    message: int = Field(default=0, ge=0)
    start: int = Field(default=0, ge=0)
    end: int = Field(default=0, ge=0)
    speaker: SpeakerName | None = None
    session_id: str | None = None

    @field_validator("session_id")
    @classmethod
    def _session(cls, value: str | None) -> str | None:
        return None if value is None else validate_scope_id(value, "session_id")

    # No return annotation: pydantic would take it for the JSON schema, which stays that of the fields.
    @model_serializer(mode="wrap")
    def _omit_unknown_session(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data: dict[str, Any] = handler(self)
        if self.session_id is None:
            data.pop("session_id", None)
        return data


class MemoryRecord(BaseModel):
    """One long-term memory, as stored and as returned to callers.

    ``importance``, ``retention_score``, ``access_count``, ``updated_at``, ``status`` and ``kind`` are
    top-level so that filters and scoring profiles can use them directly. ``provenance`` lists the turns
    (and spans) the memory came from, most recent last. ``valid_from`` / ``valid_until`` say when what
    it says held; a memory superseded by a later statement has ``valid_until`` and ``superseded_by``
    set, and searches leave it out unless asked for superseded memories.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=new_memory_id)
    user_id: UserId
    agent_id: AgentId
    memory: str
    summary: str = ""
    category: CategoryName = "general"
    importance: float = 0.5
    confidence: float = 0.5
    status: MemoryStatus = MemoryStatus.ACTIVE
    source: str = "manual"
    kind: MemoryKind = MemoryKind.FACT
    retention_score: float = 1.0
    access_count: int = Field(default=0, ge=0)
    created_at: UtcDateTime
    updated_at: UtcDateTime
    last_accessed_at: UtcDateTime | None = None
    expires_at: UtcDateTime | None = None
    #: Since when what the memory says holds (when it was said).
    valid_from: UtcDateTime | None = None
    #: Until when it held: set when something said later superseded it (``None``: it holds now).
    valid_until: UtcDateTime | None = None
    #: The memory that holds now in its place.
    superseded_by: str | None = None
    #: When what it says happened or will happen, as the user stated it ("last Friday", 3月14日): the
    #: first instant of the span (``None``: it states no time; when it was said is ``valid_from``).
    event_at: UtcDateTime | None = None
    #: The first instant after that span (exclusive: "yesterday" ends at today's midnight).
    event_until: UtcDateTime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: list[Provenance] = Field(default_factory=list, max_length=MAX_PROVENANCE)
    embedding: list[float] | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return validate_memory_id(value, "id")

    @field_validator("superseded_by")
    @classmethod
    def _superseded_by(cls, value: str | None) -> str | None:
        return None if value is None else validate_memory_id(value, "superseded_by")

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        text = value.strip()
        if not text:
            raise ValueError("memory text must not be empty")
        check_length(text, MAX_MEMORY_CHARS, "memory text")
        if CONTROL_CHARACTERS.search(text):
            raise ValueError("memory text must not contain control characters")
        return text

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        return check_length(value.strip(), MAX_SUMMARY_CHARS, "summary")

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if not value or len(value) > 64 or not CATEGORY_PATTERN.fullmatch(value):
            raise ValueError("source must be 1-64 letters, digits, _ - or .")
        return value

    @field_validator("importance", "confidence", "retention_score")
    @classmethod
    def _unit_interval(cls, value: float, info: ValidationInfo) -> float:
        return unit_interval(value, str(info.field_name))

    @field_validator("embedding")
    @classmethod
    def _embedding(cls, value: list[float] | None) -> list[float] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("embedding must not be empty (omit it to have it computed)")
        if len(value) > 4096:
            raise ValueError(f"embedding has {len(value)} dimensions; the maximum is 4096")
        if not all(math.isfinite(x) for x in value):
            raise ValueError("embedding must contain only finite numbers")
        return value

    @model_validator(mode="after")
    def _times(self) -> MemoryRecord:
        if self.updated_at < self.created_at:
            raise ValueError("updated_at must not be earlier than created_at")
        check_event_span(self.event_at, self.event_until)
        return self

    @property
    def scope(self) -> Scope:
        return Scope.model_construct(user_id=self.user_id, agent_id=self.agent_id)

    @property
    def superseded(self) -> bool:
        """Whether something said later replaced what this memory says (it is history, not current)."""
        return self.valid_until is not None

    def without_embedding(self) -> MemoryRecord:
        return self.model_copy(update={"embedding": None})

    def to_json_dict(self, *, include_embedding: bool = True) -> dict[str, Any]:
        """Every field as JSON-ready values (ISO 8601 timestamps)."""
        data = self.model_dump(mode="json")
        if not include_embedding:
            data.pop("embedding", None)
        return data


#: The text a memory forgotten on request keeps: a tombstone says that it was, never what it said.
FORGOTTEN_TEXT = "[forgotten on request]"
#: Metadata keys that quote what was said (gone from a forgotten memory and its recorded states).
QUOTING_METADATA = ("evidence", "status_reason")


def forgotten_state(
    state: Mapping[str, Any] | None, redact: Callable[[str], str] | None = None
) -> dict[str, Any] | None:
    """A memory's recorded state (a record's JSON) as its tombstone: id, scope, kind, status, times and
    sources stay; its words, summary, vector and the metadata that quotes it go. With ``redact``, only
    the words ``redact`` takes out of its text go (a memory that lost part of what it said)."""
    if state is None:
        return None
    metadata = {k: v for k, v in dict(state.get("metadata") or {}).items() if k not in QUOTING_METADATA}
    if redact is not None:
        text = redact(str(state.get("memory", ""))) or FORGOTTEN_TEXT
        return {**state, "memory": text, "summary": "", "metadata": metadata}
    return {**state, "memory": FORGOTTEN_TEXT, "summary": "", "embedding": None, "metadata": metadata}


def forgotten_record(record: MemoryRecord) -> MemoryRecord:
    """``record`` as the tombstone of a memory forgotten on request (see :func:`forgotten_state`)."""
    state = forgotten_state(record.model_dump())
    assert state is not None
    return MemoryRecord.model_validate(state)


def deleted_on_request(record: MemoryRecord, turn_id: str, reason: str, at: datetime) -> MemoryRecord:
    """``record`` deleted by the forget request of turn ``turn_id`` at ``at`` (its status, why, when and
    by which turn; :func:`forgotten_record` makes the tombstone of it)."""
    metadata = status_note({**record.metadata, "deleted_by_turn": turn_id}, reason, at)
    return record.model_copy(update={"status": MemoryStatus.DELETED, "metadata": metadata})


def status_note(metadata: Mapping[str, Any], reason: str, at: datetime) -> dict[str, Any]:
    """``metadata`` with why and when a memory's status changed (``status_reason``, cut to
    :data:`MAX_STATUS_REASON` characters, and ``status_changed_at``)."""
    return {**metadata, "status_reason": reason[:MAX_STATUS_REASON], "status_changed_at": at.isoformat()}


#: Fields a partial update never changes: identity, scope and birth.
IMMUTABLE_FIELDS = frozenset({"id", "user_id", "agent_id", "created_at"})


# --------------------------------------------------------------------------------------------
# Turns, candidates and decisions (the ingestion pipeline)
# --------------------------------------------------------------------------------------------


