"""The dedup probe's pruning: per-segment low-rank sketches that bound every row's cosine to a probe, exactly.

A store with ``dedup`` and no duplicate must show that no current memory
reaches the threshold, which over a full scan reads every stored vector
(100k memories of the default embedder's 2,304 float32s are 0.9 GB, some
45 ms). Instead each sealed segment of at least :data:`SKETCH_MIN_ROWS` rows
keeps, once per process and beside the kNN norms, an orthonormal basis ``P``
of :data:`SKETCH_DIMS` directions and, per row, the projection ``y = P x̂`` of
its unit vector and the length ``r`` of what ``P`` leaves out. ``P`` spans
the top principal directions of a sample of the segment's unit rows within
its :data:`SKETCH_COORDS` coordinates of most energy (on the default
embedder these hold the dense meaning and the common words' buckets, and the
bound prunes as well as a full-width PCA), so projecting a segment reads a
sixth of each row and costs a sixth of the arithmetic. For a unit probe
``q̂`` split the same way, Cauchy-Schwarz on the left-out parts gives, for
every row::

    cos(q̂, x̂) = P q̂ · P x̂ + (q̂ - PᵀP q̂) · (x̂ - PᵀP x̂) <= P q̂ · y + r_q r

so a row whose bound is below the threshold cannot be a duplicate and is
never read; the rows left (one or two on real text at 0.95) are scored by
the same kNN code as before, so the answer is the very row the full scan
gives. The bound costs one ``rows x 32`` matrix-vector product over the
leading directions (a 72nd of the vectors' bytes), then the full 64 over
the rows that one leaves (a few percent).

Rounding. Every float32 dot product here has length at most ``D`` (2,304)
over unit vectors, so its error is below ``D * 2**-24`` (Higham's ``γ_D``,
1.4e-4), and a sum of ``SKETCH_DIMS`` such errors weighted by a unit vector's
entries is below ``sqrt(SKETCH_DIMS) * γ_D`` (1.1e-3). The left-out lengths
are taken from ``1 - |y|² + SLACK`` (never smaller than the true one) and the
cut sits :data:`MARGIN` below the threshold, which covers both sides' errors
and the kNN score's own; a wider margin only keeps a few more rows to score.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xerj_core.query.knn import segment_norms, similarity_of

SKETCH_DIMS = 64
# The first pass bounds every row with the leading directions only (half the bytes); the rest refine its survivors.
HEAD_DIMS = 32
SKETCH_COORDS = 384
# Segments smaller than this are scanned as they are; a sealed tail (1,024 rows by default) is sketched.
SKETCH_MIN_ROWS = 1024
# Below this many dimensions a 64-direction sketch saves too little of the scan to pay for its bound.
SKETCH_MIN_DIMS = 4 * SKETCH_DIMS
SAMPLE_ROWS = 1024
MARGIN = 4e-3
SLACK = 4e-3


def candidates(reader: Any, field: str, probe: np.ndarray, lo: int, hi: int, cutoff: float) -> np.ndarray | None:
    """Rows of ``[lo, hi)`` (bool over every row of ``reader``) whose cosine to ``probe`` may reach ``cutoff``.

    Rows of sketched segments whose bound is below ``cutoff - MARGIN`` are
    left out; every other row of the window (the tail, small segments) is
    kept. None when nothing can be pruned (a field that is not cosine,
    short vectors, a cutoff the margin reaches below zero, no sketched
    segment in the window): the caller then scans the whole window.
    """
    spec = reader.mapping.fields.get(field)
    if spec is None or not spec.dims or spec.dims < SKETCH_MIN_DIMS or similarity_of(spec) != "cosine":
        return None
    if cutoff - MARGIN <= 0.0:
        return None
    query = np.asarray(probe, np.float64)
    norm = float(np.sqrt(query @ query))
    if norm == 0.0:
        return None
    unit = query / norm
    keep: np.ndarray | None = None
    for seg in reader.segments:
        if seg.start < lo or seg.end > hi or seg.end - seg.start < SKETCH_MIN_ROWS:
            continue
        sketch = _sketch(reader, seg, field)
        if sketch is None:
            continue
        if keep is None:
            keep = np.zeros(reader.n_rows, bool)
            keep[lo:hi] = True
        keep[seg.start:seg.end] = _possible(sketch, unit, cutoff - MARGIN)
    return keep


def _possible(sketch: tuple[np.ndarray, ...], unit: np.ndarray, cut: float) -> np.ndarray:
    """Rows of one sketched segment whose bound reaches ``cut``: first with the leading half of the
    directions over every row, then with all of them over the rows that bound left."""
    coords, basis, head, rest, head_left, left = sketch
    into = basis @ unit[coords]
    lead = into[:HEAD_DIMS]
    # The row passes are numpy's own streaming loop, not the BLAS: a multi-threaded BLAS's matrix-vector
    # product wakes its worker threads per call, and on a busy machine waiting for them cost 5-8x the pass
    # (the same reason as xerj_core.query.knn); streaming, the pass is bound by memory either way.
    bound = np.einsum("ij,j->i", head, lead.astype(np.float32))
    bound += head_left * np.float32(np.sqrt(max(1.0 - float(lead @ lead) + SLACK, 0.0)))
    rows = np.flatnonzero(bound >= cut)
    out = np.zeros(len(head), bool)
    if len(rows):
        full = np.einsum("ij,j->i", head[rows], lead.astype(np.float32))
        full += np.einsum("ij,j->i", rest[rows], into[HEAD_DIMS:].astype(np.float32))
        full += left[rows] * np.float32(np.sqrt(max(1.0 - float(into @ into) + SLACK, 0.0)))
        out[rows[full >= cut]] = True
    return out


def _sketch(reader: Any, seg: Any, field: str) -> tuple[np.ndarray, ...] | None:
    """:func:`split` of one sealed segment's sketch of ``field``, built once per process and kept with the segment."""
    key = ("dedup-sketch", field, SKETCH_DIMS, SKETCH_COORDS)
    found = seg.derived.get(key)
    if found is not None:
        return found
    column = reader.segment_column(seg, field)
    if column is None:
        return None
    norms = segment_norms(seg, field, column.values)  # the kNN scan's own cache: the same norms, computed once
    with seg.lock:
        found = seg.derived.get(key)
        if found is None:
            found = seg.derived[key] = split(*build_sketch(column.values, norms[0], norms[1]), norms)
    return found


