"""Sealed postings packed into hash buckets: one LMDB value holds the postings of many rare terms.

A sealed segment's postings of one text field used to be one key per term, so
a seal or merge of a thousand rows put (and a later merge read and deleted)
about a thousand keys per field, most holding a single posting. Now the terms
with at most :data:`OWN_KEY_POSTINGS` postings go to buckets: term ``t`` is in
bucket ``crc32(t) % buckets`` (the count is in the segment's record, about
:data:`BUCKET_BYTES` of postings per bucket, so a bucket stays inside an LMDB
leaf page and freed pages are reused), and a lookup reads one bucket. A term
with more postings keeps a key of its own (what readers fetch then would
otherwise copy a large bucket) and is listed in its bucket with no postings,
which says so.

Keys (after ``keys.post_prefix``): a bucket is a NUL and its number (4 bytes,
big-endian), a term of its own is the term's UTF-8 bytes; a term is never
empty, so the two never meet. A bucket is ``[terms u32][postings u32]
[term lengths u16...][terms...][counts u32...][rows u32...][tfs f32...]``,
rows absolute, each part padded to 4 bytes. Segments written before buckets (no count in their record) keep
one key per term and are read as before; a merge rewrites them packed.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Callable, Sequence

import numpy as np

from xerj_core.store import columns
from xerj_core.store.columns import decode_postings_many, encode_postings_many
from xerj_core.store.tailblock import PostingRun, empty_run

_compiled: Callable[..., tuple[int, list[bytes], list[bytes]]] | None
try:
    from xerj_core.store._postpack import pack as _compiled
except ImportError:  # built without a C compiler: numpy lays the buckets out, byte for byte the same
    if os.environ.get("XERJ_REQUIRE_POSTPACK_KERNEL") == "1":
        raise
    _compiled = None

# Whether the compiled layout answers; a test or a benchmark may flip it to compare it with numpy's.
ENABLED = _compiled is not None and os.environ.get("XERJ_POSTPACK_KERNEL", "1") != "0"

# A term with more postings than this keeps its own key (8 bytes a posting).
OWN_KEY_POSTINGS = 32
# Bytes of terms and postings aimed at per bucket; hashing spreads them unevenly, and LMDB keeps values below
# about 2,000 bytes inside a leaf page, so the aim leaves room.
BUCKET_BYTES = 1024
_HEADER = struct.Struct("<II")
_BUCKET = struct.Struct(">I")
OWN = object()  # find: the term has a key of its own


def bucket_suffix(bucket: int) -> bytes:
    return b"\x00" + _BUCKET.pack(bucket)


def bucket_of(term: bytes, buckets: int) -> int:
    return zlib.crc32(term) % buckets


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[k] + j`` for ``j < lengths[k]``, run after run."""
    # array methods rather than numpy's functions: a seal calls this a dozen times on small arrays, where the
    # functions' Python dispatch costs as much as the work
    ends = lengths.cumsum()
    total = int(ends[-1]) if len(ends) else 0
    ends -= lengths
    return (starts - ends).repeat(lengths) + np.arange(total)


# Postings :func:`unpack_runs` gathers at a time: their positions are 8 bytes each, and a merge of big segments of real
# code gathers about 8 million postings, whose positions at once (and the sums making them) were 190 MB at its peak.
GATHER_CHUNK = 1 << 20


def _gather(words: np.ndarray, starts: np.ndarray, lengths: np.ndarray, dtype: type) -> np.ndarray:
    """``words[starts[k]:starts[k] + lengths[k]]`` run after run, as ``dtype``, by :data:`GATHER_CHUNK` postings
    at a time (a run is a bucket's postings, a few hundred at most)."""
    ends = lengths.cumsum()
    total = int(ends[-1]) if len(ends) else 0
    if total <= GATHER_CHUNK:
        return words[_ranges(starts, lengths)].astype(dtype, copy=False)
    out = np.empty(total, dtype)
    cuts = [0, *np.searchsorted(ends, np.arange(GATHER_CHUNK, total, GATHER_CHUNK), side="right").tolist(),
            len(lengths)]
    at = 0
    for lo, hi in zip(cuts, cuts[1:]):
        if lo < hi:
            part = words[_ranges(starts[lo:hi], lengths[lo:hi])]
            out[at:at + len(part)] = part
            at += len(part)
    return out


def _pad4(sizes: np.ndarray) -> np.ndarray:
    return (sizes + 3) & ~3


def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _bit in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1).astype(np.uint32)
    return table


_CRC_TABLE = _crc_table()


