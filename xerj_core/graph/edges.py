"""Edge documents: a link body or a detector draft checked and turned into the stored document."""

from __future__ import annotations

import math
from typing import Any

from xerj_core.errors import GraphError
from xerj_core.graph.brain import (
    DEFAULT_DETECTOR,
    SCHEMA_VERSION,
    TRUST_ASSERTED,
    TRUST_DETECTED,
    edge_id,
    now_ms,
    parse_instant,
)
from xerj_core.model import EdgeDraft

LINK_FIELDS = ("src", "dst", "type", "weight", "confidence", "valid_at", "created_at", "detector", "evidence")


def _required_text(body: dict[str, Any], field: str) -> str:
    if field not in body or body[field] is None:
        raise GraphError(f"missing required field [{field}]")
    value = body[field]
    if not isinstance(value, str) or not value:
        raise GraphError(f"[{field}] must be a non-empty string")
    return value


def _unit(value: Any, field: str) -> float:
    """A finite number clamped to ``[0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphError(f"[{field}] must be a number, got [{value!r:.80}]")
    number = float(value)
    if not math.isfinite(number):
        raise GraphError(f"[{field}] must be finite, got [{value!r}]")
    return min(1.0, max(0.0, number))


def link_document(body: Any, *, machine: bool = False, now: int | None = None) -> dict[str, Any]:
    """The edge document a link body asserts, every rule of the contract's LinkBody checked first.

    Nothing is written here: a refusal raises GraphError before any transaction starts.
    """
    if not isinstance(body, dict):
        raise GraphError("the link body must be a JSON object")
    unknown = [key for key in body if key not in LINK_FIELDS]
    if unknown:
        raise GraphError(f"unknown field [{unknown[0]}] in the link body; expected one of: {', '.join(LINK_FIELDS)}")
    src = _required_text(body, "src")
    dst = _required_text(body, "dst")
    type_ = _required_text(body, "type")
    if src == dst:
        raise GraphError(f"src and dst are the same node [{src}]: an edge must join two different nodes")
    stamp = now_ms() if now is None else now
    weight = _unit(body["weight"], "weight") if body.get("weight") is not None else 1.0
    confidence = _unit(body["confidence"], "confidence") if body.get("confidence") is not None else 1.0
    valid_at = parse_instant(body["valid_at"], "valid_at") if body.get("valid_at") is not None else stamp
    created_at = parse_instant(body["created_at"], "created_at") if body.get("created_at") is not None else stamp
    detector = body.get("detector")
    if detector is None:
        detector = DEFAULT_DETECTOR
    elif not isinstance(detector, str):
        raise GraphError(f"[detector] must be a string, got [{detector!r:.80}]")
    evidence = body.get("evidence")
    if evidence is not None and not isinstance(evidence, dict):
        raise GraphError("[evidence] must be an object; {quote, source, offset} is the shape readers expect")
    if evidence is not None:
        _check_evidence(evidence)
    return edge_document(src, dst, type_, weight=weight, confidence=confidence, valid_at=valid_at,
                         created_at=created_at, detector=detector, evidence=evidence,
                         trust=TRUST_DETECTED if machine else TRUST_ASSERTED)


def _check_evidence(evidence: dict[str, Any]) -> None:
    """The mapped evidence fields must fit their column types, so the write cannot fail half-way."""
    quote, source, offset = evidence.get("quote"), evidence.get("source"), evidence.get("offset")
    if quote is not None and not isinstance(quote, str):
        raise GraphError("[evidence.quote] must be a string")
    if source is not None and not isinstance(source, str):
        raise GraphError("[evidence.source] must be a string")
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int)
                               or not -(2**63) <= offset < 2**63):
        raise GraphError("[evidence.offset] must be an integer")


def draft_document(draft: EdgeDraft, *, created_at: int) -> dict[str, Any]:
    """The edge document of a detector's draft (machine writer: trust ``detected``)."""
    for field in ("src", "dst", "type", "detector"):
        value = getattr(draft, field)
        if not isinstance(value, str) or not value:
            raise GraphError(f"edge draft [{field}] must be a non-empty string, got [{value!r:.80}]")
    if isinstance(draft.valid_at, bool) or not isinstance(draft.valid_at, int):
        raise GraphError(f"edge draft [valid_at] must be epoch milliseconds, got [{draft.valid_at!r}]")
    evidence = draft.evidence.to_json() if draft.evidence is not None else None
    return edge_document(draft.src, draft.dst, draft.type, weight=_unit(draft.weight, "weight"),
                         confidence=_unit(draft.confidence, "confidence"),
                         valid_at=parse_instant(draft.valid_at, "valid_at"), created_at=created_at,
                         detector=draft.detector, evidence=evidence, trust=TRUST_DETECTED,
                         src_format=draft.src_format, dst_format=draft.dst_format)


def edge_document(src: str, dst: str, type_: str, *, weight: float, confidence: float, valid_at: int,
                  created_at: int, detector: str, evidence: dict[str, Any] | None, trust: str,
                  src_format: str | None = None, dst_format: str | None = None) -> dict[str, Any]:
    """A stored edge: unset optional fields are omitted, never null (omission is the liveness signal)."""
    doc: dict[str, Any] = {
        "edge_id": edge_id(src, type_, dst, valid_at),
        "src": src,
        "dst": dst,
        "type": type_,
        "weight": weight,
        "confidence": confidence,
        "valid_at": valid_at,
        "created_at": created_at,
        "detector": detector,
        "trust": trust,
        "schema_version": SCHEMA_VERSION,
    }
    if src_format is not None:
        doc["src_format"] = src_format
    if dst_format is not None:
        doc["dst_format"] = dst_format
    if evidence is not None:
        doc["evidence"] = evidence
        if isinstance(evidence.get("source"), str):
            doc["src_file"] = evidence["source"]
    return doc


def is_edge(doc: dict[str, Any] | None) -> bool:
    """Whether a stored document is an edge (the meta and rejection documents have no ``src``)."""
    return doc is not None and isinstance(doc.get("src"), str) and isinstance(doc.get("dst"), str)


def is_retired(doc: dict[str, Any]) -> bool:
    return doc.get("invalid_at") is not None
