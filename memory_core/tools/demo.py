"""``memory-core demo``: a short travel conversation through the whole local pipeline.

Rule extraction, rule consolidation, the local e5 embedder and the SQLite store (in a temporary folder
unless a path is given). Each turn's decisions are printed with their reasons; then the memories are
searched with the IMPORTANT and RECENT ranking profiles; then a forgetting dry run is made with the
clock moved three months ahead. The clock is fixed, so the output is the same on every run.

The conversation is in Japanese (``--lang ja``, the default) or English (``--lang en``): the same
story in both, with the same decisions (a plan and preferences added, the assistant's claim ignored, a
restatement known, a detail added, tea replaced by coffee, recalled memories not extracted again, a
routine added, a forget request deleting what it names).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.domain.messages import MessageRole, Turn, TurnMessage
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.ports import FixedClock
from memory_core.service.results import format_decision

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.ports import ChatModel

__all__ = ["DEMO_CONVERSATION", "DEMO_CONVERSATION_EN", "DEMO_LANGUAGES", "DEMO_SCOPE", "DemoScript", "run_demo"]

DEMO_SCOPE = Scope.of("demo-user", "travel-agent")
DEMO_START = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
_RECALL = "## Relevant memories\n- 京都の旅館が好きです\n- 最近は紅茶よりコーヒーが好きです\n\n"

#: (minutes after the start, [(role, text), ...]) for each turn.
DEMO_CONVERSATION: list[tuple[int, list[tuple[str, str]]]] = [
    (0, [
        ("user", "来週京都に旅行する予定です。旅館が好きです。"),
        ("assistant", "いいですね！京都の旅館をいくつか探してみます。"),
    ]),
    (5, [
        ("user", "辛い料理が苦手です。紅茶が好きです。"),
        ("assistant", "承知しました。辛くないお店を選びますね。お客様は激辛ラーメンもお好きでしたよね？"),
    ]),
    (60 * 24, [("user", "旅館が好きです。できれば温泉付きで。"), ("assistant", "温泉付きの旅館ですね。")]),
    (60 * 24 * 2, [("user", "京都の旅館が好きです。"), ("assistant", "京都の旅館を中心に探します。")]),
    (60 * 24 * 3, [("user", "最近は紅茶よりコーヒーが好きです。"), ("assistant", "カフェも探しておきます。")]),
    (60 * 24 * 3 + 10, [
        ("user", _RECALL + "ありがとう。朝はいつも7時に起きます。"),
        ("assistant", "では朝食は7時半からの宿にしましょう。"),
    ]),
    (60 * 24 * 4, [("user", "辛い料理が苦手って言ったのは忘れて。"), ("assistant", "わかりました。")]),
]

_RECALL_EN = "## Relevant memories\n- I like ryokans in Kyoto\n- These days I like coffee more than tea\n\n"

#: The same story in English: the same turns at the same times, and the same decisions.
DEMO_CONVERSATION_EN: list[tuple[int, list[tuple[str, str]]]] = [
    (0, [
        ("user", "I'm planning a trip to Kyoto next week. I like ryokans."),
        ("assistant", "Lovely! I'll look for some ryokans in Kyoto."),
    ]),
    (5, [
        ("user", "I don't like spicy food. I like tea."),
        ("assistant", "Noted, I'll pick places that aren't spicy. You also love extra-spicy ramen, right?"),
    ]),
    (60 * 24, [
        ("user", "I like ryokans. I'd like one with a hot spring if possible."),
        ("assistant", "A ryokan with a hot spring, then."),
    ]),
    (60 * 24 * 2, [("user", "I like ryokans in Kyoto."), ("assistant", "I'll focus on ryokans in Kyoto.")]),
    (60 * 24 * 3, [("user", "These days I like coffee more than tea."), ("assistant", "I'll find some cafés too.")]),
    (60 * 24 * 3 + 10, [
        ("user", _RECALL_EN + "Thanks. I always get up at 7 in the morning."),
        ("assistant", "Then let's pick a ryokan that serves breakfast from 7:30."),
    ]),
    (60 * 24 * 4, [("user", "Forget that I said I don't like spicy food."), ("assistant", "Understood.")]),
]


@dataclass(frozen=True, slots=True)
class DemoScript:
    """One language's demo: the conversation and the question asked of the memories afterwards."""

    conversation: list[tuple[int, list[tuple[str, str]]]]
    query: str


