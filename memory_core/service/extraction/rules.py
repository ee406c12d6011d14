"""The rule path of extraction: deterministic Japanese and English patterns, one statement per candidate,
only from user messages."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, date, datetime, time

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MessageRole, Turn
from memory_core.domain.validation import CONTROL_CHARACTERS, MAX_MEMORY_CHARS, ensure_utc
from memory_core.language.chatter import SMALL_TALK
from memory_core.language.corrections import CORRECTION, correction_pair
from memory_core.language.date_annotation import annotate_dates
from memory_core.language.event_time import EventTime, event_time
from memory_core.language.sentences import (
    JAPANESE_SCRIPT,
    LEADING_MARKERS_EN,
    TRAILING_PUNCTUATION,
    is_question,
    split_sentences,
    statement_text,
)
from memory_core.service.extraction.categories import (
    FIRST_PERSON_EN,
    LIFE_EVENT,
    category,
    is_past,
    is_recurring,
)
from memory_core.service.extraction.forget import ended_target, forget_target
from memory_core.service.extraction.statements import statement_parts
from memory_core.service.prompts.extraction import strip_recalled_memories

__all__ = ["MAX_CANDIDATES", "extract_with_rules", "with_speaker"]

#: Sentences longer than this are not turned into rule candidates (pasted text, not a statement).
MAX_RULE_SENTENCE_CHARS = 400
#: At most this many candidates per turn, on either path.
MAX_CANDIDATES = 20
_REQUEST = re.compile(
    r"(?:ください|下さい|くださいね|してほしい|して欲しい|お願い|おねがい|教えて|調べて|探して|予約して|"
    r"おすすめは|オススメは)\s*[。！!]?$|^(?:please|pls|can you|could you|would you|will you|let'?s|"
    r"tell me|show me|find me|book|help me|recommend)\b",
    re.IGNORECASE,
)
#: A passing state ("今日は疲れた", "right now"): nothing to remember.
_TRANSIENT = re.compile(
    r"今日|今夜|今朝|さっき|ただいま|\btoday\b|\btonight\b|\bright now\b|\bat the moment\b|"
    r"\bthis morning\b|\bjust now\b",
    re.IGNORECASE,
)
#: "Now" (今は, 今、): a correction when it comes with a preference, a constraint or who the user is
#: ("今は辛い料理が苦手です"), a passing state otherwise ("今は温泉に行きたい気分").
_NOW = re.compile(r"今は|今、|いまは|今では")
#: How the user asks to be called: a request that says who they are ("Please call me Ally", 「アリーと呼んで
#: ください」), with the words that only make it polite.
_SELF_NAMING = re.compile(r"\bcall me\b|\bi go by\b|と呼んで|って呼んで", re.IGNORECASE)
_POLITE_OPENING = re.compile(r"^(?:(?:please|pls|just|you can|you may|feel free to)\s+)+", re.IGNORECASE)
#: A statement that names nothing but through a pronoun or not at all ("I did", "We got this", "I drew it",
#: "I love to"): what it is about was said elsewhere, so on its own it is nothing to remember.
_EMPTY_STATEMENT = re.compile(
    r"^(?:(?:yeah|yes|yep|oh|wow|well|so|and|but|haha|aw+)\W+)*(?:i|we)(?:'ve| have|'d| would)? "
    r"(?:(?:\w+ly|just|also|so|totally|finally|still|do|did) )*[a-z]+"
    r"(?: (?:it|this|that|them|one|so|to|too|there|again|back|out|up|more|both))*$",
    re.IGNORECASE,
)
#: The categories of a sentence that says nothing of its own kind: only a statement about the user
#: ("general"), which may still end something ("No more yoga for me") or correct a memory ("Sorry, I
#: meant Tuesday, not Thursday").
_NOTHING_OF_ITS_OWN = (None, "general")
_REMEMBER_EN = re.compile(r"^(?:please\s+)?remember\s+(?:that\s+)?(?P<what>.+)$", re.IGNORECASE)
_REMEMBER_JA = re.compile(r"^(?P<what>.+?)(?:って|と|ことを|のを|を)?(?:覚えて(?:おいて|て)|記憶して)")


def _dated(text: str, body: str, kind: str | None, reference: date) -> tuple[str, EventTime | None]:
    """A statement's text with its relative dates made absolute, and the event time its words state
    (neither for a routine: its weekday comes back every week, it is no date)."""
    if kind == "routine":
        return text, None
    recurring, past = is_recurring(body), is_past(body, kind)
    # the words as said give the event time; the annotation only writes it into the text
    when = event_time(
        text,
        datetime.combine(reference, time(), UTC),
        past=past,
        weekdays=kind in ("plan", "event") and not recurring,
        calendar=not recurring,
    )
    written = annotate_dates(
        text, reference, past=past, weekdays=kind == "plan" and not recurring, calendar=not recurring
    )
    return written, when


def _statement(body: str, sentence: str, reference: date, remembered: bool) -> MemoryCandidate | None:
    """The candidate of one statement, or ``None`` when there is nothing durable in it."""
    about_the_world = JAPANESE_SCRIPT.search(body) is None and not FIRST_PERSON_EN.search(body)
    if about_the_world and not remembered and not LIFE_EVENT.search(body):
        return None  # statements about the world, not the user (a life event in their circle is theirs)
    kind = category(body, reference)
    if kind is None and not remembered:
        return None
    if kind != "plan":
        passing = _TRANSIENT.search(body) and kind not in ("constraint", "profile", "event")
        if passing or (_NOW.search(body) and kind not in ("constraint", "preference", "profile")):
            return None
    text = statement_text(body)
    if not text or (not remembered and _EMPTY_STATEMENT.match(text)):
        return None
    text, when = _dated(text, body, kind, reference)
    return MemoryCandidate(
        kind=CandidateKind.FACT,
        memory=text[:MAX_MEMORY_CHARS],
        category=kind or "general",
        event_at=None if when is None else when.start,
        event_until=None if when is None else when.end,
        evidence=sentence,
    )


def _forget_request(sentence: str, forget: str) -> list[MemoryCandidate]:
    """The candidate of a forget request naming ``forget`` (none when it names nothing, or when it is a
    question that does not say 忘れて / forget)."""
    if not TRAILING_PUNCTUATION.sub("", forget).strip():
        return []  # nothing left to name what should be forgotten
    if is_question(sentence) and not re.search(r"忘れて|forget", sentence, re.IGNORECASE):
        return []
    return [MemoryCandidate(kind=CandidateKind.FORGET, memory=forget, category="general", evidence=sentence)]


def _remembered(core: str) -> str | None:
    """What an explicit "remember that ..." / 「…を覚えておいて」 asks to remember, or ``None``."""
    for pattern in (_REMEMBER_EN, _REMEMBER_JA):
        match = pattern.search(core)
        if match:
            return match.group("what").strip(" 、,")
    return None


def _forget_requested(sentence: str, core: str, previous: str | None, reference: date) -> list[MemoryCandidate] | None:
    """The candidate of a request to forget (or of a statement that only ends something), or ``None``."""
    forget = forget_target(sentence, previous)
    if forget is not None:
        return _forget_request(sentence, forget)
    ended = ended_target(sentence)
    if ended is not None and category(core, reference) in _NOTHING_OF_ITS_OWN:
        return _forget_request(sentence, ended)  # it only ends something: forget that
    return None


def _correction(sentence: str, core: str, reference: date) -> MemoryCandidate | None:
    """"Sorry, I meant Tuesday, not Thursday": a sentence that says nothing of its own and corrects a
    memory (consolidation puts the right value in place), or ``None``."""
    if correction_pair(sentence) is None or category(sentence, reference) not in _NOTHING_OF_ITS_OWN:
        return None
    return MemoryCandidate(kind=CandidateKind.FACT, memory=core[:MAX_MEMORY_CHARS], category=CORRECTION, evidence=sentence)


def _statements(sentence: str, core: str, reference: date) -> list[MemoryCandidate]:
    """The statements of a sentence that is not a request to the assistant ("remember that ...", and a
    request that says how the user is called, are statements)."""
    remembered = _remembered(core)
    naming = remembered is None and bool(_SELF_NAMING.search(core))
    if remembered is None and _REQUEST.search(core) and not naming:
        return []
    body = TRAILING_PUNCTUATION.sub("", remembered) if remembered is not None else core
    if naming:
        body = _POLITE_OPENING.sub("", body)
    parts = [(body, body)] if remembered is not None else statement_parts(body, distinct=True)
    # the evidence of a statement is what said it: the sentence, or its part when the sentence joins several
    found = [
        _statement(statement, said if len(parts) > 1 else sentence, reference, remembered is not None)
        for said, statement in parts
    ]
    return [c for c in found if c is not None]


def _rule_candidates_for_sentence(
    sentence: str, previous: str | None, reference: date
) -> list[MemoryCandidate]:
    """The candidates of one sentence (``previous``: the sentence before it, which "forget that" names)."""
    if len(sentence) > MAX_RULE_SENTENCE_CHARS:
        return []
    core = TRAILING_PUNCTUATION.sub("", sentence)
    forgetting = _forget_requested(sentence, core, previous, reference)
    if forgetting is not None:
        return forgetting
    if is_question(sentence) or SMALL_TALK.search(LEADING_MARKERS_EN.sub("", sentence.strip())):
        return []
    correction = _correction(sentence, core, reference)
    return [correction] if correction is not None else _statements(sentence, core, reference)


def extract_with_rules(turn: Turn) -> list[MemoryCandidate]:
    """Deterministic extraction: Japanese and English patterns, one statement per candidate.

    Only user messages are read, after removing recall blocks. Questions, requests to the assistant,
    thanks and greetings, passing states ("today", "今日") and statements that are not about the user
    produce nothing. A sentence that joins statements of different kinds ("I'm vegetarian and I live in
    Berlin") gives one candidate per statement. Relative dates are made absolute in the text
    (:func:`annotate_dates`, against ``turn.occurred_at``) and the time a statement states is its
    event time (:func:`~memory_core.language.event_time.event_time`: ``event_at``/``event_until``, the
    turn's UTC day as "today"), and a message with a ``name`` gives memories
    that name their speaker (:func:`with_speaker`). Explicit forget requests produce ``kind=forget``
    candidates naming what to forget. Candidates carry importance 0.65, confidence 0.55 and source
    ``rule-fallback``.

    Args:
        turn: The turn.

    Returns:
        Candidates in the order they were said, without duplicates, at most :data:`MAX_CANDIDATES`.
    """
    reference = ensure_utc(turn.occurred_at).date()
    candidates: list[MemoryCandidate] = []
    seen: set[tuple[str, str]] = set()
    for index, message in enumerate(turn.messages):
        if message.role is not MessageRole.USER:
            continue
        previous: str | None = None
        for raw in split_sentences(strip_recalled_memories(message.text)):
            # What is matched (and becomes memory text) has no control characters; the evidence stays
            # exactly as the user wrote it.
            sentence = re.sub(
                r"\s+", " ", unicodedata.normalize("NFC", CONTROL_CHARACTERS.sub("", raw))
            ).strip()
            found = _rule_candidates_for_sentence(sentence, previous, reference)
            previous = sentence
            for candidate in found:
                # keep the evidence exactly as the user wrote it, where it was said and by whom
                part = candidate.evidence != sentence and candidate.evidence in raw
                candidate = candidate.model_copy(
                    update={
                        "memory": with_speaker(candidate.memory, message.name),
                        "evidence": candidate.evidence if part else raw,
                        "message": index,
                        "speaker": message.name,
                    }
                )
                key = (candidate.kind.value, candidate.memory.casefold())
                if key in seen:
                    continue
                seen.add(key)
                candidates.append(candidate)
                if len(candidates) >= MAX_CANDIDATES:
                    return candidates
    return candidates


def with_speaker(memory: str, speaker: str | None) -> str:
    """``memory`` naming who said it ("Caroline: I just got accepted..."), when the message has a name.

    In a conversation of several people, "I" alone says nothing about whose memory it is; the name makes
    it searchable and keeps two people's statements apart (consolidation compares a speaker's statements
    only with that speaker's). Without a name (one user talking to an agent) the text is left as said.
    """
    if not speaker or memory.startswith(f"{speaker}: "):
        return memory
    return f"{speaker}: {memory}"[:MAX_MEMORY_CHARS]
