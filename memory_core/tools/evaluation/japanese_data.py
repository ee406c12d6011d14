"""The Japanese evaluation set (users' dated turns, expected memories, questions), read and checked,
and the Japanese Daily Dialogue utterances ``eval japanese --distractors`` adds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path

__all__ = ["JapaneseQuestion", "JapaneseSet", "JapaneseUser", "load_japanese_set", "load_jdd_utterances"]

@dataclass(frozen=True, slots=True)
class JapaneseQuestion:
    """A question, the turn indexes that answer it, and its kind (paraphrase, update, ...)."""

    question: str
    evidence: tuple[int, ...]
    kind: str


@dataclass(frozen=True, slots=True)
class JapaneseUser:
    """One user's dated turns, expected final memories and questions."""

    user_id: str
    turns: tuple[tuple[datetime, str], ...]
    expected_active: tuple[str, ...]
    questions: tuple[JapaneseQuestion, ...]


@dataclass(frozen=True, slots=True)
class JapaneseSet:
    """The whole set."""

    name: str
    version: int
    users: tuple[JapaneseUser, ...]

    @property
    def questions(self) -> int:
        return sum(len(u.questions) for u in self.users)


def load_japanese_set(path: str | Path | None = None) -> JapaneseSet:
    """Load the set (default: the copy shipped in the package) and check its references.

    Raises:
        ValueError: A question's evidence names a turn the user does not have, or a user has none.
    """
    if path is None:
        text = (
            resources.files("memory_core.tools.evaluation").joinpath("data/japanese_eval.json").read_text("utf-8")
        )
    else:
        text = Path(path).read_text(encoding="utf-8")
    raw = json.loads(text)
    start = date.fromisoformat(raw["start"])
    users = []
    for u in raw["users"]:
        turns = tuple(
            (
                datetime(start.year, start.month, start.day, 9, tzinfo=UTC)
                + timedelta(days=int(t["day"]), minutes=i),
                str(t["text"]),
            )
            for i, t in enumerate(u["turns"])
        )
        if not turns:
            raise ValueError(f"user {u['id']} has no turns")
        questions = []
        for q in u["questions"]:
            evidence = tuple(int(e) for e in q["evidence"])
            if not evidence or any(not 0 <= e < len(turns) for e in evidence):
                raise ValueError(f"user {u['id']}: question {q['q']!r} names a turn that does not exist")
            questions.append(JapaneseQuestion(str(q["q"]), evidence, str(q.get("kind", "paraphrase"))))
        users.append(JapaneseUser(str(u["id"]), turns, tuple(u["expected_active"]), tuple(questions)))
    return JapaneseSet(str(raw.get("name", "")), int(raw.get("version", 1)), tuple(users))


def load_jdd_utterances(path: str | Path) -> list[str]:
    """Every utterance of a Japanese Daily Dialogue topic file, verbatim, in file order."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    dialogues = raw if isinstance(raw, list) else raw.get("dialogues", list(raw.values()))
    texts: list[str] = []
    for dialogue in dialogues:
        utterances = dialogue.get("utterances", []) if isinstance(dialogue, Mapping) else []
        texts.extend(str(u["utterance"]) for u in utterances if str(u.get("utterance", "")).strip())
    return texts
