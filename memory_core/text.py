"""Text analysis for the embedded keyword index (and the hashing embedder).

Text is NFKC-normalized and lower-cased. Latin letters and digits form words. Runs of Japanese and
other CJK characters (kanji, hiragana, katakana, hangul) become overlapping bigrams, the approach of
Lucene's CJK bigram filter: no dictionary is needed and nothing is split into single characters (a
run of one character is kept as that one-character word).

The keyword index goes one step further (:func:`index_terms`, :func:`query_terms`): English words of
ASCII letters are reduced by a light suffix stemmer (plural ``-s``/``-es``/``-ies``, ``-ing``, ``-ed``,
a final ``-e``), so "painted", "paints" and "painting" meet at "paint"; and a query drops a short list
of English function words (question words, articles, auxiliaries, pronouns) unless nothing else is
left. Japanese bigrams, digits and words of other scripts pass through unchanged. Measured on LoCoMo
retrieval (``docs/evaluation.md``): BM25 any@5 0.538 -> 0.607.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = [
    "ANALYZER_VERSION",
    "QUERY_STOPWORDS",
    "analyze",
    "index_terms",
    "normalize",
    "query_terms",
    "stem_english",
    "term_frequencies",
]

#: Changes whenever :func:`index_terms` would give other terms for the same text (stores re-index).
ANALYZER_VERSION = "2"

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


def term_frequencies(text: str) -> Counter[str]:
    return Counter(analyze(text))


def stem_english(word: str) -> str:
    """A light suffix stemmer for lower-case English words (other words are returned unchanged).

    Plural ``-ies`` -> ``-y``, ``-sses`` -> ``-ss``, a final ``-s`` (not ``-ss``/``-us``/``-is``),
    then ``-ing`` or ``-ed`` when a vowel remains before it (a doubled final consonant is undoubled),
    then a final ``-e``; words of three letters or fewer are kept.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3 and _VOWEL.search(stem):
            word = stem
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeioulsz":
                word = word[:-1]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


_VOWEL = re.compile(r"[aeiouy]")


def index_terms(text: str) -> list[str]:
    """Terms the keyword index stores for ``text``: :func:`analyze`, English words stemmed."""
    return [stem_english(t) for t in analyze(text)]


def query_terms(text: str) -> list[str]:
    """Terms a keyword query searches for: :func:`index_terms` without :data:`QUERY_STOPWORDS`.

    When every term is a stopword the query keeps them all (so "what was it" still searches).
    """
    terms = analyze(text)
    kept = [t for t in terms if t not in QUERY_STOPWORDS]
    return [stem_english(t) for t in (kept or terms)]
