"""The Azure AI Search index behind :class:`~memory_core.adapters.azure.search_store.AzureSearchMemoryStore`.

:func:`build_index` describes the index: one document per memory, scope fields filterable, ``memory``
and ``summary`` searchable with the Japanese Microsoft analyzer, the fields of the entity index
(:mod:`memory_core.adapters.azure.entity_fields`), numeric and date fields filterable
and sortable, a vector field on HNSW (cosine) with an exhaustive-kNN profile beside it (no
vectorizer: queries bring their vectors), BM25 (k1 1.2, b 0.75), the semantic configuration (its
order boosted by the scoring profile), and the scoring profiles rendered from
:mod:`memory_core.domain.ranking` so that both stores rank from one definition. :func:`ensure_index`
creates or updates it idempotently using the index's ETag.
"""

from __future__ import annotations

import asyncio
import logging
import re
import typing
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Literal

from azure.core import MatchConditions
from azure.core.credentials import AzureKeyCredential
from azure.core.credentials_async import AsyncTokenCredential
from azure.search.documents.indexes.aio import SearchIndexClient
from azure.search.documents.indexes.models import (
    BM25SimilarityAlgorithm,
    ExhaustiveKnnAlgorithmConfiguration,
    ExhaustiveKnnParameters,
    FreshnessScoringFunction,
    FreshnessScoringParameters,
    HnswAlgorithmConfiguration,
    HnswParameters,
    MagnitudeScoringFunction,
    MagnitudeScoringParameters,
    RankingOrder,
    SearchField,
    SearchIndex,
    SemanticConfiguration,
    SemanticField,
    SemanticPrioritizedFields,
    SemanticSearch,
    VectorSearch,
    VectorSearchProfile,
)
from azure.search.documents.indexes.models import ScoringProfile as AzureScoringProfile

from memory_core.adapters.azure.entity_fields import ENTITIES_JSON, ENTITY_FIELDS
from memory_core.adapters.azure.retry import RetrySettings, Sleep, call_with_retries
from memory_core.domain.ranking import PROFILES, FunctionKind, ScoringFunction, ScoringProfile
from memory_core.domain.records import MemoryRecord
from memory_core.domain.validation import field_type
from memory_core.errors import ConfigurationError, ConflictError, NotFoundError, ValidationError

__all__ = [
    "ANALYZER",
    "DERIVED_FIELDS",
    "EXHAUSTIVE_PROFILE",
    "HNSW_PROFILE",
    "SELECT_FIELDS",
    "SEMANTIC_CONFIGURATION",
    "VECTOR_FIELD",
    "EnsureOutcome",
    "build_index",
    "close_credential",
    "default_credential",
    "drop_index",
    "ensure_index",
    "ensure_index_definition",
    "render_scoring_profile",
    "search_credential",
]

logger = logging.getLogger(__name__)

#: Language analyzer of the ``memory`` and ``summary`` fields.
ANALYZER = "ja.microsoft"
VECTOR_FIELD = "embedding"
HNSW_ALGORITHM = "memory-hnsw-cosine"
EXHAUSTIVE_ALGORITHM = "memory-exhaustive-cosine"
HNSW_PROFILE = "memory-hnsw"
EXHAUSTIVE_PROFILE = "memory-exhaustive"
SEMANTIC_CONFIGURATION = "memory-semantic"
BM25_K1 = 1.2
BM25_B = 0.75

#: :class:`MemoryRecord` fields kept as JSON strings in ``<name>_json`` (the index has no schema-free
#: object type): ``metadata`` and ``provenance``.
JSON_FIELDS = frozenset({"metadata", "provenance"})


def document_field(name: str) -> str:
    """The index field of a :class:`MemoryRecord` field."""
    if name in JSON_FIELDS:
        return f"{name}_json"
    return VECTOR_FIELD if name == "embedding" else name


#: How each :class:`MemoryRecord` field is indexed (its EDM type comes from the model's annotation):
#: ``key``, ``filter`` (filterable), ``facet`` (filterable, facetable), ``text`` (searchable with
#: the Japanese analyzer), ``label`` (searchable, filterable, facetable), ``sort`` (filterable,
#: sortable: filters, ``$orderby`` and scoring profiles), ``stored`` (retrievable only), ``vector``.
#: A model field missing here makes :func:`build_index` fail, so a new field cannot be left out of
#: the index silently.
FIELD_ROLES: dict[str, str] = {
    "id": "key",
    "user_id": "filter",
    "agent_id": "facet",
    "memory": "text",
    "summary": "text",
    "category": "label",
    "importance": "sort",
    "confidence": "sort",
    "status": "facet",
    "source": "filter",
    "kind": "facet",
    "retention_score": "sort",
    "access_count": "sort",
    "created_at": "sort",
    "updated_at": "sort",
    "last_accessed_at": "sort",
    "expires_at": "sort",
    "valid_from": "sort",
    "valid_until": "sort",
    "superseded_by": "filter",
    "event_at": "sort",
    "event_until": "sort",
    "metadata": "stored",
    "provenance": "stored",
    "embedding": "vector",
}

