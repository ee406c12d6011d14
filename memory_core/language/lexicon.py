"""The bilingual lexicon (common objects under one key in English and Japanese, grouped by kind) and
the content words of a text: what consolidation compares two statements by."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_core.language.text import JAPANESE_RUN, japanese_words

__all__ = [
    "canonical",
    "content_units",
    "join_phrases",
    "lemma",
    "lexicon_group",
    "split_compounds",
]

#: Phrases that are one object: "morning person", "night owl".
_PHRASES = {"morning person": "morningperson", "early bird": "morningperson", "night owl": "nightowl"}
_PHRASES_RX = re.compile(r"\b(?:" + "|".join(_PHRASES) + r")\b")

# Words that carry no content of their own.
_STOP_EN = frozenset(
    """i i'm im me my mine myself we our us you your a an the to of in on at for with and or but is am are
    was were be been being do does did doing really very so much lot lots quite also too as well that this
    it its it's have has had having now anymore instead any more usually always often just actually still
    kind sort than rather would will i'd i'll i've i're there about from by all some going go get got
    things thing stuff one ones prefer like love enjoy hate dislike favorite favourite fan not don't
    no never can't cannot won't doesn't isn't aren't these days nowadays switched changed every finally
    recently already currently mostly""".split()
)


_STOP_JA_UNITS = frozenset(
    {
        "私",
        "僕",
        "俺",
        "自分",
        "わたし",
        "ぼく",
        "おれ",
        "もの",
        "こと",
        "の",
        "方",
        "ほう",
        "感じ",
        "最近",
        "今",
        "時",
        "本当",
        "全然",
        "結構",
        "少",
        "大変",
        "非常",
        "よく",
        "あまり",
        "たまに",
        "いつも",
        "時々",
        "ときどき",
        "ちょっと",
        "すごく",
        "めっちゃ",
        "余り",
        "良く",
    }
)


# A small bilingual lexicon. Each group holds alike objects (one slot: drinks, seats, cities...);
# each entry lists the words of one object in English and Japanese, the first word being its key.
# Two statements that differ by two objects of one group name different choices in the same slot;
# words of one entry are the same object (a restatement in the other language is not a change).
# A group marked "!" holds exclusive choices (a seat is by the window or by the aisle): liking one
# of them replaces liking another; in other groups likings accumulate (tea and coffee).
_LEXICON: tuple[str, ...] = (
    "coffee コーヒー 珈琲|tea 紅茶|green-tea 緑茶 お茶|hojicha ほうじ茶|matcha 抹茶|cocoa ココア|"
    "juice ジュース|beer ビール|wine ワイン|sake 日本酒|shochu 焼酎|whisky whiskey ウイスキー|water 水|"
    "milk 牛乳 ミルク|latte ラテ|espresso エスプレッソ",
    "!window 窓側 窓際|aisle 通路側|front 前方|back 後方",
    "ryokan 旅館|hotel ホテル|minshuku 民宿|hostel ゲストハウス hostel|airbnb|inn",
    "shinkansen 新幹線|plane 飛行機 flight|train 電車|bus バス|car 車|ferry フェリー",
    "dog 犬|cat 猫",
    "!vegetarian ベジタリアン 菜食|vegan ヴィーガン ビーガン|pescatarian",
    "!japanese-style 和室|western-style 洋室|non-smoking 禁煙|smoking 喫煙",
    "!single シングル|double ダブル|twin ツイン",
    "japanese-food 和食|western-food 洋食|chinese-food 中華|italian イタリアン|french フレンチ|"
    "sushi 寿司 すし|ramen ラーメン|soba 蕎麦 そば|udon うどん|curry カレー|yakiniku 焼肉|pizza ピザ|"
    "pasta パスタ|burger バーガー ハンバーガー",
    "pork 豚肉 豚 ポーク|beef 牛肉 牛 ビーフ|chicken 鶏肉 鶏 チキン|lamb ラム 羊肉",
    "!morning-person 朝型 morningperson 早起 早起き|night-owl 夜型 nightowl 夜更 夜更かし",
    "tokyo 東京|osaka 大阪|kyoto 京都|sapporo 札幌|fukuoka 福岡|nagoya 名古屋|yokohama 横浜|kobe 神戸|"
    "sendai 仙台|hiroshima 広島|naha 那覇|okinawa 沖縄|hokkaido 北海道|kanazawa 金沢|nara 奈良|"
    "hakone 箱根|london ロンドン|paris パリ|seattle シアトル|new-york ニューヨーク",
    "summer 夏|winter 冬|spring 春|autumn fall 秋",
    "mountain 山|sea 海|beach ビーチ 砂浜",
    "japanese-language 日本語|english 英語|chinese 中国語|korean 韓国語",
)


#: The same thing in both languages (no slot): words that only canonicalize.
_SYNONYMS: tuple[str, ...] = (
    "seat 席 座席",
    "room 部屋",
    "food 料理 食べ物",
    "drink 飲み物",
    "trip 旅行",
    "live 住 住む 住まい 引越 引っ越し moved move moving relocated",
    "work 勤め 勤める 勤務 働 働く",
    "name 名前",
    "birthday 誕生日",
    "kid 子供 子ども",
    "lesson レッスン",
    "apply application applying applied 応募",
)


def _build_lexicon() -> tuple[dict[str, str], dict[str, int]]:
    canonical: dict[str, str] = {}
    group_of: dict[str, int] = {}
    for index, group in enumerate(_LEXICON):
        for entry in group.removeprefix("!").split("|"):
            words = entry.split()
            key = "≡" + words[0]
            group_of[key] = index
            for word in words:
                canonical[word] = key
    for entry in _SYNONYMS:
        words = entry.split()
        for word in words:
            canonical[word] = "≡" + words[0]
    return canonical, group_of


_CANONICAL, _GROUP_OF = _build_lexicon()
#: The groups of exclusive choices (marked "!").
_EXCLUSIVE = frozenset(index for index, group in enumerate(_LEXICON) if group.startswith("!"))


#: Lexicon words (two characters or more) found inside a longer run of kanji or katakana: 京都旅行 is
#: 京都 + 旅行. Single characters are never split out (車 is not in 自転車).
_LEXICON_CJK_RX = re.compile(
    "|".join(
        re.escape(word)
        for word in sorted(_CANONICAL, key=len, reverse=True)
        if len(word) >= 2 and not word.isascii()
    )
)


def split_compounds(units: Sequence[str]) -> list[str]:
    """``units`` with the lexicon words inside a longer Japanese unit split out (京都旅行 → 京都, 旅行)."""
    out: list[str] = []
    for unit in units:
        if unit.isascii() or unit in _CANONICAL:
            out.append(unit)
            continue
        position = 0
        for match in _LEXICON_CJK_RX.finditer(unit):
            if match.start() > position:
                out.append(unit[position : match.start()])
            out.append(match.group(0))
            position = match.end()
        if position < len(unit):
            out.append(unit[position:])
    return out


def canonical(unit: str) -> str:
    """The lexicon key of a word (``≡coffee`` for コーヒー and coffee), or the word itself."""
    return _CANONICAL.get(unit, unit)


_LATIN_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")


def lemma(word: str) -> str:
    """An English word without its plural ending ("cities" → "city", "cats" → "cat"; not "glass")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


