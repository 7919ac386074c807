"""One autoindex run: walk a folder, skip what is unchanged, parse, write documents, detect edges, reconcile."""

from __future__ import annotations

import contextlib
import gc
import os
import time
import uuid
import weakref
from collections import Counter, deque
from concurrent.futures import BrokenExecutor, Executor, Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import attrs
import numpy as np

from xerj_core.autoindex import mapped
from xerj_core.autoindex.continuations import Continuations
from xerj_core.autoindex.detect import Corpus, DetectorState, collect_detectors, combine
from xerj_core.autoindex.formats import NO_FORMAT, SNIFF_BYTES, collect_formats, format_identities
from xerj_core.autoindex.kept import Spill, open_spill
from xerj_core.autoindex.parallel import (
    InlineExecutor,
    Kept,
    ParseOutcome,
    Plugins,
    batch_failure,
    adopt_kept,
    combine_kept,
    corpus_of,
    detect_batch,
    detect_kept,
    main_left_behind,
    may_fork,
    open_pool,
    parse_and_keep,
    parse_batch,
    rebuilds_alike,
    share,
    unpack_drafts,
    unpack_outcomes,
    watch_batch,
    with_entries,
)
from xerj_core.autoindex.parsecache import ParseCache, open_cache
from xerj_core.autoindex.published import published_at
from xerj_core.autoindex.sink import (
    COUNTED_FIELD,
    EDGES_PER_TRANSACTION,
    BrainSink,
    BrainState,
    Declined,
    FileStamp,
    FileState,
    FileWrite,
    IndexedDocument,
    LiveClaim,
    LocalSink,
    RunFinish,
    RunState,
    UNFINISHED,
    dataset_index,
    doc_ref,
    split_ref,
)
from xerj_core.autoindex.walk import IGNORED, MAX_FILE_BYTES, UNREADABLE, VANISHED, FileEntry, Skipped, walk
from xerj_core.autoindex.wanted import WantedIds
from xerj_core.errors import BatchFailed, DocumentRefused, IllegalArgument, PluginError
from xerj_core.graph.brain import MAX_NODE_ID_BYTES, MAX_TYPE_BYTES, node_id_problem, validate_brain_name
from xerj_core.graph.draftcolumns import DraftColumns
from xerj_core.graph.idkeys import IdSet, ids_of_keys, is_derived, keys_of, keys_of_numbers
from xerj_core.model import EdgeDraft
from xerj_core.plugins import get_plugin_manager
from xerj_core.store.residency import trim_heap
from xerj_core.store.store import collector_paused
from xerj_core.text import CountedTerms, derive_brain_name

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

# Files per write transaction: an interrupted run loses at most this batch (see SHARE_BYTES). Each transaction
# seals (and may merge) its indices, so fewer, larger ones cost the writer less: on 20,000 notes 1,024 files cost
# 6.7-7.3 s of writer CPU against 6.7-8.5 s at 256, and the run's peak RSS stays in its edge writes (docs 235 MB).
BATCH_FILES = 1024
# The first transactions are smaller (doubling up to BATCH_FILES), so the writer starts after a few parsed files.
FIRST_BATCH_FILES = 128
# ... and a transaction takes files up to this many bytes (at least one file), so large files (real code: 5,000
# files of site-packages peaked at 412 MB in 1,024-file transactions) hold no more text at once than notes do.
BATCH_BYTES = 4 << 20
# A file whose documents hold more text than this, or more documents than SHARE_DOCS (a mailbox of thousands of
# messages), is written in shares of about that much, a transaction each, so it holds no more in the writer than
# a batch of notes does: a 70 MB mailbox of 56,161 messages written in one transaction peaked at 818 MB. Every
# share adds its documents to those the file's state records (its previous version's and the shares' before),
# and all but the last record the file as UNFINISHED (sink.py): a run stopped between them reads it again and
# loses track of none.
SHARE_BYTES = BATCH_BYTES
SHARE_DOCS = 4_096
# With a companion, the most bytes of files this process parses in a run instead of waiting for the companion
# (see _take_back_while_waiting) ...
TAKE_BACK_BYTES = 64 << 20
# ... of which the run's last batches, taken first: their documents are held until the writer reaches them at the
# run's end (on a loaded machine, 5,000 files of real code held 100 MB more in the writer without a bound), and
# the companion combines while the writer writes them ...
TAKE_TAIL_BYTES = 16 << 20
# ... then the batches next in line, at most this many bytes of files parsed ahead of the batch the writer writes.
TAKE_AHEAD_BYTES = 4 << 20
# Files per executor task: small enough to spread over the workers and to stop soon on Ctrl-C.
PARSE_BATCH_FILES = 64
DETECT_BATCH_FILES = 512
# Below this many files to parse or detect, a process pool costs more than it saves.
POOL_MIN_FILES = 200
# Below this many, a companion is forked where that is safe (see parallel.may_fork): its 0.4 s of imports are a
# sixth of a 2,000-note run and on its critical path. Larger runs keep the spawned companion their rate and peak
# RSS were measured with: there the imports are a few percent of the run and overlap the writer's own parsing,
# and a forked child's pages shared with the writer would count twice in the run's summed RSS.
FORK_BELOW_FILES = 5_000
# A run pauses the cyclic garbage collector in this process while it lasts (``store.collector_paused``), as its
# pool's tasks do in theirs: its own allocations (parse batches unpacked, take-back parses, documents and drafts)
# make no reference cycles, and with the collector on they set off collections that walked what the run holds
# (11% of the writing process's CPU on 5,000 files of real code). It runs again when the run ends.
RUN_WITHOUT_COLLECTOR = True
# Detect batches a pool holds at once (per worker): enough to keep every worker busy, few enough that the
# drafts and the texts of the batches in flight stay a bounded share of the corpus.
DETECT_WINDOW_PER_WORKER = 2
# A companion's detect batches whose packed results the writer may hold at once (0.3-0.45 MB a batch of 512 notes): it
# detects this far ahead, so on most runs it is done, and gone, while the writer still writes edges. 64 covers 32k
# files: on 20k notes (40 batches) a window of 32 kept the companion (about 190 MB) waiting for the writer to take
# 8 batches, alive through the first edge transactions and their merges, for some 20 MB of results held instead.
DETECT_AHEAD_BATCHES = 64


@attrs.define
class RunSummary:
    """What a run did, as the closing summary (and ``--json``) reports it.

    Every file the walk saw lands in exactly one of ``files_indexed``,
    ``files_unchanged``, ``files_skipped`` (passed by, with a ``kind`` of reason)
    and ``files_failed`` (should have been read and could not be), so
    ``files_seen`` is their sum; ``files_removed`` counts files gone since last run.
    """

    root: str
    brain: str
    graph: bool
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: list[dict[str, str]] = attrs.field(factory=list)
    files_failed: list[dict[str, str]] = attrs.field(factory=list)
    documents: int = 0
    # documents of changed files the store held as they are now (their mtime aside): not written again
    documents_kept: int = 0
    edges_by_type: dict[str, int] = attrs.field(factory=dict)
    edges_capped: int = 0
    # drafts naming a node id or type too long for the edges index's keys (see graph.edges), left out
    edges_too_long: int = 0
    edges_invalidated: int = 0
    # claims a changed file teaches again as they were (same evidence): their edges kept, not retired and re-taught
    edges_continued: int = 0
    claims_suppressed: int = 0
    datasets: list[str] = attrs.field(factory=list)
    elapsed_s: float = 0.0
    # the formats differ from the last run's (a format installed, removed or of a new version): every file was
    # read again
    formats_changed: bool = False

    @property
    def edges_written(self) -> int:
        return sum(self.edges_by_type.values())

    @property
    def skipped_by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for item in self.files_skipped:
            counts[item["kind"]] = counts.get(item["kind"], 0) + 1
        return dict(sorted(counts.items()))

    def skip(self, path: str, kind: str, reason: str) -> None:
        self.files_skipped.append({"path": path, "kind": kind, "reason": reason})

    def fail(self, path: str, reason: str) -> None:
        self.files_failed.append({"path": path, "reason": reason})

    def to_json(self) -> dict[str, Any]:
        body = attrs.asdict(self)
        body["edges_written"] = self.edges_written
        body["skipped_by_kind"] = self.skipped_by_kind
        return body


