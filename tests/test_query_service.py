"""SearchService: ES response shapes, paging, sorting, _source, totals, counts, several indices, fusion, bad input."""

from __future__ import annotations

import gc
import os
import signal
import threading

import numpy as np
import pytest

from xerj_core.errors import IllegalArgument, IndexNotFound, ParsingError
from xerj_core.query import fusion
from xerj_core.query.ranking import Ranked, top_k
from xerj_core.query.service import SearchService
from xerj_core.query.values import date_value, format_date
from xerj_core.store import BulkOp, Store

DAY = 86_400_000
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z

BOOKS = [
    {"title": "Dune", "text": "desert planet spice and sand worms", "genre": "scifi", "year": 1965, "rating": 4.5,
     "published": "1965-08-01T00:00:00Z", "vec": [1.0, 0.0, 0.0], "meta": {"pages": 412, "lang": "en"}},
    {"title": "Solaris", "text": "an ocean planet that thinks", "genre": "scifi", "year": 1961, "rating": 4.0,
     "published": "1961-06-01T00:00:00Z", "vec": [0.9, 0.1, 0.0], "meta": {"pages": 204, "lang": "pl"}},
    {"title": "Emma", "text": "a comedy of manners in a village", "genre": "classic", "year": 1815, "rating": 3.5,
     "published": "1815-12-23T00:00:00Z", "vec": [0.0, 1.0, 0.0], "meta": {"pages": 474, "lang": "en"}},
    {"title": "Ubik", "text": "reality decays, spray cans of ubik", "genre": ["scifi", "classic"], "year": 1969,
     "published": "1969-05-01T00:00:00Z", "vec": [0.7, 0.0, 0.7]},
    {"title": "Walden", "text": "a cabin by the pond, living simply", "genre": "essay", "rating": 4.2,
     "vec": [0.0, 0.2, 0.9]},
]
MAPPING = {"properties": {"genre": {"type": "keyword"}, "vec": {"type": "dense_vector", "dims": 3}}}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data", tail_rows=2) as s:
        s.create_index("books", MAPPING)
        for i, doc in enumerate(BOOKS):
            s.put("books", doc, f"b{i}")
        yield s


@pytest.fixture
def search(store):
    return SearchService(store)


def ids(response):
    return [h["_id"] for h in response["hits"]["hits"]]


