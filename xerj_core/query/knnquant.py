"""The kNN scan's int8 first pass: which rows of a run may still reach its best k, read from int8 copies of the
vectors, so that only those rows are scored in float32 and the answer stays the full scan's, bit for bit.

Each stored row ``v`` gets an int8 copy ``c = rint(v / s)`` with ``s = max|v| / 127``, and three numbers:
``|v - s·c|``, ``|s·c|`` and ``|v|``. The query ``q`` is rounded the same way. By Cauchy-Schwarz the true dot
product lies within ``|v - s·c|·|q| + |s·c|·|q - s_q·c_q|`` of ``s·s_q·(c·c_q)``, and numpy's float32 sum lies
within ``γ·|v|·|q|`` of the true one (``γ = (d + 2)·2⁻²³``, about twice the bound that holds for any order of
summation). So each row's score lies in an interval; a row whose upper end is below the k-th largest lower end
cannot enter the top k (ties included). The rows left are scored by the same float32 loop as a full scan: numpy's
einsum gives a gathered row the very sum it gives it in place (``tests/test_knn_quant.py`` checks it), so the
top k, their scores and their ties are the full scan's.

The copies are made once per process, at a part's first scan, and kept in memory beside its norms: a quarter
of its vectors' bytes, plus 24 bytes a row.

Why: a float32 scan reads 4 bytes a dimension and already runs at the memory's pace; the int8 copy is a quarter of
those bytes, and its dot products need C (``_knnscan.c``): numpy widens int8 products element by element. Without
that extension (no C compiler at install) every scan reads the float32 rows, with the same answers.
``XERJ_KNN_KERNEL=0`` switches the first pass off (to compare, or to rule it out); ``XERJ_REQUIRE_KNN_KERNEL=1``
makes the extension's absence an error at import (``scripts/test`` sets it).
"""

from __future__ import annotations

import os
from typing import Any

import attrs
import numpy as np

_compiled: Any
try:
    from xerj_core.query import _knnscan as _compiled
except ImportError:  # built without a C compiler: every scan reads the float32 rows
    if os.environ.get("XERJ_REQUIRE_KNN_KERNEL") == "1":
        raise
    _compiled = None
else:
    _dots, _left, _left_runs, _above = _compiled.dots, _compiled.left, _compiled.left_runs, _compiled.above

# Whether kNN scans take the int8 first pass; a test or a benchmark may flip it to compare.
ENABLED = _compiled is not None and os.environ.get("XERJ_KNN_KERNEL", "1") != "0"
# A run with fewer wanted rows than this many times k is scored whole: the first pass would leave most of them.
MIN_ROWS_PER_K = 16
# Above this share of a run's rows left by the first pass, the run is scored whole: gathering that many rows
# costs more than reading them all (measured: a gather of a quarter of 50k x 384 rows and its product took 4.4 ms,
# the product over every row 3.3 ms).
MAX_LEFT_SHARE = 0.125
# Floats quantized per step, so the temporaries stay a few MB whatever the segment's size.
_CHUNK_FLOATS = 1 << 20
_U32 = 2.0 ** -24  # float32's unit roundoff
_SLACK = 1e-12  # float64's own roundings in the bounds' arithmetic, generously


def available() -> bool:
    """Whether the int8 loop was built (whatever :data:`ENABLED` says)."""
    return _compiled is not None


def rows_above(codes: np.ndarray, weights: np.ndarray, threshold: float) -> np.ndarray | None:
    """The columns ``i`` of ``codes`` (C-contiguous int8, a row per entry of the float32 ``weights``) where
    ``weights · codes[:, i]``, a float32 sum in the order of the rows, reaches ``threshold``, ascending: one
    compiled pass with the GIL released. None while the loop is off (:data:`ENABLED`): the caller sums with numpy.
    The dedup probe's first pass reads its sketches' codes this way (``xerj_core.memory.dedup``)."""
    if not ENABLED:
        return None
    return np.frombuffer(_above(codes, weights, threshold), np.int64)


def describe() -> dict[str, Any]:
    """What a benchmark prints about the kNN scan's first pass."""
    return {"compiled": _compiled is not None, "enabled": ENABLED}


