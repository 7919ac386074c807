"""Ranked row lists and top-k selection over dense score arrays, without sorting every row.

Order everywhere is score descending, then row ascending: rows are numbered in
append order, which is the tie-break Elasticsearch gets from Lucene doc ids.
"""

from __future__ import annotations

import attrs
import numpy as np

_EMPTY_ROWS = np.empty(0, np.int64)
_EMPTY_SCORES = np.empty(0, np.float64)
# Below this many rows a plain selection beats the block-maximum pre-filter.
_SMALL = 4096
_BLOCK = 256


@attrs.frozen
class Ranked:
    """Rows best first with their scores (``rows`` int64, ``scores`` float64, same length).

    Returned by :func:`~xerj_core.query.bm25.bm25_top`,
    :func:`~xerj_core.query.knn.knn_top` and :func:`~xerj_core.query.fusion.fuse`;
    ``rows`` index the reader the ranking was computed on (``reader.document(row)``).
    """

    rows: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def empty(cls) -> "Ranked":
        return cls(_EMPTY_ROWS, _EMPTY_SCORES)

    def head(self, k: int) -> "Ranked":
        return Ranked(self.rows[:k], self.scores[:k])

    def pairs(self) -> list[tuple[int, float]]:
        """``[(row, score), ...]`` as Python numbers."""
        return list(zip(self.rows.tolist(), self.scores.tolist()))


def rank_all(rows: np.ndarray, scores: np.ndarray) -> Ranked:
    """Every given row, ordered (``rows`` need not be sorted)."""
    order = np.lexsort((rows, -scores))
    return Ranked(np.asarray(rows[order], np.int64), np.asarray(scores[order], np.float64))


def select_top(rows: np.ndarray, scores: np.ndarray, k: int) -> Ranked:
    """The best ``k`` of ``(rows, scores)`` pairs (``rows`` ascending), ordered; ties keep the lower rows."""
    if k <= 0 or len(rows) == 0:
        return Ranked.empty()
    if len(rows) > k:
        cut = len(scores) - k
        kth = np.partition(scores, cut)[cut]
        above = np.flatnonzero(scores > kth)
        ties = np.flatnonzero(scores == kth)[: k - len(above)]
        keep = np.concatenate([above, ties])
        rows, scores = rows[keep], scores[keep]
    return rank_all(rows, scores)


def top_k(scores: np.ndarray, mask: np.ndarray | None, k: int) -> Ranked:
    """The ``k`` best rows among those where ``mask`` is set, from a dense per-row ``scores`` array.

    ``mask`` None means the rows with a positive score, for ``scores`` known
    non-negative and zero outside the matches (a BM25 sum), which spares a pass.
    For large arrays of non-negative scores the k-th largest block maximum is a
    lower bound of the k-th best score, so only rows reaching it are sorted;
    this costs two vectorised passes instead of a full partition.
    """
    n = len(scores)
    if k <= 0 or n == 0:
        return Ranked.empty()
    if n <= _SMALL or k * 4 > n // _BLOCK:
        rows = np.flatnonzero(mask if mask is not None else scores > 0)
        return select_top(rows, scores[rows], k)
    if mask is None:
        masked = scores
    else:
        masked = scores * mask
        if masked.min() < 0:  # a negative score would hide below unmatched zeros: take the general path
            rows = np.flatnonzero(mask)
            return select_top(rows, scores[rows], k)
    whole = n // _BLOCK * _BLOCK
    block_max = masked[:whole].reshape(-1, _BLOCK).max(axis=1)
    if whole < n:
        block_max = np.append(block_max, masked[whole:].max())
    if len(block_max) <= k:
        threshold = 0.0
    else:
        threshold = np.partition(block_max, len(block_max) - k)[len(block_max) - k]
    if threshold > 0:
        rows = np.flatnonzero(masked >= threshold)
    else:
        # Fewer than k blocks hold a positive score: zero-scored matches fill the page, in row order.
        rows = np.flatnonzero(mask if mask is not None else scores > 0)
    return select_top(rows, scores[rows], k)
