"""What a memory namespace is: its name rules, its backing index, and the mapping that index is created with.

A namespace ``ns`` is the reserved index ``.xerj-memory-{ns}``; it is also the
default nodes index of the brain ``ns``, so a namespace name obeys the brain
name rules (:func:`xerj_core.graph.brain.validate_brain_name`), the ``-edges``
refusal included: a namespace called ``kb-edges`` would otherwise write
memories into brain ``kb``'s edge index.

The index is created on the first store. Its mapping holds:

* ``text`` (``text``): BM25 recall reads its postings;
* ``text_vector`` (``dense_vector`` sized to the embedder): the embedding of
  ``text``, computed at ingest. The embedder's id is kept as the field's
  ``embedder`` parameter, so recall embeds a query with the embedder the
  namespace was written with, whatever the engine is configured with today;
* ``stored_at`` and ``forgotten_at`` (``date``, epoch-ms): the two instants of a
  memory's life; ``forgotten_at`` is absent while the memory is current;
* ``vector`` (``dense_vector``): added on the first store that brings a
  caller-supplied embedding, sized to it; every later vector must match;
* ``metadata``: deliberately not mapped, so arbitrary agent keys are mapped
  dynamically (strings as ``text`` plus a ``.keyword`` sub-field).
"""

from __future__ import annotations

from typing import Any

from xerj_core.errors import GraphError
from xerj_core.graph.brain import validate_brain_name
from xerj_core.store.names import RESERVED_PREFIX

TEXT_FIELD = "text"
TEXT_VECTOR_FIELD = "text_vector"
VECTOR_FIELD = "vector"
STORED_AT = "stored_at"
FORGOTTEN_AT = "forgotten_at"
METADATA = "metadata"
EMBEDDER_PARAM = "embedder"

_EPOCH_MS = {"type": "date", "format": "epoch_millis"}


def validate_namespace(ns: Any) -> str:
    """Return ``ns`` when it is a valid namespace, else raise GraphError saying which rule it breaks."""
    try:
        return validate_brain_name(ns)
    except GraphError as exc:
        # The rules are the brain rules; the message speaks of the thing the caller named.
        raise GraphError(exc.reason.replace("brain name", "namespace", 1)) from None


def memory_index(ns: str) -> str:
    return f"{RESERVED_PREFIX}{ns}"


def namespace_mapping(embedder_id: str, embedder_dims: int) -> dict[str, Any]:
    """The mapping a namespace's index is created with (``vector`` joins it when first supplied)."""
    return {
        "properties": {
            TEXT_FIELD: {"type": "text"},
            TEXT_VECTOR_FIELD: {"type": "dense_vector", "dims": embedder_dims, "similarity": "cosine",
                                EMBEDDER_PARAM: embedder_id},
            STORED_AT: dict(_EPOCH_MS),
            FORGOTTEN_AT: dict(_EPOCH_MS),
        }
    }


def vector_mapping(dims: int) -> dict[str, Any]:
    """The mapping addition for a namespace's first caller-supplied vector."""
    return {"properties": {VECTOR_FIELD: {"type": "dense_vector", "dims": dims, "similarity": "cosine"}}}
