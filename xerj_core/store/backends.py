"""Choosing a storage backend by URL: ``lmdb:///path`` (or a bare path) is built in; plugins add schemes."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar, runtime_checkable
from urllib.parse import unquote, urlsplit

from xerj_core import hookimpl
from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.plugins import collect_schemes

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store.read import IndexReader
    from xerj_core.store.store import BulkItem, BulkOp, IndexInfo
    from xerj_core.store.write import WriteResult, WriteTxn

T = TypeVar("T")


@runtime_checkable
class OpenStore(Protocol):
    """What a storage backend's opener returns: the store every Engine API reads and writes through.

    Writes are transactions (``transact`` runs ``fn`` in one, committed when it
    returns, and an acknowledged write survives a crash); each listener in
    ``listeners`` is called ``(index, put ids, deleted ids)`` after a commit.
    Reads see one snapshot per ``read_txn`` (``open_reader`` opens an index in
    it). The built-in LMDB :class:`~xerj_core.store.store.Store` is the
    reference implementation.
    """

    listeners: list[Callable[[str, list[str], list[str]], None]]

    def close(self) -> None: ...

    def transact(self, fn: Callable[["WriteTxn"], T]) -> T: ...

    def create_index(self, name: str, mapping: Any = None, settings: dict[str, Any] | None = None) -> None: ...

    def delete_index(self, name: str) -> None: ...

    def put_mapping(self, name: str, body: Any) -> None: ...

    def put(self, index: str, doc: Any, doc_id: str | None = None, *, op_type: str = "index",
            auto_create: bool = True) -> "WriteResult": ...

    def delete(self, index: str, doc_id: str) -> "WriteResult": ...

    def update(self, index: str, doc_id: str, partial: Any, *, upsert: Any = None) -> "WriteResult": ...

    def bulk(self, ops: Sequence["BulkOp"], *, auto_create: bool = True) -> list["BulkItem"]: ...

    def read_txn(self) -> contextlib.AbstractContextManager[Any]: ...

    def reader(self, index: str) -> contextlib.AbstractContextManager["IndexReader"]: ...

    def open_reader(self, raw: Any, index: str) -> "IndexReader": ...

    def exists(self, index: str) -> bool: ...

    def index_names(self) -> list[str]: ...

    def index_info(self, index: str) -> "IndexInfo": ...

    def get_mapping(self, index: str) -> dict[str, Any]: ...

    def get(self, index: str, doc_id: str) -> tuple[dict[str, Any], int] | None: ...

    def count(self, index: str) -> int: ...


# ``opener(location, **options)`` opens the store at ``location`` (``tail_rows`` among the options).
Opener = Callable[..., OpenStore]


def collect_backends(pm) -> dict[str, Opener]:
    """Every storage scheme the plugins registered; a scheme registered twice names both plugins."""
    return collect_schemes(pm, "xerj_register_storage_backends", "storage")


def split_target(target: str | Path) -> tuple[str, str]:
    """``(scheme, location)`` of a data directory or backend URL; a bare path means ``lmdb``."""
    text = str(target)
    if "://" not in text:
        return "lmdb", text
    parts = urlsplit(text)
    return parts.scheme, unquote(parts.netloc + parts.path) if parts.scheme == "lmdb" else text


def open_store(target: str | Path, pm, **options: Any) -> OpenStore:
    """The store for ``target`` through the backend registered for its scheme; it must be an :class:`OpenStore`."""
    scheme, location = split_target(target)
    backends = collect_backends(pm)
    opener = backends.get(scheme)
    if opener is None:
        known = ", ".join(sorted(backends)) or "none"
        raise IllegalArgument(f"no storage backend for [{scheme}://]; installed: {known}")
    store = opener(location, **options)
    if not isinstance(store, OpenStore):
        missing = [name for name in _STORE_METHODS if not callable(getattr(store, name, None))]
        raise PluginError(f"the storage backend for [{scheme}://] opened {type(store).__name__}, which is not an "
                          f"open store (missing: {', '.join(missing) or 'listeners'})")
    return store


_STORE_METHODS = [name for name in vars(OpenStore) if not name.startswith("_") and callable(vars(OpenStore)[name])]


def _open_lmdb(location: str, local_dir: Any = None, read_url: str | None = None, **options: Any) -> OpenStore:
    """An LMDB data directory (its own local directory); it has no replicas to read from."""
    from xerj_core.store.store import Store

    if read_url:
        raise IllegalArgument("an lmdb:// store has no replica: --read-url needs a database store")
    return Store(Path(location), **options)


@hookimpl
def xerj_register_storage_backends(register) -> None:
    register("lmdb", _open_lmdb)
