"""The Elasticsearch-compatible index and document routes, in process (search lives in test_http_search)."""

from __future__ import annotations

from .http_helpers import audit_log, client, error_type, ndjson  # noqa: F401  (fixtures)


def test_create_get_head_delete_index(client, engine):
    created = client.simulate_put("/books", json={"mappings": {"properties": {"title": {"type": "text"}}},
                                                  "settings": {"number_of_shards": 1}})
    assert created.status_code == 200
    assert created.json == {"acknowledged": True, "shards_acknowledged": True, "index": "books"}
    assert engine.store.exists("books")
    again = client.simulate_put("/books")
    assert again.status_code == 400 and error_type(again) == "resource_already_exists_exception"
    described = client.simulate_get("/books").json["books"]
    assert described["mappings"] == {"properties": {"title": {"type": "text"}}}
    assert described["settings"]["index"]["number_of_shards"] == "1"
    assert client.simulate_head("/books").status_code == 200
    assert client.simulate_head("/nope").status_code == 404
    assert client.simulate_head("/nope").text == ""
    assert client.simulate_get("/nope").status_code == 404
    assert client.simulate_delete("/books").json == {"acknowledged": True}
    assert not engine.store.exists("books")
    gone = client.simulate_delete("/books")
    assert gone.status_code == 404 and error_type(gone) == "index_not_found_exception"


def test_create_index_refuses_bad_names_and_unknown_fields(client):
    upper = client.simulate_put("/Books")
    assert upper.status_code == 400 and error_type(upper) == "invalid_index_name_exception"
    unknown = client.simulate_put("/books", json={"mapping": {}})
    assert unknown.status_code == 400 and error_type(unknown) == "parsing_exception"
    assert "[mapping]" in unknown.json["error"]["reason"]
    bad_mapping = client.simulate_put("/books", json={"mappings": {"properties": {"t": {"type": "nonsense"}}}})
    assert bad_mapping.status_code == 400 and error_type(bad_mapping) == "mapper_parsing_exception"


def test_get_index_expands_wildcards_and_delete_refuses_them(client):
    for name in ("logs-a", "logs-b", "other"):
        client.simulate_put(f"/{name}")
    assert sorted(client.simulate_get("/logs-*").json) == ["logs-a", "logs-b"]
    assert client.simulate_head("/logs-*").status_code == 200
    refused = client.simulate_delete("/logs-*")
    assert refused.status_code == 400 and error_type(refused) == "illegal_argument_exception"
    assert client.simulate_delete("/logs-a,logs-b").status_code == 200
    assert client.simulate_get("/logs-*").json == {}


def test_mapping_get_and_put(client):
    client.simulate_put("/notes")
    put = client.simulate_put("/notes/_mapping", json={"properties": {"tag": {"type": "keyword"}}})
    assert put.json == {"acknowledged": True}
    assert client.simulate_get("/notes/_mapping").json == {
        "notes": {"mappings": {"properties": {"tag": {"type": "keyword"}}}}}
    missing = client.simulate_get("/absent/_mapping")
    assert missing.status_code == 404 and error_type(missing) == "index_not_found_exception"


def test_document_lifecycle(client):
    created = client.simulate_put("/books/_doc/1", json={"title": "Dune"})
    assert created.status_code == 201
    assert created.json["result"] == "created" and created.json["_version"] == 1
    assert created.json["_shards"] == {"total": 1, "successful": 1, "failed": 0}
    updated = client.simulate_put("/books/_doc/1", json={"title": "Dune", "year": 1965})
    assert updated.status_code == 200 and updated.json["result"] == "updated" and updated.json["_version"] == 2
    got = client.simulate_get("/books/_doc/1")
    assert got.status_code == 200
    assert got.json == {"_index": "books", "_id": "1", "_version": 2, "_primary_term": 1, "found": True,
                        "_source": {"title": "Dune", "year": 1965}}
    assert "_source" not in client.simulate_get("/books/_doc/1", params={"_source": "false"}).json
    assert client.simulate_get("/books/_doc/1", params={"_source": "year"}).json["_source"] == {"year": 1965}
    assert client.simulate_head("/books/_doc/1").status_code == 200
    missing = client.simulate_get("/books/_doc/2")
    assert missing.status_code == 404 and missing.json == {"_index": "books", "_id": "2", "found": False}
    assert client.simulate_head("/books/_doc/2").status_code == 404
    assert client.simulate_head("/nope/_doc/2").status_code == 404
    deleted = client.simulate_delete("/books/_doc/1")
    assert deleted.status_code == 200 and deleted.json["result"] == "deleted"
    again = client.simulate_delete("/books/_doc/1")
    assert again.status_code == 404 and again.json["result"] == "not_found"
    no_index = client.simulate_delete("/nope/_doc/1")
    assert no_index.status_code == 404 and error_type(no_index) == "index_not_found_exception"


def test_post_doc_generates_an_id(client):
    result = client.simulate_post("/books/_doc", json={"title": "Solaris"})
    assert result.status_code == 201
    doc_id = result.json["_id"]
    assert len(doc_id) == 20
    assert client.simulate_get(f"/books/_doc/{doc_id}").json["_source"] == {"title": "Solaris"}