#: Parts of speech that carry no content of their own in a statement.
_FUNCTION_POS = frozenset({"助詞", "助動詞", "接続詞", "感動詞", "代名詞", "連体詞"})


def content_units(text: str) -> list[str]:
    """The content words of a (normalized) text in order: English words without stop words and plural
    endings, Japanese ones by morphological analysis (:func:`_japanese_units`)."""
    units: list[str] = []
    for piece in re.split(r"[^\w'’\u3005-\u3007\u30fc]+", text):
        if not piece:
            continue
        position = 0
        for match in JAPANESE_RUN.finditer(piece):
            units.extend(_latin_units(piece[position : match.start()]))
            units.extend(_japanese_units(match.group(0)))
            position = match.end()
        units.extend(_latin_units(piece[position:]))
    return units


def _latin_units(text: str) -> list[str]:
    units: list[str] = []
    for word in _LATIN_WORD.findall(text):
        word = word.replace("’", "'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in _STOP_EN and not word.isdigit():
            units.append(lemma(word))
    return units


def _japanese_units(text: str) -> list[str]:
    """Content words of a Japanese segment by morphological analysis (:func:`~memory_core.language.text.japanese_words`):
    a run of nouns is one unit as written (通路 + 側 → 通路側; the lexicon splits 京都旅行 again), verbs
    and adjectives by their normalized base form (住んで → 住む), function words and dependent verbs
    (いる, する) left out."""
    units: list[str] = []
    noun = ""
    for surface, normalized, pos, subtype in japanese_words(text):
        if pos in ("名詞", "接頭辞") or (pos == "接尾辞" and noun):
            noun += surface
            continue
        if noun:
            units.append(noun)
            noun = ""
        if pos in _FUNCTION_POS or pos == "接尾辞" or subtype == "非自立可能":
            continue
        units.append(normalized)
    if noun:
        units.append(noun)
    return [u for u in units if u not in _STOP_JA_UNITS]


def lexicon_group(unit: str) -> int | None:
    """The lexicon group of a unit's key (drinks, seats, cities...), or ``None`` outside the lexicon."""
    return _GROUP_OF.get(unit)


def exclusive_group(unit: str) -> bool:
    """Whether a unit's key belongs to a group of exclusive choices (seats, room types, diets...)."""
    return _GROUP_OF.get(unit) in _EXCLUSIVE


def join_phrases(text: str) -> str:
    """``text`` (lower case) with the phrases that name one object written as one word ("night owl" →
    "nightowl")."""
    return _PHRASES_RX.sub(lambda m: _PHRASES[m.group(0)], text)
