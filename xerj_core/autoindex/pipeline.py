"""One autoindex run: walk a folder, skip what is unchanged, parse, write documents, detect edges, reconcile."""

from __future__ import annotations

import os
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from xerj_core.autoindex.detect import Corpus, DetectionResult, collect_detectors, combine
from xerj_core.autoindex.formats import collect_formats
from xerj_core.autoindex.parallel import (
    Broadcast,
    InlineExecutor,
    Plugins,
    detect_batch,
    open_pool,
    parse_batch,
    rebuilds_alike,
)
from xerj_core.autoindex.sink import (
    BrainSink,
    BrainState,
    FileStamp,
    FileState,
    FileWrite,
    IndexedDocument,
    LocalSink,
    RunFinish,
    RunState,
    dataset_index,
    doc_ref,
    split_ref,
)
from xerj_core.autoindex.walk import UNREADABLE, FileEntry, Skipped, walk
from xerj_core.errors import IllegalArgument
from xerj_core.graph.brain import edge_id, node_id_problem, validate_brain_name
from xerj_core.model import SourceDocument
from xerj_core.plugins import get_plugin_manager
from xerj_core.text import derive_brain_name

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

# Files per write transaction: an interrupted run loses at most this batch, never half a file.
BATCH_FILES = 256
# Files per executor task: small enough to spread over the workers and to stop soon on Ctrl-C.
PARSE_BATCH_FILES = 64
DETECT_BATCH_FILES = 512
# Below this many files to parse or detect, a process pool costs more than it saves.
POOL_MIN_FILES = 200


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
    edges_by_type: dict[str, int] = attrs.field(factory=dict)
    edges_capped: int = 0
    # drafts naming a node id or type too long for the edges index's keys (see graph.edges), left out
    edges_too_long: int = 0
    edges_invalidated: int = 0
    claims_suppressed: int = 0
    datasets: list[str] = attrs.field(factory=list)
    elapsed_s: float = 0.0

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


# The skip kind of a file no format reads (binaries, unknown extensions).
NO_FORMAT = "no_format"
NO_FORMAT_REASON = "no format reads this file"


@attrs.frozen
class _Parsed:
    entry: FileEntry
    docs: tuple[SourceDocument, ...]
    digest: str


# ``progress(event, count)``: "total" once (the files the walk saw), then "files" as they are accounted for,
# "documents" as they are written and "edges" once they are.
Progress = Callable[[str, int], None]


def _noop(_event: str, _count: int) -> None:
    pass


