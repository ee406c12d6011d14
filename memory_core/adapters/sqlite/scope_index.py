"""One scope's search structures for the embedded store, kept current row by row and persisted.

A :class:`ScopeIndex` holds what ranking needs of a scope's memories, column by column: ids and row
keys, the numeric fields (filters, ranking profiles, ``order_by``), a matrix of unit vectors and, per
searchable field, an inverted index. Rows are not kept: the few a search returns are read back by row
key (:meth:`ScopeIndex.missing_rows`), so a large scope costs its columns, not its texts.

The inverted index of a field is a frozen *base* in compressed sparse rows (one array of documents and
one of term frequencies, grouped by term, and each term's offsets into them) plus the documents whose
terms changed since (*changed*): their base entries are masked and their current terms indexed apart.
When the changed documents outgrow a sixteenth of the scope the two are merged in one vectorised pass
(:meth:`ScopeIndex.compact`). A write that only touches numbers (a recall, forgetting) changes no
postings at all, so a large scope under ingestion pays for what changed, not for its size.

A large scope's structures are persisted in the store file (:meth:`ScopeIndex.to_bytes`, a NumPy
archive without pickled objects) and loaded with the vectors from the rows instead of being rebuilt
(:meth:`ScopeIndex.from_bytes`); the rows changed since are applied on top like any refresh.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.adapters.sqlite.postings import FieldPostings, term_entries
from memory_core.adapters.sqlite.schema import AT, RECORD_COLUMNS, row_to_record
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.language.text import ANALYZER_VERSION

__all__ = [
    "NUMERIC_COLUMNS",
    "SEARCH_FIELDS",
    "SNAPSHOT_FORMAT",
    "STATUS_CODES",
    "ScopeIndex",
    "SnapshotError",
]

SEARCH_FIELDS = ("memory", "summary", "category")
#: Numeric fields, held as columns (filters, ranking profiles, ``order_by``).
NUMERIC_COLUMNS = tuple(c.name for c in RECORD_COLUMNS if c.kind in ("real", "integer", "time"))
STATUS_CODES = {MemoryStatus.ACTIVE: 0, MemoryStatus.ARCHIVED: 1, MemoryStatus.DELETED: 2}
#: Version of :meth:`ScopeIndex.to_bytes`' layout; another version is rebuilt from the rows.
SNAPSHOT_FORMAT = 2
_STATUS_BY_VALUE = {status.value: code for status, code in STATUS_CODES.items()}
_SEPARATOR = "\x00"
#: Records of recent hits held per scope (their rows are read again after that).
_RECORDS_HELD = 2048


class SnapshotError(ValueError):
    """A persisted scope index that cannot be used (another format, analyzer or scope; damaged)."""


def _rank_of_ids(ids: Sequence[str]) -> np.ndarray:
    """Each id's rank among ``ids`` (0: the smallest); ids in order (a build reads rows by id) cost no sort."""
    if all(ids[i] < ids[i + 1] for i in range(len(ids) - 1)):
        return np.arange(len(ids), dtype=np.int64)
    order = np.argsort(_objects(ids), kind="stable")
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids), dtype=np.int64)
    return ranks


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A one-dimensional object array of ``values`` (strings stay whole)."""
    result = np.empty(len(values), dtype=object)
    result[:] = values
    return result


def _joined(strings: Sequence[str], what: str) -> np.ndarray:
    text = _SEPARATOR.join(strings)
    if text.count(_SEPARATOR) != max(len(strings) - 1, 0):
        raise SnapshotError(f"a {what} holds a NUL character")
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def _split(data: np.ndarray, count: int, what: str) -> list[str]:
    if count == 0:
        return []
    strings = data.tobytes().decode("utf-8").split(_SEPARATOR)
    if len(strings) != count:
        raise SnapshotError(f"{what}: {len(strings)} strings where {count} were expected")
    return strings


def _snapshot_meta(archive: Any, *, epoch: int, dims: int | None) -> dict[str, Any]:
    """A snapshot's header, refused when another format, analyzer, epoch or embedding size wrote it."""
    meta: dict[str, Any] = json.loads(archive["meta"].tobytes().decode("utf-8"))
    if meta.get("format") != SNAPSHOT_FORMAT or meta.get("analyzer") != ANALYZER_VERSION:
        raise SnapshotError("written by another format or analyzer version")
    if meta.get("epoch") != epoch:
        raise SnapshotError("of an earlier epoch of the scope")
    if dims is not None and meta.get("dims") not in (0, dims):
        raise SnapshotError("of another embedding size")
    return meta


