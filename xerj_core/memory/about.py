"""What a memory is about: note names resolved in a brain's nodes indices, and the ``about`` edges that anchor it.

A person names a note the way they would type a wikilink: its exact id, its
title, or its file stem (``Command palette``, ``command-palette``). A name is
looked up in that order among the files (``kind: file`` cards) of the brain's
nodes indices, case-insensitively; an exact id wins outright. A name that
matches several files, or none, is refused naming the candidates, so nothing
is linked to a guess.
"""

from __future__ import annotations

import difflib
import posixpath
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from xerj_core.errors import GraphError, GraphNotFound, IndexNotFound
from xerj_core.graph.brain import META_ID, edges_index, nodes_index, validate_brain_name
from xerj_core.graph.edges import link_document
from xerj_core.graph.requests import parse_link

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store import Store, WriteTxn

ABOUT_TYPE = "about"
ABOUT_DETECTOR = "memory-about@1"
MAX_ABOUT = 64
QUOTE_CHARS = 500
MAX_CANDIDATES = 10


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


def _file_cards(store: "Store", indices: Iterable[str]) -> list[tuple[str, str | None, str | None]]:
    """``(id, title, path)`` of every file card of the indices (a document without ``kind`` counts as one)."""
    cards = []
    for name in indices:
        try:
            with store.reader(name) as reader:
                rows = reader.live.copy()
                if reader.field("kind") is not None:
                    kind = reader.column("kind")
                    ordinal = reader.field_dictionary("kind").ordinal("file")
                    rows &= ~kind.present | (kind.values == (ordinal if ordinal is not None else -2))
                for _row, doc_id, source, _version in reader.documents(np.flatnonzero(rows).tolist()):
                    title, path = source.get("title"), source.get("ax_path")
                    cards.append((doc_id, title if isinstance(title, str) else None,
                                  path if isinstance(path, str) else None))
        except IndexNotFound:
            continue
    return cards


def _edge_nodes(store: "Store", brain: str, names: list[str]) -> set[str]:
    """Which of ``names`` already are nodes of the brain's edges (an end of some edge: a note or a memory)."""
    try:
        with store.reader(edges_index(brain)) as reader:
            if reader.field("src") is None:
                return set()
            dictionary = reader.field_dictionary("src")
            return {name for name in names if dictionary.ordinal(name) is not None}
    except IndexNotFound:
        return set()


def _stem(path: str) -> str:
    return posixpath.splitext(posixpath.basename(path))[0]


def resolve_nodes(store: "Store", brain: str, names: Iterable[str], field: str, *, must_exist: bool = True
                  ) -> list[str]:
    """Each name as a node id of ``brain`` (exact id, else title, else file stem); a 400 naming the candidates
    for an ambiguous or unknown name."""
    indices = brain_nodes_indices(store, brain, must_exist=must_exist)
    wanted = list(dict.fromkeys(names))
    resolved: dict[str, str] = {name: name for name in wanted if name in _edge_nodes(store, brain, wanted)}
    for name in wanted:
        if name in resolved:
            continue
        for index in indices:
            try:
                if store.get(index, name) is not None:
                    resolved[name] = name
                    break
            except IndexNotFound:
                continue
    if len(resolved) == len(wanted):
        return [resolved[n] for n in wanted]
    cards = _file_cards(store, indices)
    for name in wanted:
        if name in resolved:
            continue
        folded = name.casefold().strip()
        for key in (lambda c: c[1], lambda c: _stem(c[2]) if c[2] else None,
                    lambda c: posixpath.splitext(c[2])[0] if c[2] else None):
            hits = sorted({c[0] for c in cards if isinstance(key(c), str) and key(c).casefold() == folded})
            if len(hits) == 1:
                resolved[name] = hits[0]
                break
            if len(hits) > 1:
                raise GraphError(f"[{field}] name [{name}] is ambiguous in brain [{brain}]; candidates: "
                                 f"{', '.join(hits[:MAX_CANDIDATES])}")
        else:
            labels = {c[1] for c in cards if c[1]} | {_stem(c[2]) for c in cards if c[2]}
            close = difflib.get_close_matches(name, sorted(labels), n=5, cutoff=0.6)
            hint = f"; candidates: {', '.join(close)}" if close else ""
            raise GraphError(f"[{field}] name [{name}] does not resolve to a node of brain [{brain}] "
                             f"(by id, title or file stem){hint}")
    return [resolved[n] for n in wanted]


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
