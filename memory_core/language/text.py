"""Text analysis for the embedded keyword index (and the hashing embedder).

Text is NFKC-normalized and lower-cased. :func:`analyze` (the hashing embedder's features, and the
terms consolidation compares content words by) splits Latin words and turns runs of CJK characters into
overlapping bigrams, the approach of Lucene's CJK bigram filter. Consolidation finds a Japanese
statement's content words with the same morphological analysis as the index (:func:`japanese_words`).

The keyword index (:func:`index_terms`, :func:`query_terms`) analyses each language as itself:

* **Japanese** (a run with kana or kanji) by morphological analysis: SudachiPy with its small
  dictionary (split mode C), each word indexed by its normalized form, so inflections and spelling
  variants meet (食べたい / 食べます → 食べる, シュミレーション → シミュレーション, りんご → 林檎) and a word is
  one term, not the bigrams that straddle its neighbours. Punctuation is not indexed; a query also drops
  particles and auxiliary verbs (が, は, を, です, たい...), so it searches for what it is about.
* **English** and other alphabetic words: the Snowball English stemmer ("painted", "paints",
  "painting" → "paint"); a query drops a short list of function words (question words, articles,
  auxiliaries, pronouns) unless nothing else is left.
* **Hangul** and other CJK without kana or kanji: bigrams, as :func:`analyze`.

Measured in ``docs/evaluation.md`` (issue 13): on the Japanese set with distractors, keyword any@5 0.277
with bigrams, 0.338 analysed; on LoCoMo, keyword any@5 0.607 with the earlier hand-written stemmer,
0.614 with Snowball. :data:`ANALYZER_VERSION` changes whenever the terms of a text would: the embedded
store re-indexes its files on open.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from typing import Any

__all__ = [
    "ANALYZER_VERSION",
    "JAPANESE_RUN",
    "QUERY_STOPWORDS",
    "analyze",
    "has_japanese",
    "index_terms",
    "japanese_terms",
    "japanese_words",
    "normalize",
    "query_terms",
    "stem_english",
]

#: Changes whenever :func:`index_terms` would give other terms for the same text (stores re-index).
ANALYZER_VERSION = "3"

#: English function words a keyword query ignores (compared before stemming).
QUERY_STOPWORDS = frozenset(
    (
        "a an the and or of to in on at for with by from is are was were be been being do does did done "
        "what when where who whom whose which why how that this these those it its i you he she we they me "
        "him her us them my your his our their has have had will would can could should shall may might must "
        "about as into than then there here not no so if but just also very any some"
    ).split()
)

# Word characters that are not CJK: letters and digits of alphabetic scripts.
_CJK_RANGES = (
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana (includes the long vowel mark)
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\u3005\u3006\u3007"  # 々 〆 〇
)
_TOKEN = re.compile(rf"([{_CJK_RANGES}]+)|([^\W_{_CJK_RANGES}]+(?:['’][^\W_{_CJK_RANGES}]+)*)")


def normalize(text: str) -> str:
    """NFKC (full-width to half-width, compatibility forms) and lower case."""
    return unicodedata.normalize("NFKC", text).lower()


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` in order: lower-cased words and CJK bigrams."""
    terms: list[str] = []
    for cjk, word in _TOKEN.findall(normalize(text)):
        if cjk:
            if len(cjk) == 1:
                terms.append(cjk)
            else:
                terms.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
        else:
            if word.endswith(("'s", "’s")):
                word = word[:-2]
            terms.append(word.replace("’", "'"))
    return terms


@functools.lru_cache(maxsize=65536)
def stem_english(word: str) -> str:
    """The Snowball (Porter 2) English stem of a lower-case word; other words are returned unchanged.

    "painted", "paints", "painting" → "paint"; "parties" → "parti" (a stem is an index key, not a word).
    """
    if not word.isascii() or not word.isalpha():
        return word
    return str(_snowball().stemWord(word))


@functools.cache
def _snowball() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


# -- Japanese ------------------------------------------------------------------------------------

#: A run of Japanese: kana, kanji, the iteration marks and the long vowel mark.
JAPANESE_RUN = re.compile(r"[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005-\u3007]+")
#: Parts of speech that are never indexed (punctuation, space), and those a query leaves out.
_NOT_INDEXED = frozenset({"補助記号", "空白", "記号"})
_NOT_QUERIED = frozenset({"助詞", "助動詞"})
_LOCAL = threading.local()
#: Characters analysed at a time (4,096 characters of at most 4 bytes stay under the analyser's limit).
_PIECE = 4096


def _tokenizer() -> Any:
    """This thread's SudachiPy tokenizer (small dictionary, split mode C); built on first use."""
    tokenizer = getattr(_LOCAL, "tokenizer", None)
    if tokenizer is None:
        from sudachipy import Dictionary, SplitMode

        tokenizer = Dictionary(dict="small").tokenizer(mode=SplitMode.C)
        _LOCAL.tokenizer = tokenizer
    return tokenizer


def has_japanese(text: str) -> bool:
    """Whether ``text`` has kana or kanji (the script :func:`index_terms` analyses as Japanese)."""
    return JAPANESE_RUN.search(text) is not None


def japanese_words(text: str) -> list[tuple[str, str, str, str]]:
    """The words of a Japanese text as ``(surface, normalized form, part of speech, its subtype)``,
    punctuation left out (what :func:`japanese_terms` indexes; consolidation reads the parts of speech)."""
    tokenizer = _tokenizer()
    words = []
    # The analyser takes at most 48 KiB at a time: long texts go in pieces (a word cut at a piece's edge
    # is a small price for never failing).
    for start in range(0, len(text), _PIECE):
        for m in tokenizer.tokenize(text[start : start + _PIECE]):
            pos = m.part_of_speech()
            if pos[0] not in _NOT_INDEXED and m.surface().strip():
                words.append((m.surface(), m.normalized_form(), pos[0], pos[1]))
    return words


def japanese_terms(text: str, *, query: bool = False) -> list[str]:
    """Normalized forms of the words of a Japanese text (already :func:`normalize`-d), punctuation left
    out; with ``query``, particles and auxiliary verbs too (unless nothing else is left)."""
    words = [(normalized.lower(), pos) for _, normalized, pos, _ in japanese_words(text)]
    if query:
        content = [w for w, pos in words if pos not in _NOT_QUERIED]
        if content:
            return content
    return [w for w, _ in words]


def _terms(text: str, query: bool) -> list[str]:
    normalized = normalize(text)
    terms: list[str] = []
    position = 0
    for match in JAPANESE_RUN.finditer(normalized):
        terms.extend(_other_terms(normalized[position : match.start()], query))
        terms.extend(japanese_terms(match.group(0), query=query))
        position = match.end()
    terms.extend(_other_terms(normalized[position:], query))
    return terms


def _other_terms(text: str, query: bool) -> list[str]:
    words = analyze(text) if text.strip() else []
    if query:
        words = [w for w in words if w not in QUERY_STOPWORDS] or words
    return [stem_english(w) for w in words]


def index_terms(text: str) -> list[str]:
    """Terms the keyword index stores for ``text``: Japanese words by their normalized form, English
    words stemmed, other CJK as bigrams (see the module docstring)."""
    return _terms(text, query=False)


def query_terms(text: str) -> list[str]:
    """Terms a keyword query searches for: :func:`index_terms` without Japanese particles and auxiliaries
    and without :data:`QUERY_STOPWORDS` (each only when something else is left, so "what was it" and
    「それは？」 still search)."""
    return _terms(text, query=True)
