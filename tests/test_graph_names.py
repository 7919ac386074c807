"""Nodes by name on the Foam vault: ego and recall seeds take an id, a title, an alias or a unique file stem."""

from __future__ import annotations

import shutil

import pytest
from falcon.testing import TestClient

from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import GraphError
from xerj_core.graph.names import resolve_nodes
from xerj_http import create_app

from .conftest import CORPORA

COMMANDS = "user/features/commands.md"


@pytest.fixture(scope="module")
def foam_brain(tmp_path_factory):
    """The Foam vault indexed as brain ``foam``, its commands note given two aliases in its front matter."""
    from xerj_core.plugins import get_plugin_manager

    root = tmp_path_factory.mktemp("names")
    vault = root / "foam-docs"
    shutil.copytree(CORPORA / "foam-docs", vault)
    note = vault / COMMANDS
    note.write_text("---\naliases: [Command palette, palette of commands]\n---\n" + note.read_text())
    with Engine(root / "data", get_plugin_manager(builtins_only=True), config=EngineConfig()) as engine:
        run(engine, vault, brain="foam")
        yield engine


def ego(engine, node, **params):
    return engine.graph.ego("foam", {"node": node, **params})


@pytest.mark.parametrize("typed", ["Foam Commands", "foam commands", "Command palette", "PALETTE OF COMMANDS",
                                   "commands", "user/features/commands", "user/features/commands.md",
                                   "features/commands"])
def test_ego_by_title_alias_stem_or_path_is_the_note_itself(foam_brain, typed):
    by_id = ego(foam_brain, COMMANDS)
    by_name = ego(foam_brain, typed)
    assert by_name["node"] == COMMANDS and by_name["seeds"] == [COMMANDS]
    assert by_name["node_found"] is True
    if typed != COMMANDS:
        assert by_name["resolved"] == {typed: COMMANDS}
    assert by_name["edges"] and by_name["edges"] == by_id["edges"]


def test_an_id_is_itself_and_reports_nothing_resolved(foam_brain):
    body = ego(foam_brain, COMMANDS)
    assert body["node_found"] is True and "resolved" not in body and "not_found" not in body


def test_a_heading_picks_the_section(foam_brain):
    body = ego(foam_brain, "commands#foam-vscode.create-note command")
    assert body["node"] == "user/features/commands.md#foam-vscodecreate-note-command"


def test_an_ambiguous_name_is_a_graph_error_listing_the_candidates(foam_brain):
    with pytest.raises(GraphError) as caught:
        ego(foam_brain, "index")
    reason = caught.value.reason
    assert "[node] 'index' is ambiguous" in reason and "index.md" in reason and "user/index.md" in reason
    client = TestClient(create_app(foam_brain, foam_brain.pm, insecure=True))
    result = client.simulate_get("/_graph/foam/ego", params={"node": "index"})
    assert result.status_code == 400 and result.json["error"]["type"] == "graph_error"
    assert set(result.json) == {"error", "status"}


def test_an_unknown_name_is_200_with_node_found_false_and_the_closest_names(foam_brain):
    client = TestClient(create_app(foam_brain, foam_brain.pm, insecure=True))
    result = client.simulate_get("/_graph/foam/ego", params={"node": "Foam Comands"})
    assert result.status_code == 200
    body = result.json
    assert body["node_found"] is False and body["edges"] == []
    closest = body["not_found"]["Foam Comands"]
    assert {"name": "foam commands", "node": COMMANDS} in closest


def test_nodes_resolve_each_name(foam_brain):
    body = foam_brain.graph.ego("foam", {"nodes": "Command palette,user/index.md,nothing-like-this-zzz"})
    assert body["seeds"] == [COMMANDS, "user/index.md", "nothing-like-this-zzz"]
    assert body["node_found"] is False and list(body["not_found"]) == ["nothing-like-this-zzz"]


def test_recall_graph_seeds_and_reachable_take_names(foam_brain):
    by_name, shown = foam_brain.graph.reachable("foam", ["Command palette"], hops=1)
    by_id, _ = foam_brain.graph.reachable("foam", [COMMANDS], hops=1)
    assert by_name == by_id and len(by_name) > 1 and shown["seeds_not_found"] == 0
    with pytest.raises(GraphError, match=r"\[graph.seeds\] 'index' is ambiguous"):
        foam_brain.graph.reachable("foam", ["index"], hops=1)
    foam_brain.memory.store("foam", {"text": "a memory beside the vault"})
    recall = foam_brain.memory.recall("foam", {"query": "memory", "graph": {
        "mode": "restrict", "seeds": ["Foam Commands"], "hops": 1}})
    assert recall["graph"]["reachable"] == len(by_id)


