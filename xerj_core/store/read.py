"""Snapshot readers over one index, and the per-process caches they share, keyed on the index generation."""

from __future__ import annotations

import contextlib
import threading
from bisect import bisect_left
from itertools import repeat
from typing import Any, Callable, Iterable, Iterator, Sequence

import lmdb
import numpy as np
import orjson

from xerj_core.growing import GrowingRows
from xerj_core.store import idmap, keys, limits, pins, postpack, tailblock
from xerj_core.store.columns import KIND_LEN, Column, column_kind, decode_postings
from xerj_core.store.lexicon import Lexicon
from xerj_core.store.mapping import FieldSpec, Mapping
from xerj_core.store.scope import SCOPE_FIELD, scope_of
from xerj_core.store.tailblock import Block


_UNREAD = object()
_UNBUILT = object()  # a memo not made yet (None may be one made)
# Records :meth:`IndexReader.ids_of` holds at once (each a whole document, some hundreds of bytes for an edge).
IDS_AT_ONCE = 4096


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


class Segment:
    """A sealed, immutable run of rows; its columns and postings are decoded once per process."""

    def __init__(self, start: int, end: int, fields: Sequence[str], sealed_at: int = 0,
                 buckets: dict[str, int] | None = None) -> None:
        self.start = start
        self.end = end
        self.sealed_at = sealed_at  # with start and end, names this segment's bytes (a derived cache's key)
        self.fields = frozenset(fields)
        # Per text field whose postings are packed, its bucket count (xerj_core.store.postpack); the others
        # (segments sealed before buckets, fields with no terms here) keep a key per term.
        self.buckets = buckets or {}
        self.columns: dict[str, Column] = {}
        # Derived, immutable structures built by engines (CSR offsets, ...), cached with the segment.
        self.derived: dict[Any, Any] = {}
        self.lock = threading.Lock()


class _TailColumn:
    """One field's column over the tail's blocks read so far, grown block by block (see :class:`GrowingRows`)."""

    __slots__ = ("spec", "blocks", "rows", "column")

    def __init__(self, spec: FieldSpec) -> None:
        self.spec = spec
        self.blocks = 0
        self.rows = GrowingRows()
        self.column = Column.empty(column_kind(spec), 0, spec.dims or 0)

    def extend(self, blocks: Sequence[Block]) -> None:
        parts = [block.column(self.spec) for block in blocks]
        extras = [p for p in parts if len(p.extra_rows)]
        at = self.rows.n
        for part in parts:
            self.rows.append((part.values, part.present))
        values, present = self.rows.view(self.rows.n)
        extra_rows, extra_ords = self.column.extra_rows, self.column.extra_ords
        if extras:  # rows of several keyword values: rare, joined whole
            offsets = np.cumsum([at] + [len(p) for p in parts[:-1]])
            shifted = [p.extra_rows + off for p, off in zip(parts, offsets) if len(p.extra_rows)]
            extra_rows = np.concatenate([extra_rows, *shifted])
            extra_ords = np.concatenate([extra_ords, *(p.extra_ords for p in extras)])
        self.column = Column(self.column.kind, values, present, extra_rows, extra_ords)
        self.blocks += len(blocks)


