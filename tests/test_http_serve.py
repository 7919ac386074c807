"""`xerj serve` for real: gunicorn workers over one data directory, a real ES-style client, shutdown, binds."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import platformdirs
import pytest
from click.testing import CliRunner

from xerj_core.cli import build_cli
from xerj_http.serve import is_loopback, serve_command

SERVE = [sys.executable, "-c", "from xerj_core.cli import main; main()", "serve"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body=None, timeout: float = 10.0, headers=None):
    """One request on a new connection; ``(status, parsed JSON or text)``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        sent = {"Content-Type": "application/json"} if data else {}
        conn.request(method, path, body=data, headers={**sent, **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        if resp.getheader("Content-Type", "").startswith("application/json") and raw:
            return resp.status, json.loads(raw)
        return resp.status, raw.decode()
    finally:
        conn.close()


class Server:
    """``xerj serve`` in a subprocess: open mode (``--insecure``) unless ``insecure=False``, then
    ``headers`` carries the admin key the server wrote into ``data_dir``."""

    def __init__(self, data_dir: Path, log: Path, workers: int, *, insecure: bool = True,
                 extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.log_path = log
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(
            [*SERVE, "--data-dir", str(data_dir), "--port", str(self.port), "--workers", str(workers),
             *(["--insecure"] if insecure else []), *extra],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.headers: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while True:
            try:
                if not insecure and not self.headers and (data_dir / "admin.key").exists():
                    self.headers = {"Authorization": "ApiKey " + (data_dir / "admin.key").read_text().strip()}
                if request(self.port, "GET", "/", timeout=2, headers=self.headers)[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"xerj serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        # One worker answering is not all of them: wait until every worker has opened its engine.
        while not (len(self.workers()) == workers and all(self.maps_data(pid) for pid in self.workers())):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"xerj serve workers did not all start:\n{log.read_text()}")
            time.sleep(0.1)

    @staticmethod
    def maps_data(pid: int) -> bool:
        try:
            return "data.mdb" in Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return False

    def workers(self) -> list[int]:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return [int(pid) for pid in children]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        finally:
            self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    srv = Server(root / "data", root / "serve.log", workers=2)
    yield srv
    srv.stop()


def test_starts_in_open_mode_and_says_so(server):
    log = server.log_path.read_text()
    assert "OPEN MODE" in log and "every caller is a superuser" in log


def test_only_workers_open_the_data_directory(server):
    """The master never maps LMDB: each worker opens its Engine after the fork."""
    request(server.port, "GET", "/_cat/indices")
    assert not server.maps_data(server.proc.pid)
    assert all(server.maps_data(pid) for pid in server.workers())


def test_opensearch_client_documents(server):
    from opensearchpy import OpenSearch, helpers

    client = OpenSearch(hosts=[{"host": "127.0.0.1", "port": server.port}], use_ssl=False, timeout=10)
    assert client.ping()
    assert client.info()["version"]["number"] == "8.11.0"
    created = client.indices.create(index="books", body={"mappings": {"properties": {"title": {"type": "text"}}}})
    assert created["acknowledged"] is True
    assert client.indices.exists(index="books")
    assert client.index(index="books", id="1", body={"title": "Dune"})["result"] == "created"
    assert client.get(index="books", id="1")["_source"] == {"title": "Dune"}
    ok, errors = helpers.bulk(client, ({"_index": "books", "_id": str(n), "title": f"book {n}"} for n in range(2, 52)))
    assert ok == 50 and errors == []
    docs = client.mget(body={"docs": [{"_index": "books", "_id": "1"}, {"_index": "books", "_id": "51"},
                                      {"_index": "books", "_id": "99"}]})["docs"]
    assert [d["found"] for d in docs] == [True, True, False]
    assert client.mget(index="books", body={"ids": ["2"]})["docs"][0]["_source"] == {"title": "book 2"}
    rows = client.cat.indices(format="json")
    assert {"index": "books", "docs.count": "51"}.items() <= next(r for r in rows if r["index"] == "books").items()
    assert "books" in client.cat.indices()
    assert client.delete(index="books", id="1")["result"] == "deleted"
    assert client.indices.delete(index="books")["acknowledged"] is True
    assert not client.indices.exists(index="books")


def test_opensearch_client_search(server):
    from opensearchpy import OpenSearch, helpers

    client = OpenSearch(hosts=[{"host": "127.0.0.1", "port": server.port}], use_ssl=False, timeout=10)
    helpers.bulk(client, ({"_index": "films", "_id": str(n), "title": title}
                          for n, title in enumerate(["Alien", "Aliens", "Solaris"])))
    found = client.search(index="films", body={"query": {"match": {"title": "solaris"}}})
    assert [h["_id"] for h in found["hits"]["hits"]] == ["2"]
    assert client.count(index="films")["count"] == 3
    assert client.count(index="films", body={"query": {"match": {"title": "aliens"}}})["count"] == 1
    client.indices.delete(index="films")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_two_workers_see_each_others_writes_at_once(server):
    workers = server.workers()
    assert len(workers) == 2
    before = {pid: _cpu_ticks(pid) for pid in workers}
    failures: list[str] = []

    def writer_reader(prefix: str) -> None:
        for n in range(150):
            status, _ = request(server.port, "PUT", f"/shared/_doc/{prefix}{n}", {"n": n, "by": prefix})
            if status not in (200, 201):
                failures.append(f"put {prefix}{n}: {status}")
            # A new connection may land on either worker; the write must already be there.
            status, body = request(server.port, "GET", f"/shared/_doc/{prefix}{n}")
            if status != 200 or body["_source"] != {"n": n, "by": prefix}:
                failures.append(f"get {prefix}{n}: {status} {body}")

    threads = [threading.Thread(target=writer_reader, args=(p,)) for p in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert all(_cpu_ticks(pid) > before[pid] for pid in workers), "both workers must have served requests"
    status, body = request(server.port, "GET", "/_cat/indices?format=json")
    assert next(r for r in body if r["index"] == "shared")["docs.count"] == "300"


def test_percent_encoded_path_over_the_wire(server):
    request(server.port, "PUT", "/.xerj-memory-wire-edges/_doc/1", {"x": 1})
    status, body = request(server.port, "GET", "/%2Exerj-memory-wire-edges/_doc/1")
    assert status == 200 and body["_index"] == ".xerj-memory-wire-edges"


def test_sigterm_is_a_graceful_shutdown(tmp_path):
    srv = Server(tmp_path / "data", tmp_path / "serve.log", workers=1)
    assert request(srv.port, "PUT", "/t/_doc/1", {"x": 1})[0] == 201
    started = time.monotonic()
    assert srv.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 15
    with pytest.raises(OSError):
        request(srv.port, "GET", "/", timeout=1)


def test_workers_exit_cleanly_when_the_master_checked_an_embedder(tmp_path, monkeypatch):
    # Checking --embedder lists every embedder, which imports fastembed and with it onnxruntime (threads started
    # at import); done in the master, each forked worker inherited that state and aborted or segfaulted on exit.
    monkeypatch.setenv("XERJ_EMBEDDER", "lexical-feature-hash")
    srv = Server(tmp_path / "data", tmp_path / "serve.log", workers=2)
    assert request(srv.port, "POST", "/_memory/notes", {"text": "bread rises overnight"})[0] == 201
    assert request(srv.port, "POST", "/_memory/notes/_recall", {"query": "bread"})[0] == 200
    assert srv.stop(signal.SIGTERM) == 0
    log = (tmp_path / "serve.log").read_text()
    assert "was sent" not in log and "terminate called" not in log, log


def test_cleartext_bind_on_a_non_loopback_address_refuses_to_start(pm, tmp_path):
    result = CliRunner().invoke(build_cli(pm), ["serve", "--data-dir", str(tmp_path), "--host", "0.0.0.0",
                                                "--port", str(free_port())])
    assert result.exit_code == 2
    assert "refusing a cleartext bind" in result.output and "--allow-cleartext-bind" in result.output


def test_loopback_detection():
    for host in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "192.168.1.10", "::", "10.0.0.1"):
        assert not is_loopback(host), host


def test_serve_options_and_defaults():
    options = {p.name: p for p in serve_command.params}
    assert options["host"].default == "127.0.0.1" and options["port"].default == 9200
    assert options["data_dir"].default() == platformdirs.user_data_dir("xerj")
    assert options["workers"].default() == len(os.sched_getaffinity(0))
    assert {"insecure", "allow_cleartext_bind"} <= set(options)


def test_a_port_in_use_is_one_clear_line_and_exit_2(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run([*SERVE, "--data-dir", str(tmp_path / "d"), "--port", str(port), "--insecure"],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"xerj serve: 127.0.0.1:{port} is in use by another process; choose another --port (or stop that process)"]
    assert "serving" not in done.stdout + done.stderr and time.monotonic() - started < 20


def test_the_access_log_records_each_request_in_common_log_format(tmp_path):
    log = tmp_path / "access.log"
    port = free_port()
    proc = subprocess.Popen([*SERVE, "--data-dir", str(tmp_path / "d"), "--port", str(port), "--workers", "1",
                             "--insecure", "--access-log", str(log)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if request(port, "GET", "/", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        assert request(port, "GET", "/nope/_doc/1")[0] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    lines = log.read_text().splitlines()
    import re

    clf = re.compile(r'^127\.0\.0\.1 - - \[[^\]]+\] "(GET|HEAD) (\S+) HTTP/1\.1" (\d{3}) (\d+|-)$')
    parsed = [clf.match(line) for line in lines]
    assert all(parsed), lines
    assert ("/nope/_doc/1", "404") in {(m.group(2), m.group(3)) for m in parsed}


def test_a_worker_freezes_what_it_loaded_before_serving(monkeypatch):
    """Each worker's start-up objects are moved out of the collector's way once its app is built."""
    import gc

    from xerj_http import serve

    captured = {}

    class Captured:
        def __init__(self, options, load):
            captured["load"] = load

        def run(self):
            pass

    monkeypatch.setattr(serve, "_gunicorn_application", Captured)
    serve.run_server(lambda: (object(), lambda: None), host="127.0.0.1", port=0, workers=1)
    before = gc.get_freeze_count()
    held = [[] for _ in range(100)]  # tracked objects alive when the app is built
    try:
        captured["load"]()
        assert gc.get_freeze_count() >= before + len(held)
    finally:
        gc.unfreeze()
