"""Folders never collide: each root has its own dataset indices, brains see only their own, old data migrates."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tests.http_helpers import client  # noqa: F401 - fixture
from xerj_core.autoindex.migrate import migrate
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import CATALOG_INDEX, FILES_INDEX, LocalSink, dataset_index, file_state_id
from xerj_core.engine import Engine
from xerj_core.errors import IllegalArgument

FIXTURE = Path(__file__).parent / "fixtures" / "autoindex-layout1.tar.gz"


def vault(folder: Path, title: str, other: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "index.md").write_text(f"# {title}\n\nThis vault links to [[{other}]].\n")
    (folder / f"{other}.md").write_text(f"# {other.title()}\n\nOnly in {title}. Back to [[index]].\n")
    return folder


def titles(client, brain, node):  # noqa: F811
    ego = client.simulate_get(f"/_graph/{brain}/ego", params={"node": node, "include_nodes": "true"}).json
    return {node: summary["title"] for node, summary in ego["nodes"].items() if summary}


def test_two_folders_with_the_same_paths_keep_their_own_documents(tmp_path, engine, client):  # noqa: F811
    one = run(engine, vault(tmp_path / "v1", "Vault one", "apples"))
    two = run(engine, vault(tmp_path / "v2", "Vault two", "bees"))
    assert one.datasets != two.datasets
    assert titles(client, "v1", "index.md")["index.md"] == "Vault one"
    assert titles(client, "v2", "index.md")["index.md"] == "Vault two"
    for summary, mine in ((one, "apples.md"), (two, "bees.md")):
        overview = client.simulate_get(f"/_graph/{summary.brain}/overview").json
        assert overview["nodes"]["total"] == engine.store.count(summary.datasets[0]) == 4
        assert overview["nodes_index"] == summary.datasets[0]
        hits = client.simulate_post(f"/{summary.datasets[0]}/_search",
                                    json={"query": {"match": {"text": "vault"}}, "size": 50}).json["hits"]["hits"]
        assert {h["_source"]["ax_path"] for h in hits} == {"index.md", mine}
    # a re-run of the first folder changes nothing in the second
    again = run(engine, tmp_path / "v1")
    assert again.files_unchanged == 2 and titles(client, "v2", "index.md")["index.md"] == "Vault two"
    roots = {LocalSink(engine.store, engine.graph).load(b).root for b in ("v1", "v2")}
    assert roots == {str((tmp_path / "v1").resolve()), str((tmp_path / "v2").resolve())}


def test_a_brain_holds_one_folder_but_follows_it_when_it_moves(tmp_path, engine):
    first = vault(tmp_path / "a" / "notes", "A", "apples")
    other = vault(tmp_path / "b" / "notes", "B", "bees")
    run(engine, first)
    with pytest.raises(IllegalArgument, match="another name"):
        run(engine, other)
    assert run(engine, other, brain="notes-b").files_indexed == 2
    moved = first.rename(tmp_path / "moved")
    summary = run(engine, moved, brain="notes")
    assert summary.files_unchanged == 2 and summary.files_indexed == 0
    assert LocalSink(engine.store, engine.graph).load("notes").root == str(moved.resolve())


def test_a_data_dir_of_the_previous_layout_is_migrated_on_open(tmp_path, pm):
    """The fixture was written by the build before roots had ids: two vaults, both with an index.md, one index."""
    unpacked = tmp_path / "fixture"
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(unpacked, filter="data")
    data = unpacked / "data"
    with Engine(data, pm) as engine:
        assert not engine.store.exists("ax-notes")
        sink = LocalSink(engine.store, engine.graph)
        v1, v2 = (dataset_index("ax-notes", sink.load(b).root_id) for b in ("v1", "v2"))
        assert engine.store.count(v1) == 5 and engine.store.count(v2) == 4
        # index.md's card was last written by v2: it is v2's, and v1 reads its index.md again on its next run
        assert engine.store.get(v2, "index.md")[0]["title"] == "Vault two"
        assert engine.store.get(v1, "index.md") is None
        assert engine.store.get(v1, "index.md#vault-one") is not None
        assert engine.store.get(FILES_INDEX, file_state_id("v1", "index.md"))[0]["mtime_ns"] == -1
        assert engine.store.get("kw", "u1")[0] == {"tag": "user data stays"}
        for brain, index in (("v1", v1), ("v2", v2)):
            meta = engine.store.get(f".xerj-memory-{brain}-edges", "__xerj-brain-meta")[0]
            assert meta["nodes_index"] == index
            card = engine.store.get(CATALOG_INDEX, index)[0]
            assert card["brains"] == [brain] and card["documents"] == engine.store.count(index)
        assert engine.store.get(CATALOG_INDEX, "ax-notes") is None
        assert migrate(engine.store) is None  # once only
        summary = run(engine, unpacked / "v1", brain="v1")  # the vault, moved to where the fixture unpacked
        assert summary.files_indexed == 1 and summary.files_unchanged == 2, summary.to_json()
        assert engine.store.get(v1, "index.md")[0]["title"] == "Vault one"
        assert engine.store.get(v2, "index.md")[0]["title"] == "Vault two"
