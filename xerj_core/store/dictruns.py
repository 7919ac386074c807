"""A dictionary's term -> ordinal lookup kept as a few sorted runs of 64-bit term hashes (an LSM), not a B-tree entry per term.

The reverse records (``dictr``: ordinal -> term) stay the truth; this is only
how a writer finds the ordinal of a term it is given. The older layout put one
``dict`` entry per term, keyed by the term: a dictionary with a term per
document (an edge index's ``edge_id``) then inserts random keys into a B-tree
far larger than one commit, and every insert dirties a page of its own, so the
cost per term grows with the dictionary. Here a transaction's new terms become
one run (their hashes sorted, with their ordinals), written as a few
sequential values; runs merge by size tiers, :data:`FANOUT` of a tier into one
(each ordinal is rewritten O(log n) times, at 12 bytes), so a dictionary has
O(log n) runs. A lookup hashes the terms (xxh3-64) and searches every run
with numpy; a hash found is confirmed against the reverse record, so two terms
with the same hash are told apart. A committed run of :data:`SKETCH_MIN` terms
or more is first asked through its sketch (:class:`Sketch`, a blocked Bloom
filter made once per process and run): only the hashes it may hold are searched
for, since a binary search of a run that has outgrown the processor's caches
costs several cache misses per term, and a batch of new terms (an edge ingest's
ids) is absent from every run.

Keys (``dict`` database), after ``<ix><name>\\x00\\xff`` (no term key continues with
``\\xff``, a byte UTF-8 never holds): ``m`` the run bounds, ``c<lo><k>`` the
``k``-th chunk of the run of ordinals from ``lo``. A dictionary is in this
layout when it has the bounds record; one created by LMDB code that knows this
layout always is (older dictionaries keep their per-term entries; a database
store keeps them too, its own B-trees being server side).
"""

from __future__ import annotations

import struct
import weakref
from itertools import repeat
from typing import Any, Iterator, Sequence

import numpy as np
import xxhash

from xerj_core.errors import XerjError
from xerj_core.store import keys

FORMAT = b"R1"
# Bytes per stored value: small enough to live in a leaf page, so LMDB reuses freed pages (see tailblock.CHUNK).
CHUNK = 1900
# Runs stop merging at this many terms: a merge rewrites at most this many, and a dictionary of n terms has
# about n / MAX_RUN + (FANOUT - 1) * log_FANOUT(MAX_RUN) runs to search.
MAX_RUN = 1 << 21
# Runs merge by tiers of size (a tier spans a factor FANOUT): FANOUT runs of one tier become one run, so each term is
# rewritten (and its run's sketch made again) about log_FANOUT(n / batch) times. Pairs (2) rewrote each term
# log2 times: at 1M edges in 10k batches 6.6 times against 4.3 at 200k, a cost per edge that grew with the brain.
FANOUT = 4
_LO_K = struct.Struct(">II")
_HASH = np.dtype("<u8")
_ORD = np.dtype("<u4")

Run = tuple[np.ndarray, np.ndarray]  # sorted term hashes, and each one's ordinal

# Runs this long or longer are asked through a sketch first: a shorter run's binary search stays in the caches.
SKETCH_MIN = 4096
# Sketch bits per term: one 64-bit word per 4 terms, 3 bits set per term, so about 1% of absent hashes pass.
SKETCH_BITS = 16
# Hashes a sketch is made from at a time (their temporaries stay in the processor's caches).
_SKETCH_SLICE = 1 << 14
_ONE, _LOW6 = np.uint64(1), np.uint64(63)
_SIX, _TWELVE = np.uint64(6), np.uint64(12)


def _bits(term_hashes: np.ndarray) -> np.ndarray:
    """Each hash's 3 bits in its sketch word, from its low 18 bits (the word is chosen by its top bits)."""
    return ((_ONE << (term_hashes & _LOW6)) | (_ONE << ((term_hashes >> _SIX) & _LOW6))
            | (_ONE << ((term_hashes >> _TWELVE) & _LOW6)))


