"""The hop engine: frontier → rows → bitemporal mask → type mask → next frontier, on doc-values columns only.

Sealed segments are immutable, so each gets CSR offsets over its rows sorted by
``src`` ordinal and by ``dst`` ordinal once per process (cached on the segment).
The per-segment offsets are merged into one view of every sealed row, rebuilt
only when the segment layout changes; a hop over it is an offsets lookup and a
gather. The small mutable tail is scanned, and counted. ``_source`` is never
read here: a segment sealed without a column the hop needs is skipped and
counted.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs
import numpy as np

from xerj_core.store import ABSENT_INT, IndexReader, Segment

# The columns a hop reads; a sealed segment lacking any of them is skipped (and counted).
HOP_FIELDS = ("src", "dst", "type", "trust", "valid_at", "invalid_at", "weight", "confidence")
_INT_FIELDS = ("src", "dst", "type", "trust")
_CSR_KEY = ("xerj.graph", "csr", 1)
_NO_COLUMNS = "no-columns"

FRONTIER_CAP = 4096
EDGE_CAP = 100_000

OUT, IN, BOTH = "out", "in", "both"
DIRECTIONS = (OUT, IN, BOTH)


@attrs.frozen
class SegmentCSR:
    """Rows of one sealed segment (relative to its start) grouped by src and by dst ordinal."""

    out_order: np.ndarray
    out_off: np.ndarray
    in_order: np.ndarray
    in_off: np.ndarray


def _csr(keys: np.ndarray, local_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = local_rows[np.argsort(keys, kind="stable")]
    size = int(keys.max()) + 1 if keys.size else 0
    offsets = np.zeros(size + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=size), out=offsets[1:])
    return order.astype(np.int32), offsets


def segment_csr(reader: IndexReader, segment: Segment) -> SegmentCSR | None:
    """The segment's CSR offsets, built once per process; None when it lacks a hop column."""
    found = segment.derived.get(_CSR_KEY)
    if found is None:
        columns = [reader.segment_column(segment, f) for f in ("src", "dst")]
        if any(reader.segment_column(segment, f) is None for f in HOP_FIELDS):
            found = _NO_COLUMNS
        else:
            src, dst = columns
            local = np.flatnonzero(src.present & dst.present).astype(np.int32)
            out_order, out_off = _csr(src.values[local], local)
            in_order, in_off = _csr(dst.values[local], local)
            found = SegmentCSR(out_order, out_off, in_order, in_off)
        with segment.lock:
            found = segment.derived.setdefault(_CSR_KEY, found)
    return None if found is _NO_COLUMNS else found