NO_FORMAT_REASON = "no format reads this file"
NOT_READ = Declined(NO_FORMAT, NO_FORMAT_REASON)


@attrs.frozen
class _Parsed:
    entry: FileEntry
    docs: tuple[tuple[str, str, dict[str, Any]], ...]  # (dataset, id, source): ParseOutcome.for_writer
    digest: str
    counted: tuple[CountedTerms | None, ...] | None = None  # ParseOutcome.counted
    skipped: Declined | None = None  # ParseOutcome.declined


# ``progress(event, count)``: "total" once (the files the walk saw), then "files" as they are accounted for,
# "documents" as they are written and "edges" once they are.
Progress = Callable[[str, int], None]


def _noop(_event: str, _count: int) -> None:
    pass


def run(target: Engine | BrainSink, folder: str | Path, *, brain: str | None = None, graph: bool = True,
        progress: Progress = _noop, clock: Callable[[], int] | None = None, pm: Any = None,
        executor: Executor | None = None, workers: int | None = None, ignore_files: bool = True,
        warm: bool = False, max_file_bytes: int = MAX_FILE_BYTES) -> RunSummary:
    """Index ``folder`` into ``target`` and, with ``graph``, detect and reconcile the brain's edges.

    ``target`` is an engine (the run writes its store through a :class:`LocalSink`)
    or any :class:`BrainSink`, such as a RemoteSink talking to a running server.
    Formats and detectors come from ``pm`` (default: the engine's, else the
    installed plugins): parsing and detection always run on this side, only
    storage is behind the sink. Unchanged files (same mtime and size as last
    run, or the same bytes under a new mtime) are not parsed again unless
    detection needs their documents. A file that cannot be read or parsed is
    reported in the summary and whatever was indexed for it before stays.
    Documents are written a batch of whole files per transaction, so an
    interrupted run leaves every file as it was or as it is now, but for a file
    too big for one (see :data:`SHARE_BYTES`), which it may leave recorded as
    unfinished for the next run to read again. With
    ``ignore_files``, what the folder's ``.gitignore`` and ``.xerjignore`` files
    leave out is skipped as ``ignored``, and removed if an earlier run indexed it.
    A file larger than ``max_file_bytes`` is skipped as ``too_large``.

    Per-file work (reading and parsing, each detector's map steps) runs in
    batches of files through ``executor``; writing stays in this process, and
    detection overlaps the writes when both are needed. Without ``executor``
    the run starts a spawned process pool of ``workers`` processes (default:
    :func:`default_workers`) when it has at least :data:`POOL_MIN_FILES` files to parse
    or detect, and shuts it down on every way out (Ctrl-C included); on two or
    three cores with neither ``executor`` nor ``workers`` given, that pool is a
    companion (:func:`companion_default`): one process that parses, keeps the
    corpus, combines and detects while this one writes. Smaller
    runs, ``workers=1``, and runs whose plugin manager has plugins registered
    by hand (a test fixture's ``pm``: those exist in this process only, a
    worker's ``get_plugin_manager()`` would not see them) run in this process.
    An ``executor`` passed in is used as given and left running; its workers
    load the installed plugins themselves and refuse a run whose formats or
    detectors they do not have. Results do not depend on the executor.

    With ``warm``, a run that finds nothing changed still parses and detects
    every file when the parse cache or the remembered detections miss some of a
    sample of them (:func:`_cache_is_cold`), so that the next run that detects
    reads them back: ``--watch`` asks it of its first poll, so the first save
    it sees costs what later ones do. The brain comes out as it was.
    """
    started = time.perf_counter()
    # what exists now (modules, functions, the engine) outlives the run: kept out of the cyclic collector's
    # full collections while the run's allocations set them off (7 on 10k notes), and given back after it; a
    # process that froze objects of its own (a server before it forks, another run) is left as it is
    freezing = gc.get_freeze_count() == 0
    if freezing:
        gc.freeze()
    try:
        # and no cyclic collection while it runs (see RUN_WITHOUT_COLLECTOR)
        with collector_paused() if RUN_WITHOUT_COLLECTOR else contextlib.nullcontext():
            return _run(target, folder, brain=brain, graph=graph, progress=progress, clock=clock, pm=pm,
                        executor=executor, workers=workers, ignore_files=ignore_files, started=started, warm=warm,
                        max_file_bytes=max_file_bytes)
    finally:
        if freezing:
            gc.unfreeze()


