"""Where an autoindex run keeps what it learns: the BrainSink protocol, its records, and LocalSink (embedded).

A run reads and writes storage only through the few coarse, batched operations
of :class:`BrainSink`. :class:`LocalSink` does them on an engine's store, each
write one transaction; ``xerj_core.autoindex.remote.RemoteSink`` does the same
against a running server, whose routes call a LocalSink of their own.
"""

from __future__ import annotations

import contextlib
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import attrs
import numpy as np
import xxhash

from xerj_core.autoindex.formats import WORDS_MARK
from xerj_core.errors import DocumentRefused, IndexNotFound
from xerj_core.graph.brain import edges_index
from xerj_core.graph.idkeys import IdSet
from xerj_core.model import EdgeDraft
from xerj_core.store import residency
from xerj_core.store.limits import MAX_ID_BYTES
from xerj_core.store.records import first_refusal
from xerj_core.text import CountedTerms

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.graph.service import GraphService
    from xerj_core.store import Store

# The text field of a dataset document whose terms the parsing process counts (``text.counted_terms``), so the
# writer does not tokenize it again: the bulk of every document's words.
COUNTED_FIELD = "text"
# ... in the datasets where that pays. Code: a file's card lists its imports, which sends every document of a
# write batch down the store's per-record path (a tokenizer call per value): on 5,000 .py files the writer's CPU
# for their documents fell from 12.5-14.9 s to 6.3-8.0 s. Generated notes take the store's column-wise path,
# whose batch tokenizer is as fast as writing from counts (2.6-2.9 s either way on 10,000), so there the counting
# would only add to the companion's CPU.
COUNTED_DATASETS = frozenset({"ax-code"})

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
        # the text encoding a file was read with (formats.decode_text); a keyword, not dynamic text
        "encoding": {"type": "keyword"},
        # a source file's language (builtin_formats.code): a keyword to filter on
        "language": {"type": "keyword"},
    }
}
# A file's ``hash`` and ``docs`` (its documents' refs) are read back from its source only, never searched: left
# unmapped, they cost no dictionary entry each (a run's every document ref would be a new term).
FILES_MAPPING = {
    "dynamic": False,
    "properties": {
        "brain": {"type": "keyword"},
        "ax_path": {"type": "keyword"},
        "mtime_ns": {"type": "long"},
        "size": {"type": "long"},
        "indexed_at": {"type": "date", "format": "epoch_millis"},
    },
}
# The catalog holds two kinds of entry: a card per dataset index (id: the index name), and a record
# per indexed root (id: ``root:<root id>``; no index name holds a colon). ``kind`` tells them apart.
CATALOG_MAPPING = {
    "properties": {
        "kind": {"type": "keyword"},
        "dataset": {"type": "keyword"},
        "source_dataset": {"type": "keyword"},
        "root_id": {"type": "keyword"},
        "root": {"type": "keyword"},
        "brain": {"type": "keyword"},
        "datasets": {"type": "keyword"},
        "roots": {"type": "keyword"},
        "brains": {"type": "keyword"},
        "documents": {"type": "long"},
        "layout": {"type": "long"},
        "updated_at": {"type": "date", "format": "epoch_millis"},
    }
}
# The catalog entry saying which layout the data directory's autoindex data is in (see autoindex.migrate).
LAYOUT_ID = "layout:autoindex"
# 2: each root's documents in dataset indices of its own (``ax-notes-<root id>``).
LAYOUT = 2


def _map_new_fields(txn, index: str) -> None:
    """Map the fields :data:`DATASET_MAPPING` gained since ``index`` was made (``language``), before a put would
    map them dynamically as text."""
    fields = txn.index(index).mapping.fields
    missing = {path: spec for path, spec in DATASET_MAPPING["properties"].items() if path not in fields}
    if missing:
        txn.put_mapping(index, {"properties": missing})


def root_record_id(root_id: str) -> str:
    return f"root:{root_id}"


