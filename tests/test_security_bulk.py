"""A bulk naming indices the key may not write: answered per item, as Elasticsearch with security does."""

from __future__ import annotations

import pytest
from falcon.testing import TestClient

from xerj_auth.principal import Principal
from xerj_http import create_app
from xerj_http.middleware import Authenticate

from .http_helpers import ndjson
# the secured app, its test client and the admin key's header are test_security's own fixtures
from .test_security import admin, app, forbidden, grant, http, key_header, mint, refusal_reason  # noqa: F401

NODES_A, NODES_B = ".xerj-memory-alice", ".xerj-memory-bob"
NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture
def alice(http, admin):
    """A key scoped to alice's namespace and an ordinary index, with bob's namespace holding one row."""
    assert http.simulate_put(f"/{NODES_B}/_doc/b1", json={"title": "bob's"}, headers=admin).status_code == 201
    return mint(http, admin, {"name": "alice-agent", "role_descriptors": grant(NODES_A, "books")})


def item_refusal(key: dict, index: str) -> str:
    return refusal_reason("indices:data/write/bulk[s]", key, index, privilege="write")


def bulk(http, path: str, headers: dict, *rows):
    return http.simulate_post(path, body=ndjson(*rows), headers={**headers, **NDJSON})


def ids(http, admin, index: str) -> list[str]:
    http.simulate_post(f"/{index}/_refresh", headers=admin)
    found = http.simulate_post(f"/{index}/_search", json={"size": 100}, headers=admin)
    assert found.status_code == 200, found.text
    return sorted(hit["_id"] for hit in found.json["hits"]["hits"])


def assert_refused(item: dict, key: dict, index: str, doc_id: str | None) -> None:
    ((_action, result),) = item.items()
    assert result["status"] == 403 and result["_index"] == index and result["_id"] == doc_id
    assert result["error"] == {"type": "security_exception", "reason": item_refusal(key, index), "index": index}


def test_a_bulk_runs_the_granted_items_and_refuses_the_others_one_by_one(http, admin, alice):
    me = key_header(alice)
    answer = bulk(http, "/_bulk", me,
                  {"index": {"_index": NODES_A, "_id": "a1"}}, {"title": "mine"},
                  {"index": {"_index": NODES_B, "_id": "planted"}}, {"title": "not mine"},
                  {"delete": {"_index": NODES_B, "_id": "b1"}},
                  {"create": {"_index": "books", "_id": "dune"}}, {"title": "Dune"},
                  {"update": {"_index": NODES_B, "_id": "b1"}}, {"doc": {"title": "changed"}})
    assert answer.status_code == 200, answer.text
    body = answer.json
    assert body["errors"] is True
    items = body["items"]
    assert [next(iter(item)) for item in items] == ["index", "index", "delete", "create", "update"]
    assert items[0]["index"]["status"] == 201 and items[3]["create"]["status"] == 201
    for n, doc_id in ((1, "planted"), (2, "b1"), (4, "b1")):
        assert_refused(items[n], alice, NODES_B, doc_id)
    assert ids(http, admin, NODES_A) == ["a1"] and ids(http, admin, "books") == ["dune"]
    # nothing of the refused items reached bob's namespace: no row added, none removed, none changed
    assert ids(http, admin, NODES_B) == ["b1"]
    assert http.simulate_get(f"/{NODES_B}/_doc/b1", headers=admin).json["_source"] == {"title": "bob's"}


