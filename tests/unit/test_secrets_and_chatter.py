"""Secrets are withheld before anything is stored; chatter is told from statements (pure)."""

from __future__ import annotations

import pytest

from memory_core.domain.messages import TurnMessage
from memory_core.language.chatter import is_chatter
from memory_core.language.secrets import redact_secrets, withheld


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("My password is hunter2.", "hunter2", "password"),
        ("my password: correct-horse-battery", "correct-horse-battery", "password"),
        ('the password was "s3cr3t!" lol', "s3cr3t!", "password"),
        ("パスワードはabc123です", "abc123", "password"),
        ("暗証番号は4321です。", "4321", "PIN"),
        ("My PIN is 0912", "0912", "PIN"),
        ("here's my key sk-proj-abcdefghijklmnop1234", "sk-proj-abcdefghijklmnop1234", "API key"),
        ("api key = ABCDEF1234567890XYZ", "ABCDEF1234567890XYZ", "API key"),
        ("My SSN is 123-45-6789", "123-45-6789", "national identifier"),
        ("card 4111 1111 1111 1111 expires soon", "4111 1111 1111 1111", "card number"),
        ("マイナンバーは1234 5678 9012です", "1234 5678 9012", "national identifier"),
        ("The code for my garage door is 9-9-0-1.", "9-9-0-1", "PIN"),
        ("the pin for the office safe is 55310", "55310", "PIN"),
        ("Credentials for the staging box are admin / Pa55-Word-1", "Pa55-Word-1", "password"),
        ("my card no. is 1234 5678 1234 5678, use it", "1234 5678 1234 5678", "card number"),
        ("デビットカードの番号は1111 2222 3333 4444です", "1111 2222 3333 4444", "card number"),
        ("玄関の番号は3141です", "3141", "PIN"),
        ("パスポートの番号はXK1234567です", "XK1234567", "national identifier"),
        ("Wi-Fiのパスワード、Hana#77umi にしたよ", "Hana#77umi", "password"),
    ],
)
def test_secrets_are_withheld(text: str, secret: str, kind: str) -> None:
    redacted, kinds = redact_secrets(text)
    assert secret not in redacted and kind in kinds and withheld(redacted) == kinds
    assert redact_secrets(redacted) == (redacted, ())  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "I live in Berlin.",
        "My phone number is 555-123-4567",  # contact details are remembered, not withheld
        "The meeting is at 10:30 on 2026-12-01",
        "My order number is 4111111111111112",  # not a card number (the Luhn check fails)
        "I forgot my password again",
        "What is the password?",
    ],
)
def test_what_is_not_a_secret_stays(text: str) -> None:
    assert redact_secrets(text) == (text, ())


def test_a_turn_message_never_holds_a_secret() -> None:
    message = TurnMessage.model_validate({"role": "user", "text": "My password is hunter2, don't tell."})
    assert "hunter2" not in message.text and withheld(message.text) == ("password",)


@pytest.mark.parametrize(
    "text",
    [
        "hi",
        "Thanks!",
        "ok",
        "no problem!",
        "Sounds good, thanks",
        "What should I cook tonight?",
        "2026-11-03 12:01:55 INFO worker started",
        '{"tool": "search", "args": {}}',
        "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>",
        "ping",
        "👍",
        "こんにちは",
        "ありがとう！",
        "了解です",
        "今夜何を作ればいい？",
        # reactions to what the other said: praise, sympathy, congratulations, encouragement
        "Wow, that looks great! How did you make it?",
        "That's so cool, Jon!",
        "Congrats! That must have been so exciting.",
        "Sounds amazing. Keep it up!",
        "What a great idea!",
        "それは素敵だね！",
        "おめでとうございます！",
        "大変だったね",
        # gratitude and farewells
        "Thanks, Evan! Your support means a lot to me.",
        "Thanks for always being there. I really appreciate it.",
        "Take care, bye!",
        "Me too. Talk to you soon!",
        "Have a great day!",
        "本当に助かりました！",
        "気をつけてね",
    ],
)
def test_chatter(text: str) -> None:
    assert is_chatter(text)


@pytest.mark.parametrize(
    "text",
    [
        "I live in Berlin.",
        "Thanks! I live in Berlin.",
        "Yes, I have two cats.",
        "No, I live in Osaka.",
        "Please call me Ally.",
        "私はベジタリアンです。",
        "ありがとう、ところで私はベジタリアンです",
        "I went hiking yesterday. How about you?",
        "I went to Kyoto. It was amazing!",
        "That's my sister.",
        "That is so hard for me because I have a bad knee.",
        "I love it here in Osaka.",
        "よかった、明日は休みだ",
        "Take care of my plants while I'm in Osaka next week.",
        "I appreciate quiet hotels.",
        "Thanks for asking, I moved to Kyoto last month.",
    ],
)
def test_statements_are_not_chatter(text: str) -> None:
    assert not is_chatter(text)
