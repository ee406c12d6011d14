"""Measure, on a live Azure AI Search service, how scoring profiles multiply relevance.

Azure does not publish how a profile's function boosts combine with relevance. ``memory_core.domain.ranking``
makes one choice (per function ``b = 1 + (boost - 1) * g``, aggregated by the profile's
``functionAggregation``, final score ``relevance * multiplier``) and the embedded store ranks with it.
This script checks that choice against the real service:

1. creates a throw-away index from ``memory_core``'s definition (``<AZURE_SEARCH_INDEX_NAME>-calib-*``);
2. indexes a few memories with identical text and embedding but different importance, retention,
   recall count and age;
3. per scoring profile, runs the same keyword query without and with the profile (identical text
   means identical BM25, so the ratio of the two scores is the multiplier), and a hybrid query with
   ``debug="vector"``, whose ``documentBoost`` is the multiplier the service applied;
4. prints, per document, the measured multipliers next to ``memory_core.domain.ranking``'s prediction and a
   few alternative aggregations, and says whether the local formula agrees.

Live only: needs ``AZURE_SEARCH_ENDPOINT`` (and ``AZURE_SEARCH_API_KEY`` or an Entra ID identity with
the Search Service Contributor and Search Index Data Contributor roles). Exit status 0 when the
formula agrees within ``--tolerance``, 1 when it does not, 2 when the service is not configured.

Usage::

    python scripts/calibrate_scoring.py [--tolerance 0.02] [--settle 3] [--keep-index]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np

from memory_core.config import Settings
from memory_core.domain.ranking import ScoringProfile, profile_for
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.validation import utcnow

__all__ = ["ALTERNATIVES", "main"]

DESCRIPTION = "Measure how Azure AI Search scoring profiles multiply relevance (live service only)."
DIMENSIONS = 8
SCOPE = Scope.of("calibration-user", "calibration-agent")
TEXT = "calibration probe 校正 プローブ"
QUERY = "calibration probe"

#: (importance, retention_score, access_count, age in days)
GRID: list[tuple[float, float, int, float]] = [
    (0.0, 0.0, 0, 200.0),
    (0.5, 0.0, 0, 200.0),
    (1.0, 0.0, 0, 200.0),
    (0.0, 0.5, 0, 45.0),
    (0.0, 1.0, 0, 30.0),
    (0.0, 0.0, 5, 10.0),
    (0.0, 0.0, 20, 5.0),
    (0.25, 0.75, 2, 1.0),
    (1.0, 1.0, 20, 0.0),
    (0.7, 0.4, 40, 60.0),
]


def _alternatives() -> dict[str, Callable[[Sequence[np.ndarray]], np.ndarray]]:
    return {
        "sum of b (memory_core)": lambda bs: np.sum(bs, axis=0),
        "1 + sum(b - 1)": lambda bs: 1.0 + np.sum([b - 1.0 for b in bs], axis=0),
        "product of b": lambda bs: np.prod(bs, axis=0),
        "average of b": lambda bs: np.mean(bs, axis=0),
        "maximum of b": lambda bs: np.max(bs, axis=0),
    }


#: Other ways the service might combine per-function boosts, printed for comparison.
ALTERNATIVES = _alternatives()


def _records() -> list[MemoryRecord]:
    now = utcnow()
    embedding = [1.0] + [0.0] * (DIMENSIONS - 1)
    records = []
    for i, (importance, retention, count, age) in enumerate(GRID):
        moment = now - timedelta(days=age)
        records.append(
            MemoryRecord(
                id=f"calib-{i:02d}",
                user_id=SCOPE.user_id,
                agent_id=SCOPE.agent_id,
                memory=TEXT,
                importance=importance,
                retention_score=retention,
                access_count=count,
                created_at=moment,
                updated_at=moment,
                embedding=embedding,
            )
        )
    return records


def _columns(records: Sequence[MemoryRecord]) -> dict[str, np.ndarray]:
    return {
        "importance": np.array([r.importance for r in records]),
        "retention_score": np.array([r.retention_score for r in records]),
        "access_count": np.array([float(r.access_count) for r in records]),
        "updated_at": np.array([r.updated_at.timestamp() for r in records]),
    }


def _report(
    profile: ScoringProfile,
    records: Sequence[MemoryRecord],
    keyword_ratio: dict[str, float],
    document_boost: dict[str, float],
    tolerance: float,
) -> bool:
    now_epoch = utcnow().timestamp()
    predicted, per_function = profile.multiplier(_columns(records), now_epoch=now_epoch)
    boosts = list(per_function.values())
    candidates = {name: combine(boosts) for name, combine in ALTERNATIVES.items()}
    print(f"\n== {profile.name} (functionAggregation={profile.aggregation}) ==")
    header = (
        f"{'doc':9} {'imp':>4} {'ret':>4} {'acc':>4} {'age':>5}  {'ratio':>8} {'docBoost':>8}  "
        + " ".join(f"{name[:12]:>12}" for name in candidates)
    )
    print(header)
    for i, record in enumerate(records):
        age = (utcnow() - record.updated_at).total_seconds() / 86400
        ratio = keyword_ratio.get(record.id, math.nan)
        boost = document_boost.get(record.id, math.nan)
        print(
            f"{record.id:9} {record.importance:4.2f} {record.retention_score:4.2f} {record.access_count:4d} "
            f"{age:5.1f}  {ratio:8.4f} {boost:8.4f}  "
            + " ".join(f"{values[i]:12.4f}" for values in candidates.values())
        )
    verdict = True
    for label, measured in (("keyword score ratio", keyword_ratio), ("documentBoost", document_boost)):
        ids = [r.id for r in records if r.id in measured and math.isfinite(measured[r.id])]
        if not ids:
            print(f"{label}: not returned by the service")
            continue
        values = np.array([measured[i] for i in ids])
        index = [next(j for j, r in enumerate(records) if r.id == i) for i in ids]
        for name, candidate in candidates.items():
            error = float(np.max(np.abs(candidate[index] - values) / np.maximum(np.abs(values), 1e-12)))
            scaled = candidate[index] / candidate[index][0] * values[0]
            shape = float(np.max(np.abs(scaled - values) / np.maximum(np.abs(values), 1e-12)))
            mark = "AGREES" if error <= tolerance else ("same shape" if shape <= tolerance else "differs")
            print(
                f"{label:20} vs {name:24}: max rel. error {error:8.4f} (up to a constant {shape:8.4f}) {mark}"
            )
        error = float(np.max(np.abs(predicted[index] - values) / np.maximum(np.abs(values), 1e-12)))
        verdict = verdict and error <= tolerance
    return verdict


async def calibrate(
    settings: Settings,
    *,
    tolerance: float,
    settle: float,
    keep_index: bool,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    **client_kwargs: Any,
) -> bool:
    """Run the measurement; True when ``memory_core.domain.ranking`` agrees with the service.

    ``client_kwargs`` go to the SDK clients (tests pass a scripted ``transport``).
    """
    from memory_core.adapters.azure.search_index import (
        close_credential,
        default_credential,
        drop_index,
        ensure_index,
    )
    from memory_core.adapters.azure.search_store import AzureSearchMemoryStore

    name = f"{settings.azure_search_index_name}-calib-{uuid.uuid4().hex[:8]}"
    settings = replace(settings, azure_search_index_name=name)
    credential = default_credential(api_key=settings.azure_search_api_key, client_id=settings.azure_client_id)
    agrees = True
    try:
        outcome = await ensure_index(
            settings.azure_search_endpoint, name, credential, dimensions=DIMENSIONS, **client_kwargs
        )
        print(f"index {name}: {outcome}")
        store = AzureSearchMemoryStore(
            settings.azure_search_endpoint,
            name,
            credential,
            dimensions=DIMENSIONS,
            debug_scores=True,
            sleep=sleep,
            **client_kwargs,
        )
        try:
            records = _records()
            await store.upsert(records)
            await sleep(settle)  # near-real-time indexing
            vector = [1.0] + [0.0] * (DIMENSIONS - 1)

            async def scores(mode: SearchMode, ranking: RankingProfile) -> dict[str, tuple[float, float]]:
                options = MemorySearchOptions(
                    mode=mode, ranking_profile=ranking, top=len(records), vector_k=50
                )
                result = await store.search(SearchRequest(SCOPE, QUERY, vector, options))
                return {h.record.id: (h.score, h.breakdown.boost) for h in result.hits}

            base = await scores(SearchMode.KEYWORD, RankingProfile.NONE)
            for ranking in (RankingProfile.IMPORTANT, RankingProfile.RECENT):
                profile = profile_for(ranking)
                assert profile is not None
                boosted = await scores(SearchMode.KEYWORD, ranking)
                hybrid = await scores(SearchMode.HYBRID, ranking)
                ratio = {k: v[0] / base[k][0] for k, v in boosted.items() if k in base and base[k][0]}
                document_boost = {k: v[1] for k, v in hybrid.items() if v[1] != 1.0}
                agrees = _report(profile, records, ratio, document_boost, tolerance) and agrees
        finally:
            await store.close()
    finally:
        if keep_index:
            print(f"kept index {name}")
        else:
            await drop_index(settings.azure_search_endpoint, credential, name, **client_kwargs)
        await close_credential(credential)
    print("\nmemory_core.ranking's formula " + ("AGREES with the service" if agrees else "DOES NOT AGREE"))
    return agrees


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--tolerance", type=float, default=0.02, help="largest relative error that agrees")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to wait for indexing")
    parser.add_argument("--keep-index", action="store_true", help="do not delete the calibration index")
    args = parser.parse_args(argv)
    settings = Settings.from_env(os.environ, embedder="hash")
    if not settings.azure_search_endpoint:
        print(
            "AZURE_SEARCH_ENDPOINT is not set; this script needs a live Azure AI Search service",
            file=sys.stderr,
        )
        return 2
    agrees = asyncio.run(
        calibrate(settings, tolerance=args.tolerance, settle=args.settle, keep_index=args.keep_index)
    )
    return 0 if agrees else 1


if __name__ == "__main__":
    raise SystemExit(main())
