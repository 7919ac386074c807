"""Reviewing a brain's claims: the queue of edges awaiting a person's word, and approve/reject decisions.

A decision is recorded twice in one transaction: on the edge document it was
made on (``trust``, ``reviewed_by``, ``reviewed_at``, ``review_note``; the
evidence, detector and ``valid_at`` are left as they were) and on the claim
document keyed on ``(src, type, dst)`` (:func:`~xerj_core.graph.brain.rejection_id`),
so a later detection of the same claim under any ``valid_at`` inherits it.
The claim document was a rejection only; it now carries ``kind: approval``
as well, and a rejection is active while it is ``kind: rejection`` and not lifted.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

import attrs
import numpy as np

from xerj_core import params
from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound
from xerj_core.graph.brain import (
    CONTRACT,
    TRUST_APPROVED,
    TRUST_DETECTED,
    TRUST_REJECTED,
    TRUST_STATES,
    edges_index,
    now_ms,
    rejection_id,
    validate_brain_name,
)
from xerj_core.graph.edges import is_edge, is_retired
from xerj_core.graph.history import put_version
from xerj_core.graph.requests import parse_known_at, parse_trust

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import IndexReader, Store, WriteTxn

T = TypeVar("T")

REVIEW_PARAMS = frozenset({"state", "type", "min_confidence", "max_confidence", "sort", "size", "from", "known_at"})
REVIEW_FIELDS = frozenset({"approve", "reject", "note"})
SORTS = ("confidence", "valid_at")
DEFAULT_SIZE = 20
MAX_SIZE = 500
MAX_DECISIONS = 1000
MAX_NOTE_CHARS = 2000
KIND_REJECTION = "rejection"
KIND_APPROVAL = "approval"


@attrs.frozen
class ReviewQuery:
    states: tuple[str, ...]
    types: tuple[str, ...] | None
    min_confidence: float | None
    max_confidence: float | None
    sort: str
    size: int
    offset: int
    known_at: int | None = None


@attrs.frozen
class ReviewDecisions:
    approve: tuple[str, ...]
    reject: tuple[str, ...]
    note: str | None


def parse_review_query(query: Mapping[str, Any]) -> ReviewQuery:
    """``GET /_graph/{brain}/_review`` parameters (``state`` defaults to ``detected``)."""
    params.refuse_unknown(query, REVIEW_PARAMS, GraphError, what="_review")

    def unit(name: str) -> float | None:
        value = query.get(name)
        return None if value is None else params.unit(value, name, GraphError, clamp=True, source=params.QUERY)

    def count(name: str, default: int) -> int:
        value = query.get(name)
        number = default if value is None else params.integer(value, name, GraphError, source=params.QUERY)
        if number < 0:
            raise GraphError(f"[{name}] must not be negative, got [{number}]")
        return number

    types = query.get("type")
    return ReviewQuery(
        states=tuple(parse_trust(query.get("state", TRUST_DETECTED), "state")),
        types=tuple(params.names(types, "type", GraphError)) if types is not None else None,
        min_confidence=unit("min_confidence"), max_confidence=unit("max_confidence"),
        sort=params.choice(query.get("sort", "confidence"), "sort", SORTS, GraphError),
        size=min(MAX_SIZE, count("size", DEFAULT_SIZE)), offset=count("from", 0), known_at=parse_known_at(query))


def _ids(body: Mapping[str, Any], field: str) -> tuple[str, ...]:
    value = body.get(field)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
        raise GraphError(f"[{field}] must be an array of edge ids (non-empty strings)")
    return tuple(dict.fromkeys(value))


def parse_decisions(body: Any) -> ReviewDecisions:
    """``POST /_graph/{brain}/_review``'s body: ``{approve: [...], reject: [...], note?}``."""
    if not isinstance(body, dict):
        raise GraphError("the review body must be a JSON object")
    params.refuse_unknown(body, REVIEW_FIELDS, GraphError, what="the review body", kind="field",
                          ignored=frozenset())
    approve, reject = _ids(body, "approve"), _ids(body, "reject")
    if not approve and not reject:
        raise GraphError("the review body must name at least one edge id in [approve] or [reject]")
    both = sorted(set(approve) & set(reject))
    if both:
        raise GraphError(f"edge id [{both[0]}] is in both [approve] and [reject]; decide once")
    if len(approve) + len(reject) > MAX_DECISIONS:
        raise GraphError(f"at most {MAX_DECISIONS} decisions per review body")
    note = body.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise GraphError(f"[note] must be a string of at most {MAX_NOTE_CHARS} characters")
    return ReviewDecisions(approve, reject, note)


