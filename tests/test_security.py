"""The tenant boundary in process: credentials, API keys, the reach rules, fan-out and every refusal's body."""

from __future__ import annotations

import base64
import stat
import time

import orjson
import pytest
from falcon.testing import TestClient

from xerj_auth.keys import KeyStore, parse_expiration
from xerj_auth.principal import Principal
from xerj_core.testing.auth import AbstractAuthBackendTests
from xerj_http import create_app

from .http_helpers import admin_headers, ndjson

EDGES_A, NODES_A = ".xerj-memory-alice-edges", ".xerj-memory-alice"


def unauthenticated(path: str) -> dict:
    reason = f"missing authentication credentials for REST request [{path}]"
    cause = {"type": "security_exception", "reason": reason, "header": {"WWW-Authenticate": "ApiKey"}}
    return {"error": {"root_cause": [cause], **cause}, "status": 401}


def forbidden(reason: str) -> dict:
    cause = {"type": "security_exception", "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": 403}


def refusal_reason(action: str, key: dict, indices: str, privilege: str = "read") -> str:
    return (f"action [{action}] is unauthorized for API key id [{key['id']}] of user [{key['name']}] on indices "
            f"[{indices}], this action is granted by the index privileges [{privilege},all]")


@pytest.fixture
def app(engine, pm):
    app = create_app(engine, pm)
    yield app
    app.close()


@pytest.fixture
def http(app):
    return TestClient(app)


@pytest.fixture
def admin(engine):
    return admin_headers(engine)


def key_header(key: dict) -> dict[str, str]:
    return {"Authorization": "ApiKey " + key["encoded"]}


def mint(http, admin, body) -> dict:
    result = http.simulate_post("/_security/api_key", json=body, headers=admin)
    assert result.status_code == 200, result.text
    return result.json


def grant(*names: str, privileges=("read", "write")) -> dict:
    return {"role": {"indices": [{"names": list(names), "privileges": list(privileges)}]}}


@pytest.fixture
def seeded(http, admin):
    """Brains and namespaces alice and bob, an ordinary index, and a key scoped to alice's two indices."""
    for who in ("alice", "bob"):
        assert http.simulate_post(f"/_graph/{who}/link", json={"src": f"{who}-1", "dst": f"{who}-2", "type": "t"},
                                  headers=admin).status_code == 201
        assert http.simulate_post(f"/_memory/{who}", json={"text": f"secret of {who}"},
                                  headers=admin).status_code == 201
    assert http.simulate_put("/books/_doc/1", json={"title": "Dune"}, headers=admin).status_code == 201
    return mint(http, admin, {"name": "alice-agent", "role_descriptors": grant(EDGES_A, NODES_A)})


# -- credentials ---------------------------------------------------------------------------------


def test_no_credential_is_a_401_with_the_challenge_before_any_routing(http):
    for path in ("/", "/_search", "/.xerj-memory-bob-edges/_doc/1", "/no/such/route/here"):
        result = http.simulate_get(path)
        assert result.status_code == 401
        assert result.headers["www-authenticate"] == "ApiKey"
        assert result.json == unauthenticated(path)


@pytest.mark.parametrize("value", [
    "ApiKey not-base64!!", "ApiKey " + base64.b64encode(b"no-colon-here").decode(), "ApiKey ", "ApiKey",
    "ApiKey " + "A" * 10_000, "ApiKey " + base64.b64encode(b"unknown-id:secret").decode(),
    "ApiKey " + base64.b64encode(b":secret").decode(), "ApiKey " + base64.b64encode(b"\xff\xfe:x").decode(),
    "Basic " + base64.b64encode(b"elastic:changeme").decode(), "Bearer abc", "",
])
def test_malformed_or_unknown_credentials_are_the_same_401(http, value):
    result = http.simulate_get("/_search", headers={"Authorization": value})
    assert result.status_code == 401 and result.json == unauthenticated("/_search")


def test_the_right_id_with_the_wrong_secret_is_refused(http, admin, seeded):
    forged = base64.b64encode(f"{seeded['id']}:{'x' * len(seeded['api_key'])}".encode()).decode()
    assert http.simulate_get("/", headers={"Authorization": f"ApiKey {forged}"}).status_code == 401
    assert http.simulate_get("/", headers=key_header(seeded)).status_code == 200