def test_the_default_index_of_a_bulk_is_authorized_per_item_too(http, admin, alice):
    me = key_header(alice)
    answer = bulk(http, f"/{NODES_A}/_bulk", me,
                  {"index": {"_id": "a1"}}, {"title": "mine"},
                  {"index": {"_index": NODES_B, "_id": "planted"}}, {"title": "not mine"})
    assert answer.status_code == 200 and answer.json["errors"] is True
    assert answer.json["items"][0]["index"]["status"] == 201
    assert_refused(answer.json["items"][1], alice, NODES_B, "planted")
    # the default index itself ungranted: each item that falls back to it is refused, the named ones run
    answer = bulk(http, f"/{NODES_B}/_bulk", me,
                  {"index": {"_id": "planted"}}, {"title": "not mine"},
                  {"index": {"_index": NODES_A, "_id": "a2"}}, {"title": "mine"})
    assert answer.status_code == 200 and answer.json["errors"] is True
    assert_refused(answer.json["items"][0], alice, NODES_B, "planted")
    assert answer.json["items"][1]["index"]["status"] == 201
    assert ids(http, admin, NODES_A) == ["a1", "a2"] and ids(http, admin, NODES_B) == ["b1"]


def test_a_key_that_may_write_none_of_the_items_gets_a_403_for_each(http, admin, alice):
    reader = mint(http, admin, {"name": "reader", "role_descriptors": grant(NODES_A, privileges=("read",))})
    answer = bulk(http, "/_bulk", key_header(reader),
                  {"index": {"_index": NODES_A, "_id": "a1"}}, {"title": "mine"},
                  {"delete": {"_index": NODES_B, "_id": "b1"}})
    assert answer.status_code == 200 and answer.json["errors"] is True
    assert_refused(answer.json["items"][0], reader, NODES_A, "a1")
    assert_refused(answer.json["items"][1], reader, NODES_B, "b1")
    assert ids(http, admin, NODES_B) == ["b1"]
    assert http.simulate_get(f"/{NODES_A}/_doc/a1", headers=admin).status_code == 404


def test_an_alias_item_is_refused_when_an_index_behind_it_is_not_granted(http, admin, alice):
    assert http.simulate_put(f"/{NODES_B}/_alias/sneaky", headers=admin).status_code == 200
    answer = bulk(http, "/_bulk", key_header(alice), {"delete": {"_index": "sneaky", "_id": "b1"}})
    assert answer.status_code == 200 and answer.json["errors"] is True
    ((_action, result),) = answer.json["items"][0].items()
    assert result["status"] == 403 and NODES_B in result["error"]["reason"]
    assert ids(http, admin, NODES_B) == ["b1"]


def test_a_refused_item_is_refused_before_its_source_is_looked_at(http, admin, alice):
    """Authorization comes first: an item for a foreign index says 403 even when its source would not parse,
    and the engine's scope column can be neither set nor probed through it."""
    answer = bulk(http, "/_bulk", key_header(alice),
                  {"index": {"_index": NODES_B, "_id": "x"}}, {"xerj_scope": "alice"},
                  {"index": {"_index": NODES_A, "_id": "y"}}, {"xerj_scope": "bob"},
                  {"index": {"_index": NODES_A, "_id": "z"}}, {"title": "fine"})
    items = answer.json["items"]
    assert_refused(items[0], alice, NODES_B, "x")
    # within its own namespace the scope column is refused per item exactly as for a single write
    assert items[1]["index"]["status"] == 400 and items[1]["index"]["error"]["type"] == "mapper_parsing_exception"
    assert items[2]["index"]["status"] == 201
    single = http.simulate_put(f"/{NODES_A}/_doc/y", json={"xerj_scope": "bob"}, headers=key_header(alice))
    assert single.status_code == 400 and single.json["error"]["reason"] == items[1]["index"]["error"]["reason"]


def test_a_malformed_bulk_is_still_refused_whole(http, alice):
    broken = http.simulate_post("/_bulk", body=b"{nope\n", headers={**key_header(alice), **NDJSON})
    assert broken.status_code == 400 and "security_exception" not in broken.text


