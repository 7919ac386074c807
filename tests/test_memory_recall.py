"""Agent memory, recall: every mode, the filter, recency, as_of, and every refusal."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xerj_core.graph.brain import HOPS_CAP_REASON
from xerj_core.memory.requests import LEARNED_REFUSAL

from .test_memory_store import T0, not_found, refusal


@pytest.fixture
def memory(engine):
    service = engine.memory
    ticks = itertools.count()
    service.clock = lambda: T0 + 1000 * next(ticks)
    return service


TEXTS = [
    "sourdough bread needs a lively starter",
    "the starter ferments flour and water for two days",
    "trains to the coast leave every hour",
    "fermentation turns cabbage into sauerkraut",
    "the cat sleeps on the warm sofa",
]


@pytest.fixture
def notes(memory):
    """Five memories stored one second apart; returns their ids in store order."""
    return [memory.store("notes", {"text": t, "metadata": {"n": i, "tag": "food" if i in (0, 1, 3) else "other"}})
            [1]["_id"] for i, t in enumerate(TEXTS)]


def ids(result) -> list[str]:
    return [h["_id"] for h in result["hits"]]


# -- modes ---------------------------------------------------------------------------------------

def test_bm25_is_the_plain_query_mode(memory, notes, engine):
    result = memory.recall("notes", {"query": "starter"})
    assert result["mode"] == "bm25" and result["namespace"] == "notes" and result["k"] == 10
    assert set(ids(result)) == {notes[0], notes[1]}
    hit = result["hits"][0]
    assert set(hit) == {"_id", "_score", "text", "metadata", "stored_at", "trust"}
    # The same BM25 the search engine serves on the backing index.
    searched = engine.search.search(".xerj-memory-notes", {"query": {"match": {"text": "starter"}}})
    assert [(h["_id"], pytest.approx(h["_score"])) for h in searched["hits"]["hits"]] == \
        [(h["_id"], h["_score"]) for h in result["hits"]]


# Memories in the scripts written without spaces between words, each word asked for standing inside a sentence
UNSPACED = {"กาแฟ": "ฉันชอบดื่มกาแฟตอนเช้าทุกวัน", "ร้านอาหาร": "ร้านอาหารไทยใกล้บ้านปิดวันจันทร์",
            "จัดการไฟล์": "คุณสามารถจัดการไฟล์และโฟลเดอร์ได้หลายวิธี", "ឧបករណ៍": "ដំឡើង Obsidian Sync នៅលើឧបករណ៍របស់អ្នក",
            "東京": "東京都に住んでいます", "应用商店": "通过设备的应用商店进行更新", "텍스트": "한국어 텍스트입니다"}


@pytest.mark.parametrize("mode", [{}, {"semantic": True}, {"hybrid": True}])
def test_a_word_inside_a_thai_khmer_or_cjk_sentence_recalls_its_memory_first(memory, mode):
    """The search leg cuts such text into pairs (xerj_core.text); the built-in embedders keep whole runs, whose
    character n-grams still meet the word's: every mode puts the memory holding the word first."""
    stored = {word: memory.store("unspaced", {"text": sentence})[1]["_id"] for word, sentence in UNSPACED.items()}
    memory.store("unspaced", {"text": "the meeting moved to Thursday afternoon"})
    for word, memory_id in stored.items():
        assert ids(memory.recall("unspaced", {"query": word, **mode}))[0] == memory_id, word


def test_k_cuts_and_defaults_to_ten(memory):
    for n in range(12):
        memory.store("many", {"text": f"common word {n}"})
    assert len(memory.recall("many", {"query": "common"})["hits"]) == 10
    assert len(memory.recall("many", {"query": "common", "k": 3})["hits"]) == 3


def test_semantic_embeds_the_query_with_the_namespace_embedder(memory, notes):
    result = memory.recall("notes", {"query": "fermenting", "semantic": True, "k": 2})
    assert result["mode"] == "semantic"
    # "fermenting" shares no word with any memory, only character n-grams with "ferments"/"fermentation".
    assert memory.recall("notes", {"query": "fermenting"})["hits"] == []
    assert set(ids(result)) == {notes[1], notes[3]}


