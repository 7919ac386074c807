"""Memory tombstones and trust: a rejected value stays refused (same words, or near with dedup) until a recorded
override; memories carry trust, are reviewed per id, and recall filters on it. Also over HTTP in both modes."""

from __future__ import annotations

import pytest

from xerj_core.errors import GraphError, GraphNotFound
from xerj_core.memory.tombstones import normalise, tombstone_index

from .http_helpers import client  # noqa: F401  (fixture)
from .test_memory_store import memory  # noqa: F401  (fixture: engine.memory with a ticking clock)
from .test_review import principal_name


def test_a_rejected_memory_is_not_re_created_by_an_identical_store(memory):
    _, stored = memory.store("agent", {"text": "The user prefers tabs"})
    forgotten = memory.forget("agent", stored["_id"], reject=True, by="ana")
    assert forgotten["forgotten"] is True and forgotten["rejected"] is True
    tomb = forgotten["tombstone"]
    for text in ("The user prefers tabs", "  the USER prefers\ttabs "):
        status, body = memory.store("agent", {"text": text})
        assert (status, body) == (200, {"created": False, "rejected": True, "tombstone": tomb, "namespace": "agent"})
    assert memory.list("agent", {})["total"] == 0
    listed = memory.tombstones("agent")
    assert listed["total"] == listed["active"] == 1
    entry = listed["tombstones"][0]
    assert entry["tombstone"] == tomb and entry["memory_id"] == stored["_id"] and entry["rejected_by"] == "ana"
    assert entry["text"] == "The user prefers tabs" and "vector" not in entry
    retired = memory.list("agent", {"include_forgotten": "true"})["memories"][0]
    assert retired["trust"] == "rejected" and retired["reviewed_by"] == "ana"


def test_a_near_identical_store_with_dedup_is_refused_too(memory):
    _, stored = memory.store("agent", {"text": "the sourdough starter needs feeding every morning"})
    memory.forget("agent", stored["_id"], reject=True, by="ana")
    near = "the sourdough starter needs feeding every morning!!"
    assert normalise(near) != normalise("the sourdough starter needs feeding every morning")
    status, body = memory.store("agent", {"text": near, "dedup": True, "dedup_threshold": 0.9})
    assert status == 200 and body["rejected"] is True
    # without dedup only the same words are refused
    status, body = memory.store("agent", {"text": near})
    assert status == 201 and body["created"] is True


def test_a_caller_vector_is_refused_near_with_dedup(memory):
    _, stored = memory.store("agent", {"vector": [1.0, 0.0, 0.0]})
    memory.forget("agent", stored["_id"], reject=True)
    status, body = memory.store("agent", {"vector": [0.99, 0.01, 0.0], "dedup": True})
    assert status == 200 and body["rejected"] is True
    assert memory.store("agent", {"vector": [0.0, 1.0, 0.0], "dedup": True})[0] == 201


def test_an_override_lifts_the_tombstone_and_is_recorded(memory):
    _, stored = memory.store("agent", {"text": "meetings are on mondays"})
    tomb = memory.forget("agent", stored["_id"], reject=True, by="ana")["tombstone"]
    status, body = memory.store("agent", {"text": "meetings are on mondays", "override_rejection": True}, by="bo")
    assert status == 201 and body["override_rejection"] == {"lifted": [tomb], "lifted_by": "bo"}
    entry = memory.tombstones("agent")["tombstones"][0]
    assert entry["active"] is False and entry["lifted_by"] == "bo" and entry["lifted_for"] == body["_id"]
    # lifted: the same words are stored again without an override
    assert memory.store("agent", {"text": "meetings are on mondays"})[0] == 201
    # rejected again: the tombstone is laid again and remembers it was lifted once
    memory.forget("agent", body["_id"], reject=True, by="ana")
    again = memory.tombstones("agent")["tombstones"][0]
    assert again["active"] is True and again["lifts"][0]["lifted_by"] == "bo"


def test_forget_without_reject_leaves_no_tombstone(memory):
    _, stored = memory.store("agent", {"text": "transient"})
    memory.forget("agent", stored["_id"])
    assert memory.tombstones("agent")["total"] == 0
    assert memory.store("agent", {"text": "transient"})[0] == 201