#: The demo in each language ``memory-core demo --lang`` accepts.
DEMO_LANGUAGES: dict[str, DemoScript] = {
    "ja": DemoScript(DEMO_CONVERSATION, "京都旅行の宿と飲み物の好み"),
    "en": DemoScript(DEMO_CONVERSATION_EN, "where to stay in Kyoto and what I like to drink"),
}


def _turns(conversation: list[tuple[int, list[tuple[str, str]]]]) -> list[Turn]:
    return [
        Turn(
            turn_id=f"demo-{index + 1}",
            user_id=DEMO_SCOPE.user_id,
            agent_id=DEMO_SCOPE.agent_id,
            session_id="demo-session",
            occurred_at=DEMO_START + timedelta(minutes=minutes),
            messages=[TurnMessage(role=MessageRole(role), text=text) for role, text in messages],
        )
        for index, (minutes, messages) in enumerate(conversation)
    ]


class _Printer:
    """Where the demo's output goes: lines of text, or with ``json_output`` one JSON object per event."""

    def __init__(self, out: Callable[..., Any], json_output: bool) -> None:
        self._out = out
        self.json_output = json_output

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        """One event, as a JSON object (nothing in text mode)."""
        if self.json_output:
            self._out(json.dumps({"type": kind, **data}, ensure_ascii=False, default=str))

    def lines(self, *lines: str) -> None:
        """Lines of text (nothing in JSON mode)."""
        if not self.json_output:
            for line in lines:
                self._out(line)


def _header(printer: _Printer, service: Any, chat_model: ChatModel | None, path: str) -> None:
    if chat_model is None:
        how = f"embedder {service.embedder_name}, rule extraction and consolidation (no LLM)"
    else:
        how = (
            f"embedder {service.embedder_name}, extraction and consolidation by {chat_model.name} "
            "(the rules where it fails)"
        )
    printer.lines(f"memory-core demo: {DEMO_SCOPE.user_id}/{DEMO_SCOPE.agent_id}, store {path}", how, "")


def _turn_lines(turn: Turn, result: Any) -> list[str]:
    """What the user said, then each decision with its reasons."""
    said = [m.text.replace("\n", " ⏎ ") for m in turn.messages if m.role.value == "user"]
    lines = [f"[{turn.turn_id} {turn.occurred_at:%m-%d %H:%M}] user: {' / '.join(said)}"]
    if result.status == "duplicate":
        lines.append("  already ingested (same turn_id): nothing changes")
    elif not result.steps:
        lines.append("  (nothing to remember)")
    lines.extend("  " + format_decision(step).replace("\n", "\n  ") for step in result.steps)
    return lines


async def _converse(service: Any, clock: FixedClock, script: DemoScript, printer: _Printer) -> None:
    """Ingest the conversation turn by turn, the clock at each turn's time."""
    for turn in _turns(script.conversation):
        clock.set(turn.occurred_at)
        result = await service.ingest(turn)
        printer.event("turn", result.as_dict())
        printer.lines(*_turn_lines(turn, result))


def _hit(rank: int, hit: Any) -> dict[str, Any]:
    return {
        "rank": rank,
        "score": round(hit.score, 6),
        "boost": round(hit.breakdown.boost, 3),
        "id": hit.record.id,
        "memory": hit.record.memory,
        "category": hit.record.category,
        "importance": hit.record.importance,
        "retention_score": round(hit.record.retention_score, 3),
        "updated_at": hit.record.updated_at.isoformat(),
    }


def _hit_line(h: Mapping[str, Any]) -> str:
    return (
        f"  {h['rank']}. {h['score']:.5f} (×{h['boost']:.2f})  {h['memory']}  "
        f"[{h['category']}, importance {h['importance']:.2f}, retention "
        f"{h['retention_score']:.2f}, updated {h['updated_at'][:16]}]"
    )