def test_semantic_uses_the_recorded_embedder_not_the_configured_one(memory, notes, engine):
    engine.config.embedder = "no-such-embedder"
    assert memory.recall("notes", {"query": "fermenting", "semantic": True, "k": 1})["hits"]
    # A namespace created now takes the configured embedder, which is not installed: a clear refusal.
    assert "no-such-embedder" in refusal(memory.store, "other", {"text": "x"}).reason


def test_vector_mode_is_exact_knn_on_caller_vectors(memory):
    east = memory.store("vec", {"text": "east", "vector": [1.0, 0.0]})[1]["_id"]
    north = memory.store("vec", {"text": "north", "vector": [0.0, 1.0]})[1]["_id"]
    memory.store("vec", {"text": "no vector here"})
    result = memory.recall("vec", {"vector": [0.9, 0.1]})
    assert result["mode"] == "vector" and ids(result) == [east, north]
    cos = 0.9 / np.hypot(0.9, 0.1)
    assert result["hits"][0]["_score"] == pytest.approx((1 + cos) / 2)
    assert "dimensions" in refusal(memory.recall, "vec", {"vector": [1.0, 0.0, 0.0]}).reason


def test_vector_recall_on_a_namespace_without_vectors_is_refused(memory, notes):
    assert "[vector]" in refusal(memory.recall, "notes", {"vector": [1.0, 0.0]}).reason


