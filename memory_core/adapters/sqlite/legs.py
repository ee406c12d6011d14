"""The embedded store's two candidate legs: BM25 over a scope's postings, and cosine nearest neighbours.

- keyword: terms from :func:`memory_core.language.text.query_terms`; BM25 as Lucene computes it (k1 1.2,
  b 0.75, ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))``, per-field statistics over the whole index, summed
  over the fields ``memory``, ``summary``, ``category`` and over query terms);
- vector: exact cosine nearest neighbours (or an approximate index's, rescored exactly), score
  ``1 / (2 - cos)``.

Each leg ranks its documents (0-based, ties by id) for the fusion.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memory_core.adapters.sqlite.ann import ScopeVectorIndexes
from memory_core.adapters.sqlite.scope_index import SEARCH_FIELDS, ScopeIndex
from memory_core.domain.search_plan import TextLeg
from memory_core.language.text import query_terms

__all__ = ["BM25_B", "BM25_K1", "CorpusStatistics", "Leg", "keyword_leg", "vector_leg"]

BM25_K1 = 1.2
BM25_B = 0.75
#: Cosines within this much of the k-th best are scored again exactly (a float32 product's rounding
#: is far smaller: about 1e-6 for 384 dimensions).
_RESCORE_MARGIN = 1e-4

FieldStats = dict[str, tuple[int, float]]
TermFrequencies = dict[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class Leg:
    """One candidate leg of a search: a score per document and a 0-based rank (-1: not in the leg)."""

    scores: np.ndarray
    ranks: np.ndarray

    def at(self, position: int) -> tuple[float | None, int | None]:
        """(score, rank) of one document, or (None, None) when it is not in this leg."""
        rank = int(self.ranks[position])
        return (None, None) if rank < 0 else (float(self.scores[position]), rank)


class CorpusStatistics:
    """Index-wide field statistics and document frequencies, cached until the database changes."""

    def __init__(self) -> None:
        self._cached: tuple[tuple[int, int], FieldStats, TermFrequencies] | None = None

    def get(
        self, conn: sqlite3.Connection, terms: Sequence[str], marker: tuple[int, int]
    ) -> tuple[FieldStats, TermFrequencies]:
        """Field statistics and the document frequencies of ``terms`` as of ``marker``."""
        if self._cached is None or self._cached[0] != marker:
            self._cached = (marker, _field_stats(conn), {})
        _, fields_, dfs = self._cached
        missing = sorted({t for t in terms if (SEARCH_FIELDS[0], t) not in dfs})
        if missing:
            found = _term_stats(conn, missing)
            for name in SEARCH_FIELDS:
                for term in missing:
                    dfs[(name, term)] = found.get((name, term), 0)
        return fields_, dfs


def _field_stats(conn: sqlite3.Connection) -> FieldStats:
    return {
        str(name): (int(count), float(total))
        for name, count, total in conn.execute(
            "SELECT field, doc_count, total_length FROM field_stats"
        ).fetchall()
    }


def _term_stats(conn: sqlite3.Connection, unique: Sequence[str]) -> TermFrequencies:
    dfs: TermFrequencies = {}
    if unique:
        marks = ", ".join("?" * len(unique))
        for name, term, df in conn.execute(
            f"SELECT field, term, df FROM term_stats WHERE term IN ({marks})",  # noqa: S608
            unique,
        ).fetchall():
            dfs[(str(name), str(term))] = int(df)
    return dfs


def _bm25(index: ScopeIndex, terms: Sequence[str], stats: tuple[FieldStats, TermFrequencies]) -> np.ndarray:
    """Each document's BM25 score for ``terms``, summed over the searchable fields."""
    scores = np.zeros(len(index), dtype=np.float64)
    field_stats, dfs = stats
    for name in SEARCH_FIELDS:
        doc_count, total = field_stats.get(name, (0, 0.0))
        if doc_count <= 0:
            continue
        avgdl = total / doc_count
        for term, weights in _term_weights(index, name, terms, avgdl):
            n = dfs.get((name, term), 0)
            idf = math.log(1.0 + (doc_count - n + 0.5) / (n + 0.5))
            scores[weights[0]] += idf * weights[1]
    return scores


def _term_weights(
    index: ScopeIndex, name: str, terms: Sequence[str], avgdl: float
) -> list[tuple[str, tuple[np.ndarray, np.ndarray]]]:
    """Per query term found in field ``name``: its documents and their weights
    ``tf / (tf + k1 (1 - b + b dl / avgdl))``, cached in the index until avgdl changes."""
    cache = index.weights.get(name)
    if cache is None or cache[0] != avgdl:
        cache = (avgdl, {})
        index.weights[name] = cache
    norms: np.ndarray | None = None
    found = []
    for term in terms:
        weights = cache[1].get(term)
        if weights is None:
            posting = index.posting(name, term)
            if posting is None:
                continue
            if norms is None:
                norms = BM25_K1 * (1.0 - BM25_B + BM25_B * index.lengths[name] / avgdl)
            docs, tfs = posting
            weights = cache[1][term] = (docs, tfs / (tfs + norms[docs]))
        found.append((term, weights))
    return found


