"""The production memory store on Azure AI Search (``azure-search-documents`` 12.x, async client).

One index document per memory (see :mod:`memory_core.adapters.azure.search_index`). Searches compile
:class:`~memory_core.domain.records.MemorySearchOptions` and the scope into OData (never caller-supplied OData),
ask for every field but the vector and pick the scoring profile from :mod:`memory_core.domain.ranking`.

Writes go out in batches of at most 1,000 actions (and a few megabytes). A ``207`` answer is read
document by document: documents that failed with a retryable status (409, 422, 503) are sent again
with back-off, and documents that still fail are reported in the raised error, never dropped.
Every write carries absolute values (an upload, or a merge of computed fields), so a retried request
or a redelivered message leaves the index as one delivery would. A call that fails part-way may
have written some of its documents; repeating it completes the work.

Throttling, unavailability and timeouts are retried (:mod:`memory_core.adapters.azure.retry`) and
then raise :class:`~memory_core.errors.TransientError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from azure.core.credentials import AzureKeyCredential
from azure.core.credentials_async import AsyncTokenCredential
from azure.search.documents.aio import SearchClient
from azure.search.documents.models import IndexAction, IndexDocumentsBatch, VectorizedQuery
from pydantic_core import to_jsonable_python

from memory_core.adapters.azure import odata
from memory_core.adapters.azure.retry import RetrySettings, Sleep, call_with_retries
from memory_core.adapters.azure.search_index import (
    JSON_FIELDS,
    SELECT_FIELDS,
    SEMANTIC_CONFIGURATION,
    VECTOR_FIELD,
    close_credential,
    document_field,
)
from memory_core.domain.fusion import fusion_for
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.ranking import profile_for
from memory_core.domain.records import (
    IMMUTABLE_FIELDS,
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    Scope,
    status_note,
)
from memory_core.domain.search import (
    MemorySearchOptions,
    OrderBy,
    ScoreBreakdown,
    SearchHit,
    SearchMode,
    SearchResult,
)
from memory_core.domain.validation import (
    ensure_utc,
    parse_model,
    validate_category,
    validate_memory_id,
    validate_memory_ids,
    validate_positive_int,
    validate_scope_id,
)
from memory_core.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PermanentError,
    TransientError,
    ValidationError,
)
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

__all__ = [
    "MAX_BATCH_ACTIONS",
    "AzureSearchMemoryStore",
    "DocumentFailure",
    "PartialWriteError",
    "RetryablePartialWriteError",
    "from_document",
    "plain_query_text",
    "to_document",
]

logger = logging.getLogger(__name__)

#: Most actions Azure AI Search accepts in one indexing request.
MAX_BATCH_ACTIONS = 1000
#: Keep request bodies well under the service's 16 MB limit.
MAX_BATCH_BYTES = 8 * 1024 * 1024
#: Per-document statuses in a 207 answer that are worth sending again.
RETRYABLE_DOCUMENT_STATUS = frozenset({409, 422, 503})
#: Page size of the internal keyset scans (purge, forgetting): one service page.
MAX_PAGE = 1000
#: Largest ``limit`` of :meth:`AzureSearchMemoryStore.scan` (the SDK follows the service's pages).
MAX_SCAN_LIMIT = 10_000
#: Most agents listed for one user.
MAX_AGENTS = 1000

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


@dataclass(frozen=True, slots=True)
class DocumentFailure:
    """One document an indexing request did not write."""

    key: str
    status_code: int
    message: str

    def __str__(self) -> str:
        return f"{self.key} (HTTP {self.status_code}: {self.message})"


def _failure_summary(operation: str, failures: Sequence[DocumentFailure]) -> str:
    listed = ", ".join(str(f) for f in failures[:20])
    more = f" and {len(failures) - 20} more" if len(failures) > 20 else ""
    return f"{operation}: {len(failures)} document(s) were not written: {listed}{more}"


class PartialWriteError(PermanentError):
    """Some documents of a write were rejected for good (the others were written)."""

    def __init__(self, operation: str, failures: Sequence[DocumentFailure]) -> None:
        self.failures = list(failures)
        super().__init__(_failure_summary(operation, self.failures))


class RetryablePartialWriteError(TransientError):
    """Some documents still failed with a retryable status after the retries (the others were written)."""

    def __init__(self, operation: str, failures: Sequence[DocumentFailure]) -> None:
        self.failures = list(failures)
        super().__init__(_failure_summary(operation, self.failures))


# ------------------------------------------------------------------------------------------------
# Documents
# ------------------------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return ensure_utc(value).isoformat().replace("+00:00", "Z")


def _field_value(name: str, value: Any) -> Any:
    if name in {"created_at", "updated_at", "last_accessed_at", "expires_at"}:
        return _iso(value)
    if name == "status":
        return MemoryStatus(value).value
    return value


def to_document(record: MemoryRecord, fields: Sequence[str] | None = None) -> dict[str, Any]:
    """The index document of ``record`` (only ``id`` and ``fields`` when given).

    Timestamps become ``Edm.DateTimeOffset`` ISO strings; ``metadata`` and ``provenance`` JSON strings
    in ``metadata_json`` and ``provenance_json``; a missing embedding is left out of a whole document.
    """
    wanted = list(MemoryRecord.model_fields) if fields is None else ["id", *fields]
    document: dict[str, Any] = {}
    for name in wanted:
        key = document_field(name)
        if key in document:
            continue
        value = getattr(record, name)
        if name in JSON_FIELDS:
            document[key] = json.dumps(to_jsonable_python(value), ensure_ascii=False, sort_keys=True)
        elif name == "embedding":
            if value is not None:
                document[VECTOR_FIELD] = [float(x) for x in value]
            elif fields is not None:
                document[VECTOR_FIELD] = None
        else:
            document[key] = _field_value(name, value)
    return document


def _parse_time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def from_document(document: Mapping[str, Any]) -> MemoryRecord:
    """The :class:`MemoryRecord` stored in an index document (``@search.*`` keys are ignored)."""
    data: dict[str, Any] = {}
    for name in MemoryRecord.model_fields:
        if name in JSON_FIELDS:
            raw = document.get(document_field(name))
            if raw:
                data[name] = json.loads(raw)
        elif name == "embedding":
            vector = document.get(VECTOR_FIELD)
            data["embedding"] = [float(x) for x in vector] if vector else None
        elif name in {"created_at", "updated_at", "last_accessed_at", "expires_at"}:
            data[name] = _parse_time(document.get(name))
        elif name in document and document[name] is not None:
            data[name] = document[name]
    return MemoryRecord.model_validate(data)


_QUERY_SPECIALS = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def plain_query_text(text: str) -> str:
    """``text`` as plain words for the ``search`` parameter: every query-syntax operator escaped.

    User and agent text is never query syntax: ``-``, ``+``, ``|``, quotes, ``*``, parentheses and the
    rest are backslash-escaped, so ``non-smoking "quiet" room*`` searches for those words the way the
    embedded store does, instead of excluding, grouping or prefix-matching.
    """
    return _QUERY_SPECIALS.sub(r"\\\1", text)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _breakdown(hit: Mapping[str, Any], profile: str | None) -> ScoreBreakdown:
    """What the service told us about a hit's score (debug subscores when they were asked for)."""
    relevance = _number(hit.get("@search.score")) or 0.0
    keyword_score = vector_score = None
    boost = 1.0
    debug = hit.get("@search.document_debug_info") or hit.get("@search.documentDebugInfo")
    if isinstance(debug, Mapping):
        subscores = (debug.get("vectors") or {}).get("subscores") or {}
        keyword_score = _number((subscores.get("text") or {}).get("searchScore"))
        for entry in subscores.get("vectors") or []:
            if isinstance(entry, Mapping) and isinstance(entry.get(VECTOR_FIELD), Mapping):
                vector_score = _number(entry[VECTOR_FIELD].get("searchScore"))
        document_boost = _number(subscores.get("documentBoost"))
        if document_boost is not None:
            boost = document_boost
    return ScoreBreakdown(
        keyword_score=keyword_score,
        vector_score=vector_score,
        relevance=relevance,
        profile=profile,
        boost=boost,
    )