def derive_root_id(brain: str, width: int = 8) -> str:
    """The root id a brain's folder gets: hex of a hash of the brain's name, ``width`` characters.

    A brain is built from exactly one folder, so the brain's name identifies its
    root; the id is derived rather than drawn so two runs starting at once agree.
    On the rare clash with another brain's id the width doubles.
    """
    return xxhash.xxh3_64_hexdigest(f"xerj-root\0{brain}".encode())[:width] if width <= 16 else \
        xxhash.xxh3_128_hexdigest(f"xerj-root\0{brain}".encode())[:width]


def dataset_index(dataset: str, root_id: str) -> str:
    """The index holding one root's documents of a format's dataset: ``ax-notes`` → ``ax-notes-1a2b3c4d``."""
    return f"{dataset}-{root_id}"


def file_state_id(brain: str, rel_path: str) -> str:
    """The id of a file's state: ``brain/path``, or a hash of the path where that would pass the id limit.

    (A path never holds a NUL, so the hashed form names no real path.) States are
    read back by their ``ax_path`` field, so both forms load alike.
    """
    plain = f"{brain}/{rel_path}"
    if len(plain.encode()) <= MAX_ID_BYTES:
        return plain
    return f"{brain}/\x00path:{xxhash.xxh3_128_hexdigest(rel_path.encode())}"


def run_state_id(brain: str) -> str:
    # Not a path: a path never starts with a NUL.
    return f"{brain}/\x00run"


def doc_ref(index: str, doc_id: str) -> str:
    """How a file state names a document it produced: ``dataset/id`` (an index name holds no ``/``)."""
    return f"{index}/{doc_id}"


def split_ref(ref: str) -> tuple[str, str]:
    index, _, doc_id = ref.partition("/")
    return index, doc_id


# -- records -----------------------------------------------------------------------------------


@attrs.frozen
class Declined:
    """Why a file that yields no document was skipped, when its format declined it (see
    ``formats.FormatDeclined``): the skip kind and the reason, remembered so later runs report it the same."""

    kind: str
    reason: str


@attrs.frozen
class FileState:
    """What the last run remembered of a file: its stamp and the documents (``dataset/id``) it produced, or why it
    produced none."""

    mtime_ns: int
    size: int
    hash: str = ""
    docs: tuple[str, ...] = ()
    skipped: Declined | None = None


@attrs.frozen
class RunState:
    """The brain's run marker: ``dirty`` while a run is writing, and the detector tags and the formats (see
    :func:`~xerj_core.autoindex.formats.format_identities`) of the last finished run (None: not recorded)."""

    dirty: bool = False
    detectors: tuple[str, ...] | None = None
    finished_at: int | None = None
    formats: tuple[str, ...] | None = None


@attrs.frozen
class BrainState:
    """Everything a run reads before it starts: file states by root-relative path, the run marker, and
    whether the brain has an edges index yet."""

    files: dict[str, FileState] = attrs.field(factory=dict)
    run: RunState | None = None
    edges_index: bool = False
    # The brain's root: its id (dataset indices are named with it) and the folder it was last built from.
    root_id: str = ""
    root: str | None = None


@attrs.frozen
class FileStamp:
    """A file as the walk saw it now: modification time, size and content hash."""

    mtime_ns: int
    size: int
    hash: str


@attrs.frozen
class IndexedDocument:
    """One document to write: its dataset index, id and source."""

    index: str
    id: str
    source: dict[str, Any]


# The stamp of a file written in several transactions (see ``pipeline.SHARE_BYTES``) until its last one: no file
# on disk has it (its size is negative, its hash empty), so the next run reads the file again.
UNFINISHED = FileStamp(-1, -1, "")


