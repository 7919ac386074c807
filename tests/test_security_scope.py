"""The scope on every row: set by the engine, refused from callers, filtered on every read, migrated on open."""

from __future__ import annotations

import pytest
from falcon.testing import TestClient

from xerj_core.engine import Engine, EngineConfig
from xerj_core.store import scope as scope_module
from xerj_core.store.scope import SCOPE_FIELD, scope_of
from xerj_http import create_app

from .http_helpers import admin_headers, ndjson

EDGES, NODES = ".xerj-memory-alice-edges", ".xerj-memory-alice"


@pytest.fixture
def http(engine, pm):
    app = create_app(engine, pm)
    yield TestClient(app, headers=admin_headers(engine))
    app.close()


def test_scope_of_names_the_tenant():
    assert scope_of(".xerj-memory-alice-edges") == "alice" and scope_of(".xerj-memory-alice") == "alice"
    assert scope_of(".xerj-memory-a.b-edges") == "a.b" and scope_of("books") is None
    assert scope_of(".xerj-other") is None


def test_a_body_that_sets_the_scope_is_refused(http, engine):
    assert http.simulate_post("/_graph/alice/link", json={"src": "a", "dst": "b", "type": "t"}).status_code == 201
    for method, path, body in [
        ("PUT", f"/{NODES}/_doc/1", {"text": "x", SCOPE_FIELD: "bob"}),
        ("PUT", f"/{NODES}/_doc/1", {"text": "x", SCOPE_FIELD: "alice"}),
        ("POST", f"/{EDGES}/_doc", {SCOPE_FIELD: "bob"}),
        ("PUT", f"/{NODES}/_create/2", {SCOPE_FIELD: "bob"}),
    ]:
        result = http.simulate_request(method, path, json=body)
        assert result.status_code == 400, (path, result.text)
        assert result.json["error"]["type"] == "mapper_parsing_exception"
        assert SCOPE_FIELD in result.json["error"]["reason"]
    assert http.simulate_put(f"/{NODES}/_doc/3", json={"text": "fine"}).status_code == 201
    changed = http.simulate_post(f"/{NODES}/_update/3", json={"doc": {SCOPE_FIELD: "bob"}})
    assert changed.status_code == 400
    bulk = http.simulate_post("/_bulk", body=ndjson({"index": {"_index": NODES, "_id": "4"}}, {SCOPE_FIELD: "bob"},
                                                    {"index": {"_index": NODES, "_id": "5"}}, {"text": "ok"}),
                              headers={"Content-Type": "application/x-ndjson"})
    items = bulk.json["items"]
    assert bulk.json["errors"] is True and items[0]["index"]["status"] == 400 and items[1]["index"]["status"] == 201
    for body in ({"properties": {SCOPE_FIELD: {"type": "keyword"}}},):
        assert http.simulate_put(f"/{NODES}/_mapping", json=body).status_code == 400
        assert http.simulate_put("/.xerj-memory-carol", json={"mappings": body}).status_code == 400
    # An ordinary index has no scope: the name is just a field there.
    assert http.simulate_put("/books/_doc/1", json={SCOPE_FIELD: "anything"}).status_code == 201


def test_the_scope_is_a_doc_value_never_part_of_source_or_the_public_mapping(http, engine):
    http.simulate_post("/_memory/alice", json={"text": "remember this"})
    hit = http.simulate_post(f"/{NODES}/_search", json={}).json["hits"]["hits"][0]
    assert SCOPE_FIELD not in hit["_source"]
    assert SCOPE_FIELD not in http.simulate_get(f"/{NODES}/_mapping").json[NODES]["mappings"]["properties"]
    with engine.store.reader(NODES) as reader:
        assert reader.mapping.fields[SCOPE_FIELD].type == "keyword"
        column = reader.column(SCOPE_FIELD)
        assert column.present[reader.live_rows()].all()
        assert reader.field_dictionary(SCOPE_FIELD).terms == ["alice"]
    # Scoped rows still match a query on the scope field (the filter the reader adds is this one).
    found = http.simulate_post(f"/{NODES}/_search", json={"query": {"term": {SCOPE_FIELD: "alice"}}}).json
    assert found["hits"]["total"]["value"] == 1


def misroute(engine, index: str, doc: dict, doc_id: str, scope: str) -> None:
    """A row that reached ``index`` by a route other than its tenant's: written with another tenant's scope."""
    engine.store.transact(lambda txn: txn.put(index, doc, doc_id, scope=scope))


