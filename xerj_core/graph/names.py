"""Nodes by name: what a person types (an id, a title, an alias, a file stem) resolved to a node id, as wikilinks resolve.

A node is asked for as:

1. its **id**, exactly: a node of the brain's edges, or a document of its nodes
   indices — it is itself, whatever else the text could also mean;
2. a **wikilink target** (:func:`xerj_core.autoindex.links.note_candidates`,
   the link detector's own rules): a file stem or name, a root-relative path
   with or without extension, a path suffix, or a front-matter alias, each
   case-insensitively; ``Name#Heading`` picks that section;
3. a **title**, case-insensitively: of a file's card (sections share their
   file's title, so they are reached as ``Name#Heading``) or of a document that
   has no file at all.

The documents rules 2 and 3 find are pooled. One document: resolved. Several:
ambiguous, a :class:`~xerj_core.errors.GraphError` listing the candidates
(``index.md`` in five folders is five notes; type more of the path). None: the
name is unknown; it stays as typed (an id no edge carries reaches nothing) and
the closest names are offered.

Every surface that takes a node from a person calls :func:`resolve_nodes`
(ego, recall's graph seeds, MCP tools, memory's ``about``). The names of a
nodes index are read once per generation of that index (``IndexReader.memo``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import attrs
import msgspec
import numpy as np
from rapidfuzz import fuzz, process

from xerj_core.autoindex.detect import Corpus, fold_name
from xerj_core.autoindex.links import name_readings, note_candidates, target_document
from xerj_core.errors import GraphError, IndexNotFound
from xerj_core.model import SourceDocument
from xerj_core.store import keys

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import IndexReader
    from xerj_core.store.backends import OpenStore

MAX_CANDIDATES_LISTED = 10
CLOSEST = 5


@attrs.frozen
class Resolution:
    """``nodes``: one id per name asked, in order (an unknown name kept as typed).

    ``resolved`` maps each name that was not already an id to the id it named;
    ``unknown`` maps each name that named nothing to the closest known names,
    as ``{"name", "node"}`` pairs, nearest first.
    """

    nodes: tuple[str, ...]
    resolved: Mapping[str, str]
    unknown: Mapping[str, tuple[dict[str, str], ...]]

    @property
    def found(self) -> bool:
        return not self.unknown


@attrs.frozen
class NodeNames:
    """The names of one nodes index: a text-free corpus of its files, its titles, and every name for suggestions."""

    corpus: Corpus
    titles: Mapping[str, tuple[str, ...]]
    labels: Mapping[str, str]  # lowercased name -> a node id it names, for "did you mean"


def _card_first(docs: list[tuple[int, SourceDocument]]) -> list[SourceDocument]:
    return [doc for _order, doc in sorted(docs, key=lambda item: (item[1].kind != "file", item[0]))]


def node_names(reader: "IndexReader", index: str) -> NodeNames:
    """The names of the nodes index ``index`` (read through ``reader``), built once per generation."""
    return reader.memo(("graph.node_names", index), lambda: _build_names(reader, index))


# The fields of a stored document that name it; decoding only these passes over its text (msgspec builds no
# object of a value it is not asked for): the sources of the Rust core docs' 41k pages took 0.94 s to decode whole.
_NAMING = msgspec.json.Decoder(msgspec.defstruct("_Naming", [(name, Any, None) for name in (
    "ax_path", "title", "kind", "aliases", "section", "anchor", "format")])).decode
# Sources read at once (a backend whose gets are round trips prefetches each batch).
_BATCH = 1024


def _naming_sources(reader: "IndexReader") -> Iterable[tuple[int, str, Any]]:
    """``(row, _id, naming fields)`` of every live document of ``reader``."""
    rows = np.flatnonzero(reader.live).tolist()
    for lo in range(0, len(rows), _BATCH):
        batch = rows[lo:lo + _BATCH]
        for row, record in zip(batch, reader.source_records(batch)):
            if record is not None:
                _version, doc_id, offset = keys.unpack_source_header(record)
                yield row, doc_id, _NAMING(memoryview(record)[offset:])


def _build_names(reader: "IndexReader", index: str) -> NodeNames:
    files: dict[str, list[tuple[int, SourceDocument]]] = defaultdict(list)
    titles: dict[str, list[str]] = defaultdict(list)
    labels: dict[str, str] = {}
    for row, doc_id, source in _naming_sources(reader):
        path = source.ax_path
        title = source.title.strip() if isinstance(source.title, str) else ""
        kind = source.kind
        aliases = [a for a in source.aliases if isinstance(a, str)] if isinstance(source.aliases, list) else []
        if isinstance(path, str) and path:
            section, anchor = source.section, source.anchor
            fields: dict[str, Any] = {"aliases": aliases} if aliases else {}
            if isinstance(anchor, str):
                fields["anchor"] = anchor
            files[path].append((row, SourceDocument(
                doc_id=doc_id, dataset=index, ax_path=path, title=title, text="",
                section=section if isinstance(section, str) else "", kind=kind if isinstance(kind, str) else "",
                mtime_ms=0, format=str(source.format or ""), fields=fields)))
            if kind != "file":
                continue
            stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            for label in (stem, path, *aliases):
                labels.setdefault(fold_name(label), doc_id)
        if title:
            titles[fold_name(title)].append(doc_id)
            labels.setdefault(fold_name(title), doc_id)
    corpus = Corpus({path: _card_first(docs) for path, docs in files.items()})
    return NodeNames(corpus, {k: tuple(dict.fromkeys(v)) for k, v in titles.items()}, labels)


def field_dictionary(reader: "IndexReader", field: str) -> Any:
    """The field's keyword dictionary, looked up once per generation of the index (each lookup is a read)."""
    return reader.memo(("xerj.graph", "dictionary", field), lambda: reader.field_dictionary(field))


