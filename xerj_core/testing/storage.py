"""The storage backend contract: a backend answers every read exactly as the built-in LMDB store does.

Subclass :class:`AbstractStorageBackendTests` and override the ``store_url``
fixture to return the URL of a fresh, empty store of your backend (a data
directory path for LMDB). Each test runs the same writes on your backend and on
a reference LMDB store and compares the answers: documents and versions, BM25
hits and scores, kNN, hybrid, aggregations, ego sets and counters, overview,
time travel, rejections and review, memory recall, and a real corpus (the Foam
vault, when ``foam_corpus`` points at it) indexed by autoindex. Stores are opened
with a small tail, so sealing and merging segments is part of every test.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from xerj_core.embedding import LEXICAL_EMBEDDER
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import XerjError
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.plugins import get_plugin_manager
from xerj_core.store import BulkOp

TAIL_ROWS = 16
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000
WORDS = [f"w{i}" for i in range(60)] + ["brain", "memory", "graph", "note", "link", "store", "query"]
# Answer fields that say how long something took or when (wall clock) it was written, not what was found.
_VOLATILE = frozenset({"took", "elapsed_ms", "took_ms", "created_at", "recorded_at", "reviewed_at",
                       "expired_at", "stored_at"})
# Far enough ahead of the generated instants that "now" never decides an answer.
FUTURE = T0 + 4000 * DAY


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _difference(got: Any, want: Any, path: str = "") -> str:
    """Where two answers first differ, and how (for the assertion message)."""
    if type(got) is not type(want):
        return f"{path or 'top'}: {got!r:.200} != {want!r:.200}"
    if isinstance(got, dict):
        for key in [*got, *(k for k in want if k not in got)]:
            if got.get(key, _difference) != want.get(key, _difference):
                return _difference(got.get(key), want.get(key), f"{path}.{key}")
    elif isinstance(got, (list, tuple)):
        for at, (a, b) in enumerate(zip(got, want)):
            if a != b:
                return _difference(a, b, f"{path}[{at}]")
        if len(got) != len(want):
            return f"{path}: {len(got)} items != {len(want)}"
    return f"{path or 'top'}: {got!r:.200} != {want!r:.200}"


def _outcome(fn: Callable[[], Any]) -> Any:
    """What a call answered, or the refusal it raised (class, status and exact reason)."""
    try:
        return ("ok", _strip(fn()))
    except XerjError as exc:
        return ("refused", type(exc).__name__, exc.status, exc.reason)


def _corpus(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.choices(WORDS, weights=[1 / (1 + k) for k in range(len(WORDS))], k=rng.randint(3, 30))
        docs.append({"title": " ".join(words[:3]), "body": " ".join(words), "tag": f"t{rng.randint(0, 6)}",
                     "n": rng.randint(0, 1000), "score": round(rng.random() * 10, 3),
                     "vec": [round(rng.uniform(-1, 1), 4) for _ in range(8)], "day": T0 + rng.randint(0, 90) * DAY})
    return docs


MAPPING = {"properties": {"title": {"type": "text"}, "body": {"type": "text"}, "tag": {"type": "keyword"},
                          "n": {"type": "long"}, "score": {"type": "double"}, "day": {"type": "date"},
                          "vec": {"type": "dense_vector", "dims": 8}}}


class AbstractStorageBackendTests:
    """Every test writes the same data to the backend under test and to LMDB, and requires equal answers."""

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        """The URL (or data directory path) of a fresh, empty store of the backend under test."""
        raise NotImplementedError("override the store_url fixture")

    @pytest.fixture
    def foam_corpus(self) -> Path | None:
        """A folder of notes autoindex indexes into both stores (None skips the corpus test)."""
        return None

    @pytest.fixture
    def pair(self, store_url: str, tmp_path: Path) -> Iterator[tuple[Engine, Engine]]:
        """``(backend, reference)``: engines on the store under test and on a fresh LMDB data directory."""
        pm = get_plugin_manager(builtins_only=True)
        config = EngineConfig(tail_rows=TAIL_ROWS, store_url=store_url, embedder=LEXICAL_EMBEDDER)
        backend = Engine(tmp_path / "backend-local", pm, config=config)
        try:
            reference = Engine(tmp_path / "reference", pm, config=EngineConfig(tail_rows=TAIL_ROWS,
                                                                                 embedder=LEXICAL_EMBEDDER))
        except BaseException:
            backend.close()
            raise
        try:
            yield backend, reference
        finally:
            backend.close()
            reference.close()

    @staticmethod
    def same(pair: tuple[Engine, Engine], call: Callable[[Engine], Any]) -> Any:
        """Run ``call`` on both engines; their answers (or refusals) must be equal. Returns the answer."""
        got, want = (_outcome(lambda e=e: call(e)) for e in pair)
        assert got == want, f"the backend answered differently from LMDB at {_difference(got, want)}"
        return got

    @staticmethod
    def both(pair: tuple[Engine, Engine], call: Callable[[Engine], Any]) -> None:
        for engine in pair:
            call(engine)

    def load(self, pair: tuple[Engine, Engine], n: int = 300) -> list[dict[str, Any]]:
        docs = _corpus(n)

        def write(engine: Engine) -> None:
            engine.store.create_index("docs", MAPPING)
            # Several transactions, so tails seal and segments merge as they do in use.
            for start in range(0, n, 37):
                engine.store.bulk([BulkOp("index", "docs", f"d{i}", docs[i]) for i in range(start, min(n, start + 37))])
            for i in range(0, n, 11):  # overwrites and deletes leave dead rows behind
                engine.store.put("docs", {**docs[i], "body": docs[i]["body"] + " brain"}, f"d{i}")
            for i in range(5, n, 17):
                engine.store.delete("docs", f"d{i}")

        self.both(pair, write)
        return docs

    # -- documents ---------------------------------------------------------------------------

    def test_documents_versions_and_refusals(self, pair):
        def run(engine: Engine) -> Any:
            store, out = engine.store, []
            out.append(store.put("a", {"x": 1, "y": "two"}, "1"))
            out.append(store.put("a", {"x": 2, "nested": {"k": [1, 2, None]}, "s": "é 2.50"}, "1"))
            out.append(_outcome(lambda: store.put("a", {"x": 3}, "1", op_type="create")))
            out.append(store.update("a", "1", {"nested": {"k2": True}}))
            out.append(store.update("a", "1", {"nested": {"k2": True}}))  # a no-op
            out.append(_outcome(lambda: store.update("a", "nope", {"x": 1})))
            out.append(store.delete("a", "1"))
            out.append(store.delete("a", "1"))
            out.append(store.put("a", {"z": "\u0000 and \U0001f600", "k": {"b": 1, "a": 2}}, "id with \u0000 nul"))
            out.append(store.get("a", "id with \u0000 nul"))
            items = store.bulk([BulkOp("create", "a", "b1", {"v": 1}), BulkOp("create", "a", "b1", {"v": 2}),
                                BulkOp("update", "a", "missing", {"doc": {"v": 3}}), BulkOp("delete", "a", "b1"),
                                BulkOp("index", "b", "c1", {"v": [1, 2]})])
            out.append([(i.result, None if i.error is None else (type(i.error).__name__, i.error.reason))
                        for i in items])
            out.append(_outcome(lambda: store.put("a", {"x": "not a number"}, "t")))
            out.append(_outcome(lambda: store.get("missing-index", "1")))
            out.append((store.count("a"), store.count("b"), sorted(store.index_names())))
            out.append(store.get_mapping("a"))
            return out

        got = self.same(pair, run)
        assert got[0] == "ok" and got[1][9] == ({"z": "\u0000 and \U0001f600", "k": {"b": 1, "a": 2}}, 1)
        # _source comes back as it was written, keys in their order
        assert list(pair[0].store.get("a", "id with \u0000 nul")[0]["k"]) == ["b", "a"]

    def test_writes_are_seen_by_a_second_store_on_the_same_target(self, pair, store_url, tmp_path):
        backend = pair[0]
        other = Engine(tmp_path / "other-local", get_plugin_manager(builtins_only=True),
                       config=EngineConfig(tail_rows=TAIL_ROWS, store_url=store_url))
        try:
            backend.store.put("shared", {"v": 1}, "x")
            assert other.store.get("shared", "x") == ({"v": 1}, 1)
            other.store.put("shared", {"v": 2}, "x")
            assert backend.store.get("shared", "x") == ({"v": 2}, 2)
            assert backend.search.search("shared", {"query": {"term": {"v": 2}}})["hits"]["total"]["value"] == 1
        finally:
            other.close()

    # -- search --------------------------------------------------------------------------------

    QUERIES = [
        {"query": {"match": {"body": "brain memory"}}, "size": 10},
        {"query": {"match": {"body": "w3 w17 w40"}}, "size": 10},
        {"query": {"multi_match": {"query": "graph note", "fields": ["title^2", "body"]}}, "size": 10},
        {"query": {"bool": {"must": [{"match": {"body": "w1"}}], "filter": [{"term": {"tag": "t3"}}]}}, "size": 20},
        {"query": {"range": {"n": {"gte": 100, "lt": 400}}}, "sort": [{"n": "desc"}], "size": 15},
        {"query": {"match_all": {}}, "sort": [{"day": "asc"}, {"n": "asc"}], "size": 10, "from": 5},
    ]

    @pytest.mark.parametrize("query", range(len(QUERIES)))
    def test_bm25_top_k_and_scores(self, pair, query):
        self.load(pair)
        got = self.same(pair, lambda e: e.search.search("docs", self.QUERIES[query]))
        assert got[0] == "ok" and got[1]["hits"]["hits"], "the query must find something to compare"

    def test_knn_and_hybrid(self, pair):
        docs = self.load(pair)
        vector = docs[3]["vec"]
        knn = {"field": "vec", "query_vector": vector, "k": 10, "num_candidates": 50}
        got = self.same(pair, lambda e: e.search.search("docs", {"knn": knn, "size": 10}))
        assert got[1]["hits"]["hits"][0]["_id"] == "d3"
        self.same(pair, lambda e: e.search.search("docs", {"knn": {**knn, "filter": {"term": {"tag": "t1"}}}}))
        self.same(pair, lambda e: e.search.search("docs", {"knn": knn, "query": {"match": {"body": "brain"}}}))
        self.same(pair, lambda e: e.search.search("docs", {"query": {"hybrid": {"queries": [
            {"match": {"body": "memory w2"}}, {"knn": knn}]}}, "size": 10}))

    def test_hybrid_legs_side_by_side(self, pair, monkeypatch):
        """With a second core taken as idle, a hybrid's lexical legs run on a worker thread over the same snapshot
        (see xerj_core.query.sidebyside): the backend still answers as LMDB does, and as in turn."""
        from xerj_core.query import sidebyside

        docs = self.load(pair)
        knn = {"field": "vec", "query_vector": docs[7]["vec"], "k": 10, "num_candidates": 50}
        body = {"retriever": {"rrf": {"retrievers": [{"standard": {"query": {"match": {"body": "memory w2 w9"}}}},
                                                     {"knn": knn}], "filter": {"term": {"tag": "t1"}}}}, "size": 10}
        monkeypatch.setattr(sidebyside, "idle_core", lambda: False)
        in_turn = self.same(pair, lambda e: e.search.search("docs", body))
        monkeypatch.setattr(sidebyside, "idle_core", lambda: True)
        before = sidebyside.runs["side_by_side"]
        assert in_turn[0] == "ok" and in_turn[1]["hits"]["hits"]
        assert self.same(pair, lambda e: e.search.search("docs", body)) == in_turn
        assert sidebyside.runs["side_by_side"] == before + 2

    def test_aggregations(self, pair):
        self.load(pair)
        body = {"size": 0, "query": {"match": {"body": "w5"}}, "aggs": {
            "tags": {"terms": {"field": "tag"}, "aggs": {"avg_n": {"avg": {"field": "n"}}}},
            "n_stats": {"stats": {"field": "n"}},
            "score": {"extended_stats": {"field": "score"}}, "pct": {"percentiles": {"field": "n"}},
            "distinct": {"cardinality": {"field": "tag"}},
            "days": {"date_histogram": {"field": "day", "calendar_interval": "month"}}}}
        got = self.same(pair, lambda e: e.search.search("docs", body))
        assert got[1]["aggregations"]["tags"]["buckets"]
        self.same(pair, lambda e: e.search.count("docs", {"query": {"term": {"tag": "t2"}}}))

    def test_compaction_keeps_answers(self, pair):
        self.load(pair)
        self.both(pair, lambda e: e.store.forcemerge("docs"))
        self.same(pair, lambda e: e.search.search("docs", self.QUERIES[0]))
        self.same(pair, lambda e: [e.store.get("docs", f"d{i}") for i in range(0, 40)])

    # -- graph ---------------------------------------------------------------------------------

    def graph(self, pair: tuple[Engine, Engine]) -> list[str]:
        rng = random.Random(11)
        nodes = [f"n{i}.md" for i in range(40)]

        def write(engine: Engine) -> None:
            for i in range(160):
                src, dst = rng.choice(nodes), rng.choice(nodes)
                if src != dst:
                    engine.graph.link("g", {"src": src, "dst": dst, "type": rng.choice(["cites", "relates_to"]),
                                            "valid_at": T0 + rng.randint(0, 30) * DAY,
                                            "weight": round(rng.random(), 3), "confidence": round(rng.random(), 3)})
            drafts = [EdgeDraft(nodes[i], nodes[(i * 7 + 3) % 40], "wikilink", "wikilink@2", 1.0, 0.5,
                                T0 + i * DAY, Evidence(f"see [[{nodes[(i * 7 + 3) % 40]}]]", nodes[i], 10))
                      for i in range(40)]
            engine.graph.write_edges("g", drafts, created_at=T0)
            engine.graph.invalidate_edges("g", src_file=nodes[1], at=T0 + 20 * DAY)

        for engine in pair:
            rng.seed(11)
            write(engine)
        return nodes

    def test_ego_sets_and_counters(self, pair):
        nodes = self.graph(pair)
        for node in nodes[:12]:
            for hops in (1, 2):
                query = {"node": node, "hops": hops, "as_of": T0 + 40 * DAY, "limit": 50}
                got = self.same(pair, lambda e: e.graph.ego("g", query))
                assert got[0] == "ok"
        self.same(pair, lambda e: e.graph.reachable("g", nodes[:3], hops=2, as_of=T0 + 40 * DAY))

    def test_overview_and_time_travel(self, pair):
        self.graph(pair)
        for as_of in (T0 - 1, T0 + 5 * DAY, T0 + 25 * DAY, FUTURE):
            self.same(pair, lambda e: e.graph.overview("g", {"as_of": as_of}))
            self.same(pair, lambda e: e.graph.ego("g", {"node": "n1.md", "hops": 2, "as_of": as_of,
                                                        "include_expired": "true"}))

    def test_rejections_and_review(self, pair):
        self.graph(pair)
        queue = self.same(pair, lambda e: e.graph.review_queue("g", {"size": 10}))
        ids = [item["edge_id"] for item in queue[1]["items"]][:4] if queue[0] == "ok" else []
        assert ids, "the review queue must hold detected edges"
        self.same(pair, lambda e: e.graph.review("g", {"approve": ids[:2], "reject": ids[2:]}, by="ana"))
        self.same(pair, lambda e: e.graph.review("g", {"approve": ["not-an-edge"]}, by="ana"))
        self.same(pair, lambda e: e.graph.review_queue("g", {"size": 10}))
        self.same(pair, lambda e: e.graph.overview("g", {"as_of": FUTURE}))
        self.same(pair, lambda e: e.graph.ego("g", {"node": "n0.md", "hops": 2, "as_of": FUTURE}))
        self.same(pair, lambda e: e.graph.link("g", {"src": "", "dst": "x", "type": "t", "valid_at": T0}))

    # -- memory --------------------------------------------------------------------------------

    def test_memory_store_and_recall(self, pair):
        texts = ["the starter needs feeding twice a day", "the meeting moved to thursday",
                 "sourdough starter smells of vinegar", "thursday is the bakery's day off", "feed the cat"]

        def write(engine: Engine) -> None:
            engine.memory.create("agent", {"embedder": LEXICAL_EMBEDDER})
            for text in texts:
                engine.memory.store("agent", {"text": text, "metadata": {"len": len(text)}})

        self.both(pair, write)
        got = self.same(pair, lambda e: _without_ids(e.memory.recall("agent", {"query": "starter feeding",
                                                                               "k": 3})))
        assert got[0] == "ok"

    # -- a real corpus -------------------------------------------------------------------------

    def test_foam_corpus_through_autoindex(self, pair, foam_corpus):
        if foam_corpus is None or not Path(foam_corpus).is_dir():
            pytest.skip("no corpus folder")
        from xerj_core.autoindex.commands import _run_once

        self.both(pair, lambda e: _run_once(e, str(foam_corpus), "foam", True, True, quiet=True))
        _, overview = pair[1].graph.overview("foam", {"top": 5, "as_of": FUTURE})
        hubs = [hub["key"] for hub in overview["hubs"]["in"]][:5]
        assert hubs
        self.same(pair, lambda e: e.graph.overview("foam", {"top": 10, "as_of": FUTURE}))
        for hub in hubs:
            self.same(pair, lambda e: e.graph.ego("foam", {"node": hub, "hops": 2, "limit": 100, "as_of": FUTURE}))
            # the note and its sections, found on the src_file column
            self.same(pair, lambda e: e.graph.ego("foam", {"node": hub, "hops": 1, "limit": 1000, "as_of": FUTURE,
                                                           "sections": True}))
        self.same(pair, lambda e: e.search.search(".xerj-memory-foam", {"query": {"match": {"text": "graph note"}},
                                                                        "size": 10}))


def _without_ids(answer: dict[str, Any]) -> dict[str, Any]:
    """A recall answer without the memory ids (fresh random ids on each store) and timestamps."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in ("id", "memory_id", "created_at", "_id")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(answer)