def term_bytes(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed-width bytes array of terms (no term holds a NUL) as a ``(terms, width)`` uint8 matrix, NUL padded,
    and each term's length."""
    matrix = terms.view(np.uint8).reshape(len(terms), terms.itemsize)
    # No term holds a NUL, so a term's length is its count of nonzero bytes, summed a byte column at a time:
    # numpy's count along the short rows (``count_nonzero(axis=1)``) took about 2.5x as long on a seal's terms.
    lengths = np.zeros(len(terms), np.int64)
    for column in matrix.T:
        lengths += column != 0
    return matrix, lengths


def crc32_many(matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``zlib.crc32`` of each row's first ``lengths`` bytes, by table lookups over the rows byte column by byte
    column (longest rows first, so each step updates a prefix): about twice as fast as a crc32 call per term."""
    order = np.argsort(-lengths, kind="stable")
    ordered, longest = matrix[order], lengths[order]
    crc = np.full(len(order), 0xFFFFFFFF, np.uint32)
    active = np.searchsorted(-longest, -np.arange(matrix.shape[1] if len(order) else 0), side="left")  # length > column
    for column, k in enumerate(active.tolist()):
        if not k:
            break
        head = crc[:k]
        crc[:k] = _CRC_TABLE[(head ^ ordered[:k, column]) & 0xFF] ^ (head >> 8)
    out = np.empty(len(order), np.uint32)
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out


def pack(terms: Sequence[bytes], rows: np.ndarray, tfs: np.ndarray, bounds: np.ndarray) -> tuple[int, list[bytes],
                                                                                                   list[bytes]]:
    """One segment's postings of one field (group ``k``: ``terms[k]``'s rows ``rows[bounds[k]:bounds[k+1]]``,
    ascending, and their frequencies) as ``(buckets, key suffixes, values)``, suffixes ascending.

    Every bucket is laid out by numpy scatters into one buffer (each section
    padded to 4 bytes, so the buckets' words can be gathered back as arrays),
    then cut into one value per bucket.
    """
    n = len(terms)
    if not n:
        return 0, [], []
    bounds = np.asarray(bounds, np.int64)
    counts = np.diff(bounds)
    if _compiled is not None and ENABLED:
        fixed = isinstance(terms, np.ndarray)
        # int32 rows (a merge's, grouped) as they are: an int64 copy of a 65,536-row merge's was 14 MB
        row_type = np.int32 if getattr(rows, "dtype", None) == np.int32 else np.int64
        buckets, suffixes, values = _compiled(
            np.ascontiguousarray(terms) if fixed else list(terms), terms.itemsize if fixed else 0,
            np.ascontiguousarray(bounds), np.ascontiguousarray(rows, row_type),
            np.ascontiguousarray(tfs, np.float32), OWN_KEY_POSTINGS, BUCKET_BYTES)
        own = counts > OWN_KEY_POSTINGS
        if own.any():
            big = np.flatnonzero(own)
            suffixes += terms[big].tolist() if fixed else [terms[i] for i in big.tolist()]
            values += _own_values(rows, tfs, bounds, counts, big)
        return buckets, suffixes, values
    matrix = None
    if isinstance(terms, np.ndarray):  # fixed-width terms (tailblock's ranking of short terms): no bytes objects
        matrix, lengths = term_bytes(terms)
    else:
        lengths = np.fromiter(map(len, terms), np.int64, n)
    own = counts > OWN_KEY_POSTINGS
    listed = np.where(own, 0, counts)  # a large term is listed with no postings: its own key holds them
    buckets = max(1, -(-(int(lengths.sum()) + 6 * n + 8 * int(listed.sum())) // BUCKET_BYTES))
    if matrix is None:
        which = np.fromiter(map(zlib.crc32, terms), np.int64, n) % buckets
    else:
        which = crc32_many(matrix, lengths).astype(np.int64) % buckets
    if buckets <= 1 << 16:
        which = which.astype(np.uint16)  # numpy's stable sort of 16-bit keys is a radix sort, ~3x a merge sort
    order = which.argsort(kind="stable")
    which, listed_o, lengths_o = which[order], listed[order], lengths[order]
    used = np.flatnonzero(np.bincount(which, minlength=buckets))
    firsts = np.searchsorted(which, used)
    per_n = np.diff(np.append(firsts, n))
    per_total = np.add.reduceat(listed_o, firsts)
    per_bytes = np.add.reduceat(lengths_o, firsts)
    sizes = 8 + _pad4(2 * per_n) + _pad4(per_bytes) + 4 * per_n + 8 * per_total
    at = np.cumsum(sizes) - sizes  # each bucket's first byte
    out = np.zeros(int(sizes.sum()) // 4, np.uint32)
    out[at // 4] = per_n
    out[at // 4 + 1] = per_total
    out.view(np.uint16)[_ranges(at // 2 + 4, per_n)] = lengths_o
    term_at = at + 8 + _pad4(2 * per_n)
    if matrix is None:
        joined = np.frombuffer(b"".join(map(list(terms).__getitem__, order.tolist())), np.uint8)
    else:
        joined = matrix[order][np.arange(matrix.shape[1]) < lengths_o[:, None]]
    out.view(np.uint8)[_ranges(term_at, per_bytes)] = joined
    counts_at = (term_at + _pad4(per_bytes)) // 4
    out[_ranges(counts_at, per_n)] = listed_o
    postings = _ranges(bounds[:-1][order], listed_o)  # the listed postings, in bucket order
    rows_at = counts_at + per_n
    out[_ranges(rows_at, per_total)] = rows[postings]
    out.view(np.float32)[_ranges(rows_at + per_total, per_total)] = tfs[postings]
    buf = out.tobytes()
    suffixes = list(map(b"\x00".__add__, map(_BUCKET.pack, used.tolist())))
    values = list(map(buf.__getitem__, map(slice, at.tolist(), (at + sizes).tolist())))
    if own.any():
        big = np.flatnonzero(own)
        suffixes += terms[big].tolist() if matrix is not None else [terms[i] for i in big.tolist()]
        values += _own_values(rows, tfs, bounds, counts, big)
    return buckets, suffixes, values


def _own_values(rows: np.ndarray, tfs: np.ndarray, bounds: np.ndarray, counts: np.ndarray, big: np.ndarray
                ) -> list[bytes]:
    """The values of the terms ``big`` that keep keys of their own: their postings, encoded, gathered a run of
    terms holding up to ``columns.ENCODE_POSTINGS_AT_ONCE`` postings at a time (a larger term alone). Gathered at once,
    a merge of 65,536 notes' texts (1.8M postings, most of them common words') built some 40 MB of index
    arrays and copies, in the writer whose edge writes are a run's peak."""
    starts, sizes = bounds[big], counts[big]
    ends = np.cumsum(sizes)
    values: list[bytes] = []
    lo = 0
    while lo < len(big):
        done = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, done + columns.ENCODE_POSTINGS_AT_ONCE, side="right")))
        postings = _ranges(starts[lo:hi], sizes[lo:hi])
        values += encode_postings_many(rows[postings], tfs[postings], np.concatenate(([0], ends[lo:hi] - done)))
        lo = hi
    return values


