"""The entity index of the Azure AI Search store: fields on the memory documents, resolved on every write.

A memory document names its entities in three fields (:data:`ENTITY_FIELDS`): ``entity_ids``, a
filterable string collection the entity leg and :meth:`memories_of` filter with
(``entity_ids/any(e: search.in(e, '…', ','))``); ``entity_names``, their names and aliases, searchable
with the text's analyzer (a query naming Mei finds "My wife started flying lessons" once "my wife Mei"
was said); and ``entities_json``, a retrievable string with the records of those entities (kind, name,
relation, aliases, first and last mention) as the memory's write resolved them.

A scope's entities are the records of its documents that are not deleted, merged by id on read
(:func:`merged`): names and relations from the latest record that has one, aliases together, the
earliest first mention and the latest last one. A deleted memory names nothing, so an entity no memory
names any more is gone with its last mention, as in the embedded store.

A batch of writes reads the scope's documents that name something once (:class:`ScopeEntities`) and
resolves each memory's mentions against them in order, with the same domain functions as the embedded
store (:func:`~memory_core.domain.entities.resolve`), so both stores give the same text the same ids.
When a write teaches an entity its name ("my sister", then "my sister Ana"), the other documents that
name it get the name too (a merge of their ``entity_names`` and ``entities_json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from memory_core.adapters.azure import odata
from memory_core.adapters.azure.index_requests import MAX_PAGE, IndexRequests
from memory_core.domain.entities import Entity, known_names, matching, resolve
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.errors import ValidationError
from memory_core.language.entities import Mention, may_name, mentions

__all__ = [
    "ENTITIES_JSON",
    "ENTITY_FIELDS",
    "ENTITY_IDS",
    "ENTITY_NAMES",
    "READ_FIELDS",
    "ScopeEntities",
    "entity_fields",
    "fields_of",
    "memories_of",
    "merged",
    "read_scope",
    "validate_entity_ids",
]

ENTITY_IDS = "entity_ids"
ENTITY_NAMES = "entity_names"
ENTITIES_JSON = "entities_json"
#: The entity fields of a memory document and their roles (``filter``: a filterable, retrievable
#: string collection; ``text``: a searchable string collection with the text's analyzer, not
#: retrievable; ``stored``: a retrievable string).
ENTITY_FIELDS: dict[str, str] = {ENTITY_IDS: "filter", ENTITY_NAMES: "text", ENTITIES_JSON: "stored"}
#: What a read of a scope's entities selects of each document.
READ_FIELDS: tuple[str, ...] = ("id", "memory", ENTITY_IDS, ENTITIES_JSON)

_ENTITY_ID = re.compile(r"ent_[0-9a-f]{24}")


def validate_entity_ids(entity_ids: Sequence[str]) -> list[str]:
    """The distinct ids of ``entity_ids``, in order, each checked to be an entity id (``ent_`` and 24
    hex digits: never anything that could change an OData literal).

    Raises:
        ValidationError: Not a sequence of entity ids.
    """
    if isinstance(entity_ids, str | bytes) or not isinstance(entity_ids, Sequence):
        raise ValidationError("entity_ids", "must be a list of entity ids")
    for value in entity_ids:
        if not isinstance(value, str) or not _ENTITY_ID.fullmatch(value):
            raise ValidationError("entity_ids", f"{str(value)[:40]!r} is not an entity id (ent_ and 24 hex digits)")
    return list(dict.fromkeys(entity_ids))


def _record(entity: Entity) -> dict[str, Any]:
    return {
        "id": entity.id,
        "kind": entity.kind,
        "name": entity.name,
        "relation": entity.relation,
        "aliases": list(entity.aliases),
        "first_mentioned": entity.first_mentioned.isoformat(),
        "last_mentioned": entity.last_mentioned.isoformat(),
    }


def entity_fields(entities: Sequence[Entity]) -> dict[str, Any]:
    """The entity fields of a document that names ``entities`` (in the order of their mentions)."""
    names = [n for e in entities for n in (e.name, *e.aliases) if n]
    return {
        ENTITY_IDS: [e.id for e in entities],
        ENTITY_NAMES: list(dict.fromkeys(names)),
        ENTITIES_JSON: json.dumps([_record(e) for e in entities], ensure_ascii=False, sort_keys=True),
    }


def stored_entities(document: Mapping[str, Any]) -> list[Entity]:
    """The entity records a document holds (none when it has no ``entities_json``)."""
    raw = document.get(ENTITIES_JSON)
    if not raw:
        return []
    user_id, agent_id = str(document.get("user_id") or ""), str(document.get("agent_id") or "")
    return [
        Entity(
            id=str(r["id"]),
            user_id=user_id,
            agent_id=agent_id,
            kind=str(r["kind"]),
            name=r.get("name"),
            relation=r.get("relation"),
            aliases=tuple(r.get("aliases") or ()),
            first_mentioned=datetime.fromisoformat(r["first_mentioned"]),
            last_mentioned=datetime.fromisoformat(r["last_mentioned"]),
        )
        for r in json.loads(raw)
    ]


def merged(records: Iterable[Entity]) -> dict[str, Entity]:
    """The records of one scope's documents as its entities, by id (see the module)."""
    by_id: dict[str, Entity] = {}
    for record in sorted(records, key=lambda e: e.last_mentioned):
        seen = by_id.get(record.id)
        if seen is None:
            by_id[record.id] = record
            continue
        by_id[record.id] = replace(
            seen,
            name=record.name if record.name is not None else seen.name,
            relation=record.relation if record.relation is not None else seen.relation,
            aliases=tuple(dict.fromkeys((*seen.aliases, *record.aliases))),
            first_mentioned=min(seen.first_mentioned, record.first_mentioned),
            last_mentioned=max(seen.last_mentioned, record.last_mentioned),
        )
    return dict(sorted(by_id.items()))


