"""GraphService: the second brain's engine-level API (link, unlink, ego, overview, reachable, the batch writer)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound, XerjError
from xerj_core.graph.brain import (
    CONTRACT,
    EDGE_MAPPING,
    HOPS_CAP_REASON,
    META_ID,
    META_VERSION,
    TRUST_APPROVED,
    TRUST_ASSERTED,
    TRUST_REJECTED,
    TRUST_STATES,
    edges_index,
    hops_refusal,
    nodes_index,
    now_ms,
    parse_instant,
    rejection_id,
    validate_brain_name,
)
from xerj_core.graph.edges import draft_document, is_edge, is_retired, link_document
from xerj_core.graph.hop import (
    BOTH,
    DIRECTIONS,
    EDGE_CAP,
    FRONTIER_CAP,
    Filters,
    GraphView,
    HopEdges,
    ViewCache,
    expand,
    member,
    new_counters,
    shortest_float,
)
from xerj_core.graph.stats import INTERVALS, edge_stats
from xerj_core.model import EdgeDraft
from xerj_core.store import ABSENT_INT, IndexReader

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine
    from xerj_core.store import WriteTxn

__all__ = ["CONTRACT", "HOPS_CAP_REASON", "GraphService", "edges_index", "nodes_index", "validate_brain_name"]

T = TypeVar("T")

MAX_SEEDS = 64
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_DANGLING_IDS = 50
PREVIEW_CHARS = 160
REACHABLE_LIMIT = 10_000
DEFAULT_TOP = 10
MAX_TOP = 50

EGO_PARAMS = frozenset({"node", "nodes", "hops", "direction", "types", "limit", "as_of", "include_expired",
                        "include_nodes", "nodes_index", "include_evidence", "trust", "min_confidence"})
OVERVIEW_PARAMS = frozenset({"as_of", "top", "histogram_interval"})
# Elasticsearch's response-formatting parameters ride along on any request; they change nothing here.
_IGNORED_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "format"})


def _missing_edge(edge_id: Any, brain: str) -> GraphNotFound:
    return GraphNotFound(f"edge '{edge_id}' does not exist in brain '{brain}'")


# -- parameters as they arrive from a query string (or natively) --------------------------------------

def _check_known(params: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    for key in params:
        if key not in known and key not in _IGNORED_PARAMS:
            raise GraphError(f"unknown parameter [{key}] for {what}; expected one of: {', '.join(sorted(known))}")


def _flag(params: Mapping[str, Any], name: str, default: bool) -> bool:
    value = params.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("", "true", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0"):
        return False
    raise GraphError(f"[{name}] must be true or false, got [{value!r:.80}]")


def _int(value: Any, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise GraphError(f"[{name}] must be an integer, got [{value!r:.80}]")


def _names(value: Any, name: str) -> list[str]:
    """A comma-separated string (or a list of strings) as its non-empty entries, first occurrence kept."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise GraphError(f"[{name}] must be a comma-separated string, got [{value!r:.80}]")
    return list(dict.fromkeys(item.strip() for item in items if item.strip()))


def _hops(value: Any, *, engine_level: bool) -> int:
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.lstrip("+-").isdigit() else text
    refusal = hops_refusal(value, engine_level=engine_level)
    if refusal is not None:
        raise refusal
    return value


