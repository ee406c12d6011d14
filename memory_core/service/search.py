"""Search and recall: ranked memories for a query, and the reinforcement of what was returned."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from memory_core.capabilities import BatchReader, supports
from memory_core.domain.event_dates import is_passed_plan, tense_of
from memory_core.domain.messages import RecallUpdate
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.relevance import RelevanceCalibration, calibration_for, relevance
from memory_core.domain.search import MemorySearchOptions, SearchHit, SearchMode, SearchResult
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.search_time import WINDOW_RULE, TimeWindow, WindowRule, in_window, inside_window
from memory_core.domain.validation import parse_model
from memory_core.errors import ValidationError
from memory_core.language.query_time import asks_ahead, asks_of_past, asks_when, query_time
from memory_core.language.relations import asked_relations, tells
from memory_core.language.secrets import asks_for_secret
from memory_core.ports import Embedder, HistoryStore, MemoryStore
from memory_core.service.consolidation.features import says_it_ended
from memory_core.service.entity_search import (
    ELSEWHERE_RELEVANCE,
    EntityLeg,
    with_entity_boost,
    with_entity_leg,
)
from memory_core.service.journal import dropped_by_purge
from memory_core.service.neighbours import cosine_similarity
from memory_core.service.speakers import SPEAKER_RELEVANCE, speaker_asked, speakers_of
from memory_core.service.statements import facts_first

__all__ = [
    "AHEAD_PAST_RELEVANCE",
    "ARCHIVED_CUE",
    "CUES",
    "ENDED_CUE",
    "ENDED_RELEVANCE",
    "MAX_QUERY_CHARS",
    "MIN_CANDIDATES",
    "NO_MEMORY_IN_WINDOW",
    "RELATION_RELEVANCE",
    "RELEVANCE_WEIGHT",
    "TIME_CANDIDATES",
    "Cue",
    "TimeAsked",
    "apply_recall",
    "by_relevance_and_rank",
    "candidates",
    "discounted",
    "ended_at",
    "in_score_order",
    "passed_at",
    "recall_purged",
    "recall_update",
    "search",
    "search_in_time",
    "time_asked",
    "with_question_cues",
    "with_relevance",
    "without_time_words",
]

#: Longest query text accepted.
MAX_QUERY_CHARS = 4000
#: Largest ``top`` a store is asked for.
MAX_TOP = 1000
#: How much an archived memory's score counts against active ones when it was not asked for. Fused
#: relevance changes by under 2 % a rank, so 0.9 asks an archived memory for about six ranks more
#: relevance than an active one (measured end to end, after forgetting, any@5: 0.8 0.493, 0.9 0.592,
#: 0.95 0.621, 1.0 (archiving would change nothing for the ``none`` profile) 0.636; docs/evaluation.md).
ARCHIVED_CUE = 0.9
#: How much a memory that says something has ended counts against current ones (see :data:`CUES`):
#: its rank score is multiplied by ``ENDED_CUE`` and its relevance counts ``ENDED_RELEVANCE`` less in
#: the order. Measured with ``eval truth`` (current value first, explicit changes; docs/evaluation.md).
ENDED_CUE = 0.85
ENDED_RELEVANCE = 0.1
#: How much of the order is the relevance (the query-to-memory similarity, :mod:`memory_core.domain.
#: relevance`) against the fused rank score with its profile: rank fusion rewards shared words ("Does
#: the user like mushrooms?" put "I like olives on pizza too" above "I don't like mushrooms anymore").
#: ``eval truth`` current value first: 0 (rank only) 0.844, 0.3 0.857, 0.5 0.905, **0.7 0.912**, 1.0
#: 0.884 (docs/evaluation.md, which also gives LoCoMo end to end for each).
RELEVANCE_WEIGHT = 0.7
#: How much more relevant a memory is when it tells the relation the query asks for (the relation
#: vocabulary, :mod:`memory_core.language.relations`): "I'm a chef at a little bistro" answers "What
#: does the user do for work?" though the two share no word and their vectors are only somewhat alike.
#: ``eval truth`` current value first and unanswerable probes silenced (docs/evaluation.md).
RELATION_RELEVANCE = 0.15
#: How many candidates a search weighs at least before it keeps its ``top`` (twice ``top`` when that
#: is more): the relevance reorders what the legs found, so a short list leaves the answer out. LoCoMo
#: end to end any@5, top 5: 10 candidates 0.638, **20 0.645**, 40 0.642 (docs/evaluation.md).
MIN_CANDIDATES = 20
#: How many candidates a question about time weighs at least (one that asks when, or names a period):
#: the memory that says when is often one turn among many about the same thing, found by its relevance
#: far down the fused list.
TIME_CANDIDATES = 100
#: How much more relevant a memory that states when it happened is to a when-question ("When did John get
#: his degree?": "I graduated last week!" answers it, "Congrats on finishing your degree!" does not).
WHEN_RELEVANCE = 0.1
#: What the relevance of a memory whose event has ended counts in the order when the query asks what is
#: to come (:func:`~memory_core.language.query_time.asks_ahead`: "What plans does the user have coming
#: up?", 「今後の予定を教えて」): the dentist of last week after the trip of next month, found still
#: when nothing else matches. ``eval truth`` temporal suite (docs/evaluation.md).
AHEAD_PAST_RELEVANCE = 0.3


async def search(
    store: MemoryStore,
    embedder: Embedder,
    scope: Scope,
    query: str,
    options: MemorySearchOptions | Mapping[str, Any] | None = None,
    *,
    now: datetime | None = None,
    window_rule: WindowRule = WINDOW_RULE,
) -> SearchResult:
    """Ranked memories of ``scope`` for ``query`` (no recall is recorded here).

    An empty query is a keyword match-all (every memory the filters allow); otherwise the query is
    embedded unless the mode is ``keyword``. The query's time words are read against
    ``options.reference_time`` (else ``now``, the service clock's): an "as of" reads what was current
    then (unless ``options.as_of`` says when), a period prefers the memories in it
    (:func:`time_asked`, by ``window_rule``); the keyword leg searches the query without its time words,
    and a memory's relevance is the better of the whole query's and that of the query without them
    (:func:`without_time_words`). A query that asks what is to come (``TimeAsked.ahead``) puts a memory
    whose event has ended after those still ahead (:data:`AHEAD_PAST_RELEVANCE`).

    Raises:
        ValidationError: A bad scope, query or option (names the field).
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    opts = parse_model(MemorySearchOptions, options or {})
    if not isinstance(query, str):
        raise ValidationError("query", "must be a string")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError("query", f"is {len(query)} characters; the maximum is {MAX_QUERY_CHARS}")
    vector = None
    if not query.strip():
        opts = opts.model_copy(update={"mode": SearchMode.KEYWORD})
    elif opts.mode != SearchMode.KEYWORD:
        vector = (await embedder.embed_query(query)).tolist()
    # An archived memory is not gone: a strong cue still recalls it (DESIGN section 7). Archived
    # memories compete with active ones at a discount (``ARCHIVED_CUE``) unless they were asked for.
    ranked = bool(query.strip()) and opts.order_by is None  # (else sorted by a field, or match-all)
    cue = ranked and not opts.include_archived
    asked = time_asked(query, opts, now)
    wider = candidates(opts, asked, query, ranked=ranked, cue=cue)
    result, hits = await search_in_time(store, SearchRequest(scope, query, vector, wider), asked, window_rule)
    entity_request = SearchRequest(scope, asked.text, vector, wider.model_copy(update={"as_of": asked.as_of}))
    hits, leg = await with_entity_leg(store, entity_request, hits, ranked=ranked)
    if ranked:
        hits = discounted(hits, CUES if cue else [c for c in CUES if c.name != "archived"])
    if vector is not None:
        hits = await _by_relevance(store, embedder, SearchRequest(scope, query, vector, opts), hits, asked, leg)
        hits = with_entity_boost(hits, leg.credited)
        if ranked:
            hits = by_relevance_and_rank(
                hits,
                passed_at=passed_at(query, asked, opts, now),
                ended_at=ended_at(asked, opts, now),
                when=asks_when(query),
                speaker=speaker_asked(query, hits),
                elsewhere=leg.elsewhere(hits),
            )
    hits = hits[: opts.top] if opts.kind is MemoryKind.FACT else facts_first(hits, opts.top)
    if opts.min_score is not None:
        hits = [h for h in hits if h.relevance is None or h.relevance >= opts.min_score]
    return result.model_copy(update={"hits": in_score_order(hits)})


def candidates(
    options: MemorySearchOptions, asked: TimeAsked, query: str, *, ranked: bool, cue: bool
) -> MemorySearchOptions:
    """What the store is asked for: more than ``top`` (twice ``top``, at least :data:`MIN_CANDIDATES`, or
    :data:`TIME_CANDIDATES` for a ranked question about time), archived memories too when they compete
    at a discount (``cue``). An episode placed after the facts that came from it, or an archived memory
    that loses to active ones, leaves its place to the next memory rather than to nothing."""
    about_time = ranked and (asked.window is not None or asks_when(query))
    least = TIME_CANDIDATES if about_time else MIN_CANDIDATES
    return options.model_copy(
        update={
            "top": min(max(2 * options.top, least), MAX_TOP),
            "include_archived": options.include_archived or cue,
        }
    )


async def _by_relevance(
    store: MemoryStore,
    embedder: Embedder,
    request: SearchRequest,
    hits: Sequence[SearchHit],
    asked: TimeAsked,
    leg: EntityLeg,
) -> list[SearchHit]:
    """The hits with their relevance to the query (:func:`with_relevance`; for a query that names a
    time, the better of the whole query's and that of its words without the time words: those name the
    memories' time, not what they say; for a memory that names an entity the query names in other
    words, the better of the query's and that of the query in its words, ``leg.rewrites``) and the
    question's cues (:func:`with_question_cues`)."""
    calibration, rest = calibration_for(embedder.name), without_time_words(request.query, asked)
    alone = (rest, (await embedder.embed_query(rest)).tolist()) if rest and calibration else None
    vector = cast(Sequence[float], request.vector)
    found = await with_relevance(store, request.scope, request.query, vector, hits, calibration, rest=alone)
    found = await _reworded(store, embedder, request, found, calibration, leg)
    return with_question_cues(request.query, found)


async def _reworded(
    store: MemoryStore,
    embedder: Embedder,
    request: SearchRequest,
    hits: Sequence[SearchHit],
    calibration: RelevanceCalibration | None,
    leg: EntityLeg,
) -> list[SearchHit]:
    """The hits, each memory that names an entity of the query in other words and is less relevant
    than the best hit as relevant as the better of that and its relevance to the query in its words
    (:meth:`~memory_core.service.entity_search.EntityLeg.trailing`: one query embedding per distinct
    wording, at most :data:`~memory_core.service.entity_search.MAX_REWRITES`)."""
    wanted = leg.trailing(hits) if calibration is not None else {}
    if not wanted:
        return list(hits)
    vectors = {text: (await embedder.embed_query(text)).tolist() for text in dict.fromkeys(wanted.values())}
    reworded = {memory_id: (text, vectors[text]) for memory_id, text in wanted.items()}
    vector = cast(Sequence[float], request.vector)
    again = await with_relevance(
        store, request.scope, request.query, vector, [h for h in hits if h.record.id in reworded], calibration, reworded=reworded
    )
    better = {h.record.id: h.relevance for h in again if h.relevance is not None}
    return [
        h.model_copy(update={"relevance": max(h.relevance, better[h.record.id])})
        if h.relevance is not None and h.record.id in better
        else h
        for h in hits
    ]


#: What a result says when nothing of the time its query names was found (the search ran without it).
NO_MEMORY_IN_WINDOW = "no memory of the time the query names; the search ran without it"


@dataclass(frozen=True, slots=True)
class TimeAsked:
    """What a search asks about time (:func:`time_asked`).

    Attributes:
        window: The period its time words name (``None``: none, or an "as of" read).
        as_of: The moment whose current memories it reads (``None``: now).
        text: The query text for the keyword leg: without its time words when it names a time.
        ahead: Whether it asks what is to come (:func:`~memory_core.language.query_time.asks_ahead`).
    """

    window: TimeWindow | None
    as_of: datetime | None
    text: str
    ahead: bool = False


def time_asked(query: str, options: MemorySearchOptions, now: datetime | None) -> TimeAsked:
    """The window and "as of" moment of a search: ``options.as_of`` when given, else the query's time
    words (:func:`~memory_core.language.query_time.query_time`) read against ``options.reference_time``
    or ``now`` (no time words, or neither time: the search as it is)."""
    reference = options.reference_time or now
    ahead = bool(query.strip()) and asks_ahead(query)
    if reference is None or not query.strip():
        return TimeAsked(None, options.as_of, query, ahead)
    read = query_time(query, reference)
    if options.as_of is not None or read.as_of is not None:
        return TimeAsked(None, options.as_of or read.as_of, read.rest if read.as_of else query, ahead)
    if read.window is None:
        return TimeAsked(None, None, query, ahead)
    return TimeAsked(TimeWindow(read.window.start, read.window.end), None, read.rest, ahead)


def without_time_words(query: str, asked: TimeAsked) -> str | None:
    """The query without its time words when it reads a window or an "as of" moment from them ("What
    did I do last weekend?": "What did I do ?"), else ``None``: its relevance to a memory of that time
    is the better of the two (:func:`with_relevance`), so "went hiking" is not held back by words that
    name its time, not what it says."""
    if asked.window is None and asked.as_of is None:
        return None
    rest = asked.text.strip()
    return rest if rest and rest != query.strip() else None


async def search_in_time(
    store: MemoryStore, request: SearchRequest, asked: TimeAsked, rule: WindowRule
) -> tuple[SearchResult, list[SearchHit]]:
    """The store's result for ``request`` with the time ``asked`` (an "as of" moment, or a window
    filtered to, the search running without it when nothing is in it, or boosted), and its hits with
    the window's boosts."""
    options = request.options.model_copy(update={"as_of": asked.as_of})
    filtered = asked.window if rule.how == "filter" else None
    if asked.window is not None and filtered is None:  # a boost: what held then competes as well
        options = options.model_copy(update={"include_superseded": True})
    timed = replace(request, query=asked.text, options=options, window=filtered)
    result = await store.search(timed)
    if filtered is not None and not result.hits:  # nothing of that time: what matches at all
        result = await store.search(replace(timed, query=request.query, window=None))
        result = result.model_copy(update={"notes": [*result.notes, NO_MEMORY_IN_WINDOW]})
    hits = list(result.hits)
    if asked.window is not None:
        hits = discounted(hits, _window_cues(asked.window, rule, filtered=filtered is not None))
    return result, hits


def _window_cues(window: TimeWindow, rule: WindowRule, *, filtered: bool) -> list[Cue]:
    """The boosts of a search with a window (:class:`~memory_core.domain.search_time.WindowRule`)."""
    cues = [Cue("inside the window", lambda hit: inside_window(hit.record, window), rule.inside)]
    if not filtered:
        cues.append(Cue("in the window", lambda hit: in_window(hit.record, window), rule.boost))
    return cues


async def with_relevance(
    store: MemoryStore,
    scope: Scope,
    query: str,
    vector: Sequence[float],
    hits: Sequence[SearchHit],
    calibration: RelevanceCalibration | None,
    *,
    rest: tuple[str, Sequence[float]] | None = None,
    reworded: Mapping[str, tuple[str, Sequence[float]]] | None = None,
) -> list[SearchHit]:
    """The hits with their relevance (:mod:`memory_core.domain.relevance`): the cosine of the query's
    vector and each memory's, from the vector leg's score (``1 / (2 - cosine)``) when the hit has one,
    else from the stored vector, read in one batch (Azure AI Search's hybrid query gives no score per
    leg). With ``rest`` (the query without its time words and its vector, :func:`without_time_words`),
    a memory whose stored vector is known is as relevant as the better of the two; so is a memory of
    ``reworded`` (by id: the query in its words and that text's vector, :class:`EntityLeg`)."""
    if calibration is None or not hits:
        return list(hits)
    reworded = reworded or {}
    missing = _without_vector(hits, rest is not None, reworded)
    stored: Mapping[str, MemoryRecord] = {}
    if missing and supports(store, BatchReader):
        stored = await cast(BatchReader, store).get_many(scope, missing)
    found = []
    for hit in hits:
        embedding = hit.record.embedding or stored.get(hit.record.id, hit.record).embedding
        cosine = cosine_similarity(vector, embedding, hit.breakdown.vector_score)
        if cosine is not None:
            value = relevance(cosine, query, hit.record.memory, calibration)
            others = [o for o in (rest, reworded.get(hit.record.id)) if o is not None]
            value = max([value, *_relevance_to(others, embedding, hit.record.memory, calibration)])
            hit = hit.model_copy(update={"relevance": value})
        found.append(hit)
    return found


def _without_vector(hits: Sequence[SearchHit], reread: bool, reworded: Mapping[str, object]) -> list[str]:
    """The ids of the hits whose stored vector :func:`with_relevance` reads: those that carry none,
    when they are weighed against another wording (``reread``, ``reworded``) or have no vector score."""
    return [
        h.record.id
        for h in hits
        if h.record.embedding is None and (reread or h.record.id in reworded or not h.breakdown.vector_score)
    ]


def _relevance_to(
    queries: Sequence[tuple[str, Sequence[float]]],
    embedding: Sequence[float] | None,
    memory: str,
    calibration: RelevanceCalibration,
) -> list[float]:
    """The relevance of a memory (its stored vector: none without one) to each other wording of the query."""
    if embedding is None:
        return []
    return [relevance(cast(float, cosine_similarity(v, embedding, None)), text, memory, calibration) for text, v in queries]


def with_question_cues(query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits with what the question asks for in their relevance (hits without one as they are):

    * each that tells a relation ``query`` asks for (:func:`~memory_core.language.relations.
      asked_relations`) is :data:`RELATION_RELEVANCE` more relevant (at most 1);
    * none is relevant (0) to a question for a secret's value (:func:`~memory_core.language.secrets.
      asks_for_secret`, "What is the user's VPN password?"): secrets are withheld before anything is
      stored, so whatever matches it is not its answer.
    """
    if asks_for_secret(query) is not None:
        return [h if h.relevance is None else h.model_copy(update={"relevance": 0.0}) for h in hits]
    asked = asked_relations(query)
    if not asked:
        return list(hits)
    found = []
    for hit in hits:
        if hit.relevance is not None and any(tells(r, hit.record.memory) for r in asked):
            hit = hit.model_copy(update={"relevance": round(min(1.0, hit.relevance + RELATION_RELEVANCE), 4)})
        found.append(hit)
    return found


def passed_at(
    query: str, asked: TimeAsked, options: MemorySearchOptions, now: datetime | None
) -> datetime | None:
    """The moment at which a plan whose day has passed is an event of the past, not one to come (it
    counts as ended, :func:`by_relevance_and_rank`): the "as of" moment, else the reference time, else
    now; ``None`` when the query asks of a period or of the past ("When did I...?"), where the memories
    of that time are what is wanted."""
    if asked.window is not None or asks_of_past(query):
        return None
    return asked.as_of or options.reference_time or now


def ended_at(asked: TimeAsked, options: MemorySearchOptions, now: datetime | None) -> datetime | None:
    """The moment at which an event has ended for a query that asks what is to come (``asked.ahead``):
    the "as of" moment, else the reference time, else now; ``None`` for any other query."""
    if not asked.ahead:
        return None
    return asked.as_of or options.reference_time or now


def by_relevance_and_rank(
    hits: Sequence[SearchHit],
    *,
    passed_at: datetime | None = None,
    ended_at: datetime | None = None,
    when: bool = False,
    speaker: str | None = None,
    elsewhere: frozenset[str] = frozenset(),
) -> list[SearchHit]:
    """The hits ordered by :data:`RELEVANCE_WEIGHT` of their relevance and the rest of their rank score
    (relative to the best one), when every hit has a relevance (else as they are). A memory that says
    something ended, or a plan whose day had passed at ``passed_at``
    (:func:`~memory_core.domain.event_dates.is_passed_plan`), counts :data:`ENDED_RELEVANCE` less
    relevant here; a memory whose event span had ended at ``ended_at`` (a query that asks what is to
    come, :func:`ended_at`) counts :data:`AHEAD_PAST_RELEVANCE` of its relevance; for a when-question
    (``when``), a memory that states when it happened counts :data:`WHEN_RELEVANCE` more (its shown
    relevance is not changed, so the relevance floor still silences what answers nothing), and so does
    a memory said by ``speaker``, the one person the question names
    (:func:`~memory_core.service.speakers.speaker_asked`) by :data:`SPEAKER_RELEVANCE`; a memory of
    ``elsewhere`` (it names another person or pet than those the query names,
    :meth:`~memory_core.service.entity_search.EntityLeg.elsewhere`) counts
    :data:`~memory_core.service.entity_search.ELSEWHERE_RELEVANCE` less."""
    if not hits or any(h.relevance is None for h in hits):
        return list(hits)
    best = max(h.score for h in hits) or 1.0

    def ended(hit: SearchHit) -> bool:
        return _ended(hit) or (passed_at is not None and is_passed_plan(hit.record, passed_at))

    def key(hit: SearchHit) -> float:
        relevance = cast(float, hit.relevance) - (ENDED_RELEVANCE if ended(hit) else 0.0)
        if ended_at is not None and tense_of(hit.record.event_at, hit.record.event_until, ended_at) == "past":
            relevance *= AHEAD_PAST_RELEVANCE
        if when and hit.record.event_at is not None:
            relevance += WHEN_RELEVANCE
        if speaker is not None and speaker in speakers_of(hit.record):
            relevance += SPEAKER_RELEVANCE
        if hit.record.id in elsewhere:
            relevance -= ELSEWHERE_RELEVANCE
        return -(RELEVANCE_WEIGHT * relevance + (1.0 - RELEVANCE_WEIGHT) * hit.score / best)

    return sorted(hits, key=key)


def in_score_order(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits as ranked, each score at most the one above it: a memory placed by more than its score
    (the relevance, an episode standing for its facts) shows the score of its place, so the scores read
    in the order the hits are given (the breakdown keeps what the engine scored)."""
    ordered: list[SearchHit] = []
    for hit in hits:
        if ordered and hit.score > ordered[-1].score:
            hit = hit.model_copy(update={"score": ordered[-1].score})
        ordered.append(hit)
    return ordered


@dataclass(frozen=True, slots=True)
class Cue:
    """A kind of memory that competes at a discount unless it matches clearly better than the rest.

    Attributes:
        name: What the cue is about (for the docs and the tests).
        applies: Whether a hit is of this kind.
        factor: What its score is multiplied by (its breakdown's ``boost`` too).
    """

    name: str
    applies: Callable[[SearchHit], bool]
    factor: float


def _archived(hit: SearchHit) -> bool:
    return hit.record.status is MemoryStatus.ARCHIVED


def _ended(hit: SearchHit) -> bool:
    return says_it_ended(hit.record.memory)


#: The discounts of a search with a query, as data: an archived memory (not asked for) and a memory
#: that says something has ended ("No more yoga for me", 「テニスはやめた」: true now, but the answer
#: to "what exercise does the user do?" is what they do) come after a current memory of about the
#: same relevance, and first when nothing else matches as well.
CUES: tuple[Cue, ...] = (
    Cue("archived", _archived, ARCHIVED_CUE),
    Cue("ended", _ended, ENDED_CUE),
)


def discounted(hits: Sequence[SearchHit], cues: Sequence[Cue] = CUES) -> list[SearchHit]:
    """Hits re-ranked with the score of each hit a cue applies to multiplied by its factor (its
    breakdown's ``boost`` says so)."""
    adjusted = []
    for hit in hits:
        factor = 1.0
        for cue in cues:
            if cue.applies(hit):
                factor *= cue.factor
        if factor != 1.0:
            breakdown = hit.breakdown.model_copy(update={"boost": hit.breakdown.boost * factor})
            hit = hit.model_copy(update={"score": hit.score * factor, "breakdown": breakdown})
        adjusted.append(hit)
    return sorted(adjusted, key=lambda hit: -hit.score)


def recall_update(scope: Scope, memory_ids: Sequence[str], at: datetime) -> RecallUpdate:
    """The ``recall.v1`` message that reinforces ``memory_ids`` once."""
    return RecallUpdate(user_id=scope.user_id, agent_id=scope.agent_id, memory_ids=list(memory_ids), at=at)


async def apply_recall(
    store: MemoryStore, history: HistoryStore, policy: HumanMemoryPolicy, update: RecallUpdate, now: datetime
) -> int:
    """Reinforce the memories of one recall update once (idempotent per ``recall_id``).

    Returns:
        How many memories were touched (0 for a redelivered update).
    """
    scope = update.scope
    if await history.turn_processed(scope, update.recall_id):
        return 0
    touched = await store.recall(scope, update.memory_ids, policy)
    await history.mark_turn_processed(scope, update.recall_id, now)
    return len(touched)


async def recall_purged(history: HistoryStore, update: RecallUpdate) -> bool:
    """Whether a recall update is dated at or before its scope's last purge (it is dropped then)."""
    tombstone = await history.tombstone(update.scope)
    return dropped_by_purge(f"recall update {update.recall_id} made", update.at, tombstone)
