"""A real `xerj serve` against idle sockets, chunked bodies, bad paths, oversized request lines and a full disk."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time

import pytest

from tests.reliability.common import mount_tmpfs, unmount
from tests.test_http_serve import Server, request


def _start(root, **env):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return Server(root / "data", root / "serve.log", workers=2)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = _start(tmp_path_factory.mktemp("rel"), XERJ_MAX_BODY_BYTES=str(64 << 10))
    yield srv
    srv.stop()


def raw(port: int, data: bytes, timeout: float = 10.0) -> tuple[int, dict, bytes]:
    """Send ``data`` as is on a new connection; ``(status, headers, body)`` of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def assert_es_error(status: int, headers: dict, body: bytes, expected: int) -> dict:
    assert status == expected
    assert headers["content-type"].startswith("application/json")
    parsed = json.loads(body)
    assert parsed["status"] == expected
    assert parsed["error"]["root_cause"][0]["type"] == parsed["error"]["type"]
    return parsed


def test_a_thousand_idle_connections_do_not_starve_requests(server):
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        time.sleep(0.5)
        request(server.port, "PUT", "/idle/_doc/1", {"n": 1})
        slowest = 0.0
        for n in range(100):
            start = time.monotonic()
            status, body = request(server.port, "GET", "/idle/_doc/1", timeout=5)
            slowest = max(slowest, time.monotonic() - start)
            assert status == 200 and body["_source"] == {"n": 1}
        assert slowest < 1.0, f"a request took {slowest:.2f}s with 1000 idle connections open"
        # Half-sent requests (slow clients mid-headers), more than both workers have threads, do not
        # hold the workers either: whichever worker accepted them, every thread would be waiting.
        for s in idle[:200]:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.5)
        slowest = 0.0
        for n in range(20):
            start = time.monotonic()
            assert request(server.port, "GET", "/idle/_doc/1", timeout=5)[0] == 200
            slowest = max(slowest, time.monotonic() - start)
        assert slowest < 1.0, f"a request took {slowest:.2f}s beside 200 half-sent requests"
        # A half-sent request that is finished later is answered on its own connection.
        late = idle[0]
        late.sendall(b"\r\n")
        assert late.recv(64).startswith(b"HTTP/1.1 ")
    finally:
        for s in idle:
            s.close()
    assert "WORKER TIMEOUT" not in server.log_path.read_text()


def _chunked(path: str, parts: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    return (f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode() + body


def test_a_chunked_put_is_stored(server):
    doc = json.dumps({"title": "streamed", "pad": "x" * 5000}).encode()
    status, _, body = raw(server.port, _chunked("/chunks/_doc/1", [doc[:7], doc[7:3000], doc[3000:]]))
    assert status == 201, body
    status, got = request(server.port, "GET", "/chunks/_doc/1")
    assert status == 200 and got["_source"]["title"] == "streamed"


def test_a_chunked_body_over_the_cap_is_413(server):
    parts = [b"x" * 8192] * 10  # 80 kB against a 64 kB cap
    status, headers, body = raw(server.port, _chunked("/chunks/_doc/2", parts))
    parsed = assert_es_error(status, headers, body, 413)
    assert parsed["error"]["type"] == "content_too_long_exception"
    assert request(server.port, "GET", "/chunks/_doc/2")[0] == 404


def test_a_declared_length_over_the_cap_is_refused_before_the_body(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"PUT /chunks/_doc/3 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 209715200\r\n\r\n")
        answer = b""
        while b"}" not in answer:  # answered without sending any of the 200 MB
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"content_too_long_exception" in answer


@pytest.mark.parametrize("path", ["/idx/_doc/%FF%FE", "/%FF%FE/_doc/1"])
def test_invalid_percent_encoded_bytes_are_400(server, path):
    status, body = request(server.port, "PUT", path, {"a": 1})
    assert status == 400 and body["error"]["type"] == "illegal_argument_exception"
    assert "UTF-8" in body["error"]["reason"]
    status, body = request(server.port, "GET", "/idx/_doc/%EF%BF%BD%EF%BF%BD")
    assert status == 404


def test_invalid_utf8_in_the_raw_path_is_400_json(server):
    status, headers, body = raw(server.port, b"GET /idx/_doc/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 400
    assert headers["content-type"].startswith("application/json") and json.loads(body)["status"] == 400


def test_a_request_line_too_long_is_414_json(server):
    status, headers, body = raw(server.port, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert assert_es_error(status, headers, body, 414)["error"]["type"] == "too_long_http_line_exception"


def test_headers_too_large_are_431_json(server):
    many = b"".join(b"X-H%d: v\r\n" % n for n in range(200))
    status, headers, body = raw(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    assert assert_es_error(status, headers, body, 431)["error"]["type"] == "too_long_http_header_exception"


def test_a_bad_request_line_is_400_json(server):
    status, headers, body = raw(server.port, b"NOT A REQUEST\r\n\r\n")
    assert_es_error(status, headers, body, 400)


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    if not mount_tmpfs(mount, "24m"):
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    unmount(mount)


def test_a_full_disk_answers_507_and_the_write_succeeds_once_space_is_freed(small_disk, tmp_path):
    srv = Server(small_disk / "data", tmp_path / "serve.log", workers=1)
    try:
        assert request(srv.port, "PUT", "/full/_doc/0", {"n": 0})[0] == 201
        free = os.statvfs(small_disk)
        ballast = small_disk / "ballast"
        ballast.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - (512 << 10)))
        doc = {"pad": "y" * (200 << 10)}
        answer = None
        for n in range(1, 40):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            conn.request("PUT", f"/full/_doc/{n}", body=json.dumps(doc), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            answer = (resp.status, resp.getheader("Retry-After"), json.loads(resp.read()), n)
            conn.close()
            if answer[0] != 201:
                break
        status, retry_after, body, n = answer
        assert status == 507, body
        assert body["error"]["type"] == "insufficient_storage" and "full" in body["error"]["reason"]
        assert retry_after is not None and int(retry_after) > 0
        assert request(srv.port, "GET", "/full/_doc/0")[1]["_source"] == {"n": 0}  # reads keep working
        ballast.unlink()
        assert request(srv.port, "PUT", f"/full/_doc/{n}", doc)[0] == 201
        assert request(srv.port, "GET", f"/full/_doc/{n}")[0] == 200
    finally:
        srv.stop()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_the_harness_counts_every_worker_a_signal_ended_except_those_it_killed(tmp_path):
    from tests.reliability.common import Result, count_signal_deaths

    (tmp_path / "serve-1.log").write_text(
        "[INFO] Booting worker with pid: 11\n"
        "[ERROR] Worker (pid:11) was sent SIGKILL! Perhaps out of memory?\n"  # killed on purpose below
        "[ERROR] Worker (pid:12) was sent SIGKILL! Perhaps out of memory?\n"
        "[ERROR] Worker (pid:13) was sent SIGABRT!\n")
    (tmp_path / "serve-2.log").write_text("[ERROR] Worker (pid:11) was sent SIGSEGV!\n[INFO] Shutting down: Master\n")
    (tmp_path / "other.log").write_text("[ERROR] Worker (pid:14) was sent SIGSEGV!\n")  # not a server's log
    result = Result("s", "l")
    count_signal_deaths(result, tmp_path, killed=[11])
    assert result.errors == 3 and result.failed
    assert [note.split(": ", 1)[0] for note in result.notes] == ["serve-1.log", "serve-1.log", "serve-2.log"]
    clean = Result("s", "l")
    count_signal_deaths(clean, tmp_path / "nothing-here")
    assert clean.errors == 0 and not clean.notes
