"""Reading a brain: ego (with its node hydration), overview and reachable, as bounded columnar hops."""

from __future__ import annotations

from collections import Counter
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np
import orjson

from xerj_core import params
from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound
from xerj_core.graph.brain import (CONTRACT, META_ID, edge_id, edges_index, nodes_index, now_ms,
                                   validate_brain_name)
from xerj_core.graph.hop import (
    BOTH,
    Filters,
    GraphView,
    HopEdges,
    LeanPicks,
    ViewCache,
    expand,
    lean_picks,
    member,
    new_counters,
    shortest_floats,
)
from xerj_core.graph import rowdocs
from xerj_core.graph.idkeys import IdSet
from xerj_core.graph.names import field_dictionary as _dictionary, resolve_in
from xerj_core.graph.requests import (
    EgoRequest,
    OverviewRequest,
    parse_direction,
    parse_ego,
    parse_hops,
    parse_overview,
    parse_trust,
)
from xerj_core.graph.review import review_ordinals, state_counts, trust_weighted_confidence
from xerj_core.graph.standing import live_claims_of_files, standing_edge_ids, standing_edge_keys
from xerj_core.graph.stats import edge_stats
from xerj_core.store import ABSENT_INT, IndexReader, keys

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.query.service import SearchService
    from xerj_core.store import Store

MAX_DANGLING_IDS = 50
PREVIEW_CHARS = 160
REACHABLE_LIMIT = 10_000
_DIRECTIONS = np.array(["in", "out"], object)  # by whether an edge was followed out
_ROW_NAMES_KEPT = 65_536  # rows named from their columns, remembered per index generation


def _preview(source: dict[str, Any]) -> str | None:
    for field in ("title", "text", "body"):
        value = source.get(field)
        if isinstance(value, str) and value:
            return value[:PREVIEW_CHARS]
    return None


