"""Writing a brain's edges: a person's link and unlink, a detector batch, and the reconcile pass's invalidation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

import numpy as np

from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound, XerjError
from xerj_core.graph.brain import (
    EDGE_MAPPING,
    META_ID,
    META_VERSION,
    TRUST_APPROVED,
    TRUST_ASSERTED,
    TRUST_REJECTED,
    edges_index,
    nodes_index,
    now_ms,
    parse_instant,
    rejection_id,
    validate_brain_name,
)
from xerj_core.graph import edgebatch
from xerj_core.graph.edges import draft_document, is_edge, is_retired, link_document
from xerj_core.graph.history import BatchedPuts, history_batch, put_version
from xerj_core.graph.requests import parse_link
from xerj_core.graph.review import KIND_APPROVAL, KIND_REJECTION, active_decision, review_stamp
from xerj_core.model import EdgeDraft
from xerj_core.store import IndexReader
from xerj_core.store.store import collector_paused

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import Store, WriteTxn

T = TypeVar("T")
# Edges the reconcile pass retires per pass of edgebatch.retire, all in one transaction: on a 1M-edge brain,
# retiring ~5,000 edges in one pass cost about 10% more per edge than passes of 1,000 (a pass's documents and
# records outgrow the processor's caches), which made a retired edge dearer as brains and their changes grew.
RETIRE_PASS = 1024

# How a committed write is announced: ``notify(hook_name, **kwargs)``, failures logged, never raised.
Notify = Callable[..., None]


def _missing_edge(edge_id: Any, brain: str) -> GraphNotFound:
    return GraphNotFound(f"edge '{edge_id}' does not exist in brain '{brain}'")


class EdgeWriting:
    """The write half of :class:`~xerj_core.graph.service.GraphService`: every edge write is one transaction."""

    store: "Store"
    notify: Notify

    def _transact(self, fn: Callable[["WriteTxn"], T]) -> T:
        try:
            return self.store.transact(fn)
        except GraphError:
            raise
        except XerjError as exc:  # a store refusal of an edge write is still a graph refusal
            raise GraphError(exc.reason) from exc

    def _notify(self, brain: str, edges: list[dict[str, Any]]) -> None:
        if edges:
            self.notify("xerj_edges_written", brain=brain, edges=edges)

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
                           "created_at": now}, META_ID, scope=brain)
        elif nodes is not None and meta.get("nodes_index") != nodes:
            txn.put(name, {**meta, "nodes_index": nodes}, META_ID, scope=brain)
        return name

    @staticmethod
    def _claim(txn: "WriteTxn", name: str, doc: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The claim document of ``doc``'s ``(src, type, dst)``: its id and what it holds (None if none)."""
        rid = rejection_id(doc["src"], doc["type"], doc["dst"])
        return rid, txn.get(name, rid)

    @classmethod
    def _active_rejection(cls, txn: "WriteTxn", name: str, doc: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        rid, found = cls._claim(txn, name, doc)
        return rid, active_decision(found, KIND_REJECTION)

    @staticmethod
    def _machine_put(txn: "WriteTxn", name: str, doc: dict[str, Any], rejection: str | None,
                     now: int, brain: str, approval: dict[str, Any] | None = None,
                     batch: tuple[BatchedPuts, BatchedPuts] | None = None) -> tuple[dict[str, Any], bool, bool]:
        """A machine writer's edge: ``(stored doc, created, suppressed)``.

        Under an active rejection of its claim the edge is stored already retired
        (never live); an edge already retired under that id is left as it is.
        Under an approval of its claim it is stored ``approved`` with who approved it.
        """
        eid = doc["edge_id"]
        if batch is not None and eid in batch[0].ids:
            batch[0].flush()  # the same edge twice in a batch: the second sees the first
            batch[1].flush()
        existing = txn.get(name, eid)
        if approval is not None and rejection is None:
            doc = {**doc, "trust": TRUST_APPROVED, **review_stamp(approval)}
        elif rejection is not None:
            if existing is not None and is_retired(existing):
                return existing, False, True
            doc = {**doc, "invalid_at": doc["valid_at"], "expired_at": now, "trust": TRUST_REJECTED,
                   "rejection": rejection}
        elif existing is not None and not is_retired(existing) and existing.get("trust") in (TRUST_ASSERTED,
                                                                                                TRUST_APPROVED):
            doc = {**doc, "trust": existing["trust"]}  # a detector re-finding a person's edge keeps their word
        doc = put_version(txn, name, brain, doc, eid, now, existing, batch)
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
        doc = link_document(parse_link(body, now=now), machine=machine)

        def run(txn: "WriteTxn") -> tuple[dict[str, Any], bool, bool, bool]:
            name = self._open_edges(txn, brain, now)
            rid, claim = self._claim(txn, name, doc)
            rejection = active_decision(claim, KIND_REJECTION)
            if machine:
                stored, created, suppressed = self._machine_put(txn, name, doc, rid if rejection else None, now, brain,
                                                                active_decision(claim, KIND_APPROVAL))
                return stored, created, suppressed, False
            previous = txn.get(name, doc["edge_id"])
            if rejection is not None:
                txn.put(name, {**rejection, "lifted_at": now, "lifted_by": doc["edge_id"]}, rid, scope=brain)
            # a re-assertion over a retired version keeps that version in the history, never erases it
            stored = put_version(txn, name, brain, doc, doc["edge_id"], now, previous)
            return stored, previous is None, False, rejection is not None

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
            retired = put_version(txn, name, brain, retired, edge_id, now, doc)
            txn.put(name, {"kind": KIND_REJECTION, "claim_src": doc["src"], "claim_type": doc["type"],
                           "claim_dst": doc["dst"], "rejected_at": now, "rejected_edge_id": edge_id}, rid,
                    scope=brain)
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
        # A document or two per edge and no reference cycles: the collector, paused over the whole batch, would
        # only traverse the batch's objects (again after each pause) to find nothing.
        with collector_paused():
            summary, written = self._write_batch(brain, drafts, created_ms, nodes_index)
        self._notify(brain, written)
        return summary

    def _write_batch(self, brain: str, drafts: Sequence[EdgeDraft], created_ms: int, nodes_index: str | None
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """:meth:`write_edges`'s documents and transaction: ``(summary, stored documents)``."""
        plain = edgebatch.documents(drafts, created_ms) if edgebatch.ENABLED else None
        if plain is not None:
            docs, self_edges = plain.docs, plain.self_edges
        else:
            docs, self_edges = [], 0
            for draft in drafts:
                if draft.src == draft.dst:
                    self_edges += 1
                    continue
                docs.append(draft_document(draft, created_at=created_ms))
        summary = {"brain": brain, "edges_index": edges_index(brain), "written": 0, "created": 0, "updated": 0,
                   "suppressed": 0, "self_edges_skipped": self_edges}
        if not docs:
            return summary, []

        def run(txn: "WriteTxn") -> list[dict[str, Any]]:
            now = now_ms()
            name = self._open_edges(txn, brain, now, nodes_index)
            fresh = edgebatch.write_new(txn, name, brain, plain, now) if plain is not None else None
            if fresh is not None:  # all new, no claim decided: written a batch at a time, as below would
                summary.update(written=len(fresh), created=len(fresh), updated=0, suppressed=0)
                return fresh
            rejections: dict[str, str | None] = {}
            approvals: dict[str, dict[str, Any] | None] = {}
            stored_docs = []
            counts = {"written": 0, "created": 0, "updated": 0, "suppressed": 0}
            txn.prefetch(name, [doc["edge_id"] for doc in docs] +
                         [rejection_id(doc["src"], doc["type"], doc["dst"]) for doc in docs])
            batch = (BatchedPuts(txn, name, brain), history_batch(txn, brain))
            for doc in docs:
                claim = (doc["src"], doc["type"], doc["dst"])
                key = "\0".join(claim)
                if key not in rejections:
                    rid, claim_doc = self._claim(txn, name, doc)
                    rejections[key] = rid if active_decision(claim_doc, KIND_REJECTION) is not None else None
                    approvals[key] = active_decision(claim_doc, KIND_APPROVAL)
                stored, created, suppressed = self._machine_put(txn, name, doc, rejections[key], now, brain,
                                                                approvals[key], batch)
                counts["created" if created else "updated"] += 1
                counts["suppressed"] += suppressed
                counts["written"] += 1
                stored_docs.append(stored)
            batch[1].flush()
            batch[0].flush()
            summary.update(counts)
            return stored_docs

        return summary, self._transact(run)

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
            retired: list[dict[str, Any]] = []
            rest = candidates
            if edgebatch.ENABLED:
                rest = []
                for lo in range(0, len(candidates), RETIRE_PASS):
                    # plain edges: read and re-indexed a pass at a time, as the loop below would; from the first
                    # pass that is not the plain case on, the loop does the rest
                    typed = edgebatch.retire(txn, name, brain, candidates[lo:lo + RETIRE_PASS], when, now)
                    if typed is None:
                        rest = candidates[lo:]
                        break
                    retired += typed
            if not rest:
                return retired
            # Candidates are distinct, so no pending put is read back before the flush.
            batch = (BatchedPuts(txn, name, brain), history_batch(txn, brain))
            for eid in rest:
                doc = txn.get(name, eid)
                if not is_edge(doc) or is_retired(doc):
                    continue
                doc = put_version(txn, name, brain, {**doc, "invalid_at": when, "expired_at": now}, eid, now, doc,
                                  batch)
                retired.append(doc)
            batch[1].flush()
            batch[0].flush()
            return retired

        retired = self._transact(run)
        self._notify(brain, retired)
        return len(retired)
