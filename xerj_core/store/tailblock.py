"""Tail blocks: a run of consecutive rows of one index as binary columns and grouped postings, one LMDB value.

A write transaction appends its new rows to the tail as one block (key: the
index and the block's first row) instead of a JSON record per row, so a bulk
of a thousand documents costs a few numpy encodes, not a thousand ``dumps``;
a seal reads the tail's blocks back as whole arrays, and a reader builds its
tail columns by concatenation. A block's postings are grouped like a sealed
segment's: terms (UTF-8, ascending), then each term's rows (ascending) and
frequencies.

Stores written before blocks hold one JSON row record per tail key (``{"c":
column values, "t": term counts}``); :func:`decode` reads such a value as a
one-row block, so an old tail is read as it is and sealed in the new form.
"""

from __future__ import annotations

import struct
from itertools import chain, compress, repeat
from typing import Any, Iterable, Sequence

import numpy as np
import orjson

from xerj_core import termrank
from xerj_core.store import keys
from xerj_core.store.columns import KIND_LEN, Column, column_kind
from xerj_core.store.mapping import FieldSpec

# A run of postings of one field: its terms (UTF-8 bytes), how many postings each has (None: one each, the terms
# then listed per posting), and the postings' rows (absolute) and frequencies in that order.
PostingRun = tuple[list[bytes], "np.ndarray | None", np.ndarray, np.ndarray]

MAGIC = b"XT1\x00"
_HEADER = struct.Struct("<4sQIII")  # magic, first row, rows, columns, text fields
_LEN = struct.Struct("<I")
_POST_HEADER = struct.Struct("<II")  # terms, postings
_NO_TERMS: dict[str, int] = {}
# Bytes per tail value: LMDB keeps a value this small inside a leaf page. A larger one takes a run of contiguous
# overflow pages, and a tail rewritten by every write leaves the free pages in runs too short to reuse: the data
# file grows instead (20 overwrites of 10k documents crept from 1.94x to 2.01x of the first pass).
CHUNK = 1900
_CHUNK_NO = struct.Struct(">H")


def empty_run() -> PostingRun:
    return [], np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32)


class Block:
    """Rows ``start`` to ``start + n``: a column per field (``n`` rows each, extra keyword rows relative) and
    per text field its grouped postings (rows absolute). Immutable once built."""

    __slots__ = ("start", "n", "columns", "postings")

    def __init__(self, start: int, n: int, columns: dict[str, Column], postings: dict[str, PostingRun]) -> None:
        self.start = start
        self.n = n
        self.columns = columns
        self.postings = postings

    @property
    def end(self) -> int:
        return self.start + self.n

    def column(self, spec: FieldSpec) -> Column:
        """``spec``'s column over this block's rows (absent everywhere when the block has none)."""
        found = self.columns.get(spec.path)
        return found if found is not None else Column.empty(column_kind(spec), self.n, spec.dims or 0)

    def run(self, path: str) -> PostingRun:
        return self.postings.get(path) or empty_run()

    def encode(self) -> bytes:
        parts = [_HEADER.pack(MAGIC, self.start, self.n, len(self.columns), len(self.postings))]
        # Fields in path order: the same rows encode to the same bytes however they were prepared.
        for path, column in sorted(self.columns.items()):
            name, blob = path.encode(), column.encode()
            parts += [_LEN.pack(len(name)), name, _LEN.pack(len(blob)), blob]
        for path, (terms, counts, rows, tfs) in sorted(self.postings.items()):
            name = path.encode()
            parts += [_LEN.pack(len(name)), name, _POST_HEADER.pack(len(terms), len(rows)),
                      np.fromiter(map(len, terms), np.uint32, len(terms)).tobytes(), b"".join(terms),
                      np.asarray(counts, np.uint32).tobytes(), (rows - self.start).astype(np.uint32).tobytes(),
                      np.asarray(tfs, np.float32).tobytes()]
        return b"".join(parts)

    def sliced(self, lo: int, hi: int) -> "Block":
        """Rows ``lo`` to ``hi`` (absolute, inside this block) as a block."""
        if lo == self.start and hi == self.end:
            return self
        a, b = lo - self.start, hi - self.start
        columns = {path: _column_slice(column, a, b) for path, column in self.columns.items()}
        postings = {path: _filter(run, (run[2] >= lo) & (run[2] < hi)) for path, run in self.postings.items()}
        return Block(lo, hi - lo, columns, postings)

    def select(self, keep: np.ndarray, start: int) -> "Block":
        """The rows of this block where ``keep`` (a mask over its rows) holds, renumbered from ``start``."""
        kept = np.flatnonzero(keep)
        renumber = np.full(self.n, -1, np.int64)
        renumber[kept] = np.arange(len(kept))
        columns = {}
        for path, column in self.columns.items():
            extra = renumber[column.extra_rows] if len(column.extra_rows) else column.extra_rows
            columns[path] = Column(column.kind, column.values[kept], column.present[kept], extra[extra >= 0],
                                   column.extra_ords[extra >= 0])
        postings = {}
        for path, run in self.postings.items():
            terms, counts, rows, tfs = _filter(run, keep[run[2] - self.start])
            postings[path] = (terms, counts, renumber[rows - self.start] + start, tfs)
        return Block(start, len(kept), columns, postings)


