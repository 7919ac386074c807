"""The audit log over HTTP: what is recorded against what, the superuser-only routes, a failing sink, real workers."""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import signal
import subprocess
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor

import orjson
import pytest
from falcon.testing import TestClient

from xerj_http import create_app
from xerj_http.errors import Forbidden, Unauthenticated
from xerj_http.middleware import Authenticate

from .http_helpers import admin_headers, admin_subject, error_type
from .test_http_serve import Server, request


def make_client(engine, pm, *, reads: str = "reserved", **kwargs) -> TestClient:
    """An app in open mode (these tests are about the log, not credentials) recording ``reads``."""
    engine.config.audit_reads = reads
    kwargs.setdefault("insecure", True)
    return TestClient(create_app(engine, pm, **kwargs))


def entries(client, **params) -> list[dict]:
    result = client.simulate_get("/_audit/_search", params={"size": "1000", **params})
    assert result.status_code == 200, result.text
    return result.json["entries"]


def as_principal(monkeypatch, principal) -> None:
    def authenticate(self, req, resp):
        req.context.principal = principal

    monkeypatch.setattr(Authenticate, "process_request", authenticate)


def test_a_memory_store_names_the_namespace_index_and_a_recall_is_a_read(engine, pm):
    client = make_client(engine, pm)
    stored = client.simulate_post("/_memory/agent", json={"text": "sourdough starter"})
    assert stored.status_code == 201
    client.simulate_post("/_memory/agent/_recall", json={"query": "sourdough"})
    client.simulate_delete(f"/_memory/agent/{stored.json['_id']}")
    found = entries(client, resource=".xerj-memory-agent")
    assert [(e["op"], e["privilege"], e["resource"]) for e in found] == [
        ("memory.forget", "write", f".xerj-memory-agent/{stored.json['_id']}"),
        ("memory.recall", "read", ".xerj-memory-agent"),
        ("memory.store", "write", ".xerj-memory-agent"),
    ]
    assert all(e["resource"] not in ("_memory", "_memory/agent") for e in entries(client))
    store = found[-1]
    assert (store["subject"], store["outcome"], store["status"], store["remote_addr"]) == (
        "open-mode", "success", 201, "127.0.0.1")
    assert client.simulate_get("/_audit/_verify").json["valid"] is True


def test_graph_routes_name_the_brain_and_ego_is_a_read(engine, pm):
    client = make_client(engine, pm)
    edge = client.simulate_post("/_graph/notes/link", json={"src": "a", "dst": "b", "type": "relates_to"})
    client.simulate_get("/_graph/notes/ego", params={"node": "a"})
    found = entries(client, resource=".xerj-memory-notes-edges")
    assert [(e["op"], e["privilege"]) for e in found] == [("graph.ego", "read"), ("graph.link", "write")]
    assert edge.status_code in (200, 201)


def test_a_denied_request_is_recorded_with_its_subject(engine, pm, monkeypatch):
    def deny(principal, op, privilege, targets):
        raise Forbidden("not yours")

    refused = make_client(engine, pm, policy=deny).simulate_get("/.xerj-memory-bob/_search")
    assert refused.status_code == 403
    admin = make_client(engine, pm)
    (denied,) = entries(admin, outcome="denied")
    assert (denied["op"], denied["subject"], denied["resource"], denied["privilege"], denied["status"]) == (
        "search", "open-mode", ".xerj-memory-bob", "read", 403)
    assert "not yours" in denied["note"]


def test_a_failed_authentication_is_recorded_against_the_route_it_tried(engine, pm, monkeypatch):
    def refuse(self, req, resp):
        raise Unauthenticated(f"missing authentication credentials for REST request [{req.path}]")

    monkeypatch.setattr(Authenticate, "process_request", refuse)
    client = make_client(engine, pm)
    presented = base64.b64encode(b"key-7:the-secret").decode()
    assert client.simulate_post("/_memory/alice", json={"text": "x"},
                                headers={"Authorization": f"ApiKey {presented}"}).status_code == 401
    assert client.simulate_get("/_audit/_search", headers={"Authorization": "ApiKey %%%"}).status_code == 401
    assert client.simulate_get("/_audit/_verify").status_code == 401
    monkeypatch.undo()
    found = entries(make_client(engine, pm), outcome="denied")
    assert [(e["op"], e["subject"], e["resource"], e["status"], e.get("credential")) for e in found] == [
        ("audit.verify", "anonymous", "", 401, None),
        ("audit.search", "anonymous", "", 401, "ApiKey (malformed)"),
        ("memory.store", "anonymous", ".xerj-memory-alice", 401, "ApiKey id [key-7]")]
    assert "the-secret" not in (engine.data_dir / "audit.jsonl").read_text()


