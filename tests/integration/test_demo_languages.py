"""``memory-core demo --lang en``: the demo's story in English, with the same decisions as in Japanese.

Like the Japanese demo (``test_demo_and_bench.py``) it runs the local e5 embedder and the rules.
"""

from __future__ import annotations

import asyncio
import io
import re

import pytest

from memory_core.cli.main import main
from memory_core.tools.demo import DEMO_LANGUAGES, run_demo

_DECISION = re.compile(r"^  (ADD|UPDATE|DELETE|NONE)\s+\w+ (\[\w+\])?")


def _decisions(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Per turn: its id and the decisions it led to (event and, for an ADD, the category)."""
    turns: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("[demo-"):
            turns.append((line[1:].split()[0], []))
        elif (match := _DECISION.match(line)) and turns:
            turns[-1][1].append(" ".join(part for part in match.groups() if part))
    return turns


def test_the_english_demo_tells_the_same_story_with_the_same_decisions() -> None:
    english: list[str] = []
    assert asyncio.run(run_demo(db_path=None, out=english.append, lang="en")) == 0
    japanese: list[str] = []
    asyncio.run(run_demo(db_path=None, out=japanese.append, lang="ja"))
    assert len(_decisions(english)) == 7 and _decisions(english) == _decisions(japanese)
    assert [event for _, events in _decisions(english) for event in events].count("DELETE") == 1

    text = "\n".join(english)
    assert "I like tea → These days I like coffee more than tea" in text  # a changed preference replaces
    assert "replaced: tea → coffee" in text
    assert "I like ryokans → I like ryokans in Kyoto" in text  # a detail is added
    assert "DELETE" in text and "I don't like spicy food" in text.split("DELETE", 1)[1]  # forgotten on request
    searches = text.split("search 'where to stay in Kyoto", 1)[1]
    assert "extra-spicy" not in searches  # the assistant's claim created nothing
    assert "I like ryokans in Kyoto  [preference" in searches
    # The query asks two things; with the local model the Kyoto memories are all closer to it than the
    # coffee preference, which the order by relevance puts sixth (docs/evaluation.md says so).
    assert "I like tea  [preference" not in searches  # the replaced preference is never shown
    assert "forgetting dry run" in text


def test_demo_lang_on_the_command_line() -> None:
    out = io.StringIO()
    assert main(["demo", "--lang", "en"], out=out) == 0
    assert "user: I'm planning a trip to Kyoto next week. I like ryokans." in out.getvalue()
    with pytest.raises(ValueError, match="lang must be one of ja, en"):
        asyncio.run(run_demo(db_path=None, out=print, lang="fr"))
    assert set(DEMO_LANGUAGES) == {"ja", "en"}
