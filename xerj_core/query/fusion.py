"""Fusing several rankings into one: reciprocal rank fusion or a weighted linear combination of normalized scores."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.query.dsl import DEFAULT_RANK_CONSTANT, FUSIONS, NORMALIZERS
from xerj_core.query.ranking import Ranked, rank_all


def normalize(scores: np.ndarray, normalizer: str) -> np.ndarray:
    """``none`` (as is), ``minmax`` (onto [0, 1]; a leg whose scores are all equal maps to 1) or ``l2_norm``."""
    if normalizer == "none" or len(scores) == 0:
        return scores
    if normalizer == "minmax":
        low, high = float(scores.min()), float(scores.max())
        if high == low:
            return np.ones_like(scores)
        return (scores - low) / (high - low)
    if normalizer == "l2_norm":
        norm = float(np.sqrt(np.dot(scores, scores)))
        return scores / norm if norm > 0 else scores
    raise IllegalArgument(f"unknown normalizer [{normalizer}]; supported: [{', '.join(NORMALIZERS)}]")


def fuse(rankings: Sequence[Ranked], *, method: str = "rrf", rank_constant: int = DEFAULT_RANK_CONSTANT,
         weights: Sequence[float] | None = None, normalizers: Sequence[str] | str | None = None,
         window: int | None = None, k: int | None = None) -> Ranked:
    """One ranking from several over the same rows (each best first, e.g. a BM25 and a kNN leg).

    ``method="rrf"``: a row scores ``sum(weight_i / (rank_constant + rank_i))``
    over the legs that hold it (ranks from 1; weights default to 1).
    ``method="linear"``: ``sum(weight_i * normalized_score_i)`` with each leg's
    scores normalized by ``normalizers`` (one name for all legs or one per leg;
    default ``minmax``). Each leg contributes its top ``window`` rows when
    given; the result holds the best ``k`` (all when None), ties to the lower
    row. Any other method (``learned``, ...) is an IllegalArgument: a different
    fusion is never silently substituted.
    """
    if method not in FUSIONS:
        raise IllegalArgument(f"unsupported fusion [{method}]; supported: [{', '.join(FUSIONS)}]")
    if rank_constant < 1:
        raise IllegalArgument("[rank_constant] must be greater than or equal to [1]")
    if weights is not None and len(weights) != len(rankings):
        raise IllegalArgument(f"[weights] must hold one number per ranking ({len(rankings)})")
    if isinstance(normalizers, str) or normalizers is None:
        normalizers = [normalizers or "minmax"] * len(rankings)
    elif len(normalizers) != len(rankings):
        raise IllegalArgument(f"[normalizers] must hold one name per ranking ({len(rankings)})")
    keys, contributions = [], []
    for i, ranking in enumerate(rankings):
        if window is not None:
            ranking = ranking.head(window)
        if len(ranking) == 0:
            continue
        weight = 1.0 if weights is None else float(weights[i])
        if method == "rrf":
            part = weight / (rank_constant + np.arange(1, len(ranking) + 1, dtype=np.float64))
        else:
            part = weight * normalize(np.asarray(ranking.scores, np.float64), normalizers[i])
        keys.append(np.asarray(ranking.rows, np.int64))
        contributions.append(part)
    if not keys:
        return Ranked.empty()
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    fused = np.bincount(inverse, np.concatenate(contributions), minlength=len(unique))
    ranked = rank_all(unique, fused)
    return ranked if k is None else ranked.head(k)


def fuse_legs(legs: Sequence[Ranked], fusion: str = "rrf", k: int | None = None, *,
              rank_constant: int = DEFAULT_RANK_CONSTANT, weights: Sequence[float] | None = None,
              normalizers: Sequence[str] | str | None = None) -> Ranked:
    """The hybrid form's fusion of legs over one reader (e.g. ``[bm25, knn]``): :func:`fuse` by method name.

    ``fusion`` is ``rrf`` (rank constant 60) or ``linear`` (min-max normalized
    scores, equal weights unless given); anything else is an IllegalArgument.
    """
    return fuse(legs, method=fusion, rank_constant=rank_constant, weights=weights, normalizers=normalizers, k=k)