def test_create_refuses_an_existing_id(client):
    assert client.simulate_put("/books/_create/1", json={"a": 1}).status_code == 201
    conflict = client.simulate_post("/books/_create/1", json={"a": 2})
    assert conflict.status_code == 409 and error_type(conflict) == "version_conflict_engine_exception"
    op_type = client.simulate_put("/books/_doc/1", json={"a": 3}, params={"op_type": "create"})
    assert op_type.status_code == 409
    assert client.simulate_get("/books/_doc/1").json["_source"] == {"a": 1}


def test_partial_update(client):
    client.simulate_put("/books/_doc/1", json={"title": "Dune", "meta": {"a": 1}})
    result = client.simulate_post("/books/_update/1", json={"doc": {"meta": {"b": 2}}})
    assert result.status_code == 200 and result.json["result"] == "updated"
    assert client.simulate_get("/books/_doc/1").json["_source"] == {"title": "Dune", "meta": {"a": 1, "b": 2}}
    noop = client.simulate_post("/books/_update/1", json={"doc": {"title": "Dune"}})
    assert noop.json["result"] == "noop"
    missing = client.simulate_post("/books/_update/9", json={"doc": {"x": 1}})
    assert missing.status_code == 404 and error_type(missing) == "document_missing_exception"
    upsert = client.simulate_post("/books/_update/9", json={"doc": {"x": 1}, "doc_as_upsert": True})
    assert upsert.status_code == 201 and upsert.json["result"] == "created"
    script = client.simulate_post("/books/_update/1", json={"script": {"source": "ctx._source.x = 1"}})
    assert script.status_code == 400 and "script" in script.json["error"]["reason"]
    unknown = client.simulate_post("/books/_update/1", json={"doc": {}, "docc": {}})
    assert unknown.status_code == 400 and error_type(unknown) == "parsing_exception"


def test_optimistic_concurrency_parameters_are_refused_not_ignored(client):
    result = client.simulate_put("/books/_doc/1", json={"a": 1}, params={"if_seq_no": "0", "if_primary_term": "1"})
    assert result.status_code == 400 and "if_seq_no" in result.json["error"]["reason"]


def test_bulk_applies_items_and_reports_each(client):
    body = ndjson(
        {"index": {"_index": "books", "_id": "1"}}, {"title": "Dune"},
        {"create": {"_index": "books", "_id": "1"}}, {"title": "again"},
        {"create": {"_index": "books", "_id": "2"}}, {"title": "Solaris"},
        {"update": {"_index": "books", "_id": "2"}}, {"doc": {"year": 1961}},
        {"delete": {"_index": "books", "_id": "nope"}},
        {"index": {"_index": "books"}}, {"title": "Ubik"},
    ) + b'{"index": {"_index": "books", "_id": "bad"}}\n{"title": \n'
    result = client.simulate_post("/_bulk", body=body, headers={"Content-Type": "application/x-ndjson"})
    assert result.status_code == 200
    assert result.json["errors"] is True
    items = result.json["items"]
    assert [list(item)[0] for item in items] == ["index", "create", "create", "update", "delete", "index", "index"]
    statuses = [next(iter(item.values()))["status"] for item in items]
    assert statuses == [201, 409, 201, 200, 404, 201, 400]
    assert items[1]["create"]["error"]["type"] == "version_conflict_engine_exception"
    assert items[6]["index"]["error"]["type"] == "mapper_parsing_exception"
    assert client.simulate_get("/books/_doc/2").json["_source"] == {"title": "Solaris", "year": 1961}
    assert client.simulate_get("/books/_doc/bad").status_code == 404


def test_bulk_with_a_default_index_and_without_errors(client):
    body = ndjson({"index": {"_id": "a"}}, {"n": 1}, {"index": {"_id": "b", "_index": "elsewhere"}}, {"n": 2})
    result = client.simulate_post("/dflt/_bulk", body=body)
    assert result.json["errors"] is False
    assert [i["index"]["_index"] for i in result.json["items"]] == ["dflt", "elsewhere"]
    assert client.simulate_put("/dflt/_bulk", body=ndjson({"delete": {"_id": "a"}})).json["errors"] is False


def test_bulk_refuses_malformed_action_lines_whole(client):
    cases = [
        b'{"index": {"_index": "x"}\n{"a": 1}\n',  # invalid JSON action line
        ndjson({"upsert": {"_index": "x"}}, {"a": 1}),  # unknown action
        ndjson({"index": {"_index": "x", "_colour": "red"}}, {"a": 1}),  # unknown metadata
        ndjson({"index": {"_id": "1"}}, {"a": 1}),  # no index anywhere
        ndjson({"index": {"_index": "x"}}),  # no source line
        b"",
    ]
    for body in cases:
        result = client.simulate_post("/_bulk", body=body)
        assert result.status_code == 400, body
        assert result.json["status"] == 400
    first = client.simulate_post("/_bulk", body=cases[0])
    assert error_type(first) == "parsing_exception" and "bulk action line [1]" in first.json["error"]["reason"]
    assert not client.simulate_head("/x").status_code == 200


