"""The hop engine: frontier → rows → bitemporal mask → type mask → next frontier, on doc-values columns only.

Sealed segments are immutable, so each gets its rows grouped by ``src``
ordinal and by ``dst`` ordinal once per process (cached on the segment). Those
groupings are merged into one CSR keyed by node over every sealed row, with
the hop columns laid out in ``src`` order; the merge is redone only when the
segment layout changes. Besides the out-runs and the in-runs, each node has one
run holding its out-edges then its in-edges, so a hop both ways (the default)
is one offsets lookup and one gather of contiguous runs. A large frontier's
runs are touched before the gather, so their cache misses overlap. The small
mutable tail is scanned once per index generation into the same shape, and its
rows are counted on every hop that consults it. ``_source`` is never read: a
segment sealed without a column the hop needs is skipped and counted.
"""

from __future__ import annotations

import hashlib
import threading
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable

import attrs
import numpy as np

from xerj_core.arrays import BITMAP_AT, member, ranges, unique_ids
from xerj_core.graph import hoprun
from xerj_core.graph.mapped import ArrayFiles
from xerj_core.graph.rowdocs import RowDocs
from xerj_core.graph.rowids import RowIds
from xerj_core.graph.viewchild import ChildBuilds
from xerj_core.store import ABSENT_INT, IndexReader, Segment

# The columns a hop reads; a sealed segment lacking any of them is skipped (and counted).
HOP_FIELDS = ("src", "dst", "type", "trust", "valid_at", "invalid_at", "weight", "confidence")
# What a candidate edge carries through the masks (``near`` is the frontier end, ``other`` the far end).
_CARRIED = ("row", "near", "other", "out", "type", "trust", "valid_at", "invalid_at", "weight", "confidence")
# An edge table's columns, one entry per edge.
_STORED = {"row": np.int32, "src": np.int32, "dst": np.int32, "type": np.int32, "trust": np.int32,
           "valid_at": np.int64, "invalid_at": np.int64, "weight": np.float32, "confidence": np.float32}
# The fields ego names a picked edge by, also stored together per edge (``EdgeTable.record``).
_RECORD_FIELDS = ("valid_at", "invalid_at", "src", "dst", "weight", "type", "trust")
# The columns an in-hop screens, also stored in dst order (the rest is reached through the permutation).
_IN_ORDER = ("src", "valid_at", "invalid_at")
# A hop's far end and its invalid_at, packed in one integer per edge (in each order): the rank of invalid_at
# among the table's distinct instants in the high bits, the far end's ordinal in the low ``shift`` bits; int32
# when both fit. One gather per direction then yields both: a frontier's runs lie at random places, so every
# array gathered costs cache misses, and the fewer bytes the table spans the more of it stays in the CPU cache.
_EMPTY = np.empty(0, np.int64)
_CSR_KEY = ("xerj.graph", "csr", 1)
_INT32_BITS = 31  # a packed value fits an int32 when it needs at most this many bits
_FORMAT = 10  # of a published table's files: a process never maps a set another layout of the code wrote
_NO_COLUMNS = "no-columns"

# From this many frontier nodes a hop touches its runs before gathering them (see EdgeTable.candidates).
_TOUCH_AT = 16

FRONTIER_CAP = 4096
_TERM_ARRAYS_KEPT = 64  # node dictionaries whose term arrays are kept (see TermArrays)
EDGE_CAP = 100_000

OUT, IN, BOTH = "out", "in", "both"
DIRECTIONS = (OUT, IN, BOTH)


@attrs.frozen
class SegmentCSR:
    """One sealed segment's edge rows (relative to its start) grouped by src and by dst ordinal."""

    out_order: np.ndarray
    out_off: np.ndarray
    in_order: np.ndarray
    in_off: np.ndarray


