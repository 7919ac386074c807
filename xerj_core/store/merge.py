"""Background merges: an index's sealed segments brought back to their canonical layout outside the write lock.

A seal whose merge would rewrite many sealed rows (``Store(merge_above=...)``)
only appends its rows as a segment of their own and leaves the merge here. The
merge reads the segments from a read snapshot and computes the merged
columns and postings there, with no lock held: writers keep writing and readers
keep their snapshots. It then swaps the result in with one short write
transaction that first checks the source segments are still exactly the ones it
read (same records, same epoch). Deletes and overwrites never change a sealed
segment (they go to the dead log and a merge keeps dead rows), and seals in the
meantime only append segments after the sources, so the check fails only when
a compaction or another process's merge rewrote them: the merge is then planned
again from a newer snapshot. A crash at any point leaves either the old
segments or the merged ones, each a valid layout, since the swap is one commit.

On an LMDB data directory the merges run in a child process, the merge worker
(``xerj_core.store.mergeproc`` says why); the store's merge thread only hands it
the index names and waits, and runs a merge itself when no worker can run.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

import attrs
import lmdb
import orjson

from xerj_core.errors import IndexNotFound, XerjError
from xerj_core.store import keys, residency
from xerj_core.store.columns import KIND_LEN, Column, column_kind
from xerj_core.store.mapping import Mapping
from xerj_core.store.mergeproc import MergeWorker, WorkerLost
from xerj_core.store.write import CutPostings, IndexWrite, WriteTxn, segment_layout

if TYPE_CHECKING:
    from xerj_core.store.store import Store

log = logging.getLogger(__name__)

# How often an idle merge thread collects a merge worker that exited on its own (mergeproc.IDLE_SECONDS).
REAP_SECONDS = 60.0
# Plans tried per index and wake-up before giving up until the next seal asks again (each failed try means
# another writer rewrote the sources meanwhile).
_ATTEMPTS = 4


@attrs.frozen
class MergePlan:
    """A computed merge of one index: the source segments as read, and the segments replacing them."""

    name: str
    ix: int
    epoch: int
    sources: list[tuple[bytes, bytes]]  # (segs key, segs record) of each source segment, in row order
    targets: list[tuple[int, int]]
    region_start: int
    built: dict[str, Column]
    postings: dict[str, CutPostings]


class _SnapshotSegments:
    """The part of :class:`IndexWrite` that reads stored segments, over a read transaction."""

    _load_column = IndexWrite._load_column
    _merge_postings = IndexWrite._merge_postings
    _segment_postings = IndexWrite._segment_postings

    def __init__(self, raw: Any, dbs: dict[str, Any], ix: int, release: Callable[[], None] | None = None) -> None:
        self.txn = attrs.make_class("View", ["raw", "dbs"])(raw, dbs)
        self.ix = ix
        # A merge planned from a snapshot reads every segment as stored and keeps nothing.
        self.segment_runs: dict[tuple[int, int], dict[str, Any]] = {}
        self.keep_runs_rows = 0
        self.release = release

    def _stored_postings(self, start: int, path: str, renumber: Any = None) -> list[Any]:
        runs = IndexWrite._stored_postings(self, start, path, renumber)  # type: ignore[arg-type]
        if self.release is not None:
            # what was read is copied out: the map's pages of a big segment's postings (about 100 MB of real
            # code's in a merge into the largest segments) need not stay resident through the grouping
            self.release()
        return runs


def plan(raw: Any, dbs: dict[str, Any], name: str, tail_rows: int, release: Callable[[], None] | None = None
         ) -> MergePlan | None:
    """The merge that brings index ``name``'s segments (as the read transaction ``raw`` sees them) to the
    canonical layout of its sealed rows, or None when they are in it (or the index is gone); ``release`` is
    called after each segment's postings are read (see :class:`PageRelease`)."""
    meta = raw.get(name.encode(), db=dbs["indices"])
    if meta is None:
        return None
    ix = orjson.loads(meta)["ix"]
    state = keys.IndexState.unpack(raw.get(keys.ix_key(ix), db=dbs["state"]))
    prefix = keys.ix_key(ix)
    records: list[tuple[bytes, bytes]] = []
    with raw.cursor(db=dbs["segs"]) as cur:
        if cur.set_range(prefix):
            for key, value in cur:
                if not key.startswith(prefix):
                    break
                records.append((bytes(key), bytes(value)))
    layout = [(keys.read_u64(key, 4), orjson.loads(value)["end"]) for key, value in records]
    canonical = segment_layout(state.sealed_rows, tail_rows)
    if layout == canonical or not layout or layout[-1][1] != state.sealed_rows:
        return None
    keep = 0
    while keep < min(len(layout), len(canonical)) and layout[keep] == canonical[keep]:
        keep += 1
    sources, targets = layout[keep:], canonical[keep:]
    mapping = Mapping.stored(raw.get(keys.ix_key(ix), db=dbs["mappings"]))
    view = _SnapshotSegments(raw, dbs, ix, release)
    fields = list(mapping.fields.values())
    built = {}
    for spec in fields:
        kind = column_kind(spec)
        built[spec.path] = Column.concat([view._load_column(start, end, spec, kind) for start, end in sources])
    postings = {spec.path: view._merge_postings(spec.path, sources, targets, [])
                for spec in fields if column_kind(spec) == KIND_LEN}
    return MergePlan(name, ix, state.epoch, records[keep:], targets, sources[0][0], built, postings)


