"""Recall coupled to the graph: restrict never leaves the reachable set, blend's proximity by hand, the report."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from .test_memory_store import T0

EDGE_TIME = T0 - 86_400_000  # edges asserted the day before the memories


@pytest.fixture
def memory(engine):
    service = engine.memory
    ticks = itertools.count()
    service.clock = lambda: T0 + 1000 * next(ticks)
    return service


def ids(result) -> list[str]:
    return [h["_id"] for h in result["hits"]]


def link(engine, ns, src, dst, *, type="relates", weight=1.0, confidence=1.0, valid_at=EDGE_TIME):
    engine.graph.link(ns, {"src": src, "dst": dst, "type": type, "weight": weight, "confidence": confidence,
                           "valid_at": valid_at})


@pytest.fixture
def small(memory, engine):
    """Six memories that all mention "note", and a small brain over them.

    s -(0.8, conf 0.5)- a -(0.6, 0.9, type "cites")- c ;  s -(0.2, 1)- b -(1, 1)- c ;  d, e unlinked
    """
    texts = {"s": "seed note", "a": "note about apples", "b": "note about bread", "c": "note about cheese",
             "d": "note about dates", "e": "note note note about eggs"}
    mem = {key: memory.store("g", {"text": text})[1]["_id"] for key, text in texts.items()}
    link(engine, "g", mem["s"], mem["a"], weight=0.8, confidence=0.5)
    link(engine, "g", mem["s"], mem["b"], weight=0.2)
    link(engine, "g", mem["a"], mem["c"], type="cites", weight=0.6, confidence=0.9)
    link(engine, "g", mem["c"], mem["b"])
    return mem


# -- restrict ------------------------------------------------------------------------------------

def test_restrict_narrows_to_the_reachable_set(memory, small):
    m = small
    one = memory.recall("g", {"query": "note", "graph": {"mode": "restrict", "seeds": [m["s"]], "hops": 1}})
    assert set(ids(one)) == {m["s"], m["a"], m["b"]}
    assert one["graph"] == {"mode": "restrict", "seeds": [m["s"]], "hops": 1, "as_of": one["graph"]["as_of"],
                            "reachable": 3, "not_shown": one["graph"]["not_shown"]}
    assert one["graph"]["not_shown"]["no_edges_index"] is False
    assert one["graph"]["not_shown"]["reachable_clipped"] == 0
    two = memory.recall("g", {"query": "note", "graph": {"mode": "restrict", "seeds": [m["s"]], "hops": 2}})
    assert set(ids(two)) == {m["s"], m["a"], m["b"], m["c"]}
    # Restrict filters without re-scoring: the hits keep their plain scores.
    plain = {h["_id"]: h["_score"] for h in memory.recall("g", {"query": "note"})["hits"]}
    assert all(h["_score"] == pytest.approx(plain[h["_id"]]) for h in two["hits"])
    assert all("graph_proximity" not in h for h in two["hits"])


def test_restrict_types_min_confidence_and_as_of(memory, small, engine):
    m = small
    graph = {"mode": "restrict", "seeds": [m["c"]], "hops": 1}
    assert set(ids(memory.recall("g", {"query": "note", "graph": graph}))) == {m["a"], m["b"], m["c"]}
    typed = memory.recall("g", {"query": "note", "graph": {**graph, "types": ["cites"]}})
    assert set(ids(typed)) == {m["a"], m["c"]}
    assert typed["graph"]["not_shown"]["type_filtered"] == 1
    sure = memory.recall("g", {"query": "note", "graph": {"mode": "restrict", "seeds": [m["s"]], "hops": 1,
                                                          "min_confidence": 0.6}})
    assert set(ids(sure)) == {m["s"], m["b"]}
    assert sure["graph"]["not_shown"]["confidence_filtered"] == 1
    # An edge asserted after the graph's as_of did not exist then.
    link(engine, "g", m["b"], m["d"], valid_at=T0 + 3_600_000)
    later = {"mode": "restrict", "seeds": [m["b"]], "hops": 1, "as_of": T0 + 7_200_000}
    assert m["d"] in ids(memory.recall("g", {"query": "note", "graph": later}))
    earlier = memory.recall("g", {"query": "note", "graph": {**later, "as_of": T0}})
    assert m["d"] not in ids(earlier)
    assert earlier["graph"]["as_of"] == T0 and earlier["graph"]["not_shown"]["expired_excluded"] >= 1


def test_restrict_composes_with_filter_and_as_of(memory, small):
    m = small
    memory.forget("g", m["a"])
    body = {"query": "note", "graph": {"mode": "restrict", "seeds": [m["s"]], "hops": 1}}
    assert set(ids(memory.recall("g", body))) == {m["s"], m["b"]}
    # As of before the forgetting, the recall (and, by default, the graph) looks at that instant.
    then = memory.recall("g", {**body, "as_of": T0 + 5500})
    assert set(ids(then)) == {m["s"], m["a"], m["b"]} and then["graph"]["as_of"] == T0 + 5500
    filtered = memory.recall("g", {**body, "filter": {"match": {"text": "bread"}}})
    assert ids(filtered) == [m["b"]]


@pytest.mark.parametrize("seed", range(6))
def test_restrict_never_returns_an_unreachable_memory(memory, engine, seed):
    rng = random.Random(seed)
    mem = [memory.store("r", {"text": f"shared word {i}"})[1]["_id"] for i in range(40)]
    edges = set()
    while len(edges) < 45:
        a, b = rng.sample(range(40), 2)
        if (a, b) not in edges and (b, a) not in edges:
            edges.add((a, b))
            link(engine, "r", mem[a], mem[b], valid_at=EDGE_TIME + len(edges))
    neighbours: dict[int, set[int]] = {i: set() for i in range(40)}
    for a, b in edges:
        neighbours[a].add(b)
        neighbours[b].add(a)
    for hops in (1, 2):
        seeds = rng.sample(range(40), 2)
        reach, frontier = set(seeds), set(seeds)
        for _ in range(hops):
            frontier = {n for f in frontier for n in neighbours[f]} - reach
            reach |= frontier
        result = memory.recall("r", {"query": "shared word", "k": 40, "semantic": rng.random() < 0.5,
                                     "graph": {"mode": "restrict", "seeds": [mem[s] for s in seeds], "hops": hops}})
        assert set(ids(result)) == {mem[i] for i in reach}
        assert result["graph"]["reachable"] == len(reach)


def test_restrict_clip_is_reported(memory, small, monkeypatch):
    m = small
    monkeypatch.setattr("xerj_core.memory.graphrecall.REACHABLE_CAP", 2)
    result = memory.recall("g", {"query": "note", "graph": {"mode": "restrict", "seeds": [m["s"]], "hops": 1}})
    assert result["graph"]["reachable"] == 2 and result["graph"]["not_shown"]["reachable_clipped"] == 1
    # The closest are kept: the seed (1.0) and a (0.5 * 0.8 * 0.5 = 0.2) before b (0.5 * 0.2 * 1 = 0.1).
    assert set(ids(result)) == {m["s"], m["a"]}


def test_no_edges_index_proceeds_ungated_and_says_so(memory):
    mem = [memory.store("lone", {"text": f"note {i}"})[1]["_id"] for i in range(3)]
    for graph in ({"mode": "restrict", "seeds": [mem[0]]}, {"mode": "blend", "hops": 2}):
        result = memory.recall("lone", {"query": "note", "graph": graph})
        assert set(ids(result)) == set(mem)
        assert result["graph"]["not_shown"]["no_edges_index"] is True


# -- blend ---------------------------------------------------------------------------------------

def test_blend_proximity_equals_a_hand_computation(memory, small):
    m = small
    body = {"query": "note", "k": 10}
    base = memory.recall("g", body)["hits"]
    blended = memory.recall("g", {**body, "graph": {"mode": "blend", "seeds": [m["s"]], "hops": 2, "weight": 0.4}})
    # By hand, the best over paths of 0.5^hop * clamp(weight) * confidence, 1.0 for the seed:
    proximity = {
        m["s"]: 1.0,
        m["a"]: 0.5 * 0.8 * 0.5,  # hop 1, s-a
        m["b"]: 0.5 * 0.2 * 1.0,  # hop 1, s-b
        m["c"]: max(0.25 * 0.6 * 0.9, 0.25 * 1.0 * 1.0),  # hop 2 by two paths: s-a-c and s-b-c; the best wins
        m["d"]: 0.0,
        m["e"]: 0.0,
    }
    assert proximity[m["c"]] == 0.25
    scores = np.array([h["_score"] for h in base])
    norm = (scores - scores.min()) / (scores.max() - scores.min())
    expected = {h["_id"]: 0.6 * n + 0.4 * proximity[h["_id"]] for h, n in zip(base, norm)}
    assert {h["_id"]: pytest.approx(h["graph_proximity"]) for h in blended["hits"]} == proximity
    assert {h["_id"]: pytest.approx(h["_score"]) for h in blended["hits"]} == expected
    scored = [h["_score"] for h in blended["hits"]]
    assert scored == sorted(scored, reverse=True)
    assert blended["graph"]["mode"] == "blend" and blended["graph"]["seeds"] == [m["s"]]
    assert blended["graph"]["reachable"] == 4


def test_blend_seeds_default_to_the_top_five_base_hits(memory, small):
    m = small
    base = ids(memory.recall("g", {"query": "note"}))
    blended = memory.recall("g", {"query": "note", "graph": {"mode": "blend"}})
    assert blended["graph"]["seeds"] == base[:5] and blended["graph"]["hops"] == 1
    for hit in blended["hits"]:
        if hit["_id"] in base[:5]:
            assert hit["graph_proximity"] == 1.0


def test_blend_weight_default_and_clamp(memory, small):
    m = small
    base = memory.recall("g", {"query": "note"})["hits"]
    scores = np.array([h["_score"] for h in base])
    norm = dict(zip([h["_id"] for h in base], (scores - scores.min()) / (scores.max() - scores.min())))
    default = memory.recall("g", {"query": "note", "graph": {"mode": "blend", "seeds": [m["s"]]}})
    for hit in default["hits"]:
        assert hit["_score"] == pytest.approx(0.7 * norm[hit["_id"]] + 0.3 * hit["graph_proximity"])
    clamped = memory.recall("g", {"query": "note", "graph": {"mode": "blend", "seeds": [m["s"]], "weight": 7}})
    for hit in clamped["hits"]:
        assert hit["_score"] == pytest.approx(hit["graph_proximity"])
    assert ids(clamped)[0] == m["s"]


def test_blend_pulls_a_linked_memory_up_and_keeps_the_candidate_set(memory, small):
    m = small
    plain = ids(memory.recall("g", {"query": "note", "k": 3}))
    assert m["c"] not in plain  # "e" says note three times, "s" is short
    pulled = memory.recall("g", {"query": "note", "k": 3,
                                 "graph": {"mode": "blend", "seeds": [m["b"]], "hops": 1, "weight": 0.9}})
    assert {h["_id"]: pytest.approx(h["graph_proximity"]) for h in pulled["hits"]}[m["c"]] == 0.5
    assert m["c"] in ids(pulled) and m["b"] in ids(pulled)
    # Blend re-ranks; it never adds a memory the query did not match.
    unmatched = memory.recall("g", {"query": "apples", "graph": {"mode": "blend", "seeds": [m["s"]], "weight": 1}})
    assert ids(unmatched) == [m["a"]]


def test_blend_composes_with_recency(memory, small):
    m = small
    result = memory.recall("g", {"query": "note", "recency_weight": 0.5,
                                 "graph": {"mode": "blend", "seeds": [m["s"]], "weight": 0.3}})
    assert {h["_id"] for h in result["hits"]} == set(m.values())
    assert all(0.0 <= h["graph_proximity"] <= 1.0 for h in result["hits"])


def test_blend_proximity_does_not_depend_on_an_edges_stored_direction(memory, engine):
    # s-a (0.8, 0.5) and s-b (0.2, 1) put a and b at hop 1; the a-b edge gives each a 2-hop path worth
    # 0.25 * 1 * 1, better than its own 1-hop edge. Max over paths says both are 0.25, whichever way a-b points.
    found = []
    for ns, (src, dst) in (("fwd", ("a", "b")), ("rev", ("b", "a"))):
        mem = {key: memory.store(ns, {"text": f"note {key}"})[1]["_id"] for key in "sab"}
        link(engine, ns, mem["s"], mem["a"], weight=0.8, confidence=0.5)
        link(engine, ns, mem["s"], mem["b"], weight=0.2)
        link(engine, ns, mem[src], mem[dst])
        result = memory.recall(ns, {"query": "note", "graph": {"mode": "blend", "seeds": [mem["s"]], "hops": 2}})
        by_key = {key: mid for key, mid in mem.items()}
        prox = {h["_id"]: h["graph_proximity"] for h in result["hits"]}
        found.append({key: pytest.approx(prox[by_key[key]]) for key in "sab"})
    assert found[0] == found[1] == {"s": 1.0, "a": 0.25, "b": 0.25}