def test_the_admin_key_file_is_private_and_kept_across_apps(engine, pm, app):
    path = engine.data_dir / "admin.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = path.read_text()
    again = create_app(engine, pm)
    again.close()
    assert path.read_text() == before
    result = TestClient(app).simulate_get("/_security/_authenticate", headers=admin_headers(engine))
    assert result.json["username"] == "xerj-admin" and result.json["roles"] == ["superuser"]


def test_an_admin_key_file_whose_key_was_invalidated_is_replaced(engine, pm, http, admin):
    key_id = base64.b64decode(admin["Authorization"].split()[1]).decode().split(":")[0]
    assert http.simulate_delete("/_security/api_key", json={"ids": [key_id]}, headers=admin).json[
        "invalidated_api_keys"] == [key_id]
    assert http.simulate_get("/", headers=admin).status_code == 401
    fresh = create_app(engine, pm)
    try:
        assert TestClient(fresh).simulate_get("/", headers=admin_headers(engine)).status_code == 200
    finally:
        fresh.close()


def test_open_mode_says_so_in_the_root_banner(engine, pm, http, admin):
    assert http.simulate_get("/", headers=admin).json["xerj_mode"] == "secured"
    open_app = create_app(engine, pm, insecure=True)
    try:
        body = TestClient(open_app).simulate_get("/").json
    finally:
        open_app.close()
    assert body["xerj_mode"] == "open" and "every caller is a superuser" in body["xerj_warning"]


# -- API keys ------------------------------------------------------------------------------------


def test_mint_get_and_invalidate_in_elasticsearch_shapes(http, admin):
    key = mint(http, admin, {"name": "agent-1", "expiration": "7d", "metadata": {"team": "x"},
                             "role_descriptors": grant("logs-*", privileges=["read"])})
    assert set(key) == {"id", "name", "api_key", "encoded", "expiration"}
    assert base64.b64decode(key["encoded"]).decode() == f"{key['id']}:{key['api_key']}"
    assert abs(key["expiration"] - (time.time() * 1000 + 7 * 86_400_000)) < 60_000
    listed = http.simulate_get("/_security/api_key", params={"id": key["id"]}, headers=admin).json["api_keys"]
    assert len(listed) == 1 and listed[0]["name"] == "agent-1" and listed[0]["invalidated"] is False
    assert listed[0]["metadata"] == {"team": "x"} and "api_key" not in listed[0] and "hash" not in listed[0]
    assert listed[0]["role_descriptors"]["role"]["indices"] == [{"names": ["logs-*"], "privileges": ["read"]}]
    mint(http, admin, {"name": "agent-2"})
    by_name = http.simulate_get("/_security/api_key", params={"name": "agent-*"}, headers=admin).json
    assert [k["name"] for k in by_name["api_keys"]] == ["agent-1", "agent-2"]
    gone = http.simulate_delete("/_security/api_key", json={"ids": [key["id"]]}, headers=admin).json
    assert gone == {"invalidated_api_keys": [key["id"]], "previously_invalidated_api_keys": [], "error_count": 0}
    again = http.simulate_delete("/_security/api_key", json={"name": "agent-1"}, headers=admin).json
    assert again == {"invalidated_api_keys": [], "previously_invalidated_api_keys": [key["id"]], "error_count": 0}
    assert http.simulate_get("/", headers=key_header(key)).status_code == 401
    active = http.simulate_get("/_security/api_key", params={"active_only": "true", "name": "agent-*"},
                               headers=admin).json["api_keys"]
    assert [k["name"] for k in active] == ["agent-2"]


def test_the_secret_is_never_stored(engine, http, admin):
    key = mint(http, admin, {"name": "k"})
    store = KeyStore(engine.data_dir)
    try:
        raw = b"".join(orjson.dumps(r) for r in store.records())
    finally:
        store.close()
    assert key["api_key"].encode() not in raw and key["encoded"].encode() not in raw
    assert key["id"].encode() in raw
    data = b"".join(p.read_bytes() for p in (engine.data_dir / "security").iterdir())
    assert key["api_key"].encode() not in data


