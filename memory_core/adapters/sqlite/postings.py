"""A field's inverted index in compressed sparse rows, and the entries it is built from."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["FieldPostings", "term_entries"]


class FieldPostings:
    """One field's inverted index in compressed sparse rows: term ``t``'s documents are
    ``docs[offsets[t]:offsets[t + 1]]`` with the term frequencies beside them in ``tfs``."""

    __slots__ = ("docs", "offsets", "tfs", "vocabulary")

    def __init__(
        self, vocabulary: dict[str, int], offsets: np.ndarray, docs: np.ndarray, tfs: np.ndarray
    ) -> None:
        self.vocabulary = vocabulary
        self.offsets = offsets
        self.docs = docs
        self.tfs = tfs

    @classmethod
    def empty(cls) -> FieldPostings:
        return cls(
            {}, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)
        )

    @classmethod
    def from_entries(
        cls, vocabulary: dict[str, int], term_ids: np.ndarray, docs: np.ndarray, tfs: np.ndarray
    ) -> FieldPostings:
        """Postings from ``(term id, document, tf)`` entries; terms left without entries are dropped."""
        counts = (
            np.bincount(term_ids, minlength=len(vocabulary)) if len(vocabulary) else np.zeros(0, np.int64)
        )
        alive = counts > 0
        if not alive.all():
            renumber = np.cumsum(alive) - 1
            terms = [t for t, i in vocabulary.items() if alive[i]]
            vocabulary = {t: i for i, t in enumerate(terms)}
            term_ids = renumber[term_ids]
            counts = counts[alive]
        by_term = np.argsort(term_ids, kind="stable")
        offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(vocabulary, offsets, docs[by_term].astype(np.int32), tfs[by_term].astype(np.float64))

    def lookup(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents, term frequencies) holding ``term``, or ``None``."""
        at = self.vocabulary.get(term)
        if at is None:
            return None
        start, end = int(self.offsets[at]), int(self.offsets[at + 1])
        return self.docs[start:end], self.tfs[start:end]

    def term_ids(self) -> np.ndarray:
        """The term id of every entry (entries are grouped by term)."""
        result: np.ndarray = np.repeat(np.arange(len(self.vocabulary), dtype=np.int64), np.diff(self.offsets))
        return result


def term_entries(
    positions: Sequence[int], counts: Sequence[dict[str, int]], vocabulary: dict[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(term id, document, tf)`` arrays of documents' term counts, adding new terms to ``vocabulary``."""
    terms: list[str] = []
    tfs: list[int] = []
    for document in counts:
        terms.extend(document)
        tfs.extend(document.values())
    for term in dict.fromkeys(terms):
        vocabulary.setdefault(term, len(vocabulary))
    sizes = np.fromiter(map(len, counts), np.int64, len(counts))
    return (
        np.fromiter(map(vocabulary.__getitem__, terms), np.int64, len(terms)),
        np.repeat(np.asarray(positions, dtype=np.int64), sizes),
        np.asarray(tfs, dtype=np.float64),
    )
