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
bandwidth). Measured in ``tests/bench/bench_search.py`` against numpy's BLAS
matmul over the same matrix.

Where the C loop of :mod:`~xerj_core.query.knnquant` was built, a scan first
reads int8 copies of its rows (a quarter of the bytes) and bounds every
row's score, all its parts in one compiled call per thread with the GIL
released (:class:`~xerj_core.query.knnquant.FirstPass`); only the rows that
may reach the best k are scored in float32, by the same numpy loop, so the
answer is the full scan's bit for bit. l2_norm's bounds are worked out per
run, in numpy around the C loop (:func:`~xerj_core.query.knnquant.survivors`).
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
# Rows per run of the compiled first pass (see knnquant.FirstPass): a run costs it no GIL hand-over, so runs
# this short cost nothing and let two threads finish a scan within a short run of each other.
_PASS_RUN_ROWS = 2048


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


def _parts(reader, field: str, quantize_from: int | None = None) -> list[tuple]:
    """``(start, end, values, present, inverse_norms, squared_norms, quantized)`` per stored part of ``field``;
    ``quantized`` is the int8 copy of :mod:`~xerj_core.query.knnquant` for a part of at least ``quantize_from``
    rows while the first pass is on, else None (a smaller part is scored whole: no copy is made or grown).

    Made once per generation of the index (each part's arrays are cached with it already: what is kept is
    the list, whose lookups cost a kNN query about 60 us over eight segments and the tail)."""
    least = quantize_from if quantize_from is not None and knnquant.ENABLED else None
    return reader.memo(("knn-parts", field, least), lambda: list(_each_part(reader, field, least)))


def _each_part(reader, field: str, least: int | None) -> Iterator[tuple]:
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
    return Scan(reader, field, vector, k, filter_mask, min_similarity=min_similarity).top(helper)


class Scan:
    """One :func:`knn_top` call planned: everything it reads from the store, and the Python set-up of its first
    pass, done when it is made; :meth:`top` then touches numpy arrays alone. A hybrid plans its scans before a
    worker thread starts its other legs, so that thread's Python and this one's need not take turns with the
    GIL, and the scan starts in its compiled loop (see :mod:`~xerj_core.query.sidebyside`)."""

    def __init__(self, reader, field: str, vector: Sequence[float] | np.ndarray, k: int,
                 filter_mask: np.ndarray | None = None, *, min_similarity: float | None = None) -> None:
        query, metric, query_norm, query_sq = _query(reader, field, vector)
        self.k, self.metric, self.min_similarity = k, metric, min_similarity
        self._query = (query, query_norm, query_sq)
        # per part holding wanted rows: (start, end, values, wanted, inverse, squared, quantized), and how many
        self.tasks: list[tuple] = []
        self.wanted_rows: list[int] = []
        self.bounded: list[tuple] = []  # the parts the compiled first pass takes
        self.first: knnquant.FirstPass | None = None
        self.probe: knnquant.Probe | None = None
        if k <= 0:
            return
        candidates = reader.live if filter_mask is None else reader.live & filter_mask
        # int8 copies only where the first pass may pay (never with min_similarity, whose floor the bounds do
        # not carry)
        for start, end, values, present, inverse, squared, quant in _parts(
                reader, field, knnquant.MIN_ROWS_PER_K * k if min_similarity is None else None):
            wanted = present & candidates[start:end]
            if count := int(np.count_nonzero(wanted)):
                self.tasks.append((start, end, values, wanted, inverse, squared, quant))
                self.wanted_rows.append(count)
        self.probe = knnquant.Probe.of(query) if any(task[6] is not None for task in self.tasks) else None
        # Parts whose bounds the C loop reads in one call; l2_norm's are worked out per run (see _best)
        chosen = {i for i, task in enumerate(self.tasks)
                  if metric != "l2_norm" and knnquant.pays(task[6], self.probe, self.wanted_rows[i], k)}
        self.bounded = [self.tasks[i] for i in sorted(chosen)]  # in order of rows, as the C loop wants them
        self._bounded_rows = np.array([self.wanted_rows[i] for i in sorted(chosen)])
        self._rest = [task for i, task in enumerate(self.tasks) if i not in chosen]  # scored by _best
        if self.bounded:
            self.first = knnquant.FirstPass([(start, quant, wanted, values, inverse) for start, _end, values,
                                             wanted, inverse, _squared, quant in self.bounded],
                                            self.probe, metric, k, query_norm, _PASS_RUN_ROWS,
                                            int(self._bounded_rows.sum()))

    def top(self, helper: Callable[[Callable[[], None]], Future] | None = None) -> Ranked:
        """The scan's best ``k`` (see :func:`knn_top`, whose ``helper`` this is)."""
        if not self.tasks:
            return Ranked.empty()
        with _helper_for(sum(self.wanted_rows), helper) as share:
            if share is None:
                left = [] if self.first is None else [self.first.run()]
                found = [self._best(task) for task in self._rest]
            else:
                left, found = _shared(self.first, _runs(self._rest), self._best, share)
        if self.first is not None:
            found += _rescored(self.bounded, self._bounded_rows, left, self._query, self.metric, self.k)
        found = [f for f in found if f is not None and len(f[0])]
        if not found:
            return Ranked.empty()
        rows, raw = np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]).astype(np.float64)
        if len(found) > 1:  # select_top keeps the lower rows among ties, so it takes them ascending
            order = np.argsort(rows)
            rows, raw = rows[order], raw[order]
        return select_top(rows, _score(self.metric, raw), self.k)

    def _best(self, task) -> tuple[np.ndarray, np.ndarray]:
        """The best k of one part or run that the compiled pass over many parts does not take."""
        start, end, values, wanted, inverse, squared, quant = task
        (query, query_norm, query_sq), metric = self._query, self.metric
        local = None
        if self.probe is not None and quant is not None:
            # The int8 first pass: the rows left are a superset of this run's best k (see knnquant).
            local = knnquant.survivors(quant, self.probe, metric, wanted, self.k, squared, query_norm, query_sq)
        if local is not None:
            raw = _raw(metric, _matvec(values[local], query), inverse[local], squared[local], query_norm, query_sq)
        else:
            local, raw = _part_raw(metric, query, query_norm, query_sq, values, inverse, squared, wanted)
        return _cut(start, local, raw, wanted if local is None else None, self.k, metric, self.min_similarity)