@attrs.frozen
class FileWrite:
    """One file's share of a batch.

    ``stamp`` is None when the file left the corpus (its state is forgotten);
    ``stale`` are the ``dataset/id`` refs it produced before and produces no more;
    ``kept`` are refs it produced before and still produces as they are, not written again
    (a file restamped: a new mtime over the same bytes); ``skipped``, why its format declined it.
    ``continues``: the file's state keeps the documents it records already, less ``stale``, beside this
    write's: a share of a file written in several transactions (see ``pipeline.SHARE_BYTES``), whose state
    holds its previous version's and the shares' before, or a file restamped, whose documents all stand.
    """

    path: str
    stamp: FileStamp | None
    documents: tuple[IndexedDocument, ...] = ()
    stale: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    skipped: Declined | None = None
    continues: bool = False


@attrs.frozen
class StandingEdges:
    """The brain's edges a reconcile compares against: ``live`` ones, and ``settled`` ones (live, or retired
    under a person's rejection) that need no write."""

    live: IdSet = attrs.field(factory=IdSet)
    rejected: IdSet = attrs.field(factory=IdSet)

    @property
    def settled(self) -> IdSet:
        return self.live | self.rejected


@attrs.frozen
class LiveClaim:
    """A live edge as the claim it makes: its endpoints, type and every field a detector's draft sets (a draft of
    a changed file that matches one on all of them, with a ``valid_at`` no earlier, continues this edge)."""

    edge_id: str
    src: str
    type: str
    dst: str
    detector: str | None = None
    weight: float | None = None
    confidence: float | None = None
    valid_at: int | None = None
    src_format: str | None = None
    dst_format: str | None = None
    quote: str | None = None
    source: str | None = None
    offset: int | None = None


@attrs.frozen
class LiveClaims:
    """The live claims a sink answers with (see :meth:`BrainSink.live_claims`)."""

    claims: tuple[LiveClaim, ...] = ()


@attrs.frozen
class EdgeWriteSummary:
    """What a batch of edge drafts did (machine-writer semantics)."""

    written: int = 0
    created: int = 0
    updated: int = 0
    suppressed: int = 0
    self_edges_skipped: int = 0

    def __add__(self, other: "EdgeWriteSummary") -> "EdgeWriteSummary":
        return EdgeWriteSummary(*(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other), strict=True)))


@attrs.frozen
class RunFinish:
    """The close of a run: the run marker made clean, and the catalog entry of each dataset brought up to date."""

    root: str
    datasets: tuple[str, ...]
    detectors: tuple[str, ...]
    finished_at: int
    root_id: str = ""
    formats: tuple[str, ...] | None = None  # None: not known (a client that does not say), nothing recorded


# -- the protocol ------------------------------------------------------------------------------


@runtime_checkable
class BrainSink(Protocol):
    """The storage operations of an autoindex run, coarse and batched. Each write is atomic."""

    def load(self, brain: str) -> BrainState:
        """The brain's file states, run marker and whether its edges index exists."""

    def write_files(self, brain: str, files: Sequence[FileWrite], indexed_at: int,
                    counted: Sequence[Sequence[CountedTerms | None] | None] | None = None) -> int:
        """Write these files' documents and states (and mark the run dirty) in one transaction; returns how
        many documents were written (a document other than a file's card that the sink holds as it is, its
        ``mtime`` aside, need not be: see :func:`_standing`). ``counted``: per file, ``text.counted_terms``
        of each of its documents' ``text`` (see :data:`COUNTED_FIELD`), or None where the caller did not count
        them; a sink may index those texts from the counts instead of tokenizing them, or ignore them."""

    def standing_edges(self, brain: str) -> StandingEdges:
        """The ids of the brain's live edges and of its edges retired by a person's rejection."""

    def live_claims(self, brain: str, files: Sequence[str]) -> LiveClaims:
        """The claims of the brain's live edges whose evidence cites one of ``files`` (its source)."""

    def invalidate_edges(self, brain: str, edge_ids: Sequence[str], at: int) -> int:
        """Soft-invalidate these live edges (a reconcile, not a rejection); returns how many."""

    def write_edges(self, brain: str, drafts: Sequence[EdgeDraft], *, created_at: int,
                    nodes_index: str | None) -> EdgeWriteSummary:
        """Write detector drafts as a machine writer: a claim a person rejected is stored retired."""

    def finish(self, brain: str, finish: RunFinish) -> None:
        """Mark the run clean and update the catalog, in one transaction."""

    def cache_dir(self) -> Path | None:
        """A directory of this machine where the run may keep its parse cache (see ``parsecache``), or None."""


