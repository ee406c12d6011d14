"""LoCoMo's data read and corrected: the conversations' dated turns and the questions' evidence turns.

Gold data fixes: the audit file's ``WRONG_CITATION`` entries replace a question's evidence with the
audited ``correct_evidence``; evidence strings are normalised to ``D<session>:<turn>`` ids (lists in
one string are split, ``D:11:26`` reads as ``D11:26`` and ``D30:05`` as ``D30:5``); ids that name no
turn of the conversation are dropped and counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_core.tools.reporting import file_sha256

__all__ = [
    "CATEGORY_NAMES",
    "EVALUATED_CATEGORIES",
    "TEXT_FORMATS",
    "LocomoData",
    "LocomoQuestion",
    "LocomoTurn",
    "apply_audit",
    "load_locomo",
    "normalize_evidence",
    "parse_session_date",
    "turn_text",
]

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
EVALUATED_CATEGORIES = (1, 2, 3, 4)
#: How a turn becomes memory text: ``dated`` "[8 May 2023] Caroline: text", ``speaker`` "Caroline:
#: text", ``plain`` the text alone (an image turn adds "[image: caption]" in every format).
TEXT_FORMATS = ("dated", "speaker", "plain")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    """One dialogue turn of one conversation."""

    conversation: int
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    date: datetime


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """One question with its (normalised, corrected) evidence turn ids."""

    question_id: str
    conversation: int
    question: str
    category: int
    evidence: tuple[str, ...]
    corrected: bool = False


@dataclass
class LocomoData:
    """The loaded benchmark with counts of what the loader fixed."""

    turns: list[LocomoTurn]
    questions: list[LocomoQuestion]
    sha256: str = ""
    stats: dict[str, int] = field(default_factory=dict)

    def conversations(self) -> list[int]:
        return sorted({t.conversation for t in self.turns})

    def first(self, count: int | None) -> LocomoData:
        """The first ``count`` conversations only (all of them when ``count`` is ``None`` or 0)."""
        if not count:
            return self
        keep = set(self.conversations()[:count])
        return replace(
            self,
            turns=[t for t in self.turns if t.conversation in keep],
            questions=[q for q in self.questions if q.conversation in keep],
        )


def normalize_evidence(values: Iterable[Any]) -> list[str]:
    """Evidence ids as ``D<session>:<turn>`` (no leading zeros), in order, without duplicates.

    Each string may hold several ids (``"D8:6; D9:17"``, ``"D9:1 D4:4"``); ``"D:11:26"`` reads as
    ``D11:26``; strings with no id (``"D"``) contribute nothing.
    """
    ids: list[str] = []
    for value in values:
        for session, turn in _EVIDENCE.findall(str(value)):
            normalized = f"D{int(session)}:{int(turn)}"
            if normalized not in ids:
                ids.append(normalized)
    return ids


def parse_session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    cleaned = " ".join(text.replace(",", " ").split())
    for pattern in ("%I:%M %p on %d %B %Y", "%I:%M%p on %d %B %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date {text!r}")


def turn_text(turn: LocomoTurn, text_format: str = "dated") -> str:
    """The memory text of a turn in one of :data:`TEXT_FORMATS`."""
    body = turn.text.strip()
    if turn.caption:
        body = f"{body} [image: {turn.caption.strip()}]".strip()
    if text_format == "plain":
        return body
    if text_format == "speaker":
        return f"{turn.speaker}: {body}"
    if text_format == "dated":
        return f"[{turn.date.day} {turn.date:%B %Y}] {turn.speaker}: {body}"
    raise ValueError(f"text format must be one of {', '.join(TEXT_FORMATS)}")


def apply_audit(questions: list[LocomoQuestion], audit: Sequence[Mapping[str, Any]]) -> int:
    """Replace the evidence of questions the audit marks ``WRONG_CITATION`` (in place); returns how many."""
    by_id = {q.question_id: i for i, q in enumerate(questions)}
    corrected = 0
    for entry in audit:
        if entry.get("error_type") != "WRONG_CITATION":
            continue
        at = by_id.get(str(entry.get("question_id")))
        evidence = normalize_evidence(entry.get("correct_evidence") or [])
        if at is None or not evidence:
            continue
        old = questions[at]
        questions[at] = LocomoQuestion(
            question_id=old.question_id,
            conversation=old.conversation,
            question=old.question,
            category=old.category,
            evidence=tuple(evidence),
            corrected=True,
        )
        corrected += 1
    return corrected


def _sessions(conversation: Mapping[str, Any]) -> list[int]:
    """The numbers of a conversation's sessions, in order."""
    return sorted(
        int(k.split("_")[1])
        for k in conversation
        if re.fullmatch(r"session_\d+", k) and isinstance(conversation[k], list)
    )


