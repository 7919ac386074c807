"""The merge worker processes' CPU seconds and written bytes, for benchmarks that time a store's writes."""

from __future__ import annotations

import os

from xerj_core.store import Store


class MergeWorkers:
    """CPU seconds and bytes written by the store's merge worker processes (``xerj_core.store.mergeproc``), which
    ``time.process_time`` and this process's ``/proc/self/io`` do not count: read from each live worker's
    ``/proc/<pid>/stat`` and ``/proc/<pid>/io``, the last figures of one that exited kept (0 off Linux)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: dict[int, tuple[float, int]] = {}
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.last = (0.0, 0)

    def since_last(self) -> tuple[float, int]:
        """CPU seconds and bytes written since the previous call (the first: since the workers started)."""
        now = self.totals()
        spent = (now[0] - self.last[0], now[1] - self.last[1])
        self.last = now
        return spent

    def totals(self) -> tuple[float, int]:
        merger = getattr(self.store, "_merger", None)
        proc = merger.worker.proc if merger is not None and merger.worker is not None else None
        if proc is not None:
            try:
                with open(f"/proc/{proc.pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{proc.pid}/io") as io:
                    wchar = next(int(line.split()[1]) for line in io if line.startswith("wchar:"))
                self.seen[proc.pid] = ((int(fields[11]) + int(fields[12])) / self.tick, wchar)
            except (OSError, StopIteration, IndexError, ValueError):
                pass
        return sum(cpu for cpu, _ in self.seen.values()), sum(w for _, w in self.seen.values())