def stored(ix: int, block: Block) -> list[tuple[bytes, bytes]]:
    """The ``(key, value)`` items holding ``block`` in the tail database, in key order: its encoding cut into
    values of at most :data:`CHUNK` bytes, the first under the row key of its first row, the next ones under
    that key and their number (two bytes), so they sort between it and the next row's key."""
    blob = block.encode()
    first = keys.row_key(ix, block.start)
    return [(first + _CHUNK_NO.pack(i) if i else first, blob[at:at + CHUNK])
            for i, at in enumerate(range(0, len(blob), CHUNK))]


def read(cur: Any, ix: int, first: int, end: int, specs: dict[str, FieldSpec]) -> list[Block]:
    """The blocks stored from row ``first`` up to row ``end`` (an LMDB cursor on the tail database), in order."""
    first_key, end_key = keys.row_key(ix, first), keys.row_key(ix, end)
    blocks: list[Block] = []
    if not cur.set_range(first_key):
        return blocks
    pieces: list[bytes] = []
    start = first
    for key, value in cur:
        if key >= end_key or key[:4] != first_key[:4]:
            break
        if len(key) == len(first_key):  # a block's first value
            if pieces:
                blocks.append(decode(b"".join(pieces), start, specs))
            pieces, start = [value], keys.read_u64(key, 4)
        elif pieces:
            pieces.append(value)
    if pieces:
        blocks.append(decode(b"".join(pieces), start, specs))
    return blocks


def delete(cur: Any, ix: int, first: int, end: int) -> int:
    """Delete the blocks stored from row ``first`` up to row ``end``; how many blocks there were."""
    first_key, end_key = keys.row_key(ix, first), keys.row_key(ix, end)
    deleted = 0
    if cur.set_range(first_key):
        while first_key <= (key := cur.key()) < end_key:
            deleted += len(key) == len(first_key)
            if not cur.delete():
                break
    return deleted


def decode(blob: bytes | memoryview, start: int, specs: dict[str, FieldSpec]) -> Block:
    """The block stored at row ``start``; a legacy JSON row record (``specs``: the mapping's fields) is one row."""
    if type(blob) is not bytes:
        blob = bytes(blob)
    if blob[:4] != MAGIC:
        return from_records(start, [orjson.loads(blob)], specs.values())
    _magic, first, n, n_columns, n_texts = _HEADER.unpack_from(blob)
    offset = _HEADER.size
    columns: dict[str, Column] = {}
    for _ in range(n_columns):
        path, offset = _name(blob, offset)
        (size,) = _LEN.unpack_from(blob, offset)
        offset += 4
        # Views of ``blob`` (read-only): a block's arrays are only ever read or copied by concatenation.
        columns[path] = Column.decode(memoryview(blob)[offset:offset + size], copy=False)
        offset += size
    postings: dict[str, PostingRun] = {}
    for _ in range(n_texts):
        path, offset = _name(blob, offset)
        n_terms, n_postings = _POST_HEADER.unpack_from(blob, offset)
        offset += _POST_HEADER.size
        lengths = np.frombuffer(blob, np.uint32, n_terms, offset).astype(np.int64)
        offset += 4 * n_terms
        ends = np.cumsum(lengths)
        joined = blob[offset:offset + int(ends[-1]) if n_terms else offset]
        terms = list(map(joined.__getitem__, map(slice, (ends - lengths).tolist(), ends.tolist())))
        offset += len(joined)
        counts = np.frombuffer(blob, np.uint32, n_terms, offset).astype(np.int64)
        offset += 4 * n_terms
        rows = np.frombuffer(blob, np.uint32, n_postings, offset).astype(np.int64) + first
        offset += 4 * n_postings
        tfs = np.frombuffer(blob, np.float32, n_postings, offset).copy()
        offset += 4 * n_postings
        postings[path] = (terms, counts, rows, tfs)
    return Block(first, n, columns, postings)


