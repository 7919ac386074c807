"""One autoindex run: walk a folder, skip what is unchanged, parse, write documents, detect edges, reconcile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import attrs
import xxhash

from xerj_core.autoindex.detect import Corpus, collect_detectors, run_detectors
from xerj_core.autoindex.formats import FormatError, collect_formats, parse_file
from xerj_core.autoindex.walk import FileEntry, Skipped, walk
from xerj_core.errors import IllegalArgument, IndexNotFound
from xerj_core.graph.brain import TRUST_REJECTED, edge_id, edges_index, validate_brain_name
from xerj_core.model import SourceDocument
from xerj_core.store import BulkOp, Store
from xerj_core.text import derive_brain_name

# Where a run remembers each file it indexed (mtime, size, hash, the documents it produced).
FILES_INDEX = ".xerj-autoindex-files"
CATALOG_INDEX = "autoindex-catalog"

DATASET_MAPPING = {
    "properties": {
        "ax_path": {"type": "keyword"},
        "title": {"type": "text"},
        "text": {"type": "text"},
        "section": {"type": "keyword"},
        "kind": {"type": "keyword"},
        "mtime": {"type": "date", "format": "epoch_millis"},
        "format": {"type": "keyword"},
    }
}
FILES_MAPPING = {
    "dynamic": False,
    "properties": {
        "brain": {"type": "keyword"},
        "ax_path": {"type": "keyword"},
        "mtime_ns": {"type": "long"},
        "size": {"type": "long"},
        "hash": {"type": "keyword"},
        "docs": {"type": "keyword"},
        "indexed_at": {"type": "date", "format": "epoch_millis"},
    },
}
CATALOG_MAPPING = {
    "properties": {
        "dataset": {"type": "keyword"},
        "roots": {"type": "keyword"},
        "brains": {"type": "keyword"},
        "documents": {"type": "long"},
        "updated_at": {"type": "date", "format": "epoch_millis"},
    }
}
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


def file_state_id(brain: str, rel_path: str) -> str:
    return f"{brain}/{rel_path}"


def _run_state_id(brain: str) -> str:
    # Not a path: a path never starts with a NUL.
    return f"{brain}/\x00run"


def run(engine: Any, folder: str | Path, *, brain: str | None = None, graph: bool = True,
        progress: Progress = _noop, clock: Callable[[], int] | None = None) -> RunSummary:
    """Index ``folder`` into ``engine`` and, with ``graph``, detect and reconcile the brain's edges.

    Unchanged files (same mtime and size as last run) are not read again. A file
    that cannot be read or parsed is reported in the summary and whatever was
    indexed for it before stays. Documents are written a batch of whole files per
    transaction, so an interrupted run leaves every file as it was or as it is now.
    """
    started = time.perf_counter()
    now_ms = (clock or (lambda: int(time.time() * 1000)))()
    root = Path(folder)
    if not root.is_dir():
        raise IllegalArgument(f"folder [{folder}] does not exist or is not a directory")
    brain_name = brain if brain is not None else derive_brain_name(root.resolve())
    validate_brain_name(brain_name)
    summary = RunSummary(root=str(root.resolve()), brain=brain_name, graph=graph)
    store: Store = engine.store
    formats = collect_formats(engine.pm)
    _ensure_indices(store)
    prior = _load_file_states(store, brain_name)

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
        state = prior.get(entry.rel_path)
        if state is not None and state["mtime_ns"] == entry.mtime_ns and state["size"] == entry.size:
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

    tags = sorted(d.tag for d in collect_detectors(engine.pm).values()) if graph else []
    dirty = bool(changed or removed) or _run_is_dirty(store, brain_name, tags)
    if changed or removed:
        _write_documents(store, brain_name, changed, removed, prior, now_ms, summary, progress)
    summary.files_indexed = sum(1 for p in changed if p.docs)
    datasets = _datasets_of_brain(store, brain_name)
    summary.datasets = datasets
    if graph and (dirty or not store.exists(edges_index(brain_name))):
        current = {p.entry.rel_path: list(p.docs) for p in changed if p.docs}
        for entry in unchanged:
            parsed = _read_and_parse(formats, entry, summary)
            if parsed is not None and parsed.docs:
                current[entry.rel_path] = list(parsed.docs)
        _detect_and_reconcile(engine, brain_name, current, datasets, now_ms, summary, progress)
    if dirty:
        store.put(FILES_INDEX, {"brain": brain_name, "dirty": False, "finished_at": now_ms, "detectors": tags},
                  _run_state_id(brain_name))
        _update_catalog(store, brain_name, summary.root, datasets, now_ms)
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


def _ensure_indices(store: Store) -> None:
    def create(txn) -> None:
        for name, mapping in ((FILES_INDEX, FILES_MAPPING), (CATALOG_INDEX, CATALOG_MAPPING)):
            if not txn.exists(name):
                txn.create_index(name, mapping)

    store.transact(create)


def _rows_of_brain(reader: Any, brain: str) -> Iterable[int]:
    ordinal = reader.field_dictionary("brain").ordinal(brain)
    if ordinal is None:
        return []
    column = reader.column("brain")
    import numpy as np

    return np.flatnonzero((column.values == ordinal) & column.present & reader.live).tolist()


def _load_file_states(store: Store, brain: str) -> dict[str, dict[str, Any]]:
    states = {}
    with store.reader(FILES_INDEX) as reader:
        for row in _rows_of_brain(reader, brain):
            found = reader.document(row)
            if found is not None and "ax_path" in found[1]:
                states[found[1]["ax_path"]] = found[1]
    return states


def _run_is_dirty(store: Store, brain: str, detector_tags: list[str]) -> bool:
    """An interrupted run, or a different set of detectors than last time, means edges must be redone."""
    found = store.get(FILES_INDEX, _run_state_id(brain))
    if found is None:
        return False
    state = found[0]
    return bool(state.get("dirty")) or (bool(detector_tags) and state.get("detectors") != detector_tags)


def _datasets_of_brain(store: Store, brain: str) -> list[str]:
    datasets: set[str] = set()
    for state in _load_file_states(store, brain).values():
        datasets.update(ref.split("/", 1)[0] for ref in state.get("docs", ()))
    return sorted(datasets)


def _write_documents(store: Store, brain: str, changed: Sequence[_Parsed], removed: Sequence[str],
                     prior: Mapping[str, dict[str, Any]], now_ms: int, summary: RunSummary,
                     progress: Progress) -> None:
    """Write changed files' documents and forget removed files, a batch of whole files per transaction."""
    work: list[tuple[str, _Parsed | None]] = [(p.entry.rel_path, p) for p in changed]
    work.extend((path, None) for path in removed)
    for start in range(0, len(work), BATCH_FILES):
        batch = work[start:start + BATCH_FILES]

        def apply(txn, batch=batch) -> int:
            written = 0
            txn.put(FILES_INDEX, {"brain": brain, "dirty": True}, _run_state_id(brain))
            for rel_path, parsed in batch:
                old_refs = set(prior.get(rel_path, {}).get("docs", ()))
                new_refs: list[str] = []
                if parsed is not None:
                    for doc in parsed.docs:
                        if not txn.exists(doc.dataset):
                            txn.create_index(doc.dataset, DATASET_MAPPING)
                        txn.put(doc.dataset, doc.to_source(), doc.doc_id)
                        new_refs.append(f"{doc.dataset}/{doc.doc_id}")
                        written += 1
                for ref in sorted(old_refs - set(new_refs)):
                    dataset, doc_id = ref.split("/", 1)
                    if txn.exists(dataset):
                        txn.delete(dataset, doc_id)
                state_id = file_state_id(brain, rel_path)
                if parsed is None:
                    txn.delete(FILES_INDEX, state_id)
                    continue
                txn.put(FILES_INDEX, {
                    "brain": brain, "ax_path": rel_path, "mtime_ns": parsed.entry.mtime_ns,
                    "size": parsed.entry.size, "hash": parsed.digest, "docs": new_refs, "indexed_at": now_ms,
                }, state_id)
            return written

        count = store.transact(apply)
        summary.documents += count
        progress("documents", count)