def _load_postings(archive: Any, name: str, terms_count: int, n: int) -> FieldPostings:
    """Field ``name``'s postings from a snapshot, refused when they do not fit ``n`` documents."""
    terms = _split(archive[f"terms.{name}"], terms_count, "terms")
    offsets = np.asarray(archive[f"offsets.{name}"], dtype=np.int64)
    docs = np.asarray(archive[f"docs.{name}"], dtype=np.int32)
    fits = len(offsets) == len(terms) + 1 and int(offsets[0]) == 0 and int(offsets[-1]) == len(docs)
    fits = fits and bool(np.all(np.diff(offsets) >= 0))
    if not fits or (len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= n)):
        raise SnapshotError(f"postings of {name} do not fit")
    return FieldPostings(
        {term: at for at, term in enumerate(terms)},
        offsets,
        docs,
        np.asarray(archive[f"tfs.{name}"], dtype=np.float64),
    )


class ScopeIndex:
    """The search structures of one scope (see the module docstring).

    Attributes:
        version: The scope's change sequence (``scope_versions.version``) the index reflects.
        epoch: The scope's epoch (bumped when rows were removed or re-indexed): another epoch means
            another index.
        checked_at: The database change marker at which the index was last known to be current.
        persisted: Whether the store file holds these structures as of ``version`` (or older ones that
            are still worth loading); a large scope that is not gets persisted after a search.
    """

    def __init__(self, version: int, epoch: int) -> None:
        self.version = version
        self.epoch = epoch
        self.checked_at: tuple[int, int] = (-1, -1)
        self.persisted = False
        #: When this process last saved the index (``time.monotonic()``), if it did.
        self.saved_at: float | None = None
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self.pks = np.zeros(0, dtype=np.int64)
        self.columns: dict[str, np.ndarray] = {name: np.zeros(0, dtype=np.float64) for name in NUMERIC_COLUMNS}
        self.columns["status"] = np.zeros(0, dtype=np.int8)
        self.columns["_category"] = np.zeros(0, dtype=object)
        self.columns["_kind"] = np.zeros(0, dtype=object)
        self.dims = 0
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self.has_vector = np.zeros(0, dtype=bool)
        self.fields: dict[str, FieldPostings] = {name: FieldPostings.empty() for name in SEARCH_FIELDS}
        self.lengths: dict[str, np.ndarray] = {name: np.zeros(0, dtype=np.float64) for name in SEARCH_FIELDS}
        #: Documents whose base postings are outdated; their current terms are in ``changed``.
        self.stale = np.zeros(0, dtype=bool)
        self.changed: dict[int, dict[str, dict[str, int]]] = {}
        self._changed_postings: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] | None = None
        #: ``hash`` of each document's terms as stored (0: not known, e.g. loaded from a snapshot).
        self._signatures: list[int] = []
        self._rows: dict[int, Sequence[Any]] = {}
        self._records: dict[int, MemoryRecord] = {}
        self._id_rank: np.ndarray | None = None
        #: BM25 term weights ``tf / (tf + k1 (1 - b + b dl / avgdl))`` per field and term, for one avgdl.
        self.weights: dict[str, tuple[float, dict[str, tuple[np.ndarray, np.ndarray]]]] = {}
        #: Positions whose vectors were set since an approximate index copied them (``None``: not tracked).
        self.vectors_changed: set[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    # -- reading ------------------------------------------------------------------------------------
    @property
    def vectors(self) -> np.ndarray:
        """The unit vectors, one row per document (zeros where a document has none)."""
        return self._matrix[: len(self.ids)]

    @property
    def id_rank(self) -> np.ndarray:
        """Rank of each document's id among the scope's ids (ties in score are broken by id)."""
        if self._id_rank is None or len(self._id_rank) != len(self.ids):
            self._id_rank = _rank_of_ids(self.ids)
        return self._id_rank

    def id_ranks(self, positions: np.ndarray) -> np.ndarray:
        """Ranks that order ``positions`` by id (to break ties in score).

        The ranks of every id are kept for the documents indexed when they were last computed (a
        build, a load, a compaction); a set that holds a document added since is ranked on its own.
        """
        ranked = self._id_rank
        if ranked is not None and (not len(positions) or int(positions.max()) < len(ranked)):
            result: np.ndarray = ranked[positions]
            return result
        return _rank_of_ids([self.ids[at] for at in positions.tolist()])

    def posting(self, name: str, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents, term frequencies) of ``term`` in field ``name``, or ``None`` when no document has it."""
        base = self.fields[name].lookup(term)
        if base is not None and self.changed:
            keep = ~self.stale[base[0]]
            base = (base[0][keep], base[1][keep]) if not keep.all() else base
        if self.changed:
            if self._changed_postings is None:
                self._changed_postings = self._index_changed()
            extra = self._changed_postings[name].get(term)
            if extra is not None:
                if base is None or not len(base[0]):
                    return extra
                return np.concatenate((base[0], extra[0])), np.concatenate((base[1], extra[1]))
        return base if base is not None and len(base[0]) else None

    def _index_changed(self) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
        result: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        for name in SEARCH_FIELDS:
            grouped: dict[str, tuple[list[int], list[float]]] = {}
            for at, terms in self.changed.items():
                for term, tf in terms.get(name, {}).items():
                    docs, tfs = grouped.setdefault(term, ([], []))
                    docs.append(at)
                    tfs.append(float(tf))
            result[name] = {
                term: (np.asarray(docs, dtype=np.int32), np.asarray(tfs, dtype=np.float64))
                for term, (docs, tfs) in grouped.items()
            }
        return result

    def missing_rows(self, positions: Iterable[int]) -> list[int]:
        """Row keys of the documents among ``positions`` whose record is not held (to be read back)."""
        return [int(self.pks[at]) for at in positions if at not in self._records and at not in self._rows]

    def add_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Hold rows read back by :meth:`missing_rows`' keys (rows of other documents are ignored)."""
        for row in rows:
            at = self.position.get(str(row[AT["id"]]))
            if at is not None and int(self.pks[at]) == int(row[AT["pk"]]):
                self._rows[at] = row

    def record(self, at: int) -> MemoryRecord | None:
        """The record (without its embedding) of one document, if its row is held."""
        record = self._records.get(at)
        if record is None:
            row = self._rows.pop(at, None)
            if row is None:
                return None
            if len(self._records) >= _RECORDS_HELD:
                self._records.clear()  # the records of recent hits, not of the scope
            record = self._records[at] = row_to_record(row, with_embedding=False)
        return record

    # -- changing -----------------------------------------------------------------------------------
    def apply(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Add or replace documents from selected rows (``SELECT_LIST`` order).

        Returns:
            Whether the terms of a document that was already indexed changed.
        """
        if not rows:
            return False
        n_before = len(self.ids)
        slots: list[int] = []
        appended = 0
        id_at, terms_at = AT["id"], AT["terms"]
        texts: list[tuple[int, str]] = []  # documents whose terms are new or changed, with their terms
        signatures = self._signatures
        for row in rows:
            memory_id = str(row[id_at])
            at = self.position.get(memory_id)
            if at is None:
                at = self.position[memory_id] = len(self.ids)
                self.ids.append(memory_id)
                signatures.append(0)
                appended += 1
            slots.append(at)
            raw = row[terms_at]
            signature = hash(raw)
            if signature != signatures[at] or at >= n_before:
                signatures[at] = signature
                texts.append((at, raw))
            self._records.pop(at, None)
            self._rows.pop(at, None)
        n = len(self.ids)
        where = np.asarray(slots, dtype=np.int64)
        if appended:
            self.pks = np.concatenate((self.pks, np.zeros(appended, dtype=np.int64)))
            self.stale = np.concatenate((self.stale, np.zeros(appended, dtype=bool)))
            for name in SEARCH_FIELDS:
                self.lengths[name] = np.concatenate((self.lengths[name], np.zeros(appended)))
        self.pks[where] = [int(r[AT["pk"]]) for r in rows]
        self._set_columns(where, rows, appended)
        self._set_vectors(where, [r[AT["embedding"]] for r in rows], n)
        if texts:
            self._index_texts(texts, into_base=not n_before and not self.changed)
        return any(at < n_before for at, _ in texts)

    def _index_texts(self, texts: Sequence[tuple[int, str]], *, into_base: bool) -> None:
        """Index documents' new terms (stored JSON): straight into the base postings when the index
        was empty (a cold load), else as changed documents over the base."""
        positions = [at for at, _ in texts]
        parsed: list[dict[str, dict[str, int]]] = json.loads("[" + ",".join(raw for _, raw in texts) + "]")
        where = np.asarray(positions, dtype=np.int64)
        for name in SEARCH_FIELDS:
            counts = [terms.get(name, {}) for terms in parsed]
            if into_base:
                vocabulary: dict[str, int] = {}
                term_ids, docs, tfs = term_entries(positions, counts, vocabulary)
                self.fields[name] = FieldPostings.from_entries(vocabulary, term_ids, docs, tfs)
                self.lengths[name][where] = np.bincount(docs, weights=tfs, minlength=len(self.ids))[where]
            else:
                self.lengths[name][where] = np.fromiter((sum(c.values()) for c in counts), np.float64, len(counts))
        if into_base:
            self._id_rank = _rank_of_ids(self.ids)
            return
        for at, terms in zip(positions, parsed, strict=True):
            self.changed[at] = terms
        self.stale[where] = True
        self._changed_postings = None
        self.weights = {}
        if len(self.changed) > max(1024, len(self.ids) // 16):
            self.compact()

    def _set_columns(self, where: np.ndarray, rows: Sequence[Sequence[Any]], appended: int) -> None:
        count = len(rows)
        nan = math.nan
        values: dict[str, np.ndarray] = {}
        for name in NUMERIC_COLUMNS:
            at = AT[name]
            values[name] = np.fromiter((nan if r[at] is None else r[at] for r in rows), np.float64, count)
        status, category, kind = AT["status"], AT["category"], AT["kind"]
        values["status"] = np.fromiter((_STATUS_BY_VALUE[r[status]] for r in rows), np.int8, count)
        values["_category"] = _objects([r[category] for r in rows])
        values["_kind"] = _objects([r[kind] for r in rows])
        for name, column in values.items():
            current = self.columns[name]
            if appended:
                current = np.concatenate((current, np.zeros(appended, dtype=current.dtype)))
            current[where] = column
            self.columns[name] = current

    def _set_vectors(self, where: np.ndarray, blobs: Sequence[Any], n: int) -> None:
        """Vectors (float32 blobs, ``None``: none) of documents at ``where``; the matrix grows by half."""
        vectors = [None if b is None else bytes(b) for b in blobs]
        before = self._vectors_at(where) if self.vectors_changed is not None and self.dims else None
        fits = self._fitting(vectors, n)
        if not len(self._matrix) and len(fits) == n == len(vectors):
            self._load_matrix(where, vectors, n)
            return
        self._grow_matrix(n)
        self._write_vectors(where, vectors, fits)
        if before is not None:
            self._note_changed_vectors(where, before)

    def _fitting(self, vectors: Sequence[bytes | None], n: int) -> list[int]:
        """Which of ``vectors`` have the store's size (the first sets it); ``has_vector`` grown to ``n``.

        Raises:
            ValueError: A blob that is not a float32 array.
        """
        for blob in vectors:
            if blob is not None and len(blob) % 4:
                np.frombuffer(blob, dtype=np.float32)  # raises: not a float32 array
        if not self.dims:
            self.dims = next((len(v) // 4 for v in vectors if v), 0)
            self._matrix = np.zeros((0, self.dims), dtype=np.float32)
        if n > len(self.has_vector):
            self.has_vector = np.concatenate((self.has_vector, np.zeros(n - len(self.has_vector), dtype=bool)))
        size = 4 * self.dims
        return [i for i, v in enumerate(vectors) if v is not None and len(v) == size and size]

    def _vectors_at(self, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The vectors at ``where`` and whether each had one (zeros and ``False`` past the end)."""
        known = where < len(self.has_vector)
        old = np.zeros((len(where), self.dims), dtype=np.float32)
        old[known] = self._matrix[where[known]]
        had = np.zeros(len(where), dtype=bool)
        had[known] = self.has_vector[where[known]]
        return old, had

    def _load_matrix(self, where: np.ndarray, vectors: Sequence[bytes | None], n: int) -> None:
        """A cold load: the joined blobs are the matrix, with no per-document copy (read-only until
        written to, when it is copied once)."""
        order = np.argsort(where)
        joined = b"".join(vectors[i] or b"" for i in order)
        self._matrix = np.frombuffer(joined, dtype=np.float32).reshape(n, self.dims)
        self.has_vector[:] = True

    def _grow_matrix(self, n: int) -> None:
        """Room for ``n`` documents in a writeable matrix (by half again when it grows)."""
        if n > len(self._matrix) or not self._matrix.flags.writeable:
            rows = len(self._matrix) if n <= len(self._matrix) else max(n, len(self._matrix) + len(self._matrix) // 2)
            grown = np.zeros((rows, self.dims), dtype=np.float32)
            grown[: len(self._matrix)] = self._matrix
            self._matrix = grown

    def _write_vectors(self, where: np.ndarray, vectors: Sequence[bytes | None], fits: list[int]) -> None:
        """Write the vectors that fit the store's size; the others' documents have none."""
        size = 4 * self.dims
        if len(fits) != len(vectors):
            fitting = set(fits)
            absent = where[[i for i in range(len(vectors)) if i not in fitting]]
            self._matrix[absent] = 0.0
            self.has_vector[absent] = False
        if fits and size:
            joined = b"".join(vectors[i] or b"" for i in fits)
            self._matrix[where[fits]] = np.frombuffer(joined, dtype=np.float32).reshape(len(fits), self.dims)
            self.has_vector[where[fits]] = True

    def _note_changed_vectors(self, where: np.ndarray, before: tuple[np.ndarray, np.ndarray]) -> None:
        """Add the positions whose vector changed to :attr:`vectors_changed`."""
        if self.vectors_changed is None:
            return
        old, had = before
        moved = (self.has_vector[where] != had) | (self._matrix[where] != old).any(axis=1)
        self.vectors_changed.update(where[moved].tolist())

    def compact(self) -> None:
        """Merge the changed documents' terms into the base postings (vectorised; no per-term loop)."""
        if not self.changed:
            return
        for name in SEARCH_FIELDS:
            base = self.fields[name]
            keep = ~self.stale[base.docs]
            vocabulary = dict(base.vocabulary)
            term_ids, docs, tfs = term_entries(
                list(self.changed), [terms.get(name, {}) for terms in self.changed.values()], vocabulary
            )
            self.fields[name] = FieldPostings.from_entries(
                vocabulary,
                np.concatenate((base.term_ids()[keep], term_ids)),
                np.concatenate((base.docs[keep].astype(np.int64), docs)),
                np.concatenate((base.tfs[keep], tfs)),
            )
        self.changed = {}
        self.stale = np.zeros(len(self.ids), dtype=bool)
        self._changed_postings = None
        self.weights = {}
        if self._id_rank is None or len(self._id_rank) != len(self.ids):
            self._id_rank = _rank_of_ids(self.ids)

    @classmethod
    def build(cls, version: int, epoch: int, rows: Sequence[Sequence[Any]]) -> ScopeIndex:
        """A whole scope from its rows (a cold load), rows not kept."""
        index = cls(version, epoch)
        index.apply(rows)
        return index

    # -- persisting ---------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The structures (after :meth:`compact`) as a NumPy archive; vectors are left to the rows.

        Raises:
            SnapshotError: A string cannot be stored (holds a NUL character).
        """
        self.compact()
        n = len(self.ids)
        meta = {
            "format": SNAPSHOT_FORMAT,
            "analyzer": ANALYZER_VERSION,
            "version": self.version,
            "epoch": self.epoch,
            "count": n,
            "dims": self.dims,
            "vocabulary": {name: len(self.fields[name].vocabulary) for name in SEARCH_FIELDS},
        }
        arrays: dict[str, np.ndarray] = {
            "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
            "ids": _joined(self.ids, "memory id"),
            "pks": self.pks,
            "id_rank": self.id_rank,
            "category": _joined([str(c) for c in self.columns["_category"]], "category"),
            "kind": _joined([str(k) for k in self.columns["_kind"]], "kind"),
            "status": self.columns["status"],
        }
        for name in NUMERIC_COLUMNS:
            arrays[f"column.{name}"] = self.columns[name]
        for name in SEARCH_FIELDS:
            postings = self.fields[name]
            arrays[f"terms.{name}"] = _joined(list(postings.vocabulary), "term")
            arrays[f"offsets.{name}"] = postings.offsets
            arrays[f"docs.{name}"] = postings.docs
            arrays[f"tfs.{name}"] = postings.tfs.astype(np.float32)  # term counts: exact in float32
            arrays[f"lengths.{name}"] = self.lengths[name].astype(np.float32)
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, *, epoch: int, dims: int | None) -> ScopeIndex:
        """Structures saved by :meth:`to_bytes`, without vectors (see :meth:`set_vectors_by_pk`).

        Raises:
            SnapshotError: Another format, analyzer, epoch or embedding size, or damaged data.
        """
        try:
            archive = np.load(io.BytesIO(data), allow_pickle=False)
            meta = _snapshot_meta(archive, epoch=epoch, dims=dims)
            n = int(meta["count"])
            index = cls(int(meta["version"]), epoch)
            saved_dims = int(meta["dims"])
            index._load_documents(archive, n)
            for name in SEARCH_FIELDS:
                index.fields[name] = _load_postings(archive, name, int(meta["vocabulary"][name]), n)
                index.lengths[name] = np.asarray(archive[f"lengths.{name}"], dtype=np.float64)
            index._check_loaded(n)
        except SnapshotError:
            raise
        except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise SnapshotError(f"damaged ({type(exc).__name__}: {exc})") from None
        index.stale = np.zeros(n, dtype=bool)
        index.has_vector = np.zeros(n, dtype=bool)
        index.dims = saved_dims  # as a rebuild would find it: the scope's own vectors (0: none yet)
        index._matrix = np.zeros((n, index.dims), dtype=np.float32)
        index.persisted = True
        return index

    def _load_documents(self, archive: Any, n: int) -> None:
        """Ids, row keys, id ranks and columns of ``n`` documents from a snapshot archive."""
        self.ids = _split(archive["ids"], n, "ids")
        self.position = {memory_id: at for at, memory_id in enumerate(self.ids)}
        if len(self.position) != n:
            raise SnapshotError("the same id twice")
        self._signatures = [0] * n
        self.pks = np.asarray(archive["pks"], dtype=np.int64)
        self._id_rank = np.asarray(archive["id_rank"], dtype=np.int64)
        self.columns["status"] = np.asarray(archive["status"], dtype=np.int8)
        self.columns["_category"] = _objects(_split(archive["category"], n, "categories"))
        self.columns["_kind"] = _objects(_split(archive["kind"], n, "kinds"))
        for name in NUMERIC_COLUMNS:
            self.columns[name] = np.asarray(archive[f"column.{name}"], dtype=np.float64)

    def _check_loaded(self, n: int) -> None:
        """Refuse loaded structures that do not describe the same ``n`` documents."""
        assert self._id_rank is not None
        sizes = {len(self.pks), len(self._id_rank), *(len(c) for c in self.columns.values())}
        sizes |= {len(v) for v in self.lengths.values()}
        if sizes != {n}:
            raise SnapshotError("columns of different lengths")
        if len(np.unique(self.pks)) != n:
            raise SnapshotError("the same row key twice")
        if not np.array_equal(np.sort(self._id_rank), np.arange(n)):
            raise SnapshotError("id ranks that are not a permutation")

    def set_vectors_by_pk(self, pks: Sequence[int], blobs: Sequence[Any]) -> None:
        """Vectors read from the rows (by row key) after :meth:`from_bytes`; rows of unknown keys are ignored."""
        if not len(pks):
            return
        keys = np.asarray(pks, dtype=np.int64)
        order = np.argsort(self.pks, kind="stable")
        found = np.searchsorted(self.pks, keys, sorter=order)
        found = np.minimum(found, max(len(order) - 1, 0))
        positions = order[found] if len(order) else np.zeros(0, dtype=np.int64)
        hit = self.pks[positions] == keys if len(order) else np.zeros(len(keys), dtype=bool)
        size = 4 * self.dims
        usable = [i for i in np.flatnonzero(hit).tolist() if size and blobs[i] is not None and len(blobs[i]) == size]
        if not usable:
            return
        where = positions[usable]
        by_position = np.argsort(where, kind="stable")
        where = where[by_position]
        joined = b"".join(bytes(blobs[usable[i]]) for i in by_position.tolist())
        vectors = np.frombuffer(joined, dtype=np.float32).reshape(len(usable), self.dims)
        if len(where) == len(self.ids) and (not len(where) or int(where[-1]) == len(where) - 1):
            self._matrix = vectors  # every document, in order: the joined blobs are the matrix
        else:
            self._matrix[where] = vectors
        self.has_vector[where] = True
