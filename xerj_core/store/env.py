"""The one LMDB environment of a data directory: opened once per process, grown on demand, fork-aware."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import lmdb

from xerj_core.errors import InsufficientStorage
from xerj_core.store import format as store_format
from xerj_core.store import residency

T = TypeVar("T")

DB_NAMES = ("indices", "state", "mappings", "src", "ids", "tail", "segs", "cols", "post", "dead",
            "dict", "dictr", "dictn", "aux")
_INITIAL_MAP = 1 << 30
# Grow before a write when more than this share of the map is in use, so MapFullError is rare;
# when it happens anyway the write is retried on a doubled map and never reaches a caller.
_GROW_AT = 0.6
_MAX_RETRIES = 8
# Free bytes under which a refused commit is blamed on a full disk.
_FULL_BELOW = 64 << 20


class _ReaderGate:
    """Counts this process's open read transactions so the map is resized only when none is open.

    LMDB's ``mdb_env_set_mapsize`` may remap the file, and a read transaction
    still open in another thread would then read freed memory. A resize waits
    for every reader to end and holds new ones back meanwhile; a thread that
    already holds a reader may open another (a nested snapshot), or the
    resize and that thread would wait for each other.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._open = 0
        self._resizing = False
        self._mine = threading.local()

    def held(self) -> int:
        """Read transactions the calling thread holds."""
        return getattr(self._mine, "n", 0)

    def enter(self) -> None:
        mine = self.held()
        with self._cond:
            while self._resizing and mine == 0:
                self._cond.wait()
            self._open += 1
        self._mine.n = mine + 1

    def leave(self) -> None:
        self._mine.n = self.held() - 1
        with self._cond:
            self._open -= 1
            if self._open == 0 and self._resizing:  # the one wait for no reader open is resize's, once it began
                self._cond.notify_all()

    def resize(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (a ``set_mapsize``) once no read transaction is open in this process."""
        if self.held():
            # This thread's own reader would never end while it waits here.
            raise InsufficientStorage("the LMDB map is full and cannot grow while this thread holds a read "
                                      "transaction: the write was not stored")
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            try:
                while self._open:
                    self._cond.wait()
                fn()
            finally:
                self._resizing = False
                self._cond.notify_all()


class _GatedRead:
    """A read transaction that tells the gate when it ends; everything else is the LMDB transaction's."""

    __slots__ = ("_txn", "_gate", "get", "cursor", "id", "stat")

    def __init__(self, txn: lmdb.Transaction, gate: _ReaderGate) -> None:
        self._txn = txn
        self._gate = gate
        self.get = txn.get
        self.cursor = txn.cursor
        self.id = txn.id
        self.stat = txn.stat

    def abort(self) -> None:
        gate, self._gate = self._gate, None
        self._txn.abort()
        if gate is not None:
            gate.leave()

    commit = abort  # a read transaction commits nothing

    def __enter__(self) -> "_GatedRead":
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()

    def __getattr__(self, name: str):
        return getattr(self._txn, name)


class Environment:
    """An open LMDB environment with its named sub-databases."""

    def __init__(self, path: Path, *, map_size: int = _INITIAL_MAP, sync: bool = True) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.pid = os.getpid()
        self.sync = sync
        self.env = lmdb.open(
            str(path), map_size=map_size, max_dbs=len(DB_NAMES) + 2, subdir=True,
            sync=sync, metasync=sync, readahead=False, max_readers=256, lock=True,
        )
        try:
            with self.env.begin(write=True) as txn:
                self.dbs = {name: self.env.open_db(name.encode(), txn=txn) for name in DB_NAMES}
                self.format_found = store_format.check_and_stamp(txn, self.dbs["aux"], str(path))
        except BaseException:
            self.env.close()
            raise
        self.write_lock = threading.Lock()
        self.readers = _ReaderGate()
        # Held while the map may move (a resize remaps it, close unmaps it) and while release_pages advises
        # the range it found: advising a range the map has left could zero memory that took its place.
        self._map_lock = threading.Lock()
        self._closed = False
        self._map_ranges: list[tuple[int, int]] | None = None  # where the map is, while it stays there

    def begin_read(self, *, buffers: bool = False) -> Any:
        """A read transaction; with ``buffers`` its values are views of the memory map (valid until it ends).

        End it with ``abort()`` (or a ``with`` block): the map can only grow once it has ended.
        """
        for attempt in range(2):
            self.readers.enter()
            try:
                return _GatedRead(self.env.begin(buffers=buffers), self.readers)
            except lmdb.MapResizedError:
                self.readers.leave()
                if attempt:
                    raise
                # Another process grew the map; adopt its size and try again.
                self._set_mapsize(0)
            except BaseException:
                self.readers.leave()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _set_mapsize(self, size: int) -> None:
        with self._map_lock:
            self._map_ranges = None
            self.readers.resize(lambda: self.env.set_mapsize(size))

    def write(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn`` in one write transaction and commit it; on a full map grow it and re-run ``fn``."""
        with self.write_lock:
            for _ in range(_MAX_RETRIES):
                self._grow_if_needed()
                try:
                    with self.env.begin(write=True) as txn:
                        return fn(txn)
                except lmdb.MapFullError:
                    self._set_mapsize(self.env.info()["map_size"] * 2)
                except lmdb.MapResizedError:
                    self._set_mapsize(0)
                except lmdb.Error as exc:
                    raise self._storage_error(exc) from exc
            raise InsufficientStorage(f"the LMDB map of the data directory [{self.path}] could not grow: the write "
                                      f"was not stored")  # pragma: no cover

    def _storage_error(self, exc: lmdb.Error) -> Exception:
        """A failed commit as :class:`InsufficientStorage` when the disk is full or failing, else ``exc``.

        LMDB reports a write the filesystem refused (``ENOSPC`` included) as
        an I/O error on commit; the free space on the disk tells the two apart
        for the message. The aborted transaction left the data as it was.
        """
        text = str(exc)
        if not any(s in text for s in ("Input/output error", "No space left", "Disk quota")):
            return exc
        free = shutil.disk_usage(self.path).free
        if free < _FULL_BELOW:
            reason = (f"the disk holding the data directory [{self.path}] is full ({free} bytes free): the write "
                      f"was not stored; free some space and retry")
        else:
            reason = f"the data directory [{self.path}] could not be written ({text}): the write was not stored"
        return InsufficientStorage(reason)

    def _grow_if_needed(self) -> None:
        info = self.env.info()
        used = (info["last_pgno"] + 1) * self.env.stat()["psize"]
        if used > info["map_size"] * _GROW_AT and not self.readers.held():
            self._set_mapsize(info["map_size"] * 2)

    def pages_mapped(self) -> Any:
        """Which pages of the map's used part this process maps now, for :meth:`release_pages` ``since``; None
        when that cannot be read (``release_pages`` then drops every page)."""
        with self._map_lock:
            if self._closed:
                return None
            if self._map_ranges is None:
                self._map_ranges = residency.mapped_ranges(self.path / "data.mdb")
            info = self.env.info()
            room = (info["last_pgno"] + 1) * self.env.stat()["psize"]  # pages past the file's end hold nothing
            used = []
            for start, end in self._map_ranges:
                if room <= 0:
                    break
                used.append((start, min(end, start + room)))
                room -= end - start
            present = residency.present_pages(used)
            return None if present is None else (self._map_ranges, used, present)

    def release_pages(self, *, heap: bool = True, since: Any = None) -> bool:
        """Give back the memory a long run of writes leaves resident: the map's pages, and with ``heap`` the C
        heap's free pages (LMDB's freed overflow pages among them). ``since`` (what :meth:`pages_mapped` gave
        before a task): only the pages mapped since then, so the pages other threads keep using (a writer's
        B-tree) stay mapped.

        The map's pages count in this process's RSS once touched, until the
        whole file is; dropping them costs the next reads a page fault each.
        Safe at any time, from any thread, a write transaction open or not:
        the map is read-only (LMDB writes through ``pwrite``). True when every page of the map was dropped.
        """
        every = True
        with self._map_lock:
            if not self._closed:
                if self._map_ranges is None:
                    self._map_ranges = residency.mapped_ranges(self.path / "data.mdb")
                if since is not None and since[0] is self._map_ranges:  # the map has not moved since
                    every = residency.drop_pages_since(since[1], since[2]) is None
                else:
                    residency.drop_pages(self._map_ranges)
        if heap:
            residency.trim_heap()
        return every

    def close(self) -> None:
        with self._map_lock:
            self._closed = True
            self._map_ranges = None
            self.env.close()


_OPEN: dict[str, tuple[Environment, int]] = {}
_OPEN_LOCK = threading.Lock()


def acquire(path: Path, **options) -> Environment:
    """The process's environment for ``path``; LMDB forbids opening one twice in a process.

    A process forked after opening (gunicorn with preload) gets its own handle:
    an LMDB handle must never cross a fork.
    """
    key = str(path.resolve())
    with _OPEN_LOCK:
        found = _OPEN.get(key)
        if found is not None and found[0].pid == os.getpid():
            _OPEN[key] = (found[0], found[1] + 1)
            return found[0]
        env = Environment(path, **options)
        _OPEN[key] = (env, 1)
        return env


def release(env: Environment) -> None:
    key = str(env.path.resolve())
    with _OPEN_LOCK:
        found = _OPEN.get(key)
        if found is None or found[0] is not env:
            return
        if found[1] > 1:
            _OPEN[key] = (env, found[1] - 1)
        else:
            del _OPEN[key]
            env.close()
