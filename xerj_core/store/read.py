"""Snapshot readers over one index, and the per-process caches they share, keyed on the index generation."""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Iterator, Sequence

import lmdb
import numpy as np
import orjson

from xerj_core.store import keys
from xerj_core.store.columns import KIND_LEN, Column, build_postings, column_kind, decode_postings
from xerj_core.store.mapping import FieldSpec, Mapping


class Dictionary:
    """A keyword dictionary: ordinals are assigned in first-seen order and never change."""

    __slots__ = ("terms", "ordinals")

    def __init__(self) -> None:
        self.terms: list[str] = []
        self.ordinals: dict[str, int] = {}

    def ordinal(self, term: str) -> int | None:
        return self.ordinals.get(term)

    def lookup(self, terms: Iterable[str]) -> np.ndarray:
        """Ordinals of ``terms`` that exist (unknown terms are dropped)."""
        found = [o for o in (self.ordinals.get(t) for t in terms) if o is not None]
        return np.array(found, np.int64)

    def term_array(self) -> np.ndarray:
        return np.array(self.terms, dtype=object)


class Segment:
    """A sealed, immutable run of rows; its columns and postings are decoded once per process."""

    def __init__(self, start: int, end: int, fields: Sequence[str]) -> None:
        self.start = start
        self.end = end
        self.fields = frozenset(fields)
        self.columns: dict[str, Column] = {}
        self.postings: dict[tuple[str, str], tuple[np.ndarray, np.ndarray] | None] = {}
        # Derived, immutable structures built by engines (CSR offsets, ...), cached with the segment.
        self.derived: dict[Any, Any] = {}
        self.lock = threading.Lock()


class IndexCache:
    """What a process knows about one index, valid for ``generation``."""

    def __init__(self, ix: int) -> None:
        self.ix = ix
        self.generation = -1
        self.mapping_version = -1
        self.mapping = Mapping()
        self.segments: list[Segment] = []
        self.tail_start = 0
        self.tail_records: list[dict[str, Any]] = []
        self.live = np.zeros(0, bool)
        self.dead_seq = 0
        self.dictionaries: dict[str, Dictionary] = {}
        self.memo: dict[Any, Any] = {}
        self.lock = threading.RLock()

    def refresh(self, txn: lmdb.Transaction, dbs: dict[str, Any], state: keys.IndexState) -> None:
        ix = self.ix
        if state.mapping_version != self.mapping_version:
            self.mapping = Mapping.from_es(orjson.loads(txn.get(keys.ix_key(ix), db=dbs["mappings"])))
            self.mapping_version = state.mapping_version
        self._refresh_segments(txn, dbs)
        if state.sealed_rows != self.tail_start:
            self.tail_start = state.sealed_rows
            self.tail_records = []
        have = self.tail_start + len(self.tail_records)
        if state.next_row > have:
            with txn.cursor(db=dbs["tail"]) as cur:
                if cur.set_key(keys.row_key(ix, have)):
                    for _ in range(state.next_row - have):
                        self.tail_records.append(orjson.loads(cur.value()))
                        cur.next()
        if len(self.live) < state.next_row:
            grown = np.ones(state.next_row, bool)
            grown[: len(self.live)] = self.live
            self.live = grown
        if state.dead_seq > self.dead_seq:
            with txn.cursor(db=dbs["dead"]) as cur:
                cur.set_key(keys.row_key(ix, self.dead_seq))
                dead = [keys.read_u64(v) for _i, (_k, v) in zip(range(state.dead_seq - self.dead_seq), cur)]
            self.live[np.array(dead, np.int64)] = False
            self.dead_seq = state.dead_seq
        self.memo = {}
        self.generation = state.generation

    def _refresh_segments(self, txn: lmdb.Transaction, dbs: dict[str, Any]) -> None:
        prefix = keys.ix_key(self.ix)
        known = {(s.start, s.end): s for s in self.segments}
        fresh = []
        with txn.cursor(db=dbs["segs"]) as cur:
            if cur.set_range(prefix):
                for key, value in cur:
                    if not key.startswith(prefix):
                        break
                    start = keys.read_u64(key, 4)
                    meta = orjson.loads(value)
                    seg = known.get((start, meta["end"])) or Segment(start, meta["end"], meta["fields"])
                    fresh.append(seg)
        self.segments = fresh

    def dictionary(self, txn: lmdb.Transaction, dbs: dict[str, Any], name: str) -> Dictionary:
        found = self.dictionaries.setdefault(name, Dictionary())
        stored = txn.get(keys.dictn_key(self.ix, name), db=dbs["dictn"])
        size = int.from_bytes(stored, "big") if stored else 0
        if size > len(found.terms):
            with txn.cursor(db=dbs["dictr"]) as cur:
                if cur.set_key(keys.dictr_key(self.ix, name, len(found.terms))):
                    for _ in range(size - len(found.terms)):
                        term = cur.value().decode()
                        found.ordinals[term] = len(found.terms)
                        found.terms.append(term)
                        cur.next()
        return found