def test_mget(client):
    client.simulate_put("/books/_doc/1", json={"title": "Dune", "year": 1965})
    client.simulate_put("/films/_doc/1", json={"title": "Alien"})
    docs = client.simulate_post("/_mget", json={"docs": [
        {"_index": "books", "_id": "1"}, {"_index": "films", "_id": "1", "_source": ["title"]},
        {"_index": "books", "_id": "404"}, {"_index": "absent", "_id": "1"}]}).json["docs"]
    assert docs[0]["found"] and docs[0]["_source"] == {"title": "Dune", "year": 1965}
    assert docs[1]["_source"] == {"title": "Alien"}
    assert docs[2] == {"_index": "books", "_id": "404", "found": False}
    assert docs[3]["error"]["type"] == "index_not_found_exception"
    by_ids = client.simulate_get("/books/_mget", json={"ids": ["1", "2"]}).json["docs"]
    assert [d["found"] for d in by_ids] == [True, False]
    assert client.simulate_post("/_mget", json={"ids": ["1"]}).status_code == 400
    assert client.simulate_post("/_mget", json={"documents": []}).status_code == 400
    assert client.simulate_post("/_mget", body=b"").status_code == 400


def test_cat_indices_text_and_json(client):
    client.simulate_put("/books/_doc/1", json={"a": 1})
    client.simulate_put("/books/_doc/2", json={"a": 1})
    client.simulate_put("/films")
    client.simulate_put("/.xerj-memory-notes")
    rows = client.simulate_get("/_cat/indices", params={"format": "json"}).json
    assert [r["index"] for r in rows] == ["books", "films"]
    assert rows[0]["docs.count"] == "2" and rows[0]["health"] == "green"
    text = client.simulate_get("/_cat/indices", params={"v": "true"})
    assert text.headers["content-type"].startswith("text/plain")
    lines = text.text.splitlines()
    assert lines[0].split() == ["health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted",
                                "store.size", "pri.store.size"]
    assert lines[1].split()[2] == "books" and lines[1].split()[6] == "2"
    bare = client.simulate_get("/_cat/indices", params={"h": "index,docs.count", "s": "docs.count:desc"}).text
    assert bare.splitlines()[0].split() == ["books", "2"]
    hidden = client.simulate_get("/_cat/indices", params={"format": "json", "expand_wildcards": "all"}).json
    assert ".xerj-memory-notes" in [r["index"] for r in hidden]
    one = client.simulate_get("/_cat/indices/fil*", params={"format": "json"}).json
    assert [r["index"] for r in one] == ["films"]


def test_refresh_is_accepted(client):
    client.simulate_put("/books")
    assert client.simulate_post("/_refresh").json == {"_shards": {"total": 1, "successful": 1, "failed": 0}}
    assert client.simulate_post("/books/_refresh").status_code == 200
    assert client.simulate_get("/books/_refresh").status_code == 200
    assert client.simulate_post("/nope/_refresh").status_code == 404


def test_writes_are_visible_to_the_next_read_without_refresh(client):
    for n in range(20):
        client.simulate_put(f"/live/_doc/{n}", json={"n": n})
        assert client.simulate_get(f"/live/_doc/{n}").json["_source"] == {"n": n}


def test_stats_and_forcemerge_report_and_reclaim_dead_rows(client, engine):
    for i in range(20):
        client.simulate_put(f"/books/_doc/{i % 5}", json={"title": f"draft {i}"})
    stats = client.simulate_get("/books/_stats")
    assert stats.status_code == 200
    books = stats.json["indices"]["books"]["primaries"]
    assert books["docs"] == {"count": 5, "deleted": 15}
    assert books["store"]["size_in_bytes"] > books["store"]["dead_in_bytes"] > 0
    assert stats.json["_all"]["primaries"]["docs"]["count"] == 5
    # bytes=b for plain numbers; without it _cat renders sizes for people ("1009b"), as ES does
    sizes = client.simulate_get("/_cat/indices", params={"h": "index,docs.deleted,store.dead", "format": "json",
                                                         "bytes": "b"}).json
    assert sizes == [{"index": "books", "docs.deleted": "15", "store.dead": str(books["store"]["dead_in_bytes"])}]
    merged = client.simulate_post("/books/_forcemerge")
    assert merged.status_code == 200 and merged.json == {"_shards": {"total": 1, "successful": 1, "failed": 0}}
    after = client.simulate_get("/books/_stats").json["indices"]["books"]["primaries"]
    assert after["docs"]["count"] == 5 and after["store"]["dead_in_bytes"] < books["store"]["dead_in_bytes"]
    assert after["store"]["size_in_bytes"] < books["store"]["size_in_bytes"]
    assert client.simulate_get("/books/_doc/3").json["_source"] == {"title": "draft 18"}
    assert client.simulate_post("/nope/_forcemerge").status_code == 404
