"""Elasticsearch details clients notice (issue 22): _id terms, GET source filtering, refresh flags, client
parameters and error types, each asserted against ES's documented shapes."""

from __future__ import annotations

import pytest

from .http_helpers import client, ndjson  # noqa: F401  (fixtures)


@pytest.fixture
def docs(client):
    rows = []
    for doc_id, source in {"a": {"include": {"field1": 1, "field2": 2}, "other": "x", "tag": "t"},
                           "b": {"include": {"field1": 3}, "other": "y", "tag": "u"},
                           "c": {"other": "z", "tag": "t"}}.items():
        rows += [{"index": {"_index": "things", "_id": doc_id}}, source]
    assert client.simulate_post("/_bulk", params={"refresh": "true"}, body=ndjson(*rows)).json["errors"] is False
    return client


def _ids(client, query, index="things"):
    hits = client.simulate_post(f"/{index}/_search", json={"query": query}).json["hits"]["hits"]
    return sorted(h["_id"] for h in hits)


def test_term_and_terms_on_id_match(docs):
    assert _ids(docs, {"term": {"_id": "a"}}) == ["a"]
    assert _ids(docs, {"term": {"_id": {"value": "b", "boost": 2}}}) == ["b"]
    assert _ids(docs, {"terms": {"_id": ["a", "c", "zzz"]}}) == ["a", "c"]
    assert _ids(docs, {"bool": {"must_not": [{"term": {"_id": "a"}}]}}) == ["b", "c"]
    count = docs.simulate_post("/things/_count", json={"query": {"terms": {"_id": ["a", "b"]}}}).json
    assert count["count"] == 2


def test_get_source_filtering(docs):
    def source(**params):
        return docs.simulate_get("/things/_doc/a", params=params).json.get("_source")

    assert source(_source="include.field1") == {"include": {"field1": 1}}
    assert source(_source_includes="include.field1") == {"include": {"field1": 1}}
    assert source(_source_includes="include.*") == {"include": {"field1": 1, "field2": 2}}
    assert source(_source_excludes="include.field2,tag") == {"include": {"field1": 1}, "other": "x"}
    assert source(_source_includes="include", _source_excludes="include.field1") == {"include": {"field2": 2}}
    assert source(_source="false") is None
    assert source(_source="true")["other"] == "x"
    mget = docs.simulate_post("/_mget", json={"docs": [
        {"_index": "things", "_id": "a", "_source": {"includes": ["include.*"], "excludes": ["*.field2"]}},
        {"_index": "things", "_id": "b", "_source": False}]}).json["docs"]
    assert mget[0]["_source"] == {"include": {"field1": 1}} and "_source" not in mget[1]
    search = docs.simulate_post("/things/_search", json={"query": {"ids": {"values": ["a"]}},
                                                         "_source": {"includes": ["incl*"], "excludes": ["*2"]}})
    assert search.json["hits"]["hits"][0]["_source"] == {"include": {"field1": 1}}


def test_refresh_flags_shape_the_write_response(client):
    forced = client.simulate_put("/r/_doc/1", params={"refresh": "true"}, json={"x": 1})
    assert forced.status_code == 201 and forced.json["forced_refresh"] is True
    empty = client.simulate_put("/r/_doc/2", query_string="refresh", json={"x": 1})
    assert empty.json["forced_refresh"] is True
    waited = client.simulate_put("/r/_doc/3", params={"refresh": "wait_for"}, json={"x": 1})
    assert waited.status_code == 201 and "forced_refresh" not in waited.json
    assert client.simulate_get("/r/_doc/3").json["found"] is True  # visible when wait_for returns
    assert "forced_refresh" not in client.simulate_put("/r/_doc/4", params={"refresh": "false"}, json={}).json
    bad = client.simulate_put("/r/_doc/5", params={"refresh": "soon"}, json={"x": 1})
    assert bad.status_code == 400 and bad.json["error"]["reason"] == "Unknown value for refresh: [soon]."
    assert client.simulate_delete("/r/_doc/1", params={"refresh": "true"}).json["forced_refresh"] is True
    update = client.simulate_post("/r/_update/2", params={"refresh": ""}, json={"doc": {"y": 2}})
    assert update.json["forced_refresh"] is True
    bulk = client.simulate_post("/_bulk", params={"refresh": "true"},
                                body=ndjson({"index": {"_index": "r", "_id": "9"}}, {"x": 9}))
    assert bulk.json["items"][0]["index"]["forced_refresh"] is True


