"""The app itself: the middleware slots in order, target resolution, the one error serializer, route hooks."""

from __future__ import annotations

import logging

import falcon
import orjson
import pytest
from falcon.testing import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core import hookimpl
from xerj_core.errors import GraphError, XerjError
from xerj_http import create_app, resolve_targets
from xerj_http.errors import Forbidden
from xerj_http.middleware import OPEN_MODE_PRINCIPAL
from xerj_http.openapi import document
from xerj_http.routes import ROUTES

from .http_helpers import admin_headers, admin_subject, audit_log, client, error_type, ndjson  # noqa: F401  (fixtures)


class Probe:
    """A route added by a fake plugin that records what the middleware put on the request."""

    seen: list[dict] = []
    ops = {"GET": ("probe.read", "read"), "POST": ("probe.write", "write")}

    def on_get(self, req, resp, **params):
        Probe.seen.append({"principal": req.context.principal, "targets": list(req.context.targets),
                           "privilege": req.context.privilege, "params": params})
        resp.media = {"ok": True}

    on_post = on_get


class Boom:
    def on_get(self, req, resp):
        raise RuntimeError("secret internal detail")


class Refused:
    def on_get(self, req, resp):
        raise GraphError("nope, and here is why")


class RoutesPlugin:
    @hookimpl
    def xerj_register_routes(self, app, engine):
        app.add_route("/_probe/{index}", Probe())
        app.add_route("/_probe-brain/{brain}/ego", Probe())
        app.add_route("/_boom", Boom())
        app.add_route("/_refused", Refused())


@pytest.fixture
def probed(engine, pm):
    plugin = RoutesPlugin()
    pm.register(plugin, name="routes-plugin")
    Probe.seen.clear()
    try:
        yield TestClient(create_app(engine, pm, insecure=True))
    finally:
        pm.unregister(plugin)


def test_hook_xerj_register_routes(probed):
    result = probed.simulate_get("/_probe/books")
    assert result.status_code == 200 and result.json == {"ok": True}
    assert Probe.seen[-1]["params"] == {"index": "books"}


def test_open_mode_principal_and_targets_reach_the_resource(probed):
    probed.simulate_get("/_probe/books,.xerj-memory-a")
    seen = Probe.seen[-1]
    assert seen["principal"] == OPEN_MODE_PRINCIPAL and seen["principal"].superuser
    assert seen["targets"] == ["books", ".xerj-memory-a"]
    assert seen["privilege"] == "read"
    probed.simulate_post("/_probe/books")
    assert Probe.seen[-1]["privilege"] == "write"


def test_plugin_routes_with_a_brain_parameter_resolve_to_its_edges_index(probed):
    probed.simulate_get("/_probe-brain/alice/ego", params={"include_nodes": "true"})
    assert Probe.seen[-1]["targets"] == [".xerj-memory-alice-edges", ".xerj-memory-alice"]


def test_authorize_slot_runs_before_the_resource_and_can_refuse(engine, pm):
    calls = []

    def deny_reserved(principal, op, privilege, targets):
        calls.append((principal.name, op, privilege, list(targets)))
        if any(t.startswith(".xerj-memory-") for t in targets):
            raise Forbidden(f"action [{op}] is unauthorized for user [{principal.name}] on {list(targets)}")

    # The authorize slot, not the resource, decides.
    c = TestClient(create_app(engine, pm, insecure=True, policy=deny_reserved))
    refused = c.simulate_post("/_graph/bob/link", json={"src": "a", "dst": "b", "type": "t"})
    assert refused.status_code == 403 and error_type(refused) == "security_exception"
    assert calls[-1] == ("open-mode", "graph.link", "write", [".xerj-memory-bob-edges"])
    assert not engine.store.exists(".xerj-memory-bob-edges")  # refused before any work
    encoded = c.simulate_get("/%2Exerj-memory-bob-edges/_search")
    assert encoded.status_code == 403
    assert calls[-1][3] == [".xerj-memory-bob-edges"]
    assert c.simulate_put("/plain").status_code == 200


def _policy_calls(engine, pm, method, path, *, body=None, params=None):
    captured = []

    def policy(principal, op, privilege, targets):
        captured.append(list(targets))

    app = create_app(engine, pm, insecure=True, policy=policy)
    TestClient(app).simulate_request(method, path, body=body, params=params)
    return captured


def _targets(engine, pm, method, path, *, body=None, params=None):
    captured = _policy_calls(engine, pm, method, path, body=body, params=params)
    return captured[-1] if captured else None


def test_percent_encoded_paths_resolve_to_the_plain_index(engine, pm):
    plain = _targets(engine, pm, "GET", "/.xerj-memory-x-edges/_search")
    assert plain == [".xerj-memory-x-edges"]
    assert _targets(engine, pm, "GET", "/%2Exerj-memory-x-edges/_search") == plain
    assert _targets(engine, pm, "GET", "/%2exerj%2Dmemory-x-edges/_search") == plain
    assert _targets(engine, pm, "POST", "//%2Exerj-memory-x-edges/_doc/1", body=b"{}") == plain


