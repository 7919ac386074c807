"""The store facade: one data directory, its indices and documents, write transactions and snapshot readers."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import attrs
import orjson

from xerj_core.errors import IndexClosed, IndexNotFound, XerjError
from xerj_core.store import env as envs
from xerj_core.store import keys, pins
from xerj_core.store import meta as index_meta
from xerj_core.store.merge import Merger
from xerj_core.store.mergeproc import MergeWorker
from xerj_core.store.read import IndexCache, IndexReader, PinnedReader, Snapshot
from xerj_core.store.records import Chained, Columns, first_refusal
from xerj_core.store.scope import SCOPE_FIELD, public_mapping, scope_of
from xerj_core.store.write import IndexWrite, WriteResult, WriteTxn

T = TypeVar("T")
DEFAULT_TAIL_ROWS = 1024
# Terms per dictionary the write path remembers across transactions.
TERM_CACHE_LIMIT = 200_000
# Indices whose tail records the write path remembers across transactions (each at most a tail's rows).
TAIL_CACHE_INDICES = 64
# Postings a store keeps in memory of the small sealed segments it wrote, for the merge that takes them (every
# eighth seal merges seven): bytes over every index. Small: a tail of small documents is tens of kilobytes, and
# 16 MB added 5 MB to autoindex's peak RSS on 20k notes, which has 400 MB to stay within.
SEGMENT_RUNS_BYTES = 4 << 20
# A seal that would merge more sealed rows than this (64 tails of the default size: the merges into the
# largest segments, which hold the write lock for a quarter of a second and more) appends its rows as a
# segment and leaves the merge to the store's merge worker process. Smaller merges stay in the write: deferring
# them too cost a 100k-document bulk load 10% more CPU (a deferred seal's rows are merged once more), and with
# the merges in the worker such a load still wrote 6-18% fewer documents a second (bench_store's documents).
MERGE_ABOVE = 64 * DEFAULT_TAIL_ROWS


_pause_lock = threading.Lock()
_pauses = [0, False]  # write transactions under way in this process; whether the collector was on before them
# Container objects plugin code made (net) in the calls handed to release_cycles since its last collection.
_plugin_made = [0]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Suspend Python's cyclic garbage collector while write transactions run (and while a writer that makes no
    reference cycles prepares a batch for one, such as the graph's detector batches).

    A bulk write allocates a few containers per document (records, pending
    rows, results) that live until the commit. Their number triggers
    collections that traverse every live object of the process (a server's
    caches, a caller's documents): about a fifth of a bulk's CPU. The write
    path makes no reference cycles, so reference counting frees all of it, and
    the collector runs again at the first allocation after the last write in
    flight ends (its allocation counts keep growing meanwhile). Plugin code run
    inside a pause (formats, detectors) may make cycles: its callers free them
    with :func:`release_cycles`.
    """
    with _pause_lock:
        if not _pauses[0]:
            _pauses[1] = gc.isenabled()
            gc.disable()
            _plugin_made[0] = 0  # what plugins made before is the collector's
        _pauses[0] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses[0] -= 1
            if not _pauses[0] and _pauses[1]:
                gc.enable()


# New container objects past which release_cycles collects: one collection walks them once, so what it costs
# follows the objects made, and below this a call costs a comparison.
RELEASE_AFTER_OBJECTS = 20_000


def young_count() -> int:
    """The collector's count of container objects made since its last collection: noted before plugin code runs
    and handed to :func:`release_cycles` after it, so that only what the plugin made is counted."""
    return gc.get_count()[0]


def release_cycles(min_new_objects: int = RELEASE_AFTER_OBJECTS, *, began: int | None = None) -> None:
    """Free the reference cycles made since the last collection, while the collector is paused.

    Collects the youngest generation once more than ``min_new_objects``
    container objects were made: since the last collection, or (``began``, the
    :func:`young_count` before a plugin call) in the plugin calls handed here
    since then. A run's own objects (cached parses, remembered detections, a
    corpus) make no cycles and live until the run ends: walking them, as a
    count of every object did, cost an edit of one note in 10,000 eight
    collections and 0.27 s, none of which found garbage. With the collector
    running (no pause) it does nothing, the collector's own thresholds doing the
    same. Call it where what plugin code made is garbage (after a parse or a
    detector's pass, between two records of one file), so the cycles are freed
    whole: an object still in use is moved to an older generation and no longer
    looked at while the pause lasts.
    """
    if gc.isenabled():
        return
    count = gc.get_count()[0]
    if began is None:
        made = count
    else:
        # a count below the one noted: a collection ran in the call (a format freeing its records' cycles)
        _plugin_made[0] += count - began if count >= began else count
        made = _plugin_made[0]
    if made > min_new_objects:
        _plugin_made[0] = 0
        gc.collect(0)


