"""A namespace's embedder: chosen at creation, reported, fixed once it holds memories, and moved by a resumable re-embed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from xerj_core.cli import build_cli
from xerj_core.embedding import (HYBRID_EMBEDDER, LEXICAL_EMBEDDER, STATIC_EMBEDDER, STATIC_MEAN_EMBEDDER,
                                 TITLED_HYBRID_EMBEDDER)
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import GraphError
from xerj_core.memory import requests as rq
from xerj_core.memory.namespace import TEXT_VECTOR_FIELD, memory_index
from xerj_core.memory.service import memory_document
from xerj_embedders.hybrid import HybridEmbedder
from xerj_embedders.static import MeanStaticEmbedder, StaticEmbedder

from .http_helpers import client  # noqa: F401  (fixture)
from .test_http_graph import assert_graph_error

needs_semantic = pytest.mark.skipif(StaticEmbedder().unavailable() is not None,
                                    reason="the 'semantic' extra is not installed: pip install 'xerj[semantic]'")

CAR = "The car would not start this morning; the battery was flat."
MEMORIES = [CAR, "I planted tomatoes and basil in the garden.", "Quarterly revenue rose after the merger.",
            "The kids built a sandcastle at the beach."]
QUERY = "automobile engine failed to turn over, dead accumulator"


def refusal(fn, *args) -> GraphError:
    with pytest.raises(GraphError) as refused:
        fn(*args)
    return refused.value


def ids(result) -> list[str]:
    return [hit["_id"] for hit in result["hits"]]


# -- choosing an embedder at creation ------------------------------------------------------------

@needs_semantic
def test_recall_uses_the_embedder_each_namespace_was_created_with(engine):
    memory = engine.memory
    assert memory.create("sem", {"embedder": STATIC_EMBEDDER})["embedder"] == STATIC_EMBEDDER
    assert memory.create("lex", {"embedder": LEXICAL_EMBEDDER}) == {
        "acknowledged": True, "namespace": "lex", "created": True, "embedder": LEXICAL_EMBEDDER, "dims": 384}
    stored = {ns: [memory.store(ns, {"text": text})[1]["_id"] for text in MEMORIES] for ns in ("sem", "lex")}
    assert memory.list("sem")["embedder"] == STATIC_EMBEDDER and memory.list("lex")["embedder"] == LEXICAL_EMBEDDER
    mapping = engine.store.get_mapping(memory_index("sem"))["properties"][TEXT_VECTOR_FIELD]
    assert (mapping["embedder"], mapping["dims"]) == (STATIC_EMBEDDER, 256)
    # The query shares no word with the car memory: the semantic embedder ranks it first, hashing cannot.
    semantic = memory.recall("sem", {"query": QUERY, "semantic": True, "k": 4})
    assert ids(semantic)[0] == stored["sem"][0]
    lexical = memory.recall("lex", {"query": QUERY, "semantic": True, "k": 4})
    assert not ids(lexical) or ids(lexical)[0] != stored["lex"][0]


def test_the_configured_embedder_is_the_default_for_new_namespaces_only(tmp_path, pm):
    with Engine(tmp_path / "data", pm, config=EngineConfig(embedder=LEXICAL_EMBEDDER)) as engine:
        engine.memory.store("first", {"text": "hello"})
        assert engine.memory.list("first")["embedder"] == LEXICAL_EMBEDDER
        assert engine.memory.create("explicit", {})["embedder"] == LEXICAL_EMBEDDER
    with Engine(tmp_path / "data", pm, config=EngineConfig(embedder="no-such-model")) as engine:
        # An existing namespace keeps its own; a new one is refused with the installed ones named.
        assert engine.memory.store("first", {"text": "again"})[0] == 201
        reason = refusal(engine.memory.store, "second", {"text": "x"}).reason
        assert "unknown embedder [no-such-model]; installed: " in reason and LEXICAL_EMBEDDER in reason


def test_creation_is_idempotent_and_refused_once_memories_exist(engine):
    memory = engine.memory
    assert memory.create("ns", {"embedder": LEXICAL_EMBEDDER})["created"] is True
    assert memory.create("ns", {"embedder": LEXICAL_EMBEDDER})["created"] is False
    memory.store("ns", {"text": "one memory"})
    reason = refusal(memory.create, "ns", {"embedder": "BAAI/bge-small-en-v1.5"}).reason
    assert reason.startswith("namespace [ns] holds 1 memories embedded by [lexical-feature-hash]")
    assert 'POST /_memory/ns/_reembed {"embedder": "BAAI/bge-small-en-v1.5"}' in reason
    # A forgotten memory still counts: as_of recall reads its vector.
    forgotten = memory.store("gone", {"text": "soon forgotten"})[1]["_id"]
    memory.forget("gone", forgotten)
    assert "holds 1 memories" in refusal(memory.create, "gone", {"embedder": "BAAI/bge-small-en-v1.5"}).reason


@needs_semantic
def test_an_empty_namespace_may_still_switch_embedder(engine):
    memory = engine.memory
    memory.create("ns", {"embedder": LEXICAL_EMBEDDER})
    memory.store("ns", {"text": "short lived"})
    memory.forget("ns", memory.list("ns")["memories"][0]["_id"], purge=True)
    assert memory.create("ns", {"embedder": STATIC_EMBEDDER})["embedder"] == STATIC_EMBEDDER
    memory.store("ns", {"text": CAR})
    assert memory.list("ns")["embedder"] == STATIC_EMBEDDER
    assert memory.recall("ns", {"query": QUERY, "semantic": True})["hits"]


@pytest.mark.parametrize("body, words", [
    ({"embedder": "no-such-model"}, "unknown embedder [no-such-model]; installed: "),
    ({"embedder": 3}, "[embedder] must be a non-empty string"),
    ({"embedder": LEXICAL_EMBEDDER, "dims": 3}, "[dims] is not a parameter"),
    ({"embedder": "minilm-l6-v2-int8"}, "no longer installed"),
])
def test_creation_refusals_say_why(engine, body, words):
    assert words in refusal(engine.memory.create, "ns", body).reason
    assert not engine.store.exists(memory_index("ns"))


def test_http_put_get_and_overview_report_the_embedder(client, engine):
    created = client.simulate_put("/_memory/agent", json={"embedder": LEXICAL_EMBEDDER})
    assert created.status_code == 200 and created.json["embedder"] == LEXICAL_EMBEDDER
    assert client.simulate_post("/_memory/agent", json={"text": "a memory"}).status_code == 201
    assert client.simulate_get("/_memory/agent").json["embedder"] == LEXICAL_EMBEDDER
    refused = client.simulate_put("/_memory/agent", json={"embedder": "BAAI/bge-small-en-v1.5"})
    assert_graph_error(refused, 400)
    assert "_reembed" in refused.json["error"]["reason"]
    unknown = client.simulate_put("/_memory/other", json={"embedder": "nope"})
    assert_graph_error(unknown, 400)
    assert "installed: " in unknown.json["error"]["reason"]
    # The brain of the same name reports the namespace's embedder in its overview.
    memory_id = client.simulate_get("/_memory/agent").json["memories"][0]["_id"]
    engine.graph.link("agent", {"src": memory_id, "dst": "elsewhere", "type": "relates"})
    overview = client.simulate_get("/_graph/agent/overview")
    assert overview.status_code == 200 and overview.json["embedder"] == LEXICAL_EMBEDDER


def test_serve_checks_the_embedder_before_serving(monkeypatch, tmp_path, pm):
    from xerj_http import serve

    served = {}
    monkeypatch.setattr(serve, "run_server", lambda factory, **kw: served.setdefault("factory", factory))
    cli = build_cli(pm)
    args = ["serve", "--data-dir", str(tmp_path / "d"), "--port", "0"]
    unknown = CliRunner().invoke(cli, [*args, "--embedder", "no-such-model"])
    assert unknown.exit_code == 2 and "unknown embedder [no-such-model]; installed: " in unknown.output
    from_env = CliRunner().invoke(cli, args, env={"XERJ_EMBEDDER": "no-such-model"})
    assert from_env.exit_code == 2 and "--embedder" in from_env.output and "factory" not in served
    ok = CliRunner().invoke(cli, args, env={"XERJ_EMBEDDER": LEXICAL_EMBEDDER, "XERJ_OFFLINE": "1",
                                            "XERJ_MODEL_CACHE": str(tmp_path / "models")})
    assert ok.exit_code == 0, ok.output
    # A stand-in app that only carries the engine the worker built (and closes like an app).
    monkeypatch.setattr("xerj_http.app.create_app",
                        lambda engine, pm, **options: SimpleNamespace(engine=engine, close=lambda: None))
    app, close = served["factory"]()
    engine = app.engine
    try:
        assert (engine.config.embedder, engine.config.offline) == (LEXICAL_EMBEDDER, True)
        assert engine.config.model_cache == tmp_path / "models"
    finally:
        close()


# -- the static model's two poolings: one id per version of the vectors ---------------------------

@needs_semantic
def test_a_namespace_of_the_unweighted_static_id_keeps_its_vectors_and_new_ones_get_the_weighted_id(engine):
    """The weighted pooling came under a new id, so a namespace written before never mixes two kinds of vector."""
    memory = engine.memory
    assert memory.create("before", {"embedder": STATIC_MEAN_EMBEDDER})["embedder"] == STATIC_MEAN_EMBEDDER
    kept = [memory.store("before", {"text": text})[1]["_id"] for text in MEMORIES]
    memory.create("after", {"embedder": STATIC_EMBEDDER})  # no longer the default: the hybrid test below covers that
    memory.store("after", {"text": MEMORIES[0]})
    assert memory.list("after")["embedder"] == STATIC_EMBEDDER != STATIC_MEAN_EMBEDDER
    mean, weighted = MeanStaticEmbedder().embed(MEMORIES), StaticEmbedder().embed(MEMORIES)
    assert float(np.max(np.abs(mean - weighted))) > 1e-2  # the two versions are different vectors
    for n, doc_id in enumerate(kept):
        source, _version = engine.store.get(memory_index("before"), doc_id)
        np.testing.assert_allclose(source[TEXT_VECTOR_FIELD], mean[n], atol=1e-6)
    source, _version = engine.store.get(memory_index("after"), memory.list("after")["memories"][0]["_id"])
    np.testing.assert_allclose(source[TEXT_VECTOR_FIELD], weighted[0], atol=1e-6)
    # Recall in the old namespace embeds the query with the old pooling: its own score is its own cosine.
    hit = memory.recall("before", {"query": QUERY, "semantic": True, "k": 1})["hits"][0]
    assert hit["_id"] == kept[0]
    query = MeanStaticEmbedder().embed([QUERY])[0]
    assert hit["_score"] == pytest.approx((1 + float(query @ mean[0])) / 2, abs=1e-4)  # cosine, scored (1 + cos) / 2
    # Switching a namespace that holds memories is refused; re-embedding moves it onto the weighted id.
    assert "_reembed" in refusal(memory.create, "before", {"embedder": STATIC_EMBEDDER}).reason
    assert memory.reembed("before", {"embedder": STATIC_EMBEDDER})["reembedded"] == len(MEMORIES)
    assert memory.list("before")["embedder"] == STATIC_EMBEDDER
    for n, doc_id in enumerate(kept):
        source, _version = engine.store.get(memory_index("before"), doc_id)
        np.testing.assert_allclose(source["text_vector_1"], weighted[n], atol=1e-6)


@needs_semantic
def test_new_namespaces_get_the_hybrid_while_a_weighted_static_namespace_keeps_its_vectors(engine):
    """The hybrid came under its own id: a namespace of the SIF id keeps exactly its vectors until re-embedded."""
    memory = engine.memory
    memory.create("sif", {"embedder": STATIC_EMBEDDER})
    kept = [memory.store("sif", {"text": text})[1]["_id"] for text in MEMORIES]
    fresh = [memory.store("fresh", {"text": text})[1]["_id"] for text in MEMORIES]
    assert memory.list("fresh")["embedder"] == TITLED_HYBRID_EMBEDDER
    mapping = engine.store.get_mapping(memory_index("fresh"))["properties"][TEXT_VECTOR_FIELD]
    assert (mapping["embedder"], mapping["dims"]) == (TITLED_HYBRID_EMBEDDER, 2304)
    # These memories are single lines: no title, so the titled default stores the hybrid's own vectors.
    assert not any("\n" in text.strip() for text in MEMORIES)
    hybrid, weighted = HybridEmbedder().embed(MEMORIES), StaticEmbedder().embed(MEMORIES)
    for n, (old_id, new_id) in enumerate(zip(kept, fresh)):
        np.testing.assert_allclose(engine.store.get(memory_index("sif"), old_id)[0][TEXT_VECTOR_FIELD],
                                   weighted[n], atol=1e-6)
        np.testing.assert_allclose(engine.store.get(memory_index("fresh"), new_id)[0][TEXT_VECTOR_FIELD],
                                   hybrid[n], atol=1e-6)
    # The issue's example through the default: the car memory first, though it shares no word with the query.
    assert ids(memory.recall("fresh", {"query": QUERY, "semantic": True, "k": 4}))[0] == fresh[0]
    assert ids(memory.recall("sif", {"query": QUERY, "semantic": True, "k": 4}))[0] == kept[0]
    # Moving the old namespace onto the hybrid is a re-embed, never a silent switch.
    assert "_reembed" in refusal(memory.create, "sif", {"embedder": HYBRID_EMBEDDER}).reason
    assert memory.reembed("sif", {"embedder": HYBRID_EMBEDDER})["reembedded"] == len(MEMORIES)
    assert memory.list("sif")["embedder"] == HYBRID_EMBEDDER
    for n, doc_id in enumerate(kept):
        np.testing.assert_allclose(engine.store.get(memory_index("sif"), doc_id)[0]["text_vector_1"], hybrid[n],
                                   atol=1e-6)


# -- a namespace from the old neural embedder ------------------------------------------------------

def _old_neural_namespace(engine, ns="old"):
    """What the previous build wrote: text vectors labelled with the int8 MiniLM id it no longer ships."""
    index = memory_index(ns)
    engine.store.create_index(index, {"properties": {
        "text": {"type": "text"}, "stored_at": {"type": "date", "format": "epoch_millis"},
        "forgotten_at": {"type": "date", "format": "epoch_millis"},
        TEXT_VECTOR_FIELD: {"type": "dense_vector", "dims": 384, "similarity": "cosine",
                            "embedder": "minilm-l6-v2-int8"}}})
    rng = np.random.default_rng(3)
    for n, text in enumerate(MEMORIES):
        vector = rng.normal(size=384)
        engine.store.put(index, {"text": text, "stored_at": 1_700_000_000_000 + n,
                                 TEXT_VECTOR_FIELD: (vector / np.linalg.norm(vector)).tolist()}, f"m{n}")


@needs_semantic
def test_a_namespace_of_the_old_neural_embedder_names_the_replacement_and_moves_onto_another(engine):
    _old_neural_namespace(engine)
    memory = engine.memory
    listed = memory.list("old")
    assert listed["embedder"] == "minilm-l6-v2-int8" and listed["total"] == len(MEMORIES)
    assert "no longer installed" in listed["embedder_unavailable"]
    assert "sentence-transformers/all-MiniLM-L6-v2" in listed["embedder_unavailable"]
    for call in (lambda: memory.store("old", {"text": "new"}),
                 lambda: memory.recall("old", {"query": "car", "semantic": True})):
        reason = refusal(call).reason
        assert "no longer installed" in reason and "sentence-transformers/all-MiniLM-L6-v2" in reason
    assert ids(memory.recall("old", {"query": "battery"})) == ["m0"]  # words still work
    done = memory.reembed("old", {"embedder": STATIC_EMBEDDER})
    assert done["reembedded"] == len(MEMORIES) and done["resumed"] is False
    assert memory.list("old")["embedder"] == STATIC_EMBEDDER and "embedder_unavailable" not in memory.list("old")
    assert ids(memory.recall("old", {"query": QUERY, "semantic": True}))[0] == "m0"


# -- re-embedding --------------------------------------------------------------------------------

@needs_semantic
def test_reembed_moves_every_memory_and_drops_the_old_vectors_later(engine):
    memory = engine.memory
    memory.create("ns", {"embedder": LEXICAL_EMBEDDER})
    stored = [memory.store("ns", {"text": text})[1]["_id"] for text in MEMORIES]
    memory.forget("ns", stored[2])
    first = memory.reembed("ns", {"embedder": STATIC_EMBEDDER, "batch_size": 3})
    assert (first["reembedded"], first["batches"], first["dims"]) == (4, 2, 256)
    assert memory.reembed("ns", {"embedder": STATIC_EMBEDDER}) == {**first, "reembedded": 0, "batches": 0,
                                                                   "already": True}
    expected = StaticEmbedder().embed(MEMORIES)
    for n, doc_id in enumerate(stored):
        source, _version = engine.store.get(memory_index("ns"), doc_id)
        np.testing.assert_allclose(source["text_vector_1"], expected[n], atol=1e-6)
        assert source.get("forgotten_at") is not None if n == 2 else "forgotten_at" not in source
    assert ids(memory.recall("ns", {"query": QUERY, "semantic": True}))[0] == stored[0]
    # Back to lexical: a third generation, and the first one's vectors leave the documents as they are rewritten.
    memory.reembed("ns", {"embedder": LEXICAL_EMBEDDER})
    source, _version = engine.store.get(memory_index("ns"), stored[0])
    assert "text_vector_2" in source and TEXT_VECTOR_FIELD not in source
    assert memory.list("ns")["embedder"] == LEXICAL_EMBEDDER


@needs_semantic
def test_a_store_during_a_reembed_gets_both_vectors_and_an_interrupted_reembed_resumes(engine, monkeypatch):
    memory = engine.memory
    memory.create("ns", {"embedder": LEXICAL_EMBEDDER})
    for text in MEMORIES:
        memory.store("ns", {"text": text})
    real = StaticEmbedder.embed
    calls = []

    def dies_on_second_batch(self, texts):
        calls.append(list(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(self, texts)

    monkeypatch.setattr(StaticEmbedder, "embed", dies_on_second_batch)
    with pytest.raises(KeyboardInterrupt):
        memory.reembed("ns", {"embedder": STATIC_EMBEDDER, "batch_size": 2})
    monkeypatch.setattr(StaticEmbedder, "embed", real)
    listed = memory.list("ns")
    assert listed["embedder"] == LEXICAL_EMBEDDER  # recall keeps the complete generation meanwhile
    assert listed["reembed_unfinished"] == {"embedder": STATIC_EMBEDDER, "field": "text_vector_1"}
    new_id = memory.store("ns", {"text": "a store in the middle of a re-embed"})[1]["_id"]
    source, _version = engine.store.get(memory_index("ns"), new_id)
    assert len(source[TEXT_VECTOR_FIELD]) == 384 and len(source["text_vector_1"]) == 256
    resumed = memory.reembed("ns", {"embedder": STATIC_EMBEDDER, "batch_size": 2})
    assert resumed["resumed"] is True and resumed["reembedded"] == 2  # the two the interrupted batch held
    assert memory.list("ns")["embedder"] == STATIC_EMBEDDER and "reembed_unfinished" not in memory.list("ns")


@pytest.mark.parametrize("body, words", [
    ({}, "[embedder] is required"),
    ({"embedder": LEXICAL_EMBEDDER, "batch_size": 0}, "[batch_size] must be an integer"),
    ({"embedder": LEXICAL_EMBEDDER, "force": True}, "[force] is not a parameter"),
    ({"embedder": "nope"}, "unknown embedder [nope]"),
])
def test_reembed_refusals(engine, body, words):
    engine.memory.store("ns", {"text": "x"})
    assert words in refusal(engine.memory.reembed, "ns", body).reason


def test_reembed_of_a_missing_namespace_is_404(client):
    assert_graph_error(client.simulate_post("/_memory/nobody/_reembed", json={"embedder": LEXICAL_EMBEDDER}), 404)


# -- kill -9 halfway -----------------------------------------------------------------------------

REEMBED_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from xerj_core.embedding import STATIC_EMBEDDER
    from xerj_core.engine import Engine
    from xerj_embedders.static import StaticEmbedder

    data, log, stop_after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    real = StaticEmbedder.embed
    batches = 0

    def logged(self, texts):
        global batches
        batches += 1
        if stop_after and batches > stop_after:
            # Embedded but not yet written: the moment a kill costs the most.
            real(self, texts)
            Path(str(log) + ".halfway").write_text("")
            time.sleep(600)
        with log.open("a") as out:
            out.write("".join(text.replace("\\n", " ") + "\\n" for text in texts))
            out.flush()
            os.fsync(out.fileno())
        return real(self, texts)

    StaticEmbedder.embed = logged
    with Engine(data) as engine:
        print(engine.memory.reembed("ns", {"embedder": STATIC_EMBEDDER, "batch_size": 100}))
""")