def test_memory_review_and_recall_by_trust(memory):
    ids = [memory.store("agent", {"text": f"fact number {n} about bread"})[1]["_id"] for n in range(3)]
    result = memory.review("agent", {"approve": [ids[0], "missing"], "reject": [ids[1]], "note": "no"}, by="ana")
    assert [r["result"] for r in result["results"]] == ["approved", "not_found", "rejected"]
    assert result["results"][2]["tombstone"].startswith("tomb-")
    approved = memory.recall("agent", {"query": "bread", "trust": ["approved"]})["hits"]
    assert [h["_id"] for h in approved] == [ids[0]] and approved[0]["reviewed_by"] == "ana"
    asserted = memory.recall("agent", {"query": "bread", "trust": ["asserted"]})["hits"]
    assert [h["_id"] for h in asserted] == [ids[2]]
    everything = memory.recall("agent", {"query": "bread"})
    assert {h["_id"] for h in everything["hits"]} == {ids[0], ids[2]}
    assert everything["trust"] == {"detected": 0, "asserted": 1, "approved": 1, "rejected": 0}
    assert memory.store("agent", {"text": "fact number 1 about bread"})[1]["rejected"] is True


@pytest.mark.parametrize("body, field", [
    ({"query": "x", "trust": ["maybe"]}, "[trust]"),
    ({"query": "x", "graph": {"mode": "blend", "trust": "sure"}}, "[graph.trust]"),
])
def test_bad_trust_values_are_refused(memory, body, field):
    memory.store("agent", {"text": "x"})
    with pytest.raises(GraphError) as err:
        memory.recall("agent", body)
    assert field in err.value.reason


def test_bad_review_and_store_bodies(memory):
    _, stored = memory.store("agent", {"text": "x"})
    with pytest.raises(GraphError, match=r"\[approve\] and \[reject\]"):
        memory.review("agent", {"approve": [stored["_id"]], "reject": [stored["_id"]]}, by="ana")
    with pytest.raises(GraphError, match=r"\[override_rejection\]"):
        memory.store("agent", {"text": "x", "override_rejection": "perhaps"})
    with pytest.raises(GraphNotFound):
        memory.review("ghost", {"approve": ["a"]}, by="ana")
    with pytest.raises(GraphError, match="-tombstones"):
        memory.store("agent-tombstones", {"text": "x"})
    assert memory.list("agent", {})["memories"][0]["trust"] == "asserted"


# -- over HTTP ----------------------------------------------------------------------------------

def test_tombstones_over_http(client, engine):
    stored = client.simulate_post("/_memory/agent", json={"text": "the cat is called Miso"}).json
    gone = client.simulate_delete(f"/_memory/agent/{stored['_id']}", params={"reject": "true"})
    assert gone.status_code == 200 and gone.json["rejected"] is True
    again = client.simulate_post("/_memory/agent", json={"text": "the cat is called Miso"})
    assert again.status_code == 200 and again.json == {"created": False, "rejected": True,
                                                       "tombstone": gone.json["tombstone"], "namespace": "agent"}
    listed = client.simulate_get("/_memory/agent/_tombstones")
    assert listed.status_code == 200 and listed.json["tombstones"][0]["rejected_by"] == principal_name(client)
    override = client.simulate_post("/_memory/agent", json={"text": "the cat is called Miso",
                                                            "override_rejection": True})
    assert override.status_code == 201 and override.json["override_rejection"]["lifted_by"] == principal_name(client)
    review = client.simulate_post("/_memory/agent/_review", json={"approve": [override.json["_id"]]})
    assert review.status_code == 200 and review.json["approved"] == 1
    recalled = client.simulate_post("/_memory/agent/_recall", json={"query": "cat", "trust": ["approved"]})
    assert [h["_id"] for h in recalled.json["hits"]] == [override.json["_id"]]
    bad = client.simulate_post("/_memory/agent/_review", json={"approve": ["a"], "reject": ["a"]})
    assert bad.status_code == 400 and "[approve]" in bad.json["error"]["reason"]


def test_override_needs_write_on_the_tombstones(engine, pm):
    from falcon.testing import TestClient

    from xerj_http import create_app

    from .http_helpers import admin_headers
    app = create_app(engine, pm, insecure=False)
    admin = TestClient(app, headers=admin_headers(engine))
    stored = admin.simulate_post("/_memory/agent", json={"text": "secret plan"}).json
    admin.simulate_delete(f"/_memory/agent/{stored['_id']}", params={"reject": "true"})
    key = admin.simulate_post("/_security/api_key", json={"name": "reader", "role_descriptors": {"r": {
        "indices": [{"names": [".xerj-memory-agent*"], "privileges": ["read"]}]}}}).json
    reader = TestClient(app, headers={"Authorization": "ApiKey " + key["encoded"]})
    refused = reader.simulate_post("/_memory/agent", json={"text": "secret plan", "override_rejection": True})
    assert refused.status_code == 403
    assert reader.simulate_get("/_memory/agent/_tombstones").status_code == 200
    assert engine.store.get(tombstone_index("agent"), admin.simulate_get(
        "/_memory/agent/_tombstones").json["tombstones"][0]["tombstone"])[0].get("lifted_at") is None
    app.close()