# -- embedded ----------------------------------------------------------------------------------

# Edges per write transaction. Each one seals and merges the edges index and rewrites the dictionaries' pages it
# touches, so fewer, larger ones cost less: on 10,000 notes (133k edges) 2,000 per transaction wrote 3.1 GB to disk
# for a 0.3 GB data directory and cost the writer 13.9 s of CPU, 4,000 wrote 1.5 GB (12.2 s), 8,000 0.8 GB (11.2 s).
# The writer's peak RSS sits inside one: on 20,000 notes 2,000 and 4,096 peaked at 367-382 MB, 8,000 at 400-412 MB.
EDGES_PER_TRANSACTION = 4_096
# How often a long write transaction's resident map pages are given back (see LocalSink._releasing): a seal
# reads segments at memory speed, so a longer wait lets a burst of them stay resident; a call costs ~10 µs.
RELEASE_EVERY_S = 0.005
# ... once this process's resident file-backed memory (the map's pages, and the libraries': about 16 MB of
# them) passes this. At 48 MB a merge of big segments kept up to 32 MB of the map resident at the run's
# peak (20k notes: 396-401 MB, target 400); at 32 MB 385-389 MB, the writer's CPU unchanged.
RELEASE_ABOVE_BYTES = 32 << 20


def _ensure_indices(txn: Any) -> None:
    if not txn.exists(FILES_INDEX):
        txn.create_index(FILES_INDEX, FILES_MAPPING)
    if not txn.exists(CATALOG_INDEX):
        txn.create_index(CATALOG_INDEX, CATALOG_MAPPING)
        txn.put(CATALOG_INDEX, {"kind": "layout", "layout": LAYOUT}, LAYOUT_ID)


def root_of(get: Any, brain: str) -> tuple[str, str | None]:
    """``(root id, recorded folder or None)`` of ``brain``; ``get(index, id)`` reads a catalog entry."""
    width = 8
    while True:
        rid = derive_root_id(brain, width)
        found = get(CATALOG_INDEX, root_record_id(rid))
        if found is None or found.get("brain") == brain or width >= 32:
            return rid, (found or {}).get("root")
        width *= 2


def _rows_of_brain(reader: Any, brain: str) -> Iterable[int]:
    if reader.field("brain") is None:
        return []
    ordinal = reader.field_dictionary("brain").ordinal(brain)
    if ordinal is None:
        return []
    column = reader.column("brain")
    return np.flatnonzero((column.values == ordinal) & column.present & reader.live).tolist()


def _standing(txn: Any, brain: str, item: FileWrite, recorded: dict[str, Any] | None = None, rewrite: bool = False
              ) -> Callable[[IndexedDocument], bool]:
    """Which of a changed file's documents the store holds as they are now, its ``mtime`` aside: those are not
    written again.

    A section, message or attachment an edit left alone keeps its stored document, whose ``mtime`` stays that of
    the version that last changed it: appending one message to a 60 MiB mailbox wrote its 68,863 documents
    again, about 74 MB more data file each time. The file's own document (its card, whose id is its path) is
    always written, so it carries the file's mtime. Only documents the file produced before are compared: one
    read each, where a write costs its tokens, columns and postings. ``recorded``: the file's state, when the
    caller read it already (``{}`` for none). With ``rewrite`` (the brain's words were cut by an older tokenizer:
    see ``formats.WORDS_MARK``) none stands.
    """
    if rewrite or len(item.documents) < 2 or item.stamp is None:
        return _never
    before = recorded if recorded is not None else txn.get(FILES_INDEX, file_state_id(brain, item.path))
    produced = frozenset(before.get("docs") or ()) if before else frozenset()
    candidates: dict[str, set[str]] = {}
    for doc in item.documents:
        if doc.id != item.path and doc_ref(doc.index, doc.id) in produced:
            candidates.setdefault(doc.index, set()).add(doc.id)
    if not candidates:
        return _never
    for index, ids in candidates.items():
        txn.prefetch(index, sorted(ids))

    def stands(doc: IndexedDocument) -> bool:
        if doc.id not in candidates.get(doc.index, ()):
            return False
        stored = txn.get(doc.index, doc.id)
        if stored is None:
            return False
        # the store takes JSON's values only (a tuple is refused), so what it gives back compares value for value
        stored.pop("mtime", None)
        return bool(stored == {key: value for key, value in doc.source.items() if key != "mtime"})

    return stands


