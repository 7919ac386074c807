"""The OpenAPI document is the contract: schemathesis drives every operation and fails on a 5xx or a violation."""

from __future__ import annotations

import json

import pytest
import schemathesis
from falcon.testing import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                               status_code_conformance)

from xerj_core.engine import Engine, EngineConfig
from xerj_core.plugins import get_plugin_manager
from xerj_http import create_app
from xerj_http.openapi import document

from .http_helpers import ndjson

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = 8
SEEDED = {"index": "books", "id": "1", "brain": "notes", "namespace": "agent"}


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value):
    rows = value if isinstance(value, list) else [value]
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def _operations() -> list[tuple[str, str]]:
    return [(method.upper(), path) for path, methods in document()["paths"].items() for method in methods]


def with_credential(app, credential: str):
    """``app`` as a WSGI callable that adds ``Authorization: credential`` to every request."""
    def call(environ, start_response):
        return app({**environ, "HTTP_AUTHORIZATION": credential}, start_response)
    return call


@pytest.fixture(scope="module", params=["open", "secured"])
def app(request, tmp_path_factory):
    """One engine for every operation, so state left by one operation meets the next.

    Secured, the WSGI app is wrapped so every call carries the admin key: the
    document must hold through the authenticate and authorize slots too.
    """
    pm = get_plugin_manager()
    engine = Engine(tmp_path_factory.mktemp("openapi") / "data", pm, config=EngineConfig(tail_rows=8))
    xerj_app = create_app(engine, pm, insecure=request.param == "open")
    app = xerj_app if request.param == "open" else with_credential(
        xerj_app, "ApiKey " + (engine.data_dir / "admin.key").read_text().strip())
    seed = TestClient(app)
    seed.simulate_put("/books", json={"mappings": {"properties": {"title": {"type": "text"}}}})
    seed.simulate_post("/_bulk", body=ndjson({"index": {"_index": "books", "_id": "1"}}, {"title": "Dune"},
                                             {"index": {"_index": "books", "_id": "2"}}, {"title": "Emma"}))
    seed.simulate_post("/_graph/notes/link", json={"src": "1", "dst": "2", "type": "relates_to"})
    seed.simulate_post("/_memory/agent", json={"text": "sourdough is a wild fermentation"})
    yield app
    xerj_app.close()
    engine.close()


@pytest.fixture(scope="module")
def schema(app):
    return schemathesis.openapi.from_wsgi("/_xerj/openapi.json", app)


@pytest.mark.parametrize("method, path", _operations(), ids=[f"{m} {p}" for m, p in _operations()])
def test_operation_honours_the_document(schema, method, path):
    operation = schema[path][method]
    seeded = {name: value for name, value in SEEDED.items() if "{" + name + "}" in path}
    strategies = [operation.as_strategy()]
    if seeded:
        strategies.append(operation.as_strategy(path_parameters=seeded))
    for strategy in strategies:
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def check(case):
            case.call_and_validate(checks=CHECKS)

        check()


def test_a_violation_is_caught(engine, pm, monkeypatch):
    """A control: a response that breaks the document must fail the check (the harness is not vacuous)."""
    from xerj_http.resources import cluster

    monkeypatch.setattr(cluster.Root, "on_get", lambda self, req, resp: setattr(resp, "media", {"nope": 1}))
    schema = schemathesis.openapi.from_wsgi("/_xerj/openapi.json", create_app(engine, pm, insecure=True))

    @settings(max_examples=1, deadline=None, database=None)
    @given(case=schema["/"]["GET"].as_strategy())
    def check(case):
        case.call_and_validate(checks=CHECKS)

    with pytest.raises(FailureGroup, match="Response violates schema"):
        check()
