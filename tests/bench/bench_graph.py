"""Graph benchmark: 2-hop ego against sqlite (covering indexes) and networkx, a 4096-id hop, ingest, RSS.

Run: python tests/bench/bench_graph.py [--edges N] [--queries Q] [--skip-networkx]
     python tests/bench/bench_graph.py --ingest-only SMALL,LARGE [--sequential | --same-process]

The graph has N edges over N/10 nodes (out-degree 10), 10% of them retired.
Every figure and every ratio is printed; targets from the graph issue are
shown beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def written() -> int:
    """Bytes this process has passed to write system calls so far (Linux ``/proc/self/io`` wchar; 0 elsewhere)."""
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))
    except (OSError, StopIteration):
        return 0


Figures = dict[str, float]  # one timed call's (see TimedBrain)


class TimedBrain:
    """One brain's writes, timed call by call: ``write(lo)`` writes the corpus's batch of :data:`BATCH` edges from
    ``lo`` through write_edges, ``retire(k)`` makes the ``k``-th call of invalidate_edges retiring its 10%
    (:attr:`calls`: :func:`retirement_plan`'s instants, at most BATCH ids a call).

    Only the calls are timed: the benchmark's own making of each batch's drafts (and of the retired ids) happens
    outside, as the raw loop's making of its documents does. Each answers its call's figures: ``edges``, ``wall``
    seconds, ``cpu`` seconds of this process and of the merge worker as the call saw it (:class:`MergeWorkers`),
    the writing thread's alone (``own``), the bytes both handed to write calls (``wrote``: LMDB's dirty pages), this
    process's minor page faults (``faults``: a map page touched again) and, for a batch, ``lo``."""

    def __init__(self, engine: Engine, corpus: Corpus) -> None:
        self.engine, self.corpus = engine, corpus
        self.workers = MergeWorkers(engine.store)
        self.calls = [(at, chosen[part:part + BATCH]) for at, chosen in retirement_plan(corpus)
                      for part in range(0, chosen.size, BATCH)]

    def write(self, lo: int) -> Figures:
        drafts = [self.corpus.draft(i) for i in range(lo, min(self.corpus.size, lo + BATCH))]
        return {"lo": lo, **self.timed(lambda: self.engine.graph.write_edges(BRAIN, drafts, created_at=T0 + YEAR),
                                       len(drafts))}

    def retire(self, k: int) -> Figures:
        at, chosen = self.calls[k]
        ids = [self.corpus.edge_id(int(i)) for i in chosen]
        return self.timed(lambda: self.engine.graph.invalidate_edges(BRAIN, edge_ids=ids, at=at), len(ids))

    def timed(self, call: Callable[[], object], edges: int) -> Figures:
        self.workers.since_last()
        faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start, clock, before = time.perf_counter(), time.process_time(), written()
        own = time.thread_time()
        call()
        own = time.thread_time() - own
        wall, cpu, wrote = time.perf_counter() - start, time.process_time() - clock, written() - before
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faulted
        worker_cpu, worker_wrote = self.workers.since_last()
        return {"edges": edges, "wall": wall, "cpu": cpu + worker_cpu, "own": own, "wrote": wrote + worker_wrote,
                "faults": faults}


class RawLoop:
    """The floor: the same edge documents (JSON-encoded, keyed by their random edge ids) put into one lmdb B-tree in
    a fresh environment at ``path``, in the same batches, synced commits. ``write(lo)`` puts the batch from ``lo``
    (the first ``limit`` edges in all), its documents made before its transaction is timed; figures as
    :class:`TimedBrain`'s (``edges``: documents put, ``wall``, ``cpu``, ``wrote``, ``lo``)."""

    def __init__(self, path: Path, corpus: Corpus, limit: int) -> None:
        self.env = lmdb.open(str(path), map_size=1 << 34, sync=True)
        self.corpus, self.limit = corpus, min(limit, corpus.size)

    def write(self, lo: int) -> Figures:
        corpus, docs = self.corpus, []
        for i in range(lo, min(self.limit, lo + BATCH)):
            d = corpus.draft(i)
            docs.append((corpus.edge_id(i).encode(), {
                "edge_id": corpus.edge_id(i), "src": d.src, "dst": d.dst, "type": d.type, "weight": d.weight,
                "confidence": d.confidence, "valid_at": d.valid_at, "created_at": T0 + YEAR, "detector": d.detector,
                "trust": "detected", "schema_version": 1, "evidence": d.evidence.to_json(),
                "src_file": d.evidence.source}))
        start, clock, before = time.perf_counter(), time.process_time(), written()
        with self.env.begin(write=True) as txn:
            for key, doc in docs:
                txn.put(key, orjson.dumps(doc))
        return {"lo": lo, "edges": len(docs), "wall": time.perf_counter() - start, "cpu": time.process_time() - clock,
                "wrote": written() - before}

    def close(self) -> None:
        self.env.close()


