"""System time for edges: every superseded version kept apart, and reading the brain as it stood at ``known_at``.

The edges index keeps only the current version of each edge (with
``recorded_at``, when it was written), so the hop columns and ego's cost are
what they were. Whenever a write replaces an edge document (a re-assertion, an
unlink, a reconcile, a review decision), the version it replaces is first
copied to the brain's history index ``.xerj-memory-{brain}-edges-history`` with
``superseded_at``: its system-time interval is ``[recorded_at, superseded_at)``.
A version written before this existed has no ``recorded_at`` and counts as
known since the beginning. See docs/time.md.

Reading at ``known_at = T`` takes, per edge id, the current version when it
was recorded by T, else the archived version whose interval holds T; the
valid-time filter (``as_of``) then applies to that version as usual. This
path reads ``_source`` rather than columns: it answers a historical question
and is never on the common path.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from xerj_core.errors import IndexNotFound
from xerj_core.graph.brain import edges_index
from xerj_core.graph.edges import is_edge
from xerj_core.store.records import first_refusal

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import IndexReader, Store, WriteTxn

HISTORY_SUFFIX = "-history"
RECORDED_AT = "recorded_at"
SUPERSEDED_AT = "superseded_at"
HISTORY_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "edge_id": {"type": "keyword"},
        RECORDED_AT: {"type": "date", "format": "epoch_millis"},
        SUPERSEDED_AT: {"type": "date", "format": "epoch_millis"},
    },
}
_FOREVER = 2**63 - 1


def history_index(brain: str) -> str:
    return edges_index(brain) + HISTORY_SUFFIX


class BatchedPuts:
    """Puts into one index collected in order and written together by ``IndexWrite.put_many``, whose records
    of like documents are prepared at once. The caller flushes before reading anything a pending put
    would change (an id it holds); a refusal is raised at the flush, aborting the transaction as a put would."""

    def __init__(self, txn: "WriteTxn", name: str, scope: str | None = None) -> None:
        self.txn, self.name, self.scope = txn, name, scope
        self.items: list[tuple[dict[str, Any], str, str]] = []
        self.ids: set[str] = set()

    def put(self, doc: dict[str, Any], doc_id: str) -> None:
        self.items.append((doc, doc_id, "index"))
        self.ids.add(doc_id)

    def flush(self) -> None:
        if not self.items:
            return
        results = self.txn.index(self.name).put_many(self.items, scope=self.scope)
        self.items, self.ids = [], set()
        refused = first_refusal(results)
        if refused is not None:
            raise refused


def put_version(txn: "WriteTxn", name: str, brain: str, doc: dict[str, Any], eid: str, now: int,
                previous: dict[str, Any] | None, batch: "tuple[BatchedPuts, BatchedPuts] | None" = None
                ) -> dict[str, Any]:
    """Write ``doc`` as the current version of ``eid`` (stamped ``recorded_at``), archiving ``previous`` first;
    with ``batch`` (edges, history) the two puts are collected there instead."""
    if previous is not None:
        archive(txn, brain, eid, previous, now, batch[1] if batch is not None else None)
    doc = {**doc, RECORDED_AT: now}
    if batch is None:
        txn.put(name, doc, eid, scope=brain)
    else:
        batch[0].put(doc, eid)
    return doc


def history_batch(txn: "WriteTxn", brain: str) -> BatchedPuts:
    """Archived versions of ``brain``'s edges, collected (see :class:`BatchedPuts`)."""
    return BatchedPuts(txn, history_index(brain))


def archived_id(eid: str, now: int) -> str:
    """The id of an edge's version archived at ``now``: the instant first, zero-padded, so the versions one
    transaction archives are neighbouring keys at the end of the history's id map (a few pages written) rather
    than scattered over it; then the edge and a random part."""
    return f"{now:015d}@{eid}@{uuid.uuid4().hex[:12]}"


def archive(txn: "WriteTxn", brain: str, eid: str, previous: dict[str, Any], now: int,
            batch: BatchedPuts | None = None) -> None:
    index = history_index(brain)
    if not txn.exists(index):
        txn.create_index(index, HISTORY_MAPPING)
    version = {**previous, "edge_id": eid, SUPERSEDED_AT: now}
    version_id = archived_id(eid, now)
    if batch is None:
        txn.put(index, version, version_id)  # the index's own scope, like its name
    else:
        batch.put(version, version_id)