#: Filterable string collections derived from a record field when it is written (not retrievable):
#: the terms of ``metadata`` (:func:`memory_core.domain.filters.metadata_terms`) and the sessions of
#: ``provenance``, which the filters of :mod:`memory_core.domain.filters` test.
DERIVED_FIELDS: dict[str, str] = {"metadata_terms": "metadata", "session_ids": "provenance"}

#: Every document field except the vector, in index order (what searches ``select``).
SELECT_FIELDS: tuple[str, ...] = tuple(
    document_field(name) for name in MemoryRecord.model_fields if FIELD_ROLES.get(name) != "vector"
)

EnsureOutcome = Literal["created", "updated", "unchanged"]

def search_credential(
    api_key: str, token_credential: AsyncTokenCredential | None
) -> AzureKeyCredential | AsyncTokenCredential:
    """The credential the search clients use: the admin key if one is given, else ``token_credential``.

    Raises:
        ConfigurationError: No key and no token credential.
    """
    if api_key:
        return AzureKeyCredential(api_key)
    if token_credential is None:
        raise ConfigurationError(
            "Azure AI Search needs a Microsoft Entra ID credential (or AZURE_SEARCH_API_KEY)"
        )
    return token_credential


def default_credential(*, api_key: str = "", client_id: str = "") -> AzureKeyCredential | AsyncTokenCredential:
    """The admin key if one is given, else an async ``DefaultAzureCredential``.

    With ``client_id`` the user-assigned managed identity is used. The caller owns a token credential
    and closes it (:func:`close_credential`).
    """
    if api_key:
        return AzureKeyCredential(api_key)
    from azure.identity.aio import DefaultAzureCredential

    return DefaultAzureCredential(managed_identity_client_id=client_id or None)


async def close_credential(credential: object) -> None:
    """Close a token credential (key credentials have nothing to close)."""
    close = getattr(credential, "close", None)
    if close is not None:
        await close()


def _edm_type(name: str) -> str:
    annotation, _ = field_type(MemoryRecord, name)
    if annotation is datetime:
        return "Edm.DateTimeOffset"
    if annotation is float:
        return "Edm.Double"
    if annotation is int:
        return "Edm.Int32"
    if annotation is str or (isinstance(annotation, type) and issubclass(annotation, Enum)):
        return "Edm.String"
    if typing.get_origin(annotation) in (dict, list):
        return "Edm.String"  # stored as a JSON string
    raise ConfigurationError(f"MemoryRecord.{name}: no Azure AI Search type for {annotation!r}")


_NOT = {"searchable": False, "filterable": False, "sortable": False, "facetable": False, "retrievable": True}
_FLAGS: dict[str, dict[str, Any]] = {
    "key": {**_NOT, "key": True, "filterable": True, "sortable": True},
    "filter": {**_NOT, "filterable": True},
    "facet": {**_NOT, "filterable": True, "facetable": True},
    "text": {**_NOT, "searchable": True, "analyzer_name": ANALYZER},
    "label": {**_NOT, "searchable": True, "filterable": True, "facetable": True},
    "sort": {**_NOT, "filterable": True, "sortable": True},
    "stored": dict(_NOT),
}


def _fields(dimensions: int) -> list[SearchField]:
    """One index field per :class:`MemoryRecord` field, in the model's order (see :data:`FIELD_ROLES`)."""
    fields: list[SearchField] = []
    for name in MemoryRecord.model_fields:
        role = FIELD_ROLES.get(name)
        if role is None:
            raise ConfigurationError(f"MemoryRecord.{name} has no index role in FIELD_ROLES")
        if role == "vector":
            fields.append(
                SearchField(
                    name=VECTOR_FIELD,
                    type="Collection(Edm.Single)",
                    searchable=True,
                    retrievable=True,
                    vector_search_dimensions=dimensions,
                    vector_search_profile_name=HNSW_PROFILE,
                )
            )
        else:
            fields.append(SearchField(name=document_field(name), type=_edm_type(name), **_FLAGS[role]))
    for name in DERIVED_FIELDS:
        flags = {**_FLAGS["filter"], "retrievable": False}
        fields.append(SearchField(name=name, type="Collection(Edm.String)", **flags))
    for name, role in ENTITY_FIELDS.items():  # the entity index (memory_core.adapters.azure.entity_fields)
        flags = {**_FLAGS[role], "retrievable": role != "text"}
        kind = "Edm.String" if name == ENTITIES_JSON else "Collection(Edm.String)"
        fields.append(SearchField(name=name, type=kind, **flags))
    return fields