def find(blob: bytes, term: bytes) -> tuple[np.ndarray, np.ndarray] | object | None:
    """``term``'s ``(rows, frequencies)`` in a bucket, :data:`OWN` when its own key holds them, None when absent."""
    if not term:
        return None  # no stored term is empty (an empty one would match anywhere)
    n, total = _HEADER.unpack_from(blob)
    lengths = np.frombuffer(blob, np.uint16, n, _HEADER.size).astype(np.int64)
    base = _HEADER.size + (2 * n + 3 & ~3)
    ends = np.cumsum(lengths) + base
    end = int(ends[-1])
    at = blob.find(term, base, end)
    while at >= 0:
        i = int(np.searchsorted(ends, at, side="right"))
        if at == int(ends[i]) - int(lengths[i]) and lengths[i] == len(term):
            counts_at = end + 3 & ~3
            counts = np.frombuffer(blob, np.uint32, n, counts_at)
            count = int(counts[i])
            if not count:
                return OWN
            before = int(counts[:i].sum())
            rows_at = counts_at + 4 * n
            rows = np.frombuffer(blob, np.uint32, count, rows_at + 4 * before).astype(np.int64)
            tfs = np.frombuffer(blob, np.float32, count, rows_at + 4 * total + 4 * before).copy()
            return rows, tfs
        at = blob.find(term, at + 1, end)
    return None


def bucket_terms(blob: bytes) -> list[bytes]:
    """The terms whose postings a bucket holds (not those it lists as having a key of their own)."""
    n, _total = _HEADER.unpack_from(blob)
    lengths = np.frombuffer(blob, np.uint16, n, _HEADER.size).astype(np.int64)
    base = _HEADER.size + (2 * n + 3 & ~3)
    ends = (np.cumsum(lengths) + base).tolist()
    counts = np.frombuffer(blob, np.uint32, n, ends[-1] + 3 & ~3 if n else base).tolist()
    starts = [base, *ends[:-1]]
    return [blob[start:end] for start, end, count in zip(starts, ends, counts) if count]


def unpack(suffixes: Sequence[bytes], values: Sequence[bytes], *, short: int = 0) -> PostingRun:
    """A stored segment's postings of one field (its key suffixes and values, buckets or one term each) as one
    run, terms in no particular order (:func:`unpack_runs` joined)."""
    runs = unpack_runs(suffixes, values, short=short)
    if not runs:
        return empty_run()
    if len(runs) == 1:
        return runs[0]
    first, second = runs[0][0], runs[1][0]
    names = (np.concatenate([first, second]) if isinstance(second, np.ndarray)
             else [*(first.tolist() if isinstance(first, np.ndarray) else first), *second])
    return (names, np.concatenate([runs[0][1], runs[1][1]]), np.concatenate([runs[0][2], runs[1][2]]),
            np.concatenate([runs[0][3], runs[1][3]]))


