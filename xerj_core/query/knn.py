"""Exact k-nearest-neighbour search over ``dense_vector`` columns with numpy, filters applied before ranking.

Scores follow Elasticsearch's transforms of the field's ``similarity`` so they
are positive and comparable with its responses: cosine (the default)
``(1 + cos) / 2``, dot_product ``(1 + dot) / 2``, l2_norm ``1 / (1 + d²)``,
max_inner_product ``1 / (1 - dot)`` below zero and ``dot + 1`` otherwise.
Vectors are stored contiguous as float32 per segment; per-row inverse norms
are cached with each immutable sealed segment, so a query is one
matrix-vector product per segment and the tail, plus a top-k cut per part.
The product is numpy's single-threaded SIMD loop, not the BLAS: the BLAS's
worker threads cost a wake-up per call and spin afterwards, taking the core a
concurrent request (or the next numpy call) needs. A scan of many rows takes a
second core only when the machine leaves one idle: its rows are cut into runs
that this thread and the shared worker of :mod:`~xerj_core.query.sidebyside`
take in turn (one core's streaming loop does not reach the memory's
bandwidth; two scan 100k x 384 in about the BLAS matmul's time). Measured in
``tests/bench/bench_search.py`` against numpy's BLAS matmul over the same
matrix.

Where the C loop of :mod:`~xerj_core.query.knnquant` was built, a run first
reads int8 copies of its rows (a quarter of the bytes) and bounds every
row's score; only the rows that may reach the run's best k are scored in
float32, by the same loop, so the answer is the full scan's bit for bit.
"""

from __future__ import annotations

import contextlib
import itertools
from concurrent.futures import Future
from typing import Callable, Iterator, Sequence

import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.query import knnquant, sidebyside
from xerj_core.query.ranking import Ranked, select_top

SIMILARITIES = ("cosine", "dot_product", "l2_norm", "max_inner_product")
# Below this share of a part's rows passing the filter, gather those rows instead of scoring all.
_GATHER_BELOW = 0.25
# Rows per run when two threads share a scan (see knn_top's ``helper``): 12 MB of 384-dim float32 rows, few
# enough runs that their own costs stay small, enough that neither thread waits long for the other.
_RUN_ROWS = 8192
# A scan of fewer wanted rows runs on the calling thread alone: handing runs to the worker costs a wake-up or two,
# and the int8 pass reads only the rows the filter keeps.
_SHARE_FROM_ROWS = 2 * _RUN_ROWS


def vector_spec(reader, field: str, dims: int | None = None):
    """The ``dense_vector`` FieldSpec of ``field``; IllegalArgument when it is unmapped, another type, or ``dims`` differ."""
    spec = reader.mapping.fields.get(field)
    if spec is None:
        raise IllegalArgument(f"[knn] field [{field}] does not exist in the mapping of [{reader.name}]; "
                              f"[knn] needs a [dense_vector] field")
    if spec.type != "dense_vector":
        raise IllegalArgument(f"[knn] queries are only supported on [dense_vector] fields; "
                              f"[{field}] is of type [{spec.type}]")
    if dims is not None and dims != spec.dims:
        raise IllegalArgument(f"the query vector has a different number of dimensions [{dims}] than the document "
                              f"vectors [{spec.dims}] of field [{field}]")
    return spec


def similarity_of(spec) -> str:
    name = str(spec.params.get("similarity", "cosine")).lower()
    if name not in SIMILARITIES:
        raise IllegalArgument(f"unsupported [similarity] [{name}] on field [{spec.path}]")
    return name