@needs_semantic
def test_reembed_survives_kill_9_halfway_and_embeds_every_memory_exactly_once(tmp_path, pm):
    n = 2000
    texts = [f"memory {i}: the {['car', 'garden', 'budget', 'beach'][i % 4]} note number {i}" for i in range(n)]
    data = tmp_path / "data"
    with Engine(data, pm, config=EngineConfig(embedder=LEXICAL_EMBEDDER)) as engine:
        # The documents the memory API writes, in one transaction (storing them one call each only costs time).
        engine.memory.create("ns", {})
        vectors = engine.embedders[LEXICAL_EMBEDDER].embed(texts)
        docs = [memory_document(rq.parse_store({"text": text}), 1_700_000_000_000 + i,
                                {TEXT_VECTOR_FIELD: vectors[i]}) for i, text in enumerate(texts)]
        engine.store.transact(lambda txn: [txn.put(memory_index("ns"), doc) for doc in docs])
    script = tmp_path / "reembed.py"
    script.write_text(REEMBED_SCRIPT)
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.Popen([sys.executable, str(script), str(data), str(first_log), "10"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "first.log.halfway").exists():
            assert killed.poll() is None, killed.stderr.read().decode()
            assert time.monotonic() < deadline, "the re-embed never got halfway"
            time.sleep(0.05)
        os.kill(killed.pid, signal.SIGKILL)
    finally:
        killed.wait(30)
    assert killed.returncode == -signal.SIGKILL

    with Engine(data, pm) as engine:
        index = memory_index("ns")
        with engine.store.reader(index) as reader:
            committed = {reader.document(int(row))[1]["text"]
                         for row in np.flatnonzero(reader.live & reader.column("text_vector_1").present)}
        assert len(committed) == 1000  # ten batches of 100 written; the eleventh died with the process
        assert set(first_log.read_text().splitlines()) == committed
        assert engine.memory.list("ns")["embedder"] == LEXICAL_EMBEDDER
    finished = subprocess.run([sys.executable, str(script), str(data), str(second_log), "0"], env=env,
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    second = second_log.read_text().splitlines()
    # The restart embedded exactly the memories the killed run had not written, each once.
    assert len(second) == len(set(second)) == n - len(committed)
    assert set(second) == set(texts) - committed
    with Engine(data, pm) as engine:
        assert engine.memory.list("ns")["embedder"] == STATIC_EMBEDDER
        assert engine.memory.list("ns")["total"] == n
        index = memory_index("ns")
        with engine.store.reader(index) as reader:
            rows = np.flatnonzero(reader.live)
            assert len(rows) == n and reader.column("text_vector_1").present[rows].all()
            sources = [reader.document(int(row))[1] for row in rows]
        expected = StaticEmbedder().embed([source["text"] for source in sources])
        np.testing.assert_allclose(np.array([source["text_vector_1"] for source in sources]), expected, atol=1e-6)
        assert sorted(source["text"] for source in sources) == sorted(texts)


def test_reembed_gives_vectors_to_an_index_written_through_the_document_api(engine):
    engine.store.put(memory_index("plain"), {"text": "written as a plain document", "stored_at": 1}, "d1")
    done = engine.memory.reembed("plain", {"embedder": LEXICAL_EMBEDDER})
    assert done["reembedded"] == 1 and engine.memory.list("plain")["embedder"] == LEXICAL_EMBEDDER
    assert ids(engine.memory.recall("plain", {"query": "plain document", "semantic": True})) == ["d1"]
