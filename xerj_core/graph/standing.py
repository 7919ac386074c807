"""A brain's standing edges, read off the columns: the ids of the live ones and of the ones a person rejected,
and the claims the live edges of some files make (for a reconcile that keeps an edge a changed file teaches
again)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from xerj_core.errors import IndexNotFound
from xerj_core.graph.brain import TRUST_REJECTED, edges_index
from xerj_core.graph.idkeys import KEY, IdSet, derived, keys_of_text

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.graph.rowids import RowIds
    from xerj_core.store import IndexReader
    from xerj_core.store.backends import OpenStore


def standing_edge_ids(store: "OpenStore", brain: str, row_ids: "RowIds | None" = None
                      ) -> tuple[set[str], set[str]]:
    """``(live ids, rejected ids)`` of the brain's edges as strings (see :func:`standing_edge_keys`)."""
    live, rejected = standing_edge_keys(store, brain, row_ids)
    return set(live), set(rejected)


def standing_edge_keys(store: "OpenStore", brain: str, row_ids: "RowIds | None" = None) -> tuple[IdSet, IdSet]:
    """``(live ids, rejected ids)`` of the brain's edges; two empty sets when it has no edges index.

    A live edge carries no ``invalid_at``; a rejected one was retired under a
    person's rejection of its claim (``trust: rejected``). An edge retired by
    a reconcile pass is in neither set. Rows are found on columns; their ids
    come from ``row_ids`` (the sealed segments' packed ids, see
    :mod:`.rowids`) where it names them, else from their stored records' headers.
    """
    try:
        with store.reader(edges_index(brain)) as reader:
            if reader.field("src") is None:
                return IdSet(), IdSet()
            invalid = reader.column("invalid_at")
            edges = reader.live & reader.column("src").present
            live_rows = np.flatnonzero(edges & ~invalid.present)
            rejected_rows = np.empty(0, np.int64)
            trust_ord = reader.field_dictionary("trust").ordinal(TRUST_REJECTED) \
                if reader.field("trust") is not None else None
            if trust_ord is not None:
                trust = reader.column("trust")
                rejected_rows = np.flatnonzero(edges & trust.present & (trust.values == trust_ord))
            return _id_set(reader, live_rows, row_ids), _id_set(reader, rejected_rows, row_ids)
    except IndexNotFound:
        return IdSet(), IdSet()


def _id_set(reader: "IndexReader", rows: np.ndarray, row_ids: "RowIds | None") -> IdSet:
    """The ids of ``rows``: a sealed row's key straight from the text ``row_ids`` packs (no string made per id:
    a brain of 20,000 notes stands on 266k edges), the others (the tail's rows, an id not derived) named by
    :func:`_ids_of`."""
    keys = np.empty(0, KEY)
    packed = row_ids.in_order(reader, rows) if row_ids is not None and rows.size else None
    if packed is not None and packed[0] == 32:
        keys, spelled = keys_of_text(packed[1].reshape(-1, 32))
        rows = rows[~spelled]  # blank (a tail row, an id of another length) or not derived
    names = [name for name in _ids_of(reader, rows, row_ids) if name is not None]
    found, more = derived(names)
    return IdSet(np.concatenate([keys, more]), set(names).difference(found))


def _ids_of(reader: "IndexReader", rows: np.ndarray, row_ids: "RowIds | None") -> list[str | None]:
    """The ids of ``rows``: a sealed row's from ``row_ids``, the tail's from their records. Every record read
    made a re-run's reconcile on 133k edges touch all their documents' pages (130 MB of the process's
    resident memory, and 0.3 s), where the packed ids are 32 bytes a row, mapped."""
    if row_ids is None:
        return reader.ids_of(rows.tolist())
    found = row_ids.ids(reader, rows)
    unnamed = [i for i, name in enumerate(found) if name is None]
    if unnamed:
        for i, name in zip(unnamed, reader.ids_of(rows[unnamed].tolist())):
            found[i] = name
    return found


# What a live edge's claim is compared on, besides its endpoints and type: a claim a file teaches again with all of
# these the same is the same claim, still true (see the pipeline's reconcile).
CLAIM_FIELDS = ("detector", "weight", "confidence", "valid_at", "src_format", "dst_format")


def live_claims_of_files(store: "OpenStore", brain: str, files: Iterable[str]) -> list[dict[str, Any]]:
    """The live edges whose evidence cites one of ``files``, each as ``{edge_id, src, type, dst, detector,
    weight, confidence, valid_at, src_format, dst_format, quote, source, offset}`` (absent values None).

    Rows are found on the ``src_file`` and ``invalid_at`` columns; only those rows' documents are read.
    """
    try:
        with store.reader(edges_index(brain)) as reader:
            if reader.field("src_file") is None:
                return []
            dictionary = reader.field_dictionary("src_file")
            ordinals = [o for o in map(dictionary.ordinal, dict.fromkeys(files)) if o is not None]
            if not ordinals:
                return []
            cited, invalid = reader.column("src_file"), reader.column("invalid_at")
            rows = np.flatnonzero(reader.live & cited.present & np.isin(cited.values, ordinals) & ~invalid.present)
            claims = []
            for _row, edge_id, doc, _version in reader.documents(int(r) for r in rows):
                evidence = doc.get("evidence") if isinstance(doc.get("evidence"), dict) else {}
                claims.append({"edge_id": edge_id, "src": doc.get("src"), "type": doc.get("type"),
                               "dst": doc.get("dst"), **{f: doc.get(f) for f in CLAIM_FIELDS},
                               **{f: evidence.get(f) for f in ("quote", "source", "offset")}})
            return claims
    except IndexNotFound:
        return []
