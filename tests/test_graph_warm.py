"""GraphService.warm: a brain's sealed view is built before its first ego, and a later engine maps what it published."""

from __future__ import annotations

import pytest

from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import XerjError
from xerj_core.graph.hop import SealedView
from xerj_core.graph.rowdocs import RowDocs
from xerj_core.graph.rowids import RowIds

T0 = 1_767_225_600_000


def _published(engine) -> list[str]:
    views = engine.store.path / "views"
    return sorted(p.name for p in views.iterdir() if not p.name.startswith(".")) if views.is_dir() else []


def test_warm_publishes_the_view_the_first_ego_would_build(tmp_path, pm, monkeypatch):
    config = EngineConfig(tail_rows=8)  # several sealed segments
    with Engine(tmp_path / "data", pm, config=config) as engine:
        for i in range(40):
            engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i % 13}", "type": "t", "valid_at": T0})
        assert _published(engine) == []
        engine.graph.warm("b")
        published = _published(engine)
        uuid = engine.store.index_info(".xerj-memory-b-edges").uuid
        assert any(".ids." in name for name in published) and any(".docs." in name for name in published)
        assert any(name.startswith(f"{uuid}@") for name in published)  # the table
        answer = engine.graph.ego("b", {"node": "n1", "hops": 2, "as_of": T0})
        assert _published(engine) == published  # the ego found the view ready
    # Another engine on the same data (the server `xerj brain` starts) builds nothing: it maps those files.
    def no_build(*_args, **_kwargs):
        raise AssertionError("a published view was built again")

    monkeypatch.setattr(SealedView, "_built", staticmethod(no_build))
    monkeypatch.setattr(RowIds, "_read", no_build)
    monkeypatch.setattr(RowDocs, "_read", no_build)
    with Engine(tmp_path / "data", pm, config=config) as engine:
        assert engine.graph.ego("b", {"node": "n1", "hops": 2, "as_of": T0}) == answer


def test_warm_of_a_brain_without_edges_does_nothing_and_a_bad_name_is_refused(engine):
    engine.graph.warm("nothing-here")
    assert not (engine.store.path / "views").is_dir() or not any((engine.store.path / "views").iterdir())
    with pytest.raises(XerjError):
        engine.graph.warm("Bad Name")


def test_serve_builds_every_brains_view_before_its_workers_start(tmp_path, pm):
    from .test_http_serve import Server, request

    with Engine(tmp_path / "data", pm, config=EngineConfig(tail_rows=8)) as engine:
        for brain in ("one", "two"):
            for i in range(40):
                engine.graph.link(brain, {"src": f"n{i % 5}", "dst": f"m{i % 13}", "type": "t", "valid_at": T0})
        assert engine.graph.brains() == ["one", "two"] and _published(engine) == []
        uuids = [engine.store.index_info(f".xerj-memory-{brain}-edges").uuid for brain in ("one", "two")]
    server = Server(tmp_path / "data", tmp_path / "serve.log", workers=1)
    try:
        views = sorted(p.name for p in (tmp_path / "data" / "views").iterdir() if not p.name.startswith("."))
        assert all(any(name.startswith(f"{uuid}@") for name in views) for uuid in uuids)  # before any request
        assert "graph views of 2 brain(s) ready" in (tmp_path / "serve.log").read_text()
        status, body = request(server.port, "GET", f"/_graph/one/ego?node=n1&hops=2&as_of={T0}")
        assert status == 200 and body["edges"]
    finally:
        server.stop()
