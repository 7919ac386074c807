"""Scenario 2: kill -9 mid-bulk (one worker, or the whole server) and mid-`xerj autoindex`, then check what survived.

After each kill the data directory must open, every acknowledged bulk must be
whole, and the bulk in flight must be all there or not at all (one
transaction). An autoindex run killed midway and run again must end with the
same edge set as a run never interrupted.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.reliability.common import Client, Result, cleanup, count_signal_deaths, start_server, workdir

INDEX = "faults"
BULK = 500


def _bulk_body(ids: list[str]) -> bytes:
    lines = []
    for doc_id in ids:
        lines.append('{"index": {"_index": "%s", "_id": "%s"}}' % (INDEX, doc_id))
        lines.append('{"text": "fault %s"}' % doc_id)
    return ("\n".join(lines) + "\n").encode()


def _present(c: Client, ids: list[str]) -> int:
    status, body = c.call("POST", f"/{INDEX}/_mget", {"ids": ids})
    if status == 404:
        return 0
    assert status == 200, body
    return sum(1 for d in body["docs"] if d.get("found"))


def kill_mid_bulk(trials: int, whole_server: bool) -> Result:
    what = "the whole server" if whole_server else "one worker"
    result = Result(f"kill -9 {what} mid-bulk", f"{trials} trials, bulks of {BULK}, --workers 2")
    root = workdir()
    rnd = random.Random(7 if whole_server else 8)
    acked: list[list[str]] = []
    killed: list[int] = []  # workers sent SIGKILL on purpose: the only signal deaths their logs may show
    start = time.monotonic()
    server = start_server(root, workers=2, secured=False)
    try:
        for trial in range(trials):
            c = Client(server.port, timeout=20)
            in_flight: list[list[str]] = []
            done = threading.Event()

            def send(trial: int = trial, c: Client = c) -> None:
                n = 0
                while not done.is_set():
                    ids = [f"t{trial}-{n}-{i}" for i in range(BULK)]
                    n += 1
                    in_flight.append(ids)
                    try:
                        status, body = c.call("POST", "/_bulk", raw=_bulk_body(ids),
                                              headers={"Content-Type": "application/x-ndjson"})
                    except Exception:
                        return
                    if status == 200 and not body.get("errors"):
                        acked.append(ids)
                        in_flight.remove(ids)
                    elif status >= 500:
                        result.errors += 1
                        result.notes.append(f"bulk answered {status}: {str(body)[:200]}")

            t = threading.Thread(target=send)
            t.start()
            time.sleep(rnd.uniform(0.2, 1.2))
            if whole_server:
                os.killpg(server.proc.pid, signal.SIGKILL)
                server.proc.wait()
                server.log.close()
            else:
                workers = server.workers()
                killed.append(rnd.choice(workers))
                os.kill(killed[-1], signal.SIGKILL)
            time.sleep(0.2)
            done.set()
            t.join(30)
            c.close()
            if whole_server:
                server = start_server(root, workers=2, secured=False, data=root / "data")
            else:
                _wait_workers(server, 2)
            check = Client(server.port)
            for ids in acked:
                result.lost += BULK - _present(check, ids)
            for ids in in_flight:
                found = _present(check, ids)
                if found not in (0, BULK):
                    result.lost += 1
                    result.notes.append(f"trial {trial}: a bulk in flight is half visible ({found} of {BULK})")
            result.requests += 1
            acked_total = sum(len(a) for a in acked)
        result.notes.append(f"{acked_total} acknowledged documents checked after every kill")
    finally:
        server.stop()
        count_signal_deaths(result, root, killed)
        cleanup(root)
    result.duration = time.monotonic() - start
    return result


def _wait_workers(server, n: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = server.workers()
        if len(pids) == n and all(server.maps_data(p) for p in pids):
            if Client(server.port).call("GET", "/")[0] == 200:
                return
        time.sleep(0.1)
    raise RuntimeError("gunicorn did not replace the killed worker")


XERJ = [sys.executable, "-c", "from xerj_core.cli import main; main()"]


def _edges(data: Path, brain: str) -> set[tuple]:
    code = ("import sys, json; from xerj_core.engine import Engine; from xerj_core.plugins import get_plugin_manager\n"
            "from pathlib import Path; e = Engine(Path(sys.argv[1]), get_plugin_manager())\n"
            "r = e.search.search(f'.xerj-memory-{sys.argv[2]}-edges', {'size': 10000, 'query': {'match_all': {}}})\n"
            "print(json.dumps([[h['_source'].get('src'), h['_source'].get('dst'), h['_source'].get('type'), "
            "h['_source'].get('invalid_at') is None] for h in r['hits']['hits'] if 'src' in h['_source']]))\n")
    out = subprocess.run([sys.executable, "-c", code, str(data), brain], capture_output=True, text=True, check=True)
    import json

    return {tuple(e) for e in json.loads(out.stdout)}


def kill_autoindex(trials: int, corpus: Path) -> Result:
    result = Result("kill -9 `xerj autoindex` mid-run, then re-run", f"{trials} trials on {corpus.name}")
    root = workdir()
    start = time.monotonic()
    env = {**os.environ, "XERJ_EMBEDDER": "lexical-feature-hash"}
    try:
        clean = root / "clean"
        subprocess.run([*XERJ, "autoindex", str(corpus), "--brain", "b", "--data-dir", str(clean)],
                       env=env, capture_output=True, check=True)
        expected = _edges(clean, "b")
        rnd = random.Random(9)
        for trial in range(trials):
            data = root / f"t{trial}"
            proc = subprocess.Popen([*XERJ, "autoindex", str(corpus), "--brain", "b", "--data-dir", str(data)],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0.5, 4.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            rerun = subprocess.run([*XERJ, "autoindex", str(corpus), "--brain", "b", "--data-dir", str(data)],
                                   env=env, capture_output=True, text=True)
            result.requests += 1
            if rerun.returncode != 0:
                result.errors += 1
                result.notes.append(f"trial {trial}: the re-run failed: {rerun.stderr[-300:]}")
                continue
            got = _edges(data, "b")
            if got != expected:
                result.lost += 1
                result.notes.append(f"trial {trial}: {len(expected - got)} edges missing, {len(got - expected)} extra")
            cleanup(data)
        result.notes.append(f"{len(expected)} edges in the uninterrupted run")
    finally:
        cleanup(root)
    result.duration = time.monotonic() - start
    return result
