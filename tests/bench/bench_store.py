"""Store benchmark: put throughput against a raw lmdb put loop; a bitemporal column filter against numpy.

Run: python tests/bench/bench_store.py [--docs N] [--rounds N] [--rows N] [--py-files N]

The second put line writes large real documents through the same bulk path: the ``.py`` files of this
virtualenv's site-packages, one document each (its path a keyword, its text a text field), as autoindex's
``.py`` documents go through it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

import lmdb
import numpy as np
import orjson

from xerj_core.store import BulkOp, Store

from merge_workers import MergeWorkers

BATCH = 1000


def small_docs(n: int) -> list[dict]:
    return [{"title": f"note {i}", "kind": "note" if i % 3 else "mail", "n": i, "valid_at": 1_700_000_000_000 + i}
            for i in range(n)]


def written_bytes() -> int | None:
    """Bytes this process has caused to be written to disk so far (Linux ``/proc/self/io``), None elsewhere."""
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("write_bytes"))
    except (OSError, StopIteration, ValueError):
        return None


def _megabytes(before: int | None, after: int | None) -> str:
    return "n/a" if before is None or after is None else f"{(after - before) / 1e6:.1f} MB"


def bench_raw_lmdb(path: Path, docs: list[dict]) -> tuple[float, float]:
    """Docs/s and CPU seconds of the floor, from the same document dicts as xerj: each document's id made and
    encoded, its JSON encoded (orjson) and put under the id, a synced commit per batch of ``BATCH``."""
    env = lmdb.open(str(path), map_size=1 << 32)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(docs), BATCH):
        with env.begin(write=True) as txn:
            for j, doc in enumerate(docs[i:i + BATCH], i):
                txn.put(f"doc-{j}".encode(), orjson.dumps(doc))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    env.close()
    return len(docs) / elapsed, cpu


class Collections:
    """Python's cyclic collections while it is installed (``gc.callbacks``): their count and CPU seconds per
    generation, so the put line says what the collector cost (0: young, 2: full)."""

    def __init__(self) -> None:
        self.count, self.cpu, self._began = [0, 0, 0], [0.0, 0.0, 0.0], 0.0

    def __enter__(self) -> "Collections":
        gc.callbacks.append(self._heard)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._heard)

    def _heard(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.count[info["generation"]] += 1
            self.cpu[info["generation"]] += time.process_time() - self._began

    def __str__(self) -> str:
        return ", ".join(f"{n} {name} ({cpu:.3f} s)" for n, name, cpu in
                         zip(self.count, ("young", "middle", "full"), self.cpu))


def bench_store_puts(path: Path, docs: list[dict], collections: Collections | None = None
                     ) -> tuple[float, float, float]:
    """Docs/s and CPU seconds of ``Store.bulk`` over the same batches, from the same document dicts: each
    document's id made, its ``BulkOp`` built (the API's input; its CPU is counted, and also returned apart),
    then per batch sources (the same orjson JSON) and ids, keyword ordinals, the tail's blocks, the seals and
    merges of columns and postings, one result per document, a synced commit. Merges left to the store's merge
    worker are waited for inside the timing, and its CPU seconds are counted with the process's."""
    with Store(path) as store:
        store.create_index("bench", {"properties": {"title": {"type": "text"}, "kind": {"type": "keyword"},
                                                    "n": {"type": "long"}, "valid_at": {"type": "date"}}})
        workers = MergeWorkers(store)
        with collections or contextlib.nullcontext():
            start, cpu, ops_cpu = time.perf_counter(), time.process_time(), 0.0
            for i in range(0, len(docs), BATCH):
                before = time.process_time()
                ops = [BulkOp("index", "bench", f"doc-{j}", doc) for j, doc in enumerate(docs[i:i + BATCH], i)]
                ops_cpu += time.process_time() - before
                store.bulk(ops)
            store.wait_merges()
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            return len(docs) / elapsed, cpu + workers.totals()[0], ops_cpu


def py_file_docs(limit: int) -> list[dict]:
    """Up to ``limit`` ``.py`` files of this virtualenv's site-packages as ``{"path", "text"}`` documents."""
    site = Path(sysconfig.get_paths()["purelib"])
    docs = []
    for path in sorted(site.rglob("*.py")):
        if len(docs) >= limit:
            break
        try:
            docs.append({"path": str(path.relative_to(site)), "text": path.read_text(encoding="utf-8",
                                                                                 errors="replace")})
        except OSError:
            continue
    return docs


def bench_large_docs(path: Path, docs: list[dict], batch: int = 200) -> tuple[tuple[float, float], tuple[float, float]]:
    """(docs/s, CPU seconds) of the raw loop and of ``Store.bulk`` over the same large documents in bulks of
    ``batch`` (each side as in the small-document line: ids, JSON, synced commits; xerj also tokenizes the
    text into postings, numbers the path's keyword, seals and merges)."""
    path.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path / "raw"), map_size=1 << 34)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(docs), batch):
        with env.begin(write=True) as txn:
            for j, doc in enumerate(docs[i:i + batch], i):
                txn.put(f"file-{j}".encode(), orjson.dumps(doc))
    raw = (len(docs) / (time.perf_counter() - start), time.process_time() - cpu)
    env.close()
    with Store(path / "store") as store:
        store.create_index("code", {"properties": {"path": {"type": "keyword"}, "text": {"type": "text"}}})
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(docs), batch):
            store.bulk([BulkOp("index", "code", f"file-{j}", doc) for j, doc in enumerate(docs[i:i + batch], i)])
        store.wait_merges()
        ours = (len(docs) / (time.perf_counter() - start), time.process_time() - cpu)
    return raw, ours


