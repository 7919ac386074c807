"""Plugin discovery: entry points, allow/block lists, fixture-registered plugins, misspelled hooks, docs."""

from __future__ import annotations

import inspect
import json
import re

import click
import pluggy
import pytest
from click.testing import CliRunner

from xerj_core import hookimpl, hookspecs
from xerj_core.audit import AuditTrail
from xerj_core.audit_query import AuditQuery
from xerj_core.errors import PluginError
from xerj_core.cli import build_cli
from xerj_core.commands import plugin_rows
from xerj_core.plugins import get_plugin_manager

from .conftest import REPO

HOOK_NAMES = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
                    if name.startswith("xerj_"))


class FakePlugin:
    @hookimpl
    def xerj_register_commands(self, cli):
        @cli.command("hello-fake")
        def hello():
            click.echo("hello from a fake plugin")


def test_builtins_load_through_entry_points(pm):
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert "core_commands" in names
    assert pm.origins["core_commands"].builtin


def test_block_list_switches_a_builtin_off(monkeypatch):
    monkeypatch.setenv("XERJ_DISABLE_PLUGINS", "core_commands")
    pm = get_plugin_manager()
    assert not pm.has_plugin("core_commands")


def test_allow_list_limits_third_party_plugins_only(monkeypatch):
    monkeypatch.setenv("XERJ_LOAD_PLUGINS", "no-such-plugin")
    pm = get_plugin_manager()
    origins = [pm.origin(p) for p in pm.get_plugins()]
    assert origins and all(o.builtin for o in origins)


def test_fake_plugin_registered_in_a_fixture_adds_a_command(pm):
    fake = FakePlugin()
    pm.register(fake, name="fake")
    try:
        result = CliRunner().invoke(build_cli(pm), ["hello-fake"])
        assert result.output.strip() == "hello from a fake plugin"
        rows = plugin_rows(pm, include_builtins=False, hook=None)
        assert {"name": "fake", "version": None, "hooks": ["xerj_register_commands"]} in rows
    finally:
        pm.unregister(fake)


def test_misspelled_hookimpl_is_rejected():
    class Misspelled:
        @hookimpl
        def xerj_register_detector(self, register):  # missing the final "s"
            pass

    with pytest.raises(pluggy.PluginValidationError):
        get_plugin_manager(load_entrypoints=False, extra_plugins=[("typo", Misspelled())])


def test_plugins_command_prints_json_rows(pm):
    runner = CliRunner()
    everything = json.loads(runner.invoke(build_cli(pm), ["plugins", "--all"]).output)
    assert any(row["name"] == "core_commands" for row in everything)
    assert all(set(row) - {"embedders"} == {"name", "version", "hooks"} for row in everything)
    # Embedder plugins say what each embedder is and where its model comes from.
    declared = [e for row in everything for e in row.get("embedders", ())]
    assert {"lexical-feature-hash", "wordllama-l2-supercat-256",
            "wordllama-l2-supercat-256-sif-hash-2048"} <= {e["id"] for e in declared}
    hybrid = next(e for e in declared if e["id"] == "wordllama-l2-supercat-256-sif-hash-2048")
    assert (hybrid["dims"], hybrid["license"]) == (2304, "MIT") and "wordllama" in hybrid["source"]
    assert all("xerj_register_embedders" in row["hooks"] for row in everything if "embedders" in row)
    assert all(isinstance(e["dims"], int) and e["license"] and e["source"] for e in declared)
    only = json.loads(runner.invoke(build_cli(pm), ["plugins", "--all", "--hook", "xerj_register_commands"]).output)
    assert only and all("xerj_register_commands" in row["hooks"] for row in only)
    third_party = json.loads(runner.invoke(build_cli(pm), ["plugins"]).output)
    assert all(not pm.origins[row["name"]].builtin for row in third_party if row["name"] in pm.origins)


