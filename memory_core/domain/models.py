"""Domain model: memory records, search options and search results.

Pure data with validation; no I/O. Timestamps are timezone-aware UTC datetimes. Scope ids, memory ids
and categories are validated against short, documented character sets before they reach any filter
or SQL (see :func:`validate_scope_id`).
"""

from __future__ import annotations

import json
import math
import re
import types
import typing
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from memory_core.errors import ValidationError

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "CONTROL_CHARACTERS",
    "IMMUTABLE_FIELDS",
    "MAX_MEMORY_CHARS",
    "MAX_PROVENANCE",
    "MAX_RECALL_IDS",
    "MAX_STATUS_REASON",
    "MAX_TURN_BYTES",
    "MESSAGE_CONTROL_CHARACTERS",
    "RECALL_SCHEMA",
    "RESERVED_METADATA_KEYS",
    "TURN_SCHEMA",
    "AgentId",
    "CandidateKind",
    "Decision",
    "HistoryEntry",
    "MemoryCandidate",
    "MemoryEvent",
    "MemoryKind",
    "MemoryRecord",
    "MemorySearchOptions",
    "MemoryStatus",
    "MessageRole",
    "OrderBy",
    "Provenance",
    "RankingProfile",
    "RecallUpdate",
    "Scope",
    "ScoreBreakdown",
    "SearchHit",
    "SearchMode",
    "SearchResult",
    "Turn",
    "TurnMessage",
    "UserId",
    "UtcDateTime",
    "ensure_utc",
    "field_type",
    "message_id_for",
    "new_memory_id",
    "parse_model",
    "session_id_for",
    "status_note",
    "turn_json_bytes",
    "utcnow",
    "validate_caller_metadata",
    "validate_category",
    "validate_memory_id",
    "validate_memory_ids",
    "validate_positive_int",
    "validate_scope_id",
]

#: Scope ids (``user_id``, ``agent_id``): 1-128 characters, starting with a letter or digit, then
#: letters, digits and ``_ - . @ :``. Nothing that can close a quote or start an expression.
SCOPE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:\-]{0,127}")
#: Memory ids follow Azure AI Search's key rules: 1-128 letters, digits, ``_`` and ``-``.
MEMORY_ID_PATTERN = re.compile(r"[A-Za-z0-9_\-]{1,128}")
#: Categories: 1-64 word characters of any script (so ``食事`` works), digits, ``_ - .``.
CATEGORY_PATTERN = re.compile(r"[\w.\-]{1,64}")
MAX_MEMORY_CHARS = 4000
MAX_SUMMARY_CHARS = 1000
#: What memory text may not contain: the C0 control characters other than tab and line feed.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f]")
#: Control characters a message may not carry (tab, line feed and carriage return are text).
MESSAGE_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: Longest ``status_reason`` kept in a memory's metadata.
MAX_STATUS_REASON = 500


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validate_scope_id(value: object, field: str) -> str:
    """Return ``value`` if it is a valid scope id, else raise :class:`ValidationError` naming ``field``."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required and must be a non-empty string")
    if len(value) > 128:
        raise ValidationError(field, f"is {len(value)} characters long; the maximum is 128")
    if not SCOPE_ID_PATTERN.fullmatch(value):
        raise ValidationError(
            field,
            f"{_describe(value)} has characters outside the allowed set: it must start with a letter or "
            "digit and contain only letters, digits and _ - . @ :",
        )
    return value


def validate_memory_id(value: object, field: str = "id") -> str:
    """Return ``value`` if it is a valid memory id, else raise :class:`ValidationError`."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required and must be a non-empty string")
    if not MEMORY_ID_PATTERN.fullmatch(value):
        raise ValidationError(
            field, f"{_describe(value)} must be 1-128 characters of letters, digits, _ and -"
        )
    return value


def validate_memory_ids(values: Iterable[object], field: str) -> list[str]:
    """Return the valid memory ids of the sequence ``values``, each once, in order, else raise
    :class:`ValidationError` naming ``field`` (also for one string, which is not a sequence of ids)."""
    if isinstance(values, str):
        raise ValidationError(field, "must be a sequence of memory ids, not one string")
    return list(dict.fromkeys(validate_memory_id(value, field) for value in values))


