"""Both clocks: every superseded edge version kept with [recorded_at, superseded_at), and ego, overview and
reachable at ``known_at`` beside ``as_of``, checked against a brute-force oracle over generated histories."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xerj_core.graph.review as review_module
import xerj_core.graph.writing as writing_module
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import GraphError
from xerj_core.graph.history import history_index

EDGES = ".xerj-memory-b-edges"
NODES = ("a", "b", "c")
VALID = (10, 20, 30)
INSTANTS = (5, 15, 25, 35, 10**9)


@pytest.fixture
def clock(monkeypatch):
    """System time under the test's control: each write happens one second after the last."""
    ticks = itertools.count(1000, 1000)
    now = {"t": 0}

    def tick():
        now["t"] = next(ticks)
        return now["t"]

    monkeypatch.setattr(writing_module, "now_ms", tick)
    monkeypatch.setattr(review_module, "now_ms", tick)
    return now


def ego_ids(engine, **query):
    return sorted((e["edge_id"], e.get("invalid_at")) for e in engine.graph.ego("b", {"node": "a", **query})["edges"])


def test_unlink_then_relink_at_the_same_valid_at_keeps_the_retired_version(engine, clock):
    eid = engine.graph.link("b", {"src": "a", "dst": "b", "type": "t", "valid_at": 10})[1]["edge_id"]
    linked = clock["t"]
    engine.graph.unlink("b", eid, invalid_at=20)
    unlinked = clock["t"]
    engine.graph.link("b", {"src": "a", "dst": "b", "type": "t", "valid_at": 10})
    relinked = clock["t"]
    # as it stands now: live again at every instant after valid_at
    assert ego_ids(engine, as_of="25") == [(eid, None)]
    for known_at in (unlinked, unlinked + 1, relinked - 1):
        # between the unlink and the re-link the brain believed it retired at 20
        assert ego_ids(engine, as_of="25", known_at=str(known_at)) == []
        assert ego_ids(engine, as_of="15", known_at=str(known_at)) == [(eid, 20)]
        assert ego_ids(engine, as_of="5", known_at=str(known_at)) == []
        _, overview = engine.graph.overview("b", {"as_of": "25", "known_at": str(known_at)})
        assert overview["edges"] == {"total": 1, "live": 0, "invalidated": 1} and overview["known_at"] == known_at
        assert overview["trust"]["rejected"] == 1
    for known_at in (linked, relinked, relinked + 10**6):
        assert ego_ids(engine, as_of="25", known_at=str(known_at)) == [(eid, None)]
    assert ego_ids(engine, as_of="25", known_at=str(linked - 1)) == []
    versions = _docs(engine, history_index("b")).values()
    assert sorted((v["recorded_at"], v["superseded_at"]) for v in versions) == [
        (linked, unlinked), (unlinked, relinked)]


def test_a_review_decision_is_a_new_version(engine, clock):
    eid = engine.graph.link("b", {"src": "a", "dst": "b", "type": "t", "valid_at": 10}, machine=True)[1]["edge_id"]
    detected = clock["t"]
    engine.graph.review("b", {"approve": [eid]}, by="ana")
    before = engine.graph.ego("b", {"node": "a", "known_at": str(detected)})["edges"][0]
    after = engine.graph.ego("b", {"node": "a"})["edges"][0]
    assert (before["trust"], after["trust"]) == ("detected", "approved")
    assert "reviewed_by" not in before and after["reviewed_by"] == "ana"
    reach, _ = engine.graph.reachable("b", ["a"], hops=1, known_at=detected)
    assert reach["b"]["proximity"] == pytest.approx(0.5)


def test_bad_known_at_is_refused(engine):
    engine.graph.link("b", {"src": "a", "dst": "b", "type": "t"})
    for call in (lambda: engine.graph.ego("b", {"node": "a", "known_at": "yesterday-ish"}),
                 lambda: engine.graph.overview("b", {"known_at": "x"})):
        with pytest.raises(GraphError, match=r"\[known_at\]"):
            call()


# -- the oracle ---------------------------------------------------------------------------------

op = st.one_of(
    st.tuples(st.just("link"), st.sampled_from(NODES[1:]), st.sampled_from(VALID)),
    st.tuples(st.just("unlink"), st.integers(0, 5), st.sampled_from(VALID + (None,))),
    st.tuples(st.just("detect"), st.sampled_from(NODES[1:]), st.sampled_from(VALID)),
    st.tuples(st.just("approve"), st.integers(0, 5), st.none()),
    st.tuples(st.just("reject"), st.integers(0, 5), st.none()),
)


