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

import numpy as np

from memory_core.adapters.sqlite.schema import RECORD_COLUMNS, insert_sql
from memory_core.adapters.sqlite.scope_index import SEARCH_FIELDS
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.language.text import index_terms
from memory_core.ports import FixedClock
from memory_core.tools.progress import NO_PROGRESS, Progress

__all__ = ["BulkSpec", "bulk_build", "sentence_pool"]

_WORDS_EN = (
    "coffee tea travel hotel window seat flight kyoto tokyo osaka spicy food allergy peanuts meeting monday "
    "friday morning evening budget family daughter son birthday gift running yoga piano book novel python "
    "azure cloud deploy vegetarian sushi ramen train bus car bicycle weekend holiday doctor dentist "
    "appointment project deadline report manager team quiet room ocean view onsen"
).split()
_WORDS_JA = (
    "コーヒー 紅茶 旅行 旅館 窓側 座席 京都 東京 大阪 辛い 料理 アレルギー 会議 月曜 金曜 朝 夜 予算 家族 娘 息子 "
    "誕生日 プレゼント ランニング ヨガ ピアノ 小説 温泉 新幹線 週末 休暇 歯医者 予約 締め切り 報告"
).split()
_CATEGORIES = ("preference", "constraint", "profile", "plan", "routine")


def sentence_pool(size: int, seed: int) -> list[str]:
    """``size`` random sentences, half English words, half Japanese (5-11 words each)."""
    rng = np.random.default_rng(seed)
    pool = []
    for _ in range(size):
        japanese = rng.random() < 0.5
        words = _WORDS_JA if japanese else _WORDS_EN
        picked = rng.choice(len(words), size=int(rng.integers(5, 12)), replace=True)
        pool.append(("" if japanese else " ").join(words[i] for i in picked))
    return pool


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
    store = SQLiteMemoryStore(path, clock=FixedClock(spec.now))
    conn = store._conn  # the constructor created the schema
    if conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]:
        conn.close()
        raise SystemExit(f"{path} already holds memories; remove it or pick another path")
    conn.close()
    rng = np.random.default_rng(spec.seed)
    pool = sentence_pool(min(spec.pool_size, spec.store_size), spec.seed)
    pool_terms = []
    for text in pool:
        counts = Counter(index_terms(text))
        pool_terms.append(counts)
    category_terms = {c: Counter(index_terms(c)) for c in _CATEGORIES}
    pool_json: dict[tuple[int, str], str] = {}

    def terms_json(p: int, category: str) -> str:
        key = (p, category)
        cached = pool_json.get(key)
        if cached is None:
            terms = {"category": dict(category_terms[category]), "memory": dict(pool_terms[p]), "summary": {}}
            cached = pool_json[key] = json.dumps(terms, ensure_ascii=False, sort_keys=True)
        return cached

    df: dict[str, Counter[str]] = {name: Counter() for name in SEARCH_FIELDS}
    docs: dict[str, int] = dict.fromkeys(SEARCH_FIELDS, 0)
    lengths: dict[str, int] = dict.fromkeys(SEARCH_FIELDS, 0)
    uses = np.zeros(len(pool), dtype=np.int64)
    category_uses: Counter[str] = Counter()
    now_epoch = spec.now.timestamp()
    at_epoch = spec.retention_at.timestamp() if spec.retention_at else None
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    bar = progress.bar("building store", spec.store_size, unit="memories")
    scopes: set[str] = set()
    written = 0
    retention_of: Callable[..., np.ndarray] = policy.retention_array
    # Every column a row of the schema has (insert_sql's order), its field's default unless set below.
    defaults = {c.name: c.encode(c.default) for c in RECORD_COLUMNS}
    order = [c.name for c in RECORD_COLUMNS]
    while written < spec.store_size:
        n = min(chunk, spec.store_size - written)
        index = np.arange(written, written + n)
        scope_no = index // spec.scope_size
        vectors = rng.standard_normal((n, spec.dimensions)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        picks = rng.integers(0, len(pool), size=n)
        cats = rng.integers(0, len(_CATEGORIES), size=n)
        importance = rng.random(n)
        access = rng.integers(0, 30, size=n) * (rng.random(n) < 0.3)
        updated = now_epoch - rng.uniform(0, 365, size=n) * 86400.0
        accessed = np.where(rng.random(n) < 0.2, updated + rng.uniform(0, 30, size=n) * 86400.0, np.nan)
        accessed = np.where(accessed > now_epoch, np.nan, accessed)
        expires = np.where(rng.random(n) < 0.05, now_epoch + rng.uniform(-30, 60, size=n) * 86400.0, np.nan)
        if at_epoch is not None:
            retention = retention_of(
                now_epoch=at_epoch,
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
        np.add.at(uses, picks, 1)
        rows = []
        for j in range(n):
            s = int(scope_no[j])
            user = f"user{s:06d}"
            scopes.add(user)
            category = _CATEGORIES[int(cats[j])]
            category_uses[category] += 1
            values = {
                **defaults,
                "id": f"m{s:06d}x{int(index[j]) % spec.scope_size:07d}",
                "user_id": user,
                "agent_id": "bench",
                "memory": pool[int(picks[j])],
                "category": category,
                "importance": float(importance[j]),
                "confidence": 0.6,
                "status": "active" if active[j] else "archived",
                "source": "bench",
                "retention_score": float(retention[j]),
                "access_count": int(access[j]),
                "created_at": float(updated[j]),
                "updated_at": float(updated[j]),
                "last_accessed_at": None if np.isnan(accessed[j]) else float(accessed[j]),
                "expires_at": None if np.isnan(expires[j]) else float(expires[j]),
                "embedding": vectors[j].tobytes(),
            }
            rows.append((*(values[name] for name in order), terms_json(int(picks[j]), category), 1))
        conn.execute("BEGIN")
        conn.executemany(insert_sql(), rows)
        conn.execute("COMMIT")
        written += n
        bar.update(written)
    # BM25 statistics in one pass: every use of a pool sentence adds its terms once per document.
    for p, count in enumerate(uses.tolist()):
        if not count:
            continue
        terms = pool_terms[p]
        docs["memory"] += count
        lengths["memory"] += count * sum(terms.values())
        for term in terms:
            df["memory"][term] += count
    for category, count in category_uses.items():
        terms = category_terms[category]
        docs["category"] += count
        lengths["category"] += count * sum(terms.values())
        for term in terms:
            df["category"][term] += count
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
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    bar.finish()
