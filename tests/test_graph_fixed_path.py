"""What ego's fixed path remembers or shares between calls gives the answers it gave when nothing was shared.

The parameters other than the node are parsed once per shape of request
(``requests.parse_ego``); a hop's runs are laid out with one shared read-only
count (``arrays.ranges``); the graph view is made once per index generation;
weights are named through a memo of their float32 bits (``hop.shortest_floats``).
The array helpers a hop calls are checked against numpy's own functions.
"""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.arrays import counting, member, ranges, unique_ids
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import GraphError
from xerj_core.graph import requests
from xerj_core.graph.hop import shortest_floats
from xerj_core.model import EdgeDraft

T0 = 1_767_225_600_000


def test_ranges_match_the_concatenated_aranges():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        starts, lengths = rng.integers(0, 10**7, n), rng.integers(0, 30, n)
        expected = np.concatenate([np.arange(s, s + k) for s, k in zip(starts, lengths)]).astype(np.int64)
        for dtype in (np.int64, np.int32):
            found = ranges(starts.astype(dtype), lengths.astype(dtype))
            assert found.dtype == np.int64
            assert np.array_equal(found, expected)
    assert ranges(np.array([3, 9]), np.array([0, 0])).size == 0


def test_member_and_unique_ids_match_numpy():
    rng = np.random.default_rng(11)
    for size in (0, 1, 5, 64, 65, 300, 2049, 5000):  # each of their paths: a Python set, np.unique, a bitmap
        values = rng.integers(0, 400, size)
        ids = np.unique(rng.integers(0, 500, int(rng.integers(0, 40))))
        assert np.array_equal(member(values, ids), np.isin(values, ids))
        assert np.array_equal(member(values, np.array([1000])), np.zeros(size, bool))  # every value below the id
        for without in (None, int(values[0]) if size else 7, 10_000):
            expected = np.setdiff1d(np.unique(values), [] if without is None else [without])
            found = unique_ids(values, without=without)
            assert found.dtype == np.int64 and np.array_equal(found, expected)


def test_shortest_floats_are_the_shortest_decimals_of_the_float32_values():
    rng = np.random.default_rng(5)
    column = np.concatenate([rng.random(50), [0.1, 0.9, -2.5, 1e-8, 3e38, np.inf, -np.inf]]).astype(np.float32)
    expected = [float(str(v)) if np.isfinite(v) else float(v) for v in column]
    assert shortest_floats(column) == expected  # met first: each made
    assert shortest_floats(column) == expected  # met again: each from the memo
    assert shortest_floats(column[3:4]) == expected[3:4]
    assert shortest_floats(column[:0]) == []
    record = np.zeros(4, np.dtype([("valid_at", np.int64), ("weight", np.float32)], align=True))
    record["weight"] = [0.3, 0.7, 0.3, 1.0]
    assert shortest_floats(record["weight"]) == [0.3, 0.7, 0.3, 1.0]  # a strided field of a record
    found = shortest_floats(np.array([np.nan], np.float32))
    assert len(found) == 1 and np.isnan(found[0])


def test_the_shared_count_is_read_only_and_grows():
    small = counting(10)
    assert np.array_equal(small, np.arange(10))
    with pytest.raises(ValueError):
        small[0] = 5
    large = counting(300_000)
    assert np.array_equal(large[-3:], [299_997, 299_998, 299_999])
    assert np.array_equal(small, np.arange(10))  # a view of the replaced array stays as it was


def test_a_remembered_shape_still_reads_each_node_and_the_clock(monkeypatch):
    clock = iter([1_000, 2_000])
    monkeypatch.setattr(requests, "now_ms", lambda: next(clock))
    query = {"hops": "2", "direction": "both", "limit": "7", "include_evidence": "false"}
    first = requests.parse_ego({**query, "node": "a"})
    second = requests.parse_ego({**query, "node": "b"})
    assert (first.seeds, first.as_of) == (("a",), 1_000)
    assert (second.seeds, second.as_of) == (("b",), 2_000)  # as_of left out is now, on every call
    assert first.limit == second.limit == 7 and first.hops == 2 and not first.include_evidence
    assert requests.parse_ego({**query, "nodes": "x, y", "as_of": "5"}).seeds == ("x", "y")


def test_a_remembered_shape_refuses_what_it_refused_before():
    requests.parse_ego({"node": "a", "limit": 1})
    with pytest.raises(GraphError, match=r"\[limit\] must be an integer"):
        requests.parse_ego({"node": "a", "limit": True})  # equal to 1 as a key, but a bool is no integer
    requests.parse_ego({"node": "a", "hops": "1"})
    with pytest.raises(GraphError, match="unknown parameter"):
        requests.parse_ego({"node": "a", "hops": "1", "hopz": "2"})
    for _ in range(2):
        with pytest.raises(GraphError, match="hops"):
            requests.parse_ego({"node": "a", "hops": "3"})
    # a list value cannot be a key: parsed every time, the same way
    assert requests.parse_ego({"node": "a", "types": ["cites", "x"]}).types == ("cites", "x")
    assert requests.parse_ego({"node": "a", "types": ["cites"]}).types == ("cites",)


def test_the_view_made_once_per_generation_sees_each_write(tmp_path):
    with Engine(tmp_path / "data", config=EngineConfig()) as engine:
        def draft(src, dst):
            return EdgeDraft(src, dst, "cites", "test@1", 0.5, 1.0, T0)

        engine.graph.write_edges("b", [draft("a", "b")], created_at=T0)
        first = engine.graph.ego("b", {"node": "a", "as_of": T0 + 1, "include_evidence": "false"})
        again = engine.graph.ego("b", {"node": "a", "as_of": T0 + 1, "include_evidence": "false"})
        engine.graph.write_edges("b", [draft("a", "c")], created_at=T0)
        after = engine.graph.ego("b", {"node": "a", "as_of": T0 + 1, "include_evidence": "false"})
    assert [e["dst"] for e in first["edges"]] == [e["dst"] for e in again["edges"]] == ["b"]
    assert sorted(e["dst"] for e in after["edges"]) == ["b", "c"]