def _apply(engine, step, ids):
    kind, x, y = step
    if kind in ("link", "detect"):
        ids.append(engine.graph.link("b", {"src": "a", "dst": x, "type": "t", "valid_at": y},
                                     machine=kind == "detect")[1]["edge_id"])
    elif ids:
        eid = ids[x % len(ids)]
        if kind == "unlink":
            engine.graph.unlink("b", eid, invalid_at=None if y is None else y + 1)
        else:
            engine.graph.review("b", {"approve" if kind == "approve" else "reject": [eid]}, by="p")


def _docs(engine, index):
    with engine.store.reader(index) as reader:
        return {doc_id: source for _row, doc_id, source, _v in reader.documents(reader.live_rows().tolist())}


def _current(engine):
    if not engine.store.exists(EDGES):
        return {}
    return {k: v for k, v in _docs(engine, EDGES).items() if "src" in v}


def test_overview_at_known_at_has_the_timeline_of_the_edges_believed_then(engine, monkeypatch):
    day = 86_400_000
    now = {"t": 0}
    monkeypatch.setattr(writing_module, "now_ms", lambda: now["t"])
    monkeypatch.setattr(review_module, "now_ms", lambda: now["t"])
    first_day = []
    for t, dst in ((day + 5, "b"), (day + 9, "c"), (3 * day + 1, "d")):
        now["t"] = t
        eid = engine.graph.link("b", {"src": "a", "dst": dst, "type": "t", "valid_at": 10})[1]["edge_id"]
        if t < 2 * day:
            first_day.append(eid)
    now["t"] = 3 * day + 2
    engine.graph.unlink("b", first_day[0], invalid_at=20)

    def timeline(**query):
        _, overview = engine.graph.overview("b", {"as_of": "25", **query})
        return [(b["key"], b["doc_count"]) for b in overview["created_over_time"]], overview["not_shown"]

    # known now: the same buckets either way, the retired edge still on the timeline
    assert timeline() == timeline(known_at=str(10 * day))
    assert timeline()[0] == [(day, 2), (2 * day, 0), (3 * day, 1)]
    # before the third edge was recorded, the timeline ends on the first day
    assert timeline(known_at=str(2 * day))[0] == [(day, 2)]
    assert timeline(known_at=str(day + 5))[0] == [(day, 1)]
    assert timeline(known_at=str(day))[0] == []
    # hourly buckets over the same edges
    _, hourly = engine.graph.overview("b", {"histogram_interval": "hour", "known_at": str(2 * day)})
    assert [(b["key"], b["doc_count"]) for b in hourly["created_over_time"]] == [(day, 2)]
    assert "created_over_time_empty_buckets_omitted" not in timeline(known_at=str(10 * day))[1]


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(op, min_size=1, max_size=12), data=st.data())
def test_known_at_and_as_of_match_a_brute_force_oracle(steps, data):
    ticks = itertools.count(1000, 1000)
    times: list[int] = []

    def tick():
        times.append(next(ticks))
        return times[-1]

    saved = writing_module.now_ms, review_module.now_ms
    writing_module.now_ms = review_module.now_ms = tick
    try:
        with tempfile.TemporaryDirectory() as tmp:
            with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=4)) as engine:
                ids: list[str] = []
                snapshots: list[tuple[int, dict]] = []  # (system time after the step, every current doc)
                for step in steps:
                    _apply(engine, step, ids)
                    snapshots.append((times[-1] if times else 0, _current(engine)))
                if not engine.store.exists(EDGES):
                    return
                for _ in range(6):
                    known_at = data.draw(st.sampled_from([t + d for t, _ in snapshots for d in (-1, 0, 1)]))
                    as_of = data.draw(st.sampled_from(INSTANTS))
                    believed = {}
                    for at, state in snapshots:
                        if at <= known_at:
                            believed = state
                    expected = sorted((eid, doc.get("invalid_at")) for eid, doc in believed.items()
                                      if doc["valid_at"] <= as_of and (doc.get("invalid_at") is None
                                                                       or doc["invalid_at"] > as_of))
                    assert ego_ids(engine, as_of=str(as_of), known_at=str(known_at)) == expected
                    _, overview = engine.graph.overview("b", {"as_of": str(as_of), "known_at": str(known_at)})
                    assert overview["edges"]["live"] == len(expected)
                    assert overview["edges"]["total"] == len(believed)
                    assert sum(b["doc_count"] for b in overview["created_over_time"]) == len(believed)
    finally:
        writing_module.now_ms, review_module.now_ms = saved