class ScopeEntities:
    """The entities of one scope as its documents hold them, by memory, while a batch of writes
    resolves its memories against them one after the other.

    Args:
        scope: The scope.
        documents: Its documents that name something and are not deleted (:data:`READ_FIELDS`, with
            ``user_id`` and ``agent_id`` implied by ``scope``).
    """

    def __init__(self, scope: Scope, documents: Iterable[Mapping[str, Any]]) -> None:
        self.scope = scope
        owner = {"user_id": scope.user_id, "agent_id": scope.agent_id}
        self._texts: dict[str, str] = {}
        self._named: dict[str, list[Entity]] = {}
        for document in documents:
            memory_id = str(document["id"])
            self._texts[memory_id] = str(document.get("memory") or "")
            self._named[memory_id] = stored_entities({**document, **owner})
        self._known: dict[str, Entity] | None = None

    def entities(self) -> list[Entity]:
        """The scope's entities, by id."""
        known = self._merged()
        return [known[k] for k in sorted(known)]

    def memories(self) -> dict[str, list[str]]:
        """The ids of the memories of each entity, by entity id (memory ids sorted)."""
        found: dict[str, list[str]] = {}
        for memory_id in sorted(self._named):
            for entity in self._named[memory_id]:
                found.setdefault(entity.id, []).append(memory_id)
        return found

    def matching(self, asked: Sequence[Mention]) -> dict[str, list[str]]:
        """The memory ids of each entity the mentions ``asked`` may mean (nothing is created)."""
        known = self.entities()
        memories = self.memories()
        found: dict[str, list[str]] = {}
        for mention in asked:
            for entity in matching(mention, known):
                found.setdefault(entity.id, memories.get(entity.id, []))
        return found

    def _merged(self) -> dict[str, Entity]:
        if self._known is None:
            self._known = merged(e for named in self._named.values() for e in named)
        return self._known

    def named_by(self, memory_id: str) -> list[Entity]:
        """The records of the entities a memory names (none for a deleted or unknown one)."""
        return list(self._named.get(memory_id, []))

    def index(self, record: MemoryRecord, named: Sequence[Mention] | None = None) -> None:
        """Resolve what ``record`` names (``named``: its mentions, when already read; else read with
        the names the scope knows); the scope's entities are then as they are once it is written.

        A memory whose document already holds its text keeps the entities it names (a replay writes
        what one delivery did); a deleted one names nothing. Mentions are resolved against the scope's
        entities with the memory's old ones still among them, as the embedded store does.
        """
        if record.status is MemoryStatus.DELETED:
            self._set(record.id, record.memory, [])
            return
        if record.id in self._named and self._texts.get(record.id) == record.memory:
            return
        said = mentions(record.memory, known_names(self.entities())) if named is None else named
        entities: list[Entity] = []
        if said:
            changed, ids = resolve(self.scope, said, self.entities(), record.updated_at)
            by_id = {e.id: e for e in changed}
            entities = [by_id[i] for i in ids]
        self._set(record.id, record.memory, entities)

    def settle(self) -> list[str]:
        """Give every memory's records the name, relation and aliases their entities have now (a
        name learnt later: "my sister", then "my sister Ana"), so that the name stays when the memory
        that gave it goes, as in the embedded store; the ids of the memories whose records changed."""
        known = self._merged()
        changed: list[str] = []
        for memory_id, records in self._named.items():
            now = [
                replace(r, name=known[r.id].name, relation=known[r.id].relation, aliases=known[r.id].aliases)
                for r in records
            ]
            if now != records:
                self._named[memory_id] = now
                changed.append(memory_id)
        return changed

    def _set(self, memory_id: str, text: str, entities: list[Entity]) -> None:
        old = self._named.pop(memory_id, None)
        self._texts.pop(memory_id, None)
        if entities:
            self._named[memory_id] = entities
            self._texts[memory_id] = text
        if old:
            self._known = None
        elif self._known is not None:
            for entity in entities:
                seen = self._known.get(entity.id)
                self._known[entity.id] = entity if seen is None else merged([seen, entity])[entity.id]


