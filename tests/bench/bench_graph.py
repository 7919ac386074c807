"""Graph benchmark: 2-hop ego against sqlite (covering indexes) and networkx, a 4096-id hop, ingest, RSS.

Run: python tests/bench/bench_graph.py [--edges N] [--queries Q] [--skip-networkx]

The graph has N edges over N/10 nodes (out-degree 10), 10% of them retired.
Every figure and every ratio is printed; targets from the graph issue are
shown beside them.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import orjson

from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import hoprun
from xerj_core.graph.brain import edge_id, edges_index
from xerj_core.graph.hop import Filters, expand, new_counters, unique_ids
from xerj_core.graph.review import MAX_DECISIONS
from xerj_core.model import EdgeDraft, Evidence

from merge_workers import MergeWorkers

BRAIN = "bench"
TYPES = ["wikilink", "mdlink", "sequence", "same_dir", "shared_term"]
T0 = 1_735_689_600_000  # 2025-01-01
YEAR = 365 * 86_400_000
BATCH = 10_000


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


class Corpus:
    """A deterministic edge set: src i links to 10 random nodes; 10% retired at a random later instant."""

    def __init__(self, edges: int, seed: int = 11) -> None:
        rng = np.random.default_rng(seed)
        self.n_nodes = max(2, edges // 10)
        self.src = np.repeat(np.arange(self.n_nodes), 10)[:edges]
        dst = rng.integers(0, self.n_nodes - 1, edges)
        self.dst = np.where(dst >= self.src, dst + 1, dst)  # never a self-edge
        self.type = rng.integers(0, len(TYPES), edges)
        self.weight = np.round(rng.random(edges), 3)
        self.confidence = np.round(0.4 + 0.6 * rng.random(edges), 3)
        self.valid_at = T0 + rng.integers(0, YEAR, edges)
        self.retired = rng.random(edges) < 0.10
        self.invalid_at = self.valid_at + rng.integers(1, YEAR, edges)
        self.as_of = T0 + YEAR  # retired edges with invalid_at past this are still believed
        self.size = edges

    def node(self, i: int) -> str:
        return f"note-{i:07d}"

    def draft(self, i: int) -> EdgeDraft:
        src, dst = self.node(int(self.src[i])), self.node(int(self.dst[i]))
        return EdgeDraft(src, dst, TYPES[self.type[i]], f"{TYPES[self.type[i]]}@1", float(self.weight[i]),
                         float(self.confidence[i]), int(self.valid_at[i]),
                         Evidence(f"{src} mentions {dst} here", f"notes/{src}.md", int(i % 997)))

    def edge_id(self, i: int) -> str:
        return edge_id(self.node(int(self.src[i])), TYPES[self.type[i]], self.node(int(self.dst[i])),
                       int(self.valid_at[i]))


# -- ingest --------------------------------------------------------------------------------------

def retirement_plan(corpus: Corpus) -> list[tuple[int, np.ndarray]]:
    """The retired edges grouped into 20 instants (so invalidate_edges runs in a few large transactions).

    Each retired edge's invalid_at becomes its group's instant, in the corpus too.
    """
    retired = np.flatnonzero(corpus.retired)
    buckets = np.linspace(0, 2 * YEAR + 1, 21).astype(np.int64)
    drawn = corpus.invalid_at[retired] - T0
    plan = []
    for lo, hi in zip(buckets[:-1], buckets[1:]):
        chosen = retired[(drawn >= lo) & (drawn < hi)]
        corpus.invalid_at[chosen] = T0 + hi
        plan.append((int(T0 + hi), chosen))
    corpus.invalid_at[~corpus.retired] = np.iinfo(np.int64).max
    return plan


# Edges per window of the ingest's CPU figures: whether a write costs more as the brain grows, and from where.
WINDOW = 100_000
WINDOWS: list[float] = []  # CPU seconds per edge of the last ingest, window by window
WINDOWS_MAIN: list[float] = []  # the same, the writing thread's alone (the rest: background merges, in the worker)
# A fresh brain's first edges, written twice by the same process: as its ingest begins and after it (into another
# fresh brain). The work is the same, so their CPU ratio is what the process's age alone costs (its heap and caches).
# The first batch of each is left out: it imports modules and creates the index.
AGE_EDGES = 50_000
AGE: dict[str, float] = {}  # "before", "after": the writing thread's CPU seconds per edge of those edges
# ("ref before", "ref after": a loop that stays in the processor's caches, timed at both points: when it slowed
# too, the machine did, under other processes' load, and the ratio says nothing of the process's age. It misses
# load that contends for the shared cache and memory rather than the core, so "young": the same edges written at
# the same time by a process just started, which meets the same load: "after" over "young" is the age alone.)


def reference_loop() -> float:
    """CPU seconds of a fixed pure-Python loop that touches almost no memory (a yardstick of the machine's speed)."""
    clock, x = time.thread_time(), 0
    for i in range(1_000_000):
        x += i & 7
    return time.thread_time() - clock
CPU: dict[str, float] = {}  # this process's CPU seconds of the last ingest ("ingest", "retire") and raw loop
WROTE: dict[str, int] = {}  # bytes this process handed to write calls (LMDB's dirty pages) in the same spans
FAULTS: dict[str, int] = {}  # this process's minor page faults in the same spans (a map page touched again)


def written() -> int:
    """Bytes this process has passed to write system calls so far (Linux ``/proc/self/io`` wchar; 0 elsewhere)."""
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))
    except (OSError, StopIteration):
        return 0


