"""Text analysis for the embedded keyword index (and the hashing embedder).

Text is NFKC-normalized and lower-cased. Latin letters and digits form words. Runs of Japanese and
other CJK characters (kanji, hiragana, katakana, hangul) become overlapping bigrams, the approach of
Lucene's CJK bigram filter: no dictionary is needed and nothing is split into single characters (a
run of one character is kept as that one-character word).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["analyze", "normalize", "term_frequencies"]

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
