"""Durability and sharing: acknowledged writes survive kill -9; a second process reads without refresh."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from xerj_core.store import Store

WRITER = textwrap.dedent(
    """
    import sys
    from xerj_core.store import Store
    store = Store(sys.argv[1], tail_rows=16)
    i = 0
    while True:
        store.put("crash", {"n": i, "text": "acknowledged write number %d" % i}, "doc-%d" % i)
        print(i, flush=True)  # printed only after the commit returned: the acknowledgement
        i += 1
    """
)


def test_acknowledged_writes_survive_kill_9(tmp_path):
    data = tmp_path / "data"
    for round_no in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(data)], stdout=subprocess.PIPE, text=True)
        acknowledged = []
        deadline = time.monotonic() + 30
        target = 40 + 37 * round_no
        while len(acknowledged) < target and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acknowledged.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert len(acknowledged) >= target, "writer died before reaching its target"
        with Store(data, tail_rows=16) as store:
            with store.reader("crash") as r:
                for i in acknowledged:
                    source, _version = r.get(f"doc-{i}")
                    assert source["n"] == i
                # Columns and postings are intact, not just the sources.
                col = r.column("n")
                assert col.present[r.live].all()
                rows, _tfs = r.postings("text", "acknowledged")
                assert set(rows.tolist()) >= {r.row_of(f"doc-{i}") for i in acknowledged}


READER = textwrap.dedent(
    """
    import sys
    from xerj_core.store import Store
    store = Store(sys.argv[1])
    for line in sys.stdin:
        doc_id = line.strip()
        found = store.get("shared", doc_id)
        print("missing" if found is None else found[0]["v"], flush=True)
    """
)


def test_two_processes_see_each_others_writes(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.put("shared", {"v": "first"}, "a")
        proc = subprocess.Popen([sys.executable, "-c", READER, str(data)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            for i in range(20):
                store.put("shared", {"v": f"value-{i}"}, f"k{i}")
                proc.stdin.write(f"k{i}\n")
                proc.stdin.flush()
                assert proc.stdout.readline().strip() == f"value-{i}"
            store.delete("shared", "k3")
            proc.stdin.write("k3\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "missing"
        finally:
            proc.stdin.close()
            proc.wait(timeout=10)
