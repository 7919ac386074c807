"""Vectorised helpers over sorted integer arrays: membership, distinct ids, and concatenated ranges."""

from __future__ import annotations

import numpy as np

# Membership tests against a sorted id set switch from binary search to a bitmap past this many values.
BITMAP_AT = 2048
_FEW = 64  # unique_ids of at most this many values goes through a Python set


def member(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``values[i] in ids`` for a sorted, unique int ``ids`` (np.isin without its fixed cost)."""
    if not ids.size or not values.size:
        return np.zeros(values.size, bool)
    if ids.size == 1:
        return values == ids[0]
    if values.size > BITMAP_AT:
        top = int(ids[-1]) + 1
        bitmap = np.zeros(top, bool)
        bitmap[ids] = True
        inside = (values >= 0) & (values < top)
        found = np.zeros(values.size, bool)
        found[inside] = bitmap[values[inside]]
        return found
    # a value past the last id is placed at ids.size, which the clip reads as the last id (not equal to it)
    return ids.take(ids.searchsorted(values), mode="clip") == values


def unique_ids(values: np.ndarray, without: int | None = None) -> np.ndarray:
    """The sorted distinct non-negative ids in ``values`` but ``without`` (a bitmap pass when there are many)."""
    if values.size <= _FEW:  # a set of Python ints costs less than np.unique's own steps
        found = set(values.tolist())
        found.discard(without)
        return np.array(sorted(found), np.int64)
    if without is not None:
        values = values[values != without]
    if values.size <= BITMAP_AT:
        return np.unique(values).astype(np.int64)
    seen = np.zeros(int(values.max()) + 1, bool)
    seen[values] = True
    return np.flatnonzero(seen)


_COUNTING = np.arange(1 << 16, dtype=np.int64)
_COUNTING.flags.writeable = False


def counting(n: int) -> np.ndarray:
    """``arange(n)`` as a read-only view of one process-wide array, grown when asked for more: a hop adds it to
    every run it gathers, and a fresh array of that size each time costs its allocation and, once the C heap
    hands the pages back between calls, a page fault per 4 KiB."""
    global _COUNTING
    found = _COUNTING
    if found.size < n:
        found = np.arange(max(n, 2 * found.size), dtype=np.int64)
        found.flags.writeable = False
        _COUNTING = found  # older views stay valid: a replaced array lives while they do
    return found[:n]


def ranges(starts: np.ndarray, lengths: np.ndarray, total: int | None = None) -> np.ndarray:
    """The concatenation of ``arange(s, s + n)`` for each start and length (int64).

    One temporary the size of the result: each run's offset repeated, then the shared count added in place.
    (Array methods rather than numpy's functions: a hop calls this for a few runs, where the functions' Python
    wrappers cost more than the arithmetic.)"""
    if starts.size == 1:
        return np.arange(starts[0], starts[0] + (int(lengths[0]) if total is None else total), dtype=np.int64)
    # Narrower lengths (a table's int32 offsets) are widened once: a cumsum and a repeat that cast them as they
    # go cost more than the cast and the two of them on int64 (1.3x for a 20-node frontier, under callgrind).
    lengths = lengths.astype(np.int64, copy=False)
    shift = lengths.cumsum()
    if total is None:  # the last run's end, from the sums made anyway
        total = int(shift[-1]) if shift.size else 0
    np.subtract(shift, lengths, out=shift)  # where each run begins in the result
    np.subtract(starts, shift, out=shift)
    out = shift.repeat(lengths)
    np.add(out, counting(total), out=out)
    return out
