"""Running a request's exact kNN scan on a worker thread while the calling thread ranks its other legs.

A hybrid ranking (a BM25 leg and a kNN leg over one snapshot) spends most of
its kNN leg inside numpy's matrix-vector loop, which releases the GIL; the
BM25 leg is mostly Python and small numpy calls. On a machine with more than
one core the two overlap when the scan runs on a worker thread, so the
request takes about the longer leg rather than their sum. The scan reads
only arrays fixed when its plan was made (see
:class:`~xerj_core.query.knn.KnnPlan`), so the result is the one the calling
thread would have computed; the calling thread always waits for the scan
before it returns, so the snapshot's transaction outlives every read of it.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, TypeVar

Background = TypeVar("Background")
Foreground = TypeVar("Foreground")

# Below this many vector components a scan is cheaper than handing it to a thread (about a millisecond's work).
WORTH_FLOATS = 1 << 20
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    global _pool
    _pool = None  # a forked child (a server's worker) has none of its parent's threads: it starts its own


os.register_at_fork(after_in_child=_forget_pool)


def workers() -> int:
    """How many worker threads scans may use: one per core, none on a single core."""
    cores = os.cpu_count() or 1
    return cores if cores > 1 else 0


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="xerj-scan")
    return _pool


def beside(background: Callable[[], Background], foreground: Callable[[], Foreground], *,
           floats: int) -> tuple[Background, Foreground]:
    """``(background(), foreground())``, the first on a worker thread when ``floats`` (the scan's size) makes
    that worth it and the machine has a second core; else both here, one after the other.

    Whatever either raises is raised here, after both have finished."""
    if floats < WORTH_FLOATS or not workers():
        return background(), foreground()
    future = _executor().submit(background)
    try:
        ahead = foreground()
    finally:
        wait([future])  # even when foreground raised: the scan reads this snapshot until it ends
    return future.result(), ahead
