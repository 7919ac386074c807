"""Doc-values columns and postings: their in-memory form, binary encoding, and building from row records."""

from __future__ import annotations

import struct
from itertools import repeat
from operator import is_not, itemgetter
from typing import Any, Sequence

import numpy as np

from xerj_core.store.mapping import FLOAT_TYPES, INT_TYPES, FieldSpec

# An absent integer or date sits at int64 max, so "absent OR value > t" is one comparison;
# the presence mask beside it is still the authority on absence.
ABSENT_INT = np.iinfo(np.int64).max
NO_ORD = -1

KIND_ORD, KIND_I64, KIND_F32, KIND_F64, KIND_BOOL, KIND_LEN, KIND_VEC = range(7)
_HEADER = struct.Struct("<3sBIII")  # magic, kind, rows, dims, extra values
_MAGIC = b"XC1"


def column_kind(spec: FieldSpec) -> int:
    t = spec.type
    if t == "keyword":
        return KIND_ORD
    if t in INT_TYPES or t == "date":
        return KIND_I64
    if t == "double":
        return KIND_F64
    if t in FLOAT_TYPES:
        return KIND_F32
    if t == "boolean":
        return KIND_BOOL
    if t == "text":
        return KIND_LEN
    if t == "dense_vector":
        return KIND_VEC
    raise ValueError(t)


