"""Memory tombstones: a person's durable "no" to a memory, keyed on its normalised text (and its vector).

A tombstone lives in the namespace's tombstone index
(``.xerj-memory-{ns}-tombstones``), never in the memory index, so recall,
listing and dedup never meet it. Its id is derived from the normalised text,
so the same words rejected twice are one tombstone and a store of the same
words finds it with one ``get``. With ``dedup`` on, a store whose embedding is
at least ``dedup_threshold`` similar (cosine) to a tombstone's is refused too.
A lifted tombstone (``override_rejection``) keeps who lifted it and when.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import xxhash

from xerj_core.store.names import RESERVED_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import IndexReader, WriteTxn

TOMBSTONE_SUFFIX = "-tombstones"
TOMBSTONE_PREFIX = "tomb-"
TOMBSTONE_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "text_key": {"type": "keyword"},
        "memory_id": {"type": "keyword"},
        "rejected_by": {"type": "keyword"},
        "lifted_by": {"type": "keyword"},
        "rejected_at": {"type": "date", "format": "epoch_millis"},
        "lifted_at": {"type": "date", "format": "epoch_millis"},
    },
}
_SPACE = re.compile(r"\s+")


def tombstone_index(ns: str) -> str:
    return f"{RESERVED_PREFIX}{ns}{TOMBSTONE_SUFFIX}"


def normalise(text: str) -> str:
    """What two texts must share to be "the same value": NFKC, case-folded, whitespace collapsed, trimmed."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def tombstone_id(text: str | None, memory_id: str) -> str:
    """Keyed on the normalised text; a memory with no text (a bare vector) is keyed on its own id."""
    key = f"t\0{normalise(text)}" if text is not None else f"id\0{memory_id}"
    return TOMBSTONE_PREFIX + format(xxhash.xxh3_128_intdigest(key.encode()), "032x")


def is_active(doc: dict[str, Any] | None) -> bool:
    return doc is not None and doc.get("lifted_at") is None


def tombstone_document(memory_id: str, source: dict[str, Any], vector: Iterable[float] | None, *, by: str | None,
                       at: int, note: str | None = None) -> dict[str, Any]:
    text = source.get("text")
    doc: dict[str, Any] = {"memory_id": memory_id, "rejected_at": at}
    if isinstance(text, str):
        doc["text"] = text
        doc["text_key"] = normalise(text)
    if by is not None:
        doc["rejected_by"] = by
    if note is not None:
        doc["note"] = note
    if vector is not None:
        doc["vector"] = list(vector)
    return doc


def put_tombstone(txn: "WriteTxn", ns: str, doc: dict[str, Any]) -> str:
    index = tombstone_index(ns)
    if not txn.exists(index):
        txn.create_index(index, TOMBSTONE_MAPPING)
    tid = tombstone_id(doc.get("text"), doc["memory_id"])
    previous = txn.get(index, tid)  # a tombstone lifted before and now laid again keeps its lifting history
    if previous is not None and previous.get("lifted_at") is not None:
        doc = {**doc, "lifts": [*previous.get("lifts", []), {k: previous[k] for k in
                                                             ("lifted_at", "lifted_by") if k in previous}]}
    txn.put(index, doc, tid)  # the index's own scope (its name), as every reader of it expects
    return tid


def matching(reader: "IndexReader | None", text: str | None, vector: np.ndarray | None,
             threshold: float | None) -> list[tuple[str, dict[str, Any]]]:
    """The active tombstones (read through the tombstone index's ``reader``) a store of ``text``, embedded as
    ``vector``, meets: the one of the same normalised text, and with a ``threshold`` (dedup on) every one whose
    vector is at least that similar."""
    if reader is None:
        return []
    found: dict[str, dict[str, Any]] = {}
    if text is not None:
        tid = tombstone_id(text, "")
        hit = reader.get(tid)
        if hit is not None and is_active(hit[0]):
            found[tid] = hit[0]
    probe = np.asarray(vector, np.float64) if vector is not None else None
    scale = float(np.linalg.norm(probe)) if probe is not None and np.isfinite(probe).all() else 0.0
    if threshold is not None and probe is not None and scale > 0 and np.isfinite(scale):
        probe = probe / scale
        for tid, doc in all_tombstones(reader):
            stored = doc.get("vector")
            if tid in found or not is_active(doc) or not stored or len(stored) != probe.size:
                continue
            other = np.asarray(stored, np.float64)
            norm = np.linalg.norm(other)
            if norm and float(probe @ other) / norm >= threshold - 1e-6:
                found[tid] = doc
    return list(found.items())


def all_tombstones(reader: "IndexReader") -> list[tuple[str, dict[str, Any]]]:
    """Every tombstone the reader holds, as ``(id, document)``, oldest rejection first."""
    out = [(doc_id, source) for _row, doc_id, source, _version in
           reader.documents(np.flatnonzero(reader.live).tolist())]
    out.sort(key=lambda item: (item[1].get("rejected_at", 0), item[0]))
    return out


def lift(txn: "WriteTxn", ns: str, tombstones: list[tuple[str, dict[str, Any]]], *, by: str | None,
         at: int, memory_id: str | None = None) -> list[str]:
    """Lift each tombstone (an ``override_rejection``): who lifted it, when, and for which new memory."""
    index = tombstone_index(ns)
    lifted = []
    for tid, doc in tombstones:
        stamp = {"lifted_at": at, "lifted_by": by if by is not None else "unknown"}
        if memory_id is not None:
            stamp["lifted_for"] = memory_id
        txn.put(index, {**doc, **stamp}, tid)
        lifted.append(tid)
    return lifted


def public(tid: str, doc: dict[str, Any]) -> dict[str, Any]:
    """A tombstone as the API lists it (no stored vector)."""
    out = {"tombstone": tid, **{k: v for k, v in doc.items() if k not in ("vector", "text_key")}}
    out["active"] = doc.get("lifted_at") is None
    return out