def _is_edge_node(name: str, edges: "IndexReader | None") -> bool:
    return edges is not None and edges.field("src") is not None and \
        field_dictionary(edges, "src").ordinal(name) is not None


def reads_nodes_indices(store: "OpenStore", brain: str, names: Iterable[str]) -> bool:
    """Whether resolving ``names`` reads the brain's nodes indices: some name is not a node of its edges.

    Authorization asks this before the request runs, so resolution never reads
    an index the caller was not authorized for.
    """
    from xerj_core.graph.brain import edges_index

    try:
        with store.reader(edges_index(brain)) as edges:
            return not all(_is_edge_node(name, edges) for name in names)
    except IndexNotFound:
        return False  # nothing to expand from: the names are never resolved


def _matches(name: str, names: Sequence[NodeNames]) -> list[str]:
    """The nodes ``name`` names, read as a wikilink's target is (``links.name_readings``: a note's name may hold
    a "#" itself)."""
    fallback: list[str] = []
    for note, heading in name_readings(name):
        found: dict[str, None] = {}
        complete = True  # every note found has the heading asked for (or none was asked)
        for index_names in names:
            corpus = index_names.corpus
            for path in note_candidates(corpus, "", note) if note.strip() else ():
                if heading and not heading.startswith("^") and corpus.section(path, heading) is None:
                    complete = False
                doc = target_document(corpus, path, heading)
                if doc is not None:
                    found[doc.doc_id] = None
            if not heading:
                found.update(dict.fromkeys(index_names.titles.get(fold_name(note.strip()), ())))
        if found and complete:
            return list(found)
        fallback = list(found) or fallback
    return fallback


def _closest(name: str, names: Sequence[NodeNames]) -> tuple[dict[str, str], ...]:
    """The :data:`CLOSEST` names nearest ``name`` (similarity at least one half, nearest first), each with the node
    it names; a name in two indices names the first one's node.

    rapidfuzz scores every name in C (its ``ratio``: twice the longest common subsequence over the lengths'
    sum): difflib's pure-Python matcher took 1.0 s per unknown name over the 41k pages of the Rust core docs,
    and every typo an agent made cost the server that."""
    wanted = fold_name(name.strip())
    scored: dict[str, tuple[float, int, str]] = {}
    for order, index_names in enumerate(names):
        labels = index_names.labels
        for label, score, _at in process.extract(wanted, labels.keys(), scorer=fuzz.ratio, limit=CLOSEST,
                                                 score_cutoff=50):
            scored.setdefault(label, (score, order, labels[label]))
    near = sorted(scored.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))[:CLOSEST]
    return tuple({"name": label, "node": node} for label, (_score, _order, node) in near)


def _existing(store: "OpenStore", raw: Any, index: str) -> "IndexReader | None":
    try:
        return store.open_reader(raw, index)
    except IndexNotFound:
        return None  # a nodes index not created yet names nothing


def resolve_in(store: "OpenStore", raw: Any, edges: "IndexReader | None", indices: Iterable[str],
               names: Sequence[str], *, what: str = "node") -> Resolution:
    """Resolve ``names`` inside an open read transaction ``raw`` (``edges`` is the brain's edges reader, if any).

    ``what`` names the parameter in an ambiguity's refusal (``node``, ``nodes``, ``graph.seeds``).
    """
    readers: list[tuple[str, "IndexReader"]] | None = None
    built: list[NodeNames] | None = None
    out: list[str] = []
    resolved: dict[str, str] = {}
    unknown: dict[str, tuple[dict[str, str], ...]] = {}
    for name in names:
        if _is_edge_node(name, edges):  # the common case reads nothing but the edges' dictionary
            out.append(name)
            continue
        if readers is None:
            readers = [(index, reader) for index in indices if (reader := _existing(store, raw, index)) is not None]
        if any(reader.row_of(name) is not None for _index, reader in readers):
            out.append(name)
            continue
        if built is None:
            built = [node_names(reader, index) for index, reader in readers]
        found = _matches(name, built)
        if len(found) > 1:
            listed = ", ".join(found[:MAX_CANDIDATES_LISTED])
            more = f" and {len(found) - MAX_CANDIDATES_LISTED} more" if len(found) > MAX_CANDIDATES_LISTED else ""
            raise GraphError(f"[{what}] '{name}' is ambiguous: it names {len(found)} nodes (candidates: "
                             f"{listed}{more}); give one of their ids or more of the path")
        if found:
            resolved[name] = found[0]
            out.append(found[0])
        else:
            unknown[name] = _closest(name, built)
            out.append(name)
    return Resolution(tuple(out), resolved, unknown)


def resolve_nodes(store: "OpenStore", brain: str, names: Sequence[str], *, nodes_index: str | None = None,
                  what: str = "node") -> Resolution:
    """Resolve ``names`` against the brain ``brain`` (its edges and its nodes indices) in one snapshot.

    ``nodes_index`` (a comma list) overrides the brain's own, as ego's parameter does.
    """
    from xerj_core.graph.brain import META_ID, edges_index, nodes_index as default_nodes_index

    with store.read_txn() as raw:
        try:
            edges: "IndexReader | None" = store.open_reader(raw, edges_index(brain))
        except IndexNotFound:
            edges = None
        indices = nodes_index
        if indices is None and edges is not None:
            meta = edges.get(META_ID)
            listed = meta[0].get("nodes_index") if meta is not None else None
            indices = listed if isinstance(listed, str) and listed else None
        return resolve_in(store, raw, edges, (indices or default_nodes_index(brain)).split(","), names, what=what)
