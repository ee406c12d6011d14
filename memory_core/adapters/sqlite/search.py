"""A search of one scope in the embedded store: filters, the plan's legs, fusion, profile, order, hits.

The legs are :mod:`memory_core.adapters.sqlite.legs`; relevance is the one leg's score, or the
Reciprocal Rank Fusion of both (:func:`memory_core.domain.fusion.reciprocal_rank_fusion`) with the
weights of the :class:`~memory_core.domain.search_plan.SearchPlan`; the ranking profile
(:mod:`memory_core.domain.ranking`) multiplies the relevance. The profile's ``retention_score`` and
the ``min_retention_score`` filter read the retention at the query's time, computed by the policy
from the stored inputs (a stored score is only as fresh as the last forgetting run). Semantic search is hybrid here, and the
result says the semantic ranker is not available locally.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memory_core.adapters.sqlite.ann import ScopeVectorIndexes
from memory_core.adapters.sqlite.connection import StoreConnection
from memory_core.adapters.sqlite.filters import filter_sql
from memory_core.adapters.sqlite.legs import CorpusStatistics, Leg, keyword_leg, vector_leg
from memory_core.adapters.sqlite.schema import SELECT_LIST
from memory_core.adapters.sqlite.scope_cache import ScopeCache
from memory_core.adapters.sqlite.scope_index import STATUS_CODES, ScopeIndex
from memory_core.domain.filters import Filter
from memory_core.domain.fusion import reciprocal_rank_fusion
from memory_core.domain.policy import RETENTION_INPUTS, HumanMemoryPolicy
from memory_core.domain.ranking import apply_profile
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, ScoreBreakdown, SearchHit
from memory_core.domain.search_plan import SearchPlan
from memory_core.domain.search_time import TimeWindow, current_at_mask, in_window_mask
from memory_core.errors import ValidationError

__all__ = ["SEMANTIC_NOTE", "ScopeSearch", "query_vector"]

logger = logging.getLogger(__name__)

SEMANTIC_NOTE = (
    "semantic ranker is not available in the embedded store; results are hybrid (BM25 + vector, RRF)"
)

#: The rows of hits whose records the index does not hold (``{}``: the row keys' placeholders).
_ROWS_BY_PK = f"SELECT {SELECT_LIST} FROM memories WHERE pk IN ({{}})"  # noqa: S608 - constant column list

Ranked = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]


def query_vector(vector: Sequence[float] | None, plan: SearchPlan) -> np.ndarray | None:
    """The query vector as a unit float32 array (``None`` when the plan has no vector leg).

    Raises:
        ValidationError: The vector leg runs without a vector, or with a zero or non-finite one.
    """
    plan.check_vector(vector)
    if vector is None or plan.vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    if not math.isfinite(norm) or norm == 0.0:
        raise ValidationError("vector", "must be a non-zero vector of finite numbers")
    result: np.ndarray = array / norm
    return result


@dataclass(frozen=True, slots=True)
class ScopeSearch:
    """What one search reads: the connection, the scope cache, the approximate indexes, the statistics."""

    db: StoreConnection
    scopes: ScopeCache
    ann: ScopeVectorIndexes
    statistics: CorpusStatistics
    policy: HumanMemoryPolicy

    def run(
        self,
        scope: Scope,
        query: str,
        vector: np.ndarray | None,
        options: MemorySearchOptions,
        plan: SearchPlan,
        now_epoch: float,
        window: TimeWindow | None = None,
    ) -> tuple[list[SearchHit], ScopeIndex]:
        """The hits of one search, and the scope's index (call inside one read transaction)."""
        key = (scope.user_id, scope.agent_id)
        marker = self.db.change_marker()
        index = self.scopes.index(self.db, key, marker, self.ann)
        _check_query_dimensions(index, vector)
        mask = _filter_mask(index, options, now_epoch, self.policy, window)
        tree = options.filter_tree()
        if tree is not None:
            mask &= self._allowed(scope, tree, index)
        keyword = vectors = None
        if plan.text is not None:
            keyword = keyword_leg(self.db.conn, self.statistics, index, plan.text, query, mask, marker)
        if plan.vector is not None and vector is not None:
            vectors = vector_leg(self.ann, key, index, vector, mask, plan.vector.k)
        relevance, selected = _fuse(plan, keyword, vectors, len(index))
        candidates = np.flatnonzero(selected)
        profile = plan.profile
        cols = {} if profile is None else {f: index.columns[f][candidates] for f in profile.fields}
        if "retention_score" in cols:  # the retention now, not the one stored at the last forgetting run
            cols["retention_score"] = self.policy.retention_of_columns(
                {name: index.columns[name][candidates] for name in RETENTION_INPUTS}, now_epoch=now_epoch
            )
        ranked = apply_profile(relevance[candidates], profile, cols, now_epoch=now_epoch)
        order = _order(candidates, ranked[0], index, options.order_by, options.top)
        missing = index.missing_rows(int(candidates[p]) for p in order)
        if missing:
            index.add_rows(self.db.rows_by_pk(_ROWS_BY_PK, missing))
        hits = _hits(
            index, candidates, order, ranked, relevance, (keyword, vectors), profile.name if profile else None
        )
        return hits, index


    def _allowed(self, scope: Scope, tree: Filter, index: ScopeIndex) -> np.ndarray:
        """The documents of ``index`` the filter ``tree`` allows (a parameterised query of the scope)."""
        condition, params = filter_sql(tree)
        sql = f"SELECT pk FROM memories WHERE user_id = ? AND agent_id = ? AND {condition}"  # noqa: S608 - bound values
        rows = self.db.conn.execute(sql, [scope.user_id, scope.agent_id, *params]).fetchall()
        allowed: np.ndarray = np.isin(index.pks, np.asarray([int(r[0]) for r in rows], dtype=np.int64))
        return allowed