class IndexReader:
    """A consistent snapshot of one index, valid while its read transaction is open.

    Everything a query or hop needs is here as numpy arrays (columns, the live
    mask, postings) without decoding a single ``_source``. ``segments`` are the
    sealed runs; rows from ``tail_start`` to ``n_rows`` are the mutable tail.
    """

    def __init__(self, name: str, meta: dict[str, Any], txn: lmdb.Transaction, dbs: dict[str, Any],
                 state: keys.IndexState, cache: IndexCache) -> None:
        self.name = name
        self.meta = meta
        self.txn = txn
        self.dbs = dbs
        self.state = state
        self.cache = cache

    # -- shape ---------------------------------------------------------------------------------

    @property
    def ix(self) -> int:
        return self.cache.ix

    @property
    def generation(self) -> int:
        return self.state.generation

    @property
    def mapping(self) -> Mapping:
        return self.cache.mapping

    @property
    def n_rows(self) -> int:
        return self.state.next_row

    @property
    def doc_count(self) -> int:
        return self.state.live

    @property
    def live(self) -> np.ndarray:
        """Boolean mask over every row ever written: False for deleted and overwritten rows."""
        return self.cache.live[: self.state.next_row]

    @property
    def segments(self) -> list[Segment]:
        return self.cache.segments

    @property
    def tail_start(self) -> int:
        return self.cache.tail_start

    @property
    def tail_count(self) -> int:
        return self.state.next_row - self.cache.tail_start

    def field(self, path: str) -> FieldSpec | None:
        return self.cache.mapping.fields.get(path)

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """Cache ``build()`` for this generation of the index (derived data such as BM25 statistics)."""
        memo = self.cache.memo
        # Keyed by generation too: a reader opened before a write may run after the cache
        # moved on, and must not leave its older snapshot's data under the newer generation.
        key = (self.state.generation, key)
        if key not in memo:
            memo[key] = build()
        return memo[key]

    # -- columns -------------------------------------------------------------------------------

    def segment_column(self, segment: Segment, path: str) -> Column | None:
        """``path``'s column in a sealed segment, or None when that segment was sealed without it."""
        if path not in segment.fields:
            return None
        column = segment.columns.get(path)
        if column is None:
            blob = self.txn.get(keys.col_key(self.ix, segment.start, path), db=self.dbs["cols"])
            if blob is None:
                return None
            column = segment.columns[path] = Column.decode(blob)
        return column

    def tail_column(self, path: str) -> Column:
        spec = self.cache.mapping.fields[path]
        return self.memo(("tail", path), lambda: Column.build(
            spec, column_kind(spec), [rec["c"].get(path) for rec in self.cache.tail_records]))

    def column_parts(self, path: str) -> Iterator[tuple[int, int, Column | None]]:
        """``(start, end, column)`` per sealed segment, then the tail; column None where a segment lacks it."""
        for seg in self.cache.segments:
            yield seg.start, seg.end, self.segment_column(seg, path)
        if self.tail_count:
            yield self.cache.tail_start, self.state.next_row, self.tail_column(path)

    def column(self, path: str) -> Column:
        """``path``'s column over all rows (segments lacking it read as absent)."""
        spec = self.cache.mapping.fields.get(path)
        if spec is None:
            raise KeyError(path)

        def build() -> Column:
            kind = column_kind(spec)
            parts = [c if c is not None else Column.empty(kind, end - start, spec.dims or 0)
                     for start, end, c in self.column_parts(path)]
            return Column.concat(parts) if parts else Column.empty(kind, 0, spec.dims or 0)

        return self.memo(("column", path), build)

    def segments_without(self, path: str) -> int:
        return sum(1 for seg in self.cache.segments if path not in seg.fields)

    def dictionary(self, name: str) -> Dictionary:
        with self.cache.lock:
            return self.cache.dictionary(self.txn, self.dbs, name)

    def field_dictionary(self, path: str) -> Dictionary:
        return self.dictionary(self.cache.mapping.fields[path].dictionary_name)

    # -- postings ------------------------------------------------------------------------------

    def postings(self, path: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Rows (ascending, dead ones included) holding ``term`` in text field ``path``, and its frequencies."""
        parts = []
        for seg in self.cache.segments:
            key = (path, term)
            if key not in seg.postings:
                blob = self.txn.get(keys.post_prefix(self.ix, seg.start, path) + term.encode(), db=self.dbs["post"])
                seg.postings[key] = None if blob is None else decode_postings(blob)
            found = seg.postings[key]
            if found is not None:
                parts.append(found)
        if self.tail_count:
            tail = self.memo(("tailpost", path), lambda: build_postings(
                self.cache.tail_start, (rec["t"].get(path) for rec in self.cache.tail_records)))
            if term in tail:
                parts.append(tail[term])
        if not parts:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def text_fields(self) -> list[str]:
        return [p for p, s in self.cache.mapping.fields.items() if column_kind(s) == KIND_LEN]

    # -- documents -----------------------------------------------------------------------------

    def row_of(self, doc_id: str) -> int | None:
        blob = self.txn.get(keys.id_key(self.ix, doc_id), db=self.dbs["ids"])
        return None if blob is None else keys.read_u64(blob)

    def rows_of(self, doc_ids: Iterable[str]) -> dict[str, int]:
        found = {}
        for doc_id in doc_ids:
            row = self.row_of(doc_id)
            if row is not None:
                found[doc_id] = row
        return found

    def document(self, row: int) -> tuple[str, dict[str, Any], int] | None:
        """``(_id, _source, _version)`` of a live row, else None."""
        blob = self.txn.get(keys.row_key(self.ix, row), db=self.dbs["src"])
        if blob is None:
            return None
        version, doc_id, offset = keys.unpack_source_header(blob)
        return doc_id, orjson.loads(blob[offset:]), version

    def id_of(self, row: int) -> str | None:
        blob = self.txn.get(keys.row_key(self.ix, row), db=self.dbs["src"])
        return None if blob is None else keys.unpack_source_header(blob)[1]

    def get(self, doc_id: str) -> tuple[dict[str, Any], int] | None:
        row = self.row_of(doc_id)
        if row is None:
            return None
        found = self.document(row)
        return None if found is None else (found[1], found[2])

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.live)
