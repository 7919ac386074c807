"""Bringing a data directory's autoindex data to the current layout when it is opened.

Layout 1 (before roots had identities) put every folder's documents of a
dataset into one index, ``ax-notes``, keyed by the file's root-relative path, so
two folders holding an ``index.md`` overwrote each other. Layout 2 gives each
brain's folder its own dataset indices, ``ax-notes-<root id>``. Migration, in one
write transaction (so every process opening the directory sees the old layout
or the new, never half of one):

- each document a brain's file states name moves to that brain's own index;
- a document two brains both name (the collision) went to whichever wrote it
  last (the larger ``indexed_at``); the other brain's file is marked changed, so
  its next run reads the file again instead of keeping the other folder's text;
- each brain's meta document points its ``nodes_index`` at the new indices;
- the catalog gets a root record per brain and a card per new index, and the
  layout marker; an old index left empty is dropped.

Edges are untouched: node ids are still the documents' ids, unique within a brain.
"""

from __future__ import annotations

import logging
from typing import Any

from xerj_core.autoindex.sink import (
    CATALOG_INDEX,
    CATALOG_MAPPING,
    DATASET_MAPPING,
    FILES_INDEX,
    LAYOUT,
    LAYOUT_ID,
    dataset_card,
    dataset_index,
    derive_root_id,
    doc_ref,
    file_state_id,
    root_record,
    root_record_id,
    split_ref,
)
from xerj_core.errors import IndexNotFound
from xerj_core.graph.brain import META_ID, edges_index
from xerj_core.text import derive_brain_name

log = logging.getLogger(__name__)


def needs_migration(store: Any) -> bool:
    """Whether ``store`` holds autoindex data in an older layout (one cheap read)."""
    with store.read_txn() as raw:
        try:
            reader = store.open_reader(raw, CATALOG_INDEX)
        except IndexNotFound:
            return False
        found = reader.get(LAYOUT_ID)
    return found is None or found[0].get("layout", 0) < LAYOUT


def migrate(store: Any) -> dict[str, Any] | None:
    """Migrate ``store`` to the current layout if it needs it; what was done, or None when nothing was."""
    if not needs_migration(store):
        return None
    report = store.transact(_migrate)
    if report is not None:
        log.warning("autoindex data migrated to layout %s: %s", LAYOUT, report)
    return report


def _all_live(txn: Any, index: str) -> list[tuple[str, dict[str, Any]]]:
    """Every live document of ``index`` in this write transaction, as ``(id, source)``."""
    from xerj_core.store import idmap

    target = txn.index(index)
    found = []
    for doc_id in list(idmap.scan(txn.raw, txn.dbs, target.ix, target.id_runs())):
        got = target.get(doc_id)
        if got is not None:
            found.append((doc_id, got[0]))
    return found


