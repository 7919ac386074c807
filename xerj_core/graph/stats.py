"""The overview's aggregations (terms with their unlisted tail, a date histogram) computed on columns with numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from xerj_core.graph.brain import iso_ms
from xerj_core.store import ABSENT_INT, IndexReader

INTERVALS = {"day": 86_400_000, "hour": 3_600_000}


def top_terms(ordinals: np.ndarray, terms: list[str], size: int) -> tuple[list[dict[str, Any]], int]:
    """The ``size`` most frequent terms (count desc, then term asc) and the count of rows left unlisted."""
    if not ordinals.size:
        return [], 0
    counts = np.bincount(ordinals, minlength=len(terms))
    nonzero = np.flatnonzero(counts)
    if nonzero.size > size:
        # Only terms at least as frequent as the size-th one can be listed; ties resolve on the term.
        threshold = np.partition(counts[nonzero], nonzero.size - size)[nonzero.size - size]
        nonzero = nonzero[counts[nonzero] >= threshold]
    ranked = sorted(((-int(counts[o]), terms[o]) for o in nonzero))[:size]
    buckets = [{"key": term, "doc_count": -neg} for neg, term in ranked]
    return buckets, int(ordinals.size) - sum(b["doc_count"] for b in buckets)


def date_histogram(values: np.ndarray, interval: str) -> list[dict[str, Any]]:
    """Non-empty UTC buckets of epoch-ms ``values``, oldest first."""
    if not values.size:
        return []
    step = INTERVALS[interval]
    keys, counts = np.unique(values // step * step, return_counts=True)
    return [{"key": int(k), "key_as_string": iso_ms(int(k)), "doc_count": int(c)} for k, c in zip(keys, counts)]


def _column(reader: IndexReader, path: str):
    return reader.column(path) if reader.field(path) is not None else None


def edge_stats(reader: IndexReader, *, as_of: int, top: int, interval: str) -> dict[str, Any]:
    """Totals and breakdowns of an edges index.

    ``total`` counts every edge ever asserted (each edge id once, as last
    written); ``live`` those visible at ``as_of``. ``types``, ``detectors`` and
    ``created_over_time`` describe every asserted edge, so retiring one does not
    erase it; ``hubs`` describe the graph as it stood at ``as_of``.
    """
    src, dst = _column(reader, "src"), _column(reader, "dst")
    if src is None or dst is None:
        edges = np.zeros(reader.n_rows, bool)
    else:
        edges = reader.live & src.present & dst.present
    rows = np.flatnonzero(edges)
    valid, invalid = _column(reader, "valid_at"), _column(reader, "invalid_at")
    visible = np.zeros(rows.size, bool)
    if valid is not None:
        visible = valid.values[rows] <= as_of
        if invalid is not None:
            visible &= invalid.values[rows] > as_of
    live_rows = rows[visible]

    def terms_of(path: str, at: np.ndarray) -> tuple[list[dict[str, Any]], int]:
        column = _column(reader, path)
        if column is None:
            return [], 0
        ordinals = column.values[at]
        ordinals = ordinals[ordinals >= 0]
        return top_terms(ordinals.astype(np.int64), reader.field_dictionary(path).terms, top)

    types, types_rest = terms_of("type", rows)
    detectors, detectors_rest = terms_of("detector", rows)
    hubs_out, out_rest = terms_of("src", live_rows)
    hubs_in, in_rest = terms_of("dst", live_rows)
    created = _column(reader, "created_at")
    stamps = np.empty(0, np.int64)
    if created is not None:
        stamps = created.values[rows]
        stamps = stamps[stamps != ABSENT_INT]
    return {
        "edges": {"total": int(rows.size), "live": int(live_rows.size), "invalidated": int(rows.size - live_rows.size)},
        "types": types,
        "detectors": detectors,
        "hubs": {"out": hubs_out, "in": hubs_in},
        "created_over_time": date_histogram(stamps, interval),
        "not_shown": {"types_not_listed": types_rest, "detectors_not_listed": detectors_rest,
                      "hubs_out_not_listed": out_rest, "hubs_in_not_listed": in_rest},
    }