def _run(target: Engine | BrainSink, folder: str | Path, *, brain: str | None, graph: bool, progress: Progress,
         clock: Callable[[], int] | None, pm: Any, executor: Executor | None, workers: int | None,
         ignore_files: bool, started: float, warm: bool = False, max_file_bytes: int = MAX_FILE_BYTES
         ) -> RunSummary:
    now_ms = (clock or (lambda: int(time.time() * 1000)))()
    sink = target if isinstance(target, BrainSink) else LocalSink.of_engine(target)
    if pm is None:
        pm = getattr(target, "pm", None) or get_plugin_manager()
    root = Path(folder)
    if not root.is_dir():
        raise IllegalArgument(f"folder [{folder}] does not exist or is not a directory")
    brain_name = brain if brain is not None else derive_brain_name(root.resolve())
    validate_brain_name(brain_name)
    summary = RunSummary(root=str(root.resolve()), brain=brain_name, graph=graph)
    formats = collect_formats(pm)
    state = sink.load(brain_name)
    _check_root(state, brain_name, summary.root)
    prior = state.files

    entries: list[FileEntry] = []
    passed: list[str] = []
    # a file over the size limit is read all the same when its format reads it mapped (a mailbox: see mapped)
    for item in walk(root, ignore_files=ignore_files, max_file_bytes=max_file_bytes,
                     unlimited=lambda rel_path, path: mapped.reads_mapped(formats, rel_path, path, SNIFF_BYTES)):
        if isinstance(item, Skipped):
            if item.kind != IGNORED:  # an ignored file indexed before is removed; any other skip keeps what it had
                passed.append(item.rel_path)
            if item.kind == UNREADABLE:
                summary.fail(item.rel_path, item.reason)
            else:
                summary.skip(item.rel_path, item.kind, item.reason)
        else:
            entries.append(item)
    # a file that fails to parse now was walked, so only what the walk passed by can hide a removal
    seen_paths = {e.rel_path for e in entries} | set(passed)
    removed = sorted(path for path in prior if path not in seen_paths)
    summary.files_removed = len(removed)

    to_parse: list[FileEntry] = []
    unchanged: list[FileEntry] = []
    restamped: list[FileWrite] = []
    readers = format_identities(formats)
    # (a brain whose last run kept no formats, one written before they were kept, is taken to have had these)
    summary.formats_changed = state.run is not None and state.run.formats is not None \
        and state.run.formats != readers
    for entry in entries:
        known = None if summary.formats_changed else prior.get(entry.rel_path)
        if known is not None and known.size == entry.size and (
                known.mtime_ns == entry.mtime_ns or _same_bytes(entry, known.hash)):
            if known.mtime_ns != entry.mtime_ns:
                # touched, copied or checked out again over the same bytes: what it yields and teaches stands as
                # it is, true since the bytes were written, and the new stamp spares the next run this read (the
                # state keeps the documents it records: a mailbox's refs are not sent back to where they are)
                restamped.append(FileWrite(entry.rel_path, FileStamp(entry.mtime_ns, entry.size, known.hash),
                                           skipped=known.skipped, continues=True))
            if known.docs:
                unchanged.append(attrs.evolve(entry, digest=known.hash))
            else:  # remembered so it is not read again, and still accounted for, under the same kind
                summary.skip(entry.rel_path, *attrs.astuple(known.skipped or NOT_READ))
        else:
            to_parse.append(entry)
    for batch in _chunks(restamped, BATCH_FILES):
        sink.write_files(brain_name, batch, now_ms)
    progress("total", len(entries) + len(passed))
    progress("files", len(passed) + len(entries) - len(to_parse))

    detectors = collect_detectors(pm) if graph else {}
    tags = sorted(d.tag for d in detectors.values())
    run_dirty = _run_is_dirty(state.run, tags)
    # Whether edges get redone is known once every changed file is parsed (one may fail);
    # when they may be, unchanged files are parsed for the corpus alongside.
    may_detect = graph and bool(to_parse or removed or run_dirty or not state.edges_index)
    plugins = Plugins(formats, tuple(detectors.values()))
    cache_dir = sink.cache_dir()
    # a folder's first run parses each file once: keeping its parses would only slow it (see parsecache)
    cache = open_cache(cache_dir, summary.root, plugins, keep=bool(prior)) if cache_dir is not None else None
    if cache is not None and removed:
        cache.forget(removed)
    # nothing to detect, but asked to warm a cache that misses files: every file is parsed and detected for it
    cold = warm and graph and not may_detect and cache is not None and cache.keep and _cache_is_cold(cache, unchanged)
    may_detect = may_detect or cold
    runner = _Runner(executor, workers, plugins, graph, cache)
    runner.published = published_at(root) if may_detect else ()
    try:
        forced = bool(removed) or run_dirty or not state.edges_index or cold
        runner.expect(len(to_parse) + (len(unchanged) if may_detect and forced else 0))
        # each batch's future (and its documents, once parsed) is let go as the writer takes it
        changed_parses = [runner.parse(batch, may_detect) for batch in _chunks(to_parse, PARSE_BATCH_FILES)]
        # a companion takes a few tenths of a second to start: meanwhile this process parses what it has not begun
        runner.taking_back = runner.companion and bool(changed_parses)
        detection = _Detection(runner, changed_parses, unchanged, forced=forced) if may_detect else None
        changed = _write_documents(sink, brain_name, state.root_id, runner, changed_parses, removed, prior,
                                   now_ms, summary, progress, detection)
        datasets = _datasets_after(prior, changed, removed)
        summary.datasets = datasets
        dirty = bool(changed or removed or restamped) or run_dirty or state.root != summary.root \
            or summary.formats_changed
        if detection is not None and detection.needed:
            detection.start()
            for failure in detection.unchanged_failures():
                if failure["gone"]:
                    summary.skip(failure["path"], VANISHED, failure["reason"])
                else:
                    summary.fail(failure["path"], failure["reason"])
            _detect_and_reconcile(sink, detection, brain_name, datasets, now_ms, summary, progress,
                                  _retagged(state.run, tags), cache)
    finally:
        runner.close()
    if dirty:
        sink.finish(brain_name, RunFinish(root=summary.root, datasets=tuple(datasets), detectors=tuple(tags),
                                          finished_at=now_ms, root_id=state.root_id, formats=readers))
    failed = {f["path"] for f in summary.files_failed} | {f["path"] for f in summary.files_skipped
                                                            if f["kind"] == VANISHED}
    summary.files_indexed = sum(1 for indices in changed.values() if indices)
    summary.files_unchanged = sum(1 for e in unchanged if e.rel_path not in failed)
    summary.files_seen = len(entries) + len(passed)
    summary.elapsed_s = round(time.perf_counter() - started, 3)
    return summary


# How many unchanged files a warm run looks up to tell whether the cache holds the folder.
WARM_PROBE_FILES = 16


