"""The rule path of consolidation as tables (pure): the contradiction rules that compare two statements,
and the pair rules that decide a candidate against each neighbouring memory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MemoryEvent
from memory_core.domain.records import MemoryRecord
from memory_core.language.corrections import CORRECTION, corrected, correction_pair
from memory_core.language.text import has_japanese
from memory_core.service.consolidation.comparison import Comparison, compare_statements, compared
from memory_core.service.consolidation.decisions import Neighbour, SimilarityThresholds, Verdict, shortened
from memory_core.service.consolidation.features import normalized_statement, speaker_of, split_speaker
from memory_core.service.consolidation.forget import (
    decide_forget,
    join_clauses,
    remaining_statements,
    statement_clauses,
)

__all__ = ["CONTRADICTION_RULES", "PAIR_RULES", "contradiction", "decide_with_rules", "find_contradiction"]


# --------------------------------------------------------------------------------------------
# Contradictions
# --------------------------------------------------------------------------------------------


class _NotContradicting:
    """A contradiction rule's answer meaning: these two statements do not contradict; ask no further rule."""


_NOT_CONTRADICTING = _NotContradicting()
ContradictionRule = Callable[[Comparison], "str | _NotContradicting | None"]


def _not_comparable(c: Comparison) -> str | _NotContradicting | None:
    """The same text, another person's statement, or one about another person: replaces nothing."""
    if c.same_text or not c.same_speaker or c.old.other_person != c.new.other_person:
        return _NOT_CONTRADICTING
    return None


def _ended(c: Comparison) -> str | _NotContradicting | None:
    """The new statement ends what the old one states ("I play the piano" → "I quit piano", 「テニスを
    しています」 → 「もうテニスはやめた」)."""
    ended = c.ended_object
    return None if ended is None else f"ended: the new statement says {ended!r} no longer holds"


def _negation(c: Comparison) -> str | _NotContradicting | None:
    """好き vs 苦手 / 嫌い / 好きではない, like vs don't like / hate, over the same thing."""
    if not (c.polarity_conflict and c.related):
        return None
    old_word = "negative" if c.old.polarity < 0 else "positive"
    new_word = "negative" if c.new.polarity < 0 else "positive"
    return f"negation: the memory is {old_word}, the new statement {new_word} about the same thing"


def _another_occasion(c: Comparison) -> str | _NotContradicting | None:
    """Two reports of what happened, on other dates ("I went to a pride parade last week" → "I went to a
    pride parade last Friday", 「先月京都に行った」 → 「昨日また京都に行った」): two occasions, both true. A
    one-value slot (where one lives) and a statement that says it changes or replaces something still
    go on to the rules below; a correction ("my mistake, it was Tuesday") is decided before these rules."""
    if not (c.when_conflict and c.old.happened and c.new.happened):
        return None
    if c.old.slots & c.new.slots or c.new.change or c.replaced:
        return None
    return _NOT_CONTRADICTING


def _date_changed(c: Comparison) -> str | _NotContradicting | None:
    """Other dates, weekdays or times for the same thing (月曜10時 → 金曜10時)."""
    if not (c.when_conflict and c.related):
        return None
    old_when = ", ".join(w.split(":", 1)[1] for w in c.old.when)
    new_when = ", ".join(w.split(":", 1)[1] for w in c.new.when)
    return f"date/time changed: {old_when} → {new_when}"


def _number_changed(c: Comparison) -> str | _NotContradicting | None:
    """Other numbers for the same thing (猫を2匹 → 猫を3匹)."""
    if not (c.numbers_conflict and c.related):
        return None
    return f"number changed: {', '.join(c.old.numbers)} → {', '.join(c.new.numbers)}"


def _replaced(c: Comparison) -> str | _NotContradicting | None:
    """The new statement says it replaces the old one's words ("紅茶じゃなくてコーヒー", "instead of tea")."""
    replaced = c.replaced
    if not (replaced and c.new.units and not c.polarity_conflict):
        return None
    if not (c.shares_predicate or c.alike_objects is not None):
        return None
    return f"replaced: {c.surface(replaced[0])} → {c.surface(c.new.units[0])}"