def test_the_audit_routes_are_for_a_superuser_only(engine, pm, monkeypatch):
    scoped = types.SimpleNamespace(name="alice-agent", superuser=False, key_id="k-1", mode="api_key", grants=())
    as_principal(monkeypatch, scoped)
    client = make_client(engine, pm)
    for path in ("/_audit/_search", "/_audit/_verify"):
        refused = client.simulate_get(path)
        assert refused.status_code == 403 and error_type(refused) == "security_exception"
        assert "[k-1]" in refused.json["error"]["reason"] and "superuser" in refused.json["error"]["reason"]
    monkeypatch.undo()
    found = entries(make_client(engine, pm), subject="alice-agent")
    assert [(e["op"], e["subject"], e["outcome"]) for e in found] == [
        ("audit.verify", "key:k-1:alice-agent", "denied"), ("audit.search", "key:k-1:alice-agent", "denied")]
    assert entries(make_client(engine, pm), subject="k-1") == found


def test_audit_reads_reserved_all_and_none(engine, pm):
    engine.store.put("books", {"t": "dune"}, "1")
    reserved = make_client(engine, pm, reads="reserved")
    reserved.simulate_get("/books/_search")
    reserved.simulate_get("/books/_doc/1")
    reserved.simulate_post("/_memory/agent/_recall", json={"query": "x"})
    assert [e["op"] for e in entries(reserved) if e["op"] != "audit.search"] == ["memory.recall"]
    everything = make_client(engine, pm, reads="all")
    everything.simulate_get("/books/_search")
    assert entries(everything, op="search")[0]["resource"] == "books"
    nothing = make_client(engine, pm, reads="none")
    before = len(entries(nothing, op="memory.recall"))
    nothing.simulate_post("/_memory/agent/_recall", json={"query": "x"})
    nothing.simulate_put("/books/_doc/2", json={"t": "emma"})
    assert len(entries(nothing, op="memory.recall")) == before
    assert entries(nothing, op="doc.index")[0]["resource"] == "books/2"
    with pytest.raises(ValueError, match="audit_reads"):
        make_client(engine, pm, reads="some")


def test_search_filters_and_bad_parameters(engine, pm):
    client = make_client(engine, pm)
    for n in range(5):
        client.simulate_put(f"/books/_doc/{n}", json={"n": n})
    client.simulate_put("/films/_doc/1", json={"n": 1})
    assert [e["resource"] for e in entries(client, resource="books", size="2")] == ["books/4", "books/3"]
    result = client.simulate_get("/_audit/_search", params={"resource": "books", "size": "2"}).json
    assert result["total"] == 5 and len(result["entries"]) == 2
    assert [e["resource"] for e in entries(client, resource="films")] == ["films/1"]
    assert len(entries(client, op="doc.*")) == 6
    newest = entries(client, op="doc.*", size="1")[0]
    assert entries(client, op="doc.*", **{"from": str(newest["ts"] + 1)}) == []
    assert newest in entries(client, op="doc.*", **{"from": str(newest["ts"]), "to": str(newest["ts"])})
    assert len(entries(client, to="2000-01-01T00:00:00Z")) == 0
    assert len(entries(client, op="doc.*", **{"from": "2000-01-01T00:00:00Z"})) == 6
    for params, words in [({"size": "-1"}, "[size]"), ({"size": "10001"}, "[size]"), ({"outcome": "ok"}, "[outcome]"),
                          ({"from": "yesterday"}, "[from]"), ({"sort": "ts"}, "[sort]")]:
        bad = client.simulate_get("/_audit/_search", params=params)
        assert bad.status_code == 400 and words in bad.json["error"]["reason"], (params, bad.json)
    twice = client.simulate_get("/_audit/_search", query_string="op=a&op=b")
    assert twice.status_code == 400
    assert client.simulate_get("/_audit/_verify", params={"x": "1"}).status_code == 400