def run(target: Engine | BrainSink, folder: str | Path, *, brain: str | None = None, graph: bool = True,
        progress: Progress = _noop, clock: Callable[[], int] | None = None, pm: Any = None,
        executor: Executor | None = None, workers: int | None = None) -> RunSummary:
    """Index ``folder`` into ``target`` and, with ``graph``, detect and reconcile the brain's edges.

    ``target`` is an engine (the run writes its store through a :class:`LocalSink`)
    or any :class:`BrainSink`, such as a RemoteSink talking to a running server.
    Formats and detectors come from ``pm`` (default: the engine's, else the
    installed plugins): parsing and detection always run on this side, only
    storage is behind the sink. Unchanged files (same mtime and size as last
    run) are not read again unless detection needs their documents. A file that
    cannot be read or parsed is reported in the summary and whatever was
    indexed for it before stays. Documents are written a batch of whole files
    per transaction, so an interrupted run leaves every file as it was or as it
    is now.

    Per-file work (reading and parsing, each detector's map steps) runs in
    batches of files through ``executor``; writing stays in this process, and
    detection overlaps the writes when both are needed. Without ``executor``
    the run starts a spawned process pool of ``workers`` processes (default:
    :func:`default_workers`) when it has at least :data:`POOL_MIN_FILES` files to parse
    or detect, and shuts it down on every way out (Ctrl-C included); smaller
    runs, ``workers=1``, and runs whose plugin manager has plugins registered
    by hand (a test fixture's ``pm``: those exist in this process only, a
    worker's ``get_plugin_manager()`` would not see them) run in this process.
    An ``executor`` passed in is used as given and left running; its workers
    load the installed plugins themselves and refuse a run whose formats or
    detectors they do not have. Results do not depend on the executor.
    """
    started = time.perf_counter()
    now_ms = (clock or (lambda: int(time.time() * 1000)))()
    sink = target if isinstance(target, BrainSink) else LocalSink(target.store, target.graph)
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
    for item in walk(root):
        if isinstance(item, Skipped):
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
    for entry in entries:
        known = prior.get(entry.rel_path)
        if known is not None and known.mtime_ns == entry.mtime_ns and known.size == entry.size:
            if known.docs:
                unchanged.append(entry)
            else:  # remembered so it is not read again, and still accounted for
                summary.skip(entry.rel_path, NO_FORMAT, NO_FORMAT_REASON)
        else:
            to_parse.append(entry)
    progress("total", len(entries) + len(passed))
    progress("files", len(passed) + len(entries) - len(to_parse))

    detectors = collect_detectors(pm) if graph else {}
    tags = sorted(d.tag for d in detectors.values())
    run_dirty = _run_is_dirty(state.run, tags)
    # Whether edges get redone is known once every changed file is parsed (one may fail);
    # when they may be, unchanged files are parsed for the corpus alongside.
    may_detect = graph and bool(to_parse or removed or run_dirty or not state.edges_index)
    runner = _Runner(executor, workers, Plugins(formats, tuple(detectors.values())), graph)
    try:
        forced = bool(removed) or run_dirty or not state.edges_index
        runner.expect(len(to_parse) + (len(unchanged) if may_detect and forced else 0))
        changed_parses = [runner.submit(parse_batch, batch, may_detect)
                          for batch in _chunks(to_parse, PARSE_BATCH_FILES)]
        detection = _Detection(runner, changed_parses, unchanged, forced=forced) if may_detect else None
        changed = _write_documents(sink, brain_name, state.root_id, changed_parses, removed, prior, now_ms,
                                   summary, progress, detection)
        datasets = _datasets_after(prior, changed, removed, state.root_id)
        summary.datasets = datasets
        dirty = bool(changed or removed) or run_dirty or state.root != summary.root
        if detection is not None and detection.needed:
            for failure in detection.unchanged_failures():
                summary.fail(failure["path"], failure["reason"])
            _detect_and_reconcile(sink, detection, brain_name, datasets, now_ms, summary, progress)
    finally:
        runner.close()
    if dirty:
        sink.finish(brain_name, RunFinish(root=summary.root, datasets=tuple(datasets), detectors=tuple(tags),
                                          finished_at=now_ms, root_id=state.root_id))
    failed = {f["path"] for f in summary.files_failed}
    summary.files_indexed = sum(1 for p in changed if p.docs)
    summary.files_unchanged = sum(1 for e in unchanged if e.rel_path not in failed)
    summary.files_seen = len(entries) + len(passed)
    summary.elapsed_s = round(time.perf_counter() - started, 3)
    return summary


def _check_root(state: BrainState, brain: str, root: str) -> None:
    """A brain holds one folder: refuse a second one while the first still exists (a moved folder is adopted)."""
    if state.root is not None and state.root != root and Path(state.root).is_dir():
        raise IllegalArgument(f"brain '{brain}' holds the folder {state.root}; a brain is built from one folder, "
                              f"so index {root} under another name (--brain NAME)")


def default_workers() -> int:
    """Processes for per-file work when the caller does not say: the CPU count from four cores up, else one.

    Writing stays in this process and is most of a first run; measured on two
    cores, a pool of two made a 5,000-note run 8-15% slower (its workers
    compete with the writer), so small machines run inline unless asked.
    """
    cores = os.cpu_count() or 1
    return cores if cores >= 4 else 1


class _Runner:
    """Where the run's per-file tasks go: the executor given, else this process until the work pays for a pool."""

    def __init__(self, executor: Executor | None, workers: int | None, plugins: Plugins, graph: bool) -> None:
        self.given = executor
        self.workers = workers if workers is not None else default_workers()
        self.plugins = plugins
        self.ref = plugins.ref(graph)
        self.graph = graph
        self.pool: Executor | None = None
        self.pool_allowed: bool | None = None
        self.futures: list[Future] = []

    def expect(self, work_files: int) -> None:
        """Open a pool once the run has ``work_files`` files to parse or detect, if a pool pays and may be used."""
        if self.given is not None or self.pool is not None or self.workers < 2 or work_files < POOL_MIN_FILES:
            return
        if self.pool_allowed is None:
            self.pool_allowed = rebuilds_alike(self.plugins, self.graph)
        if self.pool_allowed:
            self.pool = open_pool(self.workers)

    @property
    def in_process(self) -> bool:
        return isinstance(self.given or self.pool or _INLINE, InlineExecutor)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """``fn(plugins, *args)`` on the executor; tasks for another process name the plugins, not carry them."""
        executor = self.given or self.pool or _INLINE
        future = executor.submit(fn, self.plugins if self.in_process else self.ref, *args)
        self.futures.append(future)
        return future

    def close(self) -> None:
        """Cancel what is still queued; a pool of the run's own lets running batches end and reaps its workers."""
        for future in self.futures:
            future.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