def test_a_row_of_another_tenant_in_the_wrong_index_is_never_returned(http, engine):
    assert http.simulate_post("/_graph/alice/link", json={"src": "a1", "dst": "a2", "type": "t"}).status_code == 201
    assert http.simulate_post("/_memory/alice", json={"text": "alice owns this"}).status_code == 201
    own = http.simulate_get("/_graph/alice/ego", params={"node": "a1"}).json["edges"][0]
    stray_edge = {**{k: own[k] for k in ("src", "type", "weight", "valid_at")}, "dst": "bob-secret-node",
                  "edge_id": "f" * 32, "created_at": own["valid_at"], "schema_version": 1}
    misroute(engine, EDGES, stray_edge, "f" * 32, "bob")
    misroute(engine, NODES, {"text": "bob secret leaked", "stored_at": 1}, "stray", "bob")
    # The same rows with the right tenant are visible: the positive control.
    misroute(engine, NODES, {"text": "alice second note", "stored_at": 2}, "mine", "alice")

    ego = http.simulate_get("/_graph/alice/ego", params={"node": "a1", "hops": "2"}).json
    assert [e["dst"] for e in ego["edges"]] == ["a2"]
    overview = http.simulate_get("/_graph/alice/overview").json
    assert overview["edges"]["total"] == 1 and overview["nodes"]["total"] == 2
    assert http.simulate_get(f"/{EDGES}/_doc/{'f' * 32}").status_code == 404
    assert http.simulate_get(f"/{NODES}/_doc/stray").status_code == 404
    assert http.simulate_get(f"/{NODES}/_doc/mine").status_code == 200
    docs = http.simulate_post("/_mget", json={"docs": [{"_index": NODES, "_id": "stray"},
                                                       {"_index": NODES, "_id": "mine"}]}).json["docs"]
    assert [d["found"] for d in docs] == [False, True]
    searched = http.simulate_post("/.xerj-memory-*/_search", json={"size": 50}).text
    assert "bob-secret" not in searched and "bob secret" not in searched and "alice second note" in searched
    assert http.simulate_post(f"/{NODES}/_count", json={}).json["count"] == 2
    listed = http.simulate_get("/_memory/alice").json
    assert sorted(m["text"] for m in listed["memories"]) == ["alice owns this", "alice second note"]
    recalled = http.simulate_post("/_memory/alice/_recall", json={"query": "secret leaked note"}).text
    assert "bob-secret" not in recalled and "bob secret" not in recalled and "alice second note" in recalled
    rows = http.simulate_get("/_cat/indices", params={"format": "json", "expand_wildcards": "all"}).json
    assert next(r for r in rows if r["index"] == NODES)["docs.count"] == "2"


def test_existing_data_directories_get_the_scope_when_opened(tmp_path, pm, monkeypatch):
    data = tmp_path / "old"
    # Write as a build before row scopes existed would have: no reserved index is scoped.
    for module in ("xerj_core.store.write", "xerj_core.store.read", "xerj_core.store.store"):
        monkeypatch.setattr(f"{module}.scope_of", lambda index: None)
    with Engine(data, pm, config=EngineConfig(tail_rows=8)) as old:
        for n in range(20):  # enough rows to seal segments
            old.graph.link("alice", {"src": f"n{n}", "dst": f"n{n + 1}", "type": "next"})
        stored = old.memory.store("alice", {"text": "written before scopes"})[1]
        with old.store.reader(EDGES) as reader:
            assert SCOPE_FIELD not in reader.mapping.fields
        before = {hit: old.store.get(EDGES, hit) for hit in ("__xerj-brain-meta",)}
    monkeypatch.undo()
    assert scope_module.scope_of(EDGES) == "alice"

    with Engine(data, pm, config=EngineConfig(tail_rows=8)) as engine:
        for index in (EDGES, NODES):
            with engine.store.reader(index) as reader:
                assert reader.scope == "alice"
                column = reader.column(SCOPE_FIELD)
                rows = reader.live_rows()
                assert len(rows) == reader.doc_count > 0 and column.present[rows].all()
        meta, version = engine.store.get(EDGES, "__xerj-brain-meta")
        assert meta == before["__xerj-brain-meta"][0] and version == before["__xerj-brain-meta"][1] + 1
        ego = engine.graph.ego("alice", {"node": "n0", "hops": "2"})
        assert sorted(e["dst"] for e in ego["edges"]) == ["n1", "n2"]
        listed = engine.memory.list("alice", {})
        assert [m["_id"] for m in listed["memories"]] == [stored["_id"]]
        assert engine.store.migrate_scopes() == []  # done once
    with Engine(data, pm) as again:
        assert again.store.get(EDGES, "__xerj-brain-meta")[1] == version  # not migrated twice
