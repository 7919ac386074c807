"""Agent memory, the write side: namespaces, store, dedup, list, forget (retire and purge), drop."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xerj_core.errors import GraphError, GraphNotFound
from xerj_core.memory.namespace import TEXT_VECTOR_FIELD, memory_index

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture
def memory(engine):
    """``engine.memory`` with a clock that ticks one second per call from T0."""
    service = engine.memory
    ticks = itertools.count()
    service.clock = lambda: T0 + 1000 * next(ticks)
    return service


def refusal(fn, *args, **kwargs) -> GraphError:
    with pytest.raises(GraphError) as caught:
        fn(*args, **kwargs)
    assert caught.value.status == 400
    assert caught.value.to_body() == {"error": {"type": "graph_error", "reason": caught.value.reason}, "status": 400}
    return caught.value


def not_found(fn, *args, **kwargs) -> GraphNotFound:
    with pytest.raises(GraphNotFound) as caught:
        fn(*args, **kwargs)
    assert caught.value.status == 404
    return caught.value


# -- namespaces ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ns, fragment", [
    ("", "non-empty"),
    ("Agent", "first character"),
    ("_agent", "first character"),
    ("a gent", "only lowercase"),
    ("a..b", "'..'"),
    ("kb-edges", "-edges"),
    ("a" * 201, "limit is 200"),
])
def test_namespace_rules(memory, ns, fragment):
    for call in (lambda: memory.store(ns, {"text": "x"}), lambda: memory.list(ns, {}),
                 lambda: memory.recall(ns, {"query": "x"}), lambda: memory.drop(ns),
                 lambda: memory.forget(ns, "id")):
        err = refusal(call)
        assert fragment in err.reason and "namespace" in err.reason


def test_index_is_created_lazily_with_the_memory_mapping(memory, engine):
    assert not engine.store.exists(".xerj-memory-agent")
    memory.store("agent", {"text": "first", "metadata": {"tag": "x", "n": 3}})
    mapping = engine.store.get_mapping(".xerj-memory-agent")["properties"]
    assert mapping["text"] == {"type": "text"}
    assert mapping["stored_at"]["type"] == "date" and mapping["forgotten_at"]["type"] == "date"
    # A new namespace gets the best installed embedder (the semantic static one when its extra is there).
    default = engine.embedders[engine.default_embedder]
    assert mapping[TEXT_VECTOR_FIELD] == {"type": "dense_vector", "dims": default.dims, "similarity": "cosine",
                                          "embedder": default.id}
    assert "vector" not in mapping
    # metadata is mapped dynamically from what agents send
    assert mapping["metadata"]["properties"]["tag"]["type"] == "text"
    assert mapping["metadata"]["properties"]["n"]["type"] == "long"


# -- store ---------------------------------------------------------------------------------------

def test_store_answers_created_with_server_time(memory, engine):
    status, body = memory.store("agent", {"text": "the starter needs feeding", "metadata": {"topic": "bread"}})
    assert status == 201
    assert body == {"_id": body["_id"], "created": True, "namespace": "agent", "stored_at": T0}
    source, _ = engine.store.get(memory_index("agent"), body["_id"])
    assert source["text"] == "the starter needs feeding" and source["stored_at"] == T0
    assert source["metadata"] == {"topic": "bread"}
    stored = np.array(source[TEXT_VECTOR_FIELD])
    assert stored.shape == (engine.embedders[engine.default_embedder].dims,)
    assert abs(np.linalg.norm(stored) - 1) < 1e-4


def test_a_memory_is_recallable_by_the_very_next_call(memory):
    _, body = memory.store("agent", {"text": "the meeting moved to thursday"})
    hits = memory.recall("agent", {"query": "thursday"})["hits"]
    assert [h["_id"] for h in hits] == [body["_id"]]


@pytest.mark.parametrize("body, fragment", [
    ({}, "neither"),
    ({"metadata": {"a": 1}}, "neither"),
    ({"text": "   "}, "neither ([text] is blank)"),
    ({"text": "x", "colour": "red"}, "[colour]"),
    ({"text": 5}, "[text]"),
    ({"text": "x", "metadata": [1]}, "[metadata]"),
    ({"vector": []}, "[vector]"),
    ({"vector": [1, "a"]}, "[vector]"),
    ({"vector": [1, float("nan")]}, "[vector]"),
    ({"vector": [0.1] * 4097}, "[vector]"),
    ({"text": "x", "dedup": "yes"}, "[dedup]"),
    ({"text": "x", "dedup": True, "dedup_threshold": 1.5}, "[dedup_threshold]"),
    ({"text": "x", "dedup_threshold": 0.9}, "[dedup_threshold]"),
    ("just text", "JSON object"),
])
def test_store_refusals(memory, engine, body, fragment):
    assert fragment in refusal(memory.store, "agent", body).reason
    assert not engine.store.exists(".xerj-memory-agent")


def test_caller_vectors_size_the_field_and_a_wrong_dimension_is_refused(memory, engine):
    memory.store("agent", {"vector": [1.0, 0.0, 0.0]})
    mapping = engine.store.get_mapping(".xerj-memory-agent")["properties"]
    assert mapping["vector"]["dims"] == 3
    memory.store("agent", {"text": "with both", "vector": [0.0, 1.0, 0.0]})
    err = refusal(memory.store, "agent", {"vector": [1.0, 0.0]})
    assert "[vector] has 2 dimensions" in err.reason and "3" in err.reason
    refusal(memory.store, "agent", {"vector": [1.0, 0.0, 0.0, 0.0]})
    # Finite but beyond float32 (where vectors are stored and scored): refused as the caller's vector, by name.
    err = refusal(memory.store, "agent", {"vector": [1.0, 1e300, 0.0]})
    assert err.reason == "[vector] must hold numbers within the float32 range; element 1 is [1e+300]"
    # an int too large for a float (a JSON parser may give one) is the same refusal, not an OverflowError
    err = refusal(memory.store, "agent", {"vector": [10**400, 0.0, 0.0]})
    assert err.reason.startswith("[vector] must hold numbers within the float32 range; element 0 is [1000")
    assert memory.list("agent", {})["total"] == 2


def test_metadata_of_the_wrong_kind_is_refused_naming_metadata(memory):
    memory.store("agent", {"text": "x", "metadata": {"n": 1}})
    err = refusal(memory.store, "agent", {"text": "y", "metadata": {"n": "not a number"}})
    assert "[metadata]" in err.reason


# -- dedup ---------------------------------------------------------------------------------------

def test_dedup_skips_a_near_duplicate_and_answers_the_existing_id(memory):
    _, first = memory.store("agent", {"text": "the sourdough starter needs feeding twice a day"})
    status, body = memory.store("agent", {"text": "the sourdough starter needs feeding twice a day", "dedup": True})
    assert status == 200
    assert body == {"created": False, "deduplicated": True, "_id": first["_id"], "namespace": "agent"}
    assert memory.list("agent", {})["total"] == 1


def test_dedup_threshold_and_default(memory):
    # The thresholds below are reasoned for the lexical embedder (its cosine here is 0.90); the default
    # embedder depends on the extras installed, and the static ones sit within 0.01 of 0.95 on this pair.
    memory.create("agent", {"embedder": "lexical-feature-hash"})
    memory.store("agent", {"text": "the sourdough starter needs feeding twice a day"})
    near = {"text": "the sourdough starter needs feeding twice a week", "dedup": True}
    # A close paraphrase is below the default 0.95 for the lexical embedder, above a looser threshold.
    assert memory.store("agent", near)[0] == 201
    assert memory.store("agent", {**near, "text": near["text"] + " now", "dedup_threshold": 0.5})[0] == 200
    assert memory.store("agent", {"text": "an unrelated memory about trains", "dedup": True,
                                  "dedup_threshold": 0.5})[0] == 201


def test_dedup_off_by_default_and_forgotten_memories_do_not_absorb_writes(memory):
    _, first = memory.store("agent", {"text": "same words"})
    assert memory.store("agent", {"text": "same words"})[0] == 201
    memory.drop("agent")
    _, first = memory.store("agent", {"text": "same words"})
    memory.forget("agent", first["_id"])
    status, body = memory.store("agent", {"text": "same words", "dedup": True})
    assert status == 201 and body["_id"] != first["_id"]


def test_dedup_by_caller_vector(memory):
    _, first = memory.store("agent", {"vector": [1.0, 0.0, 0.0]})
    status, body = memory.store("agent", {"vector": [0.99, 0.05, 0.0], "dedup": True})
    assert (status, body["_id"]) == (200, first["_id"])
    assert memory.store("agent", {"vector": [0.0, 1.0, 0.0], "dedup": True})[0] == 201


def test_a_failing_dedup_probe_never_blocks_the_write(memory, monkeypatch):
    memory.store("agent", {"text": "x y z"})

    def broken(*args, **kwargs):
        raise RuntimeError("probe failed")

    monkeypatch.setattr("xerj_core.memory.service.knn_top", broken)
    status, body = memory.store("agent", {"text": "x y z", "dedup": True})
    assert status == 201 and body["created"] is True
    # The first store of a namespace has nothing to probe and simply writes.
    assert memory.store("fresh", {"text": "x", "dedup": True})[0] == 201


# -- list ----------------------------------------------------------------------------------------

def test_list_pages_newest_first(memory):
    ids = [memory.store("agent", {"text": f"memory {n}", "metadata": {"n": n}})[1]["_id"] for n in range(5)]
    page = memory.list("agent", {"size": "2"})
    assert page["total"] == 5 and page["from"] == 0 and page["size"] == 2
    assert [m["_id"] for m in page["memories"]] == ids[::-1][:2]
    assert memory.list("agent", {"from": 4, "size": 10})["memories"][0]["_id"] == ids[0]
    shown = memory.list("agent", {})["memories"][0]
    assert shown == {"_id": ids[4], "text": "memory 4", "metadata": {"n": 4}, "stored_at": T0 + 4000,
                     "trust": "asserted"}


@pytest.mark.parametrize("params, fragment", [
    ({"size": "many"}, "[size]"),
    ({"size": -1}, "[size]"),
    ({"from": "x"}, "[from]"),
    ({"from": 9_999, "size": 2}, "[from] + [size]"),
    ({"include_forgotten": "maybe"}, "[include_forgotten]"),
    ({"sort": "asc"}, "[sort]"),
])
def test_list_refusals(memory, params, fragment):
    memory.store("agent", {"text": "x"})
    assert fragment in refusal(memory.list, "agent", params).reason


def test_missing_namespace_is_404(memory):
    not_found(memory.list, "nobody", {})
    not_found(memory.recall, "nobody", {"query": "x"})
    not_found(memory.forget, "nobody", "x")


# -- forget / purge / drop -----------------------------------------------------------------------

def test_forget_retires_and_list_hides_it_unless_asked(memory, engine):
    _, kept = memory.store("agent", {"text": "keep me"})
    _, gone = memory.store("agent", {"text": "forget me"})
    answer = memory.forget("agent", gone["_id"])
    assert answer == {"_id": gone["_id"], "namespace": "agent", "forgotten": True, "forgotten_at": T0 + 2000}
    assert [m["_id"] for m in memory.list("agent", {})["memories"]] == [kept["_id"]]
    everything = memory.list("agent", {"include_forgotten": "true"})
    assert everything["total"] == 2
    assert everything["memories"][0]["forgotten_at"] == T0 + 2000
    # The document is retired, not destroyed.
    assert engine.store.get(memory_index("agent"), gone["_id"])[0]["forgotten_at"] == T0 + 2000
    again = memory.forget("agent", gone["_id"])
    assert again == {"_id": gone["_id"], "namespace": "agent", "forgotten": False,
                     "already_forgotten_at": T0 + 2000}
    assert memory.recall("agent", {"query": "forget me"})["hits"][0]["_id"] == kept["_id"]
    assert all(h["_id"] != gone["_id"] for h in memory.recall("agent", {"query": "forget"})["hits"])


def test_purge_erases_for_good(memory, engine):
    _, gone = memory.store("agent", {"text": "erase me"})
    assert memory.forget("agent", gone["_id"], purge=True) == {"_id": gone["_id"], "namespace": "agent",
                                                                "purged": True}
    assert engine.store.get(memory_index("agent"), gone["_id"]) is None
    assert memory.list("agent", {"include_forgotten": True})["total"] == 0
    assert memory.recall("agent", {"query": "erase", "as_of": T0 + 10_000})["hits"] == []
    not_found(memory.forget, "agent", gone["_id"], purge=True)
    not_found(memory.forget, "agent", gone["_id"])


def test_drop_deletes_the_namespace_only(memory, engine):
    memory.store("agent", {"text": "x"})
    engine.graph.link("agent", {"src": "a", "dst": "b", "type": "mentions"})
    assert memory.drop("agent") == {"acknowledged": True, "namespace": "agent", "dropped": True}
    assert not engine.store.exists(".xerj-memory-agent")
    assert engine.store.exists(".xerj-memory-agent-edges")
    assert memory.drop("agent") == {"acknowledged": True, "namespace": "agent", "dropped": False}
    not_found(memory.list, "agent", {})
    # The next store starts the namespace afresh.
    assert memory.store("agent", {"text": "again"})[0] == 201
