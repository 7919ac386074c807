"""The overview's breakdowns: edge masks on columns, then the search engine's terms and date_histogram aggregations."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.graph.brain import TRUST_DETECTED, TRUST_REJECTED, TRUST_STATES
from xerj_core.store import IndexReader

INTERVALS = ("day", "hour")


def _present(reader: IndexReader, path: str) -> np.ndarray:
    if reader.field(path) is None:
        return np.zeros(reader.n_rows, bool)
    return reader.column(path).present


def edge_masks(reader: IndexReader, as_of: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows that are edges (live, with ``src`` and ``dst``: never the meta or a rejection), and those visible
    at ``as_of``."""
    edges = reader.live & _present(reader, "src") & _present(reader, "dst")
    visible = edges.copy()
    if reader.field("valid_at") is None:
        visible[:] = False
    else:
        visible &= reader.column("valid_at").values <= as_of
    if reader.field("invalid_at") is not None:
        visible &= reader.column("invalid_at").values > as_of  # absent is int64 max: still valid
    return edges, visible


def trust_breakdown(reader: IndexReader, edges: np.ndarray, visible: np.ndarray) -> dict[str, int]:
    """Edges per trust state: ``rejected`` over every edge ever refused, the others over the visible ones."""
    counts = dict.fromkeys(TRUST_STATES, 0)
    if reader.field("trust") is None:
        return counts
    trust, dictionary = reader.column("trust"), reader.field_dictionary("trust")
    for state in TRUST_STATES:
        ordinal = dictionary.ordinal(state)
        if ordinal is not None:
            rows = edges if state == TRUST_REJECTED else visible
            counts[state] = int(np.count_nonzero(rows & trust.present & (trust.values == ordinal)))
    return counts


def created_timeline(histogram: Callable[[dict[str, Any]], dict[str, Any]], interval: str
                     ) -> tuple[list[dict[str, Any]], bool]:
    """``created_over_time``'s buckets from ``histogram`` (date_histogram parameters → its result), and whether
    empty buckets were left out because the span held too many to list."""
    try:
        return histogram({"calendar_interval": interval})["buckets"], False
    except IllegalArgument:
        return histogram({"calendar_interval": interval, "min_doc_count": 1})["buckets"], True


def edge_stats(search: Any, reader: IndexReader, *, as_of: int, top: int, interval: str,
               trust_ords: np.ndarray | None = None) -> dict[str, Any]:
    """Totals and breakdowns of an edges index, through ``search.aggregate`` (the query engine's aggregations).

    ``total`` counts every edge ever asserted (each edge id once, as last
    written); ``live`` those visible at ``as_of``; ``invalidated`` the rest.
    ``types``, ``detectors`` and ``created_over_time`` describe every asserted
    edge, so retiring one does not erase it; ``hubs`` describe the graph as it
    stood at ``as_of``. Each ``*_not_listed`` counts the edges in the unlisted tail.
    """
    edges, visible = edge_masks(reader, as_of)
    breakdown = trust_breakdown(reader, edges, visible)
    if trust_ords is not None:  # ``trust=`` narrows every figure but the per-state counts
        kept = np.isin(reader.column("trust").values, trust_ords) & reader.column("trust").present \
            if reader.field("trust") is not None else np.zeros(reader.n_rows, bool)
        edges, visible = edges & kept, visible & kept
    terms = {"size": top}
    everything = search.aggregate(reader, {
        "types": {"terms": {"field": "type", **terms}},
        "detectors": {"terms": {"field": "detector", **terms}},
    }, edges)
    at_as_of = search.aggregate(reader, {
        "hubs_out": {"terms": {"field": "src", **terms}},
        "hubs_in": {"terms": {"field": "dst", **terms}},
    }, visible)
    timeline, sparse = created_timeline(
        lambda params: search.aggregate(reader, {"t": {"date_histogram": {"field": "created_at", **params}}},
                                        edges)["t"], interval)

    def buckets(agg: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": b["key"], "doc_count": b["doc_count"]} for b in agg["buckets"]]

    not_shown: dict[str, Any] = {
        "types_not_listed": everything["types"]["sum_other_doc_count"],
        "detectors_not_listed": everything["detectors"]["sum_other_doc_count"],
        "hubs_out_not_listed": at_as_of["hubs_out"]["sum_other_doc_count"],
        "hubs_in_not_listed": at_as_of["hubs_in"]["sum_other_doc_count"],
    }
    if sparse:
        not_shown["created_over_time_empty_buckets_omitted"] = True
    total, live = int(np.count_nonzero(edges)), int(np.count_nonzero(visible))
    return {
        "edges": {"total": total, "live": live, "invalidated": total - live},
        "types": buckets(everything["types"]),
        "detectors": buckets(everything["detectors"]),
        "hubs": {"out": buckets(at_as_of["hubs_out"]), "in": buckets(at_as_of["hubs_in"])},
        "created_over_time": timeline,
        "trust": breakdown,
        "review_pending": breakdown[TRUST_DETECTED],
        "not_shown": not_shown,
    }