def ingest(engine: Engine, corpus: Corpus) -> tuple[float, float]:
    """Edges/s through write_edges, and the seconds spent retiring 10% through invalidate_edges.

    Only the calls are timed: the benchmark's own making of each batch's drafts (and of the retired ids)
    happens outside, as the raw loop's making of its documents does. Their CPU seconds go to :data:`CPU`, with the
    merge worker's (as each batch saw it) and the bytes it wrote."""
    workers = MergeWorkers(engine.store)
    spent = cpu = 0.0
    wrote = 0
    windows = [0.0] * -(-corpus.size // WINDOW)
    mains = [0.0] * len(windows)
    first = 0.0
    AGE["ref before"] = reference_loop()
    for lo in range(0, corpus.size, BATCH):
        drafts = [corpus.draft(i) for i in range(lo, min(corpus.size, lo + BATCH))]
        workers.since_last()
        start, clock, before = time.perf_counter(), time.process_time(), written()
        own = time.thread_time()
        engine.graph.write_edges(BRAIN, drafts, created_at=T0 + YEAR)
        own = time.thread_time() - own
        spent += time.perf_counter() - start
        used = time.process_time() - clock
        wrote += written() - before
        worker_cpu, worker_wrote = workers.since_last()
        used += worker_cpu
        wrote += worker_wrote
        cpu += used
        windows[lo // WINDOW] += used
        mains[lo // WINDOW] += own
        if BATCH <= lo < AGE_EDGES:
            first += own
    rate = corpus.size / spent
    CPU["ingest"], WROTE["ingest"] = cpu, wrote
    WINDOWS[:] = [used / min(WINDOW, corpus.size - k * WINDOW) for k, used in enumerate(windows)]
    WINDOWS_MAIN[:] = [used / min(WINDOW, corpus.size - k * WINDOW) for k, used in enumerate(mains)]
    AGE["before"] = first / max(1, min(AGE_EDGES, corpus.size) - BATCH)
    retiring = cpu = 0.0
    wrote = faults = 0
    for at, chosen in retirement_plan(corpus):
        for part in range(0, chosen.size, BATCH):
            ids = [corpus.edge_id(int(i)) for i in chosen[part:part + BATCH]]
            workers.since_last()
            start, clock, before = time.perf_counter(), time.process_time(), written()
            faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            engine.graph.invalidate_edges(BRAIN, edge_ids=ids, at=at)
            retiring += time.perf_counter() - start
            cpu += time.process_time() - clock
            wrote += written() - before
            worker_cpu, worker_wrote = workers.since_last()
            cpu += worker_cpu
            wrote += worker_wrote
            faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faulted
    CPU["retire"], WROTE["retire"], FAULTS["retire"] = cpu, wrote, faults
    return rate, retiring


def fresh_brain_after(corpus: Corpus, path: Path) -> float:
    """The writing thread's CPU seconds per edge of the corpus's first :data:`AGE_EDGES` edges (its first batch left
    out) written into a fresh brain at ``path`` by this process (after its ingest): as :func:`ingest` began, but in
    an older process; or, in the child :func:`fresh_brain_beside` starts, by a process just started."""
    used, n = 0.0, min(AGE_EDGES, corpus.size)
    with Engine(path, config=EngineConfig()) as engine:
        for lo in range(0, n, BATCH):
            drafts = [corpus.draft(i) for i in range(lo, min(n, lo + BATCH))]
            own = time.thread_time()
            engine.graph.write_edges(BRAIN, drafts, created_at=T0 + YEAR)
            if lo >= BATCH:
                used += time.thread_time() - own
    shutil.rmtree(path, ignore_errors=True)
    return used / max(1, n - BATCH)


def fresh_brain_beside(corpus: Corpus, tmp: Path) -> tuple[float, float]:
    """:func:`fresh_brain_after` in this process and, at the same time, in a child process just started (the same
    corpus, its own fresh brain): ``(this process's, the child's)`` CPU seconds per edge under the same load."""
    child = subprocess.Popen([sys.executable, __file__, "--fresh-brain", str(corpus.size), "--ingest-tmp", str(tmp)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    if child.stdout.readline() != "ready\n":  # its imports and corpus made: both write from now on
        raise RuntimeError(f"the young process writing a fresh brain exited with {child.wait()}")
    child.stdin.write("go\n")
    child.stdin.flush()
    aged = fresh_brain_after(corpus, tmp / f"fresh-{corpus.size}")
    young = float(child.communicate()[0])
    if child.returncode:
        raise RuntimeError(f"the young process writing a fresh brain exited with {child.returncode}")
    return aged, young


def young_fresh_brain(size: int, tmp: Path) -> None:
    """The child of :func:`fresh_brain_beside`: says it is ready, waits for the word, writes and prints its figure."""
    corpus = Corpus(size)
    print("ready", flush=True)
    sys.stdin.readline()
    print(fresh_brain_after(corpus, tmp / f"young-{size}"), flush=True)


def ingest_at(size: int, tmp: Path) -> dict[str, float]:
    """Ingest and retire ``size`` edges in a fresh data directory under ``tmp``, after a raw lmdb put loop of the
    same documents; prints both and returns the figures the scaling line compares."""
    corpus = Corpus(size)
    # The floor at this size: the same documents put into one B-tree keyed by their (random) edge ids.
    raw = raw_lmdb_rate(tmp / f"raw-{size}", corpus, size)
    shutil.rmtree(tmp / f"raw-{size}", ignore_errors=True)
    with Engine(tmp / f"data-{size}", config=EngineConfig()) as engine:
        rate, retire_seconds = ingest(engine, corpus)
    AGE["after"], AGE["young"] = fresh_brain_beside(corpus, tmp)
    AGE["ref after"] = reference_loop()
    retired = int(corpus.retired.sum())
    print(f"{size:>9,} edges: write_edges {rate:,.0f} edges/s ({CPU['ingest'] / size * 1e6:.1f} us CPU, "
          f"{WROTE['ingest'] / size / 1024:.1f} KiB written per edge); raw lmdb put loop of the same "
          f"{size:,} documents ({BATCH:,}/txn) {raw:,.0f} docs/s ({CPU['raw'] / size * 1e6:.1f} us CPU, "
          f"{WROTE['raw'] / size / 1024:.1f} KiB written per doc); ratio {rate / raw:.3f} (target >= 0.50); "
          f"retiring {retired:,} edges {retire_seconds:.1f} s = {retire_seconds / retired * 1e6:.1f} us/edge "
          f"({CPU['retire'] / retired * 1e6:.1f} us CPU, {WROTE['retire'] / retired / 1024:.1f} KiB written, "
          f"{FAULTS['retire'] / retired:.2f} minor faults per edge); load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'':>9}  write_edges CPU per edge by {WINDOW:,}-edge window (us): "
          + " ".join(f"{used * 1e6:.1f}" for used in WINDOWS), flush=True)
    print(f"{'':>9}  of which the writing thread's (the rest: background merges, mostly in the merge worker): "
          + " ".join(f"{used * 1e6:.1f}" for used in WINDOWS_MAIN), flush=True)
    print(f"{'':>9}  process age: a fresh brain's edges {BATCH:,}-{min(AGE_EDGES, size):,} cost {AGE['before'] * 1e6:.1f} us "
          f"CPU per edge as the ingest began and {AGE['after'] * 1e6:.1f} us written again after it (x"
          f"{AGE['after'] / AGE['before']:.2f}, same work, same brain size; a loop that stays in the caches x"
          f"{AGE['ref after'] / AGE['ref before']:.2f} meanwhile: the machine's own drift); written at the same time "
          f"by a process just started {AGE['young'] * 1e6:.1f} us (aged / young x{AGE['after'] / AGE['young']:.2f}: "
          f"the age alone, under the same load)", flush=True)
    shutil.rmtree(tmp / f"data-{size}", ignore_errors=True)
    return {"rate": rate, "raw": raw, "retire": retire_seconds / retired, "retire_cpu": CPU["retire"] / retired,
            "age": AGE["after"] / AGE["before"], "drift": AGE["ref after"] / AGE["ref before"],
            "age_same_load": AGE["after"] / AGE["young"]}


RESULT = "ingest-figures "  # the line a child of ingest_scaling ends with: this prefix, then its figures as JSON


def ingest_scaling(sizes: list[int], same_process: bool = False) -> None:
    """Ingest and retirement at several brain sizes, each in a fresh data directory, against a raw lmdb put loop
    measured in the same run: the rate should not fall, and a retired edge should cost the same, as the brain grows.

    Each size runs in a fresh process of its own, so the large brain's figures do not carry the heap, caches and
    collector state the smaller runs left behind (in one process, the 1M run followed the 200k brain and two raw
    loops, and its rate read 0.63-0.74 of the 200k rate while separate processes measured CPU per edge flat);
    ``same_process`` keeps the older method for comparison."""
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            if same_process:
                figures[size] = ingest_at(size, Path(tmp))
                continue
            child = subprocess.run([sys.executable, __file__, "--ingest-size", str(size), "--ingest-tmp", tmp],
                                   stdout=subprocess.PIPE, text=True, check=True)
            lines = child.stdout.splitlines()
            sys.stdout.write("".join(line + "\n" for line in lines if not line.startswith(RESULT)))
            figures[size] = json.loads(next(line for line in lines if line.startswith(RESULT))[len(RESULT):])
    small, large = figures[min(sizes)], figures[max(sizes)]
    print(f"rate at {max(sizes):,} / rate at {min(sizes):,} ({'one process' if same_process else 'a fresh process each'}): "
          f"write_edges {large['rate'] / small['rate']:.2f} (target 0.8-1.2), the raw lmdb loop "
          f"{large['raw'] / small['raw']:.2f} (its random-key B-tree alone); time per retired edge at {max(sizes):,} / "
          f"at {min(sizes):,}: {large['retire'] / small['retire']:.2f} (target 0.8-1.2; CPU "
          f"{large['retire_cpu'] / small['retire_cpu']:.2f})")
    print(f"process age (a fresh brain's first edges after the ingest / as it began, same process): "
          + ", ".join(f"{size:,}: x{figures[size]['age']:.2f} (machine drift x{figures[size]['drift']:.2f}; / a "
                      f"process just started, same minutes x{figures[size]['age_same_load']:.2f})" for size in sizes))


def raw_lmdb_rate(path: Path, corpus: Corpus, limit: int) -> float:
    """A raw lmdb put loop over the same edge documents (JSON-encoded, keyed by edge id), same batches, synced
    commits; each batch's documents are made before its transaction is timed."""
    env = lmdb.open(str(path), map_size=1 << 34, sync=True)
    n = min(limit, corpus.size)
    spent = cpu = 0.0
    wrote = 0
    for lo in range(0, n, BATCH):
        docs = []
        for i in range(lo, min(n, lo + BATCH)):
            d = corpus.draft(i)
            docs.append((corpus.edge_id(i).encode(), {
                "edge_id": corpus.edge_id(i), "src": d.src, "dst": d.dst, "type": d.type, "weight": d.weight,
                "confidence": d.confidence, "valid_at": d.valid_at, "created_at": T0 + YEAR, "detector": d.detector,
                "trust": "detected", "schema_version": 1, "evidence": d.evidence.to_json(),
                "src_file": d.evidence.source}))
        start, clock, before = time.perf_counter(), time.process_time(), written()
        with env.begin(write=True) as txn:
            for key, doc in docs:
                txn.put(key, orjson.dumps(doc))
        spent += time.perf_counter() - start
        cpu += time.process_time() - clock
        wrote += written() - before
    env.close()
    CPU["raw"], WROTE["raw"] = cpu, wrote
    return n / spent


# -- queries -------------------------------------------------------------------------------------

def ego_runner(engine: Engine, corpus: Corpus):
    params = {"hops": "2", "direction": "both", "as_of": str(corpus.as_of), "limit": "100", "include_evidence": "true"}
    return lambda node: engine.graph.ego(BRAIN, {**params, "node": node})


HOP_DIRECTIONS = ("out", "both")


def frontier_hop_times(engine: Engine, corpus: Corpus, repeats: int, rounds: int = 5) -> dict[str, Any]:
    """One hop from 4096 random nodes: rows, the bitemporal mask, and the next frontier (its far ends).

    Every frontier is hopped once each way untimed first (as the first ego is: the view's mapped pages are met
    once per process). Then ``rounds`` timed rounds, each the ``repeats`` frontiers one way then the other (which
    way goes first swaps every round), and each way's p50 taken over all its timed hops. The line used to be one
    such round, about 60 ms in all, so whatever else the machine did in those milliseconds decided both figures:
    in one quiet run of six both doubled (out 0.35 -> 0.81 ms, both 0.85 -> 1.66 ms, CPU alike, no more page
    faults) while the same process's ego and sqlite figures seconds later were as in the other runs. Each round's
    p50 is printed too, so such a spell shows as a round apart. A way's hops stay consecutive within a round:
    a hop reads its own table (out-runs, or both-ways runs: 4 and 8 MB at a million edges), and how much of it
    the last-level cache still holds from the hop before is most of what a hop costs (alternating the two ways
    hop by hop cost both ways 4-21% more in 5 of 6 loaded pairs)."""
    rng = np.random.default_rng(5)
    out: dict[str, Any] = {}
    with engine.store.reader(edges_index(BRAIN)) as reader:
        view = engine.graph.views.graph(reader)
        dictionary = reader.field_dictionary("src")
        frontiers = [np.sort(dictionary.lookup(corpus.node(int(i))
                                               for i in rng.choice(corpus.n_nodes, 4096, replace=False)))
                     for _ in range(repeats)]
        filters = Filters(as_of=corpus.as_of)

        def hop(frontier: np.ndarray, direction: str) -> tuple[int, int]:
            found = expand(view, frontier, hops=1, direction=direction, filters=filters, counters=new_counters())
            return len(found[0]), unique_ids(found[0].others).size

        for frontier in frontiers:
            for direction in HOP_DIRECTIONS:
                hop(frontier, direction)
        times: dict[str, list[list[float]]] = {d: [] for d in HOP_DIRECTIONS}
        cpu: dict[str, list[float]] = {d: [] for d in HOP_DIRECTIONS}
        kept: dict[str, list[int]] = {d: [] for d in HOP_DIRECTIONS}
        reached: dict[str, list[int]] = {d: [] for d in HOP_DIRECTIONS}
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for round_no in range(rounds):
            for direction in HOP_DIRECTIONS[::1 if round_no % 2 == 0 else -1]:
                times[direction].append([])
                for frontier in frontiers:
                    t, clock = time.perf_counter(), time.process_time()
                    edges, nxt = hop(frontier, direction)
                    times[direction][-1].append(time.perf_counter() - t)
                    cpu[direction].append(time.process_time() - clock)
                    kept[direction].append(edges)
                    reached[direction].append(nxt)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        for direction in HOP_DIRECTIONS:
            out[direction] = p50([t for one in times[direction] for t in one])
            out[direction + "_rounds"] = [p50(one) for one in times[direction]]
            out[direction + "_cpu"] = p50(cpu[direction])
            # pages the C heap handed back and the hop touched again (a heap that trims between calls pays these)
            out[direction + "_faults"] = faults / (rounds * len(frontiers) * len(HOP_DIRECTIONS))
            out[direction + "_edges"] = float(np.mean(kept[direction]))
            out[direction + "_next"] = float(np.mean(reached[direction]))
    return out


def build_sqlite(corpus: Corpus) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("""CREATE TABLE edges (edge_id TEXT PRIMARY KEY, src TEXT, dst TEXT, type TEXT, weight REAL,
                  confidence REAL, valid_at INTEGER, invalid_at INTEGER, created_at INTEGER, expired_at INTEGER,
                  detector TEXT, trust TEXT, evidence TEXT)""")
    rows = []
    for i in range(corpus.size):
        d = corpus.draft(i)
        retired = bool(corpus.retired[i])
        rows.append((corpus.edge_id(i), d.src, d.dst, d.type, d.weight, d.confidence, d.valid_at,
                     int(corpus.invalid_at[i]) if retired else None, T0 + YEAR, T0 + YEAR if retired else None,
                     d.detector, "detected", orjson.dumps(d.evidence.to_json()).decode()))
    db.executemany("INSERT INTO edges VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.execute("CREATE INDEX by_src ON edges (src, dst, valid_at, invalid_at, type, weight)")
    db.execute("CREATE INDEX by_dst ON edges (dst, src, valid_at, invalid_at, type, weight)")
    db.execute("ANALYZE")
    return db


SQL_HOP = {
    "out": "SELECT rowid, dst, weight, valid_at FROM edges WHERE src IN ({marks}) "
           "AND valid_at <= ? AND (invalid_at IS NULL OR invalid_at > ?)",
    "in": "SELECT rowid, src, weight, valid_at FROM edges WHERE dst IN ({marks}) "
          "AND valid_at <= ? AND (invalid_at IS NULL OR invalid_at > ?)",
}
SQL_FETCH = ("SELECT edge_id, src, dst, type, weight, valid_at, invalid_at, trust, evidence, detector, confidence, "
             "created_at, expired_at FROM edges WHERE rowid = ?")


def sqlite_ego(db: sqlite3.Connection, seed: str, as_of: int) -> list[dict]:
    """The same 2-hop as ego: both directions, the bitemporal filter, each edge once, best 100 with evidence."""
    seen: set[int] = set()
    frontier, visited = [seed], {seed}
    chosen = []
    for hop in (1, 2):
        found = []
        marks = ",".join("?" * len(frontier))
        for direction in ("out", "in"):
            for rowid, other, weight, valid_at in db.execute(SQL_HOP[direction].format(marks=marks),
                                                             (*frontier, as_of, as_of)):
                if rowid not in seen:
                    seen.add(rowid)
                    found.append((-weight, -valid_at, rowid, other, direction))
        found.sort()
        chosen.extend((hop, f) for f in found)
        frontier = sorted({f[3] for f in found} - visited)
        visited.update(frontier)
        if not frontier:
            break
    edges = []
    for hop, (_, _, rowid, _, direction) in chosen[:100]:
        row = db.execute(SQL_FETCH, (rowid,)).fetchone()
        edges.append({"edge_id": row[0], "src": row[1], "dst": row[2], "type": row[3], "weight": row[4], "hop": hop,
                      "direction": direction, "valid_at": row[5], "invalid_at": row[6], "trust": row[7],
                      "evidence": orjson.loads(row[8]), "detector": row[9], "confidence": row[10],
                      "created_at": row[11], "expired_at": row[12]})
    return edges


# The same question as one statement; sqlite's planner materialises the CTEs and it is far slower, so it is
# reported for reference and the ratio is taken against the faster form above.
SQL_2HOP = """
WITH h1 AS (
    SELECT rowid AS r, dst AS other FROM edges
     WHERE src = :n AND valid_at <= :t AND (invalid_at IS NULL OR invalid_at > :t)
    UNION
    SELECT rowid, src FROM edges
     WHERE dst = :n AND valid_at <= :t AND (invalid_at IS NULL OR invalid_at > :t)
), frontier AS (
    SELECT DISTINCT other AS node FROM h1 WHERE other <> :n
), h2 AS (
    SELECT e.rowid AS r FROM frontier f JOIN edges e ON e.src = f.node
     WHERE e.valid_at <= :t AND (e.invalid_at IS NULL OR e.invalid_at > :t)
    UNION
    SELECT e.rowid FROM frontier f JOIN edges e ON e.dst = f.node
     WHERE e.valid_at <= :t AND (e.invalid_at IS NULL OR e.invalid_at > :t)
), found AS (
    SELECT r, 1 AS hop FROM h1
    UNION ALL
    SELECT r, 2 FROM h2 WHERE r NOT IN (SELECT r FROM h1)
)
SELECT e.edge_id, e.evidence FROM found f JOIN edges e ON e.rowid = f.r
 ORDER BY f.hop, e.weight DESC, e.valid_at DESC
 LIMIT 100
"""


# The strict baseline: one statement, index-only (both covering indexes), the 2-hop pairs as (src, dst), no ranking,
# no limit, no hydration: the least work a relational engine does to answer "which edges are within two hops".
_LIVE = "valid_at <= :t AND (invalid_at IS NULL OR invalid_at > :t)"
SQL_2HOP_PAIRS = f"""
WITH f(node) AS MATERIALIZED (
    SELECT dst FROM edges WHERE src = :n AND {_LIVE}
    UNION
    SELECT src FROM edges WHERE dst = :n AND {_LIVE}
)
SELECT src, dst FROM edges WHERE src = :n AND {_LIVE}
UNION
SELECT src, dst FROM edges WHERE dst = :n AND {_LIVE}
UNION
SELECT src, dst FROM edges WHERE src IN (SELECT node FROM f) AND {_LIVE}
UNION
SELECT src, dst FROM edges WHERE dst IN (SELECT node FROM f) AND {_LIVE}
"""


def sqlite_pairs(db: sqlite3.Connection, seed: str, as_of: int) -> list[tuple[str, str]]:
    return db.execute(SQL_2HOP_PAIRS, {"n": seed, "t": as_of}).fetchall()


def strict_comparison(engine: Engine, db: sqlite3.Connection, corpus: Corpus, seeds: list[int]) -> None:
    """xerj's ego at the default limit without evidence against the one-statement sqlite 2-hop, alternated."""
    plan = " / ".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + SQL_2HOP_PAIRS,
                                                      {"n": corpus.node(seeds[0]), "t": corpus.as_of}))
    print(f"  sqlite one-statement plan: {plan}")
    params = {"hops": "2", "direction": "both", "as_of": str(corpus.as_of), "include_evidence": "false"}
    contenders = {"xerj": lambda node: engine.graph.ego(BRAIN, {**params, "node": node}),
                  "sqlite": lambda node: sqlite_pairs(db, node, corpus.as_of),
                  "sqlite two-step": lambda node: sqlite_ego(db, node, corpus.as_of)}
    pairs = statistics.mean(len(sqlite_pairs(db, corpus.node(s), corpus.as_of)) for s in seeds[:50])
    after: dict[tuple[str, str], list[float]] = {}
    cpu: dict[str, float] = {}
    times = interleaved(contenders, corpus, seeds, after=after, cpu=cpu)
    figures = {name: p50(t[1]) for name, t in times.items()}
    calls = 2 * len(seeds)
    print(f"2-hop ego (both, as_of, default limit 100, no evidence) vs sqlite's one statement returning every "
          f"(src, dst) within two hops (mean {pairs:.0f} pairs), warm, alternated: xerj p50 "
          f"{figures['xerj'] * 1e3:.3f} ms, sqlite p50 {figures['sqlite'] * 1e3:.3f} ms; "
          f"xerj/sqlite {figures['xerj'] / figures['sqlite']:.2f} (target <= 1.0); against the hydrated two-step "
          f"(p50 {figures['sqlite two-step'] * 1e3:.3f} ms) {figures['xerj'] / figures['sqlite two-step']:.2f} "
          f"(target <= 0.5); CPU per call xerj {cpu['xerj'] / calls * 1e3:.3f} ms, sqlite "
          f"{cpu['sqlite'] / calls * 1e3:.3f} ms, ratio {cpu['xerj'] / cpu['sqlite']:.2f}; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  by what ran just before on the same seed (each order equally often): xerj "
          f"{by_predecessor(after, 'xerj')}; sqlite {by_predecessor(after, 'sqlite')}")
    # The same two alternated as a pair, with no third query between them. CPU seconds per call are taken apart
    # for each side.
    cpu = {}
    times = interleaved({"xerj": contenders["xerj"], "sqlite": contenders["sqlite"]}, corpus, seeds, cpu=cpu)
    figures = {name: p50(t[1]) for name, t in times.items()}
    print(f"  the pair alone, alternated: xerj p50 {figures['xerj'] * 1e3:.3f} ms, sqlite p50 "
          f"{figures['sqlite'] * 1e3:.3f} ms; xerj/sqlite {figures['xerj'] / figures['sqlite']:.2f}; CPU per call "
          f"xerj {cpu['xerj'] / calls * 1e3:.3f} ms, sqlite {cpu['sqlite'] / calls * 1e3:.3f} ms, "
          f"ratio {cpu['xerj'] / cpu['sqlite']:.2f}; load average {os.getloadavg()[0]:.1f}")


def sqlite_single_statement(db: sqlite3.Connection, corpus: Corpus, seeds: list[int]) -> float:
    times = []
    for s in seeds:
        t = time.perf_counter()
        rows = db.execute(SQL_2HOP, {"n": corpus.node(s), "t": corpus.as_of}).fetchall()
        [orjson.loads(r[1]) for r in rows]
        times.append(time.perf_counter() - t)
    return p50(times)


def interleaved(contenders: dict, corpus: Corpus, seeds: list[int], passes: int = 2,
                after: dict[tuple[str, str], list[float]] | None = None,
                cpu: dict[str, float] | None = None) -> dict[str, list[list[float]]]:
    """Time every contender on every seed, alternating query by query, so load on the machine and cache pollution
    hit all alike: seed by seed the order walks through every permutation of the contenders, so each runs first,
    and right after each of the others, equally often. (Rotating where one fixed order starts would put each
    contender after the same neighbour every time: with three, xerj always ran right after the hydrated two-step,
    which evicts its cache lines, and the one statement never did.)

    ``after``, when given, collects the last pass's times by (contender, the one run just before it on the same
    seed, "first" for none); ``cpu`` sums each contender's CPU seconds over every pass, read outside the span
    its wall time is taken over."""
    times: dict[str, list[list[float]]] = {name: [] for name in contenders}
    orders = list(itertools.permutations(contenders))
    for pass_no in range(passes):
        for name in contenders:
            times[name].append([])
        for i, s in enumerate(seeds):
            node = corpus.node(s)
            before = "first"
            for name in orders[i % len(orders)]:
                clock = time.process_time()
                t = time.perf_counter()
                contenders[name](node)
                elapsed = time.perf_counter() - t
                if cpu is not None:
                    cpu[name] = cpu.get(name, 0.0) + time.process_time() - clock
                times[name][-1].append(elapsed)
                if after is not None and pass_no == passes - 1:
                    after.setdefault((name, before), []).append(elapsed)
                before = name
    return times


def by_predecessor(after: dict[tuple[str, str], list[float]], name: str) -> str:
    """``name``'s p50 after each contender (and when first), as printed beside a rotation."""
    return ", ".join(f"after {before} {p50(t) * 1e3:.3f} ms" for (who, before), t in sorted(after.items())
                     if who == name)


def build_networkx(corpus: Corpus):
    import networkx as nx

    graph = nx.MultiDiGraph()
    for i in range(corpus.size):
        d = corpus.draft(i)
        graph.add_edge(d.src, d.dst, key=corpus.edge_id(i), type=d.type, weight=d.weight, valid_at=d.valid_at,
                       invalid_at=int(corpus.invalid_at[i]) if corpus.retired[i] else None,
                       evidence=d.evidence.to_json(), detector=d.detector, confidence=d.confidence,
                       created_at=T0 + YEAR, trust="detected")
    return graph


def networkx_ego(graph, seed: str, as_of: int) -> list[dict]:
    """The same 2-hop over networkx's adjacency dicts."""

    def visible(data: dict) -> bool:
        return data["valid_at"] <= as_of and (data["invalid_at"] is None or data["invalid_at"] > as_of)

    found, seen = [], set()
    frontier, visited = {seed}, {seed}
    for hop in (1, 2):
        hop_edges = []
        for node in frontier:
            for u, v, key, data in graph.out_edges(node, keys=True, data=True):
                if key not in seen and visible(data):
                    seen.add(key)
                    hop_edges.append((key, u, v, data, "out"))
            for u, v, key, data in graph.in_edges(node, keys=True, data=True):
                if key not in seen and visible(data):
                    seen.add(key)
                    hop_edges.append((key, u, v, data, "in"))
        hop_edges.sort(key=lambda e: (-e[3]["weight"], -e[3]["valid_at"]))
        nxt = set()
        for key, u, v, data, direction in hop_edges:
            found.append((key, u, v, data, direction, hop))
            other = v if direction == "out" else u
            if other not in visited:
                nxt.add(other)
        visited |= nxt
        frontier = nxt
    return [{"edge_id": key, "src": u, "dst": v, "type": data["type"], "weight": data["weight"], "hop": hop,
             "direction": direction, "valid_at": data["valid_at"], "invalid_at": data["invalid_at"],
             "trust": data["trust"], "evidence": data["evidence"], "detector": data["detector"],
             "confidence": data["confidence"], "created_at": data["created_at"], "expired_at": None}
            for key, u, v, data, direction, hop in found[:100]]


RSS_CHILD = """
import resource, sys, time
sys.path.insert(0, {repo!r})
import numpy, orjson, lmdb
from xerj_core.engine import Engine
from xerj_core.graph.brain import edges_index

def rss():
    found = {{}}
    for line in open('/proc/self/status'):
        if line.startswith(('VmRSS:', 'RssAnon:', 'RssFile:')):
            key, value = line.split(':')
            found[key] = int(value.split()[0]) / 1024
    return found

def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

base = rss()['VmRSS']
with Engine({data!r}) as engine:
    start, (own, children) = time.perf_counter(), cpu()
    engine.graph.ego({brain!r}, {{'node': {seed!r}, 'hops': 2, 'as_of': {as_of}}})
    wall, (own_after, children_after) = time.perf_counter() - start, cpu()
    engine.graph.reachable({brain!r}, [{seed!r}], hops=2, as_of={as_of})
    now = rss()
    print(now['RssAnon'], now['RssFile'], base, wall, own_after - own, children_after - children)
"""


def serving_rss(data: Path, corpus: Corpus) -> tuple[float, ...]:
    """A fresh serving process's private and file-backed RSS after ego + reachable, its RSS before opening the
    data, and its first ego's wall time, own CPU and its children's CPU (a child builds a large view's files)."""
    repo = str(Path(__file__).resolve().parents[2])
    code = RSS_CHILD.format(repo=repo, data=str(data), brain=BRAIN, seed=corpus.node(1), as_of=corpus.as_of)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    return tuple(float(x) for x in out)


def review_history_figure(edges: int, queries: int) -> None:
    """Ego 2-hop p50 on two brains of the same corpus in one data directory, one with 10% of its edges reviewed
    (each approval an archived version and a claim document), alternated on the same seeds."""
    corpus = Corpus(edges)
    plan = retirement_plan(corpus)
    reviewed = np.flatnonzero(np.random.default_rng(5).random(corpus.size) < 0.10)
    seeds = [int(s) for s in np.random.default_rng(3).integers(0, corpus.n_nodes, queries)]
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "data", config=EngineConfig()) as engine:
        for brain in (BRAIN, "reviewed"):
            for lo in range(0, corpus.size, BATCH):
                engine.graph.write_edges(brain, [corpus.draft(i) for i in range(lo, min(corpus.size, lo + BATCH))],
                                         created_at=T0 + YEAR)
            for at, chosen in plan:
                for part in range(0, chosen.size, BATCH):
                    engine.graph.invalidate_edges(brain, edge_ids=[corpus.edge_id(int(i))
                                                                   for i in chosen[part:part + BATCH]], at=at)
        start = time.perf_counter()
        for part in range(0, reviewed.size, MAX_DECISIONS):
            chosen = reviewed[part:part + MAX_DECISIONS]
            engine.graph.review("reviewed", {"approve": [corpus.edge_id(int(i)) for i in chosen]}, by="bench")
        review_seconds = time.perf_counter() - start
        params = {"hops": "2", "direction": "both", "as_of": str(corpus.as_of), "limit": "100",
                  "include_evidence": "true"}
        contenders = {name: (lambda node, b=name: engine.graph.ego(b, {**params, "node": node}))
                      for name in (BRAIN, "reviewed")}
        times = interleaved(contenders, corpus, seeds)
        plain, history = p50(times[BRAIN][1]), p50(times["reviewed"][1])
        print(f"review history: {reviewed.size:,} of {corpus.size:,} edges approved ({review_seconds:.1f} s, one "
              f"archived version each); 2-hop ego (both, as_of, limit 100, with evidence), warm, alternated: "
              f"without history p50 {plain * 1e3:.3f} ms, with p50 {history * 1e3:.3f} ms; ratio "
              f"{history / plain:.3f} (target: <= 1.10)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--raw-sample", type=int, default=None,
                        help="edges in the raw lmdb put loop (default: as many as xerj ingests)")
    parser.add_argument("--skip-networkx", action="store_true")
    parser.add_argument("--review-history-edges", type=int, default=200_000,
                        help="edges per brain in the review-history comparison (0 skips it)")
    parser.add_argument("--only-review-history", action="store_true",
                        help="run the review-history comparison alone")
    parser.add_argument("--data", type=Path, default=None,
                        help="keep the data directory here; when it already holds the brain, ingest is skipped")
    parser.add_argument("--ingest-only", default=None, metavar="SIZES",
                        help="comma-separated brain sizes (e.g. 200000,1000000): ingest and retire at each, no queries")
    parser.add_argument("--same-process", action="store_true",
                        help="with --ingest-only: every size in this process, one after another (the older method)")
    parser.add_argument("--ingest-size", type=int, default=None, help=argparse.SUPPRESS)  # one size of --ingest-only
    parser.add_argument("--ingest-tmp", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fresh-brain", type=int, default=None, help=argparse.SUPPRESS)  # see fresh_brain_beside
    args = parser.parse_args()
    if args.fresh_brain:
        young_fresh_brain(args.fresh_brain, args.ingest_tmp)
        return
    if args.ingest_size:
        print(RESULT + json.dumps(ingest_at(args.ingest_size, args.ingest_tmp)), flush=True)
        return
    if args.ingest_only:
        ingest_scaling([int(x) for x in args.ingest_only.split(",")], args.same_process)
        return
    if args.only_review_history:
        review_history_figure(args.review_history_edges, args.queries)
        return

    corpus = Corpus(args.edges)
    rng = np.random.default_rng(3)
    seeds = [int(s) for s in rng.integers(0, corpus.n_nodes, args.queries)]
    print(f"graph: {corpus.size:,} edges over {corpus.n_nodes:,} nodes, out-degree 10, "
          f"{int(corpus.retired.sum()):,} retired; as_of {corpus.as_of}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or Path(tmp) / "data"
        with Engine(data, config=EngineConfig()) as engine:
            if engine.store.exists(edges_index(BRAIN)):
                retirement_plan(corpus)
                print(f"ingest: skipped, reusing {data}")
            else:
                raw = raw_lmdb_rate(Path(tmp) / "raw", corpus, args.raw_sample or corpus.size)
                rate, retire_seconds = ingest(engine, corpus)
                print(f"ingest: write_edges {rate:,.0f} edges/s; raw lmdb put loop (same docs, {BATCH:,}/txn) "
                      f"{raw:,.0f} docs/s; ratio {rate / raw:.3f} (target: >= 150,000 edges/s)")
                print(f"retire 10% through invalidate_edges: {retire_seconds:.1f} s")
        gc.collect()

        # The first serving process finds no view files and has them built (by a child process, see
        # xerj_core.graph.viewchild); a second one, like any later worker, maps the files published.
        for case in ("that builds the views", "that finds the views built"):
            anon, mapped, base, wall, own, children = serving_rss(data, corpus)
            print(f"RSS of a serving process holding {corpus.size:,} edges (after ego + reachable), {case}: "
                  f"{anon + mapped:.0f} MB = {anon:.0f} MB private (RssAnon) + {mapped:.0f} MB of the data file "
                  f"mapped from the page cache (RssFile); interpreter + imports alone {base:.0f} MB (target: "
                  f"<= 200 MB, private <= 100 MB); first ego {wall:.2f} s, CPU {own:.2f} s own + {children:.2f} s "
                  f"in child processes; load average {os.getloadavg()[0]:.1f}")

        with Engine(data, config=EngineConfig()) as engine:
            ego = ego_runner(engine, corpus)
            first = ego(corpus.node(seeds[0]))  # builds the per-process views, as a server's first request would
            cold = {k: v for k, v in first["not_shown"].items() if k != "dangling_ids"}
            print(f"  not_shown of one ego: {json.dumps(cold)}")

            hop = frontier_hop_times(engine, corpus, repeats=30)
            print(f"one hop over a 4096-id frontier (rows, bitemporal mask, next frontier): out p50 "
                  f"{hop['out'] * 1e3:.3f} ms ({hop['out_edges']:.0f} edges kept, {hop['out_next']:.0f} next ids), "
                  f"both p50 {hop['both'] * 1e3:.3f} ms ({hop['both_edges']:.0f} edges, {hop['both_next']:.0f} next "
                  f"ids) (target: <= 1 ms); CPU p50 out {hop['out_cpu'] * 1e3:.3f} ms, both {hop['both_cpu'] * 1e3:.3f} ms; "
                  f"minor page faults per hop {hop['both_faults']:.1f}; load average {os.getloadavg()[0]:.1f}")
            print("  p50 of each round (30 frontiers each way): out "
                  + " ".join(f"{t * 1e3:.3f}" for t in hop["out_rounds"]) + " ms; both "
                  + " ".join(f"{t * 1e3:.3f}" for t in hop["both_rounds"]) + " ms")
            if hoprun.ENABLED:  # the same hops by numpy's passes alone, as an install without a C compiler runs them
                hoprun.ENABLED = False
                try:
                    plain = frontier_hop_times(engine, corpus, repeats=30)
                finally:
                    hoprun.ENABLED = True
                print(f"  hop loop: compiled (xerj_core/graph/_hoprun.c); numpy's passes alone, same frontiers: out "
                      f"p50 {plain['out'] * 1e3:.3f} ms, both {plain['both'] * 1e3:.3f} ms; compiled/numpy out "
                      f"{hop['out'] / plain['out']:.2f}, both {hop['both'] / plain['both']:.2f}")
            else:
                print(f"  hop loop: numpy's passes ({hoprun.describe()})")

            start = time.perf_counter()
            db = build_sqlite(corpus)
            print(f"sqlite: in memory, covering indexes (src,dst,valid_at,invalid_at,type,weight) and "
                  f"(dst,src,...), built in {time.perf_counter() - start:.1f} s")
            contenders = {"xerj": ego, "sqlite": lambda node: sqlite_ego(db, node, corpus.as_of)}
            if not args.skip_networkx:
                start = time.perf_counter()
                graph = build_networkx(corpus)
                print(f"networkx: MultiDiGraph built in {time.perf_counter() - start:.1f} s")
                contenders["networkx"] = lambda node: networkx_ego(graph, node, corpus.as_of)

            bodies = [ego(corpus.node(s)) for s in seeds]
            rows = [sqlite_ego(db, corpus.node(s), corpus.as_of) for s in seeds]
            agree = sum(1 for body, found in zip(bodies, rows)
                        if {e["edge_id"] for e in body["edges"] if e["hop"] == 1}
                        == {r["edge_id"] for r in found if r["hop"] == 1})
            print(f"  hop-1 edge sets of xerj and sqlite agree on {agree}/{len(seeds)} seeds; mean edges returned "
                  f"{statistics.mean(len(b['edges']) for b in bodies):.0f}, mean clipped "
                  f"{statistics.mean(b['not_shown']['edges_clipped'] for b in bodies):.0f}")

            times = interleaved(contenders, corpus, seeds)
            for label, index in (("first pass (pages cold in this process)", 0), ("second pass (warm)", 1)):
                figures = {name: p50(t[index]) for name, t in times.items()}
                line = ", ".join(f"{name} p50 {value * 1e3:.3f} ms" for name, value in figures.items())
                ratios = ", ".join(f"xerj/{name} {figures['xerj'] / value:.2f}" for name, value in figures.items()
                                   if name != "xerj")
                print(f"2-hop ego (both, as_of, limit 100, with evidence), {label}: {line}; {ratios} "
                      f"(target: xerj/sqlite <= 0.5)")
            print(f"  xerj p90 (warm) {np.percentile(times['xerj'][1], 90) * 1e3:.3f} ms; sqlite as one CTE "
                  f"statement instead: p50 {sqlite_single_statement(db, corpus, seeds[:20]) * 1e3:.1f} ms")
            strict_comparison(engine, db, corpus, seeds)
    if args.review_history_edges:
        review_history_figure(args.review_history_edges, args.queries)


if __name__ == "__main__":
    main()
