"""Episodic and semantic memory through the real ingest path (DESIGN section 7).

Each user message is kept as an episode (the user's words, dated, with the speaker) beside the facts
extracted from it; facts point to the turns (and spans) they came from; a forget request forgets the
fact and removes what it said from the episodes; facts rank above the episodes they came from.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.messages import FORGOTTEN_REASON, HistoryEntry
from memory_core.domain.records import FORGOTTEN_TEXT, MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile
from memory_core.errors import TransientError, ValidationError
from memory_core.ports import FixedClock
from memory_core.service import MemoryService
from memory_core.service.journal import episode_id_for
from memory_core.service.search import ARCHIVED_CUE

SCOPE = Scope.of("u1", "travel")
START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
RECALL_BLOCK = "## Relevant memories\nUse these memories only when they help answer the user.\n1. [preference; importance=0.80; retention=0.90] I like tea\n\n"


def turn(index: int, *messages: tuple[str, str] | tuple[str, str, str]) -> dict[str, Any]:
    return {
        "turn_id": f"t{index}",
        "user_id": SCOPE.user_id,
        "agent_id": SCOPE.agent_id,
        "occurred_at": (START + timedelta(days=index)).isoformat(),
        "messages": [
            {"role": m[0], "text": m[1], **({"name": m[2]} if len(m) > 2 else {})}  # type: ignore[misc]
            for m in messages
        ],
    }


def service_on(db: Path, **environ: str) -> MemoryService:
    settings = load_settings({"MEMORY_EMBEDDER": "hash", **environ}, sqlite_path=str(db))
    return build_service(settings, embedder=HashingEmbedder(), clock=FixedClock(START + timedelta(days=30)))


async def everything(service: MemoryService) -> list[MemoryRecord]:
    return list((await service.list(SCOPE, limit=1000)).records)


def by_kind(records: list[MemoryRecord], kind: MemoryKind) -> list[MemoryRecord]:
    return [r for r in records if r.kind is kind]


def test_a_turn_leaves_facts_and_the_users_words(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            said = "I'm vegetarian. I live in Berlin."
            await service.ingest(turn(0, ("user", RECALL_BLOCK + said), ("assistant", "Noted, I will remember.")))
            records = await everything(service)
            (episode,) = by_kind(records, MemoryKind.EPISODE)
            assert episode.memory == said  # no recalled memories, no assistant words
            assert episode.id == episode_id_for(SCOPE, "t0", 0)
            assert episode.category == "episode" and episode.importance == 0.3
            assert episode.created_at == START and "2026-05-01" in episode.summary and "1 May 2026" in episode.summary
            assert [(p.turn_id, p.message, p.speaker) for p in episode.provenance] == [("t0", 0, "user")]
            facts = {r.memory: r for r in by_kind(records, MemoryKind.FACT)}
            assert set(facts) == {"I'm vegetarian", "I live in Berlin"}
            text = RECALL_BLOCK + said
            for fact in facts.values():
                (source,) = fact.provenance
                assert (source.turn_id, source.message) == ("t0", 0)
                assert text[source.start : source.end].startswith(fact.memory)
                assert fact.importance > episode.importance
            # Redelivery stores nothing twice.
            again = await service.ingest(turn(0, ("user", RECALL_BLOCK + said), ("assistant", "Noted.")))
            assert again.status == "duplicate" and len(await everything(service)) == 3

    asyncio.run(scenario())


def test_two_named_speakers_keep_their_names(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            await service.ingest(turn(0, ("user", "I just got a new puppy!", "Caroline"), ("user", "I have a kitten.", "Melanie")))
            episodes = sorted(by_kind(await everything(service), MemoryKind.EPISODE), key=lambda r: r.memory)
            assert [e.memory for e in episodes] == ["Caroline: I just got a new puppy!", "Melanie: I have a kitten."]
            assert [e.provenance[0].speaker for e in episodes] == ["Caroline", "Melanie"]
            assert "Caroline" in episodes[0].summary

    asyncio.run(scenario())


def test_a_forget_request_forgets_the_fact_and_what_the_episodes_said_of_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            await service.ingest(turn(0, ("user", "I'm vegetarian. I live in Berlin.")))
            await service.ingest(turn(1, ("user", "Please forget that I'm vegetarian.")))
            records = await everything(service)
            facts = {r.memory: r.status for r in by_kind(records, MemoryKind.FACT)}
            # The forgotten fact keeps only its tombstone: its id, status and time, not its words.
            assert facts == {FORGOTTEN_TEXT: MemoryStatus.DELETED, "I live in Berlin": MemoryStatus.ACTIVE}
            episodes = by_kind(records, MemoryKind.EPISODE)
            assert [(e.memory, e.status) for e in episodes] == [("I live in Berlin.", MemoryStatus.ACTIVE)]
            history = await service.history_of(SCOPE, episodes[0].id)
            assert [h.event.value for h in history] == ["ADD", "UPDATE"]  # that it changed stays known...
            assert "vegetarian" not in json.dumps([h.model_dump(mode="json") for h in history])  # ...not what it said
            for record in by_kind(records, MemoryKind.FACT):
                entries = await service.history_of(SCOPE, record.id)
                assert entries and "vegetarian" not in json.dumps([h.model_dump(mode="json") for h in entries])
            hits = await service.search(SCOPE, "vegetarian", {"ranking_profile": "none"}, recall=False)
            assert all("vegetarian" not in h.record.memory for h in hits.hits)
            # Forgetting everything a message said deletes its episode.
            await service.ingest(turn(2, ("user", "I love jazz.")))
            await service.ingest(turn(3, ("user", "Forget that I love jazz.")))
            jazz = [e for e in by_kind(await everything(service), MemoryKind.EPISODE) if e.provenance[0].turn_id == "t2"]
            assert [e.status for e in jazz] == [MemoryStatus.DELETED]
            (gone,) = jazz
            assert gone.memory == FORGOTTEN_TEXT and "status_reason" not in gone.metadata
            assert gone.metadata["status_changed_at"] == (START + timedelta(days=3)).isoformat()
            entries = await service.history_of(SCOPE, gone.id)
            assert [(h.event.value, h.turn_id) for h in entries] == [("ADD", "t2"), ("DELETE", None)]
            assert "jazz" not in json.dumps([h.model_dump(mode="json") for h in entries])

    asyncio.run(scenario())


def test_forgetting_part_of_a_sentence_keeps_the_rest_of_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            # one sentence, two kinds of fact: two memories, and one episode with the user's words
            await service.ingest(turn(0, ("user", "I'm vegetarian and I live in Berlin.")))
            # a compound memory stored whole (an import, or a model that kept the sentence together)
            await service.import_records(
                [
                    {
                        "id": "compound",
                        "user_id": SCOPE.user_id,
                        "agent_id": SCOPE.agent_id,
                        "memory": "I'm vegan and I have two cats",
                        "category": "profile",
                        "importance": 0.8,
                        "created_at": START.isoformat(),
                        "updated_at": START.isoformat(),
                    }
                ]
            )
            await service.ingest(turn(1, ("user", "Please forget that I'm vegetarian.")))
            await service.ingest(turn(2, ("user", "Please forget that I'm vegan.")))
            records = await everything(service)
            facts = {r.memory: r.status for r in by_kind(records, MemoryKind.FACT)}
            assert facts == {
                FORGOTTEN_TEXT: MemoryStatus.DELETED,
                "I live in Berlin": MemoryStatus.ACTIVE,
                "I have two cats": MemoryStatus.ACTIVE,
            }
            compound = await service.get(SCOPE, "compound")
            assert compound.importance == 0.8 and compound.category == "profile"  # the rest is as it was
            history = await service.history_of(SCOPE, "compound")
            assert [h.event.value for h in history][-1] == "UPDATE"  # recorded, but what it said is withheld
            assert history[-1].reason == FORGOTTEN_REASON and "vegan" not in json.dumps(history[-1].model_dump(mode="json"))
            (episode,) = by_kind(records, MemoryKind.EPISODE)
            assert (episode.memory, episode.status) == ("I live in Berlin.", MemoryStatus.ACTIVE)
            for word in ("vegetarian", "vegan"):
                hits = await service.search(SCOPE, word, {"ranking_profile": "none"}, recall=False)
                assert all(word not in h.record.memory for h in hits.hits)

    asyncio.run(scenario())


def test_a_forget_of_part_of_a_memory_takes_the_same_part_out_of_the_episode(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            # two statements of one kind stay one memory ...
            await service.ingest(turn(0, ("user", "I live in Berlin and I work at Google.")))
            (fact,) = by_kind(await everything(service), MemoryKind.FACT)
            assert fact.memory == "I live in Berlin and I work at Google"
            # ... and a request in other words takes out only its statement, there and in the episode
            await service.ingest(turn(1, ("user", "Forget that I work for Google.")))
            records = await everything(service)
            assert [(r.memory, r.status) for r in by_kind(records, MemoryKind.FACT)] == [
                ("I live in Berlin", MemoryStatus.ACTIVE)
            ]
            (episode,) = by_kind(records, MemoryKind.EPISODE)
            assert episode.memory == "I live in Berlin."
            entries = await service.history_of(SCOPE, episode.id)
            assert "Google" not in (entries[-1].reason or "")  # the reason does not quote what was forgotten
            # a correction replaces only its own statement
            await service.ingest(turn(2, ("user", "I'm vegan and I have two cats.")))
            await service.ingest(turn(3, ("user", "I moved to Munich.")))
            facts = {r.memory for r in by_kind(await everything(service), MemoryKind.FACT) if r.status is MemoryStatus.ACTIVE}
            assert "I moved to Munich" in facts and "I live in Berlin" not in facts
            assert {"I'm vegan", "I have two cats"} <= facts

    asyncio.run(scenario())


def test_memories_name_their_speaker_and_stay_apart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            await service.ingest(turn(0, ("user", "I live in Boston.", "Caroline"), ("user", "I live in Denver.", "Melanie")))
            await service.ingest(turn(1, ("user", "Please forget that I live in Denver.", "Caroline")))
            facts = {r.memory: r.status for r in by_kind(await everything(service), MemoryKind.FACT)}
            # two people's homes are two memories; Caroline cannot make Melanie's memory go
            assert facts == {"Caroline: I live in Boston": MemoryStatus.ACTIVE, "Melanie: I live in Denver": MemoryStatus.ACTIVE}

    asyncio.run(scenario())


class _StoreThatStopsOnce(SQLiteMemoryStore):
    """Stops (as a crashed worker would) before its first write of a redacted episode."""

    stopped = False

    async def upsert(self, records: Any) -> Any:
        if not self.stopped and any("redacted_by_turn" in r.metadata for r in records):
            self.stopped = True
            raise TransientError("the worker stopped here")
        return await super().upsert(records)


class _HistoryThatStopsOnce(SQLiteHistoryStore):
    """Stops before its first entry outside a turn's steps (an episode's redaction)."""

    stopped = False

    async def append(self, entries: Any) -> None:
        if not self.stopped:
            self.stopped = True
            raise TransientError("the worker stopped here")
        await super().append(entries)


@pytest.mark.parametrize("stops", ["store", "history"])
def test_a_redaction_interrupted_by_a_crash_is_recorded_once_when_the_turn_comes_again(
    tmp_path: Path, stops: str
) -> None:
    async def scenario() -> None:
        db = tmp_path / "m.db"
        clock = FixedClock(START + timedelta(days=30))
        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))
        store = (_StoreThatStopsOnce if stops == "store" else SQLiteMemoryStore)(db, clock=clock)
        history = (_HistoryThatStopsOnce if stops == "history" else SQLiteHistoryStore)(db)
        async with build_service(settings, embedder=HashingEmbedder(), clock=clock, store=store, history=history) as service:
            await service.ingest(turn(0, ("user", "I'm vegetarian. I live in Berlin.")))
            forget = turn(1, ("user", "Please forget that I'm vegetarian."))
            with pytest.raises(TransientError):
                await service.ingest(forget)
            assert (await service.ingest(forget)).status == "resumed"
            (episode,) = [e for e in by_kind(await everything(service), MemoryKind.EPISODE) if e.provenance[0].turn_id == "t0"]
            assert episode.memory == "I live in Berlin."
            entries: list[HistoryEntry] = await service.history_of(SCOPE, episode.id)
            assert [h.event.value for h in entries] == ["ADD", "UPDATE"]
            assert entries[-1].after is not None and entries[-1].after["memory"] == "I live in Berlin."

    asyncio.run(scenario())


class _StoreThatStopsBeforeTheEarlierValue(SQLiteMemoryStore):
    """Stops (as a crashed worker would) before it first writes what a fact held before a change, or
    before it first forgets it."""

    stops: ClassVar[set[str]] = set()

    async def upsert(self, records: Any) -> Any:
        for record in records:
            mark = "forgotten" if record.status is MemoryStatus.DELETED else "kept"
            if "earlier_value_of" in record.metadata and mark not in self.stops:
                self.stops.add(mark)
                raise TransientError("the worker stopped here")
        return await super().upsert(records)


def test_a_crash_before_the_earlier_value_is_kept_or_forgotten_is_caught_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = FixedClock(START + timedelta(days=30))
        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(tmp_path / "m.db"))
        _StoreThatStopsBeforeTheEarlierValue.stops = set()
        store = _StoreThatStopsBeforeTheEarlierValue(tmp_path / "m.db", clock=clock)
        async with build_service(settings, embedder=HashingEmbedder(), clock=clock, store=store) as service:
            await service.ingest(turn(0, ("user", "I live in Berlin.")))
            change = turn(1, ("user", "I moved to Munich."))
            with pytest.raises(TransientError):
                await service.ingest(change)
            assert (await service.ingest(change)).status == "resumed"
            assert (await service.ingest(change)).status == "duplicate"
            listed = (await service.list(SCOPE, limit=1000, include_superseded=True)).records
            (fact,) = [r for r in by_kind(listed, MemoryKind.FACT) if not r.superseded]
            (earlier,) = [r for r in by_kind(listed, MemoryKind.FACT) if r.superseded]
            assert earlier.memory == "I live in Berlin" and fact.metadata["earlier_values"] == [earlier.id]
            assert [h.event.value for h in await service.history_of(SCOPE, earlier.id)] == ["ADD"]
            forget = turn(2, ("user", "Please forget that I live in Munich."))
            with pytest.raises(TransientError):
                await service.ingest(forget)
            assert (await service.ingest(forget)).status == "resumed"
            gone = await service.get(SCOPE, earlier.id)
            assert gone.status is MemoryStatus.DELETED and gone.memory == FORGOTTEN_TEXT
            entries = await service.history_of(SCOPE, earlier.id)
            assert [h.event.value for h in entries] == ["ADD", "DELETE"] and "Berlin" not in str(entries)

    asyncio.run(scenario())


def test_control_characters_are_refused_and_whitespace_is_kept_as_said(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            with pytest.raises(ValidationError, match="U\\+0007"):
                await service.ingest(turn(0, ("user", "I like\x07 green tea.")))
            said = "I like green tea.\r\nI live\tin Kyoto."
            result = await service.ingest(turn(1, ("user", said)))
            assert result.status == "ingested"
            records = await everything(service)
            (episode,) = by_kind(records, MemoryKind.EPISODE)
            assert episode.memory == "I like green tea.\nI live\tin Kyoto."
            facts = {r.memory: r.provenance[0] for r in by_kind(records, MemoryKind.FACT)}
            assert {memory: said[p.start : p.end] for memory, p in facts.items()} == {  # spans of what was said
                "I like green tea": "I like green tea.",
                "I live in Kyoto": "I live\tin Kyoto.",  # a fact's whitespace is one space
            }

    asyncio.run(scenario())


def test_facts_rank_above_the_episode_they_came_from_and_kind_filters(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            await service.ingest(turn(0, ("user", "I prefer window seats on long flights.")))
            await service.ingest(turn(1, ("user", "We watched fireworks by the river last night.")))
            for profile in RankingProfile:
                options = MemorySearchOptions(ranking_profile=profile)
                kinds = [h.record.kind for h in (await service.search(SCOPE, "window seats", options, recall=False)).hits]
                assert kinds.index(MemoryKind.FACT) < kinds.index(MemoryKind.EPISODE), profile
            only = await service.search(SCOPE, "fireworks river", {"kind": "episode"}, recall=False)
            assert only.hits and {h.record.kind for h in only.hits} == {MemoryKind.EPISODE}
            assert only.hits[0].record.memory == "We watched fireworks by the river last night."
            facts = await service.search(SCOPE, "fireworks river", {"kind": "fact"}, recall=False)
            assert {h.record.kind for h in facts.hits} <= {MemoryKind.FACT}

    asyncio.run(scenario())


def test_episodes_can_be_turned_off(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db", MEMORY_EPISODES="false") as service:
            await service.ingest(turn(0, ("user", "I'm vegetarian. We went hiking yesterday.")))
            assert {r.kind for r in await everything(service)} == {MemoryKind.FACT}

    asyncio.run(scenario())


def test_get_and_export_show_kind_and_provenance(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db = tmp_path / "m.db"
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps(turn(0, ("user", "I'm allergic to peanuts.", "Alice"))) + "\n", encoding="utf-8")

    def cli(*args: str) -> str:
        out = io.StringIO()
        assert main(["--db", str(db), *args], out=out) == 0
        return out.getvalue()

    cli("ingest", str(turns))
    listed = json.loads(cli("--json", "list", "--user", "u1", "--agent", "travel"))["memories"]
    fact = next(m for m in listed if m["kind"] == "fact")
    detail = json.loads(cli("--json", "get", fact["id"], "--user", "u1", "--agent", "travel"))
    assert detail["provenance"][0]["turn_id"] == "t0" and detail["provenance"][0]["speaker"] == "Alice"
    assert "provenance" in cli("get", fact["id"], "--user", "u1", "--agent", "travel")
    exported = [json.loads(line) for line in cli("export", "--user", "u1").splitlines()]
    assert sorted(r["kind"] for r in exported) == ["episode", "fact"]
    assert all(r["provenance"][0]["turn_id"] == "t0" for r in exported)
    found = json.loads(cli("--json", "search", "peanuts", "--user", "u1", "--agent", "travel", "--kind", "episode"))
    assert [h["memory"]["kind"] for h in found["hits"]] == ["episode"]


def test_an_archived_memory_comes_back_on_a_strong_cue_and_only_then(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            await service.import_records(
                [
                    {"id": "old", "user_id": "u1", "agent_id": "travel", "memory": "My passport number ends in 4471",
                     "status": "archived", "retention_score": 0.1},
                    {"id": "new", "user_id": "u1", "agent_id": "travel", "memory": "I like window seats",
                     "retention_score": 0.9},
                ]
            )
            strong = await service.search(SCOPE, "passport number 4471", {"ranking_profile": "none"}, recall=False)
            assert strong.hits[0].record.id == "old"
            assert strong.hits[0].breakdown.boost == ARCHIVED_CUE  # it competed at a discount
            weak = await service.search(SCOPE, "window seats", {"ranking_profile": "none"}, recall=False)
            assert weak.hits[0].record.id == "new"
            listed = await service.search(SCOPE, "", {"ranking_profile": "none"}, recall=False)
            assert [h.record.id for h in listed.hits] == ["new"]  # an empty query lists active memories only
            # Recalling it makes it active again, as remembering does.
            await service.search(SCOPE, "passport number 4471", {"ranking_profile": "none"})
            assert (await service.get(SCOPE, "old")).status is MemoryStatus.ACTIVE

    asyncio.run(scenario())


def test_a_turn_from_the_future_is_refused_at_the_edge(tmp_path: Path) -> None:
    import pytest

    from memory_core.errors import ValidationError

    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            now = START + timedelta(days=30)  # the service's clock
            far = {**turn(0, ("user", "I'm vegetarian.")), "occurred_at": "9999-01-01T00:00:00+00:00"}
            for call in (service.publish_turn, service.ingest):
                with pytest.raises(ValidationError) as caught:
                    await call(far)
                assert caught.value.field == "occurred_at" and "future" in caught.value.message
            skewed = {**turn(0, ("user", "I'm vegetarian.")), "occurred_at": (now + timedelta(seconds=60)).isoformat()}
            assert await service.publish_turn(skewed) == "ingested"  # a little clock skew is fine

    asyncio.run(scenario())


def test_restating_reinforces_with_diminishing_returns_below_a_cap() -> None:
    from memory_core.service.consolidation.records import REHEARSAL_CAP, rehearsed_importance

    values = [0.65]
    for _ in range(30):
        values.append(rehearsed_importance(values[-1], 0.65))
    steps = [b - a for a, b in itertools.pairwise(values)]
    assert all(later < earlier for earlier, later in itertools.pairwise(steps))
    assert values[7] < 0.9 and max(values) <= REHEARSAL_CAP
    assert rehearsed_importance(0.95, 0.65) == 0.95  # an explicit importance above the cap stays