def _detect_and_reconcile(engine: Any, brain: str, files: dict[str, list[SourceDocument]],
                          datasets: list[str], now_ms: int, summary: RunSummary, progress: Progress) -> None:
    """Run the detectors over the whole corpus and bring the brain's machine-written edges in line.

    Edges the corpus no longer teaches (a removed file, a changed file's old
    mtime, a link that went away) are soft-invalidated; new ones are written.
    An edge already standing under the same id is left alone, so a re-run over
    unchanged files rewrites nothing. A claim a person rejected is stored retired.
    """
    detectors = collect_detectors(engine.pm)
    result = run_detectors(detectors, files, Corpus(files))
    summary.edges_capped = int(result.counters.get("edges_capped", 0))
    wanted = {edge_id(d.src, d.type, d.dst, d.valid_at): d for d in result.edges}
    live, settled = _standing_edges(engine.store, brain)
    stale = sorted(eid for eid in live if eid not in wanted)
    fresh = [d for eid, d in wanted.items() if eid not in settled]
    if stale:
        summary.edges_invalidated = engine.graph.invalidate_edges(brain, edge_ids=stale, at=now_ms)
    written = engine.graph.write_edges(brain, fresh, created_at=now_ms, nodes_index=",".join(datasets) or None)
    for draft in fresh:
        summary.edges_by_type[draft.type] = summary.edges_by_type.get(draft.type, 0) + 1
    summary.claims_suppressed = int(written.get("suppressed", 0))
    progress("edges", len(fresh))


def _standing_edges(store: Store, brain: str) -> tuple[set[str], set[str]]:
    """``(live ids, settled ids)`` of the brain's edges, read off the columns.

    Settled edges need no write: they are live, or retired because a person
    rejected their claim. An edge retired by an earlier reconcile is not settled:
    if the corpus teaches it again, it is asserted again.
    """
    import numpy as np

    try:
        with store.reader(edges_index(brain)) as reader:
            if reader.field("src") is None:
                return set(), set()
            invalid = reader.column("invalid_at")
            edges = reader.live & reader.column("src").present
            live_rows = np.flatnonzero(edges & ~invalid.present)
            rejected_rows = np.empty(0, np.int64)
            trust_ord = reader.field_dictionary("trust").ordinal(TRUST_REJECTED)
            if trust_ord is not None:
                trust = reader.column("trust")
                rejected_rows = np.flatnonzero(edges & trust.present & (trust.values == trust_ord))
            live = {reader.id_of(int(row)) for row in live_rows}
            rejected = {reader.id_of(int(row)) for row in rejected_rows}
    except IndexNotFound:
        return set(), set()
    live.discard(None)
    rejected.discard(None)
    return live, live | rejected


def _update_catalog(store: Store, brain: str, root: str, datasets: list[str], now_ms: int) -> None:
    def apply(txn) -> None:
        for dataset in datasets:
            found = txn.get(CATALOG_INDEX, dataset) or {}
            roots = sorted(set(found.get("roots", [])) | {root})
            brains = sorted(set(found.get("brains", [])) | {brain})
            count = 0
            if txn.exists(dataset):
                count = txn.index(dataset).state.live
            txn.put(CATALOG_INDEX, {"dataset": dataset, "roots": roots, "brains": brains, "documents": count,
                                    "updated_at": now_ms}, dataset)

    store.transact(apply)