def _group(keys: np.ndarray, local_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = local_rows[np.argsort(keys, kind="stable")]
    size = int(keys.max()) + 1 if keys.size else 0
    offsets = np.zeros(size + 1, np.int32)  # a segment holds fewer than 2**31 rows
    np.cumsum(np.bincount(keys, minlength=size), out=offsets[1:])
    return order.astype(np.int32), offsets


def segment_csr(segment: Segment, columns: dict[str, Any] | None, *, keep: bool = True) -> SegmentCSR | None:
    """The segment's grouping from its ``columns``; None when it lacks a hop column. With ``keep`` it is built once
    per process and kept with the segment, for the next view built in private memory; a view built into files
    passes False: its table is mapped back from the page cache, and kept groupings would be the building
    process's only private copy of the edges (about 60 MB at a million edges), to save a rebuild about 5% of
    its CPU."""
    found = segment.derived.get(_CSR_KEY)
    if found is None:
        if columns is None:
            found = _NO_COLUMNS
        else:
            src, dst = columns["src"], columns["dst"]
            local = np.flatnonzero(src.present & dst.present).astype(np.int32)
            out_order, out_off = _group(src.values[local], local)
            in_order, in_off = _group(dst.values[local], local)
            found = SegmentCSR(out_order, out_off, in_order, in_off)
        if keep:
            with segment.lock:
                found = segment.derived.setdefault(_CSR_KEY, found)
    return None if found is _NO_COLUMNS else found


def _alive_only(csr: SegmentCSR, alive: np.ndarray, src: np.ndarray, dst: np.ndarray) -> SegmentCSR:
    """The grouping without the rows ``alive`` rules out (both orders stay sorted: only counts change)."""
    out_order = csr.out_order[alive[csr.out_order]]
    in_order = csr.in_order[alive[csr.in_order]]
    out_off = np.zeros(len(csr.out_off), np.int32)
    in_off = np.zeros(len(csr.in_off), np.int32)
    np.cumsum(np.bincount(src[out_order], minlength=len(out_off) - 1), out=out_off[1:])
    np.cumsum(np.bincount(dst[in_order], minlength=len(in_off) - 1), out=in_off[1:])
    return SegmentCSR(out_order, out_off, in_order, in_off)


class EdgeTable:
    """Edges of some runs of rows, grouped for hops.

    The hop columns are stored once per edge, ordered by ``src`` ordinal, so a
    node's out-edges are the positions ``out_off[n]:out_off[n + 1]``; its
    in-edges are ``in_perm[in_off[n]:in_off[n + 1]]``. A hop in any direction is
    an offsets lookup and a gather.
    """

    def __init__(self, groups: list[tuple[int, SegmentCSR, Callable[[str], np.ndarray]]],
                 alloc: Callable[[str, int, Any], np.ndarray] | None = None) -> None:
        """``groups``: per run of rows, its first row, its grouping, and its hop columns by name.

        ``alloc(name, size, dtype)`` provides each stored array (file-backed ones, see ``mapped``)."""
        alloc = alloc or (lambda _name, size, dtype: np.empty(size, dtype))
        width = max((max(len(c.out_off), len(c.in_off)) - 1 for _, c, _ in groups), default=0)
        outs = np.zeros(width, np.int64)
        ins = np.zeros(width, np.int64)
        for _, csr, _ in groups:
            outs[: len(csr.out_off) - 1] += np.diff(csr.out_off)
            ins[: len(csr.in_off) - 1] += np.diff(csr.in_off)
        offsets = _offsets_dtype(int(outs.sum()))
        self.out_off = alloc("out_off", width + 1, offsets)
        self.in_off = alloc("in_off", width + 1, offsets)
        self.out_off[0] = self.in_off[0] = 0
        np.cumsum(outs, out=self.out_off[1:])
        np.cumsum(ins, out=self.in_off[1:])
        total = int(self.out_off[-1])
        narrow = {f: _ordinal_dtype(max((int(column(f).max(initial=-1)) for _, _, column in groups), default=-1))
                  for f in ("type", "trust")}
        self.cols = {f: alloc(f"col_{f}", total, narrow.get(f, dtype)) for f, dtype in _STORED.items()}
        self.in_perm = alloc("in_perm", total, np.int32)
        out_cursor, in_cursor = self.out_off[:-1].copy(), self.in_off[:-1].copy()
        for start, csr, column in groups:
            if not csr.out_order.size:
                continue
            dest = _placement(csr.out_order, csr.out_off, out_cursor)
            self.cols["row"][dest] = csr.out_order + start
            for f in _STORED:
                if f != "row":
                    self.cols[f][dest] = column(f)[csr.out_order]
            position = np.empty(int(csr.out_order.max()) + 1, np.int64)  # local row → its stored position
            position[csr.out_order] = dest
            self.in_perm[_placement(csr.in_order, csr.in_off, in_cursor)] = position[csr.in_order]
        # Ego's picks lie at scattered places (an in-edge's anywhere in src order): each field read apart would
        # cost a cache miss per pick per field, so the fields it names edges by are also kept side by side, one
        # aligned 32-byte record per edge with the usual narrow type and trust (a miss per pick).
        self.record = alloc("record", total, np.dtype([(f, self.cols[f].dtype) for f in _RECORD_FIELDS], align=True))
        for f in _RECORD_FIELDS:
            self.record[f] = self.cols[f]
        # What every in-hop reads is also kept in dst order, so an in-hop is contiguous runs like an out-hop;
        # the other columns are reached through the permutation, for the few edges that get that far.
        direct = {}
        for f in _IN_ORDER:
            direct[f] = alloc(f"in_{f}", total, self.cols[f].dtype)
            np.take(self.cols[f], self.in_perm, out=direct[f])
        self.in_order = _InOrder(direct, self.cols, self.in_perm)
        invalid = self.cols["invalid_at"]
        distinct = np.unique(invalid)
        self.instants = alloc("instants", distinct.size, np.int64)
        self.instants[:] = distinct
        shift = max(1, width.bit_length())  # node ordinals lie below ``width``
        self.hot_shift = alloc("hot_shift", 1, np.int64)
        self.hot_shift[0] = shift
        packed = np.int32 if shift + int(distinct.size).bit_length() <= _INT32_BITS else np.int64
        rank = np.searchsorted(distinct, invalid).astype(packed) << packed(shift)
        self.hot_out = alloc("hot_out", total, packed)
        np.bitwise_or(rank, self.cols["dst"], out=self.hot_out, casting="unsafe")
        self.hot_in = alloc("hot_in", total, packed)
        np.bitwise_or(rank[self.in_perm], direct["src"], out=self.hot_in, casting="unsafe")
        self._both_runs(alloc, width, shift, int(distinct.size))
        # Each edge's place in the hop ranking (weight desc, valid_at desc, newest row first) over the whole
        # table, in both orders: ranking a hop is then one gather along its runs and a sort of int32 keys,
        # not three gathers scattered over the columns and a three-key sort.
        best = np.lexsort((self.cols["row"], self.cols["valid_at"], self.cols["weight"]))[::-1]
        self.best_out = alloc("best_out", total, np.int32)
        self.best_out[best] = np.arange(total, dtype=np.int32)
        self.best_in = alloc("best_in", total, np.int32)
        np.take(self.best_out, self.in_perm, out=self.best_in)
        # and in both-ways order: a both-ways hop ranks its candidates along the runs it read (a line or two per
        # node) rather than through ``both_pos`` to an in-edge's src-ordered place (a cache miss per edge)
        self.best_both = alloc("best_both", 2 * total, np.int32)
        np.take(self.best_out, self.both_pos, out=self.best_both)
        self.ids: np.ndarray | None = None
        self.doc_span: np.ndarray | None = None  # where each edge's listing with evidence lies (see .rowdocs)
        self._packing()
        self._bounds()

    def _both_runs(self, alloc: Callable[[str, int, Any], np.ndarray], width: int, shift: int, instants: int) -> None:
        # A both-ways hop reads each frontier node's out-edges and in-edges as one run (``both_off``): half the
        # scattered runs of reading the two orders apart. Each entry packs the far end, an "in" bit above it
        # and the invalid_at rank above that; ``both_pos`` is its edge's src-ordered position.
        outs, ins = np.diff(self.out_off), np.diff(self.in_off)
        self.both_off = alloc("both_off", width + 1, self.out_off.dtype)
        self.both_off[0] = 0
        np.cumsum(outs + ins, out=self.both_off[1:])
        total = int(self.out_off[-1])
        packed = np.int32 if shift + 1 + instants.bit_length() <= _INT32_BITS else np.int64
        self.hot_both = alloc("hot_both", 2 * total, packed)
        self.both_pos = alloc("both_pos", 2 * total, np.int32)
        low = (1 << shift) - 1
        nodes = np.arange(width)
        for hot, off, first, positions, inbit in ((self.hot_out, self.out_off, 0, None, 0),
                                                  (self.hot_in, self.in_off, outs, self.in_perm, 1 << shift)):
            node = np.repeat(nodes, np.diff(off))
            dest = (self.both_off[:-1] + first)[node] + (np.arange(total) - off[:-1][node])
            wide = hot.astype(np.int64)
            self.hot_both[dest] = ((wide >> shift) << (shift + 1)) | inbit | (wide & low)
            self.both_pos[dest] = np.arange(total) if positions is None else positions

    def attach_ids(self, width: int, ids: np.ndarray, alloc: Callable[[str, int, Any], np.ndarray] | None) -> None:
        """Each edge's ``_id`` bytes in table order (``width`` per edge; zeros where another length is kept apart)."""
        self.ids_width = (alloc or (lambda _name, size, dtype: np.empty(size, dtype)))("ids_width", 1, np.int64)
        self.ids_width[0] = width
        self.ids = ids
        self._id_view()

    def _id_view(self) -> None:
        self._ids_width = int(self.ids_width[0]) if self.ids is not None else 0
        # one fixed-width bytes value per edge: naming picks is one take and one tolist
        self._id_values = self.ids.view(f"S{self._ids_width}") if self.ids is not None and self._ids_width else None

    def _packing(self) -> None:
        self.shift = int(self.hot_shift[0])
        self.low = self.hot_out.dtype.type((1 << self.shift) - 1)
        self.inbit = 1 << self.shift  # marks an in-edge in ``hot_both``
        self.ends_mask = self.hot_both.dtype.type(self.low | self.inbit)  # far end and in bit, in the packed type
        self.both_order = _InOrder({}, self.cols, self.both_pos)
        self._alive_from: dict[int, int] = {}

    def alive_from(self, as_of: int) -> int:
        """The least packed value of an edge still valid after ``as_of`` (its invalid_at rank, shifted)."""
        found = self._alive_from.get(as_of)
        if found is None:
            if len(self._alive_from) > 256:  # instants repeat (a default as_of is now); bound the memo all the same
                self._alive_from.clear()
            found = self._alive_from[as_of] = int(np.searchsorted(self.instants, as_of, side="right")) << self.shift
        return found

    def _bounds(self) -> None:
        # The instants every edge of the table lies within: a hop at an as_of past every valid_at (or before
        # every invalid_at) needs no comparison for that side of the bitemporal mask.
        valid, invalid = self.cols["valid_at"], self.cols["invalid_at"]
        self.valid_max = int(valid.max()) if valid.size else ABSENT_INT
        self.invalid_min = int(invalid.min()) if invalid.size else ABSENT_INT

    def arrays(self) -> dict[str, np.ndarray]:
        """Every stored array by the name ``alloc`` gave it."""
        found = {"out_off": self.out_off, "in_off": self.in_off, "in_perm": self.in_perm, "instants": self.instants,
                 "hot_out": self.hot_out, "hot_in": self.hot_in, "hot_shift": self.hot_shift,
                 "best_out": self.best_out, "best_in": self.best_in, "best_both": self.best_both,
                 "both_off": self.both_off,
                 "hot_both": self.hot_both, "both_pos": self.both_pos, "record": self.record}
        found.update({f"col_{f}": a for f, a in self.cols.items()})
        found.update({f"in_{f}": a for f, a in self.in_order.direct.items()})
        if self.ids is not None:
            found.update(ids=self.ids, ids_width=self.ids_width)
        if self.doc_span is not None:
            found["doc_span"] = self.doc_span
        return found

    def named(self, position: np.ndarray) -> list[str | None]:
        """The ``_id`` of the edges at src-ordered ``position``; None where the table does not hold it."""
        if self._id_values is None:
            return [None] * len(position)
        # each id's bytes as one bytes object (numpy drops a fixed-width value's trailing zero bytes), decoded by
        # a C-level map: fewer steps per id than slicing one decoded string of them all
        out = list(map(bytes.decode, self._id_values.take(position).tolist()))
        if not all(out):  # a blank (all zero bytes, read as b""): an id of another length, kept apart
            out = [name or None for name in out]
        return out

    def picked(self, chosen: list[tuple["Part", np.ndarray]]) -> tuple[np.ndarray, np.ndarray] | None:
        """The edges at ``picks`` of each ``(part, picks)``, all parts of this table read the same way (out-runs,
        in-runs or both-ways runs), in order: their src-ordered positions and whether each was followed out;
        None when the parts are read otherwise. Each step is one pass over every pick, whatever the parts."""
        cols = chosen[0][0].cols
        if (cols is not self.cols and cols is not self.in_order and cols is not self.both_order) \
                or any(part.table is not self or part.cols is not cols for part, _ in chosen[1:]):
            return None
        places = [part.idx.take(picks) for part, picks in chosen]
        idx = _joined(places)
        if chosen[0][0].out is None:  # both ways: each edge's own in bit says
            if any(part.out is not None for part, _ in chosen):
                return None
            out = (_joined([part.hot.take(picks) if part.hot is not None else self.hot_both.take(at)
                            for (part, picks), at in zip(chosen, places)]) & self.inbit) == 0
        else:
            if any(part.out is None for part, _ in chosen):
                return None
            out = _joined([np.full(picks.size, part.out) if isinstance(part.out, bool) else part.out.take(picks)
                           for part, picks in chosen])
        return (idx if cols is self.cols else cols.perm.take(idx)), out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "EdgeTable":
        """A table over arrays :meth:`arrays` named (e.g. mapped back from files)."""
        table = cls.__new__(cls)
        table.out_off, table.in_off, table.in_perm = arrays["out_off"], arrays["in_off"], arrays["in_perm"]
        table.cols = {f: arrays[f"col_{f}"] for f in _STORED}
        table.record = arrays["record"]
        table.in_order = _InOrder({f: arrays[f"in_{f}"] for f in _IN_ORDER}, table.cols, table.in_perm)
        table.instants, table.hot_out, table.hot_in = arrays["instants"], arrays["hot_out"], arrays["hot_in"]
        table.hot_shift = arrays["hot_shift"]
        table.best_out, table.best_in, table.best_both = arrays["best_out"], arrays["best_in"], arrays["best_both"]
        table.both_off, table.hot_both, table.both_pos = arrays["both_off"], arrays["hot_both"], arrays["both_pos"]
        table.ids = arrays.get("ids")
        table.ids_width = arrays.get("ids_width")
        table.doc_span = arrays.get("doc_span")
        table._id_view()
        table._packing()
        table._bounds()
        return table

    def candidates(self, frontier: np.ndarray, direction: str, check_live: bool = True, *,
                   previous: np.ndarray | None = None, as_of: int | None = None) -> list["Part"]:
        """The edges touching the sorted ``frontier`` in ``direction``: one part (both ways: each node's out- and
        in-edges read as one run, see :meth:`_both_runs`).

        ``check_live`` False says every row of this table is known live, so no hop needs the live mask. Where
        the compiled loop reads the runs (see :mod:`.hoprun`) and no live mask is needed, it also drops what
        :func:`_screen` would cut first: a both-ways hop's edges back to ``previous`` (the earlier frontiers),
        and, given the ``as_of`` of a hop that withholds expired edges, the expired (counted in the part)."""
        width = self.out_off.size - 1  # every node ordinal of the table lies below
        usable = frontier if frontier[-1] < width else frontier[: np.searchsorted(frontier, width)]
        if not usable.size:
            return []
        if direction == OUT:
            off, cols, packed, out = self.out_off, self.cols, self.hot_out, True
        elif direction == IN:
            off, cols, packed, out = self.in_off, self.in_order, self.hot_in, False
        else:
            off, cols, packed, out = self.both_off, self.both_order, self.hot_both, None
        if hoprun.ENABLED and not check_live:
            both = out is None
            alive_from = self.alive_from(as_of) << both if as_of is not None and as_of >= self.invalid_min else 0
            idx, hot, expired = hoprun.read_runs(off, packed, usable, previous=previous if both else None,
                                                 low=int(self.low), inbit=self.inbit if both else 0,
                                                 alive_from=alive_from)
            if not idx.size and not expired:
                return []
            return [Part(cols, idx, out, False, (self.valid_max, self.invalid_min), hot, self, expired=expired)]
        if usable.size == 1:  # one node (an ego's first hop): its run is a slice, no gather
            begin, end = int(off[usable[0]]), int(off[usable[0] + 1])
            if begin == end:
                return []
            idx = np.arange(begin, end)
            hot = packed[begin:end]
        else:
            starts = off[usable]
            ends = off[usable + 1]
            lengths = ends - starts
            size = int(lengths.sum())
            if not size:
                return []
            idx = ranges(starts, lengths, size)
            if usable.size >= _TOUCH_AT:
                # Read each run's first and last entry before the gather (a software prefetch): the gather walks
                # run after run, so its cache misses come one at a time, while these reads, one per run, miss
                # many lines at once; then the gather finds its runs (a line or two each) in the cache.
                packed.take(starts, mode="clip")
                packed.take(ends - 1, mode="clip")
            hot = packed.take(idx, mode="clip")  # every place lies inside: no bounds check
        fresh = None
        if out is None:  # an in-edge from a frontier node is the out-edge already met
            # The far end and the in bit read together: an edge is met already when it is an in-edge whose far
            # end is in the frontier, that is when those bits equal a frontier node's with the in bit set.
            ends = hot & self.ends_mask
            if usable.size == 1:
                fresh = ends != (int(usable[0]) | self.inbit)
            elif usable.size > BITMAP_AT:
                # One flag per node, after a first flag for every out-edge: an in-edge's far end moved up by one,
                # while every out-edge (no in bit) falls to zero or below and is clipped to the first flag:
                # at most half the bytes to fill per hop of a bitmap over far end and in bit together.
                fresh_at = np.ones(width + 1, bool)
                fresh_at[usable + 1] = False
                ends -= self.inbit - 1
                fresh = fresh_at.take(ends.astype(np.intp), mode="clip")  # a take casts other indices itself, slower
            else:
                fresh = ~member(ends, usable + self.inbit)
        # the met edges are dropped with the screen's own cut (one pass instead of two)
        return [Part(cols, idx, out, check_live, (self.valid_max, self.invalid_min), hot, self, fresh)]


class _InOrder:
    """An edge table's columns seen in ``dst`` order: positions index the in-edge runs.

    The fields an in-hop screens are stored in that order; any other field is
    gathered through the permutation to its ``src``-ordered position.
    """

    __slots__ = ("direct", "cols", "perm")

    def __init__(self, direct: dict[str, np.ndarray], cols: dict[str, np.ndarray], perm: np.ndarray) -> None:
        self.direct = direct
        self.cols = cols
        self.perm = perm

    def take(self, field: str, idx: np.ndarray) -> np.ndarray:
        found = self.direct.get(field)
        return found[idx] if found is not None else self.cols[field][self.perm[idx]]

    def __contains__(self, field: str) -> bool:
        return False  # carries no hop ends of its own (see Part.get)


def _offsets_dtype(edges: int) -> type:
    """The type of a table's run offsets: int32 while every run end fits (both-ways runs hold each edge twice).
    A hop looks up two offsets per frontier node at scattered places, so half the bytes is half the table those
    reads span; a published table of int64 offsets is an older layout (see ``_FORMAT``) and is rebuilt."""
    return np.int32 if 2 * edges < 2**31 else np.int64


def _placement(order: np.ndarray, off: np.ndarray, cursor: np.ndarray) -> np.ndarray:
    """Where each row of one grouping lands among all groupings' rows (advancing ``cursor`` per ordinal)."""
    counts = np.diff(off)
    ordinals = np.repeat(np.arange(counts.size), counts)
    dest = cursor[ordinals] + (np.arange(order.size) - off[ordinals])
    cursor[: counts.size] += counts
    return dest


class SealedView:
    """The node CSR over every sealed segment of one edges index, without the rows already dead when built.

    The segments' columns are read as views of the memory-mapped data file
    while the table is built, so the only copy is the table itself; with
    ``files`` the table is built straight into files and mapped back, so it
    is page cache shared by every process rather than private memory, and a
    process finding the same table already published maps it without
    building. Rows die but never come back, so a hop checks the live mask
    only when rows died after the build (``dead_at_build`` no longer matches
    the reader's).
    """

    def __init__(self, reader: IndexReader, files: ArrayFiles | None = None, row_ids: RowIds | None = None,
                 elsewhere: Callable[[IndexReader, str], bool] | None = None, row_docs: RowDocs | None = None
                 ) -> None:
        """``elsewhere(reader, key)``: asked to have the files of ``key`` published by another process (see
        :mod:`.viewchild`) when they are not yet; False, or no files after it, and this process builds them.
        ``row_docs``: the segments' edge listings, whose places the table keeps per edge (see :mod:`.rowdocs`)."""
        self.segments = tuple(reader.segments)
        self.skipped = 0
        self.dead_at_build = len(reader.dead_rows())
        key = None
        if files is not None:
            key = view_key(reader)
            found = files.load(key)
            if found is None and elsewhere is not None and elsewhere(reader, key):
                found = files.load(key)
            if found is not None:
                self.table, self.skipped = EdgeTable.from_arrays(found[0]), found[1]["skipped"]
                return
        writer = files.writer(key) if files is not None and key is not None else None
        groups: list[tuple[int, SegmentCSR, Callable[[str], np.ndarray]]] = []
        with reader.mapped_columns(HOP_FIELDS) as columns_of:
            for seg in self.segments:
                columns = columns_of(seg)
                csr = segment_csr(seg, columns, keep=writer is None)
                if csr is None or columns is None:
                    self.skipped += 1
                    continue
                alive = reader.live[seg.start:seg.end]
                if not alive.all():
                    csr = _alive_only(csr, alive, columns["src"].values, columns["dst"].values)
                groups.append((seg.start, csr, (lambda cols: lambda field: cols[field].values)(columns)))
            try:
                self.table = self._built(groups, reader, row_ids, writer.alloc if writer is not None else None,
                                         row_docs)
            except OSError:
                if writer is None:
                    raise
                writer.abandon()  # no room for the files (a full or read-only disk): keep the table in memory
                writer = None
                self.table = self._built(groups, reader, row_ids, None, row_docs)
            except BaseException:
                if writer is not None:
                    writer.abandon()
                raise
        if writer is not None:
            published = writer.publish({"skipped": self.skipped})
            if published is not None:
                self.table = EdgeTable.from_arrays(published[0])

    @staticmethod
    def _built(groups: list[tuple[int, SegmentCSR, Callable[[str], np.ndarray]]], reader: IndexReader,
               row_ids: RowIds | None, alloc: Callable[[str, int, Any], np.ndarray] | None,
               row_docs: RowDocs | None = None) -> EdgeTable:
        """The table, with its edges' ids in table order when ``row_ids`` names the segments' rows (so ego
        names a hop's picks with one gather), and where each edge's listing lies when ``row_docs`` is given
        (so ego with evidence reads its picks' listings as slices of mapped blobs)."""
        table = EdgeTable(groups, alloc)
        found = row_ids.in_order(reader, table.cols["row"], alloc) if row_ids is not None else None
        if found is not None:
            table.attach_ids(*found, alloc)
        if row_docs is not None:
            table.doc_span = row_docs.in_order(reader, table.cols["row"], alloc)
        return table

    def candidates(self, frontier: np.ndarray, direction: str, check_live: bool, **screen: Any) -> list["Part"]:
        return self.table.candidates(frontier, direction, check_live, **screen)


def view_key(reader: IndexReader) -> str:
    """The name of the files of ``reader``'s sealed view: its index, its segment layout and which of the segments'
    rows are live. Two snapshots with the same key hold the same view, whichever process or reader (a pinned one,
    whose dead rows are not the newest's) computed it."""
    segments = reader.segments
    layout = ",".join(f"{s.start}:{s.end}:{s.sealed_at}" for s in segments)
    sealed_end = max((s.end for s in segments), default=0)
    live = hashlib.blake2b(np.packbits(reader.live[:sealed_end]).tobytes(), digest_size=16).hexdigest()
    dead = len(reader.dead_rows())
    digest = hashlib.blake2b(f"{layout}/{dead}/{live}/{_FORMAT}".encode(), digest_size=12).hexdigest()
    return f"{reader.meta['uuid']}@{digest}"


def _ordinal_dtype(largest: int) -> type:
    """The narrowest signed type holding ordinals up to ``largest`` (and -1 for absent)."""
    return np.int8 if largest < 2**7 else np.int16 if largest < 2**15 else np.int32


class TailView:
    """The mutable tail, scanned once per index generation into the same node grouping as the sealed rows."""

    def __init__(self, reader: IndexReader) -> None:
        self.start = reader.tail_start
        self.count = reader.tail_count
        self.scannable = all(reader.field(f) is not None for f in HOP_FIELDS)
        self.table: EdgeTable | None = None
        self.nodes = _EMPTY
        self.touched = np.zeros(0, bool)  # per node ordinal, whether an edge of the tail touches it
        if self.scannable and self.count:
            cols = {f: reader.tail_column(f).values for f in HOP_FIELDS}
            src, dst = cols["src"], cols["dst"]
            alive = reader.live[self.start:self.start + self.count]  # built per generation: exact
            local = np.flatnonzero((src >= 0) & (dst >= 0) & alive).astype(np.int32)
            out_order, out_off = _group(src[local], local)
            in_order, in_off = _group(dst[local], local)
            grouping = SegmentCSR(out_order, out_off, in_order, in_off)
            self.table = EdgeTable([(self.start, grouping, cols.__getitem__)])
            # The few nodes the tail's edges touch: a large frontier is cut to them before the offsets lookups.
            self.nodes = np.union1d(src[local], dst[local])
            self.touched = np.zeros(int(self.nodes[-1]) + 1 if self.nodes.size else 0, bool)
            self.touched[self.nodes] = True

    def candidates(self, frontier: np.ndarray, direction: str, **screen: Any) -> list["Part"]:
        if self.table is None:
            return []
        # An edge of the tail joining two frontier nodes has both ends among the tail's nodes, so the cut
        # frontier still tells a both-ways hop which in-edges were met as out-edges; most small frontiers touch
        # no tail node at all, and stop here.
        frontier = self.touching(frontier)
        return self.table.candidates(frontier, direction, False, **screen) if frontier.size else []

    def touching(self, frontier: np.ndarray) -> np.ndarray:
        """The nodes of the sorted, non-empty ``frontier`` that some edge of the tail touches."""
        touched = self.touched
        if frontier.size == 1:  # an ego's seed: tested as a Python int, no array made
            node = int(frontier[0])
            return frontier if node < touched.size and touched[node] else _EMPTY
        if frontier[-1] >= touched.size:
            frontier = frontier[: np.searchsorted(frontier, touched.size)]
        return frontier[touched.take(frontier)]


class TermArrays:
    """The node dictionary's terms as an object array (ordinal → the term's own str), grown as the dictionary
    grows (it only appends), so naming 100 edges' ends is a take and a ``tolist`` rather than 100 lookups."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[int, tuple[Any, np.ndarray, int]] = {}  # id(dictionary) -> (dictionary, array, filled)

    def of(self, dictionary: Any) -> np.ndarray:
        """An array whose first ``len(dictionary.terms)`` (at least) entries are its terms."""
        found = self._found.get(id(dictionary))
        size = len(dictionary.terms)
        if found is not None and found[0] is dictionary and found[2] >= size:
            return found[1]
        with self._lock:
            found = self._found.get(id(dictionary))
            if found is None or found[0] is not dictionary:
                array, filled = np.empty(max(size, 1024), object), 0
            else:
                _, array, filled = found
            size = len(dictionary.terms)
            if size > array.size:  # room for growth: the copy is amortized over many appends
                grown = np.empty(2 * size, object)
                grown[:filled] = array[:filled]
                array = grown
            array[filled:size] = dictionary.terms[filled:size]
            if len(self._found) >= _TERM_ARRAYS_KEPT:  # dictionaries of dropped indices are let go in time
                self._found.clear()
            self._found[id(dictionary)] = (dictionary, array, size)
            return array


class ViewCache:
    """One sealed view per edges index, kept while its segment layout is unchanged.

    Keyed by index name and checked against the index's uuid, so a dropped and
    recreated brain never reads the old one's view.
    """

    def __init__(self, directory: Path | None = None, data: Path | None = None) -> None:
        """``directory``: where sealed views are kept as mapped files (None keeps them in private memory).
        ``data``: the LMDB data directory those views are of; a child process opens it to build a large view
        (see :mod:`.viewchild`), so the heap the build frees is not left to this process. None builds here."""
        self._views: dict[str, tuple[str, SealedView]] = {}
        self._lock = threading.Lock()
        self._files = ArrayFiles(directory) if directory is not None else None
        self.row_ids = RowIds(self._files)
        self.row_docs = RowDocs(self._files)
        self.terms = TermArrays()
        self.children = ChildBuilds(data, self._files) if data is not None and self._files is not None else None

    def _current(self, reader: IndexReader) -> SealedView | None:
        found = self._views.get(reader.name)
        if found is not None and found[0] == reader.meta["uuid"] and found[1].segments == tuple(reader.segments):
            return found[1]
        return None

    def sealed(self, reader: IndexReader) -> SealedView:
        view = self._current(reader)
        if view is not None:
            if view.dead_at_build > len(reader.dead_rows()):
                return SealedView(reader)  # an older snapshot than the view's: rows it dropped live here
            return view
        with self._lock:
            view = self._current(reader)
            if view is None:
                self._views.pop(reader.name, None)  # let the old view go before the new one is built
                view = SealedView(reader, self._files, self.row_ids,
                                  self.children.build if self.children is not None else None, self.row_docs)
                self._views[reader.name] = (reader.meta["uuid"], view)
        return view

    def graph(self, reader: IndexReader) -> "GraphView":
        """The index as hops see it in ``reader``'s snapshot, made once per generation of the index."""
        return reader.memo(("xerj.graph", "view", id(self), reader.meta["uuid"]), lambda: self._graph(reader))

    def _graph(self, reader: IndexReader) -> "GraphView":
        sealed = self.sealed(reader)
        tail = reader.memo(("xerj.graph", "tail"), lambda: TailView(reader))
        return GraphView(sealed, tail, reader.live, len(reader.dead_rows()) != sealed.dead_at_build)


@attrs.define
class GraphView:
    """One snapshot of an edges index as the hop engine sees it.

    ``check_live``: rows of the sealed view died since it was built, so its hops consult ``live``.
    """

    sealed: SealedView
    tail: TailView
    live: np.ndarray
    check_live: bool = True

    @property
    def segments_without_columns(self) -> int:
        return self.sealed.skipped + (1 if self.tail.count and not self.tail.scannable else 0)


class HopEdges:
    """The edges one hop kept, as indices into their sources' columns; a column is gathered when first asked for.

    ``order`` ranks them: weight desc, valid_at desc, then the newest write first.
    """

    def __init__(self, hop: int, parts: list["Part"], frontier: np.ndarray = _EMPTY) -> None:
        self.hop = hop
        self.parts = parts
        self.frontier = frontier  # the node ordinals this hop expanded from
        self._cols: dict[str, np.ndarray] = {}
        self._rank: np.ndarray | None = None
        # the parts are screened before they get here
        self._size = parts[0].size if len(parts) == 1 else sum(p.size for p in parts)
        self._placed: list[tuple[EdgeTable, np.ndarray, np.ndarray]] | None = None

    def __len__(self) -> int:
        return self._size

    def placed(self) -> list[tuple["EdgeTable", np.ndarray, np.ndarray]] | None:
        """Per edge table, in part order: each edge's src-ordered position in it (an in-edge's through the
        permutation) and whether it was followed out; None when a part indexes something else.

        A column is then one gather per table however many parts the hop had, and a selection of the hop
        is a plain part of its table."""
        if self._placed is None:
            placed: list[tuple[EdgeTable, list[np.ndarray], list[np.ndarray]]] = []
            for part in self.parts:
                table = part.table
                if table is None or (part.cols is not table.cols and part.cols is not table.in_order
                                     and part.cols is not table.both_order):
                    return None
                if not placed or placed[-1][0] is not table:
                    if any(t is table for t, _, _ in placed):
                        return None  # a table's parts apart: the concatenated order would not hold
                    placed.append((table, [], []))
                placed[-1][1].append(part.idx if part.cols is table.cols else part.cols.perm[part.idx])
                placed[-1][2].append(part.get("out"))
            self._placed = [(t, np.concatenate(pos) if len(pos) > 1 else pos[0],
                             np.concatenate(out) if len(out) > 1 else out[0]) for t, pos, out in placed]
        return self._placed

    def placed_at(self, picks: np.ndarray) -> list[tuple["EdgeTable", np.ndarray, np.ndarray, np.ndarray | None]] | None:
        """Per edge table, the edges at ``picks`` (positions in this hop's order) lying in it: ``(table, src-ordered
        positions, followed out, their places among picks)``, places None when every pick lies in that one table
        (in order); None when a part indexes something else (see :meth:`placed`)."""
        if len(self.parts) == 1 and self.parts[0].table is not None:  # the usual hop: only the picks are gathered
            found = self.parts[0].table.picked([(self.parts[0], picks)])
            if found is not None:
                return [(self.parts[0].table, *found, None)]
        tables = [part.table for part in self.parts]
        if None not in tables and len({id(table) for table in tables}) == len(tables):
            # a part per table (the sealed view's and the tail's): only each part's picks are placed
            found = []
            lo = 0
            for part in self.parts:
                inside = np.flatnonzero((picks >= lo) & (picks < lo + part.size))
                got = part.table.picked([(part, picks[inside] - lo)])
                if got is None:
                    break
                found.append((part.table, *got, inside))
                lo += part.size
            else:
                return found
        placed = self.placed()
        if placed is None:
            return None
        if len(placed) == 1:
            table, position, out = placed[0]
            return [(table, position.take(picks), out.take(picks), None)]
        found = []
        lo = 0
        for table, position, out in placed:
            inside = np.flatnonzero((picks >= lo) & (picks < lo + position.size))
            at = picks[inside] - lo
            found.append((table, position[at], out[at], inside))
            lo += position.size
        return found

    def column(self, field: str) -> np.ndarray:
        found = self._cols.get(field)
        if found is None:
            placed = None if len(self.parts) == 1 or field in ("other", "invalid_at") else self.placed()
            if placed is not None:
                found = [out if field == "out" else np.where(out, t.cols["src"][pos], t.cols["dst"][pos])
                         if field == "near" else t.cols[field][pos] for t, pos, out in placed]
                found = found[0] if len(found) == 1 else np.concatenate(found)
            elif len(self.parts) == 1:
                found = self.parts[0].get(field)
            else:
                found = np.concatenate([p.get(field) for p in self.parts])
            self._cols[field] = found
        return found

    def named(self) -> list[str | None]:
        """Each edge's ``_id`` where its edge table keeps ids (see :meth:`EdgeTable.named`), else None."""
        if len(self.parts) == 1:
            part = self.parts[0]
            if isinstance(part.cols, _Columns):  # a selection of a hop of several parts
                return part.cols.edges._named_at(part.idx)
            table = part.table
            if table is not None and table.ids is not None:
                if part.cols is table.cols:
                    return table.named(part.idx)
                if part.cols is table.in_order or part.cols is table.both_order:
                    return table.named(part.cols.perm[part.idx])
            return [None] * len(self)
        return self._named_at(np.arange(len(self)))

    def _named_at(self, idx: np.ndarray) -> list[str | None]:
        out: list[str | None] = [None] * idx.size
        lo = 0
        for table, position, _out in self.placed() or ():
            hi = lo + position.size
            if table.ids is not None:
                sel = np.flatnonzero((idx >= lo) & (idx < hi))
                for i, name in zip(sel.tolist(), table.named(position[idx[sel] - lo])):
                    out[i] = name
            lo = hi
        return out

    @property
    def out(self) -> np.ndarray:
        return self.column("out")

    @property
    def others(self) -> np.ndarray:
        return self.column("other")

    @property
    def src(self) -> np.ndarray:
        return np.where(self.out, self.column("near"), self.others)

    @property
    def dst(self) -> np.ndarray:
        return np.where(self.out, self.others, self.column("near"))

    def _best(self) -> np.ndarray | None:
        """Each edge's place in its table's ranking (see EdgeTable), when every part indexes one table."""
        table = self.parts[0].table
        keys = []
        for part in self.parts:
            if part.table is not table or table is None:
                return None
            ranks = _ranks(part)
            if ranks is None:
                return None
            keys.append(ranks)
        return keys[0] if len(keys) == 1 else np.concatenate(keys)

    def order(self, k: int | None = None) -> np.ndarray:
        """Indices of the best ``k`` edges (all when None), best first."""
        n = len(self)
        if self._rank is None:
            best = self._best()
            if best is not None:
                if k is None or k >= n:
                    self._rank = np.argsort(best)
                elif k <= 0:
                    return _EMPTY
                else:
                    pick = np.argpartition(best, k - 1)[:k]
                    return pick[np.argsort(best[pick])]
            elif k is not None and 0 < k < n:
                merged = self._merged_best(k)
                if merged is not None:
                    return merged
        if self._rank is not None:
            return self._rank[:k]
        row, valid, weight = self.column("row"), self.column("valid_at"), self.column("weight")
        # Every key descending is an ascending sort read backwards: a hop meets each row once, so no two edges
        # tie on all three keys and the reversal reorders no equals.
        if k is None or k >= n or self._rank is not None:
            if self._rank is None:
                self._rank = np.lexsort((row, valid, weight))[::-1]
            return self._rank[:k]
        if k <= 0:
            return _EMPTY
        threshold = np.partition(weight, n - k)[n - k]  # the k-th largest weight
        pick = np.flatnonzero(weight >= threshold)
        return pick[np.lexsort((row[pick], valid[pick], weight[pick]))[::-1][:k]]

    def _merged_best(self, k: int) -> np.ndarray | None:
        """The best ``k`` of a hop whose edges lie in several parts (the sealed view's and the tail's): each
        part's best ``k`` by its table's ranking, then those few ranked by the three keys; None when a part
        indexes no table.

        The global best ``k`` are among each part's own best ``k`` (rows are unique, so the three keys order
        every edge), so only those keys are gathered, and only those picks are placed in their tables. Each
        part's ranks are read in the order it read its runs (see EdgeTable.best_both)."""
        picks, rows, valids, weights = [], [], [], []
        lo = 0
        for part in self.parts:
            ranks = _ranks(part)
            if ranks is None:
                return None
            table = part.table
            pick = np.argpartition(ranks, k - 1)[:k] if ranks.size > k else np.arange(ranks.size)
            idx = part.idx.take(pick)
            at = idx if part.cols is table.cols else part.cols.perm.take(idx)
            record = table.record.take(at)
            rows.append(table.cols["row"].take(at))
            valids.append(record["valid_at"])
            weights.append(record["weight"])
            picks.append(pick + lo)
            lo += part.size
        ranked = np.lexsort((np.concatenate(rows), np.concatenate(valids), np.concatenate(weights)))[::-1][:k]
        return np.concatenate(picks)[ranked]

    def take(self, idx: np.ndarray) -> "HopEdges":
        """The edges at ``idx`` (positions in this hop's concatenated order), still gathered lazily."""
        if len(self.parts) == 1:
            part = self.parts[0]
            return HopEdges(self.hop, [Part(part.cols, part.idx[idx], part.out[idx] if isinstance(part.out, np.ndarray)
                                            else part.out, hot=None if part.hot is None else part.hot[idx],
                                            table=part.table)], self.frontier)
        placed = self.placed()
        if placed is not None and len(placed) == 1:
            table, position, out = placed[0]
            return HopEdges(self.hop, [Part(table.cols, position[idx], out[idx], table=table)], self.frontier)
        return HopEdges(self.hop, [Part(_Columns(self), idx, self.out[idx])], self.frontier)


def _ranks(part: "Part") -> np.ndarray | None:
    """Each edge of ``part``'s place in its table's ranking, read in the part's own order; None when the part
    indexes no table."""
    table = part.table
    if table is None:
        return None
    if part.cols is table.cols:
        return table.best_out[part.idx]
    if part.cols is table.in_order:
        return table.best_in[part.idx]
    if part.cols is table.both_order:
        return table.best_both[part.idx]
    return None


class _Columns:
    """A hop's concatenated columns as a mapping, for a selection of several parts."""

    def __init__(self, edges: HopEdges) -> None:
        self.edges = edges

    def __getitem__(self, field: str) -> np.ndarray:
        return self.edges.column(field)

    def __contains__(self, field: str) -> bool:
        return field in _CARRIED


@attrs.define
class Filters:
    as_of: int
    include_expired: bool = False
    type_ords: np.ndarray | None = None
    trust_ords: np.ndarray | None = None
    min_confidence: float | None = None
    # trust states never followed (a blend's ``rejected``), counted in trust_filtered like trust_ords
    refused_trust_ords: np.ndarray | None = None


def new_counters() -> dict[str, int]:
    return {"edges_clipped": 0, "frontier_clipped": 0, "expired_excluded": 0, "type_filtered": 0,
            "trust_filtered": 0, "confidence_filtered": 0, "segments_without_columns": 0,
            "memtable_docs_scanned": 0}


@attrs.define
class Part:
    """Candidate edges: indices into an edge table's columns, and whether each was followed out (src → dst)."""

    cols: Any
    _idx: np.ndarray  # see ``idx``
    out: bool | np.ndarray | None  # None: each edge's own in bit says (a both-ways part, see EdgeTable._both_runs)
    check_live: bool = True  # False when every row the part can reach is known live
    bounds: tuple[int, int] | None = None  # the largest valid_at and smallest invalid_at it can reach
    hot: np.ndarray | None = None  # per edge, the packed far end and invalid_at rank (see EdgeTable._packing)
    table: "EdgeTable | None" = None  # the table ``hot`` was gathered from
    fresh: np.ndarray | None = None  # edges not already met this hop (None: all); the screen starts from it
    # how many expired edges the compiled read withheld, having dropped the met ones too (None: read by numpy,
    # every cut left to the screen)
    expired: int | None = None
    _kept: np.ndarray | None = attrs.field(default=None, init=False)  # which of ``_idx`` are kept, not yet cut
    _count: int = attrs.field(default=0, init=False)  # how many ``_kept`` keeps

    @property
    def idx(self) -> np.ndarray:
        """Each edge's place in ``cols``. A screen's cut is applied to it only when it is first read: a hop
        whose caller wants the far ends alone (the next frontier) never gathers the places."""
        if self._kept is not None:
            self._idx, self._kept = self._idx[self._kept], None
        return self._idx

    @property
    def size(self) -> int:
        return int(self._idx.size if self._kept is None else self._count)

    def directions(self) -> bool | np.ndarray:
        """Whether the edges were followed out (src → dst): one bool for the whole part, or one per edge."""
        if self.out is not None:
            return self.out
        packed = self.hot if self.hot is not None else self.table.hot_both[self.idx]
        return (packed & self.table.inbit) == 0

    def get(self, field: str) -> np.ndarray:
        if field == "out":
            out = self.directions()
            return np.full(self.size, out) if isinstance(out, bool) else out
        if self.hot is not None:
            if field == "other":
                return (self.hot & self.table.low).astype(np.int64)
            if field == "invalid_at":  # the rank sits above the in bit in a both-ways part
                return self.table.instants[self.hot >> (self.table.shift + (self.out is None))]
        cols, idx = self.cols, self.idx
        if field in ("other", "near"):
            if "out" in cols:  # a selection already carries its ends
                return cols[field][idx]
            out = self.directions()
            far, close = ("dst", "src") if field == "other" else ("src", "dst")
            if isinstance(out, bool):
                return _take(cols, far if out else close, idx)
            return np.where(out, _take(cols, far, idx), _take(cols, close, idx))
        return _take(cols, field, idx)

    def alive_at(self, as_of: int) -> np.ndarray:
        """Per edge, whether its invalid_at lies after ``as_of``."""
        if self.hot is not None:
            # rank >= r exactly when the packed value >= r << shift (the far end fills the low bits): one pass
            return self.hot >= self.table.alive_from(as_of) << (self.out is None)
        return self.get("invalid_at") > as_of

    def keep(self, mask: np.ndarray, count: int) -> None:
        """Keep the edges ``mask`` (one bool per edge, ``count`` of them true) says: each array is cut by the mask
        itself, one pass each, with no list of kept places made first."""
        if self._kept is not None:  # cut again before the places were read: the mask over every place
            first = self._kept
            mask_all = np.zeros(first.size, bool)
            mask_all[np.flatnonzero(first)[mask]] = True
            self._kept = mask_all
        else:
            self._kept = mask
        self._count = count
        if self.hot is not None:
            self.hot = self.hot[mask]
        if isinstance(self.out, np.ndarray):
            self.out = self.out[mask]


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _take(cols: Any, field: str, idx: np.ndarray) -> np.ndarray:
    return cols.take(field, idx) if isinstance(cols, _InOrder) else cols[field][idx]


def _screen(view: GraphView, part: Part, frontier: np.ndarray, previous: np.ndarray, direction: str,
            filters: Filters, counters: dict[str, int]) -> None:
    """Keep the live edges no earlier hop met that pass the bitemporal, type, trust and confidence masks.

    An earlier hop met exactly the edges whose far end lies in an earlier
    frontier (``previous``); with ``both``, an edge joining two frontier nodes
    is met once, as ``out``. Dead (overwritten) rows are not edges and are not counted.
    Each mask is one pass; the kept edges are counted only where a counter needs it (see :class:`_Kept`).
    """
    kept = _Kept(part.fresh, part.size)
    part.fresh = None
    if part.check_live:
        kept.cut(view.live[part.get("row")], counted=False)
    if direction == BOTH and previous.size and part.expired is None:  # else the compiled read dropped them
        if previous.size == 1 and part.hot is not None:  # an ego's second hop: the far ends read off the packing
            kept.cut((part.hot & part.table.low) != previous[0], counted=False)
        else:
            kept.cut(~member(part.get("other"), previous), counted=False)
    valid_max, invalid_min = part.bounds if part.bounds is not None else (ABSENT_INT, -ABSENT_INT - 1)
    passed = part.get("valid_at") <= filters.as_of if filters.as_of < valid_max else None
    if part.expired is not None:  # the compiled read withheld the expired (it was given the as_of, see expand)
        counters["expired_excluded"] += part.expired
    elif not filters.include_expired and filters.as_of >= invalid_min:
        alive = part.alive_at(filters.as_of)
        passed = alive if passed is None else passed & alive
    if passed is not None:
        counters["expired_excluded"] += kept.cut(passed)
    for name, field, allowed in (("type_filtered", "type", filters.type_ords),
                                 ("trust_filtered", "trust", filters.trust_ords)):
        if allowed is not None:
            counters[name] += kept.cut(member(part.get(field), allowed))
    if filters.refused_trust_ords is not None:
        counters["trust_filtered"] += kept.cut(~member(part.get("trust"), filters.refused_trust_ords))
    if filters.min_confidence is not None:
        counters["confidence_filtered"] += kept.cut(part.get("confidence") >= np.float32(filters.min_confidence))
    if kept.mask is not None and kept.counted() < kept.size:
        part.keep(kept.mask, kept.count)


class _Kept:
    """The edges of a part still kept while it is screened (``mask`` None while every one is) and their count.

    Each cut is one pass over the part; the kept edges are counted only where a count is asked for (a counter
    the cut feeds, and at the end whether anything was cut at all), not after every cut."""

    __slots__ = ("mask", "size", "count")

    def __init__(self, mask: np.ndarray | None, size: int) -> None:
        self.mask = mask  # the screen's own array: cut in place
        self.size = size
        self.count: int | None = size if mask is None else None  # None: not counted since the last cut

    def counted(self) -> int:
        if self.count is None:
            self.count = int(np.count_nonzero(self.mask))
        return self.count

    def cut(self, passed: np.ndarray, *, counted: bool = True) -> int:
        """Keep only the kept edges ``passed`` (a fresh array, taken over) also keeps; how many it withheld
        (0, and nothing counted, when not ``counted``)."""
        before = self.counted() if counted else 0
        if self.mask is None:
            self.mask = passed
        else:
            np.logical_and(self.mask, passed, out=self.mask)
        self.count = None
        return before - self.counted() if counted else 0


def expand(view: GraphView, seeds: np.ndarray, *, hops: int, direction: str, filters: Filters,
           counters: dict[str, int], frontier_cap: int = FRONTIER_CAP, edge_cap: int = EDGE_CAP) -> list[HopEdges]:
    """Up to ``hops`` hops from ``seeds`` (node ordinals); the edges each hop kept.

    An edge is met once: the hop that first reaches it owns it (and its
    counters). The next frontier is the far ends not yet visited, clipped at
    ``frontier_cap`` in the rank order of the edges that reached them. Past
    ``edge_cap`` kept edges the rest are counted in ``edges_clipped``.
    """
    counters["segments_without_columns"] += view.segments_without_columns
    frontier = np.asarray(seeds, np.int64)
    if frontier.size > 1 and not np.all(frontier[1:] > frontier[:-1]):
        frontier = np.unique(frontier)
    if frontier.size and frontier[0] < 0:  # sorted: any negative ordinal (an unknown seed) comes first
        frontier = frontier[frontier >= 0]
    if filters.type_ords is not None:
        filters = attrs.evolve(filters, type_ords=np.unique(filters.type_ords))
    if filters.trust_ords is not None:
        filters = attrs.evolve(filters, trust_ords=np.unique(filters.trust_ords))
    previous = np.empty(0, np.int64)
    result: list[HopEdges] = []
    kept_total = 0
    for hop in range(1, hops + 1):
        if not frontier.size:
            break
        if view.tail.table is not None:
            counters["memtable_docs_scanned"] += view.tail.count
        # what the compiled read may cut while it reads (see EdgeTable.candidates)
        screen = {"previous": previous, "as_of": None if filters.include_expired else filters.as_of}
        parts = view.sealed.candidates(frontier, direction, view.check_live, **screen) \
            + view.tail.candidates(frontier, direction, **screen)
        for part in parts:
            _screen(view, part, frontier, previous, direction, filters, counters)
        parts = [p for p in parts if p.size]
        if not parts:
            break
        edges = HopEdges(hop, parts, frontier)
        room = max(0, edge_cap - kept_total)
        if len(edges) > room:
            counters["edges_clipped"] += len(edges) - room
            edges = edges.take(edges.order(room))
        kept_total += len(edges)
        result.append(edges)
        if hop == hops:
            break
        visited = np.union1d(previous, frontier) if previous.size else frontier
        others = edges.others
        nxt = unique_ids(others[~member(others, visited)])
        if nxt.size > frontier_cap:
            # Keep the far ends of the best edges: first occurrence in rank order.
            ranked = others[edges.order()]
            ranked = ranked[~member(ranked, visited)]
            unique, first_at = np.unique(ranked, return_index=True)
            counters["frontier_clipped"] += int(nxt.size - frontier_cap)
            nxt = np.sort(unique[np.argsort(first_at, kind="stable")][:frontier_cap])
        previous, frontier = visited, nxt
    return result


@attrs.frozen
class LeanPicks:
    """What :func:`lean_picks` found: per edge table holding some of the listed edges, ``(table, their src-ordered
    positions, whether each was followed out, their places in the response)`` (places None when one table holds
    every listed edge, in response order); each listed edge's ``hops`` number, in response order; and how many
    edges the hops kept in all (``total``)."""

    pieces: list[tuple[EdgeTable, np.ndarray, np.ndarray, np.ndarray | None]]
    hops: list[int]
    total: int


_Span = tuple[int, int, "np.ndarray | None"]  # a hop's first place in the response, its picks in one table, their places


class _LeanPart:
    """The edges one hop kept in one table: their places in its both-ways runs and their packed entries."""

    __slots__ = ("table", "idx", "hot")

    def __init__(self, table: EdgeTable, idx: np.ndarray, hot: np.ndarray) -> None:
        self.table, self.idx, self.hot = table, idx, hot


def lean_picks(view: GraphView, seeds: np.ndarray, *, hops: int, direction: str, filters: Filters, limit: int,
               counters: dict[str, int], frontier_cap: int = FRONTIER_CAP, edge_cap: int = EDGE_CAP
               ) -> LeanPicks | None:
    """The usual ego (one seed, both ways, one or two hops, the bitemporal mask alone, every sealed row live)
    in one pass: what :func:`expand`, then ranking each hop and placing its best ``limit`` picks would give, with
    the same counters; None, with ``counters`` untouched, when the request or the snapshot is not that case (or
    a frontier or the edges kept outgrow their caps), and the general path answers.

    It makes no Part, HopEdges or screen per hop: a few array passes per table a hop reads (the sealed view's,
    and the tail's where its edges touch the frontier), so an ego runs fewer distinct steps, which is what a
    cache shared with other work keeps warm."""
    if direction != BOTH or not 1 <= hops <= 2 or seeds.size != 1 or limit <= 0 or view.check_live \
            or filters.type_ords is not None or filters.trust_ords is not None \
            or filters.refused_trust_ords is not None or filters.min_confidence is not None:
        return None
    seed = int(seeds[0])
    if seed < 0:
        return None
    tail = view.tail
    frontier = seeds.astype(np.int64, copy=False)
    previous = None
    found: list[tuple[int, list[_LeanPart]]] = []
    expired = scanned = total = 0
    for hop in range(1, hops + 1):
        if not frontier.size:
            break
        parts: list[_LeanPart] = []
        expired += _lean_hop(view.sealed.table, frontier, previous, filters, parts)
        if tail.table is not None:
            scanned += tail.count
            near = tail.touching(frontier)
            if near.size:
                expired += _lean_hop(tail.table, near, previous, filters, parts)
        if not parts:
            break
        for part in parts:
            total += part.idx.size
        if total > edge_cap:
            return None
        found.append((hop, parts))
        if hop == hops:
            break
        others = _joined([part.hot & part.table.low for part in parts])
        frontier = unique_ids(others, without=seed)  # the one node visited so far is the seed
        if frontier.size > frontier_cap:
            return None
        previous = seed
    counters["segments_without_columns"] += view.segments_without_columns
    counters["memtable_docs_scanned"] += scanned
    counters["expired_excluded"] += expired
    # each hop's best, in hop order, until ``limit`` are listed; laid out per table with their response places
    # (each table's picks of every hop are joined first, then placed and read for their direction in one pass)
    pieces: dict[int, tuple[EdgeTable, list[np.ndarray], list[np.ndarray], list[_Span]]] = {}
    hop_numbers: list[int] = []
    for hop, parts in found:
        room = limit - len(hop_numbers)
        if room <= 0:
            break
        base = len(hop_numbers)
        for part, picks, places in _lean_best(parts, room):
            if not picks.size:  # a part none of whose edges made the cut: its table may hold no pick at all
                continue
            entry = pieces.setdefault(id(part.table), (part.table, [], [], []))
            entry[1].append(part.idx.take(picks))
            entry[2].append(part.hot.take(picks))
            entry[3].append((base, picks.size, places))
            hop_numbers += [hop] * picks.size
    several = len(pieces) > 1  # else the one table's picks are the response, in order: no places made
    return LeanPicks([(table, table.both_pos.take(_joined(idx)), (_joined(hot) & table.inbit) == 0,
                       _response_places(spans) if several else None)
                      for table, idx, hot, spans in pieces.values()], hop_numbers, total)


def _response_places(spans: list[_Span]) -> np.ndarray:
    """Where a table's picks lie in the response, from each hop's ``(first place of the hop, picks, their places
    among the hop's picks or None when in order)``."""
    return _joined([np.arange(base, base + size) if places is None else places + base
                    for base, size, places in spans])


def _lean_hop(table: EdgeTable, frontier: np.ndarray, previous: int | None, filters: Filters,
              parts: list[_LeanPart]) -> int:
    """One hop both ways from the sorted ``frontier`` over ``table``, as :meth:`EdgeTable.candidates` then
    :func:`_screen` would keep it (``previous``: the one node an earlier hop visited): the kept edges appended to
    ``parts`` (when any), and how many the bitemporal mask withheld returned."""
    width = table.both_off.size - 1
    usable = frontier if frontier[-1] < width else frontier[: np.searchsorted(frontier, width)]
    if not usable.size:
        return 0
    if hoprun.ENABLED:
        return _lean_read(table, usable, previous, filters, parts)
    if usable.size == 1:  # one node: its run is a slice, whose places are ``begin`` on (no array of them made)
        node = int(usable[0])
        begin, end = table.both_off[node:node + 2].tolist()
        if begin == end:
            return 0
        idx = None
        hot = table.hot_both[begin:end]
        keep = (hot & table.ends_mask) != (node | table.inbit)  # an in-edge from the node: met as out
    else:
        starts = table.both_off.take(usable)
        idx = ranges(starts, table.both_off[1:].take(usable) - starts)  # a view's take: no array of usable + 1
        if not idx.size:
            return 0
        if usable.size >= _TOUCH_AT:  # see EdgeTable.candidates
            table.hot_both.take(starts, mode="clip")
        hot = table.hot_both.take(idx, mode="clip")
        keep = ~member(hot & table.ends_mask, usable + table.inbit)  # an in-edge from the frontier: met as out
    if previous is not None:  # the edges back to the node visited before were met by the hop before
        np.logical_and(keep, (hot & table.low) != previous, out=keep)
    as_of = filters.as_of
    check_valid = as_of < table.valid_max
    alive_from = table.alive_from(as_of) << 1 if not filters.include_expired and as_of >= table.invalid_min \
        else None  # a both-ways entry's invalid_at rank sits above the in bit
    met = keep  # the edges this hop meets first, before the bitemporal mask
    if check_valid:
        positions = table.both_pos[begin:end] if idx is None else table.both_pos.take(idx)
        keep = keep & (table.cols["valid_at"].take(positions) <= as_of)
    if alive_from is not None:
        keep = keep & (hot >= alive_from)
    kept = keep.nonzero()[0]  # the method: np.flatnonzero is three Python calls around it
    if kept.size:
        parts.append(_LeanPart(table, kept + begin if idx is None else idx.take(kept), hot.take(kept)))
    return int(np.count_nonzero(met)) - kept.size if keep is not met else 0


def _lean_read(table: EdgeTable, usable: np.ndarray, previous: int | None, filters: Filters,
               parts: list[_LeanPart]) -> int:
    """:func:`_lean_hop` with the compiled loop reading the runs (see :mod:`.hoprun`)."""
    as_of = filters.as_of
    alive_from = table.alive_from(as_of) << 1 if not filters.include_expired and as_of >= table.invalid_min else 0
    idx, hot, expired = hoprun.read_runs(table.both_off, table.hot_both, usable,
                                         previous=None if previous is None else np.array([previous], np.int64),
                                         low=int(table.low), inbit=table.inbit, alive_from=alive_from)
    if idx.size and as_of < table.valid_max:  # some edge of the table is not valid yet at as_of
        kept = (table.cols["valid_at"].take(table.both_pos.take(idx)) <= as_of).nonzero()[0]
        expired += idx.size - kept.size
        idx, hot = idx.take(kept), hot.take(kept)
    if idx.size:
        parts.append(_LeanPart(table, idx, hot))
    return expired


# A hop of at most this many edges is ranked by one merge sort of its ranks (numpy's stable kind) rather than a
# selection and a sort of the selected. The ranks of one hop's edges are distinct (each edge is met once), so
# every kind of sort gives the same order; what differs is the code: the default kind's vectorised sorting
# networks and selection are about 120 KiB of machine code for a few hundred keys, the merge sort a few KiB.
# An ego that follows other work finds its code evicted, and under callgrind with the last-level cache flushed
# before each ego, the networks alone were 22% of its instruction fetches from memory. Past this size the
# selection's O(n) wins over sorting everything.
_SORTED_WHOLE = 2048


def _lean_best(parts: list[_LeanPart], k: int) -> list[tuple[_LeanPart, np.ndarray, np.ndarray | None]]:
    """A hop's best ``k`` edges (as :meth:`HopEdges.order`): per part, the picks (its own places) and where each
    lies among the hop's picks (None: the part holds them all, in that order), best first."""
    if len(parts) == 1:
        part = parts[0]
        ranks = part.table.best_both.take(part.idx)
        if ranks.size <= _SORTED_WHOLE:
            picks = ranks.argsort(kind="stable")[:k]  # see _SORTED_WHOLE
        elif k >= ranks.size:
            picks = ranks.argsort()
        else:
            picks = ranks.argpartition(k - 1)[:k]
            picks = picks.take(ranks.take(picks).argsort())
        return [(part, picks, None)]
    # several tables: each part's own best k by its table's ranking, then those few by the ranking's three keys
    # (weight, valid_at, row, all descending; rows are unique, so they order every edge)
    chosen, rows, valids, weights = [], [], [], []
    for part in parts:
        ranks = part.table.best_both.take(part.idx)
        if ranks.size <= k:
            pick = np.arange(ranks.size)
        elif ranks.size <= _SORTED_WHOLE:
            pick = ranks.argsort(kind="stable")[:k]
        else:
            pick = ranks.argpartition(k - 1)[:k]
        at = part.table.both_pos.take(part.idx.take(pick))
        record = part.table.record.take(at)
        rows.append(part.table.cols["row"].take(at))
        valids.append(record["valid_at"])
        weights.append(record["weight"])
        chosen.append(pick)
    ranked = np.lexsort((np.concatenate(rows), np.concatenate(valids), np.concatenate(weights)))[::-1][:k]
    found = []
    lo = 0
    for part, pick in zip(parts, chosen):
        places = np.flatnonzero((ranked >= lo) & (ranked < lo + pick.size))
        found.append((part, pick.take(ranked.take(places) - lo), places))
        lo += pick.size
    return found


# shortest_floats' memo: each float32 value met, by its bits (an int hashes in one step, a float in a loop)
_SHORTEST_BY_BITS: dict[int, float] = {}


def shortest_floats(column: np.ndarray) -> list[float]:
    """Each value of a float32 ``column`` as the shortest decimal that reads back to it (0.9, not 0.8999999761)."""
    bits = column.view(np.int32).tolist()
    if not bits:
        return []
    memo = _SHORTEST_BY_BITS
    try:  # every value met before (the usual case): one C-level lookup of them all
        return list(itemgetter(*bits)(memo)) if len(bits) > 1 else [memo[bits[0]]]
    except KeyError:
        pass
    if len(memo) > 65536:  # weights repeat (a detector has one); bound the memo all the same
        memo.clear()
    for key, value in zip(bits, column.tolist()):
        if key not in memo:
            memo[key] = float(str(np.float32(value))) if np.isfinite(value) else value
    return [memo[key] for key in bits]