def active_decision(claim: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The claim document when it records an unlifted decision of ``kind`` (an old rejection has no kind set
    other than ``rejection``), else None."""
    if claim is None or claim.get("lifted_at") is not None:
        return None
    return claim if claim.get("kind", KIND_REJECTION) == kind else None


def review_stamp(claim: dict[str, Any]) -> dict[str, Any]:
    """The review fields a claim decision puts on every edge of the claim."""
    stamp = {"reviewed_at": claim["decided_at"]} if "decided_at" in claim else {}
    for field in ("reviewed_by", "review_note"):
        if claim.get(field) is not None:
            stamp[field] = claim[field]
    return stamp


def review_ordinals(reader: "IndexReader") -> tuple[int | None, int | None]:
    """The ``trust`` column's ordinals of ``approved`` and ``rejected`` (None where no edge holds that state)."""
    if reader.field("trust") is None:
        return None, None
    dictionary = reader.field_dictionary("trust")
    return dictionary.ordinal(TRUST_APPROVED), dictionary.ordinal(TRUST_REJECTED)


def trust_weighted_confidence(trust: np.ndarray, confidence: np.ndarray,
                              ordinals: tuple[int | None, int | None]) -> np.ndarray:
    """How much of an edge a blend counts: an approved claim fully, a rejected one not at all, any other by its
    confidence."""
    weight = np.clip(confidence, 0, 1).astype(np.float64)
    approved, rejected = ordinals
    if approved is not None:
        weight[trust == approved] = 1.0
    if rejected is not None:
        weight[trust == rejected] = 0.0
    return weight


def trust_counts(edges: list[dict[str, Any]]) -> dict[str, int]:
    """Per-state counts of the edges a response lists."""
    return state_counts(Counter([edge.get("trust") for edge in edges]))


def state_counts(tallies: Mapping[Any, int]) -> dict[str, int]:
    """Per-state counts from the edges' trust values tallied (a value not a trust state is not counted)."""
    counts = dict.fromkeys(TRUST_STATES, 0)
    for state, count in tallies.items():
        if state in counts:
            counts[state] += count
    return counts


def queue_item(doc_id: str, edge: dict[str, Any]) -> dict[str, Any]:
    """One claim of the review queue: what it says, how sure the detector was, and why it thinks so."""
    item = {"edge_id": doc_id, "src": edge["src"], "dst": edge["dst"], "type": edge["type"],
            "trust": edge.get("trust"), "confidence": edge.get("confidence"), "weight": edge.get("weight"),
            "valid_at": edge.get("valid_at"), "invalid_at": edge.get("invalid_at"), "detector": edge.get("detector"),
            "evidence": edge.get("evidence")}
    for field in ("reviewed_by", "reviewed_at", "review_note"):
        if field in edge:
            item[field] = edge[field]
    return item


class EdgeReview:
    """The review half of :class:`~xerj_core.graph.service.GraphService`: the queue and the decisions."""

    store: "Store"
    _transact: Callable[..., Any]
    _notify: Callable[..., None]

    def review_queue(self, brain: str, query: Mapping[str, Any] | ReviewQuery) -> dict[str, Any]:
        """Claims in ``state`` (default ``detected``), least confident or newest first, with their evidence."""
        request = query if isinstance(query, ReviewQuery) else parse_review_query(query)
        validate_brain_name(brain)
        if request.known_at is not None:
            return self._queue_known(brain, request)
        try:
            with self.store.reader(edges_index(brain)) as reader:
                rows = self._queue_rows(reader, request)
                total = len(rows)
                page = rows[request.offset:request.offset + request.size]
                items = [queue_item(doc_id, edge) for _row, doc_id, edge, _v in reader.documents(page.tolist())]
        except IndexNotFound:
            raise GraphNotFound(f"brain '{brain}' does not exist: it has no edges index") from None
        return {"brain": brain, "contract": CONTRACT, "state": list(request.states), "total": total, "items": items}

    def _queue_known(self, brain: str, request: ReviewQuery) -> dict[str, Any]:
        """The queue as it stood at system time ``known_at``, from the versions believed then."""
        from xerj_core.graph.history import believed_edges

        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                raise GraphNotFound(f"brain '{brain}' does not exist: it has no edges index") from None
            believed = believed_edges(self.store, raw, reader, brain, request.known_at)
        chosen = []
        for eid, doc in believed.items():
            confidence = float(np.float32(doc.get("confidence", 1.0)))
            if doc.get("trust") not in request.states or (request.types and doc.get("type") not in request.types):
                continue
            if TRUST_REJECTED not in request.states and doc.get("invalid_at") is not None:
                continue
            if (request.min_confidence is not None and confidence < np.float32(request.min_confidence)) or (
                    request.max_confidence is not None and confidence > np.float32(request.max_confidence)):
                continue
            chosen.append((confidence if request.sort == "confidence" else -doc.get("valid_at", 0), eid, doc))
        chosen.sort(key=lambda c: (c[0], c[1]))
        page = chosen[request.offset:request.offset + request.size]
        return {"brain": brain, "contract": CONTRACT, "state": list(request.states), "known_at": request.known_at,
                "total": len(chosen), "items": [queue_item(eid, doc) for _k, eid, doc in page]}

    @staticmethod
    def _queue_rows(reader: "IndexReader", request: ReviewQuery) -> np.ndarray:
        if reader.field("src") is None or reader.field("trust") is None:
            return np.empty(0, np.int64)
        mask = reader.live & reader.column("src").present
        trust = reader.column("trust")
        wanted = reader.field_dictionary("trust").lookup(request.states)
        mask &= trust.present & np.isin(trust.values, wanted)
        if TRUST_REJECTED not in request.states and reader.field("invalid_at") is not None:
            mask &= ~reader.column("invalid_at").present  # only a rejected claim waits while retired
        if request.types is not None:
            if reader.field("type") is None:
                return np.empty(0, np.int64)
            kinds = reader.column("type")
            mask &= kinds.present & np.isin(kinds.values, reader.field_dictionary("type").lookup(request.types))
        confidence = reader.column("confidence").values if reader.field("confidence") is not None \
            else np.ones(reader.n_rows, np.float32)
        if request.min_confidence is not None:
            mask &= confidence >= np.float32(request.min_confidence)
        if request.max_confidence is not None:
            mask &= confidence <= np.float32(request.max_confidence)
        rows = np.flatnonzero(mask)
        if request.sort == "confidence":
            order = np.lexsort((rows, confidence[rows]))
        else:
            order = np.lexsort((rows, -reader.column("valid_at").values[rows]))
        return rows[order]

    def review(self, brain: str, body: Any, *, by: str) -> dict[str, Any]:
        """Apply ``approve`` and ``reject`` decisions in one transaction; each id gets its own answer.

        An unknown id (or one of another brain) is answered ``not_found`` and the
        rest still apply. Approval of a rejected claim lifts the rejection and
        makes the edge live again; rejection retires the edge like a person's unlink.
        """
        decisions = body if isinstance(body, ReviewDecisions) else parse_decisions(body)
        validate_brain_name(brain)
        name = edges_index(brain)
        if not self.store.exists(name):
            raise GraphNotFound(f"brain '{brain}' does not exist: it has no edges index")

        def run(txn: "WriteTxn") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            now = now_ms()
            results, written = [], []
            for verdict, ids in ((TRUST_APPROVED, decisions.approve), (TRUST_REJECTED, decisions.reject)):
                for eid in ids:
                    doc = txn.get(name, eid)
                    if not is_edge(doc):
                        results.append({"edge_id": eid, "result": "not_found"})
                        continue
                    stored = self._decide(txn, name, brain, eid, doc, verdict, by, decisions.note, now)
                    written.append(stored)
                    results.append({"edge_id": eid, "result": verdict, "trust": stored["trust"]})
            return results, written

        results, written = self._transact(run)
        self._notify(brain, written)
        counts = {state: sum(1 for r in results if r["result"] == state)
                  for state in (TRUST_APPROVED, TRUST_REJECTED, "not_found")}
        return {"brain": brain, "reviewed_by": by, **counts, "results": results}

    @staticmethod
    def _decide(txn: "WriteTxn", name: str, brain: str, eid: str, doc: dict[str, Any], verdict: str, by: str,
                note: str | None, now: int) -> dict[str, Any]:
        rid = rejection_id(doc["src"], doc["type"], doc["dst"])
        claim = {"kind": KIND_APPROVAL if verdict == TRUST_APPROVED else KIND_REJECTION,
                 "claim_src": doc["src"], "claim_type": doc["type"], "claim_dst": doc["dst"],
                 "decided_at": now, "reviewed_by": by, "decided_edge_id": eid}
        if note is not None:
            claim["review_note"] = note
        if verdict == TRUST_REJECTED:
            claim.update(rejected_at=now, rejected_edge_id=eid)
        previous = txn.get(name, rid)
        if previous is not None and previous.get("history") is not None:
            claim["history"] = previous["history"]
        if previous is not None:
            old = {k: previous[k] for k in ("kind", "decided_at", "rejected_at", "reviewed_by") if k in previous}
            claim["history"] = [*claim.get("history", []), old][-20:]
        txn.put(name, claim, rid, scope=brain)
        stamp = {"trust": verdict, "reviewed_by": by, "reviewed_at": now}
        if note is not None:
            stamp["review_note"] = note
        updated = {**doc, **stamp}
        if verdict == TRUST_REJECTED:
            if not is_retired(doc):
                updated.update(invalid_at=now, expired_at=now)
            updated["rejection"] = rid
        elif doc.get("rejection") is not None:
            # a person approving what was refused brings the claim back live
            for field in ("invalid_at", "expired_at", "rejection"):
                updated.pop(field, None)
        return put_version(txn, name, brain, updated, eid, now, doc)