def _never(_doc: IndexedDocument) -> bool:
    return False


def _file_state(source: Mapping[str, Any]) -> FileState:
    skipped = source.get("skipped")
    return FileState(mtime_ns=source["mtime_ns"], size=source["size"], hash=source.get("hash") or "",
                     docs=tuple(source.get("docs") or ()),
                     skipped=Declined(str(skipped.get("kind")), str(skipped.get("reason")))
                     if isinstance(skipped, dict) else None)


def _run_state(source: Mapping[str, Any]) -> RunState:
    detectors, formats = source.get("detectors"), source.get("formats")
    return RunState(dirty=bool(source.get("dirty")),
                    detectors=tuple(detectors) if detectors is not None else None,
                    finished_at=source.get("finished_at"),
                    formats=tuple(formats) if formats is not None else None)


def root_record(rid: str, root: str | None, brain: str, datasets: Iterable[str], at: int) -> dict[str, Any]:
    """The catalog's record of one indexed root: its id, folder, brain and dataset indices."""
    record = {"kind": "root", "root_id": rid, "brain": brain, "datasets": sorted(datasets), "updated_at": at}
    if root is not None:
        record["root"] = root
    return record


def dataset_card(index: str, rid: str, root: str | None, brain: str, documents: int, at: int) -> dict[str, Any]:
    """The catalog's card of one dataset index (``roots`` and ``brains`` are one-element lists, as before)."""
    suffix = f"-{rid}"
    source = index[: -len(suffix)] if index.endswith(suffix) else index
    return {"kind": "dataset", "dataset": index, "source_dataset": source, "root_id": rid,
            "roots": [root] if root is not None else [], "brains": [brain], "documents": documents,
            "updated_at": at}


