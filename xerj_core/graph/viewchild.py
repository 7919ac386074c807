"""A large sealed view built by a short-lived child process, so the process that serves it keeps none of the build's heap.

Building the sealed view of a million edges allocates and frees a few hundred
megabytes of numpy temporaries. The table itself goes into mapped files (see
:mod:`.mapped`), but glibc keeps about 30 MB of the freed heap in the building
process for good (its mmap threshold rises after large frees), and giving it
back means a process-wide ``malloc_trim`` or ``mallopt``. So a serving process
that finds a large view unbuilt runs ``python -m xerj_core.graph.viewchild``
on the data directory: the child opens the environment read-only, checks its
snapshot holds the same view (:func:`~.hop.view_key`), builds and publishes
it, and exits; the serving process then maps the published files like any
other worker. Processes needing the same view at once take turns on a lock
file per index, so one child builds and the others find its files. Whenever
this does not publish the files (no room, a read-only disk, a snapshot that
moved on, a child that dies or overruns its time), the caller builds in
process as before.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import xerj_core
from xerj_core.graph.mapped import ArrayFiles
from xerj_core.store import IndexReader

log = logging.getLogger(__name__)

# Sealed rows from which a view is built in a child: below, the build's temporaries are small enough that what the
# heap keeps of them does not matter, and a child's start (about 0.4 s of CPU importing numpy, lmdb and the store)
# would cost more than the build.
CHILD_FROM_ROWS = 100_000
# How long a caller waits for the child (or for another process's child) before building itself: bounded, so no
# request waits forever, and generous, since a child still at work would only have its work done twice: a quiet
# machine builds a million rows in about 3 s of CPU, one loaded by ten busy processes took 85 s.
_WAIT_SECONDS = 60.0
_WAIT_PER_ROW = 300e-6
# A child that used no CPU for this long is stuck (a lock it waits for, a stopped process): it is stopped sooner.
_STALL_SECONDS = 20.0
_POLL_SECONDS = 0.05
# The child's exit status when its snapshot holds another view than the caller's (a seal or a delete came between).
MOVED = 3


class ChildBuilds:
    """Sealed views of the data directory ``data`` built by child processes into ``files``."""

    def __init__(self, data: Path, files: ArrayFiles, from_rows: int = CHILD_FROM_ROWS) -> None:
        self.data = data
        self.files = files
        self.from_rows = from_rows  # an attribute, so a test can send small views to a child too

    def build(self, reader: IndexReader, key: str) -> bool:
        """Whether the view ``key`` of ``reader``'s index is published once this returns: by a child this starts,
        or by another process while this waited its turn. False leaves the build to the caller."""
        rows = sum(s.end - s.start for s in reader.segments)
        if rows < self.from_rows or not sys.executable:
            return False
        deadline = time.monotonic() + _WAIT_SECONDS + _WAIT_PER_ROW * rows
        try:
            self.files.root.mkdir(parents=True, exist_ok=True)
            lock = os.open(self.files.root / f".{reader.meta['uuid']}.build.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False  # a read-only disk: nothing can be published
        try:
            while True:
                if self.files.has(key):
                    return True
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass  # another process's child is building (this view or another of the index)
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL_SECONDS)
            if self.files.has(key):
                return True
            return self._run(reader.name, key, deadline)
        finally:
            os.close(lock)  # and with it the lock; a process that dies lets go of it the same way

    def _run(self, index: str, key: str, deadline: float) -> bool:
        env = dict(os.environ)
        # The child imports this very copy of the code, whatever the caller's own sys.path was made of.
        code = str(Path(xerj_core.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (code, env.get("PYTHONPATH")) if p)
        with tempfile.TemporaryFile() as err:
            try:
                # -P: not the working directory first on the child's path, where another copy of the code may lie
                child = subprocess.Popen([sys.executable, "-P", "-m", __name__, str(self.data.resolve()), index, key],
                                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            except OSError as exc:
                log.warning("could not start a child to build the sealed view %s: %s", key, exc)
                return False
            try:
                if not _waited(child, deadline):
                    log.warning("the child building the sealed view %s overran or stalled; building it in process", key)
                    return False
            finally:
                if child.returncode is None:
                    child.kill()
                    child.wait()
            if child.returncode not in (0, MOVED):
                err.seek(0)
                log.warning("the child building the sealed view %s exited with %s: %s", key, child.returncode,
                            err.read()[-2000:].decode(errors="replace"))
        return self.files.has(key)


def _waited(child: subprocess.Popen, deadline: float) -> bool:
    """Whether ``child`` exited before ``deadline`` without going ``_STALL_SECONDS`` without CPU."""
    used, since = _cpu_ticks(child.pid), time.monotonic()
    while True:
        try:
            child.wait(timeout=_POLL_SECONDS)
            return True
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        ticks = _cpu_ticks(child.pid)
        if ticks is None or ticks != used:  # at work (or not measurable: the deadline alone bounds it)
            used, since = ticks, now
        if now >= deadline or now - since >= _STALL_SECONDS:
            return False


def _cpu_ticks(pid: int) -> int | None:
    """The CPU time process ``pid`` has used, in clock ticks; None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the line)
    except (OSError, IndexError, ValueError):
        return None


class _ReadOnly:
    """The data directory's LMDB environment opened read-only, with the few calls a store's reader makes: the
    child takes no write lock (the caller may hold it) and stamps nothing."""

    def __init__(self, path: Path) -> None:
        import lmdb

        from xerj_core.store.env import DB_NAMES

        self.path = path
        self.env = lmdb.open(str(path), readonly=True, lock=True, subdir=True, readahead=False,
                             max_dbs=len(DB_NAMES) + 2, max_readers=256,
                             map_size=max((path / "data.mdb").stat().st_size, 1 << 20))
        self.dbs = {name: self.env.open_db(name.encode(), create=False) for name in DB_NAMES}

    def begin_read(self, *, buffers: bool = False) -> Any:
        return self.env.begin(buffers=buffers)


def main(argv: list[str]) -> int:
    """``DATA INDEX KEY``: build the sealed view ``KEY`` of ``INDEX`` and publish it; 0 once it is published, 3
    (:data:`MOVED`) when this snapshot holds another view."""
    from xerj_core.graph.hop import SealedView, view_key
    from xerj_core.graph.rowdocs import RowDocs
    from xerj_core.graph.rowids import RowIds
    from xerj_core.store import Store

    data, index, key = Path(argv[0]), argv[1], argv[2]
    env = _ReadOnly(data)
    try:
        store = Store(data, env=env)
        with store.read_txn() as raw:
            reader = store.open_reader(raw, index, allow_closed=True)
            if view_key(reader) != key:
                return MOVED
            files = ArrayFiles(data / "views")
            SealedView(reader, files, RowIds(files), row_docs=RowDocs(files))
            return 0 if files.has(key) else 1
    finally:
        env.env.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
