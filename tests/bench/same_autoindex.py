"""Whether two installs of xerj autoindex a folder alike: every index's documents, compared byte for byte.

Run: python tests/bench/same_autoindex.py PYTHON_A PYTHON_B FOLDER [FOLDER ...]

Each interpreter (say, a virtualenv of main and one of a branch) autoindexes each
folder into a fresh data directory with the same clock, then writes every live
document of every index (the brain's documents and files, its edges with their
evidence, its meta) as sorted JSON lines; the two dumps must be equal. The only
values left out are an edge's ``recorded_at`` and ``created_at``: the system
time of the write, not a result. A change meant to make autoindex cheaper must
leave these dumps identical.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

DUMP = """
import sys, orjson
from pathlib import Path
from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine

folder, data, out = sys.argv[1:4]
lines = []
with Engine(Path(data)) as engine:
    run(engine, Path(folder), brain="same", clock=lambda: 1_700_000_000_000)
    for name in engine.store.index_names():
        with engine.store.reader(name) as reader:
            for _row, doc_id, source, _version in reader.documents(reader.live_rows().tolist()):
                if name.endswith("-edges"):
                    source.pop("recorded_at", None)
                    source.pop("created_at", None)
                lines.append(orjson.dumps([name, doc_id, source], option=orjson.OPT_SORT_KEYS))
Path(out).write_bytes(b"\\n".join(sorted(lines)) + b"\\n")
"""


def dump(python: str, folder: Path, tmp: Path, tag: str) -> bytes:
    """``python``'s autoindex of ``folder``, as sorted JSON lines."""
    out = tmp / f"{tag}.jsonl"
    subprocess.run([python, "-c", DUMP, str(folder), str(tmp / f"data-{tag}"), str(out)], check=True)
    return out.read_bytes()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python_a")
    parser.add_argument("python_b")
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    differ = 0
    for folder in args.folders:
        with tempfile.TemporaryDirectory() as name:
            a = dump(args.python_a, folder, Path(name), "a")
            b = dump(args.python_b, folder, Path(name), "b")
        lines_a, lines_b = a.splitlines(), b.splitlines()
        if a == b:
            print(f"{folder}: identical, {len(lines_a):,} documents (sha256 {hashlib.sha256(a).hexdigest()[:16]})")
            continue
        differ += 1
        first = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
        print(f"{folder}: DIFFERENT ({len(lines_a):,} vs {len(lines_b):,} documents; first difference at line "
              f"{first + 1})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
