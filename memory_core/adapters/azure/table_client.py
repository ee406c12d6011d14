"""A table client with this package's retries, the table created on first use and ETag-checked writes:
the plumbing of :class:`~memory_core.adapters.azure.table_history.AzureTableHistoryStore`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Self, TypeVar

from azure.core import MatchConditions
from azure.data.tables import UpdateMode
from azure.data.tables.aio import TableClient

from memory_core.adapters.azure.retry import RetrySettings, Sleep, call_with_retries
from memory_core.errors import ConfigurationError, ConflictError, NotFoundError, PermanentError

__all__ = ["WRITE_ATTEMPTS", "Op", "RetryingTable", "open_table_client"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: One operation of an entity-group transaction, as ``TableClient.submit_transaction`` takes it.
Op = tuple[Any, ...]
#: Tries of a write that an ETag conflict sends back to read again.
WRITE_ATTEMPTS = 20


class RetryingTable:
    """A ``TableClient`` whose calls are retried (throttling, 5xx, timeouts) and whose table is created
    on first use.

    Args:
        client: An ``azure.data.tables.aio.TableClient`` (built with ``retry_total=0``: this object
            retries itself).
        retry: Attempts and back-off for throttling, 5xx and timeouts.
        sleep: Awaitable sleep (tests inject a recorder).
        owned: Resources to close with this object (the client and credential it was built with).
    """

    def __init__(
        self,
        client: TableClient,
        *,
        retry: RetrySettings | None = None,
        sleep: Sleep | None = None,
        owned: Sequence[Any] = (),
    ) -> None:
        self._client = client
        self._retry = retry or RetrySettings()
        self._sleep = sleep
        self._owned = list(owned)
        self._table_ready = False

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        if self._sleep is None:
            return await call_with_retries(operation, call, self._retry)
        return await call_with_retries(operation, call, self._retry, self._sleep)

    async def _ensure_table(self) -> None:
        if self._table_ready:
            return
        try:
            await self._call("create history table", self._client.create_table)
        except ConflictError:
            pass  # it exists (the Bicep creates it)
        except PermanentError as exc:
            # Without the right to create tables the table must already exist; the next call says so.
            logger.debug("creating the history table was refused: %s", exc)
        self._table_ready = True

    async def _get(self, pk: str, rk: str) -> Any | None:
        await self._ensure_table()
        try:
            return await self._call("read history", lambda: self._client.get_entity(pk, rk))
        except NotFoundError:
            return None

    async def _query(
        self, operation: str, query: str, select: list[str] | None = None, **params: Any
    ) -> list[Any]:
        await self._ensure_table()

        async def run() -> list[Any]:
            pager = self._client.query_entities(query, parameters=params, select=select)
            return [entity async for entity in pager]

        return await self._call(operation, run)

    async def _transact(self, operation: str, ops: list[Op]) -> None:
        await self._ensure_table()
        await self._call(operation, lambda: self._client.submit_transaction(ops))

    @staticmethod
    def _range(pk: str, low: str, high: str, extra: str = "") -> tuple[str, dict[str, Any]]:
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi" + extra
        return query, {"pk": pk, "lo": low, "hi": high}

    async def _upsert(self, operation: str, entity: dict[str, Any]) -> None:
        await self._ensure_table()
        await self._call(operation, lambda: self._client.upsert_entity(entity, mode=UpdateMode.REPLACE))

    async def _delete_quietly(self, pk: str, rk: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self._call("purge history", lambda: self._client.delete_entity(pk, rk))

    async def _create_or_merge(
        self,
        operation: str,
        new: dict[str, Any],
        change: Callable[[Any], dict[str, Any] | None],
        failure: str,
    ) -> Any | None:
        """Create ``new``, or merge ``change(entity)`` (``None``: nothing to change) into the entity
        there if its ETag is unchanged; read again after a conflict.

        Returns:
            The entity as read before the write (``None``: it was created).
        """
        pk, rk = new["PartitionKey"], new["RowKey"]
        for _ in range(WRITE_ATTEMPTS):
            entity = await self._get(pk, rk)
            try:
                if entity is None:
                    await self._call(operation, partial(self._client.create_entity, new))
                elif (update := change(entity)) is not None:
                    merge = partial(
                        self._client.update_entity,
                        {"PartitionKey": pk, "RowKey": rk, **update},
                        mode=UpdateMode.MERGE,
                        etag=entity.metadata["etag"],
                        match_condition=MatchConditions.IfNotModified,
                    )
                    await self._call(operation, merge)
                return entity
            except ConflictError:
                continue  # someone else created or changed it: read again
        raise PermanentError(failure)

    async def close(self) -> None:
        """Close the client and credential this object was given to close."""
        owned, self._owned = self._owned, []
        for resource in owned:
            try:
                await resource.close()
            except Exception as exc:  # close the rest regardless
                logger.warning("closing %s failed: %s", type(resource).__name__, exc)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def open_table_client(
    endpoint: str, table_name: str, credential: Any | None, transport: Any | None, client_id: str | None
) -> tuple[TableClient, list[Any]]:
    """The client on ``endpoint`` (a URL or a connection string), and what the store must close.

    Raises:
        ConfigurationError: ``endpoint`` is empty or neither a URL nor a connection string.
    """
    if not endpoint:
        raise ConfigurationError("MEMORY_HISTORY_TABLE_ENDPOINT is not set")
    kwargs: dict[str, Any] = {"retry_total": 0}
    if transport is not None:
        kwargs["transport"] = transport
    owned: list[Any] = []
    if "=" in endpoint and not endpoint.lower().startswith("http"):
        # The SDK maps ``UseDevelopmentStorage=true`` to Azurite's published development account.
        conn = endpoint.strip().rstrip(";")
        client = TableClient.from_connection_string(conn, table_name, **kwargs)
    else:
        if not endpoint.lower().startswith(("https://", "http://")):
            raise ConfigurationError(
                f"MEMORY_HISTORY_TABLE_ENDPOINT={endpoint!r} is neither a table endpoint URL nor a connection string"
            )
        if credential is None:
            from azure.identity.aio import DefaultAzureCredential

            credential = DefaultAzureCredential(managed_identity_client_id=client_id or None)
            owned.append(credential)
        client = TableClient(endpoint, table_name, credential=credential, **kwargs)
    owned.insert(0, client)
    return client, owned
