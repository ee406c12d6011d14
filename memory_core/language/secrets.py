"""Secrets in what people say (passwords, PINs, API keys, card numbers, national identifiers), found
and withheld before anything is stored: the one table of their patterns, Japanese and English."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_core.language.sentences import join_sentences, split_sentences

__all__ = [
    "SECRETS_ONLY",
    "SECRET_QUESTIONS",
    "SECRET_RULES",
    "SecretRule",
    "asks_for_secret",
    "redact_secrets",
    "withheld",
    "without_secrets",
]


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One kind of secret and how it is written.

    Attributes:
        kind: What it is, as the marker left in its place says (``password``, ``card number``...).
        pattern: Where it is; the ``secret`` group, when the pattern has one, is what is withheld
            (the words that introduce it stay: "my password is [withheld: password]").
        luhn: Withhold only digit runs that pass the Luhn check (card numbers).
    """

    kind: str
    pattern: re.Pattern[str]
    luhn: bool = False


#: A value a secret's introduction is followed by: the next word, without the punctuation that ends it.
_VALUE = (
    r"(?:[\"'“「『](?P<secret_quoted>[^\"'”」』\n]{1,80})[\"'”」』]"
    r"|(?P<secret>[^\s\"'”」』、。，,]*[^\s\"'”」』、。，,.!?！？:;；：]))"
)
_IS_EN = r"(?:\s+(?:is|was|=|:|'s)|\s*[:=])\s*"
_IS_JA = r"\s*(?:は|が|を|:|：|=|＝|、|,)\s*"
#: What a secret's name may be followed by before it is given: "the PIN for my debit card is ...".
_OF_EN = r"(?:\s+(?:for|to|of|on)\s+(?:my|the|our|this)\s+[\w-]+(?:\s+[\w-]+)?)?"

#: The secrets, most specific first: the first rule that matches a place withholds it.
SECRET_RULES: tuple[SecretRule, ...] = (
    SecretRule(
        "API key",
        re.compile(
            r"(?P<secret>\b(?:sk-(?:proj-)?[A-Za-z0-9_-]{16,}|gh[opsu]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
            r"xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|"
            r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}))"
        ),
    ),
    SecretRule(
        "API key",
        re.compile(
            r"(?i)\b(?:api[ _-]?key|secret(?:[ _-]key)?|access[ _-]token|auth(?:entication)?[ _-]token|"
            r"bearer token|client[ _-]secret|connection string)" + _IS_EN + r"(?P<secret>\S{8,})"
            r"|(?:APIキー|API キー|アクセストークン|シークレット(?:キー)?|トークン)" + _IS_JA + r"(?P<secret_ja>[!-~]{8,})"
        ),
    ),
    SecretRule(
        "password",
        re.compile(
            r"(?i)\b(?:login|log-in|credentials?|sign-in)\b[^.\n]{0,40}?\b(?:is|are)\s+\S+\s*/\s*(?P<secret_login>\S+[^\s.,!?])"
        ),
    ),
    SecretRule(
        "password",
        re.compile(
            r"(?i)\b(?:password|passcode|passwd|pass ?phrase|pw)" + _OF_EN + _IS_EN + _VALUE
            + r"|(?:パスワード|パスコード|合言葉)" + _IS_JA + r"(?P<secret_ja>[^\s、。]+?)(?=です|だよ|だ|よ|ね|[\s、。]|$)"
        ),
    ),
    SecretRule(
        "PIN",
        re.compile(
            r"(?i)\b(?:pin(?: code| number)?|security code|cvv|cvc|(?:door|gate|entry|alarm|lock|access|safe|garage) code|code)"
            + _OF_EN + _IS_EN + r"(?P<secret>\d(?:[ -]?\d){2,11})\b"
            r"|(?:暗証番号|PIN(?:コード)?|セキュリティコード|ロック解除(?:の番号|コード)?|解除コード|(?:ドア|玄関)の?(?:番号|コード))"
            + _IS_JA + r"(?P<secret_ja>[0-9０-９](?:[ -]?[0-9０-９]){2,11})"
        ),
    ),
    SecretRule(
        "national identifier",
        re.compile(
            r"(?P<secret>\b\d{3}-\d{2}-\d{4}\b)"
            r"|(?i:\b(?:ssn|social security(?: number)?|national insurance(?: number)?|passport(?: number)?|"
            r"tax id|national id(?: number)?)" + _IS_EN + r"(?P<secret_en>[A-Z0-9][A-Z0-9 -]{5,14}[A-Z0-9]))\b"
            r"|(?:マイナンバー|個人番号|パスポート(?:の)?番号|免許証(?:の)?番号)" + _IS_JA
            + r"(?P<secret_ja>[A-Z0-9０-９][A-Z0-9０-９ -]{6,14}[A-Z0-9０-９])"
        ),
    ),
    SecretRule(
        "card number",
        re.compile(
            r"(?i)\b(?:card|credit card|debit card|visa|mastercard|amex)(?: number| no\.?)" + _IS_EN
            + r"(?P<secret>\d(?:[ -]?\d){11,18})\b"
            r"|(?:クレカ|クレジットカード|カード|デビットカード)の?番号" + _IS_JA + r"(?P<secret_ja>\d(?:[ -]?\d){11,18})"
        ),
    ),
    SecretRule("card number", re.compile(r"(?P<secret>\b\d(?:[ -]?\d){12,18}\b)"), luhn=True),
)

