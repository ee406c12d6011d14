"""The vector sets ``bench ann`` measures: the real e5 vectors of LoCoMo and JDD (embedded once and
cached), sets derived from them, and random unit vectors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from memory_core.tools.progress import NO_PROGRESS, Progress

__all__ = ["derived_from", "load_real_vectors", "random_unit", "read_texts"]

#: Queries of the real set: half LoCoMo questions, half JDD utterances.
_QUERY_COUNT = 200
#: Passages embedded per call.
_BATCH = 64


def read_texts(locomo: str | None, jdd: str | None) -> tuple[list[str], list[str]]:
    """The passages and queries of the real set.

    Args:
        locomo: Path of ``locomo10.json`` (conversations of sessions of turns with ``text``; the
            ``qa`` questions are the English queries).
        jdd: Path of ``jdd_topic1_dailylife.json`` (dialogues with ``utterances[{utterance}]``; every
            50th utterance is also a Japanese query).

    Returns:
        ``(passages, queries)``, in file order.
    """
    passages: list[str] = []
    queries: list[str] = []
    if locomo:
        samples = json.loads(Path(locomo).read_text(encoding="utf-8"))
        questions: list[str] = []
        for sample in samples:
            conversation = sample.get("conversation", {})
            for key, value in conversation.items():
                if key.startswith("session_") and isinstance(value, list):
                    passages.extend(str(turn["text"]) for turn in value if turn.get("text"))
            questions.extend(str(qa["question"]) for qa in sample.get("qa", []) if qa.get("question"))
        queries.extend(questions[:: max(1, len(questions) // (_QUERY_COUNT // 2))][: _QUERY_COUNT // 2])
    if jdd:
        dialogues = json.loads(Path(jdd).read_text(encoding="utf-8"))
        utterances = [
            str(u["utterance"]) for d in dialogues for u in d.get("utterances", []) if u.get("utterance")
        ]
        passages.extend(utterances)
        queries.extend(utterances[::50][: _QUERY_COUNT // 2])
    return passages, queries


def load_real_vectors(
    locomo: str | None,
    jdd: str | None,
    cache: str | None,
    *,
    threads: int = 2,
    progress: Progress = NO_PROGRESS,
) -> tuple[np.ndarray, np.ndarray]:
    """The e5 passage matrix and query matrix of the real set, from ``cache`` when it has them.

    The cache file names carry a hash of the texts, so a changed data file is embedded again.

    Args:
        locomo: Path of the LoCoMo file (or ``None``).
        jdd: Path of the JDD file (or ``None``).
        cache: Directory for the ``.npy`` files (``None``: no cache).
        threads: Embedder threads (``OMP_NUM_THREADS``).
        progress: Where the embedding progress goes.

    Returns:
        ``(passages, queries)``: float32 matrices of unit rows.
    """
    from memory_core.adapters.models.local_embedder import E5LocalEmbedder

    passages, queries = read_texts(locomo, jdd)
    digest = hashlib.sha256("\x00".join([*passages, "\x01", *queries]).encode()).hexdigest()[:16]
    paths = None
    if cache:
        Path(cache).mkdir(parents=True, exist_ok=True)
        paths = (Path(cache) / f"e5-passages-{digest}.npy", Path(cache) / f"e5-queries-{digest}.npy")
        if paths[0].exists() and paths[1].exists():
            return np.load(paths[0]), np.load(paths[1])
    embedder = E5LocalEmbedder(threads=threads)
    chunks: list[np.ndarray] = []
    bar = progress.bar("embedding", len(passages), unit="texts")
    for start in range(0, len(passages), _BATCH):
        chunks.append(embedder.passages_sync(passages[start : start + _BATCH]))
        bar.update(min(start + _BATCH, len(passages)))
    bar.finish()
    matrix = np.ascontiguousarray(np.vstack(chunks), dtype=np.float32)
    query_matrix = np.ascontiguousarray(
        np.vstack([embedder.query_sync(q) for q in queries]), dtype=np.float32
    )
    if paths is not None:
        np.save(paths[0], matrix)
        np.save(paths[1], query_matrix)
    return matrix, query_matrix


def derived_from(real: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` unit rows shaped like ``real``: ``(1 - w) a + w b + noise``, normalized.

    ``a`` and ``b`` are random rows of ``real``, ``w`` uniform in [0, 0.5], the noise Gaussian with
    0.01 per coordinate. At the size of the real e5 set this matches its neighbourhood statistics
    (median cosine to a random row 0.86 against 0.83, to the 1st / 10th / 50th neighbour 0.94 / 0.91
    / 0.90 against 0.94 / 0.92 / 0.91), so it stands in for a larger store of real sentences.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((n, real.shape[1]), dtype=np.float32)
    for start in range(0, n, 100_000):
        size = min(100_000, n - start)
        a = real[rng.integers(0, len(real), size)]
        b = real[rng.integers(0, len(real), size)]
        w = rng.uniform(0.0, 0.5, (size, 1)).astype(np.float32)
        block = (1 - w) * a + w * b + 0.01 * rng.standard_normal((size, real.shape[1]), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + size] = block
    return out


def random_unit(n: int, dims: int, seed: int) -> np.ndarray:
    """``n`` random unit float32 rows of ``dims`` (Gaussian, normalized)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, dims), dtype=np.float32)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - start), dims), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out
