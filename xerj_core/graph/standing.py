"""The ids of a brain's standing edges, read off the columns: the live ones and the ones a person rejected."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from xerj_core.errors import IndexNotFound
from xerj_core.graph.brain import TRUST_REJECTED, edges_index

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store.backends import OpenStore


def standing_edge_ids(store: "OpenStore", brain: str) -> tuple[set[str], set[str]]:
    """``(live ids, rejected ids)`` of the brain's edges; two empty sets when it has no edges index.

    A live edge carries no ``invalid_at``; a rejected one was retired under a
    person's rejection of its claim (``trust: rejected``). An edge retired by
    a reconcile pass is in neither set. Only columns are read, never ``_source``.
    """
    try:
        with store.reader(edges_index(brain)) as reader:
            if reader.field("src") is None:
                return set(), set()
            invalid = reader.column("invalid_at")
            edges = reader.live & reader.column("src").present
            live_rows = np.flatnonzero(edges & ~invalid.present)
            rejected_rows = np.empty(0, np.int64)
            trust_ord = reader.field_dictionary("trust").ordinal(TRUST_REJECTED) \
                if reader.field("trust") is not None else None
            if trust_ord is not None:
                trust = reader.column("trust")
                rejected_rows = np.flatnonzero(edges & trust.present & (trust.values == trust_ord))
            live = {reader.id_of(int(row)) for row in live_rows}
            rejected = {reader.id_of(int(row)) for row in rejected_rows}
    except IndexNotFound:
        return set(), set()
    live.discard(None)
    rejected.discard(None)
    return live, rejected  # type: ignore[return-value]