def test_an_expired_key_is_refused(http, admin):
    key = mint(http, admin, {"name": "brief", "expiration": "1ms"})
    time.sleep(0.01)
    assert http.simulate_get("/", headers=key_header(key)).json == unauthenticated("/")


def test_a_key_cached_by_one_app_is_refused_once_another_invalidates_it(engine, pm, http, admin):
    """Two apps on one data directory stand for two workers: the generation counter crosses them."""
    key = mint(http, admin, {"name": "k"})
    other = create_app(engine, pm)
    try:
        worker_b = TestClient(other)
        assert worker_b.simulate_get("/", headers=key_header(key)).status_code == 200  # now cached there
        http.simulate_delete("/_security/api_key", json={"ids": [key["id"]]}, headers=admin)
        assert worker_b.simulate_get("/", headers=key_header(key)).status_code == 401
    finally:
        other.close()


def count_keys(http, admin) -> int:
    return len(http.simulate_get("/_security/api_key", headers=admin).json["api_keys"])


@pytest.mark.parametrize("body, words", [
    ({}, "[name] is required"),
    ({"name": ""}, "[name] is required"),
    ({"name": 5}, "[name] is required"),
    ({"name": "k", "expiration": "-1d"}, "failed to parse [expiration]"),
    ({"name": "k", "expiration": "forever"}, "failed to parse [expiration]"),
    ({"name": "k", "expiration": "0d"}, "more than 0"),
    ({"name": "k", "expiration": 7}, "[expiration] must be a time value"),
    ({"name": "k", "role_descriptors": {"r": {"indices": [{"names": ["a"], "privileges": ["read", "fly"]}]}}},
     "unknown index privilege [fly]"),
    ({"name": "k", "role_descriptors": {"r": {"indices": [{"names": "a", "privileges": ["read"]}]}}},
     ".names] must be a non-empty array"),
    ({"name": "k", "role_descriptors": {"r": {"indices": [{"names": [], "privileges": ["read"]}]}}},
     ".names] must be a non-empty array"),
    ({"name": "k", "role_descriptors": {"r": {"indices": [{"names": ["a"], "privileges": "read"}]}}},
     ".privileges] must be a non-empty array"),
    ({"name": "k", "role_descriptors": {"r": {"indices": [{"names": ["a"], "privileges": ["read"],
                                                            "query": "{}"}]}}}, "unsupported field [query]"),
    ({"name": "k", "role_descriptors": ["r"]}, "[role_descriptors] must be an object"),
    ({"name": "k", "role_descriptors": {"r": {"indices": {"names": ["a"]}}}}, ".indices] must be an array"),
    ({"name": "k", "metadata": []}, "[metadata] must be an object"),
    ({"name": "k", "owner": True}, "unknown field [owner]"),
])
def test_bad_mint_bodies_are_400_and_create_nothing(http, admin, body, words):
    before = count_keys(http, admin)
    result = http.simulate_post("/_security/api_key", json=body, headers=admin)
    assert result.status_code == 400, result.text
    assert result.json["error"]["type"] == "illegal_argument_exception" and words in result.json["error"]["reason"]
    assert count_keys(http, admin) == before


def test_mint_bodies_that_are_not_json_objects(http, admin):
    before = count_keys(http, admin)
    for raw in (b"", b"not json", b"[]", b'"name"'):
        result = http.simulate_post("/_security/api_key", body=raw, headers={**admin,
                                                                            "Content-Type": "application/json"})
        assert result.status_code == 400, (raw, result.text)
    assert count_keys(http, admin) == before


def test_only_a_superuser_mints_or_invalidates(http, admin, seeded):
    before = count_keys(http, admin)
    for method in ("POST", "PUT"):
        result = http.simulate_request(method, "/_security/api_key", json={"name": "escalate", "role_descriptors":
                                       grant("*", privileges=["all"])}, headers=key_header(seeded))
        assert result.status_code == 403 and result.json["error"]["type"] == "security_exception"
        assert "cluster:admin/xpack/security/api_key/create" in result.json["error"]["reason"]
    assert count_keys(http, admin) == before
    refused = http.simulate_delete("/_security/api_key", json={"ids": [seeded["id"]]}, headers=key_header(seeded))
    assert refused.status_code == 403
    mine = http.simulate_get("/_security/api_key", headers=key_header(seeded)).json["api_keys"]
    assert [k["id"] for k in mine] == [seeded["id"]]
    assert http.simulate_get("/_security/api_key", params={"name": "*"},
                             headers=key_header(seeded)).json["api_keys"] == mine