def _added_or_bygone(c: Comparison) -> str | _NotContradicting | None:
    """Something said in addition (紅茶も, also), or one statement about the past and one about now."""
    if c.both_say_more and (c.new.additive or c.old.bygone != c.new.bygone):
        return _NOT_CONTRADICTING
    return None


def _other_slots(c: Comparison) -> str | _NotContradicting | None:
    """One-value predicates of two kinds: where the user is from and where they live are two things."""
    if c.both_say_more and c.old.slots and c.new.slots and not c.old.slots & c.new.slots:
        return _NOT_CONTRADICTING
    return None


def _other_choice(c: Comparison) -> str | _NotContradicting | None:
    """Alike objects of one lexicon group (コーヒー / 紅茶, window / aisle) and little else differing, in
    statements that choose (prefer, 派, のほうがいい) or a new one that says it is a change ("now",
    「今は」): the two choices are what differs. Likings accumulate: "I like cats" and "I like dogs" are
    two facts (a hotel priority for one trip does not replace a liking of ryokans either)."""
    if not (c.both_say_more and c.shares_predicate):
        return None
    chooses = c.new.change or (c.old.choice and c.new.choice) or c.exclusive_choice
    if not (chooses or c.old.slots & c.new.slots):
        return None
    alike = c.alike_objects
    if alike is None or not c.focused(alike):
        return None
    return f"different choice in the same slot: {alike[0]} → {alike[1]}"


def _one_value(c: Comparison) -> str | _NotContradicting | None:
    """Another value of a predicate that holds one at a time (住んで, favorite, name)."""
    if not (c.both_say_more and c.old.slots & c.new.slots):
        return None
    return f"one value at a time: {c.surface(c.only_old[0])} → {c.surface(c.only_new[0])}"


#: The contradiction rules, in this order: the first that answers decides (a reason is a contradiction,
#: ``_NOT_CONTRADICTING`` ends the search without one).
CONTRADICTION_RULES: tuple[ContradictionRule, ...] = (
    _not_comparable,
    _ended,
    _negation,
    _another_occasion,
    _date_changed,
    _number_changed,
    _replaced,
    _added_or_bygone,
    _other_slots,
    _other_choice,
    _one_value,
)


def contradiction(c: Comparison) -> str | None:
    """Why the new statement of a comparison contradicts the old one, or ``None`` (:data:`CONTRADICTION_RULES`)."""
    for rule in CONTRADICTION_RULES:
        answer = rule(c)
        if answer is not None:
            return answer if isinstance(answer, str) else None
    return None


def find_contradiction(
    old: str, new: str, *, old_speaker: str | None = None, new_speaker: str | None = None
) -> str | None:
    """Why ``new`` contradicts ``old``, or ``None`` when it does not (pure).

    Checked: negation (好き vs 苦手 / 嫌い / 好きではない; like vs don't like / hate) over the same content;
    other numbers, dates, weekdays or times for the same content; and a differing object in the same
    slot — alike objects (コーヒー / 紅茶, window / aisle), an explicit replacement ("紅茶じゃなくて
    コーヒー", "instead of tea") or a predicate that holds one value (住んで, favorite, name).
    """
    return contradiction(compare_statements(old, new, old_speaker=old_speaker, new_speaker=new_speaker))


# --------------------------------------------------------------------------------------------
# Pair rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pair:
    """A candidate beside one neighbour: what the pair rules look at."""

    candidate: MemoryCandidate
    neighbour: Neighbour
    comparison: Comparison
    thresholds: SimilarityThresholds

    @property
    def record(self) -> MemoryRecord:
        return self.neighbour.record

    @property
    def similarity(self) -> float:
        return self.neighbour.similarity

    @property
    def lexical(self) -> bool:
        """The two statements share content words or name alike objects."""
        c = self.comparison
        shared_slot = bool(c.old.slots & c.new.slots)
        return c.related or c.alike_objects is not None or shared_slot or bool(c.replaced) or bool(c.ended_object)

    @property
    def same_predicate(self) -> bool:
        return self.comparison.old.polarity == self.comparison.new.polarity

    @property
    def same_category(self) -> bool:
        return self.record.category == self.candidate.category

    @property
    def related(self) -> bool:
        return self.similarity >= self.thresholds.related


