"""What the memory believes now, through the Python API and over HTTP: a second liking adds, a change
supersedes (and the episodes that said the old value stop being current), secrets are never stored,
chatter is not memory, and more of what people say about themselves is kept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.bootstrap import build_service, load_settings
from memory_core.entrypoints.embedded.server import ApiServer
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.python_api.async_memory import AsyncMemory
from memory_core.entrypoints.python_api.memory import Memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "m.db", embedder="hash") as m:
        yield m


def facts(memory: Memory, user: str) -> list[str]:
    return sorted(r.memory for r in memory.get_all(user_id=user) if r.kind.value == "fact")


@pytest.mark.parametrize(
    ("first", "second", "both"),
    [
        ("I like cats.", "I like dogs.", ["I like cats", "I like dogs"]),
        ("I like tea.", "I like coffee.", ["I like coffee", "I like tea"]),
        ("猫が好き。", "犬が好き。", ["犬が好き", "猫が好き"]),
        ("I love spicy ramen.", "My favorite food is sushi.", ["I love spicy ramen", "My favorite food is sushi"]),
    ],
)
def test_a_second_liking_adds(memory: Memory, first: str, second: str, both: list[str]) -> None:
    memory.add(first, user_id="u")
    decisions = memory.add(second, user_id="u").decisions
    assert [d.event.value for d in decisions if d.kind.value == "fact"] == ["ADD"]
    assert facts(memory, "u") == sorted(both)


@pytest.mark.parametrize(
    ("first", "second", "now"),
    [
        ("I'm vegetarian.", "I eat fish now.", "I eat fish now"),
        ("I prefer window seats.", "I prefer aisle seats now.", "I prefer aisle seats now"),
        ("紅茶派です。", "やっぱりコーヒー派です。", "コーヒー派です"),
    ],
)
def test_a_change_of_a_one_value_attribute_supersedes(memory: Memory, first: str, second: str, now: str) -> None:
    memory.add(first, user_id="u")
    memory.add(second, user_id="u")
    assert facts(memory, "u") == [now]


def test_the_episode_that_said_the_old_value_is_no_longer_current(memory: Memory) -> None:
    memory.add("I live in Berlin.", user_id="u")
    memory.add("I moved to Munich last month.", user_id="u")
    found = [h.record.memory for h in memory.search("Where does the user live?", user_id="u", top=10).hits]
    assert found and not any("Berlin" in text for text in found)
    assert any("Munich" in text for text in found)
    old = [
        h.record
        for kind in ("episode", "fact")  # what was said, and the value it gave (each kind on its own)
        for h in memory.search("Where does the user live?", user_id="u", top=10, include_superseded=True, kind=kind).hits
        if "Berlin" in h.record.memory
    ]
    assert sorted(r.kind.value for r in old) == ["episode", "fact"]
    fact = next(r for r in memory.get_all(user_id="u") if r.kind.value == "fact")
    assert all(r.superseded_by == fact.id and r.valid_until == fact.valid_from for r in old)
    assert fact.valid_until is None and "Munich" in fact.memory


def test_a_replaced_value_keeps_its_text_as_a_record_of_its_own(memory: Memory) -> None:
    from datetime import UTC, datetime, timedelta

    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=61)
    memory.add("I live in Berlin.", user_id="u", occurred_at=start)
    memory.add("I moved to Munich.", user_id="u", occurred_at=start + timedelta(days=30))
    memory.add("I moved to Tokyo.", user_id="u", occurred_at=start + timedelta(days=60))
    (fact,) = [r for r in memory.get_all(user_id="u") if r.kind.value == "fact"]  # what holds now, only
    assert "Tokyo" in fact.memory and fact.valid_from == start + timedelta(days=60) and fact.valid_until is None
    chain = [memory.get(i, user_id="u") for i in fact.metadata["earlier_values"]]  # oldest first
    assert [c.memory for c in chain] == ["I live in Berlin", "I moved to Munich"]
    assert [(c.valid_from, c.valid_until) for c in chain] == [
        (start, start + timedelta(days=30)),
        (start + timedelta(days=30), start + timedelta(days=60)),
    ]
    assert all(c.superseded_by == fact.id and c.kind.value == "fact" for c in chain)
    listed = memory.get_all(user_id="u", include_superseded=True)
    assert {c.id for c in chain} <= {r.id for r in listed}
    assert {c.id for c in chain}.isdisjoint(r.id for r in memory.get_all(user_id="u"))
    # searched: never as what holds now; asked for, it is there (after what holds now)
    asked = "Where does the user live?"
    assert not any(h.record.superseded for h in memory.search(asked, user_id="u", top=20).hits)
    everything = [h.record for h in memory.search(asked, user_id="u", top=20, include_superseded=True).hits]
    assert {c.id for c in chain} <= {r.id for r in everything}
    # the history and the export show the chain
    (added,) = memory.history(chain[0].id, user_id="u")
    assert added.event.value == "ADD" and f"what memory {fact.id} held until" in added.reason
    exported = {r.id: r for r in memory.export(user_id="u").memories}
    assert exported[chain[1].id].superseded_by == fact.id


def test_a_conversation_from_long_ago_keeps_one_value_and_a_restatement_revives_it(memory: Memory) -> None:
    from datetime import UTC, datetime, timedelta

    long_ago = datetime.now(UTC) - timedelta(days=300)  # it fades as it is read (archived)
    memory.add("I live in Berlin.", user_id="u", occurred_at=long_ago)
    memory.add("I moved to Munich.", user_id="u", occurred_at=long_ago + timedelta(days=30))
    memory.add("I drink green tea every morning.", user_id="u", occurred_at=long_ago)
    every = memory.search("Where does the user live?", user_id="u", top=10, include_archived=True).hits
    facts = [h.record.memory for h in every if h.record.kind.value == "fact"]
    assert not any("Berlin" in t for t in facts) and any("Munich" in t for t in facts)  # Berlin is history
    memory.add("I drink green tea every morning.", user_id="u")  # said again today
    teas = [r for r in memory.get_all(user_id="u") if r.kind.value == "fact" and "tea" in r.memory]
    assert len(teas) == 1 and teas[0].status.value == "active"


def _gone_everywhere(memory: Memory, user: str, text: str) -> bool:
    listed = memory.get_all(user_id=user, include_superseded=True, limit=None)
    listed += memory.get_all(user_id=user, include_superseded=True, status="deleted", limit=None)
    found = memory.search(text, user_id=user, include_archived=True, include_superseded=True, top=50).hits
    texts = [*(r.memory for r in listed), *(h.record.memory for h in found), *_everything_said(memory, user)]
    return not any(text in t for t in texts)


def test_a_broad_forget_request_says_how_much_it_took_or_that_nothing_matched(memory: Memory) -> None:
    for text in ("I live in Berlin.", "I moved to Munich.", "I like sci-fi novels."):
        memory.add(text, user_id="u")
    (took,) = memory.add("Please forget where I live.", user_id="u").decisions
    assert took.event.value == "NONE" and took.reason.startswith("forget request: 4 memories that speak of it")
    assert [r.memory for r in memory.get_all(user_id="u", include_superseded=True)] == [
        r.memory for r in memory.get_all(user_id="u", include_superseded=True) if "sci-fi" in r.memory
    ]
    (nothing,) = memory.add("Please delete my medical information.", user_id="u").decisions
    assert nothing.reason == "forget request: nothing remembered matches what it names"


@pytest.mark.parametrize(
    ("said", "asked", "gone", "stays"),
    [
        (["I live in Berlin.", "I moved to Munich."], "Please forget that I live in Munich.", ["Munich", "Berlin"], []),
        (["I live in Berlin.", "I moved to Munich."], "Forget that I used to live in Berlin.", ["Berlin"], ["Munich"]),
        (["大阪に住んでいます。", "福岡に引っ越しました。"], "福岡に住んでいることは忘れて。", ["福岡", "大阪"], []),
    ],
)
def test_a_forget_request_takes_what_the_fact_held_before_or_only_that(
    memory: Memory, said: list[str], asked: str, gone: list[str], stays: list[str]
) -> None:
    for text in said:
        memory.add(text, user_id="u")
    memory.add(asked, user_id="u")
    assert [g for g in gone if not _gone_everywhere(memory, "u", g)] == []
    current = [r.memory for r in memory.get_all(user_id="u")]
    assert all(any(s in t for t in current) for s in stays)


def test_a_secret_is_never_stored(memory: Memory) -> None:
    result = memory.add("My password is hunter2, and my PIN is 4321. I work from home on Fridays.", user_id="u")
    assert any("password, PIN withheld" in d.reason for d in result.decisions)
    only = memory.add("The wifi password is hunter3.", user_id="u")
    assert [(d.event.value, d.reason.startswith("not kept: it gave a secret")) for d in only.decisions] == [
        ("NONE", True)
    ]
    kept = [r.memory for r in memory.get_all(user_id="u")]
    assert any("Fridays" in t for t in kept) and not any("password" in t.lower() for t in kept)
    memory.add("Please forget my password.", user_id="u")
    export = memory.export(user_id="u")
    texts = [r.memory for r in export.memories] + [
        str(state) for entry in export.history for state in (entry.before, entry.after, entry.reason)
    ]
    texts += [h.record.memory for h in memory.search("password", user_id="u", include_archived=True).hits]
    assert texts and not any("hunter2" in t or "hunter3" in t or "4321" in t for t in texts)


def test_chatter_is_not_memory_and_a_repeat_reinforces(memory: Memory) -> None:
    for text in ("hi", "What should I cook tonight?", "What should I cook tonight?", "Thanks!", "ok"):
        assert memory.add(text, user_id="u").decisions == ()
    assert memory.get_all(user_id="u") == []
    memory.add("I go running on Sunday mornings.", user_id="u")
    again = memory.add("I go running on Sunday mornings.", user_id="u").decisions
    episodes = [r for r in memory.get_all(user_id="u") if r.kind.value == "episode"]
    assert len(episodes) == 1 and len(episodes[0].provenance) == 2
    assert {d.event.value for d in again} == {"NONE"}


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("Please call me Ally.", "Call me Ally"),
        ("Rex passed away.", "Rex passed away"),
        ("I have a sister.", "I have a sister"),
        ("I eat fish now.", "I eat fish now"),
        ("アリーと呼んでください。", "アリーと呼んでください"),
        ("妹がいます。", "妹がいます"),
    ],
)
def test_more_of_what_people_say_about_themselves_is_kept(memory: Memory, said: str, kept: str) -> None:
    memory.add(said, user_id="u")
    assert facts(memory, "u") == [kept]


def test_over_http_the_same(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        service = build_service(load_settings(environ={}, sqlite_path=str(tmp_path / "s.db"), embedder="hash"))
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            async with AsyncMemory(url=f"http://{server.host}:{server.port}") as remote:
                for text in ("I like cats.", "I like dogs.", "I live in Berlin.", "I moved to Munich last month.",
                             "My password is hunter2.", "hi", "What should I cook tonight?"):
                    await remote.add(text, user_id="u")
                found = await remote.search("Where does the user live?", user_id="u", top=10)
                listed = await remote.get_all(user_id="u", limit=None)
                exported = await remote.export(user_id="u")
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()
        return (
            [h.record.memory for h in found.hits],
            sorted(r.memory for r in listed if r.kind.value == "fact"),
            [r.memory for r in exported.memories],
        )

    found, fact_texts, exported = asyncio.run(scenario())
    assert not any("Berlin" in t for t in found) and any("Munich" in t for t in found)
    assert "I like cats" in fact_texts and "I like dogs" in fact_texts
    assert not any("hunter2" in t for t in exported)
    assert not any(t in ("hi", "What should I cook tonight?") for t in exported)


def test_over_http_a_list_shows_what_held_before_only_when_asked(tmp_path: Path) -> None:
    import json
    import urllib.error
    import urllib.request

    def get(base: str, query: str) -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"{base}/api/memories?user_id=u&agent_id=default&{query}") as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    async def scenario() -> tuple[list[str], list[str], list[dict[str, object]], list[dict[str, object]], int]:
        service = build_service(load_settings(environ={}, sqlite_path=str(tmp_path / "s.db"), embedder="hash"))
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        base = f"http://{server.host}:{server.port}"
        try:
            async with AsyncMemory(url=base) as remote:
                await remote.add("I live in Berlin.", user_id="u")
                await remote.add("I moved to Munich last month.", user_id="u")
                current = [r.memory for r in await remote.get_all(user_id="u", limit=None)]
                every = [r.memory for r in await remote.get_all(user_id="u", limit=None, include_superseded=True)]
            _, plain = await asyncio.to_thread(get, base, "")
            _, browsed = await asyncio.to_thread(get, base, "kind=fact&include_superseded=true")
            bad, _ = await asyncio.to_thread(get, base, "include_superseded=perhaps")
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()
        return current, every, plain["memories"], browsed["memories"], bad  # type: ignore[return-value]

    current, every, plain, browsed, bad = asyncio.run(scenario())
    assert not any("Berlin" in t for t in current) and any("Berlin" in t for t in every)
    assert not any("Berlin" in str(m["memory"]) for m in plain)
    (old,) = [m for m in browsed if "Berlin" in str(m["memory"])]  # the fact's earlier value
    assert old["superseded_by"] and old["valid_until"]
    assert bad == 422


def _everything_said(memory: Memory, user: str) -> list[str]:
    export = memory.export(user_id=user)
    texts = [r.memory for r in export.memories]
    texts += [str(entry.before) + str(entry.after) + entry.reason for entry in export.history]
    return texts


@pytest.mark.parametrize(
    ("said", "asked", "gone", "stays"),
    [
        (
            ["My friend Priya lent me her bike.", "Priya is moving to Oslo.", "I like sci-fi novels."],
            "Forget everything about Priya.",
            "Priya",
            "sci-fi",
        ),
        (  # the entity index links 「姉」 to Ana, though the words never say so
            ["My sister Ana moved to Lisbon.", "姉は化学の先生をしています。", "I'm a carpenter."],
            "Forget everything about Ana.",
            "化学",
            "carpenter",
        ),
        (
            ["I have type 1 diabetes.", "I take insulin before meals.", "I'm a carpenter."],
            "Please delete all my medical information.",
            "insulin",
            "carpenter",
        ),
        (
            ["元彼のケンタとは春に別れた。", "ケンタは今大阪にいるらしい。", "私は薬剤師です。"],
            "元彼の話は全部忘れて。",
            "ケンタ",
            "薬剤師",
        ),
        (
            ["My password is hunter2.", "I work from home on Fridays."],
            "Please forget my password.",
            "hunter2",
            "Fridays",
        ),
        (
            ["My nickname at uni was Pickles.", "I'm learning the cello."],
            "Forget my old uni nickname.",  # "old" qualifies what it names; the memory need not say it
            "Pickles",
            "cello",
        ),
        (
            # the past of a kind of information: what was said of the old job goes, the job now stays
            ["昔バーテンダーをしてました。", "今は保育士です。"],
            "昔の仕事の話は忘れて。",
            "バーテンダー",
            "保育士",
        ),
        (
            ["I used to work as a lifeguard in Brighton.", "These days I'm a physiotherapist."],
            "Forget everything about my old job.",
            "lifeguard",
            "physiotherapist",
        ),
    ],
)
def test_a_forget_request_removes_every_trace_of_what_it_names(
    memory: Memory, said: list[str], asked: str, gone: str, stays: str
) -> None:
    for text in said:
        memory.add(text, user_id="u")
    (decision,) = memory.add(asked, user_id="u").decisions
    if gone != "hunter2":  # (a secret is never stored: that nothing matches is the truth)
        assert "nothing remembered matches" not in decision.reason  # the agent is told it was done
    assert not any(gone in text for text in _everything_said(memory, "u"))
    found = memory.search(gone, user_id="u", include_archived=True, include_superseded=True, top=20).hits
    assert not any(gone in hit.record.memory for hit in found)
    assert any(stays in r.memory for r in memory.get_all(user_id="u"))  # what it did not name stays


@pytest.mark.parametrize(
    ("said", "asked", "gone"),
    [
        (["I live in Berlin. I like tea.", "I moved to Munich."], "Please forget that I live in Munich.", ["Berlin", "Munich"]),
        (["My friend Priya lent me her bike.", "Priya is moving to Oslo."], "Forget everything about Priya.", ["Priya"]),
        (["元彼のケンタとは春に別れた。", "私は薬剤師です。"], "元彼の話は全部忘れて。", ["ケンタ"]),
        (["My sister Ana moved to Lisbon.", "姉は化学の先生をしています。"], "Forget everything about Ana.", ["Ana", "化学"]),
    ],
)
def test_no_file_of_the_store_holds_what_was_forgotten(tmp_path: Path, said: list[str], asked: str, gone: list[str]) -> None:
    (tmp_path / "store").mkdir()  # (a store path names a folder that exists)
    with Memory(tmp_path / "store" / "m.db", embedder="hash") as memory:
        for text in [*said, asked]:
            memory.add(text, user_id="u")
    files = [f for f in (tmp_path / "store").rglob("*") if f.is_file()]
    assert files
    # every table (memories, their index, history, the turn journals, the queue), and the free pages
    assert [(f.name, g) for f in files for g in gone if g.encode() in f.read_bytes()] == []


def test_hits_come_in_the_order_of_the_score_shown(memory: Memory) -> None:
    memory.add("I live in Berlin.", user_id="u")
    memory.add("I moved to Munich last month.", user_id="u")  # a fact and the episode it came from
    hits = memory.search("Where does the user live?", user_id="u", top=10).hits
    assert [h.record.kind.value for h in hits] == ["fact", "episode"]  # the fact first...
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)  # ...and the scores say so


@pytest.mark.parametrize(
    ("first", "correction", "now", "old"),
    [
        ("My dentist appointment is on Thursday.", "Sorry, I meant Tuesday, not Thursday.", "Tuesday", "Thursday"),
        ("来週、大阪に出張です。", "さっきの間違い、大阪じゃなくて京都です。", "京都", "大阪"),
    ],
)
def test_a_correction_puts_the_right_value_in_place(
    memory: Memory, first: str, correction: str, now: str, old: str
) -> None:
    memory.add(first, user_id="u")
    memory.add(correction, user_id="u")
    (fact,) = [r for r in memory.get_all(user_id="u") if r.kind.value == "fact"]
    assert now in fact.memory and old not in fact.memory
    top = memory.search(first, user_id="u").hits[0].record
    assert now in top.memory  # what was first said is no longer what the agent is handed first


@pytest.mark.parametrize(
    ("said", "asked", "old", "new"),
    [
        (["I'm reading Project Hail Mary.", "I cook on Sundays."], "What book is the user reading?", "Hail Mary", "Piranesi"),
        (["The dentist is on Monday."], "When is the dentist?", "Monday", "Wednesday"),
        (["My mobile is 090-1111-0000."], "What is the user's phone number?", "090-1111-0000", "090-2222-0000"),
    ],
)
def test_an_episode_that_a_later_one_replaces_is_never_shown_as_current(
    memory: Memory, said: list[str], asked: str, old: str, new: str
) -> None:
    latest = {
        "Piranesi": "Started reading Piranesi this week.",
        "Wednesday": "My mistake, it's on Wednesday.",
        "090-2222-0000": "New number: 090-2222-0000.",
    }[new]
    for text in said:
        memory.add(text, user_id="u")
    memory.add(latest, user_id="u")
    current = [h.record for h in memory.search(asked, user_id="u", top=10).hits]
    assert any(new in r.memory for r in current)
    assert not any(old in r.memory and new not in r.memory for r in current)
    everything = memory.search(asked, user_id="u", top=10, include_superseded=True).hits
    closed = [h.record for h in everything if old in h.record.memory and new not in h.record.memory]
    replacing = next(r for r in current if r.kind.value == "episode" and new in r.memory)
    assert closed and all(r.superseded_by == replacing.id and r.valid_until == replacing.valid_from for r in closed)
    reasons = [e.reason for r in closed for e in memory.history(r.id, user_id="u")]
    assert any(f"superseded by episode {replacing.id}" in reason for reason in reasons)


def test_a_turn_that_arrives_late_does_not_replace_what_was_said_after_it(memory: Memory) -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    memory.add("I live in Osaka.", user_id="u", occurred_at=now)
    memory.add("I live in Kyoto.", user_id="u", occurred_at=now - timedelta(minutes=30))
    current = [h.record.memory for h in memory.search("Where does the user live?", user_id="u", top=10).hits]
    assert any("Osaka" in t for t in current) and not any("Kyoto" in t for t in current)
