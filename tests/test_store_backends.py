"""Storage backends are chosen by URL through the xerj_register_storage_backends hook."""

from __future__ import annotations

import pytest

from xerj_core import hookimpl
from xerj_core.engine import Engine
from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.store import Store
from xerj_core.store.backends import OpenStore, collect_backends, open_store


def test_lmdb_is_a_registered_backend_and_a_bare_path_means_lmdb(tmp_path, pm):
    assert "lmdb" in collect_backends(pm)
    with Engine(f"lmdb://{tmp_path}/url", pm) as engine:
        engine.store.put("docs", {"a": 1}, "1")
        assert engine.data_dir == tmp_path / "url"
    with Engine(tmp_path / "url", pm) as engine:
        assert engine.store.count("docs") == 1


def test_unknown_scheme_is_a_clear_error(tmp_path, pm):
    # postgresql:// is built in since the PostgreSQL backend (xerj_postgres); an unknown scheme names the installed ones
    with pytest.raises(IllegalArgument, match="no storage backend for \\[cassandra://\\]; installed: lmdb, postgres, "
                                              "postgresql"):
        open_store("cassandra://localhost/xerj", pm)


def test_a_plugin_adds_a_scheme(tmp_path, pm):
    opened = []

    class Memoryish:
        @hookimpl
        def xerj_register_storage_backends(self, register):
            def opener(url, **options):
                opened.append(url)
                return Store(tmp_path / "elsewhere", **options)

            register("fake", opener)

    plugin = Memoryish()
    pm.register(plugin, name="fake-backend")
    try:
        with Engine("fake://server/db", pm) as engine:
            engine.store.put("x", {"y": 1})
        assert opened == ["fake://server/db"]
    finally:
        pm.unregister(plugin)


def test_a_scheme_registered_twice_names_the_plugin(pm):
    class Again:
        @hookimpl
        def xerj_register_storage_backends(self, register):
            register("lmdb", lambda url, **o: None)

    plugin = Again()
    pm.register(plugin, name="again")
    try:
        with pytest.raises(PluginError, match="again"):
            collect_backends(pm)
    finally:
        pm.unregister(plugin)


def test_an_opener_must_return_an_open_store(tmp_path, pm):
    class Half:
        """Has a few of a store's methods, not all: the engine must say so rather than fail later."""

        listeners: list = []

        def close(self):
            pass

    class Broken:
        @hookimpl
        def xerj_register_storage_backends(self, register):
            register("half", lambda location, **options: Half())

    plugin = Broken()
    pm.register(plugin, name="half-backend")
    try:
        with pytest.raises(PluginError, match=r"\[half://\].*not an open store.*transact"):
            open_store("half://x", pm)
    finally:
        pm.unregister(plugin)
    with Store(tmp_path / "s") as real:
        assert isinstance(real, OpenStore)


def test_each_register_callback_is_typed_with_what_it_takes():
    import typing

    from xerj_core import hookspecs

    def arity(hook):
        hints = typing.get_type_hints(hook, globalns={**vars(hookspecs), **_typing_names()})
        return len(typing.get_args(hints["register"])[0])

    assert arity(hookspecs.xerj_register_storage_backends) == 2  # register(scheme, opener)
    for hook in (hookspecs.xerj_register_detectors, hookspecs.xerj_register_embedders,
                 hookspecs.xerj_register_formats, hookspecs.xerj_register_auth_backends,
                 hookspecs.xerj_register_audit_sinks):
        assert arity(hook) == 1


def _typing_names():
    from xerj_core.autoindex.detect import Detector
    from xerj_core.autoindex.formats import Format
    from xerj_core.embedding import Embedder
    from xerj_core.engine import Engine
    from xerj_core.store.backends import Opener

    return {"Detector": Detector, "Format": Format, "Embedder": Embedder, "Engine": Engine, "Opener": Opener}