class _Skip:
    """A pair rule's answer meaning: this neighbour says something else; go on to the next one."""


_SKIP = _Skip()
PairRule = Callable[[_Pair], "Verdict | _Skip | None"]


def _rule_unrelated(p: _Pair) -> Verdict | _Skip | None:
    """Another person's statement, or neither close by embedding nor sharing content: another fact."""
    if not p.comparison.same_speaker:
        return _SKIP
    return _SKIP if not p.related and not p.lexical else None


def _rule_contradiction(p: _Pair) -> Verdict | _Skip | None:
    """A contradiction supersedes the old memory: an UPDATE that replaces its text (step 4)."""
    reason = contradiction(p.comparison)
    if reason is None:
        return None
    # A memory that joins several statements loses only the one the new statement contradicts
    # ("I live in Berlin and I work at Google" + "I moved to Munich": the job stays).
    new = p.comparison.new
    rest = remaining_statements(
        p.record.memory,
        speaker_of(p.record),
        lambda part: contradiction(compared(part, new)) is not None,
    )
    text = p.candidate.memory
    if rest is not None:
        speaker, body = split_speaker(text, p.candidate.speaker)
        _, kept = split_speaker(rest, speaker_of(p.record))
        joined = join_clauses([*statement_clauses(kept), body], has_japanese(body))
        text = f"{speaker}: {joined}" if speaker else joined
    return Verdict(
        MemoryEvent.UPDATE,
        p.record,
        text,
        f"supersedes {shortened(p.record.memory)!r}: {reason}",
        supersedes=True,
    )


def _rule_another_occasion(p: _Pair) -> Verdict | _Skip | None:
    """Two reports of what happened, on other dates ("I went to the Louvre last month" → "I went to the
    Louvre again yesterday"): another occasion, so another fact; not a restatement of the first one, nor
    more detail about it (step 4b)."""
    c = p.comparison
    return _SKIP if c.when_conflict and c.old.happened and c.new.happened else None


def _rule_other_object(p: _Pair) -> Verdict | _Skip | None:
    """Each side names something the other does not (tea as well as coffee): another fact."""
    c = p.comparison
    return _SKIP if c.only_old and c.only_new and (c.alike_objects is not None or not p.lexical) else None


def _rule_same_content(p: _Pair) -> Verdict | _Skip | None:
    """Same content: NONE (rehearsal), or UPDATE when the new one adds a number or a date (step 5)."""
    c = p.comparison
    if not (c.same_content and c.old.terms and p.same_predicate):
        return None
    if (not c.old.numbers and c.new.numbers) or (not c.old.when and c.new.when):
        return Verdict(
            MemoryEvent.UPDATE, p.record, p.candidate.memory, "adds a number or date to the same memory"
        )
    return Verdict(
        MemoryEvent.NONE, p.record, None, f"restated: same content as {p.record.id} ({p.similarity:.2f})"
    )


def _rule_adds_detail(p: _Pair) -> Verdict | _Skip | None:
    """The new statement covers the old one and says more: UPDATE with the detailed text (step 6)."""
    if p.comparison.new_covers_old and p.same_predicate and p.same_category and p.related:
        return Verdict(MemoryEvent.UPDATE, p.record, p.candidate.memory, "adds detail to the memory")
    return None


def _rule_known_in_detail(p: _Pair) -> Verdict | _Skip | None:
    """The old memory already says this and more: NONE (step 6)."""
    c = p.comparison
    if c.old_covers_new and p.same_predicate and p.related and not c.new.numbers and not c.new.when:
        return Verdict(MemoryEvent.NONE, p.record, None, "already remembered in more detail")
    return None


