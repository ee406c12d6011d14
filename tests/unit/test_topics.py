"""What a broad forget request names, and which memories speak of it (pure)."""

from __future__ import annotations

import pytest

from memory_core.language.topics import broad_request, broad_terms, mentions, names_in


@pytest.mark.parametrize(
    ("request_text", "memory"),
    [
        ("all my medical information", "I was diagnosed with asthma in 2019"),
        ("My health", "I take insulin every evening"),
        ("健康", "持病で喘息があります"),
        ("My address", "I live at 7 Elm Street"),
        ("住所", "住所は港区三田1丁目です"),
        ("my contact details", "My e-mail is sam@example.org"),
        ("Everything about Priya", "Priya is starting at my company"),
        ("Leo, it's over", "Leo and I went to the lake"),
        ("ナオト", "ナオトと映画を観た"),
    ],
)
def test_what_a_broad_request_names(request_text: str, memory: str) -> None:
    terms, _ = broad_terms(request_text)
    assert terms and mentions(memory, terms)


@pytest.mark.parametrize(
    ("request_text", "memory"),
    [
        ("My address", "I ride my road bike on Sundays"),
        ("all my medical information", "I work night shifts at the hospital"),
        ("Everything about Al", "Alan lent me his car"),
    ],
)
def test_what_it_does_not_name(request_text: str, memory: str) -> None:
    terms, _ = broad_terms(request_text)
    assert not mentions(memory, terms)


def test_one_thing_is_not_broad() -> None:
    assert broad_terms("My birthday") == ((), False)
    assert broad_terms("The pottery class") == ((), False)


def test_a_relation_stands_for_the_name_memories_give_it() -> None:
    terms, by_relation = broad_terms("everything about my ex")
    assert by_relation and "ex" in terms
    assert names_in("My ex, Jordan, still calls") == {"Jordan"}
    assert names_in("元彼のタクヤとは去年別れた") == {"タクヤ"}
    assert names_in("My cousin Amira lives in Leeds") == {"Amira"}


@pytest.mark.parametrize(
    ("request_text", "named", "kept"),
    [
        ("昔の仕事の話", ["昔ホストをしてました", "以前は会社員でした"], ["今は料理人です", "テニスをしてました"]),
        ("my old job", ["I used to work as a lifeguard", "I was a barista at Luna"], ["These days I'm a physiotherapist"]),
        ("my job", ["I work at Contoso", "I'm a nurse at St Mary's"], ["I like hiking"]),
        ("my contact details", ["My phone number is 555-0199"], ["I live in Leeds"]),
    ],
)
def test_a_kind_of_information_names_the_statements_of_its_relations(
    request_text: str, named: list[str], kept: list[str]
) -> None:
    request = broad_request(request_text)
    assert request
    assert [text for text in named if request.names(text)] == named
    assert [text for text in kept if request.names(text)] == []


def test_a_request_for_the_past_names_only_what_was() -> None:
    assert broad_request("my old job").past and not broad_request("my job").past
    assert not broad_request("My old bike")  # one thing: the request's own decision finds it