def test_invalidate_needs_ids_or_a_name(http, admin):
    for body in ({}, {"ids": "abc"}, {"ids": [1]}, {"name": ""}, {"realm_name": "x"}):
        assert http.simulate_delete("/_security/api_key", json=body, headers=admin).status_code == 400, body


def test_expiration_units():
    assert parse_expiration("7d") == 7 * 86_400_000
    assert parse_expiration("90s") == 90_000 and parse_expiration("500ms") == 500
    assert parse_expiration("2h") == 7_200_000 and parse_expiration("30m") == 1_800_000


# -- the reach rules -----------------------------------------------------------------------------


def test_principal_reach():
    from xerj_auth.principal import IndexGrant

    unscoped = Principal("u", False, "api_key")
    assert unscoped.may("read", "books") and unscoped.may("manage", "books")
    assert not unscoped.may("read", ".xerj-memory-alice")
    star = Principal("s", False, "api_key", grants=(IndexGrant(("*",), frozenset({"read"})),))
    assert star.may("read", ".xerj-memory-alice") and not star.may("write", ".xerj-memory-alice")
    scoped = Principal("a", False, "api_key", grants=(IndexGrant((EDGES_A,), frozenset({"all"})),))
    assert scoped.may("manage", EDGES_A) and not scoped.may("read", NODES_A) and not scoped.may("read", "books")


def test_a_missing_brain_and_a_foreign_brain_refuse_byte_for_byte_alike(http, seeded):
    bob = http.simulate_get("/_graph/bob/overview", headers=key_header(seeded))
    ghost = http.simulate_get("/_graph/ghost/overview", headers=key_header(seeded))
    assert bob.status_code == ghost.status_code == 403
    assert bob.json == forbidden(refusal_reason("indices:data/read/graph/overview", seeded,
                                                ".xerj-memory-bob-edges"))
    assert bob.content.replace(b"bob", b"ghost") == ghost.content
    assert http.simulate_get("/_graph/alice/overview", headers=key_header(seeded)).status_code == 200


def test_a_key_without_role_descriptors_reaches_ordinary_indices_only(http, admin, seeded):
    plain = key_header(mint(http, admin, {"name": "plain"}))
    assert http.simulate_get("/books/_doc/1", headers=plain).status_code == 200
    assert http.simulate_put("/books/_doc/2", json={"t": 1}, headers=plain).status_code == 201
    assert http.simulate_get("/_graph/alice/ego", params={"node": "alice-1"}, headers=plain).status_code == 403
    assert http.simulate_get("/_memory/alice", headers=plain).status_code == 403
    assert http.simulate_get(f"/{EDGES_A}/_search", headers=plain).status_code == 403
    hits = http.simulate_get("/.xerj-memory-*/_search", headers=plain).json["hits"]
    assert hits["total"]["value"] == 0


def test_a_star_grant_reaches_the_reserved_namespace_because_the_operator_asked(http, admin, seeded):
    star = key_header(mint(http, admin, {"name": "star", "role_descriptors": grant("*", privileges=["read"])}))
    assert http.simulate_get("/_graph/bob/ego", params={"node": "bob-1"}, headers=star).status_code == 200
    assert http.simulate_post("/_graph/bob/link", json={"src": "a", "dst": "b", "type": "t"},
                              headers=star).status_code == 403