class Sketch:
    """A blocked Bloom filter of one run's hashes: :meth:`may_hold` is False only for a hash the run does not
    hold, and asks one 64-bit word (one cache line) per hash where a binary search asks a line per level.

    Made from the run's stored hashes alone, so nothing on disk changes; kept per run array (see
    :func:`sketch_of`), it lives exactly as long as the run stays cached."""

    __slots__ = ("words", "shift", "__weakref__")

    def __init__(self, term_hashes: np.ndarray) -> None:
        words_log = max(1, (term_hashes.size * SKETCH_BITS // 64 - 1).bit_length())
        self.shift = np.uint64(64 - words_log)
        self.words = np.zeros(1 << words_log, np.uint64)
        # Made a slice at a time: a run's sketch is made again each time the run is merged, and the dozen
        # temporaries of a whole large run outgrew the processor's caches (about twice the time per hash).
        for at in range(0, term_hashes.size, _SKETCH_SLICE):
            self._add(term_hashes[at:at + _SKETCH_SLICE])

    def _add(self, term_hashes: np.ndarray) -> None:
        word, bits = term_hashes >> self.shift, _bits(term_hashes)
        if word.size and bool((word[1:] >= word[:-1]).all()):  # a run's sorted hashes: one OR per word, in C
            starts = np.flatnonzero(word[1:] != word[:-1]) + 1
            starts = np.concatenate((np.zeros(1, np.int64), starts))
            self.words[word[starts]] |= np.bitwise_or.reduceat(bits, starts)  # a word may span two slices
        else:
            np.bitwise_or.at(self.words, word, bits)

    def may_hold(self, term_hashes: np.ndarray) -> np.ndarray:
        """Per hash: might the run hold it (False: it does not)."""
        wanted = _bits(term_hashes)
        return (self.words[term_hashes >> self.shift] & wanted) == wanted


# id(run hashes) -> (a weak reference to that array, its sketch); an entry leaves when its array is freed.
_SKETCHES: dict[int, tuple[weakref.ref, Sketch]] = {}


def sketch_of(term_hashes: np.ndarray, *, make: bool = False) -> Sketch | None:
    """The sketch of a committed run's hash array (``make``: made now when it has none and is long enough);
    None when it has none."""
    key = id(term_hashes)
    found = _SKETCHES.get(key)
    if found is not None and found[0]() is term_hashes:
        return found[1]
    if not make or term_hashes.size < SKETCH_MIN:
        return None
    sketch = Sketch(term_hashes)
    _SKETCHES[key] = (weakref.ref(term_hashes, lambda _ref, key=key: _forget(key, _ref)), sketch)
    return sketch


def _forget(key: int, ref: weakref.ref) -> None:
    found = _SKETCHES.get(key)
    if found is not None and found[0] is ref:  # not a sketch made since for a new array at the same address
        _SKETCHES.pop(key, None)  # a sketch dropped by a race is only made again (or not used): never wrong


def _tier(size: int) -> int:
    """The merge tier of a run of ``size`` numbers: floor(log_FANOUT(size))."""
    tier = 0
    while size >= FANOUT:
        size //= FANOUT
        tier += 1
    return tier


def _merged_into(bounds: list[tuple[int, int]], span: tuple[int, int]) -> list[tuple[int, int]]:
    """The runs at the end of ``bounds`` that a new run of ``span`` merges with (oldest first; taken off
    ``bounds``): a run of a lower tier just before the merged one is absorbed, and FANOUT runs of one tier are
    merged, again while the merged run keeps qualifying, never past :data:`MAX_RUN` numbers."""
    taken: list[tuple[int, int]] = []
    while bounds:
        tier = _tier(span[1] - span[0])
        older = bounds[-1]
        if _tier(older[1] - older[0]) < tier:
            step = 1
        else:
            step = FANOUT - 1
            if len(bounds) < step or any(_tier(hi - lo) != tier for lo, hi in bounds[-step:]):
                break
        if span[1] - bounds[-step][0] > MAX_RUN:
            break
        taken[:0] = bounds[-step:]
        del bounds[-step:]
        span = (taken[0][0], span[1])
    return taken


def prefix(ix: int, name: str) -> bytes:
    return keys.dict_key(ix, name, "") + b"\xff"


def hashes(encoded: Sequence[bytes]) -> np.ndarray:
    """The 64-bit hash of each UTF-8 term, as the runs hold them."""
    return np.fromiter(map(xxhash.xxh3_64_intdigest, encoded), np.uint64, len(encoded))


class DictRuns:
    """One dictionary's runs as one write transaction sees them, with the terms it adds (a run at :meth:`finish`).

    ``cache`` is the store's ``(ix, name, lo, hi) -> Run`` of committed runs: the ordinals of a committed range
    never change and index numbers are never reused, so a run read once serves every later transaction.

    The id map (xerj_core.store.idmap) keeps its runs the same way, in its own database (:attr:`DB`) and with
    numbers that need not be dense (:attr:`DENSE`: a run of rows ``lo``-``hi`` holds only some of them).
    """

    DB = "dict"
    DENSE = True

    @classmethod
    def key_prefix(cls, ix: int, name: str) -> bytes:
        """What every key of these runs starts with."""
        return prefix(ix, name)

    def __init__(self, raw: Any, dbs: dict[str, Any], ix: int, name: str, bounds: list[tuple[int, int]],
                 cache: dict[tuple[int, str, int, int], Run]) -> None:
        self.raw = raw
        self.dbs = dbs
        self.ix = ix
        self.name = name
        self.prefix = self.key_prefix(ix, name)
        self.bounds = bounds
        self.cache = cache
        self.runs: dict[tuple[int, int], Run] = {}
        self.added_hashes: list[np.ndarray] = []
        self.added_ords: list[np.ndarray] = []
        self.added_first: int | None = None
        self.added_end = 0  # one past the last number added
        self.added = 0
        self.written: list[tuple[tuple[int, int], Run]] = []  # runs this transaction wrote (cached after commit)
        self.merged: list[tuple[int, int]] = []  # runs it merged away (dropped from the cache after commit)

    @classmethod
    def open(cls, raw: Any, dbs: dict[str, Any], ix: int, name: str, size: int,
             cache: dict[tuple[int, str, int, int], Run]) -> "DictRuns | None":
        """The runs of the dictionary ``name`` of index ``ix`` holding ``size`` terms; a new (empty) dictionary
        is created in this layout; None for one stored in the per-term layout."""
        stored = raw.get(cls.key_prefix(ix, name) + b"m", db=dbs[cls.DB])
        if stored is None:
            if size:
                return None
            return cls(raw, dbs, ix, name, [], cache)
        if stored[:2] != FORMAT:
            raise XerjError(f"dictionary '{name}' has runs of an unknown format {stored[:2]!r}")
        flat = np.frombuffer(stored, ">u4", offset=2).tolist()
        return cls(raw, dbs, ix, name, list(zip(flat[0::2], flat[1::2])), cache)

    # -- reading ---------------------------------------------------------------------------------

    def _run(self, lo: int, hi: int) -> Run:
        found = self.runs.get((lo, hi))
        if found is None:
            found = self.cache.get((self.ix, self.name, lo, hi))
            if found is None:
                found = self._read(lo, hi)
                self.cache[(self.ix, self.name, lo, hi)] = found  # committed (this transaction writes at the end)
            self.runs[(lo, hi)] = found
            sketch_of(found[0], make=True)  # committed: searched by later transactions too
        return found

    def _read(self, lo: int, hi: int) -> Run:
        start = self.prefix + b"c" + _LO_K.pack(lo, 0)
        head = start[:-4]
        parts = []
        with self.raw.cursor(db=self.dbs[self.DB]) as cur:
            if cur.set_range(start):
                for key, value in cur:
                    if not key.startswith(head):
                        break
                    parts.append(bytes(value))
        blob = b"".join(parts)
        width = _HASH.itemsize + _ORD.itemsize
        n = hi - lo if self.DENSE else len(blob) // width
        if len(blob) != n * width or n > hi - lo:
            raise XerjError(f"dictionary '{self.name}': the run of ordinals {lo}-{hi} is damaged")
        # views of the one joined blob (12 bytes a term in memory), converted only on a big-endian machine
        return (np.frombuffer(blob, _HASH, n).astype(np.uint64, copy=False),
                np.frombuffer(blob, _ORD, n, offset=n * _HASH.itemsize).astype(np.uint32, copy=False))

    def lookup(self, encoded: Sequence[bytes], *, known: bool = False) -> tuple[list[int | None], np.ndarray]:
        """The stored ordinal of each UTF-8 term (None: not in a committed run), each hash confirmed against the
        term's reverse record, and the terms' hashes (for :meth:`add`). Terms this transaction added are not
        searched (the caller's cache has them).

        ``known``: the caller knows every term is in a committed run (a stored document's value, read back).
        A term whose hash matches one entry only is then that entry, with no reverse record read; a hash
        matching several entries is still confirmed."""
        n = len(encoded)
        found: list[int | None] = [None] * n
        wanted = hashes(encoded)
        if not n:
            return found, wanted
        positions, candidates = [], []  # each (position, ordinal) whose hash matches, found by numpy passes
        # Searched in ascending order: numpy's binary search then starts each from where the last one ended, so
        # a batch walks a run forward instead of descending it from the top per term (the run outgrows the caches).
        order = np.argsort(wanted)
        ascending = wanted[order]
        for run_hashes, run_ords in self._searched():
            sketch = sketch_of(run_hashes)
            if sketch is None:
                at = np.empty(n, np.int64)
                at[order] = np.searchsorted(run_hashes, ascending)
                at[at == run_hashes.size] = 0
                where = np.flatnonzero(run_hashes[at] == wanted)
                at = at[where]
            else:  # only the hashes the run may hold are searched for (still ascending)
                asked = np.flatnonzero(sketch.may_hold(ascending))
                at = np.searchsorted(run_hashes, ascending[asked])
                at[at == run_hashes.size] = 0
                hit = np.flatnonzero(run_hashes[at] == ascending[asked])
                where, at = order[asked[hit]], at[hit]
                by_position = np.argsort(where)
                where, at = where[by_position], at[by_position]
            while where.size:  # the first entry of each matching hash, then any next one of the same hash
                positions.append(where)
                candidates.append(run_ords[at])
                at = at + 1
                more = at < run_hashes.size
                where, at = where[more], at[more]
                same = run_hashes[at] == wanted[where]
                where, at = where[same], at[same]
        if not positions:
            return found, wanted
        position = np.concatenate(positions).tolist()
        ordinals = np.concatenate(candidates).tolist()
        if known:
            matches = np.bincount(position, minlength=n)
            for i, ordinal in zip(position, ordinals):
                if matches[i] == 1:
                    found[i] = ordinal
            kept = [k for k, i in enumerate(position) if matches[i] > 1]
            position, ordinals = [position[k] for k in kept], [ordinals[k] for k in kept]
            if not position:
                return found, wanted
        terms = self._terms(sorted(set(ordinals)))
        for i, ordinal, term in zip(position, ordinals, map(terms.get, ordinals)):
            if term == encoded[i]:
                found[i] = ordinal
        return found, wanted

    def _searched(self) -> Iterator[Run]:
        """The runs :meth:`lookup` searches: the committed ones."""
        for lo, hi in self.bounds:
            yield self._run(lo, hi)

    def _terms(self, ordinals: list[int]) -> dict[int, bytes]:
        """``ordinal -> term bytes`` from the reverse records (ascending ``ordinals``), in one ordered pass."""
        head = keys.dict_key(self.ix, self.name, "")
        with self.raw.cursor(db=self.dbs["dictr"]) as cur:
            got = cur.getmulti(list(map(head.__add__, map(int.to_bytes, ordinals, repeat(4), repeat("big")))))
        return {int.from_bytes(k[-4:], "big"): bytes(v) for k, v in got}

    # -- writing ---------------------------------------------------------------------------------

    def add(self, term_hashes: np.ndarray, first: int) -> None:
        """Record that the terms of hashes ``term_hashes`` were given the ordinals ``first`` on, in order."""
        if not term_hashes.size:
            return
        if self.added_first is None:
            self.added_first = self.added_end = first
        if first != self.added_end if self.DENSE else first < self.added_end:
            raise XerjError(f"dictionary '{self.name}': ordinal {first} added out of order")
        self.added_hashes.append(term_hashes)
        self.added_ords.append(np.arange(first, first + term_hashes.size, dtype=np.uint32))
        self.added += term_hashes.size
        self.added_end = first + term_hashes.size

    def finish(self) -> None:
        """Write this transaction's terms as a run, merged with the runs before it as :func:`_merged_into` says
        (up to :data:`MAX_RUN` terms), and store the bounds."""
        if not self.added and self.bounds:
            return
        bounds = list(self.bounds)
        if self.added:
            lo = self.added_first
            assert lo is not None
            new_hashes = np.concatenate(self.added_hashes)
            order = np.argsort(new_hashes, kind="stable")
            run: Run = (new_hashes[order], np.concatenate(self.added_ords)[order])
            span = (lo, self.added_end)
            taken = _merged_into(bounds, span)
            if taken:
                span = (taken[0][0], span[1])
                self.merged.extend(taken)
                parts = [self._run(*older) for older in taken] + [run]
                both = np.concatenate([p[0] for p in parts])
                order = np.argsort(both, kind="stable")  # sorted runs, oldest first: merged in one pass
                run = (both[order], np.concatenate([p[1] for p in parts])[order])
            raw, db = self.raw, self.dbs[self.DB]
            for older in taken[1:]:  # the first starts where the merged run does: cleared just below
                self._delete_chunks(older[0])
            blob = run[0].astype(_HASH).tobytes() + run[1].astype(_ORD).tobytes()
            head = self.prefix + b"c"
            items = [(head + _LO_K.pack(span[0], k), blob[at:at + CHUNK])
                     for k, at in enumerate(range(0, len(blob), CHUNK))]
            self._delete_chunks(span[0])  # a run merged into this one was stored at the same start
            with raw.cursor(db=db) as cur:
                cur.putmulti(items)
            bounds.append(span)
            self.written.append((span, run))
        flat = np.array(bounds, ">u4").reshape(-1)
        self.raw.put(self.prefix + b"m", FORMAT + flat.tobytes(), db=self.dbs[self.DB])
        self.bounds = bounds

    def _delete_chunks(self, lo: int) -> None:
        head = self.prefix + b"c" + lo.to_bytes(4, "big")
        with self.raw.cursor(db=self.dbs[self.DB]) as cur:
            while cur.set_range(head) and cur.key().startswith(head):
                cur.delete()

    def remember(self) -> None:
        """After the commit: this transaction's runs are committed, so later transactions may skip reading them."""
        for lo, hi in self.merged:
            self.cache.pop((self.ix, self.name, lo, hi), None)
        for (lo, hi), run in self.written:
            self.cache[(self.ix, self.name, lo, hi)] = run
