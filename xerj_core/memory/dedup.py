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

and the same holds for the first ``k`` directions alone, with ``r`` the
length beyond them. A probe runs three passes, each over the rows the one
before left:

1. every row, from its :data:`LEAD_DIMS` leading directions and its length
   beyond them, stored as one byte each (below): 25 bytes a row, a row of
   codes per direction, so the pass streams under a 350th of the vectors'
   bytes (the float32 pass over 32 directions it replaces read 128 a row);
2. the survivors (about 2% of rows on the benchmark's texts at 0.95), from
   all 64 directions in float32;
3. the rows left (one or two on real text at 0.95), by their exact float32
   cosine, as kNN scores it.

Rows left after the third pass are the only ones the caller scores with kNN,
so a fresh text usually ends with no row to score and no mask to build. The
tail (up to a sealed tail's rows, grown by every write) is bounded on the
newest sketched segment's basis (the inequality holds for any orthonormal
basis), its rows projected once each as they arrive, then passes 2 and 3:
a probe read all of its vectors before (9.4 MB at 1,024 rows).

The first pass's bytes. Direction ``j``'s values over the segment's rows are
coded as ``y = o_j + s_j c + e`` with ``c`` an int8 in [-127, 127] (``o_j``
the middle of the values' range, ``s_j`` its 254th), and the largest
``|e|`` over the rows, ``E_j``, is measured when the sketch is built; the
length beyond the leading directions is coded the same way but rounded up,
so ``o + s c >= r``. Then ``p · y <= Σ p_j s_j c_j + p · o + |p| · E`` for
every row, and the length term stays an upper bound because ``r_q >= 0``: the
pass is a true bound at any rounding of the codes.

Rounding. Every float32 dot product here has length at most ``D`` (2,304)
over unit vectors, so its error is below ``D * 2**-24`` (Higham's ``γ_D``,
1.4e-4), and a sum of ``SKETCH_DIMS`` such errors weighted by a unit vector's
entries is below ``sqrt(SKETCH_DIMS) * γ_D`` (1.1e-3). The left-out lengths
are taken from ``1 - |y|² + SLACK`` (never smaller than the true one) and the
cut sits :data:`MARGIN` below the threshold, which covers both sides' errors
and the kNN score's own; a wider margin only keeps a few more rows to score.
The first pass's float32 sum of at most 25 terms, each below 1 in size, errs
by less than 1e-5; :data:`_ROUNDING` adds that to its bound explicitly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xerj_core.query import knnquant
from xerj_core.query.knn import segment_norms, similarity_of, tail_norms

SKETCH_DIMS = 64
# The first pass bounds every row from this many leading directions, one byte each (see the module docstring).
# 16 leave 2.7x as many rows (6.2k of 98k against 2.3k) to the second pass's scattered reads; in interleaved
# stores the two measured alike, 24 a little ahead (CPU ratio 0.50 against 0.495 over four runs each).
LEAD_DIMS = 24
SKETCH_COORDS = 384
# Segments smaller than this are scanned as they are; a sealed tail (1,024 rows by default) is sketched.
SKETCH_MIN_ROWS = 1024
# Below this many dimensions a 64-direction sketch saves too little of the scan to pay for its bound.
SKETCH_MIN_DIMS = 4 * SKETCH_DIMS
SAMPLE_ROWS = 1024
MARGIN = 4e-3
SLACK = 4e-3
# Codes of the first pass: int8 in [-LEVELS, LEVELS].
LEVELS = 127
# What the first pass's float32 sum may lose (see Rounding in the module docstring), added to its bound.
_ROUNDING = 1e-5


class Sketch:
    """One sealed segment's sketch of a vector field: the basis, the first pass's codes, the full projections."""

    __slots__ = ("coords", "basis", "basis32", "codes", "offset", "scale", "error", "projected", "left")

    def __init__(self, coords: np.ndarray, basis: np.ndarray, projected: np.ndarray, left: np.ndarray,
                 length: np.ndarray) -> None:
        """From :func:`build_sketch`'s output and each row's squared unit length (1, or 0 for no vector)."""
        self.coords = coords
        self.basis = basis.astype(np.float64)
        self.basis32 = basis.astype(np.float32)  # projects the tail's rows
        self.projected = projected
        self.left = left
        lead = projected[:, :LEAD_DIMS].astype(np.float64)
        beyond = np.sqrt(np.maximum(length - np.einsum("ij,ij->i", lead, lead) + SLACK, 0.0))
        codes = np.empty((LEAD_DIMS + 1, len(projected)), np.int8)  # a row per direction: each pass streams it
        self.offset = np.empty(LEAD_DIMS + 1)
        self.scale = np.empty(LEAD_DIMS + 1)
        self.error = np.empty(LEAD_DIMS)
        for j in range(LEAD_DIMS):
            codes[j], self.offset[j], self.scale[j], self.error[j] = _nearest_codes(lead[:, j])
        codes[LEAD_DIMS], self.offset[LEAD_DIMS], self.scale[LEAD_DIMS] = _upper_codes(beyond)
        self.codes = codes

    def into(self, unit: np.ndarray) -> np.ndarray:
        """``P q̂`` for a unit probe (float64; numpy's own loop: see :func:`candidates` on the BLAS)."""
        return np.einsum("ij,j->i", self.basis, unit[self.coords])

    def lead_weights(self, into: np.ndarray) -> tuple[np.ndarray, float]:
        """``(weights, floor)``: each row's first-pass bound is ``weights · codes[:, row] + floor``, the weights
        float32 and the sum a float32 one."""
        lead = into[:LEAD_DIMS]
        # Dot products of a few dozen entries: the BLAS runs these on the calling thread whatever its setting.
        rest = float(np.sqrt(max(1.0 - float(np.dot(lead, lead)) + SLACK, 0.0)))
        weights = np.empty(LEAD_DIMS + 1, np.float32)
        np.multiply(lead, self.scale[:LEAD_DIMS], out=weights[:LEAD_DIMS], casting="same_kind")
        weights[LEAD_DIMS] = rest * self.scale[LEAD_DIMS]
        floor = (float(np.dot(lead, self.offset[:LEAD_DIMS])) + float(np.dot(np.abs(lead), self.error))
                 + rest * float(self.offset[LEAD_DIMS]) + _ROUNDING)
        return weights, floor

    def lead_bound(self, into: np.ndarray) -> tuple[np.ndarray, float]:
        """``(sums, floor)``: each row's first-pass bound is ``sums + floor`` (numpy's float32 sums)."""
        weights, floor = self.lead_weights(into)
        return self._lead_sums(weights), floor

    def _lead_sums(self, weights: np.ndarray) -> np.ndarray:
        return np.einsum("ji,j->i", self.codes, weights, dtype=np.float32, casting="unsafe")

    def lead_rows(self, into: np.ndarray, cut: float) -> np.ndarray:
        """Rows (ascending) whose first-pass bound reaches ``cut``. The kNN scan's compiled loop sums the codes
        when it is on: numpy's einsum converts each int8 to float32 through a buffer, and took most of a probe's
        first pass (0.78 ms of 0.88 over 100k rows)."""
        weights, floor = self.lead_weights(into)
        rows = knnquant.rows_above(self.codes, weights, cut - floor)
        if rows is None:
            rows = np.flatnonzero(self._lead_sums(weights) >= np.float32(cut - floor))
        return rows

    def possible(self, unit: np.ndarray, cut: float) -> np.ndarray:
        """Rows (ascending) whose bound reaches ``cut``: the first pass over every row, then all 64 directions."""
        into = self.into(unit)
        rows = self.lead_rows(into, cut)
        if len(rows):
            full = np.einsum("ij,j->i", np.take(self.projected, rows, axis=0), into.astype(np.float32))
            full += np.take(self.left, rows) * np.float32(np.sqrt(max(1.0 - float(np.dot(into, into)) + SLACK, 0.0)))
            rows = rows[full >= cut]
        return rows


def _nearest_codes(values: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """``(codes, offset, scale, error)``: ``values`` (float64) as ``offset + scale * code`` to the nearest code,
    and the largest distance any value is from its code's (measured, so it bounds every row whatever the rounding)."""
    offset, scale = _range_of(values)
    codes = np.clip(np.rint((values - offset) / scale), -LEVELS, LEVELS)
    error = float(np.max(np.abs(values - (offset + scale * codes)), initial=0.0))
    return codes.astype(np.int8), offset, scale, error * (1.0 + 1e-9) + 1e-12


def _upper_codes(values: np.ndarray) -> tuple[np.ndarray, float, float]:
    """``(codes, offset, scale)`` with ``offset + scale * code >= value`` for every value (float64)."""
    offset, scale = _range_of(values)
    codes = np.clip(np.ceil((values - offset) / scale), -LEVELS, LEVELS)
    codes += offset + scale * codes < values  # a quotient rounded down across an integer
    assert np.all(offset + scale * codes >= values) and np.all(codes <= LEVELS)
    return codes.astype(np.int8), offset, scale


def _range_of(values: np.ndarray) -> tuple[float, float]:
    """The middle of ``values``' range and a step that spans it in ``LEVELS`` steps each way, with room to spare."""
    if not len(values):
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    offset = (low + high) / 2.0
    # The spare keeps the top value within LEVELS steps of the middle when the quotient rounds up.
    scale = (high - low) / (2 * LEVELS) * (1.0 + 1e-6) + 1e-12
    return offset, scale


def candidates(reader: Any, field: str, probe: np.ndarray, lo: int, hi: int, cutoff: float) -> np.ndarray | None:
    """Rows of ``[lo, hi)`` (bool over every row of ``reader``) whose cosine to ``probe`` may reach ``cutoff``.

    Rows of sketched segments, and of the tail once a segment is sketched,
    are kept only when they pass all three passes of the module docstring
    at ``cutoff - MARGIN``; every other row of the window (small segments)
    is kept. None when nothing can be pruned (a field that is not cosine,
    short vectors, a cutoff the margin reaches below zero, no sketched part
    in the window): the caller then scans the whole window.

    Every pass is numpy's own loop (the first, the kNN scan's compiled loop when
    it is built: :meth:`Sketch.lead_rows`), not the BLAS: a multi-threaded BLAS's
    matrix-vector product wakes its worker threads per call, and on a busy
    machine waiting for them cost 5-8x the pass (the same reason as
    :mod:`xerj_core.query.knn`); a sketch's one-time build does use it.
    """
    spec = reader.mapping.fields.get(field)
    if spec is None or not spec.dims or spec.dims < SKETCH_MIN_DIMS or similarity_of(spec) != "cosine":
        return None
    cut = cutoff - MARGIN
    if cut <= 0.0:
        return None
    query = np.asarray(probe, np.float32)  # kNN's own query, so the third pass scores as kNN does
    norm = float(np.sqrt(np.einsum("i,i->", query, query, dtype=np.float64)))
    if norm == 0.0:
        return None
    unit = query.astype(np.float64) / norm
    sized = [seg for seg in reader.segments if seg.end - seg.start >= SKETCH_MIN_ROWS]
    parts = []  # (start, end, rows left by the bound, vectors, inverse norms)
    for seg in sized:
        if seg.start < lo or seg.end > hi:
            continue
        sketch = _sketch(reader, seg, field)
        if sketch is None:
            continue
        column = reader.segment_column(seg, field)
        inverse = segment_norms(seg, field, column.values)[0]
        parts.append((seg.start, seg.end, sketch.possible(unit, cut), column.values, inverse))
    if reader.tail_count and lo <= reader.tail_start and reader.n_rows <= hi and sized:
        tail = _tail_possible(reader, field, sized[-1], unit, cut)
        if tail is not None:
            parts.append((reader.tail_start, reader.n_rows, *tail))
    if not parts:
        return None
    keep = np.zeros(reader.n_rows, bool)
    keep[lo:hi] = True
    for start, end, rows, values, inverse in parts:
        keep[start:end] = False
        if len(rows):
            cosines = np.einsum("ij,j->i", values[rows], query) * inverse[rows]
            cosines *= np.float32(1.0 / norm)
            keep[start + rows[cosines >= cut]] = True
    return keep


def _tail_possible(reader: Any, field: str, source: Any, unit: np.ndarray,
                   cut: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(tail rows whose bound reaches cut, tail vectors, their inverse norms)``, bounded on ``source``'s basis.

    Each tail row is projected once (see :meth:`~xerj_core.store.read.Tail.derived_rows`), by numpy's own loop:
    a probe projects only the rows written since the last one.
    """
    sketch = _sketch(reader, source, field)
    if sketch is None:
        return None
    column = reader.tail_column(field)
    inverse, squared = tail_norms(reader, field, column)

    def rows(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        raw = np.einsum("ij,kj->ik", column.values[a:b][:, sketch.coords], sketch.basis32)
        return _unit_projection(raw, inverse[a:b], squared[a:b])

    key = ("dedup-tail", field, SKETCH_DIMS, SKETCH_COORDS, source.start, source.end, source.sealed_at)
    projected, left = reader.tail_derived(key, rows)
    into = sketch.into(unit)
    bound = np.einsum("ij,j->i", projected, into.astype(np.float32))
    bound += left * np.float32(np.sqrt(max(1.0 - float(np.dot(into, into)) + SLACK, 0.0)))
    return np.flatnonzero(bound >= cut), column.values, inverse


def _sketch(reader: Any, seg: Any, field: str) -> Sketch | None:
    """The :class:`Sketch` of ``field`` in one sealed segment, built once per process and kept with the segment."""
    key = ("dedup-sketch", field, SKETCH_DIMS, SKETCH_COORDS, LEAD_DIMS)
    found = seg.derived.get(key)
    if found is not None:
        return found
    column = reader.segment_column(seg, field)
    if column is None:
        return None
    inverse, squared = segment_norms(seg, field, column.values)  # the kNN scan's own cache, computed once
    with seg.lock:
        found = seg.derived.get(key)
        if found is None:
            length = squared.astype(np.float64) * inverse.astype(np.float64) ** 2
            found = seg.derived[key] = Sketch(*build_sketch(column.values, inverse, squared), length)
    return found


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
    return (coords, basis, *_unit_projection(values[:, coords] @ basis.T, inverse, squared))


def _unit_projection(raw: np.ndarray, inverse: np.ndarray, squared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(y, r)`` from rows' raw projections ``P x`` (float32) and their inverse and squared norms."""
    projected = np.ascontiguousarray(raw * inverse[:, None], np.float32)
    length = squared.astype(np.float64) * inverse.astype(np.float64) ** 2  # 1 for a stored vector, 0 for none
    left = np.sqrt(np.maximum(length - np.einsum("ij,ij->i", projected, projected, dtype=np.float64) + SLACK, 0.0))
    return projected, left.astype(np.float32)