def test_a_route_allow_list_still_refuses_the_bulk_route_whole(engine, pm, monkeypatch):
    """A share-link guest's principal reaches listed routes only: the bulk route is refused before any item."""
    guest = Principal(name="guest", superuser=False, mode="guest", grants=(),
                      routes=frozenset({("GET", "/{index}/_search")}))
    monkeypatch.setattr(Authenticate, "process_request",
                        lambda self, req, resp: setattr(req.context, "principal", guest))
    app = create_app(engine, pm)
    try:
        answer = bulk(TestClient(app), "/_bulk", {}, {"index": {"_index": "books", "_id": "1"}}, {"title": "x"})
    finally:
        app.close()
    assert answer.status_code == 403 and answer.json["error"]["type"] == "security_exception"
    assert "is not open to [guest]" in answer.json["error"]["reason"]


def test_each_refused_index_is_audited_as_a_denial(http, admin, alice):
    me = key_header(alice)
    answer = bulk(http, "/_bulk", {**me, "X-Request-Id": "bulk-42"},
                  {"index": {"_index": NODES_A, "_id": "a1"}}, {"title": "mine"},
                  {"index": {"_index": NODES_B, "_id": "p1"}}, {"title": "not mine"},
                  {"delete": {"_index": NODES_B, "_id": "b1"}},
                  {"index": {"_index": "elsewhere", "_id": "e"}}, {"title": "x"})
    assert answer.status_code == 200
    found = http.simulate_get("/_audit/_search", params={"size": "1000"}, headers=admin)
    assert found.status_code == 200, found.text
    mine = [e for e in found.json["entries"] if e["request_id"] == "bulk-42"]
    subject = f"key:{alice['id']}:alice-agent"
    denials = sorted((e for e in mine if e["outcome"] == "denied"), key=lambda e: e["resource"])
    assert [(e["op"], e["subject"], e["resource"], e["privilege"], e["status"]) for e in denials] == [
        ("bulk", subject, NODES_B, "write", 403), ("bulk", subject, "elsewhere", "write", 403)]
    assert denials[0]["note"] == f"security_exception: {item_refusal(alice, NODES_B)}"
    assert denials[1]["note"] == f"security_exception: {item_refusal(alice, 'elsewhere')}"
    (done,) = [e for e in mine if e["outcome"] == "success"]
    assert done["op"] == "bulk" and done["status"] == 200
    by_outcome = http.simulate_get("/_audit/_search", params={"resource": NODES_B, "outcome": "denied"},
                                   headers=admin)
    assert any(e["request_id"] == "bulk-42" for e in by_outcome.json["entries"])


def test_open_mode_and_the_admin_key_run_every_item(engine, pm, http, admin):
    answer = bulk(http, "/_bulk", admin,
                  {"index": {"_index": NODES_A, "_id": "a1"}}, {"title": "x"},
                  {"index": {"_index": NODES_B, "_id": "b2"}}, {"title": "y"})
    assert answer.status_code == 200 and answer.json["errors"] is False
    open_app = create_app(engine, pm, insecure=True)
    try:
        client = TestClient(open_app)
        answer = bulk(client, "/_bulk", {},
                      {"index": {"_index": NODES_A, "_id": "a3"}}, {"title": "x"},
                      {"delete": {"_index": NODES_B, "_id": "b2"}})
        assert answer.status_code == 200 and answer.json["errors"] is False, answer.text
        assert [item[next(iter(item))]["status"] for item in answer.json["items"]] == [201, 200]
        denied = client.simulate_get("/_audit/_search", params={"outcome": "denied"})
        assert denied.status_code == 200 and denied.json["total"] == 0
    finally:
        open_app.close()


def test_a_whole_request_refusal_keeps_its_shape_elsewhere(http, alice):
    """Only the bulk answers per item: a single write to a foreign index is still the request's 403."""
    single = http.simulate_put(f"/{NODES_B}/_doc/x", json={"title": "x"}, headers=key_header(alice))
    assert single.status_code == 403
    assert single.json == forbidden(refusal_reason("indices:data/write/index", alice, NODES_B, "write"))