class LocalSink:
    """A :class:`BrainSink` on one store and its graph (the embedded mode, and what the server's routes call)."""

    def __init__(self, store: "Store", graph: "GraphService") -> None:
        self.store = store
        self._graph: GraphService | None = graph
        self._graph_of: Callable[[], GraphService] | None = None
        self._cache_dir: Path | None = None  # the engine's data directory's, when made by of_engine

    @classmethod
    def of_engine(cls, engine: Any) -> "LocalSink":
        """A sink on ``engine``'s store whose graph service is the engine's, built when first used (a run's
        edges) rather than now: building it imports the graph's and the search's modules (about 0.1 s of CPU),
        which a run's start would pay before its companion starts, on a small run's critical path."""
        sink = cls(engine.store, None)  # type: ignore[arg-type]
        sink._graph_of = lambda: engine.graph
        sink._cache_dir = Path(engine.data_dir) / "autoindex-cache"
        return sink

    def cache_dir(self) -> Path | None:
        return self._cache_dir

    @property
    def graph(self) -> "GraphService":
        if self._graph is None:
            self._graph = self._graph_of()  # type: ignore[misc]
        return self._graph

    def load(self, brain: str) -> BrainState:
        files: dict[str, FileState] = {}
        run = None
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, FILES_INDEX)
            except IndexNotFound:
                reader = None
            if reader is not None:
                for row in _rows_of_brain(reader, brain):
                    found = reader.document(row)
                    if found is None:
                        continue
                    doc_id, source = found[0], found[1]
                    if "ax_path" in source:
                        files[source["ax_path"]] = _file_state(source)
                    elif doc_id == run_state_id(brain):
                        run = _run_state(source)

            def get(index: str, doc_id: str) -> dict[str, Any] | None:
                try:
                    found = self.store.open_reader(raw, index).get(doc_id)
                except IndexNotFound:
                    return None
                return None if found is None else found[0]

            rid, root = root_of(get, brain)
        return BrainState(files=files, run=run, edges_index=self.store.exists(edges_index(brain)),
                          root_id=rid, root=root)

    def write_files(self, brain: str, files: Sequence[FileWrite], indexed_at: int,
                    counted: Sequence[Sequence[CountedTerms | None] | None] | None = None) -> int:
        """:meth:`BrainSink.write_files`, indexing the counted texts from their counts."""
        def apply(txn: Any) -> int:
            _ensure_indices(txn)
            written = 0
            # what the last finished run recorded stays beside the mark: a run that reads every file again for new
            # formats and is interrupted leaves the files it had not reached to the next run, not taken as read
            marker = txn.get(FILES_INDEX, run_state_id(brain)) or {}
            txn.put(FILES_INDEX, {**marker, "brain": brain, "dirty": True}, run_state_id(brain))
            # the last finished run's documents have the terms of an older tokenizer: none of them stands
            rewrite = isinstance(marker.get("formats"), list) and WORDS_MARK not in marker["formats"]
            # Each index's puts go through one put_many (in file order, so rows and dictionary ordinals are
            # those of putting them one by one); a batch's files never share a document id, so the deletes of
            # stale documents (ids the files no longer yield) are independent of the puts.
            puts: dict[str, list[tuple[Any, str, str]]] = {}
            owners: dict[str, list[str]] = {}  # per index, the file each put comes from, to name a refused one
            counts: dict[str, list[CountedTerms | None]] = {}
            uncounted = repeat(None)
            # strict: a count list out of step with its documents is a bug to surface, never documents dropped
            for item, found in zip(files, counted, strict=True) if counted is not None else zip(files, uncounted):
                refs = list(item.kept)
                recorded = None
                if item.continues:
                    recorded = txn.get(FILES_INDEX, file_state_id(brain, item.path)) or {}
                    gone = set(item.stale)
                    refs[:0] = [ref for ref in recorded.get("docs") or () if ref not in gone]
                standing = _standing(txn, brain, item, recorded, rewrite)
                for doc, terms in zip(item.documents, found, strict=True) if found else zip(item.documents, uncounted):
                    refs.append(doc_ref(doc.index, doc.id))
                    if standing(doc):
                        continue
                    puts.setdefault(doc.index, []).append((doc.source, doc.id, "index"))
                    owners.setdefault(doc.index, []).append(item.path)
                    counts.setdefault(doc.index, []).append(terms)
                    written += 1
                for ref in item.stale:
                    index, doc_id = split_ref(ref)
                    if txn.exists(index):
                        txn.delete(index, doc_id)
                state_id = file_state_id(brain, item.path)
                if item.stamp is None:
                    txn.delete(FILES_INDEX, state_id)
                    continue
                if item.continues:  # a document of the file's previous version is written again by a share
                    refs = list(dict.fromkeys(refs))
                state = {"brain": brain, "ax_path": item.path, "mtime_ns": item.stamp.mtime_ns,
                         "size": item.stamp.size, "hash": item.stamp.hash, "docs": refs, "indexed_at": indexed_at}
                if item.skipped is not None:
                    state["skipped"] = {"kind": item.skipped.kind, "reason": item.skipped.reason}
                puts.setdefault(FILES_INDEX, []).append((state, state_id, "index"))
            for index, items in puts.items():
                if not txn.exists(index):
                    txn.create_index(index, DATASET_MAPPING)
                elif index != FILES_INDEX:
                    _map_new_fields(txn, index)
                terms = counts.get(index)
                # the texts counted by the parsing process are not tokenized again here, on the run's critical path
                outcomes = txn.index(index).put_many(items) if terms is None or None in terms else \
                    txn.index(index).put_many_counted(items, COUNTED_FIELD, terms)
                refused = first_refusal(outcomes)
                if refused is not None:
                    if index == FILES_INDEX:
                        raise refused
                    # the transaction is given up; the run writes the batch's other files without that one
                    at = next(i for i, outcome in enumerate(outcomes) if outcome is refused)
                    raise DocumentRefused.of(owners[index][at], items[at][1], refused)
            return written

        with self._releasing():
            return self.store.transact(apply)

    def _releasing(self) -> Any:
        """Around a write transaction: give back the memory it leaves resident, during it and after.

        A run's writes would otherwise leave the whole data file resident in this
        process, and one sealing big segments touches much of it at once (see
        ``Environment.release_pages``); a storage backend without a memory map has
        nothing to give back.
        """
        release = getattr(self.store.env, "release_pages", None)
        if release is None:
            return contextlib.nullcontext()

        def when_large() -> None:
            # dropping pages the writer is still using costs it a fault each: only past a bound
            resident = residency.file_resident_bytes()
            if resident is None or resident > RELEASE_ABOVE_BYTES:
                release(heap=False)

        return residency.Every(when_large, RELEASE_EVERY_S, release)

    def standing_edges(self, brain: str) -> StandingEdges:
        # naming the edges the first time reads every edge's record (see graph.rowids): its pages given back as
        # a write's are, or a 20k-note brain's first re-run held 300 MB of them
        with self._releasing():
            live, rejected = self.graph.standing_keys(brain)
        return StandingEdges(live=live, rejected=rejected)

    def live_claims(self, brain: str, files: Sequence[str]) -> LiveClaims:
        return LiveClaims(tuple(LiveClaim(**claim) for claim in self.graph.live_claims(brain, files)))

    def invalidate_edges(self, brain: str, edge_ids: Sequence[str], at: int) -> int:
        ids = list(edge_ids)
        total = 0
        for lo in range(0, len(ids), EDGES_PER_TRANSACTION):
            with self._releasing():
                total += self.graph.invalidate_edges(brain, edge_ids=ids[lo:lo + EDGES_PER_TRANSACTION], at=at)
        return total

    def write_edges(self, brain: str, drafts: Sequence[EdgeDraft], *, created_at: int,
                    nodes_index: str | None) -> EdgeWriteSummary:
        # Transactions of bounded size, as a RemoteSink's requests are: a big corpus's edges never sit in one
        # transaction's dirty pages and record lists at once. An interrupted run is redone (its state is dirty).
        total = EdgeWriteSummary()
        for lo in range(0, max(len(drafts), 1), EDGES_PER_TRANSACTION):
            with self._releasing():
                written = self.graph.write_edges(brain, drafts[lo:lo + EDGES_PER_TRANSACTION],
                                                 created_at=created_at, nodes_index=nodes_index)
            total += EdgeWriteSummary(**{f.name: int(written.get(f.name, 0)) for f in attrs.fields(EdgeWriteSummary)})
        return total

    def finish(self, brain: str, finish: RunFinish) -> None:
        def apply(txn: Any) -> None:
            _ensure_indices(txn)
            marker = {"brain": brain, "dirty": False, "finished_at": finish.finished_at,
                      "detectors": list(finish.detectors)}
            if finish.formats is not None:
                marker["formats"] = list(finish.formats)
            txn.put(FILES_INDEX, marker, run_state_id(brain))
            rid = finish.root_id or root_of(txn.get, brain)[0]
            txn.put(CATALOG_INDEX, root_record(rid, finish.root, brain, finish.datasets, finish.finished_at),
                    root_record_id(rid))
            for dataset in finish.datasets:
                count = txn.index(dataset).state.live if txn.exists(dataset) else 0
                txn.put(CATALOG_INDEX, dataset_card(dataset, rid, finish.root, brain, count, finish.finished_at),
                        dataset)

        self.store.transact(apply)
