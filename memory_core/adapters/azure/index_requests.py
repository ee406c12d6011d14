"""The requests the Azure AI Search store sends to its index, each retried as one operation.

Throttling, unavailability and timeouts are retried (:mod:`memory_core.adapters.azure.retry`) and
then raise :class:`~memory_core.errors.TransientError`; index actions go out in batches whose failed
documents are sent again (:mod:`memory_core.adapters.azure.index_writes`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from azure.search.documents.aio import SearchClient
from azure.search.documents.models import IndexAction, IndexDocumentsBatch

from memory_core.adapters.azure import odata
from memory_core.adapters.azure.index_writes import batches, write_batch
from memory_core.adapters.azure.retry import RetrySettings, Sleep, call_with_retries
from memory_core.domain.validation import validate_memory_id

__all__ = ["MAX_PAGE", "IndexRequests"]

#: Page size of the internal keyset scans (purge, forgetting) and of lookups by id: one service page.
MAX_PAGE = 1000


class IndexRequests:
    """Searches, lookups, facets and index batches on one index, with retries.

    Args:
        client: The index's search client.
        retry: Attempts and back-off for requests and for failed documents.
        sleep: Awaitable sleep used between attempts.
    """

    def __init__(self, client: SearchClient, retry: RetrySettings, sleep: Sleep) -> None:
        self.client = client
        self.retry = retry
        self._sleep = sleep

    async def call(self, operation: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()`` with the retries of one operation."""
        return await call_with_retries(operation, call, self.retry, self._sleep)

    async def query(self, operation: str, **kwargs: Any) -> list[dict[str, Any]]:
        """One search request (with retries), all of its result pages read into dicts."""

        async def run() -> list[dict[str, Any]]:
            results = await self.client.search(**kwargs)
            return [dict(item) async for item in results]

        result: list[dict[str, Any]] = await self.call(operation, run)
        return result

    async def counted_query(self, operation: str, **kwargs: Any) -> tuple[list[dict[str, Any]], int]:
        """One search request read into dicts, with the total count of its matches (``$count``)."""

        async def run() -> tuple[list[dict[str, Any]], int]:
            results = await self.client.search(include_total_count=True, **kwargs)
            documents = [dict(item) async for item in results]
            return documents, int(await results.get_count() or 0)

        result: tuple[list[dict[str, Any]], int] = await self.call(operation, run)
        return result

    async def facet_counts(self, operation: str, filter_: str, facet: str) -> list[tuple[str, int]]:
        """The values of a facet (``facet`` as the service takes it: ``field,count:…``) among the
        documents matching ``filter_``, with their counts."""
        field = facet.split(",", 1)[0]

        async def run() -> list[tuple[str, int]]:
            results = await self.client.search(search_text=None, filter=filter_, facets=[facet], top=0)
            facets = await results.get_facets() or {}
            return [(str(f["value"]), int(f.get("count", 0))) for f in facets.get(field, [])]

        counts: list[tuple[str, int]] = await self.call(operation, run)
        return counts

    async def keyset_page(
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
        documents = await self.query(
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

    async def by_ids(
        self, operation: str, ids: Sequence[str], select: list[str], where: str | None = None
    ) -> list[dict[str, Any]]:
        """The documents with these ids that also match ``where``: one query per :data:`MAX_PAGE` ids."""
        documents: list[dict[str, Any]] = []
        for start in range(0, len(ids), MAX_PAGE):
            chunk = ids[start : start + MAX_PAGE]
            documents += await self.query(
                operation,
                search_text=None,
                filter=odata.and_(odata.id_in(chunk), where),
                select=select,
                top=len(chunk),
            )
        return documents

    async def write(self, operation: str, actions: Sequence[dict[str, Any]], *, ignore_missing: bool) -> int:
        """Send index actions in batches; returns how many documents were written.

        Raises:
            PartialWriteError: Some documents were rejected for good.
            RetryablePartialWriteError: Some still failed with a retryable status after the retries.
        """

        async def send(pending: list[dict[str, Any]]) -> list[Any]:
            batch = IndexDocumentsBatch(actions=[IndexAction(a) for a in pending])

            async def request() -> list[Any]:
                return list(await self.client.index_documents(batch))

            results: list[Any] = await self.call(operation, request)
            return results

        written = 0
        for batch in batches(actions):
            written += await write_batch(
                operation, batch, send, self.retry, self._sleep, ignore_missing=ignore_missing
            )
        return written
