"""``memory-core eval locomo``: turn-level retrieval on LoCoMo, without an LLM.

Each conversation's turns become the memories of one scope: the turn's text (an image turn adds its
caption), by default prefixed with the session's date and the speaker, e.g.
``[8 May 2023] Caroline: ...``, with ``updated_at`` set to the session's date (so the RECENT profile
has something to work with; the store's clock stands on the day after the conversation's last
session). Passages and questions are embedded once and cached on disk. Each question of categories
1-4 is searched in its conversation's scope, for every search mode and ranking profile asked for, and
scored against its evidence turns: any@k, all@k (k = 1, 5, 10) and MRR of the first evidence hit,
overall and per category, with the store's search latency (query embedding excluded).

Gold data fixes: the audit file's ``WRONG_CITATION`` entries replace a question's evidence with the
audited ``correct_evidence``; evidence strings are normalised to ``D<session>:<turn>`` ids (lists in
one string are split, ``D:11:26`` reads as ``D11:26`` and ``D30:05`` as ``D30:5``); ids that name no
turn of the conversation are dropped and counted; questions left without evidence are skipped and
counted.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import RankingProfile, SearchMode
from memory_core.ports import FixedClock
from memory_core.tools.evaluation.metrics import DEFAULT_KS, METRICS, metric_label
from memory_core.tools.evaluation.retrieval import Question, group_table, results_table, search_configurations
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import (
    DEFAULT_CACHE_DIR,
    cached_embeddings,
    default_embedder,
    file_sha256,
    grouped_bars,
    publish_report,
    pyplot,
    save_chart,
)

__all__ = [
    "CATEGORY_NAMES",
    "EVALUATED_CATEGORIES",
    "TEXT_FORMATS",
    "LocomoData",
    "LocomoQuestion",
    "LocomoTurn",
    "add_audit_arguments",
    "apply_audit",
    "audit_path",
    "evaluate",
    "load_locomo",
    "main",
    "normalize_evidence",
    "parse_session_date",
    "turn_text",
]

logger = logging.getLogger(__name__)

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
EVALUATED_CATEGORIES = (1, 2, 3, 4)
#: How a turn becomes memory text: ``dated`` "[8 May 2023] Caroline: text", ``speaker`` "Caroline:
#: text", ``plain`` the text alone (an image turn adds "[image: caption]" in every format).
TEXT_FORMATS = ("dated", "speaker", "plain")
AGENT_ID = "locomo"
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_DEFAULT_MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
_DEFAULT_PROFILES = (RankingProfile.NONE, RankingProfile.IMPORTANT, RankingProfile.RECENT)


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


def _memory_id(conversation: int, dia_id: str) -> str:
    return f"c{conversation}-{dia_id.replace(':', '-')}"


def _scope(conversation: int) -> Scope:
    return Scope.of(f"conv{conversation}", AGENT_ID)


def _records(data: LocomoData, vectors: np.ndarray, text_format: str) -> list[MemoryRecord]:
    """Every turn as a memory of its conversation's scope, dated by its session."""
    records = []
    for turn, vector in zip(data.turns, vectors, strict=True):
        scope = _scope(turn.conversation)
        records.append(
            MemoryRecord(
                id=_memory_id(turn.conversation, turn.dia_id),
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                memory=turn_text(turn, text_format),
                category="dialogue",
                importance=0.5,
                confidence=1.0,
                source="locomo",
                retention_score=1.0,
                created_at=turn.date,
                updated_at=turn.date,
                metadata={"speaker": turn.speaker, "session": turn.session},
                embedding=vector.tolist(),
            )
        )
    return records


def _asked(data: LocomoData, questions: list[LocomoQuestion], vectors: np.ndarray) -> list[Question]:
    """The questions as the store is asked them: conversation by conversation, on the day after its last session."""
    last_date: dict[int, datetime] = {}
    for t in data.turns:
        last_date[t.conversation] = max(last_date.get(t.conversation, t.date), t.date)
    asked = []
    for i in sorted(range(len(questions)), key=lambda i: questions[i].conversation):
        q = questions[i]
        asked.append(
            Question(
                scope=_scope(q.conversation),
                text=q.question,
                vector=vectors[i],
                relevant=frozenset(_memory_id(q.conversation, e) for e in q.evidence),
                groups=(f"{q.category}-{CATEGORY_NAMES.get(q.category, '?')}",),
                asked_at=last_date[q.conversation] + timedelta(days=1),
            )
        )
    return asked


