"""A bulk builder for large synthetic benchmark stores (the 1M-memory runs).

``SQLiteMemoryStore.upsert`` validates every record and maintains the BM25 statistics row by row,
which is right for a service and far too slow for building a million memories. This builder lets the
store create its schema, then inserts rows directly with ``executemany`` into that schema and writes
the BM25 statistics (``term_stats``, ``field_stats``) in one pass at the end, exactly as a sequence of
upserts would have left them. The memory texts come from a pool of generated sentences whose terms
are analysed once, so a row costs an index into the pool. The store opened afterwards sees one
consistent database (change sequence 1 for every row and scope).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.adapters.sqlite.schema import RECORD_COLUMNS, insert_sql
from memory_core.adapters.sqlite.scope_index import SEARCH_FIELDS
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.language.text import index_terms
from memory_core.ports import FixedClock
from memory_core.tools.bench.synthetic import CATEGORIES, sentence_pool, unit_vectors
from memory_core.tools.progress import NO_PROGRESS, Progress

__all__ = ["BulkSpec", "bulk_build"]


@dataclass(frozen=True, slots=True)
class BulkSpec:
    """What to build.

    Args:
        store_size: Memories in the store.
        scope_size: Memories per scope (``user{n}`` / ``bench``); the last scope may be smaller.
        dimensions: Embedding size (random unit vectors).
        now: The build's "now"; ``updated_at`` is spread over the year before it.
        seed: Random seed (same seed, same store).
        retention_at: If set, ``retention_score`` and ``status`` are what the policy gives at this
            moment (as if the forgetting job last ran then); otherwise random and active.
        pool_size: Distinct memory texts.
    """

    store_size: int
    scope_size: int
    dimensions: int = 384
    now: datetime | None = None
    seed: int = 7
    retention_at: datetime | None = None
    pool_size: int = 50_000


class _Pool:
    """The memory texts, their index terms (analysed once), each row's terms JSON, and how often each
    text and category was used (what the BM25 statistics count)."""

    def __init__(self, size: int, seed: int) -> None:
        self.texts = sentence_pool(size, seed)
        self.terms = [Counter(index_terms(text)) for text in self.texts]
        self.category_terms = {c: Counter(index_terms(c)) for c in CATEGORIES}
        self.uses = np.zeros(len(self.texts), dtype=np.int64)
        self.category_uses: Counter[str] = Counter()
        self._json: dict[tuple[int, str], str] = {}

    def terms_json(self, p: int, category: str) -> str:
        """The ``terms`` column of a row with text ``p`` and ``category``."""
        key = (p, category)
        cached = self._json.get(key)
        if cached is None:
            terms = {
                "category": dict(self.category_terms[category]),
                "memory": dict(self.terms[p]),
                "summary": {},
            }
            cached = self._json[key] = json.dumps(terms, ensure_ascii=False, sort_keys=True)
        return cached

    def statistics(self) -> tuple[dict[str, Counter[str]], dict[str, int], dict[str, int]]:
        """Document frequencies, document counts and total lengths per field: every use of a text or
        category adds its terms once per document, as a sequence of upserts would."""
        df: dict[str, Counter[str]] = {name: Counter() for name in SEARCH_FIELDS}
        docs: dict[str, int] = dict.fromkeys(SEARCH_FIELDS, 0)
        lengths: dict[str, int] = dict.fromkeys(SEARCH_FIELDS, 0)

        def add(name: str, terms: Counter[str], count: int) -> None:
            docs[name] += count
            lengths[name] += count * sum(terms.values())
            for term in terms:
                df[name][term] += count

        for p, count in enumerate(self.uses.tolist()):
            if count:
                add("memory", self.terms[p], count)
        for category, count in self.category_uses.items():
            add("category", self.category_terms[category], count)
        return df, docs, lengths


@dataclass(frozen=True, slots=True)
class _Draw:
    """The random columns of one chunk of rows."""

    vectors: np.ndarray
    picks: np.ndarray
    cats: np.ndarray
    importance: np.ndarray
    access: np.ndarray
    updated: np.ndarray
    accessed: np.ndarray
    expires: np.ndarray
    retention: np.ndarray
    active: np.ndarray


def _draw(
    rng: np.random.Generator, n: int, spec: BulkSpec, now_epoch: float, pool: _Pool, policy: HumanMemoryPolicy
) -> _Draw:
    """``n`` rows' random values (in the order the generator has always been drawn from)."""
    vectors = unit_vectors(rng, n, spec.dimensions)
    picks = rng.integers(0, len(pool.texts), size=n)
    cats = rng.integers(0, len(CATEGORIES), size=n)
    importance = rng.random(n)
    access = rng.integers(0, 30, size=n) * (rng.random(n) < 0.3)
    updated = now_epoch - rng.uniform(0, 365, size=n) * 86400.0
    accessed = np.where(rng.random(n) < 0.2, updated + rng.uniform(0, 30, size=n) * 86400.0, np.nan)
    accessed = np.where(accessed > now_epoch, np.nan, accessed)
    expires = np.where(rng.random(n) < 0.05, now_epoch + rng.uniform(-30, 60, size=n) * 86400.0, np.nan)
    if spec.retention_at is not None:
        retention_of: Callable[..., np.ndarray] = policy.retention_array
        retention = retention_of(
            now_epoch=spec.retention_at.timestamp(),
            updated_at=updated,
            last_accessed_at=accessed,
            expires_at=expires,
            importance=importance,
            access_count=access.astype(np.float64),
        )
        active = retention > policy.archive_threshold
    else:
        retention = rng.random(n)
        active = np.ones(n, dtype=bool)
    return _Draw(vectors, picks, cats, importance, access, updated, accessed, expires, retention, active)