def test_resolve_nodes_is_one_call_for_other_surfaces(foam_brain):
    found = resolve_nodes(foam_brain.store, "foam", ["palette of commands", COMMANDS, "zzzz-unknown"])
    assert found.nodes == (COMMANDS, COMMANDS, "zzzz-unknown")
    assert found.resolved == {"palette of commands": COMMANDS} and list(found.unknown) == ["zzzz-unknown"]
    assert not found.found


def test_a_name_makes_the_nodes_index_a_target_an_id_does_not(foam_brain):
    """Resolution reads the nodes indices only for a name, and authorization is asked for exactly what is read."""
    asked: list[list[str]] = []

    def recording(principal, op, privilege, targets):
        asked.append(list(targets))

    foam_brain.memory.store("foam", {"text": "a memory for the recall below"})
    client = TestClient(create_app(foam_brain, foam_brain.pm, insecure=True, policy=recording))
    assert client.simulate_get("/_graph/foam/ego", params={"node": COMMANDS}).status_code == 200
    assert client.simulate_get("/_graph/foam/ego", params={"node": "Command palette"}).status_code == 200
    recall = {"query": "memory", "graph": {"mode": "restrict", "seeds": ["Foam Commands"]}}
    assert client.simulate_post("/_memory/foam/_recall", json=recall).status_code == 200
    nodes = foam_brain.store.get(".xerj-memory-foam-edges", "__xerj-brain-meta")[0]["nodes_index"].split(",")
    assert asked[0] == [".xerj-memory-foam-edges"]
    assert asked[1] == [".xerj-memory-foam-edges", *nodes]
    assert set(nodes) <= set(asked[2])


def test_the_closest_names_are_the_nearest_first_above_one_half_the_first_index_naming_a_shared_one():
    from xerj_core.autoindex.detect import Corpus
    from xerj_core.graph.names import CLOSEST, NodeNames, _closest

    notes = NodeNames(Corpus({}), {}, {"foam commands": "commands.md", "foam": "foam.md", "recipes": "recipes.md",
                                        "foam-commands": "notes/foam-commands.md"})
    web = NodeNames(Corpus({}), {}, {"foam commands": "web/commands.html", "foam comands list": "list.html",
                                     **{f"page {i}": f"p{i}.html" for i in range(50)}})
    assert _closest("  Foam Comands ", [notes, web]) == (
        {"name": "foam commands", "node": "commands.md"},  # 0.96; named in both indices: the first one's node
        {"name": "foam-commands", "node": "notes/foam-commands.md"},  # 0.88
        {"name": "foam comands list", "node": "list.html"},  # 0.83
        {"name": "foam", "node": "foam.md"})  # 0.5; "recipes" and the pages are below one half
    assert len(_closest("page", [web])) == CLOSEST
    assert _closest("zzzz", [notes, web]) == ()


def test_a_typed_name_finds_a_note_with_a_hash_in_its_name_or_decomposed_accents(tmp_path):
    """As a wikilink does: "C# tips" is the note, not a heading " tips" of C.md; "café crème" typed composed finds
    the file a Mac named decomposed."""
    import unicodedata

    from xerj_core.plugins import get_plugin_manager

    vault = tmp_path / "v"
    vault.mkdir()
    decomposed = unicodedata.normalize("NFD", "Café Crème.md")
    (vault / decomposed).write_text("# Café Crème\n\n## Mousse\n\nSee [[C# tips]].\n")
    (vault / "C# tips.md").write_text("# C# tips\n\n## Async\n\nSee [[C]].\n")
    (vault / "C.md").write_text("# C\n\n## Pointers\n\nSee [[café crème]].\n")
    with Engine(tmp_path / "data", get_plugin_manager(builtins_only=True), config=EngineConfig()) as engine:
        run(engine, vault, brain="v")
        nodes = {typed: engine.graph.ego("v", {"node": typed})["node"]
                 for typed in ("C# tips", "c# tips#async", "C#Pointers", "C# tips#nowhere", "café crème",
                               "CAFÉ CRÈME#mousse")}
        closest = engine.graph.ego("v", {"node": "café crèm"})["not_found"]["café crèm"]
    assert closest[0] == {"name": "café crème", "node": decomposed}  # the name as it is typed, composed
    assert nodes == {"C# tips": "C# tips.md", "c# tips#async": "C# tips.md#async", "C#Pointers": "C.md#pointers",
                     "C# tips#nowhere": "C# tips.md", "café crème": decomposed,
                     "CAFÉ CRÈME#mousse": f"{decomposed}#mousse"}