async def evaluate(
    data: LocomoData,
    *,
    embedder: Any,
    modes: Sequence[SearchMode] = _DEFAULT_MODES,
    profiles: Sequence[RankingProfile] = _DEFAULT_PROFILES,
    text_format: str = "dated",
    embed_format: str | None = None,
    vector_k: int = 50,
    vector_weight: float | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
    categories: Sequence[int] = EVALUATED_CATEGORIES,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Search every evaluated question in every mode x profile; metrics and latency per configuration.

    Args:
        data: From :func:`load_locomo`.
        embedder: Passage and query embedder (see :func:`~memory_core.tools.reporting.cached_embeddings`).
        modes: Search modes to run.
        profiles: Ranking profiles to run.
        text_format: One of :data:`TEXT_FORMATS`: the memory text (what BM25 indexes).
        embed_format: The text that is embedded (default: ``text_format``), e.g. ``speaker`` to keep
            the date out of the vector while BM25 still sees it.
        vector_k: The vector leg's k.
        vector_weight: The vector leg's weight in hybrid fusion (the text leg has 1); ``None``: the
            product's default for the query's language (:mod:`memory_core.domain.fusion`).
        cache_dir: Embedding cache folder (None: no cache).
        categories: Question categories to evaluate.
        progress: Where progress is reported.
    """
    questions = [q for q in data.questions if q.category in categories and q.evidence]
    skipped = sum(1 for q in data.questions if q.category in categories and not q.evidence)
    key = f"locomo-{data.sha256[:16]}"
    passages = cached_embeddings(
        embedder,
        [turn_text(t, embed_format or text_format) for t in data.turns],
        kind="passage",
        cache_dir=cache_dir,
        key=key,
        progress=progress,
    )
    query_vectors = cached_embeddings(
        embedder, [q.question for q in questions], kind="query", cache_dir=cache_dir, key=key, progress=progress
    )
    results = await search_configurations(
        _records(data, passages, text_format),
        _asked(data, questions, query_vectors),
        [(m, p) for m in modes for p in profiles],
        clock=FixedClock(datetime(2000, 1, 1, tzinfo=UTC)),
        progress=progress,
        vector_k=vector_k,
        vector_weight=vector_weight,
    )
    return {
        "benchmark": "locomo",
        "data": {
            "sha256": data.sha256,
            "conversations": len(data.conversations()),
            "turns": len(data.turns),
            "questions_evaluated": len(questions),
            "questions_skipped_without_evidence": skipped,
            "categories": list(categories),
            **data.stats,
        },
        "configuration": {
            "text_format": text_format,
            "embed_format": embed_format or text_format,
            "vector_k": vector_k,
            "vector_weight": vector_weight,
            "top": max(DEFAULT_KS),
            "embedder": getattr(embedder, "name", type(embedder).__name__),
            "query_embedding": "excluded from latency",
        },
        "results": results,
    }


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report's tables: every configuration overall, then per category for the best one."""
    config = report["configuration"]
    text = (
        f"memory text: {config['text_format']}; embedded text: {config.get('embed_format', config['text_format'])}; "
        f"vector k: {config['vector_k']}; vector weight: {config.get('vector_weight') or 'by language'}; embedder: {config['embedder']}; "
        f"{report['data']['questions_evaluated']} questions\n\n"
    )
    text += results_table(report["results"])
    best = max(report["results"], key=lambda r: r["metrics"]["overall"]["any@5"])
    text += f"\nper category, {best['mode']} + {best['profile']}:\n\n"
    return text + group_table(best["metrics"], "questions")


def draw_chart(report: Mapping[str, Any], directory: str | Path) -> list[str]:
    """``locomo_recall.png``: any@k and all@k by mode, one panel per profile. Returns the files written."""
    plt = pyplot()
    if plt is None:
        return []
    results = report["results"]
    profiles = list(dict.fromkeys(r["profile"] for r in results))
    modes = list(dict.fromkeys(r["mode"] for r in results))
    overall: dict[tuple[str, str], Mapping[str, float]] = {}
    for r in results:
        overall.setdefault((r["mode"], r["profile"]), r["metrics"]["overall"])
    fig, axes = plt.subplots(1, len(profiles), figsize=(4.2 * len(profiles), 3.6), sharey=True, squeeze=False)
    for ax, profile in zip(axes[0], profiles, strict=True):
        series = [
            (mode, None if (mode, profile) not in overall else [overall[mode, profile][k] for k in METRICS])
            for mode in modes
        ]
        grouped_bars(ax, series, len(METRICS))
        ax.set_xticks(range(len(METRICS)), [metric_label(k) for k in METRICS], rotation=45, fontsize=8)
        ax.set_title(f"profile: {profile}", fontsize=9)
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("fraction of questions")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(
        f"LoCoMo retrieval (categories 1-4, {report['data']['questions_evaluated']} questions)", fontsize=10
    )
    return [save_chart(plt, fig, directory, "locomo_recall.png")]


def audit_path(args: argparse.Namespace) -> str | None:
    """The audit file to apply: ``--audit``, else ``locomo10_audit_errors.json`` beside ``--data``
    when it exists; none with ``--no-audit``."""
    if args.no_audit:
        return None
    if args.audit is not None:
        return str(args.audit)
    candidate = Path(args.data).with_name("locomo10_audit_errors.json")
    return str(candidate) if candidate.exists() else None


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--audit`` and ``--no-audit`` (what :func:`audit_path` reads)."""
    parser.add_argument(
        "--audit", metavar="PATH", help="LoCoMo audit errors JSON (default: next to --data if present)"
    )
    parser.add_argument("--no-audit", action="store_true", help="use LoCoMo's gold evidence as published")


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core eval locomo``: the report on ``out``, progress to ``progress``."""
    audit = audit_path(args)
    data = load_locomo(args.data, audit).first(args.limit_conversations)
    embedder = getattr(args, "embedder_instance", None) or default_embedder()
    report = await evaluate(
        data,
        embedder=embedder,
        modes=[SearchMode(m) for m in args.modes],
        profiles=[RankingProfile(p) for p in args.profiles],
        text_format=args.text_format,
        embed_format=args.embed_format,
        vector_k=args.vector_k,
        vector_weight=args.vector_weight,
        cache_dir=None if args.no_cache else args.cache,
        progress=progress,
    )
    report["data"]["audit_applied"] = audit is not None
    publish_report(report, args, out, render_markdown, draw_chart)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``eval locomo`` options."""
    parser.add_argument("--data", required=True, metavar="PATH", help="locomo10.json")
    add_audit_arguments(parser)
    parser.add_argument(
        "--modes",
        nargs="+",
        default=[m.value for m in _DEFAULT_MODES],
        choices=[m.value for m in SearchMode],
        help="search modes to run (default: keyword vector hybrid)",
    )
    parser.add_argument(
        "--profiles",
        nargs="+",
        default=[p.value for p in _DEFAULT_PROFILES],
        choices=[p.value for p in RankingProfile],
        help="ranking profiles to run (default: none important recent)",
    )
    parser.add_argument(
        "--text-format",
        choices=TEXT_FORMATS,
        default="dated",
        help="memory text: [date] speaker: text (dated), speaker: text, or text",
    )
    parser.add_argument(
        "--embed-format", choices=TEXT_FORMATS, help="text that is embedded (default: --text-format)"
    )
    parser.add_argument("--vector-k", type=int, default=50, help="the vector leg's k")
    parser.add_argument(
        "--vector-weight",
        type=float,
        default=None,
        help="the vector leg's weight in hybrid fusion (text: 1; default: by the query's language)",
    )
    parser.add_argument("--limit-conversations", type=int, metavar="N", help="only the first N conversations")
    parser.add_argument("--cache", default=DEFAULT_CACHE_DIR, metavar="DIR", help="embedding cache folder")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--output", metavar="JSON", help="also write the report to this file")
    parser.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")