def _migrate(txn: Any) -> dict[str, Any] | None:
    marker = txn.get(CATALOG_INDEX, LAYOUT_ID)
    if marker is not None and marker.get("layout", 0) >= LAYOUT:
        return None  # another process migrated first
    states: dict[str, dict[str, dict[str, Any]]] = {}
    if txn.exists(FILES_INDEX):
        for doc_id, source in _all_live(txn, FILES_INDEX):
            brain, path = source.get("brain"), source.get("ax_path")
            if isinstance(brain, str) and isinstance(path, str):
                states.setdefault(brain, {})[path] = source
    old_cards = {doc_id: source for doc_id, source in _all_live(txn, CATALOG_INDEX)}
    txn.put_mapping(CATALOG_INDEX, CATALOG_MAPPING)  # before any new entry, so none of its fields turns dynamic
    root_ids = _root_ids(sorted(states))
    # Who owns each document: the brain whose state naming it was written last.
    owner: dict[str, tuple[int, str]] = {}
    for brain, files in states.items():
        for source in files.values():
            for ref in source.get("docs") or ():
                at = int(source.get("indexed_at") or 0)
                if ref not in owner or at > owner[ref][0]:
                    owner[ref] = (at, brain)
    moved: set[str] = set()
    reread: dict[str, list[str]] = {}
    datasets: dict[str, set[str]] = {}
    for brain, files in states.items():
        rid = root_ids[brain]
        for path, source in files.items():
            kept, lost = [], False
            for ref in source.get("docs") or ():
                index, doc_id = split_ref(ref)
                if owner[ref][1] != brain or not txn.exists(index):
                    lost = True
                    continue
                found = txn.get(index, doc_id)
                if found is None:
                    lost = True
                    continue
                new_index = dataset_index(index, rid)
                if not txn.exists(new_index):
                    txn.create_index(new_index, txn.index(index).mapping.to_es() or DATASET_MAPPING)
                txn.put(new_index, found, doc_id)
                kept.append(doc_ref(new_index, doc_id))
                datasets.setdefault(brain, set()).add(new_index)
                moved.add(ref)
            update = {**source, "docs": kept}
            if lost:
                # no file has this stamp and no bytes this hash: the next run reads and parses the file again
                update["mtime_ns"], update["hash"] = -1, ""
                reread.setdefault(brain, []).append(path)
            txn.put(FILES_INDEX, update, file_state_id(brain, path))
    emptied = _remove_moved(txn, moved)
    roots = _roots_of(old_cards, states)
    now = max((int(s.get("indexed_at") or 0) for files in states.values() for s in files.values()), default=0)
    for brain, rid in root_ids.items():
        indices = sorted(datasets.get(brain, ()))
        _repoint_meta(txn, brain, rid, indices)
        txn.put(CATALOG_INDEX, root_record(rid, roots.get(brain), brain, indices, now), root_record_id(rid))
        for index in indices:
            txn.put(CATALOG_INDEX, dataset_card(index, rid, roots.get(brain), brain, txn.index(index).state.live,
                                                now), index)
    for doc_id, card in old_cards.items():
        if card.get("kind") is None:
            txn.delete(CATALOG_INDEX, doc_id)
    txn.put(CATALOG_INDEX, {"kind": "layout", "layout": LAYOUT}, LAYOUT_ID)
    return {"brains": {b: root_ids[b] for b in sorted(root_ids)}, "documents_moved": len(moved),
            "files_to_reread": reread, "indices_dropped": emptied}


def _root_ids(brains: list[str]) -> dict[str, str]:
    """Each brain's root id, widened where two brains' short ids clash (as ``sink.root_of`` would)."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for brain in brains:
        width = 8
        while derive_root_id(brain, width) in taken and width < 32:
            width *= 2
        ids[brain] = derive_root_id(brain, width)
        taken.add(ids[brain])
    return ids


def _remove_moved(txn: Any, moved: set[str]) -> list[str]:
    """Delete the moved documents from their old indices; drop an old index left with nothing in it."""
    touched = set()
    for ref in sorted(moved):
        index, doc_id = split_ref(ref)
        txn.delete(index, doc_id)
        touched.add(index)
    emptied = []
    for index in sorted(touched):
        if txn.index(index).state.live == 0:
            txn.delete_index(index)
            emptied.append(index)
    return emptied


def _roots_of(cards: dict[str, dict[str, Any]], states: dict[str, Any]) -> dict[str, str]:
    """Each brain's folder, where the old catalog lets it be told: the root whose derived name is the brain's."""
    roots: dict[str, str] = {}
    for card in cards.values():
        for root in card.get("roots") or ():
            if isinstance(root, str) and derive_brain_name(root) in states:
                roots.setdefault(derive_brain_name(root), root)
        brains = card.get("brains") or []
        if len(brains) == 1 and len(card.get("roots") or []) == 1:
            roots.setdefault(brains[0], card["roots"][0])
    return roots


def _repoint_meta(txn: Any, brain: str, rid: str, indices: list[str]) -> None:
    """The brain's meta document names its own indices where it named the shared ones."""
    name = edges_index(brain)
    meta = txn.get(name, META_ID) if txn.exists(name) else None
    if meta is None or not isinstance(meta.get("nodes_index"), str):
        return
    mine = set(indices)
    names = [dataset_index(n, rid) if dataset_index(n, rid) in mine else n for n in meta["nodes_index"].split(",")]
    txn.put(name, {**meta, "nodes_index": ",".join(names)}, META_ID)
