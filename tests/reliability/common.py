"""What every reliability scenario shares: a real server, a timed JSON client, results and their percentiles."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import attrs

from tests.test_http_serve import Server


@attrs.define
class Result:
    """One scenario's row in docs/RELIABILITY.md; ``failed`` breaks the build."""

    scenario: str
    load: str
    duration: float = 0.0
    requests: int = 0
    errors: int = 0  # 5xx, connection failures, and answers other than the expected ones
    lost: int = 0  # acknowledged writes missing afterwards, or half-visible transactions
    latencies: list[float] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)

    @property
    def failed(self) -> bool:
        return self.errors > 0 or self.lost > 0

    def percentile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class Client:
    """A keep-alive JSON client; ``call`` returns ``(status, body)`` and records the latency."""

    def __init__(self, port: int, headers: dict[str, str] | None = None, timeout: float = 30.0) -> None:
        self.port, self.headers, self.timeout = port, dict(headers or {}), timeout
        self.conn: http.client.HTTPConnection | None = None
        self.latencies: list[float] = []

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {**self.headers, **({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})}
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            start = time.monotonic()
            try:
                self.conn.request(method, path, body=data, headers=sent)
                resp = self.conn.getresponse()
                payload = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt or method not in ("GET", "HEAD"):
                    raise
                continue
            self.latencies.append(time.monotonic() - start)
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
            try:
                return resp.status, json.loads(payload) if payload else None
            except ValueError:
                return resp.status, payload.decode("utf-8", "replace")
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def start_server(root: Path, *, workers: int = 2, secured: bool = True, data: Path | None = None) -> Server:
    os.environ.setdefault("XERJ_EMBEDDER", "lexical-feature-hash")  # no model download under test
    return Server(data or root / "data", root / f"serve-{time.monotonic_ns()}.log", workers, insecure=not secured)


def mint_key(server: Server, name: str, indices: list[str]) -> dict[str, str]:
    status, body = Client(server.port, server.headers).call("POST", "/_security/api_key", {
        "name": name, "role_descriptors": {name: {"indices": [{"names": indices, "privileges": ["all"]}]}}})
    assert status == 200, body
    return {"Authorization": "ApiKey " + body["encoded"]}


def mount_tmpfs(where: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` (``8m``) on ``where``; False where that is not allowed (not root)."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], check=False)


def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="xerj-reliability-"))


def cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# gunicorn's master logs each worker that a signal ended: "Worker (pid:N) was sent SIGABRT!".
_SIGNAL_DEATH = re.compile(r"Worker \(pid:(\d+)\) was sent (SIG[A-Z]+)")


def count_signal_deaths(result: Result, root: Path, killed: Iterable[int] = ()) -> None:
    """Count as errors the workers that died by a signal, in every server log under ``root``.

    A worker that crashes on its way out (a fork that inherited threads, a native abort) answers every request
    and loses nothing, so only its log shows it; ``killed`` are the pids a scenario sent SIGKILL on purpose.
    """
    killed = set(killed)
    for log in sorted(root.glob("serve-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            found = _SIGNAL_DEATH.search(line)
            if found and not (found[2] == "SIGKILL" and int(found[1]) in killed):
                result.errors += 1
                result.notes.append(f"{log.name}: {line.strip()[:200]}")
