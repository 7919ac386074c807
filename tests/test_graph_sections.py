"""Ego with ``sections``: a note's links sit on its sections, and a seed that is a file expands from them too."""

from __future__ import annotations

import os
import shutil

import pytest
from falcon.testing import TestClient

from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine, EngineConfig
from xerj_http import create_app

from .conftest import CORPORA
from .test_autoindex import edges_of


@pytest.fixture(scope="module")
def foam(tmp_path_factory):
    """The Foam vault indexed as brain ``foam``, and every edge it holds."""
    from xerj_core.plugins import get_plugin_manager

    root = tmp_path_factory.mktemp("sections")
    vault = root / "foam-docs"
    shutil.copytree(CORPORA / "foam-docs", vault)
    with Engine(root / "data", get_plugin_manager(builtins_only=True), config=EngineConfig()) as engine:
        run(engine, vault, brain="foam")
        yield engine, list(edges_of(engine, "foam").values())


def sections_of(edges: list[dict], note: str) -> list[str]:
    """What the brain holds of ``note``'s sections, found the slow way: every node ``note#...`` an edge the note
    taught names."""
    return sorted({end for edge in edges if edge["src_file"] == note for end in (edge["src"], edge["dst"])
                   if end.startswith(note + "#")})


def edge_ids(body: dict) -> set[str]:
    return {edge["edge_id"] for edge in body["edges"]}


def notes_linking_out(edges: list[dict]) -> list[str]:
    """The Foam notes whose sections link to another file."""
    return sorted({edge["src_file"] for edge in edges if edge["type"] in ("wikilink", "mdlink")
                   and edge["src"].startswith(edge["src_file"] + "#")})


def test_a_notes_own_links_are_its_first_hop_with_sections(foam):
    engine, edges = foam
    notes = notes_linking_out(edges)
    assert len(notes) >= 20
    for note in notes:
        sections = sections_of(edges, note)
        body = engine.graph.ego("foam", {"node": note, "sections": "true", "limit": 1000})
        assert body["seeds"] == [note] and body["node"] == note and sorted(body["sections"]) == sections
        # the same answer as the note and its sections given as seeds
        listed = engine.graph.ego("foam", {"nodes": ",".join([note, *sections]), "limit": 1000})
        assert edge_ids(body) == edge_ids(listed)
        links = {edge["edge_id"] for edge in edges if edge["src"] in sections and edge["type"] == "wikilink"}
        assert links <= edge_ids(body)
        assert all(edge["direction"] == "out" for edge in body["edges"] if edge["edge_id"] in links)
        assert not set(body["neighbors"]) & {note, *sections}
        plain = engine.graph.ego("foam", {"node": note, "limit": 1000})
        assert "sections" not in plain and not links & edge_ids(plain)  # without it: the file card's edges alone


def test_a_section_or_a_node_that_is_no_file_adds_nothing(foam):
    engine, edges = foam
    note = notes_linking_out(edges)[0]
    section = sections_of(edges, note)[0]
    body = engine.graph.ego("foam", {"node": section, "sections": True})
    assert body["sections"] == [] and body["seeds"] == [section]
    assert edge_ids(body) == edge_ids(engine.graph.ego("foam", {"node": section}))


def test_sections_past_the_frontier_cap_are_counted(foam):
    engine, edges = foam
    note = max(notes_linking_out(edges), key=lambda n: len(sections_of(edges, n)))
    whole = len(sections_of(edges, note))
    assert whole >= 3
    saved = engine.graph.frontier_cap
    engine.graph.frontier_cap = 3  # the note and two of its sections
    try:
        body = engine.graph.ego("foam", {"node": note, "sections": "true"})
    finally:
        engine.graph.frontier_cap = saved
    assert len(body["sections"]) == 2
    assert body["not_shown"]["frontier_clipped"] == whole - 2


def test_a_renamed_heading_is_a_section_as_of_before_the_rename(tmp_path, pm):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "target.md").write_text("# Target\n\nLinked to.\n")
    note = folder / "note.md"
    note.write_text("# Note\n\n## Old heading\n\nSee [[target]].\n")
    os.utime(note, (1, 1))  # valid_at: the file's mtime, 1,000 ms
    with Engine(tmp_path / "data", pm) as engine:
        run(engine, folder, brain="n", clock=lambda: 1_000)
        note.write_text("# Note\n\n## New heading\n\nSee [[target]].\n")
        os.utime(note, (2, 2))
        run(engine, folder, brain="n", clock=lambda: 2_000)

        def linked_from(as_of: int) -> list[str]:
            body = engine.graph.ego("n", {"node": "note.md", "sections": "true", "as_of": as_of})
            return [edge["src"] for edge in body["edges"] if edge["type"] == "wikilink"]

        assert linked_from(1_500) == ["note.md#old-heading"]
        assert linked_from(2_500) == ["note.md#new-heading"]


def test_sections_over_http(foam):
    engine, edges = foam
    note = notes_linking_out(edges)[0]
    app = create_app(engine, engine.pm, insecure=True)
    try:
        client = TestClient(app)
        found = client.simulate_get("/_graph/foam/ego", params={"node": note, "sections": "true",
                                                                 "include_nodes": "true"})
        assert found.status_code == 200 and sorted(found.json["sections"]) == sections_of(edges, note)
        # the sections the edges name are hydrated as the seeds are
        named = {end for edge in found.json["edges"] for end in (edge["src"], edge["dst"])}
        assert set(found.json["nodes"]) == {note, *found.json["neighbors"], *(named & set(found.json["sections"]))}
        refused = client.simulate_get("/_graph/foam/ego", params={"node": note, "sections": "maybe"})
        assert refused.status_code == 400 and "sections" in refused.json["error"]["reason"]
    finally:
        app.close()
