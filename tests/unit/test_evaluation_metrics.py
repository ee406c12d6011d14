"""Retrieval metrics, LoCoMo evidence normalisation and audit corrections, the Japanese set's loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core.language.text import query_terms, stem_english
from memory_core.tools.evaluation.japanese import matches
from memory_core.tools.evaluation.japanese_data import load_japanese_set, load_jdd_utterances
from memory_core.tools.evaluation.locomo_data import (
    LocomoQuestion,
    apply_audit,
    load_locomo,
    normalize_evidence,
    parse_session_date,
    turn_text,
)
from memory_core.tools.evaluation.metrics import MetricAccumulator, all_at_k, any_at_k, reciprocal_rank


def test_any_all_and_reciprocal_rank_on_hand_made_rankings() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert any_at_k(ranked, {"c"}, 1) == 0.0
    assert any_at_k(ranked, {"c"}, 3) == 1.0
    assert any_at_k(ranked, {"x", "b"}, 5) == 1.0
    assert all_at_k(ranked, {"b", "e"}, 3) == 0.0
    assert all_at_k(ranked, {"b", "e"}, 5) == 1.0
    assert all_at_k(ranked, {"b", "x"}, 10) == 0.0
    assert reciprocal_rank(ranked, {"d", "b"}) == 0.5
    assert reciprocal_rank(ranked, {"x"}) == 0.0
    assert any_at_k([], {"a"}, 5) == 0.0
    with pytest.raises(ValueError):
        any_at_k(ranked, set(), 5)
    with pytest.raises(ValueError):
        all_at_k(ranked, {"a"}, 0)


def test_accumulator_averages_overall_and_per_group() -> None:
    acc = MetricAccumulator(ks=(1, 5))
    acc.add(["a", "b"], {"a"}, ["cat1"])
    acc.add(["b", "a"], {"a", "c"}, ["cat2"])
    result = acc.result()
    assert list(result) == ["overall", "cat1", "cat2"]
    assert result["overall"]["n"] == 2
    assert result["overall"]["any@1"] == 0.5
    assert result["overall"]["any@5"] == 1.0
    assert result["overall"]["all@5"] == 0.5
    assert result["overall"]["mrr"] == pytest.approx(0.75)
    assert result["cat2"]["mrr"] == 0.5


def test_evidence_ids_are_normalised() -> None:
    assert normalize_evidence(["D1:3"]) == ["D1:3"]
    assert normalize_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert normalize_evidence(["D9:1 D4:4 D4:6", "D9:1"]) == ["D9:1", "D4:4", "D4:6"]
    assert normalize_evidence(["D:11:26"]) == ["D11:26"]
    assert normalize_evidence(["D30:05"]) == ["D30:5"]
    assert normalize_evidence(["D"]) == []


def test_session_dates_and_turn_texts() -> None:
    date = parse_session_date("1:56 pm on 8 May, 2023")
    assert (date.year, date.month, date.day, date.hour, date.minute) == (2023, 5, 8, 13, 56)
    data = _fixture_data()
    image = next(t for t in data.turns if t.caption)
    assert turn_text(image, "dated") == "[8 May 2023] Ann: Look at this! [image: a photo of a red bicycle]"
    assert turn_text(image, "speaker").startswith("Ann: Look")
    assert turn_text(image, "plain") == "Look at this! [image: a photo of a red bicycle]"


def test_audit_corrections_replace_evidence_of_wrong_citations_only() -> None:
    questions = [
        LocomoQuestion("locomo_0_qa0", 0, "q0", 1, ("D1:1",)),
        LocomoQuestion("locomo_0_qa1", 0, "q1", 2, ("D1:2",)),
    ]
    audit = [
        {
            "question_id": "locomo_0_qa0",
            "error_type": "WRONG_CITATION",
            "correct_evidence": ["D1:3", "D:2:1"],
        },
        {"question_id": "locomo_0_qa1", "error_type": "HALLUCINATION", "correct_evidence": ["D1:4"]},
        {"question_id": "locomo_9_qa9", "error_type": "WRONG_CITATION", "correct_evidence": ["D1:1"]},
    ]
    assert apply_audit(questions, audit) == 1
    assert questions[0].evidence == ("D1:3", "D2:1") and questions[0].corrected
    assert questions[1].evidence == ("D1:2",)


def _write_fixture(folder: Path) -> tuple[Path, Path]:
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Biscuit last week."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Congratulations! I started painting landscapes."},
            {
                "speaker": "Ann",
                "dia_id": "D1:3",
                "text": "Look at this!",
                "blip_caption": "a photo of a red bicycle",
            },
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I ran my first marathon in Boston yesterday."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "Biscuit learned to fetch the ball."},
        ],
    }
    qa = [
        {
            "question": "What is the name of Ann's puppy?",
            "answer": "Biscuit",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "Where did Bob run a marathon?",
            "answer": "Boston",
            "evidence": ["D2:01"],
            "category": 2,
        },
        {"question": "What did Bob start?", "answer": "painting", "evidence": ["D1:2; D9:9"], "category": 1},
        {"question": "What colour is the bicycle?", "answer": "red", "evidence": ["D1:1"], "category": 3},
        {"question": "Adversarial", "answer": "", "evidence": ["D1:1"], "category": 5},
        {"question": "No evidence", "answer": "", "evidence": [], "category": 4},
    ]
    data = folder / "locomo_tiny.json"
    data.write_text(
        json.dumps([{"sample_id": "t0", "conversation": conversation, "qa": qa}]), encoding="utf-8"
    )
    audit = folder / "locomo10_audit_errors.json"
    audit.write_text(
        json.dumps(
            [{"question_id": "locomo_0_qa3", "error_type": "WRONG_CITATION", "correct_evidence": ["D1:3"]}]
        ),
        encoding="utf-8",
    )
    return data, audit


def _fixture_data(tmp: Path | None = None):  # type: ignore[no-untyped-def]
    import tempfile

    folder = Path(tmp or tempfile.mkdtemp())
    data, audit = _write_fixture(folder)
    return load_locomo(data, audit)


def test_loader_reads_turns_questions_and_applies_fixes(tmp_path: Path) -> None:
    data = _fixture_data(tmp_path)
    assert [t.dia_id for t in data.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert data.turns[3].date.month == 6
    by_id = {q.question_id: q for q in data.questions}
    assert by_id["locomo_0_qa1"].evidence == ("D2:1",)
    assert by_id["locomo_0_qa2"].evidence == ("D1:2",)  # D9:9 names no turn: dropped
    assert by_id["locomo_0_qa3"].evidence == ("D1:3",) and by_id["locomo_0_qa3"].corrected
    assert by_id["locomo_0_qa5"].evidence == ()
    assert data.stats["audit_corrections"] == 1
    assert data.stats["unknown_evidence_ids"] == 1
    assert data.stats["malformed_evidence_questions"] == 2
    assert len(data.sha256) == 64


def test_japanese_set_loads_with_valid_references() -> None:
    data = load_japanese_set()
    assert len(data.users) == 30
    assert data.questions >= 60
    kinds = {q.kind for u in data.users for q in u.questions}
    assert {"paraphrase", "update", "contradiction", "temporal"} <= kinds
    for user in data.users:
        assert user.expected_active
        assert [when for when, _ in user.turns] == sorted(when for when, _ in user.turns)


def test_japanese_set_loader_rejects_dangling_evidence(tmp_path: Path) -> None:
    bad = {
        "name": "bad",
        "version": 1,
        "start": "2026-04-01",
        "users": [
            {
                "id": "u1",
                "turns": [{"day": 0, "text": "猫が好きです。"}],
                "expected_active": ["猫が好きです"],
                "questions": [{"q": "好きな動物は？", "evidence": [3]}],
            }
        ],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match="does not exist"):
        load_japanese_set(path)


def test_memory_matching_and_distractor_loader(tmp_path: Path) -> None:
    assert matches("紅茶を飲んでいます", "最近はコーヒーをやめて、紅茶を飲んでいます")
    assert matches("ＰＹＴＨＯＮが得意です。", "Pythonが得意です")
    assert not matches("コーヒーが好きです", "紅茶が好きです")
    corpus = tmp_path / "jdd.json"
    corpus.write_text(
        json.dumps(
            [
                {
                    "utterances": [
                        {"turn_num": 1, "speaker": "A", "utterance": "こんにちは"},
                        {"turn_num": 2, "speaker": "B", "utterance": " "},
                    ]
                }
            ],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    assert load_jdd_utterances(corpus) == ["こんにちは"]


def test_english_stemmer_and_query_terms() -> None:
    assert stem_english("painted") == stem_english("paints") == stem_english("painting") == "paint"
    assert stem_english("running") == "run"
    assert stem_english("loved") == stem_english("love") == stem_english("loves")
    assert stem_english("parties") == stem_english("party")
    assert stem_english("class") == "class"
    assert stem_english("bus") == "bus"
    assert stem_english("京都") == "京都"
    assert query_terms("When did Caroline go to the support groups?") == ["carolin", "go", "support", "group"]
    assert query_terms("what was it") == ["what", "was", "it"]


def test_eval_pipeline_reports_locomo_temporal_questions_for_all_memories_and_facts_alone() -> None:
    from memory_core.tools.evaluation.pipeline import temporal_figures

    def row(any5: float, *, kind: str | None = None, forgetting: bool = False, mode: str = "hybrid") -> dict:
        metrics = {"overall": {"n": 9.0, "any@5": 0.9}, "2-temporal": {"n": 3.0, "any@5": any5}}
        return {"mode": mode, "profile": "important", "forgetting": forgetting, "metrics": metrics} | (
            {"kind": kind} if kind else {}
        )

    results = [row(2 / 3), row(0.1, mode="keyword"), row(1 / 3, kind="fact"), row(0.0, forgetting=True)]
    assert temporal_figures(results) == {"all_memories": 2 / 3, "facts_alone": 1 / 3, "n": 3}
    assert temporal_figures([{**row(0.5), "metrics": {"overall": {"n": 1.0, "any@5": 1.0}}}]) == {}
