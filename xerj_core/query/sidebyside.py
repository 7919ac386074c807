"""Running a hybrid's legs side by side: lexical legs on a worker thread while the caller's thread scans vectors.

A kNN leg's scan is one compiled pass over its rows' int8 copies (or a numpy
product per part), which releases the GIL; a BM25 leg is mostly Python. So
the caller first plans its scans (everything they read from the store, and
their Python set-up), then hands the lexical legs to the worker (which gets
the GIL as soon as the caller enters the scan) and scans; once done with its
legs the worker takes runs of the scan's rows too (see
:func:`~xerj_core.query.knn.knn_top`'s ``helper``), so the hybrid's work is
spread over two cores rather than run leg after leg. The answer is the same
either way.

That pays only when a second core is idle. :func:`spare_worker` says whether
one is: the process may run on two CPUs or more, the load average leaves one
free, and no other request holds the worker (one hybrid uses it at a time; the
others run their legs in turn, as on one core). Nothing is configured: on one
core, or on a busy machine, every leg runs on the calling thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

_LOAD_EVERY = 1.0  # seconds between readings of the load average (it moves on a 5-second tick)

_lock = threading.Lock()
_busy = threading.Lock()  # held by the one request whose legs the worker runs
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_reading = [0.0, 0.0]  # when the load average was read, and what it was
# How many requests ran their legs each way, and how many lone kNN scans shared their rows with the worker or
# ran alone (benchmarks print them: a figure says which way it was made).
runs = {"side_by_side": 0, "in_turn": 0}
scans = {"side_by_side": 0, "in_turn": 0}


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _load() -> float:
    now = time.monotonic()
    if now - _reading[0] > _LOAD_EVERY:
        try:
            _reading[1] = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - no load average here
            _reading[1] = 0.0
        _reading[0] = now
    return _reading[1]


def _worker() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        # a forked child inherits the pool but not its thread: work sent there would wait forever
        if _pool is None or _pool_pid != os.getpid():
            _pool, _pool_pid = ThreadPoolExecutor(1, thread_name_prefix="xerj-leg"), os.getpid()
        return _pool


def idle_core() -> bool:
    """Whether this process may use a second CPU that the machine leaves idle (affinity and load average)."""
    cpus = _cpus()
    # the load average counts this process's own threads: up to 2 while its hybrids run side by side (so a
    # bound of ``cpus`` would turn them off by their own doing); below ``cpus + 1`` the others' runnable tasks
    # leave part of a core idle on average. At 5-9 on 2 cores, legs side by side were measured no faster than
    # in turn and cost a few percent more CPU.
    return cpus >= 2 and _load() < cpus + 1


@contextlib.contextmanager
def spare_worker(tally: dict[str, int] = runs) -> Iterator[Callable[[Callable[[], T]], Future[T]] | None]:
    """``submit(fn)`` running ``fn`` on the worker thread, or None when legs must run in turn (see module doc);
    ``tally`` (:data:`runs`, :data:`scans`) counts which it was.

    Every future must be waited for inside the block."""
    if not idle_core() or not _busy.acquire(blocking=False):
        tally["in_turn"] += 1
        yield None
        return
    try:
        tally["side_by_side"] += 1
        yield _worker().submit
    finally:
        _busy.release()