def unpack_runs(suffixes: Sequence[bytes], values: Sequence[bytes], *, short: int = 0, consume: bool = False
                ) -> list[PostingRun]:
    """A stored segment's postings of one field as runs: the buckets' terms, then the terms of their own (a
    merge groups runs as they come, so they are not joined into one first: that copy was a merge's peak). A
    segment stored before buckets is all terms of their own. Every bucket is read by gathers over the words of
    their concatenation.

    With ``short``, when every term has at most ``short`` bytes and none holds a NUL, the terms come as one
    fixed-width numpy bytes array (what ``tailblock.grouped`` ranks, and ``pack`` takes) instead of a bytes
    object each, which was most of the cost of reading a segment back for a merge.

    With ``consume`` (``values`` a list), ``values`` is emptied once its buckets are joined: a merge's segment
    of real code is tens of megabytes of them, which need not be held twice."""
    own = [i for i, suffix in enumerate(suffixes) if suffix[:1] != b"\x00"]
    own_values = [values[i] for i in own]
    packed = values if not own else [v for i, v in enumerate(values) if suffixes[i][:1] == b"\x00"]
    runs: list[PostingRun] = []
    if packed:
        buf = b"".join(packed)
        sizes = np.fromiter(map(len, packed), np.int64, len(packed))
        del packed
        if consume:
            values.clear()  # type: ignore[attr-defined]
        words = np.frombuffer(buf, np.uint32)
        at = np.cumsum(sizes) - sizes
        per_n = words[at // 4].astype(np.int64)
        per_total = words[at // 4 + 1].astype(np.int64)
        lengths = np.frombuffer(buf, np.uint16)[_ranges(at // 2 + 4, per_n)].astype(np.int64)
        term_at = at + 8 + _pad4(2 * per_n)
        firsts = np.cumsum(per_n) - per_n
        per_bytes = np.add.reduceat(lengths, firsts) if len(lengths) else np.zeros(len(per_n), np.int64)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        # each term's first byte: its bucket's terms start, plus the lengths before it in its bucket
        starts += np.repeat(term_at - starts[firsts], per_n)
        counts_at = (term_at + _pad4(per_bytes)) // 4
        counts = words[_ranges(counts_at, per_n)].astype(np.int64)
        rows_at = counts_at + per_n
        rows = _gather(words, rows_at, per_total, np.int64)
        tfs = _gather(words.view(np.float32), rows_at + per_total, per_total, np.float32)
        listed = counts > 0
        if not listed.all():
            starts, lengths, counts = starts[listed], lengths[listed], counts[listed]
        names = _fixed_width(buf, starts, lengths, short) if short else None
        if names is None:
            names = list(map(buf.__getitem__, map(slice, starts.tolist(), (starts + lengths).tolist())))
        del buf, words  # everything kept was copied out of them
        runs.append((names, counts, rows, tfs))
    if own:
        own_counts, own_rows, own_tfs = decode_postings_many(own_values)
        del own_values
        own_terms = [suffixes[i] for i in own]
        if runs and isinstance(runs[0][0], np.ndarray):
            fixed = np.array(own_terms, dtype=bytes)
            if fixed.itemsize <= short and b"\x00" not in b"".join(own_terms):
                own_terms = fixed  # as the buckets' terms are (a run of bytes beside them ranks alike)
        runs.append((own_terms, own_counts, own_rows, own_tfs))
    return runs


def _fixed_width(buf: bytes, starts: np.ndarray, lengths: np.ndarray, short: int) -> np.ndarray | None:
    """The terms at ``starts`` (``lengths`` bytes each) of ``buf`` as one fixed-width bytes array, or None when one
    is longer than ``short`` bytes or holds a NUL (the array could not tell it from padding)."""
    if not len(lengths):
        return None
    width = int(lengths.max())
    if width > short or width < 1:
        return None
    source = np.frombuffer(buf, np.uint8)
    picked = source[_ranges(starts, lengths)]
    if not picked.all():
        return None
    matrix = np.zeros((len(lengths), width), np.uint8)
    matrix[np.arange(width) < lengths[:, None]] = picked
    return matrix.view(f"S{width}").reshape(-1)


__all__ = ["BUCKET_BYTES", "OWN", "OWN_KEY_POSTINGS", "bucket_of", "bucket_suffix", "bucket_terms", "crc32_many",
           "find", "pack", "term_bytes", "unpack", "unpack_runs"]
