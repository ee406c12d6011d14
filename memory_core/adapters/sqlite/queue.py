"""A durable queue in SQLite with the Service Bus semantics the pipeline relies on (embedded mode).

What it keeps from a Service Bus queue with sessions and duplicate detection:

- **Duplicate detection.** Every message has a ``message_id`` (derived from the scope and the turn or
  recall id, :func:`memory_core.domain.records.message_id_for`); a message whose id was sent within the
  duplicate detection window is dropped.
- **Sessions.** Every message has a ``session_id`` (the scope's, :func:`~memory_core.domain.records.session_id_for`).
  Only the oldest waiting message of a session can be received, and only while no other message of
  that session is locked, so one session is processed in order, one message at a time, while
  different sessions are processed in parallel. :meth:`SQLiteQueue.receive_batch` locks the oldest
  and the ones right behind it for one receiver, which processes them in order.
- **Peek-lock.** :meth:`SQLiteQueue.receive` locks a message for ``lock_seconds`` and counts the
  delivery; :meth:`~SQLiteQueue.complete` removes it, :meth:`~SQLiteQueue.abandon` releases it for
  redelivery, :meth:`~SQLiteQueue.dead_letter` moves it aside with a reason. A consumer that dies
  (even by ``SIGKILL``) loses nothing: its lock expires and the message is delivered again.
- **Dead-lettering.** A message received ``max_deliveries`` times without being completed is moved to
  the dead-letter queue (reason ``MaxDeliveryCountExceeded``, with the last error); consumers
  dead-letter permanent failures themselves with their own reason. Dead letters stay until they are
  requeued (sent again, at the end of their session, with a fresh delivery count) or purged.
- **Purging a scope.** :meth:`SQLiteQueue.purge_scope` removes every message of a user or scope
  (waiting, locked, dead-lettered) in one transaction, for ``memory-core purge``; ``secure_delete`` is
  on, so removed bodies are zeroed in the file, and :meth:`SQLiteQueue.checkpoint_wal` truncates the
  write-ahead log afterwards.

Storage: one SQLite file (:mod:`memory_core.adapters.sqlite.queue_file`), by default ``<store file>.queue``
beside the memory store (see :func:`default_queue_path`), so queue traffic never contends with the
store's writer; receiving and settling are :mod:`memory_core.adapters.sqlite.queue_delivery`, looking
into the queue :mod:`memory_core.adapters.sqlite.queue_listing`. Times are wall-clock epoch seconds
(a clock can be injected for tests).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

from memory_core.adapters.sqlite import queue_delivery as delivery
from memory_core.adapters.sqlite import queue_listing as listing
from memory_core.adapters.sqlite.files import keep_private, make_folder
from memory_core.adapters.sqlite.integrity import DEFAULT_CHECK_SECONDS, Integrity
from memory_core.adapters.sqlite.queue_file import QueueFile
from memory_core.adapters.sqlite.queue_messages import QueueMessage, QueueStats
from memory_core.capabilities import QueuedItem
from memory_core.domain.messages import MAX_RECALL_IDS, RecallUpdate, Turn, message_id_for, session_id_for
from memory_core.domain.validation import parse_model
from memory_core.errors import ValidationError

__all__ = ["DEFAULT_QUEUE", "MAX_MESSAGE_BYTES", "SQLiteQueue", "default_queue_path"]

DEFAULT_QUEUE = "memory-turns"
#: The largest message body accepted (Service Bus Standard's message limit).
MAX_MESSAGE_BYTES = 256 * 1024
_MAX_ID = 128


def default_queue_path(store_path: str | Path) -> str:
    """Where the embedded queue lives for a store file: ``<store file>.queue``.

    Args:
        store_path: The memory store's SQLite file (``":memory:"`` gives a private in-memory queue).
    """
    text = str(store_path)
    return ":memory:" if text == ":memory:" else f"{text}.queue"


def _check_id(value: str, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_ID:
        raise ValidationError(field, f"must be a string of 1-{_MAX_ID} characters")
    return value


class SQLiteQueue:
    """A durable, session-ordered, peek-lock queue in one SQLite file; also a ``TurnPublisher``.

    Args:
        path: The queue file (created with its folder); ``":memory:"`` for a private in-memory queue.
        queue: Name of the queue inside the file (one file can hold several).
        lock_seconds: How long a received message stays locked before it is delivered again.
        max_deliveries: Deliveries after which a message is dead-lettered instead of delivered again.
        duplicate_window_seconds: How long a message id is remembered for duplicate detection.
        clock: Source of wall-clock epoch seconds (tests inject their own).
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` survives a killed process in WAL mode).
        busy_timeout_seconds: How long an operation waits for another connection's write lock before
            it fails with a :class:`~memory_core.errors.TransientError`.
        coalesce_recalls: Fold a recall update into the one waiting at the end of its session
            (:meth:`publish_recall`).
        recall_merge_seconds: How recent that one must be (queued at most this long ago).
        check_seconds: The budget of the integrity check at open (``MEMORY_SQLITE_CHECK_SECONDS``; 0:
            none). A damaged file still opens: :attr:`integrity` says so (``serve``'s health: degraded).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        queue: str = DEFAULT_QUEUE,
        lock_seconds: float = 60.0,
        max_deliveries: int = 10,
        duplicate_window_seconds: float = 600.0,
        clock: Callable[[], float] = time.time,
        synchronous: str = "NORMAL",
        busy_timeout_seconds: float = 10.0,
        coalesce_recalls: bool = True,
        recall_merge_seconds: float = 2.0,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
    ) -> None:
        if lock_seconds <= 0:
            raise ValidationError("lock_seconds", "must be positive")
        if max_deliveries < 1:
            raise ValidationError("max_deliveries", "must be at least 1")
        if duplicate_window_seconds < 0:
            raise ValidationError("duplicate_window_seconds", "must not be negative")
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValidationError("synchronous", "must be OFF, NORMAL, FULL or EXTRA")
        if busy_timeout_seconds < 0:
            raise ValidationError("busy_timeout_seconds", "must not be negative")
        self._path = str(path)
        existed = make_folder(self._path)
        self.queue = _check_id(queue, "queue")
        self.lock_seconds = float(lock_seconds)
        self.max_deliveries = int(max_deliveries)
        self.duplicate_window_seconds = float(duplicate_window_seconds)
        self._clock = clock
        self.coalesce_recalls = coalesce_recalls
        self.recall_merge_seconds = float(recall_merge_seconds)
        #: Recall updates folded into a waiting one since the queue was opened.
        self.coalesced_recalls = 0
        self._file = QueueFile(
            self._path,
            synchronous=synchronous,
            busy_timeout_seconds=busy_timeout_seconds,
            existed=existed,
            check_seconds=check_seconds,
        )
        keep_private(self._path, existed, "queue")

    @property
    def path(self) -> str:
        return self._path

    @property
    def integrity(self) -> Integrity:
        """What the check at open found, or ``damaged`` once a statement failed so."""
        return self._file.integrity

    @property
    def busy_timeout_seconds(self) -> float:
        """How long an operation waits for another connection's write lock (settable)."""
        return self._file.busy_timeout_seconds

    @busy_timeout_seconds.setter
    def busy_timeout_seconds(self, seconds: float) -> None:
        self._file.busy_timeout_seconds = seconds

    def _lock_seconds(self, lock_seconds: float | None) -> float:
        return self.lock_seconds if lock_seconds is None else float(lock_seconds)

    # -- sending --------------------------------------------------------------------------------
    def send(self, body: bytes | str, *, message_id: str, session_id: str, subject: str = "") -> bool:
        """Enqueue one message at the end of its session.

        Args:
            body: The payload (text is stored as UTF-8).
            message_id: The producer's id; a repeat within the duplicate detection window is dropped.
            session_id: The ordered session (at most 128 characters, like Service Bus).
            subject: A label for inspection (``turn``, ``recall``).

        Returns:
            ``True`` if the message was enqueued, ``False`` if it was dropped as a duplicate.

        Raises:
            ValidationError: The body is over :data:`MAX_MESSAGE_BYTES`.
        """
        _check_id(message_id, "message_id")
        _check_id(session_id, "session_id")
        payload = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        if len(payload) > MAX_MESSAGE_BYTES:
            raise ValidationError(
                "body",
                f"is {len(payload)} bytes; a queue message holds at most {MAX_MESSAGE_BYTES} (as on Service Bus "
                "Standard), so it is refused here instead of dead-lettered later",
            )
        now = self._clock()
        with self._file.transaction() as conn:
            if self.duplicate_window_seconds > 0:
                conn.execute(
                    "DELETE FROM queue_dedup WHERE queue = ? AND seen_at < ?",
                    (self.queue, now - self.duplicate_window_seconds),
                )
                seen = conn.execute(
                    "SELECT 1 FROM queue_dedup WHERE queue = ? AND message_id = ?", (self.queue, message_id)
                ).fetchone()
                if seen is not None:
                    return False
                conn.execute(
                    "INSERT INTO queue_dedup (queue, message_id, seen_at) VALUES (?, ?, ?)",
                    (self.queue, message_id, now),
                )
            conn.execute(
                "INSERT INTO queue_messages (queue, message_id, session_id, subject, body, enqueued_at, "
                "visible_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.queue, message_id, session_id, subject[:64], payload, now, now),
            )
        return True

    # -- receiving ------------------------------------------------------------------------------

    # -- receiving ------------------------------------------------------------------------------
    def receive(self, *, lock_seconds: float | None = None) -> QueueMessage | None:
        """Lock and return the oldest receivable message, or ``None`` when nothing can be received.

        A message can be received when it is the oldest waiting message of its session and no message
        of that session is locked. Receiving counts a delivery; a message that has already been
        delivered ``max_deliveries`` times is dead-lettered (``MaxDeliveryCountExceeded``) instead.
        """
        received = self.receive_batch(max_messages=1, lock_seconds=lock_seconds)
        return received[0] if received else None

    def receive_batch(self, *, max_messages: int, lock_seconds: float | None = None) -> list[QueueMessage]:
        """Lock the oldest receivable message and up to ``max_messages - 1`` of the messages after it in
        its session, as Service Bus hands a session receiver several messages at once.

        The batch is the session's head (as :meth:`receive`) and the messages right behind it, in order,
        up to the first that is delayed (abandoned with a back-off), still locked, or due for the
        dead-letter queue. Each is locked (its own lock, the same expiry) and settled on its own. Only
        the head counts a delivery here; each message behind it counts one when its processing starts
        (:meth:`begin`), so a receiver that dies holding a batch costs the messages it never started
        nothing, and one it gives back unstarted goes with :meth:`release`. Process them in order: the
        session stays blocked until the last is settled.

        Returns:
            The messages, oldest first; empty when nothing can be received.
        """
        seconds = self._lock_seconds(lock_seconds)
        if seconds <= 0:
            raise ValidationError("lock_seconds", "must be positive")
        if max_messages < 1:
            raise ValidationError("max_messages", "must be at least 1")
        now = self._clock()
        with self._file.connection() as conn:
            if not delivery.has_receivable(conn, self.queue, now):
                return []  # idle polling never takes the write lock
        with self._file.transaction() as conn:
            until = now + seconds
            return delivery.receive_batch(
                conn, self.queue, now, max_messages=max_messages, max_deliveries=self.max_deliveries, until=until
            )

    def begin(self, message: QueueMessage, *, lock_seconds: float | None = None) -> QueueMessage:
        """Start processing a message that came behind the head of a batch: it counts its delivery now
        and its lock is renewed; returns it with both.

        Raises:
            LockLostError: It is no longer locked by this receiver (its lock expired and another
                receiver took it): do not process it, nor the rest of the batch.
        """
        until = self._clock() + self._lock_seconds(lock_seconds)
        with self._file.transaction() as conn:
            delivery.begin(conn, message, until)
        return dataclasses.replace(message, locked_until=until, delivery_count=message.delivery_count + 1)

    def release(self, message: QueueMessage) -> None:
        """Give back a message of a batch that was never begun: unlocked, its delivery count as it was.

        Raises:
            LockLostError: It is no longer locked by this receiver.
        """
        with self._file.transaction() as conn:
            delivery.release(conn, message)

    def complete(self, message: QueueMessage) -> None:
        """Remove a received message for good (call only once its effects are durable).

        Raises:
            LockLostError: The lock was lost (expired and taken by another receiver, or settled).
        """
        with self._file.transaction() as conn:
            delivery.complete(conn, message)

    def abandon(
        self,
        message: QueueMessage,
        *,
        error: str | None = None,
        delay_seconds: float = 0.0,
        count_delivery: bool = True,
    ) -> None:
        """Release a received message for redelivery (it stays the head of its session).

        Args:
            message: The received message.
            error: What went wrong (kept as ``last_error``, shown when it is dead-lettered).
            delay_seconds: Keep it (and so its session) invisible this long (a retry back-off).
            count_delivery: ``False`` gives the delivery back: the failure was the machine's (a full
                disk), not the message's, so waiting it out must not bring it closer to the
                dead-letter queue.
        """
        now = self._clock()
        with self._file.transaction() as conn:
            visible_at = now + max(0.0, delay_seconds)
            delivery.abandon(conn, message, visible_at=visible_at, error=error, count_delivery=count_delivery)

    def renew_lock(self, message: QueueMessage, *, lock_seconds: float | None = None) -> QueueMessage:
        """Extend the lock of a message still being processed; returns the message with its new expiry."""
        until = self._clock() + self._lock_seconds(lock_seconds)
        with self._file.transaction() as conn:
            delivery.renew_lock(conn, message, until)
        return dataclasses.replace(message, locked_until=until)

    def dead_letter(self, message: QueueMessage, *, reason: str, description: str = "") -> None:
        """Move a received message to the dead-letter queue with a reason (a permanent failure)."""
        if not reason:
            raise ValidationError("reason", "is required")
        now = self._clock()
        with self._file.transaction() as conn:
            delivery.dead_letter_received(conn, message, reason, description, now)

    # -- inspection and maintenance -------------------------------------------------------------
    def peek(self, *, limit: int = 100, after_seq: int = 0) -> list[QueueMessage]:
        """Waiting messages (locked or not), oldest first, without locking anything."""
        with self._file.connection() as conn:
            return listing.peek(conn, self.queue, limit=limit, after_seq=after_seq)

    def waiting_in_session(self, session_id: str, *, subject: str | None = None) -> list[QueueMessage]:
        """The waiting messages (locked or not, not dead-lettered) of one session, oldest first.

        Args:
            session_id: The session (a scope's: :func:`~memory_core.domain.records.session_id_for`).
            subject: Only messages with this subject (``turn``, ``recall``).
        """
        with self._file.connection() as conn:
            return listing.waiting_in_session(conn, self.queue, session_id, subject)

    def dead_letters(self, *, limit: int = 100, after_seq: int = 0) -> list[QueueMessage]:
        """Dead-lettered messages, oldest first."""
        with self._file.connection() as conn:
            return listing.dead_letters(conn, self.queue, limit=limit, after_seq=after_seq)

    def requeue(self, key: str | int) -> QueueMessage:
        """Send a dead letter again: at the end of its session, delivery count reset, reason cleared.

        Args:
            key: The dead letter's ``seq`` (a number) or its ``message_id``.

        Raises:
            ValidationError: No dead letter has that seq or message id.
        """
        now = self._clock()
        with self._file.transaction() as conn:
            return listing.requeue(conn, self.queue, key, now)

    def purge_dead_letters(self) -> int:
        """Remove every dead letter of the queue; returns how many."""
        with self._file.transaction() as conn:
            return listing.purge_dead_letters(conn, self.queue)

    # -- a user's messages (purge and export) ----------------------------------------------------
    async def purge_scope(self, user_id: str, agent_id: str | None = None) -> int:
        """Remove every message of a scope (``agent_id`` ``None``: of every scope of the user) in one
        transaction: waiting, locked (its receiver loses the lock; it cannot complete it) and
        dead-lettered. With ``secure_delete`` on, the bodies are zeroed in the file.

        Returns:
            How many messages were removed.
        """
        with self._file.transaction() as conn:
            seqs = [int(row[0]) for row in listing.scope_rows(conn, self.queue, user_id, agent_id)]
            listing.delete(conn, seqs)
        return len(seqs)

    async def queued_for(self, user_id: str, agent_id: str | None = None) -> list[QueuedItem]:
        """The messages of a scope (``agent_id`` ``None``: of every scope of the user) still held, by
        ids and time only, oldest first (export)."""
        with self._file.connection() as conn:
            rows = listing.scope_rows(conn, self.queue, user_id, agent_id)
        return listing.queued_items(rows)

    async def checkpoint_wal(self, *, rebuild: bool = False) -> bool:
        """Copy the write-ahead log into the file and truncate it, so removed bodies leave the disk;
        with ``rebuild``, first rewrite the file (``VACUUM``: no free space of a page keeps a copy of a
        removed body).

        Returns:
            ``False`` when another connection's read kept part of the log or the file could not be
            rewritten; ``True`` otherwise (always for an in-memory queue).
        """
        return self._file.checkpoint_wal(rebuild=rebuild)

    def stats(self) -> QueueStats:
        """How many messages wait, are locked, are dead-lettered, and in how many sessions."""
        now = self._clock()
        with self._file.connection() as conn:
            return listing.stats(conn, self.queue, now)

    def oldest_age_seconds(self) -> float | None:
        """How long the oldest waiting message (locked or not) has been in the queue; ``None``: none waits."""
        with self._file.connection() as conn:
            enqueued_at = listing.oldest_enqueued_at(conn, self.queue)
        return None if enqueued_at is None else max(0.0, self._clock() - enqueued_at)

    # -- the TurnPublisher port -----------------------------------------------------------------
    async def publish_turn(self, turn: Turn) -> bool:
        """Enqueue a turn on its scope's session (message id from scope and ``turn_id``).

        Returns:
            ``False`` when duplicate detection dropped it (the same scope sent this turn id within the
            window).
        """
        body = json.dumps(turn.to_json_dict(), ensure_ascii=False).encode("utf-8")
        return self.send(
            body,
            message_id=message_id_for(turn.scope, "turn", turn.turn_id),
            session_id=session_id_for(turn.scope),
            subject="turn",
        )

    async def publish_recall(self, update: RecallUpdate) -> None:
        """Enqueue a recall update on its scope's session (message id from scope and ``recall_id``),
        or fold it into the recall update that ends the session, when that one is recent.

        Coalescing: when the last message of the scope's session is a recall update no worker has
        taken, queued less than ``recall_merge_seconds`` ago, the new one is merged into it (memory ids
        united in order, ``at`` the later of the two) instead of queued behind it. Recalls of a memory
        folded together count as one recall: they are massed, seconds apart, not spaced (see
        :meth:`memory_core.domain.policy.HumanMemoryPolicy.recall`). A merge never passes a turn (the order
        of the session is kept) and never makes an update longer than a recall message may be.
        """
        body = json.dumps(update.to_json_dict(), ensure_ascii=False).encode("utf-8")
        session_id = session_id_for(update.scope)
        if self.coalesce_recalls and self._merge_recall(session_id, update):
            return
        self.send(
            body,
            message_id=message_id_for(update.scope, "recall", update.recall_id),
            session_id=session_id,
            subject="recall",
        )

    def _merge_recall(self, session_id: str, update: RecallUpdate) -> bool:
        """Fold ``update`` into the recent recall update that ends its session; ``False`` if there is none."""
        with self._file.transaction() as conn:
            row = conn.execute(
                "SELECT seq, subject, body, lock_token, enqueued_at FROM queue_messages "
                "WHERE queue = ? AND state = 'active' AND session_id = ? ORDER BY seq DESC LIMIT 1",
                (self.queue, session_id),
            ).fetchone()
            if row is None or row[1] != "recall" or row[3] is not None:
                return False  # nothing waiting, a turn last (order is kept), or a worker holds it
            if self._clock() - float(row[4]) > self.recall_merge_seconds:
                return False  # spaced, not massed: a recall of its own
            try:
                pending = parse_model(RecallUpdate, json.loads(bytes(row[2]).decode("utf-8")))
            except (ValueError, UnicodeDecodeError):
                return False  # not ours to rewrite: queue the new one behind it
            if pending.scope != update.scope:
                return False
            ids = list(dict.fromkeys([*pending.memory_ids, *update.memory_ids]))
            if len(ids) > MAX_RECALL_IDS:
                return False
            merged = pending.model_copy(update={"memory_ids": ids, "at": max(pending.at, update.at)})
            body = json.dumps(merged.to_json_dict(), ensure_ascii=False).encode("utf-8")
            conn.execute("UPDATE queue_messages SET body = ? WHERE seq = ?", (body, row[0]))
            self.coalesced_recalls += 1
        return True

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        """Close the connection (idempotent)."""
        self._file.close()
