"""The id map of an LMDB index (document ``_id`` -> row): the per-id B-tree entries plus runs of id hashes.

Every reader and writer of the map goes through here. An id is found in one
of two places:

- its own entry in the ``ids`` database, ``<ix><id>`` -> row (every id written
  by the general put path, every id of a data directory older than format 5,
  and every id of a database store, whose B-trees are server side);
- the runs (:class:`IdRuns`): the ids of new documents written as a batch
  (:func:`add`, :func:`claim`: bulk puts, the graph's edge ingest) are, per
  transaction, one run of their xxh3-64 hashes with their rows, merged like a
  dictionary's runs (xerj_core.store.dictruns).
  A batch of random ids (edge ids are hashes) then writes a few sequential
  values instead of dirtying a page of a B-tree far larger than one commit
  per id, which made the cost per edge grow with the brain.

A run is never rewritten when its documents change: a row found through a
hash counts only when that row's source record is still there and holds that
very id (a deleted or overwritten document's row loses its source record), so
hash collisions and stale entries are told apart. Exactly one row of an index
holds a live id, so the B-tree entry (kept exact, as before) is asked first and
the runs only when it has none. Compaction renumbers rows: it rewrites the
runs as one run of the live rows under their new numbers (:func:`renumber`).

Ids that begin with ``__xerj-`` (:data:`RESERVED_ID_PREFIX`: a brain's meta
document, its claim documents) always keep their own B-tree entries, whichever
door wrote them: the graph asks whether any claim exists by one ordered lookup
of that prefix, which a hash cannot answer.

Keys: the runs live in ``ids`` after ``<ix>\\xff`` (no UTF-8 id holds that byte),
``m`` their bounds and ``c<lo><k>`` their chunks, as in dictruns.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import lmdb
import numpy as np

from xerj_core.store import dictruns, keys

# Ids xerj itself names documents by; see the module doc.
RESERVED_ID_PREFIX = "__xerj-"
_RESERVED_MARK = b"\0" + RESERVED_ID_PREFIX.encode()

# Rows past this do not fit a run's 32-bit numbers: such an index's new ids get B-tree entries.
MAX_RUN_ROW = (1 << 32) - 1
_CHUNK_TAG = b"c"


class IdRuns(dictruns.DictRuns):
    """The id runs of one index as one transaction sees them, with the ids it claims (a run at :meth:`finish`).

    ``name`` carries the index's compaction epoch, so a cached run of rows ``lo``-``hi`` is never mistaken for
    one written after a compaction numbered the rows again."""

    DB = "ids"
    DENSE = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._known: tuple[list[tuple[int, int]], list[dictruns.Run]] | None = None  # the bounds, their runs
        self._keep: dict[int, bytes] | None = None  # see lookup_keeping

    @classmethod
    def key_prefix(cls, ix: int, name: str) -> bytes:
        return keys.ix_key(ix) + b"\xff"

    @classmethod
    def open_at(cls, raw: Any, dbs: dict[str, Any], ix: int, epoch: int, cache: dict[Any, Any]) -> "IdRuns":
        found = cls.open(raw, dbs, ix, f"\x00ids@{epoch}", 0, cache)
        assert found is not None  # an empty dictionary (size 0) always opens
        return found

    def _searched(self) -> Iterator[dictruns.Run]:
        """The committed runs, then the ids this transaction claimed (a later batch may hold one of them)."""
        known = self._known
        if known is None or known[0] is not self.bounds:  # read again once finish or renumber replaced the bounds
            known = self._known = (self.bounds, list(super()._searched()))
        yield from known[1]
        if self.added:
            hashes = np.concatenate(self.added_hashes)
            order = np.argsort(hashes, kind="stable")
            yield hashes[order], np.concatenate(self.added_ords)[order]

    def lookup_one(self, encoded: bytes) -> int | None:
        """:meth:`lookup` of one id, with a few scalar searches instead of whole-array passes."""
        wanted = dictruns.hashes([encoded])[0]
        candidates = []
        for run_hashes, run_rows in self._searched():
            at = int(run_hashes.searchsorted(wanted))
            while at < run_hashes.size and run_hashes[at] == wanted:
                candidates.append(int(run_rows[at]))
                at += 1
        if not candidates:
            return None
        stored = self._terms(sorted(set(candidates)))
        return next((found for found in candidates if stored.get(found) == encoded), None)

    def lookup_keeping(self, encoded: Sequence[bytes], sources: dict[int, bytes]) -> list[int | None]:
        """:meth:`lookup`'s rows, with the source record of each row read to confirm a hash put in ``sources``
        (row -> record): a caller about to read those documents need not read them again."""
        self._keep = sources
        try:
            return self.lookup(encoded)[0]
        finally:
            self._keep = None

    def _terms(self, ordinals: list[int]) -> dict[int, bytes]:
        """``row -> id bytes`` of those ``ordinals`` (ascending rows) whose source record is stored."""
        head = keys.ix_key(self.ix)
        with self.raw.cursor(db=self.dbs["src"]) as cur:
            got = cur.getmulti(list(map(head.__add__, map(keys.u64, ordinals))))
        out = {}
        start = keys.SRC_HEADER.size
        keep = self._keep
        for key, blob in got:
            _version, id_len = keys.SRC_HEADER.unpack_from(blob)
            row = keys.read_u64(key, 4)
            out[row] = bytes(blob[start:start + id_len])
            if keep is not None:
                keep[row] = blob
        return out

    def stored_run(self, lo: int, hi: int) -> dictruns.Run:
        """The run of rows ``lo``-``hi`` of :attr:`bounds`, which this transaction may have written: read without
        entering the shared cache (only committed runs go there, by :meth:`remember`)."""
        for span, run in self.written:
            if span == (lo, hi):
                return run
        found = self.runs.get((lo, hi)) or self.cache.get((self.ix, self.name, lo, hi))
        return found if found is not None else self._read(lo, hi)

    def finish(self) -> None:
        if self.added:  # an index none of whose ids is in a run gets no record
            super().finish()

    def renumber(self, live: np.ndarray, renumber: np.ndarray) -> None:
        """After a compaction: the runs become one run of the live rows (``live``, by old row) under their new
        numbers (``renumber``); the runs of the old numbering are deleted. Call after :meth:`finish`."""
        spans = list(self.bounds)
        parts = [self.stored_run(lo, hi) for lo, hi in spans]
        with self.raw.cursor(db=self.dbs[self.DB]) as cur:
            head = self.prefix + _CHUNK_TAG
            while cur.set_range(head) and cur.key().startswith(head):
                cur.delete()
        self.merged.extend(spans)
        self.written = []
        self.bounds = []
        self.added_hashes, self.added_ords, self.added, self.added_first, self.added_end = [], [], 0, None, 0
        if not parts:
            return
        hashes = np.concatenate([p[0] for p in parts])
        rows = np.concatenate([p[1] for p in parts]).astype(np.int64)
        kept = rows < live.size
        kept[kept] = live[rows[kept]]
        if not kept.any():
            self.raw.delete(self.prefix + b"m", db=self.dbs[self.DB])
            return
        new_rows = renumber[rows[kept]]
        self.added_hashes, self.added_ords = [hashes[kept]], [new_rows.astype(np.uint32)]
        self.added, self.added_first, self.added_end = int(new_rows.size), 0, int(new_rows.max()) + 1
        super().finish()
        self.written = []  # cached under the next epoch's name only once read again


def _lmdb(raw: Any) -> bool:
    """Is ``raw`` an LMDB transaction (a write one, or a read one behind the environment's reader gate)?"""
    return isinstance(raw, lmdb.Transaction) or isinstance(getattr(raw, "_txn", None), lmdb.Transaction)


def runs_of(raw: Any, dbs: dict[str, Any], ix: int, epoch: int, cache: dict[Any, Any], *, own: bool = False
            ) -> IdRuns | None:
    """The id runs of index ``ix`` in transaction ``raw`` (None for a database store: it keeps B-tree entries).

    ``own``: ``cache`` holds this index's id runs only (a reader's): the runs merged away or numbered before a
    compaction leave it, as a writer's :meth:`IdRuns.remember` drops them from the store's cache."""
    if not _lmdb(raw):
        return None
    runs = IdRuns.open_at(raw, dbs, ix, epoch, cache)
    if own and cache:
        current = {(ix, runs.name, lo, hi) for lo, hi in runs.bounds}
        for key in [key for key in list(cache) if key not in current]:
            cache.pop(key, None)  # an older snapshot still reading it reads it again
    return runs


def rows(raw: Any, dbs: dict[str, Any], ix: int, runs_of_ix: Callable[[], IdRuns | None], encoded: Sequence[bytes],
         sources: dict[int, bytes] | None = None) -> list[int | None]:
    """The row of each UTF-8 id (None: stored nowhere), ids that fit a key (``limits.MAX_ID_BYTES``);
    ``runs_of_ix`` gives the index's runs, asked only when an id has no B-tree entry. ``sources``: receives
    the source record (row -> record) of each row whose id was confirmed by reading it (found through the runs),
    for a caller that reads the documents next."""
    prefix = keys.ix_key(ix)
    wanted = list(map(prefix.__add__, encoded))
    db = dbs["ids"]
    if _lmdb(raw):
        with raw.cursor(db=db) as cur:
            stored = {bytes(k): v for k, v in cur.getmulti(sorted(wanted))}
    else:  # a database store fetches them in one round trip first (xerj_postgres.kv.Txn.prefetch)
        getattr(raw, "prefetch", lambda _db, _keys: None)(db, wanted)
        stored = {k: v for k, v in ((k, raw.get(k, db=db)) for k in wanted) if v is not None}
    found: list[int | None] = [None if blob is None else keys.read_u64(blob) for blob in map(stored.get, wanted)]
    if None not in found:
        return found
    runs = runs_of_ix()
    if runs is None or (not runs.bounds and not runs.added):
        return found
    missing = [i for i, row in enumerate(found) if row is None]
    asked = [encoded[i] for i in missing]
    in_runs = runs.lookup(asked)[0] if sources is None else runs.lookup_keeping(asked, sources)
    for i, row in zip(missing, in_runs):
        found[i] = row
    return found


def none_stored(raw: Any, dbs: dict[str, Any], ix: int, runs_of_ix: Callable[[], IdRuns | None],
                encoded: Sequence[bytes]) -> np.ndarray | None:
    """When none of the UTF-8 ids ``encoded`` (distinct, each fitting a key) is stored in index ``ix``'s map:
    their hashes as the runs hold them (for :func:`add`); None when one of them may be (ask :func:`rows`).

    The bulk-ingest case (every id new) in a few C-level passes instead of :func:`rows`' per-id lists: the
    B-tree holds no entry between the smallest and the largest of the ids (one seek), and no run holds any of
    their hashes (one sorted search per run). A hash found may be a collision or a stale entry: None then, and
    the caller's exact answer is :func:`rows`'. LMDB transactions only (None otherwise)."""
    runs = runs_of_ix()
    if runs is None or not _lmdb(raw) or not encoded:
        return None
    prefix = keys.ix_key(ix)
    first, last = prefix + min(encoded), prefix + max(encoded)
    with raw.cursor(db=dbs["ids"]) as cur:
        if cur.set_range(first) and cur.key() <= last:
            return None
    hashed = dictruns.hashes(encoded)
    if runs.bounds or runs.added:
        ascending = np.sort(hashed)
        for run_hashes, _rows in runs._searched():
            if not run_hashes.size:
                continue
            # a long run's sketch rules out nearly every new id in one word each; only the rest are searched for
            sketch = dictruns.sketch_of(run_hashes)
            asked = ascending if sketch is None else ascending[sketch.may_hold(ascending)]
            at = run_hashes.searchsorted(asked)
            at[at == run_hashes.size] = run_hashes.size - 1
            if (run_hashes[at] == asked).any():
                return None
    return hashed


def row(raw: Any, dbs: dict[str, Any], ix: int, runs_of_ix: Callable[[], IdRuns | None], encoded: bytes
        ) -> int | None:
    """:func:`rows` of one id: its B-tree entry, else the runs."""
    blob = raw.get(keys.ix_key(ix) + encoded, db=dbs["ids"])
    if blob is not None:
        return keys.read_u64(blob)
    runs = runs_of_ix()
    if runs is None or (not runs.bounds and not runs.added):
        return None
    return runs.lookup_one(encoded)


def _holds_reserved(encoded: Sequence[bytes]) -> bool:
    """Is an id of the reserved prefix among ``encoded``? One join and one search in C (an id holding a NUL
    before that text is a false alarm, which only costs its batch B-tree entries)."""
    return (b"\0" + b"\0".join(encoded)).find(_RESERVED_MARK) >= 0


def add(runs: IdRuns | None, encoded: Sequence[bytes], start: int, hashed: np.ndarray | None = None) -> bool:
    """Give the new ids ``encoded`` (distinct, and checked absent by the caller) the rows ``start`` on in the
    runs: True; False (nothing done) when the store keeps B-tree entries only, the rows do not fit a run or an
    id is reserved. ``hashed``: their hashes, when the caller has them (:func:`none_stored`)."""
    if runs is None or start + len(encoded) > MAX_RUN_ROW or _holds_reserved(encoded):
        return False
    runs.add(dictruns.hashes(encoded) if hashed is None else hashed, start)
    return True


def put(runs: IdRuns | None, raw: Any, dbs: dict[str, Any], entries: Sequence[tuple[bytes, bytes]]) -> bool:
    """Store the written documents' ``entries`` (``(id key, 8-byte row)``, rows ascending, ids distinct; new ids
    or overwritten ones) in the runs, deleting the B-tree entry an overwritten id may hold: True. False (nothing
    done; the caller puts B-tree entries) when the store keeps B-tree entries only, the rows do not fit or an id
    is reserved."""
    if not entries:
        return True
    row_list = [keys.read_u64(value) for _key, value in entries]
    encoded = [key[4:] for key, _value in entries]
    if runs is None or row_list[-1] >= MAX_RUN_ROW or _holds_reserved(encoded):
        return False
    with raw.cursor(db=dbs["ids"]) as cur:
        for key in sorted(key for key, _value in entries):
            if cur.set_key(key):
                cur.delete()
    found = np.array(row_list, np.int64)
    hashed = dictruns.hashes(encoded)
    # one add per stretch of consecutive rows (a refused item takes no row, so the rows are ascending)
    cuts = np.flatnonzero(np.diff(found) != 1) + 1
    for part, part_rows in zip(np.split(hashed, cuts), np.split(found, cuts)):
        runs.add(part, int(part_rows[0]))
    return True


def claim(runs: IdRuns | None, raw: Any, dbs: dict[str, Any], ix: int, encoded: Sequence[bytes], start: int
          ) -> bool:
    """:func:`add` when none of the new ids ``encoded`` (distinct) is stored (True); when one is, or the store
    keeps B-tree entries only or an id is reserved, nothing changes (False)."""
    if runs is None or start + len(encoded) > MAX_RUN_ROW or _holds_reserved(encoded):
        return False
    prefix = keys.ix_key(ix)
    with raw.cursor(db=dbs["ids"]) as cur:
        if cur.getmulti(sorted(map(prefix.__add__, encoded))):
            return False
    found, hashed = runs.lookup(encoded)
    if found.count(None) != len(found):
        return False
    runs.add(hashed, start)
    return True


def scan(raw: Any, dbs: dict[str, Any], ix: int, runs: IdRuns | None) -> Iterator[str]:
    """Every id with an entry in index ``ix``'s map (a stale run entry's id is not yielded)."""
    prefix = keys.ix_key(ix)
    with raw.cursor(db=dbs["ids"]) as cur:
        if cur.set_range(prefix):
            for key in cur.iternext(values=False):
                if not key.startswith(prefix) or key[len(prefix):len(prefix) + 1] == b"\xff":
                    break
                yield bytes(key[len(prefix):]).decode()
    if runs is not None:
        for lo, hi in runs.bounds:
            _hashes, run_rows = runs.stored_run(lo, hi)
            stored = runs._terms(sorted(set(run_rows.tolist())))
            yield from (blob.decode() for blob in stored.values())


__all__ = ["IdRuns", "MAX_RUN_ROW", "add", "claim", "none_stored", "put", "row", "rows", "runs_of", "scan"]
