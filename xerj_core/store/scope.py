"""The scope on every row: the brain or namespace each document of a reserved index belongs to.

A reserved index (``.xerj-memory-*``) holds one tenant's rows: namespace ``ns``
in ``.xerj-memory-{ns}``, brain ``b``'s edges in ``.xerj-memory-{b}-edges``.
The store writes the writer's tenant on every row of such an index as the
keyword column :data:`SCOPE_FIELD` (a doc value only, never part of
``_source``), refuses a document or a mapping that tries to set it, and every
reader of a reserved index sees only the rows whose scope is the index's own
tenant. So a row that reached the wrong index by any route is still not shown
to the wrong tenant. Data written before the column existed gets it when the
store opens (:func:`migrate`).
"""

from __future__ import annotations

from typing import Any

from xerj_core.errors import MapperParsingError
from xerj_core.store.mapping import FieldSpec

RESERVED_PREFIX = ".xerj-memory-"
SCOPE_FIELD = "xerj_scope"
SCOPE_SPEC = FieldSpec(SCOPE_FIELD, "keyword")
_EDGES_SUFFIX = "-edges"


def scope_of(index: str) -> str | None:
    """The tenant a reserved index belongs to (the brain of an edges index, else the namespace); None elsewhere."""
    if not index.startswith(RESERVED_PREFIX):
        return None
    name = index[len(RESERVED_PREFIX):]
    return name[:-len(_EDGES_SUFFIX)] if name.endswith(_EDGES_SUFFIX) else name


def refuse_in_document(doc: Any, index: str) -> None:
    if isinstance(doc, dict) and SCOPE_FIELD in doc:
        raise MapperParsingError(f"failed to parse: [{SCOPE_FIELD}] is set by the engine on every document of "
                                 f"[{index}] and a document may not set or change it")


def refuse_in_mapping(fields: Any, index: str) -> None:
    if SCOPE_FIELD in fields:
        raise MapperParsingError(f"[{SCOPE_FIELD}] is the engine's scope field of [{index}]; a mapping may not "
                                 f"define it")


def public_mapping(body: dict[str, Any]) -> dict[str, Any]:
    """An index's ES mapping as callers see it: without the engine's scope field."""
    properties = body.get("properties")
    if isinstance(properties, dict) and SCOPE_FIELD in properties:
        body = {**body, "properties": {k: v for k, v in properties.items() if k != SCOPE_FIELD}}
    return body
