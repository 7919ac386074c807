"""One autoindex run: walk a folder, skip what is unchanged, parse, write documents, detect edges, reconcile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
import xxhash

from xerj_core.autoindex.detect import Corpus, collect_detectors, run_detectors
from xerj_core.autoindex.formats import FormatError, collect_formats, parse_file
from xerj_core.autoindex.sink import (
    CATALOG_INDEX,
    CATALOG_MAPPING,
    DATASET_MAPPING,
    FILES_INDEX,
    FILES_MAPPING,
    BrainSink,
    FileStamp,
    FileState,
    FileWrite,
    IndexedDocument,
    LocalSink,
    RunFinish,
    RunState,
    doc_ref,
    file_state_id,
    split_ref,
)
from xerj_core.autoindex.walk import FileEntry, Skipped, walk
from xerj_core.errors import IllegalArgument
from xerj_core.graph.brain import edge_id, validate_brain_name
from xerj_core.model import SourceDocument
from xerj_core.plugins import get_plugin_manager
from xerj_core.text import derive_brain_name

# Files per write transaction: an interrupted run loses at most this batch, never half a file.
BATCH_FILES = 256


@attrs.define
class RunSummary:
    """What a run did, as the closing summary (and ``--json``) reports it."""

    root: str
    brain: str
    graph: bool
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_failed: list[dict[str, str]] = attrs.field(factory=list)
    documents: int = 0
    edges_by_type: dict[str, int] = attrs.field(factory=dict)
    edges_capped: int = 0
    edges_invalidated: int = 0
    claims_suppressed: int = 0
    datasets: list[str] = attrs.field(factory=list)
    elapsed_s: float = 0.0

    @property
    def edges_written(self) -> int:
        return sum(self.edges_by_type.values())

    def to_json(self) -> dict[str, Any]:
        body = attrs.asdict(self)
        body["edges_written"] = self.edges_written
        return body


@attrs.frozen
class _Parsed:
    entry: FileEntry
    docs: tuple[SourceDocument, ...]
    digest: str


Progress = Callable[[str, int], None]


def _noop(_event: str, _count: int) -> None:
    pass



def run(target: Any, folder: str | Path, *, brain: str | None = None, graph: bool = True,
        progress: Progress = _noop, clock: Callable[[], int] | None = None, pm: Any = None) -> RunSummary:
    """Index ``folder`` into ``target`` and, with ``graph``, detect and reconcile the brain's edges.

    ``target`` is an engine (the run writes its store through a :class:`LocalSink`)
    or any :class:`BrainSink`, such as a RemoteSink talking to a running server.
    Formats and detectors come from ``pm`` (default: the engine's, else the
    installed plugins): parsing and detection always run here, only storage is
    behind the sink. Unchanged files (same mtime and size as last run) are not
    read again. A file that cannot be read or parsed is reported in the summary
    and whatever was indexed for it before stays. Documents are written a batch
    of whole files per transaction, so an interrupted run leaves every file as
    it was or as it is now.
    """
    started = time.perf_counter()
    now_ms = (clock or (lambda: int(time.time() * 1000)))()
    sink = target if isinstance(target, BrainSink) else LocalSink(target)
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
    prior = state.files

    entries: list[FileEntry] = []
    for item in walk(root):
        if isinstance(item, Skipped):
            summary.files_failed.append({"path": item.rel_path, "reason": item.reason})
        else:
            entries.append(item)
    summary.files_seen = len(entries)
    failed_paths = {f["path"] for f in summary.files_failed}

    changed: list[_Parsed] = []
    unchanged: list[FileEntry] = []
    for entry in entries:
        known = prior.get(entry.rel_path)
        if known is not None and known.mtime_ns == entry.mtime_ns and known.size == entry.size:
            unchanged.append(entry)
            progress("files", 1)
            continue
        parsed = _read_and_parse(formats, entry, summary)
        progress("files", 1)
        if parsed is not None:
            changed.append(parsed)
        elif entry.rel_path in prior:
            failed_paths.add(entry.rel_path)  # keep what was indexed before
    summary.files_unchanged = len(unchanged)
    seen_paths = {e.rel_path for e in entries} | failed_paths
    removed = sorted(path for path in prior if path not in seen_paths)
    summary.files_removed = len(removed)

    detectors = collect_detectors(pm) if graph else {}
    tags = sorted(d.tag for d in detectors.values())
    dirty = bool(changed or removed) or _run_is_dirty(state.run, tags)
    if changed or removed:
        _write_documents(sink, brain_name, changed, removed, prior, now_ms, summary, progress)
    summary.files_indexed = sum(1 for p in changed if p.docs)
    datasets = _datasets_after(prior, changed, removed)
    summary.datasets = datasets
    if graph and (dirty or not state.edges_index):
        current = {p.entry.rel_path: list(p.docs) for p in changed if p.docs}
        for entry in unchanged:
            parsed = _read_and_parse(formats, entry, summary)
            if parsed is not None and parsed.docs:
                current[entry.rel_path] = list(parsed.docs)
        _detect_and_reconcile(sink, detectors, brain_name, current, datasets, now_ms, summary, progress)
    if dirty:
        sink.finish(brain_name, RunFinish(root=summary.root, datasets=tuple(datasets), detectors=tuple(tags),
                                          finished_at=now_ms))
    summary.elapsed_s = round(time.perf_counter() - started, 3)
    return summary


def _read_and_parse(formats: Mapping[str, Any], entry: FileEntry, summary: RunSummary) -> _Parsed | None:
    try:
        data = entry.path.read_bytes()
    except OSError as exc:
        summary.files_failed.append({"path": entry.rel_path, "reason": f"unreadable: {exc.strerror or exc}"})
        return None
    try:
        docs = parse_file(formats, entry.rel_path, data, entry.mtime_ms)
    except FormatError as exc:
        summary.files_failed.append({"path": entry.rel_path, "reason": exc.reason})
        return None
    # A file no format accepts is not part of the corpus, but it is remembered so it is not re-read.
    return _Parsed(entry, tuple(docs or ()), xxhash.xxh3_64_hexdigest(data))


def _run_is_dirty(state: RunState | None, detector_tags: list[str]) -> bool:
    """An interrupted run, or a different set of detectors than last time, means edges must be redone."""
    if state is None:
        return False
    return state.dirty or (bool(detector_tags) and state.detectors != tuple(detector_tags))


def _datasets_after(prior: Mapping[str, FileState], changed: Sequence[_Parsed], removed: Sequence[str]) -> list[str]:
    """The datasets the brain's files produce documents in once this run's writes are in."""
    refs = {path: state.docs for path, state in prior.items()}
    for parsed in changed:
        refs[parsed.entry.rel_path] = tuple(doc_ref(doc.dataset, doc.doc_id) for doc in parsed.docs)
    for path in removed:
        refs.pop(path, None)
    return sorted({split_ref(ref)[0] for docs in refs.values() for ref in docs})


def _file_write(rel_path: str, parsed: _Parsed | None, prior: Mapping[str, FileState]) -> FileWrite:
    """One file's documents as parsed now and the ones it no longer yields (all of them once it is gone)."""
    documents = tuple(IndexedDocument(doc.dataset, doc.doc_id, doc.to_source()) for doc in parsed.docs) \
        if parsed is not None else ()
    known = prior.get(rel_path)
    now = {doc_ref(doc.index, doc.id) for doc in documents}
    stale = tuple(sorted(set(known.docs if known is not None else ()) - now))
    stamp = FileStamp(parsed.entry.mtime_ns, parsed.entry.size, parsed.digest) if parsed is not None else None
    return FileWrite(path=rel_path, stamp=stamp, documents=documents, stale=stale)