def _rule_refines(p: _Pair) -> Verdict | _Skip | None:
    """Very similar, same category and predicate, mostly shared content: UPDATE (step 7)."""
    if (
        p.similarity >= p.thresholds.update
        and p.same_category
        and p.same_predicate
        and p.comparison.overlap >= 0.5
    ):
        return Verdict(
            MemoryEvent.UPDATE,
            p.record,
            p.candidate.memory,
            f"refines the memory (similarity {p.similarity:.2f}, shared content {p.comparison.overlap:.2f})",
        )
    return None


def _rule_near_duplicate(p: _Pair) -> Verdict | _Skip | None:
    """No content words on either side but nearly the same embedding: NONE."""
    c = p.comparison
    if not c.old.terms and not c.new.terms and p.similarity >= p.thresholds.duplicate:
        return Verdict(MemoryEvent.NONE, p.record, None, f"near-duplicate (similarity {p.similarity:.2f})")
    return None


#: The rules applied to each neighbour, closest first, in this order; the first verdict wins and a
#: skip moves on to the next neighbour.
PAIR_RULES: tuple[PairRule, ...] = (
    _rule_unrelated,
    _rule_contradiction,
    _rule_another_occasion,
    _rule_other_object,
    _rule_same_content,
    _rule_adds_detail,
    _rule_known_in_detail,
    _rule_refines,
    _rule_near_duplicate,
)


def _rule_same_text(candidate: MemoryCandidate, ordered: Sequence[Neighbour]) -> Verdict | None:
    """The same normalized text as any neighbour: NONE, a restatement (step 3)."""
    wanted = normalized_statement(candidate.memory)
    for n in ordered:
        if normalized_statement(n.record.memory) == wanted:
            return Verdict(
                MemoryEvent.NONE,
                n.record,
                None,
                f"restated: same text as {n.record.id} (similarity {n.similarity:.2f})",
            )
    return None


def _decide_pair(p: _Pair) -> Verdict | _Skip | None:
    for rule in PAIR_RULES:
        answer = rule(p)
        if answer is not None:
            return answer
    return None


def _correction(candidate: MemoryCandidate, ordered: Sequence[Neighbour]) -> Verdict:
    """A correction ("I meant Tuesday, not Thursday") puts the right value in the closest memory that says
    the wrong one (an UPDATE that supersedes it), or changes nothing when none does."""
    pair = correction_pair(candidate.memory)
    if pair is None:
        return Verdict(MemoryEvent.NONE, None, None, "not a correction")
    for n in ordered:
        text = corrected(n.record.memory, pair)
        if text is not None and n.record.category != CORRECTION:
            return Verdict(
                MemoryEvent.UPDATE, n.record, text, f"corrected: {pair[1]!r} → {pair[0]!r}", supersedes=True
            )
    return Verdict(MemoryEvent.NONE, None, None, "a correction of nothing remembered")


def decide_with_rules(
    candidate: MemoryCandidate, neighbours: Sequence[Neighbour], thresholds: SimilarityThresholds
) -> Verdict:
    """The rule path's decision for one candidate (pure; the steps of ``docs/rules.md``, in order).

    Args:
        candidate: The extracted candidate.
        neighbours: The scope's nearest active memories with their cosine similarity.
        thresholds: The embedder's thresholds.
    """
    ordered = sorted(neighbours, key=lambda n: (-n.similarity, n.record.id))
    if candidate.kind is CandidateKind.FORGET:
        return decide_forget(candidate, ordered, thresholds)
    if candidate.category == CORRECTION:
        return _correction(candidate, ordered)
    if not ordered:
        return Verdict(MemoryEvent.ADD, None, candidate.memory, "no similar memory in this scope")
    restated = _rule_same_text(candidate, ordered)
    if restated is not None:
        return restated
    for n in ordered:
        comparison = compare_statements(
            n.record.memory, candidate.memory, old_speaker=speaker_of(n.record), new_speaker=candidate.speaker
        )
        answer = _decide_pair(_Pair(candidate, n, comparison, thresholds))
        if isinstance(answer, Verdict):
            return answer
    best = ordered[0]
    return Verdict(
        MemoryEvent.ADD,
        None,
        candidate.memory,
        f"new information (closest memory {best.record.id}, similarity {best.similarity:.2f}, says something else)",
    )