def split(coords: np.ndarray, basis: np.ndarray, projected: np.ndarray, left: np.ndarray,
          norms: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
    """``(coordinates, P as float64, y's leading columns, y's other columns, r beyond the leading ones, r)``,
    contiguous."""
    inverse, squared = norms
    head = np.ascontiguousarray(projected[:, :HEAD_DIMS])
    length = squared.astype(np.float64) * inverse.astype(np.float64) ** 2
    head_left = np.sqrt(np.maximum(length - np.einsum("ij,ij->i", head, head, dtype=np.float64) + SLACK, 0.0))
    return (coords, basis.astype(np.float64), head, np.ascontiguousarray(projected[:, HEAD_DIMS:]),
            head_left.astype(np.float32), left)


def build_sketch(values: np.ndarray, inverse: np.ndarray,
                 squared: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(coordinates, P, y, r)`` for ``values`` (rows x D float32) with per-row inverse and squared norms.

    ``coordinates`` are the :data:`SKETCH_COORDS` coordinates (ascending)
    holding the most energy over an even sample of the unit rows; ``P``
    (``SKETCH_DIMS x len(coordinates)``, orthonormal rows, zero elsewhere)
    spans the sample's top principal directions within them (no centring:
    what is bounded is a dot product); ``y`` is each unit row projected; ``r``
    bounds from above the length of what the projection leaves out (a row
    with no vector gets ``y = 0``). The same rows always give the same sketch.
    """
    n, dims = values.shape
    sample = np.unique(np.linspace(0, n - 1, min(n, SAMPLE_ROWS)).astype(np.int64))
    rows = (values[sample] * inverse[sample, None]).astype(np.float64)
    energy = np.einsum("ij,ij->j", rows, rows)
    coords = np.sort(np.argsort(-energy, kind="stable")[: min(dims, SKETCH_COORDS)])
    # The Gram matrix's top eigenvectors are the sample's top right singular vectors, for a third of an SVD's work.
    within = rows[:, coords]
    _, vectors = np.linalg.eigh(within.T @ within)
    directions = vectors[:, ::-1][:, : min(SKETCH_DIMS, len(sample))].T
    basis = np.zeros((SKETCH_DIMS, len(coords)), np.float32)
    basis[: len(directions)] = directions
    projected = values[:, coords] @ basis.T
    projected *= inverse[:, None]
    length = squared.astype(np.float64) * inverse.astype(np.float64) ** 2  # 1 for a stored vector, 0 for none
    left = np.sqrt(np.maximum(length - np.einsum("ij,ij->i", projected, projected, dtype=np.float64) + SLACK, 0.0))
    return coords, basis, np.ascontiguousarray(projected), left.astype(np.float32)