def _known(doc: dict[str, Any], known_at: int) -> bool:
    recorded = doc.get(RECORDED_AT)
    return not isinstance(recorded, int) or recorded <= known_at


def believed_edges(store: "Store", raw: Any, reader: "IndexReader", brain: str, known_at: int
                   ) -> dict[str, dict[str, Any]]:
    """Every edge version the brain held at system time ``known_at``, by edge id."""
    believed: dict[str, dict[str, Any]] = {}
    for _row, doc_id, doc, _version in reader.documents(np.flatnonzero(reader.live).tolist()):
        if is_edge(doc) and _known(doc, known_at):
            believed[doc_id] = doc
    try:
        history = store.open_reader(raw, history_index(brain))
    except IndexNotFound:
        return believed
    for _row, _id, doc, _version in history.documents(np.flatnonzero(history.live).tolist()):
        eid = doc.get("edge_id")
        if eid in believed or not _known(doc, known_at):
            continue
        if known_at < doc.get(SUPERSEDED_AT, _FOREVER):
            version = dict(doc)
            version.pop(SUPERSEDED_AT, None)
            believed[eid] = version
    return believed


def visible(doc: dict[str, Any], as_of: int, include_expired: bool = False) -> bool:
    invalid = doc.get("invalid_at")
    return doc.get("valid_at", _FOREVER) <= as_of and (include_expired or invalid is None or invalid > as_of)


def hop_known(believed: dict[str, dict[str, Any]], seeds: Iterable[str], *, hops: int, direction: str,
              as_of: int, include_expired: bool, types: Iterable[str] | None, trust: Iterable[str] | None,
              min_confidence: float | None, counters: dict[str, int]) -> list[tuple[int, str, bool, dict[str, Any]]]:
    """Up to ``hops`` hops over the believed versions: ``(hop, edge id, out, doc)`` per edge met, as the columnar
    hops meet them (an edge is met once, by the first hop that reaches one of its ends)."""
    type_set = set(types) if types else None
    trust_set = set(trust) if trust else None
    kept: list[tuple[str, dict[str, Any]]] = []
    for eid, doc in believed.items():
        if not visible(doc, as_of, include_expired):
            counters["expired_excluded"] += 1
        elif type_set is not None and doc.get("type") not in type_set:
            counters["type_filtered"] += 1
        elif trust_set is not None and doc.get("trust") not in trust_set:
            counters["trust_filtered"] += 1
        elif min_confidence is not None and np.float32(doc.get("confidence", 1.0)) < np.float32(min_confidence):
            counters["confidence_filtered"] += 1
        else:
            kept.append((eid, doc))
    frontier, seen, met = set(seeds), set(seeds), set()
    found = []
    for hop in range(1, hops + 1):
        reached: set[str] = set()
        for eid, doc in kept:
            if eid in met:
                continue
            out = direction != "in" and doc["src"] in frontier
            into = direction != "out" and doc["dst"] in frontier
            if not (out or into):
                continue
            met.add(eid)
            found.append((hop, eid, out, doc))
            reached.add(doc["dst"] if out else doc["src"])
        reached -= seen
        seen |= reached
        frontier = reached
    return found


def ego_edges_known(found: list[tuple[int, str, bool, dict[str, Any]]], limit: int, counters: dict[str, int]
                    ) -> list[dict[str, Any]]:
    """Ego's edge list from versions, ordered like the columnar path (hop, weight desc, valid_at desc)."""
    found = sorted(found, key=lambda f: (f[0], -f[3].get("weight", 0.0), -f[3].get("valid_at", 0), f[1]))
    if len(found) > limit:
        counters["edges_clipped"] += len(found) - limit
    edges = []
    for hop, eid, out, doc in found[:limit]:
        edge = {k: v for k, v in doc.items() if k not in ("schema_version", "src_file", "src_format", "dst_format")}
        edge.update(edge_id=eid, hop=hop, direction="out" if out else "in")
        for field in ("invalid_at", "expired_at", "evidence"):
            edge.setdefault(field, None)
        edges.append(edge)
    return edges


