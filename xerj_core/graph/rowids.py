"""The ``_id`` of every row of a sealed segment, packed per segment into mapped files: ego names its edges from them.

A sealed segment's rows never change (a write adds a row, a compaction seals
new segments under a new stamp), so the ids of its rows are read once, in one
cursor pass over the segment's stored sources, into an offsets array and a
byte blob published under ``<data>/views`` (see :mod:`.mapped`): page cache
shared by every worker, not private memory. Naming 100 edges is then 100
slices of a mapped blob rather than 100 reads and header decodes. Rows of the
mutable tail are not covered; the caller names those itself.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from xerj_core.graph.segfiles import SegmentFiles
from xerj_core.store import IndexReader, Segment, keys

_FORMAT = 3  # of the published files
_FEW_ODD = 1024  # a segment with at most this many ids of another length keeps them in a dict


class _Packed:
    """One segment's ids, at one width: the length most of its ids have (an edge id always has 32 bytes).

    Row ``start + i`` whose id has that length is ``blob[i * width:(i + 1) * width]``; the few others (a
    brain's meta document, an id written through the ES door) are listed apart, sorted by local row, their
    ids at ``odd_blob[odd_offsets[j]:odd_offsets[j + 1]]``. A row with no stored id is blank in both."""

    __slots__ = ("start", "end", "width", "fixed", "odd_rows", "odd_offsets", "odd_view", "odd_names")

    def __init__(self, segment: Segment, width: int, arrays: dict[str, np.ndarray]) -> None:
        self.start, self.end = segment.start, segment.end
        self.width = width
        # One id per row of ``width`` bytes: a gather of rows is one fancy index over this 2-d view.
        self.fixed = arrays["blob"][:(self.end - self.start) * width].reshape(-1, width) if width else None
        self.odd_rows, self.odd_offsets = arrays["odd_rows"], arrays["odd_offsets"]
        self.odd_view = memoryview(arrays["odd_blob"])
        # A few odd ids (a brain's meta document) are kept decoded: looked up by row, not searched for.
        self.odd_names = {row: self._odd(j) for j, row in enumerate(self.odd_rows.tolist())} \
            if self.odd_rows.size <= _FEW_ODD else None

    def _odd(self, j: int) -> str | None:
        lo, hi = int(self.odd_offsets[j]), int(self.odd_offsets[j + 1])
        return self.odd_view[lo:hi].tobytes().decode() if hi > lo else None

    def names(self, local: np.ndarray) -> list[str | None]:
        """The ids of the segment's rows ``start + local``."""
        out: list[str | None]
        if self.fixed is not None:
            out = fixed_width_ids(self.fixed[local].tobytes(), self.width)
        else:
            out = [None] * local.size
        if self.odd_names is not None:
            if self.odd_names:
                odd = self.odd_names
                for i, row in enumerate(local.tolist()):
                    if row in odd:
                        out[i] = odd[row]
            return out
        odd = self.odd_rows
        at = np.minimum(np.searchsorted(odd, local), odd.size - 1)
        for i in np.flatnonzero(odd[at] == local).tolist():
            out[i] = self._odd(int(at[i]))
        return out


def fixed_width_ids(raw: bytes, width: int) -> list[str | None]:
    """``raw`` cut into ids of ``width`` bytes each, decoded."""
    if raw.isascii():  # one decode, then str slices (an ASCII character is one byte)
        text = raw.decode()
        return [text[at:at + width] for at in range(0, len(text), width)]
    return [raw[at:at + width].decode() for at in range(0, len(raw), width)]


def _read_segment(reader: IndexReader, segment: Segment) -> tuple[int, dict[str, np.ndarray]]:
    """``(width, arrays)`` of the segment's ids (see :class:`_Packed`), in one cursor pass over its rows' stored
    sources; a row without one (deleted) is blank."""
    prefix = keys.ix_key(reader.ix)
    first, stop = prefix + keys.u64(segment.start), prefix + keys.u64(segment.end)
    found: dict[int, bytes] = {}
    header = keys.SRC_HEADER
    begin = header.size
    with reader.txn.cursor(db=reader.dbs["src"]) as cursor:
        if cursor.set_range(first):
            for key, value in cursor.iternext():
                if key >= stop:
                    break
                id_len = header.unpack_from(value)[1]
                found[keys.read_u64(key, len(prefix)) - segment.start] = bytes(value[begin:begin + id_len])
    size = segment.end - segment.start
    widths = Counter(len(v) for v in found.values())
    width = widths.most_common(1)[0][0] if widths else 0
    blank = b"\0" * width
    blob = b"".join(v if len(v) == width else blank for v in (found.get(i, blank) for i in range(size)))
    odd = sorted(i for i, v in found.items() if len(v) != width)
    offsets = np.zeros(len(odd) + 1, np.int64)
    np.cumsum([len(found[i]) for i in odd], out=offsets[1:])
    return width, {"blob": np.frombuffer(blob, np.uint8), "odd_rows": np.array(odd, np.int64),
                   "odd_offsets": offsets, "odd_blob": np.frombuffer(b"".join(found[i] for i in odd), np.uint8)}


class RowIds(SegmentFiles[_Packed]):
    """Per sealed segment, its rows' ids: mapped from ``files`` when published, else read and published."""

    KIND = "ids"
    FORMAT = _FORMAT

    def _read(self, reader: IndexReader, segment: Segment) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        width, arrays = _read_segment(reader, segment)
        return {"width": width}, arrays

    def _wrap(self, segment: Segment, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> _Packed:
        return _Packed(segment, meta["width"], arrays)

    def in_order(self, reader: IndexReader, rows: np.ndarray, alloc: Any = None) -> tuple[int, np.ndarray] | None:
        """``(width, ids)``: the ids of sealed ``rows`` (any order) packed at the width most segments use, as one
        flat byte array (``alloc(name, size, dtype)`` provides it); an id of another length, or of a row outside
        every segment, is left blank (zeros). None when no segment has a width."""
        segments = reader.segments
        packs = [self._segment(reader, s) for s in segments]
        widths = Counter(p.width for p in packs if p.width)
        if not widths or not rows.size:
            return None
        width = widths.most_common(1)[0][0]
        flat = alloc("ids", rows.size * width, np.uint8) if alloc is not None else np.empty(rows.size * width, np.uint8)
        out = flat.reshape(-1, width)
        out[:] = 0
        for lo, k, sel, found in self._groups(reader, rows):
            if packs[k].width == width:
                out[lo + sel] = packs[k].fixed[found - packs[k].start]
        return width, flat

    def ids(self, reader: IndexReader, rows: np.ndarray) -> list[str | None]:
        """The ``_id`` of each of ``rows`` (live rows of ``reader``); None for a row of the tail.

        Rows are grouped by segment with one sort, so naming costs a gather per segment met, not a lookup per row."""
        rows = np.asarray(rows, np.int64)
        out: list[str | None] = [None] * rows.size
        segments = reader.segments
        if not rows.size or not segments:
            return out
        starts = np.fromiter((s.start for s in segments), np.int64, len(segments))
        ends = np.fromiter((s.end for s in segments), np.int64, len(segments))
        order = np.argsort(rows, kind="stable")
        ranked = rows[order]
        at = np.searchsorted(starts, ranked, side="right") - 1
        sealed = np.flatnonzero((at >= 0) & (ranked < ends[at]))  # the others lie in the tail
        if not sealed.size:
            return out
        at, local, positions = at[sealed], (ranked - starts[at])[sealed], order[sealed].tolist()
        cuts = (np.flatnonzero(at[1:] != at[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, at.size]):
            names = self._segment(reader, segments[int(at[lo])]).names(local[lo:hi])
            for position, name in zip(positions[lo:hi], names):
                out[position] = name
        return out
