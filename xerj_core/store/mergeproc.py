"""The merge worker: a child process that runs a store's background merges outside the writer's interpreter.

py-lmdb releases the GIL around every LMDB call (each get, put, delete and cursor step, batched calls item by
item). A merge thread beside a busy writer therefore trades the GIL on every call, and each trade waits for the
other thread to yield: 20,000 cursor deletes took 5.5 ms alone and 3.3 s beside a thread running Python, and a
merge's swap held the write lock for seconds while using a tenth of that in CPU. A process has its own
interpreter. It plans the merge from its own snapshot and swaps the result in through LMDB's writer lock, which
already serialises the writers of every process on a data directory (each gunicorn worker merges too), while
the writer keeps its core.

Protocol: one JSON line each way over the child's stdin and stdout, one request at a time. The parent sends an
index name; the child answers ``{"merged": bool}`` (``merge_index``'s answer) or ``{"error": text}``. The child
exits at the end of its input (the parent closed the pipe, or died) or after :data:`IDLE_SECONDS` without a
request, so an idle store does not keep a second process's memory; the parent starts another when it needs one.
A merge is planned from a snapshot and checked before its swap, so a request sent again after a child exited
is harmless.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import site
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import IO

import lmdb
import orjson

import xerj_core
from xerj_core.errors import IndexNotFound, XerjError

log = logging.getLogger(__name__)

IDLE_SECONDS = 30.0
# The worker's command (not ``-m``: importing xerj_core.store imports this module before runpy would run it).
_ENTRY = "import sys; from xerj_core.store.mergeproc import main; main(sys.argv[1:])"
# How long closing a store waits for its worker to finish the merge it is in and exit.
EXIT_WAIT_SECONDS = 120.0


class WorkerLost(Exception):
    """The worker exited twice in a row without answering: the store merges in its own process from then on."""


class MergeWorker:
    """The parent's handle on its merge process, started on the first request (and again after it exits)."""

    def __init__(self, path: Path, tail_rows: int, sync: bool, idle_seconds: float = IDLE_SECONDS) -> None:
        self.args = [str(path), str(tail_rows), "1" if sync else "0", repr(idle_seconds)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = os.getpid()

    def merge(self, name: str) -> bool:
        """Merge index ``name`` in the worker (see :func:`xerj_core.store.merge.merge_index`): its answer. Raises
        :class:`XerjError` when the merge failed there, :class:`WorkerLost` when the worker exited twice in a row
        without answering (it could not start, or was killed), ``OSError`` when it could not be started."""
        for _ in range(2):
            proc = self._running()
            try:
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(orjson.dumps(name) + b"\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except (BrokenPipeError, ValueError):
                line = b""
            if line:
                answer = orjson.loads(line)
                if "error" in answer:
                    raise XerjError(f"the merge worker could not merge index [{name}]: {answer['error']}")
                return bool(answer["merged"])
            self._reap()  # it exited (idle, or killed) before answering: a fresh one plans the merge again
        raise WorkerLost(f"the merge worker exited twice while merging index [{name}]")

    def _running(self) -> subprocess.Popen[bytes]:
        if self.pid != os.getpid():
            # A forked copy of the parent: the worker and its pipes are the original's.
            self.proc, self.pid = None, os.getpid()
        if self.proc is None or self.proc.poll() is not None:
            self._reap()
            # -P: the working directory is not put on the path, so the worker imports the parent's xerj_core
            self.proc = subprocess.Popen([sys.executable, "-P", "-c", _ENTRY, *self.args],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_worker_environment())
        return self.proc

    def _reap(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            proc.wait(EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("the merge worker (pid %d) did not exit; killing it", proc.pid)
            proc.kill()
            proc.wait()

    def reap_exited(self) -> None:
        """Collect the worker if it exited on its own (idle), so no zombie process stays behind it."""
        if self.proc is not None and self.pid == os.getpid() and self.proc.poll() is not None:
            self._reap()

    def close(self) -> None:
        """End the worker: it finishes the merge it is in (its swap is one commit either way) and exits."""
        if self.pid == os.getpid():
            self._reap()


def _worker_environment() -> dict[str, str]:
    """The worker's environment: this one, with the directory this xerj_core was imported from first on
    PYTHONPATH (a checkout, an editable install) unless it is a site directory the interpreter searches anyway,
    where putting it first would let its packages shadow the standard library."""
    root = Path(xerj_core.__file__).resolve().parent.parent
    sites = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages(),
             site.getusersitepackages()}
    if any(Path(found).resolve() == root for found in sites if found):
        return dict(os.environ)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}


def serve(path: str, tail_rows: int, sync: bool, idle_seconds: float, requests: IO[bytes], answers: IO[bytes]
          ) -> None:
    """The worker's loop: merge each requested index of the data directory ``path`` and answer."""
    from xerj_core.store.merge import merge_index
    from xerj_core.store.store import Store

    with Store(path, tail_rows=tail_rows, sync=sync, merge_above=None) as store:
        while select.select([requests], [], [], idle_seconds)[0]:
            line = requests.readline()  # one request at a time: nothing waits in the buffer behind it
            if not line:
                return
            name = orjson.loads(line)
            try:
                answer = {"merged": merge_index(store, name)}
            except (IndexNotFound, lmdb.Error, XerjError) as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            answers.write(orjson.dumps(answer) + b"\n")
            answers.flush()


def main(argv: list[str]) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when this worker ends (it closes
    # the pipe, or dies), so a merge under way is not cut short with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="xerj merge worker: %(levelname)s %(name)s: %(message)s")
    path, tail_rows, sync, idle_seconds = argv
    serve(path, int(tail_rows), sync == "1", float(idle_seconds), sys.stdin.buffer, sys.stdout.buffer)