def test_version_flag(pm):
    result = CliRunner().invoke(build_cli(pm), ["--version"])
    assert result.exit_code == 0 and result.output.startswith("xerj, version ")


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hook_is_typed_and_documented(name):
    spec = getattr(hookspecs, name)
    signature = inspect.signature(spec)
    assert spec.__doc__ and "Return" in spec.__doc__, f"{name} must state its return contract"
    assert all(p.annotation is not inspect.Parameter.empty for p in signature.parameters.values())
    docs = (REPO / "docs" / "plugins.md").read_text()
    args = ", ".join(signature.parameters)
    assert f"`{name}({args})`" in docs, f"docs/plugins.md must document `{name}({args})`"


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hook_has_a_test(name):
    tests = "\n".join(p.read_text() for p in (REPO / "tests").rglob("test_*.py"))
    assert re.search(rf"def test_hook_{name}\b", tests), f"no test_hook_{name} in tests/"


def test_hook_xerj_register_commands(pm):
    fake = FakePlugin()
    pm.register(fake, name="fake")
    try:
        assert "hello-fake" in build_cli(pm).commands
    finally:
        pm.unregister(fake)


def test_hook_xerj_documents_written(engine):
    seen = []

    class Watcher:
        @hookimpl
        def xerj_documents_written(self, index, ids, deleted):
            seen.append((index, list(ids), list(deleted)))

    watcher = Watcher()
    engine.pm.register(watcher, name="watcher")
    try:
        engine.store.put("watched", {"a": 1}, "one")
        engine.store.delete("watched", "one")
    finally:
        engine.pm.unregister(watcher)
    assert seen == [("watched", ["one"], []), ("watched", [], ["one"])]


def test_hook_xerj_audit_event(engine, pm):
    """The hook as the HTTP layer fires it: the Audit middleware, one event per request, success or refusal."""
    from falcon.testing import TestClient

    from xerj_http import create_app

    seen = []

    class Sink:
        @hookimpl
        def xerj_audit_event(self, event):
            seen.append(dict(event))

    sink = Sink()
    pm.register(sink, name="sink")
    try:
        client = TestClient(create_app(engine, pm, insecure=True))
        assert client.simulate_put("/books/_doc/1", json={"title": "Dune"}).status_code == 201
        assert client.simulate_get("/_graph/notes/ego", params={"node": "a", "hops": "3"}).status_code == 400
    finally:
        pm.unregister(sink)
    assert [(e["op"], e["outcome"], e["status"]) for e in seen] == [
        ("doc.index", "success", 201), ("graph.ego", "failure", 400)]
    assert seen[0]["resource"].startswith("books") and seen[1]["resource"].startswith(".xerj-memory-notes-edges")
    assert seen[1]["privilege"] == "read"


def test_audit_observers_run_after_the_sinks_and_refuse_nothing(engine):
    """Observers see each event after the sinks appended it; an observer's failure refuses nothing."""
    seen = []

    class Watcher:
        @hookimpl
        def xerj_audit_event(self, event):
            seen.append((dict(event), engine.audit.readable().search(AuditQuery())["total"]))

    class Broken:
        @hookimpl
        def xerj_audit_event(self, event):
            raise RuntimeError("observer bug")

    watcher, broken = Watcher(), Broken()
    engine.pm.register(watcher, name="watcher")
    engine.pm.register(broken, name="broken-watcher")
    try:
        engine.audit.record({"op": "search", "outcome": "success"})
    finally:
        engine.pm.unregister(watcher)
        engine.pm.unregister(broken)
    assert seen == [({"op": "search", "outcome": "success"}, 1)]


def _provider_roundtrip(pm, hook_name):
    from xerj_core.plugins import collect_registrations

    thing = object()

    class Provider:
        pass

    def impl(register):
        register(thing)

    impl.__name__ = hook_name
    setattr(Provider, hook_name, staticmethod(hookimpl(impl)))
    provider = Provider()
    pm.register(provider, name="provider")
    try:
        found = [args for plugin, args in collect_registrations(pm, hook_name) if plugin == "provider"]
    finally:
        pm.unregister(provider)
    return found == [(thing,)]


