"""The OpenAPI document is the contract: schemathesis drives every operation and fails on a 5xx or a violation."""

from __future__ import annotations

import importlib.util
import json

import pytest

schemathesis = pytest.importorskip("schemathesis")

from falcon.testing import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,  # noqa: E402
                                               status_code_conformance)

from xerj_core.engine import Engine, EngineConfig  # noqa: E402
from xerj_core.plugins import get_plugin_manager  # noqa: E402
from xerj_http import create_app  # noqa: E402
from xerj_http.openapi import document  # noqa: E402

from .http_helpers import ndjson  # noqa: E402

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = 8
# Operations that need an engine service which may not have landed yet.
SERVICE_OF = {"_search": "xerj_core.query.service", "_count": "xerj_core.query.service",
              "_msearch": "xerj_core.query.service", "_memory": "xerj_core.memory.service",
              "_graph": "xerj_core.graph.service"}
SEEDED = {"index": "books", "id": "1", "brain": "notes", "namespace": "agent"}


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value):
    rows = value if isinstance(value, list) else [value]
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def _operations() -> list[tuple[str, str]]:
    return [(method.upper(), path) for path, methods in document()["paths"].items() for method in methods]


def _service_missing(path: str) -> str | None:
    for marker, module in SERVICE_OF.items():
        if marker in path:
            try:
                if importlib.util.find_spec(module) is None:
                    return module
            except ModuleNotFoundError:
                return module
    return None


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One engine for every operation, so state left by one operation meets the next."""
    pm = get_plugin_manager()
    engine = Engine(tmp_path_factory.mktemp("openapi") / "data", pm, config=EngineConfig(tail_rows=8))
    app = create_app(engine, pm)
    seed = TestClient(app)
    seed.simulate_put("/books", json={"mappings": {"properties": {"title": {"type": "text"}}}})
    seed.simulate_post("/_bulk", body=ndjson({"index": {"_index": "books", "_id": "1"}}, {"title": "Dune"},
                                             {"index": {"_index": "books", "_id": "2"}}, {"title": "Emma"}))
    if importlib.util.find_spec("xerj_core.graph.service"):
        seed.simulate_post("/_graph/notes/link", json={"src": "1", "dst": "2", "type": "relates_to"})
    yield app
    engine.close()


@pytest.fixture(scope="module")
def schema(app):
    return schemathesis.openapi.from_wsgi("/_xerj/openapi.json", app)


@pytest.mark.parametrize("method, path", _operations(), ids=[f"{m} {p}" for m, p in _operations()])
def test_operation_honours_the_document(schema, method, path):
    missing = _service_missing(path)
    if missing:
        pytest.skip(f"{missing} has not landed")
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
    schema = schemathesis.openapi.from_wsgi("/_xerj/openapi.json", create_app(engine, pm))

    @settings(max_examples=1, deadline=None, database=None)
    @given(case=schema["/"]["GET"].as_strategy())
    def check(case):
        case.call_and_validate(checks=CHECKS)

    with pytest.raises(FailureGroup, match="Response violates schema"):
        check()
