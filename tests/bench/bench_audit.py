"""Audit append cost: requests/s of a write-heavy and a read-heavy HTTP mix with the JSONL sink on and off, one run.

Two `xerj serve` servers over copies of one seeded data directory, identical but
for ``XERJ_DISABLE_PLUGINS=audit_jsonl`` on the second, both with the default
``--audit-reads reserved``. Each mix runs in paired rounds, alternating which
server goes first, so a machine whose load drifts hits both sides of a pair
alike; the ratio printed is the median of the pairs' (on / off).

- write-heavy: 60% PUT of a new document, 20% memory store, 20% search;
- read-heavy: 40% search, 30% document GET, 20% count on an ordinary index, and
  10% memory recall (a read of the reserved namespace, so it is recorded).

Targets: the sink costs at most 15% of write throughput (ratio >= 0.85) and at
most 5% of read throughput (ratio >= 0.95).

Run: python tests/bench/bench_audit.py [--workers 2] [--duration 4] [--rounds 4] [--connections 4]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

SERVE = [sys.executable, "-c", "from xerj_core.cli import main; main()", "serve"]
INDEX = "books"
NAMESPACE = "agent"
WORDS = [f"w{n}" for n in range(400)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port: int, method: str, path: str, body: bytes | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def seed(data: Path, docs: int, memories: int) -> None:
    from xerj_core.engine import Engine
    from xerj_core.plugins import get_plugin_manager
    from xerj_core.store import Store

    rng = random.Random(3)
    with Engine(data, get_plugin_manager(), store=Store(data, sync=False)) as engine:
        for n in range(docs):
            engine.store.put(INDEX, {"title": " ".join(rng.choices(WORDS, k=12)), "n": n}, str(n))
        for _ in range(memories):
            engine.memory.store(NAMESPACE, {"text": " ".join(rng.choices(WORDS, k=16))})


def mix(kind: str, wid: int, n: int) -> tuple[str, str, bytes | None]:
    """The ``n``-th request of client ``wid`` in mix ``kind``: a fixed cycle of ten."""
    slot = n % 10
    word = WORDS[(wid * 7919 + n) % len(WORDS)]
    search = ("POST", f"/{INDEX}/_search", orjson.dumps({"query": {"match": {"title": word}}, "size": 10}))
    if kind == "write":
        if slot < 6:
            return "PUT", f"/{INDEX}/_doc/c{wid}-{n}", orjson.dumps({"title": f"{word} new", "n": n})
        if slot < 8:
            return "POST", f"/_memory/{NAMESPACE}", orjson.dumps({"text": f"{word} remembered by {wid}"})
        return search
    if slot < 4:
        return search
    if slot < 7:
        return "GET", f"/{INDEX}/_doc/{(wid * 31 + n) % 500}", None
    if slot < 9:
        return "POST", f"/{INDEX}/_count", orjson.dumps({"query": {"match": {"title": word}}})
    return "POST", f"/_memory/{NAMESPACE}/_recall", orjson.dumps({"query": word, "k": 5})


def _client(args: tuple) -> tuple[int, int]:
    port, kind, wid, deadline, offset = args
    done = bad = 0
    n = offset
    while time.monotonic() < deadline:
        method, path, body = mix(kind, wid, n)
        status = call(port, method, path, body)
        bad += not 200 <= status < 300
        done += 1
        n += 1
    return done, bad


def load(port: int, kind: str, duration: float, connections: int, offset: int) -> tuple[float, int]:
    deadline = time.monotonic() + duration
    started = time.monotonic()
    with multiprocessing.Pool(connections) as pool:
        results = pool.map(_client, [(port, kind, w, deadline, offset) for w in range(connections)])
    elapsed = time.monotonic() - started
    return sum(d for d, _ in results) / elapsed, sum(b for _, b in results)


class Server:
    def __init__(self, data: Path, workers: int, *, audit: bool) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if not audit:
            env["XERJ_DISABLE_PLUGINS"] = ",".join(filter(None, [env.get("XERJ_DISABLE_PLUGINS"), "audit_jsonl"]))
        self.proc = subprocess.Popen([*SERVE, "--data-dir", str(data), "--port", str(self.port), "--workers",
                                      str(workers), "--insecure"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                if call(self.port, "GET", "/") == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("xerj serve did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def flush_cost(directory: Path, samples: int = 40) -> float:
    """Median ms of appending 300 bytes and fdatasync-ing them here: the price of one durable audit entry."""
    path = directory / "flush-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            os.write(fd, b"x" * 299 + b"\n")
            os.fdatasync(fd)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times)


_LINE = b"x" * 299 + b"\n"  # about one audit entry
_REGION = 4 << 20  # the pre-written region of the in-place designs


def _design_append(path: Path) -> Any:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    return fd, lambda: (os.write(fd, _LINE), os.fdatasync(fd))


def _design_dsync_append(path: Path) -> Any:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_DSYNC, 0o600)
    return fd, lambda: os.write(fd, _LINE)


def _prewritten(path: Path, flags: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"\0" * _REGION)  # written, not fallocated: an unwritten extent would be converted on each write
    os.fsync(fd)
    os.close(fd)
    return os.open(path, os.O_RDWR | flags)


def _design_in_place(path: Path) -> Any:
    fd, at = _prewritten(path, 0), [0]

    def op() -> None:
        os.pwrite(fd, _LINE, at[0])
        at[0] = (at[0] + len(_LINE)) % (_REGION - len(_LINE))
        os.fdatasync(fd)
    return fd, op


def _design_dsync_in_place(path: Path) -> Any:
    fd, at = _prewritten(path, os.O_DSYNC), [0]

    def op() -> None:
        os.pwrite(fd, _LINE, at[0])
        at[0] = (at[0] + len(_LINE)) % (_REGION - len(_LINE))
    return fd, op


FLUSH_DESIGNS = {
    "append + fdatasync (the sink's way)": _design_append,
    "O_DSYNC append": _design_dsync_append,
    "overwrite a pre-written region + fdatasync (no size change, no journal commit)": _design_in_place,
    "overwrite a pre-written region, O_DSYNC": _design_dsync_in_place,
}


def flush_designs(directory: Path, samples: int = 200) -> dict[str, tuple[float, float]]:
    """``{design: (p50 ms, p90 ms)}`` of one durable ~300-byte record written each way in ``directory``.

    The designs are timed in turn, one record each per round, so load from elsewhere on the machine (other
    processes' flushes share the disk's queue and the file system's journal) hits them all alike. Each keeps
    the promise the sink makes: the record is on disk when the call returns.
    """
    opened = {}
    for n, (name, make) in enumerate(FLUSH_DESIGNS.items()):
        opened[name] = make(directory / f"flush-design-{n}")
    times: dict[str, list[float]] = {name: [] for name in opened}
    try:
        names = list(opened)
        for i in range(samples):
            for name in names[i % len(names):] + names[:i % len(names)]:
                started = time.perf_counter()
                opened[name][1]()
                times[name].append((time.perf_counter() - started) * 1000)
    finally:
        for n, (fd, _op) in enumerate(opened.values()):
            os.close(fd)
            (directory / f"flush-design-{n}").unlink()
    out = {}
    for name, got in times.items():
        got.sort()
        out[name] = (statistics.median(got), got[9 * len(got) // 10])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=4, help="paired rounds per mix")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--memories", type=int, default=500)
    args = parser.parse_args()
    print(f"{args.workers} gunicorn workers per server; {args.connections} client processes; "
          f"{args.duration:g}s per measurement; {args.rounds} paired rounds; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="xerj-bench-audit-") as tmp:
        flush_before = flush_cost(Path(tmp))
        seeded = Path(tmp) / "seed"
        seed(seeded, args.docs, args.memories)
        on_dir, off_dir = Path(tmp) / "on", Path(tmp) / "off"
        shutil.copytree(seeded, on_dir)
        shutil.copytree(seeded, off_dir)
        on, off = Server(on_dir, args.workers, audit=True), Server(off_dir, args.workers, audit=False)
        try:
            assert call(off.port, "GET", "/_audit/_verify") == 404  # the baseline really has no sink
            results: dict[str, list[tuple[float, float]]] = {}
            offset = 0
            for kind in ("write", "read"):
                load(on.port, kind, 1.0, args.connections, offset)  # warm-up, both sides
                load(off.port, kind, 1.0, args.connections, offset)
                pairs = []
                for n in range(args.rounds):
                    offset += 1_000_000
                    order = [on, off] if n % 2 == 0 else [off, on]
                    rps = {}
                    for server in order:
                        rps[server is on], bad = load(server.port, kind, args.duration, args.connections, offset)
                        if bad:
                            raise SystemExit(f"{bad} non-2xx responses in the {kind} mix")
                    pairs.append((rps[True], rps[False]))
                results[kind] = pairs
            chain = orjson.loads(_get(on.port, "/_audit/_verify"))
            flush_after = flush_cost(Path(tmp))
        finally:
            on.stop()
            off.stop()

    print(f"\naudit chain after the run: valid {chain['valid']}, {chain['entries']} entries")
    print(f"one append + fdatasync on this disk: {flush_before:.2f} ms before the run, {flush_after:.2f} ms after "
          f"(every recorded request pays one; an LMDB write commit pays two)")
    print(f"\n{'mix':12} {'sink on req/s':>14} {'sink off req/s':>15} {'on/off':>8}  target")
    for kind, target in (("write", 0.85), ("read", 0.95)):
        pairs = results[kind]
        ratio = statistics.median(a / b for a, b in pairs)
        print(f"{kind + '-heavy':12} {statistics.median(a for a, _ in pairs):14.0f} "
              f"{statistics.median(b for _, b in pairs):15.0f} {ratio:8.3f}  >= {target}")
        print("  rounds on/off: " + ", ".join(f"{a:.0f}/{b:.0f}" for a, b in pairs))


def _get(port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        return conn.getresponse().read()
    finally:
        conn.close()


if __name__ == "__main__":
    main()
