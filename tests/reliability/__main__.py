"""``python -m tests.reliability {all,load,faults,disk,hostile} --quick|--full``: run, print, record, fail on loss.

Writes its table into docs/RELIABILITY.md under the heading of its mode
(``--quick`` and ``--full`` keep separate sections), and exits 1 when any
scenario had an error (a 5xx, a dropped connection, an unexpected status) or a
lost or half-visible write.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sys
import time
from pathlib import Path

from tests.reliability import disk, faults, hostile, load
from tests.reliability.common import Result

DOC = Path(__file__).resolve().parents[2] / "docs" / "RELIABILITY.md"
CORPUS = Path(os.environ.get("XERJ_RELIABILITY_CORPUS", "/work/shared/corpora/foam-docs"))

PLANS = {
    # scenario: (quick, full)
    "load_seconds": (15, 60),
    "worker_kills": (10, 100),
    "server_kills": (4, 100),
    "autoindex_kills": (3, 100),
    "disk_rounds": (2, 10),
    "schemathesis_examples": (0, 100),
    "atheris_seconds": (0, 120),
}

HEADER = """# Reliability

What `python -m tests.reliability all --quick|--full` measured: a real `xerj serve` under load, kill -9
faults, a full disk and hostile input. *errors* counts 5xx answers, dropped connections and any status
other than the documented refusal; *lost* counts acknowledged writes missing afterwards and in-flight
transactions visible in part. Latencies are per request (per case for hostile input, per kill for faults).
The build (`.ci/run`) fails when either is above zero in the `--quick` run.
"""


def _plan(full: bool, trials: int | None = None) -> dict[str, int]:
    plan = {k: v[1] if full else v[0] for k, v in PLANS.items()}
    if trials is not None:  # a loaded machine's --full: fewer kills, said in the recorded command
        plan.update(worker_kills=trials, server_kills=trials, autoindex_kills=trials)
    return plan


def run(scenario: str, full: bool, trials: int | None = None) -> list[Result]:
    plan = _plan(full, trials)
    out: list[Result] = []

    def step(fn, *args) -> None:
        r = fn(*args)
        out.append(r)
        print(_row(r), flush=True)
        for note in r.notes:
            print(f"    {note}", flush=True)

    if scenario in ("all", "load"):
        step(load.run, plan["load_seconds"])
    if scenario in ("all", "faults"):
        step(faults.kill_mid_bulk, plan["worker_kills"], False)
        step(faults.kill_mid_bulk, plan["server_kills"], True)
        if CORPUS.is_dir():
            step(faults.kill_autoindex, plan["autoindex_kills"], CORPUS)
    if scenario in ("all", "disk"):
        step(disk.run, plan["disk_rounds"])
    if scenario in ("all", "hostile"):
        step(hostile.fixed_cases)
        step(hostile.zip_bomb_pdf)
        if full:
            step(hostile.schemathesis_run, plan["schemathesis_examples"])
            step(hostile.atheris_run, plan["atheris_seconds"])
    return out


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _row(r: Result) -> str:
    return (f"| {r.scenario} | {r.load} | {r.duration:.0f} s | {r.requests} | {r.errors} | {r.lost} | "
            f"{_ms(r.percentile(0.5))} | {_ms(r.percentile(0.99))} |")


def _section(results: list[Result], mode: str, command: str) -> str:
    lines = [f"## `{mode}`", "",
             f"`{command}` on {datetime.date.today().isoformat()} ({platform.node()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}).", "",
             "| scenario | load | duration | requests/trials | errors | lost | p50 ms | p99 ms |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [_row(r) for r in results]
    lines += ["", "Notes:", ""]
    for r in results:
        for note in r.notes:
            lines.append(f"- {r.scenario}: {note}")
    return "\n".join(lines) + "\n"


def record(results: list[Result], mode: str, command: str, doc: Path = DOC) -> None:
    text = doc.read_text() if doc.exists() else HEADER
    section = _section(results, mode, command)
    pattern = re.compile(rf"^## `{re.escape(mode)}`\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability")
    parser.add_argument("scenario", choices=["all", "load", "faults", "disk", "hostile"])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    parser.add_argument("--trials", type=int, default=None, help="kill -9 trials per fault (default 10/100)")
    parser.add_argument("--no-record", action="store_true", help="print only; leave docs/RELIABILITY.md alone")
    args = parser.parse_args(argv)
    flag = "--full" if args.full else "--quick"
    command = f"python -m tests.reliability {args.scenario} {flag}"
    if args.trials is not None:
        command += f" --trials {args.trials}"
    print("| scenario | load | duration | requests/trials | errors | lost | p50 ms | p99 ms |", flush=True)
    start = time.monotonic()
    results = run(args.scenario, args.full, args.trials)
    print(f"done in {time.monotonic() - start:.0f} s", flush=True)
    if not args.no_record:
        record(results, f"{flag} {args.scenario}" if args.scenario != "all" else flag, command)
    failed = [r.scenario for r in results if r.failed]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