@attrs.frozen
class IndexInfo:
    name: str
    uuid: str
    created: int
    doc_count: int
    deleted_rows: int
    mapping: dict[str, Any]
    settings: dict[str, Any] = attrs.field(factory=dict)
    closed: bool = False


@attrs.frozen
class IndexStats:
    """Rows and bytes of one index: what ``_stats`` and ``_cat/indices`` report."""

    name: str
    live_rows: int
    dead_rows: int
    total_bytes: int
    dead_bytes: int
    segments: int


def _prefix_bytes(raw: Any, db: Any, prefix: bytes) -> int:
    total = 0
    with raw.cursor(db=db) as cur:
        if cur.set_range(prefix):
            for key, value in cur:
                if not key.startswith(prefix):
                    break
                total += len(key) + len(value)
    return total


@attrs.define
class BulkOp:
    """One bulk action: ``index``/``create`` (with ``doc``), ``update`` (partial ``doc``) or ``delete``.

    Not frozen: a bulk builds one op per document, and a frozen class's ``__init__`` cannot store its fields
    plainly (attrs' goes through ``object.__setattr__``; setting the slots' descriptors by hand, as this class
    did, took 0.46 us an op where this plain init takes 0.22). Nothing changes an op once built."""

    action: str
    index: str
    doc_id: str | None = None
    doc: Any = None


@attrs.frozen
class BulkItem:
    op: BulkOp
    result: WriteResult | None = None
    error: XerjError | None = None


_PUT_FIELDS = attrgetter("doc", "doc_id", "action")


_ACTION, _INDEX, _DOC, _DOC_ID = attrgetter("action"), attrgetter("index"), attrgetter("doc"), attrgetter("doc_id")


def _put_run_end(ops: Sequence[BulkOp], start: int) -> int:
    """The end of the run of index/create operations into the same index starting at ``start``."""
    index = ops[start].index
    # the common bulk (every op a put into one index), checked by two C-level passes; only from the bulk's start,
    # since a bulk of deletes or updates asks at every op, and a pass over the rest each time would be quadratic
    if start == 0 and set(map(_INDEX, ops)) == {index} and set(map(_ACTION, ops)) <= {"index", "create"}:
        return len(ops)
    end = start
    while end < len(ops) and ops[end].action in ("index", "create") and ops[end].index == ops[start].index:
        end += 1
    return end