def test_targets_come_from_bodies(engine, pm):
    bulk = ndjson({"index": {"_index": "a", "_id": "1"}}, {"x": 1},
                  {"delete": {"_index": ".xerj-memory-n", "_id": "2"}}, {"create": {"_id": "3"}}, {"x": 2})
    # a bulk is authorized item by item: the policy sees each distinct item index once, in item order
    assert _policy_calls(engine, pm, "POST", "/_bulk",
                         body=bulk.replace(b'{"create":{"_id":"3"}}\n{"x":2}\n', b"")) == [["a"], [".xerj-memory-n"]]
    assert _policy_calls(engine, pm, "POST", "/dflt/_bulk", body=bulk) == [["a"], [".xerj-memory-n"], ["dflt"]]
    mget = b'{"docs": [{"_index": "m1", "_id": "1"}, {"_index": ".xerj-memory-z-edges", "_id": "2"}]}'
    assert _targets(engine, pm, "POST", "/_mget", body=mget) == ["m1", ".xerj-memory-z-edges"]
    assert _targets(engine, pm, "POST", "/d/_mget", body=b'{"ids": ["1"]}') == ["d"]
    msearch = ndjson({"index": "s1"}, {"query": {"match_all": {}}}, {"index": [".xerj-memory-q", "s2"]}, {})
    assert _targets(engine, pm, "POST", "/_msearch", body=msearch) == ["s1", ".xerj-memory-q", "s2"]


def test_targets_of_graph_and_memory_routes(engine, pm):
    assert _targets(engine, pm, "POST", "/_graph/notes/link", body=b"{}") == [".xerj-memory-notes-edges"]
    assert _targets(engine, pm, "DELETE", "/_graph/notes/link/abc") == [".xerj-memory-notes-edges"]
    assert _targets(engine, pm, "GET", "/_graph/notes/ego", params={"node": "n"}) == [".xerj-memory-notes-edges"]
    assert _targets(engine, pm, "GET", "/_graph/notes/ego", params={"node": "n", "include_nodes": "true"}) == \
        [".xerj-memory-notes-edges", ".xerj-memory-notes"]
    assert _targets(engine, pm, "GET", "/_graph/notes/ego",
                    params={"node": "n", "include_nodes": "true", "nodes_index": "ax-mail,ax-pdfs"}) == \
        [".xerj-memory-notes-edges", "ax-mail", "ax-pdfs"]
    assert _targets(engine, pm, "GET", "/_graph/notes/overview") == [".xerj-memory-notes-edges", ".xerj-memory-notes"]
    # The brain's meta document can point hydration elsewhere; the resolved names are the targets.
    engine.store.put(".xerj-memory-docs-edges", {"meta_version": 1, "brain": "docs", "nodes_index": "ax-a,ax-b"},
                     "__xerj-brain-meta")
    assert _targets(engine, pm, "GET", "/_graph/docs/overview") == [".xerj-memory-docs-edges", "ax-a", "ax-b"]
    assert _targets(engine, pm, "POST", "/_memory/agent", body=b'{"text": "x"}') == [".xerj-memory-agent"]
    assert _targets(engine, pm, "DELETE", "/_memory/agent/m1") == [".xerj-memory-agent"]
    assert _targets(engine, pm, "POST", "/_memory/agent/_recall", body=b'{"query": "x"}') == [".xerj-memory-agent"]
    assert _targets(engine, pm, "POST", "/_memory/agent/_recall",
                    body=b'{"query": "x", "graph": {"mode": "blend"}}') == [".xerj-memory-agent",
                                                                           ".xerj-memory-agent-edges"]


def test_wildcards_expand_and_concrete_names_stay(engine, pm):
    for name in ("logs-1", "logs-2", "other", ".xerj-memory-h"):
        engine.store.create_index(name)
    assert _targets(engine, pm, "GET", "/logs-*/_search") == ["logs-1", "logs-2"]
    assert _targets(engine, pm, "GET", "/logs-*,missing/_count") == ["missing", "logs-1", "logs-2"]
    assert _targets(engine, pm, "GET", "/_search") == ["logs-1", "logs-2", "other"]
    assert _targets(engine, pm, "GET", "/_cat/indices", params={"expand_wildcards": "all"}) == \
        [".xerj-memory-h", "logs-1", "logs-2", "other"]
    assert _targets(engine, pm, "GET", "/") == []


def test_resolve_targets_of_an_unrouted_request_is_empty():
    req = falcon.testing.create_req(path="/anything")
    assert resolve_targets(req) == []


def test_errors_render_es_shaped(client):
    missing = client.simulate_get("/no-such-index/_doc/1")
    assert missing.status_code == 404
    assert missing.json["status"] == 404 and error_type(missing) == "index_not_found_exception"
    assert missing.json["error"]["root_cause"][0]["type"] == "index_not_found_exception"
    no_route = client.simulate_get("/a/b/c/d/e")
    assert no_route.status_code == 404 and no_route.json["status"] == 404
    assert no_route.json["error"]["reason"] == "no handler found for uri [/a/b/c/d/e] and method [GET]"
    wrong = client.simulate_request("PATCH", "/books")
    assert wrong.status_code == 405 and error_type(wrong) == "method_not_allowed_exception"
    assert "PUT" in wrong.json["error"]["reason"]


