"""Sealed views built by a child process: the serving process maps what the child published and builds nothing,
and every way the child can fail (it dies, it hangs, its snapshot moved on, another process holds the turn) ends
in an answer, built in process when need be."""

from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
import types

import numpy as np
import pytest

from xerj_core.graph import hop, rowids, viewchild
from xerj_core.graph.mapped import ArrayFiles

from tests.test_graph_hops import _file_backed

T0 = 1_767_225_600_000
EDGES = ".xerj-memory-b-edges"
PARAMS = {"node": "n1", "hops": 2, "as_of": T0, "limit": 100, "include_evidence": "false"}


def _brain(engine, edges: int = 60) -> dict:
    """A brain spread over several sealed segments (the engine's tail holds 8 rows), one of them dead; its ego
    from a view in private memory."""
    for i in range(edges):
        engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i % 23}", "type": "t", "valid_at": T0,
                                "weight": (i % 7) / 7})
    gone = engine.graph.ego("b", {"node": "n2", "as_of": T0, "limit": 1})["edges"][0]["edge_id"]
    engine.graph.unlink("b", gone, invalid_at=T0 + 5)
    engine.graph.views = hop.ViewCache()
    return engine.graph.ego("b", PARAMS)


def _children(engine) -> hop.ViewCache:
    """A fresh view cache (another worker) whose every sealed view goes to a child."""
    path = engine.store.path
    views = hop.ViewCache(path / "views", path)
    views.children.from_rows = 0
    engine.graph.views = views
    return views


def _tables(engine) -> list:
    return [p for p in (engine.store.path / "views").iterdir() if not p.name.startswith(".") and ".ids." not in p.name and ".docs." not in p.name]


def _refuse(*args, **kwargs):
    raise AssertionError("this process must map the child's view, not build it")


def test_a_child_builds_the_view_and_the_serving_process_only_maps_it(engine, monkeypatch):
    expected = _brain(engine)
    _children(engine)
    monkeypatch.setattr(hop.SealedView, "_built", staticmethod(_refuse))
    monkeypatch.setattr(rowids, "_read_segment", _refuse)
    assert engine.graph.ego("b", PARAMS) == expected
    with engine.store.reader(EDGES) as reader:
        view = engine.graph.views.sealed(reader)
        assert _tables(engine) == [engine.store.path / "views" / hop.view_key(reader)]
    assert all(_file_backed(a) for a in view.table.arrays().values())


@pytest.mark.parametrize("executable", ["/bin/false", "/nonexistent/python"])
def test_a_child_that_fails_leaves_the_build_to_the_serving_process(engine, monkeypatch, executable):
    expected = _brain(engine)
    _children(engine)
    monkeypatch.setattr(sys, "executable", executable)
    assert engine.graph.ego("b", PARAMS) == expected
    assert len(_tables(engine)) == 1  # published by this process, as without a child


@pytest.mark.parametrize("body, wait", [("exec sleep 300", 300.0), ('exec {python} -c "while True: pass"', 3.0)])
def test_a_child_that_hangs_is_stopped_and_the_serving_process_builds(engine, monkeypatch, tmp_path, body, wait):
    """Stuck (no CPU for a while) or busy past the deadline: the child is stopped and the answer built here."""
    expected = _brain(engine)
    _children(engine)
    hangs = tmp_path / "hangs"
    hangs.write_text(f"#!/bin/sh\n{body.format(python=sys.executable)}\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hangs))
    monkeypatch.setattr(viewchild, "_STALL_SECONDS", 1.0)
    monkeypatch.setattr(viewchild, "_WAIT_SECONDS", wait)
    monkeypatch.setattr(viewchild, "_WAIT_PER_ROW", 0.0)
    start = time.monotonic()
    assert engine.graph.ego("b", PARAMS) == expected
    assert time.monotonic() - start < 60
    assert len(_tables(engine)) == 1


def test_a_child_at_work_is_waited_for_past_the_stall_bound(engine, monkeypatch, tmp_path):
    """Only a child using no CPU counts as stuck: one that computes for longer than the stall bound finishes."""
    _brain(engine)
    _children(engine)
    done = tmp_path / "done"
    works = tmp_path / "works"
    works.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time, pathlib\nt = time.process_time()\n"
                     f"while time.process_time() - t < 1.5: pass\npathlib.Path(\"{done}\").touch()'\n")
    works.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(works))
    monkeypatch.setattr(viewchild, "_STALL_SECONDS", 1.0)
    engine.graph.ego("b", PARAMS)
    assert done.exists()


def test_a_child_whose_snapshot_moved_on_publishes_nothing_under_the_callers_key(engine):
    _brain(engine)
    views = _children(engine)
    with engine.store.reader(EDGES) as reader:
        old = hop.view_key(reader)
    for i in range(20):  # seals more segments
        engine.graph.link("b", {"src": "n9", "dst": f"z{i}", "type": "t", "valid_at": T0})
    with engine.store.reader(EDGES) as reader:
        assert hop.view_key(reader) != old
        assert views.children.build(reader, old) is False
    assert not (engine.store.path / "views" / old).exists()


def test_one_process_builds_at_a_time_and_the_others_wait_for_its_files(engine, monkeypatch):
    _brain(engine)
    views = _children(engine)
    monkeypatch.setattr(viewchild.ChildBuilds, "_run", _refuse)  # this process never gets the turn
    monkeypatch.setattr(viewchild, "_WAIT_SECONDS", 0.5)
    root = engine.store.path / "views"
    root.mkdir(exist_ok=True)
    with engine.store.reader(EDGES) as reader:
        key = hop.view_key(reader)
        lock = os.open(root / f".{reader.meta['uuid']}.build.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker's child is building
            start = time.monotonic()
            assert views.children.build(reader, key) is False  # it overran: the caller builds
            assert 0.4 < time.monotonic() - start < 30
            files = ArrayFiles(root)
            other = threading.Timer(0.2, lambda: hop.SealedView(reader, files, rowids.RowIds(files)))
            other.start()  # ... and this time it publishes while the caller waits its turn
            monkeypatch.setattr(viewchild, "_WAIT_SECONDS", 30.0)
            assert views.children.build(reader, key) is True
            other.join()
        finally:
            os.close(lock)
    assert len(_tables(engine)) == 1


def test_small_views_are_built_in_process(engine, monkeypatch):
    """A child's start costs more than building a small view: below ``from_rows`` none is started."""
    expected = _brain(engine)
    path = engine.store.path
    engine.graph.views = hop.ViewCache(path / "views", path)
    monkeypatch.setattr(viewchild.ChildBuilds, "_run", _refuse)
    assert engine.graph.ego("b", PARAMS) == expected
    assert len(_tables(engine)) == 1


def test_the_view_key_names_which_sealed_rows_are_live():
    """Two snapshots of one layout with as many dead rows but different ones (a pinned reader: rows that died
    since are live in it, rows written since are not) hold different views, so they must not share files."""

    def reader(dead: list[int]) -> types.SimpleNamespace:
        live = np.ones(40, bool)
        live[dead] = False
        segments = [types.SimpleNamespace(start=0, end=16, sealed_at=1), types.SimpleNamespace(start=16, end=32,
                                                                                               sealed_at=2)]
        return types.SimpleNamespace(segments=segments, live=live, meta={"uuid": "u"},
                                     dead_rows=lambda: np.flatnonzero(~live))

    assert hop.view_key(reader([3, 35])) == hop.view_key(reader([3, 35]))
    assert hop.view_key(reader([3, 35])) != hop.view_key(reader([3, 20]))