def bench_filter(path: Path, rows: int, repeats: int = 30) -> tuple[float, float]:
    rng = np.random.default_rng(7)
    valid = rng.integers(0, 1_000_000, rows)
    retired = rng.random(rows) < 0.1
    invalid = valid + rng.integers(1, 1_000_000, rows)
    with Store(path, sync=False) as store:
        store.create_index("edges", {"properties": {"valid_at": {"type": "date"}, "invalid_at": {"type": "date"}}})
        chunk = 100_000
        for lo in range(0, rows, chunk):
            store.bulk([BulkOp("index", "edges", str(i),
                               {"valid_at": int(valid[i]), **({"invalid_at": int(invalid[i])} if retired[i] else {})})
                        for i in range(lo, min(rows, lo + chunk))])
        as_of = 500_000
        with store.reader("edges") as r:
            r.column("valid_at"), r.column("invalid_at")  # warm the process cache, as a server would be
            ours, base = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                v, inv = r.column("valid_at"), r.column("invalid_at")
                mask = (v.values <= as_of) & (inv.values > as_of)  # absent invalid_at is int64 max
                t1 = time.perf_counter()
                ours.append(t1 - t0)
                vals, present, invals = v.values, inv.present, inv.values
                t2 = time.perf_counter()
                expected = (vals <= as_of) & (~present | (invals > as_of))
                base.append(time.perf_counter() - t2)
            assert np.array_equal(mask, expected)
    return statistics.median(ours), statistics.median(base)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--py-files", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the put line, each side in turn")
    args = parser.parse_args()
    docs = small_docs(args.docs)
    with tempfile.TemporaryDirectory() as tmp:
        # Rounds, each side in turn (which goes first alternates): on a shared machine one pair of runs read
        # anywhere from 0.24 to 0.31 for the same build, so the ratio printed is the median round's.
        rounds = []
        for n in range(args.rounds):
            collections = Collections()
            sides = {}
            for side in (("raw", "xerj") if n % 2 == 0 else ("xerj", "raw")):
                before = written_bytes()
                if side == "raw":
                    sides[side] = (*bench_raw_lmdb(Path(tmp) / f"raw{n}", docs), None)
                else:
                    sides[side] = bench_store_puts(Path(tmp) / f"store{n}", docs, collections)
                sides[side] += (_megabytes(before, written_bytes()),)
            rounds.append((sides["xerj"][0] / sides["raw"][0], sides, collections))
        ratio, sides, collections = sorted(rounds, key=lambda r: r[0])[len(rounds) // 2]
        (raw, raw_cpu, _none, raw_mb), (ours, our_cpu, ops_cpu, our_mb) = sides["raw"], sides["xerj"]
        per = 100_000 / args.docs
        print(f"put throughput, {args.docs:,} docs in bulks of {BATCH} (load average {os.getloadavg()[0]:.1f}), "
              f"both sides from the same dicts to synced commits, the median of {args.rounds} rounds (each side in "
              f"turn; round ratios {', '.join(f'{r[0]:.2f}' for r in rounds)}): xerj store (ids, BulkOps, "
              f"Store.bulk: sources, ids, columns, postings, seals and merges, results) {ours:,.0f} docs/s (CPU "
              f"{our_cpu * per:.3f} s per 100k, of which building the BulkOps {ops_cpu * per:.3f} s), raw lmdb put "
              f"loop (ids, orjson JSON, one put each) {raw:,.0f} docs/s (CPU {raw_cpu * per:.3f} s per 100k), ratio "
              f"{ratio:.2f} (target >= 0.30); CPU ratio {raw_cpu / our_cpu:.2f}; written to disk: xerj {our_mb}, "
              f"raw loop {raw_mb}; cyclic collections during xerj's puts: {collections}")
        if args.py_files:
            large = py_file_docs(args.py_files)
            mb = sum(len(doc["text"].encode()) for doc in large) / 1e6
            (raw_rate, raw_cpu), (our_rate, our_cpu) = bench_large_docs(Path(tmp) / "large", large)
            print(f"large real documents ({len(large):,} .py files of this venv, {mb:.1f} MB of text, bulks of 200, "
                  f"load average {os.getloadavg()[0]:.1f}): xerj store {our_rate:,.0f} docs/s (CPU "
                  f"{our_cpu * 1e3 / mb:.1f} ms per MB), raw lmdb put loop {raw_rate:,.0f} docs/s (CPU "
                  f"{raw_cpu * 1e3 / mb:.1f} ms per MB), ratio {our_rate / raw_rate:.2f}; CPU ratio "
                  f"{raw_cpu / our_cpu:.2f} (no target: autoindex's .py documents are written through this path)")
        mine, numpy_only = bench_filter(Path(tmp) / "filter", args.rows)
        print(f"bitemporal filter over {args.rows:,} rows: xerj {mine * 1e3:.3f} ms, plain numpy "
              f"{numpy_only * 1e3:.3f} ms, ratio {mine / numpy_only:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
