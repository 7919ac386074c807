"""What a memory is about: note names resolved in a brain's nodes indices, and the ``about`` edges that anchor it.

A person names a note the way they would type a wikilink: its exact id, its
title, an alias or its file stem (``Command palette``). Names resolve through
the graph's one resolver (:mod:`xerj_core.graph.names`), as ego's do; a name
that matches several notes, or none, is refused naming the candidates, so
nothing is linked to a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound
from xerj_core.graph import names as graph_names
from xerj_core.graph.brain import META_ID, edges_index, nodes_index, validate_brain_name
from xerj_core.graph.edges import link_document
from xerj_core.graph.requests import parse_link

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import Store, WriteTxn

ABOUT_TYPE = "about"
ABOUT_DETECTOR = "memory-about@1"
MAX_ABOUT = 64
QUOTE_CHARS = 500


def brain_nodes_indices(store: "Store", brain: str, *, must_exist: bool = True) -> list[str]:
    """The nodes indices the brain's meta document names; a named brain without an edges index does not exist
    (404), a namespace's own brain is its memory index until it has one."""
    validate_brain_name(brain)
    try:
        meta = store.get(edges_index(brain), META_ID)
    except IndexNotFound:
        if not must_exist:
            return [nodes_index(brain)]
        raise GraphNotFound(f"[brain] names [{brain}], which does not exist: it has no edges index") from None
    listed = meta[0].get("nodes_index") if meta is not None else None
    return [n for n in listed.split(",") if n] if isinstance(listed, str) and listed else [nodes_index(brain)]


def resolve_nodes(store: "Store", brain: str, names: Iterable[str], field: str, *, must_exist: bool = True
                  ) -> list[str]:
    """Each name as a node id of ``brain``, resolved as ego resolves it (:func:`xerj_core.graph.names.resolve_nodes`:
    exact id, title, alias, unique file stem); a 400 naming the candidates for an ambiguous name and the closest
    names for an unknown one, since a memory anchored to nothing would be silently lost from recall."""
    indices = brain_nodes_indices(store, brain, must_exist=must_exist)
    wanted = list(dict.fromkeys(names))
    found = graph_names.resolve_nodes(store, brain, wanted, nodes_index=",".join(indices), what=field)
    for name, close in found.unknown.items():
        listed = ", ".join(f"{c['name']} ({c['node']})" for c in close)
        hint = f"; candidates: {listed}" if close else ""
        raise GraphError(f"[{field}] name [{name}] does not resolve to a node of brain [{brain}] "
                         f"(by id, title, alias or file stem){hint}")
    return list(found.nodes)


def about_edges(memory_id: str, text: str | None, nodes: list[str], now: int) -> list[dict[str, Any]]:
    """The ``about`` edges a person's memory asserts: memory → node, evidence the memory's text."""
    evidence = {"quote": text[:QUOTE_CHARS]} if text else None
    return [link_document(parse_link({"src": memory_id, "dst": node, "type": ABOUT_TYPE, "valid_at": now,
                                      "created_at": now, "detector": ABOUT_DETECTOR, "evidence": evidence},
                                     now=now))
            for node in nodes if node != memory_id]


def put_about_edges(graph: Any, txn: "WriteTxn", brain: str, docs: list[dict[str, Any]], now: int) -> None:
    """Write the edges in the memory's own transaction, into the brain's (existing) edges index."""
    name = graph._open_edges(txn, brain, now)
    for doc in docs:
        txn.put(name, doc, doc["edge_id"], scope=brain)
