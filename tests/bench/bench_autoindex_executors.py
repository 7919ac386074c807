"""Autoindex through each executor: inline, a process pool and a Dask LocalCluster, as ratios against inline.

Run: python tests/bench/bench_autoindex_executors.py [--notes 10000] [--workers 2] [--repeat 1]

In one run, over the same generated notes (bench_autoindex's generator), for
each executor:

* per-file work: a run into a sink that keeps nothing, so only what the
  executor runs (read, parse, each detector's map steps) and the combine in
  this process are timed;
* whole run: a first run into a fresh LMDB data directory (the single writer
  stays in this process whichever executor runs the batches).

Each executor's drafts must equal the inline run's (edge ids, types,
evidence), else the benchmark stops. Pool and cluster start-up are timed apart
and not in the runs. Needs the ``dask`` extra. The machine these ran on is
usually shared: compare the ratios, not the rates.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_autoindex import generate  # noqa: E402

from xerj_core.autoindex.executors import open_executor  # noqa: E402
from xerj_core.autoindex.parallel import InlineExecutor  # noqa: E402
from xerj_core.autoindex.pipeline import run  # noqa: E402
from xerj_core.autoindex.sink import (BrainState, EdgeWriteSummary, FileWrite, LiveClaims, RunFinish,  # noqa: E402
                                     StandingEdges)
from xerj_core.engine import Engine  # noqa: E402
from xerj_core.model import EdgeDraft  # noqa: E402
from xerj_core.plugins import get_plugin_manager  # noqa: E402


class DiscardingSink:
    """A BrainSink that stores nothing: an empty brain every run, documents counted, drafts kept for comparing."""

    def __init__(self) -> None:
        self.drafts: list[EdgeDraft] = []

    def load(self, brain: str) -> BrainState:
        return BrainState()

    def write_files(self, brain: str, files: Sequence[FileWrite], indexed_at: int) -> int:
        return sum(len(f.documents) for f in files)

    def standing_edges(self, brain: str) -> StandingEdges:
        return StandingEdges()

    def live_claims(self, brain: str, files: Sequence[str]) -> LiveClaims:
        return LiveClaims()

    def invalidate_edges(self, brain: str, edge_ids: Sequence[str], at: int) -> int:
        return 0

    def write_edges(self, brain: str, drafts: Sequence[EdgeDraft], *, created_at: int,
                    nodes_index: str | None) -> EdgeWriteSummary:
        self.drafts.extend(drafts)
        return EdgeWriteSummary(written=len(drafts))

    def finish(self, brain: str, finish: RunFinish) -> None:
        pass


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2, help="processes of the pool and of the LocalCluster")
    parser.add_argument("--repeat", type=int, default=1, help="per-file-work runs per executor (the best is kept)")
    args = parser.parse_args()
    pm = get_plugin_manager()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        folder = tmp / "notes"
        generate(folder, args.notes)
        warm = tmp / "warm"
        generate(warm, 64 * 4 * args.workers)
        opened: dict[str, cf.Executor] = {"inline": InlineExecutor()}
        start_s: dict[str, float] = {"inline": 0.0}
        for label, spec in (("process pool", "process"), ("dask LocalCluster", "dask")):
            start_s[label], opened[label] = timed(lambda spec=spec: open_executor(spec, pm, args.workers))
            # a small run first, so every worker has started and loaded its plugins before any timing
            run(DiscardingSink(), warm, brain="warm", executor=opened[label], pm=pm)
        print(f"autoindex executors: {args.notes:,} generated notes, {args.workers} workers "
              f"(start-up, not timed below: pool {start_s['process pool']:.2f}s, "
              f"LocalCluster {start_s['dask LocalCluster']:.2f}s)", flush=True)
        work: dict[str, float] = {}
        whole: dict[str, float] = {}
        reference: list[EdgeDraft] | None = None
        try:
            for label, executor in opened.items():
                best = float("inf")
                for _ in range(args.repeat):
                    sink = DiscardingSink()
                    seconds, _summary = timed(lambda: run(sink, folder, brain="bench", executor=executor, pm=pm))
                    best = min(best, seconds)
                    if reference is None:
                        reference = sink.drafts
                    elif sink.drafts != reference:
                        raise SystemExit(f"{label}: the drafts differ from the inline run's")
                work[label] = best
                with Engine(tmp / f"data-{label.split()[0]}", pm) as engine:
                    whole[label], summary = timed(lambda: run(engine, folder, brain="bench", executor=executor))
                print(f"  {label:18} per-file work {work[label]:7.2f}s ({args.notes / work[label]:7,.0f} files/s)"
                      f"   whole run {whole[label]:7.2f}s ({args.notes / whole[label]:7,.0f} files/s, "
                      f"{summary.edges_written:,} edges)", flush=True)
        finally:
            for executor in opened.values():
                executor.shutdown(wait=True)
        print(f"  drafts identical across executors: {len(reference or ()):,} edges")
        for label in opened:
            if label != "inline":
                print(f"  {label} / inline: per-file work {work[label] / work['inline']:.2f}x, "
                      f"whole run {whole[label] / whole['inline']:.2f}x (below 1 is faster)")


if __name__ == "__main__":
    main()
