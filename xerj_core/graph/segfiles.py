"""Arrays derived once per sealed segment, kept in mapped files under ``views/``: the base of row ids and listings.

A sealed segment's rows never change (a write adds a row, a compaction seals
new segments under a new stamp), so whatever is derived from its rows holds for
as long as the segment lives. Each derived set is published under
``<data>/views`` as ``<uuid>.<kind>.<start>-<end>-<stamp>@<format>`` (see
:mod:`.mapped`): page cache shared by every worker, not private memory, and a
set replaced by a newer segment or written by an older layout of the code is
let go of.
"""

from __future__ import annotations

import threading
from typing import Any, Generic, Iterator, TypeVar

import numpy as np

from xerj_core.graph.mapped import ArrayFiles
from xerj_core.store import IndexReader, Segment

Packed = TypeVar("Packed")


class SegmentFiles(Generic[Packed]):
    """Per sealed segment, its derived arrays: mapped from ``files`` when published, else read and published.

    A subclass names its ``KIND`` (the files' middle name) and ``FORMAT``, reads
    a segment's arrays with :meth:`_read` and wraps them with :meth:`_wrap`."""

    KIND: str
    FORMAT: int

    def __init__(self, files: ArrayFiles | None) -> None:
        self._files = files
        self._packed: dict[tuple[str, int, int, int], Packed] = {}
        self._lock = threading.Lock()

    def _read(self, reader: IndexReader, segment: Segment) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(meta, arrays)`` of ``segment`` read from the store; ``meta`` is kept beside the published files."""
        raise NotImplementedError

    def _wrap(self, segment: Segment, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Packed:
        raise NotImplementedError

    def _segment(self, reader: IndexReader, segment: Segment) -> Packed:
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

    def _load_or_build(self, reader: IndexReader, segment: Segment, name: tuple[str, int, int, int]) -> Packed:
        key = f"{name[0]}.{self.KIND}.{name[1]}-{name[2]}-{name[3]}@{self.FORMAT}"
        if self._files is not None:
            loaded = self._files.load(key)
            if loaded is not None:
                return self._wrap(segment, loaded[1], _trimmed(*loaded))
        meta, arrays = self._read(reader, segment)
        writer = self._files.writer(key) if self._files is not None else None
        if writer is not None:
            try:
                for array_name, array in arrays.items():
                    # a file holds at least one element (an empty .npy cannot be mapped back)
                    writer.alloc(array_name, max(1, array.size), array.dtype)[:array.size] = array
            except OSError:
                writer.abandon()  # no room for the files: keep this process's copy
            else:
                published = writer.publish({**meta, "sizes": {k: int(a.size) for k, a in arrays.items()}})
                if published is not None:
                    return self._wrap(segment, published[1], _trimmed(*published))
        return self._wrap(segment, meta, arrays)

    @staticmethod
    def _groups(reader: IndexReader, rows: np.ndarray) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """``rows`` (any order) grouped by the segment of ``reader``'s layout holding them, in chunks of bounded
        size: ``(chunk start, the segment's place in the layout, positions in the chunk, their rows)``. A row
        outside every segment is in no group."""
        starts = np.fromiter((s.start for s in reader.segments), np.int64, len(reader.segments))
        ends = [s.end for s in reader.segments]
        step = 1 << 16  # bounded temporaries: the table may hold millions of rows
        for lo in range(0, rows.size, step):
            chunk = rows[lo:lo + step].astype(np.int64)
            at = np.searchsorted(starts, chunk, side="right") - 1
            for k in np.unique(at[at >= 0]).tolist():
                sel = np.flatnonzero((at == k) & (chunk < ends[k]))
                yield lo, k, sel, chunk[sel]

    def _forget_gone(self, reader: IndexReader) -> None:
        """Let go of this index's sets a newer segment of the reader's layout has replaced (merged away or
        compacted: a segment sealed later over the same rows), in memory and under ``views/``, and the sets an
        older layout of these files wrote. A set the layout does not know but nothing newer covers may belong to
        a newer snapshot: it stays."""
        uuid = reader.meta["uuid"]
        layout = [(s.start, s.end, s.sealed_at) for s in reader.segments]

        def replaced(start: int, end: int, stamp: int) -> bool:
            return any(lo < end and start < hi and stamp < at for lo, hi, at in layout)

        for name in [n for n in self._packed if n[0] == uuid and replaced(*n[1:])]:
            del self._packed[name]
        if self._files is None or not self._files.root.is_dir():
            return
        middle = f".{self.KIND}."
        for path in self._files.root.glob(f"{uuid}{middle}*@*"):
            try:
                span, version = path.name.split(middle, 1)[1].split("@", 1)
                start, end, stamp = (int(x) for x in span.split("-"))
                older = int(version) < self.FORMAT  # files this code no longer reads
            except ValueError:
                continue
            if older or (version == str(self.FORMAT) and replaced(start, end, stamp)):
                self._files.forget(path.name)  # a process still mapping it keeps its pages


def _trimmed(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """The mapped arrays cut to their true sizes (an empty one was stored as one element)."""
    return {name: array[:meta["sizes"][name]] for name, array in arrays.items()}