def test_review_queue_and_recall_at_known_at(engine, clock):
    eid = engine.graph.link("agent", {"src": "m1", "dst": "m2", "type": "t", "valid_at": 10},
                            machine=True)[1]["edge_id"]
    detected = clock["t"]
    engine.graph.review("agent", {"reject": [eid]}, by="ana")
    assert engine.graph.review_queue("agent", {})["total"] == 0
    then = engine.graph.review_queue("agent", {"known_at": str(detected)})
    assert then["known_at"] == detected and [i["edge_id"] for i in then["items"]] == [eid]
    # recall: the graph walked as the brain stood then, and memories as they stood then
    memory = engine.memory
    memory.clock = lambda: detected - 500
    first = memory.store("agent", {"text": "sourdough starter"})[1]["_id"]
    memory.clock = lambda: detected + 10**6
    later = memory.store("agent", {"text": "sourdough loaf"})[1]["_id"]
    now = memory.recall("agent", {"query": "sourdough"})
    assert {h["_id"] for h in now["hits"]} == {first, later}
    then = memory.recall("agent", {"query": "sourdough", "known_at": detected})
    assert [h["_id"] for h in then["hits"]] == [first] and then["known_at"] == detected
    walked = memory.recall("agent", {"query": "sourdough", "known_at": detected,
                                      "graph": {"mode": "restrict", "seeds": ["m1"], "as_of": 20}})
    assert walked["graph"]["reachable"] == 2  # m1 and m2: the edge was not yet rejected then
    now_walked = memory.recall("agent", {"query": "sourdough", "graph": {"mode": "restrict", "seeds": ["m1"],
                                                                         "as_of": 20}})
    assert now_walked["graph"]["reachable"] == 1


def test_memory_reviews_keep_every_state_and_recall_reads_the_one_known_then(engine):
    memory = engine.memory
    times = iter(range(1000, 100000, 1000))
    memory.clock = lambda: next(times)
    kept = memory.store("agent", {"text": "rye starter feeding schedule"})[1]["_id"]
    doomed = memory.store("agent", {"text": "rye flour is gluten free"})[1]["_id"]  # 2000
    memory.review("agent", {"approve": [kept]}, by="ana")  # 3000
    memory.review("agent", {"approve": [kept], "note": "checked twice"}, by="bo")  # 4000
    memory.review("agent", {"approve": [doomed]}, by="ana")  # 5000
    memory.review("agent", {"reject": [doomed], "note": "wrong"}, by="bo")  # 6000

    def seen(known_at, trust=None):
        body = {"query": "rye", "known_at": known_at, **({"trust": trust} if trust else {})}
        return {h["_id"]: (h["trust"], h.get("reviewed_by"), "forgotten_at" in h)
                for h in memory.recall("agent", body)["hits"]}

    assert seen(2500) == {kept: ("asserted", None, False), doomed: ("asserted", None, False)}
    assert seen(3500) == {kept: ("approved", "ana", False), doomed: ("asserted", None, False)}
    assert seen(4000) == {kept: ("approved", "bo", False), doomed: ("asserted", None, False)}
    assert seen(5500) == {kept: ("approved", "bo", False), doomed: ("approved", "ana", False)}
    assert seen(6000) == {kept: ("approved", "bo", False)}  # rejected is forgotten from then on
    # the trust filter reads each memory's state at the instant, not today's
    assert set(seen(3500, ["asserted"])) == {doomed}
    assert set(seen(5500, ["approved"])) == {kept, doomed}
    assert set(seen(2500, ["approved"])) == set()
    then = memory.recall("agent", {"query": "rye", "known_at": 5500, "trust": ["approved"]})
    assert then["trust"]["approved"] == 2
    # every state replaced is kept with the instant it was replaced, and listed with the memory
    listed = {m["_id"]: m for m in memory.list("agent", {"include_forgotten": "true"})["memories"]}
    assert [(e["trust"], e.get("reviewed_by"), e["superseded_at"]) for e in listed[doomed]["review_history"]] == [
        ("asserted", None, 5000), ("approved", "ana", 6000)]
    assert (listed[doomed]["trust"], listed[doomed]["reviewed_by"]) == ("rejected", "bo")
    assert [(e.get("reviewed_by"), e.get("review_note")) for e in listed[kept]["review_history"]] == [
        (None, None), ("ana", None)]
    assert listed[kept]["reviewed_by"] == "bo"