_INLINE = InlineExecutor()


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


class _Detection:
    """Detection over the whole corpus: started once every file is parsed, finished after the writes.

    Map (each file's ``summarize``, done with its parse) → combine here → the
    corpus and states broadcast with each detect batch → map (``detect_file``).
    Unchanged files are parsed for the corpus once edges are known to be redone.
    """

    def __init__(self, runner: _Runner, changed: Sequence[Future], unchanged: Sequence[FileEntry], *,
                 forced: bool) -> None:
        self.runner = runner
        self.changed = changed
        self.unchanged_entries = unchanged
        self.unchanged: list[Future] = []
        self.needed = False
        self.states: dict[str, Any] | None = None
        self.batches: list[Future] = []
        if forced:
            self._need()

    def _need(self) -> None:
        if not self.needed:
            self.needed = True
            self.runner.expect(len(self.unchanged_entries))
            self.unchanged = [self.runner.submit(parse_batch, batch, True)
                              for batch in _chunks(self.unchanged_entries, PARSE_BATCH_FILES)]

    def changed_parsed(self, future: Future) -> None:
        """A batch of changed files is parsed: one that parsed means edges are redone."""
        if any(o.failure is None for o in future.result()):
            self._need()

    def ready(self) -> bool:
        return self.needed and all(f.done() for f in (*self.changed, *self.unchanged))

    def unchanged_failures(self) -> list[dict[str, str]]:
        return [{"path": o.entry.rel_path, "reason": o.failure}
                for f in self.unchanged for o in f.result() if o.failure is not None]

    def start(self) -> None:
        if self.states is not None:
            return
        files: dict[str, tuple[SourceDocument, ...]] = {}
        partials: dict[str, Any] = {}
        for future in (*self.changed, *self.unchanged):
            for outcome in future.result():
                if outcome.docs:
                    files[outcome.entry.rel_path] = outcome.docs
                    partials[outcome.entry.rel_path] = outcome.partial or {}
        corpus = Corpus(files)
        ordered = sorted(files)
        self.states = combine(self.runner.plugins.detectors, (partials[path] for path in ordered), corpus)
        shared: Any = (corpus, self.states) if self.runner.in_process else Broadcast.pack(corpus, self.states)
        work = [(path, files[path]) for path in ordered]
        self.batches = [self.runner.submit(detect_batch, shared, batch)
                        for batch in _chunks(work, DETECT_BATCH_FILES)]

    def result(self) -> DetectionResult:
        self.start()
        edges = [draft for future in self.batches for draft in future.result()]
        edges.sort(key=lambda d: (d.src, d.type, d.dst))
        counters: dict[str, int] = {}
        for detector_state in (self.states or {}).values():
            for key, value in detector_state.counters.items():
                counters[key] = counters.get(key, 0) + int(value)
        return DetectionResult(edges=tuple(edges), counters=counters)


def _run_is_dirty(state: RunState | None, detector_tags: list[str]) -> bool:
    """An interrupted run, or a different set of detectors than last time, means edges must be redone."""
    if state is None:
        return False
    return state.dirty or (bool(detector_tags) and state.detectors != tuple(detector_tags))


def _datasets_after(prior: Mapping[str, FileState], changed: Sequence[_Parsed], removed: Sequence[str],
                    root_id: str) -> list[str]:
    """The dataset indices the brain's files produce documents in once this run's writes are in."""
    refs = {path: state.docs for path, state in prior.items()}
    for parsed in changed:
        refs[parsed.entry.rel_path] = tuple(doc_ref(dataset_index(doc.dataset, root_id), doc.doc_id)
                                            for doc in parsed.docs)
    for path in removed:
        refs.pop(path, None)
    return sorted({split_ref(ref)[0] for docs in refs.values() for ref in docs})


