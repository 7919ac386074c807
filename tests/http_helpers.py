"""Fixtures and helpers shared by the HTTP tests: an in-process client over a fresh engine, NDJSON bodies."""

from __future__ import annotations

import orjson
import pytest
from falcon.testing import TestClient

from xerj_core import hookimpl
from xerj_http import create_app


@pytest.fixture
def audit_log(pm):
    """Every ``xerj_audit_event`` the app emits during the test, in order."""
    events: list[dict] = []

    class Recorder:
        @hookimpl
        def xerj_audit_event(self, event):
            events.append(dict(event))

    recorder = Recorder()
    pm.register(recorder, name="audit-recorder")
    try:
        yield events
    finally:
        pm.unregister(recorder)


@pytest.fixture
def client(engine, pm):
    """``falcon.testing.TestClient`` over ``create_app(engine, pm)``."""
    return TestClient(create_app(engine, pm))


def ndjson(*rows) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def error_type(result) -> str:
    return result.json["error"]["type"]
