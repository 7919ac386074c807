"""The one LMDB environment of a data directory: opened once per process, grown on demand, fork-aware."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, TypeVar

import lmdb

T = TypeVar("T")

DB_NAMES = ("indices", "state", "mappings", "src", "ids", "tail", "segs", "cols", "post", "dead",
            "dict", "dictr", "dictn", "aux")
_INITIAL_MAP = 1 << 30
# Grow before a write when more than this share of the map is in use, so MapFullError is rare;
# when it happens anyway the write is retried on a doubled map and never reaches a caller.
_GROW_AT = 0.6
_MAX_RETRIES = 8


class Environment:
    """An open LMDB environment with its named sub-databases."""

    def __init__(self, path: Path, *, map_size: int = _INITIAL_MAP, sync: bool = True) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.pid = os.getpid()
        self.env = lmdb.open(
            str(path), map_size=map_size, max_dbs=len(DB_NAMES) + 2, subdir=True,
            sync=sync, metasync=sync, readahead=False, max_readers=256, lock=True,
        )
        with self.env.begin(write=True) as txn:
            self.dbs = {name: self.env.open_db(name.encode(), txn=txn) for name in DB_NAMES}
        self.write_lock = threading.Lock()

    def begin_read(self, *, buffers: bool = False) -> lmdb.Transaction:
        """A read transaction; with ``buffers`` its values are views of the memory map (valid until it ends)."""
        try:
            return self.env.begin(buffers=buffers)
        except lmdb.MapResizedError:
            # Another process grew the map; adopt its size and try again.
            self.env.set_mapsize(0)
            return self.env.begin(buffers=buffers)

    def write(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn`` in one write transaction and commit it; on a full map grow it and re-run ``fn``."""
        with self.write_lock:
            for _ in range(_MAX_RETRIES):
                self._grow_if_needed()
                try:
                    with self.env.begin(write=True) as txn:
                        return fn(txn)
                except lmdb.MapFullError:
                    self.env.set_mapsize(self.env.info()["map_size"] * 2)
                except lmdb.MapResizedError:
                    self.env.set_mapsize(0)
            raise lmdb.MapFullError("the data directory could not grow its map")  # pragma: no cover

    def _grow_if_needed(self) -> None:
        info = self.env.info()
        used = (info["last_pgno"] + 1) * self.env.stat()["psize"]
        if used > info["map_size"] * _GROW_AT:
            self.env.set_mapsize(info["map_size"] * 2)

    def close(self) -> None:
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