def _check_query_dimensions(index: ScopeIndex, vector: np.ndarray | None) -> None:
    if vector is None or index.vectors is None:
        return
    stored = index.vectors.shape[1]
    if stored not in (0, vector.shape[0]):
        raise ValidationError(
            "vector", f"has {vector.shape[0]} dimensions; this store's embeddings have {stored}"
        )


def _filter_mask(
    index: ScopeIndex,
    options: MemorySearchOptions,
    now_epoch: float,
    policy: HumanMemoryPolicy,
    window: TimeWindow | None = None,
) -> np.ndarray:
    """The documents the options' filters allow (status, expiry, supersession or the ``as_of`` moment,
    the window, category, kind, minimums; the retention minimum on the retention at ``now_epoch``)."""
    cols = index.columns
    status = cols["status"]
    mask = status == STATUS_CODES[MemoryStatus.ACTIVE]
    if options.include_archived:
        mask |= status == STATUS_CODES[MemoryStatus.ARCHIVED]
    expires = cols["expires_at"]
    mask &= np.isnan(expires) | (expires > now_epoch)
    until = cols["valid_until"]
    if options.as_of is not None:
        mask &= current_at_mask(cols, options.as_of)
    elif window is not None:
        mask &= in_window_mask(cols, window)
        if not options.include_superseded:  # what held in the window: closed before it began is not
            mask &= np.isnan(until) | (until > window.start.timestamp())
    elif not options.include_superseded:
        mask &= np.isnan(until) | (until > now_epoch)
    if options.category is not None:
        mask &= cols["_category"] == options.category
    if options.kind is not None:
        mask &= cols["_kind"] == options.kind.value
    if options.min_importance is not None:
        mask &= cols["importance"] >= options.min_importance
    if options.min_retention_score is not None:
        mask &= policy.retention_of_columns(cols, now_epoch=now_epoch) >= options.min_retention_score
    result: np.ndarray = mask
    return result


def _fuse(
    plan: SearchPlan, keyword: Leg | None, vector: Leg | None, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Relevance and selection: the one leg's scores, or the Reciprocal Rank Fusion of the legs."""
    if not plan.fused:
        leg = keyword if keyword is not None else vector
        assert leg is not None
        selected = leg.ranks >= 0
        return np.where(selected, leg.scores, 0.0), selected
    legs = []
    if keyword is not None and plan.text is not None:
        legs.append((keyword.ranks, plan.text.weight))
    if vector is not None and plan.vector is not None:
        legs.append((vector.ranks, plan.vector.weight))
    return reciprocal_rank_fusion(legs, size)


def _order(
    candidates: np.ndarray, final: np.ndarray, index: ScopeIndex, order_by: OrderBy | None, top: int
) -> np.ndarray:
    """The first ``top`` positions into ``candidates``: by score (ties by id), or by ``order_by`` then score."""
    if not len(candidates):
        return np.zeros(0, dtype=np.int64)
    keep = np.arange(len(candidates))
    if order_by is None and len(candidates) > top:
        # Only documents scoring at least the top-th best can be in the answer (ties included).
        threshold = np.partition(final, len(final) - top)[len(final) - top]
        keep = np.flatnonzero(final >= threshold)
    keys: list[np.ndarray] = [index.id_ranks(candidates[keep]), -final[keep]]
    if order_by is not None:
        column = index.columns[order_by.field][candidates].astype(np.float64)
        column = np.where(np.isnan(column), -np.inf, column)
        keys.append(-column if order_by.descending else column)
    result: np.ndarray = keep[np.lexsort(tuple(keys))][:top]
    return result


def _hits(
    index: ScopeIndex,
    candidates: np.ndarray,
    order: np.ndarray,
    ranked: Ranked,
    relevance: np.ndarray,
    legs: tuple[Leg | None, Leg | None],
    profile_name: str | None,
) -> list[SearchHit]:
    """The hits in ``order``, each with its score breakdown (leg scores and ranks, boosts); a hit's
    record is as stored (the service shows its retention now)."""
    final, multiplier, per_function = ranked
    keyword, vector = legs
    hits = []
    for position in order:
        at = int(candidates[position])
        record = index.record(at)
        if record is None:  # its row was read in the same snapshot as the index: cannot happen
            logger.warning("a search hit's row was not found; left out")
            continue
        kw = keyword.at(at) if keyword is not None else (None, None)
        vec = vector.at(at) if vector is not None else (None, None)
        hits.append(
            SearchHit.model_construct(
                record=record,
                score=float(final[position]),
                reranker_score=None,
                breakdown=ScoreBreakdown.model_construct(
                    keyword_score=kw[0],
                    keyword_rank=kw[1],
                    vector_score=vec[0],
                    vector_rank=vec[1],
                    relevance=float(relevance[at]),
                    profile=profile_name,
                    boost=float(multiplier[position]),
                    functions={k: float(v[position]) for k, v in per_function.items()},
                ),
            )
        )
    return hits