def _optional(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _rows(first: int, draw: _Draw, spec: BulkSpec, pool: _Pool, scopes: set[str]) -> list[tuple[Any, ...]]:
    """The rows ``first`` onwards as :func:`~memory_core.adapters.sqlite.schema.insert_sql` takes them;
    counts the texts, categories and scopes they use."""
    # Every column a row of the schema has (insert_sql's order), its field's default unless set below.
    defaults = {c.name: c.encode(c.default) for c in RECORD_COLUMNS}
    np.add.at(pool.uses, draw.picks, 1)
    rows = []
    for j in range(len(draw.picks)):
        s = (first + j) // spec.scope_size
        user = f"user{s:06d}"
        scopes.add(user)
        category = CATEGORIES[int(draw.cats[j])]
        pool.category_uses[category] += 1
        values = {
            **defaults,
            "id": f"m{s:06d}x{(first + j) % spec.scope_size:07d}",
            "user_id": user,
            "agent_id": "bench",
            "memory": pool.texts[int(draw.picks[j])],
            "category": category,
            "importance": float(draw.importance[j]),
            "confidence": 0.6,
            "status": "active" if draw.active[j] else "archived",
            "source": "bench",
            "retention_score": float(draw.retention[j]),
            "access_count": int(draw.access[j]),
            "created_at": float(draw.updated[j]),
            "updated_at": float(draw.updated[j]),
            "last_accessed_at": _optional(draw.accessed[j]),
            "expires_at": _optional(draw.expires[j]),
            "embedding": draw.vectors[j].tobytes(),
        }
        terms = pool.terms_json(int(draw.picks[j]), category)
        rows.append((*(values[c.name] for c in RECORD_COLUMNS), terms, 1))
    return rows


def _write_statistics(conn: sqlite3.Connection, pool: _Pool, scopes: set[str], spec: BulkSpec) -> None:
    """The BM25 statistics, the scopes' versions and the store's meta, in one transaction."""
    df, docs, lengths = pool.statistics()
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO term_stats (field, term, df) VALUES (?, ?, ?)",
        [(name, term, n) for name, counts in df.items() for term, n in counts.items()],
    )
    conn.executemany(
        "INSERT INTO field_stats (field, doc_count, total_length) VALUES (?, ?, ?)",
        [(name, docs[name], lengths[name]) for name in SEARCH_FIELDS if docs[name]],
    )
    conn.executemany(
        "INSERT INTO scope_versions (user_id, agent_id, version, epoch) VALUES (?, 'bench', 1, 0)",
        [(u,) for u in sorted(scopes)],
    )
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'seq'")
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('embedding_dimensions', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(spec.dimensions),),
    )
    conn.execute("COMMIT")


def _create_schema(path: str | Path, now: datetime) -> None:
    """Let the store create its schema in a new file.

    Raises:
        SystemExit: ``path`` already holds memories.
    """
    store = SQLiteMemoryStore(path, clock=FixedClock(now))
    conn = store._conn  # the constructor created the schema
    if conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]:
        conn.close()
        raise SystemExit(f"{path} already holds memories; remove it or pick another path")
    conn.close()


def bulk_build(
    path: str | Path,
    spec: BulkSpec,
    *,
    progress: Progress = NO_PROGRESS,
    chunk: int = 20_000,
    policy: HumanMemoryPolicy | None = None,
) -> None:
    """Create the store file at ``path`` (which must not hold memories yet) filled as ``spec`` says.

    ``progress`` is told of the memories written as they are.

    Raises:
        SystemExit: ``path`` already holds memories.
    """
    if spec.now is None:
        raise ValueError("spec.now is required")
    policy = policy or HumanMemoryPolicy()
    _create_schema(path, spec.now)
    rng = np.random.default_rng(spec.seed)
    pool = _Pool(min(spec.pool_size, spec.store_size), spec.seed)
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    bar = progress.bar("building store", spec.store_size, unit="memories")
    scopes: set[str] = set()
    written = 0
    while written < spec.store_size:
        n = min(chunk, spec.store_size - written)
        draw = _draw(rng, n, spec, spec.now.timestamp(), pool, policy)
        rows = _rows(written, draw, spec, pool, scopes)
        conn.execute("BEGIN")
        conn.executemany(insert_sql(), rows)
        conn.execute("COMMIT")
        written += n
        bar.update(written)
    _write_statistics(conn, pool, scopes, spec)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    bar.finish()