def test_privileges_read_write_manage(http, admin, seeded):
    reader = key_header(mint(http, admin, {"name": "r", "role_descriptors": grant(EDGES_A, NODES_A,
                                                                                 privileges=["read"])}))
    writer = key_header(mint(http, admin, {"name": "w", "role_descriptors": grant(EDGES_A, NODES_A,
                                                                                 privileges=["write"])}))
    manager = key_header(mint(http, admin, {"name": "m", "role_descriptors": grant(EDGES_A, NODES_A,
                                                                                  privileges=["manage"])}))
    link = {"src": "x", "dst": "y", "type": "t"}
    assert http.simulate_post("/_graph/alice/link", json=link, headers=reader).status_code == 403
    assert http.simulate_post("/_graph/alice/link", json=link, headers=writer).status_code == 201
    assert http.simulate_get("/_graph/alice/ego", params={"node": "x"}, headers=writer).status_code == 403
    assert http.simulate_get("/_graph/alice/ego", params={"node": "x"}, headers=reader).status_code == 200
    refused = http.simulate_delete("/_memory/alice", headers=writer)
    assert refused.status_code == 403 and "[manage,all]" in refused.json["error"]["reason"]
    assert http.simulate_post("/_memory/alice/_recall", json={"query": "secret"}, headers=manager).status_code == 403
    assert http.simulate_delete("/_memory/alice", headers=manager).status_code == 200
    # Lazily creating a brain counts as writing it.
    fresh = key_header(mint(http, admin, {"name": "f", "role_descriptors": grant(".xerj-memory-new-edges",
                                                                                privileges=["write"])}))
    assert http.simulate_post("/_graph/new/link", json=link, headers=fresh).status_code == 201


def test_refused_before_any_existence_check_or_write(engine, http, seeded):
    for path in ("/_graph/carol/link",):
        result = http.simulate_post(path, json={"src": "a", "dst": "b", "type": "t"}, headers=key_header(seeded))
        assert result.status_code == 403
    assert http.simulate_post("/_memory/carol", json={"text": "x"}, headers=key_header(seeded)).status_code == 403
    assert not engine.store.exists(".xerj-memory-carol-edges") and not engine.store.exists(".xerj-memory-carol")


def test_ego_hydration_is_authorized_on_every_name_of_the_nodes_index(http, admin, seeded):
    me = key_header(seeded)
    base = {"node": "alice-1", "include_nodes": "true"}
    assert http.simulate_get("/_graph/alice/ego", params=base, headers=me).status_code == 200
    for redirect in (".xerj-memory-bob", "books", f"{NODES_A},.xerj-memory-bob", f"{NODES_A}, books"):
        refused = http.simulate_get("/_graph/alice/ego", params={**base, "nodes_index": redirect}, headers=me)
        assert refused.status_code == 403, redirect
    # Without hydration the nodes index is not read, so it is not asked for.
    assert http.simulate_get("/_graph/alice/ego", params={"node": "alice-1", "nodes_index": "books"},
                             headers=me).status_code == 200
    # A meta document the key can write pointing elsewhere does not widen its reach.
    meta = http.simulate_put(f"/{EDGES_A}/_doc/__xerj-brain-meta", json={
        "meta_version": 1, "brain": "alice", "nodes_index": ".xerj-memory-bob", "created_at": 0}, headers=me)
    assert meta.status_code in (200, 201)
    assert http.simulate_get("/_graph/alice/ego", params=base, headers=me).status_code == 403
    assert http.simulate_get("/_graph/alice/overview", headers=me).status_code == 403
    ok = http.simulate_put(f"/{EDGES_A}/_doc/__xerj-brain-meta", json={
        "meta_version": 1, "brain": "alice", "nodes_index": NODES_A, "created_at": 0}, headers=me)
    assert ok.status_code == 200
    assert http.simulate_get("/_graph/alice/overview", headers=me).status_code == 200


# -- fan-out -------------------------------------------------------------------------------------


def sources(result) -> list[str]:
    return sorted(hit["_index"] for hit in result.json["hits"]["hits"])


def shows_bob(text: str) -> bool:
    """Whether an answer carries anything of bob's: his brain name, his indices, his nodes or his memory.

    Not a bare "bob": alice's random 20-character ids contain those three letters about once in 15,000."""
    return any(mark in text for mark in ('"bob"', "-bob", "bob-", "of bob"))