def raw_lmdb_loop(path: Path, corpus: Corpus, limit: int) -> list[Figures]:
    """:class:`RawLoop` over the corpus's first ``limit`` edges, in this process: its batches' figures."""
    with contextlib.closing(RawLoop(path, corpus, limit)) as loop:
        return [loop.write(lo) for lo in range(0, loop.limit, BATCH)]


def ingest(engine: Engine, corpus: Corpus) -> tuple[list[Figures], list[Figures]]:
    """The corpus written through write_edges batch by batch, then its 10% retired through invalidate_edges, in this
    process (:class:`TimedBrain`): the figures of each batch and of each retiring call."""
    brain = TimedBrain(engine, corpus)
    return [brain.write(lo) for lo in range(0, corpus.size, BATCH)], [brain.retire(k) for k in range(len(brain.calls))]


def total(calls: list[Figures], key: str) -> float:
    return sum(call[key] for call in calls)


def per_second(calls: list[Figures]) -> float:
    """Edges (or raw documents) per second of the calls' wall time."""
    return total(calls, "edges") / total(calls, "wall")


def by_window(batches: list[Figures], key: str) -> list[float]:
    """``key`` per edge by :data:`WINDOW`-edge window of the brain's size as each batch began, over every brain the
    batches wrote."""
    sums: dict[int, list[float]] = {}
    for batch in batches:
        window = sums.setdefault(int(batch["lo"]) // WINDOW, [0.0, 0.0])
        window[0] += batch[key]
        window[1] += batch["edges"]
    return [used / edges for _, (used, edges) in sorted(sums.items())]


def print_size(size: int, batches: list[Figures], raws: list[Figures], retires: list[Figures], brains: str = ""
               ) -> dict[str, float]:
    """Prints one size's figures, each per edge (or document) over all the calls given (``brains`` says whose);
    returns those the ratio line compares."""
    edges, docs, retired = (int(total(calls, "edges")) for calls in (batches, raws, retires))
    rate, raw, retiring = per_second(batches), per_second(raws), total(retires, "wall")
    print(f"{size:>9,} edges{brains}: write_edges {rate:,.0f} edges/s ({total(batches, 'cpu') / edges * 1e6:.1f} us "
          f"CPU, {total(batches, 'wrote') / edges / 1024:.1f} KiB written per edge); raw lmdb put loop of the same "
          f"{size:,} documents ({BATCH:,}/txn) {raw:,.0f} docs/s ({total(raws, 'cpu') / docs * 1e6:.1f} us CPU, "
          f"{total(raws, 'wrote') / docs / 1024:.1f} KiB written per doc); ratio {rate / raw:.3f} (target >= 0.50); "
          f"retiring {retired:,} edges {retiring:.1f} s = {retiring / retired * 1e6:.1f} us/edge "
          f"({total(retires, 'cpu') / retired * 1e6:.1f} us CPU, {total(retires, 'wrote') / retired / 1024:.1f} KiB "
          f"written, {total(retires, 'faults') / retired:.2f} minor faults per edge); load {os.getloadavg()[0]:.1f}",
          flush=True)
    print(f"{'':>9}  write_edges CPU per edge by {WINDOW:,}-edge window (us): "
          + " ".join(f"{used * 1e6:.1f}" for used in by_window(batches, "cpu")), flush=True)
    print(f"{'':>9}  of which the writing thread's (the rest: background merges, mostly in the merge worker): "
          + " ".join(f"{used * 1e6:.1f}" for used in by_window(batches, "own")), flush=True)
    return {"rate": rate, "raw": raw, "retire": retiring / retired, "retire_cpu": total(retires, "cpu") / retired}


def print_ratios(small: int, large: int, figures: dict[int, dict[str, float]], method: str) -> None:
    low, high = figures[small], figures[large]
    print(f"rate at {large:,} / rate at {small:,} ({method}): write_edges {high['rate'] / low['rate']:.2f} (target "
          f"0.8-1.2), the raw lmdb loop {high['raw'] / low['raw']:.2f} (its random-key B-tree alone); time per retired "
          f"edge at {large:,} / at {small:,}: {high['retire'] / low['retire']:.2f} (target 0.8-1.2; CPU "
          f"{high['retire_cpu'] / low['retire_cpu']:.2f})", flush=True)


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
    same documents; prints both and returns the figures the scaling lines compare."""
    corpus = Corpus(size)
    # The floor at this size: the same documents put into one B-tree keyed by their (random) edge ids.
    raws = raw_lmdb_loop(tmp / f"raw-{size}", corpus, size)
    shutil.rmtree(tmp / f"raw-{size}", ignore_errors=True)
    with Engine(tmp / f"data-{size}", config=EngineConfig()) as engine:
        AGE["ref before"] = reference_loop()
        batches, retires = ingest(engine, corpus)
    AGE["before"] = (sum(batch["own"] for batch in batches if BATCH <= batch["lo"] < AGE_EDGES)
                     / max(1, min(AGE_EDGES, size) - BATCH))
    AGE["after"], AGE["young"] = fresh_brain_beside(corpus, tmp)
    AGE["ref after"] = reference_loop()
    figures = print_size(size, batches, raws, retires)
    print(f"{'':>9}  process age: a fresh brain's edges {BATCH:,}-{min(AGE_EDGES, size):,} cost "
          f"{AGE['before'] * 1e6:.1f} us CPU per edge as the ingest began and {AGE['after'] * 1e6:.1f} us written "
          f"again after it (x{AGE['after'] / AGE['before']:.2f}, same work, same brain size; a loop that stays in "
          f"the caches x{AGE['ref after'] / AGE['ref before']:.2f} meanwhile: the machine's own drift); written at "
          f"the same time by a process just started {AGE['young'] * 1e6:.1f} us (aged / young x"
          f"{AGE['after'] / AGE['young']:.2f}: the age alone, under the same load)", flush=True)
    shutil.rmtree(tmp / f"data-{size}", ignore_errors=True)
    return {**figures, "age": AGE["after"] / AGE["before"], "drift": AGE["ref after"] / AGE["ref before"],
            "age_same_load": AGE["after"] / AGE["young"]}


RESULT = "ingest-figures "  # the line a child of ingest_scaling ends with: this prefix, then its figures as JSON


def ingest_scaling(sizes: list[int], same_process: bool = False) -> None:
    """Ingest and retirement at several brain sizes one after another (``--sequential``), each in a fresh data
    directory, against a raw lmdb put loop measured in the same run: the rate should not fall, and a retired edge
    should cost the same, as the brain grows.

    Each size runs in a fresh process of its own, so the large brain's figures do not carry the heap, caches and
    collector state the smaller runs left behind (in one process, the 1M run followed the 200k brain and two raw
    loops, and its rate read 0.63-0.74 of the 200k rate while separate processes measured CPU per edge flat);
    ``same_process`` keeps the older method for comparison. Either way the sizes are measured minutes apart, in
    different phases of the machine's drift: :func:`ingest_interleaved` times them in one span."""
    method = "one process, one size after the other" if same_process else "a fresh process each, one after the other"
    print(f"ingest scaling at {', '.join(f'{size:,}' for size in sizes)} edges: {method}", flush=True)
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
    print_ratios(min(sizes), max(sizes), figures, method)
    print("process age (a fresh brain's first edges after the ingest / as it began, same process): "
          + ", ".join(f"{size:,}: x{figures[size]['age']:.2f} (machine drift x{figures[size]['drift']:.2f}; / a "
                      f"process just started, same minutes x{figures[size]['age_same_load']:.2f})" for size in sizes))


class Child:
    """A child process of :func:`ingest_interleaved` writing one corpus (:func:`ingest_child`), and the figures of
    its timed calls so far by command ("write", "retire"). It runs in a process group of its own, which its merge
    worker joins, so the two are stopped together while the other side is timed; ``children`` ends it when the run
    ends, however it ends. (Were the parent killed outright, the stopped group would be left orphaned, which the
    kernel ends itself: SIGHUP, then SIGCONT.)"""

    def __init__(self, kind: str, size: int, tmp: str, children: contextlib.ExitStack) -> None:
        self.name = f"the {kind} child at {size:,}"
        self.proc = subprocess.Popen([sys.executable, __file__, "--ingest-child", kind, "--ingest-size", str(size),
                                      "--ingest-tmp", tmp], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     process_group=0)
        children.callback(self.end)
        self.planned: dict[str, int] = self.answer()  # calls of each command, once its corpus and brain are made
        self.figures: dict[str, list[Figures]] = {command: [] for command in self.planned}
        self.stop()

    def left(self, command: str) -> int:
        return self.planned[command] - len(self.figures[command])

    def step(self, command: str) -> None:
        """Its next timed call of ``command``, made while it runs alone (the other side stopped)."""
        assert self.proc.stdin is not None
        os.killpg(self.proc.pid, signal.SIGCONT)
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        self.figures[command].append(self.answer())
        self.stop()

    def answer(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited with {self.proc.wait()}")
        return json.loads(line)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def end(self) -> None:
        """Lets it close its brain and remove its directory (at the end of its input) and waits for it."""
        if self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        with contextlib.suppress(ProcessLookupError):  # its whole group gone already
            os.killpg(self.proc.pid, signal.SIGCONT)
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        if self.proc.wait():
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")


def ingest_child(kind: str, size: int, tmp: Path) -> None:
    """A child of :func:`ingest_interleaved`: writes a corpus of ``size`` edges into a fresh brain (``kind``
    "edges", :class:`TimedBrain`) or a fresh raw lmdb environment ("raw", :class:`RawLoop`) under ``tmp``. Once
    ready it prints how many calls it has of each command, as JSON; then each line of its input, "write" (its next
    batch) or "retire" (its next retiring call), is one timed call, answered with its figures as one JSON line. At
    the end of its input it closes and removes its directory."""
    corpus = Corpus(size)
    path = tmp / f"{kind}-{size}-{os.getpid()}"
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, path, ignore_errors=True)
        writer: TimedBrain | RawLoop
        if kind == "raw":
            writer = stack.enter_context(contextlib.closing(RawLoop(path, corpus, size)))
            calls = 0
        else:
            writer = TimedBrain(stack.enter_context(Engine(path, config=EngineConfig())), corpus)
            calls = len(writer.calls)
        print(json.dumps({"write": -(-size // BATCH), "retire": calls}), flush=True)
        batches, retiring = iter(range(0, size, BATCH)), iter(range(calls))
        for line in sys.stdin:
            if line == "write\n":
                print(json.dumps(writer.write(next(batches))), flush=True)
            else:
                assert isinstance(writer, TimedBrain)
                print(json.dumps(writer.retire(next(retiring))), flush=True)


def alternate(sides: list[Child], command: str, turn: int) -> None:
    """One timed call of ``command`` by each side that has one left; which goes first swaps every turn."""
    for child in sides if turn % 2 == 0 else sides[::-1]:
        if child.left(command):
            child.step(command)


def alternate_writes(kind: str, small: int, large: int, tmp: str, children: contextlib.ExitStack
                     ) -> tuple[Child, list[Child]]:
    """Writes of ``kind`` by one child at ``large`` and by children at ``small`` one after another (a new one as each
    has written its whole corpus), batch by batch alternately, until the large one has written its own; a small one
    then part-way writes the rest alone. The large child and all the small ones, the last of them still running."""
    big, smalls = Child(kind, large, tmp, children), []
    for turn in range(big.planned["write"]):
        if not smalls or not smalls[-1].left("write"):
            if smalls:
                smalls[-1].end()
            smalls.append(Child(kind, small, tmp, children))
        alternate([big, smalls[-1]], "write", turn)
    while smalls[-1].left("write"):
        smalls[-1].step("write")
    return big, smalls


def ingest_interleaved(small: int, large: int) -> None:
    """Ingest and retirement at two brain sizes, timed batch by batch alternately in one wall-clock span, against a
    raw lmdb put loop timed the same way: the rate should not fall, and a retired edge should cost the same, as the
    brain grows.

    This machine's speed drifts by 1.5-1.7x within a minute, so sizes measured one after the other
    (:func:`ingest_scaling`) meet different phases of it: in one such run the 1M process's first 100,000 edges, the
    same work as the 200k process's first 100,000, cost 18.3 us each against 12.6, and the ratio it printed (0.69)
    was that drift. Here, as the query benchmarks time their contenders, the two sides take turns: one child
    process writes the large brain, and children started one after another write small brains, each a whole one
    into a fresh data directory by a process just started (as the large one began), so the small side writes
    several small brains over the large one's span. The parent asks each side for one batch in turn, which goes
    first swapping every pair, until the large brain is complete (a small one then part-way is finished alone).
    The large brain and the last small one then retire their 10% call by call, alternately the same way (the plans
    have the same instants; a call holds at most :data:`BATCH` ids, so the larger plan may have a few calls left to
    make alone). Before all this the raw loops run at both sizes the same way, in children of their own, so every
    brain is written by a young process. A child times each call as :func:`ingest` does (drafts made outside).

    While one side is timed the other is stopped, with its merge worker (SIGSTOP to its process group; SIGCONT
    before its next call): otherwise the large brain's background merges, the larger, would run beside the small
    side's batches, and each side would pay for the other's merges. Stopped, a side's merges run beside its own
    calls only, as in a process writing alone. Children start and end outside every timing."""
    method = "timed batch by batch in one span"
    print(f"ingest scaling at {small:,} and {large:,} edges: {method} (raw loops, then write_edges, then retiring)",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as children:
        raw_big, raw_smalls = alternate_writes("raw", small, large, tmp, children)
        raw_big.end()
        raw_smalls[-1].end()
        big, smalls = alternate_writes("edges", small, large, tmp, children)
        last = smalls[-1]
        for turn in range(max(big.planned["retire"], last.planned["retire"])):
            alternate([big, last], "retire", turn)
        big.end()
        last.end()
    writes = [batch for child in smalls for batch in child.figures["write"]]
    figures = {
        small: print_size(small, writes, [batch for child in raw_smalls for batch in child.figures["write"]],
                          last.figures["retire"], f" ({len(smalls)} brains, each by a process just started, and "
                          f"{len(raw_smalls)} raw loops; retiring: the last brain)"),
        large: print_size(large, big.figures["write"], raw_big.figures["write"], big.figures["retire"])}
    print_ratios(small, large, figures, f"{method}, {len(smalls)} small brains against one large")
    first, latest = per_second(smalls[0].figures["write"]), per_second(last.figures["write"])
    head = per_second([batch for batch in big.figures["write"] if batch["lo"] < small])
    alone = len(writes) - len(big.figures["write"])
    print(f"drift check: write_edges at {small:,} over the first small brain {first:,.0f} edges/s, over the last "
          f"{latest:,.0f} (x{latest / first:.2f}); the large brain's first {small:,} edges, the same work timed beside "
          f"the first small brain, {head:,.0f} edges/s (x{head / first:.2f}; near 1 when the turns share the drift)"
          + (f"; {alone} small batches made alone, after the large brain was complete" if alone else ""), flush=True)


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
                        help="two comma-separated brain sizes, small and large (e.g. 200000,1000000): ingest and "
                             "retire at both, timed batch by batch alternately in one span; no queries")
    parser.add_argument("--sequential", action="store_true",
                        help="with --ingest-only: each size (any number of them) in a fresh process of its own, one "
                             "after another (the older method)")
    parser.add_argument("--same-process", action="store_true",
                        help="with --ingest-only: every size in this process, one after another (the oldest method)")
    parser.add_argument("--ingest-size", type=int, default=None, help=argparse.SUPPRESS)  # one size of --ingest-only
    parser.add_argument("--ingest-child", choices=("raw", "edges"), default=None,
                        help=argparse.SUPPRESS)  # one child of ingest_interleaved
    parser.add_argument("--ingest-tmp", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fresh-brain", type=int, default=None, help=argparse.SUPPRESS)  # see fresh_brain_beside
    args = parser.parse_args()
    if args.fresh_brain:
        young_fresh_brain(args.fresh_brain, args.ingest_tmp)
        return
    if args.ingest_child:
        ingest_child(args.ingest_child, args.ingest_size, args.ingest_tmp)
        return
    if args.ingest_size:
        print(RESULT + json.dumps(ingest_at(args.ingest_size, args.ingest_tmp)), flush=True)
        return
    if args.ingest_only:
        sizes = [int(x) for x in args.ingest_only.split(",")]
        if args.sequential or args.same_process:
            ingest_scaling(sizes, args.same_process)
        elif len(sizes) != 2 or sizes[0] == sizes[1]:
            parser.error("--ingest-only takes two different sizes (or any with --sequential or --same-process)")
        else:
            ingest_interleaved(min(sizes), max(sizes))
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
                raw = per_second(raw_lmdb_loop(Path(tmp) / "raw", corpus, args.raw_sample or corpus.size))
                batches, retires = ingest(engine, corpus)
                rate, retire_seconds = per_second(batches), total(retires, "wall")
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