def test_a_request_id_is_echoed_or_made(engine, pm):
    client = make_client(engine, pm)
    given = client.simulate_put("/books/_doc/1", json={}, headers={"X-Request-Id": "trace-42"})
    made = client.simulate_put("/books/_doc/2", json={})
    assert given.headers["x-request-id"] == "trace-42" and len(made.headers["x-request-id"]) == 32
    assert [e["request_id"] for e in entries(client, op="doc.index")] == [made.headers["x-request-id"], "trace-42"]


def test_a_sink_that_cannot_write_fails_the_request_with_503_naming_it(engine, pm, caplog):
    (engine.data_dir / "audit.jsonl").symlink_to("/dev/full")  # every write: ENOSPC, as on a full disk
    client = make_client(engine, pm)
    with caplog.at_level(logging.ERROR):
        failed = client.simulate_put("/books/_doc/1", json={"t": 1})
    assert failed.status_code == 503
    assert failed.json["error"]["type"] == "audit_sink_exception"
    assert failed.json["error"]["sink"] == "jsonl"
    assert "audit sink [jsonl] could not record this request" in failed.json["error"]["reason"]
    assert "No space left on device" in failed.json["error"]["reason"]
    assert any("audit sink [jsonl]" in record.getMessage() for record in caplog.records)
    # a read the policy does not record is not refused
    assert client.simulate_get("/books/_doc/1").status_code == 200


# -- real workers ------------------------------------------------------------------------------

PER_PROCESS = 200
HTTP_CLIENTS = 7

CLI_APPENDER = """
import sys
from xerj_core.engine import Engine
with Engine(sys.argv[1]) as engine:
    for n in range({count}):
        engine.audit.record({{"op": "cli.note", "subject": "cli", "resource": "books", "privilege": "write",
                             "outcome": "success", "status": 0, "remote_addr": None, "request_id": f"cli-{{n}}"}})
"""


def _http_writer(args: tuple[int, int]) -> list[int]:
    port, k = args
    return [request(port, "PUT", f"/books/_doc/{k}-{n}", {"k": k, "n": n})[0] for n in range(PER_PROCESS)]


def _acknowledged_writes(args: tuple[int, int, float]) -> list[str]:
    """PUT until the deadline; the request ids of the writes the server acknowledged (a killed worker's fail)."""
    port, k, deadline = args
    acknowledged, n = [], 0
    while time.monotonic() < deadline:
        n += 1
        request_id = f"w{k}-{n}"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("PUT", f"/books/_doc/{k}-{n}", body=b'{"n": 1}',
                         headers={"Content-Type": "application/json", "X-Request-Id": request_id})
            if conn.getresponse().status == 201:
                acknowledged.append(request_id)
        except (OSError, http.client.HTTPException):
            pass  # the worker holding this connection was killed
        finally:
            conn.close()
    return acknowledged