def _name(blob: bytes, offset: int) -> tuple[str, int]:
    (size,) = _LEN.unpack_from(blob, offset)
    offset += 4
    return blob[offset:offset + size].decode(), offset + size


def from_records(start: int, records: Sequence[dict[str, Any]], specs: Iterable[FieldSpec]) -> Block:
    """The block of row records (``{"c": column values by path, "t": term counts by text path}``) of rows
    ``start`` on; a column for each of ``specs`` that some record holds."""
    values = [record["c"] for record in records]
    columns: dict[str, Column] = {}
    postings: dict[str, PostingRun] = {}
    n = len(records)
    for spec in specs:
        path = spec.path
        column = [found.get(path) for found in values]
        if column.count(None) == n:
            continue
        kind = column_kind(spec)
        columns[path] = Column.build(spec, kind, column)
        if kind == KIND_LEN and n == 1:  # one put: its terms sorted, each a posting of the row
            found = records[0]["t"].get(path) or _NO_TERMS
            names = sorted(found)
            postings[path] = (list(map(str.encode, names)), np.ones(len(names), np.int64),
                              np.full(len(names), start, np.int64),
                              np.fromiter(map(found.__getitem__, names), np.float32, len(names)))
        elif kind == KIND_LEN:
            maps = [record["t"].get(path) or _NO_TERMS for record in records]
            counts = np.fromiter(map(len, maps), np.int64, n)
            terms = list(map(str.encode, chain.from_iterable(maps)))
            run = (terms, None, np.repeat(np.arange(start, start + n, dtype=np.int64), counts),
                   np.fromiter(chain.from_iterable(map(dict.values, maps)), np.float32, len(terms)))
            postings[path] = group([run])
    return Block(start, n, columns, postings)


def concat(blocks: Sequence[Block], specs: Iterable[FieldSpec]) -> Block:
    """Consecutive blocks as one; a field some block lacks reads as absent on that block's rows."""
    if len(blocks) == 1:
        return blocks[0]
    columns: dict[str, Column] = {}
    postings: dict[str, PostingRun] = {}
    for spec in specs:
        path = spec.path
        if not any(path in b.columns for b in blocks):
            continue
        columns[path] = Column.concat([b.column(spec) for b in blocks])
        runs = [b.postings[path] for b in blocks if path in b.postings]
        if runs:
            postings[path] = runs[0] if len(runs) == 1 else group(runs)
    return Block(blocks[0].start, sum(b.n for b in blocks), columns, postings)


def group(runs: list[PostingRun]) -> PostingRun:
    """Runs (in row order: each run's rows come after the previous run's) as one run grouped by term."""
    _part, terms, rows, tfs, bounds = grouped(runs, np.zeros(1, np.int64))
    return terms.tolist() if isinstance(terms, np.ndarray) else terms, np.diff(bounds), rows, tfs


def group_joined(joined: bytes, rows: np.ndarray, tfs: np.ndarray) -> PostingRun:
    """:func:`group` of the one run ``(joined.split(b"\\0"), None, rows, tfs)``: one posting per term, the terms
    NUL-separated in ``joined`` (empty: no posting), ranked where they lie (:func:`termrank.rank_joined`)."""
    if not joined:
        return empty_run()
    names, ids = termrank.rank_joined(joined)
    # every distinct term has a posting, so the groups' terms are ``names`` as they are
    *_found, rows, tfs, bounds = _grouped_ranked(names, ids, np.asarray(rows, np.int32), tfs, np.zeros(1, np.int64))
    return names, np.diff(bounds), rows, tfs