def test_invalid_json_is_a_400_naming_the_parse_error(client):
    result = client.simulate_put("/books/_doc/1", body=b'{"title": "Dune",}')
    assert result.status_code == 400 and error_type(result) == "parsing_exception"
    assert result.json["error"]["reason"].startswith("failed to parse request body: ")
    assert "line 1 column" in result.json["error"]["reason"]
    not_object = client.simulate_post("/_graph/notes/link", body=b"[1, 2]")
    assert not_object.status_code == 400 and "JSON object" in not_object.json["error"]["reason"]


def test_unexpected_exception_is_a_logged_500_without_traceback(probed, caplog):
    with caplog.at_level(logging.ERROR, logger="xerj_http"):
        result = probed.simulate_get("/_boom")
    assert result.status_code == 500 and result.json["status"] == 500
    assert error_type(result) == "internal_server_error"
    assert "secret internal detail" not in result.text and "Traceback" not in result.text
    assert any("secret internal detail" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_every_xerj_error_renders_its_own_body(probed):
    refused = probed.simulate_get("/_refused")
    assert refused.status_code == 400
    assert refused.json == {"error": {"type": "graph_error", "reason": "nope, and here is why"}, "status": 400}
    for cls in XerjError.__subclasses__():
        assert hasattr(cls, "status")


@pytest.mark.parametrize("secured", [False, True], ids=["open", "secured"])
def test_audit_event_per_request_names_the_resource_from_route_params(engine, pm, audit_log, secured):
    engine.config.audit_reads = "all"
    app = create_app(engine, pm, insecure=not secured)
    client = TestClient(app, headers=admin_headers(engine) if secured else None)
    client.simulate_put("/books/_doc/1", json={"t": 1})
    client.simulate_get("/books/_doc/404")
    client.simulate_post("/_memory/agent-a/_recall", json={"query": "x"})
    client.simulate_get("/nowhere/at/all/x/y")
    put, get, recall, unrouted = audit_log[-4:]
    subject = admin_subject(engine) if secured else "open-mode"
    assert put == {"op": "doc.index", "subject": subject, "resource": "books/1", "privilege": "write",
                   "outcome": "success", "status": 201, "remote_addr": "127.0.0.1",
                   "request_id": put["request_id"]}
    assert len(put["request_id"]) == 32
    assert get["op"] == "doc.get" and get["outcome"] == "failure" and get["resource"] == "books/404"
    assert (recall["op"], recall["resource"], recall["privilege"]) == ("memory.recall", ".xerj-memory-agent-a",
                                                                       "read")
    assert unrouted["op"] == "unrouted" and unrouted["outcome"] == "failure"
    assert "resource_not_found_exception" in unrouted["note"]


def test_audit_outcome_denied_for_security_refusals(engine, pm, audit_log):
    def deny(principal, op, privilege, targets):
        raise Forbidden("no")

    TestClient(create_app(engine, pm, insecure=True, policy=deny)).simulate_get("/books/_search")
    assert audit_log[-1]["outcome"] == "denied" and audit_log[-1]["resource"] == "books"


def test_clients_see_an_elasticsearch_product_header(client):
    assert client.simulate_get("/").headers["X-Elastic-Product"] == "Elasticsearch"


def test_root_reports_an_es_compatible_version(client):
    body = client.simulate_get("/").json
    assert body["version"]["number"] == "8.11.0" and body["tagline"]
    assert client.simulate_head("/").status_code == 200


def test_openapi_document_covers_every_route(client):
    doc = client.simulate_get("/_xerj/openapi.json").json
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {template for template, _ in ROUTES}
    assert doc == document()
    for template, resource_factory in ROUTES:
        documented = set(doc["paths"][template]) - {"parameters"}
        responders = {name[3:] for name in dir(resource_factory) if name.startswith("on_")}
        if isinstance(resource_factory, type):
            assert documented == responders, template


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
                           | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=JSON_VALUES, doc_id=JSON_VALUES, source=JSON_VALUES)
def test_index_names_in_bodies_of_any_json_shape_never_cause_a_5xx(client, name, doc_id, source):
    bodies = {
        "/_bulk": ndjson({"index": {"_index": name, "_id": doc_id}}, source),
        "/_mget": orjson.dumps({"docs": [{"_index": name, "_id": doc_id, "_source": source}]}),
        "/_msearch": ndjson({"index": name}, source if isinstance(source, dict) else {}),
        "/_memory/agent/_recall": orjson.dumps({"query": "x", "graph": source}),
    }
    for path, body in bodies.items():
        result = client.simulate_post(path, body=body)
        assert result.status_code < 500, (path, body, result.text)
