"""Helpers shared by the evaluations and the benchmarks: progress bars, tables, charts, caches.

Charts need matplotlib, which is an optional extra (``pip install 'memory-core[bench]'``); it is
imported only when a chart is drawn, with the Agg backend, so nothing needs a display.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

__all__ = [
    "DEFAULT_CACHE_DIR",
    "MATPLOTLIB_HINT",
    "Progress",
    "cached_embeddings",
    "default_embedder",
    "file_sha256",
    "markdown_table",
    "percentile",
    "publish_report",
    "pyplot",
]

logger = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = ".memory-core/cache"
MATPLOTLIB_HINT = (
    "charts need matplotlib: pip install 'memory-core[bench]' (or pip install matplotlib); "
    "the tables and JSON were written without them"
)


class Progress:
    """A one-line text progress bar, redrawn at most every ``every`` seconds.

    Args:
        out: Where to draw (a terminal or any text stream).
        what: The label in front of the bar.
        total: The count that means done.
        every: Minimum seconds between redraws.
    """

    def __init__(self, out: TextIO, what: str, total: int, *, every: float = 0.25) -> None:
        self._out = out
        self._what = what
        self._total = max(int(total), 1)
        self._every = every
        self._started = time.perf_counter()
        self._drawn = -1.0
        self.done = 0

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def update(self, done: int) -> None:
        """Set the count done so far (redraws if enough time passed)."""
        self.done = done
        now = time.perf_counter()
        if now - self._drawn >= self._every:
            self._drawn = now
            self._draw()

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def _draw(self, end: str = "") -> None:
        width = 30
        filled = int(width * min(self.done, self._total) / self._total)
        rate = self.done / self.elapsed if self.elapsed > 0 else 0.0
        self._out.write(
            f"\r{self._what}: [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self._total} "
            f"{self.elapsed:6.1f}s {rate:9.0f}/s{end}"
        )
        self._out.flush()

    def finish(self) -> None:
        """Draw the final state and end the line."""
        self._draw("\n")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); NaN for no values."""
    if not len(values):
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table; floats are printed with ``digits`` decimals."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.{digits}f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend, or None (with a warning) if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("%s", MATPLOTLIB_HINT)
        return None
    return plt


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def publish_report(
    report: dict[str, Any],
    args: Any,
    out: TextIO,
    render: Callable[[Mapping[str, Any]], str],
    draw: Callable[[Mapping[str, Any], str], list[str]],
) -> None:
    """Finish an evaluation: add the machine, print the Markdown, write ``--output`` and ``--charts``."""
    from ..bench import machine_context, write_json

    report["machine"] = machine_context()
    out.write("\n" + render(report))
    write_json(args.output, report)
    if args.charts:
        written = draw(report, args.charts)
        out.write(("charts: " + ", ".join(written) + "\n") if written else f"{MATPLOTLIB_HINT}\n")


def default_embedder() -> Any:
    """The embedder ``MEMORY_EMBEDDER`` names (default: the local e5 model), as the service would build it."""
    from ..bootstrap import build_embedder, load_settings

    return build_embedder(load_settings())


def _queries(embedder: Any, texts: list[str]) -> np.ndarray:
    """Query embeddings of a batch: one engine call when the e5 engine is reachable, else one by one."""
    load = getattr(embedder, "_load", None)
    lock = getattr(embedder, "_lock", None)
    if callable(load) and lock is not None:
        model = load()
        with lock:
            matrix = model.query(list(texts))
        return np.asarray(matrix, dtype=np.float32).reshape(len(texts), -1)
    return np.stack([np.asarray(embedder.query_sync(t), dtype=np.float32) for t in texts])


def cached_embeddings(
    embedder: Any,
    texts: Sequence[str],
    *,
    kind: str,
    cache_dir: str | Path | None,
    key: str,
    out: TextIO | None = None,
    batch: int = 64,
) -> np.ndarray:
    """Embeddings of ``texts`` (``kind`` is ``"passage"`` or ``"query"``), computed once and cached.

    The cache file is named by ``key`` (e.g. the data file's hash), the embedder's name and a hash of
    the texts themselves, so a changed text or model never reuses stale vectors.

    Args:
        embedder: An object with ``passages_sync``/``query_sync`` (the e5 embedder), or ``embed_sync``
            (the hashing embedder).
        texts: The texts, in order.
        kind: ``"passage"`` or ``"query"``.
        cache_dir: Folder for ``.npy`` files; None disables the cache.
        key: A stable prefix for the file name.
        out: Where to draw a progress bar (None: no bar).
        batch: Passages per call.
    """
    if kind not in {"passage", "query"}:
        raise ValueError("kind must be 'passage' or 'query'")
    digest = hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()[:16]
    name = f"{key}-{embedder.name}-{kind}-{digest}.npy".replace("/", "_")
    path = Path(cache_dir) / name if cache_dir else None
    if path is not None and path.exists():
        cached: np.ndarray = np.load(path)
        if cached.shape[0] == len(texts):
            return cached
    progress = Progress(out, f"embedding {kind}s", len(texts)) if out is not None else None
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), batch):
        chunk = list(texts[start : start + batch])
        if hasattr(embedder, "passages_sync"):
            if kind == "passage":
                parts.append(np.asarray(embedder.passages_sync(chunk), dtype=np.float32))
            else:
                parts.append(_queries(embedder, chunk))
        else:
            parts.append(np.stack([np.asarray(embedder.embed_sync(t), dtype=np.float32) for t in chunk]))
        if progress is not None:
            progress.update(start + len(chunk))
    if progress is not None:
        progress.finish()
    matrix = np.concatenate(parts) if parts else np.zeros((0, embedder.dimensions), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, matrix)
        tmp.replace(path)
    return matrix