class Store:
    """Documents in named indices on one LMDB environment.

    Every write goes through :meth:`transact` (one LMDB write transaction; a
    crash leaves all of it or none) and is visible to the very next
    :meth:`reader`, in this process or any other that opened the same directory.
    """

    def __init__(self, path: str | Path, *, tail_rows: int = DEFAULT_TAIL_ROWS, map_size: int | None = None,
                 sync: bool = True, env: Any = None, merge_above: int | None = MERGE_ABOVE) -> None:
        """``env``: another environment with LMDB's calls (a storage backend's, see ``xerj_postgres``); by
        default the LMDB environment of the data directory ``path``. ``merge_above``: a seal that would merge
        more sealed rows than this leaves the merge to a background thread (None: every merge in the write;
        always so on another backend's environment)."""
        self.path = Path(path)
        if env is None:
            options: dict[str, Any] = {"sync": sync}
            if map_size is not None:
                options["map_size"] = map_size
            env = envs.acquire(self.path, **options)
        self.env = env
        self.tail_rows = tail_rows
        self._caches: dict[int, IndexCache] = {}
        self._caches_lock = threading.Lock()
        self._sizes: dict[int, tuple[int, int, float]] = {}  # ix -> (generation, bytes, when computed)
        self.listeners: list[Callable[[str, list[str], list[str]], None]] = []
        # Called with the names of the indices a transaction dropped, after its commit.
        self.drop_listeners: list[Callable[[list[str]], None]] = []
        # (index number, dictionary) -> committed term ordinals; index numbers are never reused, and a
        # dictionary's ordinals never change, so this never goes stale (another process only appends).
        self._committed_terms: dict[tuple[int, str], dict[str, int]] = {}
        # (index number, dictionary, first, end ordinal) -> a committed dictionary run (xerj_core.store.dictruns)
        self._dict_runs: dict[tuple[int, str, int, int], Any] = {}
        # index number -> (generation, first tail row, blocks) of the tails this process committed last.
        self._tails: dict[int, tuple[int, int, list[Any]]] = {}
        # index number -> the postings of the small sealed segments this process committed (see WriteTxn).
        self._segment_runs: dict[int, Any] = {}
        self.merge_above = merge_above if isinstance(env, envs.Environment) else None
        self._merger = (Merger(self, MergeWorker(self.path, tail_rows, env.sync))
                        if self.merge_above is not None else None)
        self.migrate_scopes()

    def migrate_scopes(self) -> list[str]:
        """Give reserved indices written before row scopes existed their scope (one transaction); their names.

        Opening such an index for writing migrates it (``IndexWrite``); this does
        it for every one at start, so readers never meet an unmigrated index.
        """
        pending = []
        reserved = [name for name in self.index_names() if scope_of(name) is not None]
        if not reserved:
            return pending
        with self.read_txn() as raw:
            for name in reserved:
                reader = self.open_reader(raw, name)
                if SCOPE_FIELD not in reader.mapping.fields:
                    pending.append(name)
        if pending:
            def run(txn: WriteTxn) -> None:
                for name in pending:
                    txn.index(name)
            self.transact(run)
        return pending

    def close(self) -> None:
        if self._merger is not None:
            self._merger.close()
        envs.release(self.env)

    def wait_merges(self) -> None:
        """Return once the background merges asked for so far are done (see :mod:`xerj_core.store.merge`)."""
        if self._merger is not None:
            self._merger.wait()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------

    def transact(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn(txn)`` in one committed write transaction and return its result.

        ``fn`` may run more than once (when the map grows), so it must act only
        through ``txn``. Listeners hear of the written ids after the commit.
        """
        holder: list[WriteTxn] = []

        def run(raw) -> T:
            txn = WriteTxn(raw, self.env.dbs, self.tail_rows, self._committed_terms, self._tails, self.merge_above,
                           self._dict_runs, self._segment_runs)
            holder[:] = [txn]
            result = fn(txn)
            txn.finish()
            return result

        with collector_paused():
            result = self.env.write(run)
        holder[0].remember_terms(self._committed_terms, TERM_CACHE_LIMIT)
        holder[0].remember_tails(self._tails, TAIL_CACHE_INDICES)
        holder[0].remember_segment_runs(self._segment_runs, SEGMENT_RUNS_BYTES)
        wanted = holder[0].merges_wanted()
        if wanted and self._merger is not None:
            self._merger.want(wanted)
        written, dropped = holder[0].written(), list(holder[0].dropped)
        holder[0].release()
        for index, put_ids, deleted in written:
            for listener in self.listeners:
                listener(index, put_ids, deleted)
        if dropped:
            for drop_listener in self.drop_listeners:
                drop_listener(dropped)
        return result

    def create_index(self, name: str, mapping: Any = None, settings: dict[str, Any] | None = None,
                     aliases: dict[str, dict[str, Any]] | None = None) -> None:
        """Create an index, and the ``aliases`` (name → properties) on it, in one transaction."""

        def run(txn: WriteTxn) -> None:
            txn.create_index(name, mapping, settings)
            if aliases:
                known = index_meta.read_aliases(txn.raw, txn.dbs)
                for alias, props in aliases.items():
                    index_meta.validate_alias_name(alias, txn.exists)
                    index_meta.add_alias(known, alias, name, props)
                index_meta.write_aliases(txn.raw, txn.dbs, known)

        self.transact(run)

    def delete_index(self, name: str) -> None:
        self.transact(lambda txn: txn.delete_index(name))

    def put_mapping(self, name: str, body: Any) -> None:
        self.transact(lambda txn: txn.put_mapping(name, body))

    def put(self, index: str, doc: Any, doc_id: str | None = None, *, op_type: str = "index",
            auto_create: bool = True) -> WriteResult:
        return self.transact(lambda txn: txn.put(index, doc, doc_id, op_type=op_type, auto_create=auto_create))

    def delete(self, index: str, doc_id: str) -> WriteResult:
        return self.transact(lambda txn: txn.delete(index, doc_id))

    def update(self, index: str, doc_id: str, partial: Any, *, upsert: Any = None) -> WriteResult:
        return self.transact(lambda txn: txn.update(index, doc_id, partial, upsert=upsert))

    def forcemerge(self, index: str) -> bool:
        """Compact ``index`` now (dead rows dropped, rows renumbered); False when it had no dead row."""

        def run(txn: WriteTxn) -> IndexWrite:
            txn.forcemerge(index)
            return txn.index(index)

        return self.transact(run).compacted

    def bulk(self, ops: Sequence[BulkOp], *, auto_create: bool = True) -> Sequence[BulkItem]:
        """Apply ``ops`` in one transaction; a refused item is reported and the others still apply. The items
        come in the order of ``ops``; those of a run of puts are :class:`~.records.Columns`, made when read."""

        def run(txn: WriteTxn) -> Sequence[BulkItem]:
            runs: list[Sequence[BulkItem]] = []
            items: list[BulkItem] = []  # the items of single operations since the last run of puts
            at, single_until = 0, 0
            while at < len(ops):
                target = None
                if at >= single_until:
                    run_end = _put_run_end(ops, at)
                    if run_end - at > 1 and txn.exists(ops[at].index):
                        try:
                            target = txn.index(ops[at].index)
                        except XerjError:  # a closed index: each item reports it below
                            single_until = run_end
                if target is not None:
                    # Consecutive puts into one existing index: their records are prepared together.
                    batch = ops[at:run_end]
                    results = target.put_new(list(map(_DOC, batch)), list(map(_DOC_ID, batch)))
                    if results is None:  # not the bulk-ingest case (every op a new document, no refusal)
                        results = target.put_many(list(map(_PUT_FIELDS, batch)), batch_tried=True)
                    if first_refusal(results) is not None:
                        items.extend(BulkItem(o, error=r) if isinstance(r, XerjError) else BulkItem(o, result=r)
                                     for o, r in zip(batch, results))
                    else:
                        if items:
                            runs.append(items)
                            items = []
                        runs.append(Columns(BulkItem, len(batch), batch, results))
                    at = run_end
                    continue
                op = ops[at]
                at += 1
                try:
                    if op.action in ("index", "create"):
                        result = txn.put(op.index, op.doc, op.doc_id, op_type=op.action, auto_create=auto_create)
                    elif op.action == "delete":
                        result = txn.delete(op.index, op.doc_id or "")
                    elif op.action == "update":
                        doc = op.doc or {}
                        result = txn.update(op.index, op.doc_id or "", doc.get("doc"), upsert=doc.get("upsert"))
                    else:
                        raise XerjError(f"unknown bulk action [{op.action}]")
                    items.append(BulkItem(op, result=result))
                except XerjError as exc:
                    items.append(BulkItem(op, error=exc))
            if not runs:
                return items
            if items:
                runs.append(items)
            return runs[0] if len(runs) == 1 else Chained(runs)

        return self.transact(run)

    # -- reading -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def read_txn(self) -> Iterator[Any]:
        raw = self.env.begin_read()
        try:
            yield raw
        finally:
            raw.abort()

    def read(self, fn: Callable[[Any], T]) -> T:
        """``fn(raw)`` in one read snapshot; ``fn`` must only read, and may run twice.

        A backend whose reads are round trips (``xerj_postgres``) may start ``fn``
        before the snapshot is open, on what the process already holds, and
        open it with ``fn``'s first statement; when that guess was wrong ``fn``
        runs again. LMDB runs it once.
        """
        run = getattr(self.env, "read", None)
        if run is not None:
            return run(fn)
        raw = self.env.begin_read()  # read_txn without its generator: this is every ego's and search's way in
        try:
            return fn(raw)
        finally:
            raw.abort()

    @contextlib.contextmanager
    def reader(self, index: str) -> Iterator[IndexReader]:
        """A snapshot reader of ``index``; raises IndexNotFound when it does not exist."""
        with self.read_txn() as raw:
            yield self.open_reader(raw, index)

    def open_reader(self, raw: Any, index: str, *, allow_closed: bool = False) -> IndexReader:
        """A reader of ``index`` inside an already open read transaction (for multi-index reads).

        An alias of exactly one index reads that index (a single-index read through an
        alias of several is refused); a closed index raises IndexClosed unless ``allow_closed``.
        """
        dbs = self.env.dbs
        blob = raw.get(index.encode(), db=dbs["indices"]) if index else None
        if blob is None and index:
            aliases = index_meta.read_aliases(raw, dbs)
            if index in aliases:
                index = index_meta.single_index(aliases, index)
                blob = raw.get(index.encode(), db=dbs["indices"])
        if blob is None:
            raise IndexNotFound(index)
        meta = orjson.loads(blob)
        if meta.get("closed") and not allow_closed:
            raise IndexClosed(index, meta["uuid"])
        ix = meta["ix"]
        state = keys.IndexState.unpack(raw.get(keys.ix_key(ix), db=dbs["state"]))
        with self._caches_lock:
            cache = self._caches.get(ix)
            if cache is None:
                cache = self._caches[ix] = IndexCache(ix)
        # the tail's blocks as this process's last write built them, when that write made this generation
        known = self._tails.get(ix)
        known_tail = known[2] if known is not None and known[:2] == (state.generation, state.sealed_rows) else None
        reader = IndexReader(index, meta, raw, dbs, state, cache,
                             begin_mapped=lambda: self.env.begin_read(buffers=True), known_tail=known_tail)
        if known_tail is None:
            self._remember_tail(ix, state, reader.snapshot)
        return reader

    def _remember_tail(self, ix: int, state: keys.IndexState, snapshot: Snapshot) -> None:
        """Keep the blocks of a snapshot holding every tail row of ``state``, as a write of this process keeps the
        tail it leaves: the next write here then knows the tail it adds to (a seal need not read it back), and
        remembers it with its own block for the reads after it. Without this, a process that opened a data
        directory with rows in its tail read back and decoded every block its own writes had just built."""
        tail = snapshot.tail
        if (snapshot.generation != state.generation or tail.start != state.sealed_rows
                or tail.start + tail.rows != state.next_row):
            return
        known = self._tails.get(ix)
        if known is not None and known[0] >= state.generation:
            return  # a write remembered this generation or a newer one
        if known is None and len(self._tails) >= TAIL_CACHE_INDICES:
            return
        self._tails[ix] = (state.generation, state.sealed_rows, list(tail.blocks))

    def exists(self, index: str) -> bool:
        if not index:
            return False
        with self.read_txn() as raw:
            return raw.get(index.encode(), db=self.env.dbs["indices"]) is not None

    def index_names(self) -> list[str]:
        with self.read_txn() as raw:
            with raw.cursor(db=self.env.dbs["indices"]) as cur:
                return [k.decode() for k in cur.iternext(values=False) if not k.startswith(b"\x00")]

    def index_uuids(self) -> set[str]:
        """The uuid of every index (closed ones included) in a snapshot begun now."""
        with self.read_txn() as raw:
            with raw.cursor(db=self.env.dbs["indices"]) as cur:
                return {orjson.loads(blob)["uuid"] for key, blob in cur if not key.startswith(b"\x00")}

    def index_info(self, index: str) -> IndexInfo:
        """What an index is (closed ones included): counts, mapping, settings as given, open or closed."""
        with self.read_txn() as raw:
            r = self.open_reader(raw, index, allow_closed=True)
            return IndexInfo(r.name, r.meta["uuid"], r.meta["created"], r.doc_count, r.n_rows - r.doc_count,
                             public_mapping(r.mapping.to_es()), r.meta.get("settings") or {},
                             bool(r.meta.get("closed")))

    # A size is rescanned at most this often per index and process while writes keep coming, so a
    # monitor polling _cat/indices does not rescan a busy index on every call (ES's store stats lag too).
    SIZE_REFRESH_SECONDS = 30.0

    def index_size(self, index: str) -> int:
        """Bytes the index's records take in LMDB (keys and values; page overhead not counted).

        Exact for the generation it was computed at; a newer generation reuses it for up to
        :attr:`SIZE_REFRESH_SECONDS` before the index is scanned again.
        """
        with self.read_txn() as raw:
            reader = self.open_reader(raw, index, allow_closed=True)
            found = self._sizes.get(reader.ix)
            now = time.monotonic()
            if found is not None and (found[0] == reader.generation or now - found[2] < self.SIZE_REFRESH_SECONDS):
                return found[1]
            prefix = keys.ix_key(reader.ix)
            size = 0
            for name in ("src", "ids", "tail", "segs", "cols", "post", "dead", "dict", "dictr", "dictn"):
                with raw.cursor(db=self.env.dbs[name]) as cur:
                    if not cur.set_range(prefix):
                        continue
                    for k, v in cur:
                        if not k.startswith(prefix):
                            break
                        size += len(k) + len(v)
            self._sizes[reader.ix] = (reader.generation, size, now)
            return size

    # -- metadata: aliases, settings, open/closed (see xerj_core.store.meta) --------------------

    def catalog(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, dict[str, Any]]]]:
        """``(index records by name, aliases)`` read in one snapshot, for index-expression resolution."""
        with self.read_txn() as raw:
            records = {}
            with raw.cursor(db=self.env.dbs["indices"]) as cur:
                for key, value in cur:
                    if not key.startswith(b"\x00"):
                        records[key.decode()] = orjson.loads(value)
            return records, index_meta.read_aliases(raw, self.env.dbs)

    def aliases(self) -> dict[str, dict[str, dict[str, Any]]]:
        with self.read_txn() as raw:
            return index_meta.read_aliases(raw, self.env.dbs)

    def update_aliases(self, actions: Sequence[tuple[str, str, str, dict[str, Any]]]) -> None:
        """Apply ``(action, alias, index, properties)`` actions (``add``, ``remove``, ``remove_index``)
        in one transaction: every one of them or none."""

        def run(txn: WriteTxn) -> None:
            raw, dbs = txn.raw, txn.dbs
            aliases = index_meta.read_aliases(raw, dbs)
            for action, alias, index, props in actions:
                if action == "remove_index":
                    txn.delete_index(index)
                    index_meta.drop_index(aliases, index)  # the record is written once, below
                    continue
                txn.index_record(index)  # the index must exist
                if action == "add":
                    index_meta.validate_alias_name(alias, txn.exists)
                    index_meta.add_alias(aliases, alias, index, props)
                else:
                    index_meta.remove_alias(aliases, alias, index, must_exist=props.get("must_exist", True))
            index_meta.write_aliases(raw, dbs, aliases)

        self.transact(run)

    def set_closed(self, names: Sequence[str], closed: bool) -> None:
        def run(txn: WriteTxn) -> None:
            for name in names:
                txn.update_index_record(name, closed=closed)

        self.transact(run)

    def update_settings(self, name: str, updates: dict[str, Any]) -> None:
        """Merge flat ``index.*`` settings into the index's record (validated by the caller)."""

        def run(txn: WriteTxn) -> None:
            record = txn.index_record(name)
            merged = {**index_meta.flatten_settings(record.get("settings") or {}), **updates}
            txn.update_index_record(name, settings={k: v for k, v in merged.items() if v is not None})

        self.transact(run)

    def index_stats(self, index: str) -> IndexStats:
        """Live and dead rows of ``index`` and the bytes it holds, read in one snapshot.

        Bytes are every key and value the index owns; the dead share is what its
        dead rows take of the row-proportional structures (columns, postings, the
        dead log), which a compaction gives back. Sources of dead rows are
        already gone when they die. This scans the index's entries once.
        """
        with self.read_txn() as raw:
            reader = self.open_reader(raw, index)
            prefix = keys.ix_key(reader.ix)
            sizes = {name: _prefix_bytes(raw, self.env.dbs[name], prefix)
                     for name in ("src", "ids", "tail", "segs", "cols", "post", "dead", "dict", "dictr")}
            rows, live = reader.n_rows, reader.doc_count
            dead = rows - live
            by_row = sizes["cols"] + sizes["post"] + sizes["segs"]
            dead_bytes = sizes["dead"] + (by_row * dead // rows if rows else 0)
            return IndexStats(index, live, dead, sum(sizes.values()), dead_bytes, len(reader.segments))

    def get_mapping(self, index: str) -> dict[str, Any]:
        with self.reader(index) as r:
            return public_mapping(r.mapping.to_es())

    def get(self, index: str, doc_id: str) -> tuple[dict[str, Any], int] | None:
        """``(_source, _version)`` or None; raises IndexNotFound for a missing index."""
        with self.reader(index) as r:
            return r.get(doc_id)

    def node_uuid(self) -> str:
        """The data directory's identity: a uuid written into it the first time it is asked for, then kept."""
        key = b"\x00node-uuid"
        with self.read_txn() as raw:
            found = raw.get(key, db=self.env.dbs["aux"])
        if found is None:
            import uuid

            fresh = str(uuid.uuid4()).encode()

            def put(txn: WriteTxn) -> bytes:
                stored = txn.raw.get(key, db=txn.dbs["aux"])
                if stored is None:
                    txn.raw.put(key, fresh, db=txn.dbs["aux"])
                return stored or fresh

            found = self.transact(put)
        return bytes(found).decode()

    def skipped_counts(self, index: str) -> dict[str, int]:
        """What ``index`` left unindexed for its length (see ``store.limits``): ``terms`` and ``keywords``."""
        with self.reader(index) as r:
            stored = r.txn.get(keys.skipped_key(r.ix), db=self.env.dbs["aux"])
        counts = orjson.loads(stored) if stored else {}
        return {"terms": int(counts.get("terms", 0)), "keywords": int(counts.get("keywords", 0))}

    def count(self, index: str) -> int:
        with self.reader(index) as r:
            return r.doc_count

    # -- search contexts (scroll, point in time; see xerj_core.store.pins) ---------------------

    def open_context(self, context_id: str, indices: Sequence[str], record: dict[str, Any]) -> dict[str, Any]:
        """Record a context pinning the current generation of ``indices``; returns the record with its pins."""

        def run(raw) -> dict[str, Any]:
            out = {**record, "pins": [pins.pin(raw, self.env.dbs, name, record["expires"]) for name in indices]}
            pins.put_context(raw, self.env.dbs, context_id, out)
            return out

        return self.env.write(run)

    def context(self, context_id: str) -> dict[str, Any] | None:
        with self.read_txn() as raw:
            return pins.get_context(raw, self.env.dbs, context_id)

    def save_context(self, context_id: str, record: dict[str, Any]) -> bool:
        """Replace a context's record (its pins unchanged); False when it was closed meanwhile."""

        def run(raw) -> bool:
            if pins.get_context(raw, self.env.dbs, context_id) is None:
                return False
            pins.put_context(raw, self.env.dbs, context_id, record)
            return True

        return self.env.write(run)

    def close_contexts(self, context_ids: Sequence[str]) -> int:
        """Close contexts and release their pins; returns how many existed."""
        return self.env.write(lambda raw: sum(pins.delete_context(raw, self.env.dbs, c) for c in context_ids))

    def contexts(self) -> list[tuple[str, dict[str, Any]]]:
        with self.read_txn() as raw:
            return list(pins.contexts(raw, self.env.dbs))

    def open_pinned_reader(self, raw: Any, pin: dict[str, Any]) -> IndexReader:
        """A reader of a pinned index as it was when pinned; IndexNotFound when it was deleted since."""
        reader = self.open_reader(raw, pin["index"])
        if reader.ix != pin["ix"] or reader.meta["uuid"] != pin["uuid"]:
            raise IndexNotFound(pin["index"])
        return PinnedReader(reader, pin["n_rows"], pin["dead_seq"])