class EdgeHistory:
    """The system-time half of :class:`~xerj_core.graph.service.GraphService`: ego and overview at ``known_at``."""

    store: "Store"

    def ego_known(self, raw: Any, reader: "IndexReader", brain: str, seeds: list[str], request: Any,
                  counters: dict[str, int]) -> tuple[list[dict[str, Any]], list[str]]:
        believed = believed_edges(self.store, raw, reader, brain, request.known_at)
        found = hop_known(believed, seeds, hops=request.hops, direction=request.direction, as_of=request.as_of,
                          include_expired=request.include_expired, types=request.types, trust=request.trust,
                          min_confidence=request.min_confidence, counters=counters)
        edges = ego_edges_known(found, request.limit, counters)
        seed_set, neighbors = set(seeds), {}
        for edge in edges:
            other = edge["dst"] if edge["direction"] == "out" else edge["src"]
            if other not in seed_set:
                neighbors[other] = None
        return edges, list(neighbors)

    def overview_known(self, raw: Any, reader: "IndexReader", brain: str, request: Any) -> dict[str, Any]:
        """Overview's totals, breakdowns and timeline over the versions believed at ``known_at``."""
        from collections import Counter

        from xerj_core.graph.brain import TRUST_DETECTED, TRUST_REJECTED, TRUST_STATES
        from xerj_core.graph.stats import created_timeline
        from xerj_core.query.aggs import date_histogram_of

        believed = believed_edges(self.store, raw, reader, brain, request.known_at)
        docs = list(believed.values())
        live = [d for d in docs if visible(d, request.as_of)]
        counts = dict.fromkeys(TRUST_STATES, 0)
        for doc in docs:
            state = doc.get("trust")
            if state == TRUST_REJECTED or (state in counts and doc in live):
                counts[state] += 1
        if request.trust:
            docs = [d for d in docs if d.get("trust") in request.trust]
            live = [d for d in live if d.get("trust") in request.trust]

        def top(values: Iterable[Any]) -> tuple[list[dict[str, Any]], int]:
            ranked = sorted(Counter(v for v in values if v is not None).items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ranked[:request.top]
            return [{"key": k, "doc_count": n} for k, n in shown], sum(n for _, n in ranked[request.top:])

        types, types_rest = top(d.get("type") for d in docs)
        detectors, detectors_rest = top(d.get("detector") for d in docs)
        hubs_out, out_rest = top(d["src"] for d in live)
        hubs_in, in_rest = top(d["dst"] for d in live)
        created = np.array([d["created_at"] for d in docs if isinstance(d.get("created_at"), int)], np.int64)
        timeline, sparse = created_timeline(lambda params: date_histogram_of("t", params, created), request.interval)
        not_shown = {"types_not_listed": types_rest, "detectors_not_listed": detectors_rest,
                     "hubs_out_not_listed": out_rest, "hubs_in_not_listed": in_rest}
        if sparse:
            not_shown["created_over_time_empty_buckets_omitted"] = True
        return {
            "known_at": request.known_at,
            "edges": {"total": len(docs), "live": len(live), "invalidated": len(docs) - len(live)},
            "types": types, "detectors": detectors, "hubs": {"out": hubs_out, "in": hubs_in},
            "created_over_time": timeline, "trust": counts, "review_pending": counts[TRUST_DETECTED],
            "not_shown": not_shown,
        }

    def reachable_known(self, brain: str, seeds: list[str], *, hops: int, direction: str, as_of: int,
                        known_at: int, types: Any, trust: Any, min_confidence: float | None,
                        counters: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """``reachable``'s proximities over the versions believed at ``known_at`` (the blend's trust rule too)."""
        from xerj_core.graph.brain import TRUST_APPROVED, TRUST_REJECTED

        best: dict[str, dict[str, Any]] = {s: {"hop": 0, "proximity": 1.0} for s in seeds}
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                counters["no_edges_index"] = True
                return best
            believed = believed_edges(self.store, raw, reader, brain, known_at)
        believed = {k: d for k, d in believed.items() if d.get("trust") != TRUST_REJECTED}
        found = hop_known(believed, seeds, hops=hops, direction=direction, as_of=as_of, include_expired=False,
                          types=types, trust=trust, min_confidence=min_confidence, counters=counters)
        for hop, _eid, out, doc in found:
            confidence = 1.0 if doc.get("trust") == TRUST_APPROVED else \
                min(1.0, max(0.0, float(np.float32(doc.get("confidence", 1.0)))))
            value = 0.5 ** hop * min(1.0, max(0.0, float(np.float32(doc.get("weight", 1.0))))) * confidence
            node = doc["dst"] if out else doc["src"]
            entry = best.get(node)
            if entry is None:
                best[node] = {"hop": hop, "proximity": value}
            elif value > entry["proximity"] and entry["hop"] > 0:
                entry["proximity"] = value
        return best
