"""Aliases, settings, open/close and the _cat tables in Elasticsearch's request and response shapes (issue 22)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .http_helpers import client, ndjson  # noqa: F401  (fixtures)


@pytest.fixture
def logs(client):
    for name, n in (("logs-1", 3), ("logs-2", 2)):
        client.simulate_put(f"/{name}", json={"mappings": {"properties": {"msg": {"type": "text"}}}})
        rows = []
        for i in range(n):
            rows += [{"index": {"_index": name, "_id": f"{name}-{i}"}}, {"msg": f"hello {name}"}]
        client.simulate_post("/_bulk", body=ndjson(*rows))
    return client


def test_alias_routes_and_listing(logs):
    assert logs.simulate_put("/logs-1/_alias/current").json == {"acknowledged": True}
    assert logs.simulate_put("/logs-1,logs-2/_alias/all-logs").status_code == 200
    assert logs.simulate_get("/_alias/current").json == {"logs-1": {"aliases": {"current": {}}}}
    everything = logs.simulate_get("/_alias").json
    assert everything == {"logs-1": {"aliases": {"all-logs": {}, "current": {}}},
                          "logs-2": {"aliases": {"all-logs": {}}}}
    assert logs.simulate_get("/logs-2/_alias").json == {"logs-2": {"aliases": {"all-logs": {}}}}
    assert logs.simulate_get("/logs-2/_alias/all-*").json == {"logs-2": {"aliases": {"all-logs": {}}}}
    missing = logs.simulate_get("/_alias/nope")
    assert missing.status_code == 404 and missing.json == {"error": "alias [nope] missing", "status": 404}
    assert logs.simulate_head("/_alias/current").status_code == 200
    assert logs.simulate_head("/_alias/nope").status_code == 404
    described = logs.simulate_get("/logs-1").json["logs-1"]["aliases"]
    assert described == {"all-logs": {}, "current": {}}
    assert logs.simulate_delete("/logs-1/_alias/current").json == {"acknowledged": True}
    assert logs.simulate_get("/_alias/current").status_code == 404
    gone = logs.simulate_delete("/logs-1/_alias/current")
    assert gone.status_code == 404 and gone.json["error"]["type"] == "aliases_not_found_exception"
    by_alias = logs.simulate_delete("/all-logs")
    assert by_alias.status_code == 400 and "matches an alias" in by_alias.json["error"]["reason"]
    clash = logs.simulate_put("/logs-1/_alias/logs-2")
    assert clash.status_code == 400 and clash.json["error"]["type"] == "invalid_alias_name_exception"


def test_alias_actions_apply_atomically(logs):
    body = {"actions": [{"add": {"index": "logs-1", "alias": "a"}},
                        {"add": {"indices": ["logs-1", "logs-2"], "alias": "b", }},
                        {"remove": {"index": "logs-2", "alias": "never-added"}}]}
    failed = logs.simulate_post("/_aliases", json=body)
    assert failed.status_code == 404 and failed.json["error"]["type"] == "aliases_not_found_exception"
    assert logs.simulate_get("/_alias").json == {}  # nothing of the failed request applied
    body["actions"].pop()
    assert logs.simulate_post("/_aliases", json=body).json == {"acknowledged": True, "errors": False}
    swap = {"actions": [{"remove": {"index": "logs-1", "alias": "a"}}, {"add": {"index": "logs-2", "alias": "a"}}]}
    assert logs.simulate_post("/_aliases", json=swap).status_code == 200
    assert logs.simulate_get("/_alias/a").json == {"logs-2": {"aliases": {"a": {}}}}
    drop = {"actions": [{"remove_index": {"index": "logs-2"}}]}
    assert logs.simulate_post("/_aliases", json=drop).status_code == 200
    assert logs.simulate_head("/logs-2").status_code == 404
    assert logs.simulate_get("/_alias").json == {"logs-1": {"aliases": {"b": {}}}}
    bad = logs.simulate_post("/_aliases", json={"actions": [{"rename": {"index": "logs-1", "alias": "x"}}]})
    assert bad.status_code == 400


def test_aliases_in_the_create_body(client):
    created = client.simulate_put("/events", json={"aliases": {"ev": {}, "ev-write": {"is_write_index": True}}})
    assert created.status_code == 200
    assert client.simulate_get("/events/_alias").json == {"events": {"aliases": {
        "ev": {}, "ev-write": {"is_write_index": True}}}}
    refused = client.simulate_put("/events2", json={"aliases": {"x": {"filter": {"term": {"a": 1}}}}})
    assert refused.status_code == 400 and client.simulate_head("/events2").status_code == 404


def test_reads_through_an_alias_of_several_indices(logs):
    logs.simulate_put("/logs-1,logs-2/_alias/all-logs")
    found = logs.simulate_post("/all-logs/_search", json={"query": {"match": {"msg": "hello"}}}).json
    assert found["hits"]["total"]["value"] == 5
    assert {h["_index"] for h in found["hits"]["hits"]} == {"logs-1", "logs-2"}
    assert logs.simulate_get("/all-logs/_count").json["count"] == 5
    assert logs.simulate_get("/all-*/_count").json["count"] == 5
    single = logs.simulate_get("/all-logs/_doc/logs-1-0")
    assert single.status_code == 400 and single.json["error"]["type"] == "illegal_argument_exception"
    assert "has more than one index associated with it" in single.json["error"]["reason"]
    logs.simulate_put("/logs-2/_alias/just-two")
    got = logs.simulate_get("/just-two/_doc/logs-2-1").json
    assert got["found"] is True and got["_index"] == "logs-2"
    mget = logs.simulate_post("/_mget", json={"docs": [{"_index": "just-two", "_id": "logs-2-0"}]}).json
    assert mget["docs"][0]["found"] is True


def test_writes_through_an_alias(logs):
    logs.simulate_put("/logs-2/_alias/solo")
    written = logs.simulate_put("/solo/_doc/w1", json={"msg": "via alias"})
    assert written.status_code == 201 and written.json["_index"] == "logs-2"
    logs.simulate_put("/logs-1,logs-2/_alias/both")
    refused = logs.simulate_put("/both/_doc/w2", json={"msg": "x"})
    assert refused.status_code == 400 and refused.json["error"]["type"] == "illegal_argument_exception"
    assert refused.json["error"]["reason"].startswith("no write index is defined for alias [both]")
    bulk = logs.simulate_post("/_bulk", body=ndjson({"index": {"_index": "both", "_id": "w3"}}, {"msg": "x"}))
    assert bulk.json["items"][0]["index"]["error"]["type"] == "illegal_argument_exception"
    logs.simulate_post("/_aliases", json={"actions": [{"add": {"index": "logs-1", "alias": "both",
                                                               "is_write_index": True}}]})
    now = logs.simulate_put("/both/_doc/w4", json={"msg": "x"})
    assert now.status_code == 201 and now.json["_index"] == "logs-1"
    update = logs.simulate_post("/both/_update/w4", json={"doc": {"more": 1}})
    assert update.json["_index"] == "logs-1" and update.json["result"] == "updated"


def test_settings(client):
    client.simulate_put("/s1", json={"settings": {"index": {"refresh_interval": "5s"}, "number_of_shards": 1,
                                                  "analysis": {"analyzer": {"a": {"type": "standard"}}}}})
    got = client.simulate_get("/s1/_settings").json["s1"]["settings"]["index"]
    assert got["number_of_shards"] == "1" and got["number_of_replicas"] == "0"
    assert got["provided_name"] == "s1" and got["version"] == {"created": "8500003"}
    assert got["creation_date"].isdigit() and len(got["uuid"]) > 10
    assert got["refresh_interval"] == "5s" and got["analysis"]["analyzer"]["a"]["type"] == "standard"
    updated = client.simulate_put("/s1/_settings", json={"index": {"refresh_interval": "-1"}})
    assert updated.json == {"acknowledged": True}
    assert client.simulate_get("/s1/_settings").json["s1"]["settings"]["index"]["refresh_interval"] == "-1"
    assert client.simulate_put("/s1/_settings", json={"index.number_of_replicas": 0}).status_code == 200
    static = client.simulate_put("/s1/_settings", json={"index": {"number_of_shards": 2}})
    assert static.status_code == 400 and "Can't update non dynamic settings [[index.number_of_shards]]" \
        in static.json["error"]["reason"]
    unknown = client.simulate_put("/s1/_settings", json={"index.foo": 1})
    assert unknown.status_code == 400 and unknown.json["error"]["reason"].startswith("unknown setting [index.foo]")
    replicas = client.simulate_put("/s1/_settings", json={"number_of_replicas": 2})
    assert replicas.status_code == 400 and "number_of_replicas" in replicas.json["error"]["reason"]
    assert set(client.simulate_get("/_settings").json) == {"s1"}


def test_close_and_open(logs):
    closed = logs.simulate_post("/logs-1/_close")
    assert closed.json == {"acknowledged": True, "shards_acknowledged": True, "indices": {"logs-1": {"closed": True}}}
    for response in (logs.simulate_post("/logs-1/_search", json={}), logs.simulate_get("/logs-1/_doc/logs-1-0"),
                     logs.simulate_put("/logs-1/_doc/new", json={"msg": "x"}), logs.simulate_get("/logs-1/_count")):
        assert response.status_code == 400, response.json
        assert response.json["error"]["type"] == "index_closed_exception"
        assert response.json["error"]["index"] == "logs-1" and response.json["error"]["reason"] == "closed"
    bulk = logs.simulate_post("/_bulk", body=ndjson({"index": {"_index": "logs-1", "_id": "z"}}, {"msg": "x"}))
    assert bulk.json["items"][0]["index"]["error"]["type"] == "index_closed_exception"
    # wildcards skip a closed index, and _cat/indices shows it as close
    assert logs.simulate_get("/logs-*/_count").json["count"] == 2
    rows = {r["index"]: r for r in logs.simulate_get("/_cat/indices", params={"format": "json"}).json}
    assert rows["logs-1"]["status"] == "close" and rows["logs-2"]["status"] == "open"
    assert logs.simulate_get("/logs-1/_settings").json["logs-1"]["settings"]["index"]["verified_before_close"]
    assert logs.simulate_post("/logs-1/_open").json == {"acknowledged": True, "shards_acknowledged": True}
    assert logs.simulate_get("/logs-1/_count").json["count"] == 3
    logs.simulate_post("/logs-2/_close")
    assert logs.simulate_delete("/logs-2").json == {"acknowledged": True}


def test_cat_indices_columns_and_options(logs):
    text = logs.simulate_get("/_cat/indices", params={"v": "true", "s": "index"}).text.splitlines()
    assert text[0].split() == ["health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted",
                               "store.size", "pri.store.size"]
    first = text[1].split()
    assert first[:3] == ["green", "open", "logs-1"] and first[4:8] == ["1", "0", "3", "0"]
    assert first[8].endswith("b") and first[8] == first[9]
    short = logs.simulate_get("/_cat/indices", params={"h": "i,dc", "s": "dc:desc", "format": "json"}).json
    assert short == [{"i": "logs-1", "dc": "3"}, {"i": "logs-2", "dc": "2"}]
    in_bytes = logs.simulate_get("/_cat/indices", params={"h": "index,store.size", "bytes": "b",
                                                          "format": "json"}).json
    assert all(row["store.size"].isdigit() and int(row["store.size"]) > 0 for row in in_bytes)
    assert logs.simulate_get("/_cat/indices", params={"health": "green", "format": "json"}).json
    assert logs.simulate_get("/_cat/indices", params={"health": "yellow", "format": "json"}).json == []
    helped = logs.simulate_get("/_cat/indices", query_string="help").text.splitlines()
    assert [p.strip() for p in helped[0].split("|")] == ["health", "h"]
    assert any(line.startswith("docs.count") for line in helped)
    bad = logs.simulate_get("/_cat/indices", params={"health": "purple"})
    assert bad.status_code == 400 and bad.json["error"]["type"] == "illegal_argument_exception"


def test_cat_count_and_aliases(logs):
    count = logs.simulate_get("/_cat/count", params={"v": "true"}).text.splitlines()
    assert count[0].split() == ["epoch", "timestamp", "count"] and count[1].split()[2] == "5"
    one = logs.simulate_get("/_cat/count/logs-2", params={"format": "json"}).json
    assert one[0]["count"] == "2" and set(one[0]) == {"epoch", "timestamp", "count"}
    logs.simulate_put("/logs-1/_alias/cur")
    logs.simulate_post("/_aliases", json={"actions": [{"add": {"index": "logs-2", "alias": "w",
                                                               "is_write_index": True}}]})
    rows = logs.simulate_get("/_cat/aliases", params={"format": "json"}).json
    assert rows == [{"alias": "cur", "index": "logs-1", "filter": "-", "routing.index": "-", "routing.search": "-",
                     "is_write_index": "-"},
                    {"alias": "w", "index": "logs-2", "filter": "-", "routing.index": "-", "routing.search": "-",
                     "is_write_index": "true"}]
    text = logs.simulate_get("/_cat/aliases/w", params={"v": "true", "h": "alias,index"}).text.splitlines()
    assert [line.split() for line in text] == [["alias", "index"], ["w", "logs-2"]]


def _recording_app(engine, pm, refuse_prefix: str | None = None):
    """An app whose authorize slot records ``(op, privilege, targets)`` and refuses any target under a prefix."""
    from falcon.testing import TestClient

    from xerj_http import create_app
    from xerj_http.errors import Forbidden

    calls: list[tuple[str, str, list[str]]] = []

    def policy(principal, op, privilege, targets):
        calls.append((op, privilege, list(targets)))
        if refuse_prefix and any(t.startswith(refuse_prefix) for t in targets):
            raise Forbidden(f"action [{op}] is unauthorized for user [{principal.name}] on {list(targets)}")

    return TestClient(create_app(engine, pm, insecure=True, policy=policy)), calls


def test_authorization_sees_the_indices_behind_an_alias(engine, pm):
    c, calls = _recording_app(engine, pm)
    for name in ("a1", "a2"):
        c.simulate_put(f"/{name}/_doc/1", json={"x": 1})
    c.simulate_put("/a1,a2/_alias/both")
    assert calls[-1] == ("indices.put_alias", "manage", ["a1", "a2"])
    c.simulate_get("/both/_search")
    assert calls[-1] == ("search", "read", ["a1", "a2"])
    c.simulate_get("/bo*/_count")
    assert calls[-1][2] == ["a1", "a2"]
    c.simulate_post("/_bulk", body=ndjson({"index": {"_index": "both", "_id": "2"}}, {"x": 2}))
    assert calls[-1] == ("bulk.item", "write", ["a1", "a2"])  # a bulk is authorized item by item
    c.simulate_post("/_mget", json={"docs": [{"_index": "both", "_id": "1"}]})
    assert calls[-1][2] == ["a1", "a2"]
    c.simulate_post("/_aliases", json={"actions": [{"add": {"index": "a1", "alias": "x"}},
                                                   {"remove_index": {"index": "a2"}}]})
    assert calls[-1] == ("indices.update_aliases", "manage", ["a1", "a2"])
    c.simulate_get("/_alias/x")
    assert calls[-1][2] == ["a1"]
    # What a route reads is what it is authorized for, closed indices included where the route shows them.
    c.simulate_put("/c1")
    c.simulate_post("/c1/_close")
    c.simulate_get("/_cat/indices")
    assert calls[-1] == ("cat.indices", "monitor", ["a1", "c1"])
    c.simulate_get("/_settings")
    assert calls[-1][2] == ["a1", "c1"]
    c.simulate_post("/c*/_open")
    assert calls[-1] == ("indices.open", "manage", ["c1"])


def test_an_alias_never_reaches_another_tenants_index(engine, pm):
    """Tenant boundary: an alias naming a reserved (other tenant's) index is refused at every door."""
    foreign = ".xerj-memory-alice-edges"
    engine.store.put(foreign, {"src": "a", "dst": "b", "type": "secret"}, "e1")
    engine.store.put("mine", {"x": 1}, "1")
    c, calls = _recording_app(engine, pm, refuse_prefix=".xerj-memory-")
    # Creating the alias needs manage on the foreign index: refused, and nothing was created.
    for attempt in (c.simulate_put(f"/{foreign}/_alias/sneaky"),
                    c.simulate_post("/_aliases", json={"actions": [{"add": {"indices": ["mine", foreign],
                                                                            "alias": "sneaky"}}]})):
        assert attempt.status_code == 403 and attempt.json["error"]["type"] == "security_exception"
    assert engine.store.aliases() == {}
    # An alias made by someone allowed (the store directly) still cannot be used to read or write the index.
    engine.store.update_aliases([("add", "sneaky", "mine", {}), ("add", "sneaky", foreign, {})])
    for response in (c.simulate_get("/sneaky/_search"), c.simulate_get("/sneaky/_count"),
                     c.simulate_get("/sneak*/_search", params={"expand_wildcards": "all"}),
                     c.simulate_get("/sneaky/_doc/e1"), c.simulate_get("/_alias/sneaky"),
                     c.simulate_post("/_mget", json={"docs": [{"_index": "sneaky", "_id": "e1"}]})):
        assert response.status_code == 403, response.json
        assert foreign in calls[-1][2]
    # a bulk is answered per item: the item through the alias is its own 403
    response = c.simulate_post("/_bulk", body=ndjson({"delete": {"_index": "sneaky", "_id": "e1"}}))
    assert response.status_code == 200 and response.json["items"][0]["delete"]["status"] == 403, response.json
    assert foreign in calls[-1][2]
    assert engine.store.get(foreign, "e1") is not None
    assert c.simulate_get("/mine/_search").status_code == 200  # the positive control


JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                max_size=3), max_leaves=8)
ACTION = st.dictionaries(st.sampled_from(["add", "remove", "remove_index", "x"]),
                         st.dictionaries(st.sampled_from(["index", "indices", "alias", "aliases", "is_write_index",
                                                          "must_exist", "filter"]),
                                         JSON | st.sampled_from(["logs-1", "logs-*", "a"]), max_size=3),
                         min_size=0, max_size=2)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(ACTION, max_size=3) | JSON, settings_body=JSON, scroll=JSON, pit=JSON, after=JSON)
def test_bodies_of_any_json_shape_never_cause_a_5xx(logs, actions, settings_body, scroll, pit, after):
    calls = [
        ("POST", "/_aliases", {"actions": actions}),
        ("PUT", "/logs-1/_settings", settings_body),
        ("PUT", "/logs-2/_alias/x", settings_body),
        ("POST", "/_search/scroll", {"scroll_id": scroll, "scroll": after}),
        ("DELETE", "/_search/scroll", {"scroll_id": scroll}),
        ("POST", "/_search", {"pit": pit}),
        ("DELETE", "/_pit", {"id": pit}),
        ("DELETE", "/_search/point_in_time", {"pit_id": pit}),
        ("POST", "/logs-1/_search", {"search_after": after, "sort": scroll}),
        ("POST", "/logs-1/_search", {"size": 0, "aggs": {"p": {"percentiles": settings_body}}}),
        ("POST", "/logs-1/_search", {"size": 0, "aggs": {"p": {"extended_stats": settings_body}}}),
    ]
    for method, path, body in calls:
        result = logs.simulate_request(method, path, body=orjson.dumps(body),
                                       headers={"Content-Type": "application/json"})
        assert result.status_code < 500, (method, path, body, result.text)
