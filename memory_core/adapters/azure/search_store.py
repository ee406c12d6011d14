"""The production memory store on Azure AI Search (``azure-search-documents`` 12.x, async client).

One index document per memory (:mod:`memory_core.adapters.azure.documents`). A search is one request
rendered from its search plan (:mod:`memory_core.adapters.azure.search_query`); filters are compiled
from the options and the scope into OData, never taken from callers. Requests are retried and writes
go out in batches whose failed documents are sent again (:mod:`memory_core.adapters.azure.index_requests`,
:mod:`memory_core.adapters.azure.index_writes`). Every write carries absolute values (an upload, or a
merge of computed fields), so a retried request or a redelivered message leaves the index as one
delivery would; a call that fails part-way may have written some of its documents, and repeating it
completes the work. Each write also names the entities of its memories on their documents (the entity
index, :mod:`memory_core.adapters.azure.entity_fields`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from azure.core.credentials import AzureKeyCredential
from azure.core.credentials_async import AsyncTokenCredential
from azure.search.documents.aio import SearchClient

from memory_core.adapters.azure import entity_fields, odata
from memory_core.adapters.azure.documents import (
    from_document,
    reranked,
    retention_page,
    search_hit,
    to_document,
)
from memory_core.adapters.azure.index_requests import MAX_PAGE, IndexRequests
from memory_core.adapters.azure.retry import RetrySettings, Sleep
from memory_core.adapters.azure.search_index import SELECT_FIELDS, VECTOR_FIELD, close_credential
from memory_core.adapters.azure.search_query import check_query_vector, search_request
from memory_core.domain.entities import Entity
from memory_core.domain.log_ids import scope_tag
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import (
    IMMUTABLE_FIELDS,
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    Scope,
    status_note,
)
from memory_core.domain.search import Listing, MemorySearchOptions, SearchResult
from memory_core.domain.search_plan import plan_for
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.validation import (
    parse_model,
    validate_category,
    validate_memory_id,
    validate_memory_ids,
    validate_positive_int,
    validate_scope_id,
)
from memory_core.errors import ConfigurationError, ConflictError, NotFoundError, ValidationError
from memory_core.language.entities import Mention
from memory_core.ports import (
    Clock,
    MemoryRef,
    Page,
    RetentionPage,
    RetentionWrite,
    SortedPage,
    StatusCounts,
    SystemClock,
    check_browse_window,
)

__all__ = ["MAX_PAGE", "RETENTION_FIELDS", "AzureSearchMemoryStore"]

logger = logging.getLogger(__name__)

#: Most agents listed for one user.
MAX_AGENTS = 1000
#: The facet that lists a user's agents.
_AGENT_FACET = f"agent_id,count:{MAX_AGENTS},sort:value"

_RECORD_FIELDS = frozenset(MemoryRecord.model_fields)
#: What the forgetting scan reads of each document.
RETENTION_FIELDS: tuple[str, ...] = (
    "id",
    "status",
    "retention_score",
    "importance",
    "access_count",
    "updated_at",
    "last_accessed_at",
    "expires_at",
)


class AzureSearchMemoryStore:
    """:class:`~memory_core.ports.MemoryStore` on an Azure AI Search index, with the entity index
    (:class:`~memory_core.capabilities.EntityIndex`) in fields of its documents.

    Args:
        endpoint: ``https://NAME.search.windows.net``.
        index_name: The index (create it with
            :func:`~memory_core.adapters.azure.search_index.ensure_index`).
        credential: A ready async token credential (managed identity, ``DefaultAzureCredential``), or
            an :class:`AzureKeyCredential` when an admin key is configured. Closed with the store only
            when ``owns_credential``.
        dimensions: Embedding length of the index; embeddings of another length are refused.
        client: An existing :class:`SearchClient` to use instead of creating one (the store then
            does not close it).
        clock: Where "now" comes from (expiry filters, recall, forgetting).
        retry: Attempts and back-off for requests and for failed documents.
        sleep: Awaitable sleep used between attempts (tests inject a recorder).
        exhaustive_knn: Ask for exact (exhaustive) nearest neighbours instead of HNSW.
        debug_scores: Ask the service for per-leg subscores and the document boost
            (``debug="vector"``) and put them into :class:`ScoreBreakdown`.
        owns_credential: Close ``credential`` with the store (set when the caller built it for the
            store alone).
        **client_kwargs: Passed to :class:`SearchClient` when the store creates it (tests pass
            ``transport``). ``retry_total`` defaults to 0: retries happen here.
    """

    def __init__(
        self,
        endpoint: str,
        index_name: str,
        credential: AsyncTokenCredential | AzureKeyCredential | None = None,
        *,
        dimensions: int | None = None,
        client: SearchClient | None = None,
        clock: Clock | None = None,
        retry: RetrySettings | None = None,
        sleep: Sleep = asyncio.sleep,
        exhaustive_knn: bool = False,
        debug_scores: bool = False,
        owns_credential: bool = False,
        **client_kwargs: Any,
    ) -> None:
        if client is None:
            if not endpoint:
                raise ConfigurationError("AzureSearchMemoryStore needs the search endpoint")
            if credential is None:
                raise ConfigurationError("AzureSearchMemoryStore needs a credential")
            client_kwargs.setdefault("retry_total", 0)
            client = SearchClient(endpoint, index_name, credential, **client_kwargs)
            self._owns_client = True
        else:
            self._owns_client = False
        self._client = client
        self.index_name = index_name
        self.dimensions = dimensions
        self._clock: Clock = clock or SystemClock()
        self._requests = IndexRequests(client, retry or RetrySettings(), sleep)
        self._exhaustive = exhaustive_knn
        self._debug_scores = debug_scores
        self._owned_credential: object | None = credential if owns_credential else None

    async def close(self) -> None:
        """Close the client if the store created it (and the credential if ``owns_credential``)."""
        if self._owns_client:
            await self._client.close()
        if self._owned_credential is not None:
            credential, self._owned_credential = self._owned_credential, None
            await close_credential(credential)

    async def __aenter__(self) -> AzureSearchMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ---------------------------------------------------------------------------------
    async def _write(
        self, operation: str, actions: Sequence[dict[str, Any]], *, ignore_missing: bool = False
    ) -> int:
        """Send index actions; returns how many were written. Raises when any document is not.

        With ``ignore_missing`` a merge into a document that no longer exists (404, for example
        purged meanwhile) is logged and skipped instead of failing the whole call.
        """
        return await self._requests.write(operation, actions, ignore_missing=ignore_missing)

    def _check_embedding(self, embedding: Sequence[float] | None, field: str = "embedding") -> None:
        if embedding is not None and self.dimensions is not None and len(embedding) != self.dimensions:
            raise ConflictError(
                f"{field} has {len(embedding)} dimensions but the index stores {self.dimensions}"
            )

    # -- MemoryStore ------------------------------------------------------------------------------
    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace whole records (``upload`` actions), each naming its entities (one read of
        a scope's entities per call, when one of its memories names someone)."""
        latest: dict[str, MemoryRecord] = {}
        for record in records:
            record = parse_model(MemoryRecord, record)
            self._check_embedding(record.embedding)
            latest[record.id] = record
        if not latest:
            return
        named, renamed = await entity_fields.fields_of(self._requests, list(latest.values()))
        actions = [{"@search.action": "upload", **to_document(r), **named[r.id]} for r in latest.values()]
        await self._write("upsert", actions)
        await self._rename(renamed)

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        """One record of any status in ``scope``, or ``None``."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        key = validate_memory_id(memory_id)
        try:
            document = await self._requests.call("get", lambda: self._client.get_document(key))
        except NotFoundError:
            return None
        record = from_document(document)
        if record.user_id != scope.user_id or record.agent_id != scope.agent_id:
            return None
        return record

    async def get_many(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The records of ``scope`` among ``memory_ids`` (any status, with embeddings, as :meth:`get`
        returns them), by id; ids missing or of another scope are absent
        (:class:`~memory_core.capabilities.BatchReader`).

        One search request per :data:`MAX_PAGE` ids (``user_id eq … and agent_id eq … and
        search.in(id, '…', ',')``, ``top`` the number of ids), instead of one document lookup per id.
        Memory ids are letters, digits, ``_`` and ``-``, so the ``,`` delimiter is safe; 1,000 ids of
        at most 128 characters keep the filter near 130 KB, far below the request size limit.

        Raises:
            ValidationError: A bad id (before any request).
        """
        scope = Scope.of(scope.user_id, scope.agent_id)
        ids = validate_memory_ids(memory_ids, "memory_ids")
        found: dict[str, MemoryRecord] = {}
        if not ids:
            return found
        in_scope = odata.scope_filter(scope)
        for start in range(0, len(ids), MAX_PAGE):
            chunk = ids[start : start + MAX_PAGE]
            documents = await self._requests.query(
                "get many",
                search_text=None,
                filter=odata.and_(in_scope, odata.id_in(chunk)),
                select=[*SELECT_FIELDS, VECTOR_FIELD],
                top=len(chunk),
            )
            for document in documents:
                record = from_document(document)
                if record.user_id == scope.user_id and record.agent_id == scope.agent_id:
                    found[record.id] = record
        return {i: found[i] for i in ids if i in found}

    async def merge(self, scope: Scope, memory_id: str, changes: Mapping[str, Any]) -> MemoryRecord:
        """Partially update one record: only the changed fields are sent (a ``merge`` action)."""
        if not isinstance(changes, Mapping):
            raise ValidationError("changes", "must be a mapping of field names to values")
        for name in changes:
            if name in IMMUTABLE_FIELDS:
                raise ValidationError(
                    name, "cannot be changed by a merge (id, scope and created_at are fixed)"
                )
            if name not in _RECORD_FIELDS:
                raise ValidationError(name, "is not a memory field")
        current = await self.get(scope, memory_id)
        if current is None:
            raise NotFoundError(f"memory {memory_id!r} does not exist for this user and agent")
        if not changes:
            return current.without_embedding()
        updated = parse_model(MemoryRecord, {**current.model_dump(), **dict(changes)})
        self._check_embedding(updated.embedding)
        names, renamed = await self._names(current, updated)
        await self._write("merge", [{"@search.action": "merge", **to_document(updated, list(changes)), **names}])
        await self._rename(renamed)
        return updated.without_embedding()

    async def mark_status(
        self, scope: Scope, memory_id: str, status: MemoryStatus, *, reason: str
    ) -> MemoryRecord:
        """Change a record's status; the reason and the moment are recorded in its metadata
        (``status_reason``, ``status_changed_at``). One merge of ``status`` and ``metadata_json``."""
        try:
            status = MemoryStatus(status)
        except ValueError:
            raise ValidationError("status", f"{status!r} is not a memory status") from None
        if not isinstance(reason, str):
            raise ValidationError("reason", "must be a string")
        current = await self.get(scope, memory_id)
        if current is None:
            raise NotFoundError(f"memory {memory_id!r} does not exist for this user and agent")
        metadata = status_note(current.metadata, reason, self._clock.now())
        updated = current.model_copy(update={"status": status, "metadata": metadata})
        names, renamed = await self._names(current, updated)
        await self._write("mark status", [{"@search.action": "merge", **to_document(updated, ["status", "metadata"]), **names}])
        await self._rename(renamed)
        logger.info("memory %s marked %s", updated.id, status.value)
        return updated.without_embedding()

    async def _names(
        self, current: MemoryRecord, updated: MemoryRecord
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The entity fields a change of ``current`` into ``updated`` rewrites (none unless its text
        changes or it is deleted or restored), and the merges that rename other documents."""
        deleted = MemoryStatus.DELETED
        if current.memory == updated.memory and (current.status is deleted) == (updated.status is deleted):
            return {}, []
        named, renamed = await entity_fields.fields_of(self._requests, [updated])
        return named[updated.id], renamed

    async def _rename(self, renamed: Sequence[dict[str, Any]]) -> None:
        """Give other documents the names their entities have now (a document gone meanwhile is skipped)."""
        if renamed:
            await self._write("entity names", renamed, ignore_missing=True)

    # -- EntityIndex ------------------------------------------------------------------------------
    async def entities(self, scope: Scope) -> list[Entity]:
        """The entities of ``scope``, by id: the records of its documents that are not deleted, merged
        (:mod:`memory_core.adapters.azure.entity_fields`)."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        return (await entity_fields.read_scope(self._requests, scope)).entities()

    async def entity_memories(self, scope: Scope, asked: Sequence[Mention]) -> dict[str, list[str]]:
        """The ids of the memories (not deleted) of each entity of ``scope`` the mentions ``asked`` may
        mean, by entity id: one read of the scope's documents that name something."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        if not asked:
            return {}
        return (await entity_fields.read_scope(self._requests, scope)).matching(asked)

    async def memories_of(self, scope: Scope, entity_ids: Sequence[str]) -> dict[str, list[str]]:
        """The ids of the memories (any status but deleted) of each of ``entity_ids`` of ``scope``, by
        entity id; unknown ids are absent (``entity_ids/any(e: search.in(e, '…', ','))``).

        Raises:
            ValidationError: An id is not an entity id (before any request).
        """
        scope = Scope.of(scope.user_id, scope.agent_id)
        return await entity_fields.memories_of(self._requests, scope, entity_ids)

    async def search(self, request: SearchRequest) -> SearchResult:
        """Ranked memories of the request's scope: one request rendered from the search plan
        (:mod:`memory_core.adapters.azure.search_query`; DESIGN section 4 for the semantics of each mode)."""
        scope = Scope.of(request.scope.user_id, request.scope.agent_id)
        options = parse_model(MemorySearchOptions, request.options)
        query, vector = request.query, request.vector
        if query is not None and not isinstance(query, str):
            raise ValidationError("query", "must be a string")
        text = (query or "").strip()
        plan = plan_for(options, text)
        check_query_vector(plan, vector, self.dimensions)
        rendered = search_request(
            plan,
            text,
            vector,
            scope,
            options,
            now=self._clock.now(),
            exhaustive=self._exhaustive,
            debug=self._debug_scores,
            window=request.window,
        )
        documents = await self._requests.query("search", **rendered.kwargs)
        profile = plan.profile.name if plan.profile else None
        hits = [search_hit(document, profile) for document in documents]
        return SearchResult(
            hits=reranked(hits) if plan.semantic else hits,
            mode=options.mode,
            ranking_profile=options.ranking_profile,
            notes=rendered.notes,
        )

    async def scan(self, scope: Scope, request: PageRequest) -> Page:
        """Records of ``scope`` ordered by id, after the cursor (``$filter id gt …``, no ``$skip``)."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        clauses = [odata.scope_filter(scope)]
        if request.statuses is not None:
            clauses.append(odata.status_filter(request.statuses))
        if request.current_at is not None:
            clauses.append(odata.current_filter(request.current_at))
        if request.filters is not None:
            clauses.append(odata.filters_expression(request.filters))
        documents, more = await self._requests.keyset_page(
            odata.and_(*clauses),
            after=request.after,
            limit=request.limit,
            select=[*SELECT_FIELDS, VECTOR_FIELD] if request.with_embedding else list(SELECT_FIELDS),
            operation="scan",
        )
        records = [from_document(d) for d in documents]
        return Page(records=records, next_cursor=records[-1].id if more and records else None)

    async def agents(self, user_id: str) -> list[str]:
        """The agent ids holding memories of ``user_id`` (a facet on ``agent_id``), sorted."""
        filter_ = odata.user_filter(validate_scope_id(user_id, "user_id"))
        facets = await self._requests.facet_counts("agents", filter_, _AGENT_FACET)
        return sorted(agent_id for agent_id, count in facets if count > 0)

    async def browse(self, scope: Scope, listing: Listing) -> SortedPage:
        """A filtered, sorted page of ``scope`` (``$orderby field, id``, ``$skip``, ``$count``)."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        offset, limit = listing.offset, listing.limit
        check_browse_window(offset, limit)
        clauses = [odata.scope_filter(scope)]
        if listing.statuses:
            clauses.append(odata.status_filter(listing.statuses))
        if listing.current_at is not None:
            clauses.append(odata.current_filter(listing.current_at))
        if listing.category is not None:
            clauses.append(odata.eq("category", validate_category(listing.category)))
        if listing.kind is not None:
            clauses.append(odata.kind_filter(MemoryKind(listing.kind)))
        order = [*(odata.order_by(listing.order_by) or []), "id asc"]

        documents, total = await self._requests.counted_query(
            "browse",
            search_text=None,
            filter=odata.and_(*clauses),
            order_by=order,
            select=list(SELECT_FIELDS),
            skip=offset or None,
            top=limit,
        )
        return SortedPage(records=[from_document(d) for d in documents], total=total)

    async def count_agents(self, user_id: str) -> list[StatusCounts]:
        """The agents of ``user_id`` with their counts by status (a facet on ``agent_id`` per status)."""
        user_filter = odata.user_filter(validate_scope_id(user_id, "user_id"))

        statuses = list(MemoryStatus)
        facets = await asyncio.gather(
            *(
                self._requests.facet_counts(
                    "count agents", odata.and_(user_filter, odata.eq("status", status.value)), _AGENT_FACET
                )
                for status in statuses
            )
        )
        counts: dict[str, StatusCounts] = {}
        for status, rows in zip(statuses, facets, strict=True):
            for agent_id, count in rows:
                counts[agent_id] = counts.get(agent_id, StatusCounts(agent_id)).add(status, count)
        return [counts[a] for a in sorted(counts) if counts[a].total]

    async def recall(
        self, scope: Scope, memory_ids: Sequence[str], policy: HumanMemoryPolicy
    ) -> list[MemoryRecord]:
        """Touch, count, re-score and re-derive the status of returned memories (partial merges).

        Deleted and unknown ids are skipped; the result follows the order of ``memory_ids``.
        """
        scope = Scope.of(scope.user_id, scope.agent_id)
        ids = list(dict.fromkeys(validate_memory_id(i, "memory_ids") for i in memory_ids))
        if not ids:
            return []
        documents = await self._requests.query(
            "recall",
            search_text=None,
            filter=odata.and_(odata.scope_filter(scope), odata.id_in(ids)),
            select=list(SELECT_FIELDS),
            top=len(ids),
        )
        found = {r.id: r for r in map(from_document, documents) if r.status != MemoryStatus.DELETED}
        now = self._clock.now()
        updated = [policy.recall(found[i], now) for i in ids if i in found]
        fields = ["last_accessed_at", "access_count", "retention_score", "status"]
        actions = [{"@search.action": "merge", **to_document(r, fields)} for r in updated]
        if actions:
            await self._write("recall", actions, ignore_missing=True)
        return updated

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Physically delete a user's memories (one agent's, or all): keyset scan + delete batches."""
        filter_ = odata.user_filter(
            validate_scope_id(user_id, "user_id"),
            None if agent_id is None else validate_scope_id(agent_id, "agent_id"),
        )
        deleted = 0
        after: str | None = None
        while True:
            documents, more = await self._requests.keyset_page(
                filter_, after=after, limit=MAX_PAGE, select=["id"], operation="purge scan", probe=False
            )
            if not documents:
                break
            ids = [str(d["id"]) for d in documents]
            deleted += await self._write("purge", [{"@search.action": "delete", "id": i} for i in ids])
            after = ids[-1]
            if not more:
                break
        logger.info("purged %s memories of %s", deleted, scope_tag(user_id, agent_id))
        return deleted

    # -- forgetting (the policy is applied in memory_core.service.forgetting) --------------------
    async def scan_retention(self, *, after: str | None = None, limit: int) -> RetentionPage:
        """Retention inputs of active and archived memories of every scope, by id, in keyset pages
        (at most one service page of 1,000 per call; only the fields the policy reads)."""
        validate_positive_int(limit, "limit")
        if after is not None:
            validate_memory_id(after, "cursor")
        size = min(limit, MAX_PAGE)
        documents, more = await self._requests.keyset_page(
            odata.status_filter([MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]),
            after=after,
            limit=size,
            select=RETENTION_FIELDS,
            operation="forgetting scan",
            probe=False,
        )
        return retention_page(documents, more)

    async def memory_refs(self, keys: Sequence[Any]) -> list[MemoryRef | None]:
        """Id and scope of rows of a retention page (their keys are the ids): one query per 1,000."""
        ids = [str(k) for k in keys]
        documents = await self._requests.by_ids("forgetting refs", ids, ["id", "user_id", "agent_id"])
        found = {str(d["id"]): MemoryRef(str(d["id"]), str(d["user_id"]), str(d["agent_id"])) for d in documents}
        return [found.get(i) for i in ids]  # None: purged since the scan

    async def write_retention(self, write: RetentionWrite) -> int:
        """Merge ``status`` and ``retention_score`` into the given rows.

        The index has no conditional per-document write, so the rows are read again just before the
        merge and only those still active or archived are written: a memory deleted (or purged) since
        the scan stays deleted. (A delete landing in the milliseconds between that read and the merge
        can still be overwritten; the scan-to-write window of a page is what this closes.)
        """
        page = write.page
        wanted = {
            str(page.keys[int(at)]): (bool(active), float(retention))
            for at, active, retention in zip(write.rows, write.active, write.retention, strict=True)
        }
        if not wanted:
            return 0
        documents = await self._requests.by_ids(
            "forgetting recheck",
            list(wanted),
            ["id"],
            where=odata.status_filter([MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]),
        )
        live = {str(d["id"]) for d in documents}
        actions = [
            {
                "@search.action": "merge",
                "id": memory_id,
                "status": (MemoryStatus.ACTIVE if active else MemoryStatus.ARCHIVED).value,
                "retention_score": retention,
            }
            for memory_id, (active, retention) in wanted.items()
            if memory_id in live
        ]
        if len(actions) < len(wanted):
            logger.info("forgetting: %s memories were deleted since the scan; left alone", len(wanted) - len(actions))
        if not actions:
            return 0
        return await self._write("forgetting", actions, ignore_missing=True)

    def __repr__(self) -> str:
        return f"AzureSearchMemoryStore(index={self.index_name!r})"