def _unit_param(value: Any, name: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise GraphError(f"[{name}] must be a finite number, got [{value!r:.80}]")
    return min(1.0, max(0.0, number))


def _trust_states(value: Any, name: str = "trust") -> list[str]:
    states = _names(value, name)
    for state in states:
        if state not in TRUST_STATES:
            raise GraphError(f"[{name}] has unknown trust state [{state}]; expected any of: {', '.join(TRUST_STATES)}")
    return states


def _preview(source: dict[str, Any]) -> str | None:
    for field in ("title", "text", "body"):
        value = source.get(field)
        if isinstance(value, str) and value:
            return value[:PREVIEW_CHARS]
    return None


class GraphService:
    """The graph contract over one engine's store; every surface (HTTP, MCP, autoindex) calls this."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.store = engine.store
        self.views = ViewCache()
        # The contract's bounds; instance attributes so a test can shrink them.
        self.max_seeds = MAX_SEEDS
        self.frontier_cap = FRONTIER_CAP
        self.edge_cap = EDGE_CAP

    # -- writing -------------------------------------------------------------------------------

    def _transact(self, fn: Callable[["WriteTxn"], T]) -> T:
        try:
            return self.store.transact(fn)
        except GraphError:
            raise
        except XerjError as exc:  # a store refusal of an edge write is still a graph refusal
            raise GraphError(exc.reason) from exc

    def _notify(self, brain: str, edges: list[dict[str, Any]]) -> None:
        if edges:
            self.engine.notify("xerj_edges_written", brain=brain, edges=edges)

    @staticmethod
    def _open_edges(txn: "WriteTxn", brain: str, now: int, nodes: str | None = None) -> str:
        """The brain's edges index in this transaction: created with the edge mapping and meta document."""
        name = edges_index(brain)
        fresh = not txn.exists(name)
        target = txn.index(name, create=True, mapping=EDGE_MAPPING)
        if not fresh:
            src = target.mapping.fields.get("src")
            if src is None or src.dictionary != "nodes" or "trust" not in target.mapping.fields:
                txn.put_mapping(name, EDGE_MAPPING)
        meta = None if fresh else txn.get(name, META_ID)
        if meta is None:
            txn.put(name, {"meta_version": META_VERSION, "brain": brain, "nodes_index": nodes or nodes_index(brain),
                           "created_at": now}, META_ID)
        elif nodes is not None and meta.get("nodes_index") != nodes:
            txn.put(name, {**meta, "nodes_index": nodes}, META_ID)
        return name

    @staticmethod
    def _active_rejection(txn: "WriteTxn", name: str, doc: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        rid = rejection_id(doc["src"], doc["type"], doc["dst"])
        found = txn.get(name, rid)
        return rid, (found if found is not None and found.get("lifted_at") is None else None)

    @staticmethod
    def _machine_put(txn: "WriteTxn", name: str, doc: dict[str, Any], rejection: str | None,
                     now: int) -> tuple[dict[str, Any], bool, bool]:
        """A machine writer's edge: ``(stored doc, created, suppressed)``.

        Under an active rejection of its claim the edge is stored already retired
        (never live); an edge already retired under that id is left as it is.
        """
        eid = doc["edge_id"]
        existing = txn.get(name, eid)
        if rejection is not None:
            if existing is not None and is_retired(existing):
                return existing, False, True
            doc = {**doc, "invalid_at": doc["valid_at"], "expired_at": now, "trust": TRUST_REJECTED,
                   "rejection": rejection}
        elif existing is not None and not is_retired(existing) and existing.get("trust") in (TRUST_ASSERTED,
                                                                                                TRUST_APPROVED):
            doc = {**doc, "trust": existing["trust"]}  # a detector re-finding a person's edge keeps their word
        txn.put(name, doc, eid)
        return doc, existing is None, rejection is not None

    def link(self, brain: str, body: Any, *, machine: bool = False) -> tuple[bool, dict[str, Any]]:
        """Assert an edge: ``(created, {"brain", "edge_id", "created", "edge"})``.

        ``created`` is False when the same ``(src, type, dst, valid_at)`` was
        re-asserted. A person's link (the default) of a rejected claim lifts the
        rejection and says ``reinstated: true``; a machine writer's (``machine=True``)
        is stored retired and says ``suppressed: true``.
        """
        validate_brain_name(brain)
        now = now_ms()
        doc = link_document(body, machine=machine, now=now)

        def run(txn: "WriteTxn") -> tuple[dict[str, Any], bool, bool, bool]:
            name = self._open_edges(txn, brain, now)
            rid, rejection = self._active_rejection(txn, name, doc)
            if machine:
                stored, created, suppressed = self._machine_put(txn, name, doc, rid if rejection else None, now)
                return stored, created, suppressed, False
            created = txn.get(name, doc["edge_id"]) is None
            if rejection is not None:
                txn.put(name, {**rejection, "lifted_at": now, "lifted_by": doc["edge_id"]}, rid)
            txn.put(name, doc, doc["edge_id"])
            return doc, created, False, rejection is not None

        stored, created, suppressed, reinstated = self._transact(run)
        self._notify(brain, [stored])
        response: dict[str, Any] = {"brain": brain, "edge_id": stored["edge_id"], "created": created, "edge": stored}
        if reinstated:
            response["reinstated"] = True
        if suppressed:
            response["suppressed"] = True
        return created, response

    def unlink(self, brain: str, edge_id: str, invalid_at: Any = None) -> dict[str, Any]:
        """Retire an edge: the same document re-indexed with ``invalid_at`` and ``expired_at``.

        A person's unlink is also a rejection of the claim ``(src, type, dst)``,
        recorded in the same transaction, so a detector re-asserting the claim
        later (under any ``valid_at``) cannot bring it back live.
        """
        validate_brain_name(brain)
        when = parse_instant(invalid_at, "invalid_at") if invalid_at is not None else None
        name = edges_index(brain)

        def run(txn: "WriteTxn") -> dict[str, Any]:
            doc = txn.get(name, edge_id) if isinstance(edge_id, str) and edge_id else None
            if not is_edge(doc):
                raise _missing_edge(edge_id, brain)
            if is_retired(doc):
                return {"brain": brain, "edge_id": edge_id, "invalidated": False,
                        "already_invalid_at": doc["invalid_at"]}
            now = now_ms()
            rid = rejection_id(doc["src"], doc["type"], doc["dst"])
            retired = {**doc, "invalid_at": now if when is None else when, "expired_at": now,
                       "trust": TRUST_REJECTED, "rejection": rid}
            txn.put(name, retired, edge_id)
            txn.put(name, {"kind": "rejection", "claim_src": doc["src"], "claim_type": doc["type"],
                           "claim_dst": doc["dst"], "rejected_at": now, "rejected_edge_id": edge_id}, rid)
            return {"brain": brain, "edge_id": edge_id, "invalidated": True, "invalid_at": retired["invalid_at"],
                    "expired_at": now, "rejection": rid, "edge": retired}

        result = self._transact(run)
        if result["invalidated"]:
            self._notify(brain, [result["edge"]])
        return result

    def write_edges(self, brain: str, drafts: Sequence[EdgeDraft], *, created_at: Any,
                    nodes_index: str | None = None) -> dict[str, Any]:
        """Write a detector batch in one transaction (machine writer semantics) and summarise it.

        Self-edges are skipped and counted; an edge whose claim a person rejected
        is stored retired and counted in ``suppressed``.
        """
        validate_brain_name(brain)
        created_ms = parse_instant(created_at, "created_at")
        docs, self_edges = [], 0
        for draft in drafts:
            if draft.src == draft.dst:
                self_edges += 1
                continue
            docs.append(draft_document(draft, created_at=created_ms))
        summary = {"brain": brain, "edges_index": edges_index(brain), "written": 0, "created": 0, "updated": 0,
                   "suppressed": 0, "self_edges_skipped": self_edges}
        if not docs:
            return summary

        def run(txn: "WriteTxn") -> list[dict[str, Any]]:
            now = now_ms()
            name = self._open_edges(txn, brain, now, nodes_index)
            rejections: dict[str, str | None] = {}
            stored_docs = []
            counts = {"written": 0, "created": 0, "updated": 0, "suppressed": 0}
            for doc in docs:
                claim = (doc["src"], doc["type"], doc["dst"])
                key = "\0".join(claim)
                if key not in rejections:
                    rid, active = self._active_rejection(txn, name, doc)
                    rejections[key] = rid if active is not None else None
                stored, created, suppressed = self._machine_put(txn, name, doc, rejections[key], now)
                counts["created" if created else "updated"] += 1
                counts["suppressed"] += suppressed
                counts["written"] += 1
                stored_docs.append(stored)
            summary.update(counts)
            return stored_docs

        written = self._transact(run)
        self._notify(brain, written)
        return summary

    def _rows_for_file(self, reader: IndexReader, src_file: str) -> np.ndarray:
        """Rows of live (never retired) edges taught by ``src_file``, found on columns."""
        if reader.field("src_file") is None or reader.field("invalid_at") is None:
            return np.empty(0, np.int64)
        ordinal = reader.field_dictionary("src_file").ordinal(src_file)
        if ordinal is None:
            return np.empty(0, np.int64)
        files, invalid = reader.column("src_file"), reader.column("invalid_at")
        return np.flatnonzero(reader.live & files.present & (files.values == ordinal) & ~invalid.present)

    def live_edge_ids_for_file(self, brain: str, src_file: str) -> list[str]:
        """Ids of the edges taught by ``src_file`` that carry no ``invalid_at`` (for reconcile)."""
        validate_brain_name(brain)
        try:
            with self.store.reader(edges_index(brain)) as reader:
                return [i for i in (reader.id_of(int(r)) for r in self._rows_for_file(reader, src_file)) if i]
        except IndexNotFound:
            return []

    def invalidate_edges(self, brain: str, *, src_file: str | None = None, edge_ids: Iterable[str] | None = None,
                         at: Any) -> int:
        """Soft-invalidate the live edges taught by ``src_file`` and/or listed in ``edge_ids``; returns how many.

        This is the reconcile pass (a file left or changed), not a person's
        judgement: no rejection is recorded and a later detection may bring the
        claim back.
        """
        validate_brain_name(brain)
        if src_file is None and edge_ids is None:
            raise GraphError("invalidate_edges needs src_file or edge_ids")
        when = parse_instant(at, "at")
        name = edges_index(brain)
        candidates = list(dict.fromkeys(edge_ids or ()))
        if src_file is not None:
            candidates.extend(i for i in self.live_edge_ids_for_file(brain, src_file) if i not in candidates)
        if not candidates or not self.store.exists(name):
            return 0

        def run(txn: "WriteTxn") -> list[dict[str, Any]]:
            now = now_ms()
            retired = []
            for eid in candidates:
                doc = txn.get(name, eid)
                if not is_edge(doc) or is_retired(doc):
                    continue
                doc = {**doc, "invalid_at": when, "expired_at": now}
                txn.put(name, doc, eid)
                retired.append(doc)
            return retired

        retired = self._transact(run)
        self._notify(brain, retired)
        return len(retired)

    # -- reading -------------------------------------------------------------------------------

    def _graph(self, reader: IndexReader) -> GraphView:
        return self.views.graph(reader)

    @staticmethod
    def _meta_nodes_index(reader: IndexReader, brain: str) -> str:
        meta = reader.get(META_ID)
        found = meta[0].get("nodes_index") if meta is not None else None
        return found if isinstance(found, str) and found else nodes_index(brain)

    @staticmethod
    def _ordinals(reader: IndexReader, field: str, terms: Iterable[str]) -> np.ndarray:
        if reader.field(field) is None:
            return np.empty(0, np.int64)
        return reader.field_dictionary(field).lookup(terms)

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

    def ego(self, brain: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The bounded neighbourhood of ``node`` or of up to 64 ``nodes``; every bound reported in ``not_shown``."""
        _check_known(params, EGO_PARAMS, "ego")
        node, nodes = params.get("node"), params.get("nodes")
        if node is not None and nodes is not None:
            raise GraphError("[node] and [nodes] are mutually exclusive: give one node, or a comma-separated list")
        if node is None and nodes is None:
            raise GraphError("one of [node] or [nodes] is required")
        if node is not None:
            if not isinstance(node, str) or not node:
                raise GraphError("[node] must be a non-empty string")
            seeds = [node]
        else:
            seeds = _names(nodes, "nodes")
            if not seeds:
                raise GraphError("[nodes] must name at least one node id")
        hops = _hops(params.get("hops", 1), engine_level=False)
        direction = params.get("direction", BOTH)
        if direction not in DIRECTIONS:
            raise GraphError(f"[direction] must be one of out, in, both; got [{direction!r:.80}]")
        types = _names(params["types"], "types") if params.get("types") is not None else None
        trust = _trust_states(params["trust"]) if params.get("trust") is not None else None
        limit = min(MAX_LIMIT, max(1, _int(params.get("limit", DEFAULT_LIMIT), "limit")))
        as_of = parse_instant(params["as_of"], "as_of") if params.get("as_of") is not None else now_ms()
        include_expired = _flag(params, "include_expired", False)
        include_nodes = _flag(params, "include_nodes", False)
        include_evidence = _flag(params, "include_evidence", True)
        min_confidence = (_unit_param(params["min_confidence"], "min_confidence")
                          if params.get("min_confidence") is not None else None)
        requested_nodes_index = (",".join(_names(params["nodes_index"], "nodes_index"))
                                 if params.get("nodes_index") is not None else None)
        validate_brain_name(brain)

        counters = new_counters()
        if len(seeds) > self.max_seeds:
            counters["frontier_clipped"] += len(seeds) - self.max_seeds
            seeds = seeds[:self.max_seeds]
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                raise GraphNotFound(f"brain '{brain}' does not exist: it has no edges index") from None
            filters = self._filters(reader, as_of=as_of, include_expired=include_expired, types=types,
                                    trust=trust, min_confidence=min_confidence)
            found = self._run_hops(reader, seeds, hops=hops, direction=direction, filters=filters,
                                   counters=counters)
            edges, neighbors = self._ego_edges(reader, found, seeds, limit, include_evidence, counters)
            response: dict[str, Any] = {"brain": brain, "contract": CONTRACT, "seeds": seeds}
            if len(seeds) == 1:
                response["node"] = seeds[0]
            response.update({"as_of": as_of, "hops": hops, "direction": direction, "edges": edges,
                             "neighbors": neighbors})
            dangling: list[str] = []
            if include_nodes:
                index_list = requested_nodes_index or self._meta_nodes_index(reader, brain)
                response["nodes_index"] = index_list
                response["nodes"], dangling = self._hydrate_nodes(raw, index_list.split(","), seeds + neighbors)
        response["not_shown"] = {**counters, "dangling_nodes": len(dangling),
                                 "dangling_ids": dangling[:MAX_DANGLING_IDS]}
        return response

    def _ego_edges(self, reader: IndexReader, found: list[HopEdges], seeds: list[str], limit: int,
                   include_evidence: bool, counters: dict[str, int]) -> tuple[list[dict[str, Any]], list[str]]:
        total = sum(len(h) for h in found)
        if total > limit:
            counters["edges_clipped"] += total - limit
        lookup = total and not include_evidence
        node_terms = reader.field_dictionary("src").terms if lookup else []
        type_terms = reader.field_dictionary("type").terms if lookup else []
        trust_terms = reader.field_dictionary("trust").terms if lookup else []
        edges: list[dict[str, Any]] = []
        neighbors: dict[str, None] = {}
        seed_set = set(seeds)
        for hop_edges in found:
            room = limit - len(edges)
            if room <= 0:
                break
            chosen = hop_edges.take(hop_edges.order(room))
            hop, column = chosen.hop, chosen.column
            rows, outs = column("row").tolist(), column("out").tolist()
            if include_evidence:
                # The stored document carries every field; the columns only chose which ones to read.
                direction_of = dict(zip(rows, outs))
                for row, doc_id, edge, _version in reader.documents(rows):
                    out = direction_of[row]
                    # decoded for this response alone, so it is ours to reshape
                    pop = edge.pop
                    pop("schema_version", None), pop("src_file", None)
                    pop("src_format", None), pop("dst_format", None)
                    edge["edge_id"] = doc_id
                    edge["hop"] = hop
                    edge["direction"] = "out" if out else "in"
                    if "invalid_at" not in edge:
                        edge["invalid_at"] = None
                    if "expired_at" not in edge:
                        edge["expired_at"] = None
                    if "evidence" not in edge:
                        edge["evidence"] = None
                    edges.append(edge)
            else:
                for row, out, src, dst, type_ord, trust_ord, valid, invalid, weight in zip(
                        rows, outs, chosen.src.tolist(), chosen.dst.tolist(), column("type").tolist(),
                        column("trust").tolist(), column("valid_at").tolist(), column("invalid_at").tolist(),
                        column("weight").tolist()):
                    edges.append({
                        "edge_id": reader.id_of(row), "src": node_terms[src], "dst": node_terms[dst],
                        "type": type_terms[type_ord] if type_ord >= 0 else None, "weight": shortest_float(weight),
                        "hop": hop, "direction": "out" if out else "in", "valid_at": valid,
                        "invalid_at": None if invalid == ABSENT_INT else invalid,
                        "trust": trust_terms[trust_ord] if trust_ord >= 0 else None,
                    })
        for edge in edges:
            other = edge["dst"] if edge["direction"] == "out" else edge["src"]
            if other not in seed_set:
                neighbors[other] = None
        return edges, list(neighbors)

    def _hydrate_nodes(self, raw: Any, indices: list[str], ids: list[str]) -> tuple[dict[str, Any], list[str]]:
        readers = []
        for name in indices:
            try:
                readers.append((name, self.store.open_reader(raw, name)))
            except IndexNotFound:
                continue
        nodes: dict[str, Any] = {}
        dangling: list[str] = []
        for node_id in dict.fromkeys(ids):
            for name, reader in readers:
                found = reader.get(node_id)
                if found is not None:
                    source = found[0]
                    title = source.get("title")
                    path = source.get("ax_path")
                    nodes[node_id] = {"index": name, "title": title if isinstance(title, str) else None,
                                      "preview": _preview(source), "path": path if isinstance(path, str) else None}
                    break
            else:
                dangling.append(node_id)
        return nodes, dangling

    def overview(self, brain: str, params: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Brain-level totals and breakdowns: ``(exists, body)``; a missing brain is ``exists: false``."""
        _check_known(params, OVERVIEW_PARAMS, "overview")
        as_of = parse_instant(params["as_of"], "as_of") if params.get("as_of") is not None else now_ms()
        top = min(MAX_TOP, max(1, _int(params.get("top", DEFAULT_TOP), "top")))
        interval = params.get("histogram_interval", "day")
        if interval not in INTERVALS:
            raise GraphError(f"[histogram_interval] must be day or hour, got [{interval!r:.80}]")
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
            stats = edge_stats(self.engine.search, reader, as_of=as_of, top=top, interval=interval)
        body = {"brain": brain, "contract": CONTRACT, "exists": True, "as_of": as_of, "nodes_index": index_list,
                "nodes": {"total": total_nodes}, "embedder": self.engine.config.embedder, **stats}
        return True, body

    def reachable(self, brain: str, seeds: Iterable[str], *, hops: int, types: Iterable[str] | None = None,
                  as_of: Any = None, min_confidence: float | None = None, limit: int = REACHABLE_LIMIT,
                  direction: str = BOTH, trust: Iterable[str] | None = None
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """Nodes reachable from ``seeds`` within ``hops``: ``({id: {"hop", "proximity"}}, not_shown)``.

        Proximity is 1.0 for a seed and otherwise the maximum over the edges
        reaching the node of ``0.5**hop * clamp(weight, 0, 1) * confidence``.
        At most ``limit`` ids are returned (closest first), the rest counted in
        ``reachable_clipped``. A brain without an edges index yields the seeds
        alone and ``no_edges_index: true``.
        """
        hops = _hops(hops, engine_level=True)
        if direction not in DIRECTIONS:
            raise GraphError(f"[direction] must be one of out, in, both; got [{direction!r:.80}]")
        validate_brain_name(brain)
        when = parse_instant(as_of, "as_of") if as_of is not None else now_ms()
        threshold = _unit_param(min_confidence, "min_confidence") if min_confidence is not None else None
        type_list = _names(types if isinstance(types, str) else list(types), "types") if types is not None else None
        trust_list = _trust_states(trust if isinstance(trust, str) else list(trust)) if trust is not None else None
        seed_list = list(dict.fromkeys(s for s in seeds if isinstance(s, str) and s))
        counters: dict[str, Any] = new_counters()
        counters.update(reachable_clipped=0, no_edges_index=False)
        if len(seed_list) > self.frontier_cap:
            counters["frontier_clipped"] += len(seed_list) - self.frontier_cap
            seed_list = seed_list[:self.frontier_cap]
        best: dict[str, dict[str, Any]] = {s: {"hop": 0, "proximity": 1.0} for s in seed_list}
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                counters["no_edges_index"] = True
                return self._clip_reachable(best, limit, counters), counters
            filters = self._filters(reader, as_of=when, types=type_list, trust=trust_list, min_confidence=threshold)
            found = self._run_hops(reader, seed_list, hops=hops, direction=direction, filters=filters,
                                   counters=counters)
            terms = reader.field_dictionary("src").terms if found else []
            for hop_edges in found:
                if not len(hop_edges):
                    continue
                proximity = (0.5 ** hop_edges.hop) * np.clip(hop_edges.column("weight"), 0, 1).astype(np.float64) \
                    * np.clip(hop_edges.column("confidence"), 0, 1).astype(np.float64)
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
