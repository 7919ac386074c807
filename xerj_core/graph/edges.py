"""Edge documents: a checked link or a detector draft turned into the stored document."""

from __future__ import annotations

import math
from typing import Any

from xerj_core.errors import GraphError
from xerj_core.graph.brain import (
    SCHEMA_VERSION,
    TRUST_ASSERTED,
    TRUST_DETECTED,
    edge_id,
    node_id_problem,
    parse_instant,
)
from xerj_core.graph.requests import LinkRequest
from xerj_core.model import EdgeDraft


def _unit(value: Any, field: str) -> float:
    """A finite number clamped to ``[0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphError(f"[{field}] must be a number, got [{value!r:.80}]")
    number = float(value)
    if not math.isfinite(number):
        raise GraphError(f"[{field}] must be finite, got [{value!r}]")
    return min(1.0, max(0.0, number))


def link_document(link: LinkRequest, *, machine: bool = False) -> dict[str, Any]:
    """The edge document a checked link asserts: ``detected`` trust for a machine writer, else ``asserted``."""
    return edge_document(link.src, link.dst, link.type, weight=link.weight, confidence=link.confidence,
                         valid_at=link.valid_at, created_at=link.created_at, detector=link.detector,
                         evidence=link.evidence, trust=TRUST_DETECTED if machine else TRUST_ASSERTED)


def draft_document(draft: EdgeDraft, *, created_at: int) -> dict[str, Any]:
    """The edge document of a detector's draft (machine writer: trust ``detected``)."""
    for field in ("src", "dst", "type", "detector"):
        value = getattr(draft, field)
        if not isinstance(value, str) or not value:
            raise GraphError(f"edge draft [{field}] must be a non-empty string, got [{value!r:.80}]")
        problem = node_id_problem(field, value) if field != "detector" else None
        if problem is not None:
            raise GraphError(f"edge draft {problem}")
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