@attrs.frozen(eq=False)
class Quantized:
    """A part's rows as int8 (``codes``) with, per row, the numbers that turn a row's int8 dot product with a
    :class:`Probe` into bounds of its score (see :func:`survivors`).

    For cosine every per-row number is already multiplied by the row's inverse norm (the one the float32 scoring
    uses), so the bounds come out as cosines without another pass."""

    codes: np.ndarray  # int8, one row per stored row
    scale: np.ndarray  # float64: row = scale * codes, less the rounding (times the inverse norm for cosine)
    slack: np.ndarray  # float64: |v - scale·codes| + γ·|v|, to be multiplied by |q| (likewise)
    rounded_norm: np.ndarray  # float64: |scale·codes|, to be multiplied by |q - q's rounding| (likewise)
    largest_norm: float  # the largest |v|: a product that could overflow float32 is left to the full scan

    def sliced(self, lo: int, hi: int) -> "Quantized":
        return Quantized(self.codes[lo:hi], self.scale[lo:hi], self.slack[lo:hi], self.rounded_norm[lo:hi],
                         self.largest_norm)


def _gamma(dims: int) -> float:
    return (dims + 2) * 2 * _U32


def quantize(values: np.ndarray, squared: np.ndarray, inverse: np.ndarray | None = None) -> Quantized:
    """The int8 copy of float32 ``values`` (rows) and the bounds of its rounding; ``squared`` holds the rows'
    squared norms as the float32 scoring computes them, and ``inverse`` (for cosine) their inverse norms, by which
    the per-row numbers are multiplied."""
    codes, scale, slack, rounded_norm, norms = _quantized_arrays(values, squared, inverse)
    return Quantized(codes, scale, slack, rounded_norm, float(norms.max(initial=0.0)))


