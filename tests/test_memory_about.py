"""Memories about notes: names resolved in a brain's notes as a person types them, ``about`` edges, and recall
walking the named brain. The vault case runs on the Foam corpus."""

from __future__ import annotations

import shutil

import pytest

from xerj_core.autoindex.pipeline import run
from xerj_core.errors import GraphError, GraphNotFound

from .conftest import CORPORA
from .http_helpers import client  # noqa: F401  (fixture)

FOAM = CORPORA / "foam-docs"
pytestmark = pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")
NOTE = "user/features/commands.md"


@pytest.fixture
def vault(engine, tmp_path):
    shutil.copytree(FOAM, tmp_path / "foam-docs", copy_function=shutil.copy2)
    run(engine, tmp_path / "foam-docs")
    return "foam-docs"


def test_a_memory_about_a_note_by_title_is_recalled_from_its_neighbourhood(engine, vault):
    status, stored = engine.memory.store("agent", {"text": "the user binds Foam commands to F5",
                                                   "about": ["Foam Commands"], "brain": vault})
    assert status == 201 and stored["about"]["nodes"] == [NOTE] and stored["about"]["brain"] == vault
    edge = engine.store.get(f".xerj-memory-{vault}-edges", stored["about"]["edge_ids"][0])[0]
    assert (edge["src"], edge["dst"], edge["type"], edge["trust"]) == (stored["_id"], NOTE, "about", "asserted")
    assert edge["evidence"]["quote"] == "the user binds Foam commands to F5"
    engine.memory.store("agent", {"text": "the user binds Foam commands to F6 elsewhere"})
    restricted = {"query": "commands", "graph": {"mode": "restrict", "brain": vault, "seeds": ["Foam Commands"],
                                                 "hops": 1}}
    hits = engine.memory.recall("agent", restricted)
    assert [h["_id"] for h in hits["hits"]] == [stored["_id"]]
    assert hits["graph"]["brain"] == vault and hits["graph"]["seeds"] == [NOTE]
    # by unique file stem and by exact id too; a neighbour note's neighbourhood reaches it in two hops
    assert engine.memory.store("agent", {"text": "x", "about": ["commands"], "brain": vault})[1]["about"]["nodes"] \
        == [NOTE]
    assert engine.memory.store("agent", {"text": "y", "about": [NOTE], "brain": vault})[1]["about"]["nodes"] == [NOTE]
    neighbours = engine.graph.ego(vault, {"node": NOTE})["neighbors"]
    other = next(n for n in neighbours if n.endswith(".md"))
    two = engine.memory.recall("agent", {"query": "commands", "graph": {"mode": "restrict", "brain": vault,
                                                                         "seeds": [other], "hops": 2}})
    assert stored["_id"] in [h["_id"] for h in two["hits"]]


def test_ambiguous_and_unknown_names_are_refused_with_candidates(engine, vault):
    with pytest.raises(GraphError) as err:
        engine.memory.store("agent", {"text": "x", "about": ["index"], "brain": vault})
    assert "ambiguous" in err.value.reason and "index.md" in err.value.reason and "user/index.md" in err.value.reason
    with pytest.raises(GraphError) as err:
        engine.memory.store("agent", {"text": "x", "about": ["Foam Comands"], "brain": vault})
    # the closest names, as the resolver keys them (case-folded), each with the node it names
    assert "[about]" in err.value.reason and "foam commands (" in err.value.reason
    with pytest.raises(GraphNotFound, match=r"\[brain\]"):
        engine.memory.store("agent", {"text": "x", "about": ["Foam Commands"], "brain": "nowhere"})
    with pytest.raises(GraphError, match=r"\[brain\] applies only with \[about\]"):
        engine.memory.store("agent", {"text": "x", "brain": vault})
    with pytest.raises(GraphError, match=r"\[graph.seeds\]"):
        engine.memory.store("agent", {"text": "x"})
        engine.memory.recall("agent", {"query": "x", "graph": {"mode": "restrict", "brain": vault,
                                                               "seeds": ["No Such Note"]}})
    # nothing was half-written: no memory and no edge from the refused stores
    assert engine.memory.list("agent", {})["total"] == 1


def test_about_in_the_namespace_own_brain(engine):
    _, first = engine.memory.store("agent", {"text": "alpha"})
    _, second = engine.memory.store("agent", {"text": "beta", "about": [first["_id"]]})
    assert second["about"] == {"brain": "agent", "nodes": [first["_id"]], "edge_ids": second["about"]["edge_ids"]}
    hits = engine.memory.recall("agent", {"query": "beta alpha", "graph": {"mode": "restrict",
                                                                           "seeds": [first["_id"]]}})
    assert {h["_id"] for h in hits["hits"]} == {first["_id"], second["_id"]}
    with pytest.raises(GraphError, match="does not resolve"):
        engine.memory.store("agent", {"text": "gamma", "about": ["nope"]})


def test_about_over_http(client, engine, vault):
    stored = client.simulate_post("/_memory/agent", json={"text": "palette tip", "about": ["Foam Commands"],
                                                           "brain": vault})
    assert stored.status_code == 201 and stored.json["about"]["nodes"] == [NOTE]
    ambiguous = client.simulate_post("/_memory/agent", json={"text": "x", "about": ["index"], "brain": vault})
    assert ambiguous.status_code == 400 and "candidates" in ambiguous.json["error"]["reason"]
    missing = client.simulate_post("/_memory/agent", json={"text": "x", "about": ["a"], "brain": "nowhere"})
    assert missing.status_code == 404
    recalled = client.simulate_post("/_memory/agent/_recall", json={
        "query": "palette", "graph": {"mode": "restrict", "brain": vault, "seeds": ["Foam Commands"]}})
    assert recalled.status_code == 200 and [h["_id"] for h in recalled.json["hits"]] == [stored.json["_id"]]
