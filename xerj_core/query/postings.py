"""Term postings for scoring: sealed segments' postings plus an incremental index of the mutable tail.

The store answers ``reader.postings(field, term)`` by rebuilding the whole
tail's postings once per index generation, which is a Python pass over up to
a tail's worth of rows after every write. Scoring needs postings after every
write, so this module keeps, per process and per index, a tail index that is
only ever extended by the rows appended since it was last read; a write costs
the next query the new rows alone. Sealed segments' decoded postings are the
store's own per-segment cache. Rows are ascending; dead rows are included
(callers mask with ``reader.live``), exactly like ``reader.postings``.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from typing import Any

import numpy as np

from xerj_core.store import keys
from xerj_core.store.columns import decode_postings

_EMPTY = (np.empty(0, np.int64), np.empty(0, np.float32))
_MISSING = object()


class _TailIndex:
    """``term -> (rows, tfs)`` of the tail rows scanned so far, for one text field."""

    __slots__ = ("start", "scanned", "terms", "lengths")

    def __init__(self, start: int) -> None:
        self.start = start
        self.scanned = 0
        self.terms: dict[str, tuple[list[int], list[int]]] = {}
        self.lengths: list[int] = []  # token count per scanned row (0 when the field is absent)


_TAILS: "weakref.WeakKeyDictionary[Any, dict[str, _TailIndex]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _tail_index(reader, field: str) -> tuple[_TailIndex, int]:
    """The field's tail index extended to the reader's rows, and the first row past the reader's view."""
    cache = reader.cache
    start = reader.tail_start
    end = reader.n_rows
    with _LOCK:
        per_field = _TAILS.setdefault(cache, {})
        index = per_field.get(field)
        records = cache.tail_records
        if index is None or index.start != start or index.scanned > len(records):
            index = per_field[field] = _TailIndex(start)
        upto = min(len(records), end - start)
        terms = index.terms
        for offset in range(index.scanned, upto):
            record = records[offset]
            index.lengths.append(record["c"].get(field) or 0)
            found = record["t"].get(field)
            if not found:
                continue
            row = start + offset
            for term, tf in found.items():
                entry = terms.get(term)
                if entry is None:
                    terms[term] = ([row], [tf])
                else:
                    entry[0].append(row)
                    entry[1].append(tf)
        if upto > index.scanned:
            index.scanned = upto
    return index, start + max(upto, 0)


def _segment_postings(reader, segment, field: str, term: str):
    key = (field, term)
    found = segment.postings.get(key, _MISSING)
    if found is _MISSING:
        blob = reader.txn.get(keys.post_prefix(reader.ix, segment.start, field) + term.encode(), db=reader.dbs["post"])
        found = segment.postings[key] = None if blob is None else decode_postings(blob)
    return found


def term_postings(reader, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows (ascending, dead ones included) holding ``term`` in text field ``field``, and its frequencies."""
    parts = []
    for segment in reader.segments:
        if field in segment.fields:
            found = _segment_postings(reader, segment, field, term)
            if found is not None:
                parts.append(found)
    if reader.tail_count > 0:
        index, end = _tail_index(reader, field)
        with _LOCK:
            entry = index.terms.get(term)
            if entry is not None:
                cut = bisect.bisect_left(entry[0], end)
                rows, tfs = entry[0][:cut], entry[1][:cut]
            else:
                rows = tfs = None
        if rows:
            parts.append((np.array(rows, np.int64), np.array(tfs, np.float32)))
    if not parts:
        return _EMPTY
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def text_lengths(reader, field: str) -> np.ndarray:
    """Token counts of text field ``field`` for every row of the reader (0 where absent), as int32."""
    parts = []
    for segment in reader.segments:
        column = reader.segment_column(segment, field)
        if column is None:
            parts.append(np.zeros(segment.end - segment.start, np.int32))
        else:
            parts.append(column.values)
    if reader.tail_count > 0:
        index, end = _tail_index(reader, field)
        with _LOCK:
            parts.append(np.array(index.lengths[: end - index.start], np.int32))
    if not parts:
        return np.zeros(reader.n_rows, np.int32)
    lengths = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return lengths[: reader.n_rows]
