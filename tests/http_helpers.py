"""Fixtures and helpers shared by the HTTP tests: an in-process client over a fresh engine, NDJSON bodies."""

from __future__ import annotations

import base64
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


def admin_headers(engine) -> dict[str, str]:
    """The ``Authorization`` header of the admin key a secured app wrote into the data directory."""
    return {"Authorization": "ApiKey " + (engine.data_dir / "admin.key").read_text().strip()}


def admin_subject(engine) -> str:
    """How the audit log names the admin key: ``key:<key id>:xerj-admin``."""
    key_id = base64.b64decode((engine.data_dir / "admin.key").read_text().strip()).decode().partition(":")[0]
    return f"key:{key_id}:xerj-admin"


@pytest.fixture(params=["open", "secured"])
def client(request, engine, pm):
    """``falcon.testing.TestClient`` over ``create_app(engine, pm)``, once in open mode and once secured.

    Secured, every request carries the admin key, so a suite that is not about
    authorization runs unchanged through the authenticate and authorize slots.
    ``client.mode`` says which; ``client.subject`` is who the audit log names.
    """
    secured = request.param == "secured"
    app = create_app(engine, pm, insecure=not secured)
    test_client = TestClient(app, headers=admin_headers(engine) if secured else None)
    test_client.mode = request.param
    test_client.subject = admin_subject(engine) if secured else "open-mode"
    yield test_client
    app.close()


def ndjson(*rows) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def error_type(result) -> str:
    return result.json["error"]["type"]
