"""Scenario 3: the data directory on a small tmpfs; writes past the space get 507, reads go on, writes resume."""

from __future__ import annotations

import json
import os
import time

from tests.reliability.common import (Client, Result, cleanup, count_signal_deaths, mount_tmpfs, start_server, unmount,
                                      workdir)


def run(rounds: int) -> Result:
    result = Result("disk full (16 MB tmpfs)", f"{rounds} fill-and-free rounds, --workers 2")
    root = workdir()
    mount = root / "small"
    if not mount_tmpfs(mount, "16m"):
        result.notes.append("cannot mount a tmpfs here (needs root): skipped")
        cleanup(root)
        return result
    begin = time.monotonic()
    server = start_server(root, workers=2, secured=False, data=mount / "data")
    try:
        c = Client(server.port)
        acked: list[str] = []
        for rnd in range(rounds):
            free = os.statvfs(mount)
            ballast = mount / "ballast"
            ballast.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - (384 << 10)))
            refused = None
            for n in range(200):
                doc_id = f"r{rnd}-{n}"
                status, body = c.call("PUT", f"/disk/_doc/{doc_id}", {"pad": "z" * (100 << 10)})
                result.requests += 1
                if status == 201:
                    acked.append(doc_id)
                elif status == 507 and body["error"]["type"] == "insufficient_storage":
                    refused = doc_id
                    break
                else:
                    result.errors += 1
                    result.notes.append(f"round {rnd}: {status} {json.dumps(body)[:200]}")
                    break
            if refused is None:
                result.errors += 1
                result.notes.append(f"round {rnd}: the disk never filled")
                break
            status, _ = c.call("GET", f"/disk/_doc/{acked[0]}")
            result.errors += status != 200  # reads keep working on a full disk
            ballast.unlink()
            status, _ = c.call("PUT", f"/disk/_doc/{refused}", {"pad": "z" * (100 << 10)})
            result.errors += status != 201  # the same write once space is freed
            acked.append(refused)
            # Make room for the next round: drop this round's documents.
            for doc_id in [a for a in acked if a.startswith(f"r{rnd}-")][1:]:
                c.call("DELETE", f"/disk/_doc/{doc_id}")
                acked.remove(doc_id)
        server.stop()
        server = start_server(root, workers=2, secured=False, data=mount / "data")
        c = Client(server.port)
        status, body = c.call("POST", "/disk/_mget", {"ids": acked})
        result.lost = sum(1 for d in body["docs"] if not d.get("found")) if status == 200 else len(acked)
        result.notes.append(f"{len(acked)} acknowledged documents read back after a restart")
        result.latencies = c.latencies
    finally:
        server.stop()
        unmount(mount)
        count_signal_deaths(result, root)
        cleanup(root)
    result.duration = time.monotonic() - begin
    return result