@pytest.mark.slow
def test_four_workers_and_a_cli_process_share_one_chain(tmp_path):
    """Eight processes × 200 events: seven HTTP clients through four gunicorn workers, and a CLI process."""
    data = tmp_path / "data"
    server = Server(data, tmp_path / "serve.log", workers=4)
    try:
        cli = subprocess.Popen([sys.executable, "-c", CLI_APPENDER.format(count=PER_PROCESS), str(data)])
        with ProcessPoolExecutor(HTTP_CLIENTS) as pool:
            statuses = [s for batch in pool.map(_http_writer, [(server.port, k) for k in range(HTTP_CLIENTS)])
                        for s in batch]
        assert cli.wait(120) == 0
        assert statuses.count(201) == HTTP_CLIENTS * PER_PROCESS
        status, verdict = request(server.port, "GET", "/_audit/_verify")
        assert status == 200 and verdict["valid"] is True, verdict
        status, found = request(server.port, "GET", "/_audit/_search?size=10000")
        seqs = sorted(entry["seq"] for entry in found["entries"])
        assert seqs == list(range(1, len(seqs) + 1)) and found["total"] == len(seqs)
        ops = [entry["op"] for entry in found["entries"]]
        assert ops.count("doc.index") == HTTP_CLIENTS * PER_PROCESS and ops.count("cli.note") == PER_PROCESS
        workers = server.workers()
    finally:
        server.stop()
    assert len(workers) == 4
    offline = subprocess.run([sys.executable, "-c", "from xerj_core.cli import main; main()", "audit", "verify",
                              "--data-dir", str(data)], capture_output=True, text=True)
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["entries"] >= HTTP_CLIENTS * PER_PROCESS + PER_PROCESS
    lines = (data / "audit.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))


def test_serve_takes_audit_reads_with_reserved_as_the_default():
    from xerj_http.serve import serve_command

    (option,) = [p for p in serve_command.params if p.name == "audit_reads"]
    assert option.default == "reserved" and list(option.type.choices) == ["all", "reserved", "none"]


@pytest.mark.slow
def test_kill_9_of_a_worker_mid_burst_keeps_every_acknowledged_entry_and_a_chain_that_verifies(tmp_path):
    data = tmp_path / "data"
    server = Server(data, tmp_path / "serve.log", workers=2)
    try:
        deadline = time.monotonic() + 4
        with ProcessPoolExecutor(4) as pool:
            running = pool.map(_acknowledged_writes, [(server.port, k, deadline) for k in range(4)])
            for _ in range(2):  # two workers killed in the middle of the burst (gunicorn starts new ones)
                time.sleep(1.2)
                os.kill(server.workers()[0], signal.SIGKILL)
            acknowledged = [request_id for batch in running for request_id in batch]
        status, verdict = request(server.port, "GET", "/_audit/_verify")
        assert status == 200 and verdict["valid"] is True, verdict
        status, found = request(server.port, "GET", "/_audit/_search?size=10000&op=doc.index")
    finally:
        server.stop()
    recorded = {entry["request_id"] for entry in found["entries"]}
    assert len(acknowledged) > 50
    assert set(acknowledged) <= recorded  # no write was acknowledged without its entry
    lines = (data / "audit.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))


def test_secured_the_audit_routes_admit_the_admin_key_only_and_key_operations_are_recorded(engine, pm):
    app = create_app(engine, pm)  # secured: the admin key is minted into the data directory
    client = TestClient(app)
    try:
        admin = admin_headers(engine)
        minted = client.simulate_post("/_security/api_key", headers=admin, json={
            "name": "alice-agent",
            "role_descriptors": {"r": {"indices": [{"names": ["*"], "privileges": ["all"]}]}}})
        assert minted.status_code == 200, minted.text
        alice = {"Authorization": "ApiKey " + minted.json["encoded"]}
        # even a key granted every index is not a superuser: the log is the superuser's to read
        for path in ("/_audit/_search", "/_audit/_verify"):
            refused = client.simulate_get(path, headers=alice)
            assert refused.status_code == 403 and error_type(refused) == "security_exception"
        assert client.simulate_get("/_audit/_search").status_code == 401
        assert client.simulate_post("/_memory/alice", json={"text": "x"}, headers=alice).status_code == 201
        found = client.simulate_get("/_audit/_search", params={"size": "100"}, headers=admin)
        assert found.status_code == 200
        rows = [(e["op"], e["subject"], e["outcome"]) for e in reversed(found.json["entries"])]
        alice_subject = f"key:{minted.json['id']}:alice-agent"
        assert rows[0][1] == admin_subject(engine) and rows[0][2] == "success"  # the key was minted
        assert rows[1:] == [("audit.search", alice_subject, "denied"), ("audit.verify", alice_subject, "denied"),
                            ("audit.search", "anonymous", "denied"), ("memory.store", alice_subject, "success")]
        assert client.simulate_get("/_audit/_verify", headers=admin).json["valid"] is True
    finally:
        app.close()