class Column:
    """One field's doc values over a run of rows.

    ``values[i]`` is row ``start + i``'s value (keyword: the ordinal of its first
    value; text: its token count); ``present[i]`` says whether the row has the
    field at all. Keyword rows with several values keep the rest in
    ``extra_rows``/``extra_ords`` (row offsets relative to the column start).
    """

    __slots__ = ("kind", "values", "present", "extra_rows", "extra_ords")

    def __init__(self, kind: int, values: np.ndarray, present: np.ndarray,
                 extra_rows: np.ndarray | None = None, extra_ords: np.ndarray | None = None) -> None:
        self.kind = kind
        self.values = values
        self.present = present
        self.extra_rows = extra_rows if extra_rows is not None else np.empty(0, np.int64)
        self.extra_ords = extra_ords if extra_ords is not None else np.empty(0, np.int32)

    def __len__(self) -> int:
        return len(self.present)

    @classmethod
    def empty(cls, kind: int, rows: int, dims: int = 0) -> "Column":
        return cls(kind, _filled(kind, rows, dims), np.zeros(rows, bool))

    def encode(self) -> bytes:
        dims = self.values.shape[1] if self.kind == KIND_VEC else 0
        header = _HEADER.pack(_MAGIC, self.kind, len(self.present), dims, len(self.extra_rows))
        return b"".join((
            header,
            np.ascontiguousarray(self.values).tobytes(),
            np.packbits(self.present).tobytes(),
            self.extra_rows.astype(np.int64).tobytes(),
            self.extra_ords.astype(np.int32).tobytes(),
        ))

    @classmethod
    def decode(cls, blob: bytes | memoryview, *, copy: bool = True) -> "Column":
        """The column in ``blob``; with ``copy=False`` its values (and extra values) are read-only views of
        ``blob``, valid only as long as ``blob`` is (the presence mask is always unpacked into a new array)."""
        magic, kind, rows, dims, extra = _HEADER.unpack_from(blob)
        if magic != _MAGIC:
            raise ValueError("not a column blob")
        dtype = _DTYPES[kind]
        offset = _HEADER.size
        count = rows * dims if kind == KIND_VEC else rows
        values = np.frombuffer(blob, dtype, count, offset)
        if copy:
            values = values.copy()
        if kind == KIND_VEC:
            values = values.reshape(rows, dims)
        offset += values.nbytes
        packed = (rows + 7) // 8
        present = np.unpackbits(np.frombuffer(blob, np.uint8, packed, offset), count=rows).astype(bool)
        offset += packed
        extra_rows = np.frombuffer(blob, np.int64, extra, offset)
        offset += extra * 8
        extra_ords = np.frombuffer(blob, np.int32, extra, offset)
        if copy:
            extra_rows, extra_ords = extra_rows.copy(), extra_ords.copy()
        return cls(kind, values, present, extra_rows, extra_ords)

    @classmethod
    def concat(cls, parts: Sequence["Column"]) -> "Column":
        """Columns of consecutive row runs joined into one (extra row offsets shifted)."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p) for p in parts[:-1]])
        return cls(
            parts[0].kind,
            np.concatenate([p.values for p in parts]),
            np.concatenate([p.present for p in parts]),
            np.concatenate([p.extra_rows + off for p, off in zip(parts, offsets)]),
            np.concatenate([p.extra_ords for p in parts]),
        )

    @classmethod
    def build(cls, spec: FieldSpec, kind: int, rows: Sequence[Any]) -> "Column":
        """Build from per-row column values as stored in row records (None where absent).

        The common cases (every row present; keyword rows of one value each) are
        converted by numpy from the list as it is, without a Python step per row.
        """
        n = len(rows)
        full = None not in rows
        present = np.ones(n, bool) if full else np.fromiter(map(is_not, rows, repeat(None)), bool, n)
        if kind == KIND_VEC:
            values = np.zeros((n, spec.dims or 0), np.float32)
            if present.any():
                values[present] = np.array([v for v in rows if v is not None], np.float32)
            return cls(kind, values, present)
        if kind == KIND_ORD:
            if full and n and set(map(len, rows)) == {1}:
                return cls(kind, np.fromiter(map(itemgetter(0), rows), np.int32, n), present)
            values = np.fromiter((v[0] if v else NO_ORD for v in rows), np.int32, n)
            extra_rows: list[int] = []
            extra_ords: list[int] = []
            for i, v in enumerate(rows):
                if v and len(v) > 1:
                    extra_rows.extend([i] * (len(v) - 1))
                    extra_ords.extend(v[1:])
            present &= values != NO_ORD
            return cls(kind, values, present, np.array(extra_rows, np.int64), np.array(extra_ords, np.int32))
        if full:
            if kind == KIND_I64:
                # a known length and an integer type: fromiter skips np.array's shape and type discovery per row
                return cls(kind, np.fromiter(rows, _DTYPES[kind], n), present)
            return cls(kind, np.array(rows, _DTYPES[kind]), present)
        filler = _FILLERS[kind]
        values = np.array([filler if v is None else v for v in rows], _DTYPES[kind])
        return cls(kind, values, present)


_DTYPES = {KIND_ORD: np.int32, KIND_I64: np.int64, KIND_F32: np.float32, KIND_F64: np.float64,
           KIND_BOOL: np.int8, KIND_LEN: np.int32, KIND_VEC: np.float32}
_FILLERS = {KIND_ORD: NO_ORD, KIND_I64: ABSENT_INT, KIND_F32: np.nan, KIND_F64: np.nan,
            KIND_BOOL: 0, KIND_LEN: 0}


def _filled(kind: int, rows: int, dims: int) -> np.ndarray:
    if kind == KIND_VEC:
        return np.zeros((rows, dims), np.float32)
    return np.full(rows, _FILLERS[kind], _DTYPES[kind])


# -- postings ------------------------------------------------------------------------------

_POSTING_HEADER = struct.Struct("<I")


def decode_postings(blob: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
    (n,) = _POSTING_HEADER.unpack_from(blob)
    rows = np.frombuffer(blob, np.uint32, n, 4).astype(np.int64)
    tfs = np.frombuffer(blob, np.uint32, n, 4 + 4 * n).astype(np.float32)
    return rows, tfs


def decode_postings_many(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(counts, rows, tfs)`` of many posting blobs at once, rows and tfs concatenated in blob order.

    A blob is ``[n][n rows][n tfs]`` in uint32 words, so its count follows from
    its length, and a run of blobs holding about :data:`DECODE_POSTINGS_AT_ONCE`
    postings is decoded by two gathers over its concatenation.
    """
    counts = (np.fromiter((len(b) for b in blobs), np.int64, len(blobs)) // 4 - 1) // 2
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    rows, tfs = np.empty(total, np.int64), np.empty(total, np.float32)
    cuts = [0, *np.searchsorted(ends, np.arange(DECODE_POSTINGS_AT_ONCE, total, DECODE_POSTINGS_AT_ONCE),
                                side="right").tolist(), len(blobs)]
    for lo, hi in zip(cuts, cuts[1:]):
        if lo == hi:
            continue
        words = np.frombuffer(b"".join(blobs[lo:hi]), np.uint32)
        within = counts[lo:hi]
        first, last = int(ends[lo] - within[0]), int(ends[hi - 1])
        # each posting's row word: its blob's first row (past the blob's count and the blobs before it), plus its
        # place in the blob
        at = (np.cumsum(2 * within + 1) - 2 * within - np.cumsum(within) + within).repeat(within)
        at += np.arange(last - first)
        rows[first:last] = words[at]
        at += within.repeat(within)  # its frequency's word
        tfs[first:last] = words[at]
    return counts, rows, tfs


# Postings :func:`decode_postings_many` gathers at a time: its positions cost 16 bytes a posting, and a merge of
# big segments of real code decodes millions of postings of frequent terms (about 300 MB of positions at once).
DECODE_POSTINGS_AT_ONCE = 1 << 20


# Postings :func:`encode_postings_many` encodes with one scatter: its index arrays cost about 50 bytes a posting,
# so a merge of a large segment (an edges index's few types and formats list every row) encodes its groups a
# bounded run at a time (the writer's RSS rose by some 100 MB in each such merge of a 20k-note autoindex run).
ENCODE_POSTINGS_AT_ONCE = 1 << 17


def encode_postings_many(rows: np.ndarray, tfs: np.ndarray, bounds: np.ndarray) -> list[bytes]:
    """One posting blob per group ``rows[bounds[k]:bounds[k+1]]``, encoded by one scatter per run of groups
    holding up to :data:`ENCODE_POSTINGS_AT_ONCE` postings (a larger group alone).

    The blobs are slices of one bytes object per run: a bytes slice costs about a
    quarter of a memoryview slice, and a merge cuts one per (segment, term).
    """
    total = int(bounds[-1] - bounds[0]) if len(bounds) else 0
    if total <= ENCODE_POSTINGS_AT_ONCE:
        return _encode_postings_run(rows, tfs, bounds)
    blobs: list[bytes] = []
    lo, groups = 0, len(bounds) - 1
    while lo < groups:
        # the last group ending within the bound, and at least one group
        hi = max(lo + 1, int(np.searchsorted(bounds, bounds[lo] + ENCODE_POSTINGS_AT_ONCE, side="right")) - 1)
        hi = min(hi, groups)
        first, last = int(bounds[lo]), int(bounds[hi])
        blobs += _encode_postings_run(rows[first:last], tfs[first:last], bounds[lo:hi + 1] - first)
        lo = hi
    return blobs


def _encode_postings_run(rows: np.ndarray, tfs: np.ndarray, bounds: np.ndarray) -> list[bytes]:
    if len(bounds) == 2:  # one group (a large one, as a rule): its blob without the scatter's index arrays
        out = np.empty(1 + 2 * len(rows), np.uint32)
        out[0] = len(rows)
        out[1:1 + len(rows)] = rows
        out[1 + len(rows):] = tfs
        return [out.tobytes()]
    counts = np.diff(bounds)
    sizes = 1 + 2 * counts
    offsets = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), np.uint32)
    out[offsets] = counts
    which = np.repeat(np.arange(len(counts)), counts)
    at = offsets[which] + 1 + (np.arange(len(rows)) - bounds[:-1][which])
    out[at] = rows
    out[at + counts[which]] = tfs
    buf = out.tobytes()
    offsets *= 4
    return [buf[start:end] for start, end in zip(offsets.tolist(), (offsets + 4 * sizes).tolist())]
