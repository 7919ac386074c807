"""Autoindex benchmark: files/s and edges/s for a first run and a no-change re-run, against merely reading the files.

Run: python tests/bench/bench_autoindex.py [--notes 10000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine

WORDS = [f"w{i}" for i in range(5000)]


def generate(root: Path, notes: int, seed: int = 11) -> None:
    rng = random.Random(seed)
    folders = max(1, notes // 100)
    for i in range(notes):
        folder = root / f"topic-{i % folders:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f"# Note {i}", ""]
        for section in range(3):
            lines.append(f"## Part {section}")
            words = rng.choices(WORDS, weights=[1 / (k + 1) for k in range(len(WORDS))], k=40)
            links = [f"[[note-{rng.randrange(notes)}]]" for _ in range(2)]
            lines.append(" ".join(words[:20]) + " " + links[0])
            lines.append(" ".join(words[20:]) + " " + links[1])
            lines.append("")
        (folder / f"note-{i}.md").write_text("\n".join(lines))


def read_floor(root: Path) -> float:
    start = time.perf_counter()
    total = 0
    for path in sorted(root.rglob("*.md")):
        total += len(path.read_bytes())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "notes"
        generate(corpus, args.notes)
        floor = read_floor(corpus)
        with Engine(Path(tmp) / "data") as engine:
            first = run(engine, corpus, brain="bench")
            second = run(engine, corpus, brain="bench")
        n = args.notes
        print(f"read floor: {floor:.2f}s ({n / floor:,.0f} files/s)")
        print(f"first run: {first.elapsed_s:.2f}s, {n / first.elapsed_s:,.0f} files/s, "
              f"{first.edges_written / first.elapsed_s:,.0f} edges/s ({first.edges_written:,} edges), "
              f"{first.elapsed_s / floor:.1f}x the read floor (target >= 500 files/s)")
        print(f"no-change re-run: {second.elapsed_s:.2f}s, {n / second.elapsed_s:,.0f} files/s, "
              f"{first.elapsed_s / second.elapsed_s:.1f}x faster than the first run (target >= 10x)")


if __name__ == "__main__":
    main()
