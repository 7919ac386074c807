"""A process's resident memory: giving a file map's pages and the C heap's free pages back, and its peak.

A long write (an autoindex run) reads an LMDB file through its memory map, and
every page it ever touched stays resident in this process and counts in its
RSS, until the whole file is. The map is read-only and shared (LMDB writes
with ``pwrite``, not through it), so dropping its pages loses nothing: the
next touch maps the page again from the page cache. Likewise a phase that
frees many small C allocations (numpy temporaries, LMDB's overflow pages)
leaves the heap holding them; ``malloc_trim`` hands free pages back.

Both are Linux (glibc) only and do nothing elsewhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from pathlib import Path
from typing import Callable

import numpy as np

_MADV_DONTNEED = 4
_libc: ctypes.CDLL | None | bool = None


def _c_library() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                lib.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                lib.madvise.restype = ctypes.c_int
                _libc = lib
            except (OSError, AttributeError):
                _libc = False
    return _libc or None


def mapped_ranges(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` of every read-only shared mapping of ``path`` in this process (``/proc/self/maps``)."""
    target = str(path.resolve())
    ranges = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[1] == "r--s" and fields[5].rstrip("\n") == target:
                    start, _, end = fields[0].partition("-")
                    ranges.append((int(start, 16), int(end, 16)))
    except OSError:
        return []
    return ranges


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def file_resident_bytes() -> int | None:
    """This process's resident file-backed (and shared) memory, from ``/proc/self/statm``; None elsewhere.

    One small read: cheap enough to decide, many times a second, whether dropping pages is worth its faults.
    """
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[2]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def drop_pages(ranges: list[tuple[int, int]]) -> int:
    """Drop this process's resident pages in ``ranges`` (read-only shared file mappings); bytes advised.

    A read-only mapping (LMDB's map without ``MDB_WRITEMAP``) holds clean
    copies of the page cache, so readers of it, in any thread, only fault the
    page back in. The caller makes sure the mapping is still where
    :func:`mapped_ranges` found it.
    """
    lib = _c_library()
    if lib is None:
        return 0
    advised = 0
    for start, end in ranges:
        if lib.madvise(start, end - start, _MADV_DONTNEED) == 0:
            advised += end - start
    return advised


_PRESENT = np.uint64(1 << 63)  # a /proc/self/pagemap entry's "page present" bit


def present_pages(ranges: list[tuple[int, int]]) -> list[np.ndarray] | None:
    """For each ``(start, end)`` of ``ranges``, which of its pages this process maps now (one bool a page, from
    ``/proc/self/pagemap``); None where that cannot be read."""
    out = []
    try:
        with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
            for start, end in ranges:
                count = (end - start) // _PAGE
                blob = os.pread(pagemap.fileno(), count * 8, start // _PAGE * 8)
                if len(blob) != count * 8:
                    return None
                out.append((np.frombuffer(blob, np.uint64) & _PRESENT) != 0)
    except OSError:
        return None
    return out


def drop_pages_since(ranges: list[tuple[int, int]], before: list[np.ndarray]) -> int | None:
    """Drop the pages of ``ranges`` this process maps now and did not when :func:`present_pages` gave ``before``
    (what one task read meanwhile, in a map another thread keeps using): bytes advised. When the two cannot be
    compared, every page of the ranges is dropped and the answer is None."""
    lib = _c_library()
    now = present_pages(ranges)
    if lib is None or now is None or [a.size for a in now] != [b.size for b in before]:
        drop_pages(ranges)
        return None
    advised = 0
    for (start, _end), was, is_now in zip(ranges, before, now):
        new = np.flatnonzero(np.diff(np.concatenate(([0], (is_now & ~was).view(np.int8), [0]))))
        for first, last in zip(new[0::2].tolist(), new[1::2].tolist()):  # each run of newly mapped pages
            if lib.madvise(start + first * _PAGE, (last - first) * _PAGE, _MADV_DONTNEED) == 0:
                advised += (last - first) * _PAGE
    return advised


def trim_heap() -> bool:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``); False where there is none."""
    lib = _c_library()
    trim = getattr(lib, "malloc_trim", None) if lib is not None else None
    if trim is None:
        return False
    trim(0)
    return True


class Every:
    """A context that calls ``fn`` every ``interval`` seconds from a daemon thread while it is open, then
    ``last`` (default ``fn``) once when it closes: for a long step (a write transaction sealing big segments)
    that would otherwise keep every page it touched until it ends."""

    def __init__(self, fn: Callable[[], object], interval: float, last: Callable[[], object] | None = None) -> None:
        self.fn = fn
        self.last = last or fn
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.fn()

    def __enter__(self) -> "Every":
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="xerj-release-pages", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.last()


def peak_rss_mb() -> float:
    """This process's peak RSS in MB since its program started: Linux's ``VmHWM``, the high-water mark of its
    memory map. ``getrusage``'s ``ru_maxrss`` is not that for a started process: the kernel keeps the larger of
    the old and the new map's peaks across ``exec``, so a process started by a large one (pytest after a few
    thousand tests, a benchmark, a writer starting its companion) reports at least its parent's RSS at that
    moment (a 24 MB log's autoindex read 744 MB under the whole test suite, 177 MB alone). Elsewhere than
    Linux, ``ru_maxrss`` all the same."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource  # POSIX only

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes there, kilobytes elsewhere
