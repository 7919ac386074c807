"""PostgreSQL store against LMDB on the same data, in one run: bulk ingest, BM25 top-10, ego 2-hop, a memory store,
and ego against a hand-written SQL statement giving the same answer from the same tables.

Run: python tests/bench/bench_postgres.py [--docs N] [--edges E] [--queries Q] [--url postgresql://...]

Without --url (or XERJ_BENCH_PG_URL) a throwaway loopback cluster is started with fsync and synchronous commit
on, as durable as LMDB's synced commits. Every answer compared is checked equal between the two stores first.
Targets (issue #20): ego on PostgreSQL within 3x of LMDB and within 2x of the hand-written SQL; bulk ingest
>= 20k documents/s.

The two sides of "ego against hand-written SQL", called alternately node by node (200 nodes, p50 each):

- ego: ``engine.graph.ego(brain, node=..., hops=2, direction=both, as_of=..., limit=100)`` with its defaults
  (evidence included, no type or trust filter): the request parsed and the node resolved, both hops over the
  process's cached edge columns, every chosen edge's stored document fetched in the round trip that opens the
  read snapshot (prepared statements), the answer built (counters, trust counts, neighbours).
- SQL: :data:`SQL_EGO`, one statement prepared on the server, in autocommit: both hops over ``xerj_edges``'s
  covering indexes with the same filters (live at ``as_of``, an edge met once), ranked and cut like ego, joined
  to ``xerj_docs`` for the documents, which are decoded with orjson. Its (hop, edge id) list is checked equal to
  ego's for every node. Both tables are vacuumed and analysed first.

BM25 and ego are timed on a second pass over the same queries and nodes, so every side reads warm caches.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xerj_core.embedding import LEXICAL_EMBEDDER
from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph.brain import edges_index
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.store import BulkOp

T0 = 1_735_689_600_000
YEAR = 365 * 86_400_000
BRAIN = "bench"
BATCH = 10_000
EGO_LIMIT = 100
WORDS = [f"w{i}" for i in range(2000)]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def documents(n: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    weights = [1 / (1 + k) for k in range(len(WORDS))]
    return [{"title": " ".join(rng.choices(WORDS, weights, k=4)), "body": " ".join(rng.choices(WORDS, weights, k=20)),
             "tag": f"t{rng.randint(0, 20)}", "n": rng.randint(0, 10**6)} for _ in range(n)]


def drafts(edges: int, seed: int = 11) -> list[EdgeDraft]:
    rng = random.Random(seed)
    nodes = max(2, edges // 10)
    out = []
    for i in range(edges):
        src = i // 10 % nodes
        dst = rng.randrange(nodes - 1)
        dst += dst >= src
        a, b = f"note-{src:07d}", f"note-{dst:07d}"
        out.append(EdgeDraft(a, b, rng.choice(["wikilink", "mdlink", "sequence"]), "bench@1", round(rng.random(), 3),
                             round(0.4 + 0.6 * rng.random(), 3), T0 + rng.randrange(YEAR),
                             Evidence(f"{a} mentions {b}", f"notes/{a}.md", i % 997)))
    return out


MAPPING = {"properties": {"title": {"type": "text"}, "body": {"type": "text"}, "tag": {"type": "keyword"},
                          "n": {"type": "long"}}}


def ingest_batch(engine: Engine, docs: list[dict], lo: int) -> None:
    items = engine.store.bulk([BulkOp("index", "docs", f"d{i}", docs[i]) for i in range(lo, min(len(docs), lo + BATCH))])
    assert not any(item.error for item in items)


def server_cpu(postmaster: int | None) -> float | None:
    """CPU seconds used so far by a local PostgreSQL server: its postmaster and every process it started (the
    backends serving our connections, the WAL writer, the checkpointer), from /proc; None when not readable."""
    if postmaster is None:
        return None
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(pid) == postmaster or int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def postmaster_of(conn: Any) -> int | None:
    """The postmaster's process id when the server runs on this machine and its data directory is readable."""
    try:
        data = conn.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'").fetchone()[0]
        return int(Path(data, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, TypeError, IndexError):
        return None


def alternate(calls: dict[str, Any], args: list) -> tuple[dict[str, list[float]], dict[str, list]]:
    """Each argument through every call in turn (so all sides see the same load): the times and answers."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    answers: dict[str, list] = {name: [] for name in calls}
    for arg in args:
        for name, fn in calls.items():
            t = time.perf_counter()
            answers[name].append(fn(arg))
            times[name].append(time.perf_counter() - t)
    return times, answers


# The hand-written baseline: ego's answer in one statement on the same tables. The same edges (met once, by
# the first hop that reaches them, both directions, live at as_of), ranked as ego ranks them (hop, weight desc,
# valid_at desc, newest row first), cut at the same limit, each with its stored document (the evidence).
SQL_EGO = """
WITH h1 AS (
    SELECT row, weight, valid_at, dst AS far FROM xerj_edges
     WHERE ix = %(ix)s AND src = %(node)s AND valid_at <= %(t)s AND (invalid_at IS NULL OR invalid_at > %(t)s)
    UNION ALL
    SELECT row, weight, valid_at, src FROM xerj_edges
     WHERE ix = %(ix)s AND dst = %(node)s AND src <> %(node)s AND valid_at <= %(t)s
       AND (invalid_at IS NULL OR invalid_at > %(t)s)
), f AS (SELECT DISTINCT far AS n FROM h1 WHERE far <> %(node)s),
h2 AS (
    SELECT e.row, e.weight, e.valid_at FROM xerj_edges e JOIN f ON e.src = f.n
     WHERE e.ix = %(ix)s AND e.dst <> %(node)s AND e.valid_at <= %(t)s
       AND (e.invalid_at IS NULL OR e.invalid_at > %(t)s)
    UNION ALL
    SELECT e.row, e.weight, e.valid_at FROM xerj_edges e JOIN f ON e.dst = f.n
     WHERE e.ix = %(ix)s AND e.src <> %(node)s AND e.src NOT IN (SELECT n FROM f)
       AND e.valid_at <= %(t)s AND (e.invalid_at IS NULL OR e.invalid_at > %(t)s)
), picked AS (
    SELECT * FROM ((SELECT 1 AS hop, row, weight, valid_at FROM h1
                    ORDER BY weight DESC, valid_at DESC, row DESC LIMIT %(limit)s)
                   UNION ALL
                   (SELECT 2, row, weight, valid_at FROM h2
                    ORDER BY weight DESC, valid_at DESC, row DESC LIMIT %(limit)s)) p
     ORDER BY hop, weight DESC, valid_at DESC, row DESC LIMIT %(limit)s
)
SELECT p.hop, d.doc_id, d.source FROM picked p JOIN xerj_docs d ON d.ix = %(ix)s AND d.row = p.row
 ORDER BY p.hop, p.weight DESC, p.valid_at DESC, p.row DESC
"""


def sql_baseline(url: str, ix: int, as_of: int, limit: int):
    """The hand-written side: one connection, the statement prepared on the server, sources handed back as their
    bytes and decoded with orjson (as the store's reads do): ``node -> [(hop, edge id, edge document)]``."""
    import orjson
    import psycopg
    from psycopg.adapt import Loader

    class Raw(Loader):
        def load(self, data):
            return bytes(data)

    conn = psycopg.connect(url, autocommit=True)
    conn.adapters.register_loader("json", Raw)

    def run(node: str) -> list:
        return [(hop, doc_id.decode(), orjson.loads(source)) for hop, doc_id, source in
                conn.execute(SQL_EGO, {"ix": ix, "node": node, "t": as_of, "limit": limit}, prepare=True)]

    return conn, run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--url", default=os.environ.get("XERJ_BENCH_PG_URL"))
    args = parser.parse_args()
    cluster = None
    url = args.url
    if url is None:
        from xerj_postgres.cluster import Cluster

        cluster = Cluster(durable=True)
        url = cluster.start()
    import psycopg

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus (shared with other work: ratios are what count); "
          f"PostgreSQL at {url}" + (" (throwaway cluster, fsync on)" if cluster else ""), flush=True)
    docs, edge_drafts = documents(args.docs), drafts(args.edges)
    rng = random.Random(5)
    queries = [" ".join(rng.choices(WORDS[:300], k=rng.randint(1, 3))) for _ in range(args.queries)]
    nodes = [f"note-{rng.randrange(max(2, args.edges // 10)):07d}" for _ in range(args.queries)]
    as_of = T0 + YEAR
    try:
        with tempfile.TemporaryDirectory() as tmp, \
                Engine(Path(tmp) / "lmdb", config=EngineConfig(embedder=LEXICAL_EMBEDDER)) as lmdb, \
                Engine(Path(tmp) / "pg", config=EngineConfig(embedder=LEXICAL_EMBEDDER, store_url=url)) as pg:
            stores = {"lmdb": lmdb, "postgres": pg}
            print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
            # Every step alternates the stores batch by batch or call by call: the same load for both sides.
            for engine in stores.values():
                engine.store.create_index("docs", MAPPING)
            with psycopg.connect(url, autocommit=True) as conn:
                postmaster = postmaster_of(conn)
            cpu = {name: [0.0, 0.0] for name in stores}  # this process's CPU seconds, the server's

            def ingest_measured(name: str, engine: Engine, lo: int) -> None:
                before, server = time.process_time(), server_cpu(postmaster)
                ingest_batch(engine, docs, lo)
                cpu[name][0] += time.process_time() - before
                if server is not None:
                    cpu[name][1] += server_cpu(postmaster) - server

            spent, _ = alternate({name: (lambda lo, name=name, e=e: ingest_measured(name, e, lo))
                                  for name, e in stores.items()}, list(range(0, len(docs), BATCH)))
            ingest = {name: len(docs) / sum(t) for name, t in spent.items()}
            spent, _ = alternate({name: (lambda lo, e=e: e.graph.write_edges(BRAIN, edge_drafts[lo:lo + BATCH],
                                                                              created_at=as_of))
                                  for name, e in stores.items()}, list(range(0, len(edge_drafts), BATCH)))
            edges = {name: len(edge_drafts) / sum(t) for name, t in spent.items()}
            body = lambda q: {"query": {"match": {"body": q}}, "size": 10}  # noqa: E731
            search = {name: (lambda q, e=e: [(h["_id"], h["_score"]) for h in
                                             e.search.search("docs", body(q))["hits"]["hits"]])
                      for name, e in stores.items()}
            alternate(search, queries)  # one untimed pass: process and server caches warm on every side
            spent, bm25_said = alternate(search, queries)
            bm25 = {name: p50(t) for name, t in spent.items()}
            with pg.store.reader(edges_index(BRAIN)) as reader:
                ix = reader.ix
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE xerj_edges")  # the visibility map: index-only scans where they can be
                conn.execute("VACUUM ANALYZE xerj_docs")
            params = {"hops": "2", "direction": "both", "as_of": str(as_of), "limit": str(EGO_LIMIT)}
            sql_conn, sql = sql_baseline(url, ix, as_of, EGO_LIMIT)
            with sql_conn:
                calls = {**{name: (lambda n, e=e: e.graph.ego(BRAIN, {**params, "node": n}))
                            for name, e in stores.items()}, "sql": sql}
                # One untimed pass first: otherwise each node's documents would be read cold by whichever side
                # asks first (ego) and warm by the next (the SQL); prepared statements are made on both sides.
                alternate(calls, nodes)
                spent, ego_said = alternate(calls, nodes)
                ego = {name: p50(t) for name, t in spent.items()}
                plan = [line[0] for line in sql_conn.execute(
                    "EXPLAIN ANALYZE " + SQL_EGO, {"ix": ix, "node": nodes[0], "t": as_of, "limit": EGO_LIMIT})]
                rtt = p50(alternate({"rtt": lambda _n: sql_conn.execute("SELECT 1").fetchall()}, nodes)[0]["rtt"])
            same_edges = all([(h, i) for h, i, _doc in rows] == [(e["hop"], e["edge_id"]) for e in answer["edges"]]
                             for rows, answer in zip(ego_said["sql"], ego_said["postgres"]))
            scans = sorted({line.split(" on ")[0].strip(" ->") for line in plan if " Scan " in line})
            texts = [" ".join(rng.choices(WORDS[:500], k=12)) for _ in range(args.memories)]
            for engine in stores.values():
                engine.memory.create("mem", {"embedder": LEXICAL_EMBEDDER})
            spent, _ = alternate({name: (lambda text, e=e: e.memory.store("mem", {"text": text}))
                                  for name, e in stores.items()}, texts)
            memory = {name: statistics.mean(t) for name, t in spent.items()}
            print(f"load average at end {os.getloadavg()[0]:.1f}", flush=True)
        same_bm25 = bm25_said["lmdb"] == bm25_said["postgres"]
        same_ego = [_stable(a) for a in ego_said["lmdb"]] == [_stable(a) for a in ego_said["postgres"]]
        print()
        print(f"identical answers: BM25 top-10 ids and scores {same_bm25}, ego 2-hop {same_ego}; the SQL's edges "
              f"are ego's, in ego's order: {same_edges}")
        print(f"bulk ingest of {len(docs):,} documents: postgres {ingest['postgres']:,.0f} docs/s, lmdb "
              f"{ingest['lmdb']:,.0f} docs/s, ratio {ingest['postgres'] / ingest['lmdb']:.2f} "
              f"(target >= 20,000 docs/s on postgres)")
        per_doc = {name: [f"{seconds / len(docs) * 1e6:.1f}" for seconds in pair] for name, pair in cpu.items()}
        server = f"{per_doc['postgres'][1]} us" if postmaster is not None else "not measured (server not local)"
        print(f"  CPU per document: postgres client {per_doc['postgres'][0]} us (this process, every thread) + server "
              f"{server}; lmdb {per_doc['lmdb'][0]} us (server during lmdb's batches: {per_doc['lmdb'][1]} us, "
              f"other work); each side prepares the same records, xerj's engine code; postgres also packs and "
              f"sends the rows (the server then stores them; the segments a merge rewrites are read from memory)")
        print(f"write_edges: postgres {edges['postgres']:,.0f} edges/s, lmdb {edges['lmdb']:,.0f}, ratio "
              f"{edges['postgres'] / edges['lmdb']:.2f}")
        print(f"BM25 top-10 p50: postgres {bm25['postgres'] * 1e3:.2f} ms, lmdb {bm25['lmdb'] * 1e3:.2f} ms, ratio "
              f"{bm25['postgres'] / bm25['lmdb']:.2f}")
        print(f"ego 2-hop p50: postgres {ego['postgres'] * 1e3:.2f} ms, lmdb {ego['lmdb'] * 1e3:.2f} ms, ratio "
              f"{ego['postgres'] / ego['lmdb']:.2f} (target <= 3); hand-written SQL ego {ego['sql'] * 1e3:.2f} ms "
              f"(one prepared statement, {statistics.mean(len(r) for r in ego_said['sql']):.0f} edges per node with "
              f"their documents; scans: {', '.join(scans)}), ratio {ego['postgres'] / ego['sql']:.2f} (target <= 2)")
        print(f"memory store: postgres {memory['postgres'] * 1e3:.2f} ms/op, lmdb {memory['lmdb'] * 1e3:.2f} ms/op, "
              f"ratio {memory['postgres'] / memory['lmdb']:.2f}")
        print(f"one round trip to the server (SELECT 1) p50: {rtt * 1e3:.2f} ms; ego and the SQL cost one each, "
              f"BM25 and the memory store a few (docs/scale-out.md)")
    finally:
        if cluster is not None:
            cluster.stop()


def _stable(answer: dict) -> dict:
    """An ego answer without its wall-clock fields (the two stores wrote at different instants)."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in ("took", "created_at", "recorded_at")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(answer)


if __name__ == "__main__":
    main()