def apply(txn: WriteTxn, merge: MergePlan, release: Callable[[], None] | None = None) -> bool:
    """Swap ``merge``'s segments in when its sources are unchanged; False (nothing written) when they are not.
    ``release`` is called once the sources are dropped (see :class:`PageRelease`)."""
    raw, dbs = txn.raw, txn.dbs
    if not txn.exists(merge.name):
        return False
    target = txn.index(merge.name, allow_closed=True)
    if target.ix != merge.ix or target.state.epoch != merge.epoch:
        return False  # dropped and created again, or compacted (rows renumbered)
    if any(raw.get(key, db=dbs["segs"]) != record for key, record in merge.sources):
        return False  # another merge rewrote them
    starts = [keys.read_u64(key, 4) for key, _record in merge.sources]
    for start in starts:
        target._drop_segment(start)
    if release is not None:
        # dropping walked every page of the sources (about 150 MB of the map for the largest merge of real code):
        # the deletions are in the transaction's own pages, so the map's can go before the new segments are put
        release()
    stamps = [orjson.loads(record).get("sealed_at", 0) for _key, record in merge.sources]
    target._write_segments(merge.targets, merge.region_start, merge.built, merge.postings, after=max(stamps))
    target.merged = True
    return True


def merge_index(store: "Store", name: str) -> bool:
    """Merge index ``name`` until its segments are in their canonical layout; False when it gave up."""
    release = PageRelease(store.env)
    for _ in range(_ATTEMPTS):
        with store.read_txn() as gated:
            raw = getattr(gated, "_txn", gated)  # the LMDB transaction itself, for its cursors' batch reads
            merge = plan(raw, store.env.dbs, name, store.tail_rows, release)
        release()  # the map pages the plan read would otherwise stay in this process's RSS beside a writer's
        if merge is None:
            return True
        applied = store.transact(lambda txn: apply(txn, merge, release))
        del merge
        release()
        if applied:
            continue
    return False


class PageRelease:
    """Gives back the map pages this process mapped since it was made (what a merge read), once they add up to
    :attr:`WORTH`.

    Map pages only: the merge thread also runs in serving processes, whose
    memory must stay lean without a process-wide malloc_trim (a long write
    such as autoindex trims the heap itself, in its sink). And only the pages
    mapped since (``Environment.release_pages`` ``since``): a writer in the
    same process keeps the B-tree pages it had mapped instead of faulting
    them back one by one after every merge.
    """

    # Reading which pages are mapped costs about 10 ms per GB of data, so a merge that read little (growth below
    # this) leaves its pages mapped.
    WORTH = 16 << 20

    def __init__(self, env: Any) -> None:
        self.env = env if hasattr(env, "release_pages") else None
        self.since: Any = None
        self.resident: int | None = None
        if self.env is not None:
            self.since = env.pages_mapped() if hasattr(env, "pages_mapped") else None
            self.resident = residency.file_resident_bytes()

    def __call__(self) -> None:
        if self.env is None:
            return
        now = residency.file_resident_bytes()
        if now is not None and self.resident is not None and now - self.resident < self.WORTH:
            return
        if self.env.release_pages(heap=False, since=self.since):  # every page (the map moved, or unreadable)
            self.since = self.env.pages_mapped() if hasattr(self.env, "pages_mapped") else None
        self.resident = residency.file_resident_bytes()


class Merger:
    """The merge thread of one store: it merges the indices seals named, one at a time, through the store's
    merge worker process when it has one (``worker``), else itself."""

    def __init__(self, store: "Store", worker: MergeWorker | None = None) -> None:
        self.store = store
        self.worker = worker
        self.wanted: dict[str, None] = {}
        self.busy = False
        self.closed = False
        self.merged = 0  # merges done, wherever they ran
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def want(self, names: list[str]) -> None:
        with self.cond:
            if self.closed:
                return
            self.wanted.update(dict.fromkeys(names))
            if self.thread is None or not self.thread.is_alive():  # also after a fork: threads do not cross it
                self.thread = threading.Thread(target=self._run, name="xerj-merge", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.wanted and not self.closed:
                    if not self.cond.wait(REAP_SECONDS) and self.worker is not None:
                        self.worker.reap_exited()
                if self.closed:
                    return
                name = next(iter(self.wanted))
                del self.wanted[name]
                self.busy = True
            try:
                self._merge(name)
            except (IndexNotFound, lmdb.Error, XerjError):
                log.exception("background merge of index [%s] failed; the next seal asks again", name)
            finally:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def _merge(self, name: str) -> None:
        if self.worker is not None:
            try:
                self.worker.merge(name)
                self.merged += 1
                return
            except (OSError, WorkerLost):
                log.warning("the merge worker process is unavailable; merging in this process", exc_info=True)
                self.worker.close()
                self.worker = None
        merge_index(self.store, name)
        self.merged += 1

    def wait(self) -> None:
        """Return once every merge asked for so far is done."""
        with self.cond:
            while (self.wanted or self.busy) and not self.closed:
                self.cond.wait()

    def close(self) -> None:
        """Stop the thread (a merge under way finishes first; one not started is left to a later process)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self.worker is not None:
            self.worker.close()


__all__ = ["MergePlan", "Merger", "PageRelease", "apply", "merge_index", "plan"]
