"""Embeddings for the evaluations: the configured embedder, and vectors computed once and cached on disk."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.ports import ChatModel, Embedder, EmbedderWrapper
from memory_core.tools.progress import NO_PROGRESS, Progress

__all__ = [
    "DEFAULT_CACHE_DIR",
    "CachingEmbedder",
    "EvaluationModels",
    "add_cache_arguments",
    "add_llm_argument",
    "cached_embeddings",
    "default_embedder",
    "evaluation_models",
]

#: Where the evaluations keep their embedding caches (``--cache``).
DEFAULT_CACHE_DIR = ".memory-core/cache"


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """``--cache DIR`` and ``--no-cache``."""
    parser.add_argument("--cache", default=DEFAULT_CACHE_DIR, metavar="DIR", help="embedding cache folder")
    parser.add_argument("--no-cache", action="store_true")


def add_llm_argument(parser: argparse.ArgumentParser, also: str = "") -> None:
    """``--llm``: extract and consolidate with the configured chat model (:func:`evaluation_models` opens it)."""
    parser.add_argument(
        "--llm",
        action="store_true",
        help="extract and consolidate with the chat model MEMORY_LLM_PROVIDER configures" + also,
    )


def default_embedder() -> Any:
    """The embedder ``MEMORY_EMBEDDER`` names (default: the local e5 model), as the service would build it,
    without the query cache (evaluations call the model's synchronous batch methods themselves)."""
    from memory_core.bootstrap import build_embedder, load_settings

    return build_embedder(load_settings(query_cache_size=0))


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
    progress: Progress = NO_PROGRESS,
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
        progress: Where the embedding's progress is reported.
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
    parts: list[np.ndarray] = []
    plural = "passages" if kind == "passage" else "queries"
    with progress.bar(f"embedding {plural}", len(texts), unit=plural) as bar:
        for start in range(0, len(texts), batch):
            chunk = list(texts[start : start + batch])
            if hasattr(embedder, "passages_sync"):
                if kind == "passage":
                    parts.append(np.asarray(embedder.passages_sync(chunk), dtype=np.float32))
                else:
                    parts.append(_queries(embedder, chunk))
            else:
                parts.append(np.stack([np.asarray(embedder.embed_sync(t), dtype=np.float32) for t in chunk]))
            bar.update(start + len(chunk))
    matrix = np.concatenate(parts) if parts else np.zeros((0, embedder.dimensions), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, matrix)
        tmp.replace(path)
    return matrix


class CachingEmbedder(EmbedderWrapper):
    """An embedder that remembers passage vectors by text in a file (evaluation reruns are fast).

    Queries are not cached. Vectors are the wrapped embedder's, byte for byte.
    """

    def __init__(self, inner: Embedder, path: Path | None) -> None:
        super().__init__(inner)
        self.path = path
        self._vectors: dict[str, np.ndarray] = {}
        if path is not None and path.exists():
            data = np.load(path, allow_pickle=False)
            self._vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        self._dirty = False

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._vectors]
        if missing:
            fresh = await self.inner.embed_passages([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self._vectors[keys[i]] = np.asarray(vector, dtype=np.float32)
            self._dirty = True
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys])

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self._vectors)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self._vectors[k] for k in keys]))
        tmp.replace(self.path)
        self._dirty = False

    async def close(self) -> None:
        self.save()


@dataclass(frozen=True, slots=True)
class EvaluationModels:
    """The models an end-to-end evaluation runs with: the (cached) embedder, the one it wraps, its
    name, the chat model."""

    embedder: CachingEmbedder
    inner: Embedder
    name: str
    chat_model: ChatModel | None


@contextlib.asynccontextmanager
async def evaluation_models(args: argparse.Namespace, cache_name: str, command: str) -> AsyncIterator[EvaluationModels]:
    """The embedder (``args.embedder_instance``, else the default one) behind the passage cache
    ``<cache>/<cache_name>-passages-<embedder>.npz`` (none with ``--no-cache``), and with ``--llm`` the
    configured chat model; on exit the cache is saved and the chat model closed."""
    inner = getattr(args, "embedder_instance", None) or default_embedder()
    cache = None if args.no_cache else Path(args.cache) / f"{cache_name}-passages-{inner.name}.npz"
    embedder = CachingEmbedder(inner, cache)
    chat_model = None
    if args.llm:
        from memory_core.bootstrap import load_settings, require_chat_model

        chat_model = require_chat_model(load_settings(), f"{command} --llm")
    try:
        yield EvaluationModels(embedder, inner, inner.name, chat_model)
    finally:
        embedder.save()
        if chat_model is not None:
            await chat_model.close()