def hydrate_nodes(store: "Store", raw: Any, indices: list[str], ids: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Ego's node summaries: ``({id: {index, title, preview, path}}, dangling ids)``, first index holding an id wins.

    ``raw`` is the read transaction the edges were read in, so nodes and edges
    come from one snapshot.
    """
    readers = []
    for name in indices:
        try:
            readers.append((name, store.open_reader(raw, name)))
        except IndexNotFound:
            continue
    nodes: dict[str, Any] = {}
    dangling: list[str] = []
    wanted = list(dict.fromkeys(ids))
    remaining = wanted
    held = []  # each index's rows of the wanted ids, looked up together (the id map's runs search whole arrays)
    for _name, reader in readers:  # each index's ids and documents in two batches (round trips on a database)
        reader.prefetch_ids(remaining)
        held.append(reader.rows_of(remaining))
        remaining = [node_id for node_id in remaining if node_id not in held[-1]]
    for node_id in wanted:
        for (name, reader), rows in zip(readers, held):
            row = rows.get(node_id)
            found = None if row is None else reader.document(row)
            if found is not None:
                source = found[1]
                title = source.get("title")
                path = source.get("ax_path")
                nodes[node_id] = {"index": name, "title": title if isinstance(title, str) else None,
                                  "preview": _preview(source), "path": path if isinstance(path, str) else None}
                break
        else:
            dangling.append(node_id)
    return nodes, dangling


def edge_ids(reader: IndexReader, rows: list[int], srcs: list[str], types: list[str | None], dsts: list[str],
             valid_ats: list[int]) -> list[str | None]:
    """The ``_id`` of each edge row, from its columns: an edge written by the graph is stored under the hash
    of its claim and ``valid_at``, which the id index confirms with an 8-byte read (no document is read).
    A row stored under another id (written through the ES door) falls back to its document's header."""
    out: list[str | None] = []
    txn, db, prefix, read_row = reader.txn, reader.dbs["ids"], keys.ix_key(reader.ix), keys.read_u64
    for row, src, type_, dst, valid in zip(rows, srcs, types, dsts, valid_ats):
        found = None
        if type_ is not None and valid != ABSENT_INT:
            candidate = edge_id(src, type_, dst, valid)
            stored = txn.get(prefix + candidate.encode(), db=db)
            if stored is not None and read_row(stored) == row:
                found = candidate
        out.append(found if found is not None else reader.id_of(row))
    return out


def _with_absent(reader: IndexReader, field: str) -> np.ndarray:
    """A small dictionary's terms by ordinal, then None, as an object array: an absent ordinal (-1) reads as None,
    and a column of ordinals becomes its terms with one take."""
    return reader.memo(("xerj.graph", "with-absent", field),
                       lambda: _objects([*reader.field_dictionary(field).terms, None]))


def _objects(values: list[Any]) -> np.ndarray:
    found = np.empty(len(values), object)
    found[:] = values
    return found


def _placed_picks(chosen: list[tuple[HopEdges, np.ndarray]]
                  ) -> list[tuple[Any, np.ndarray, np.ndarray, np.ndarray | None]] | None:
    """Per edge table, the picked edges lying in it: ``(table, src-ordered positions, followed out, places in the
    response)`` (places None: the one table holds every pick, in order), from each hop and its picks (positions in
    its rank order); None when some part is no table's (see :meth:`HopEdges.placed_at`).

    The usual ego reads the sealed view alone (one entry); a hop that met the tail too is split by table, so
    every field is still one gather per table however the two interleave in rank order."""
    parts = [hop_edges.parts[0] for hop_edges, _ in chosen if len(hop_edges.parts) == 1]
    if len(parts) == len(chosen) and parts[0].table is not None:  # each hop one part: its picks read together
        found = parts[0].table.picked([(part, picks) for part, (_, picks) in zip(parts, chosen)])
        if found is not None:
            return [(parts[0].table, *found, None)]
    placed = []
    for hop_edges, picks in chosen:
        found = hop_edges.placed_at(picks)
        if found is None:
            return None
        placed.append(found)
    table = placed[0][0][0]
    if all(len(found) == 1 and found[0][0] is table for found in placed):
        if len(placed) == 1:
            return placed[0]
        return [(table, np.concatenate([found[0][1] for found in placed]),
                 np.concatenate([found[0][2] for found in placed]), None)]
    tables: dict[int, tuple[Any, list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = {}
    base = 0
    for found, (_, picks) in zip(placed, chosen):
        for table, position, out, places in found:
            entry = tables.setdefault(id(table), (table, [], [], []))
            entry[1].append(position)
            entry[2].append(out)
            entry[3].append(base + (np.arange(picks.size) if places is None else places))
        base += picks.size
    return [(table, *(x[0] if len(x) == 1 else np.concatenate(x) for x in lists))
            for table, *lists in tables.values()]


# The stored fields ego leaves out of an edge, and those it lists as null when the document has none (after
# ``edge_id``, ``hop`` and ``direction``, in this order).
_LEFT_OUT = rowdocs.LEFT_OUT
_NULL_WHEN_ABSENT = rowdocs.NULL_WHEN_ABSENT
_ID_START = b',"edge_id":"'
_ESCAPED = bytes([*range(32), ord('"'), ord("\\")])  # the bytes a JSON string cannot hold as they are


class _HopTails(dict):
    """(hop, followed out) -> the JSON closing an edge after its id: ``","hop":1,"direction":"out"}``."""

    def __missing__(self, key: tuple[int, bool]) -> bytes:
        hop, out = key
        found = self[key] = b'","hop":%d,"direction":"%s"}' % (hop, b"out" if out else b"in")
        return found


_HOP_TAILS = _HopTails()


def _documents_as_edges(records: list[bytes | None], outs: list[bool], hops: list[int]) -> list[dict[str, Any]]:
    """Stored source records (None: no live document, the edge is left out) as ego lists their edges: the stored
    fields but ``_LEFT_OUT``, then ``edge_id`` (the document's ``_id``), ``hop`` and ``direction``, then a null for
    each of ``_NULL_WHEN_ABSENT`` the document lacks.

    Each record's JSON is an object written by ``orjson.dumps`` (no space, no repeated key), so ``edge_id``,
    ``hop`` and ``direction`` are written into the text itself, before its closing brace: a key the document
    already holds keeps its place and takes the new value, as setting it on the decoded dict would. Every edge is
    then decoded by one ``orjson.loads`` of one array, and only the fields left out and those null when absent are
    touched edge by edge."""
    parts: list[bytes] = []
    for record, tail in zip(records, map(_HOP_TAILS.__getitem__, zip(hops, outs))):
        if record is not None:
            start = 10 + ((record[8] << 8) | record[9])  # after the header (see keys.SRC_HEADER) and the _id
            parts += (b",", record[start:-1], _ID_START, record[10:start], tail)
    if not parts:
        return []
    ids = b"".join(parts[3::5])
    if not ids.isalnum() and len(ids.translate(None, _ESCAPED)) != len(ids):  # an id JSON must escape
        parts[3::5] = [orjson.dumps(bytes(found).decode())[1:-1] for found in parts[3::5]]
    parts[0] = b"["
    parts.append(b"]")
    try:
        edges: list[dict[str, Any]] = orjson.loads(b"".join(parts))
    except orjson.JSONDecodeError:  # a source not as orjson writes one (none is): decoded and shaped one by one
        return _shaped_one_by_one(records, outs, hops)
    for edge in edges:
        pop = edge.pop
        pop("schema_version", None), pop("src_file", None), pop("src_format", None), pop("dst_format", None)
        if "invalid_at" not in edge:
            edge["invalid_at"] = None
        if "expired_at" not in edge:
            edge["expired_at"] = None
        if "evidence" not in edge:
            edge["evidence"] = None
    return edges


def _shaped_one_by_one(records: list[bytes | None], outs: list[bool], hops: list[int]) -> list[dict[str, Any]]:
    """What :func:`_documents_as_edges` gives, a record at a time through its decoded dict."""
    edges = []
    for record, hop, out in zip(records, hops, outs):
        if record is None:
            continue
        _version, doc_id, offset = keys.unpack_source_header(record)
        edge = orjson.loads(record[offset:])
        for name in _LEFT_OUT:
            edge.pop(name, None)
        edge["edge_id"] = doc_id
        edge["hop"] = hop
        edge["direction"] = "out" if out else "in"
        for name in _NULL_WHEN_ABSENT:
            if name not in edge:
                edge[name] = None
        edges.append(edge)
    return edges


def _neighbors(far_ends: list[str], seeds: Iterable[str]) -> list[str]:
    """The distinct ``far_ends`` not among ``seeds``, first met first. The few seeds are dropped from the distinct
    ends rather than each end tested against them: a Python step per edge costs more than the C-level rest."""
    found = dict.fromkeys(far_ends)
    for seed in seeds:
        found.pop(seed, None)
    return list(found)


def _answered(edges: list[dict[str, Any]], seeds: set[str]) -> tuple[list[dict[str, Any]], list[str], Counter]:
    """Ego's listed edges, their far ends not among ``seeds`` (first met first), and how many hold each trust."""
    far_ends = [edge["dst"] if edge["direction"] == "out" else edge["src"] for edge in edges]
    return edges, _neighbors(far_ends, seeds), Counter([edge.get("trust") for edge in edges])


class GraphReading:
    """The read half of :class:`~xerj_core.graph.service.GraphService`; each call reads one snapshot."""

    store: "Store"
    search: "SearchService"
    embedder_of: Callable[[str], str | None]
    views: ViewCache
    max_seeds: int
    frontier_cap: int
    edge_cap: int

    def _graph(self, reader: IndexReader) -> GraphView:
        return self.views.graph(reader)

    @staticmethod
    def _meta_nodes_index(reader: IndexReader, brain: str) -> str:
        def read() -> str:
            meta = reader.get(META_ID)
            found = meta[0].get("nodes_index") if meta is not None else None
            return found if isinstance(found, str) and found else nodes_index(brain)

        return reader.memo(("xerj.graph", "nodes_index"), read)  # a document read per ego otherwise

    @staticmethod
    def _ordinals(reader: IndexReader, field: str, terms: Iterable[str]) -> np.ndarray:
        if reader.field(field) is None:
            return np.empty(0, np.int64)
        return _dictionary(reader, field).lookup(terms)

    def _run_hops(self, reader: IndexReader, seeds: list[str], *, hops: int, direction: str, filters: Filters,
                  counters: dict[str, int]) -> list[HopEdges]:
        seed_ords = self._ordinals(reader, "src", seeds)
        return expand(self._graph(reader), seed_ords, hops=hops, direction=direction, filters=filters,
                      counters=counters, frontier_cap=self.frontier_cap, edge_cap=self.edge_cap)

    def _filters(self, reader: IndexReader, *, as_of: int, include_expired: bool = False,
                 types: list[str] | None = None, trust: list[str] | None = None,
                 min_confidence: float | None = None) -> Filters:
        return Filters(
            as_of=as_of, include_expired=include_expired,
            type_ords=self._ordinals(reader, "type", types) if types else None,
            trust_ords=self._ordinals(reader, "trust", trust) if trust else None,
            min_confidence=min_confidence)

    @staticmethod
    def _sections(reader: IndexReader, seeds: list[str], room: int, counters: dict[str, int]) -> list[str]:
        """The sections of the seeds that are files, in node order: each node ``{file}#...`` that an edge the
        file taught (its ``src_file``) names at either end, retired edges' included (an ``as_of`` in the past
        may reach a section since renamed; the hops' bitemporal mask decides what is shown). At most ``room``
        of them; the rest are counted in ``frontier_clipped``."""
        if reader.field("src_file") is None or reader.field("src") is None:
            return []
        wanted = [o for o in map(reader.field_dictionary("src_file").ordinal, seeds) if o is not None]
        if not wanted:
            return []
        taught = reader.column("src_file")
        rows = np.flatnonzero(reader.live & taught.present & np.isin(taught.values, wanted))
        named = np.unique(np.concatenate([reader.column(end).values.take(rows) for end in ("src", "dst")]))
        terms = _dictionary(reader, "src").terms
        prefixes = tuple(f"{seed}#" for seed in seeds)
        asked = set(seeds)
        found = [term for term in map(terms.__getitem__, named.tolist())
                 if term.startswith(prefixes) and term not in asked]
        room = max(room, 0)
        if len(found) > room:
            counters["frontier_clipped"] += len(found) - room
            found = found[:room]
        return found

    def ego(self, brain: str, query: Mapping[str, Any] | EgoRequest) -> dict[str, Any]:
        """The bounded neighbourhood of ``node`` or of up to 64 ``nodes``; every bound reported in ``not_shown``.

        With ``sections``, a seed that is a file (an autoindexed note, whose links sit on its sections) expands
        from its sections too, as if they were given in ``nodes``: the note's own links are its first hop. The
        response's ``seeds`` are those asked; ``sections`` lists the ones added."""
        request = query if isinstance(query, EgoRequest) else parse_ego(query)
        validate_brain_name(brain)
        asked = list(request.seeds)
        clipped = new_counters()
        if len(asked) > self.max_seeds:
            clipped["frontier_clipped"] += len(asked) - self.max_seeds
            asked = asked[:self.max_seeds]

        def read(raw: Any) -> tuple[dict[str, Any], list[str], dict[str, int]]:
            # may run twice (Store.read): everything it counts starts from the counts made before it
            counters = dict(clipped)
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                raise GraphNotFound(f"brain '{brain}' does not exist: it has no edges index") from None
            index_list = request.nodes_index or self._meta_nodes_index(reader, brain)
            # a node asked for by title, alias or file stem becomes its id before anything is read
            names = resolve_in(self.store, raw, reader, index_list.split(","), asked,
                               what="node" if request.single else "nodes")
            asked_seeds = seeds = list(dict.fromkeys(names.nodes))
            sections: list[str] = []
            if request.sections:
                sections = self._sections(reader, seeds, self.frontier_cap - len(seeds), counters)
                seeds = seeds + sections
            if request.known_at is not None:  # system time: versions, read apart from the hot columns
                edges, neighbors = self.ego_known(raw, reader, brain, seeds, request, counters)
                trusts = Counter([edge.get("trust") for edge in edges])
            else:
                filters = self._filters(reader, as_of=request.as_of, include_expired=request.include_expired,
                                        types=request.types, trust=request.trust,
                                        min_confidence=request.min_confidence)
                seed_ords = self._ordinals(reader, "src", seeds)
                lean = lean_picks(
                    self._graph(reader), seed_ords, hops=request.hops, direction=request.direction,
                    filters=filters, limit=request.limit, counters=counters, frontier_cap=self.frontier_cap,
                    edge_cap=self.edge_cap)
                if lean is not None:  # the usual request: its picks found in one pass (see lean_picks)
                    edges, neighbors, trusts = self._lean_edges(reader, lean, seeds, request.limit,
                                                                request.include_evidence, counters)
                else:
                    found = expand(self._graph(reader), seed_ords, hops=request.hops, direction=request.direction,
                                   filters=filters, counters=counters, frontier_cap=self.frontier_cap,
                                   edge_cap=self.edge_cap)
                    edges, neighbors, trusts = self._ego_edges(reader, found, seeds, request.limit,
                                                               request.include_evidence, counters)
            response: dict[str, Any] = {"brain": brain, "contract": CONTRACT, "seeds": asked_seeds}
            if len(asked_seeds) == 1:
                response["node"] = asked_seeds[0]
            if request.sections:
                response["sections"] = sections
            response["node_found"] = names.found
            if names.resolved:
                response["resolved"] = dict(names.resolved)
            if names.unknown:
                response["not_found"] = {name: list(closest) for name, closest in names.unknown.items()}
            if request.known_at is not None:
                response["known_at"] = request.known_at
            response.update({"as_of": request.as_of, "hops": request.hops, "direction": request.direction,
                             "edges": edges, "neighbors": neighbors, "trust": state_counts(trusts)})
            dangling: list[str] = []
            if request.include_nodes:
                response["nodes_index"] = index_list
                if sections:  # the sections an edge listed names, not every one a long file has
                    shown = {end for edge in edges for end in (edge["src"], edge["dst"])}
                    seeds = asked_seeds + [section for section in sections if section in shown]
                response["nodes"], dangling = hydrate_nodes(self.store, raw, index_list.split(","),
                                                            seeds + neighbors)
            return response, dangling, counters

        response, dangling, counters = self.store.read(read)
        response["not_shown"] = {**counters, "dangling_nodes": len(dangling),
                                 "dangling_ids": dangling[:MAX_DANGLING_IDS]}
        return response

    def _lean_edges(self, reader: IndexReader, lean: LeanPicks, seeds: list[str], limit: int,
                    include_evidence: bool, counters: dict[str, int]
                    ) -> tuple[list[dict[str, Any]], list[str], Mapping[Any, int]]:
        """As :meth:`_ego_edges`, from the picks :func:`lean_picks` found."""
        if lean.total > limit:
            counters["edges_clipped"] += lean.total - limit
        if not lean.hops:
            return [], [], {}
        if include_evidence:
            found = self._listed(reader, lean, seeds)
            if found is not None:
                return found
            if len(lean.pieces) == 1:  # one table holds every pick, in response order
                table, position, out, _ = lean.pieces[0]
                rows, outs = table.cols["row"].take(position).tolist(), out.tolist()
            else:
                row_column, out_column = np.empty(len(lean.hops), np.int64), np.empty(len(lean.hops), bool)
                for table, position, out, places in lean.pieces:
                    row_column[places] = table.cols["row"].take(position)
                    out_column[places] = out
                rows, outs = row_column.tolist(), out_column.tolist()
            return self._documented(reader, rows, outs, lean.hops, set(seeds))
        if len(lean.pieces) == 1:  # one table holds every pick, in response order
            table, position, out, _ = lean.pieces[0]
            edges, others, trusts = self._table_edges(reader, table, position, out, lean.hops)
        else:
            edges, others, trusts = self._pieces_edges(reader, lean.pieces, lean.hops)
        return edges, _neighbors(others, seeds), trusts

    def _ego_edges(self, reader: IndexReader, found: list[HopEdges], seeds: list[str], limit: int,
                   include_evidence: bool, counters: dict[str, int]
                   ) -> tuple[list[dict[str, Any]], list[str], Mapping[Any, int]]:
        """The edges ego lists (the best ``limit`` in hop order), their far ends not among the seeds, and how many
        hold each trust value."""
        total = sum(len(h) for h in found)
        if total > limit:
            counters["edges_clipped"] += total - limit
        chosen: list[tuple[HopEdges, np.ndarray]] = []
        room = limit
        for hop_edges in found:
            if room <= 0:
                break
            picks = hop_edges.order(room)
            chosen.append((hop_edges, picks))
            room -= len(picks)
        if not chosen:
            return [], [], {}
        seed_set = set(seeds)
        if not include_evidence:
            edges, others, trusts = self._column_edges(reader, chosen)
            return edges, _neighbors(others, seed_set), trusts
        rows: list[int] = []
        outs: list[bool] = []
        hops: list[int] = []
        for hop_edges, picks in chosen:
            picked = hop_edges.take(picks)
            rows += picked.column("row").tolist()
            outs += picked.column("out").tolist()
            hops += [hop_edges.hop] * picks.size
        return self._documented(reader, rows, outs, hops, seed_set)

    def _listed(self, reader: IndexReader, lean: LeanPicks, seeds: list[str]
                ) -> tuple[list[dict[str, Any]], list[str], Mapping[Any, int]] | None:
        """What :meth:`_documented` gives for the lean picks, from the listings the sealed view keeps (see
        :mod:`.rowdocs`): a slice of a mapped blob per edge, no document read; a pick with none (a tail row, a
        listing too long for its span) has its listing made from its stored record. None leaves the picks to
        :meth:`_documented` (a pinned reader, a view without listings, a record that is not a JSON object)."""
        if type(reader) is not IndexReader:
            return None  # a pinned reader's rows that died since are read from their retired copies
        size = len(lean.hops)
        if len(lean.pieces) == 1:  # one table holds every pick, in response order
            table, position, out, _ = lean.pieces[0]
            if table.doc_span is None:
                return None
            spans = table.doc_span.take(position)
            rows = None
        else:
            spans = np.zeros(size, rowdocs.DOC_SPAN)
            spans["nulls"] = rowdocs.UNCOVERED
            out, rows = np.empty(size, bool), np.empty(size, np.int64)
            for table, position, picked_out, places in lean.pieces:
                out[places] = picked_out
                rows[places] = table.cols["row"].take(position)
                if table.doc_span is not None:
                    spans[places] = table.doc_span.take(position)
                elif table is self._graph(reader).sealed.table:
                    return None
        nulls = spans["nulls"]
        outs = out.tolist()
        tails = list(map(rowdocs.TAILS.__getitem__, zip(lean.hops, outs, nulls.tolist())))
        row_docs = self.views.row_docs
        blobs = reader.memo(("xerj.graph", "doc-blobs", id(row_docs)), lambda: row_docs.blobs(reader))
        if not blobs:  # no sealed segment: every pick is the tail's
            return None
        starts = spans["lo"].tolist()
        frags: list[Any] = [blobs[seg][lo:hi] for seg, lo, hi in zip(
            spans["seg"].tolist(), starts, (spans["size"] + spans["lo"].astype(np.int64)).tolist())]
        uncovered = nulls == rowdocs.UNCOVERED
        if reader.scope is not None or uncovered.any():
            if rows is None:
                rows = lean.pieces[0][0].cols["row"].take(lean.pieces[0][1])
            if reader.scope is not None:  # a row another tenant's is shown as no document, as source_records does
                uncovered |= ~reader.live.take(rows, mode="clip")
            at_list = np.flatnonzero(uncovered).tolist()
        else:
            at_list = []
        if at_list:  # made here from the stored records: the tail's rows, a listing too long for its span
            records = reader.source_records(rows.take(at_list).tolist())
            for at, record in zip(at_list, records):
                if record is None:  # no live document (or not this reader's): the edge is left out
                    frags[at] = tails[at] = None
                    continue
                made = rowdocs.record_fragment(record)
                if made is None:
                    return None
                frags[at], tails[at] = made[0], rowdocs.TAILS[lean.hops[at], outs[at], made[1]]
            frags = [frag for frag in frags if frag is not None]
            tails = [tail for tail in tails if tail is not None]
            if not frags:
                return [], [], Counter()
        parts = [b"["]
        parts += chain.from_iterable(zip(frags, tails))
        parts[-1] = parts[-1][:-1] + b"]"
        return _answered(orjson.loads(b"".join(parts)), set(seeds))

    @staticmethod
    def _documented(reader: IndexReader, rows: list[int], outs: list[bool], hops: list[int], seeds: set[str]
                    ) -> tuple[list[dict[str, Any]], list[str], Mapping[Any, int]]:
        """The edges at ``rows`` (each followed out or not, met at its hop) as their stored documents, every field
        and evidence included; their far ends not among ``seeds``; how many hold each trust value. A row without a
        live document is left out."""
        # every hop's documents read at once (one round trip on a database store), in response order
        edges = _documents_as_edges(reader.source_records(rows), outs, hops)
        return _answered(edges, seeds)

    def _column_edges(self, reader: IndexReader, chosen: list[tuple[HopEdges, np.ndarray]]
                      ) -> tuple[list[dict[str, Any]], list[str], dict[Any, int]]:
        """The picked edges from the hop columns alone (no document is read), each one's far end, and how many
        hold each trust value: every
        field gathered once per edge table (see :func:`_placed_picks`), then named and shaped in one pass."""
        pieces = _placed_picks(chosen)
        hops: list[int] = []
        for hop_edges, picks in chosen:
            hops += [hop_edges.hop] * picks.size
        if pieces is not None and len(pieces) == 1:  # one table (the usual ego): each field is one take from it
            table, position, out, _ = pieces[0]
            return self._table_edges(reader, table, position, out, hops)
        if pieces is not None:
            return self._pieces_edges(reader, pieces, hops)
        # a hop clipped at the edge cap across tables: its columns as concatenated selections
        picked = [hop_edges.take(picks) for hop_edges, picks in chosen]

        def concatenated(field: str) -> np.ndarray:
            return np.concatenate([p.column(field) for p in picked]) if len(picked) > 1 \
                else picked[0].column(field)

        out, src, dst = concatenated("out"), concatenated("src"), concatenated("dst")
        type_, valid, invalid = concatenated("type"), concatenated("valid_at"), concatenated("invalid_at")
        weight, trust = concatenated("weight"), concatenated("trust")
        ids = [name for p in picked for name in p.named()]

        def rows() -> np.ndarray:
            return concatenated("row")
        return self._shaped(reader, ids, rows, out, src, dst, type_, valid, invalid, weight, trust, hops)

    def _pieces_edges(self, reader: IndexReader, pieces: list[tuple[Any, np.ndarray, np.ndarray, np.ndarray]],
                      hops: list[int]) -> tuple[list[dict[str, Any]], list[str], dict[Any, int]]:
        """The picked edges lying in several tables (``(table, positions, followed out, response places)`` each):
        each field a take per table, laid into response order."""
        size = len(hops)
        records = [(table.record.take(position), places) for table, position, _out, places in pieces]
        if len({found.dtype for found, _ in records}) == 1:  # the usual: whole records laid in, one pass each
            joined = np.empty(size, records[0][0].dtype)
            for found, places in records:
                joined[places] = found
            gather: Callable[[str], np.ndarray] = joined.__getitem__
        else:  # the tables narrowed type or trust differently: field by field, each to the wider type
            def gather(field: str) -> np.ndarray:
                column = np.empty(size, np.result_type(*(found[field].dtype for found, _ in records)))
                for found, places in records:
                    column[places] = found[field]
                return column

        def rows() -> np.ndarray:
            column = np.empty(size, np.int64)
            for table, position, _out, places in pieces:
                column[places] = table.cols["row"].take(position)
            return column

        out = np.empty(size, bool)
        names = np.full(size, None, object)
        for table, position, picked_out, places in pieces:
            out[places] = picked_out
            if table.ids is not None:
                names[places] = _objects(table.named(position))
        ids = names.tolist()
        src, dst, type_, valid, invalid = gather("src"), gather("dst"), gather("type"), gather("valid_at"), \
            gather("invalid_at")
        weight, trust = gather("weight"), gather("trust")
        return self._shaped(reader, ids, rows, out, src, dst, type_, valid, invalid, weight, trust, hops)

    def _table_edges(self, reader: IndexReader, table: Any, position: np.ndarray, out: np.ndarray, hops: list[int]
                     ) -> tuple[list[dict[str, Any]], list[str], dict[Any, int]]:
        """The edges at src-ordered ``position`` of one table, as :meth:`_column_edges` lists them."""
        record = table.record.take(position)  # every field of a pick from one place (see EdgeTable.record)
        src, dst, type_, valid, invalid, weight, trust = record["src"], record["dst"], record["type"], \
            record["valid_at"], record["invalid_at"], record["weight"], record["trust"]
        ids = table.named(position) if table.ids is not None else [None] * len(hops)

        def rows() -> np.ndarray:
            return table.cols["row"].take(position)
        return self._shaped(reader, ids, rows, out, src, dst, type_, valid, invalid, weight, trust, hops)

    def _shaped(self, reader: IndexReader, ids: list[str | None], rows: Callable[[], np.ndarray], out: np.ndarray,
                src: np.ndarray, dst: np.ndarray, type_: np.ndarray, valid: np.ndarray, invalid: np.ndarray,
                weight: np.ndarray, trust: np.ndarray, hops: list[int]
                ) -> tuple[list[dict[str, Any]], list[str], dict[Any, int]]:
        """The picked edges' columns named and shaped: the response's edges, each one's far end, trust counts."""
        # each field becomes its Python values with a take over an object array or one C-level map, then one
        # dict per edge
        node_terms = self.views.terms.of(_dictionary(reader, "src"))
        srcs, dsts = node_terms.take(src).tolist(), node_terms.take(dst).tolist()
        types = _with_absent(reader, "type").take(type_).tolist()
        valids = valid.tolist()
        if not all(ids):  # rows no table keeps the id of (the tail's): named from the rows themselves
            self._name_rows(reader, ids, rows(), srcs, types, dsts, valids)
        weights = shortest_floats(weight)
        directions = _DIRECTIONS.take(out.astype(np.intp)).tolist()
        invalids = invalid.astype(object)  # as Python ints, where a never retired edge's (ABSENT_INT) is None:
        invalids[invalid == ABSENT_INT] = None  # two array passes, not a Python step per edge
        invalids = invalids.tolist()
        trust_terms = _with_absent(reader, "trust")
        trusts = trust_terms.take(trust).tolist()
        tallies = np.bincount(trust.astype(np.intp) + 1)  # an absent state (-1) first
        held = {trust_terms[at - 1]: count for at, count in enumerate(tallies.tolist()) if count}
        edges = [{"edge_id": edge_id_, "src": s, "dst": d, "type": t, "weight": w, "hop": hop, "direction": o,
                  "valid_at": v, "invalid_at": i, "trust": r}
                 for edge_id_, s, d, t, w, hop, o, v, i, r in zip(
                     ids, srcs, dsts, types, weights, hops, directions, valids, invalids, trusts)]
        return edges, node_terms.take(np.where(out, dst, src)).tolist(), held

    def _name_rows(self, reader: IndexReader, ids: list[str | None], row: np.ndarray, srcs: list[str],
                   types: list[str | None], dsts: list[str], valids: list[int]) -> None:
        """Fill the ``ids`` left None from their rows: a sealed row from its segment's packed ids, a tail row from
        its columns (see :func:`edge_ids`); what is found is remembered for this generation of the index, since a
        row's id never changes and the tail's rows are met by ego after ego."""
        known = reader.memo(("xerj.graph", "row-names"), dict)
        missing = [i for i, name in enumerate(ids) if name is None]
        row_list = row.tolist()
        for i in missing:
            ids[i] = known.get(row_list[i])
        missing = [i for i in missing if ids[i] is None]
        if not missing:
            return
        for i, name in zip(missing, self.views.row_ids.ids(reader, row[missing])):
            ids[i] = name
        unnamed = [i for i in missing if ids[i] is None]
        if unnamed:
            named = edge_ids(reader, [row_list[i] for i in unnamed], [srcs[i] for i in unnamed],
                             [types[i] for i in unnamed], [dsts[i] for i in unnamed], [valids[i] for i in unnamed])
            for i, name in zip(unnamed, named):
                ids[i] = name
        if len(known) > _ROW_NAMES_KEPT:
            known.clear()
        known.update((row_list[i], ids[i]) for i in missing if ids[i] is not None)

    def overview(self, brain: str, query: Mapping[str, Any] | OverviewRequest) -> tuple[bool, dict[str, Any]]:
        """Brain-level totals and breakdowns: ``(exists, body)``; a missing brain is ``exists: false``."""
        request = query if isinstance(query, OverviewRequest) else parse_overview(query)
        validate_brain_name(brain)
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                return False, {"brain": brain, "contract": CONTRACT, "exists": False}
            index_list = self._meta_nodes_index(reader, brain)
            total_nodes = 0
            for name in index_list.split(","):
                try:
                    total_nodes += self.store.open_reader(raw, name).doc_count
                except IndexNotFound:
                    continue
            if request.known_at is not None:
                stats = self.overview_known(raw, reader, brain, request)
            else:
                stats = edge_stats(self.search, reader, as_of=request.as_of, top=request.top,
                                   interval=request.interval,
                                   trust_ords=self._ordinals(reader, "trust", request.trust) if request.trust else None)
        body = {"brain": brain, "contract": CONTRACT, "exists": True, "as_of": request.as_of,
                "nodes_index": index_list, "nodes": {"total": total_nodes}, "embedder": self.embedder_of(brain), **stats}
        return True, body

    def standing(self, brain: str) -> tuple[set[str], set[str]]:
        """``(live ids, rejected ids)`` of the brain's edges, for a machine writer's reconcile (see :mod:`.standing`)."""
        validate_brain_name(brain)
        return standing_edge_ids(self.store, brain, self.views.row_ids)

    def standing_keys(self, brain: str) -> tuple[IdSet, IdSet]:
        """:meth:`standing` as sets of keys (see :mod:`.idkeys`): no string made per derived id."""
        validate_brain_name(brain)
        return standing_edge_keys(self.store, brain, self.views.row_ids)

    def live_claims(self, brain: str, files: Iterable[str]) -> list[dict[str, Any]]:
        """The claims of the live edges whose evidence cites one of ``files`` (see :mod:`.standing`)."""
        validate_brain_name(brain)
        return live_claims_of_files(self.store, brain, files)

    def reachable(self, brain: str, seeds: Iterable[str], *, hops: int, types: Iterable[str] | None = None,
                  as_of: Any = None, min_confidence: float | None = None, limit: int = REACHABLE_LIMIT,
                  direction: str = BOTH, trust: Iterable[str] | None = None, known_at: Any = None
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """Nodes reachable from ``seeds`` within ``hops``: ``({id: {"hop", "proximity"}}, not_shown)``.

        Proximity is 1.0 for a seed and otherwise the maximum over the edges
        reaching the node of ``0.5**hop * clamp(weight, 0, 1) * confidence``.
        At most ``limit`` ids are returned (closest first), the rest counted in
        ``reachable_clipped``. A brain without an edges index yields the seeds
        alone and ``no_edges_index: true``.
        """
        hops = parse_hops(hops, engine_level=True, source=params.JSON)
        direction = parse_direction(direction)
        validate_brain_name(brain)
        when = params.instant(as_of, "as_of", GraphError) if as_of is not None else now_ms()
        threshold = (params.unit(min_confidence, "min_confidence", GraphError, clamp=True,
                                 source=params.JSON)
                     if min_confidence is not None else None)
        type_list = (params.names(types if isinstance(types, str) else list(types), "types", GraphError)
                     if types is not None else None)
        trust_list = parse_trust(trust if isinstance(trust, str) else list(trust)) if trust is not None else None
        seed_list = list(dict.fromkeys(s for s in seeds if isinstance(s, str) and s))
        counters: dict[str, Any] = new_counters()
        counters.update(reachable_clipped=0, no_edges_index=False, seeds_not_found=0)
        if len(seed_list) > self.frontier_cap:
            counters["frontier_clipped"] += len(seed_list) - self.frontier_cap
            seed_list = seed_list[:self.frontier_cap]
        if known_at is not None:  # system time: the versions believed then, read apart from the hot columns
            best = self.reachable_known(brain, seed_list, hops=hops, direction=direction, as_of=when,
                                        known_at=params.instant(known_at, "known_at", GraphError), types=type_list,
                                        trust=trust_list, min_confidence=threshold, counters=counters)
            return self._clip_reachable(best, limit, counters), counters
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                counters["no_edges_index"] = True
                best = {s: {"hop": 0, "proximity": 1.0} for s in seed_list}
                return self._clip_reachable(best, limit, counters), counters
            names = resolve_in(self.store, raw, reader, self._meta_nodes_index(reader, brain).split(","), seed_list,
                               what="graph.seeds")
            counters["seeds_not_found"] = len(names.unknown)
            seed_list = list(dict.fromkeys(names.nodes))
            best: dict[str, dict[str, Any]] = {s: {"hop": 0, "proximity": 1.0} for s in seed_list}
            filters = self._filters(reader, as_of=when, types=type_list, trust=trust_list, min_confidence=threshold)
            trust_ords = review_ordinals(reader)
            if trust_ords[1] is not None:  # a rejected claim's edge never counts in a blend
                filters.refused_trust_ords = np.array([trust_ords[1]])
            found = self._run_hops(reader, seed_list, hops=hops, direction=direction, filters=filters,
                                   counters=counters)
            terms = reader.field_dictionary("src").terms if found else []
            for hop_edges in found:
                if not len(hop_edges):
                    continue
                proximity = (0.5 ** hop_edges.hop) * np.clip(hop_edges.column("weight"), 0, 1).astype(np.float64) \
                    * trust_weighted_confidence(hop_edges.column("trust"), hop_edges.column("confidence"),
                                                trust_ords)
                reached = hop_edges.others
                if direction == BOTH:
                    # An edge joining two nodes of the same frontier was met once, but it is a path to each end.
                    same = member(reached, hop_edges.frontier)
                    if same.any():
                        reached = np.concatenate([reached, hop_edges.column("near")[same]])
                        proximity = np.concatenate([proximity, proximity[same]])
                order = np.lexsort((-proximity, reached))
                reached, proximity = reached[order], proximity[order]
                first = np.flatnonzero(np.r_[True, reached[1:] != reached[:-1]])
                for ordinal, value in zip(reached[first].tolist(), proximity[first].tolist()):
                    node = terms[ordinal]
                    entry = best.get(node)
                    if entry is None:
                        best[node] = {"hop": hop_edges.hop, "proximity": value}
                    elif value > entry["proximity"]:
                        entry["proximity"] = value
        return self._clip_reachable(best, limit, counters), counters

    @staticmethod
    def _clip_reachable(best: dict[str, dict[str, Any]], limit: int, counters: dict[str, Any]
                        ) -> dict[str, dict[str, Any]]:
        if len(best) <= limit:
            return best
        counters["reachable_clipped"] += len(best) - limit
        ranked = sorted(best.items(), key=lambda kv: (-kv[1]["proximity"], kv[1]["hop"], kv[0]))
        return dict(ranked[:limit])