def render_scoring_profile(profile: ScoringProfile) -> AzureScoringProfile:
    """The Azure scoring profile for one of :mod:`memory_core.domain.ranking`'s profiles."""
    return AzureScoringProfile(
        name=profile.name,
        functions=[_scoring_function(function) for function in profile.functions],
        function_aggregation=profile.aggregation,
    )


def _scoring_function(function: ScoringFunction) -> MagnitudeScoringFunction | FreshnessScoringFunction:
    common: dict[str, Any] = {
        "field_name": function.field,
        "boost": function.boost,
        "interpolation": function.interpolation.value,
    }
    if function.kind == FunctionKind.MAGNITUDE:
        magnitude = MagnitudeScoringParameters(
            boosting_range_start=function.range_start,
            boosting_range_end=function.range_end,
            should_boost_beyond_range_by_constant=function.constant_boost_beyond_range,
        )
        return MagnitudeScoringFunction(**common, parameters=magnitude)
    freshness = FreshnessScoringParameters(boosting_duration=timedelta(days=function.boosting_duration_days))
    return FreshnessScoringFunction(**common, parameters=freshness)


def build_index(name: str, dimensions: int) -> SearchIndex:
    """The index definition.

    It has no vectorizer: every query arrives with its vector, embedded by memory-core's own embedder
    (with its query cache, its ``dimensions`` and its retries), which the service would only repeat.

    Args:
        name: Index name.
        dimensions: Length of the stored embeddings (the embedder's dimensions).

    Returns:
        A :class:`SearchIndex` ready for ``create_or_update_index``.
    """
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= 4096:
        raise ValidationError("dimensions", f"must be an integer between 1 and 4096, got {dimensions!r}")
    profiles = [render_scoring_profile(p) for p in PROFILES.values() if p is not None]
    vector_search = VectorSearch(
        algorithms=[
            HnswAlgorithmConfiguration(
                name=HNSW_ALGORITHM,
                parameters=HnswParameters(m=4, ef_construction=400, ef_search=500, metric="cosine"),
            ),
            ExhaustiveKnnAlgorithmConfiguration(
                name=EXHAUSTIVE_ALGORITHM, parameters=ExhaustiveKnnParameters(metric="cosine")
            ),
        ],
        profiles=[
            VectorSearchProfile(name=HNSW_PROFILE, algorithm_configuration_name=HNSW_ALGORITHM),
            VectorSearchProfile(name=EXHAUSTIVE_PROFILE, algorithm_configuration_name=EXHAUSTIVE_ALGORITHM),
        ],
    )
    semantic = SemanticSearch(
        default_configuration_name=SEMANTIC_CONFIGURATION,
        configurations=[
            SemanticConfiguration(
                name=SEMANTIC_CONFIGURATION,
                prioritized_fields=SemanticPrioritizedFields(
                    content_fields=[SemanticField(field_name="memory"), SemanticField(field_name="summary")],
                    keywords_fields=[SemanticField(field_name="category")],
                ),
                # The scoring profile counts after reranking too: hits are ordered by the reranker's
                # score times the profile's boost (``@search.rerankerBoostedScore``), as in hybrid
                # search, where the profile multiplies the fused score.
                ranking_order=RankingOrder.BOOSTED_RERANKER_SCORE,
            )
        ],
    )
    return SearchIndex(
        name=name,
        fields=_fields(dimensions),
        scoring_profiles=profiles,
        similarity=BM25SimilarityAlgorithm(k1=BM25_K1, b=BM25_B),
        semantic_search=semantic,
        vector_search=vector_search,
    )


def _covers(wanted: Any, actual: Any) -> bool:
    """True when every value set in ``wanted`` is present and equal in ``actual``.

    The service echoes an index with defaults filled in (``synonymMaps: []``, ``stored: true``...),
    so the comparison is one-sided; lists are compared element by element.
    """
    if isinstance(wanted, Mapping):
        if not isinstance(actual, Mapping):
            return False
        return all(
            v is None or (k in actual and _covers(v, actual[k]))
            for k, v in wanted.items()
            if k not in {"@odata.etag", "@odata.context"}
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(wanted) == len(actual)
            and all(_covers(w, a) for w, a in zip(wanted, actual, strict=True))
        )
    if isinstance(wanted, str) and isinstance(actual, str):
        left, right = _duration_seconds(wanted), _duration_seconds(actual)
        if left is not None and right is not None:  # "P90D" and "P90DT0H0M0S" are the same duration
            return left == right
    return bool(wanted == actual)