#: How a question asks for a secret's value, by kind ("What is the user's VPN password?", 「マイナンバーは？」).
#: No memory holds one (they are withheld before anything is stored), so no memory answers it.
SECRET_QUESTIONS: dict[str, re.Pattern[str]] = {
    "API key": re.compile(
        r"\b(?:api[ _-]?keys?|access[ _-]tokens?|auth(?:entication)?[ _-]tokens?|secret[ _-]keys?|client[ _-]secrets?)\b|"
        r"APIキー|API キー|アクセストークン|シークレットキー",
        re.I,
    ),
    "password": re.compile(r"\b(?:password|passwords|passcode|passwd|pass ?phrase)\b|パスワード|パスコード|合言葉", re.I),
    "PIN": re.compile(r"\b(?:pin|pin code|pin number|cvv|cvc|security code)\b|暗証番号|PINコード|セキュリティコード", re.I),
    "national identifier": re.compile(
        r"\b(?:ssn|social security(?: number)?|national insurance number|passport number|national id(?: number)?)\b|"
        r"マイナンバー|個人番号|パスポート(?:の)?番号|免許証(?:の)?番号",
        re.I,
    ),
    "card number": re.compile(r"\b(?:credit|debit) card (?:number|details)\b|\bcard number\b|カード(?:の)?番号", re.I),
}
_MARKER = "[withheld: {kind}]"
#: The category of an episode candidate whose message gave nothing but secrets: nothing is kept of it.
SECRETS_ONLY = "secrets-only"
_MARKER_RX = re.compile(r"\[withheld: [^\]]+\]")


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _secret_span(match: re.Match[str], rule: SecretRule) -> tuple[int, int] | None:
    """Where the secret of a match is (its named group that matched), if it is one."""
    for name, value in match.groupdict().items():
        if value is None or not name.startswith("secret"):
            continue
        if _MARKER_RX.match(match.string, match.start(name)):
            return None  # withheld already
        if rule.luhn:
            digits = re.sub(r"\D", "", value)
            if not (13 <= len(digits) <= 19 and _luhn(digits)):
                return None
        return match.span(name)
    return None


def redact_secrets(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with every secret withheld (``[withheld: password]`` in its place), and the kinds withheld.

    Deterministic and idempotent: a text withheld again stays as it is.
    """
    kinds: list[str] = []
    for rule in SECRET_RULES:
        pieces: list[str] = []
        position = 0
        for match in rule.pattern.finditer(text):
            span = _secret_span(match, rule)
            if span is None or span[0] < position:
                continue
            pieces += [text[position : span[0]], _MARKER.format(kind=rule.kind)]
            position = span[1]
            kinds.append(rule.kind)
        if pieces:
            text = "".join(pieces) + text[position:]
    return text, tuple(dict.fromkeys(kinds))


def asks_for_secret(question: str) -> str | None:
    """The kind of secret ``question`` asks the value of (:data:`SECRET_QUESTIONS`), or ``None``."""
    return next((kind for kind, pattern in SECRET_QUESTIONS.items() if pattern.search(question)), None)


def withheld(text: str) -> tuple[str, ...]:
    """The kinds of secret withheld in ``text`` (the markers :func:`redact_secrets` left), in order."""
    return tuple(dict.fromkeys(m.group()[len("[withheld: ") : -1] for m in _MARKER_RX.finditer(text)))


#: Where an English sentence joins statements ("My locker code is ... and I love green tea"). A Japanese
#: sentence goes whole: the part before 「、」 often names what the secret is for (「会社のメールのパスワード、…」).
_JOINS = re.compile(r"(,?\s+(?:and|but|so)\s+|;\s*)")


def without_secrets(text: str) -> str:
    """``text`` without the statements that gave a secret (withheld by :func:`redact_secrets`): what is
    left of such a statement would still say what the secret is for ("my wifi password is ..."). A
    sentence in English that joins statements keeps the others ("My PIN is ... and I love green tea" →
    "I love green tea.")."""
    if not _MARKER_RX.search(text):
        return text
    kept = []
    for sentence in split_sentences(text):
        if not _MARKER_RX.search(sentence):
            kept.append(sentence)
            continue
        pieces = _JOINS.split(sentence) if sentence.isascii() else [sentence]  # statement, join, ...
        clean = [pieces[i] for i in range(0, len(pieces), 2) if not _MARKER_RX.search(pieces[i])]
        if clean:
            rest = " and ".join(c.strip() for c in clean).strip()
            kept.append(rest[:1].upper() + rest[1:])
    return join_sentences(kept)