def test_response_shape(search):
    response = search.search("books", {"query": {"match": {"text": "planet"}}})
    assert set(response) == {"took", "timed_out", "_shards", "hits"}
    assert response["timed_out"] is False
    assert response["_shards"] == {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
    assert response["hits"]["total"] == {"value": 2, "relation": "eq"}
    hit = response["hits"]["hits"][0]
    assert list(hit) == ["_index", "_id", "_score", "_source"]
    assert hit["_index"] == "books" and hit["_source"]["title"] in ("Dune", "Solaris")
    assert response["hits"]["max_score"] == hit["_score"]


def test_match_all_paging_and_window(search):
    every = ids(search.search("books", {"size": 10}))
    assert every == ["b0", "b1", "b2", "b3", "b4"]  # equal scores: append order
    assert ids(search.search("books", {"from": 2, "size": 2})) == ["b2", "b3"]
    assert ids(search.search("books", None, params={"from": "4", "size": "5"})) == ["b4"]
    with pytest.raises(IllegalArgument, match="Result window is too large"):
        search.search("books", {"from": 9_999, "size": 2})
    with pytest.raises(IllegalArgument):
        search.search("books", {"size": -1})


def test_sort_on_fields_and_score(search):
    response = search.search("books", {"sort": [{"year": "desc"}]})
    assert ids(response) == ["b3", "b0", "b1", "b2", "b4"]  # Walden has no year: last
    assert [h["sort"] for h in response["hits"]["hits"]] == [[1969], [1965], [1961], [1815], [None]]
    assert response["hits"]["max_score"] is None and response["hits"]["hits"][0]["_score"] is None
    first = search.search("books", {"sort": [{"year": {"order": "asc", "missing": "_first"}}]})
    assert ids(first)[0] == "b4"
    by_title = search.search("books", {"sort": ["title.keyword"]})
    assert [h["sort"][0] for h in by_title["hits"]["hits"]] == ["Dune", "Emma", "Solaris", "Ubik", "Walden"]
    by_date = search.search("books", None, params={"sort": "published:asc", "size": "2"})
    assert [h["sort"][0] for h in by_date["hits"]["hits"]] == [date_value("1815-12-23T00:00:00Z", "p"),
                                                             date_value("1961-06-01T00:00:00Z", "p")]
    mixed = search.search("books", {"query": {"match": {"text": "planet ubik"}},
                                    "sort": [{"genre": "asc"}, "_score"]})
    assert ids(mixed)[0] == "b3"  # genre min of [scifi, classic] is "classic"
    assert all(h["_score"] is not None for h in mixed["hits"]["hits"])
    tracked = search.search("books", {"sort": [{"rating": "desc"}], "track_scores": True})
    assert tracked["hits"]["max_score"] == 1.0
    with pytest.raises(IllegalArgument, match="Text fields"):
        search.search("books", {"sort": ["title"]})
    with pytest.raises(IllegalArgument, match="No mapping found"):
        search.search("books", {"sort": ["nope"]})
    assert len(ids(search.search("books", {"sort": [{"nope": {"unmapped_type": "long"}}]}))) == 5


def test_source_filtering(search):
    def source(body=None, params=None):
        return search.search("books", {"query": {"ids": {"values": ["b0"]}}, **(body or {})},
                             params=params)["hits"]["hits"][0].get("_source")

    assert source({"_source": False}) is None
    assert source({"_source": "title"}) == {"title": "Dune"}
    assert source({"_source": ["meta.lang", "year"]}) == {"year": 1965, "meta": {"lang": "en"}}
    assert source({"_source": ["meta"]}) == {"meta": {"pages": 412, "lang": "en"}}
    assert source({"_source": {"includes": ["*"], "excludes": ["meta", "vec", "text"]}}) == {
        "title": "Dune", "genre": "scifi", "year": 1965, "rating": 4.5, "published": "1965-08-01T00:00:00Z"}
    assert source({"_source": {"excludes": ["meta.*"]}})["meta"] == {}
    assert source(params={"_source": "false"}) is None
    assert source(params={"_source_includes": "title,year"}) == {"title": "Dune", "year": 1965}
    assert source(params={"_source_excludes": "vec,text,meta,published"}) == {
        "title": "Dune", "genre": "scifi", "year": 1965, "rating": 4.5}


def test_track_total_hits(search):
    assert search.search("books", {"track_total_hits": 3})["hits"]["total"] == {"value": 3, "relation": "gte"}
    assert search.search("books", {"track_total_hits": 5})["hits"]["total"] == {"value": 5, "relation": "eq"}
    assert "total" not in search.search("books", {"track_total_hits": False})["hits"]
    assert search.search("books", None, params={"track_total_hits": "true"})["hits"]["total"]["value"] == 5
    assert search.search("books", None, params={"rest_total_hits_as_int": "true"})["hits"]["total"] == 5


def test_count(search):
    assert search.count("books", None) == {"count": 5, "_shards": {"total": 1, "successful": 1, "skipped": 0,
                                                                   "failed": 0}}
    assert search.count("books", {"query": {"range": {"year": {"gte": 1900}}}})["count"] == 3
    assert search.count("books", None, params={"q": "genre:classic"})["count"] == 2
    with pytest.raises(ParsingError):
        search.count("books", {"size": 3})


def test_query_string_parameter(search):
    assert ids(search.search("books", None, params={"q": "title:dune"})) == ["b0"]
    assert set(ids(search.search("books", None, params={"q": "planet"}))) == {"b0", "b1"}
    assert ids(search.search("books", None, params={"q": "planet -title:dune"})) == ["b1"]
    assert set(ids(search.search("books", None, params={"q": "rating:*"}))) == {"b0", "b1", "b2", "b4"}
    assert ids(search.search("books", None, params={"q": "text:\"ocean planet\""})) == ["b1"]
    with pytest.raises(IllegalArgument):
        search.search("books", {"query": {"match_all": {}}}, params={"q": "x"})
    with pytest.raises(IllegalArgument, match="unrecognized parameter"):
        search.search("books", None, params={"qq": "x"})


def test_dates_ranges_and_date_math(search):
    def count(bounds):
        return search.count("books", {"query": {"range": {"published": bounds}}})["count"]

    assert count({"gte": "1961-06-01T00:00:00Z", "lt": "1966-01-01T00:00:00Z"}) == 2
    assert count({"gte": date_value("1961-06-01T00:00:00Z", "p")}) == 3  # epoch-ms operand
    assert count({"lte": "1961-06-01"}) == 2  # a date-only upper bound includes the whole day
    assert count({"gt": "1961-06-01"}) == 2
    assert count({"gte": "now-100y/y"}) == 0 or count({"gte": "now-100y/y"}) >= 0
    assert count({"lt": "now"}) == 4
    assert date_value("2024-01-31T10:00:00Z||+1M/d", "p") == date_value("2024-02-29T00:00:00Z", "p")
    assert date_value("2024-03-10T10:00:00Z||/w", "p") == date_value("2024-03-04T00:00:00Z", "p")
    assert date_value("2024-03-10T10:00:00Z||/M", "p", round_up=True) == date_value("2024-03-31T23:59:59.999Z", "p")
    assert format_date(T0 + 1) == "2024-01-01T00:00:00.001Z"


def test_writes_visible_at_once_and_deletes_vanish(store, search):
    assert search.count("books", {"query": {"match": {"text": "moon"}}})["count"] == 0
    store.put("books", {"title": "Moon", "text": "the moon is a harsh mistress"}, "m1")
    response = search.search("books", {"query": {"match": {"text": "moon"}}})
    assert ids(response) == ["m1"]
    store.delete("books", "b1")
    assert "b1" not in ids(search.search("books", {"size": 100}))
    assert search.count("books", None)["count"] == 5
    assert search.search("books", {"query": {"match": {"text": "planet"}}})["hits"]["total"]["value"] == 1
    aggs = search.search("books", {"size": 0, "aggs": {"g": {"terms": {"field": "genre"}}}})["aggregations"]
    assert {b["key"]: b["doc_count"] for b in aggs["g"]["buckets"]} == {"scifi": 2, "classic": 2, "essay": 1}


def test_several_indices(store, search):
    store.put("films", {"title": "Dune", "text": "desert planet film", "year": 2021}, "f1")
    store.put(".private", {"title": "Dune", "text": "planet"}, "p1")
    response = search.search("books,films", {"query": {"match": {"text": "planet"}}})
    assert {(h["_index"], h["_id"]) for h in response["hits"]["hits"]} == {("books", "b0"), ("books", "b1"),
                                                                          ("films", "f1")}
    assert response["_shards"]["total"] == 2
    scores = [h["_score"] for h in response["hits"]["hits"]]
    assert scores == sorted(scores, reverse=True)
    everywhere = search.search(None, {"query": {"match": {"title": "dune"}}})
    assert {h["_index"] for h in everywhere["hits"]["hits"]} == {"books", "films"}
    dotted = search.search(".*", {"query": {"match": {"title": "dune"}}})
    assert ids(dotted) == ["p1"]
    sorted_across = search.search("books,films", {"sort": [{"year": "desc"}], "size": 3})
    assert [h["sort"][0] for h in sorted_across["hits"]["hits"]] == [2021, 1969, 1965]
    aggs = search.search("b*,f*", {"size": 0, "aggs": {"years": {"max": {"field": "year"}},
                                                       "t": {"terms": {"field": "title.keyword", "size": 1}}}})
    assert aggs["aggregations"]["years"]["value"] == 2021.0
    assert aggs["aggregations"]["t"]["buckets"] == [{"key": "Dune", "doc_count": 2}]
    assert aggs["aggregations"]["t"]["sum_other_doc_count"] == 4
    merged = search.search("books,films", {"size": 0, "aggs": {"t": {"terms": {"field": "title.keyword",
                                                                               "min_doc_count": 2}}}})
    assert merged["aggregations"]["t"]["buckets"] == [{"key": "Dune", "doc_count": 2}]  # 1 + 1 across indices
    with pytest.raises(IndexNotFound):
        search.search("books,nope", None)
    assert search.search("books,nope", None, params={"ignore_unavailable": "true"})["hits"]["total"]["value"] == 5
    assert search.search("nothing*", None)["hits"]["total"]["value"] == 0


def test_knn_top_level_with_query_and_filter(search):
    knn = {"field": "vec", "query_vector": [1.0, 0.0, 0.0], "k": 2, "num_candidates": 10}
    response = search.search("books", {"knn": knn})
    assert ids(response) == ["b0", "b1"]
    assert response["hits"]["hits"][0]["_score"] == pytest.approx(1.0)
    filtered = search.search("books", {"knn": {**knn, "filter": {"term": {"genre": "classic"}}}})
    assert ids(filtered) == ["b3", "b2"]  # pre-filtered: both classics, though others are nearer
    combined = search.search("books", {"knn": {**knn, "k": 1}, "query": {"match": {"text": "pond"}}})
    assert set(ids(combined)) == {"b0", "b4"}  # union of the two, scores summed


def test_knn_sections_alone_answer_as_the_per_row_path(store, search):
    """A request of kNN sections alone takes their rows as the hits; with an aggregation it goes through per-row
    masks and sums, and both must give the same hits, scores, total and max_score."""
    store.create_index("more", MAPPING)
    for i, doc in enumerate(BOOKS):
        store.put("more", {**doc, "vec": doc["vec"][::-1]}, f"m{i}")
    store.delete("more", "m2")
    store.put("books", {**BOOKS[1], "vec": [0.8, 0.2, 0.1]}, "b1")  # overwritten: its old row is dead
    near = {"field": "vec", "query_vector": [1.0, 0.0, 0.2], "k": 3, "num_candidates": 10}
    far = {"field": "vec", "query_vector": [0.0, 0.3, 1.0], "k": 2, "num_candidates": 10, "boost": 0.5}
    every = {**near, "k": 50, "num_candidates": 50}  # more than the index holds: every live row is found
    bodies = [{"knn": near}, {"knn": [near, far]}, {"knn": [near, far], "from": 1, "size": 2}, {"knn": every},
              {"knn": {**far, "filter": {"term": {"genre": "scifi"}}}}, {"knn": near, "size": 0}]
    agg = {"g": {"value_count": {"field": "genre"}}}
    for names in ("books", "books,more"):
        for body in bodies:
            alone = search.search(names, body)
            per_row = search.search(names, {**body, "aggs": agg})
            del alone["took"], per_row["took"], per_row["aggregations"]
            assert alone == per_row, (names, body)
            assert alone["hits"]["total"]["value"] > 0
    found = search.search("more", {"knn": every})
    assert found["hits"]["total"]["value"] == 4 and found["hits"]["max_score"] == found["hits"]["hits"][0]["_score"]


def test_hybrid_fusion_forms(search):
    lexical = {"match": {"text": "planet cabin"}}
    vector = {"knn": {"field": "vec", "query_vector": [0.0, 0.1, 1.0], "k": 3}}
    rrf = search.search("books", {"query": {"hybrid": {"queries": [lexical, vector]}}})
    retriever = search.search("books", {"retriever": {"rrf": {"retrievers": [
        {"standard": {"query": lexical}}, {"knn": vector["knn"]}], "rank_constant": 60}}})
    assert ids(rrf) == ids(retriever)
    assert rrf["hits"]["hits"][0]["_id"] == "b4"  # first in both legs
    assert rrf["hits"]["hits"][0]["_score"] == pytest.approx(2 / 61)
    linear = search.search("books", {"query": {"hybrid": {"queries": [lexical, vector], "fusion": "linear",
                                                          "weights": [0.0, 1.0]}}})
    assert ids(linear)[0] == "b4"
    rank = search.search("books", {"query": lexical, "knn": vector["knn"], "rank": {"rrf": {}}})
    assert ids(rank) == ids(rrf)
    with pytest.raises(IllegalArgument, match="unsupported fusion"):
        search.search("books", {"query": {"hybrid": {"queries": [lexical, vector], "fusion": "learned"}}})
    with pytest.raises(IllegalArgument):
        search.search("books", {"query": {"hybrid": {"queries": [lexical]}}, "sort": ["year"]})
    with pytest.raises(ParsingError):
        search.search("books", {"query": {"bool": {"must": {"hybrid": {"queries": [lexical]}}}}})


def test_hybrid_legs_share_their_filter(search, monkeypatch):
    """An rrf retriever's filter reaches both legs; over one snapshot it is evaluated once, not once per leg."""
    from xerj_core.query import dsl, evaluate

    calls = []
    original = evaluate._HANDLERS[dsl.Term]
    monkeypatch.setitem(evaluate._HANDLERS, dsl.Term, lambda ev, node, scoring: calls.append(node) or
                        original(ev, node, scoring))
    body = {"retriever": {"rrf": {"retrievers": [
        {"standard": {"query": {"match": {"text": "planet cabin space"}}}},
        {"knn": {"field": "vec", "query_vector": [0.0, 0.1, 1.0], "k": 5}}], "filter": {"term": {"genre": "scifi"}}}}}
    hits = search.search("books", body)["hits"]["hits"]
    assert len(calls) == 1
    genres = {h["_id"]: h["_source"]["genre"] for h in search.search("books", {"size": 10})["hits"]["hits"]}
    assert hits and all("scifi" in np.atleast_1d(genres[h["_id"]]) for h in hits)


@pytest.mark.parametrize("forms", [
    # rrf retriever with a shared filter; linear fusion; a hybrid query with two lexical legs and a kNN leg
    {"retriever": {"rrf": {"retrievers": [{"standard": {"query": {"match": {"text": "planet cabin ocean"}}}},
                                          {"knn": {"field": "vec", "query_vector": [0.0, 0.1, 1.0], "k": 4}}],
                           "filter": {"term": {"genre": "scifi"}}}}},
    {"query": {"hybrid": {"queries": [{"match": {"text": "planet cabin"}},
                                      {"knn": {"field": "vec", "query_vector": [0.3, 0.1, 1.0], "k": 3}}],
                          "fusion": "linear"}}},
    {"query": {"hybrid": {"queries": [{"match": {"text": "planet"}}, {"knn": {"field": "vec",
                                      "query_vector": [1.0, 0.0, 0.2], "k": 2}}, {"term": {"genre": "essay"}}]}}},
])
def test_hybrid_legs_side_by_side_answer_as_in_turn(search, monkeypatch, forms):
    """With a spare core the lexical legs run on the worker while the kNN leg scans: the same response as
    running them in turn, and the worker is really used."""
    from xerj_core.query import sidebyside

    monkeypatch.setattr(sidebyside, "idle_core", lambda: False)
    in_turn = search.search("books", forms)
    monkeypatch.setattr(sidebyside, "idle_core", lambda: True)
    threads = set()
    original = search._rank_leg

    def rank_leg(node, *args):
        threads.add(threading.current_thread().name)
        return original(node, *args)

    monkeypatch.setattr(search, "_rank_leg", rank_leg)
    side = search.search("books", forms)
    assert {k: v for k, v in side.items() if k != "took"} == {k: v for k, v in in_turn.items() if k != "took"}
    assert any(name.startswith("xerj-leg") for name in threads) and threading.current_thread().name in threads


@pytest.mark.usefixtures("knn_first_pass")  # each run's int8 copy sliced from its part's
@pytest.mark.parametrize("similarity", ["cosine", "l2_norm", "dot_product"])
def test_knn_scan_shared_by_two_threads_answers_as_one(tmp_path, monkeypatch, similarity):
    """A kNN scan whose runs of rows two threads take in turn ranks exactly as one thread's: sealed segments and
    the tail, a filter, ties at the cut, a similarity floor."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from xerj_core.query import knn

    rng = np.random.default_rng(4)
    vectors = np.round(rng.standard_normal((60, 4)), 1)  # rounded: many exact ties
    vectors[10:20] = vectors[0]
    with Store(tmp_path / "data", tail_rows=16) as s, ThreadPoolExecutor(1) as pool:
        s.create_index("v", {"properties": {"vec": {"type": "dense_vector", "dims": 4, "similarity": similarity},
                                            "kind": {"type": "keyword"}}})
        for i, vector in enumerate(vectors):
            s.put("v", {"vec": vector.tolist(), "kind": "ab"[i % 3 == 0]}, f"d{i}")
        monkeypatch.setattr(knn, "_RUN_ROWS", 5)
        with s.reader("v") as reader:
            assert len(reader.segments) >= 2 and reader.tail_count
            allowed = SearchService(s).filter_mask(reader, {"term": {"kind": "a"}})
            taken = []

            def helper(fn):
                return pool.submit(lambda: taken.append(fn()))

            def takes_all(fn):  # the helper takes every run before this thread looks
                done = Future()
                done.set_result(fn())
                return done

            for query in (vectors[0], vectors[33], rng.standard_normal(4)):
                for k, mask, floor in ((5, None, None), (12, allowed, None), (3, allowed, 0.1), (60, None, None)):
                    alone = knn.knn_top(reader, "vec", query, k, mask, min_similarity=floor)
                    for way in (helper, takes_all):
                        shared = knn.knn_top(reader, "vec", query, k, mask, min_similarity=floor, helper=way)
                        assert alone.rows.tolist() == shared.rows.tolist()
                        assert alone.scores.tolist() == shared.scores.tolist()
            assert taken  # the worker really ran


def test_the_index_name_is_a_field_a_search_over_many_indices_can_filter_and_count(store, search):
    """``_index`` holds each index's name on all its rows: ``term``, ``terms``, ``prefix`` and ``wildcard`` queries
    keep or drop whole indices, and a ``terms`` aggregation counts the hits of each (with sub-aggregations),
    as ES answers a search over many indices."""
    store.put("films", {"title": "Dune", "text": "desert planet film", "year": 2021}, "f1")
    store.put("films", {"title": "Solaris", "text": "planet ocean film", "year": 1972}, "f2")

    def hits(query):
        return {(h["_index"], h["_id"]) for h in search.search("books,films", {"query": query})["hits"]["hits"]}

    planet = {"match": {"text": "planet"}}
    assert hits({"bool": {"must": [planet], "filter": [{"term": {"_index": "films"}}]}}) == {
        ("films", "f1"), ("films", "f2")}
    assert hits({"bool": {"must": [planet], "must_not": [{"term": {"_index": "films"}}]}}) == {
        ("books", "b0"), ("books", "b1")}
    assert hits({"bool": {"must": [planet], "filter": [{"terms": {"_index": ["books", "music"]}}]}}) == {
        ("books", "b0"), ("books", "b1")}
    assert hits({"bool": {"must": [planet], "filter": [{"prefix": {"_index": "fil"}}]}}) == {
        ("films", "f1"), ("films", "f2")}
    assert hits({"bool": {"must": [planet], "filter": [{"wildcard": {"_index": "b*s"}}]}}) == {
        ("books", "b0"), ("books", "b1")}
    assert hits({"term": {"_index": {"value": "FILMS", "case_insensitive": True}}}) == {
        ("films", "f1"), ("films", "f2")}
    assert hits({"term": {"_index": "film"}}) == set()
    counted = search.search("books,films", {"size": 0, "query": planet, "aggs": {"by_index": {
        "terms": {"field": "_index"}, "aggs": {"latest": {"max": {"field": "year"}}}}}})["aggregations"]
    assert counted["by_index"]["buckets"] == [{"key": "books", "doc_count": 2, "latest": {"value": 1965.0}},
                                              {"key": "films", "doc_count": 2, "latest": {"value": 2021.0}}]
    alone = search.search("films", {"size": 0, "query": {"term": {"year": 1972}},
                                    "aggs": {"i": {"terms": {"field": "_index"}}}})["aggregations"]["i"]
    assert alone["buckets"] == [{"key": "films", "doc_count": 1}]
    nothing = search.search("films", {"size": 0, "query": {"term": {"year": 1}},
                                      "aggs": {"i": {"terms": {"field": "_index"}}}})["aggregations"]["i"]
    assert nothing["buckets"] == []
    shown = search.search("films", {"size": 0, "query": {"term": {"year": 1}}, "aggs": {
        "i": {"terms": {"field": "_index", "min_doc_count": 0}}}})["aggregations"]["i"]
    assert shown["buckets"] == [{"key": "films", "doc_count": 0}]  # as every keyword's terms show at min_doc_count 0


def test_a_lone_knn_scan_of_many_rows_shares_them_with_an_idle_core(tmp_path, monkeypatch):
    """A kNN scan (a top-level ``knn`` section, ``knn_top`` itself) over enough rows takes the shared worker when
    a second core is idle, and answers exactly as on one thread (a ``knn`` query, scored densely, stays on the
    calling thread); over fewer rows, or with no idle core, it stays on the calling thread."""
    from xerj_core.query import knn, sidebyside

    rng = np.random.default_rng(9)
    vectors = np.round(rng.standard_normal((90, 4)), 1)  # rounded: exact ties at the cut
    with Store(tmp_path / "data", tail_rows=16) as s:
        s.create_index("v", {"properties": {"vec": {"type": "dense_vector", "dims": 4}, "kind": {"type": "keyword"}}})
        for i, vector in enumerate(vectors):
            s.put("v", {"vec": vector.tolist(), "kind": "ab"[i % 3 == 0]}, f"d{i}")
        service = SearchService(s)
        bodies = [{"knn": {"field": "vec", "query_vector": vectors[5].tolist(), "k": 7, "num_candidates": 20}},
                  {"knn": {"field": "vec", "query_vector": [0.1, -1, 2, 0], "k": 5, "filter": {"term": {"kind": "a"}}}},
                  {"query": {"knn": {"field": "vec", "query_vector": vectors[40].tolist(), "k": 9}}, "size": 9}]
        threads = set()
        best = knn._part_raw
        worker_ran = threading.Event()
        waiting = [False]  # while True, the calling thread's first run waits (once) for the worker to take one

        def part_raw(*args):
            threads.add(threading.current_thread().name)
            if threading.current_thread() is not threading.main_thread():
                worker_ran.set()
            elif waiting[0]:
                waiting[0] = False
                worker_ran.wait(10)  # these parts are tiny: the caller would take every run before the worker
            return best(*args)

        monkeypatch.setattr(knn, "_part_raw", part_raw)
        monkeypatch.setattr(knn, "_RUN_ROWS", 6)
        monkeypatch.setattr(knn, "_SHARE_FROM_ROWS", 12)
        monkeypatch.setattr(sidebyside, "idle_core", lambda: False)
        alone = [service.search("v", body) for body in bodies]
        with s.reader("v") as reader:
            top_alone = knn.knn_top(reader, "vec", vectors[3], 11)
        assert threads == {threading.current_thread().name}

        monkeypatch.setattr(sidebyside, "idle_core", lambda: True)
        before = dict(sidebyside.scans)
        waiting[0] = True
        shared = [service.search("v", body) for body in bodies]
        with s.reader("v") as reader:
            top_shared = knn.knn_top(reader, "vec", vectors[3], 11)
        assert any(name.startswith("xerj-leg") for name in threads)
        assert sidebyside.scans["side_by_side"] == before["side_by_side"] + 3
        for got, want in zip(shared, alone):
            assert {k: v for k, v in got.items() if k != "took"} == {k: v for k, v in want.items() if k != "took"}
            assert got["hits"]["hits"]
        assert top_shared.rows.tolist() == top_alone.rows.tolist()
        assert top_shared.scores.tolist() == top_alone.scores.tolist()

        monkeypatch.setattr(knn, "_SHARE_FROM_ROWS", len(vectors) + 1)
        service.search("v", bodies[0])
        assert sidebyside.scans["side_by_side"] == before["side_by_side"] + 3


def test_hybrid_leg_errors_side_by_side(search, monkeypatch):
    """A leg failing on either thread fails the request with its own error, after the worker is done."""
    from xerj_core.query import sidebyside

    monkeypatch.setattr(sidebyside, "idle_core", lambda: True)
    lexical = {"match": {"text": "planet"}}
    with pytest.raises(IllegalArgument, match="different number of dimensions"):
        search.search("books", {"query": {"hybrid": {"queries": [lexical, {"knn": {
            "field": "vec", "query_vector": [1.0, 0.0], "k": 2}}]}}})
    with pytest.raises(IllegalArgument, match="does not support \\[match\\] queries"):
        search.search("books", {"query": {"hybrid": {"queries": [{"match": {"vec": "x"}}, {"knn": {
            "field": "vec", "query_vector": [1.0, 0.0, 0.0], "k": 2}}]}}})
    # the worker is free again: the next hybrid still answers
    assert ids(search.search("books", {"query": {"hybrid": {"queries": [lexical, {"knn": {
        "field": "vec", "query_vector": [1.0, 0.0, 0.0], "k": 2}}]}}}))


def test_query_vector_builder_uses_a_registered_embedder(store):
    class Embedder:
        id, dims = "fake", 3

        def embed(self, texts):
            return np.array([[1.0, 0.0, 0.0] for _ in texts], np.float32)

    search = SearchService(store, embedders=lambda: {"fake": Embedder()})
    knn = {"field": "vec", "k": 1, "query_vector_builder": {"text_embedding": {"model_id": "fake",
                                                                               "model_text": "spice"}}}
    assert ids(search.search("books", {"knn": knn})) == ["b0"]
    with pytest.raises(IllegalArgument, match="unknown embedder"):
        search.search("books", {"knn": {**knn, "query_vector_builder": {"text_embedding": {
            "model_id": "nope", "model_text": "x"}}}})


@pytest.mark.parametrize("body, error, reason", [
    ({"query": {"fuzzy": {"title": "dune"}}}, ParsingError, "unknown query [fuzzy]"),
    ({"query": {}}, ParsingError, "empty clause"),
    ({"query": "dune"}, ParsingError, "must start with start_object"),
    ({"query": {"match_all": {}, "term": {"a": 1}}}, ParsingError, "malformed query"),
    ({"query": {"term": {"a": 1, "b": 2}}}, ParsingError, "doesn't support multiple fields"),
    ({"query": {"bool": {"must": 3}}}, ParsingError, "must start with start_object"),
    ({"query": {"bool": {"shuold": []}}}, ParsingError, "does not support [shuold]"),
    ({"query": {"match": {"text": {"operator": "and"}}}}, ParsingError, "requires query"),
    ({"query": {"match": {"text": {"query": "x", "operator": "xor"}}}}, ParsingError, "unknown operator"),
    ({"query": {"range": {"title": {"gte": "a"}}}}, IllegalArgument, "does not support range queries"),
    ({"query": {"range": {"year": {"gte": "soon"}}}}, IllegalArgument, "For input string"),
    ({"query": {"range": {"published": {"gte": "yesterday"}}}}, IllegalArgument, "failed to parse date"),
    ({"query": {"term": {"year": "x"}}}, IllegalArgument, "cannot use"),
    ({"query": {"terms": {"genre": "scifi"}}}, ParsingError, "expected an array"),
    ({"knn": {"field": "year", "query_vector": [1.0], "k": 1}}, IllegalArgument, "only supported on [dense_vector]"),
    ({"knn": {"field": "vec", "query_vector": [1.0, 2.0], "k": 1}}, IllegalArgument, "different number of dim"),
    ({"knn": {"field": "nope", "query_vector": [1.0], "k": 1}}, IllegalArgument, "does not exist"),
    ({"knn": {"field": "vec", "query_vector": [1.0, 0, 0], "k": 5, "num_candidates": 2}}, IllegalArgument,
     "cannot be less than [k]"),
    ({"knn": {"field": "vec", "query_vector": [1.0, 0, 0], "k": 0}}, IllegalArgument, "greater than 0"),
    ({"knn": {"field": "vec", "query_vector": [0.0, 0, 0], "k": 1}}, IllegalArgument, "zero magnitude"),
    ({"query": {"knn": {"field": "vec", "k": 1}}}, IllegalArgument, "exactly one of"),
    ({"aggs": {"a": {"histogramm": {"field": "year"}}}}, ParsingError, "Unknown aggregation type"),
    ({"aggs": {"a": {"terms": {}}}}, ParsingError, "requires a [field]"),
    ({"aggs": {"a": {"terms": {"field": "text"}}}}, IllegalArgument, "Text fields"),
    ({"aggs": {"a": {"min": {"field": "genre"}}}}, IllegalArgument, "not supported for aggregation"),
    ({"aggs": {"a": {"date_histogram": {"field": "published"}}}}, IllegalArgument, "Required one of"),
    ({"aggs": {"a": {"date_histogram": {"field": "published", "calendar_interval": "fortnight"}}}},
     IllegalArgument, "could not be parsed"),
    ({"aggs": {"a": {"max": {"field": "year"}, "aggs": {"b": {"min": {"field": "year"}}}}}}, ParsingError,
     "cannot accept sub-aggregations"),
    ({"aggs": {"a[0]": {"max": {"field": "year"}}}}, ParsingError, "Invalid aggregation name"),
    ({"suggest": {"s": {"text": "x"}}}, IllegalArgument, "not supported"),
    ({"highlight": {"fields": {"text": {"fragment_sise": 5}}}}, ParsingError, "unknown field [fragment_sise]"),
    ({"highlight": {"fields": "text"}}, ParsingError, "requires [fields]"),
    ({"querry": {}}, ParsingError, "Unknown key"),
    ({"sort": [{"year": "up"}]}, ParsingError, "unknown order"),
])
def test_bad_input_is_a_clear_error(search, body, error, reason):
    with pytest.raises(error) as caught:
        search.search("books", body)
    assert reason in caught.value.reason
    assert caught.value.to_body()["status"] == 400


def test_aggregation_shapes(search):
    response = search.search("books", {"size": 0, "aggs": {
        "genres": {"terms": {"field": "genre", "size": 2, "order": {"_key": "asc"}},
                   "aggs": {"best": {"max": {"field": "rating"}}}},
        "decades": {"date_histogram": {"field": "published", "calendar_interval": "year", "min_doc_count": 1}},
        "years": {"terms": {"field": "year"}},
        "n": {"value_count": {"field": "genre"}},
        "c": {"cardinality": {"field": "genre"}},
        "avg": {"avg": {"field": "rating"}},
        "lo": {"min": {"field": "published"}, "meta": {"note": "kept"}},
    }})
    aggs = response["aggregations"]
    assert response["hits"]["hits"] == [] and response["hits"]["max_score"] is None
    assert aggs["genres"]["buckets"] == [{"key": "classic", "doc_count": 2, "best": {"value": 3.5}},
                                         {"key": "essay", "doc_count": 1, "best": {"value": pytest.approx(4.2)}}]
    assert aggs["genres"]["sum_other_doc_count"] == 3
    assert [b["key_as_string"] for b in aggs["decades"]["buckets"]] == [
        "1815-01-01T00:00:00.000Z", "1961-01-01T00:00:00.000Z", "1965-01-01T00:00:00.000Z",
        "1969-01-01T00:00:00.000Z"]
    assert aggs["years"]["buckets"][0] == {"key": 1815, "doc_count": 1}
    assert aggs["n"] == {"value": 6} and aggs["c"] == {"value": 3}
    assert aggs["avg"]["value"] == pytest.approx((4.5 + 4.0 + 3.5 + 4.2) / 4, abs=1e-6)
    assert aggs["lo"] == {"meta": {"note": "kept"}, "value": float(date_value("1815-12-23T00:00:00Z", "p")),
                          "value_as_string": "1815-12-23T00:00:00.000Z"}


def test_engine_level_calls(store, search):
    with store.reader("books") as reader:
        scifi = search.filter_mask(reader, {"term": {"genre": "scifi"}})
        assert {reader.id_of(int(r)) for r in np.flatnonzero(scifi)} == {"b0", "b1", "b3"}
        lexical = search.bm25_top(reader, "text", "planet ocean", 5, scifi)
        semantic = search.knn_top(reader, "vec", [1.0, 0.0, 0.0], 2, scifi)
        assert [reader.id_of(r) for r in lexical.rows.tolist()] == ["b1", "b0"]
        assert [reader.id_of(r) for r in semantic.rows.tolist()] == ["b0", "b1"]
        fused = search.fuse([lexical, semantic], k=1)
        assert len(fused) == 1
        hits = search.hits(reader, fused)
        assert hits[0]["_index"] == "books" and "_source" in hits[0]
        aggs = search.aggregate(reader, {"g": {"terms": {"field": "genre"}}}, scifi)
        assert aggs["g"]["buckets"][0] == {"key": "scifi", "doc_count": 3}
        mask, scores = search.evaluate(reader, {"match": {"text": "planet"}})
        assert mask.sum() == 2 and scores[mask].min() > 0
        assert len(search.top(reader, {"match_all": {}}, 3)) == 3


def test_fusion_rules():
    a = Ranked(np.array([1, 2, 3]), np.array([3.0, 2.0, 1.0]))
    b = Ranked(np.array([3, 4]), np.array([0.9, 0.8]))
    rrf = fusion.fuse([a, b], rank_constant=60)
    assert rrf.rows.tolist()[0] == 3  # in both legs
    assert rrf.scores[0] == pytest.approx(1 / 63 + 1 / 61)
    linear = fusion.fuse([a, b], method="linear", weights=[1.0, 2.0])
    assert dict(linear.pairs())[3] == pytest.approx(0.0 + 2.0)
    assert fusion.fuse([a, b], window=1).rows.tolist() == [1, 3]
    with pytest.raises(IllegalArgument):
        fusion.fuse([a, b], method="learned")
    assert fusion.fuse_legs([a, b], "linear", 2).rows.tolist() == [1, 3]  # both 1.0 after min-max: lower row first


def test_top_k_matches_a_full_sort():
    rng = np.random.default_rng(3)
    for n in (10, 5_000, 50_000):
        scores = np.round(rng.random(n) * 20) / 4  # many ties
        mask = rng.random(n) < 0.7
        for k in (1, 10, 100):
            got = top_k(scores, mask, k)
            rows = np.flatnonzero(mask)
            order = np.lexsort((rows, -scores[rows]))[:k]
            assert got.rows.tolist() == rows[order].tolist()
    zeros = np.zeros(20_000)
    assert top_k(zeros, np.ones(20_000, bool), 3).rows.tolist() == [0, 1, 2]


def test_searches_release_their_read_slots(store, search):
    """No reference cycle may keep a reader (and its LMDB reader slot) alive after a search returns."""
    gc.disable()
    try:
        for _ in range(300):  # more than the environment's 256 reader slots
            search.search("books", {"query": {"bool": {"must": {"match": {"text": "planet"}}}}, "sort": ["_score"],
                                    "aggs": {"g": {"terms": {"field": "genre"}}}})
            search.search("books", {"query": {"hybrid": {"queries": [{"match": {"text": "planet"}}, {"knn": {
                "field": "vec", "query_vector": [1.0, 0.0, 0.0], "k": 2}}]}}})
            search.count("books", {"query": {"term": {"genre": "scifi"}}})
    finally:
        gc.enable()


def test_typed_keys(search):
    body = {"size": 0, "aggs": {"g": {"terms": {"field": "genre"}, "aggs": {"y": {"max": {"field": "year"}}}},
                                "y": {"terms": {"field": "year"}}, "r": {"terms": {"field": "rating"}},
                                "h": {"date_histogram": {"field": "published", "calendar_interval": "day"}}}}
    aggs = search.search("books", body, params={"typed_keys": "true"})["aggregations"]
    assert set(aggs) == {"sterms#g", "lterms#y", "dterms#r", "date_histogram#h"}
    assert "max#y" in aggs["sterms#g"]["buckets"][0]


def test_post_filter_min_score_and_small_query_types(search):
    body = {"query": {"match": {"text": "planet"}}, "post_filter": {"term": {"title.keyword": "Dune"}},
            "aggs": {"g": {"terms": {"field": "genre"}}}}
    response = search.search("books", body)
    assert ids(response) == ["b0"] and response["hits"]["total"]["value"] == 1
    assert response["aggregations"]["g"]["buckets"] == [{"key": "scifi", "doc_count": 2}]  # before post_filter
    scores = [h["_score"] for h in search.search("books", {"query": {"match": {"text": "planet"}}})["hits"]["hits"]]
    above = search.search("books", {"query": {"match": {"text": "planet"}}, "min_score": max(scores) - 1e-9})
    assert len(ids(above)) == 1
    constant = search.search("books", {"query": {"constant_score": {"filter": {"term": {"genre": "scifi"}},
                                                                    "boost": 2.5}}})
    assert {h["_score"] for h in constant["hits"]["hits"]} == {2.5} and len(ids(constant)) == 3
    assert search.search("books", {"query": {"match_none": {}}})["hits"]["total"]["value"] == 0
    every_text = search.search("books", {"query": {"multi_match": {"query": "pond worms"}}})
    assert set(ids(every_text)) == {"b0", "b4"}
    versioned = search.search("books", {"query": {"ids": {"values": ["b2"]}}, "version": True})
    assert versioned["hits"]["hits"][0]["_version"] == 1
    filtered_only = search.search("books", {"query": {"bool": {"filter": {"term": {"genre": "essay"}}}}})
    assert filtered_only["hits"]["hits"][0]["_score"] == 0.0
    nested = search.search("books", {"query": {"bool": {"should": [
        {"match": {"text": "planet"}},
        {"knn": {"field": "vec", "query_vector": [0.0, 1.0, 0.0], "k": 1}}]}}})
    assert set(ids(nested)) == {"b0", "b1", "b2"}


def test_highlight_tags_the_query_words_in_the_es_response_shape(search):
    response = search.search("books", {
        "query": {"bool": {"must": [{"match": {"text": "planet"}}], "must_not": [{"match": {"text": "ocean"}}]}},
        "highlight": {"fields": {"text": {}, "title": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]}})
    hit = response["hits"]["hits"][0]
    assert hit["_source"]["title"] == "Dune"
    assert hit["highlight"] == {"text": ["desert <b>planet</b> spice and sand worms"]}  # no title match, no key


def test_highlight_fragment_size_and_number_of_fragments(search, store):
    long_text = " ".join(["filler words here"] * 20 + ["the planet appears"] + ["more filler text"] * 20
                         + ["a second planet"] + ["tail words"] * 20)
    search.search("books", {"query": {"match_all": {}}})  # the index exists
    from xerj_core.query.highlight import highlight_hit, parse_highlight, query_terms
    from xerj_core.query.request import parse_search_request
    request = parse_search_request({"query": {"match": {"text": "planet"}},
                                    "highlight": {"fields": {"text": {"fragment_size": 30, "number_of_fragments": 1}}}})
    got = highlight_hit({"text": long_text}, request.highlight, query_terms(request.query))["text"]
    assert len(got) == 1 and "<em>planet</em>" in got[0] and len(got[0]) < 60
    whole = parse_highlight({"fields": {"text": {"number_of_fragments": 0}}})
    got = highlight_hit({"text": long_text}, whole, {"text": {"planet"}})["text"]
    assert got == [long_text.replace("planet", "<em>planet</em>")]
    escaped = parse_highlight({"fields": {"*": {}}, "encoder": "html"})
    assert highlight_hit({"t": "<img src=x> planet"}, escaped, {None: {"planet"}}) == {
        "t": ["&lt;img src=x&gt; <em>planet</em>"]}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_side_by_side_worker_in_a_forked_child(monkeypatch):
    """A child forked after the worker started gets a worker of its own (the parent's thread is not in it)."""
    from xerj_core.query import sidebyside

    monkeypatch.setattr(sidebyside, "idle_core", lambda: True)
    with sidebyside.spare_worker() as submit:
        assert submit(lambda: 1).result() == 1
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's verdict is its exit status
        signal.alarm(10)  # a worker that never runs fails the test instead of hanging it
        with sidebyside.spare_worker() as submit:
            os._exit(0 if submit(lambda: 2).result() == 2 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


PATHS = ["notes/a.md", "notes/a.md#intro", "notes/b*.md", "Notes/C.md", "mail/x?.eml", "notes/a.mdx", "win\\"]


@pytest.fixture
def paths(tmp_path):
    with Store(tmp_path / "paths", tail_rows=2) as s:  # some rows sealed, the last ones in the tail
        s.create_index("p", {"properties": {"path": {"type": "keyword"}, "text": {"type": "text"},
                                            "n": {"type": "long"}}})
        for i, path in enumerate(PATHS):
            s.put("p", {"path": path, "text": f"note {i}"}, f"p{i}")
        yield SearchService(s)


def _paths(service, query):
    found = service.search("p", {"query": query, "size": 20})["hits"]["hits"]
    return sorted(PATHS[int(hit["_id"][1:])] for hit in found)


@pytest.mark.parametrize("query,expected", [
    ({"prefix": {"path": "notes/a.md"}}, ["notes/a.md", "notes/a.md#intro", "notes/a.mdx"]),
    ({"prefix": {"path": {"value": "notes/a.md#"}}}, ["notes/a.md#intro"]),
    ({"prefix": {"path": "notes/c"}}, []),
    ({"prefix": {"path": {"value": "NOTES/c", "case_insensitive": True}}}, ["Notes/C.md"]),
    ({"prefix": {"path": ""}}, sorted(PATHS)),
    ({"wildcard": {"path": "notes/?.md"}}, ["notes/a.md"]),
    ({"wildcard": {"path": {"value": "NOTES/*.MD", "case_insensitive": True}}},
     ["Notes/C.md", "notes/a.md", "notes/b*.md"]),
    ({"wildcard": {"path": {"wildcard": "*#*"}}}, ["notes/a.md#intro"]),
    ({"wildcard": {"path": "notes/b\\*.md"}}, ["notes/b*.md"]),  # an escaped star is a star
    ({"wildcard": {"path": "mail/x\\?.eml"}}, ["mail/x?.eml"]),
    ({"wildcard": {"path": "win\\"}}, ["win\\"]),  # a trailing backslash stands for itself
    ({"wildcard": {"path": "notes/a.md*"}}, ["notes/a.md", "notes/a.md#intro", "notes/a.mdx"]),
    ({"wildcard": {"path": "*.md"}}, ["Notes/C.md", "notes/a.md", "notes/b*.md"]),
    ({"wildcard": {"path": "nothing*"}}, []),
    ({"prefix": {"missing_field": "x"}}, []),
    ({"bool": {"must": [{"match": {"text": "note"}}], "filter": [{"prefix": {"path": "mail/"}}]}}, ["mail/x?.eml"]),
    ({"bool": {"must_not": [{"wildcard": {"path": "notes/*"}}]}}, ["Notes/C.md", "mail/x?.eml", "win\\"]),
])
def test_prefix_and_wildcard_on_a_keyword(paths, query, expected):
    assert _paths(paths, query) == expected


def test_prefix_and_wildcard_score_their_boost_and_see_new_writes(paths, tmp_path):
    hits = paths.search("p", {"query": {"prefix": {"path": {"value": "notes/a", "boost": 2.5}}}})["hits"]["hits"]
    assert {hit["_score"] for hit in hits} == {2.5} and len(hits) == 3
    paths.store.put("p", {"path": "notes/a-new.md"}, "fresh")
    paths.store.delete("p", "p0")
    found = paths.search("p", {"query": {"wildcard": {"path": "notes/a*"}}, "size": 20})["hits"]["hits"]
    assert sorted(hit["_id"] for hit in found) == ["fresh", "p1", "p5"]


@pytest.mark.parametrize("query,error,words", [
    ({"prefix": {"n": "1"}}, IllegalArgument, "field [n] of type [long] does not support [prefix]"),
    ({"wildcard": {"n": "1*"}}, IllegalArgument, "does not support [wildcard] queries; use a keyword or text field"),
    ({"prefix": {"_id": "p"}}, IllegalArgument, "[prefix] queries on [_id] are not supported"),
    ({"prefix": {"path": 5}}, ParsingError, "[prefix] query on [path] needs a string, got a [VALUE_NUMBER]"),
    ({"prefix": {"path": {}}}, ParsingError, "[prefix] query requires a [value]"),
    ({"prefix": {"path": {"value": "a", "slop": 1}}}, ParsingError, "slop"),
    ({"wildcard": {"path": {"value": "a", "wildcard": "b"}}}, ParsingError, "not both"),
    ({"prefix": {"path": "a", "text": "b"}}, ParsingError, "doesn't support multiple fields"),
    ({"prefix": {"path": {"value": "a", "case_insensitive": "maybe"}}}, ParsingError, "case_insensitive"),
])
def test_prefix_and_wildcard_refuse_bad_input(paths, query, error, words):
    with pytest.raises(error) as raised:
        paths.search("p", {"query": query})
    assert words in str(raised.value)


@pytest.fixture
def notes(tmp_path):
    with Store(tmp_path / "notes", tail_rows=2) as s:  # some rows sealed, the last ones in the tail
        s.create_index("n", {"properties": {"text": {"type": "text"}, "kind": {"type": "keyword"},
                                            "parts": {"type": "text"}}})
        texts = ["The graph view shows links", "view the graph", "graph view, graph view", "graph", "a graph  view",
                 "graph graph graph"]
        for i, text in enumerate(texts):
            s.put("n", {"text": text, "kind": "graph view" if i == 1 else "note",
                        "parts": ["alpha graph", "view beta"] if i < 3 else "graph view"}, f"n{i}")
        yield SearchService(s)


def _found(service, query):
    return {hit["_id"]: hit["_score"] for hit in service.search("n", {"query": query, "size": 20})["hits"]["hits"]}


def test_match_phrase_finds_words_side_by_side_in_order(notes):
    found = _found(notes, {"match_phrase": {"text": "Graph View"}})
    assert set(found) == {"n0", "n2", "n4"}  # "view the graph" holds both words, not side by side
    assert found["n2"] > found["n4"]  # twice in a row of the same length
    assert set(_found(notes, {"match_phrase": {"text": "graph graph"}})) == {"n5"}
    # a phrase never runs from one value of an array into the next
    assert set(_found(notes, {"match_phrase": {"parts": "graph view"}})) == {"n3", "n4", "n5"}
    assert set(_found(notes, {"match_phrase": {"parts": "alpha graph"}})) == {"n0", "n1", "n2"}
    assert _found(notes, {"match_phrase": {"text": "graph links"}}) == {}
    assert _found(notes, {"match_phrase": {"text": "graph nothing"}}) == {}
    # on a keyword, the whole value; one word is a match of it; no words is zero_terms_query's
    assert set(_found(notes, {"match_phrase": {"kind": "graph view"}})) == {"n1"}
    assert _found(notes, {"match_phrase": {"text": "views"}}) == {}
    assert _found(notes, {"match_phrase": {"text": "LINKS"}}) == _found(notes, {"match": {"text": "links"}})
    assert _found(notes, {"match_phrase": {"text": "..."}}) == {}
    assert len(_found(notes, {"match_phrase": {"text": {"query": "...", "zero_terms_query": "all"}}})) == 6


def test_match_phrase_scores_as_lucene_does(notes):
    """BM25 with the phrase's count as the frequency and the sum of its words' idf as the weight."""
    import math
    n_docs, lengths = 6, [5, 3, 4, 1, 3, 3]
    avgdl = sum(lengths) / n_docs

    def idf(df):
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))

    weight = idf(6) + idf(4)  # "graph" is in every row, "view" in four
    found = _found(notes, {"match_phrase": {"text": {"query": "graph view", "boost": 2.0}}})
    for doc, freq in (("n0", 1), ("n2", 2), ("n4", 1)):
        row = int(doc[1:])
        expected = 2.0 * weight * freq / (freq + 1.2 * (1 - 0.75 + 0.75 * lengths[row] / avgdl))
        assert found[doc] == pytest.approx(expected, rel=1e-6)
    repeated = _found(notes, {"match_phrase": {"text": "graph graph"}})  # a repeated word's idf counts twice
    expected = 2 * idf(6) * 2 / (2 + 1.2 * (1 - 0.75 + 0.75 * lengths[5] / avgdl))
    assert repeated == {"n5": pytest.approx(expected, rel=1e-6)}


def test_match_phrase_sees_writes_and_highlights(notes):
    notes.store.put("n", {"text": "one more graph view"}, "fresh")
    notes.store.delete("n", "n0")
    assert set(_found(notes, {"match_phrase": {"text": "graph view"}})) == {"n2", "n4", "fresh"}
    hit = notes.search("n", {"query": {"match_phrase": {"text": "graph view"}}, "highlight": {"fields": {"text": {}}},
                             "size": 1})["hits"]["hits"][0]
    assert "<em>graph</em>" in hit["highlight"]["text"][0] and "<em>view</em>" in hit["highlight"]["text"][0]


@pytest.mark.parametrize("query,error,words", [
    ({"match_phrase": {"text": {"query": "a b", "slop": 2}}}, IllegalArgument, "[slop] above 0 is not supported"),
    ({"match_phrase": {"text": {"query": "a b", "slop": -1}}}, ParsingError, "non-negative integer"),
    ({"match_phrase": {"text": {"query": "a b", "slop": "1"}}}, ParsingError, "non-negative integer"),
    ({"match_phrase": {"text": {"slop": 0}}}, ParsingError, "requires query value for field [text]"),
    ({"match_phrase": {"text": {"query": "a", "fuzziness": 1}}}, ParsingError, "fuzziness"),
    ({"match_phrase": {"text": {"query": "a", "zero_terms_query": "some"}}}, ParsingError, "zero_terms_query"),
])
def test_match_phrase_refuses_bad_input(notes, query, error, words):
    with pytest.raises(error) as raised:
        notes.search("n", {"query": query})
    assert words in str(raised.value)


def test_a_quoted_value_of_q_is_a_phrase(notes):
    def by_q(q):
        return {hit["_id"] for hit in notes.search("n", None, params={"q": q, "size": "20"})["hits"]["hits"]}
    assert by_q('text:"graph view"') == {"n0", "n2", "n4"}
    assert by_q("text:graph text:view") == {"n0", "n1", "n2", "n3", "n4", "n5"}
    assert by_q('kind:"graph view"') == {"n1"}


def test_match_phrase_on_the_foam_vault_agrees_with_a_scan(tmp_path):
    """Real notes (markdown, links, code spans, non-ASCII): every phrase's hits are the notes whose words, as the
    tokenizer lists them, hold it side by side."""
    from xerj_core.text import tokenize

    from .conftest import CORPORA
    notes = sorted((CORPORA / "foam-docs").rglob("*.md"))
    if not notes:
        pytest.skip("shared/corpora/foam-docs is not beside the checkout")
    texts = {str(path.relative_to(CORPORA)): path.read_text(encoding="utf-8", errors="replace") for path in notes}
    with Store(tmp_path / "foam", tail_rows=16) as store:
        store.create_index("notes", {"properties": {"text": {"type": "text"}}})
        store.bulk([BulkOp("index", "notes", name, {"text": text}) for name, text in texts.items()])
        service = SearchService(store)
        words = {name: tokenize(text) for name, text in texts.items()}
        hits = 0
        for phrase in ("graph view", "foam is", "the note", "in the", "wikilinks", "vs code", "markdown preview",
                       "daily note", "of the of", "you can use", "foam foam"):
            wanted = tokenize(phrase)
            found = service.search("notes", {"query": {"match_phrase": {"text": phrase}}, "size": 1000,
                                             "_source": False})["hits"]["hits"]
            expected = {name for name, toks in words.items()
                        if any(toks[at:at + len(wanted)] == wanted for at in range(len(toks)))}
            assert {hit["_id"] for hit in found} == expected, phrase
            hits += len(expected)
        assert hits > 100  # the phrases are found, not only missed alike

def test_multi_match_phrase_and_an_unfielded_quoted_q(notes):
    both = {"multi_match": {"query": "graph view", "type": "phrase"}}  # every text field: text and parts
    assert set(_found(notes, both)) == {"n0", "n2", "n3", "n4", "n5"}
    one = {"multi_match": {"query": "graph view", "type": "phrase", "fields": ["text^2"]}}
    assert _found(notes, one) == {doc: 2 * score for doc, score in
                                  _found(notes, {"match_phrase": {"text": "graph view"}}).items()}
    # best_fields' scores: the best field's, as for the other types
    best = _found(notes, both)
    assert best["n4"] == pytest.approx(max(_found(notes, {"match_phrase": {"text": "graph view"}})["n4"],
                                           _found(notes, {"match_phrase": {"parts": "graph view"}})["n4"]))
    by_q = {hit["_id"] for hit in notes.search("n", None, params={"q": '"graph view"', "size": "20"})["hits"]["hits"]}
    assert by_q == set(best)
    with pytest.raises(IllegalArgument, match="slop"):
        notes.search("n", {"query": {"multi_match": {"query": "a b", "type": "phrase", "slop": 1}}})
    assert notes.search("n", {"query": {"multi_match": {"query": "graph", "slop": 3}}})["hits"]["total"]["value"] == 6
    with pytest.raises(ParsingError, match="cross_fields"):  # phrase_prefix is test_query_multiterm's
        notes.search("n", {"query": {"multi_match": {"query": "a b", "type": "cross_fields"}}})


def test_query_string_reads_as_q_does(notes):
    def by_body(body):
        return _found(notes, {"query_string": body})

    def by_q(q, **params):
        found = notes.search("n", None, params={"q": q, "size": "20", **params})["hits"]["hits"]
        return {hit["_id"]: hit["_score"] for hit in found}

    assert by_body({"query": 'text:"graph view"'}) == by_q('text:"graph view"')
    assert by_body({"query": "links -beta", "default_field": "text"}) == by_q("links -beta", df="text")
    assert by_body({"query": "graph links", "default_operator": "AND"}) == by_q("graph links", default_operator="and")
    boosted = by_body({"query": "links", "boost": 3.0})
    assert boosted == {doc: 3 * score for doc, score in by_q("links").items()} and boosted
    # ``fields`` takes the words without a field, with their boosts
    only_parts = by_body({"query": "alpha", "fields": ["parts^2"]})
    assert set(only_parts) == {"n0", "n1", "n2"} and _found(notes, {"query_string": {"query": "alpha",
                                                                                      "fields": ["text"]}}) == {}
    # a query of no words matches nothing, boosted or not; everything, boosted, scores the boost
    for q, hits in (("AND", 0), ("", 6), ("*", 6), ('""', 0)):
        found = by_body({"query": q, "boost": 2.0})
        assert len(found) == hits and set(found.values()) <= {2.0}, q
    with pytest.raises(ParsingError, match="requires a \\[query\\] string"):
        notes.search("n", {"query": {"query_string": {"default_field": "text"}}})
    with pytest.raises(ParsingError, match="analyzer"):
        notes.search("n", {"query": {"query_string": {"query": "a", "analyzer": "simple"}}})
    with pytest.raises(IllegalArgument, match="default_operator"):
        notes.search("n", {"query": {"query_string": {"query": "a", "default_operator": "xor"}}})


def test_dis_max_takes_the_best_clause(notes):
    text = {"match": {"text": "graph view"}}
    parts = {"match": {"parts": "graph view"}}
    a, b = _found(notes, text), _found(notes, parts)
    for tie in (0.0, 0.4):
        found = _found(notes, {"dis_max": {"queries": [text, parts], "tie_breaker": tie}})
        assert set(found) == set(a) | set(b)
        for doc, score in found.items():
            mine = [s for s in (a.get(doc), b.get(doc)) if s is not None]
            assert score == pytest.approx(max(mine) + tie * (sum(mine) - max(mine)))
    lit = notes.search("n", {"query": {"dis_max": {"queries": [text]}}, "highlight": {"fields": {"text": {}}}})
    assert "<em>graph</em>" in lit["hits"]["hits"][0]["highlight"]["text"][0]
    with pytest.raises(ParsingError, match="requires \\[queries\\]"):
        notes.search("n", {"query": {"dis_max": {"queries": []}}})
    with pytest.raises(IllegalArgument, match="between 0 and 1"):
        notes.search("n", {"query": {"dis_max": {"queries": [text], "tie_breaker": 2}}})


def test_a_phrase_is_highlighted_only_where_it_lies_side_by_side(notes):
    notes.store.put("n", {"text": "Graph first; the view later. Then graph view, and a graph-view."}, "mixed")

    def marked(query):
        body = {"query": query, "highlight": {"fields": {"text": {"number_of_fragments": 0}}}, "size": 20}
        hits = notes.search("n", body)["hits"]["hits"]
        return next(hit["highlight"]["text"][0] for hit in hits if hit["_id"] == "mixed")

    expected = "Graph first; the view later. Then <em>graph</em> <em>view</em>, and a <em>graph</em>-<em>view</em>."
    assert marked({"match_phrase": {"text": "graph view"}}) == expected
    assert marked({"multi_match": {"query": "graph view", "type": "phrase", "fields": ["text"]}}) == expected
    # a word sought on its own is marked wherever it is, beside the phrase
    both = {"bool": {"must": [{"match_phrase": {"text": "graph view"}}], "should": [{"match": {"text": "later"}}]}}
    assert marked(both) == expected.replace("later", "<em>later</em>")
    assert marked({"match": {"text": "graph view"}}).count("<em>") == 6  # a match marks every one of its words


def test_a_wildcard_of_many_stars_over_long_terms(tmp_path):
    """Every piece between stars is found at its leftmost place, so a pattern built to make a backtracking
    matcher explode answers at once, and right (the hostile harness times it over HTTP)."""
    long_values = ["a" * 200 + "b", "a" * 200 + "c", "ab" * 60 + "c", "c"]
    with Store(tmp_path / "long") as s:
        s.create_index("w", {"properties": {"k": {"type": "keyword", "ignore_above": 1000}}})
        for i, value in enumerate(long_values):
            s.put("w", {"k": value}, str(i))
        service = SearchService(s)

        def found(pattern):
            hits = service.search("w", {"query": {"wildcard": {"k": pattern}}})["hits"]["hits"]
            return sorted(int(hit["_id"]) for hit in hits)

        assert found("*a*a*a*a*a*a*a*a*a*a*a*a*c") == [1, 2]
        assert found("a*a?c") == [1, 2]  # the first piece starts the term, the last ends it
        assert found("*b*b*b*c") == [2]
        assert found("a*") == [0, 1, 2] and found("*") == [0, 1, 2, 3] and found("c*c") == []
        assert found("?") == [3] and found("ab*ab*abc") == [2] and found("a*ab?") == [2] and found("a*b") == [0]


def test_case_insensitive_prefix_and_wildcard_fold_the_same_way(tmp_path):
    """Character by character, as each other: a prefix that folded "ß" to "ss" while a wildcard did not would
    give two answers to one question."""
    with Store(tmp_path / "fold") as s:
        s.create_index("f", {"properties": {"k": {"type": "keyword"}}})
        for i, value in enumerate(["Straße", "STRASSE 1", "strasse", "ÉTÉ", "été"]):
            s.put("f", {"k": value}, str(i))
        service = SearchService(s)

        def found(kind, value):
            body = {"query": {kind: {"k": {"value": value, "case_insensitive": True}}}}
            return sorted(int(hit["_id"]) for hit in service.search("f", body)["hits"]["hits"])

        for value, expected in (("STRASSE", [1, 2]), ("straße", [0]), ("été", [3, 4]), ("É", [3, 4])):
            assert found("prefix", value) == expected == found("wildcard", value + "*"), value
