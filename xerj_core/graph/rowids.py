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

import bisect
import threading
import numpy as np

from xerj_core.graph.mapped import ArrayFiles
from xerj_core.store import IndexReader, Segment, keys

_FORMAT = 2  # of the published files


class _Packed:
    """One segment's ids. When every stored id of the segment has one length (an edge id always has), row
    ``start + i`` is ``blob[i * width:(i + 1) * width]``; otherwise ``blob[offsets[i]:offsets[i + 1]]``."""

    __slots__ = ("start", "end", "width", "offsets", "view")

    def __init__(self, segment: Segment, width: int, offsets: np.ndarray, blob: np.ndarray) -> None:
        self.start, self.end = segment.start, segment.end
        self.width = width
        self.offsets = offsets
        self.view = memoryview(blob)

    def name(self, row: int) -> str | None:
        local = row - self.start
        if self.width:
            at = local * self.width
            return self.view[at:at + self.width].tobytes().decode()
        lo, hi = int(self.offsets[local]), int(self.offsets[local + 1])
        return self.view[lo:hi].tobytes().decode() if hi > lo else None


def _read_segment(reader: IndexReader, segment: Segment) -> tuple[int, np.ndarray, bytes]:
    """``(width, offsets, blob)`` of the segment's ids (see :class:`_Packed`), in one cursor pass over its rows'
    stored sources; a row without one (deleted) is blank."""
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
    widths = {len(v) for v in found.values()}
    if len(widths) == 1 and 0 not in widths:
        width = widths.pop()
        blank = b"\0" * width
        return width, np.zeros(1, np.int64), b"".join(found.get(i, blank) for i in range(size))
    lengths = np.zeros(size, np.int64)
    for i, raw in found.items():
        lengths[i] = len(raw)
    offsets = np.zeros(size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return 0, offsets, b"".join(found.get(i, b"") for i in range(size))


class RowIds:
    """Per sealed segment, its rows' ids: mapped from ``files`` when published, else read and published."""

    def __init__(self, files: ArrayFiles | None) -> None:
        self._files = files
        self._packed: dict[tuple[str, int, int, int], _Packed] = {}
        self._lock = threading.Lock()

    def _segment(self, reader: IndexReader, segment: Segment) -> _Packed:
        name = (reader.meta["uuid"], segment.start, segment.end, segment.sealed_at)
        found = self._packed.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self._packed.get(name)
            if found is None:
                found = self._load_or_build(reader, segment, name)
                self._forget_gone(reader)
                self._packed[name] = found
        return found

    def _load_or_build(self, reader: IndexReader, segment: Segment, name: tuple[str, int, int, int]) -> _Packed:
        key = f"{name[0]}.ids.{name[1]}-{name[2]}-{name[3]}@{_FORMAT}"
        if self._files is not None:
            loaded = self._files.load(key)
            if loaded is not None:
                return _Packed(segment, loaded[1]["width"], loaded[0]["offsets"], loaded[0]["blob"])
        width, offsets, blob = _read_segment(reader, segment)
        writer = self._files.writer(key) if self._files is not None else None
        if writer is not None:
            try:
                writer.alloc("offsets", offsets.size, np.int64)[:] = offsets
                writer.alloc("blob", max(1, len(blob)), np.uint8)[:len(blob)] = np.frombuffer(blob, np.uint8)
            except OSError:
                writer.abandon()  # no room for the files: keep this process's copy
            else:
                published = writer.publish({"width": width})
                if published is not None:
                    return _Packed(segment, width, published[0]["offsets"], published[0]["blob"])
        return _Packed(segment, width, offsets, np.frombuffer(blob, np.uint8))

    def _forget_gone(self, reader: IndexReader) -> None:
        """Let go of this index's id sets a newer segment of the reader's layout has replaced (merged away or
        compacted: a segment sealed later over the same rows), in memory and under ``views/``. A set the
        layout does not know but nothing newer covers may belong to a newer snapshot: it stays."""
        uuid = reader.meta["uuid"]
        layout = [(s.start, s.end, s.sealed_at) for s in reader.segments]

        def replaced(start: int, end: int, stamp: int) -> bool:
            return any(lo < end and start < hi and stamp < at for lo, hi, at in layout)

        for name in [n for n in self._packed if n[0] == uuid and replaced(*n[1:])]:
            del self._packed[name]
        if self._files is None or not self._files.root.is_dir():
            return
        for path in self._files.root.glob(f"{uuid}.ids.*@{_FORMAT}"):
            try:
                start, end, stamp = (int(x) for x in path.name.split(".ids.", 1)[1].split("@", 1)[0].split("-"))
            except ValueError:
                continue
            if replaced(start, end, stamp):
                self._files.forget(path.name)  # a process still mapping it keeps its pages

    def ids(self, reader: IndexReader, rows: list[int]) -> list[str | None]:
        """The ``_id`` of each of ``rows`` (live rows of ``reader``); None for a row of the tail."""
        segments = reader.segments
        starts = [s.start for s in segments]
        packed: dict[int, _Packed] = {}
        out: list[str | None] = []
        for row in rows:
            at = bisect.bisect_right(starts, row) - 1
            if at < 0 or row >= segments[at].end:
                out.append(None)
                continue
            found = packed.get(at)
            if found is None:
                found = packed[at] = self._segment(reader, segments[at])
            out.append(found.name(row))
        return out