def _merge(parts: list[tuple[int, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One CSR over all sealed rows from per-segment CSRs (absolute rows, ascending within an ordinal)."""
    width = max((len(off) - 1 for _, _, off in parts), default=0)
    totals = np.zeros(width, np.int64)
    for _, _, off in parts:
        totals[: len(off) - 1] += np.diff(off)
    offsets = np.zeros(width + 1, np.int64)
    np.cumsum(totals, out=offsets[1:])
    order = np.empty(int(offsets[-1]), np.int32)
    cursor = offsets[:-1].copy()
    for start, local_order, off in parts:
        counts = np.diff(off)
        n = len(counts)
        if not local_order.size:
            continue
        ordinals = np.repeat(np.arange(n), counts)
        dest = cursor[ordinals] + (np.arange(local_order.size) - off[ordinals])
        order[dest] = local_order + start
        cursor[:n] += counts
    return order, offsets


class SealedView:
    """Hop columns and merged CSR offsets over every sealed segment of one edges index."""

    def __init__(self, reader: IndexReader) -> None:
        self.segments = tuple(reader.segments)
        self.rows = self.segments[-1].end if self.segments else 0
        self.cols: dict[str, np.ndarray] = {
            f: np.full(self.rows, -1 if f in _INT_FIELDS else ABSENT_INT if f.endswith("_at") else np.nan,
                       np.int32 if f in _INT_FIELDS else np.int64 if f.endswith("_at") else np.float32)
            for f in HOP_FIELDS
        }
        self.skipped = 0
        outs, ins = [], []
        for seg in self.segments:
            csr = segment_csr(reader, seg)
            if csr is None:
                self.skipped += 1
                continue
            for f in HOP_FIELDS:
                self.cols[f][seg.start:seg.end] = reader.segment_column(seg, f).values
            outs.append((seg.start, csr.out_order, csr.out_off))
            ins.append((seg.start, csr.in_order, csr.in_off))
        self.out_order, self.out_off = _merge(outs)
        self.in_order, self.in_off = _merge(ins)

    def rows_from(self, frontier: np.ndarray, out: bool) -> np.ndarray:
        """Absolute rows whose src (out) or dst (in) ordinal is in the sorted ``frontier``."""
        order, off = (self.out_order, self.out_off) if out else (self.in_order, self.in_off)
        usable = frontier[: np.searchsorted(frontier, len(off) - 1)]
        if not usable.size:
            return np.empty(0, np.int64)
        starts = off[usable]
        lengths = off[usable + 1] - starts
        if usable.size == 1:
            return order[starts[0]: starts[0] + lengths[0]].astype(np.int64)
        total = int(lengths.sum())
        if not total:
            return np.empty(0, np.int64)
        ends = np.cumsum(lengths)
        positions = np.arange(total) + np.repeat(starts - (ends - lengths), lengths)
        return order[positions].astype(np.int64)


class TailView:
    """The hop columns of the mutable tail, rebuilt per index generation."""

    def __init__(self, reader: IndexReader) -> None:
        self.start = reader.tail_start
        self.count = reader.tail_count
        self.scannable = all(reader.field(f) is not None for f in HOP_FIELDS)
        self.cols: dict[str, np.ndarray] = {}
        if self.scannable and self.count:
            self.cols = {f: reader.tail_column(f).values for f in HOP_FIELDS}

    def rows_from(self, frontier: np.ndarray, out: bool) -> np.ndarray:
        if not self.cols:
            return np.empty(0, np.int64)
        keys = self.cols["src" if out else "dst"]
        hit = keys == frontier[0] if frontier.size == 1 else np.isin(keys, frontier)
        hit &= (self.cols["src"] >= 0) & (self.cols["dst"] >= 0)
        return np.flatnonzero(hit) + self.start


class ViewCache:
    """Sealed views per edges index (by uuid), kept while the segment layout is unchanged."""

    def __init__(self) -> None:
        self._views: dict[str, SealedView] = {}
        self._lock = threading.Lock()

    def sealed(self, reader: IndexReader) -> SealedView:
        key = reader.meta["uuid"]
        view = self._views.get(key)
        if view is not None and view.segments == tuple(reader.segments):
            return view
        with self._lock:
            view = self._views.get(key)
            if view is None or view.segments != tuple(reader.segments):
                view = self._views[key] = SealedView(reader)
        return view

    def graph(self, reader: IndexReader) -> "GraphView":
        sealed = self.sealed(reader)
        tail = reader.memo(("xerj.graph", "tail"), lambda: TailView(reader))
        return GraphView(sealed, tail, reader.live)


@attrs.define
class GraphView:
    """One snapshot of an edges index as the hop engine sees it."""

    sealed: SealedView
    tail: TailView
    live: np.ndarray

    @property
    def segments_without_columns(self) -> int:
        return self.sealed.skipped + (1 if self.tail.count and not self.tail.scannable else 0)

    def gather(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Hop columns at sorted absolute ``rows`` (sealed ones first, then tail ones)."""
        split = int(np.searchsorted(rows, self.tail.start))
        if split == rows.size:
            return {f: col[rows] for f, col in self.sealed.cols.items()}
        tail_rows = rows[split:] - self.tail.start
        if split == 0:
            return {f: col[tail_rows] for f, col in self.tail.cols.items()}
        head = rows[:split]
        return {f: np.concatenate((self.sealed.cols[f][head], self.tail.cols[f][tail_rows])) for f in HOP_FIELDS}


@attrs.define
class HopEdges:
    """The edges kept at one hop, in rank order: weight desc, valid_at desc, newest write first."""

    hop: int
    rows: np.ndarray
    out: np.ndarray
    cols: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.rows.size)

    @property
    def others(self) -> np.ndarray:
        """The far endpoint of each edge (dst when followed out, src when followed in)."""
        return np.where(self.out, self.cols["dst"], self.cols["src"])


@attrs.define
class Filters:
    as_of: int
    include_expired: bool = False
    type_ords: np.ndarray | None = None
    trust_ords: np.ndarray | None = None
    min_confidence: float | None = None


def new_counters() -> dict[str, int]:
    return {"edges_clipped": 0, "frontier_clipped": 0, "expired_excluded": 0, "type_filtered": 0,
            "trust_filtered": 0, "confidence_filtered": 0, "segments_without_columns": 0,
            "memtable_docs_scanned": 0}


def _take(cols: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    return {f: a[keep] for f, a in cols.items()}


def expand(view: GraphView, seeds: np.ndarray, *, hops: int, direction: str, filters: Filters,
           counters: dict[str, int], frontier_cap: int = FRONTIER_CAP, edge_cap: int = EDGE_CAP) -> list[HopEdges]:
    """Up to ``hops`` hops from ``seeds`` (node ordinals); each hop's kept edges in rank order.

    An edge is met once: the hop that first reaches it owns it (and its
    counters). The next frontier is the far endpoints not yet visited, in the
    rank order of the edges that reached them, clipped at ``frontier_cap``.
    Past ``edge_cap`` kept edges the rest are counted in ``edges_clipped``.
    """
    counters["segments_without_columns"] += view.segments_without_columns
    frontier = np.unique(np.asarray(seeds, np.int64))
    frontier = frontier[frontier >= 0]
    visited = frontier
    seen = np.empty(0, np.int64)
    result: list[HopEdges] = []
    kept_total = 0
    as_of = filters.as_of
    for hop in range(1, hops + 1):
        if not frontier.size:
            break
        found, outs = [], []
        for out in ((True,) if direction == OUT else (False,) if direction == IN else (True, False)):
            for part in (view.sealed.rows_from(frontier, out), view.tail.rows_from(frontier, out)):
                if part.size:
                    found.append(part)
                    outs.append(np.full(part.size, out))
        if view.tail.cols:
            counters["memtable_docs_scanned"] += view.tail.count
        if not found:
            break
        rows = np.concatenate(found)
        out_flags = np.concatenate(outs)
        rows, first = np.unique(rows, return_index=True)  # an edge met both ways counts as "out"
        out_flags = out_flags[first]
        if seen.size:
            fresh = ~np.isin(rows, seen, assume_unique=True)
            rows, out_flags = rows[fresh], out_flags[fresh]
        seen = np.union1d(seen, rows) if hop < hops else seen
        alive = view.live[rows]
        rows, out_flags = rows[alive], out_flags[alive]
        cols = view.gather(rows)
        keep = cols["valid_at"] <= as_of
        if not filters.include_expired:
            keep &= cols["invalid_at"] > as_of
        counters["expired_excluded"] += int(keep.size - np.count_nonzero(keep))
        for name, field, allowed in (("type_filtered", "type", filters.type_ords),
                                     ("trust_filtered", "trust", filters.trust_ords)):
            if allowed is not None:
                passed = np.isin(cols[field], allowed)
                counters[name] += int(np.count_nonzero(keep & ~passed))
                keep &= passed
        if filters.min_confidence is not None:
            passed = cols["confidence"] >= np.float32(filters.min_confidence)
            counters["confidence_filtered"] += int(np.count_nonzero(keep & ~passed))
            keep &= passed
        rows, out_flags, cols = rows[keep], out_flags[keep], _take(cols, keep)
        rank = np.lexsort((-rows, -cols["valid_at"], -cols["weight"]))
        room = max(0, edge_cap - kept_total)
        if rank.size > room:
            counters["edges_clipped"] += int(rank.size - room)
            rank = rank[:room]
        edges = HopEdges(hop, rows[rank], out_flags[rank], _take(cols, rank))
        kept_total += len(edges)
        result.append(edges)
        if hop < hops:
            others = edges.others
            others = others[~np.isin(others, visited)]
            unique, first_at = np.unique(others, return_index=True)
            nxt = unique[np.argsort(first_at, kind="stable")]
            if nxt.size > frontier_cap:
                counters["frontier_clipped"] += int(nxt.size - frontier_cap)
                nxt = nxt[:frontier_cap]
            frontier = np.sort(nxt)
            visited = np.union1d(visited, frontier)
    return result


def shortest_float(value: Any) -> float:
    """A float32 column value as the shortest decimal that reads back to it (0.9, not 0.8999999761)."""
    return float(str(np.float32(value))) if np.isfinite(value) else float(value)