def test_hook_xerj_register_auth_backends(pm):
    assert _provider_roundtrip(pm, "xerj_register_auth_backends")


def test_hook_xerj_register_audit_sinks(pm, tmp_path):
    """The core opens every registered sink on the data directory and fans each event out to all of them."""
    assert _provider_roundtrip(pm, "xerj_register_audit_sinks")
    appended = []

    class MemorySink:
        name = "memory"

        def open(self, data_dir, config):
            self.data_dir = data_dir
            return self

        def append(self, event):
            appended.append(dict(event))

        def close(self):
            pass

    class Provider:
        @hookimpl
        def xerj_register_audit_sinks(self, register):
            register(MemorySink())

    provider = Provider()
    pm.register(provider, name="memory-sink")
    try:
        trail = AuditTrail(pm, tmp_path, None)
        assert sorted(sink.name for sink in trail.sinks) == ["jsonl", "memory"]
        trail.record({"op": "doc.index", "resource": "books/1"})
        assert appended == [{"op": "doc.index", "resource": "books/1"}]
        assert trail.readable().search(AuditQuery())["entries"][0]["resource"] == "books/1"
        pm.register(Provider(), name="memory-sink-twice")
        with pytest.raises(PluginError, match=r"audit sink \[memory\] is registered twice"):
            AuditTrail(pm, tmp_path, None)
    finally:
        pm.unregister(name="memory-sink-twice")
        pm.unregister(provider)


def test_hook_xerj_register_storage_backends(pm):
    assert _provider_roundtrip(pm, "xerj_register_storage_backends")


def test_hook_xerj_register_executors(pm):
    """A registered scheme is what --executor opens; the built-ins are there and a scheme taken twice is refused."""
    import concurrent.futures as cf

    from xerj_core.autoindex.executors import ExecutorRequest, collect_executors, open_executor
    from xerj_core.autoindex.parallel import InlineExecutor
    from xerj_core.errors import IllegalArgument

    assert _provider_roundtrip(pm, "xerj_register_executors")
    assert {"inline", "process", "dask"} <= set(collect_executors(pm))
    asked = []

    class Provider:
        @hookimpl
        def xerj_register_executors(self, register):
            register("recording", lambda request: asked.append(request) or InlineExecutor())

    provider = Provider()
    pm.register(provider, name="recording-executor")
    try:
        executor = open_executor("recording://cluster:1234/x", pm, workers=3)
        assert isinstance(executor, cf.Executor) and executor.submit(sum, [1, 2]).result() == 3
        assert asked == [ExecutorRequest("recording", "cluster:1234/x", 3)]
        assert isinstance(open_executor("inline", pm), InlineExecutor)
        with pytest.raises(IllegalArgument, match=r"no executor for \[nosuch\]; installed: dask, inline, process"):
            open_executor("nosuch", pm)
        pm.register(Provider(), name="recording-twice")
        with pytest.raises(PluginError, match="executor scheme 'recording', already registered by"):
            collect_executors(pm)
    finally:
        pm.unregister(provider)
        if pm.has_plugin("recording-twice"):
            pm.unregister(name="recording-twice")


def test_the_plugins_tutorial_builds_a_detector_that_passes_its_own_tests(tmp_path):
    """docs/plugins.md's tutorial, its files written out exactly as printed: the package's own tests pass."""
    import os
    import subprocess
    import sys

    docs = (REPO / "docs" / "plugins.md").read_text()
    tutorial = docs[docs.index("## Tutorial"):]
    written = []
    for block in re.findall(r"```(?:python|toml)\n# ([\w/.]+)\n(.*?)```", tutorial, re.S):
        path, body = block
        target = tmp_path / "xerj-seealso" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
        written.append(path)
    assert written == ["pyproject.toml", "xerj_seealso/__init__.py", "tests/test_seealso.py"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "xerj-seealso")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd=tmp_path / "xerj-seealso", env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout
