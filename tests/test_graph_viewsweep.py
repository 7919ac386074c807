"""A dropped index's mapped view files are removed: at its drop, and when the graph service starts after a drop it
did not see; other indices' files and sets being written stay."""

from __future__ import annotations

from xerj_core.graph import viewsweep
from xerj_core.graph.service import GraphService

T0 = 1_767_225_600_000


def _brain(engine, name: str, edges: int = 40) -> str:
    """A brain over several sealed segments (the engine's tail holds 8 rows) whose ego was asked, so its view
    files exist; the uuid of its edges index."""
    for i in range(edges):
        engine.graph.link(name, {"src": f"n{i % 5}", "dst": f"m{i % 13}", "type": "t", "valid_at": T0})
    assert engine.graph.ego(name, {"node": "n1", "hops": 2, "as_of": T0})["edges"]
    return engine.store.index_info(f".xerj-memory-{name}-edges").uuid


def _owners(engine) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in (engine.store.path / "views").iterdir():
        owner = path.name.lstrip(".").split("@")[0].split(".ids.")[0].split(".docs.")[0].split(".build")[0]
        counts[owner] = counts.get(owner, 0) + 1
    return counts


def test_dropping_an_edges_index_removes_its_view_files_and_no_other(engine):
    gone, kept = _brain(engine, "gone"), _brain(engine, "kept")
    (engine.store.path / "views" / f".{gone}.build.lock").touch()
    writing = engine.store.path / "views" / f".{gone}@abc.123.deadbeef"  # a set another process is writing
    writing.mkdir()
    before = _owners(engine)
    assert before[gone] >= 3 and before[kept] >= 2  # a table, id sets, the lock
    engine.store.delete_index(".xerj-memory-gone-edges")
    assert _owners(engine) == {kept: before[kept], gone: 1} and writing.is_dir()  # its writer removes it
    assert engine.graph.ego("kept", {"node": "n1", "hops": 2, "as_of": T0})["edges"]
    # Recreated under the same name, the brain gets a new uuid and files of its own.
    again = _brain(engine, "gone")
    assert again != gone and _owners(engine)[again] >= 2


def test_a_drop_the_service_did_not_see_is_swept_when_a_graph_service_starts(engine):
    gone, kept = _brain(engine, "gone"), _brain(engine, "kept")
    engine.store.drop_listeners.clear()  # as if another program dropped it, or the process died after the commit
    engine.store.delete_index(".xerj-memory-gone-edges")
    assert gone in _owners(engine)
    GraphService(engine.store, notify=lambda *a: None, search=engine.search, embedder_of=lambda brain: None)
    assert set(_owners(engine)) == {kept}


def test_a_missing_or_empty_views_folder_costs_nothing(engine, tmp_path):
    assert viewsweep.sweep(tmp_path / "absent", engine.store) == 0
    assert viewsweep.sweep(tmp_path, engine.store) == 0