def _live(scope: Scope) -> str:
    return odata.and_(odata.scope_filter(scope), odata.status_filter([MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]))


async def _pages(requests: IndexRequests, filter_: str, select: Sequence[str], operation: str) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page, more = await requests.keyset_page(
            filter_, after=after, limit=MAX_PAGE, select=select, operation=operation, probe=False
        )
        documents += page
        if not more or not page:
            return documents
        after = str(page[-1]["id"])


async def read_scope(requests: IndexRequests, scope: Scope) -> ScopeEntities:
    """The entities of ``scope`` as its documents hold them: the documents that are not deleted and
    name something (``entity_ids/any()``), in keyset pages of 1,000."""
    filter_ = odata.and_(_live(scope), odata.any_of(ENTITY_IDS))
    return ScopeEntities(scope, await _pages(requests, filter_, READ_FIELDS, "read entities"))


async def fields_of(
    requests: IndexRequests, records: Sequence[MemoryRecord]
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The entity fields of each record's document, by memory id, resolved in the order given, and
    the ``merge`` actions that give other documents of their scopes the names their entities have
    now (:meth:`ScopeEntities.settle`; only when a write taught an entity a name or a relation).

    One read of a scope's entities per call (:func:`read_scope`), and none for a scope where no
    record that is not deleted names anything or may name a name the scope knows
    (:func:`~memory_core.language.entities.may_name`): its texts are read with the scope's names.
    """
    said = {
        r.id: r.status is not MemoryStatus.DELETED and (may_name(r.memory) or bool(mentions(r.memory))) for r in records
    }
    fields: dict[str, dict[str, Any]] = {}
    renamed: list[dict[str, Any]] = []
    for scope in dict.fromkeys(r.scope for r in records):
        mine = [r for r in records if r.scope == scope]
        index = await read_scope(requests, scope) if any(said[r.id] for r in mine) else ScopeEntities(scope, [])
        for record in mine:
            index.index(record)
        settled = index.settle()
        fields.update({r.id: entity_fields(index.named_by(r.id)) for r in mine})
        for memory_id in settled:
            if memory_id not in fields:
                names = entity_fields(index.named_by(memory_id))
                renamed.append({"@search.action": "merge", "id": memory_id, **{k: names[k] for k in (ENTITY_NAMES, ENTITIES_JSON)}})
    return fields, renamed


async def memories_of(requests: IndexRequests, scope: Scope, entity_ids: Sequence[str]) -> dict[str, list[str]]:
    """The ids of the memories (any status but deleted) of each of ``entity_ids`` in ``scope``, by
    entity id (in the order asked; memory ids sorted): one filtered read per 1,000 entity ids
    (``entity_ids/any(e: search.in(e, '…', ','))``), in keyset pages. Unknown ids are absent.

    Raises:
        ValidationError: An id is not an entity id (before any request).
    """
    wanted = validate_entity_ids(entity_ids)
    found: dict[str, list[str]] = {}
    for start in range(0, len(wanted), MAX_PAGE):
        chunk = wanted[start : start + MAX_PAGE]
        filter_ = odata.and_(_live(scope), odata.any_in(ENTITY_IDS, chunk))
        for document in await _pages(requests, filter_, ("id", ENTITY_IDS), "entity memories"):
            for entity_id in document.get(ENTITY_IDS) or []:
                found.setdefault(str(entity_id), []).append(str(document["id"]))
    return {i: sorted(found[i]) for i in wanted if i in found}
