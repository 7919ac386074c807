"""Re-ranking a recall's candidates: min-max normalisation, the recency blend and graph proximity.

All of it runs over the over-fetched candidate set (``max(k * 4, 50)`` rows):
a re-rank can only promote what was fetched. Order is score descending, then
row ascending, the order every ranking in the engine uses.
"""

from __future__ import annotations

import numpy as np

from xerj_core.query.ranking import Ranked, rank_all


def overfetch(k: int) -> int:
    """How many candidates a re-ranked recall fetches before cutting to ``k``."""
    return max(k * 4, 50)


def minmax(values: np.ndarray) -> np.ndarray:
    """``values`` scaled to ``[0, 1]`` over themselves; all-equal values (or one) all become 1."""
    values = np.asarray(values, np.float64)
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return np.ones_like(values)
    return (values - low) / (high - low)


def blend_recency(ranked: Ranked, stored_at: np.ndarray, weight: float) -> Ranked:
    """``(1 - w) * norm_score + w * norm_recency``; ``stored_at`` is per candidate, in ``ranked`` order."""
    if weight <= 0 or not len(ranked):
        return ranked
    scores = (1.0 - weight) * minmax(ranked.scores) + weight * minmax(stored_at.astype(np.float64))
    return rank_all(ranked.rows, scores)


def blend_graph(ranked: Ranked, proximities: np.ndarray, weight: float) -> Ranked:
    """``(1 - w) * normalized_score + w * proximity``; ``proximities`` per candidate, in ``ranked`` order."""
    if not len(ranked):
        return ranked
    scores = (1.0 - weight) * minmax(ranked.scores) + weight * np.asarray(proximities, np.float64)
    return rank_all(ranked.rows, scores)
