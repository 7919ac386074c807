"""The usual ego's lean path (``hop.lean_picks``) answers exactly what the general path answers.

Generated brains spread over sealed segments and the tail (an 8-row tail), with retired and overwritten edges;
every ego the lean path takes is asked again with it turned off, and the two responses must be equal, key
order included.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import reading
from xerj_core.model import EdgeDraft

pytestmark = pytest.mark.usefixtures("hop_loop")  # each test with either hop loop

T0 = 1_767_225_600_000


def _write(engine: Engine, rng: np.random.Generator, nodes: int, edges: int) -> None:
    drafts = [EdgeDraft(f"n{int(s)}", f"n{int(d)}", str(rng.choice(["cites", "relates_to"])), "d@1",
                        float(rng.choice([0.0, 0.5, 0.7, 1.0])), float(rng.choice([0.5, 1.0])),
                        T0 + int(rng.integers(0, 4)) * 1000)
              for s, d in rng.integers(0, nodes, (edges, 2)) if s != d]
    assume(drafts)  # every pair a self-loop (left out): no edge, so no brain to ask
    for at in range(0, len(drafts), 5):  # several writes: sealed segments, then a tail
        engine.graph.write_edges("b", drafts[at:at + 5], created_at=T0)
    with engine.store.reader(".xerj-memory-b-edges") as found:
        live = [found.id_of(int(row)) for row in found.live_rows()]
        live = [edge_id for edge_id in live if not edge_id.startswith("__")]  # the brain's meta document
    retire = [live[i] for i in rng.choice(len(live), len(live) // 5, replace=False)]
    engine.graph.invalidate_edges("b", edge_ids=retire[: len(retire) // 2], at=T0 + 1500)
    for edge_id in retire[len(retire) // 2:]:
        engine.graph.unlink("b", edge_id, invalid_at=T0 + 2500)


def answered_both_ways(engine: Engine, monkeypatch: pytest.MonkeyPatch, query: dict) -> tuple[bytes, bytes, bool]:
    """Brain ``b``'s ego answer to ``query`` by the lean path (when it takes it) and by the general path, as JSON,
    and whether the lean path was taken."""
    taken = []
    lean = reading.lean_picks

    def counted(*args, **kwargs):
        found = lean(*args, **kwargs)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(reading, "lean_picks", counted)
    fast = engine.graph.ego("b", query)
    monkeypatch.setattr(reading, "lean_picks", lambda *args, **kwargs: None)
    general = engine.graph.ego("b", query)
    monkeypatch.setattr(reading, "lean_picks", lean)
    return orjson.dumps(fast), orjson.dumps(general), bool(taken and taken[0])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(3, 30), edges=st.integers(5, 90))
def test_the_lean_path_answers_as_the_general_path(monkeypatch, seed, nodes, edges):
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=8)) as engine:
            _write(engine, rng, nodes, edges)
            taken = 0
            for node in range(nodes + 1):  # and one node the brain never saw
                for hops in (1, 2):
                    for limit in (1, 3, 100):
                        for as_of in (T0 - 1, T0 + 1000, T0 + 2000, T0 + 10**9):
                            query = {"node": f"n{node}", "hops": hops, "direction": "both", "limit": limit,
                                     "as_of": as_of, "include_evidence": "false"}
                            fast, general, lean = answered_both_ways(engine, monkeypatch, query)
                            assert fast == general, query
                            taken += lean
            assert taken  # the lean path answered some


def test_the_lean_path_meets_the_tail_and_the_sealed_rows_in_one_hop(monkeypatch):
    """A seed whose edges lie in sealed segments and in the tail: both tables' picks, ranked together."""
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=8)) as engine:
            weights = [0.1, 0.9, 0.5, 0.3, 0.7, 1.0, 0.2, 0.8, 0.6, 0.4, 0.05, 0.95]
            for i, weight in enumerate(weights):  # one at a time: the first ones sealed, the last in the tail
                engine.graph.write_edges("b", [EdgeDraft("hub", f"m{i}", "cites", "d@1", weight, 1.0, T0),
                                               EdgeDraft(f"m{i}", f"k{i}", "cites", "d@1", weight, 1.0, T0)],
                                         created_at=T0)
            with engine.store.reader(".xerj-memory-b-edges") as found:
                assert found.tail_count and found.tail_start  # both tables hold edges
            for limit in (1, 4, 13, 100):
                for hops in (1, 2):
                    query = {"node": "hub", "hops": hops, "direction": "both", "limit": limit, "as_of": T0 + 1,
                             "include_evidence": "false"}
                    fast, general, lean = answered_both_ways(engine, monkeypatch, query)
                    assert lean and fast == general
                    edges = orjson.loads(fast)["edges"]
                    hop_one = [e["weight"] for e in edges if e["hop"] == 1]
                    assert hop_one == sorted(hop_one, reverse=True)
