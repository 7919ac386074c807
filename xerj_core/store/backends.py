"""Choosing a storage backend by URL: ``lmdb:///path`` (or a bare path) is built in; plugins add schemes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

from xerj_core.errors import IllegalArgument, PluginError
from xerj_core import hookimpl
from xerj_core.plugins import collect_registrations

Opener = Callable[..., Any]


def collect_backends(pm) -> dict[str, Opener]:
    """Every storage scheme the plugins registered; a scheme registered twice names both plugins."""
    found: dict[str, tuple[str, Opener]] = {}
    for plugin, args in collect_registrations(pm, "xerj_register_storage_backends"):
        if len(args) != 2 or not isinstance(args[0], str) or not callable(args[1]):
            raise PluginError(f"plugin {plugin!r} must call register(scheme, opener)")
        scheme, opener = args
        if scheme in found:
            raise PluginError(f"plugin {plugin!r} registered storage scheme {scheme!r}, "
                              f"already registered by {found[scheme][0]!r}")
        found[scheme] = (plugin, opener)
    return {scheme: opener for scheme, (_plugin, opener) in found.items()}


def split_target(target: str | Path) -> tuple[str, str]:
    """``(scheme, location)`` of a data directory or backend URL; a bare path means ``lmdb``."""
    text = str(target)
    if "://" not in text:
        return "lmdb", text
    parts = urlsplit(text)
    return parts.scheme, unquote(parts.netloc + parts.path) if parts.scheme == "lmdb" else text


def open_store(target: str | Path, pm, **options: Any) -> Any:
    """The store for ``target`` through the backend registered for its scheme."""
    scheme, location = split_target(target)
    backends = collect_backends(pm)
    opener = backends.get(scheme)
    if opener is None:
        known = ", ".join(sorted(backends)) or "none"
        raise IllegalArgument(f"no storage backend for [{scheme}://]; installed: {known}")
    return opener(location, **options)


def _open_lmdb(location: str, **options: Any) -> Any:
    from xerj_core.store.store import Store

    return Store(Path(location), **options)


@hookimpl
def xerj_register_storage_backends(register) -> None:
    register("lmdb", _open_lmdb)