def _quantized_arrays(values: np.ndarray, squared: np.ndarray, inverse: np.ndarray | None
                      ) -> tuple[np.ndarray, ...]:
    """``(codes, scale, slack, rounded_norm, norms)`` of ``values``, worked out in float32 a chunk at a time (a
    float64 copy of each chunk made it a few times slower: 0.54 s for 16k x 2,304) with upper bounds of what
    float32's roundings may hide:

    * the codes' scale is a float32 ``s`` and the residual ``q = fl(v - fl(s·c))`` has each entry within
      ``u·|s·c| + u·|v - fl(s·c)|`` of the true ``r = v - s·c``, so ``|r| <= |q|(1 + 5u) + 2u|v|`` (u = 2⁻²⁴);
    * a float32 sum of d squares is within ``γ_d`` of the true sum, so a root times ``1 + 4γ`` bounds the norm,
      as long as no square underflowed (rows whose sums say they may have are worked out in float64).
    """
    n, dims = values.shape
    codes = np.empty((n, dims), np.int8)
    scale, residual = np.empty(n), np.empty(n, np.float32)
    gamma = _gamma(dims)
    grow = 1 + 4 * gamma
    norms = np.sqrt(squared.astype(np.float64)) * grow
    chunk = max(64, _CHUNK_FLOATS // max(dims, 1))
    with np.errstate(all="ignore"):  # a row of subnormals can make its step 0: its residual is then the row
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            rows = values[lo:hi]
            top = np.abs(rows).max(axis=1) if dims else np.zeros(hi - lo, np.float32)
            step = np.where(top > 0, top / np.float32(127), np.float32(1))
            work = rows / step[:, None]
            np.rint(work, out=work)
            np.clip(work, -127, 127, out=work)
            codes[lo:hi] = work
            work *= step[:, None]
            np.subtract(rows, work, out=work)
            scale[lo:hi] = step
            residual[lo:hi] = np.einsum("ij,ij->i", work, work)
    # Sums this small may have lost squares to float32's underflow, which the relative bounds do not cover:
    # those rows are worked out again in float64 (from the same codes and scale), where nothing underflows.
    redo = np.flatnonzero((residual < _UNDERFLOWING) | (squared < _UNDERFLOWING))
    residual = np.sqrt(residual.astype(np.float64))
    if len(redo):
        exact = values[redo].astype(np.float64)
        residual[redo] = np.linalg.norm(exact - codes[redo] * scale[redo, None], axis=1) * (1 + _SLACK)
        norms[redo] = np.linalg.norm(exact, axis=1) * (1 + _SLACK)
    error = residual * grow * (1 + 5 * _U32) + 2 * _U32 * norms
    factor = (1 + _SLACK) if inverse is None else inverse.astype(np.float64) * (1 + _SLACK)
    return (codes, scale * (1.0 if inverse is None else inverse.astype(np.float64)), (error + gamma * norms) * factor,
            (norms + error) * factor, norms)


def segment_quantized(seg, field: str, values: np.ndarray, squared: np.ndarray, inverse: np.ndarray | None
                      ) -> Quantized:
    """:func:`quantize` of a sealed segment's ``values`` of ``field``, computed once per process and kept with it."""
    key = ("knn-int8", field, inverse is not None)
    found = seg.derived.get(key)
    if found is None:
        with seg.lock:
            found = seg.derived.get(key)
            if found is None:
                found = seg.derived[key] = quantize(values, squared, inverse)
    return found


def tail_quantized(reader, field: str, values: np.ndarray, squared: np.ndarray, inverse: np.ndarray | None
                   ) -> Quantized:
    """:func:`quantize` of the tail's ``values`` of ``field``, each row's computed once for every generation."""
    codes, scale, slack, rounded_norm, norms = reader.tail_derived(
        ("knn-int8", field, inverse is not None),
        lambda lo, hi: _quantized_arrays(values[lo:hi], squared[lo:hi], None if inverse is None else inverse[lo:hi]))
    return Quantized(codes, scale, slack, rounded_norm, float(norms.max(initial=0.0)))


@attrs.frozen
class Probe:
    """The query as the first pass uses it: its int8 copy and the numbers its bounds need."""

    codes: np.ndarray  # int16 holding int8 values
    scale: float
    norm: float
    error: float  # |q - scale·codes|

    @classmethod
    def of(cls, query: np.ndarray) -> "Probe | None":
        """The query's probe; None for a query that is not finite (the full scan answers it)."""
        rows = query.astype(np.float64)
        if not np.isfinite(rows).all():
            return None
        top = float(np.abs(rows).max()) if len(rows) else 0.0
        step = top / 127.0 if top > 0 else 1.0
        code = np.clip(np.rint(rows / step), -127, 127)
        error = float(np.sqrt(np.sum((rows - code * step) ** 2))) * (1 + _SLACK)
        # int16: the C loop multiplies int8 rows by an int16 query (see _knnscan.c)
        return cls(code.astype(np.int16), step, float(np.sqrt(rows @ rows)) * (1 + _SLACK), error)


def pays(quant: Quantized | None, probe: Probe | None, wanted_rows: int, k: int) -> bool:
    """Whether a first pass over a part's ``wanted_rows`` rows may pay and can bound them: an int8 copy and a
    finite query, enough rows per k, and no product near float32's overflow."""
    return (quant is not None and probe is not None and wanted_rows >= MIN_ROWS_PER_K * k
            and quant.largest_norm * probe.norm <= _FAR_FROM_OVERFLOW)


def _bound_terms(metric: str, query_norm: float) -> tuple[float, float]:
    """``(times, add)`` for the C loop's bounds: cosine ranks by dot·inverse·(1/|q|), computed in float32 with
    three roundings, each under 2e-7 of a value at most 1 (and a hair): 1e-6 covers them. dot_product and
    max_inner_product rank by the float32 dot product itself."""
    return (1.0 / query_norm, 1e-6) if metric == "cosine" else (1.0, _TINY)


def survivors(quant: Quantized, probe: Probe, metric: str, wanted: np.ndarray, k: int, squared: np.ndarray,
              query_norm: float, query_sq: float) -> np.ndarray | None:
    """The rows of a run (local numbers, ascending) that may be among its ``k`` best ``wanted`` rows, ties
    included; None when the first pass would not pay (few rows per k, or too many rows left) or cannot bound
    the scores (a product near float32's overflow).

    ``quant`` must have been made with the inverse norms for cosine (and only then); ``squared``,
    ``query_norm`` and ``query_sq`` are what the float32 scoring uses (see ``knn._raw``), so the bounds are on
    the very values it computes. Only call it when :data:`ENABLED`."""
    assert _compiled is not None
    if not pays(quant, probe, int(np.count_nonzero(wanted)), k):
        return None
    if metric == "l2_norm":
        rows = _l2_survivors(quant, probe, wanted, k, squared, query_sq)
    else:
        times, add = _bound_terms(metric, query_norm)
        rows = np.frombuffer(_left(quant.codes, probe.codes, quant.scale, quant.slack, quant.rounded_norm, wanted,
                                   k, probe.scale * times, probe.norm * times, probe.error * times, add), np.int64)
    return None if len(rows) > MAX_LEFT_SHARE * len(wanted) else rows


class FirstPass:
    """One query's first pass over many parts at once (cosine, dot_product and max_inner_product; l2_norm's
    bounds are :func:`survivors`'), which threads share: each :meth:`run` takes runs of ``run_rows`` rows in
    turn until none are left, all in one compiled call with the GIL released, and returns the rows its runs
    leave. Every row of the parts' best k (ties included) is among the rows the calls return together.

    One call covers a whole scan, so a thread running another leg of a hybrid keeps the GIL meanwhile, rather
    than handing it back at every run (each of :func:`survivors`' calls is a GIL hand-over)."""

    def __init__(self, parts: list[tuple[int, Quantized, np.ndarray, np.ndarray, np.ndarray]], probe: Probe,
                 metric: str, k: int, query_norm: float, run_rows: int, wanted_rows: int) -> None:
        """``parts``: ``(start, int8 copy, wanted, float32 rows, their inverse norms)`` each, in order of start;
        ``wanted_rows``: how many rows they want in all."""
        assert _compiled is not None and metric != "l2_norm"
        times, add = _bound_terms(metric, query_norm)
        self.parts = [(start, q.codes, q.scale, q.slack, q.rounded_norm, wanted, values, inverse)
                      for start, q, wanted, values, inverse in parts]
        self._args = (probe.codes, k, run_rows, probe.scale * times, probe.norm * times, probe.error * times, add)
        self._claim = np.zeros(1, np.int64)  # the next run to take, shared by the calls
        # Past this many rows left, gathering them costs more than scoring every row (and a copy of them all
        # could be most of the vectors' bytes): the caller scores the parts whole.
        self._copy_at_most = int(MAX_LEFT_SHARE * wanted_rows)

    def run(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``(rows, values, inverse)``: the rows left by the runs this call took (numbered over the reader: a
        part's start plus the row's place in it, ascending), their float32 vectors (one row each) and inverse
        norms, copied by the compiled loop, which fetches the rows ahead: gathered one by one from memory they
        cost about as much as the pass. ``values`` and ``inverse`` are None when more rows are left than
        :data:`MAX_LEFT_SHARE` of the wanted rows: the caller scores the parts whole."""
        rows, values, inverse = _left_runs(self.parts, *self._args, self._claim, self._copy_at_most)
        if values is None:
            return np.frombuffer(rows, np.int64), None, None
        return (np.frombuffer(rows, np.int64), np.frombuffer(values, np.float32).reshape(-1, len(self._args[0])),
                np.frombuffer(inverse, np.float32))


def _l2_survivors(quant: Quantized, probe: Probe, wanted: np.ndarray, k: int, squared: np.ndarray,
                  query_sq: float) -> np.ndarray:
    """:func:`survivors` for l2_norm, in numpy: the distance's square root takes the bounds out of the C loop's
    ``centre ± width`` form."""
    sums = np.empty(len(quant.codes), np.int32)
    _dots(quant.codes, probe.codes, sums, wanted)  # rows not wanted are not read: their bounds become -inf below
    dot = sums * (quant.scale * probe.scale)
    width = quant.slack * probe.norm + quant.rounded_norm * probe.error + _TINY
    low, high = _l2_bounds(dot - width, dot + width, squared, query_sq)
    np.copyto(low, -np.inf, where=~wanted)
    left = high >= _kth_largest(low, k)
    left &= wanted
    return np.flatnonzero(left)


# Products of norms above this are left to the full scan: float32 overflows at 3.4e38, and the bounds assume it
# did not.
_FAR_FROM_OVERFLOW = 1e30
# The stride of the sample that guesses a run's k-th largest lower bound (see _kth_largest).
_SAMPLE_STRIDE = 16
# A float32 sum of squares below this may have lost some of them to underflow (each at most 2^-149, d of them
# far below 2^-100 times float32's relative error).
_UNDERFLOWING = 2.0 ** -100
# Underflow's absolute error in a float32 sum of a few thousand products, generously.
_TINY = 1e-30


def _kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (k at most their number). A partition of them all costs more than the
    int8 pass itself, so a guess comes first from every ``_SAMPLE_STRIDE``-th value, chosen so that about 4k values
    reach it: when at least k do, the k-th largest is among them."""
    sample = values[::_SAMPLE_STRIDE]
    place = max(len(sample) - -(-4 * k // _SAMPLE_STRIDE), 0)
    top = values[values >= np.partition(sample, place)[place]]
    if len(top) < k:
        top = values
    return float(np.partition(top, len(top) - k)[len(top) - k])


def _l2_bounds(low_dot: np.ndarray, high_dot: np.ndarray, squared: np.ndarray, query_sq: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of minus the float32 euclidean distance ``sqrt(max(squared - 2·dot + query_sq, 0))`` (``knn._raw``):
    three roundings inside the root, each under 2⁻²⁴ of the sum of the magnitudes, and the root's own."""
    sq = squared.astype(np.float64)
    size = 4 * _U32 * (sq + 2 * np.maximum(np.abs(low_dot), np.abs(high_dot)) + query_sq)
    far = np.sqrt(np.maximum(sq - 2 * low_dot + query_sq + size, 0.0)) * (1 + 1e-6)
    near = np.sqrt(np.maximum(sq - 2 * high_dot + query_sq - size, 0.0)) * (1 - 1e-6)
    return -far, -near
