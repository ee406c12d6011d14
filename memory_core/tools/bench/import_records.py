"""``memory-core bench import``: a bulk import timed phase by phase, on synthetic memory records.

The records are varied English and Japanese statements (``import_rows``).

Each record is a plausible memory (a preference, constraint, plan, profile fact or routine) built from
templates and slot values, spread over a few users and agents, with an importance and a creation time.
The same seed gives the same records. ``repeat_share`` makes that share of the records repeat an earlier
record's text in another scope (what an export of several agents of one user holds).
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import machine_context, markdown_table, publish

__all__ = ["import_rows", "main", "measure"]

_PLACES_EN = ["Kyoto", "Osaka", "Lisbon", "Vancouver", "Hokkaido", "Barcelona", "Seoul", "Hanoi", "Oslo", "Nara"]
_PLACES_JA = ["京都", "大阪", "札幌", "福岡", "沖縄", "金沢", "箱根", "奈良", "仙台", "長崎"]
_FOODS_EN = ["spicy food", "raw fish", "cilantro", "blue cheese", "peanuts", "shellfish", "mushrooms", "gluten"]
_FOODS_JA = ["辛い料理", "生魚", "パクチー", "チーズ", "ピーナッツ", "甲殻類", "きのこ", "揚げ物"]
_DRINKS_EN = ["green tea", "black coffee", "oat milk lattes", "sparkling water", "red wine", "jasmine tea"]
_DRINKS_JA = ["緑茶", "ブラックコーヒー", "紅茶", "炭酸水", "日本酒", "ほうじ茶"]
_DAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_DAYS_JA = ["月曜", "火曜", "水曜", "木曜", "金曜", "土曜", "日曜"]
_ACTIVITIES_EN = ["yoga", "piano lessons", "a Spanish class", "swimming", "a running club", "pottery", "chess"]
_ACTIVITIES_JA = ["ヨガ", "ピアノのレッスン", "英会話", "水泳", "ランニング", "書道", "茶道"]
_PEOPLE_EN = ["daughter", "son", "wife", "husband", "mother", "manager", "best friend"]
_PEOPLE_JA = ["娘", "息子", "妻", "夫", "母", "上司", "親友"]
_JOBS_EN = ["a nurse", "a data engineer", "a teacher", "an architect", "a product manager", "a chef"]
_JOBS_JA = ["看護師", "データエンジニア", "教師", "建築家", "プロダクトマネージャー", "料理人"]

#: (category, template) pairs; ``{p}`` place, ``{f}`` food, ``{d}`` drink, ``{w}`` weekday, ``{a}``
#: activity, ``{r}`` person, ``{j}`` job, ``{n}`` a number.
_TEMPLATES_EN = [
    ("preference", "Prefers {d} in the morning and avoids {f} at dinner"),
    ("preference", "Likes a window seat on flights to {p}"),
    ("preference", "Would rather stay in a quiet hotel near the station when visiting {p}"),
    ("constraint", "Is allergic to {f}; always check the menu"),
    ("constraint", "Cannot take meetings on {w} afternoons because of {a}"),
    ("constraint", "Keeps the travel budget for {p} under {n}00 dollars"),
    ("plan", "Plans a trip to {p} with their {r} in {n} weeks"),
    ("plan", "Wants to buy a birthday gift for their {r} before {w}"),
    ("profile", "Works as {j} and lives near {p}"),
    ("profile", "Has {n} cats and a {r} who visits on {w}"),
    ("routine", "Goes to {a} every {w} evening"),
    ("routine", "Drinks {d} while reviewing the weekly report on {w}"),
]
_TEMPLATES_JA = [
    ("preference", "朝は{d}を飲みたいが、夕食で{f}は避けたい"),
    ("preference", "{p}行きの便では窓側の席が好き"),
    ("preference", "{p}では駅に近い静かなホテルに泊まりたい"),
    ("constraint", "{f}のアレルギーがあるので必ずメニューを確認する"),
    ("constraint", "{w}の午後は{a}があるので会議に出られない"),
    ("constraint", "{p}旅行の予算は{n}万円以内にしたい"),
    ("plan", "{n}週間後に{r}と{p}へ旅行する予定"),
    ("plan", "{w}までに{r}の誕生日プレゼントを買いたい"),
    ("profile", "{j}として働いていて、{p}の近くに住んでいる"),
    ("profile", "猫を{n}匹飼っていて、{r}が{w}に来る"),
    ("routine", "毎週{w}の夜は{a}に通っている"),
    ("routine", "{w}は{d}を飲みながら週報を確認する"),
]
#: How a statement may open (the time it has been true since), English and Japanese.
_MONTHS_EN = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
_MONTHS_JA = [f"{m}月" for m in range(1, 11)]
_USERS = ("u1", "u2", "u3", "u4", "u5")
_AGENTS = ("travel", "assistant", "health")


def _text(rng: random.Random, japanese: bool) -> tuple[str, str]:
    """A category and a statement filled from the templates of one language."""
    templates = _TEMPLATES_JA if japanese else _TEMPLATES_EN
    category, template = templates[rng.randrange(len(templates))]
    slots = {
        "p": rng.choice(_PLACES_JA if japanese else _PLACES_EN),
        "f": rng.choice(_FOODS_JA if japanese else _FOODS_EN),
        "d": rng.choice(_DRINKS_JA if japanese else _DRINKS_EN),
        "w": rng.choice(_DAYS_JA if japanese else _DAYS_EN),
        "a": rng.choice(_ACTIVITIES_JA if japanese else _ACTIVITIES_EN),
        "r": rng.choice(_PEOPLE_JA if japanese else _PEOPLE_EN),
        "j": rng.choice(_JOBS_JA if japanese else _JOBS_EN),
        "n": str(rng.randint(2, 9)),
    }
    text = template.format(**slots)
    if rng.random() < 0.6:
        month = rng.choice(_MONTHS_JA if japanese else _MONTHS_EN)
        text = f"{month}から、{text}" if japanese else f"Since {month}, {text[0].lower()}{text[1:]}"
    return category, text


def import_rows(count: int, *, seed: int = 7, repeat_share: float = 0.0) -> list[dict[str, Any]]:
    """``count`` memory records (JSON-ready mappings without ids or embeddings), half English, half
    Japanese, over five users and three agents, created over the year before 2026-10-01.

    Args:
        count: Records to make.
        seed: Random seed (same seed, same records).
        repeat_share: The share of records (0..1) that repeat an earlier record's text in a scope
            of their own; the rest are distinct texts (a text drawn twice is drawn again).
    """
    if not 0.0 <= repeat_share <= 1.0:
        raise ValueError(f"repeat_share must be between 0 and 1, not {repeat_share}")
    rng = random.Random(seed)
    start = datetime(2025, 10, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number in range(count):
        if rows and rng.random() < repeat_share:
            earlier = rows[rng.randrange(len(rows))]
            category, text = earlier["category"], earlier["memory"]
        else:
            for _ in range(50):  # the template space is large; a repeat is drawn again
                category, text = _text(rng, japanese=number % 2 == 1)
                if text not in seen:
                    break
        seen.add(text)
        created = start + timedelta(minutes=rng.randrange(365 * 24 * 60))
        rows.append(
            {
                "user_id": _USERS[number % len(_USERS)],
                "agent_id": _AGENTS[(number // len(_USERS)) % len(_AGENTS)],
                "memory": text,
                "category": category,
                "importance": round(rng.uniform(0.3, 0.95), 2),
                "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
    return rows


async def measure(
    *, records: int, embedder_name: str, threads: int, seed: int, repeat_share: float, progress: Progress
) -> dict[str, Any]:
    """Import ``records`` synthetic records into a fresh embedded store as ``memory-core import`` does
    (stored first, then the vectors) and time each phase; the embedder is warmed up first."""
    import tempfile
    import time

    from memory_core.adapters.models.hash_embedder import HashingEmbedder
    from memory_core.adapters.models.local_embedder import E5LocalEmbedder
    from memory_core.adapters.sqlite.store import SQLiteMemoryStore
    from memory_core.domain.policy import HumanMemoryPolicy
    from memory_core.ports import Embedder
    from memory_core.service.backfill import EMBED_BATCH, fill_missing_vectors
    from memory_core.service.import_export import import_records

    rows = import_rows(records, seed=seed, repeat_share=repeat_share)
    embedder: Embedder = E5LocalEmbedder(threads=threads) if embedder_name == "e5-local" else HashingEmbedder(384)
    await embedder.embed_passages(["warm-up"])
    with tempfile.TemporaryDirectory() as folder:
        async with SQLiteMemoryStore(f"{folder}/import.db") as store:
            started = time.perf_counter()
            with progress.bar("storing", unit="records") as bar:
                report = await import_records(
                    store, embedder, HumanMemoryPolicy(), datetime.now(UTC), rows, dedupe=True,
                    progress=bar.update, defer_vectors=True,
                )
            stored = time.perf_counter() - started
            with progress.bar("computing vectors", unit="memories") as bar:
                filled = await fill_missing_vectors(store, embedder, progress=bar.update)
            total = time.perf_counter() - started
    return {
        "records": records,
        "imported": report.imported,
        "distinct_texts": filled.embedded,
        "embedder": embedder.name,
        "embedder_threads": threads,
        "embed_batch": EMBED_BATCH,
        "stored_seconds": round(stored, 3),
        "stored_records_per_second": round(records / stored, 1),
        "vectors_seconds": round(total - stored, 3),
        "total_seconds": round(total, 3),
        "total_records_per_second": round(records / total, 1),
    }


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench import [--records N] [--repeat-share X] [--embedder NAME] [--threads N]``."""
    figures = await measure(
        records=int(getattr(args, "records", 3000) or 3000),
        embedder_name=str(getattr(args, "embedder", None) or "e5-local"),
        threads=int(getattr(args, "threads", 2) or 2),
        seed=int(getattr(args, "seed", 7) or 7),
        repeat_share=float(getattr(args, "repeat_share", 0.0) or 0.0),
        progress=progress,
    )
    report = {"benchmark": "import", "machine": machine_context(), **figures}
    table = markdown_table(
        ["phase", "seconds", "records/s"],
        [
            ["stored (listed, found by keyword)", report["stored_seconds"], report["stored_records_per_second"]],
            ["vectors computed", report["vectors_seconds"], ""],
            ["whole import", report["total_seconds"], report["total_records_per_second"]],
        ],
    )
    note = (
        f"\n{report['records']} records ({report['distinct_texts']} distinct texts), {report['embedder']} "
        f"({report['embedder_threads']} threads, {report['embed_batch']} passages per call), "
        f"embedded SQLite store, {report['machine']['cpus']} CPUs\n"
    )
    publish(report, args, out, table + note)
    return 0