def _holding_all(index: ScopeIndex, terms: Sequence[str]) -> np.ndarray:
    """Documents that hold every one of ``terms`` in some searchable field (Azure's ``searchMode=all``)."""
    holding = np.ones(len(index), dtype=bool)
    for term in dict.fromkeys(terms):
        has = np.zeros(len(index), dtype=bool)
        for name in SEARCH_FIELDS:
            posting = index.posting(name, term)
            if posting is not None:
                has[posting[0]] = True
        holding &= has
    return holding


def keyword_leg(
    conn: sqlite3.Connection,
    statistics: CorpusStatistics,
    index: ScopeIndex,
    leg: TextLeg,
    query: str,
    mask: np.ndarray,
    marker: tuple[int, int],
) -> Leg:
    """BM25 scores and ranks (the leg's top) of the documents ``mask`` allows.

    A leg that matches ``all`` words counts only documents holding every query term; a query without
    terms matches every allowed document (score 1) or none, as the leg says.
    """
    terms = query_terms(query)
    if leg.match == "all" and terms:
        mask = mask & _holding_all(index, terms)
    if leg.without_words == "all" and not terms:
        scores = np.where(mask, 1.0, 0.0)
        matched = mask.copy()
    else:
        scores = np.zeros(len(index), dtype=np.float64)
        if terms and len(index):
            scores = _bm25(index, terms, statistics.get(conn, terms, marker))
        matched = mask & (scores > 0.0)
    return Leg(scores, _ranks(scores, matched, leg.top, index.id_ranks))


def vector_leg(
    ann: ScopeVectorIndexes,
    key: tuple[str, str],
    index: ScopeIndex,
    query_vector: np.ndarray,
    mask: np.ndarray,
    k: int,
) -> Leg:
    """Cosine scores ``1 / (2 - cos)`` and ranks (top ``k``) of documents that have a vector.

    One float32 matrix-vector product finds the candidates (or, in a scope large enough for one, an
    approximate index: :mod:`memory_core.adapters.sqlite.ann`); the top ``k`` (and every document
    within rounding of the k-th) are scored again row by row in float64, so a document's score does
    not depend on where its row sits in the matrix or how many rows there are (a BLAS product's
    last bits do), and an index updated in place ranks exactly as one rebuilt from the rows.
    """
    usable = mask & index.has_vector
    if not index.dims or not usable.any():
        return Leg(np.zeros(len(index), dtype=np.float64), np.full(len(index), -1, dtype=np.int64))
    positions = None
    if ann.enabled:
        try:
            positions = ann.candidates(key, index, query_vector, usable, k)
        except Exception as exc:  # a broken index never fails a search: exact search, for good
            ann.fail(key, index, exc)
    if positions is None:
        return _scored(index, query_vector, _exact_candidates(index, query_vector, usable, k), k)
    leg = _scored(index, query_vector, positions, k)
    if ann.wants_check(key):
        exact = _scored(index, query_vector, _exact_candidates(index, query_vector, usable, k), k)
        try:
            ann.record_check(key, index, np.flatnonzero(leg.ranks >= 0), np.flatnonzero(exact.ranks >= 0))
        except Exception as exc:
            ann.fail(key, index, exc)
        return exact  # the same or better, and computed anyway
    return leg


def _exact_candidates(index: ScopeIndex, query_vector: np.ndarray, usable: np.ndarray, k: int) -> np.ndarray:
    """The usable documents whose float32 cosine is within rounding of the k-th best (all of them
    when there are no more than ``k``)."""
    positions = np.flatnonzero(usable)
    rough = (index.vectors @ query_vector)[positions]
    if 0 < k < len(positions):
        cut = np.partition(rough, len(rough) - k)[len(rough) - k]
        positions = positions[rough >= cut - _RESCORE_MARGIN]
    return positions


def _scored(index: ScopeIndex, query_vector: np.ndarray, positions: np.ndarray, k: int) -> Leg:
    """The leg from candidates scored row by row in float64, ranked (top ``k``)."""
    scores = np.zeros(len(index), dtype=np.float64)
    eligible = np.zeros(len(index), dtype=bool)
    cosines = (index.vectors[positions].astype(np.float64) * query_vector.astype(np.float64)).sum(axis=1)
    scores[positions] = 1.0 / (2.0 - np.clip(cosines, -1.0, 1.0))
    eligible[positions] = True
    return Leg(scores, _ranks(scores, eligible, k, index.id_ranks))


def _ranks(
    scores: np.ndarray,
    eligible: np.ndarray,
    top: int,
    id_ranks: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """0-based rank of each eligible document by score, -1 outside the top.

    Ties are broken by id (``id_ranks`` of the positions: what orders them by id), or by position
    without it.
    """
    ranks = np.full(scores.shape[0], -1, dtype=np.int64)
    positions = np.flatnonzero(eligible)
    if not len(positions):
        return ranks
    eligible_scores = scores[positions]
    if 0 < top < len(positions) and not np.isnan(eligible_scores).any():
        # Only documents scoring at least the top-th best can rank (all ties at that score kept, so
        # the stable sort below still breaks ties by position): select them in linear time.
        threshold = np.partition(eligible_scores, len(positions) - top)[len(positions) - top]
        keep = np.flatnonzero(eligible_scores >= threshold)
        positions, eligible_scores = positions[keep], eligible_scores[keep]
    if id_ranks is None:
        order = positions[np.argsort(-eligible_scores, kind="stable")][:top]
    else:
        order = positions[np.lexsort((id_ranks(positions), -eligible_scores))][:top]
    ranks[order] = np.arange(len(order))
    return ranks
