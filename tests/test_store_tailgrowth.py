"""The tail's columns and per-row derived arrays grow in place, block by block, and stay exact for every reader."""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.growing import GrowingRows
from xerj_core.query.knn import knn_scores
from xerj_core.store import Store
from xerj_core.store.columns import Column

MAPPING = {
    "properties": {
        "tags": {"type": "keyword"},
        "n": {"type": "long"},
        "body": {"type": "text"},
        "vec": {"type": "dense_vector", "dims": 4, "similarity": "cosine"},
    }
}
FIELDS = ("tags", "n", "body", "vec")


def _doc(i: int, rng: np.random.Generator) -> dict:
    doc: dict = {"n": i, "body": " ".join(f"w{int(x)}" for x in rng.integers(0, 9, 1 + i % 4))}
    if i % 3:  # some rows lack the keyword, some hold several values (the column's extra rows)
        doc["tags"] = [f"t{i % 5}", f"u{i % 7}", f"v{i % 2}"][: 1 + i % 3]
    if i % 5 != 4:  # some rows hold no vector
        doc["vec"] = (rng.normal(size=4) * (1 + i)).tolist()
    return doc


def _same(got: Column, want: Column) -> None:
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.present, want.present)
    np.testing.assert_array_equal(got.extra_rows, want.extra_rows)
    np.testing.assert_array_equal(got.extra_ords, want.extra_ords)


def _copy(column: Column) -> Column:
    return Column(column.kind, column.values.copy(), column.present.copy(), column.extra_rows.copy(),
                  column.extra_ords.copy())


def test_tail_columns_grow_in_place_and_earlier_views_stay_exact(tmp_path):
    rng = np.random.default_rng(3)
    handed: list[tuple[Column, Column]] = []  # (a column handed to a reader, a copy taken then)
    vectors: dict[str, np.ndarray] = {}
    with Store(tmp_path / "data", tail_rows=200) as store:
        store.create_index("x", MAPPING)
        for i in range(150):  # one block per write: many appends, several buffer growths, no seal
            doc = _doc(i, rng)
            store.put("x", doc, f"d{i}")
            if "vec" in doc:
                vectors[f"d{i}"] = np.asarray(doc["vec"], np.float32)
            with store.reader("x") as reader:
                assert not reader.segments and reader.tail_count == i + 1
                tail = reader.snapshot.tail
                for path in FIELDS:
                    spec = reader.mapping.fields[path]
                    got = reader.tail_column(path)
                    # The oracle: the blocks' own columns joined whole, as every read did before.
                    _same(got, Column.concat([block.column(spec) for block in tail.blocks]))
                    if i % 7 == 0:
                        handed.append((got, _copy(got)))
                # Cosine scores over the tail use norms derived row by row: the same as numpy over every vector.
                probe = rng.normal(size=4)
                mask, scores = knn_scores(reader, "vec", probe)
                rows = np.flatnonzero(mask)
                ids = [reader.id_of(int(r)) for r in rows]
                assert sorted(ids) == sorted(vectors)
                matrix = np.stack([vectors[d] for d in ids]).astype(np.float64)
                cosine = matrix @ probe / np.linalg.norm(matrix, axis=1) / np.linalg.norm(probe)
                np.testing.assert_allclose(scores[rows], (1 + cosine) / 2, rtol=1e-5, atol=1e-6)
    # Later appends (and the larger buffers they moved to) left every column handed out earlier as it was.
    assert len(handed) > 40
    for got, then in handed:
        _same(got, then)


def test_growing_rows_appends_only_new_rows_and_keeps_old_views():
    rows = GrowingRows()
    views = []
    total = np.zeros((0, 2), np.float32)
    for size in (1, 3, 70, 2, 200, 5):
        part = np.arange(size * 2, dtype=np.float32).reshape(size, 2) + len(total)
        flags = np.arange(size) % 2 == 0
        rows.append((part, flags))
        total = np.concatenate([total, part])
        values, present = rows.view(len(total))
        np.testing.assert_array_equal(values, total)
        assert present.shape == (len(total),)
        views.append((values, values.copy()))
    for view, then in views:
        np.testing.assert_array_equal(view, then)


def test_derived_rows_builds_each_row_once(tmp_path):
    with Store(tmp_path / "data", tail_rows=100) as store:
        store.create_index("x", MAPPING)
        asked: list[tuple[int, int]] = []

        def build(column):
            def rows(lo: int, hi: int):
                asked.append((lo, hi))
                return (column.values[lo:hi, 0] * 2,)
            return rows

        for i in range(12):
            store.put("x", {"vec": [float(i), 1.0, 0.0, 0.0]}, f"d{i}")
            with store.reader("x") as reader:
                column = reader.tail_column("vec")
                (doubled,) = reader.tail_derived(("doubled", "vec"), build(column))
                np.testing.assert_array_equal(doubled, np.arange(i + 1) * 2.0)
        assert asked == [(i, i + 1) for i in range(12)]


@pytest.mark.parametrize("seal_every", [5, 8])
def test_tail_columns_restart_after_a_seal(tmp_path, seal_every):
    with Store(tmp_path / "data", tail_rows=seal_every) as store:
        store.create_index("x", MAPPING)
        for i in range(3 * seal_every + 2):
            store.put("x", {"n": i}, f"d{i}")
            with store.reader("x") as reader:
                np.testing.assert_array_equal(reader.column("n").values, np.arange(i + 1))
                np.testing.assert_array_equal(reader.tail_column("n").values,
                                              np.arange(reader.tail_start, i + 1))