def _leftovers(current: Mapping[str, Any]) -> list[str]:
    """What an index made by an earlier memory-core holds that this definition leaves out: the
    integrated vectorizer, which the service could no longer call (its role on Azure OpenAI is gone)."""
    vector_search = current.get("vectorSearch") or {}
    found = [f"vectorizer {v.get('name')!r}" for v in vector_search.get("vectorizers") or []]
    found += [
        f"vector profile {p.get('name')!r} names a vectorizer"
        for p in vector_search.get("profiles") or []
        if p.get("vectorizer")
    ]
    return found


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def _duration_seconds(text: str) -> float | None:
    """Seconds in an ISO 8601 day-time duration (``P90D``, ``PT1H30M``), or ``None``."""
    match = _DURATION.fullmatch(text)
    if not match or text in {"P", "PT"}:
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


async def ensure_index_definition(
    client: SearchIndexClient,
    index: SearchIndex,
    *,
    retry: RetrySettings | None = None,
    sleep: Sleep = asyncio.sleep,
    max_conflicts: int = 3,
) -> EnsureOutcome:
    """Create ``index`` or bring the existing one up to it; leave it alone when it already matches.

    An index that still has the integrated vectorizer of earlier versions is brought up to it too
    (the vectorizer is dropped; queries never used it).

    Reads the current definition (and its ETag) first. A missing index is created with
    ``If-None-Match: *``; a different one is replaced with ``If-Match: <etag>``, so a concurrent
    change is never overwritten blindly: on ``412`` the definition is read again and compared again.

    Returns:
        ``"created"``, ``"updated"`` or ``"unchanged"``.

    Raises:
        ConflictError: The index kept changing underneath (``max_conflicts`` times).
        PermanentError: The service rejected the definition (for example an incompatible change to
            an existing field, which needs a new index).
        TransientError: Throttling or unavailability outlasted the retries.
    """
    settings = retry or RetrySettings()
    wanted = index.as_dict()
    for _ in range(max_conflicts):
        current: SearchIndex | None
        try:
            current = await call_with_retries(
                f"get index {index.name!r}", lambda: client.get_index(index.name), settings, sleep
            )
        except NotFoundError:
            current = None
        if current is None:
            candidate = SearchIndex(index.as_dict())
            condition = MatchConditions.IfMissing
        else:
            leftovers = _leftovers(current.as_dict())
            if not leftovers and _covers(wanted, current.as_dict()):
                logger.info("index %s is up to date", index.name)
                return "unchanged"
            if leftovers:
                logger.info("index %s: removing %s", index.name, ", ".join(leftovers))
            candidate = SearchIndex(index.as_dict())
            candidate.e_tag = current.e_tag
            condition = MatchConditions.IfNotModified

        async def put(candidate: SearchIndex = candidate, condition: MatchConditions = condition) -> None:
            await client.create_or_update_index(candidate, match_condition=condition)

        try:
            await call_with_retries(f"create or update index {index.name!r}", put, settings, sleep)
        except ConflictError:
            logger.warning("index %s changed while it was being updated; reading it again", index.name)
            continue
        outcome: EnsureOutcome = "created" if current is None else "updated"
        logger.info("index %s %s", index.name, outcome)
        return outcome
    raise ConflictError(f"index {index.name!r} kept changing while it was being updated; try again")


async def ensure_index(
    endpoint: str,
    index_name: str,
    credential: AsyncTokenCredential | AzureKeyCredential,
    *,
    dimensions: int,
    retry: RetrySettings | None = None,
    **client_kwargs: Any,
) -> EnsureOutcome:
    """Create or update an index from :func:`build_index` (``memory-core index ensure``).

    Args:
        endpoint: ``https://NAME.search.windows.net``.
        index_name: The index.
        credential: A token credential or the admin key (not closed here).
        dimensions: The embedder's dimensions.
        retry: Attempts and back-off.
        **client_kwargs: Passed to :class:`SearchIndexClient` (tests pass ``transport``).

    Returns:
        ``"created"``, ``"updated"`` or ``"unchanged"``.
    """
    if not endpoint:
        raise ConfigurationError("AZURE_SEARCH_ENDPOINT is not set")
    index = build_index(index_name, dimensions)
    client_kwargs.setdefault("retry_total", 0)
    client = SearchIndexClient(endpoint, credential, **client_kwargs)
    try:
        return await ensure_index_definition(client, index, retry=retry)
    finally:
        await client.close()


async def drop_index(
    endpoint: str,
    credential: AsyncTokenCredential | AzureKeyCredential,
    name: str,
    **client_kwargs: Any,
) -> None:
    """Delete an index and every document in it (tests and the calibration script use this)."""
    client_kwargs.setdefault("retry_total", 0)
    client = SearchIndexClient(endpoint, credential, **client_kwargs)
    try:
        await call_with_retries(f"delete index {name!r}", lambda: client.delete_index(name), RetrySettings())
    finally:
        await client.close()
