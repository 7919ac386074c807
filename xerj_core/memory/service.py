"""The agent-memory API: store, list, forget, drop and recall over one reserved index per namespace.

``engine.memory`` (a :class:`MemoryService`) is what every surface calls.

Refusals. Every refusal of a request is a :class:`~xerj_core.errors.GraphError`
(HTTP 400, body ``{"error": {"type": "graph_error", "reason": ...}, "status": 400}``)
whose reason names the offending field — the same family the graph API uses,
so the memory and graph contracts refuse in one shape, and the hop cap
sentence reaches a recall's ``graph`` block verbatim. A namespace or memory
that does not exist is a :class:`~xerj_core.errors.GraphNotFound` (404, same
body shape). Nothing else is raised on purpose.

Beyond the reference:

* forgetting retires a memory (``forgotten_at`` is stamped, the document stays),
  so ``as_of`` recall still finds what was remembered at an instant before the
  forgetting; ``purge`` removes it for good when a person needs erasure;
* recall takes ``as_of``: what was remembered then (``stored_at <= as_of`` and
  not forgotten by then);
* graph proximity is multiplied by edge ``confidence``, and ``min_confidence``
  drops weaker edges from the expansion.

Dropping a namespace deletes its memory index only; the brain's edges index
(``.xerj-memory-{ns}-edges``) is the graph's and is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import attrs
import numpy as np

from xerj_core.embedding import Embedder, get_embedder
from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound, MapperParsingError, XerjError
from xerj_core.graph.brain import TRUST_APPROVED, TRUST_ASSERTED, TRUST_REJECTED, now_ms
from xerj_core.graph.review import parse_decisions, trust_counts
from xerj_core.memory import dedup, embedders, reviews, tombstones
from xerj_core.memory.shown import shown_documents
from xerj_core.memory.about import about_edges, brain_nodes_indices, put_about_edges, resolve_nodes
from xerj_core.memory import requests as rq
from xerj_core.memory.namespace import (FORGOTTEN_AT, METADATA, STORED_AT, TEXT_FIELD, TEXT_VECTOR_FIELD, TRUST,
                                        VECTOR_FIELD, active_text_vector, filling_text_vector, memory_index,
                                        namespace_mapping, rounded, text_vector_fields,
                                        validate_namespace, vector_mapping)
from xerj_core.memory.graphrecall import BLEND_SEEDS, Expansion, expand_graph
from xerj_core.memory.rerank import blend_graph, blend_recency
from xerj_core.memory.tombstones import tombstone_index
from xerj_core.memory.rerank import overfetch as rerank_overfetch
from xerj_core.query.bm25 import bm25_top
from xerj_core.query.evaluate import filter_mask
from xerj_core.query.fusion import fuse
from xerj_core.query.knn import knn_top
from xerj_core.query.ranking import Ranked
from xerj_core.store import ABSENT_INT, IndexReader

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import EngineConfig
    from xerj_core.graph.service import GraphService
    from xerj_core.store import Store

# Reciprocal rank fusion's rank constant for hybrid recall.
RANK_CONSTANT = 60


class MemoryService:
    """Agent memory over one store, expanding recall through the graph.

    Its collaborators are named: the ``store`` holding the namespaces'
    indices (kept as ``index_store``: ``store()`` is the API's own verb), the
    ``graph`` a recall's ``graph`` block expands through, ``embedders`` (called
    when text is first embedded, so collecting them is paid for only then),
    ``default_embedder`` (the id a new namespace gets, asked at each use) and
    the engine's ``config``.
    """

    def __init__(self, store: "Store", *, graph: "GraphService", embedders: Callable[[], Mapping[str, Embedder]],
                 default_embedder: Callable[[], str], config: "EngineConfig") -> None:
        self.index_store = store
        self.graph = graph
        self.embedders = embedders
        self.default_embedder = default_embedder
        self.config = config
        # Server time in epoch-ms; tests replace it to pin instants.
        self.clock = now_ms

    # -- namespaces ----------------------------------------------------------------------------

    def _index(self, ns: Any) -> str:
        return memory_index(validate_namespace(ns))

    def _missing(self, ns: str) -> GraphNotFound:
        return GraphNotFound(f"no memory namespace [{ns}]: nothing has been stored in it")

    def _embedder_for(self, reader: IndexReader | None):
        """The embedder of the namespace's active text vectors (the default one for a namespace not yet created)."""
        return self._embedder(self._embedder_id(reader))

    def _embedder_id(self, reader: IndexReader | None) -> str:
        """The id of the embedder a namespace stores and recalls with (the default for a new one)."""
        field = active_text_vector(reader.mapping.fields) if reader is not None else None
        if field is not None and field.embedder:
            return field.embedder
        try:
            return self.default_embedder()
        except XerjError as exc:
            raise GraphError(f"the namespace's embedder is unavailable: {exc.reason}") from None

    def _embedder(self, embedder_id: str):
        try:
            return get_embedder(self.embedders(), embedder_id)
        except XerjError as exc:
            raise GraphError(f"the namespace's embedder is unavailable: {exc.reason}") from None

    def _vector_targets(self, fields: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(field, embedder id)`` a new memory's text is embedded into: the active generation and a filling one."""
        return [(field.path, field.embedder) for field in (active_text_vector(fields), filling_text_vector(fields))
                if field is not None and field.embedder]

    def _embed(self, embedder, text: str) -> np.ndarray:
        return self._embed_many(embedder, [text])[0]

    def _embed_many(self, embedder, texts: list[str]) -> np.ndarray:
        try:
            return np.asarray(embedder.embed(texts), np.float32)
        except XerjError as exc:
            raise GraphError(f"embedder [{embedder.id}] failed: {exc.reason}") from None

    # -- the namespace's embedder (xerj_core.memory.embedders) ------------------------------------

    def create(self, ns: str, body: Any) -> dict[str, Any]:
        """Create a namespace with a chosen embedder (``PUT /_memory/{ns}``); refused once it holds memories."""
        return embedders.create(self, ns, body)

    def embedder_of(self, ns: str) -> str | None:
        """The id of the embedder namespace ``ns`` uses (the one a new namespace would get when it has none)."""
        with self.index_store.read_txn() as raw:
            try:
                reader = self.index_store.open_reader(raw, self._index(ns))
            except IndexNotFound:
                reader = None
            try:
                return self._embedder_id(reader)
            except GraphError:
                return self.config.embedder

    def reembed(self, ns: str, body: Any) -> dict[str, Any]:
        """Re-embed every memory with another embedder, in place and resumably (``POST /_memory/{ns}/_reembed``)."""
        return embedders.reembed(self, ns, body)

    # -- store ---------------------------------------------------------------------------------

    def store(self, ns: str, body: Any, *, by: str | None = None) -> tuple[int, dict[str, Any]]:
        """Store one memory; ``(201, created)``, ``(200, deduplicated)`` or ``(200, rejected)``.

        A value a person rejected (a tombstone of the same normalised text, or
        with ``dedup`` a vector that near) is refused unless ``override_rejection``,
        which lifts the tombstone, recording ``by`` and the new memory's id.
        """
        index = self._index(ns)
        request = rq.parse_store(body)
        brain = request.brain or ns
        about_nodes = resolve_nodes(self.index_store, brain, request.about, "about",
                                    must_exist=request.brain is not None) if request.about else []
        with self.index_store.read_txn() as raw:
            try:
                reader = self.index_store.open_reader(raw, index)
            except IndexNotFound:
                reader = None
            embedder = self._embedder_for(reader)
            targets = self._vector_targets(reader.mapping.fields) if reader is not None else []
            if not targets:
                targets = [(TEXT_VECTOR_FIELD, embedder.id)]
            if reader is not None:
                self._check_vector_dims(ns, reader, request.vector)
            # The active generation's vector, and a filling generation's while a re-embed runs.
            vectors = {}
            for path, embedder_id in targets if request.text is not None else ():
                chosen = embedder if embedder_id == embedder.id else self._embedder(embedder_id)
                vectors[path] = self._embed(chosen, request.text)
            text_vector = vectors.get(targets[0][0])
            try:
                tomb_reader = self.index_store.open_reader(raw, tombstone_index(ns))
            except IndexNotFound:
                tomb_reader = None
            probe = text_vector if text_vector is not None else \
                np.asarray(request.vector, np.float64) if request.vector is not None else None
            refusals = tombstones.matching(tomb_reader, request.text, probe,
                                           request.dedup_threshold if request.dedup else None)
            if refusals and not request.override_rejection:
                return 200, {"created": False, "rejected": True, "tombstone": refusals[0][0], "namespace": ns}
            if request.dedup and reader is not None:
                duplicate = self._dedup_probe(reader, request, text_vector)
                if duplicate is not None:
                    return 200, {"created": False, "deduplicated": True, "_id": duplicate, "namespace": ns}
        stored_at = self.clock()
        doc = memory_document(request, stored_at, vectors)
        lifted: list[str] = []
        about_docs: list[dict[str, Any]] = []

        def write(txn):
            if not txn.exists(index):
                txn.create_index(index, namespace_mapping(embedder.id, embedder.dims))
            target = txn.index(index)
            if not text_vector_fields(target.mapping.fields):
                # An index made through the generic document API: give it the memory fields first.
                try:
                    txn.put_mapping(index, namespace_mapping(embedder.id, embedder.dims))
                except MapperParsingError as exc:
                    raise GraphError(f"index [{index}] was not created by the memory API and its mapping "
                                     f"cannot hold memories: {exc.reason}") from None
            elif self._vector_targets(target.mapping.fields) != targets:
                # Another writer created the namespace, or a re-embed moved it on, between our read and this write.
                raise GraphError(f"namespace [{ns}] changed embedder while storing; retry the store")
            if request.vector is not None:
                vspec = target.mapping.fields.get(VECTOR_FIELD)
                if vspec is None:
                    try:
                        txn.put_mapping(index, vector_mapping(len(request.vector)))
                    except MapperParsingError as exc:
                        raise GraphError(f"[vector] cannot be added to index [{index}]: {exc.reason}") from None
                elif vspec.dims != len(request.vector):
                    raise _dims_refusal(ns, vspec.dims, len(request.vector))
            if TRUST not in target.mapping.fields:
                txn.put_mapping(index, {"properties": {TRUST: {"type": "keyword"}}})
            result = txn.put(index, doc, scope=ns)
            if about_nodes:
                about_docs.extend(about_edges(result.doc_id, request.text, about_nodes, stored_at))
                put_about_edges(self.graph, txn, brain, about_docs, stored_at)
            if refusals:
                lifted.extend(tombstones.lift(txn, ns, refusals, by=by, at=stored_at, memory_id=result.doc_id))
            return result

        try:
            result = self.index_store.transact(write)
        except MapperParsingError as exc:
            # Only metadata is mapped dynamically, so a mapping conflict is a metadata value of the wrong kind.
            raise GraphError(f"[metadata] does not fit the namespace's mapping: {exc.reason}") from None
        response = {"_id": result.doc_id, "created": True, "namespace": ns, "stored_at": stored_at}
        if lifted:
            response["override_rejection"] = {"lifted": lifted, "lifted_by": by}
        if about_docs:
            self.graph._notify(brain, about_docs)
            response["about"] = {"brain": brain, "nodes": about_nodes,
                                 "edge_ids": [edge["edge_id"] for edge in about_docs]}
        return 201, response

    def _check_vector_dims(self, ns: str, reader: IndexReader, vector: tuple[float, ...] | None) -> None:
        if vector is None:
            return
        spec = reader.field(VECTOR_FIELD)
        if spec is not None and spec.dims != len(vector):
            raise _dims_refusal(ns, spec.dims, len(vector))

    def _dedup_probe(self, reader: IndexReader, request: rq.StoreRequest,
                     text_vector: np.ndarray | None) -> str | None:
        """The id of a current memory whose cosine reaches the threshold; errors mean "none".

        A near-duplicate is almost always recent (an agent repeating itself), so
        the probe is recall's top-1 kNN over windows of rows, newest first: the
        tail, the newest sealed segment, then the rest. It stops at the first
        window whose nearest memory meets the threshold. When memories in several
        windows meet it, the newest window's nearest answers; the write is
        skipped either way. Within a window, rows of large segments and of the
        tail whose sketched cosine bound, then exact cosine, is below the
        threshold are never scored (:mod:`xerj_core.memory.dedup`): they cannot
        be the window's nearest memory when that one meets the threshold, so
        the answer is the full scan's, and a store with no duplicate reads
        sketches, not every vector, and builds no mask of current memories.
        """
        try:
            if request.vector is not None and reader.field(VECTOR_FIELD) is not None:
                field, probe = VECTOR_FIELD, np.asarray(request.vector, np.float32)
            elif text_vector is not None:
                field, probe = self._vector_targets(reader.mapping.fields)[0][0], text_vector
            else:
                return None
            if not np.any(probe):
                return None
            current = None  # built only for a window with rows left to score (a fresh text usually has none)
            cutoff = request.dedup_threshold - 1e-6
            for lo, hi in _newest_windows(reader):
                possible = dedup.candidates(reader, field, probe, lo, hi, cutoff)
                if possible is not None and not possible[lo:hi].any():
                    continue
                if current is None:
                    current = self._current_mask(reader, None)
                window = np.zeros_like(current)
                window[lo:hi] = current[lo:hi]
                if possible is not None:
                    window &= possible
                    if not window.any():
                        continue
                found = knn_top(reader, field, probe, 1, window)
                if not len(found):
                    continue
                # Both vector fields use cosine similarity, scored (1 + cos) / 2.
                row, cosine = int(found.rows[0]), 2.0 * float(found.scores[0]) - 1.0
                if cosine >= cutoff:
                    return reader.id_of(row)
        except Exception:  # noqa: BLE001 - by contract a failed probe never blocks the write
            return None
        return None

    # -- list / forget / drop ------------------------------------------------------------------

    def list(self, ns: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Memories newest first (``size``, ``from``); forgotten ones only with ``include_forgotten``."""
        index = self._index(ns)
        request = rq.parse_list(params)
        try:
            with self.index_store.reader(index) as reader:
                live = reader.live.copy()
                if not request.include_forgotten:
                    live &= ~_dates(reader, FORGOTTEN_AT)[1]
                rows = np.flatnonzero(live)
                stored = _dates(reader, STORED_AT)[0][rows]
                order = np.lexsort((-rows, -stored))
                page = rows[order][request.offset: request.offset + request.size]
                memories = [_public(*found) for found in shown_documents(reader, page.tolist()) if found is not None]
                about = embedders.report(self, reader.mapping.fields)
        except IndexNotFound:
            raise self._missing(ns) from None
        return {"namespace": ns, **about, "total": int(rows.size),
                "from": request.offset, "size": request.size, "memories": memories}

    def forget(self, ns: str, memory_id: str, *, purge: bool = False, reject: bool = False,
               by: str | None = None) -> dict[str, Any]:
        """Retire one memory (stamp ``forgotten_at``), or with ``purge`` delete it for good.

        With ``reject`` it is also a person's "no": its trust becomes ``rejected``
        and a tombstone keyed on its normalised text (and its vector) refuses
        the same value later, in the same transaction.
        """
        index = self._index(ns)
        if not isinstance(memory_id, str) or not memory_id:
            raise GraphError("[memory_id] must be a non-empty string")
        at = self.clock()

        def write(txn):
            if not txn.exists(index):
                raise self._missing(ns)
            found = txn.index(index).get(memory_id)
            if found is None:
                raise GraphNotFound(f"no memory [{memory_id}] in namespace [{ns}]")
            return self._retire(txn, ns, memory_id, found[0], at, purge=purge, reject=reject, by=by)

        return self.index_store.transact(write)

    def _retire(self, txn, ns: str, memory_id: str, source: dict[str, Any], at: int, *, purge: bool, reject: bool,
                by: str | None, note: str | None = None) -> dict[str, Any]:
        index = memory_index(ns)
        target = txn.index(index)
        out: dict[str, Any] = {"_id": memory_id, "namespace": ns}
        if reject:
            out["tombstone"] = tombstones.put_tombstone(txn, ns, tombstones.tombstone_document(
                memory_id, source, self._stored_vector(target.mapping.fields, source), by=by, at=at, note=note))
            out["rejected"] = True
        if purge:
            target.delete(memory_id)
            return {**out, "purged": True}
        if source.get(FORGOTTEN_AT) is not None and not reject:
            return {**out, "forgotten": False, "already_forgotten_at": source[FORGOTTEN_AT]}
        updated = {**source, FORGOTTEN_AT: source.get(FORGOTTEN_AT) or at}
        if reject:
            updated = reviews.restamp(updated, {TRUST: TRUST_REJECTED, "reviewed_at": at,
                                                **({"reviewed_by": by} if by else {})}, at)
        target.put(updated, memory_id, scope=ns)
        if source.get(FORGOTTEN_AT) is not None:
            return {**out, "forgotten": False, "already_forgotten_at": source[FORGOTTEN_AT]}
        return {**out, "forgotten": True, "forgotten_at": at}

    @staticmethod
    def _stored_vector(fields: Mapping[str, Any], source: dict[str, Any]) -> list[float] | None:
        """The vector a tombstone keeps for near-identical refusals: the active text embedding, else the caller's."""
        active = active_text_vector(fields)
        if active is not None and isinstance(source.get(active.path), list):
            return source[active.path]
        vector = source.get(VECTOR_FIELD)
        return vector if isinstance(vector, list) else None

    def tombstones(self, ns: str) -> dict[str, Any]:
        """Every tombstone of the namespace, active and lifted (``GET /_memory/{ns}/_tombstones``)."""
        self._index(ns)
        try:
            with self.index_store.reader(tombstone_index(ns)) as reader:
                listed = [tombstones.public(tid, doc) for tid, doc in tombstones.all_tombstones(reader)]
        except IndexNotFound:
            listed = []
        return {"namespace": ns, "total": len(listed), "active": sum(t["active"] for t in listed),
                "tombstones": listed}

    def review(self, ns: str, body: Any, *, by: str) -> dict[str, Any]:
        """Approve and reject memories in one transaction (``POST /_memory/{ns}/_review``); each id answered.

        Approval stamps ``trust: approved`` with who and when; rejection is a
        forget with a tombstone (``DELETE ...?reject=true``).
        """
        decisions = parse_decisions(body)
        index = self._index(ns)
        at = self.clock()

        def write(txn):
            if not txn.exists(index):
                raise self._missing(ns)
            target = txn.index(index)
            if TRUST not in target.mapping.fields:
                txn.put_mapping(index, {"properties": {TRUST: {"type": "keyword"}}})
            results = []
            for verdict, ids in ((TRUST_APPROVED, decisions.approve), (TRUST_REJECTED, decisions.reject)):
                for memory_id in ids:
                    found = target.get(memory_id)
                    if found is None:
                        results.append({"_id": memory_id, "result": "not_found"})
                        continue
                    source = found[0]
                    if verdict == TRUST_REJECTED:
                        done = self._retire(txn, ns, memory_id, source, at, purge=False, reject=True, by=by,
                                            note=decisions.note)
                        results.append({"_id": memory_id, "result": verdict, "tombstone": done["tombstone"]})
                        continue
                    stamp = {TRUST: TRUST_APPROVED, "reviewed_by": by, "reviewed_at": at}
                    if decisions.note is not None:
                        stamp["review_note"] = decisions.note
                    target.put(reviews.restamp(source, stamp, at), memory_id, scope=ns)
                    results.append({"_id": memory_id, "result": verdict})
            return results

        results = self.index_store.transact(write)
        counts = {state: sum(1 for r in results if r["result"] == state)
                  for state in (TRUST_APPROVED, TRUST_REJECTED, "not_found")}
        return {"namespace": ns, "reviewed_by": by, **counts, "results": results}

    def drop(self, ns: str) -> dict[str, Any]:
        """Delete the namespace's memory index (the brain's edges index is left alone)."""
        index = self._index(ns)

        def write(txn) -> bool:
            if not txn.exists(index):
                return False
            txn.delete_index(index)
            return True

        existed = self.index_store.transact(write)
        return {"acknowledged": True, "namespace": ns, "dropped": existed}

    # -- recall --------------------------------------------------------------------------------

    def recall(self, ns: str, body: Any) -> dict[str, Any]:
        """Recall up to ``k`` memories by words, by vectors or both, optionally pulled toward the graph."""
        index = self._index(ns)
        request = rq.parse_recall(body)
        graph = request.graph
        if graph is not None and graph.brain is not None and graph.seeds:
            # a named brain is walked from notes as a person names them, resolved like a memory's [about]
            graph = attrs.evolve(graph, seeds=tuple(resolve_nodes(self.index_store, graph.brain, graph.seeds,
                                                                  "graph.seeds")))
        elif graph is not None and graph.brain is not None:
            brain_nodes_indices(self.index_store, graph.brain)  # a brain that does not exist is a 404
        if graph is not None and graph.known_at is None and request.known_at is not None:
            graph = attrs.evolve(graph, known_at=request.known_at)
        graph_as_of = None
        if graph is not None:
            graph_as_of = graph.as_of if graph.as_of is not None else \
                request.as_of if request.as_of is not None else self.clock()
        with self.index_store.read_txn() as raw:
            try:
                reader = self.index_store.open_reader(raw, index)
            except IndexNotFound:
                raise self._missing(ns) from None
            if request.known_at is None or request.as_of is not None:
                mask = self._current_mask(reader, request.as_of)
            else:
                mask = reader.live.copy()  # not "not forgotten now": a memory forgotten since T was held at T
            if request.known_at is not None:
                # system time of a memory: stored by then and not yet forgotten then
                mask &= self._current_mask(reader, request.known_at)
            if request.trust is not None:
                mask &= self._trust_mask(reader, request.trust, request.known_at, mask)
            if request.filter is not None:
                mask &= self._filter_mask(reader, request.filter)
            report = None
            if graph is not None and graph.mode == "restrict":
                expansion = self._expand(ns, graph.seeds, graph, graph_as_of)
                report = expansion.report(graph, graph.seeds, graph_as_of)
                if not expansion.no_edges_index:
                    mask &= self._rows_mask(reader, expansion.ids())
            rerank = request.recency_weight > 0 or (graph is not None and graph.mode == "blend")
            fetch = rerank_overfetch(request.k) if rerank else request.k
            try:
                ranked = self._rank(ns, reader, request, mask, fetch)
            except GraphError:
                raise
            except XerjError as exc:  # a ranking refusal from below is still a refusal of this recall
                raise GraphError(exc.reason) from None
            if request.recency_weight > 0 and len(ranked):
                ranked = blend_recency(ranked, _dates(reader, STORED_AT)[0][ranked.rows], request.recency_weight)
            ids = [reader.id_of(int(row)) for row in ranked.rows]
            proximities = None
            if graph is not None and graph.mode == "blend":
                seeds = graph.seeds if graph.seeds is not None else tuple(i for i in ids[:BLEND_SEEDS] if i)
                expansion = self._expand(ns, seeds, graph, graph_as_of)
                report = expansion.report(graph, seeds, graph_as_of)
                proximities = np.array([expansion.proximity(i) if i else 0.0 for i in ids], np.float64)
                blended = blend_graph(ranked, proximities, graph.weight)
                position = {int(r): n for n, r in enumerate(ranked.rows)}
                order = [position[int(r)] for r in blended.rows]
                ids = [ids[n] for n in order]
                proximities = proximities[order]
                ranked = blended
            hits = []
            for n, found in enumerate(shown_documents(reader, ranked.rows[: request.k].tolist())):
                if found is None:
                    continue
                source = found[1] if request.known_at is None else reviews.as_known_at(found[1], request.known_at)
                hit = _public(found[0], source)
                hit["_score"] = float(ranked.scores[n])
                if proximities is not None:
                    hit["graph_proximity"] = float(proximities[n])
                hits.append({"_id": hit.pop("_id"), "_score": hit.pop("_score"), **hit})
        response: dict[str, Any] = {"namespace": ns, "mode": request.mode, "k": request.k, "hits": hits,
                                    "trust": trust_counts(hits)}
        if request.mode == "hybrid":
            response["fusion"] = request.fusion
        if request.as_of is not None:
            response["as_of"] = request.as_of
        if request.known_at is not None:
            response["known_at"] = request.known_at
        if report is not None:
            response["graph"] = report
        return response

    def _rank(self, ns: str, reader: IndexReader, request: rq.RecallRequest, mask: np.ndarray, fetch: int) -> Ranked:
        if request.mode == "vector":
            spec = reader.field(VECTOR_FIELD)
            if spec is None:
                raise GraphError(f"[vector] recall needs memories stored with a [vector]; namespace [{ns}] has none")
            if spec.dims != len(request.vector):
                raise _dims_refusal(ns, spec.dims, len(request.vector))
            return knn_top(reader, VECTOR_FIELD, np.asarray(request.vector, np.float32), fetch, mask)
        if request.mode == "bm25":
            return bm25_top(reader, TEXT_FIELD, request.query, fetch, mask)
        if request.mode == "semantic":
            return self._semantic(reader, request.query, fetch, mask)
        # The lexical leg first: after the vector scan has streamed every stored embedding through the caches
        # (230 MB of int8 copies at 100k memories of 2,304 dimensions), the postings and weights it reads are cold,
        # and it took three times as long (1.40 ms against 0.44 on the benchmark's memories).
        lexical = bm25_top(reader, TEXT_FIELD, request.query, fetch, mask)
        semantic = self._semantic(reader, request.query, fetch, mask)
        return fuse([lexical, semantic], method=request.fusion, rank_constant=RANK_CONSTANT, window=fetch, k=fetch)

    def _semantic(self, reader: IndexReader, query: str, fetch: int, mask: np.ndarray) -> Ranked:
        field = active_text_vector(reader.mapping.fields)
        if field is None:
            return Ranked.empty()
        embedded = self._embed(self._embedder_for(reader), query)
        if not np.any(embedded):
            # A query with no features is near nothing; ranking every memory at cosine 0 would be noise.
            return Ranked.empty()
        return knn_top(reader, field.path, embedded, fetch, mask)

    @staticmethod
    def _trust_mask(reader: IndexReader, states: tuple[str, ...], known_at: int | None, candidates: np.ndarray
                    ) -> np.ndarray:
        """Rows whose trust is one of ``states`` now, or at ``known_at`` (read from the few reviewed since)."""
        mask = trust_mask(reader, states)
        if known_at is None:
            return mask
        rows = np.flatnonzero(candidates & reviews.reviewed_after(reader, known_at)).tolist()
        for row, found in zip(rows, shown_documents(reader, rows)):
            if found is not None:
                mask[row] = (reviews.state_at(found[1], known_at).get(TRUST) or TRUST_ASSERTED) in states
        return mask

    def _filter_mask(self, reader: IndexReader, clause: Any) -> np.ndarray:
        try:
            return filter_mask(reader, clause)
        except XerjError as exc:
            raise GraphError(f"[filter] {exc.reason}") from None

    def _rows_mask(self, reader: IndexReader, ids: list[str]) -> np.ndarray:
        mask = np.zeros(reader.n_rows, bool)
        rows = list(reader.rows_of(ids).values())
        if rows:
            mask[np.array(rows, np.int64)] = True
        return mask

    def _expand(self, ns: str, seeds: tuple[str, ...], graph: rq.GraphOptions, as_of: int) -> Expansion:
        return expand_graph(self.graph, ns, seeds, graph, as_of)

    # -- shared reads --------------------------------------------------------------------------

    def _current_mask(self, reader: IndexReader, as_of: int | None) -> np.ndarray:
        """Live rows remembered now (not forgotten), or at ``as_of`` (stored by then, not yet forgotten)."""
        mask = reader.live.copy()
        if as_of is None:
            # Part by part: the whole column would be joined anew after every write (a store, a forget).
            if reader.field(FORGOTTEN_AT) is not None:
                for start, end, column in reader.column_parts(FORGOTTEN_AT):
                    if column is not None:
                        mask[start:end] &= ~column.present
        else:
            forgotten = _dates(reader, FORGOTTEN_AT)[0]
            mask &= _dates(reader, STORED_AT)[0] <= as_of
            # An absent forgotten_at sits at int64 max in the column, so one comparison covers both cases.
            mask &= forgotten > as_of
        return mask


def memory_document(request: rq.StoreRequest, stored_at: int, vectors: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The stored document of a memory: what the agent sent, ``stored_at``, and the embeddings of its text."""
    doc: dict[str, Any] = {}
    if request.text is not None:
        doc[TEXT_FIELD] = request.text
    doc[STORED_AT] = stored_at
    doc[TRUST] = TRUST_ASSERTED
    if request.metadata is not None:
        doc[METADATA] = request.metadata
    if request.vector is not None:
        doc[VECTOR_FIELD] = list(request.vector)
    for path, vector in vectors.items():
        doc[path] = rounded(vector)
    return doc


def _newest_windows(reader: IndexReader) -> list[tuple[int, int]]:
    """Row ranges covering every row once, newest first: the tail, the newest sealed segment, the rest."""
    cuts = [reader.n_rows, reader.tail_start]
    if reader.segments:
        cuts.append(reader.segments[-1].start)
    cuts.append(0)
    return [(lo, hi) for hi, lo in zip(cuts, cuts[1:]) if hi > lo]


def _dates(reader: IndexReader, path: str) -> tuple[np.ndarray, np.ndarray]:
    """A date column's values and presence over every row (absent everywhere when the field is unmapped)."""
    if reader.field(path) is None:
        return np.full(reader.n_rows, ABSENT_INT, np.int64), np.zeros(reader.n_rows, bool)
    column = reader.column(path)
    return column.values, column.present


def _dims_refusal(ns: str, expected: int, got: int) -> GraphError:
    return GraphError(f"[vector] has {got} dimensions but namespace [{ns}] holds {expected}-dimensional "
                      f"vectors; a vector is never truncated or padded")


def _public(doc_id: str, source: dict[str, Any]) -> dict[str, Any]:
    """A memory as the API shows it: no stored embeddings."""
    out: dict[str, Any] = {"_id": doc_id}
    if TEXT_FIELD in source:
        out[TEXT_FIELD] = source[TEXT_FIELD]
    out[METADATA] = source.get(METADATA, {})
    out[STORED_AT] = source.get(STORED_AT)
    if source.get(FORGOTTEN_AT) is not None:
        out[FORGOTTEN_AT] = source[FORGOTTEN_AT]
    out[TRUST] = source.get(TRUST) or TRUST_ASSERTED  # stored before trust existed: asserted, as recall filters it
    for field in ("reviewed_by", "reviewed_at", reviews.REVIEW_HISTORY):
        if source.get(field) is not None:
            out[field] = source[field]
    return out


def trust_mask(reader: IndexReader, states: tuple[str, ...]) -> np.ndarray:
    """Rows whose trust is one of ``states``; a memory stored before trust existed counts as ``asserted``."""
    if reader.field(TRUST) is None:
        return np.full(reader.n_rows, TRUST_ASSERTED in states)
    column = reader.column(TRUST)
    mask = column.present & np.isin(column.values, reader.field_dictionary(TRUST).lookup(list(states)))
    if TRUST_ASSERTED in states:
        mask |= ~column.present
    return mask