def test_hybrid_rrf_is_the_sum_of_reciprocal_ranks(memory, notes):
    query = "starter fermentation"
    lexical = ids(memory.recall("notes", {"query": query}))
    semantic = ids(memory.recall("notes", {"query": query, "semantic": True}))
    result = memory.recall("notes", {"query": query, "hybrid": True})
    assert result["mode"] == "hybrid" and result["fusion"] == "rrf"
    expected = {}
    for leg in (lexical, semantic):
        for rank, doc in enumerate(leg, 1):
            expected[doc] = expected.get(doc, 0.0) + 1 / (60 + rank)
    assert {h["_id"]: pytest.approx(h["_score"]) for h in result["hits"]} == expected
    scores = [h["_score"] for h in result["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_hybrid_linear_sums_min_max_normalised_legs(memory, notes):
    query = "starter fermentation"
    lexical = memory.recall("notes", {"query": query})["hits"]
    semantic = memory.recall("notes", {"query": query, "semantic": True})["hits"]
    result = memory.recall("notes", {"query": query, "hybrid": True, "fusion": "linear"})
    assert result["fusion"] == "linear"
    expected: dict[str, float] = {}
    for leg in (lexical, semantic):
        scores = np.array([h["_score"] for h in leg])
        norm = (scores - scores.min()) / (scores.max() - scores.min())
        for h, value in zip(leg, norm):
            expected[h["_id"]] = expected.get(h["_id"], 0.0) + value
    assert {h["_id"]: pytest.approx(h["_score"]) for h in result["hits"]} == expected


def test_learned_fusion_is_refused_with_the_reason(memory, notes):
    err = refusal(memory.recall, "notes", {"query": "x", "hybrid": True, "fusion": "learned"})
    assert err.reason == LEARNED_REFUSAL and "misrepresent the ranking asked for" in err.reason


# -- filter, recency, as_of ----------------------------------------------------------------------

def test_filter_is_a_bool_filter_over_dynamic_metadata(memory, notes):
    result = memory.recall("notes", {"query": "starter fermentation sofa", "filter": {"term": {"metadata.tag": "other"}}})
    assert ids(result) == [notes[4]]
    ranged = memory.recall("notes", {"query": "the", "filter": {"range": {"metadata.n": {"gte": 3}}}})
    assert set(ids(ranged)) == {notes[4]}  # "the" is in memories 1, 4 and only 4 has n >= 3
    both = memory.recall("notes", {"query": "starter", "semantic": True, "filter": {
        "bool": {"must": [{"term": {"metadata.tag.keyword": "food"}}], "must_not": [{"term": {"metadata.n": 0}}]}}})
    assert set(ids(both)) == {notes[1], notes[3]}
    # A filter narrows without scoring: the filtered hit keeps its unfiltered score.
    plain = {h["_id"]: h["_score"] for h in memory.recall("notes", {"query": "starter"})["hits"]}
    narrowed = memory.recall("notes", {"query": "starter", "filter": {"term": {"metadata.n": 1}}})["hits"]
    assert narrowed[0]["_score"] == pytest.approx(plain[notes[1]])


def test_a_filter_array_means_all_of_them(memory, notes):
    result = memory.recall("notes", {"query": "starter fermentation", "filter": [
        {"term": {"metadata.tag": "food"}}, {"range": {"metadata.n": {"gte": 1}}}]})
    assert set(ids(result)) == {notes[1], notes[3]}


def test_a_namespace_keeps_the_semantic_embedder_it_was_created_with(engine):
    from xerj_embedders.static import StaticEmbedder

    if StaticEmbedder().unavailable():
        pytest.skip("the semantic extra is not installed")
    engine.config.embedder = "wordllama-l2-supercat-256"
    memory = engine.memory
    bread = memory.store("semantic", {"text": "I baked a loaf of sourdough this morning"})[1]["_id"]
    memory.store("semantic", {"text": "The quarterly tax filing is due next week"})
    mapping = engine.store.get_mapping(".xerj-memory-semantic")["properties"]["text_vector"]
    assert mapping["embedder"] == "wordllama-l2-supercat-256" and mapping["dims"] == 256
    engine.config.embedder = "lexical-feature-hash"
    # No shared word with the bread memory: only a model relates them.
    assert ids(memory.recall("semantic", {"query": "fresh bakery goods", "semantic": True, "k": 1})) == [bread]


def test_a_malformed_filter_is_refused_naming_filter(memory, notes):
    assert refusal(memory.recall, "notes", {"query": "x", "filter": {"nonsense": {}}}).reason.startswith("[filter]")
    assert "[filter]" in refusal(memory.recall, "notes", {"query": "x", "filter": [1]}).reason
    assert "[filter]" in refusal(memory.recall, "notes", {"query": "x", "filter": []}).reason


def test_recency_weight_blends_normalised_score_and_recency(memory, notes):
    base = memory.recall("notes", {"query": "the"})["hits"]
    w = 0.4
    scores = np.array([h["_score"] for h in base])
    stored = np.array([h["stored_at"] for h in base], np.float64)
    norm_s = (scores - scores.min()) / (scores.max() - scores.min())
    norm_r = (stored - stored.min()) / (stored.max() - stored.min())
    expected = {h["_id"]: (1 - w) * s + w * r for h, s, r in zip(base, norm_s, norm_r)}
    result = memory.recall("notes", {"query": "the", "recency_weight": w})
    assert {h["_id"]: pytest.approx(h["_score"]) for h in result["hits"]} == expected
    newest = memory.recall("notes", {"query": "the", "recency_weight": 1.0})
    assert ids(newest)[0] == notes[4]


def test_recency_reranks_an_overfetched_pool(memory):
    # 60 memories of distinct lengths, so BM25 ranks them by length; the newest is 24th by score.
    # With k=1 a recency blend can only promote it because max(k*4, 50) candidates were fetched.
    for n in range(60):
        memory.store("pool", {"text": "alpha " * ((n * 37) % 60) + "omega"})
    newest = memory.list("pool", {"size": 1})["memories"][0]["_id"]
    ranked = ids(memory.recall("pool", {"query": "omega", "k": 60}))
    assert ranked.index(newest) == 23
    assert ids(memory.recall("pool", {"query": "omega", "k": 1, "recency_weight": 1.0})) == [newest]


def test_as_of_recalls_what_was_remembered_then(memory):
    first = memory.store("t", {"text": "the dentist is on monday"})[1]  # T0
    second = memory.store("t", {"text": "the dentist moved to tuesday"})[1]  # T0+1s
    memory.forget("t", first["_id"])  # forgotten at T0+2s
    query = {"query": "dentist"}
    assert ids(memory.recall("t", query)) == [second["_id"]]
    assert ids(memory.recall("t", {**query, "as_of": T0 + 500})) == [first["_id"]]
    assert set(ids(memory.recall("t", {**query, "as_of": T0 + 1500}))) == {first["_id"], second["_id"]}
    assert ids(memory.recall("t", {**query, "as_of": T0 + 2000})) == [second["_id"]]
    assert memory.recall("t", {**query, "as_of": T0 - 1})["hits"] == []
    # RFC3339 is accepted too; a hit forgotten since then says when.
    then = memory.recall("t", {**query, "as_of": "2026-01-01T00:00:01.500Z"})
    assert then["as_of"] == T0 + 1500
    assert {h["_id"]: h.get("forgotten_at") for h in then["hits"]} == {first["_id"]: T0 + 2000,
                                                                        second["_id"]: None}


# -- refusals ------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, fragment", [
    ({}, "exactly one of [query] or [vector]"),
    ({"k": 5}, "neither"),
    ({"query": "x", "vector": [1.0]}, "both"),
    ({"query": "x", "size": 3}, "unknown field [size]"),
    ({"query": "x", "sematic": True}, "unknown field [sematic]"),
    ({"query": ""}, "[query]"),
    ({"query": 5}, "[query]"),
    ({"vector": "1,2"}, "[vector]"),
    ({"query": "x", "k": 0}, "[k]"),
    ({"query": "x", "k": "ten"}, "[k]"),
    ({"query": "x", "k": 10_001}, "[k]"),
    ({"query": "x", "semantic": "yes"}, "[semantic]"),
    ({"query": "x", "hybrid": 1}, "[hybrid]"),
    ({"vector": [1.0], "semantic": True}, "[semantic]"),
    ({"vector": [1.0], "hybrid": True}, "[hybrid]"),
    ({"query": "x", "fusion": "linear"}, "[fusion] applies only with [hybrid]"),
    ({"query": "x", "hybrid": True, "fusion": "borda"}, "[fusion]"),
    ({"query": "x", "filter": "tag:x"}, "[filter]"),
    ({"query": "x", "recency_weight": 1.5}, "[recency_weight]"),
    ({"query": "x", "recency_weight": "high"}, "[recency_weight]"),
    ({"query": "x", "as_of": "yesterday"}, "[as_of]"),
    ({"query": "x", "graph": "blend"}, "[graph]"),
    ({"query": "x", "graph": {"mode": "nearby"}}, "[graph.mode]"),
    ({"query": "x", "graph": {}}, "[graph.mode]"),
    ({"query": "x", "graph": {"mode": "blend", "depth": 2}}, "unknown field [depth]"),
    ({"query": "x", "graph": {"mode": "restrict"}}, "[graph.seeds]"),
    ({"query": "x", "graph": {"mode": "restrict", "seeds": []}}, "[graph.seeds]"),
    ({"query": "x", "graph": {"mode": "blend", "seeds": []}}, "[graph.seeds]"),
    ({"query": "x", "graph": {"mode": "blend", "seeds": "a"}}, "[graph.seeds]"),
    ({"query": "x", "graph": {"mode": "blend", "types": "a"}}, "[graph.types]"),
    ({"query": "x", "graph": {"mode": "blend", "weight": "a"}}, "[graph.weight]"),
    ({"query": "x", "graph": {"mode": "blend", "min_confidence": 2}}, "[graph.min_confidence]"),
    ({"query": "x", "graph": {"mode": "blend", "as_of": "soon"}}, "[graph.as_of]"),
    ([], "JSON object"),
])
def test_recall_refusals(memory, notes, body, fragment):
    assert fragment in refusal(memory.recall, "notes", body).reason


@pytest.mark.parametrize("hops", [0, 3, -1, "2", 1.5, True])
def test_hop_cap_carries_the_contract_sentence(memory, notes, hops):
    err = refusal(memory.recall, "notes", {"query": "x", "graph": {"mode": "blend", "hops": hops}})
    assert err.reason == HOPS_CAP_REASON


def test_refusals_come_before_existence(memory):
    # A malformed body is a 400 even for a namespace that does not exist; a well-formed one is a 404.
    refusal(memory.recall, "nobody", {"query": "x", "bogus": 1})
    not_found(memory.recall, "nobody", {"query": "x"})