def validate_positive_int(value: object, field: str) -> int:
    """Return ``value`` if it is a whole number of at least 1 (not a bool), else raise
    :class:`ValidationError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(field, "must be a positive integer")
    return value


def validate_caller_metadata(value: object, field: str = "metadata") -> dict[str, Any]:
    """Return ``value`` as a dict if it is caller metadata a memory may carry, else raise
    :class:`ValidationError` naming ``field``: a JSON object whose keys are 1-128 characters without
    control characters and none of :data:`RESERVED_METADATA_KEYS` (memory-core writes those itself)."""
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be a mapping of string keys to JSON values")
    for key in value:
        if not isinstance(key, str) or not METADATA_KEY_PATTERN.fullmatch(key):
            raise ValidationError(
                field,
                f"key {_describe(key)} must be a string of 1-{MAX_METADATA_KEY_CHARS} characters without "
                "control characters",
            )
        if key in RESERVED_METADATA_KEYS:
            raise ValidationError(
                field,
                f"key {key!r} is reserved: memory-core writes it itself (reserved keys: "
                f"{', '.join(sorted(RESERVED_METADATA_KEYS))})",
            )
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            field, f"must hold JSON values only (strings, numbers, booleans, null, lists, objects): {exc}"
        ) from None
    return dict(value)


def validate_category(value: object, field: str = "category") -> str:
    """Return the normalized (lower-cased, stripped) category or raise :class:`ValidationError`."""
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    normalized = value.strip().lower()
    if not CATEGORY_PATTERN.fullmatch(normalized):
        raise ValidationError(
            field,
            f"{_describe(value)} must be 1-64 letters (any script), digits, _ - or .",
        )
    return normalized


#: A ``user_id`` field: validated by :func:`validate_scope_id`, errors name ``user_id``.
UserId = Annotated[str, AfterValidator(lambda value: validate_scope_id(value, "user_id"))]
#: An ``agent_id`` field: validated by :func:`validate_scope_id`, errors name ``agent_id``.
AgentId = Annotated[str, AfterValidator(lambda value: validate_scope_id(value, "agent_id"))]


#: A timestamp field: naive values are taken as UTC, aware ones converted to UTC (:func:`ensure_utc`).
UtcDateTime = Annotated[datetime, AfterValidator(lambda value: ensure_utc(value))]


def field_type(model: type[BaseModel], name: str) -> tuple[Any, bool]:
    """The value type of a model field (without ``| None`` and ``Annotated`` metadata), and whether
    it may be ``None``. The adapters derive their storage types from it."""
    annotation: Any = model.model_fields[name].annotation
    nullable = typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(
        annotation
    )
    if nullable:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            annotation = args[0]
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation, nullable


def new_memory_id() -> str:
    """A fresh random memory id (32 hex digits)."""
    return uuid.uuid4().hex


def ensure_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken to be UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is outside the range of dates that can be stored") from None


def parse_model(model: type[M], data: Any) -> M:
    """Validate ``data`` into ``model``, turning pydantic's error into the project's error.

    The raised :class:`ValidationError` names the first offending field (dotted path) and says what
    is wrong with it.
    """
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        raise _from_pydantic(exc) from None


def _from_pydantic(exc: PydanticValidationError) -> ValidationError:
    errors = exc.errors(include_url=False)
    first: dict[str, Any] = dict(errors[0]) if errors else {"loc": ("?",), "msg": str(exc)}
    field = ".".join(str(part) for part in first.get("loc", ())) or exc.title
    message = str(first.get("msg", "is invalid"))
    ctx = first.get("ctx")
    original = ctx.get("error") if isinstance(ctx, dict) else None
    if isinstance(original, ValidationError):
        return ValidationError(original.field if field in {"", "?"} else field, original.message)
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return ValidationError(field, message + more)


class MemoryStatus(StrEnum):
    """Lifecycle of a memory. ``deleted`` is a soft delete: never returned by search."""

    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"


class SearchMode(StrEnum):
    """How candidates are found."""

    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"
    SEMANTIC = "semantic"


class RankingProfile(StrEnum):
    """How candidates are ranked; each maps to a scoring profile in :mod:`memory_core.domain.ranking`."""

    IMPORTANT = "important"
    RECENT = "recent"
    NONE = "none"


class OrderBy(StrEnum):
    """Explicit sort orders (``$orderby`` in Azure AI Search); relevance breaks ties."""

    UPDATED_AT_DESC = "updated_at desc"
    UPDATED_AT_ASC = "updated_at asc"
    CREATED_AT_DESC = "created_at desc"
    CREATED_AT_ASC = "created_at asc"
    IMPORTANCE_DESC = "importance desc"
    IMPORTANCE_ASC = "importance asc"
    RETENTION_SCORE_DESC = "retention_score desc"
    RETENTION_SCORE_ASC = "retention_score asc"
    ACCESS_COUNT_DESC = "access_count desc"
    LAST_ACCESSED_AT_DESC = "last_accessed_at desc"

    @property
    def field(self) -> str:
        return self.value.split(" ", 1)[0]

    @property
    def descending(self) -> bool:
        return self.value.endswith(" desc")


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
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str = Field(min_length=1, max_length=128)
    message: int = Field(default=0, ge=0)
    start: int = Field(default=0, ge=0)
    end: int = Field(default=0, ge=0)
    speaker: SpeakerName | None = None


def _unit_interval(value: float, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{field} must be a finite number between 0 and 1")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{field} must be between 0 and 1, got {value}")
    return float(value)


class MemoryRecord(BaseModel):
    """One long-term memory, as stored and as returned to callers.

    ``importance``, ``retention_score``, ``access_count``, ``updated_at``, ``status`` and ``kind`` are
    top-level so that filters and scoring profiles can use them directly. ``provenance`` lists the turns
    (and spans) the memory came from, most recent last.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=new_memory_id)
    user_id: UserId
    agent_id: AgentId
    memory: str
    summary: str = ""
    category: str = "general"
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
    metadata: dict[str, Any] = Field(default_factory=dict)
    provenance: list[Provenance] = Field(default_factory=list, max_length=MAX_PROVENANCE)
    embedding: list[float] | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return validate_memory_id(value, "id")

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        text = value.strip()
        if not text:
            raise ValueError("memory text must not be empty")
        if len(text) > MAX_MEMORY_CHARS:
            raise ValueError(f"memory text is {len(text)} characters; the maximum is {MAX_MEMORY_CHARS}")
        if CONTROL_CHARACTERS.search(text):
            raise ValueError("memory text must not contain control characters")
        return text

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        text = value.strip()
        if len(text) > MAX_SUMMARY_CHARS:
            raise ValueError(f"summary is {len(text)} characters; the maximum is {MAX_SUMMARY_CHARS}")
        return text

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        return validate_category(value)

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if not value or len(value) > 64 or not CATEGORY_PATTERN.fullmatch(value):
            raise ValueError("source must be 1-64 letters, digits, _ - or .")
        return value

    @field_validator("importance")
    @classmethod
    def _importance(cls, value: float) -> float:
        return _unit_interval(value, "importance")

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, value: float) -> float:
        return _unit_interval(value, "confidence")

    @field_validator("retention_score")
    @classmethod
    def _retention(cls, value: float) -> float:
        return _unit_interval(value, "retention_score")

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
        return self

    @property
    def scope(self) -> Scope:
        return Scope.model_construct(user_id=self.user_id, agent_id=self.agent_id)

    def without_embedding(self) -> MemoryRecord:
        return self.model_copy(update={"embedding": None})

    def to_json_dict(self, *, include_embedding: bool = True) -> dict[str, Any]:
        """Every field as JSON-ready values (ISO 8601 timestamps)."""
        data = self.model_dump(mode="json")
        if not include_embedding:
            data.pop("embedding", None)
        return data