async def _searches(service: Any, script: DemoScript, printer: _Printer) -> None:
    """Search with the IMPORTANT profile (its top 2 recalled) and then the RECENT one."""
    for profile in (RankingProfile.IMPORTANT, RankingProfile.RECENT):
        options = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=profile, top=5)
        found = await service.search(DEMO_SCOPE, script.query, options, recall=False)
        hits = [_hit(rank, hit) for rank, hit in enumerate(found.hits, start=1)]
        printer.event("search", {"query": script.query, "profile": profile.value, "hits": hits})
        lines = ["", f"search {script.query!r} (hybrid, profile {profile.value.upper()}):"]
        if profile is RankingProfile.IMPORTANT:
            await service.record_recall(DEMO_SCOPE, [hit.record.id for hit in found.hits[:2]])
            lines.append("  (the top 2 are returned to the agent: a recall, which rehearses them)")
        printer.lines(*lines, *(_hit_line(h) for h in hits))


async def _forgetting(service: Any, clock: FixedClock, printer: _Printer) -> None:
    """A forgetting dry run with the clock 90 days after the start."""
    later = DEMO_START + timedelta(days=90)
    clock.set(later)
    report = await service.apply_forgetting(dry_run=True)
    printer.event("forgetting", {"at": later.isoformat(), **report.as_dict()})
    if printer.json_output:
        return
    printer.lines(
        "",
        f"forgetting dry run with the clock at {later:%Y-%m-%d} (90 days later; nothing written):",
        f"  scanned {report.scanned}, would archive {report.archived}, expired {report.expired}, "
        f"rescore {report.rescored}, unchanged {report.unchanged}",
    )
    for change in report.changes:
        text = (await service.get(DEMO_SCOPE, change.id)).memory
        why = "expired" if change.expired else "retention fell"
        printer.lines(
            f"  {change.old_status.value} → {change.new_status.value}: {text} "
            f"(retention {change.old_retention:.2f} → {change.new_retention:.2f}, {why})"
        )


def _usage(chat_model: ChatModel | None, printer: _Printer) -> None:
    """What the chat model was asked, if it counts that."""
    usage = getattr(chat_model, "usage", None)
    if usage is None:
        return
    name = chat_model.name if chat_model else None
    printer.event("llm_usage", {"model": name, **usage.as_dict()})
    printer.lines(
        "",
        f"LLM {name or ''}: {usage.calls} calls, {usage.requests} "
        f"requests, {usage.prompt_tokens} prompt + {usage.completion_tokens} completion "
        f"tokens, {usage.seconds:.1f} s",
    )


async def run_demo(
    *,
    db_path: str | None,
    out: Callable[..., Any] = print,
    json_output: bool = False,
    llm: bool = False,
    lang: str = "ja",
) -> int:
    """Run the scripted conversation, the searches and a forgetting dry run; returns 0.

    Args:
        db_path: The SQLite file to use; ``None`` uses a temporary one that is removed afterwards.
        out: Where lines go (called with one string per line).
        json_output: Print one JSON object per line (decisions, search results, forgetting report).
        llm: Extract and consolidate with the chat model the environment configures
            (``MEMORY_LLM_PROVIDER`` and its settings) instead of the rules.
        lang: The conversation's language, a key of :data:`DEMO_LANGUAGES` (``ja`` or ``en``).

    Raises:
        ConfigurationError: ``llm`` without a configured chat model.
        ValueError: ``lang`` is not a demo language.
    """
    from memory_core.bootstrap import build_service, load_settings, require_chat_model

    if lang not in DEMO_LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(DEMO_LANGUAGES)}, not {lang!r}")
    script = DEMO_LANGUAGES[lang]
    printer = _Printer(out, json_output)
    chat_model = require_chat_model(load_settings(), "demo --llm") if llm else None
    with tempfile.TemporaryDirectory(prefix="memory-core-demo-") as tmp:
        path = db_path or str(Path(tmp) / "demo.db")
        clock = FixedClock(DEMO_START)
        # Embedded defaults whatever the environment says: the local e5 embedder, and rules unless --llm.
        try:
            service = build_service(
                load_settings(environ={}, sqlite_path=path), clock=clock, chat_model=chat_model
            )
        except BaseException:
            if chat_model is not None:
                await chat_model.close()
            raise
        try:
            _header(printer, service, chat_model, path)
            await _converse(service, clock, script, printer)
            clock.set(DEMO_START + timedelta(days=4, hours=1))
            await _searches(service, script, printer)
            await _forgetting(service, clock, printer)
            _usage(chat_model, printer)
        finally:
            await service.close()
            if chat_model is not None:
                await chat_model.close()
    return 0