def _turns(c: int, conversation: Mapping[str, Any], stats: Counter[str]) -> list[LocomoTurn]:
    """Conversation ``c``'s turns, session by session (a turn without an id is counted and dropped)."""
    turns: list[LocomoTurn] = []
    for s in _sessions(conversation):
        date = parse_session_date(conversation[f"session_{s}_date_time"])
        for t in conversation[f"session_{s}"]:
            dia = normalize_evidence([t["dia_id"]])
            if not dia:
                stats["turns_without_id"] += 1
                continue
            turns.append(
                LocomoTurn(
                    conversation=c,
                    dia_id=dia[0],
                    speaker=str(t.get("speaker", "")),
                    text=str(t.get("text", "")),
                    caption=t.get("blip_caption"),
                    session=s,
                    date=date,
                )
            )
    return turns


def _questions(c: int, sample: Mapping[str, Any], stats: Counter[str]) -> list[LocomoQuestion]:
    """Conversation ``c``'s questions with their evidence normalised (malformed evidence is counted)."""
    questions: list[LocomoQuestion] = []
    for qi, qa in enumerate(sample.get("qa", [])):
        raw_evidence = [str(e) for e in qa.get("evidence", [])]
        if any(normalize_evidence([e]) != [e] for e in raw_evidence):
            stats["malformed_evidence_questions"] += 1
        questions.append(
            LocomoQuestion(
                question_id=f"locomo_{c}_qa{qi}",
                conversation=c,
                question=str(qa.get("question", "")),
                category=int(qa.get("category", 0)),
                evidence=tuple(normalize_evidence(raw_evidence)),
            )
        )
    return questions


def _known_evidence(
    questions: list[LocomoQuestion], turns: list[LocomoTurn], stats: Counter[str]
) -> list[LocomoQuestion]:
    """The questions with the evidence ids that name no turn of their conversation dropped (and counted)."""
    known_ids = {(t.conversation, t.dia_id) for t in turns}
    cleaned: list[LocomoQuestion] = []
    for q in questions:
        kept = tuple(e for e in q.evidence if (q.conversation, e) in known_ids)
        stats["unknown_evidence_ids"] += len(q.evidence) - len(kept)
        cleaned.append(replace(q, evidence=kept))
    return cleaned


def load_locomo(path: str | Path, audit_path: str | Path | None = None) -> LocomoData:
    """Read ``locomo10.json`` (and, if given, the audit file) into turns and questions.

    Args:
        path: The LoCoMo JSON file (a list of conversations).
        audit_path: The audit errors JSON (a list of entries), or None for the gold data as published.
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    turns: list[LocomoTurn] = []
    questions: list[LocomoQuestion] = []
    stats: Counter[str] = Counter()
    for c, sample in enumerate(raw):
        turns.extend(_turns(c, sample["conversation"], stats))
        questions.extend(_questions(c, sample, stats))
    if audit_path is not None:
        audit = json.loads(Path(audit_path).read_text(encoding="utf-8"))
        stats["audit_corrections"] = apply_audit(questions, audit)
    cleaned = _known_evidence(questions, turns, stats)
    return LocomoData(turns=turns, questions=cleaned, sha256=file_sha256(path), stats=dict(stats))
