"""The dedup probe's sketch pruning: the same decisions as the full scan and as a float64 brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xerj_core.memory import dedup
from xerj_core.memory import requests as rq
from xerj_core.memory.namespace import VECTOR_FIELD, memory_index
from xerj_core.memory.service import _newest_windows
from xerj_core.query import knnquant

T0 = 1_767_225_600_000
DIMS = 512  # above SKETCH_COORDS, so the sketches use a subset of coordinates
NS = "agent"


@pytest.fixture
def memory(engine, monkeypatch):
    """A namespace of clustered caller vectors over many small segments (tails of 8 rows), sketched from 32 rows."""
    monkeypatch.setattr(dedup, "SKETCH_MIN_ROWS", 32)
    service = engine.memory
    ticks = itertools.count()
    service.clock = lambda: T0 + 1000 * next(ticks)
    rng = np.random.default_rng(17)
    centers = rng.standard_normal((12, DIMS))
    vectors = []
    # 700 stores (and the forgets below) seal into 512 + 3 x 64 + 8 rows: four segments sketched, as the test asks
    for n in range(700):
        if n % 50 == 49:
            vector = vectors[n - 7]  # an exact repeat: two rows tie on any probe
        else:
            vector = centers[n % 12] + rng.uniform(0.02, 0.6) * rng.standard_normal(DIMS)
        vectors.append(vector)
        service.store(NS, {"vector": [float(v) for v in vector], "metadata": {"n": n}})
    with engine.store.reader(memory_index(NS)) as reader:
        ids = {reader.id_of(row): row for row in np.flatnonzero(reader.live)}
    for doc_id, row in list(ids.items())[::37]:
        service.forget(NS, doc_id)
    for doc_id, row in list(ids.items())[5::53]:
        service.forget(NS, doc_id, purge=True)
    service.probe_vectors = np.array(vectors)
    return service


def probes(vectors: np.ndarray, rng: np.random.Generator):
    for n in range(0, len(vectors), 11):
        for scale in (0.0, 0.05, 0.2, 0.5):
            yield vectors[n] + scale * rng.standard_normal(DIMS)
    for _ in range(20):
        yield rng.standard_normal(DIMS)


def brute_force(reader, service, probe: np.ndarray, threshold: float) -> tuple[str | None, float]:
    """The probe's contract in float64: the newest window holding a current row at or above the threshold
    answers with its nearest row; also how close any window's best came to the threshold."""
    current = service._current_mask(reader, None)
    column = reader.column(VECTOR_FIELD)
    values = column.values.astype(np.float64)
    norms = np.linalg.norm(values, axis=1)
    cosines = values @ probe / np.where(norms > 0, norms, 1.0) / np.linalg.norm(probe)
    closest = np.inf
    for lo, hi in _newest_windows(reader):
        rows = np.flatnonzero(current[lo:hi] & column.present[lo:hi]) + lo
        if not len(rows):
            continue
        best = rows[np.argmax(cosines[rows])]
        closest = min(closest, abs(cosines[best] - threshold))
        if cosines[best] >= threshold - 1e-6:
            return reader.id_of(int(best)), closest
    return None, closest


def test_a_sketch_bounds_every_rows_cosine_from_above():
    rng = np.random.default_rng(3)
    values = (rng.standard_normal((3000, 2304)) * (rng.random(2304) < 0.2)).astype(np.float32)
    values[::97] = 0.0  # rows with no vector
    values[1::89] = values[2::89][: len(values[1::89])]
    squared = np.einsum("ij,ij->i", values, values, dtype=np.float32)
    inverse = np.zeros_like(squared)
    np.divide(1.0, np.sqrt(squared), out=inverse, where=squared > 0)
    coords, basis, projected, left = dedup.build_sketch(values, inverse, squared)
    assert len(coords) == dedup.SKETCH_COORDS and np.all(np.diff(coords) > 0)
    assert np.allclose(basis.astype(np.float64) @ basis.T.astype(np.float64), np.eye(dedup.SKETCH_DIMS), atol=1e-5)
    exact = values.astype(np.float64)
    exact /= np.where(np.linalg.norm(exact, axis=1) > 0, np.linalg.norm(exact, axis=1), 1.0)[:, None]
    for probe in [values[5], values[1] + 0.01 * rng.standard_normal(2304), rng.standard_normal(2304)]:
        unit = probe / np.linalg.norm(probe)
        into = basis.astype(np.float64) @ unit[coords]
        bound = projected.astype(np.float64) @ into + left * np.sqrt(1.0 - into @ into + dedup.SLACK)
        assert np.all(bound >= exact @ unit)


