"""A Dask cluster as autoindex's executor: batch tasks through a Client, the corpus and states scattered once.

What runs where. The run's process keeps the Client and the single writer:
it walks the folder, writes every document and edge, and combines the
corpus-wide detectors' partials. Each task is one batch of files (read, parse,
each file's ``summarize``; or ``detect_file`` per file) on a worker, which
loads the installed plugins itself and refuses a run whose formats or
detectors it does not have (see :mod:`xerj_core.autoindex.parallel`). Workers
read the files by the paths the walk found, so a remote cluster must see the
folder at the same path (a shared filesystem).

A worker that dies mid-batch is Dask's to handle: the scheduler runs the
batch again on another worker, up to ``distributed.scheduler.allowed-failures``
deaths; past that the batch's future raises ``KilledWorker`` and the run
fails with ``BatchFailed`` naming the batch's files, before any edge is
written or the run is recorded as finished.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import pickle
from typing import Any, Callable

from xerj_core.errors import IllegalArgument

__all__ = ["DaskExecutor", "open_dask_executor"]

# How long to wait for a scheduler to answer before saying no cluster is there.
CONNECT_TIMEOUT_S = 20


class DaskExecutor(cf.Executor):
    """A ``concurrent.futures`` executor over a Dask ``Client``; it owns a LocalCluster it was given."""

    def __init__(self, client: Any, cluster: Any = None) -> None:
        self.client = client
        self.cluster = cluster
        # pure=False: two batches with equal arguments are still two tasks (a re-run must run again)
        self._executor = client.get_executor(pure=False)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        return self._executor.submit(fn, *args, **kwargs)

    def broadcast(self, value: Any) -> Any:
        """``value`` sent to the cluster once; the future returned stands for it in task arguments.

        It is a task whose result is ``value``, not scattered data: the
        scheduler keeps the task, so when every worker holding the value has
        died it is computed again instead of being lost with them (scattered
        data would be, and each task needing it would be cancelled). Workers
        fetch it from each other as their detect tasks need it.
        """
        return self.client.submit(_held, _Opaque(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)),
                                  pure=False)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking tasks (cancelling the unfinished ones with ``cancel_futures``), then close the client and
        a LocalCluster of its own."""
        # ClientExecutor cancels what is left only when not asked to wait for it
        self._executor.shutdown(wait=wait and not cancel_futures)
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


class _Opaque:
    """Pickled bytes Dask passes through as they are (it would walk a tuple or dict looking for futures)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def _held(opaque: _Opaque) -> Any:
    return pickle.loads(opaque.payload)


def open_dask_executor(address: str | None, workers: int | None) -> DaskExecutor:
    """A client of the scheduler at ``address`` (``host:port``), else of a new LocalCluster of ``workers`` processes."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise IllegalArgument("the dask executor needs Dask's distributed scheduler, which is not installed: "
                              "pip install 'xerj[dask]'") from None
    if address is None:
        # one thread per worker: the batches are pure-Python work, which threads of one process would serialize
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return DaskExecutor(Client(cluster), cluster)
    if workers is not None:
        raise IllegalArgument(f"--workers sizes a cluster xerj starts; the cluster at dask://{address} "
                              "has the workers it has")
    try:
        client = Client(f"tcp://{address}", timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise IllegalArgument(f"no Dask scheduler answered at dask://{address} within {CONNECT_TIMEOUT_S}s "
                              f"({type(exc).__name__}: {exc})") from None
    return DaskExecutor(client)