def test_parameters_clients_send(docs):
    msearch = docs.simulate_post("/_msearch", params={"max_concurrent_searches": "3",
                                                      "max_concurrent_shard_requests": "5"},
                                 body=ndjson({"index": "things"}, {"query": {"match_all": {}}}))
    assert msearch.status_code == 200 and msearch.json["responses"][0]["hits"]["total"]["value"] == 3
    bulk = docs.simulate_post("/_bulk", body=ndjson({"index": {"_index": "things", "_id": "a", "op_type": "create"}},
                                                    {"x": 1},
                                                    {"index": {"_index": "things", "_id": "new", "op_type": "create"}},
                                                    {"x": 2}))
    items = bulk.json["items"]
    assert items[0]["create"]["status"] == 409
    assert items[0]["create"]["error"]["type"] == "version_conflict_engine_exception"
    assert items[1]["create"]["status"] == 201
    for path in ("/things,missing/_mapping", "/things,missing/_count", "/things,missing/_search"):
        assert docs.simulate_get(path).status_code == 404
        assert docs.simulate_get(path, params={"ignore_unavailable": "true"}).status_code == 200, path
    assert docs.simulate_get("/none-*/_search", params={"allow_no_indices": "false"}).status_code == 404
    assert docs.simulate_get("/none-*/_mapping", params={"allow_no_indices": "false"}).status_code == 404
    assert docs.simulate_get("/none-*/_count", params={"allow_no_indices": "true"}).json["count"] == 0
    updated = docs.simulate_post("/_bulk", body=ndjson({"update": {"_index": "things", "_id": "b"}},
                                                       {"doc": {"tag": "v"}, "_source": True}))
    got = updated.json["items"][0]["update"]["get"]
    assert got["found"] is True and got["_source"] == {"include": {"field1": 3}, "other": "y", "tag": "v"}
    filtered = docs.simulate_post("/_bulk", body=ndjson({"update": {"_index": "things", "_id": "b",
                                                                    "_source": ["tag"]}}, {"doc": {"tag": "w"}}))
    assert filtered.json["items"][0]["update"]["get"]["_source"] == {"tag": "w"}
    untracked = docs.simulate_get("/things/_search", params={"track_total_hits": "false",
                                                             "rest_total_hits_as_int": "true"})
    assert untracked.json["hits"]["total"] == -1
    exact = docs.simulate_get("/things/_search", params={"rest_total_hits_as_int": "true"})
    assert exact.json["hits"]["total"] == 4


def test_error_types_match_elasticsearch(client):
    bulk = client.simulate_post("/_bulk", body=ndjson({"index": {"_index": "e", "_id": ""}}, {"x": 1}))
    error = bulk.json["items"][0]["index"]["error"]
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == "if _id is specified it must not be empty"
    typed = client.simulate_put("/e2", json={"mappings": {"_doc": {"properties": {"t": {"type": "text"}}}}})
    assert typed.status_code == 400 and typed.json["error"]["type"] == "mapper_parsing_exception"
    assert typed.json["error"]["reason"] == ("Root mapping definition has unsupported parameters:  "
                                             "[_doc : {properties={t={type=text}}}]")
    empty_action = client.simulate_post("/_bulk", body=ndjson({}, {"x": 1}))
    assert empty_action.status_code == 400 and empty_action.json["error"]["type"] == "illegal_argument_exception"
    assert "expected FIELD_NAME but found [END_OBJECT]" in empty_action.json["error"]["reason"]
    empty_field = client.simulate_put("/e3", json={"mappings": {"properties": {"": {"type": "text"}}}})
    assert empty_field.status_code == 400 and empty_field.json["error"]["type"] == "mapper_parsing_exception"
    assert "field name cannot be an empty string" in empty_field.json["error"]["reason"]
    client.simulate_put("/e4/_doc/1", json={"x": 1})
    inexact = client.simulate_get("/e4/_search", params={"rest_total_hits_as_int": "true",
                                                         "track_total_hits": "100"})
    assert inexact.status_code == 400 and inexact.json["error"]["type"] == "illegal_argument_exception"
    assert inexact.json["error"]["reason"] == ("[rest_total_hits_as_int] cannot be used if the tracking of total "
                                               "hits is not accurate, got 100")
    nested = client.simulate_put("/e5", json={"mappings": {"properties": {"n": {"type": "nested"}}}})
    assert nested.status_code == 400 and "nested" in nested.json["error"]["reason"]


def test_source_route(docs):
    assert docs.simulate_get("/things/_source/a").json == {"include": {"field1": 1, "field2": 2}, "other": "x",
                                                           "tag": "t"}
    assert docs.simulate_get("/things/_source/a", params={"_source_includes": "include.field2"}).json == \
        {"include": {"field2": 2}}
    missing = docs.simulate_get("/things/_source/nope")
    assert missing.status_code == 404 and missing.json["error"]["type"] == "resource_not_found_exception"
    assert missing.json["error"]["reason"] == "Document not found [things]/[nope]"
    assert docs.simulate_head("/things/_source/a").status_code == 200
    assert docs.simulate_head("/things/_source/nope").status_code == 404
    assert docs.simulate_get("/nowhere/_source/a").json["error"]["type"] == "index_not_found_exception"