def _chunks(actions: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split actions into requests of at most :data:`MAX_BATCH_ACTIONS` and :data:`MAX_BATCH_BYTES`."""
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for action in actions:
        action_size = len(json.dumps(action, ensure_ascii=False).encode()) + 1
        if current and (len(current) >= MAX_BATCH_ACTIONS or size + action_size > MAX_BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(action)
        size += action_size
    if current:
        batches.append(current)
    return batches


# ------------------------------------------------------------------------------------------------
# The store
# ------------------------------------------------------------------------------------------------


class AzureSearchMemoryStore:
    """:class:`~memory_core.ports.MemoryStore` on an Azure AI Search index.

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
        self._retry = retry or RetrySettings()
        self._sleep = sleep
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
    async def _call(self, operation: str, call: Callable[[], Awaitable[Any]]) -> Any:
        return await call_with_retries(operation, call, self._retry, self._sleep)

    async def _query(self, operation: str, **kwargs: Any) -> list[dict[str, Any]]:
        """One search request (with retries), all of its result pages read into dicts."""

        async def run() -> list[dict[str, Any]]:
            results = await self._client.search(**kwargs)
            return [dict(item) async for item in results]

        result: list[dict[str, Any]] = await self._call(operation, run)
        return result

    async def _write(
        self, operation: str, actions: Sequence[dict[str, Any]], *, ignore_missing: bool = False
    ) -> int:
        """Send index actions; returns how many were written. Raises when any document is not.

        With ``ignore_missing`` a merge into a document that no longer exists (404, for example
        purged meanwhile) is logged and skipped instead of failing the whole call.
        """
        written = 0
        for batch in _chunks(actions):
            written += await self._write_batch(operation, batch, ignore_missing)
        return written

    async def _write_batch(self, operation: str, actions: list[dict[str, Any]], ignore_missing: bool) -> int:
        pending = actions
        written = 0
        permanent: list[DocumentFailure] = []
        retryable: list[DocumentFailure] = []
        for attempt in range(1, self._retry.document_attempts + 1):
            batch = IndexDocumentsBatch(actions=[IndexAction(a) for a in pending])

            async def send(batch: IndexDocumentsBatch = batch) -> list[Any]:
                return list(await self._client.index_documents(batch))

            results = await self._call(operation, send)
            by_key = {str(r.key): r for r in results}
            retryable = []
            retry_actions: list[dict[str, Any]] = []
            for action in pending:
                key = str(action["id"])
                result = by_key.get(key)
                if result is None:
                    retryable.append(DocumentFailure(key, 0, "no result for this document in the response"))
                    retry_actions.append(action)
                elif result.succeeded:
                    written += 1
                elif int(result.status_code) in RETRYABLE_DOCUMENT_STATUS:
                    retryable.append(
                        DocumentFailure(key, int(result.status_code), result.error_message or "")
                    )
                    retry_actions.append(action)
                elif ignore_missing and int(result.status_code) == 404:
                    logger.warning("%s: document %s no longer exists; skipped", operation, key)
                else:
                    permanent.append(
                        DocumentFailure(key, int(result.status_code), result.error_message or "")
                    )
            if not retry_actions:
                break
            pending = retry_actions
            if attempt < self._retry.document_attempts:
                wait = self._retry.delay(attempt)
                logger.warning(
                    "%s: %s document(s) failed with a retryable status (attempt %s of %s); retrying in %.2fs",
                    operation,
                    len(retry_actions),
                    attempt,
                    self._retry.document_attempts,
                    wait,
                )
                await self._sleep(wait)
        if permanent:
            raise PartialWriteError(operation, permanent + retryable)
        if retryable:
            raise RetryablePartialWriteError(operation, retryable)
        return written

    def _check_embedding(self, embedding: Sequence[float] | None, field: str = "embedding") -> None:
        if embedding is not None and self.dimensions is not None and len(embedding) != self.dimensions:
            raise ConflictError(
                f"{field} has {len(embedding)} dimensions but the index stores {self.dimensions}"
            )

    # -- MemoryStore ------------------------------------------------------------------------------
    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace whole records (``upload`` actions)."""
        latest: dict[str, MemoryRecord] = {}
        for record in records:
            record = parse_model(MemoryRecord, record)
            self._check_embedding(record.embedding)
            latest[record.id] = record
        if not latest:
            return
        actions = [{"@search.action": "upload", **to_document(r)} for r in latest.values()]
        await self._write("upsert", actions)

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        """One record of any status in ``scope``, or ``None``."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        key = validate_memory_id(memory_id)
        try:
            document = await self._call("get", lambda: self._client.get_document(key))
        except NotFoundError:
            return None
        record = from_document(document)
        if record.user_id != scope.user_id or record.agent_id != scope.agent_id:
            return None
        return record

    async def get_many(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The records of ``scope`` among ``memory_ids`` (any status, with embeddings, as :meth:`get`
        returns them), by id; ids missing or of another scope are absent
        (:class:`~memory_core.ports.BatchReader`).

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
            documents = await self._query(
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
        action = {"@search.action": "merge", **to_document(updated, list(changes))}
        await self._write("merge", [action])
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
        action = {"@search.action": "merge", **to_document(updated, ["status", "metadata"])}
        await self._write("mark status", [action])
        logger.info("memory %s marked %s", updated.id, status.value)
        return updated.without_embedding()

    async def search(
        self,
        scope: Scope,
        query: str,
        vector: Sequence[float] | None,
        options: MemorySearchOptions,
    ) -> SearchResult:
        """Ranked memories of ``scope`` (see DESIGN section 4 for the semantics of each mode)."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        options = parse_model(MemorySearchOptions, options)
        if query is not None and not isinstance(query, str):
            raise ValidationError("query", "must be a string")
        text = (query or "").strip()
        mode = options.mode
        notes: list[str] = []
        use_text = mode in {SearchMode.KEYWORD, SearchMode.HYBRID, SearchMode.SEMANTIC}
        use_vector = mode in {SearchMode.VECTOR, SearchMode.HYBRID, SearchMode.SEMANTIC}
        if use_vector and vector is None:
            raise ValidationError("vector", f"{mode.value} search needs a query vector")
        if use_vector and vector is not None:
            if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector) or not any(vector):
                raise ValidationError("vector", "must be a non-zero vector of finite numbers")
            if self.dimensions is not None and len(vector) != self.dimensions:
                raise ValidationError(
                    "vector", f"has {len(vector)} dimensions; this index's embeddings have {self.dimensions}"
                )
        if mode != SearchMode.KEYWORD and not text:
            use_text = False  # hybrid/semantic with no words: the vector leg alone
        profile = profile_for(options.ranking_profile)

        def result(hits: list[SearchHit]) -> SearchResult:
            return SearchResult(hits=hits, mode=mode, ranking_profile=options.ranking_profile, notes=notes)

        fusion = fusion_for(text or "", options.vector_weight)
        kwargs: dict[str, Any] = {
            # An empty keyword query matches everything the filters allow (``*``).
            "search_text": plain_query_text(text) if use_text and text else None,
            "filter": odata.search_filter(scope, options, self._clock.now()),
            "select": list(SELECT_FIELDS),
            "top": options.top,
            "scoring_statistics": "global",
        }
        if use_vector:
            assert vector is not None
            kwargs["vector_queries"] = [
                VectorizedQuery(
                    vector=[float(x) for x in vector],
                    k_nearest_neighbors=options.vector_k,
                    fields=VECTOR_FIELD,
                    # the vector leg's weight in the fusion (only where there is a text leg to fuse with)
                    weight=fusion.vector_weight if use_text and text and fusion.vector_weight != 1.0 else None,
                    exhaustive=True if self._exhaustive else None,
                )
            ]
        if use_vector and use_text and text and fusion.text_match == "all":
            kwargs["search_mode"] = "all"  # the text leg counts a memory only with every query word
        if profile is not None:
            kwargs["scoring_profile"] = profile.name
        order = odata.order_by(options.order_by)
        if order:
            kwargs["order_by"] = order
        if mode == SearchMode.SEMANTIC:
            if text:
                kwargs["query_type"] = "semantic"
                kwargs["semantic_configuration_name"] = SEMANTIC_CONFIGURATION
                kwargs["semantic_error_mode"] = "partial"
            else:
                notes.append("the semantic ranker needs query text; results are not reranked")
        if self._debug_scores:
            kwargs["debug"] = "vector"
        documents = await self._query("search", **kwargs)
        hits = []
        for document in documents:
            reranker = _number(document.get("@search.reranker_score"))
            breakdown = _breakdown(document, profile.name if profile else None)
            hits.append(
                SearchHit(
                    record=from_document(document),
                    score=breakdown.relevance,
                    reranker_score=reranker,
                    breakdown=breakdown,
                )
            )
        return result(hits)

    async def _keyset_page(
        self,
        filter_: str,
        *,
        after: str | None,
        limit: int,
        select: Sequence[str],
        operation: str,
        probe: bool = True,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` documents matching ``filter_`` with ``id`` above ``after``, by id; and
        whether more may follow.

        With ``probe`` one extra document is asked for, so "more" is exact; without it (the internal
        scans, which keep their pages at the service's 1,000) a full page counts as "maybe more".
        """
        clauses = [filter_]
        if after is not None:
            clauses.append(odata.compare("id", "gt", validate_memory_id(after, "after")))
        documents = await self._query(
            operation,
            search_text=None,
            filter=odata.and_(*clauses),
            order_by=["id asc"],
            select=list(select),
            top=limit + 1 if probe else limit,
        )
        if probe:
            return documents[:limit], len(documents) > limit
        return documents, len(documents) >= limit

    async def scan(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        after: str | None = None,
        limit: int = 100,
        with_embedding: bool = False,
    ) -> Page:
        """Records of ``scope`` ordered by id, after the cursor (``$filter id gt …``, no ``$skip``)."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SCAN_LIMIT:
            raise ValidationError("limit", f"must be an integer between 1 and {MAX_SCAN_LIMIT}")
        clauses = [odata.scope_filter(scope)]
        if statuses is not None:
            clauses.append(odata.status_filter(statuses))
        documents, more = await self._keyset_page(
            odata.and_(*clauses),
            after=after,
            limit=limit,
            select=[*SELECT_FIELDS, VECTOR_FIELD] if with_embedding else list(SELECT_FIELDS),
            operation="scan",
        )
        records = [from_document(d) for d in documents]
        return Page(records=records, next_cursor=records[-1].id if more and records else None)

    async def agents(self, user_id: str) -> list[str]:
        """The agent ids holding memories of ``user_id`` (a facet on ``agent_id``), sorted."""
        filter_ = odata.user_filter(validate_scope_id(user_id, "user_id"))

        async def run() -> list[str]:
            results = await self._client.search(
                search_text=None,
                filter=filter_,
                facets=[f"agent_id,count:{MAX_AGENTS},sort:value"],
                top=0,
            )
            facets = await results.get_facets() or {}
            return sorted(str(f["value"]) for f in facets.get("agent_id", []) if f.get("count", 0) > 0)

        agents: list[str] = await self._call("agents", run)
        return agents

    async def browse(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        category: str | None = None,
        kind: MemoryKind | None = None,
        order_by: OrderBy | None = None,
        offset: int = 0,
        limit: int = 100,
    ) -> SortedPage:
        """A filtered, sorted page of ``scope`` (``$orderby field, id``, ``$skip``, ``$count``)."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        check_browse_window(offset, limit)
        clauses = [odata.scope_filter(scope)]
        if statuses:
            clauses.append(odata.status_filter(statuses))
        if category is not None:
            clauses.append(odata.eq("category", validate_category(category)))
        if kind is not None:
            clauses.append(odata.kind_filter(MemoryKind(kind)))
        order = [*(odata.order_by(order_by) or []), "id asc"]

        async def run() -> tuple[list[dict[str, Any]], int]:
            results = await self._client.search(
                search_text=None,
                filter=odata.and_(*clauses),
                order_by=order,
                select=list(SELECT_FIELDS),
                skip=offset or None,
                top=limit,
                include_total_count=True,
            )
            documents = [dict(item) async for item in results]
            return documents, int(await results.get_count() or 0)

        documents, total = await self._call("browse", run)
        return SortedPage(records=[from_document(d) for d in documents], total=total)

    async def count_agents(self, user_id: str) -> list[StatusCounts]:
        """The agents of ``user_id`` with their counts by status (a facet on ``agent_id`` per status)."""
        user_filter = odata.user_filter(validate_scope_id(user_id, "user_id"))

        async def facet(status: MemoryStatus) -> list[tuple[str, MemoryStatus, int]]:
            async def run() -> list[tuple[str, MemoryStatus, int]]:
                results = await self._client.search(
                    search_text=None,
                    filter=odata.and_(user_filter, odata.eq("status", status.value)),
                    facets=[f"agent_id,count:{MAX_AGENTS},sort:value"],
                    top=0,
                )
                facets = await results.get_facets() or {}
                return [(str(f["value"]), status, int(f.get("count", 0))) for f in facets.get("agent_id", [])]

            rows: list[tuple[str, MemoryStatus, int]] = await self._call("count agents", run)
            return rows

        counts: dict[str, StatusCounts] = {}
        for rows in await asyncio.gather(*(facet(s) for s in MemoryStatus)):
            for agent_id, status, count in rows:
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
        documents = await self._query(
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
            documents, more = await self._keyset_page(
                filter_, after=after, limit=MAX_PAGE, select=["id"], operation="purge scan", probe=False
            )
            if not documents:
                break
            ids = [str(d["id"]) for d in documents]
            deleted += await self._write("purge", [{"@search.action": "delete", "id": i} for i in ids])
            after = ids[-1]
            if not more:
                break
        logger.info("purged %s memories of user %s (agent %s)", deleted, user_id, agent_id or "*")
        return deleted

    # -- forgetting (the policy is applied in memory_core.service.forgetting) --------------------
    async def scan_retention(self, *, after: str | None = None, limit: int) -> RetentionPage:
        """Retention inputs of active and archived memories of every scope, by id, in keyset pages
        (at most one service page of 1,000 per call; only the fields the policy reads)."""
        validate_positive_int(limit, "limit")
        if after is not None:
            validate_memory_id(after, "cursor")
        size = min(limit, MAX_PAGE)
        documents, more = await self._keyset_page(
            odata.status_filter([MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]),
            after=after,
            limit=size,
            select=RETENTION_FIELDS,
            operation="forgetting scan",
            probe=False,
        )

        def floats(name: str) -> np.ndarray:
            return np.array([_number(d.get(name)) for d in documents], dtype=np.float64)

        def times(name: str) -> np.ndarray:
            return np.array(
                [np.nan if (t := _parse_time(d.get(name))) is None else t.timestamp() for d in documents],
                dtype=np.float64,
            )

        ids = [str(d["id"]) for d in documents]
        return RetentionPage(
            keys=ids,
            active=np.array([d.get("status") == MemoryStatus.ACTIVE.value for d in documents], dtype=bool),
            retention=floats("retention_score"),
            importance=floats("importance"),
            access_count=floats("access_count"),
            updated_at=times("updated_at"),
            last_accessed_at=times("last_accessed_at"),
            expires_at=times("expires_at"),
            next_cursor=ids[-1] if more and ids else None,
        )

    async def memory_refs(self, keys: Sequence[Any]) -> list[MemoryRef | None]:
        """Id and scope of rows of a retention page (their keys are the ids): one query per 1,000."""
        ids = [str(k) for k in keys]
        documents = await self._by_ids("forgetting refs", ids, ["id", "user_id", "agent_id"])
        found = {str(d["id"]): MemoryRef(str(d["id"]), str(d["user_id"]), str(d["agent_id"])) for d in documents}
        return [found.get(i) for i in ids]  # None: purged since the scan

    async def _by_ids(
        self, operation: str, ids: Sequence[str], select: list[str], where: str | None = None
    ) -> list[dict[str, Any]]:
        """The documents with these ids that also match ``where``: one query per 1,000 ids."""
        documents: list[dict[str, Any]] = []
        for start in range(0, len(ids), MAX_PAGE):
            chunk = ids[start : start + MAX_PAGE]
            documents += await self._query(
                operation,
                search_text=None,
                filter=odata.and_(odata.id_in(chunk), where),
                select=select,
                top=len(chunk),
            )
        return documents

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
        documents = await self._by_ids(
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