def _norms(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``(1/|v|, |v|²)`` as float32; zero vectors get an inverse norm of 0."""
    squared = np.einsum("ij,ij->i", values, values, dtype=np.float32)
    norms = np.sqrt(squared)
    inverse = np.zeros_like(norms)
    np.divide(1.0, norms, out=inverse, where=norms > 0)
    return inverse, squared


def segment_norms(seg, field: str, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_norms` of a sealed segment's ``values`` of ``field``, computed once per process and kept with it."""
    key = ("knn-norms", field)
    norms = seg.derived.get(key)
    if norms is None:
        with seg.lock:
            norms = seg.derived.get(key)
            if norms is None:
                norms = seg.derived[key] = _norms(values)
    return norms


def _parts(reader, field: str, quantize_from: int | None = None):
    """``(start, end, values, present, inverse_norms, squared_norms, quantized)`` per stored part of ``field``;
    ``quantized`` is the int8 copy of :mod:`~xerj_core.query.knnquant` for a part of at least ``quantize_from``
    rows while the first pass is on, else None (a smaller part is scored whole: no copy is made or grown)."""
    least = quantize_from if quantize_from is not None and knnquant.ENABLED else None
    for seg in reader.segments:
        column = reader.segment_column(seg, field)
        if column is None:
            continue
        norms = segment_norms(seg, field, column.values)
        quant = (knnquant.segment_quantized(seg, field, column.values, norms[1],
                                            _cosine_inverse(reader, field, norms[0]))
                 if least is not None and seg.end - seg.start >= least else None)
        yield seg.start, seg.end, column.values, column.present, norms[0], norms[1], quant
    if reader.tail_count:
        column = reader.tail_column(field)
        norms = tail_norms(reader, field, column)
        quant = (knnquant.tail_quantized(reader, field, column.values, norms[1],
                                         _cosine_inverse(reader, field, norms[0]))
                 if least is not None and reader.tail_count >= least else None)
        yield reader.tail_start, reader.n_rows, column.values, column.present, norms[0], norms[1], quant


def _cosine_inverse(reader, field: str, inverse: np.ndarray) -> np.ndarray | None:
    """``inverse`` when ``field`` ranks by cosine (its int8 copy then bounds cosines), else None."""
    return inverse if similarity_of(reader.mapping.fields[field]) == "cosine" else None


def tail_norms(reader, field: str, column) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_norms` of the tail's ``column`` of ``field``, each row's computed once for every generation."""
    return reader.tail_derived(("knn-norms", field), lambda lo, hi: _norms(column.values[lo:hi]))


def prepare(reader, field: str) -> None:
    """Read what a scan of ``field`` reads from the store (its columns, their norms, the live rows) into the
    reader's caches, so the scan itself touches numpy arrays alone (see :mod:`~xerj_core.query.sidebyside`)."""
    if field in reader.mapping.fields:
        reader.live  # noqa: B018 - a reserved index builds its live rows from a column
        for _part in _parts(reader, field, knnquant.MIN_ROWS_PER_K):  # the int8 copies any k may read
            pass


def _query(reader, field: str, vector) -> tuple[np.ndarray, str, float, float]:
    query = np.asarray(vector, np.float32)
    spec = vector_spec(reader, field, len(query))
    metric = similarity_of(spec)
    query_norm = float(np.sqrt(np.dot(query, query)))
    if metric == "cosine" and query_norm == 0:
        raise IllegalArgument("the [cosine] similarity does not support a query vector with zero magnitude")
    return query, metric, query_norm, query_norm * query_norm


def _part_raw(metric: str, query: np.ndarray, query_norm: float, query_sq: float, values: np.ndarray,
              inverse: np.ndarray, squared: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """``(local rows or None for all, raw similarity)`` of one part's wanted rows: one BLAS product."""
    end = len(wanted)
    count = int(np.count_nonzero(wanted))
    if count < _GATHER_BELOW * end:
        local = np.flatnonzero(wanted)
        dots = _matvec(values[local], query)
        return local, _raw(metric, dots, inverse[local], squared[local], query_norm, query_sq)
    return None, _raw(metric, _matvec(values, query), inverse, squared, query_norm, query_sq)


def _matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    # One streaming pass over the rows (see the module docstring for why not the BLAS).
    return np.einsum("ij,j->i", matrix, vector)


def knn_scores(reader, field: str, vector: Sequence[float] | np.ndarray, candidates: np.ndarray | None = None, *,
               min_similarity: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(mask, scores)`` dense over rows: rows holding a vector (and in ``candidates``), and their scores.

    Only live rows in ``candidates`` (bool over rows; all live rows when None)
    are scored, so rows it excludes are never ranked. ``min_similarity`` keeps rows whose raw
    similarity reaches it (for l2_norm: whose distance is at most it), like
    ES's ``similarity`` option.
    """
    query, metric, query_norm, query_sq = _query(reader, field, vector)
    n = reader.n_rows
    raw = np.zeros(n, np.float32)
    mask = np.zeros(n, bool)
    candidates = reader.live if candidates is None else candidates & reader.live
    for start, end, values, present, inverse, squared, _quant in _parts(reader, field):
        wanted = present & candidates[start:end]
        if not wanted.any():
            continue
        mask[start:end] = wanted
        local, part = _part_raw(metric, query, query_norm, query_sq, values, inverse, squared, wanted)
        if local is None:
            raw[start:end] = part
        else:
            raw[start + local] = part
    if min_similarity is not None:
        mask &= (raw <= min_similarity) if metric == "l2_norm" else (raw >= min_similarity)
    scores = _score(metric, raw.astype(np.float64))
    scores *= mask
    return mask, scores


def _raw(metric: str, dots: np.ndarray, inverse: np.ndarray, squared: np.ndarray, query_norm: float,
         query_sq: float) -> np.ndarray:
    """The raw similarity: cosine, dot product, or (for l2_norm) the euclidean distance."""
    if metric == "cosine":
        out = dots * inverse
        out *= 1.0 / query_norm
        return out
    if metric == "l2_norm":
        return np.sqrt(np.maximum(squared - 2.0 * dots + query_sq, 0.0))
    return dots


def _score(metric: str, raw: np.ndarray) -> np.ndarray:
    if metric in ("cosine", "dot_product"):
        return (1.0 + raw) / 2.0
    if metric == "l2_norm":
        return 1.0 / (1.0 + raw * raw)
    return np.where(raw < 0, 1.0 / (1.0 - np.minimum(raw, 0.0)), raw + 1.0)


def knn_top(reader, field: str, vector: Sequence[float] | np.ndarray, k: int,
            filter_mask: np.ndarray | None = None, *, min_similarity: float | None = None,
            helper: Callable[[Callable[[], None]], Future] | None = None) -> Ranked:
    """The ``k`` live rows of ``reader`` nearest to ``vector`` in ``field``, exactly, best first.

    ``filter_mask`` (bool over ``reader.n_rows``) is applied before ranking, so
    the result holds ``k`` matching rows whenever that many exist (no
    post-filtering shortfall). Each part (sealed segment, tail) is one
    matrix-vector product over its contiguous float32 rows and an
    ``argpartition``-style cut to its best ``k`` (ties kept), so no dense
    per-row score array is built. Errors: unmapped or non-``dense_vector``
    field, or a vector of the wrong dimension (``IllegalArgument``).

    ``helper(fn)`` runs ``fn`` on another thread (see :mod:`~xerj_core.query.sidebyside`): the parts are then
    cut into runs of rows that this thread and that one take in turn, and the answer is the same. Without one,
    a scan of at least :data:`_SHARE_FROM_ROWS` wanted rows takes the shared worker when a second core is idle.
    """
    query, metric, query_norm, query_sq = _query(reader, field, vector)
    if k <= 0:
        return Ranked.empty()
    candidates = reader.live if filter_mask is None else reader.live & filter_mask
    # read from the store here: the worker touches numpy arrays alone; int8 copies only where the first pass may
    # pay (never with min_similarity, whose floor the bounds do not carry)
    tasks = list(_parts(reader, field, knnquant.MIN_ROWS_PER_K * k if min_similarity is None else None))
    probe = knnquant.Probe.of(query) if any(task[6] is not None for task in tasks) else None

    def best(task) -> tuple[np.ndarray, np.ndarray] | None:
        start, end, values, present, inverse, squared, quant = task
        wanted = present & candidates[start:end]
        if not wanted.any():
            return None
        local = None
        if probe is not None and quant is not None:
            # The int8 first pass: the rows left are a superset of this run's best k (see knnquant).
            local = knnquant.survivors(quant, probe, metric, wanted, k, squared, query_norm, query_sq)
        if local is not None:
            raw = _raw(metric, _matvec(values[local], query), inverse[local], squared[local], query_norm, query_sq)
        else:
            local, raw = _part_raw(metric, query, query_norm, query_sq, values, inverse, squared, wanted)
        valid = wanted if local is None else None
        if min_similarity is not None:
            passed = (raw <= min_similarity) if metric == "l2_norm" else (raw >= min_similarity)
            valid = passed if valid is None else valid & passed
        better = -raw if metric == "l2_norm" else raw  # larger is nearer
        if valid is not None and not valid.all():
            better = np.where(valid, better, -np.inf)
        if len(better) > k:
            cut = len(better) - k
            kth = np.partition(better, cut)[cut]
            chosen = better >= kth
            if valid is not None:
                chosen &= valid
            chosen = np.flatnonzero(chosen)
        else:
            chosen = np.flatnonzero(valid) if valid is not None else np.arange(len(better))
        return start + (chosen if local is None else local[chosen]), raw[chosen]

    with _helper_for(tasks, helper, candidates) as share:
        found = [best(task) for task in tasks] if share is None else _shared(_runs(tasks), best, share)
    found = [f for f in found if f is not None]
    if not found:
        return Ranked.empty()
    raw = np.concatenate([f[1] for f in found]).astype(np.float64)
    return select_top(np.concatenate([f[0] for f in found]), _score(metric, raw), k)


@contextlib.contextmanager
def _helper_for(tasks: list[tuple], helper: Callable[[Callable[[], None]], Future] | None, candidates: np.ndarray
                ) -> Iterator[Callable[[Callable[[], None]], Future] | None]:
    """``helper`` when given; else, for a scan of many ``candidates`` rows, the shared worker when a core is idle."""
    if helper is not None or sum(int(np.count_nonzero(candidates[start:end]))
                                 for start, end, *_rest in tasks) < _SHARE_FROM_ROWS:
        yield helper
        return
    with sidebyside.spare_worker(sidebyside.scans) as submit:
        yield submit


def _runs(tasks: list[tuple]) -> list[tuple]:
    """The parts cut into runs of at most ``_RUN_ROWS`` rows (each run's best ``k``, ties kept, holds every row
    of the part's best ``k`` it contains, so the final cut is the same)."""
    out = []
    for start, end, values, present, inverse, squared, quant in tasks:
        for lo in range(0, end - start, _RUN_ROWS):
            hi = min(lo + _RUN_ROWS, end - start)
            out.append((start + lo, start + hi, values[lo:hi], present[lo:hi], inverse[lo:hi], squared[lo:hi],
                        None if quant is None else quant.sliced(lo, hi)))
    return out


def _shared(tasks: list, run: Callable, helper: Callable[[Callable[[], None]], Future]) -> list:
    """``[run(t) for t in tasks]`` with the tasks taken in turn by this thread and ``helper``'s."""
    found: list = [None] * len(tasks)
    claimed = itertools.count()  # next() on it is atomic: each task is taken once

    def drain() -> None:
        for i in iter(claimed.__next__, None):
            if i >= len(tasks):
                return
            found[i] = run(tasks[i])

    future = helper(drain)
    try:
        drain()
    finally:
        failed = future.exception()  # waits: the helper is done with the arrays before they may go
    if failed is not None:
        raise failed
    return found


def blas_info() -> str:
    """Which BLAS numpy calls and with how many threads (for benchmark reports)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - the bench extra installs it
        return "unknown (threadpoolctl not installed)"
    found = [f"{i.get('internal_api')} {i.get('version')} ({i.get('num_threads')} threads)"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    return ", ".join(found) or "none found"
