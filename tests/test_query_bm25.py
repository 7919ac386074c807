"""BM25 scores against an independent computation, live writes and deletes without refresh, multi-field combination."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core.errors import IllegalArgument
from xerj_core.query import bm25
from xerj_core.query.service import SearchService
from xerj_core.store import BulkOp, Store

K1, B = 1.2, 0.75


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def reference_bm25(docs: dict[str, str], query: str) -> dict[str, float]:
    """Textbook Lucene BM25 over ``{id: text}``, computed from scratch with Python counters."""
    tokenized = {i: words(t) for i, t in docs.items()}
    with_tokens = {i: toks for i, toks in tokenized.items() if toks}
    n_docs = len(with_tokens)
    avgdl = sum(len(t) for t in with_tokens.values()) / n_docs if n_docs else 1.0
    df = Counter(t for toks in with_tokens.values() for t in set(toks))
    scores = {}
    for doc_id, toks in with_tokens.items():
        tf = Counter(toks)
        total, hit = 0.0, False
        for term in words(query):  # repeated query words count again, like ES's match
            if tf[term]:
                hit = True
                idf = math.log(1 + (n_docs - df[term] + 0.5) / (df[term] + 0.5))
                total += idf * tf[term] / (tf[term] + K1 * (1 - B + B * len(toks) / avgdl))
        if hit:
            scores[doc_id] = total
    return scores


def zipf_corpus(n_docs: int, vocab: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab + 1) ** 1.1
    weights /= weights.sum()
    lengths = rng.integers(1, 40, n_docs)
    picks = rng.choice(vocab, lengths.sum(), p=weights)
    out, at = [], 0
    for length in lengths:
        out.append(" ".join(f"w{j}" if j % 7 else f"W{j}" for j in picks[at:at + length]))
        at += length
    return out


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data", tail_rows=64) as s:
        yield s


@pytest.fixture
def corpus(store):
    """600 Zipfian documents over several sealed segments and a tail, with overwrites and deletes."""
    texts = zipf_corpus(600, 300, seed=7)
    store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
    docs = {str(i): t for i, t in enumerate(texts)}
    for i in range(0, 600, 37):
        store.delete("c", str(i))
        docs.pop(str(i))
    for i in range(5, 600, 41):
        if str(i) in docs:
            docs[str(i)] = docs[str(i)] + " w3 w3"
            store.put("c", {"text": docs[str(i)]}, str(i))
    return docs


QUERIES = ["w1", "w2 w5", "w0 w17 w250", "w3 w3 w9", "W7 w14", "w299 w298", "nothing here", "w1 w2 w3 w4 w5 w6"]


def test_scores_equal_an_independent_bm25(store, corpus):
    with store.reader("c") as reader:
        assert reader.segments and reader.tail_count  # sealed segments and a tail both in play
        for query in QUERIES:
            expected = reference_bm25(corpus, query)
            ranked = bm25.bm25_top(reader, "text", query, 10_000)
            got = {reader.id_of(r): s for r, s in ranked.pairs()}
            assert set(got) == set(expected), query
            for doc_id, score in expected.items():
                assert got[doc_id] == pytest.approx(score, rel=1e-5, abs=1e-5)
            assert list(ranked.scores) == sorted(ranked.scores, reverse=True)
            top = bm25.bm25_top(reader, "text", query, 10)
            assert list(top.scores) == pytest.approx(sorted(expected.values(), reverse=True)[:10], abs=1e-5)


def test_search_api_scores_match(store, corpus):
    service = SearchService(store)
    for query in QUERIES:
        expected = reference_bm25(corpus, query)
        response = service.search("c", {"query": {"match": {"text": query}}, "size": 10})
        assert response["hits"]["total"]["value"] == len(expected)
        best = sorted(expected.values(), reverse=True)[:10]
        assert [h["_score"] for h in response["hits"]["hits"]] == pytest.approx(best, abs=1e-5)
        for hit in response["hits"]["hits"]:
            assert hit["_score"] == pytest.approx(expected[hit["_id"]], abs=1e-5)
        if expected:
            assert response["hits"]["max_score"] == pytest.approx(max(expected.values()), abs=1e-5)


def test_filter_mask_restricts_before_ranking(store, corpus):
    with store.reader("c") as reader:
        allowed = np.zeros(reader.n_rows, bool)
        allowed[::3] = True
        ids_allowed = {reader.id_of(int(r)) for r in np.flatnonzero(allowed & reader.live)}
        for query in ("w1", "w2 w5"):
            expected = {i: s for i, s in reference_bm25(corpus, query).items() if i in ids_allowed}
            ranked = bm25.bm25_top(reader, "text", query, 5, allowed)
            assert list(ranked.scores) == pytest.approx(sorted(expected.values(), reverse=True)[:5], abs=1e-5)
            assert all(reader.id_of(r) in ids_allowed for r in ranked.rows.tolist())


def test_writes_and_deletes_are_scored_at_once(store):
    service = SearchService(store)
    docs = {"a": "red fox", "b": "red red dog", "c": "blue whale"}
    for doc_id, text in docs.items():
        store.put("live", {"text": text}, doc_id)

    def check():
        expected = reference_bm25(docs, "red fox")
        got = {h["_id"]: h["_score"] for h in service.search("live", {"query": {"match": {"text": "red fox"}}})[
            "hits"]["hits"]}
        assert got.keys() == expected.keys()
        for doc_id, score in expected.items():
            assert got[doc_id] == pytest.approx(score, abs=1e-6)
        count = service.count("live", {"query": {"match": {"text": "red fox"}}})["count"]
        assert count == len(expected)

    check()
    docs["d"] = "fox fox fox"  # changes N, avgdl and the idf of "fox": every score moves
    store.put("live", {"text": docs["d"]}, "d")
    check()
    docs["a"] = "grey wolf"  # an overwrite: the old row stops counting in df and avgdl
    store.put("live", {"text": docs["a"]}, "a")
    check()
    del docs["b"]
    store.delete("live", "b")
    check()
    assert "b" not in {h["_id"] for h in service.search("live", {"query": {"match_all": {}}})["hits"]["hits"]}
    assert service.count("live", None)["count"] == 3


def test_operator_and_minimum_should_match(store, corpus):
    service = SearchService(store)
    query = "w1 w2 w5"
    tokenized = {i: set(words(t)) for i, t in corpus.items()}
    all_three = {i for i, toks in tokenized.items() if {"w1", "w2", "w5"} <= toks}
    two = {i for i, toks in tokenized.items() if len({"w1", "w2", "w5"} & toks) >= 2}
    scores = reference_bm25(corpus, query)
    for spec, expected in ((({"operator": "and"}), all_three), ({"minimum_should_match": 2}, two),
                           ({"minimum_should_match": "67%"}, two), ({"minimum_should_match": "66%"}, {i for i, t in tokenized.items() if {"w1", "w2", "w5"} & t}), ({"minimum_should_match": "-1"}, two)):
        response = service.search("c", {"query": {"match": {"text": {"query": query, **spec}}}, "size": 1000})
        got = {h["_id"]: h["_score"] for h in response["hits"]["hits"]}
        assert set(got) == expected, spec
        for doc_id in expected:
            assert got[doc_id] == pytest.approx(scores[doc_id], abs=1e-5)


texts = st.lists(st.sampled_from(["ant", "bee", "cat", "dog", "eel", "Fox"]), max_size=5).map(" ".join)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=12), texts, st.sampled_from(["best_fields", "most_fields"]),
       st.sampled_from([0.0, 0.3]))
def test_multi_field_combinations(tmp_path_factory, docs, query, combine, tie):
    with Store(tmp_path_factory.mktemp("mf"), tail_rows=4) as store:
        store.bulk([BulkOp("index", "m", str(i), {"title": t, "body": b}) for i, (t, b) in enumerate(docs)])
        titles = {str(i): t for i, (t, _) in enumerate(docs)}
        bodies = {str(i): b for i, (_, b) in enumerate(docs)}
        per_title, per_body = reference_bm25(titles, query), reference_bm25(bodies, query)
        expected = {}
        for doc_id in set(per_title) | set(per_body):
            a, b = per_title.get(doc_id, 0.0), per_body.get(doc_id, 0.0)
            expected[doc_id] = a + b if combine == "most_fields" else max(a, b) + tie * min(a, b)
        with store.reader("m") as reader:
            ranked = bm25.bm25_top(reader, ["title", "body"], query, 100, combine=combine, tie_breaker=tie)
            got = {reader.id_of(r): s for r, s in ranked.pairs()}
        assert got.keys() == expected.keys()
        for doc_id, score in expected.items():
            assert got[doc_id] == pytest.approx(score, abs=1e-6)
        service = SearchService(store)
        body = {"query": {"multi_match": {"query": query, "fields": ["title", "body"], "type": combine,
                                          "tie_breaker": tie}}, "size": 100}
        hits = {h["_id"]: h["_score"] for h in service.search("m", body)["hits"]["hits"]}
        assert hits.keys() == expected.keys()
        for doc_id, score in expected.items():
            assert hits[doc_id] == pytest.approx(score, abs=1e-6)


def test_term_on_text_matches_one_unanalyzed_token(store, corpus):
    service = SearchService(store)
    lower = service.search("c", {"query": {"term": {"text": "w7"}}, "size": 1000})["hits"]
    upper = service.search("c", {"query": {"term": {"text": "W7"}}, "size": 1000})["hits"]
    expected = reference_bm25(corpus, "w7")
    assert {h["_id"] for h in lower["hits"]} == set(expected)
    assert upper["total"]["value"] == 0  # indexed tokens are lowercase; term does not analyze


def test_bm25_needs_a_text_field(store):
    store.put("k", {"tag": "x", "n": 1}, "1")
    store.put_mapping("k", {"properties": {"kw": {"type": "keyword"}}})
    with store.reader("k") as reader:
        with pytest.raises(IllegalArgument):
            bm25.bm25_top(reader, "kw", "x", 10)
        assert len(bm25.bm25_top(reader, "unmapped", "x", 10)) == 0


def test_agrees_with_bm25s_lucene_variant(store, corpus):
    bm25s = pytest.importorskip("bm25s")
    ids = sorted(corpus, key=int)
    corpus_tokens = [words(corpus[i]) for i in ids]
    retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
    retriever.index(corpus_tokens, show_progress=False)
    with store.reader("c") as reader:
        for query in ("w1", "w2 w5", "w0 w17 w250"):
            expected = retriever.get_scores(words(query))
            ranked = bm25.bm25_top(reader, "text", query, 10_000)
            got = {reader.id_of(r): s for r, s in ranked.pairs()}
            for position, doc_id in enumerate(ids):
                assert got.get(doc_id, 0.0) == pytest.approx(float(expected[position]), abs=1e-4)



def _reference_top(reader, query: str, k: int):
    """Score every live row from raw postings and column lengths, with no cache of any kind."""
    terms = Counter(words(query))
    lengths = reader.column("text").values.astype(np.float64)
    live = reader.live & (lengths > 0)
    n_docs = int(np.count_nonzero(live))
    avgdl = lengths[live].sum() / n_docs
    scores = np.zeros(reader.n_rows)
    for term, mult in terms.items():
        rows, tfs = reader.postings("text", term)
        rows, tfs = rows[reader.live[rows]], tfs[reader.live[rows]].astype(np.float64)
        idf = math.log(1 + (n_docs - len(rows) + 0.5) / (len(rows) + 0.5))
        scores[rows] += mult * idf * tfs / (tfs + K1 * (1 - B + B * lengths[rows] / avgdl))
    rows = np.flatnonzero(scores)
    order = np.lexsort((rows, -scores[rows]))[:k]
    return rows[order].tolist(), scores[rows][order].tolist(), len(rows)


def test_top_k_is_exact_across_seals_and_writes(tmp_path):
    """Sealed segments plus a tail, overwrites, deletes and tied scores: after every write the top-k and the hit
    count equal a from-scratch computation (the caches that outlive a write must not leave stale weights)."""
    with Store(tmp_path / "data", tail_rows=256) as store:
        texts = zipf_corpus(2000, 300, seed=3)
        texts[100] = texts[1100] = texts[1900] = "w290 w291"  # identical documents tie exactly
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        for i in range(0, 2000, 53):
            store.delete("c", str(i))
        for round_ in range(40):  # crosses a seal: 40 writes over a 256-row tail already part full
            with store.reader("c") as reader:
                for query in ("w1 w2 w5", "w290 w291", "w3 w3 w9", "w0 w17 w250 w1 w1"):
                    for k in (1, 10):
                        ranked, count = bm25.top_and_count(reader, "text", bm25.query_terms(query), k)
                        rows, scores, total = _reference_top(reader, query, k)
                        assert ranked.rows.tolist() == rows, (query, round_)
                        assert ranked.scores.tolist() == pytest.approx(scores, rel=1e-12), (query, round_)
                        assert count == total
            store.put("c", {"text": f"w290 w291 w{round_} w1"}, f"new-{round_}")
            store.put("c", {"text": texts[round_ * 7 + 1] + " w2"}, str(round_ * 7 + 1))
            store.delete("c", str(round_ * 11 + 2))
