"""The dedup probe's sketch pruning: the same decisions as the full scan and as a float64 brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xerj_core.memory import dedup
from xerj_core.memory import requests as rq
from xerj_core.memory.namespace import VECTOR_FIELD, memory_index
from xerj_core.memory.service import _newest_windows

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