def test_fan_out_filters_to_what_the_caller_may_read(http, admin, seeded):
    me = key_header(seeded)
    for path in ("/.xerj-memory-*/_search", "/.xerj-*/_search", "/_all/_search?expand_wildcards=all",
                 "/*/_search?expand_wildcards=all", "/_search?expand_wildcards=all"):
        result = http.simulate_get(path, headers=me)
        assert result.status_code == 200, (path, result.text)
        assert sources(result) == [NODES_A, EDGES_A, EDGES_A], path  # an edge and the meta document
        assert not shows_bob(result.text), path
    admin_view = http.simulate_get("/.xerj-memory-*/_search", headers=admin)
    assert shows_bob(admin_view.text)
    counted = http.simulate_get("/.xerj-memory-*/_count", headers=me).json["count"]
    assert counted == 3
    rows = http.simulate_get("/_cat/indices", params={"format": "json", "expand_wildcards": "all"},
                             headers=me).json
    assert sorted(r["index"] for r in rows) == [NODES_A, EDGES_A]
    text = http.simulate_get("/_cat/indices/.xerj-*", headers=me).text
    assert "alice" in text and not shows_bob(text)


def test_fan_out_with_an_explicit_ungranted_name_is_a_403(http, seeded):
    me = key_header(seeded)
    for path in ("/.xerj-memory-*,.xerj-memory-bob/_search", "/books,.xerj-memory-alice/_search",
                 "/.xerj-memory-bob-edges/_count", "/_cat/indices/.xerj-memory-bob"):
        result = http.simulate_get(path, headers=me)
        assert result.status_code == 403, path
    result = http.simulate_get("/.xerj-memory-alice,.xerj-memory-bob/_search", headers=me)
    assert result.json == forbidden(refusal_reason("indices:data/read/search", seeded, ".xerj-memory-bob"))


def test_fan_out_that_matches_nothing_readable_is_empty_not_everything(http, admin):
    nobody = key_header(mint(http, admin, {"name": "n", "role_descriptors": grant("nothing-*")}))
    http.simulate_put("/books/_doc/1", json={"t": 1}, headers=admin)
    result = http.simulate_get("/_search", headers=nobody)
    assert result.status_code == 200 and result.json["hits"]["total"]["value"] == 0
    assert http.simulate_get("/_cat/indices", params={"format": "json"}, headers=nobody).json == []


def test_msearch_narrows_each_header(http, seeded):
    body = ndjson({"index": ".xerj-memory-*"}, {}, {}, {}, {"index": ".xerj-memory-bob"}, {})
    result = http.simulate_post("/_msearch", body=body, headers={**key_header(seeded),
                                                                  "Content-Type": "application/x-ndjson"})
    assert result.status_code == 403  # the third search names bob explicitly
    body = ndjson({"index": ".xerj-memory-*"}, {}, {}, {"query": {"match_all": {}}})
    result = http.simulate_post("/_msearch", body=body, headers={**key_header(seeded),
                                                                  "Content-Type": "application/x-ndjson"})
    first, second = result.json["responses"]
    assert sorted(h["_index"] for h in first["hits"]["hits"]) == [NODES_A, EDGES_A, EDGES_A]
    assert not shows_bob(result.text) and second["hits"]["total"]["value"] == 0


def test_write_verbs_never_narrow_a_wildcard(http, admin, seeded):
    result = http.simulate_put("/.xerj-memory-*/_mapping", json={"properties": {"x": {"type": "keyword"}}},
                               headers=key_header(seeded))
    assert result.status_code == 403



