"""The kNN scan's int8 first pass (xerj_core.query.knnquant): answers equal to the float32 scan's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core.query import knn, knnquant
from xerj_core.query.service import SearchService
from xerj_core.store import BulkOp, Store

pytestmark = pytest.mark.skipif(not knnquant.available(), reason="the kNN scan's int8 loop was not built")

SIMILARITIES = ("cosine", "dot_product", "l2_norm", "max_inner_product")


def _load(path, vectors: np.ndarray, similarity: str, tail_rows: int = 64) -> Store:
    store = Store(path, sync=False, tail_rows=tail_rows)
    store.create_index("v", {"properties": {"kind": {"type": "keyword"},
                                            "vec": {"type": "dense_vector", "dims": vectors.shape[1],
                                                    "similarity": similarity}}})
    for lo in range(0, len(vectors), 100):
        store.bulk([BulkOp("index", "v", str(i), {"kind": "ab"[i % 2], "vec": vectors[i].tolist()})
                    for i in range(lo, min(lo + 100, len(vectors)))])
    return store


def _both(monkeypatch, reader, query, k, mask=None, **options):
    """knn_top's answer with the first pass off, then on, and the runs (or passes) the first pass narrowed."""
    narrowed = []
    survivors = knnquant.survivors

    def spy(quant, *args, **kwargs):
        found = survivors(quant, *args, **kwargs)
        if found is not None and len(found) < len(quant.codes):
            narrowed.append(len(found))
        return found

    run = knnquant.FirstPass.run

    def spy_run(first):  # the pass over many parts at once (every similarity but l2_norm)
        found = run(first)
        if len(found[0]) < sum(len(part[1]) for part in first.parts):
            narrowed.append(len(found[0]))
        return found

    monkeypatch.setattr(knnquant, "survivors", spy)
    monkeypatch.setattr(knnquant.FirstPass, "run", spy_run)
    monkeypatch.setattr(knnquant, "ENABLED", False)
    plain = knn.knn_top(reader, "vec", query, k, mask, **options)
    monkeypatch.setattr(knnquant, "ENABLED", True)
    first = knn.knn_top(reader, "vec", query, k, mask, **options)
    return plain, first, narrowed


def _same(plain, first) -> None:
    assert plain.rows.tolist() == first.rows.tolist()
    assert plain.scores.tobytes() == first.scores.tobytes()  # bit for bit, not approximately


@pytest.mark.parametrize("dims", [1, 3, 16, 100, 384, 769])
def test_a_gathered_row_gets_the_sum_it_gets_in_place(dims):
    # What the first pass rests on: scoring the rows it leaves apart gives each the float32 sum of the full scan.
    rng = np.random.default_rng(dims)
    values = rng.standard_normal((3000, dims)).astype(np.float32) * rng.uniform(0.01, 100, (3000, 1)).astype(
        np.float32)
    query = rng.standard_normal(dims).astype(np.float32)
    whole = knn._matvec(values, query)
    for size in (1, 2, 7, 64, 500, 2999):
        rows = np.sort(rng.choice(len(values), size, replace=False))
        assert knn._matvec(values[rows], query).tobytes() == whole[rows].tobytes()
        # as the compiled first pass hands them over: copied into a bytes object, wherever that puts them
        for shift in (0, 4, 8, 12):
            copied = np.frombuffer(b"\0" * shift + values[rows].tobytes(), np.float32, offset=shift)
            copied = copied.reshape(size, dims)
            assert knn._matvec(copied, query).tobytes() == whole[rows].tobytes()


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_first_pass_answers_as_the_full_scan(tmp_path, monkeypatch, similarity):
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1500, 24)).astype(np.float32)
    if similarity == "dot_product":
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[::37] = vectors[3]  # exact duplicates: ties at the cut
    vectors[5::41] *= np.float32(1e-3)  # small rows beside large ones
    narrowed = []
    with _load(tmp_path / "s", vectors, similarity) as store, store.reader("v") as reader:
        assert len(reader.segments) > 1 and reader.tail_count  # sealed segments and a tail
        every_other = SearchService(store).filter_mask(reader, {"term": {"kind": "a"}})
        for i in range(12):
            query = vectors[3] + np.float32(1e-4) * rng.standard_normal(24).astype(np.float32) if i % 3 == 0 \
                else rng.standard_normal(24).astype(np.float32)
            if similarity == "dot_product":
                query /= np.linalg.norm(query)
            for k in (1, 3, 10):
                for mask in (None, every_other):
                    plain, first, seen = _both(monkeypatch, reader, query, k, mask)
                    _same(plain, first)
                    narrowed += seen
    assert narrowed, "the first pass never left out a row: the test would not see it go wrong"