def test_the_pruned_probe_decides_as_the_full_scan_and_the_brute_force(memory, engine, monkeypatch):
    rng = np.random.default_rng(29)
    full_scan = {}
    pruned_rows = []
    real = dedup.candidates

    def counting(reader, field, probe, lo, hi, cutoff):
        keep = real(reader, field, probe, lo, hi, cutoff)
        if keep is not None:
            pruned_rows.append(int((hi - lo) - keep[lo:hi].sum()))
        return keep

    checked = near = 0
    with engine.store.reader(memory_index(NS)) as reader:
        assert sum(seg.end - seg.start >= dedup.SKETCH_MIN_ROWS for seg in reader.segments) >= 3
        for probe in probes(memory.probe_vectors, rng):
            for threshold in (0.3, 0.8, 0.9, 0.95, 0.99, 1.0):
                request = rq.parse_store({"vector": [float(v) for v in probe], "dedup": True,
                                          "dedup_threshold": threshold})
                monkeypatch.setattr(dedup, "candidates", counting)
                pruned = memory._dedup_probe(reader, request, None)
                monkeypatch.setattr(dedup, "candidates", lambda *args: None)
                full_scan = memory._dedup_probe(reader, request, None)
                assert pruned == full_scan, (threshold, pruned, full_scan)
                expected, closest = brute_force(reader, memory, probe, threshold)
                if closest > 1e-4:  # float32 and float64 may part on a cosine within rounding of the threshold
                    assert pruned == expected, (threshold, pruned, expected)
                    checked += 1
                near += pruned is not None
    assert checked > 600 and near > 150
    # The sketches did prune: most rows of a high-threshold probe were never scored.
    assert sum(pruned_rows) > 0.5 * len(pruned_rows) * 300


def test_a_store_with_dedup_finds_a_repeat_in_a_sketched_segment(memory, engine):
    vectors = memory.probe_vectors
    with engine.store.reader(memory_index(NS)) as reader:
        first = reader.id_of(int(np.flatnonzero(reader.live)[3]))
        stored = reader.document(int(np.flatnonzero(reader.live)[3]))[1]
    status, body = memory.store(NS, {"vector": stored[VECTOR_FIELD], "dedup": True})
    assert (status, body["_id"]) == (200, first)
    assert memory.store(NS, {"vector": [float(v) for v in -vectors[3]], "dedup": True})[0] == 201


# -- the first pass's one-byte codes, the tail's sketch, the exact pass ------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

finite = st.floats(-4.0, 4.0, allow_nan=False, width=64)


def half_steps(values: list[float], shift: int) -> np.ndarray:
    """``values`` moved onto the midpoints between codes of their own range: where rounding errs most."""
    array = np.array(values)
    low, high = array.min(), array.max()
    step = (high - low) / (2 * dedup.LEVELS) if high > low else 1.0
    return np.clip(low + (np.floor((array - low) / step) + 0.5) * step + shift * 1e-17, low, high)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=300), st.sampled_from(["as drawn", "half steps", "one value", "tiny"]),
       st.integers(-1, 1))
def test_codes_bound_every_value_whatever_the_range_and_rounding(values, shape, shift):
    array = np.array(values)
    if shape == "half steps":
        array = half_steps(values, shift)
    elif shape == "one value":
        array = np.full(len(values), values[0])
    elif shape == "tiny":
        array = values[0] + np.array(values) * 1e-12
    codes, offset, scale, error = dedup._nearest_codes(array)
    assert codes.dtype == np.int8 and np.all(np.abs(codes.astype(int)) <= dedup.LEVELS)
    assert np.all(np.abs(array - (offset + scale * codes)) <= error)
    up, offset, scale = dedup._upper_codes(np.abs(array))
    assert np.all(np.abs(up.astype(int)) <= dedup.LEVELS)
    assert np.all(offset + scale * up >= np.abs(array))


