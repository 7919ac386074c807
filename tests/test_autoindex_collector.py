"""A run, and every task its pool runs, pause Python's cyclic garbage collector while they last and give it back
after: the run's allocations make no reference cycles, and collections set off by them walked what the run holds
(7-11% of each process's CPU on real code)."""

from __future__ import annotations

import gc

import pytest

from xerj_core import hookimpl
from xerj_core.autoindex import parallel, pipeline
from xerj_core.autoindex.detect import DetectorState
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.walk import FileEntry
from xerj_core.engine import Engine
from xerj_core.plugins import get_plugin_manager

from .test_autoindex_executor import generate


class Probe:
    """A corpus-wide detector that notes whether the collector was on at each step it was called in."""

    name = "gcprobe"
    type = "probed"
    tag = "gcprobe@1"
    weight = 0.5
    confidence = 0.5

    def __init__(self) -> None:
        self.seen: dict[str, set[bool]] = {"summarize": set(), "combine": set(), "detect": set()}

    def summarize(self, file_docs):
        self.seen["summarize"].add(gc.isenabled())
        return None

    def combine(self, partials, corpus):
        list(partials)
        self.seen["combine"].add(gc.isenabled())
        return DetectorState(data={})

    def detect(self, file_docs, corpus, state):
        self.seen["detect"].add(gc.isenabled())
        return ()


class ProbePlugin:
    def __init__(self) -> None:
        self.probe = Probe()

    @hookimpl
    def xerj_register_detectors(self, register):
        register(self.probe)


@pytest.fixture
def probed():
    plugin = ProbePlugin()
    pm = get_plugin_manager()
    pm.register(plugin, name="gcprobe")
    try:
        yield pm, plugin.probe
    finally:
        pm.unregister(plugin)


def test_a_run_pauses_the_collector_and_gives_it_back(tmp_path, probed):
    pm, probe = probed
    folder = generate(tmp_path / "gen", 30)
    assert gc.isenabled()
    with Engine(tmp_path / "d", pm) as eng:
        assert run(eng, folder, brain="b", pm=pm).documents > 0
    assert probe.seen == {"summarize": {False}, "combine": {False}, "detect": {False}}
    assert gc.isenabled()


def test_a_failing_run_gives_the_collector_back_and_a_paused_caller_keeps_it_paused(tmp_path, probed, monkeypatch):
    pm, probe = probed
    folder = generate(tmp_path / "gen", 30)

    def fail(*args, **kwargs):
        raise RuntimeError("boom")

    with Engine(tmp_path / "d", pm) as eng:
        monkeypatch.setattr(pipeline, "_run", fail)
        with pytest.raises(RuntimeError, match="boom"):
            run(eng, folder, brain="b", pm=pm)
        assert gc.isenabled()
        gc.disable()
        try:
            with pytest.raises(RuntimeError, match="boom"):
                run(eng, folder, brain="b", pm=pm)
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_each_pool_task_pauses_the_collector_and_gives_it_back(tmp_path, probed):
    pm, probe = probed
    folder = generate(tmp_path / "gen", 30)
    entries = [FileEntry(p.relative_to(folder).as_posix(), p, 0, 0) for p in sorted(folder.rglob("*.md"))]
    plugins = parallel.Plugins.from_manager(pm)

    parallel.parse_batch(plugins, entries[:5], True)
    assert probe.seen["summarize"] == {False} and gc.isenabled()
    probe.seen["summarize"].clear()
    parallel.parse_and_keep(plugins, "gc-token", entries[:10], True, True, 0)
    assert probe.seen["summarize"] == {False} and gc.isenabled()
    kept = [(e.rel_path, parallel.Kept.of(o)) for e, o in zip(entries[10:], parallel.parse_batch(plugins, entries[10:],
                                                                                                  True))]
    assert parallel.adopt_kept(plugins, "gc-token", kept, 1) is None and gc.isenabled()
    ordered, _counters = parallel.combine_kept(plugins, "gc-token", 2)
    assert probe.seen["combine"] == {False} and gc.isenabled()
    parallel.detect_kept(plugins, "gc-token", ordered)
    assert probe.seen["detect"] == {False} and gc.isenabled()
