"""Derived arrays kept as files beside the data and mapped read-only, so their pages are shared page cache.

A sealed view of a large edges index is tens of megabytes of numpy arrays
that every process serving the brain needs and that only change when the
segment layout does. Built into ``.npy`` files under ``<data>/views/`` and
mapped back read-only, those pages count as the file cache (shared by every
gunicorn worker, dropped under memory pressure and read back on demand)
rather than as each process's private memory. A set of files is written
into a private temporary folder and renamed into place whole, so a reader
never maps half a set; the first process to finish wins and the others map
its files.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

_META = "meta.json"


class ArrayFiles:
    """Sets of named arrays under one folder, each set under a key (``<owner>@<version>``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def load(self, key: str) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The arrays (mapped read-only) and metadata of the set ``key``, or None when it was never written."""
        folder = self.root / key
        try:
            meta = json.loads((folder / _META).read_text())
            # Plain ndarray views of the maps: numpy's memmap subclass costs a Python call on every indexing.
            arrays = {name: np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r")) for name in meta["arrays"]}
        except (OSError, ValueError, KeyError):
            return None
        return arrays, meta

    def has(self, key: str) -> bool:
        """Whether the set ``key`` is published (its metadata is written last, inside the folder renamed into place)."""
        return (self.root / key / _META).is_file()

    def writer(self, key: str) -> "ArrayWriter | None":
        """A writer for the set ``key``, or None when the folder cannot be written (the caller builds in memory)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            temp = self.root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            temp.mkdir()
        except OSError:
            return None
        return ArrayWriter(self, key, temp)

    def forget(self, key: str) -> None:
        """Remove the set ``key`` (best effort: a process mapping it keeps its pages until it lets go)."""
        shutil.rmtree(self.root / key, ignore_errors=True)

    def forget_others(self, key: str) -> None:
        """Remove the other sets of ``key``'s owner (older layouts of the same index); best effort, since a
        process still mapping them keeps its pages until it lets go."""
        prefix = key.split("@", 1)[0] + "@"
        for path in self.root.glob(prefix + "*"):
            if path.name != key:
                shutil.rmtree(path, ignore_errors=True)


class ArrayWriter:
    """Arrays allocated straight into files of a private folder, then published as one set."""

    def __init__(self, files: ArrayFiles, key: str, folder: Path) -> None:
        self.files = files
        self.key = key
        self.folder = folder
        self.arrays: dict[str, np.memmap] = {}

    def alloc(self, name: str, size: int, dtype: Any) -> np.ndarray:
        array = np.lib.format.open_memmap(self.folder / f"{name}.npy", mode="w+", dtype=dtype, shape=(size,))
        self.arrays[name] = array
        return array

    def publish(self, meta: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """Flush, move the set into place (or keep the one another process published first) and map it back."""
        try:
            for array in self.arrays.values():
                array.flush()
            (self.folder / _META).write_text(json.dumps({**meta, "arrays": list(self.arrays)}))
        except OSError:
            self.abandon()  # the arrays already built stay usable in this process, unshared
            return None
        self.arrays.clear()
        final = self.files.root / self.key
        try:
            os.rename(self.folder, final)
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)  # another process published this key first
        else:
            self.files.forget_others(self.key)
        return self.files.load(self.key)

    def abandon(self) -> None:
        self.arrays.clear()
        shutil.rmtree(self.folder, ignore_errors=True)