def test_an_alias_into_another_tenants_index_reaches_nothing_of_it(http, admin, seeded):
    """An alias is expanded to its indices before authorization: naming one never reaches past a grant."""
    edges_b = ".xerj-memory-bob-edges"
    me = key_header(seeded)
    books_manager = key_header(mint(http, admin, {"name": "books-admin", "role_descriptors": grant(
        "books", privileges=("read", "write", "manage"))}))
    # Creating an alias needs manage on every index it names.
    assert http.simulate_put(f"/books,{edges_b}/_alias/sneaky", headers=books_manager).status_code == 403
    actions = {"actions": [{"add": {"indices": ["books", edges_b], "alias": "sneaky"}}]}
    assert http.simulate_post("/_aliases", json=actions, headers=books_manager).status_code == 403
    assert http.simulate_put(f"/{edges_b}/_alias/mine", headers=me).status_code == 403
    assert http.simulate_get("/_alias", headers=admin).json == {}
    assert http.simulate_put("/books/_alias/shelf", headers=books_manager).status_code == 200  # positive control
    # The superuser makes the alias; alice's key still reaches nothing of bob's through it.
    assert http.simulate_post("/_aliases", json=actions, headers=admin).status_code == 200
    for path in ("/sneaky/_search", "/sneaky/_count", f"/sneaky/_doc/{'x'}", "/_alias/sneaky"):
        result = http.simulate_get(path, headers=me)
        assert result.status_code == 403, (path, result.text)
        assert "bob" in result.json["error"]["reason"] and "secret" not in result.text
    for path in ("/sneak*/_search", "/_cat/aliases", "/_alias"):
        result = http.simulate_get(path, params={"format": "json"} if "_cat" in path else None, headers=me)
        assert result.status_code in (200, 404), (path, result.text)
        assert not shows_bob(result.text), path
    bulk = ndjson({"delete": {"_index": "sneaky", "_id": "x"}})
    # a bulk is answered per item: the item through the alias is refused, naming the index behind it
    answer = http.simulate_post("/_bulk", body=bulk, headers={**me, "Content-Type": "application/x-ndjson"})
    assert answer.status_code == 200 and answer.json["errors"] is True
    refused = answer.json["items"][0]["delete"]
    assert refused["status"] == 403 and refused["error"]["type"] == "security_exception"
    assert edges_b in refused["error"]["reason"]
    admin_view = http.simulate_get("/sneaky/_search", headers=admin)
    assert admin_view.status_code == 200 and shows_bob(admin_view.text)

def test_a_scroll_or_point_in_time_belongs_to_the_key_that_opened_it(http, admin, seeded):
    """Two keys of the same name and reach: neither can continue, list or close the other's contexts."""
    first = key_header(mint(http, admin, {"name": "twin", "role_descriptors": grant("books")}))
    second = key_header(mint(http, admin, {"name": "twin", "role_descriptors": grant("books")}))
    opened = http.simulate_post("/books/_search", params={"scroll": "1m", "size": "1"}, json={}, headers=first).json
    scroll_id = opened["_scroll_id"]
    stolen = http.simulate_post("/_search/scroll", json={"scroll_id": scroll_id}, headers=second)
    assert stolen.status_code == 404 and stolen.json["error"]["type"] == "search_context_missing_exception"
    assert http.simulate_delete("/_search/scroll", json={"scroll_id": scroll_id}, headers=second).status_code == 404
    assert http.simulate_post("/_search/scroll", json={"scroll_id": scroll_id}, headers=first).status_code == 200
    pit = http.simulate_post("/books/_pit", params={"keep_alive": "1m"}, headers=first).json["id"]
    assert http.simulate_post("/_search", json={"pit": {"id": pit}}, headers=second).status_code == 404
    assert http.simulate_get("/_search/point_in_time/_all", headers=second).json == {"pits": []}
    assert http.simulate_post("/_search", json={"pit": {"id": pit}}, headers=first).status_code == 200
    # A key that may not read the index cannot open a context on it.
    assert http.simulate_post(f"/{EDGES_A}/_pit", params={"keep_alive": "1m"}, headers=first).status_code == 403

# -- the built-in backend passes the conformance suite -------------------------------------------


class TestApiKeyBackend(AbstractAuthBackendTests):
    @pytest.fixture
    def backend(self):
        from xerj_auth.backend import ApiKeyBackend

        return ApiKeyBackend()

    @pytest.fixture
    def valid_headers(self, opened):
        key = opened.keys.mint("conformance", role_descriptors=None)
        return {"AUTHORIZATION": f"ApiKey {key['encoded']}"}


def test_the_cli_key_comes_from_the_option_then_the_environment_then_admin_key(tmp_path, monkeypatch):
    from xerj_core.credentials import api_key_for

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.delenv("XERJ_API_KEY", raising=False)
    assert api_key_for(None, data) is None and api_key_for(None, None) is None
    (data / "admin.key").write_text("ADMIN\n")
    assert api_key_for(None, data) == "ADMIN"
    monkeypatch.setenv("XERJ_API_KEY", "FROM-ENV")
    assert api_key_for(None, data) == "FROM-ENV"
    assert api_key_for("GIVEN", data) == "GIVEN"
    assert api_key_for("id:secret", None) == base64.b64encode(b"id:secret").decode()