def _cache_is_cold(cache: ParseCache, unchanged: Sequence[FileEntry]) -> bool:
    """Whether ``cache`` misses the parse (with these detectors' partials) or the remembered detection of any of
    up to :data:`WARM_PROBE_FILES` of ``unchanged``, spread over them: a folder indexed once and never edited, or
    cached under other code."""
    sample = list(unchanged[::max(1, len(unchanged) // WARM_PROBE_FILES)][:WARM_PROBE_FILES])
    if not sample:
        return False
    parsed = cache.lookup(sample, True)
    detected = cache.recall_detections([entry.rel_path for entry in sample])
    return any(entry.rel_path not in detected or parsed.get(entry.rel_path) is None
               or parsed[entry.rel_path].partial is None for entry in sample)


def _same_bytes(entry: FileEntry, digest: str) -> bool:
    """Whether ``entry`` holds the bytes whose hash the last run stored (False when it cannot tell: no hash kept, or
    the file unreadable now, which its parse then reports)."""
    if not digest:
        return False
    try:
        return mapped.file_digest(entry.path, entry.size) == digest
    except OSError:
        return False


def _check_root(state: BrainState, brain: str, root: str) -> None:
    """A brain holds one folder: refuse a second one while the first still exists (a moved folder is adopted)."""
    if state.root is not None and state.root != root and Path(state.root).is_dir():
        raise IllegalArgument(f"brain '{brain}' holds the folder {state.root}; a brain is built from one folder, "
                              f"so index {root} under another name (--brain NAME)")


def default_workers() -> int:
    """Processes for per-file work when the caller does not say: the CPU count from four cores up, else one.

    Writing stays in this process and is most of a first run; measured on two
    cores, a pool of two made a 5,000-note run 8-15% slower (its workers
    compete with the writer), so smaller machines get a companion instead
    (see :func:`companion_default`).
    """
    cores = os.cpu_count() or 1
    return cores if cores >= 4 else 1


def companion_default() -> bool:
    """Whether a run that names no executor nor ``workers`` gets a companion: on two or three cores.

    A companion is one worker process that parses every file, keeps what
    detection needs, combines and detects, while this process only writes:
    the writer is most of a first run, and on two cores the companion's work
    then costs it next to nothing (a pool of two competed with it instead).
    """
    return 2 <= (os.cpu_count() or 1) < 4


class _Runner:
    """Where the run's per-file tasks go: the executor given, else this process until the work pays for a pool."""

    def __init__(self, executor: Executor | None, workers: int | None, plugins: Plugins, graph: bool,
                 cache: ParseCache | None = None) -> None:
        self.given = executor
        self.cache = cache  # where each parse task looks first, and keeps what it parsed
        self.workers = workers if workers is not None else default_workers()
        # a companion: the run's own pool of one process, which keeps detection's state between its tasks
        self.may_accompany = executor is None and workers is None and self.workers < 2 and companion_default()
        self.companion = False
        self.token = uuid.uuid4().hex
        self.plugins = plugins
        # where the folder's files are published (its git remotes), for links to their addresses; set by the run
        self.published: tuple[str, ...] = ()
        self.ref = plugins.ref(graph)
        self.graph = graph
        self.pool: Executor | None = None
        self.pool_allowed: bool | None = None
        # Weakly: a batch's future must not keep its result (documents, texts) alive once the run let it go.
        self.futures: weakref.WeakSet[Future] = weakref.WeakSet()
        # Tasks for an executor wait here until fewer than ``window`` are out (sent, result not yet taken).
        self.backlog: deque[_Queued] = deque()
        self.out = 0
        # with a companion: whether this process parses, whenever it would wait for the companion's next batch,
        # the next batches the companion has not begun (see _take_back_while_waiting); how many bytes of files
        # it parsed so; and how many parse batches the companion keeps for detection (numbered as they are sent)
        self.taking_back = False
        self.taken_back_bytes = 0
        self.tail_bytes = 0  # of those, taken from the run's end
        self.kept_batches = 0

    @property
    def memo(self) -> ParseCache | None:
        """Where detect batches remember each file's detection (see ``detectmemo``): the parse cache, from a
        folder's second run on (a first run detects every file once, and keeps nothing)."""
        return self.cache if self.cache is not None and self.cache.keep else None

    def expect(self, work_files: int) -> None:
        """Open a pool once the run has ``work_files`` files to parse or detect, if a pool pays and may be used.

        A companion is opened by the first call only (the run's start), since it
        must parse every file whose documents detection keeps.
        """
        accompany, self.may_accompany = self.may_accompany, False
        if self.given is not None or self.pool is not None or work_files < POOL_MIN_FILES:
            return
        if self.workers < 2 and not accompany:
            return
        if self.pool_allowed is None:
            self.pool_allowed = rebuilds_alike(self.plugins, self.graph)
        if self.pool_allowed:
            self.companion = self.workers < 2
            # a small run's companion starts forked where that is safe (parse at once instead of importing for
            # 0.4 s); a pool of several stays spawned
            fork = self.companion and work_files < FORK_BELOW_FILES and may_fork()
            self.pool = open_pool(max(self.workers, 1), fork=fork, plugins=self.plugins)

    def parse(self, batch: Sequence[FileEntry], with_partials: bool, *, ship: bool = True) -> Future:
        """A parse batch's future; its outcomes come from :meth:`outcomes`. With ``ship`` false (files parsed
        for the corpus only) a companion returns only the failures."""
        if self.companion:
            # its outcomes come back packed, so every parse batch is sent at once and the companion runs ahead
            seq = None
            if with_partials:
                seq, self.kept_batches = self.kept_batches, self.kept_batches + 1
            future = self.submit(parse_and_keep, self.token, batch, with_partials, ship, seq, self.cache,
                                 step=PARSING, files=_paths(batch), eager=True)
            future.seq = seq  # type: ignore[attr-defined]  # the batch number it is kept under
            if ship:
                future.entries = batch  # type: ignore[attr-defined]  # put back into its outcomes
                future.with_partials = with_partials  # type: ignore[attr-defined]  # to parse it here instead
            return future
        return self.submit(parse_batch, batch, with_partials, ship, self.cache, not ship,
                           step=PARSING, files=_paths(batch))

    def outcomes(self, future: Future) -> list[ParseOutcome]:
        result = future.result()
        if not isinstance(result, bytes):
            return result
        entries = getattr(future, "entries", None)
        return unpack_outcomes(result) if entries is None else with_entries(unpack_outcomes(result), entries)

    @property
    def in_process(self) -> bool:
        return isinstance(self.given or self.pool or _INLINE, InlineExecutor)

    def submit(self, fn: Callable[..., Any], *args: Any, step: str, files: Sequence[str],
               eager: bool = False) -> Future:
        """``fn(plugins, *args)`` on the executor; tasks for another process name the plugins, not carry them.

        With no executor of its own the run defers the call until its result is
        asked for, so a batch is parsed (or detected) when the writer reaches it
        and the run holds a bounded number of batches, never the whole corpus.
        On an executor, at most :attr:`window` tasks are out at once (sent and
        their results not yet taken): the rest wait here, so results never pile
        up faster than the writer takes them.
        An ``eager`` task (one whose result is small or packed) is sent at once and not counted in the window.
        The future fails with ``BatchFailed`` naming ``files`` when the task fails as a whole.
        """
        if self.given is None and self.pool is None:
            return _Deferred(fn, step, files, self.plugins, *args)
        queued = _Queued(self, fn, args, step, files, counted=not eager)
        if eager:
            queued.send()
        else:
            self.backlog.append(queued)
            self._send()
        return queued

    def _send(self) -> None:
        while self.backlog and self.out < self.window:
            self.backlog.popleft().send()

    def send(self, fn: Callable[..., Any], args: tuple[Any, ...], step: str, files: Sequence[str],
             counted: bool = True) -> Future:
        """Hand one task to the executor now; the future of its outcome."""
        self.out += counted
        executor = self.given or self.pool or _INLINE
        # a pool of the run's own spawns its workers as tasks are submitted
        try:
            with main_left_behind() if executor is self.pool else contextlib.nullcontext():
                future = executor.submit(fn, self.plugins if self.in_process else self.ref, *args)
        except BrokenExecutor as exc:  # a worker died since the last task went out: this one is lost as well
            future = Future()
            future.set_exception(exc)
        self.futures.add(future)
        watched = watch_batch(future, step, files)
        watched.inner = future  # type: ignore[attr-defined]  # to take a task back that has not started
        return watched

    def take_back(self, future: Future) -> list[ParseOutcome] | None:
        """A companion's changed-file parse batch that it has not started, parsed here instead (its outcomes;
        None when it started, or was not such a batch)."""
        inner = getattr(future, "inner", None)
        entries = getattr(future, "entries", None)
        if inner is None or entries is None or not inner.cancel():
            return None
        # counted here, as the companion counts the batches it parses, so every write batch takes the counts
        return parse_batch(self.plugins, entries, future.with_partials, True, self.cache)  # type: ignore[attr-defined]

    def taken(self) -> None:
        """A task's result was taken: another may go out."""
        self.out -= 1
        self._send()

    def share(self, corpus: Corpus, states: Mapping[str, Any]) -> Any:
        """The corpus and states for the detect tasks, broadcast the executor's way."""
        return share(self.given or self.pool or _INLINE, self.in_process, corpus, states)

    @property
    def window(self) -> int:
        """How many batches may be in flight at once."""
        if self.given is None and self.pool is None:
            return 1
        workers = getattr(self.given or self.pool, "_max_workers", None) or self.workers
        return max(2, DETECT_WINDOW_PER_WORKER * workers)

    def release(self) -> None:
        """A companion whose every task is done is shut down now rather than when the run ends: its memory
        (the corpus it kept) goes back while the writer still writes."""
        if self.companion and self.pool is not None and not self.backlog \
                and all(future.done() for future in list(self.futures)):
            self.pool.shutdown(wait=True)

    def close(self) -> None:
        """Cancel what is still queued; a pool of the run's own lets running batches end and reaps its workers."""
        while self.backlog:
            self.backlog.popleft().cancel()
        for future in list(self.futures):
            future.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


_INLINE = InlineExecutor()


class _OnDemand(Future):
    """A future that does its part (runs its call, or sends it) the first time its outcome is asked for."""

    def _demand(self) -> None:
        raise NotImplementedError

    def result(self, timeout: float | None = None) -> Any:
        self._demand()
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._demand()
        return super().exception(timeout)


class _Deferred(_OnDemand):
    """A call run in this process the first time its result is asked for (see :meth:`_Runner.submit`).

    An ordinary exception lands in the future, as an executor would report it;
    ``KeyboardInterrupt`` propagates at once. A cancelled call never runs.
    """

    def __init__(self, fn: Callable[..., Any], step: str, files: Sequence[str], *args: Any) -> None:
        super().__init__()
        self._call: tuple[Callable[..., Any], tuple[Any, ...]] | None = (fn, args)
        self._batch = (step, files)

    def _demand(self) -> None:
        call, self._call = self._call, None
        if call is None or self.done():
            return
        fn, args = call
        try:
            self.set_result(fn(*args))
        except Exception as exc:
            self.set_exception(batch_failure(*self._batch, exc))


class _Queued(_OnDemand):
    """A task for the runner's executor, sent when the runner's window has room or its result is asked for."""

    def __init__(self, runner: _Runner, fn: Callable[..., Any], args: tuple[Any, ...], step: str,
                 files: Sequence[str], counted: bool = True) -> None:
        super().__init__()
        self._runner = runner
        self._call: tuple[Callable[..., Any], tuple[Any, ...], str, Sequence[str], bool] | None = (
            fn, args, step, files, counted)
        # an uncounted task takes no room in the runner's window
        self._taken = not counted

    def send(self) -> None:
        call, self._call = self._call, None
        if call is None or self.done():
            return
        outcome = self._runner.send(*call)
        self.inner = getattr(outcome, "inner", None)
        outcome.add_done_callback(self._settle)

    def _settle(self, outcome: Future) -> None:
        if self.done():  # cancelled while the task ran (the run is stopping)
            return
        exc = outcome.exception()
        if exc is None:
            self.set_result(outcome.result())
        else:
            self.set_exception(exc)

    def _demand(self) -> None:
        if self._call is not None:  # asked for before its turn (out of order): send it now
            try:
                self._runner.backlog.remove(self)
            except ValueError:
                pass
            self.send()
        if not self._taken:
            self._taken = True
            self._runner.taken()


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


def _paths(entries: Sequence[FileEntry]) -> list[str]:
    return [entry.rel_path for entry in entries]


# a batch task's step, as BatchFailed names it
PARSING = "parse"
COMBINING = "combine"
DETECTING = "detect"


class _Combining:
    """The companion's combine, as a future: its outcome comes back from the combine task, or from the adoption of
    the batch the combine waited for (see :func:`parallel.adopt_kept`); the others answer None."""

    def __init__(self, first: Future, adoptions: list[Future]) -> None:
        self.first = first
        self.adoptions = adoptions  # the detection's own list: adoptions sent later join it

    def _futures(self) -> list[Future]:
        return [self.first, *self.adoptions]

    def done(self) -> bool:
        return any(f.done() and (f.exception() is not None or f.result() is not None) for f in self._futures())

    def exception(self) -> BaseException | None:
        return next((exc for f in self._futures() if f.done() and (exc := f.exception()) is not None), None)

    def result(self) -> Any:
        for future in self._futures():
            found = future.result()
            if found is not None:
                return found
        raise PluginError("the companion answered no combine: a parse batch never reached it")


class _Detection:
    """Detection over the whole corpus: started once every file is parsed, streamed after the writes.

    Map (each file's ``summarize``, done with its parse) → combine here → the
    corpus and states broadcast with each detect batch → map (``detect_file``).
    Unchanged files are parsed for the corpus once edges are known to be redone.

    Between its parse and its detect batch a file is held as a :class:`Kept`
    (no text objects); a parse batch's outcomes are taken as soon as the writer
    is done with them, and detect batches are built and run a window at a time,
    so the run never holds every file's documents, texts and drafts at once.
    """

    def __init__(self, runner: _Runner, changed: list[Future | None], unchanged: Sequence[FileEntry], *,
                 forced: bool) -> None:
        self.runner = runner
        self.changed = changed
        self.unchanged_entries = unchanged
        self.unchanged: list[Future | None] = []
        self.needed = False
        self.kept: dict[str, Kept] = {}
        self.fields: dict[int, dict[str, Any]] = {}  # the kept documents' shared fields maps, until combined
        # where the kept files' texts wait for their detect batch, beside the parse cache (see kept.Spill): None
        # until a file is kept, False when there is no cache or it refuses one (the texts stay in memory)
        self.spill: Spill | None | bool = None
        self.failures: list[dict[str, Any]] = []
        self.states: dict[str, DetectorState] | None = None
        self.corpus: Corpus | None = None
        self.shared: Any = None
        # with a companion (see _Runner), the worker keeps the files and combines them itself
        self.combined: _Combining | None = None
        self.adoptions: list[Future] = []  # files parsed here that the companion keeps: one may end in the combine
        self.dispatched: deque[Future] | None = None  # the companion's detect batches sent, results not yet taken
        self.waiting: deque[list[str]] = deque()  # ... and the files of those not sent yet
        self.detected: list[str] = []  # the files whose edges a lost combine would lose, to name them
        self.started = False
        self.companion_counters: dict[str, int] = {}
        if forced:
            self._need()

    def _need(self) -> None:
        if not self.needed:
            self.needed = True
            self.runner.expect(len(self.unchanged_entries))
            self.unchanged = [self.runner.parse(batch, True, ship=False)
                              for batch in _chunks(self.unchanged_entries, PARSE_BATCH_FILES)]
            if self.runner.companion:
                self.detected.extend(_paths(self.unchanged_entries))
                self._combine_when_adopted()

    def _combine_when_adopted(self) -> None:
        """With a companion, send the combine once edges are to be redone (every parse batch is sent by then):
        it runs in the worker right after the last of those batches reaches it (parsed there, or here and
        adopted: see :func:`parallel.combine_kept`), while this process still writes."""
        if self.needed and self.combined is None:
            first = self.runner.submit(combine_kept, self.runner.token, self.runner.kept_batches,
                                       self.runner.memo is not None, self.runner.published, step=COMBINING,
                                       files=self.detected, eager=True)
            self.combined = _Combining(first, self.adoptions)

    def take(self, outcomes: Sequence[ParseOutcome]) -> None:
        """A batch of changed files is parsed and written: keep what detection needs of it. One that parsed
        means edges are redone."""
        parsed = any(o.failure is None for o in outcomes)
        if not self.runner.companion:
            if parsed:
                self._need()
            self._keep(outcomes)
            return
        self.detected.extend(o.entry.rel_path for o in outcomes if o.yields)
        if parsed:
            self._need()
        self._combine_when_adopted()

    def adopt(self, outcomes: Sequence[ParseOutcome], batch: int | None) -> None:
        """A parse batch parsed in this process: the companion keeps its files for detection, and counts the
        batch (a combine asked for already waits for it)."""
        adopted = [(o.entry.rel_path, Kept.of(o)) for o in outcomes if o.docs or o.kept is not None]
        self.adoptions.append(self.runner.submit(adopt_kept, self.runner.token, adopted, batch, step=PARSING,
                                                 files=[path for path, _ in adopted], eager=True))

    def _keep(self, outcomes: Sequence[ParseOutcome]) -> None:
        if self.spill is None:
            cache = self.runner.cache
            self.spill = open_spill(cache.path if cache is not None else None) or False
        for outcome in outcomes:
            if outcome.docs or outcome.kept is not None:
                held = Kept.of(outcome, self.fields)
                self.kept[outcome.entry.rel_path] = held.spilled(self.spill) if self.spill else held

    def ready(self) -> bool:
        """Whether detection can start now: every changed file is taken and, with an executor that works
        apart, every unchanged file is parsed (in process they are parsed when detection starts)."""
        if not self.needed or any(f is not None for f in self.changed):
            return False
        return self.runner.in_process or all(f is None or f.done() for f in self.unchanged)

    def unchanged_failures(self) -> list[dict[str, Any]]:
        return self.failures

    def start(self) -> None:
        if self.started:
            return
        for position, future in enumerate(self.unchanged):
            if future is None:
                continue
            outcomes = self.runner.outcomes(future)
            self.unchanged[position] = None
            self.failures.extend({"path": o.entry.rel_path, "reason": o.failure, "gone": o.gone}
                                 for o in outcomes if o.failure is not None)
            self._keep(outcomes)
        self.started = True
        self.fields = {}
        if self.runner.companion:
            return
        ordered = sorted(self.kept)
        self.corpus = corpus_of(self.kept, self.runner.memo is not None, self.runner.published)
        self.states = combine(self.runner.plugins.detectors, (self.kept[path].partial for path in ordered),
                              self.corpus)
        for path in ordered:  # the partials are folded into the states: let them go
            self.kept[path] = attrs.evolve(self.kept[path], partial=None)
        # combining frees many small arrays and sets at once: hand the heap's free pages back before writing
        trim_heap()
        self.shared = self.runner.share(self.corpus, self.states)

    def batches(self) -> Iterator[tuple[Sequence[EdgeDraft], list[str] | None]]:
        """Each detect batch's drafts, in file order, with at most the runner's window of batches in flight (a
        companion's: see :meth:`dispatch`), and their edge ids when the companion worked them out (else None)."""
        self.start()
        if self.combined is not None:
            self.dispatch(wait=True)
            pending: deque[Future] = self.dispatched  # type: ignore[assignment]
        else:
            ordered = sorted(self.kept)
            pending = deque()
        # a lost batch does not stop the others: they are awaited so that every lost file is named at the end
        lost: list[BatchFailed] = []

        def drafts(future: Future) -> tuple[Sequence[EdgeDraft], list[str] | None]:
            try:
                found = future.result()
            except BatchFailed as exc:
                lost.append(exc)
                return [], None
            return unpack_drafts(found) if self.combined is not None else (found, None)

        if self.combined is not None:
            while pending:
                if not self.waiting and all(future.done() for future in pending):
                    self.runner.release()
                found = drafts(pending.popleft())
                self._send_detects()
                yield found
            self.runner.release()
            if lost:
                raise BatchFailed.joined(lost)
            return
        for lo in range(0, len(ordered), DETECT_BATCH_FILES):
            paths = ordered[lo:lo + DETECT_BATCH_FILES]
            # a file's compressed texts are needed by its own batch only (the corpus keeps its text-free documents),
            # and there only when a detection of it is not remembered
            work = [(path, self.kept.pop(path)) for path in paths]
            pending.append(self.runner.submit(detect_batch, self.shared, work, self.runner.memo, step=DETECTING,
                                              files=paths))
            if len(pending) >= self.runner.window:
                yield drafts(pending.popleft())
        while pending:
            yield drafts(pending.popleft())
        if lost:
            raise BatchFailed.joined(lost)

    def dispatch(self, wait: bool = False) -> None:
        """With a companion, once its combine is done (or, with ``wait``, when it is): send it the detect
        batches, up to :data:`DETECT_AHEAD_BATCHES` more than the writer took. It detects while this process
        still writes (documents, then edges); the packed results are held here until the writer takes them, and
        once the last is in, the companion, and the corpus it holds, is let go (see :meth:`_Runner.release`)
        while the writer still writes."""
        if self.combined is None or self.dispatched is not None or not (wait or self.combined.done()):
            return
        if not wait and self.combined.exception() is not None:
            return  # raised where the batches are taken
        ordered, self.companion_counters = self.combined.result()
        self.waiting = deque(ordered[lo:lo + DETECT_BATCH_FILES] for lo in range(0, len(ordered), DETECT_BATCH_FILES))
        self.dispatched = deque()
        self._send_detects()

    def _send_detects(self) -> None:
        while self.waiting and len(self.dispatched) < DETECT_AHEAD_BATCHES:  # type: ignore[arg-type]
            paths = self.waiting.popleft()
            self.dispatched.append(self.runner.submit(  # type: ignore[union-attr]
                detect_kept, self.runner.token, paths, self.runner.memo, step=DETECTING, files=paths, eager=True))

    def counters(self) -> dict[str, int]:
        if self.combined is not None:
            return dict(self.companion_counters)
        counters: dict[str, int] = {}
        for detector_state in (self.states or {}).values():
            for key, value in detector_state.counters.items():
                counters[key] = counters.get(key, 0) + int(value)
        return counters


_SURELY_SHORT = min(MAX_NODE_ID_BYTES, MAX_TYPE_BYTES) // 4


def _run_is_dirty(state: RunState | None, detector_tags: list[str]) -> bool:
    """An interrupted run, or a different set of detectors than last time, means edges must be redone."""
    if state is None:
        return False
    return state.dirty or (bool(detector_tags) and state.detectors != tuple(detector_tags))


def _retagged(state: RunState | None, detector_tags: list[str]) -> frozenset[str]:
    """The detector tags the brain's last finished run did not have: detectors new to it, or new versions. (A
    brain whose runs did not record their tags is taken to have had these, as with formats.)"""
    if state is None or state.detectors is None:
        return frozenset()
    return frozenset(detector_tags) - frozenset(state.detectors)


def _datasets_after(prior: Mapping[str, FileState], changed: Mapping[str, tuple[str, ...]], removed: Sequence[str],
                    ) -> list[str]:
    """The dataset indices the brain's files produce documents in once this run's writes are in.

    ``changed`` maps each file parsed now to the dataset indices of its documents.
    """
    indices = {path: {split_ref(ref)[0] for ref in state.docs} for path, state in prior.items()
               if path not in changed}
    for path in removed:
        indices.pop(path, None)
    found = {index for names in indices.values() for index in names}
    found.update(index for names in changed.values() for index in names)
    return sorted(found)


def _file_write(rel_path: str, parsed: _Parsed | None, prior: Mapping[str, FileState], root_id: str) -> FileWrite:
    """One file's documents as parsed now and the ones it no longer yields (all of them once it is gone)."""
    documents = tuple(IndexedDocument(dataset_index(dataset, root_id), doc_id, source)
                      for dataset, doc_id, source in parsed.docs) if parsed is not None else ()
    known = prior.get(rel_path)
    now = {doc_ref(doc.index, doc.id) for doc in documents}
    stale = tuple(sorted(set(known.docs if known is not None else ()) - now))
    stamp = FileStamp(parsed.entry.mtime_ns, parsed.entry.size, parsed.digest) if parsed is not None else None
    return FileWrite(path=rel_path, stamp=stamp, documents=documents, stale=stale,
                     skipped=parsed.skipped if parsed is not None else None)


def _shares(item: FileWrite, counted: Sequence[CountedTerms | None] | None
            ) -> list[tuple[FileWrite, Sequence[CountedTerms | None] | None]]:
    """``item`` and its documents' counts as the writes that store it: itself when its documents fit one (see
    SHARE_BYTES), else runs of its documents in order, each continuing the file's recorded state (so a share
    carries its own documents' refs only), every one but the last recorded as UNFINISHED."""
    docs = item.documents
    cuts, held = [0], 0
    for i, doc in enumerate(docs, 1):
        text = doc.source.get(COUNTED_FIELD)
        held += len(text) if isinstance(text, str) else 0
        if (held >= SHARE_BYTES or i - cuts[-1] >= SHARE_DOCS) and i < len(docs):
            cuts.append(i)
            held = 0
    if len(cuts) == 1:
        return [(item, counted)]
    cuts.append(len(docs))
    shares = []
    for lo, hi in zip(cuts, cuts[1:]):
        part = counted[lo:hi] if counted else counted
        if hi < len(docs):
            shares.append((FileWrite(item.path, UNFINISHED, docs[lo:hi], kept=item.kept, continues=True), part))
        else:
            shares.append((attrs.evolve(item, documents=docs[lo:], continues=True), part))
    return shares


def _write_documents(sink: BrainSink, brain: str, root_id: str, runner: _Runner, parses: list[Future | None],
                     removed: Sequence[str], prior: Mapping[str, FileState], now_ms: int, summary: RunSummary,
                     progress: Progress, detection: _Detection | None) -> dict[str, tuple[str, ...]]:
    """Write changed files' documents as their parses come in, then forget removed files.

    A batch of whole files per transaction, a big file's documents in shares of
    their own (see :func:`_shares`). Each parse batch is let go once its
    files are queued for writing (detection keeps a text-free copy), so the run
    holds at most a write batch and a parse batch of documents with their text.
    Returns, per file parsed now, the dataset indices of its documents
    (failures are reported in ``summary``).
    """
    changed: dict[str, tuple[str, ...]] = {}
    work: list[tuple[str, _Parsed | None]] = []
    size = min(FIRST_BATCH_FILES, BATCH_FILES)

    def due() -> int:
        """How many of the files waiting make the next transaction (0: not enough yet)."""
        held = 0
        for count, (_, parsed) in enumerate(work[:size], 1):
            held += parsed.entry.size if parsed is not None else 0
            if held >= BATCH_BYTES:
                return count
        return size if len(work) >= size else 0

    def write(files: list[FileWrite], counts: list[Any]) -> None:
        if files:
            count = _write_files(sink, brain, files, now_ms, counts, summary, changed)
            summary.documents += count
            progress("documents", count)

    def flush(everything: bool) -> None:
        nonlocal size
        while work and (everything or due()):
            take = due() or len(work)
            batch = [_file_write(path, parsed, prior, root_id) for path, parsed in work[:take]]
            counts = [parsed.counted if parsed is not None else () for _path, parsed in work[:take]]
            del work[:take]
            size = min(size * 2, BATCH_FILES)
            whole: tuple[list[FileWrite], list[Any]] = ([], [])
            for item, counted in zip(batch, counts):
                shares = _shares(item, counted)
                if len(shares) == 1:
                    whole[0].append(item)
                    whole[1].append(counted)
                    continue
                write(*whole)
                whole = ([], [])
                for part, part_counts in shares:
                    write([part], [part_counts])
                    if part.path not in changed:  # refused: the rest is not written, the next run reads it again
                        break
            write(*whole)
            del batch, whole
            if detection is not None:
                detection.dispatch()
                if detection.ready():
                    detection.start()

    for position, future in enumerate(parses):
        if runner.taking_back and isinstance(future, _Queued) and not future.done():
            _take_back_while_waiting(runner, parses, position, detection)
            future = parses[position]
        outcomes = runner.outcomes(future)  # type: ignore[arg-type]
        parses[position] = None
        if detection is not None:
            detection.take(outcomes)
        for outcome in outcomes:
            if outcome.gone:
                summary.skip(outcome.entry.rel_path, VANISHED, outcome.failure)
                continue
            if outcome.failure is not None:
                summary.fail(outcome.entry.rel_path, outcome.failure)
                continue
            if not outcome.yields:
                summary.skip(outcome.entry.rel_path, *attrs.astuple(outcome.declined or NOT_READ))
            docs = outcome.for_writer()
            # A file no format accepts is not part of the corpus, but it is remembered so it is not re-read.
            changed[outcome.entry.rel_path] = tuple(dict.fromkeys(dataset_index(dataset, root_id)
                                                                  for dataset, _, _ in docs))
            work.append((outcome.entry.rel_path, _Parsed(outcome.entry, docs, outcome.digest, outcome.counted,
                                                         outcome.declined)))
        progress("files", len(outcomes))
        del future, outcomes
        flush(everything=False)
    work.extend((path, None) for path in removed)
    flush(everything=True)
    return changed


def _write_files(sink: BrainSink, brain: str, batch: list[FileWrite], now_ms: int, counts: list[Any],
                 summary: RunSummary, changed: dict[str, tuple[str, ...]]) -> int:
    """Write a batch of files in one transaction; returns how many documents were written.

    A file one of whose documents the store refuses is reported failed (its
    documents and state not written, so the next run reads it again). The
    batch's other files are then written a file per transaction, so each
    other refused file costs one transaction, not another try of the batch.
    """
    try:
        written = sink.write_files(brain, batch, now_ms, counted=counts)
        summary.documents_kept += sum(len(item.documents) for item in batch) - written
        return written
    except DocumentRefused as refused:
        if not any(item.path == refused.path for item in batch):
            raise
        first = refused
    written = 0
    for item, count in zip(batch, counts):
        failure = first if item.path == first.path else None
        if failure is None:
            try:
                alone = sink.write_files(brain, [item], now_ms, counted=[count])
                summary.documents_kept += len(item.documents) - alone
                written += alone
            except DocumentRefused as refused:
                if refused.path != item.path:
                    raise
                failure = refused
        if failure is not None:
            summary.fail(failure.path, failure.reason)
            changed.pop(failure.path, None)
    return written


def _take_back_while_waiting(runner: _Runner, parses: list[Future | None], position: int,
                             detection: _Detection | None) -> None:
    """While the companion's parse batch ``parses[position]`` is not back, this process would only wait (the
    companion is starting, a fresh interpreter and its imports, or its parsing, not the writing, is the run's
    pace): it parses batches the companion has not begun instead, and sends their files for the companion to
    keep. So the two processes share the parsing as their pace demands (a fixed share parsed here either left
    this process waiting or did work the companion was ready for).

    Which batches: first the run's last ones, up to :data:`TAKE_TAIL_BYTES` of files. Their documents wait here
    for the writer, but the companion then parses its last batch before the writer has written the run's
    last documents, and combines (which needs every file, and would otherwise leave the writer waiting) while
    the writer writes them. Then the batches next in line (``parses[position]`` itself if not begun), which
    the writer reaches soon: at most :data:`TAKE_AHEAD_BYTES` of files parsed ahead at once. At most
    :data:`TAKE_BACK_BYTES` in a run. The combine, asked for already, waits in the companion for every batch
    adopted so (see :func:`parallel.combine_kept`)."""
    waited = parses[position]

    def not_begun(at: int) -> bool:
        return isinstance(parses[at], _Queued) and not parses[at].done()  # type: ignore[union-attr]

    later, last = position, len(parses) - 1
    while not waited.done() and runner.taken_back_bytes < TAKE_BACK_BYTES:  # type: ignore[union-attr]
        if runner.tail_bytes < TAKE_TAIL_BYTES:
            while last > position and not not_begun(last):
                last -= 1
            at, tail = last, True
            if at <= position:  # nothing left at the end: next in line
                runner.tail_bytes = TAKE_TAIL_BYTES
                continue
        else:
            if sum(getattr(f, "held", 0) for f in parses[position:]) >= TAKE_AHEAD_BYTES:
                return
            # the nearest batch not begun (the companion has one running and the next in its queue at most)
            while later < len(parses) and not not_begun(later):
                later += 1
            if later >= len(parses):
                return
            at, tail = later, False
        taken = parses[at]
        outcomes = runner.take_back(taken)  # type: ignore[arg-type]
        if outcomes is None:  # begun by the companion
            if tail:
                last -= 1
            else:
                later += 1
            continue
        size = sum(outcome.entry.size for outcome in outcomes)
        runner.taken_back_bytes += size
        if detection is not None:
            detection.adopt(outcomes, getattr(taken, "seq", None))
            # the companion keeps the files' documents now: what waits here is what the writer takes
            outcomes = [attrs.evolve(o, docs=(), partial=None) if o.sources is not None else o for o in outcomes]
        done: Future = Future()
        done.set_result(outcomes)
        if tail:
            runner.tail_bytes += size
        else:
            done.held = size  # type: ignore[attr-defined]
        parses[at] = done
        if at == position:
            return


def _detect_and_reconcile(sink: BrainSink, detection: _Detection, brain: str, datasets: list[str], now_ms: int,
                          summary: RunSummary, progress: Progress, retagged: frozenset[str] = frozenset(),
                          cache: ParseCache | None = None) -> None:
    """Finish detection over the whole corpus and bring the brain's machine-written edges in line.

    Edges the corpus no longer teaches (a removed file, a link that went away,
    a claim whose evidence changed) are soft-invalidated; new ones are written.
    An edge already standing under the same id is left alone, so a re-run over
    unchanged files rewrites nothing; and a claim a changed file teaches again
    as it was (see :func:`_continued`) keeps its live edge. A claim a person
    rejected is stored retired.

    A detector whose tag is ``retagged`` (a version the brain's last run did
    not have) re-asserts the live edges it teaches again, each a new version
    of its edge document (the one it replaces goes to the history) carrying the
    new tag, weight, confidence and evidence, unless it already makes the claim
    just so (an interrupted upgrade's second run): an upgraded brain's edges are
    those a fresh build of the same folder would hold (an unchanged file's edge
    used to keep the tag and evidence of the version that first taught it).

    The drafts found to continue live edges are kept in ``cache`` (see
    :mod:`.continuations`): a later run settles them as it settles a draft
    standing under its own id, without reading the edges' claims again.

    Drafts stream: each detect batch's fresh edges are written once
    :data:`EDGES_PER_TRANSACTION` of them are due, so the run holds the ids of
    the edges it wants, never every draft at once.
    """
    standing = sink.standing_edges(brain)
    settled = standing.settled
    # the ids of the edges the corpus teaches, as the 16 bytes they spell (a run can want hundreds of thousands):
    # edge_id gives 32 lowercase hex digits, so the two forms are one-to-one
    wanted = WantedIds()
    # the fresh drafts not written yet, as columns (DraftColumns: no object per draft), in parts
    fresh: list[DraftColumns] = []
    held = 0
    nodes = ",".join(datasets) or None
    # the live claims of the files asked about so far, each file asked once (its drafts span many transactions),
    # each claim let go once a draft continues it
    claims: dict[tuple[str, str, str], LiveClaim] = {}
    asked: set[str] = set()
    # kept per brain and server: the folder's cache is the user's whoever the run writes to
    label = f"{brain}\0{getattr(sink, 'url', '')}"
    continuations = Continuations.recalled(cache.recall_continuations(label) if cache is not None else None,
                                           standing.live)

    def write(drafts: DraftColumns, in_order: bool = False) -> None:
        if standing.live:
            # A draft standing under its own id (an unchanged file's, renewed for its detector's new version)
            # continues no other edge: only the rest are compared with their files' live claims. In an upgrade's
            # run they are nearly all of them, and asking for their files' claims held every live claim of the
            # brain until the run ended (20,000 notes: the writer at 571-598 MB, 293-318 MB without them).
            renewed = standing.live.holds(keys_of(drafts.ids))
            if not renewed.any():
                drafts = _continued(sink, brain, drafts, wanted, summary, claims, asked, continuations)
            elif not renewed.all():
                others = _continued(sink, brain, drafts.where((~renewed).tolist()), wanted, summary, claims, asked,
                                    continuations)
                drafts, in_order = DraftColumns.joined([drafts.where(renewed.tolist()), others]), False
        if not in_order:
            drafts = drafts.take(drafts.claim_order())
        written = sink.write_edges(brain, drafts, created_at=now_ms, nodes_index=nodes)
        for kind, count in Counter(drafts.type).items():
            summary.edges_by_type[kind] = summary.edges_by_type.get(kind, 0) + count
        summary.claims_suppressed += written.suppressed
        progress("edges", len(drafts))

    for drafts, eids in detection.batches():
        batch = drafts if isinstance(drafts, DraftColumns) else DraftColumns.of(drafts, eids)
        chosen = _wanted_fresh(batch, wanted, settled, summary, standing.live if retagged else IdSet(), retagged)
        if chosen and continuations:
            chosen, continued = continuations.settle(chosen, retagged)
            wanted.add(keys_of_numbers(continued))
        if chosen:
            fresh.append(chosen)
            held += len(chosen)
        if held >= EDGES_PER_TRANSACTION:
            # whole transactions only: the rest waits for the next batch's drafts, so no transaction but the
            # last is a small one (each seals and merges as a full one does)
            pending = DraftColumns.joined(fresh)
            pending = pending.take(pending.claim_order())
            cut = held - held % EDGES_PER_TRANSACTION
            write(pending[:cut], in_order=True)
            fresh, held = [pending[cut:]], held - cut
    write(DraftColumns.joined(fresh))
    summary.edges_capped = int(detection.counters().get("edges_capped", 0))
    live = standing.live
    # a live edge under an id no detection derives (written through the ES door) is never wanted
    stale = sorted([*live.others, *ids_of_keys(live.keys[~wanted.holds(live.keys)])])
    if stale:
        summary.edges_invalidated = sink.invalidate_edges(brain, stale, now_ms)
    remembered = continuations.dumps()
    if cache is not None and remembered is not None:
        cache.keep_continuations(label, remembered)


def _continued(sink: BrainSink, brain: str, drafts: DraftColumns, wanted: WantedIds, summary: RunSummary,
               claims: dict[tuple[str, str, str], LiveClaim], asked: set[str],
               continuations: Continuations | None = None) -> DraftColumns:
    """``drafts`` without those that continue a live edge, whose ids are then wanted.

    A draft not standing under its own id comes from a changed file (or is a new claim). When a live edge makes
    the same claim (source, type, target) with the same detector tag, weight, confidence, formats and evidence
    (quote, source, offset), and a ``valid_at`` no later than the draft's, the claim has held since that edge's
    ``valid_at`` and still holds: the edge is kept as it is, where re-teaching it under the file's new mtime
    would retire it and write its twin (one message appended to a 60 MiB mailbox did so to 55,888 edges).
    """
    files = sorted({source for source in drafts.source if source} - asked)
    if files:
        asked.update(files)
        claims.update(((c.src, c.type, c.dst), c) for c in sink.live_claims(brain, files).claims)
    if not claims:
        return drafts
    keep, continued = [], []
    for i, claim in enumerate(map(claims.get, zip(drafts.src, drafts.type, drafts.dst))):
        # a derived id: a machine's edge
        if claim is not None and is_derived(claim.edge_id) and claim.valid_at is not None \
                and claim.valid_at <= drafts.valid_at[i] and (
                claim.detector, claim.weight, claim.confidence, claim.src_format, claim.dst_format, claim.quote,
                claim.source, claim.offset) == (
                drafts.detector[i], drafts.weight[i], drafts.confidence[i], drafts.src_format[i],
                drafts.dst_format[i], drafts.quote[i], drafts.source[i], drafts.offset[i]):
            continued.append(claim.edge_id)
            summary.edges_continued += 1
            if continuations is not None:
                continuations.found(drafts.ids[i], claim.edge_id)
            del claims[drafts.src[i], drafts.type[i], drafts.dst[i]]  # a claim is drafted once a run
        else:
            keep.append(i)
    wanted.add(keys_of(continued))
    return drafts if len(keep) == len(drafts) else drafts.take(keep)


def _wanted_fresh(batch: DraftColumns, wanted: WantedIds, settled: IdSet, summary: RunSummary,
                  renewed: IdSet | None = None, retagged: frozenset[str] = frozenset()) -> DraftColumns:
    """The drafts of ``batch`` to write: each whose ids fit and whose edge id is not wanted yet (by an earlier
    batch or draft) is now wanted, and those not settled already are returned, in order; a settled one is
    returned too when its id is ``renewed`` and its detector tag ``retagged``. A draft naming a node id or type
    too long for the edges index is counted in ``summary`` and left out (never wanted)."""
    n = len(batch)
    if not n:
        return batch
    keys = keys_of(batch.ids)
    # a string of at most a quarter of the limit in characters fits it in UTF-8 bytes: only longer ones are checked
    if max(map(len, batch.src)) <= _SURELY_SHORT and max(map(len, batch.dst)) <= _SURELY_SHORT \
            and max(map(len, batch.type)) <= _SURELY_SHORT:
        new = wanted.take_new(keys)  # the common case: every draft fits
    else:
        sound = np.fromiter((_fits(src, dst, kind) for src, dst, kind in zip(batch.src, batch.dst, batch.type)),
                            bool, n)
        summary.edges_too_long += n - int(np.count_nonzero(sound))
        new = np.zeros(n, bool)
        new[sound] = wanted.take_new(keys[sound])
    if settled:
        stays = settled.holds(keys)
        if renewed:
            stays &= ~(renewed.holds(keys) & np.fromiter(map(retagged.__contains__, batch.detector), bool, n))
        new &= ~stays
    return batch if new.all() else batch.where(new.tolist())


def _fits(src: str, dst: str, kind: str) -> bool:
    """Whether a draft's node ids and type fit the edges index."""
    return not ((len(src) > _SURELY_SHORT or len(dst) > _SURELY_SHORT or len(kind) > _SURELY_SHORT)
                and any(node_id_problem(f, v) for f, v in (("src", src), ("dst", dst), ("type", kind))))


__all__ = ["BATCH_FILES", "DETECT_BATCH_FILES", "PARSE_BATCH_FILES", "POOL_MIN_FILES", "RunSummary", "run"]