@st.composite
def adversarial_segments(draw):
    """Rows of a small segment and probes aimed at it: copies and near-copies of rows (cosines at and just under
    a cutoff), negated rows, rows of no vector, rows scaled far apart, coordinates constant over every row."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows, dims = draw(st.integers(2, 150)), draw(st.sampled_from([64, 130, 400]))
    values = rng.standard_normal((rows, dims)) * (rng.random(dims) < draw(st.sampled_from([0.1, 0.5, 1.0])))
    values[:, : draw(st.integers(0, 3))] = draw(finite)  # constant coordinates
    if draw(st.booleans()):
        values[rng.integers(0, rows, 3)] = 0.0
    values *= np.exp(rng.uniform(-6, 6, rows))[:, None] if draw(st.booleans()) else 1.0
    base = values[rng.integers(0, rows)]
    probes = [base, -base, rng.standard_normal(dims)]
    for gap in (0.0, 1e-7, 1e-4, 1e-2):
        probes.append(base + gap * np.linalg.norm(base) * rng.standard_normal(dims))
    values[rng.integers(0, rows, 4)] = probes[-1]  # repeats of a near-copy: ties at the top
    return values.astype(np.float32), [p for p in probes if np.any(p)]


def exact_cosines(values: np.ndarray, unit: np.ndarray) -> np.ndarray:
    exact = values.astype(np.float64)
    norms = np.linalg.norm(exact, axis=1)
    return exact @ unit / np.where(norms > 0, norms, 1.0)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_segments())
def test_every_pass_of_a_sketch_keeps_every_row_that_may_reach_the_cut(segment):
    values, probes = segment
    squared = np.einsum("ij,ij->i", values, values, dtype=np.float32)
    inverse = np.zeros_like(squared)
    np.divide(1.0, np.sqrt(squared), out=inverse, where=squared > 0)
    length = squared.astype(np.float64) * inverse.astype(np.float64) ** 2
    sketch = dedup.Sketch(*dedup.build_sketch(values, inverse, squared), length)
    assert sketch.codes.dtype == np.int8 and sketch.codes.shape == (dedup.LEAD_DIMS + 1, len(values))
    for probe in probes:
        unit = probe.astype(np.float32).astype(np.float64)
        unit /= np.linalg.norm(unit)
        exact = exact_cosines(values, unit)
        sums, floor = sketch.lead_bound(sketch.into(unit))
        # The first pass alone bounds every row from above (float32 rounding of the projections is what SLACK
        # absorbs, as in test_a_sketch_bounds_every_rows_cosine_from_above).
        assert np.all(sums.astype(np.float64) + floor >= exact)
        for cut in {0.1, 0.5, 0.9, *np.clip(exact, 0.05, None).tolist()[:12]}:
            for compiled in {False, knnquant.available()}:  # the first pass by numpy, and by the C loop
                knnquant.ENABLED, was = compiled, knnquant.ENABLED
                try:
                    kept = set(sketch.possible(unit, cut).tolist())
                finally:
                    knnquant.ENABLED = was
                assert set(np.flatnonzero(exact >= cut).tolist()) <= kept, (cut, compiled)


def test_the_tail_is_bounded_on_a_sealed_basis_then_scored_exactly(memory, engine):
    """Every tail row whose cosine may reach the cut survives candidates(); the tail is pruned, not scanned."""
    rng = np.random.default_rng(41)
    index = memory_index(NS)
    tails = pruned = kept = 0
    for n in range(10):  # the tail grows a row per store (its projections extended, not recomputed) until a seal
        vector = memory.probe_vectors[n * 5] + 0.3 * rng.standard_normal(DIMS)
        memory.store(NS, {"vector": [float(v) for v in vector]})
        with engine.store.reader(index) as reader:
            lo, hi = reader.tail_start, reader.n_rows
            if hi == lo:
                continue  # just sealed
            tails += 1
            tail = reader.tail_column(VECTOR_FIELD)
            for probe in [*tail.values[tail.present], *(v + 0.2 * rng.standard_normal(DIMS) for v in tail.values),
                          *rng.standard_normal((4, DIMS))]:
                unit = probe.astype(np.float32).astype(np.float64) / np.linalg.norm(probe.astype(np.float32))
                cosines = exact_cosines(tail.values, unit)
                for cutoff in (0.5, 0.9, 0.95):
                    keep = dedup.candidates(reader, VECTOR_FIELD, probe, lo, hi, cutoff)
                    assert keep is not None and not keep[:lo].any() and not keep[hi:].any()
                    keep = keep[lo:hi]
                    # Kept: every row within the margin (and rounding) of the cutoff; dropped: the rest.
                    assert np.all(keep[tail.present & (cosines >= cutoff - dedup.MARGIN + 1e-5)]), (n, cutoff)
                    assert not np.any(keep & (cosines < cutoff - dedup.MARGIN - 1e-5)), (n, cutoff)
                    pruned += int((~keep).sum())
                    kept += int(keep.sum())
    assert tails >= 8 and pruned > 100 and kept > 20


def test_sketched_rows_are_kept_only_when_their_exact_cosine_may_reach_the_cutoff(memory, engine):
    rng = np.random.default_rng(43)
    with engine.store.reader(memory_index(NS)) as reader:
        column = reader.column(VECTOR_FIELD)
        sketched = np.zeros(reader.n_rows, bool)
        for seg in reader.segments:
            sketched[seg.start:seg.end] = seg.end - seg.start >= dedup.SKETCH_MIN_ROWS
        sketched[reader.tail_start:] = True
        for probe in probes(memory.probe_vectors, rng):
            unit = probe.astype(np.float32).astype(np.float64) / np.linalg.norm(probe.astype(np.float32))
            cosines = exact_cosines(column.values, unit)
            for cutoff in (0.8, 0.95):
                keep = dedup.candidates(reader, VECTOR_FIELD, probe, 0, reader.n_rows, cutoff)
                assert np.all(keep[column.present & (cosines >= cutoff - dedup.MARGIN + 1e-5)])
                assert not np.any(keep & sketched & (cosines < cutoff - dedup.MARGIN - 1e-5))


def test_a_fresh_text_builds_no_mask_of_current_memories(memory, engine, monkeypatch):
    monkeypatch.setattr(dedup, "SKETCH_MIN_ROWS", 1)  # every window sketched (the newest segment has 8 rows)
    built = []
    real = type(memory)._current_mask
    monkeypatch.setattr(type(memory), "_current_mask", lambda self, *a: built.append(1) or real(self, *a))
    rng = np.random.default_rng(47)
    assert memory.store(NS, {"vector": [float(v) for v in rng.standard_normal(DIMS)], "dedup": True})[0] == 201
    assert built == []
    repeat = memory.probe_vectors[-3]
    status, body = memory.store(NS, {"vector": [float(v) for v in repeat], "dedup": True})
    assert status == 200 and body["deduplicated"] and built