def test_first_pass_keeps_every_tie_at_the_cut(tmp_path, monkeypatch):
    # 300 copies of one row: the best k are all tied, and the full scan returns every one of them.
    vectors = np.tile(np.arange(1, 9, dtype=np.float32), (600, 1))
    vectors[1::2] = -vectors[1::2]
    with _load(tmp_path / "s", vectors, "cosine") as store, store.reader("v") as reader:
        plain, first, _seen = _both(monkeypatch, reader, vectors[0], 5)
        _same(plain, first)


def test_rows_near_float32_overflow_are_left_to_the_full_scan(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((800, 8)).astype(np.float32) * np.float32(1e17)
    with _load(tmp_path / "s", vectors, "dot_product") as store, store.reader("v") as reader:
        plain, first, seen = _both(monkeypatch, reader, vectors[10] * np.float32(1e-3), 5)
        _same(plain, first)
        assert seen == []


def test_min_similarity_is_answered_by_the_full_scan(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((900, 16)).astype(np.float32)
    with _load(tmp_path / "s", vectors, "cosine") as store, store.reader("v") as reader:
        plain, first, seen = _both(monkeypatch, reader, vectors[1], 5, min_similarity=0.1)
        _same(plain, first)
        assert seen == []


@pytest.mark.parametrize("magnitude", [1e-42, 1e-30, 1e-3, 1.0, 7e3, 1e15])
@pytest.mark.parametrize("dims", [1, 5, 384, 2304])
def test_the_stored_bounds_hold_in_exact_arithmetic(magnitude, dims):
    # Each row's slack and rounded norm, worked out in float32, against the same quantities in float64 from
    # the very codes and scale stored (subnormal rows included).
    rng = np.random.default_rng(dims)
    values = (rng.standard_normal((300, dims)) * magnitude).astype(np.float32)
    values[::7] = np.round(values[::7] / magnitude) * np.float32(magnitude)  # rows with many equal entries
    values[3] = 0
    squared = knn._norms(values)[1]
    quant = knnquant.quantize(values, squared)
    exact = values.astype(np.float64)
    rounded = quant.codes.astype(np.float64) * quant.scale[:, None]
    error = np.linalg.norm(exact - rounded, axis=1)
    norm = np.linalg.norm(exact, axis=1)
    assert (error + knnquant._gamma(dims) * norm <= quant.slack).all()
    assert (np.linalg.norm(rounded, axis=1) <= quant.rounded_norm).all()
    assert norm.max() <= quant.largest_norm
    assert quant.codes.min() >= -127


def test_the_c_loop_refuses_arrays_of_the_wrong_kind():
    codes = np.zeros((4, 3), np.int8)
    query = np.zeros(3, np.int16)
    with pytest.raises(TypeError):
        knnquant._dots(codes.astype(np.float32), query, np.empty(4, np.int32))
    with pytest.raises(TypeError):
        knnquant._dots(codes, query.astype(np.int8), np.empty(4, np.int32))
    with pytest.raises(ValueError):
        knnquant._dots(codes, query, np.empty(5, np.int32))
    per_row = np.zeros(4)
    with pytest.raises(TypeError):
        knnquant._left(codes, query, per_row.astype(np.float32), per_row, per_row, np.ones(4, bool), 1, 1, 1, 1, 0)
    with pytest.raises(ValueError):
        knnquant._left(codes, query, per_row, per_row, per_row, np.ones(3, bool), 1, 1, 1, 1, 0)
    with pytest.raises(ValueError):
        knnquant._left(codes, query, per_row, per_row, per_row, np.ones(4, bool), 0, 1, 1, 1, 0)


def test_the_c_loop_sums_exactly():
    rng = np.random.default_rng(5)
    codes = rng.integers(-127, 128, (300, 1000)).astype(np.int8)
    query = rng.integers(-127, 128, 1000).astype(np.int16)
    out = np.empty(300, np.int32)
    knnquant._dots(codes, query, out)
    assert out.tolist() == (codes.astype(np.int64) @ query.astype(np.int64)).tolist()


def test_the_c_loop_reads_only_the_rows_a_filter_keeps():
    # A filter keeping few rows (recall restricted to what the graph links) makes the int8 pass that much shorter:
    # the rows left out are skipped, their sums 0, the others exact.
    rng = np.random.default_rng(6)
    codes = rng.integers(-127, 128, (500, 384)).astype(np.int8)
    query = rng.integers(-127, 128, 384).astype(np.int16)
    wanted = rng.random(500) < 0.1
    out = np.full(500, 7, np.int32)
    knnquant._dots(codes, query, out, wanted)
    exact = codes.astype(np.int64) @ query.astype(np.int64)
    assert out.tolist() == np.where(wanted, exact, 0).tolist()
    with pytest.raises(ValueError):
        knnquant._dots(codes, query, out, wanted[:-1])
    with pytest.raises(ValueError):
        knnquant._dots(codes, query, out, wanted.astype(np.int32))


def sequential_float32_sums(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """What ``rows_above`` sums, the same way: per row a float32 product then a float32 sum, direction by direction."""
    sums = np.zeros(codes.shape[1], np.float32)
    for code, weight in zip(codes, weights):
        sums += weight * code.astype(np.float32)
    return sums


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(0, 300), st.floats(1e-6, 1e3))
def test_the_c_loop_lists_the_rows_whose_weighted_codes_reach_the_bar(seed, directions, rows, magnitude):
    # The dedup probe's first pass (xerj_core.memory.dedup): the vector loop takes 64 rows at a time and the plain
    # loop the rest, so the row counts cross those blocks; bars equal to a row's own sum test the ">=".
    rng = np.random.default_rng(seed)
    codes = rng.integers(-127, 128, (directions, rows)).astype(np.int8)
    weights = (rng.standard_normal(directions) * magnitude).astype(np.float32)
    sums = sequential_float32_sums(codes, weights)
    bars = [-np.inf, np.inf, 0.0, *rng.choice(sums, min(rows, 4)).astype(np.float64).tolist()]
    for bar in bars:
        found = knnquant.rows_above(codes, weights, bar)
        assert found.dtype == np.int64 and found.tolist() == np.flatnonzero(sums >= bar).tolist(), bar


def test_the_weighted_codes_loop_is_off_with_the_first_pass(monkeypatch):
    monkeypatch.setattr(knnquant, "ENABLED", False)
    assert knnquant.rows_above(np.zeros((2, 3), np.int8), np.ones(2, np.float32), 0.0) is None


def test_the_weighted_codes_loop_refuses_arrays_of_the_wrong_kind():
    codes, weights = np.zeros((3, 70), np.int8), np.ones(3, np.float32)
    with pytest.raises(TypeError):
        knnquant._above(codes, weights.astype(np.float64), 0.0)
    with pytest.raises(TypeError):
        knnquant._above(codes.astype(np.int16), weights, 0.0)
    with pytest.raises(ValueError):
        knnquant._above(codes.reshape(-1)[:-1].copy(), weights, 0.0)  # 209 codes are not three rows
    with pytest.raises(ValueError):
        knnquant._above(codes, np.ones(0, np.float32), 0.0)
    with pytest.raises(ValueError):
        knnquant._above(codes[:, ::2], weights, 0.0)  # not contiguous


@pytest.mark.parametrize("share", [0.02, 0.1, 0.3, 0.6, 1.0])
def test_a_filtered_first_pass_leaves_what_the_kept_rows_alone_leave(share):
    # The C loop reads a sparse filter's rows from a list and a dense one's down every row: either way the rows
    # left must be exactly those a run of the kept rows alone (every row wanted) leaves.
    rng = np.random.default_rng(int(share * 100))
    values = rng.standard_normal((3000, 384)).astype(np.float32)
    query = rng.standard_normal(384).astype(np.float32)
    inverse, squared = knn._norms(values)
    quant = knnquant.quantize(values, squared, inverse)
    probe = knnquant.Probe.of(query)
    wanted = rng.random(len(values)) < share
    kept = np.flatnonzero(wanted)

    def left(q, mask):
        return np.frombuffer(knnquant._left(q.codes, probe.codes, q.scale, q.slack, q.rounded_norm, mask, 10,
                                            probe.scale, probe.norm, probe.error, 1e-6), np.int64)

    alone = knnquant.Quantized(np.ascontiguousarray(quant.codes[kept]), quant.scale[kept], quant.slack[kept],
                               quant.rounded_norm[kept], quant.largest_norm)
    expected = kept[left(alone, np.ones(len(kept), bool))]
    assert left(quant, wanted).tolist() == expected.tolist()
    assert 10 <= len(expected) < len(kept)  # the bounds did cut: a row scored wrong would change the answer


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.sampled_from(SIMILARITIES), st.integers(1, 8), st.integers(1, 40),
       st.sampled_from((1.0, 0.6, 0.1)))
def test_first_pass_answers_as_the_full_scan_on_small_integer_vectors(monkeypatch, seed, similarity, dims, k,
                                                                      kept):
    # Small integers make many exact ties and many rows whose bounds touch the cut.
    rng = np.random.default_rng(seed)
    values = rng.integers(-3, 4, (rng.integers(50, 400), dims)).astype(np.float32)
    values[np.all(values == 0, axis=1), 0] = 1  # cosine takes no zero vector
    query = rng.integers(-3, 4, dims).astype(np.float32)
    query[0] = query[0] or 1
    monkeypatch.setattr(knnquant, "MIN_ROWS_PER_K", 1)
    monkeypatch.setattr(knnquant, "MAX_LEFT_SHARE", 1.0)
    inverse, squared = knn._norms(values)
    quant = knnquant.quantize(values, squared, inverse if similarity == "cosine" else None)
    # A filter keeping most rows takes the C loop's pass down every row, one keeping few its pass over a list
    wanted = rng.random(len(values)) < kept
    if not wanted.any():
        return
    query_norm = float(np.sqrt(np.dot(query, query)))
    left = knnquant.survivors(quant, knnquant.Probe.of(query), similarity, wanted, min(k, int(wanted.sum())),
                              squared, query_norm, query_norm * query_norm)
    raw = knn._raw(similarity, knn._matvec(values, query), inverse, squared, query_norm, query_norm * query_norm)
    better = np.where(wanted, -raw if similarity == "l2_norm" else raw, -np.inf)
    kth = np.sort(better[wanted])[::-1][min(k, int(wanted.sum())) - 1]
    best = set(np.flatnonzero(better >= kth).tolist())
    assert best <= set(left.tolist())  # every row of the best k, ties included, is left for float32
    assert set(left.tolist()) <= set(np.flatnonzero(wanted).tolist())


def test_no_int8_copy_is_made_where_the_first_pass_cannot_pay(tmp_path):
    # A small tail (a memory namespace's newest rows, grown by every store) and a scan with a similarity floor
    # are scored whole: no copy is made, or grown on each write.
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((100, 16)).astype(np.float32)
    with _load(tmp_path / "s", vectors, "cosine", tail_rows=1024) as store:
        with store.reader("v") as reader:
            knn.knn_top(reader, "vec", vectors[0], 10)  # 100 rows, fewer than 16 per k
            knn.knn_top(reader, "vec", vectors[0], 1, min_similarity=0.1)
            assert not any(key[0] == "knn-int8" for key in reader.snapshot.tail._derived)
            knn.knn_top(reader, "vec", vectors[0], 1)  # 100 rows for k = 1: worth a copy
            assert any(key[0] == "knn-int8" for key in reader.snapshot.tail._derived)


@pytest.mark.parametrize("dims", [1, 31, 32, 33, 100, 384])
def test_the_c_loop_sums_exactly_at_the_ends_of_int8(dims):
    # The AVX2 loop sums pairs of products in 16 bits: codes of -128 and 127 against a query of +-127 make the
    # largest pairs; a query holding -128 (whose sign a byte cannot flip) takes the plain loop. Either way exact.
    rng = np.random.default_rng(dims)
    codes = rng.choice(np.array([-128, -127, 127, 0, 1], np.int8), (64, dims))
    codes[0], codes[1] = -128, 127
    for query in (np.full(dims, 127, np.int16), np.full(dims, -127, np.int16), rng.integers(-127, 128, dims),
                  np.where(np.arange(dims) % 2, -128, 127)):
        query = query.astype(np.int16)
        out = np.empty(len(codes), np.int32)
        knnquant._dots(codes, query, out)
        assert out.tolist() == (codes.astype(np.int64) @ query.astype(np.int64)).tolist()


def _pass_parts(rng, sizes, dims, share, first=None):
    """Parts as FirstPass takes them, with their float32 rows, in order of rows, every other one right after
    the one before; ``first`` (wanted) starts each part."""
    parts, start = [], 0
    for i, size in enumerate(sizes):
        values = rng.standard_normal((size, dims)).astype(np.float32)
        values[::7] = values[:1]  # ties at the cut
        wanted = rng.random(size) < share
        if first is not None and size:
            values[0], wanted[0] = first, True
        inverse, squared = knn._norms(values)
        parts.append((start, knnquant.quantize(values, squared, inverse), wanted, values, inverse))
        start += size + 2 * (i % 2)
    return parts


@pytest.mark.parametrize("share", [0.1, 0.5, 1.0])
def test_a_first_pass_over_many_parts_shared_by_threads_leaves_every_row_of_the_best_k(share, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(knnquant, "MAX_LEFT_SHARE", 1.0)  # every row left is copied, however many

    rng = np.random.default_rng(int(share * 10))
    dims, k = 48, 7
    query = rng.standard_normal(dims).astype(np.float32)
    # each part's first row is the query itself: a best row right after the part before ends
    parts = _pass_parts(rng, [300, 1, 0, 517, 64], dims, share, first=query)
    query_norm = float(np.sqrt(np.dot(query, query)))
    probe = knnquant.Probe.of(query)
    rows = np.concatenate([start + np.flatnonzero(wanted) for start, _q, wanted, _v, _i in parts])
    raw = np.concatenate([knn._raw("cosine", knn._matvec(values, query), inverse, inverse, query_norm, 0.0)[wanted]
                          for _s, _q, wanted, values, inverse in parts])
    best = set(rows[raw >= np.sort(raw)[-k]].tolist())  # ties included
    by_row = {start + i: (values[i], inverse[i]) for start, _q, _w, values, inverse in parts for i in range(len(values))}
    with ThreadPoolExecutor(2) as pool:
        for run_rows in (5, 64, 10_000):
            first = knnquant.FirstPass(parts, probe, "cosine", k, query_norm, run_rows, len(rows))
            found = list(pool.map(lambda _: first.run(), range(2)))
            found.append(first.run())  # every run already taken: nothing left for a late caller
            assert len(found[2][0]) == 0
            left = np.concatenate([f[0] for f in found])
            assert best <= set(left.tolist()) <= set(rows.tolist())
            assert len(left) == len(set(left.tolist()))  # each run taken once
            for got_rows, got_values, got_inverse in found:
                assert (np.diff(got_rows) > 0).all()
                for row, vector, inverse in zip(got_rows.tolist(), got_values, got_inverse):
                    assert vector.tobytes() == by_row[row][0].tobytes() and inverse == by_row[row][1]
    if share < 1.0:
        assert len(left) < len(rows)  # the bounds did cut


def test_the_pass_over_many_parts_refuses_malformed_parts():
    rng = np.random.default_rng(2)
    parts = _pass_parts(rng, [40, 40], 8, 1.0)
    probe = knnquant.Probe.of(rng.standard_normal(8).astype(np.float32))

    def run(shaped, k=3, claim=None):
        first = knnquant.FirstPass(parts, probe, "dot_product", k, 1.0, 16, 80)
        first.parts = shaped(first.parts)
        if claim is not None:
            first._claim = claim
        return first.run()

    run(lambda p: p)
    with pytest.raises(ValueError):  # overlapping
        run(lambda p: [p[0], (10, *p[1][1:])])
    with pytest.raises(ValueError):  # out of order
        run(lambda p: [p[1], p[0]])
    with pytest.raises(ValueError):  # a wanted flag missing
        run(lambda p: [(*p[0][:5], p[0][5][:-1], *p[0][6:])])
    with pytest.raises(ValueError):  # an inverse norm missing
        run(lambda p: [(*p[0][:7], p[0][7][:-1])])
    with pytest.raises(TypeError):  # float64 rows
        run(lambda p: [(*p[0][:6], p[0][6].astype(np.float64), p[0][7])])
    with pytest.raises(TypeError):  # not a part
        run(lambda p: [p[0][:3]])
    with pytest.raises(ValueError):
        run(lambda p: p, k=0)
    with pytest.raises(ValueError):
        run(lambda p: p, claim=np.zeros(2, np.int64))
    with pytest.raises(TypeError):
        run(lambda p: p, claim=np.zeros(1, np.float64))


def test_a_first_pass_leaving_too_many_rows_copies_none_and_the_parts_are_scored_whole(tmp_path, monkeypatch):
    rng = np.random.default_rng(12)
    parts = _pass_parts(rng, [200, 300], 16, 1.0)
    probe = knnquant.Probe.of(rng.standard_normal(16).astype(np.float32))
    rows, values, inverse = knnquant.FirstPass(parts, probe, "dot_product", 5, 1.0, 64, 0).run()
    assert len(rows) >= 5 and values is None and inverse is None  # nothing copied past the cap
    vectors = rng.standard_normal((1500, 24)).astype(np.float32)
    with _load(tmp_path / "s", vectors, "cosine") as store, store.reader("v") as reader:
        monkeypatch.setattr(knnquant, "MAX_LEFT_SHARE", 0.0)  # any row left is too many
        for i in range(5):
            plain, first, seen = _both(monkeypatch, reader, vectors[i * 7], 3)
            _same(plain, first)
            assert seen  # the first pass ran, and left rows


def test_a_scans_parts_are_kept_for_a_generation_and_made_again_after_a_write(tmp_path):
    """The list of a field's parts (segments and tail, with their norms and int8 copies) is made once per
    generation of the index, shared by every reader of it; a write makes a new one, and the vector it wrote is
    found."""
    with Store(tmp_path / "s", tail_rows=4, sync=False) as store:
        store.create_index("v", {"properties": {"vec": {"type": "dense_vector", "dims": 3}}})
        store.bulk([BulkOp("index", "v", str(i), {"vec": [1.0, float(i), 0.5]}) for i in range(10)])
        with store.reader("v") as first_reader:
            parts = knn._parts(first_reader, "vec")
            assert knn._parts(first_reader, "vec") is parts and len(parts) >= 2  # sealed segments and the tail
        with store.reader("v") as same_generation:
            assert knn._parts(same_generation, "vec") is parts
        store.put("v", {"vec": [0.0, 0.0, 1.0]}, "new")
        with store.reader("v") as after:
            assert knn._parts(after, "vec") is not parts
            best = knn.knn_top(after, "vec", [0.0, 0.0, 1.0], 1)
            assert after.id_of(int(best.rows[0])) == "new"