def _cut(start: int, local: np.ndarray | None, raw: np.ndarray, valid: np.ndarray | None, k: int, metric: str,
         min_similarity: float | None) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, raw)`` of the best ``k`` (ties kept) of a part's scored rows: ``local`` numbers them in the part
    (None: all of its rows, of which ``valid`` says which count)."""
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


def _rescored(bounded: list[tuple], counts: np.ndarray, left: list[tuple[np.ndarray, ...]],
              query: tuple[np.ndarray, float, float], metric: str, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(rows, raw)`` of the rows the first pass left (per thread: its rows numbered over the reader, their
    float32 vectors and inverse norms), scored in float32, rows ascending. A part where the pass left more than
    :data:`knnquant.MAX_LEFT_SHARE` of its wanted rows (``counts``) is scored whole instead, and cut to its best
    ``k``. ``query`` is ``(vector, norm, squared norm)``; l2_norm never comes here."""
    query, query_norm, query_sq = query
    if any(values is None for _rows, values, _inverse in left):  # too many rows left to gather: all scored
        return [_whole(task, query, query_norm, query_sq, metric, k) for task in bounded]
    # each row copied whole is summed as in place (see knnquant), so the scores are the full scan's
    scored = [(rows, _raw(metric, _matvec(values, query), inverse, inverse, query_norm, query_sq))
              for rows, values, inverse in left if len(rows)]
    if not scored:
        return []
    if len(scored) == 1:
        rows, raw = scored[0]
    else:
        rows, raw = np.concatenate([r for r, _ in scored]), np.concatenate([r for _, r in scored])
        order = np.argsort(rows)
        rows, raw = rows[order], raw[order]
    if len(rows) <= knnquant.MAX_LEFT_SHARE * counts.min():
        return [(rows, raw)]  # no part can have left more than its share: the check below would find none
    part = np.searchsorted([task[0] for task in bounded], rows, side="right") - 1
    many = np.flatnonzero(np.bincount(part, minlength=len(bounded)) > knnquant.MAX_LEFT_SHARE * counts)
    found = [_whole(bounded[i], query, query_norm, query_sq, metric, k) for i in many.tolist()]
    if len(many):
        kept = ~np.isin(part, many)
        rows, raw = rows[kept], raw[kept]
    return [*found, (rows, raw)]


def _whole(task: tuple, query: np.ndarray, query_norm: float, query_sq: float, metric: str, k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of a part scored whole, every wanted row in float32."""
    start, _end, values, wanted, inverse, squared, _quant = task
    local, raw = _part_raw(metric, query, query_norm, query_sq, values, inverse, squared, wanted)
    return _cut(start, local, raw, wanted if local is None else None, k, metric, None)


@contextlib.contextmanager
def _helper_for(wanted_rows: int, helper: Callable[[Callable[[], None]], Future] | None
                ) -> Iterator[Callable[[Callable[[], None]], Future] | None]:
    """``helper`` when given; else, for a scan of many wanted rows, the shared worker when a core is idle."""
    if helper is not None or wanted_rows < _SHARE_FROM_ROWS:
        yield helper
        return
    with sidebyside.spare_worker(sidebyside.scans) as submit:
        yield submit


def _runs(tasks: list[tuple]) -> list[tuple]:
    """The parts cut into runs of at most ``_RUN_ROWS`` rows (each run's best ``k``, ties kept, holds every row
    of the part's best ``k`` it contains, so the final cut is the same)."""
    out = []
    for start, end, values, wanted, inverse, squared, quant in tasks:
        for lo in range(0, end - start, _RUN_ROWS):
            hi = min(lo + _RUN_ROWS, end - start)
            if wanted[lo:hi].any():
                out.append((start + lo, start + hi, values[lo:hi], wanted[lo:hi], inverse[lo:hi], squared[lo:hi],
                            None if quant is None else quant.sliced(lo, hi)))
    return out


def _shared(first: knnquant.FirstPass | None, tasks: list, run: Callable, helper: Callable[[Callable[[], None]], Future]
            ) -> tuple[list[tuple[np.ndarray, ...]], list]:
    """``([first.run()], [run(t) for t in tasks])`` with this thread and ``helper``'s each taking the first pass's
    runs (in its compiled loop), then the tasks, in turn: the first pass's rows left by each thread, and the
    tasks' results in order."""
    found: list = [None] * len(tasks)
    left: list[tuple[np.ndarray, ...]] = []
    claimed = itertools.count()  # next() on it is atomic: each task is taken once

    def drain() -> None:
        if first is not None:
            left.append(first.run())
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
    return left, found


def blas_info() -> str:
    """Which BLAS numpy calls and with how many threads (for benchmark reports)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - the bench extra installs it
        return "unknown (threadpoolctl not installed)"
    found = [f"{i.get('internal_api')} {i.get('version')} ({i.get('num_threads')} threads)"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    return ", ".join(found) or "none found"