def status_note(metadata: Mapping[str, Any], reason: str, at: datetime) -> dict[str, Any]:
    """``metadata`` with why and when a memory's status changed (``status_reason``, cut to
    :data:`MAX_STATUS_REASON` characters, and ``status_changed_at``)."""
    return {**metadata, "status_reason": reason[:MAX_STATUS_REASON], "status_changed_at": at.isoformat()}


#: Fields a partial update never changes: identity, scope and birth.
IMMUTABLE_FIELDS = frozenset({"id", "user_id", "agent_id", "created_at"})


class MemorySearchOptions(BaseModel):
    """What a search asks for. Filters are built from these fields, never from caller-supplied OData."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: SearchMode = SearchMode.HYBRID
    ranking_profile: RankingProfile = RankingProfile.IMPORTANT
    top: int = Field(default=5, ge=1, le=1000)
    order_by: OrderBy | None = None
    category: str | None = None
    include_archived: bool = False
    min_importance: float | None = None
    min_retention_score: float | None = None
    #: Only memories of this kind (``fact`` or ``episode``); both when ``None``.
    kind: MemoryKind | None = None
    #: Nearest neighbours taken by the vector leg (Azure's ``k``).
    vector_k: int = Field(default=50, ge=1, le=1000)
    #: Weight of the vector leg in hybrid fusion (Azure's vector query ``weight``; the text leg has 1);
    #: ``None``: the query language's default (:mod:`memory_core.domain.fusion`).
    vector_weight: float | None = Field(default=None, gt=0.0, le=10.0)

    @field_validator("category")
    @classmethod
    def _category(cls, value: str | None) -> str | None:
        return None if value is None else validate_category(value)

    @field_validator("min_importance", "min_retention_score")
    @classmethod
    def _bounds(cls, value: float | None) -> float | None:
        return None if value is None else _unit_interval(value, "minimum")

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> MemorySearchOptions:
        """The search options among ``values`` (other keys are ignored; ``None`` keeps the default).

        The one converter every entry point uses (the HTTP request, the CLI's arguments, the agent
        provider's configuration), so an option added here reaches the store from all of them.

        Raises:
            ValidationError: A value breaks a rule (names the option).
        """
        return parse_model(
            MemorySearchOptions,
            {name: value for name, value in values.items() if name in cls.model_fields and value is not None},
        )


class ScoreBreakdown(BaseModel):
    """How a hit's score was made, leg by leg."""

    model_config = ConfigDict(frozen=True)

    keyword_score: float | None = None
    keyword_rank: int | None = None
    vector_score: float | None = None
    vector_rank: int | None = None
    relevance: float
    profile: str | None = None
    boost: float = 1.0
    functions: dict[str, float] = Field(default_factory=dict)


class SearchHit(BaseModel):
    """One ranked memory."""

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    score: float
    reranker_score: float | None = None
    breakdown: ScoreBreakdown


class SearchResult(BaseModel):
    """Hits plus what the engine did (and could not do) to produce them."""

    model_config = ConfigDict(frozen=True)

    hits: list[SearchHit]
    mode: SearchMode
    ranking_profile: RankingProfile
    semantic_ranker_available: bool = True
    notes: list[str] = Field(default_factory=list)


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


# --------------------------------------------------------------------------------------------
# Turns, candidates and decisions (the ingestion pipeline)
# --------------------------------------------------------------------------------------------

TURN_SCHEMA = "memory-core.turn.v1"
#: Turn ids double as Service Bus message ids (at most 128 characters).
TURN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
MAX_TURN_MESSAGES = 100
MAX_MESSAGE_CHARS = 32000
#: The most a turn's JSON may take (UTF-8): under the HTTP API's 256 KiB body and a Service Bus
#: Standard message (256 KiB, headers included), with room to spare for both.
MAX_TURN_BYTES = 192 * 1024
#: Metadata keys memory-core writes into a memory itself; a turn's caller metadata may not use them.
RESERVED_METADATA_KEYS = frozenset(
    {
        "turn_id",
        "evidence",
        "updated_by_turn",
        "deleted_by_turn",
        "partly_forgotten_by_turn",
        "redacted_by_turn",
        "updated_on_request",
        "status_reason",
        "status_changed_at",
    }
)
#: Longest metadata key a turn may carry.
MAX_METADATA_KEY_CHARS = 128
#: A caller's metadata key: 1-128 characters, no control characters.
METADATA_KEY_PATTERN = re.compile(r"[^\x00-\x1f\x7f]{1,128}")


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
        return value


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
        if value != TURN_SCHEMA:
            raise ValueError(f"unsupported schema {_describe(value)}; expected {TURN_SCHEMA!r}")
        return value

    @field_validator("turn_id")
    @classmethod
    def _turn_id(cls, value: str) -> str:
        if not TURN_ID_PATTERN.fullmatch(value):
            raise ValueError(
                f"turn_id {_describe(value)} must be 1-128 letters, digits, _ . : - (starting with a letter or digit)"
            )
        return value

    @field_validator("session_id")
    @classmethod
    def _session(cls, value: str | None) -> str | None:
        return None if value is None else validate_scope_id(value, "session_id")

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
    category: str = "general"
    importance: float = Field(default=0.65, ge=0.0, le=1.0)
    confidence: float = Field(default=0.55, ge=0.0, le=1.0)
    expires_at: UtcDateTime | None = None
    source: str = "rule-fallback"
    #: The sentence of the turn the candidate came from.
    evidence: str = ""
    #: Index of the message it came from, and who said it.
    message: int = Field(default=0, ge=0)
    speaker: SpeakerName | None = None

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        return validate_category(value)


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
        if value != RECALL_SCHEMA:
            raise ValueError(f"unsupported schema {_describe(value)}; expected {RECALL_SCHEMA!r}")
        return value

    @field_validator("recall_id")
    @classmethod
    def _recall_id(cls, value: str) -> str:
        if not TURN_ID_PATTERN.fullmatch(value):
            raise ValueError(f"recall_id {_describe(value)} must be 1-128 letters, digits, _ . : -")
        return value

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
