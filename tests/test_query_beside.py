"""A hybrid's kNN scan on a worker thread beside its other legs: the same hits as one after the other."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from xerj_core.query import beside as beside_module
from xerj_core.query.beside import beside
from xerj_core.query.knn import KnnPlan
from xerj_core.query.service import SearchService
from xerj_core.store import BulkOp, Store

DIMS = 24
WORDS = ["river", "stone", "lamp", "orchard", "signal", "harbor", "meadow", "copper", "lantern", "tide"]


@pytest.fixture
def threads_seen(monkeypatch):
    """The names of the threads every kNN scan ran on."""
    seen: list[str] = []
    original = KnnPlan.run

    def run(self):
        seen.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(KnnPlan, "run", run)
    return seen


def _threaded(monkeypatch, on: bool) -> None:
    monkeypatch.setattr(beside_module, "WORTH_FLOATS", 0 if on else 1 << 62)


def test_beside_runs_the_background_on_a_worker_when_worth_it(monkeypatch):
    monkeypatch.setattr(beside_module, "workers", lambda: 2)
    names = beside(lambda: threading.current_thread().name, lambda: threading.current_thread().name, floats=1 << 30)
    assert names[0].startswith("xerj-scan") and names[1] == threading.current_thread().name
    small = beside(lambda: threading.current_thread().name, lambda: 1, floats=10)
    assert small == (threading.current_thread().name, 1)


def test_beside_waits_for_the_scan_when_the_foreground_raises(monkeypatch):
    monkeypatch.setattr(beside_module, "workers", lambda: 2)
    finished = threading.Event()

    def slow():
        finished.wait(0.2)
        finished.set()
        return 1

    def fail():
        raise ValueError("foreground")

    with pytest.raises(ValueError, match="foreground"):
        beside(slow, fail, floats=1 << 30)
    assert finished.is_set()  # the snapshot was not let go while the scan still read it

    def broken():
        raise KeyError("background")

    with pytest.raises(KeyError):
        beside(broken, lambda: 1, floats=1 << 30)


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(4)
    with Store(tmp_path / "data", tail_rows=64) as s:
        s.create_index("h", {"properties": {"text": {"type": "text"}, "kind": {"type": "keyword"},
                                            "vec": {"type": "dense_vector", "dims": DIMS}}})
        for lo in range(0, 600, 100):
            s.bulk([BulkOp("index", "h", str(i), {
                "text": " ".join(rng.choice(WORDS, int(rng.integers(3, 9)))), "kind": "ab"[i % 2],
                "vec": rng.standard_normal(DIMS).astype(np.float32).tolist()}) for i in range(lo, lo + 100)])
        s.put("h", {"text": "river lamp tide", "kind": "a", "vec": [1.0] * DIMS}, "tail")  # a row in the tail
        yield s


def test_hybrid_hits_are_the_same_threaded_or_not(store, monkeypatch, threads_seen):
    monkeypatch.setattr(beside_module, "workers", lambda: 2)
    search = SearchService(store)
    rng = np.random.default_rng(9)
    bodies = []
    for words, fusion in itertools.product((["river", "lamp"], ["copper", "tide", "stone"]), ("rrf", "linear")):
        vector = rng.standard_normal(DIMS).tolist()
        legs = [{"standard": {"query": {"match": {"text": " ".join(words)}}}},
                {"knn": {"field": "vec", "query_vector": vector, "k": 10, "num_candidates": 40}}]
        bodies.append({"retriever": {fusion: {"retrievers": legs, "rank_window_size": 40,
                                              "filter": {"term": {"kind": "a"}}}}, "size": 10})
        bodies.append({"query": {"hybrid": {"queries": [{"match": {"text": words[0]}},
                                                        {"knn": {"field": "vec", "query_vector": vector, "k": 5}}]}},
                       "size": 10})
    _threaded(monkeypatch, False)
    alone = [search.search("h", body) for body in bodies]
    assert threads_seen and not any(name.startswith("xerj-scan") for name in threads_seen)
    threads_seen.clear()
    _threaded(monkeypatch, True)
    together = [search.search("h", body) for body in bodies]
    assert len(threads_seen) == len(bodies) and all(name.startswith("xerj-scan") for name in threads_seen)
    for a, b in zip(alone, together):
        assert a["hits"]["total"] == b["hits"]["total"]
        assert [(h["_id"], h["_score"]) for h in a["hits"]["hits"]] == \
            [(h["_id"], h["_score"]) for h in b["hits"]["hits"]]
        assert a["hits"]["hits"]


def test_hybrid_recall_is_the_same_threaded_or_not(engine, monkeypatch, threads_seen):
    monkeypatch.setattr(beside_module, "workers", lambda: 2)
    memory = engine.memory
    texts = ["sourdough bread needs a lively starter", "the starter ferments flour and water",
             "trains to the coast leave every hour", "fermentation turns cabbage into sauerkraut",
             "the cat sleeps on the warm sofa", "a starter of rye and water, fed daily"]
    for text in texts:
        memory.store("notes", {"text": text})
    queries = ["starter fermentation", "coast trains", "warm bread"]
    results = {}
    for on in (False, True):
        _threaded(monkeypatch, on)
        threads_seen.clear()
        results[on] = [memory.recall("notes", {"query": q, "hybrid": True, "fusion": fusion})
                       for q in queries for fusion in ("rrf", "linear")]
        assert len(threads_seen) == 6 and all(name.startswith("xerj-scan") == on for name in threads_seen)
    for a, b in zip(results[False], results[True]):
        assert [(h["_id"], h["_score"]) for h in a["hits"]] == [(h["_id"], h["_score"]) for h in b["hits"]]
        assert a["hits"]