def _file_write(rel_path: str, parsed: _Parsed | None, prior: Mapping[str, FileState], root_id: str) -> FileWrite:
    """One file's documents as parsed now and the ones it no longer yields (all of them once it is gone)."""
    documents = tuple(IndexedDocument(dataset_index(doc.dataset, root_id), doc.doc_id, doc.to_source())
                      for doc in parsed.docs) if parsed is not None else ()
    known = prior.get(rel_path)
    now = {doc_ref(doc.index, doc.id) for doc in documents}
    stale = tuple(sorted(set(known.docs if known is not None else ()) - now))
    stamp = FileStamp(parsed.entry.mtime_ns, parsed.entry.size, parsed.digest) if parsed is not None else None
    return FileWrite(path=rel_path, stamp=stamp, documents=documents, stale=stale)


def _write_documents(sink: BrainSink, brain: str, root_id: str, parses: Sequence[Future], removed: Sequence[str],
                     prior: Mapping[str, FileState], now_ms: int, summary: RunSummary, progress: Progress,
                     detection: _Detection | None) -> list[_Parsed]:
    """Write changed files' documents as their parses come in, then forget removed files.

    A batch of whole files per transaction. Between batches, once every file is
    parsed and edges are to be redone, detection is started so the executor
    works on it while the remaining batches are written. Returns the files
    parsed now (failures are reported in ``summary``).
    """
    changed: list[_Parsed] = []
    work: list[tuple[str, _Parsed | None]] = []

    def flush(everything: bool) -> None:
        while len(work) >= BATCH_FILES or (everything and work):
            batch = [_file_write(path, parsed, prior, root_id) for path, parsed in work[:BATCH_FILES]]
            del work[:BATCH_FILES]
            count = sink.write_files(brain, batch, now_ms)
            summary.documents += count
            progress("documents", count)
            if detection is not None and detection.ready():
                detection.start()

    for future in parses:
        outcomes = future.result()
        if detection is not None:
            detection.changed_parsed(future)
        for outcome in outcomes:
            if outcome.failure is not None:
                summary.fail(outcome.entry.rel_path, outcome.failure)
                continue
            if not outcome.docs:
                summary.skip(outcome.entry.rel_path, NO_FORMAT, NO_FORMAT_REASON)
            # A file no format accepts is not part of the corpus, but it is remembered so it is not re-read.
            parsed = _Parsed(outcome.entry, outcome.docs, outcome.digest)
            changed.append(parsed)
            work.append((outcome.entry.rel_path, parsed))
        progress("files", len(outcomes))
        flush(everything=False)
    work.extend((path, None) for path in removed)
    flush(everything=True)
    return changed


def _detect_and_reconcile(sink: BrainSink, detection: _Detection, brain: str, datasets: list[str], now_ms: int,
                          summary: RunSummary, progress: Progress) -> None:
    """Finish detection over the whole corpus and bring the brain's machine-written edges in line.

    Edges the corpus no longer teaches (a removed file, a changed file's old
    mtime, a link that went away) are soft-invalidated; new ones are written.
    An edge already standing under the same id is left alone, so a re-run over
    unchanged files rewrites nothing. A claim a person rejected is stored retired.
    """
    result = detection.result()
    summary.edges_capped = int(result.counters.get("edges_capped", 0))
    drafts = [d for d in result.edges if not any(node_id_problem(f, getattr(d, f)) for f in ("src", "dst", "type"))]
    summary.edges_too_long = len(result.edges) - len(drafts)
    wanted = {edge_id(d.src, d.type, d.dst, d.valid_at): d for d in drafts}
    standing = sink.standing_edges(brain)
    settled = standing.settled
    stale = sorted(eid for eid in standing.live if eid not in wanted)
    fresh = [d for eid, d in wanted.items() if eid not in settled]
    if stale:
        summary.edges_invalidated = sink.invalidate_edges(brain, stale, now_ms)
    written = sink.write_edges(brain, fresh, created_at=now_ms, nodes_index=",".join(datasets) or None)
    for draft in fresh:
        summary.edges_by_type[draft.type] = summary.edges_by_type.get(draft.type, 0) + 1
    summary.claims_suppressed = written.suppressed
    progress("edges", len(fresh))


__all__ = ["BATCH_FILES", "DETECT_BATCH_FILES", "PARSE_BATCH_FILES", "POOL_MIN_FILES", "RunSummary", "run"]
