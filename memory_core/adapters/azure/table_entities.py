"""What an Azure Table entity may hold, measured the service's way, and long text split over properties.

The service counts an entity at 2 bytes a UTF-16 code unit (an emoji is two units) plus per-property
overhead (:func:`entity_bytes`), at most 1 MiB; a transaction's payload is at most 4 MiB. Every entity
is checked before it is written (:func:`check_entity`; its JSON is held to 1 MiB too, which Azurite
enforces), and so is every transaction. Long text (candidates, before/after records) is split over
several string properties (:func:`put_text`: a property holds at most 64 KiB).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from memory_core.errors import ValidationError

__all__ = [
    "CHUNK_CHARS",
    "ENTITY_BUDGET",
    "MAX_ENTITY_BYTES",
    "MAX_TRANSACTION_BYTES",
    "MAX_TRANSACTION_OPS",
    "OP_OVERHEAD",
    "REQUEST_BUDGET",
    "check_entity",
    "entity_bytes",
    "fits",
    "get_text",
    "put_text",
    "request_bytes",
    "transaction_bytes",
]

#: Operations of one entity-group transaction (the service's limit is 100).
MAX_TRANSACTION_OPS = 100
#: The payload of one entity-group transaction (the service's limit, and Azurite's).
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
#: One entity as the service measures it (:func:`entity_bytes`: 2 bytes a UTF-16 code unit).
MAX_ENTITY_BYTES = 1024 * 1024
#: What this store lets an entity take of :data:`MAX_ENTITY_BYTES` (1 KiB spare).
ENTITY_BUDGET = MAX_ENTITY_BYTES - 1024
#: The JSON of one entity as sent (:func:`request_bytes`). Azurite refuses an insert or update whose
#: body exceeds 1 MiB, and the SDK escapes every non-ASCII character (``\uXXXX``: 6 bytes, 12 outside
#: the BMP), so this second bound keeps the store working there too.
REQUEST_BUDGET = MAX_ENTITY_BYTES - 8 * 1024
#: Characters per string property chunk. A property holds 64 KiB = 32,768 UTF-16 code units; 16,000
#: characters are at most 32,000 units even when every one lies outside the BMP (two units each).
CHUNK_CHARS = 16_000
#: Allowance per operation of a transaction for its MIME part headers and request line.
OP_OVERHEAD = 2 * 1024
#: The ``Timestamp`` property the service adds to every entity (8 + 2 * 9 + 8 bytes).
_TIMESTAMP_BYTES = 34


def put_text(entity: dict[str, Any], name: str, text: str | None) -> None:
    """Store ``text`` as ``name_0``, ``name_1``... with the chunk count in ``name_n`` (-1: ``None``).

    Each chunk fits a string property (:data:`CHUNK_CHARS`); whether the whole entity fits is
    :func:`check_entity`'s question, asked once the entity is complete.
    """
    if text is None:
        entity[f"{name}_n"] = -1
        return
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    entity[f"{name}_n"] = len(chunks)
    for i, chunk in enumerate(chunks):
        entity[f"{name}_{i}"] = chunk


def get_text(entity: Any, name: str) -> str | None:
    """The text :func:`put_text` stored under ``name`` (``None`` when it stored ``None`` or nothing)."""
    count = int(entity.get(f"{name}_n", -1))
    if count < 0:
        return None
    return "".join(str(entity.get(f"{name}_{i}", "")) for i in range(count))


def _utf16_units(text: str) -> int:
    """UTF-16 code units of ``text`` (a character outside the BMP, an emoji say, takes two)."""
    return len(text.encode("utf-16-le")) // 2


def _value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return 4 + 2 * _utf16_units(value)
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float | datetime):
        return 8  # Int64, Double, DateTime (an Int32 takes 4: counted as 8)
    if isinstance(value, bytes | bytearray):
        return 4 + len(value)
    if value is None:
        return 0
    return 4 + 2 * _utf16_units(str(value))


def entity_bytes(entity: dict[str, Any]) -> int:
    """The size of ``entity`` as the Table service counts it against its 1 MiB limit.

    4 bytes, plus 2 bytes a UTF-16 code unit of ``PartitionKey`` and ``RowKey``, plus for every other
    property 8 bytes, 2 bytes a code unit of its name and its value (a string: 4 bytes and 2 a code
    unit; a number or date: 8; a bool: 1), plus the ``Timestamp`` the service adds.
    """
    size = 4 + _TIMESTAMP_BYTES
    for name, value in entity.items():
        if name in ("PartitionKey", "RowKey"):
            size += 2 * _utf16_units(str(value))
        else:
            size += 8 + 2 * _utf16_units(name) + _value_bytes(value)
    return size


def request_bytes(entity: dict[str, Any]) -> int:
    """The JSON body the SDK sends for ``entity`` (``json.dumps``: non-ASCII escaped), with room for
    the ``@odata.type`` annotations of its non-string values."""
    annotations = sum(40 + len(name) for name, value in entity.items() if not isinstance(value, str))
    return len(json.dumps(entity, default=str)) + annotations


def _text_fields(entity: dict[str, Any]) -> dict[str, int]:
    """UTF-16 code units of every text stored with :func:`put_text` (by field name) or as a plain string."""
    sizes: dict[str, int] = {}
    chunked = {name[:-2] for name in entity if name.endswith("_n")}
    for name, value in entity.items():
        if not isinstance(value, str) or name in ("PartitionKey", "RowKey"):
            continue
        base, _, index = name.rpartition("_")
        field = base if base in chunked and index.isdigit() else name
        sizes[field] = sizes.get(field, 0) + _utf16_units(value)
    return sizes


def fits(entity: dict[str, Any]) -> bool:
    """Whether ``entity`` is within :data:`ENTITY_BUDGET` and :data:`REQUEST_BUDGET`."""
    return entity_bytes(entity) <= ENTITY_BUDGET and request_bytes(entity) <= REQUEST_BUDGET


def check_entity(entity: dict[str, Any], what: str) -> None:
    """Refuse an entity over the budget, naming its largest text field.

    Raises:
        ValidationError: (a :class:`PermanentError`) the entity is larger than an entity may be.
    """
    if fits(entity):
        return
    sizes = _text_fields(entity)
    field = max(sizes, key=lambda name: sizes[name]) if sizes else "entity"
    raise ValidationError(
        field,
        f"is {sizes.get(field, 0):,} UTF-16 code units, which makes the {what} "
        f"{entity_bytes(entity):,} bytes as Azure Table storage counts them (2 bytes a code unit) and {request_bytes(entity):,} bytes of JSON; "
        f"an entity holds at most {MAX_ENTITY_BYTES:,} bytes",
    )


def transaction_bytes(entities: Iterable[dict[str, Any]]) -> int:
    """The payload of a transaction writing ``entities`` (each JSON body and its part's headers)."""
    return sum(request_bytes(e) + OP_OVERHEAD for e in entities) + OP_OVERHEAD