class Tail:
    """The mutable tail of one index between two seals: the blocks write transactions appended to it.

    Blocks are only appended until the next seal replaces the whole tail, so a
    reader that knows how many tail rows its snapshot holds can share this
    object with newer readers: a write costs the next read only its own block.
    """

    def __init__(self, start: int) -> None:
        self.start = start
        self.blocks: list[Block] = []
        self.rows = 0  # rows of the blocks read so far
        self._columns: dict[str, _TailColumn] = {}
        self._derived: dict[Any, GrowingRows] = {}  # per-row arrays derived from the rows (see derived_rows)
        # Per text field: its postings over the blocks so far, merged into a few runs (see _TailRuns).
        self._runs: dict[str, _TailRuns] = {}
        # Per (field, term): (blocks looked at, the term's rows and frequencies in them), or None when absent.
        self._postings: dict[tuple[str, str], tuple[int, tuple[np.ndarray, np.ndarray] | None]] = {}
        self.lock = threading.Lock()

    def add(self, blocks: Sequence[Block]) -> None:
        with self.lock:
            self.blocks.extend(blocks)
            self.rows += sum(block.n for block in blocks)

    def column(self, spec: FieldSpec, rows: int) -> Column:
        with self.lock:
            found = self._columns.get(spec.path)
            if found is None or found.spec != spec:
                found = self._columns[spec.path] = _TailColumn(spec)
            if found.blocks < len(self.blocks):
                found.extend(self.blocks[found.blocks:])
            column = found.column
        if rows == len(column):
            return column
        keep = column.extra_rows < rows
        return Column(column.kind, column.values[:rows], column.present[:rows], column.extra_rows[keep],
                      column.extra_ords[keep])

    def derived_rows(self, key: Any, rows: int,
                     build: Callable[[int, int], Sequence[np.ndarray]]) -> tuple[np.ndarray, ...]:
        """Per-row arrays derived from this tail's first ``rows`` rows, each row's computed once.

        ``build(lo, hi)`` returns the arrays' entries for tail rows ``[lo, hi)``;
        tail rows are never rewritten, so what was derived from a row stays true
        for every later generation, and a write costs the next caller only its
        own rows (kNN's norms over a tail of 2,304-dim vectors were recomputed
        whole after each memory stored).
        """
        with self.lock:
            grown = self._derived.get(key)
            if grown is None:
                grown = self._derived[key] = GrowingRows()
            if grown.n < rows:
                grown.append(build(grown.n, rows))
            return grown.view(rows)

    def postings(self, path: str, term: str, rows: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``term``'s postings (rows, frequencies) in ``path`` among this tail's first ``rows`` rows, if any.

        A write adds a block (one per transaction: a memory stored, a note saved), so a tail often holds
        hundreds of small ones; their postings are merged into a few runs as they come (:class:`_TailRuns`),
        and a term is found by one binary search per run. Searching every block for each new query term
        cost 0.84 ms a query on a tail of about 550 one-document blocks."""
        with self.lock:
            key = (path, term)
            found = self._postings.get(key)
            if found is None or found[0] != len(self.blocks):
                if found is not None and len(self.blocks) - found[0] <= _FEW_NEW_BLOCKS:
                    # looked up since the last few writes: their blocks alone are searched, and what they hold
                    # follows what was found (a block's rows come after every earlier block's)
                    joined = _appended(found[1], self.blocks[found[0]:], path, term.encode())
                else:
                    merged = self._runs.get(path)
                    if merged is None:
                        merged = self._runs[path] = _TailRuns()
                    merged.extend(path, self.blocks)
                    joined = merged.find(term.encode())
                found = self._postings[key] = (len(self.blocks), joined)
            joined = found[1]
        if joined is None:
            return None
        found_rows, tfs = joined
        if found_rows[-1] < self.start + rows:  # the usual case: the reader sees every block looked at
            return joined
        cut = int(np.searchsorted(found_rows, self.start + rows))
        if not cut:
            return None
        return (found_rows, tfs) if cut == len(found_rows) else (found_rows[:cut], tfs[:cut])

    def terms(self, path: str, rows: int) -> set[bytes]:
        """Every term of ``path`` among this tail's first ``rows`` rows (and perhaps a few after them: a block
        is taken whole), as UTF-8 bytes."""
        with self.lock:
            blocks = list(self.blocks)
        found: set[bytes] = set()
        for block in blocks:
            if block.start >= self.start + rows:
                break
            run = block.postings.get(path)
            if run is not None:
                found.update(run[0].tolist() if isinstance(run[0], np.ndarray) else run[0])
        return found

    def rows_holding(self, path: str, rows: int, wanted: set[bytes]) -> np.ndarray:
        """The rows among this tail's first ``rows`` holding any of ``wanted`` (UTF-8 terms) in ``path``, from
        one pass over its blocks: cheaper than a lookup per term when many of its terms are wanted."""
        with self.lock:
            blocks = list(self.blocks)
        end, picked = self.start + rows, []
        for block in blocks:
            if block.start >= end:
                break
            run = block.postings.get(path)
            if run is None or not len(run[0]):
                continue
            terms, counts, found, _tfs = run
            names = terms.tolist() if isinstance(terms, np.ndarray) else terms
            picked.append(found[np.repeat(np.fromiter(map(wanted.__contains__, names), bool, len(names)), counts)])
        joined = np.concatenate(picked) if picked else np.empty(0, np.int64)
        return joined[joined < end]

def _blocks_from(blocks: Sequence[Block] | None, start: int, end: int) -> Sequence[Block] | None:
    """The blocks of rows ``start`` to ``end`` among consecutive ``blocks``, if one of them starts at ``start`` and
    the last ends at ``end``; else None. New rows are at the end, so the search starts there."""
    if not blocks or blocks[-1].end != end:
        return None
    for at in range(len(blocks) - 1, -1, -1):
        if blocks[at].start <= start:
            return blocks[at:] if blocks[at].start == start else None
    return None


class _TailRuns:
    """One text field's postings over a tail's blocks as a few grouped runs. A small block's run (a put's) is
    searched as it is until :data:`FRESH_RUNS` of them are gathered, then they are grouped into one; a grouped
    run joins the one before it while that one holds no more postings, so ``n`` postings make at most
    ``FRESH_RUNS + log2(n)`` runs and each posting is grouped again about ``log2(n)`` times. Grouping small runs
    costs about 90 us a call however few they are (two one-document blocks 94 us, eight 163 us), so fresh blocks
    are grouped sixteen at a time (two at a time cost 0.28 ms a query after each write). A large block's run (a
    bulk's) is not fresh: the fresh runs before it are grouped, then it joins the runs before it as a grouped
    run does. Sizes are postings, not blocks: a bulk's block of 672 documents, counted as one block, was grouped
    again with every sixteen puts after it (about 4 ms each time)."""

    __slots__ = ("blocks", "runs", "fresh")

    FRESH_RUNS = 16
    # A block's run of fewer postings is fresh (a put of a document or a few); a larger one stands as it comes.
    SMALL_RUN = 1024

    def __init__(self) -> None:
        self.blocks = 0  # blocks taken in so far
        # (run, each term's bounds in it, its postings, fresh: a small block's run not grouped yet), in row order
        self.runs: list[tuple[tailblock.PostingRun, np.ndarray, int, bool]] = []
        self.fresh = 0  # how many of the last runs are fresh (the fresh ones always are the last)

    def extend(self, path: str, blocks: Sequence[Block]) -> None:
        runs = self.runs
        for block in blocks[self.blocks:]:
            run = block.postings.get(path)
            if run is None or not len(run[0]):
                continue
            if len(run[2]) >= self.SMALL_RUN:
                self._settle()  # the fresh runs before it first: fresh runs are always the newest
                self._settle(run)
            else:
                runs.append(_bounded(run, True))
                self.fresh += 1
                if self.fresh == self.FRESH_RUNS:
                    self._settle()
        self.blocks = len(blocks)

    def _settle(self, run: tailblock.PostingRun | None = None) -> None:
        """Take ``run`` (a large block's), or else group the fresh runs, as one run that then joins the one before
        it while that one holds no more postings."""
        runs = self.runs
        if run is None:
            if not self.fresh:
                return
            run = tailblock.group([found[0] for found in runs[-self.fresh:]]) if self.fresh > 1 else runs[-1][0]
            del runs[-self.fresh:]
            self.fresh = 0
        while runs and runs[-1][2] <= len(run[2]):
            run = tailblock.group([runs.pop()[0], run])
        runs.append(_bounded(run, False))

    def find(self, wanted: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        """``wanted``'s rows (ascending, int64) and frequencies (float32) over every run, or None."""
        rows, tfs = [], []
        for run, bounds, _postings, _fresh in self.runs:
            names = run[0]
            at = bisect_left(names, wanted)
            if at < len(names) and names[at] == wanted:
                lo, hi = int(bounds[at]), int(bounds[at + 1])
                rows.append(run[2][lo:hi])
                tfs.append(run[3][lo:hi])
        if not rows:
            return None
        return np.concatenate(rows, dtype=np.int64), np.concatenate(tfs, dtype=np.float32)


# A term looked up again within this many writes is found in their blocks alone (see Tail.postings): after a
# put, a query's terms were each searched for in every run again (about 20 of them on a tail of 600 one-document
# blocks) and their pieces joined anew.
_FEW_NEW_BLOCKS = 4


def _appended(joined: tuple[np.ndarray, np.ndarray] | None, blocks: Sequence[Block], path: str, wanted: bytes
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """``joined`` (a term's rows and frequencies in earlier blocks, or None) followed by its postings in
    ``blocks``, each block's run (its terms sorted, with counts) searched once."""
    rows, tfs = [], []
    for block in blocks:
        run = block.postings.get(path)
        if run is None:
            continue
        at = bisect_left(run[0], wanted)
        if at < len(run[0]) and run[0][at] == wanted:
            lo = int(run[1][:at].sum())
            rows.append(run[2][lo:lo + int(run[1][at])])
            tfs.append(run[3][lo:lo + int(run[1][at])])
    if not rows:
        return joined
    if joined is not None:
        rows.insert(0, joined[0])
        tfs.insert(0, joined[1])
    return np.concatenate(rows, dtype=np.int64), np.concatenate(tfs, dtype=np.float32)


def _bounded(run: tailblock.PostingRun, fresh: bool) -> tuple[tailblock.PostingRun, np.ndarray, int, bool]:
    return run, np.concatenate(([0], np.cumsum(run[1]))), len(run[2]), fresh


class Snapshot:
    """What one generation of an index looks like; immutable, so a reader keeps it while newer ones load."""

    __slots__ = ("generation", "mapping", "segments", "tail", "n_rows", "live", "dead", "sealed_layout")

    def __init__(self, generation: int, mapping: Mapping, segments: tuple[Segment, ...], tail: Tail,
                 n_rows: int, live: np.ndarray, dead: np.ndarray = np.empty(0, np.int64)) -> None:
        self.generation = generation
        self.mapping = mapping
        self.segments = segments
        self.tail = tail
        self.n_rows = n_rows
        self.live = live
        self.dead = dead  # the rows ``live`` leaves out, ascending (int64)
        # the sealed segments as ``(start, end, sealed_at)``: what names each one's bytes (see sealed_memo)
        self.sealed_layout = tuple((seg.start, seg.end, seg.sealed_at) for seg in segments)


class IndexCache:
    """What a process knows about one index: the newest snapshot, and what outlives generations.

    Sealed segments and keyword dictionaries never change once read, so they
    are shared by every generation; the tail is shared until the next seal.
    """

    def __init__(self, ix: int) -> None:
        self.ix = ix
        self.snapshot = Snapshot(-1, Mapping(), (), Tail(0), 0, np.zeros(0, bool))
        self.mapping_version = -1
        self.dead_seq = 0
        self.epoch = 0
        self._live = np.ones(0, bool)  # capacity buffer; snapshots hold views of a prefix
        # The rows _live leaves out, ascending, grown as rows die: a flatnonzero over every row cost each read
        # after a write about 20 us at 100k rows (BM25's statistics and dead postings need them).
        self._dead = np.empty(0, np.int64)
        self.dictionaries: dict[str, Dictionary] = {}
        self.memo: dict[Any, Any] = {}
        self.id_runs: dict[Any, Any] = {}  # committed runs of the id map (xerj_core.store.idmap), read once
        # Derived data over every sealed segment, kept until a seal changes the layout (writes to the tail keep it).
        self._segment_records: dict[tuple[bytes, bytes], Segment] = {}
        self.sealed_layout: tuple[tuple[int, int, int], ...] = ()
        self.sealed_memo: dict[Any, Any] = {}
        # The layout before the last seal and the memo entries built to be carried over it: what still holds of
        # them (the segments the seal left as they were) need not be read again (see IndexReader.previous_sealed).
        self.sealed_previous: tuple[tuple[tuple[int, int, int], ...], dict[Any, Any]] | None = None
        self.sealed_carried: set[Any] = set()
        self.lock = threading.RLock()

    @property
    def generation(self) -> int:
        return self.snapshot.generation

    def refresh(self, txn: lmdb.Transaction, dbs: dict[str, Any], state: keys.IndexState,
                known_tail: Sequence[Block] | None = None) -> Snapshot:
        """The snapshot for ``state``, from this one and what was written since; ``known_tail``: the blocks of
        every tail row at ``state`` as the process that committed them built them (see :meth:`snapshot_at`)."""
        if state.epoch != self.epoch:
            # A compaction renumbered the rows: nothing known by row (segments, tail, live mask) still holds.
            self.snapshot = Snapshot(-1, self.snapshot.mapping, (), Tail(0), 0, np.zeros(0, bool))
            self._live = np.ones(0, bool)
            self._dead = np.empty(0, np.int64)
            self.dead_seq = 0
            self.epoch = state.epoch
        old = self.snapshot
        mapping = old.mapping
        if state.mapping_version != self.mapping_version:
            mapping = Mapping.stored(txn.get(keys.ix_key(self.ix), db=dbs["mappings"]))
            self.mapping_version = state.mapping_version
        segments = self._read_segments(txn, dbs, old.segments)
        tail = old.tail if old.tail.start == state.sealed_rows else Tail(state.sealed_rows)
        have = tail.start + tail.rows
        if state.next_row > have:
            fresh = _blocks_from(known_tail, have, state.next_row)
            if fresh is None:
                # The blocks written since (a legacy tail holds a JSON record per row: each one is a block).
                with txn.cursor(db=dbs["tail"]) as cur:
                    fresh = tailblock.read(cur, self.ix, have, state.next_row, mapping.fields)
            tail.add(fresh)
        live = self._live
        if len(live) < state.next_row:
            grown = np.ones(max(state.next_row, 2 * len(live)), bool)
            grown[: len(live)] = live
            live = grown
        if state.dead_seq > self.dead_seq:
            with txn.cursor(db=dbs["dead"]) as cur:
                cur.set_key(keys.row_key(self.ix, self.dead_seq))
                dead = [keys.read_u64(v) for _i, (_k, v) in zip(range(state.dead_seq - self.dead_seq), cur)]
            if live is self._live:
                live = live.copy()  # older snapshots keep seeing these rows alive
            died = np.array(dead, np.int64)
            died = died[live[died]]  # a row dies once; this keeps a repeat from being listed twice
            if len(died) > 1:
                died.sort()
                died = died[np.concatenate(([True], died[1:] != died[:-1]))]
            live[died] = False
            if len(died):
                joined = np.concatenate((self._dead, died))
                joined.sort(kind="stable")  # two ascending runs: a merge
                self._dead = joined
            self.dead_seq = state.dead_seq
        self._live = live
        self.memo = {}
        self.snapshot = Snapshot(state.generation, mapping, segments, tail, state.next_row,
                                 live[: state.next_row], self._dead)
        return self.snapshot

    def snapshot_at(self, txn: lmdb.Transaction, dbs: dict[str, Any], state: keys.IndexState,
                    known_tail: Sequence[Block] | None = None) -> Snapshot:
        """The snapshot for ``state``: the cached one, the next one, or (for a transaction older than the
        cache, which only concurrent threads produce) one built aside without moving the cache back.

        ``known_tail``, when this process committed ``state``'s tail rows, holds their blocks as its writer built
        them: the rows written since the cached snapshot are then taken from there, not read and decoded from
        the tail they were just encoded into (about half of what a read after each write paid to refresh)."""
        with self.lock:
            if state.generation == self.snapshot.generation:
                return self.snapshot
            if state.generation > self.snapshot.generation:
                return self.refresh(txn, dbs, state, known_tail)
            aside = IndexCache(self.ix)
            aside.epoch = state.epoch
            shared = self.snapshot.segments if state.epoch == self.epoch else ()
            aside.snapshot = Snapshot(-1, Mapping(), shared, Tail(-1), 0, np.zeros(0, bool))
            return aside.refresh(txn, dbs, state)

    def _read_segments(self, txn: lmdb.Transaction, dbs: dict[str, Any],
                       known_segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
        prefix = keys.ix_key(self.ix)
        known = self._segment_records
        by_range = {(s.start, s.end, s.sealed_at): s for s in known_segments}
        fresh = []
        records = {}
        with txn.cursor(db=dbs["segs"]) as cur:
            if cur.set_range(prefix):
                for key, value in cur:
                    if not key.startswith(prefix):
                        break
                    seg = known.get((key, value))  # an unchanged record is the same immutable segment
                    if seg is None:
                        meta = orjson.loads(value)
                        start = keys.read_u64(key, 4)
                        sealed_at = meta.get("sealed_at", 0)
                        seg = by_range.get((start, meta["end"], sealed_at)) or Segment(
                            start, meta["end"], meta["fields"], sealed_at, meta.get("buckets"))
                    records[(key, value)] = seg
                    fresh.append(seg)
        self._segment_records = records
        return tuple(fresh)

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
                 state: keys.IndexState, cache: IndexCache,
                 begin_mapped: Callable[[], lmdb.Transaction] | None = None,
                 known_tail: Sequence[Block] | None = None) -> None:
        self.name = name
        self.meta = meta
        self.txn = txn
        self.dbs = dbs
        self.state = state
        self.cache = cache
        self.snapshot = cache.snapshot_at(txn, dbs, state, known_tail)
        # A reserved index shows only the rows of its own tenant (xerj_core.store.scope).
        scope = scope_of(name)
        self.scope = scope if scope is not None and SCOPE_FIELD in self.snapshot.mapping.fields else None
        self._begin_mapped = begin_mapped
        self._runs_of_ids: Any = _UNREAD  # the id map's runs, read at the first lookup that misses the B-tree

    # -- shape ---------------------------------------------------------------------------------

    @property
    def ix(self) -> int:
        return self.cache.ix

    @property
    def generation(self) -> int:
        return self.state.generation

    @property
    def mapping(self) -> Mapping:
        return self.snapshot.mapping

    @property
    def n_rows(self) -> int:
        return self.state.next_row

    @property
    def doc_count(self) -> int:
        if self.scope is None:
            return self.state.live
        return self.memo("scoped-count", lambda: int(np.count_nonzero(self.live)))

    @property
    def live(self) -> np.ndarray:
        """Boolean mask over every row ever written: False for deleted and overwritten rows, and in a
        reserved index for rows whose scope is not the index's own tenant."""
        if self.scope is None:
            return self.snapshot.live
        return self.memo("scoped-live", self._scoped_live)

    def _scoped_live(self) -> np.ndarray:
        column = self.column(SCOPE_FIELD)
        ordinal = self.field_dictionary(SCOPE_FIELD).ordinal(self.scope)
        if ordinal is None:
            return np.zeros_like(self.snapshot.live)
        return self.snapshot.live & column.present & (column.values == ordinal)

    def _visible(self, row: int) -> bool:
        return self.scope is None or bool(self.live[row])

    @property
    def segments(self) -> list[Segment]:
        return self.snapshot.segments

    @property
    def tail_start(self) -> int:
        return self.snapshot.tail.start

    @property
    def tail_count(self) -> int:
        return self.state.next_row - self.snapshot.tail.start

    def field(self, path: str) -> FieldSpec | None:
        return self.snapshot.mapping.fields.get(path)

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """Cache ``build()`` for this generation of the index (derived data such as BM25 statistics)."""
        memo = self.cache.memo
        # Keyed by generation too: a reader opened before a write may run after the cache
        # moved on, and must not leave its older snapshot's data under the newer generation.
        key = (self.state.generation, key)
        found = memo.get(key, _UNBUILT)  # one lookup (a tuple key's hash is made anew each time)
        if found is _UNBUILT:
            found = memo[key] = build()
        return found

    def sealed_memo(self, key: Any, build: Callable[[], Any], *, carry: bool = False) -> Any:
        """Cache ``build()`` for as long as the sealed segments stay as they are: writes that only grow the tail
        keep it, a seal drops it. ``build`` must read sealed segments only. With ``carry``, the value stays
        reachable through :meth:`previous_sealed` until the seal after next."""
        layout = self.sealed_layout()
        cache = self.cache
        with cache.lock:
            if layout != cache.sealed_layout:
                if self.state.generation < cache.generation:
                    return build()  # an older snapshot than the cache's: do not evict the newer layout
                old = cache.sealed_memo
                cache.sealed_previous = (cache.sealed_layout, {k: old[k] for k in cache.sealed_carried if k in old})
                cache.sealed_layout, cache.sealed_memo = layout, {}
            memo = cache.sealed_memo
            if key not in memo:
                memo[key] = build()
                if carry:
                    cache.sealed_carried.add(key)
            return memo[key]

    def sealed_layout(self) -> tuple[tuple[int, int, int], ...]:
        """The sealed segments as ``(start, end, sealed_at)``: what names each one's bytes."""
        return self.snapshot.sealed_layout

    def previous_sealed(self, key: Any) -> tuple[tuple[tuple[int, int, int], ...], Any] | None:
        """The layout before the last seal and what :meth:`sealed_memo` kept under ``key`` for it (``carry``), if
        anything: a builder may reuse what it derived from the segments both layouts hold."""
        cache = self.cache
        with cache.lock:
            previous = cache.sealed_previous
            if previous is None or key not in previous[1]:
                return None
            return previous[0], previous[1][key]

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

    @contextlib.contextmanager
    def mapped_columns(self, paths: Sequence[str]) -> Iterator[Callable[[Segment], dict[str, Column] | None]]:
        """A lookup of sealed segments' ``paths`` columns that copies nothing into this process.

        Inside the block, ``lookup(segment)`` returns the columns with their
        values as views of the memory-mapped data file (a sealed segment's
        bytes never change), or None when the segment was sealed without one
        of ``paths``. The views die with the block: copy what must outlive it.
        Nothing is added to the per-process column cache.
        """
        mapped = self._begin_mapped() if self._begin_mapped is not None else None
        try:
            def lookup(segment: Segment) -> dict[str, Column] | None:
                if any(p not in segment.fields for p in paths):
                    return None
                txn = self.txn
                if mapped is not None:
                    # The mapped transaction may be newer: use it only while it still holds this very segment.
                    record = mapped.get(keys.seg_key(self.ix, segment.start), db=self.dbs["segs"])
                    meta = orjson.loads(record) if record is not None else None
                    if meta is not None and (meta["end"], meta.get("sealed_at", 0)) == (segment.end, segment.sealed_at):
                        txn = mapped
                found = {}
                for path in paths:
                    blob = txn.get(keys.col_key(self.ix, segment.start, path), db=self.dbs["cols"])
                    if blob is None:
                        return None
                    found[path] = Column.decode(blob, copy=False)  # views of the map, or of a bytes object
                return found

            yield lookup
        finally:
            if mapped is not None:
                mapped.abort()

    def release_columns(self, paths: Iterable[str]) -> None:
        """Drop this process's decoded copies of ``paths`` in every sealed segment (a later read decodes them
        again); for engines that keep their own derived copy and want the memory back."""
        for seg in self.snapshot.segments:
            for path in paths:
                seg.columns.pop(path, None)

    def tail_column(self, path: str) -> Column:
        return self.snapshot.tail.column(self.snapshot.mapping.fields[path], self.tail_count)

    def tail_derived(self, key: Any, build: Callable[[int, int], Sequence[np.ndarray]]) -> tuple[np.ndarray, ...]:
        """Per-row arrays derived from this snapshot's tail rows, shared with every generation of the same tail
        (``build(lo, hi)`` gives tail rows ``[lo, hi)``; see :meth:`Tail.derived_rows`)."""
        return self.snapshot.tail.derived_rows(key, self.tail_count, build)

    def column_parts(self, path: str) -> Iterator[tuple[int, int, Column | None]]:
        """``(start, end, column)`` per sealed segment, then the tail; column None where a segment lacks it."""
        for seg in self.snapshot.segments:
            yield seg.start, seg.end, self.segment_column(seg, path)
        if self.tail_count:
            yield self.tail_start, self.state.next_row, self.tail_column(path)

    def column(self, path: str) -> Column:
        """``path``'s column over all rows (segments lacking it read as absent)."""
        spec = self.snapshot.mapping.fields.get(path)
        if spec is None:
            raise KeyError(path)

        def build() -> Column:
            kind = column_kind(spec)
            parts = [c if c is not None else Column.empty(kind, end - start, spec.dims or 0)
                     for start, end, c in self.column_parts(path)]
            return Column.concat(parts) if parts else Column.empty(kind, 0, spec.dims or 0)

        return self.memo(("column", path), build)

    def dictionary(self, name: str) -> Dictionary:
        with self.cache.lock:
            return self.cache.dictionary(self.txn, self.dbs, name)

    def field_dictionary(self, path: str) -> Dictionary:
        return self.dictionary(self.snapshot.mapping.fields[path].dictionary_name)

    # -- postings ------------------------------------------------------------------------------

    def segment_postings(self, segment: Segment, path: str, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``term``'s postings in one sealed segment (absolute rows, frequencies), decoded fresh: callers that
        reuse them keep their own bounded cache (BM25 does), so the store holds no per-term copies."""
        if not limits.term_fits(term):  # never indexed (see store.limits), and too long to look up as a key
            return None
        prefix, name = keys.post_prefix(self.ix, segment.start, path), term.encode()
        buckets = segment.buckets.get(path)
        if buckets:
            blob = self.txn.get(prefix + postpack.bucket_suffix(postpack.bucket_of(name, buckets)), db=self.dbs["post"])
            found = None if blob is None else postpack.find(blob, name)
            if found is not postpack.OWN:
                return found  # type: ignore[return-value]
        blob = self.txn.get(prefix + name, db=self.dbs["post"])
        return None if blob is None else decode_postings(blob)

    def prefetch_postings(self, path: str, term: str) -> None:
        """Let a backend whose gets are round trips (``xerj_postgres``) fetch ``term``'s postings in every sealed
        segment at once, before :meth:`segment_postings` asks segment by segment; LMDB has nothing to do."""
        self.prefetch_terms(path, [(seg, (term,)) for seg in self.snapshot.segments])

    @property
    def gets_are_round_trips(self) -> bool:
        """Whether each get is a round trip to a server (``xerj_postgres``), so that gets are best batched with
        :meth:`prefetch_terms` rather than read through a cursor range by range."""
        return getattr(self.txn, "prefetch", None) is not None

    def prefetch_terms(self, path: str, wanted: Sequence[tuple[Segment, Sequence[str]]]) -> None:
        """As :meth:`prefetch_postings`, for the terms given for each sealed segment, in one fetch."""
        prefetch = getattr(self.txn, "prefetch", None)
        if prefetch is None:
            return
        found = []
        for segment, terms in wanted:
            if path not in segment.fields:
                continue
            prefix = keys.post_prefix(self.ix, segment.start, path)
            buckets = segment.buckets.get(path)
            for term in terms:
                if limits.term_fits(term):
                    name = term.encode()
                    if buckets:  # the term's bucket, and its own key in case it is a large term
                        found.append(prefix + postpack.bucket_suffix(postpack.bucket_of(name, buckets)))
                    found.append(prefix + name)
        if found:
            prefetch(self.dbs["post"], list(dict.fromkeys(found)))  # terms share buckets

    def _segment_posting_items(self, segment: Segment, path: str) -> list[tuple[bytes, bytes]]:
        """``path``'s stored postings in a sealed segment as ``(key suffix, value)``: a bucket's suffix is a NUL
        and its number, a term of its own's is the term."""
        if path not in segment.fields:
            return []
        prefix = keys.post_prefix(self.ix, segment.start, path)
        items = []
        with self.txn.cursor(db=self.dbs["post"]) as cur:
            if cur.set_range(prefix):
                for stored, blob in cur:
                    if not stored.startswith(prefix):
                        break
                    items.append((bytes(stored[len(prefix):]), bytes(blob)))
        return items

    def segment_terms(self, segment: Segment, path: str) -> Lexicon:
        """Every term of text field ``path`` in a sealed segment, sorted, read once per process and segment (a
        segment never changes): what ``prefix`` and ``wildcard`` look through. Nothing at write time keeps a term
        list, so a segment's postings are read through once for it."""
        key = ("terms", path)
        found = segment.derived.get(key)
        if found is None:
            names: list[bytes] = []
            for suffix, blob in self._segment_posting_items(segment, path):
                if suffix[:1] == b"\x00":
                    names += postpack.bucket_terms(blob)
                else:
                    names.append(suffix)
            found = Lexicon(names)
            with segment.lock:
                found = segment.derived.setdefault(key, found)
        return found  # type: ignore[no-any-return]

    def segment_rows_holding(self, segment: Segment, path: str, wanted: set[bytes]) -> np.ndarray:
        """The rows (absolute) of a sealed segment holding any of ``wanted`` (UTF-8 terms) in ``path``, from one
        pass over its postings: cheaper than a lookup per term when many of its terms are wanted."""
        items = self._segment_posting_items(segment, path)
        if not items:
            return np.empty(0, np.int64)
        terms, counts, rows, _tfs = postpack.unpack([suffix for suffix, _ in items], [blob for _, blob in items])
        return rows[np.repeat(np.fromiter(map(wanted.__contains__, terms), bool, len(terms)), counts)]

    def tail_terms(self, path: str) -> Lexicon:
        """Every term of text field ``path`` in the tail rows this reader sees (perhaps a few more), sorted."""
        if not self.tail_count:
            return Lexicon(())
        return self.memo(("tail-terms", path),  # type: ignore[no-any-return]
                         lambda: Lexicon(self.snapshot.tail.terms(path, self.tail_count)))

    def postings_parts(self, path: str, term: str) -> list[tuple[Segment | None, np.ndarray, np.ndarray]]:
        """``(segment, rows, frequencies)`` per part holding ``term`` in ``path``: sealed segments, then the tail
        (segment None). Rows are absolute and ascending, dead ones included."""
        parts: list[tuple[Segment | None, np.ndarray, np.ndarray]] = []
        self.prefetch_postings(path, term)
        for seg in self.snapshot.segments:
            found = self.segment_postings(seg, path, term)
            if found is not None:
                parts.append((seg, found[0], found[1]))
        if self.tail_count:
            found = self.snapshot.tail.postings(path, term, self.tail_count)
            if found is not None:
                parts.append((None, found[0], found[1]))
        return parts

    def postings(self, path: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Rows (ascending, dead ones included) holding ``term`` in text field ``path``, and its frequencies."""
        parts = self.postings_parts(path, term)
        if not parts:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if len(parts) == 1:
            return parts[0][1], parts[0][2]
        return np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])

    def text_fields(self) -> list[str]:
        return [p for p, s in self.snapshot.mapping.fields.items() if column_kind(s) == KIND_LEN]

    # -- documents -----------------------------------------------------------------------------

    def row_of(self, doc_id: str) -> int | None:
        if len(doc_id) > limits.MAX_ID_BYTES // 4 and len(doc_id.encode(errors="replace")) > limits.MAX_ID_BYTES:
            return None  # no stored id is that long, and the key could not be looked up
        return idmap.row(self.txn, self.dbs, self.ix, self._id_runs, doc_id.encode())

    def _id_runs(self) -> idmap.IdRuns | None:
        if self._runs_of_ids is _UNREAD:
            self._runs_of_ids = idmap.runs_of(self.txn, self.dbs, self.ix, self.state.epoch, self.cache.id_runs,
                                              own=True)
        return self._runs_of_ids  # type: ignore[no-any-return]

    def rows_of(self, doc_ids: Iterable[str]) -> dict[str, int]:
        wanted, encoded = [], []
        for doc_id in doc_ids:
            if len(doc_id) > limits.MAX_ID_BYTES // 4 and len(doc_id.encode(errors="replace")) > limits.MAX_ID_BYTES:
                continue  # no stored id is that long (see row_of)
            wanted.append(doc_id)
            encoded.append(doc_id.encode())
        if not wanted:
            return {}
        found = idmap.rows(self.txn, self.dbs, self.ix, self._id_runs, encoded)
        return {doc_id: row for doc_id, row in zip(wanted, found) if row is not None}

    def document(self, row: int) -> tuple[str, dict[str, Any], int] | None:
        """``(_id, _source, _version)`` of a live row, else None."""
        blob = self.txn.get(keys.row_key(self.ix, row), db=self.dbs["src"])
        if blob is None or not self._visible(row):
            return None
        version, doc_id, offset = keys.unpack_source_header(blob)
        return doc_id, orjson.loads(blob[offset:]), version

    def document_header(self, row: int) -> tuple[str, int] | None:
        """``(_id, _version)`` of a live row, else None: :meth:`document` without decoding the source."""
        blob = self.txn.get(keys.row_key(self.ix, row), db=self.dbs["src"])
        if blob is None or not self._visible(row):
            return None
        version, doc_id, _offset = keys.unpack_source_header(blob)
        return doc_id, version

    def documents(self, rows: Iterable[int]) -> Iterator[tuple[int, str, dict[str, Any], int]]:
        """``(row, _id, _source, _version)`` for each live row of ``rows``, in order (the hot path of ego)."""
        get, db, prefix = self.txn.get, self.dbs["src"], keys.ix_key(self.ix)
        pack_row, header, loads = keys.u64, keys.SRC_HEADER, orjson.loads
        if getattr(self.txn, "prefetch", None) is not None:
            rows = list(rows)
            self.prefetch_documents(rows)
        start = header.size
        visible = None if self.scope is None else self.live
        for row in rows:
            blob = get(prefix + pack_row(row), db=db)
            if blob is None or (visible is not None and not visible[row]):
                continue
            version, id_len = header.unpack_from(blob)
            yield row, blob[start:start + id_len].decode(), loads(memoryview(blob)[start + id_len:]), version

    def source_records(self, rows: Sequence[int]) -> list[bytes | None]:
        """Each of ``rows``' stored source record as it is kept (see :func:`keys.pack_source`: a header, the
        ``_id``, then the source's JSON), None for a row with no live document; for a caller that reads many
        documents' JSON at once rather than one decoded dict at a time."""
        self.prefetch_documents(rows)
        # keys packed and gets made by C-level maps (positional default and database: every backend's get takes
        # them so): no Python step per row, which is most of a get's cost when its pages are warm
        found = list(map(self.txn.get, keys.row_keys(self.ix, rows), repeat(None), repeat(self.dbs["src"])))
        if self.scope is not None:
            # clipped: a row past every row written has no record, whatever its clipped neighbour says
            visible = self.live.take(np.asarray(rows, np.int64), mode="clip")
            if not visible.all():  # some row another tenant's: shown as no document
                found = [blob if seen else None for blob, seen in zip(found, visible.tolist())]
        return found

    def prefetch_documents(self, rows: Sequence[int]) -> None:
        """Let a backend whose gets are round trips (``xerj_postgres``) fetch the sources of ``rows`` at once, before
        :meth:`document` asks row by row (a page of hits); LMDB has nothing to do."""
        prefetch = getattr(self.txn, "prefetch", None)
        if prefetch is not None and len(rows):
            prefix, pack_row = keys.ix_key(self.ix), keys.u64
            prefetch(self.dbs["src"], [prefix + pack_row(row) for row in rows])

    def prefetch_ids(self, doc_ids: Sequence[str]) -> None:
        """Let a backend whose gets are round trips fetch the rows of ``doc_ids``, then their sources, in two
        batches before :meth:`get` asks id by id (ego's node summaries); LMDB has nothing to do."""
        prefetch = getattr(self.txn, "prefetch", None)
        if prefetch is None or not len(doc_ids):
            return
        fits, id_keys, prefix = [], [], keys.ix_key(self.ix)
        for doc_id in doc_ids:
            try:
                encoded = doc_id.encode()
            except UnicodeEncodeError:
                continue  # no stored id holds a lone surrogate; get() answers it alone
            if len(encoded) <= limits.MAX_ID_BYTES:
                fits.append(doc_id)
                id_keys.append(prefix + encoded)
        prefetch(self.dbs["ids"], id_keys)
        self.prefetch_documents([row for row in map(self.row_of, fits) if row is not None])

    def id_of(self, row: int) -> str | None:
        blob = self.txn.get(keys.row_key(self.ix, row), db=self.dbs["src"])
        return None if blob is None or not self._visible(row) else keys.unpack_source_header(blob)[1]

    def ids_of(self, rows: Sequence[int]) -> list[str | None]:
        """:meth:`id_of` of each of ``rows``, their records fetched together (:meth:`source_records`): a brain's
        133k live edge ids took 0.34 s one get and header at a time. Fetched :data:`IDS_AT_ONCE` rows at a time:
        a record is the whole document, and all of them at once held 150 MB for those 133k ids."""
        start, unpack = keys.SRC_HEADER.size, keys.SRC_HEADER.unpack_from
        found: list[str | None] = []
        for lo in range(0, len(rows), IDS_AT_ONCE):
            found += [None if blob is None else bytes(blob[start:start + unpack(blob)[1]]).decode()
                      for blob in self.source_records(rows[lo:lo + IDS_AT_ONCE])]
        return found

    def get(self, doc_id: str) -> tuple[dict[str, Any], int] | None:
        row = self.row_of(doc_id)
        if row is None:
            return None
        found = self.document(row)
        return None if found is None else (found[1], found[2])

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.live)

    def dead_rows(self) -> np.ndarray:
        """Rows this reader never shows, ascending: deleted and overwritten rows (the snapshot's, kept as rows
        die), and in a reserved index the rows of other tenants (memoised for the generation). A row never leaves
        this set."""
        if self.doc_count == self.n_rows:
            return np.empty(0, np.int64)
        if self.scope is None:
            return self.snapshot.dead
        return self.memo("dead-rows", lambda: np.flatnonzero(~self.live))


class PinnedReader(IndexReader):
    """An index as an earlier generation saw it (see :mod:`xerj_core.store.pins`), read through a newer transaction.

    Rows written since are outside ``live``; rows that died since are inside it,
    and their sources come from the retired copies. Per-generation memos are
    keyed on the pin as well, so statistics (BM25's document counts) are the
    snapshot's, not the newest generation's.
    """

    def __init__(self, base: IndexReader, n_rows: int, dead_seq: int) -> None:
        self.__dict__.update(base.__dict__)
        live = np.zeros(base.n_rows, bool)
        cut = min(n_rows, base.n_rows)
        live[:cut] = base.live[:cut]
        revived = np.array(pins.killed_since(base.txn, base.dbs, base.ix, dead_seq, base.state.dead_seq), np.int64)
        revived = revived[revived < cut]
        if len(revived) and base.scope is not None:
            # A row that died since comes back only if it was the tenant's own (xerj_core.store.scope).
            column = base.column(SCOPE_FIELD)
            ordinal = base.field_dictionary(SCOPE_FIELD).ordinal(base.scope)
            own = (column.present[revived] & (column.values[revived] == ordinal) if ordinal is not None
                   else np.zeros(len(revived), bool))
            revived = revived[own]
        if len(revived):
            live[revived] = True
        self._live = live
        self._doc_count = int(np.count_nonzero(live))
        self._pin = (n_rows, dead_seq)

    @property
    def live(self) -> np.ndarray:
        return self._live

    @property
    def doc_count(self) -> int:
        return self._doc_count

    def dead_rows(self) -> np.ndarray:
        if self._doc_count == self.n_rows:
            return np.empty(0, np.int64)
        return self.memo("dead-rows", lambda: np.flatnonzero(~self._live))

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        if isinstance(key, tuple) and key and key[0] == "column":  # a column does not depend on liveness
            return super().memo(key, build)
        return super().memo(("pinned", self._pin, key), build)

    def _source_blob(self, row: int) -> bytes | None:
        if not self._live[row]:
            return None
        blob = self.txn.get(keys.row_key(self.ix, row), db=self.dbs["src"])
        return blob if blob is not None else pins.retired_source(self.txn, self.dbs, self.ix, row)

    def document(self, row: int) -> tuple[str, dict[str, Any], int] | None:
        blob = self._source_blob(row)
        if blob is None:
            return None
        version, doc_id, offset = keys.unpack_source_header(blob)
        return doc_id, orjson.loads(blob[offset:]), version

    def document_header(self, row: int) -> tuple[str, int] | None:
        blob = self._source_blob(row)
        if blob is None:
            return None
        version, doc_id, _offset = keys.unpack_source_header(blob)
        return doc_id, version

    def documents(self, rows: Iterable[int]) -> Iterator[tuple[int, str, dict[str, Any], int]]:
        for row in rows:
            found = self.document(row)
            if found is not None:
                yield row, found[0], found[1], found[2]

    def source_records(self, rows: Sequence[int]) -> list[bytes | None]:
        return [self._source_blob(row) for row in rows]

    def id_of(self, row: int) -> str | None:
        found = self.document(row)
        return None if found is None else found[0]