def counted_run(found: Sequence[tuple[int, int, bytes, bytes]], rows: np.ndarray) -> PostingRun:
    """The grouped postings of texts counted by ``text.counted_terms`` (``found[i]`` on row ``rows[i]``, rows
    ascending): each counted term's frequency per row, ranked in C (:func:`group_joined`)."""
    joined = b"\x00".join(filter(None, (counted[2] for counted in found)))
    counts = b"".join(counted[3] for counted in found)
    distinct = np.fromiter((len(counted[3]) // 4 for counted in found), np.int64, len(found))
    tfs = np.frombuffer(counts, np.uint32).astype(np.float32)
    return group_joined(joined, np.repeat(np.asarray(rows, np.int64), distinct), tfs)


def grouped(runs: list[PostingRun], starts: np.ndarray) -> tuple[np.ndarray, list[bytes], np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """Runs grouped per (part, term): the part of each group (``starts``: the parts' first rows, ascending), its
    term (a list of bytes, or a fixed-width bytes array: see :func:`_ranked`), then the postings' rows and
    frequencies in group order and the groups' bounds in them.

    Groups come in key order (part, then term bytes). Terms are numbered by
    their rank among the runs' distinct terms (:func:`_ranked`), so
    one stable numpy sort on (part, rank) groups everything while each run's
    rows stay ascending. ``runs`` is emptied as it is read.
    """
    if not sum(len(run[2]) for run in runs):
        runs.clear()
        return np.empty(0, np.int64), [], np.empty(0, np.int32), np.empty(0, np.float32), np.zeros(1, np.int64)
    names, ids = _ranked(runs)
    rows = np.concatenate([run[2] for run in runs], dtype=np.int32, casting="unsafe")
    tfs = np.concatenate([run[3] for run in runs], dtype=np.float32)
    runs.clear()
    return _grouped_ranked(names, ids, rows, tfs, starts)


def _grouped_ranked(names: list[bytes] | np.ndarray, ids: np.ndarray, rows: np.ndarray, tfs: np.ndarray,
                    starts: np.ndarray) -> tuple[np.ndarray, list[bytes] | np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray]:
    """:func:`grouped` once the terms are ranked: ``names`` the distinct terms sorted, ``ids`` each posting's rank
    among them, ``rows`` (int32) and ``tfs`` the postings in run order."""
    found = termrank.group(ids, rows, tfs, starts, len(names)) if len(names) else None
    if found is not None:  # one counting sort in C: the same groups as numpy's below
        key, rows, tfs, bounds = found
        part, ranked = np.divmod(key, len(names))
    else:
        part, ranked, rows, tfs, bounds = _sorted_groups(ids, rows, tfs, starts, len(names))
    if isinstance(names, np.ndarray):
        return part, names[ranked], rows, tfs, bounds
    return part, list(map(names.__getitem__, ranked.tolist())), rows, tfs, bounds


def _sorted_groups(ids: np.ndarray, rows: np.ndarray, tfs: np.ndarray, starts: np.ndarray, names: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The groups of :func:`_grouped_ranked` by a stable numpy sort: each group's part and term rank, the rows and
    frequencies in group order, and the groups' bounds in them."""
    key = ids
    if len(starts) > 1:
        key = (np.searchsorted(starts, rows, side="right") - 1) * names
        key += ids
    del ids
    if len(key) > 1 and not (key[1:] >= key[:-1]).all():
        # Keys below 2**16 (a put's batch, mostly: up to 32k distinct terms in a transaction of real code) are
        # sorted as 16-bit ones, by numpy's radix sort, about 10x its merge sort on a put's keys, which come in
        # document order; wider keys (a seal's: each block's run of terms, concatenated) are runs the merge sort
        # merges.
        order = (key.astype(np.uint16) if len(starts) * names <= 1 << 16 else key).argsort(kind="stable")
        key, rows, tfs = key[order], rows[order], tfs[order]
        del order
    cut = np.flatnonzero(np.diff(key)) + 1
    bounds = np.concatenate(([0], cut, [len(key)]))
    part, ranked = np.divmod(key[bounds[:-1]], names)
    return part, ranked, rows, tfs, bounds


# Terms are ranked as a fixed-width numpy array of at most this many bytes each (see _ranked).
SHORT_TERM = 48


def _ranked(runs: list[PostingRun]) -> tuple[list[bytes] | np.ndarray, np.ndarray]:
    """The runs' distinct terms, sorted, and the rank of each posting's term (int32: a merge of big segments
    handles millions of postings, and row and term numbers stay far below 2**31).

    When some run brings its terms as a fixed-width numpy bytes array (``postpack.unpack``: a merge of stored
    segments), terms are ranked by one numpy ``unique`` over such an array (sorted and numbered in C, about
    twice as fast on a merge as a sort and a dict of Python terms), and their distinct terms come back as such
    an array (``postpack.pack`` takes it as it is). The array is at most :data:`SHORT_TERM` bytes wide: a
    longer term is ranked by its first bytes, and the few groups of terms sharing such a prefix with one are
    ranked again in full (:func:`_long_ranked`), so real code, where a batch almost always holds a long
    identifier or literal, keeps the array's pace; then the terms come back as a list.

    When every run brings a list of bytes (a batch's postings, the counted terms of parse processes), the
    terms are ranked by :func:`termrank.rank` (a hash table over their bytes in C, else a dict and a sort) and
    come back as a list: building the array from bytes objects and sorting it cost about twice as much as the
    dict (0.92 against 0.43-0.60 s over the 2.56M counted terms of 5,000 site-packages files; the table takes
    0.12-0.14 s). The array drops trailing NULs, so a term holding one (the tokenizer makes none) sends the
    terms that way too.
    """
    sizes = [len(run[0]) for run in runs]
    if not sum(sizes):
        return [], np.empty(0, np.int32)
    arrays = any(isinstance(run[0], np.ndarray) for run in runs)
    fixed: list[np.ndarray] | None = [] if arrays else None
    long = False
    for terms, _counts, _rows, _tfs in (runs if arrays else ()):
        if isinstance(terms, np.ndarray):  # (postpack.unpack makes none wider than SHORT_TERM)
            long |= terms.itemsize > SHORT_TERM
            fixed.append(terms.astype(f"S{min(terms.itemsize, SHORT_TERM)}", copy=False))
        elif not terms:
            continue
        elif b"\x00" not in b"".join(terms):
            width = max(map(len, terms))
            long |= width > SHORT_TERM
            # the width given (a longer term cut to it): numpy otherwise discovers it by a slower pass of its own
            # (about 4x the copy)
            fixed.append(np.array(terms, dtype=f"S{min(max(width, 1), SHORT_TERM)}"))
        else:
            fixed = None
            break
    if fixed is not None:
        flat = np.concatenate(fixed)
        names, ranks = unique_fixed(flat)
        if long:
            names, ranks = _long_ranked(runs, flat, names, ranks)
    else:
        every = list(chain.from_iterable(run[0].tolist() if isinstance(run[0], np.ndarray) else run[0]
                                         for run in runs))
        names, ranks = termrank.rank(every)
        del every
    if all(run[1] is None for run in runs):
        return names, ranks
    # each term's rank once per posting (a run without counts has one posting per term)
    counts = np.concatenate([np.ones(size, np.int64) if run[1] is None else run[1] for size, run in zip(sizes, runs)])
    return names, ranks.repeat(counts)


def _long_ranked(runs: list[PostingRun], flat: np.ndarray, prefixes: np.ndarray,
                 ranks: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """:func:`_ranked`'s terms and ranks where ``flat`` (the runs' terms in order, cut to :data:`SHORT_TERM`
    bytes) was ranked into ``prefixes``: each prefix that some longer term was cut to stands for the distinct
    whole terms sharing it, which take its place in order.

    Cut terms hold no NUL, so a term shorter than a prefix orders against it as against any term it starts,
    and only terms of :data:`SHORT_TERM` bytes or more (a non-NUL last byte in ``flat``) share a cut prefix."""
    width = flat.itemsize
    at = np.flatnonzero(flat.view(np.uint8).reshape(-1, width)[:, -1])  # where a term may have been cut
    whole: list[bytes] = []  # those terms in full
    lo = 0
    for terms, *_rest in runs:
        picked = (at[(at >= lo) & (at < lo + len(terms))] - lo).tolist()
        whole += terms[picked].tolist() if isinstance(terms, np.ndarray) else list(map(terms.__getitem__, picked))
        lo += len(terms)
    group = ranks[at]
    cut = np.unique(group[np.fromiter(map(len, whole), np.int64, len(whole)) > width])  # prefixes of cut terms
    sharing = np.isin(group, cut)
    at, group = at[sharing], group[sharing].tolist()
    whole = list(compress(whole, sharing.tolist()))
    members: dict[int, list[bytes]] = {}
    for rank, term in zip(group, whole):
        members.setdefault(rank, []).append(term)
    names: list[bytes] = []
    within: dict[tuple[int, bytes], int] = {}
    extra = np.zeros(len(prefixes), np.int64)  # how many more names each prefix stands for
    done = 0
    listed = prefixes.tolist()
    for rank in cut.tolist():
        spelled = sorted(set(members[rank]))
        names += listed[done:rank]
        names += spelled
        done = rank + 1
        extra[rank] = len(spelled) - 1
        within.update(zip(zip(repeat(rank), spelled), range(len(spelled))))
    names += listed[done:]
    shift = (np.cumsum(extra) - extra).astype(np.int32)
    ranks = ranks + shift[ranks]
    ranks[at] += np.fromiter(map(within.__getitem__, zip(group, whole)), np.int32, len(whole))
    return names, ranks


def unique_fixed(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(terms, return_inverse=True)`` for a fixed-width bytes array whose terms hold no NUL (the
    inverse as int32), by integer sorts: each term's bytes, NUL padded to whole 8-byte words, read as big-endian
    words order exactly as the bytes do. A merge's distinct terms were about half its cost of grouping postings
    when numpy compared them as strings.

    One stable argsort orders every term by its first word (terms up to 8 bytes, most of a text's, are then done);
    then word by word, only the runs of terms still tied where one goes on past that word are sorted by it. On
    real code (an array 48 bytes wide, 30% of its terms past 8 bytes and 8% past 16) that costs a third of a
    lexsort over every word of every term and a gather of them all."""
    n, width = len(terms), terms.itemsize
    words = -(-width // 8)
    matrix = np.zeros((n, words * 8), np.uint8)
    matrix[:, :width] = terms.view(np.uint8).reshape(n, width)
    key = matrix.view(">u8").astype(np.uint64)
    del matrix
    # stable (timsort) rather than numpy's default: over the first words of every merge's terms captured
    # from a real-code autoindex (many repeats: a term recurs in each segment merged), 0.27-0.30 -> 0.15-0.16 s
    # on an AMD EPYC and 0.315 -> 0.177 s on an Intel CPU; on distinct random words the two were equal
    order = key[:, 0].argsort(kind="stable")
    word = key[order, 0]
    first = np.ones(n, bool)  # where a distinct term starts, in sorted order
    np.not_equal(word[1:], word[:-1], out=first[1:])
    if words > 1:
        filled = np.count_nonzero(key, axis=1)  # each term's words before its padding (no NUL inside a term)
        at = np.arange(n)  # the positions (in sorted order) of the runs still tied, whole runs
        for column in range(1, words):
            run = np.cumsum(first[at]) - 1
            tied = np.bincount(run) > 1
            tied &= np.bincount(run, filled[order[at]] > column, len(tied)) > 0
            keep = tied[run]
            at, run = at[keep], run[keep]
            if not len(at):
                break
            members = order[at]
            word = key[members, column]
            within = np.lexsort((word, run))  # by run, then by this word
            order[at] = members[within]
            word = word[within]
            first[at[1:]] |= word[1:] != word[:-1]
    inverse = np.empty(n, np.int32)
    inverse[order] = first.cumsum(dtype=np.int32) - 1
    return terms[order[first]], inverse


def postings_of_tokens(tokens: list[list[str]], start: int) -> PostingRun:
    """The grouped postings of consecutive rows' token lists (row ``start + i`` holds ``tokens[i]``): each
    term's frequency per row, counted by one numpy ``unique`` over (term rank, row) pairs."""
    flat = list(chain.from_iterable(tokens))
    if not flat:
        return empty_run()
    n = len(tokens)
    names = sorted(set(flat))  # str order is code point order, which is UTF-8 byte order
    number = dict(zip(names, range(len(names))))
    key = np.fromiter(map(number.__getitem__, flat), np.int64, len(flat)) * n
    key += np.repeat(np.arange(n, dtype=np.int64), np.fromiter(map(len, tokens), np.int64, n))
    pairs, tfs = np.unique(key, return_counts=True)
    ranks, rows = np.divmod(pairs, n)
    return (list(map(str.encode, names)), np.bincount(ranks, minlength=len(names)), rows + start,
            tfs.astype(np.float32))


def _filter(run: PostingRun, keep: np.ndarray) -> PostingRun:
    terms, counts, rows, tfs = run
    if keep.all():
        return run
    which = np.repeat(np.arange(len(terms)), counts)[keep]
    kept = np.bincount(which, minlength=len(terms))
    alive = np.flatnonzero(kept)
    return list(map(terms.__getitem__, alive.tolist())), kept[alive], rows[keep], tfs[keep]


def _column_slice(column: Column, lo: int, hi: int) -> Column:
    mask = (column.extra_rows >= lo) & (column.extra_rows < hi)
    return Column(column.kind, column.values[lo:hi], column.present[lo:hi],
                  column.extra_rows[mask] - lo, column.extra_ords[mask])


__all__ = ["Block", "CHUNK", "MAGIC", "PostingRun", "concat", "decode", "delete", "empty_run", "from_records",
           "SHORT_TERM", "group", "grouped", "postings_of_tokens", "read", "stored"]
