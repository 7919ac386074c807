"""What ego's fixed path remembers or shares between calls gives the answers it gave when nothing was shared.

The parameters other than the node are parsed once per shape of request
(``requests.parse_ego``); a hop's runs are laid out with one shared read-only
count (``arrays.ranges``); the graph view is made once per index generation.
"""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.arrays import counting, ranges
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import GraphError
from xerj_core.graph import requests
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