def _write_documents(sink: BrainSink, brain: str, changed: Sequence[_Parsed], removed: Sequence[str],
                     prior: Mapping[str, FileState], now_ms: int, summary: RunSummary, progress: Progress) -> None:
    """Write changed files' documents and forget removed files, a batch of whole files per transaction."""
    work: list[tuple[str, _Parsed | None]] = [(p.entry.rel_path, p) for p in changed]
    work.extend((path, None) for path in removed)
    for start in range(0, len(work), BATCH_FILES):
        batch = [_file_write(path, parsed, prior) for path, parsed in work[start:start + BATCH_FILES]]
        count = sink.write_files(brain, batch, now_ms)
        summary.documents += count
        progress("documents", count)


def _detect_and_reconcile(sink: BrainSink, detectors: Mapping[str, Any], brain: str,
                          files: dict[str, list[SourceDocument]], datasets: list[str], now_ms: int,
                          summary: RunSummary, progress: Progress) -> None:
    """Run the detectors over the whole corpus and bring the brain's machine-written edges in line.

    Edges the corpus no longer teaches (a removed file, a changed file's old
    mtime, a link that went away) are soft-invalidated; new ones are written.
    An edge already standing under the same id is left alone, so a re-run over
    unchanged files rewrites nothing. A claim a person rejected is stored retired.
    """
    result = run_detectors(detectors, files, Corpus(files))
    summary.edges_capped = int(result.counters.get("edges_capped", 0))
    wanted = {edge_id(d.src, d.type, d.dst, d.valid_at): d for d in result.edges}
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


__all__ = ["BATCH_FILES", "CATALOG_INDEX", "CATALOG_MAPPING", "DATASET_MAPPING", "FILES_INDEX", "FILES_MAPPING",
           "RunSummary", "file_state_id", "run"]
