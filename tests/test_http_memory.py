"""Agent memory over HTTP: every /_memory route, its status codes and bodies, through engine.memory."""

from __future__ import annotations

import pytest

from .http_helpers import audit_log, client, error_type  # noqa: F401  (fixtures)
from .test_http_graph import HOPS_SENTENCE, assert_graph_error


def store(client, ns="agent", **body):
    return client.simulate_post(f"/_memory/{ns}", json=body)


def test_store_201_and_dedup_200(client, engine):
    first = store(client, text="the sourdough starter needs feeding twice a day", metadata={"topic": "bread"})
    assert first.status_code == 201
    assert first.json["created"] is True and first.json["namespace"] == "agent"
    memory_id = first.json["_id"]
    assert engine.store.exists(".xerj-memory-agent")
    dup = store(client, text="the sourdough starter needs feeding twice a day", dedup=True)
    assert dup.status_code == 200
    assert dup.json == {"created": False, "deduplicated": True, "_id": memory_id, "namespace": "agent"}


@pytest.mark.parametrize("body", [{}, {"metadata": {"a": 1}}, {"text": "x", "colour": "red"}, {"text": 5}])
def test_store_refusals(client, body):
    assert_graph_error(client.simulate_post("/_memory/agent", json=body), 400)


def test_namespace_names_are_validated(client):
    for ns in ("Agent", "agent-edges", "_x"):
        assert_graph_error(store(client, ns=ns, text="x"), 400)
    for body in (b"{text}", b"", b"[1,2]", b'{"text": "x", "dedup_threshold": NaN}'):
        assert_graph_error(client.simulate_post("/_memory/agent", body=body), 400)
        assert_graph_error(client.simulate_post("/_memory/agent/_recall", body=body), 400)


def test_list_newest_first_and_missing_namespace(client):
    ids = [store(client, text=f"memory number {n}").json["_id"] for n in range(3)]
    listed = client.simulate_get("/_memory/agent", params={"size": "2"})
    assert listed.status_code == 200
    assert listed.json["total"] == 3 and [m["_id"] for m in listed.json["memories"]] == ids[::-1][:2]
    assert_graph_error(client.simulate_get("/_memory/nobody"), 404)
    assert_graph_error(client.simulate_get("/_memory/agent", params={"size": "many"}), 400)


def test_recall_bm25_and_refusals(client):
    store(client, text="sourdough is a wild fermentation")
    store(client, text="the train leaves at nine")
    result = client.simulate_post("/_memory/agent/_recall", json={"query": "fermentation", "k": 5})
    assert result.status_code == 200
    hits = result.json["hits"]
    assert hits and hits[0]["text"] == "sourdough is a wild fermentation"
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={"k": 5}), 400)
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={"query": "x", "vector": [1.0]}), 400)
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={"query": "x", "size": 3}), 400)
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={"query": "x", "fusion": "learned",
                                                                            "hybrid": True}), 400)
    assert_graph_error(client.simulate_post("/_memory/nobody/_recall", json={"query": "x"}), 404)


def test_recall_graph_block(client):
    store(client, text="sourdough is a wild fermentation")
    no_edges = client.simulate_post("/_memory/agent/_recall", json={"query": "sourdough",
                                                                    "graph": {"mode": "blend", "hops": 2}})
    assert no_edges.status_code == 200
    assert no_edges.json["graph"]["not_shown"]["no_edges_index"] is True
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={
        "query": "x", "graph": {"mode": "blend", "hops": 3}}), 400, HOPS_SENTENCE)
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={
        "query": "x", "graph": {"mode": "restrict"}}), 400)
    assert_graph_error(client.simulate_post("/_memory/agent/_recall", json={
        "query": "x", "graph": {"mode": "nearby"}}), 400)


def test_forget_purge_and_drop(client):
    memory_id = store(client, text="forget me").json["_id"]
    forgotten = client.simulate_delete(f"/_memory/agent/{memory_id}")
    assert forgotten.status_code == 200 and forgotten.json["forgotten"] is True
    again = client.simulate_delete(f"/_memory/agent/{memory_id}")
    assert again.status_code == 200 and again.json["forgotten"] is False and "already_forgotten_at" in again.json
    purged = client.simulate_delete(f"/_memory/agent/{memory_id}", params={"purge": "true"})
    assert purged.status_code == 200 and purged.json["purged"] is True
    assert_graph_error(client.simulate_delete(f"/_memory/agent/{memory_id}", params={"purge": "true"}), 404)
    assert_graph_error(client.simulate_delete("/_memory/nobody/x"), 404)
    bad_flag = client.simulate_delete(f"/_memory/agent/{memory_id}", params={"purge": "yes"})
    assert_graph_error(bad_flag, 400)  # the memory routes refuse in the contract's one shape, like include_forgotten
    dropped = client.simulate_delete("/_memory/agent")
    assert dropped.status_code == 200 and dropped.json == {"acknowledged": True, "namespace": "agent", "dropped": True}
    assert client.simulate_delete("/_memory/agent").json["dropped"] is False


def test_memory_audit_names_the_namespace_not_the_endpoint(client, audit_log):
    memory_id = store(client, text="x").json["_id"]
    client.simulate_delete(f"/_memory/agent/{memory_id}")
    assert [(e["op"], e["resource"]) for e in audit_log[-2:]] == [
        ("memory.store", ".xerj-memory-agent"), ("memory.forget", f".xerj-memory-agent/{memory_id}")]
