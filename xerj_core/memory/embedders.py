"""A namespace's embedder: chosen at creation, reported, and changed by re-embedding every memory in place.

``create`` (``PUT /_memory/{ns}``) makes a namespace with a chosen embedder;
once it holds memories its embedder is fixed, and changing it is a refusal
that says why and names the re-embed call. ``report`` is what ``GET
/_memory/{ns}`` and the graph overview say about it. ``reembed`` (``POST
/_memory/{ns}/_reembed``) moves every memory onto another embedder:

1. one transaction adds a new text-vector generation in state ``filling``
   (an unfinished re-embed to the same embedder is resumed instead);
2. batches of memories that lack the new vector are embedded outside any
   transaction, then written back one transaction per batch, each document
   re-read inside the transaction so a concurrent forget is kept;
3. one transaction marks the new generation ``active`` and the old one
   ``retired``.

A kill at any point loses at most the batch in flight: the vectors written
so far are in their documents, so calling ``_reembed`` again embeds only the
memories still without one. Stores during the re-embed write both vectors.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from xerj_core.embedding import get_embedder, unavailable
from xerj_core.errors import GraphError, XerjError
from xerj_core.memory.namespace import (ABANDONED, ACTIVE, FILLING, RETIRED, STATE_PARAM, TEXT_FIELD,
                                        active_text_vector, filling_text_vector, generation_path,
                                        namespace_mapping, rounded, text_vector_fields, text_vector_spec)

CREATE_KEYS = {"embedder"}
REEMBED_KEYS = {"embedder", "batch_size"}
DEFAULT_BATCH = 256
MAX_BATCH = 10_000


@attrs.frozen
class ReembedRequest:
    embedder: str
    batch_size: int = DEFAULT_BATCH


def _object(body: Any, allowed: set[str], call: str) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise GraphError(f"the {call} body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise GraphError(f"[{unknown[0]}] is not a parameter of {call}; known: {', '.join(sorted(allowed))}")
    embedder = body.get("embedder")
    if embedder is not None and (not isinstance(embedder, str) or not embedder):
        raise GraphError("[embedder] must be a non-empty string naming an installed embedder")
    return body


def parse_reembed(body: Any) -> ReembedRequest:
    body = _object(body, REEMBED_KEYS, "_reembed")
    if body.get("embedder") is None:
        raise GraphError("[embedder] is required: the id of the embedder to re-embed every memory with")
    size = body.get("batch_size", DEFAULT_BATCH)
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_BATCH:
        raise GraphError(f"[batch_size] must be an integer from 1 to {MAX_BATCH}, got [{size!r:.40}]")
    return ReembedRequest(body["embedder"], size)


def _chosen(service, embedder_id: str):
    """The embedder a caller named; a refusal naming the installed ones when it is unknown or cannot run."""
    try:
        return get_embedder(service.embedders(), embedder_id)
    except XerjError as exc:
        raise GraphError(f"[embedder] {exc.reason}") from None


def report(service, fields) -> dict[str, Any]:
    """What a namespace says about its embedder: the id, and why it cannot run or how far a re-embed got."""
    active = active_text_vector(fields)
    embedder_id = active.embedder if active is not None and active.embedder else service._embedder_id(None)
    body: dict[str, Any] = {"embedder": embedder_id}
    found = service.embedders().get(embedder_id)
    why = "no installed plugin registers this embedder" if found is None else unavailable(found)
    if why is not None:
        body["embedder_unavailable"] = why
    filling = filling_text_vector(fields)
    if filling is not None:
        body["reembed_unfinished"] = {"embedder": filling.embedder, "field": filling.path}
    return body


def create(service, ns: str, body: Any) -> dict[str, Any]:
    """Create namespace ``ns`` with the chosen (or default) embedder; an empty namespace may still switch."""
    index = service._index(ns)
    request = _object(body, CREATE_KEYS, "PUT /_memory/{namespace}")
    embedder = _chosen(service, request.get("embedder") or service._embedder_id(None))

    def write(txn) -> bool:
        if not txn.exists(index):
            txn.create_index(index, namespace_mapping(embedder.id, embedder.dims))
            return True
        target = txn.index(index)
        fields = target.mapping.fields
        active = active_text_vector(fields)
        if active is not None and active.embedder == embedder.id:
            return False
        if target.state.live:
            was = active.embedder if active is not None else "none"
            raise GraphError(
                f"namespace [{ns}] holds {target.state.live} memories embedded by [{was}], so its embedder "
                f"cannot change under them; re-embed them instead: POST /_memory/{ns}/_reembed "
                f"{{\"embedder\": \"{embedder.id}\"}}")
        # Empty: the new embedder becomes a fresh active generation, and any earlier one is retired.
        _add_generation(txn, index, fields, embedder, ACTIVE)
        if active is not None:
            txn.set_field_params(index, active.path, {STATE_PARAM: RETIRED})
        return False

    created = service.index_store.transact(write)
    return {"acknowledged": True, "namespace": ns, "created": created, "embedder": embedder.id,
            "dims": embedder.dims}


def _add_generation(txn, index: str, fields, embedder, state: str) -> str:
    generations = text_vector_fields(fields)
    path = generation_path(generations[-1].generation + 1 if generations else 0)
    # The first generation needs no label to be active (namespaces of earlier builds carry none).
    params = {} if path == generation_path(0) and state == ACTIVE else {STATE_PARAM: state}
    txn.put_mapping(index, {"properties": {path: text_vector_spec(embedder.id, embedder.dims, **params)}})
    return path


def reembed(service, ns: str, body: Any) -> dict[str, Any]:
    """Re-embed every memory of ``ns`` with another embedder, in place, one transaction per batch; resumable."""
    index = service._index(ns)
    request = parse_reembed(body)
    embedder = _chosen(service, request.embedder)
    store = service.index_store

    def begin(txn) -> tuple[str | None, bool]:
        if not txn.exists(index):
            raise service._missing(ns)
        fields = txn.index(index).mapping.fields
        active, filling = active_text_vector(fields), filling_text_vector(fields)
        if filling is not None and filling.embedder == embedder.id:
            return filling.path, True
        if filling is not None:
            txn.set_field_params(index, filling.path, {STATE_PARAM: ABANDONED})
        if active is not None and active.embedder == embedder.id:
            return None, False
        return _add_generation(txn, index, fields, embedder, FILLING), False

    path, resumed = store.transact(begin)
    result = {"namespace": ns, "embedder": embedder.id, "dims": embedder.dims, "resumed": resumed,
              "reembedded": 0, "batches": 0}
    if path is None:
        return {**result, "already": True}
    cursor = -1
    while True:
        batch, cursor = _next_batch(store, index, path, cursor, request.batch_size)
        if not batch:
            break
        texts = [text for _id, text in batch]
        vectors = np.asarray(service._embed_many(embedder, texts), np.float32)
        result["reembedded"] += store.transact(lambda txn: _write_batch(txn, index, path, batch, vectors))
        result["batches"] += 1

    def finish(txn) -> None:
        fields = txn.index(index).mapping.fields
        filling = filling_text_vector(fields)
        if filling is None or filling.path != path:
            raise GraphError(f"namespace [{ns}]: another re-embed took over while this one ran; "
                             f"call _reembed again to finish it")
        for field in text_vector_fields(fields):
            if field.state == ACTIVE:
                txn.set_field_params(index, field.path, {STATE_PARAM: RETIRED})
        txn.set_field_params(index, path, {STATE_PARAM: ACTIVE})

    store.transact(finish)
    return result


def _next_batch(store, index: str, path: str, cursor: int, size: int) -> tuple[list[tuple[str, str]], int]:
    """Up to ``size`` ``(id, text)`` of memories after row ``cursor`` that still lack ``path``; the new cursor.

    Rows only move forward (a rewritten document gets a new row), so the
    cursor guarantees the loop ends even for memories that have no text.
    """
    with store.reader(index) as reader:
        todo = reader.live.copy()
        todo[: cursor + 1] = False
        if reader.field(path) is not None:
            todo &= ~reader.column(path).present
        batch: list[tuple[str, str]] = []
        last = cursor
        for row in np.flatnonzero(todo).tolist():
            last = row
            found = reader.document(row)
            if found is None:
                continue
            text = found[1].get(TEXT_FIELD)
            if isinstance(text, str):
                batch.append((found[0], text))
                if len(batch) == size:
                    break
        return batch, last


def _write_batch(txn, index: str, path: str, batch: list[tuple[str, str]], vectors: np.ndarray) -> int:
    """Write one batch's vectors into their documents; stale generations are dropped as the documents are rewritten."""
    target = txn.index(index)
    stale = {field.path for field in text_vector_fields(target.mapping.fields) if field.state in (RETIRED, ABANDONED)}
    written = 0
    for (doc_id, text), vector in zip(batch, vectors):
        found = target.get(doc_id)
        if found is None or found[0].get(TEXT_FIELD) != text or path in found[0]:
            continue  # purged, or rewritten with the new vector already, since the batch was read
        source = {key: value for key, value in found[0].items() if key not in stale}
        source[path] = rounded(vector)
        target.put(source, doc_id)
        written += 1
    return written
