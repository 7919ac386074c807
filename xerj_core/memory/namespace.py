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

Re-embedding (``_reembed``) cannot change ``text_vector`` in place (a field's
dims are fixed), so each re-embed fills a new generation ``text_vector_{g}``
with the new embedder, batch by batch, while recall keeps reading the active
one. Each text-vector field carries a ``state`` parameter: ``filling`` while
a re-embed writes it, ``active`` once it is complete (the original field is
active without one), ``retired`` after a later generation took over, and
``abandoned`` when a re-embed to another embedder replaced it unfinished.
Retired and abandoned vectors are dropped from documents as later batches
rewrite them.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs
import numpy as np

from xerj_core.errors import GraphError
from xerj_core.graph.brain import validate_brain_name
from xerj_core.store.names import RESERVED_PREFIX

TEXT_FIELD = "text"
TEXT_VECTOR_FIELD = "text_vector"
VECTOR_FIELD = "vector"
STORED_AT = "stored_at"
FORGOTTEN_AT = "forgotten_at"
METADATA = "metadata"
TRUST = "trust"
EMBEDDER_PARAM = "embedder"
STATE_PARAM = "state"
FILLING, ACTIVE, RETIRED, ABANDONED = "filling", "active", "retired", "abandoned"

# Stored embeddings are rounded to this many decimals in ``_source``: float32 carries about seven
# significant digits, and the shorter JSON halves the bytes every memory costs on disk.
VECTOR_DECIMALS = 6

_EPOCH_MS = {"type": "date", "format": "epoch_millis"}


def rounded(vector: np.ndarray) -> list[float]:
    """An embedding as it is stored in ``_source``."""
    return np.round(vector.astype(np.float64), VECTOR_DECIMALS).tolist()


def validate_namespace(ns: Any) -> str:
    """Return ``ns`` when it is a valid namespace, else raise GraphError saying which rule it breaks."""
    try:
        validate_brain_name(ns)
    except GraphError as exc:
        # The rules are the brain rules; the message speaks of the thing the caller named.
        raise GraphError(exc.reason.replace("brain name", "namespace", 1)) from None
    for suffix, what in (("-tombstones", "tombstone index of another namespace"),
                         ("-edges-history", "edge history of another brain")):
        if ns.endswith(suffix):
            raise GraphError(f"invalid namespace [{ns}]: it must not end in '{suffix}' (that suffix names the "
                             f"{what})")
    return ns


def memory_index(ns: str) -> str:
    return f"{RESERVED_PREFIX}{ns}"


def text_vector_spec(embedder_id: str, embedder_dims: int, **params: Any) -> dict[str, Any]:
    """The mapping of one text-vector field, labelled with its embedder (and, for a generation, its state)."""
    return {"type": "dense_vector", "dims": embedder_dims, "similarity": "cosine", EMBEDDER_PARAM: embedder_id,
            **params}


def namespace_mapping(embedder_id: str, embedder_dims: int) -> dict[str, Any]:
    """The mapping a namespace's index is created with (``vector`` joins it when first supplied)."""
    return {
        "properties": {
            TEXT_FIELD: {"type": "text"},
            TEXT_VECTOR_FIELD: text_vector_spec(embedder_id, embedder_dims),
            STORED_AT: dict(_EPOCH_MS),
            FORGOTTEN_AT: dict(_EPOCH_MS),
            TRUST: {"type": "keyword"},
        }
    }


def vector_mapping(dims: int) -> dict[str, Any]:
    """The mapping addition for a namespace's first caller-supplied vector."""
    return {"properties": {VECTOR_FIELD: {"type": "dense_vector", "dims": dims, "similarity": "cosine"}}}


@attrs.frozen
class TextVectorField:
    """One generation of a namespace's text embeddings: where they live, who made them, and its state."""

    path: str
    generation: int
    embedder: str | None
    dims: int
    state: str


def generation_path(generation: int) -> str:
    return TEXT_VECTOR_FIELD if generation == 0 else f"{TEXT_VECTOR_FIELD}_{generation}"


def text_vector_fields(fields: Mapping[str, Any]) -> list[TextVectorField]:
    """Every text-vector generation in a mapping's fields (path -> FieldSpec), oldest first."""
    found = []
    for path, spec in fields.items():
        if path == TEXT_VECTOR_FIELD:
            generation = 0
        elif path.startswith(f"{TEXT_VECTOR_FIELD}_") and path[len(TEXT_VECTOR_FIELD) + 1:].isdecimal():
            generation = int(path[len(TEXT_VECTOR_FIELD) + 1:])
        else:
            continue
        if spec.type != "dense_vector":
            continue
        found.append(TextVectorField(path, generation, spec.params.get(EMBEDDER_PARAM), spec.dims,
                                     spec.params.get(STATE_PARAM, ACTIVE)))
    return sorted(found, key=lambda field: field.generation)


def active_text_vector(fields: Mapping[str, Any]) -> TextVectorField | None:
    """The generation recall and stores read: the newest ``active`` one."""
    active = [field for field in text_vector_fields(fields) if field.state == ACTIVE]
    return active[-1] if active else None


def filling_text_vector(fields: Mapping[str, Any]) -> TextVectorField | None:
    """The generation a re-embed is writing, if one is under way."""
    filling = [field for field in text_vector_fields(fields) if field.state == FILLING]
    return filling[-1] if filling else None
