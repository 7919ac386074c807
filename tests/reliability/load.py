"""Scenario 1: 4 writers and 4 readers against a secured 2-worker server; every acknowledged write read back."""

from __future__ import annotations

import random
import threading
import time

from tests.reliability.common import (Client, Result, cleanup, count_signal_deaths, mint_key, start_server,
                                      workdir)

INDEX = "load"
BRAIN = "loadbrain"
NS = "loadns"
WORDS = "river stone bread starter oven flour salt water yeast crumb crust proof".split()


def run(seconds: float) -> Result:
    result = Result("load", f"4 writers + 4 readers, secured, --workers 2, {seconds:.0f} s")
    root = workdir()
    server = start_server(root, workers=2, secured=True)
    try:
        headers = mint_key(server, "loader", [INDEX, f".xerj-memory-{BRAIN}*", f".xerj-memory-{NS}*",
                                              f".xerj-memory-{BRAIN}-edges"])
        setup = Client(server.port, headers)
        setup.call("PUT", f"/{INDEX}/_doc/seed", {"text": "seed river"})
        setup.call("POST", f"/_memory/{NS}", {"text": "seed memory about bread"})
        setup.call("POST", f"/_graph/{BRAIN}/link", {"src": "n0", "dst": "n1", "type": "t"})
        acked_docs: set[str] = set()
        acked_memories: set[str] = set()
        live_edges: set[str] = set()
        retired_edges: set[str] = set()
        lock = threading.Lock()
        stop = time.monotonic() + seconds
        errors: list[str] = []
        clients: list[Client] = []

        def bad(op: str, status: int, body) -> None:
            with lock:
                errors.append(f"{op}: {status} {str(body)[:200]}")

        def writer(w: int) -> None:
            c = Client(server.port, headers)
            clients.append(c)
            rnd = random.Random(w)
            n = 0
            while time.monotonic() < stop:
                n += 1
                op = rnd.choice(["put", "put", "bulk", "memory", "link", "unlink"])
                try:
                    if op == "put":
                        doc_id = f"w{w}-{n}"
                        status, body = c.call("PUT", f"/{INDEX}/_doc/{doc_id}",
                                              {"text": " ".join(rnd.choices(WORDS, k=6)), "n": n})
                        if status in (200, 201):
                            with lock:
                                acked_docs.add(doc_id)
                        else:
                            bad(op, status, body)
                    elif op == "bulk":
                        ids = [f"b{w}-{n}-{i}" for i in range(500)]
                        lines = []
                        for doc_id in ids:
                            lines.append('{"index": {"_index": "%s", "_id": "%s"}}' % (INDEX, doc_id))
                            lines.append('{"text": "%s"}' % " ".join(rnd.choices(WORDS, k=4)))
                        status, body = c.call("POST", "/_bulk", raw=("\n".join(lines) + "\n").encode(),
                                              headers={"Content-Type": "application/x-ndjson"})
                        if status == 200 and not body.get("errors"):
                            with lock:
                                acked_docs.update(ids)
                        else:
                            bad(op, status, body)
                    elif op == "memory":
                        # Every tenth store repeats an earlier text: the dedup path.
                        text = f"memory {w} {n % 10 if n % 10 == 0 else n} " + " ".join(rnd.choices(WORDS, k=5))
                        status, body = c.call("POST", f"/_memory/{NS}", {"text": text})
                        if status in (200, 201) and body.get("_id"):
                            with lock:
                                acked_memories.add(body["_id"])
                        else:
                            bad(op, status, body)
                    elif op == "link":
                        src, dst = rnd.sample(range(50), 2)
                        status, body = c.call("POST", f"/_graph/{BRAIN}/link",
                                              {"src": f"n{src}", "dst": f"n{dst}",
                                               "type": rnd.choice(["relates_to", "cites"])})
                        edge = body.get("edge_id") if isinstance(body, dict) else None
                        if status in (200, 201) and edge:
                            with lock:
                                live_edges.add(edge)
                        else:
                            bad(op, status, body)
                    else:
                        with lock:
                            edge = live_edges.pop() if live_edges else None
                        if edge is None:
                            continue
                        status, body = c.call("DELETE", f"/_graph/{BRAIN}/link/{edge}")
                        if status == 200:
                            with lock:
                                retired_edges.add(edge)
                        else:
                            bad(op, status, body)
                except Exception as exc:  # a dropped connection or a timeout is an error of the run
                    bad(op, -1, repr(exc))
                    c.close()

        def reader(r: int) -> None:
            c = Client(server.port, headers)
            clients.append(c)
            rnd = random.Random(100 + r)
            while time.monotonic() < stop:
                op = rnd.choice(["get", "search", "recall", "ego"])
                try:
                    if op == "get":
                        with lock:
                            doc_id = rnd.choice(sorted(acked_docs)[-200:]) if acked_docs else "seed"
                        status, body = c.call("GET", f"/{INDEX}/_doc/{doc_id}")
                        ok = status == 200
                    elif op == "search":
                        status, body = c.call("POST", f"/{INDEX}/_search",
                                              {"query": {"match": {"text": rnd.choice(WORDS)}}, "size": 5})
                        ok = status == 200
                    elif op == "recall":
                        mode = rnd.choice([{}, {"semantic": True}, {"hybrid": True}])
                        status, body = c.call("POST", f"/_memory/{NS}/_recall",
                                              {"query": rnd.choice(WORDS), "k": 5, **mode})
                        ok = status == 200
                    else:
                        status, body = c.call("GET", f"/_graph/{BRAIN}/ego?node=n{rnd.randrange(50)}&hops=2")
                        ok = status == 200
                    if not ok:
                        bad(op, status, body)
                except Exception as exc:
                    bad(op, -1, repr(exc))
                    c.close()

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        threads += [threading.Thread(target=reader, args=(i,)) for i in range(4)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        result.duration = time.monotonic() - start
        for c in clients:
            result.latencies.extend(c.latencies)
        result.requests = len(result.latencies)
        result.errors = len(errors)
        result.notes.extend(errors[:5])
        result.lost = _read_back(Client(server.port, headers), acked_docs, acked_memories, live_edges, retired_edges,
                                 result)
    finally:
        server.stop()
        count_signal_deaths(result, root)
        cleanup(root)
    return result


def _read_back(c: Client, docs: set[str], memories: set[str], live: set[str], retired: set[str],
               result: Result) -> int:
    lost = 0
    ordered = sorted(docs)
    for start in range(0, len(ordered), 1000):
        part = ordered[start:start + 1000]
        status, body = c.call("POST", f"/{INDEX}/_mget", {"ids": part})
        lost += sum(1 for d in body["docs"] if not d.get("found")) if status == 200 else len(part)
    for mem in sorted(memories):
        status, _ = c.call("GET", f"/.xerj-memory-{NS}/_doc/{mem}")
        lost += status != 200
    status, standing = c.call("GET", f"/_graph/{BRAIN}/_standing")
    if status == 200 and isinstance(standing, dict):
        live_now = set(standing["live"])
        lost += len(live - live_now) + len(retired & live_now)
    else:
        lost += len(live)
    result.notes.append(f"read back {len(docs)} documents, {len(memories)} memories, "
                        f"{len(live)} live and {len(retired)} unlinked edges")
    return lost
