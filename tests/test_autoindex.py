"""The main job end to end: autoindex over real and generated folders, reconcile, rejections, bad input."""

from __future__ import annotations

import gzip
import json
import mailbox
import os
import re
import shutil
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import CliRunner

from xerj_core import hookimpl
from xerj_core.autoindex import parallel, pipeline
from xerj_core.autoindex.builtin_formats import text
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import (DATASET_MAPPING, FileStamp, FileWrite, IndexedDocument, LocalSink, dataset_index,
                                      derive_root_id)
from xerj_core.cli import build_cli
from xerj_core.detectors import line_at, make_draft
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import IllegalArgument
from xerj_core.graph.history import history_index
from xerj_core.plugins import get_plugin_manager
from xerj_core.query.service import SearchService

from .conftest import CORPORA

FOAM = CORPORA / "foam-docs"
pytestmark = pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")


def copy_corpus(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, copy_function=shutil.copy2)  # copy2 keeps mtimes: valid_at must not move
    return dst


def index_of(engine, brain: str, dataset: str = "ax-notes") -> str:
    """The index holding ``brain``'s documents of ``dataset`` (each root has its own)."""
    return dataset_index(dataset, LocalSink(engine.store, engine.graph).load(brain).root_id)


def edges_of(engine, brain: str) -> dict[str, dict]:
    """Every edge document of ``brain`` (meta and rejection records excluded), by edge id."""
    index = f".xerj-memory-{brain}-edges"
    found = {}
    with engine.store.reader(index) as r:
        for row in r.live_rows():
            doc_id, source, _version = r.document(int(row))
            if "src" in source and "dst" in source:
                found[doc_id] = source
    return found


def without_system_time(edges: dict[str, dict]) -> dict[str, dict]:
    """The edges less ``recorded_at``, the store's wall clock at the write (two data dirs differ there only)."""
    return {k: {f: v for f, v in e.items() if f != "recorded_at"} for k, e in edges.items()}


def live(edges: dict[str, dict]) -> dict[str, dict]:
    return {k: e for k, e in edges.items() if "invalid_at" not in e}


def save_again(path: Path, seconds: int) -> None:
    """``path`` saved again ``seconds`` later with an edit that teaches nothing new (a trailing newline): a change,
    so the file is read again, but every claim it makes is made as before (same evidence), so each keeps its
    edge."""
    stat = path.stat()
    with path.open("ab") as out:
        out.write(b"\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 1_000_000_000))


@pytest.fixture
def foam(tmp_path):
    return copy_corpus(FOAM, tmp_path / "foam-docs")


def test_foam_vault_becomes_a_brain(engine, foam):
    summary = run(engine, foam)
    assert summary.brain == "foam-docs"
    assert summary.files_seen == 87 and summary.files_indexed >= 86 and not summary.files_failed
    edges = edges_of(engine, "foam-docs")
    assert edges and summary.edges_written == len(edges)
    by_type: dict[str, int] = {}
    for edge in edges.values():
        by_type[edge["type"]] = by_type.get(edge["type"], 0) + 1
        assert edge["evidence"]["quote"] and edge["evidence"]["source"] == edge["src_file"]
        assert edge["src"] != edge["dst"]
    assert by_type == summary.edges_by_type
    assert by_type["wikilink"] >= 150 and by_type["sequence"] > 0 and by_type["same_dir"] > 0
    # Every endpoint is a document of the corpus.
    index = index_of(engine, "foam-docs")
    assert summary.datasets == [index]
    with engine.store.reader(index) as notes:
        for edge in edges.values():
            assert notes.row_of(edge["src"]) is not None and notes.row_of(edge["dst"]) is not None
    meta = engine.store.get(".xerj-memory-foam-docs-edges", "__xerj-brain-meta")[0]
    assert meta["nodes_index"] == index
    catalog = engine.store.get("autoindex-catalog", index)[0]
    assert catalog["documents"] == engine.store.count(index)
    assert catalog["roots"] == [summary.root] and catalog["source_dataset"] == "ax-notes"


def test_two_runs_on_two_data_dirs_give_the_same_edge_ids(tmp_path, foam, pm):
    ids = []
    for name in ("one", "two"):
        with Engine(tmp_path / name, pm) as eng:
            run(eng, foam)
            ids.append(sorted(edges_of(eng, "foam-docs")))
    assert ids[0] == ids[1]


def test_no_change_rerun_writes_nothing(engine, foam):
    run(engine, foam)
    before = edges_of(engine, "foam-docs")
    again = run(engine, foam)
    assert again.files_unchanged == again.files_seen and again.files_indexed == 0
    assert again.edges_written == 0 and again.edges_invalidated == 0
    assert edges_of(engine, "foam-docs") == before  # byte-identical, created_at included


def test_saving_a_file_again_keeps_the_edges_of_the_claims_it_still_makes(engine, foam):
    """A file saved with an edit that changes none of its claims is read again, and each claim keeps its edge as
    it was (its valid_at the instant it was first taught): nothing is retired, nothing written."""
    run(engine, foam)
    before = edges_of(engine, "foam-docs")
    target = "user/features/wikilinks.md"
    taught = {k for k, e in live(before).items() if e["src_file"] == target}
    assert taught
    save_again(foam / target, 5)
    summary = run(engine, foam)
    assert summary.files_indexed == 1
    assert summary.edges_written == 0 and summary.edges_invalidated == 0
    assert summary.edges_continued == len(taught)
    assert edges_of(engine, "foam-docs") == before  # byte-identical, created_at and valid_at included


def asking(monkeypatch) -> list[str]:
    """The files whose live claims runs read, in order (see ``pipeline._continued``)."""
    asked: list[str] = []
    claims_of = LocalSink.live_claims

    def spy(self, brain, files):
        asked.extend(files)
        return claims_of(self, brain, files)

    monkeypatch.setattr(LocalSink, "live_claims", spy)
    return asked


def test_a_kept_claim_is_not_compared_again_by_later_runs(engine, foam, monkeypatch):
    """Once a saved file's claims are found to continue their edges, later runs settle the same drafts by the
    remembered match (their ids stand for the file's new mtime), reading no claim of that file again: every run
    after an edit used to read and compare them all. Without the remembered matches a run compares them again
    and comes to the same edges."""
    run(engine, foam)
    target, other = "user/features/wikilinks.md", "user/features/tags.md"
    save_again(foam / target, 5)
    asked = asking(monkeypatch)
    first = run(engine, foam)
    before = edges_of(engine, "foam-docs")
    assert first.edges_continued > 0 and target in asked
    assert {k for k, e in live(before).items() if e["src_file"] == other}

    del asked[:]
    save_again(foam / other, 5)
    later = run(engine, foam)
    assert later.files_indexed == 1 and later.edges_written == 0 and later.edges_invalidated == 0
    assert asked == [other]  # the target's claims were settled, not read
    assert edges_of(engine, "foam-docs") == before
    del asked[:]
    save_again(foam / "user/features/backlinking.md", 5)
    run(engine, foam)
    assert asked == ["user/features/backlinking.md"]  # a run keeps the matches it used, for the next one

    # the cache lost (an empty one in its place): the claims are compared again, to the same end
    monkeypatch.setattr(LocalSink, "cache_dir", lambda self: engine.data_dir / "another-cache")
    del asked[:]
    save_again(foam / other, 5)
    lost = run(engine, foam)
    assert target in asked and lost.edges_written == 0 and lost.edges_invalidated == 0
    assert edges_of(engine, "foam-docs") == before


def test_remembered_matches_are_used_only_while_their_edges_are_live(engine, foam):
    """Matches remembered for a brain whose edges are gone (its edges index deleted, then the folder indexed
    again) settle nothing: every claim is taught again, as in a fresh build."""
    run(engine, foam)
    target = "user/features/wikilinks.md"
    save_again(foam / target, 5)
    run(engine, foam)
    before = {(e["src"], e["type"], e["dst"]) for e in live(edges_of(engine, "foam-docs")).values()}
    assert any(e["src_file"] == target for e in live(edges_of(engine, "foam-docs")).values())
    engine.store.delete_index(".xerj-memory-foam-docs-edges")
    rebuilt = run(engine, foam)
    assert rebuilt.edges_continued == 0
    assert {(e["src"], e["type"], e["dst"]) for e in live(edges_of(engine, "foam-docs")).values()} == before


def changed_claims_vault(folder: Path) -> tuple[Path, int, int]:
    """A note taught at ``t1``, then saved at ``t2`` with one claim kept, one whose evidence moved and one new."""
    folder.mkdir()
    (folder / "b.md").write_text("# B\n")
    (folder / "c.md").write_text("# C\n")
    (folder / "d.md").write_text("# D\n")
    note = folder / "a.md"
    note.write_text("# A\n\nSee [[b]].\n\n## Two\n\nAlso [[c]].\n")
    t1 = 1_700_000_000_000
    for path in folder.iterdir():
        os.utime(path, ns=(t1 * 1_000_000, t1 * 1_000_000))
    return note, t1, t1 + 60_000


def test_saving_a_file_keeps_its_unchanged_claims_and_reteaches_the_changed_ones(engine, tmp_path):
    note, t1, t2 = changed_claims_vault(tmp_path / "v")
    run(engine, note.parent, brain="v")
    first = {(e["src"], e["dst"]): (k, e) for k, e in live(edges_of(engine, "v")).items() if e["type"] == "wikilink"}
    note.write_text("# A\n\nSee [[b]].\n\n## Two\n\nFirst [[d]]. Also [[c]].\n")
    os.utime(note, ns=(t2 * 1_000_000, t2 * 1_000_000))
    summary = run(engine, note.parent, brain="v")
    after = edges_of(engine, "v")
    wikilinks = {(e["src"], e["dst"]): (k, e) for k, e in live(after).items() if e["type"] == "wikilink"}
    kept_id, kept = wikilinks[("a.md#a", "b.md")]
    assert (kept_id, kept) == first[("a.md#a", "b.md")] and kept["valid_at"] == t1  # the same claim, as it was
    moved_id, moved = wikilinks[("a.md#two", "c.md")]
    assert moved["valid_at"] == t2 and moved["evidence"]["quote"] == "First [[d]]. Also [[c]]."
    assert after[first[("a.md#two", "c.md")][0]]["invalid_at"]  # its old evidence's edge is retired
    assert wikilinks[("a.md#two", "d.md")][1]["valid_at"] == t2  # a new claim, true since this save
    assert summary.edges_by_type["wikilink"] == 2 and summary.edges_continued >= 1
    # what the brain believed between the two saves: the claims of the first, the kept one among them
    between = engine.graph.ego("v", {"node": "a.md#a", "as_of": t1 + 1, "hops": 1})
    assert {e["edge_id"] for e in between["edges"]} >= {kept_id}
    # an older version put back (its mtime before the kept edge's valid_at): the claim holds since that earlier
    # instant, so it is taught under it and the kept edge retired
    note.write_text("# A\n\nSee [[b]].\n")
    t0 = t1 - 60_000
    os.utime(note, ns=(t0 * 1_000_000, t0 * 1_000_000))
    run(engine, note.parent, brain="v")
    restored = {(e["src"], e["dst"]): e for e in live(edges_of(engine, "v")).values() if e["type"] == "wikilink"}
    assert restored[("a.md#a", "b.md")]["valid_at"] == t0 and "invalid_at" in edges_of(engine, "v")[kept_id]


def documents_of_file(engine, brain: str, path: str, dataset: str = "ax-notes") -> dict[str, dict]:
    """Every stored document ``path`` produced, by id (its card, sections, messages, attachments)."""
    index = index_of(engine, brain, dataset)
    refs = LocalSink(engine.store, engine.graph).load(brain).files[path].docs
    return {ref.split("/", 1)[1]: engine.store.get(index, ref.split("/", 1)[1])[0] for ref in refs}


def test_an_edited_note_writes_its_card_and_changed_sections_only(engine, foam):
    """A save that edits one section writes that section and the note's card (which carries the file's mtime);
    the sections it left alone keep their stored documents, mtime included. A section the store no longer holds
    is written again, and one the note no longer has is deleted."""
    run(engine, foam)
    target = "user/frequently-asked-questions.md"
    before = documents_of_file(engine, "foam-docs", target)
    assert len(before) >= 5
    note = foam / target
    text = note.read_text()
    last = text.rindex("\n## ")
    line_end = text.index("\n", last + 1) + 1
    note.write_text(text[:line_end] + "Fermenting kohlrabi answers this too.\n" + text[line_end:])
    t2 = before[target]["mtime"] + 60_000
    os.utime(note, ns=(t2 * 1_000_000, t2 * 1_000_000))
    summary = run(engine, foam)
    after = documents_of_file(engine, "foam-docs", target)
    assert after.keys() == before.keys()
    edited = [doc_id for doc_id in after if "kohlrabi" in after[doc_id]["text"] and doc_id != target]
    assert len(edited) == 1 and after[edited[0]]["mtime"] == t2 and after[target]["mtime"] == t2
    for doc_id in before.keys() - {target, edited[0]}:
        assert after[doc_id] == before[doc_id], doc_id  # untouched: not written again, its mtime the first save's
    assert summary.documents == 2 and summary.documents_kept == len(before) - 2
    found = SearchService(engine.store).search(index_of(engine, "foam-docs"),
                                               {"query": {"match": {"text": "kohlrabi"}}})
    assert edited[0] in {hit["_id"] for hit in found["hits"]["hits"]}
    # a document gone from the store (dropped by hand) is written again, not taken as standing
    untouched = sorted(before.keys() - {target, edited[0]})[0]
    engine.store.delete(index_of(engine, "foam-docs"), untouched)
    note.write_text(note.read_text().replace("Fermenting kohlrabi", "Pickled kohlrabi"))
    t3 = t2 + 60_000
    os.utime(note, ns=(t3 * 1_000_000, t3 * 1_000_000))
    again = run(engine, foam)
    restored = documents_of_file(engine, "foam-docs", target)
    assert restored[untouched] == {**before[untouched], "mtime": t3}
    assert again.documents == 3 and again.documents_kept == len(before) - 3
    # a section removed: its document goes, the others stand
    note.write_text(text[:last + 1])
    t4 = t3 + 60_000
    os.utime(note, ns=(t4 * 1_000_000, t4 * 1_000_000))
    run(engine, foam)
    trimmed = documents_of_file(engine, "foam-docs", target)
    assert edited[0] not in trimmed and engine.store.get(index_of(engine, "foam-docs"), edited[0]) is None
    assert all(trimmed[doc_id] == restored[doc_id] for doc_id in trimmed if doc_id != target)


def test_a_standing_document_keeps_the_mtime_it_was_first_written_with(engine):
    """A document a changed file yields as the store holds it (lists, numbers and objects compared value for value,
    the mtime aside) is not written again; the file's own document always is."""
    sink, index = LocalSink(engine.store, engine.graph), dataset_index("ax-notes", "0a1b2c3d")

    def save(mtime: int, tags: list[str]) -> int:
        section = {"ax_path": "n.md", "text": "Rye", "tags": tags, "rise": 1.25, "at": {"line": 3}, "mtime": mtime}
        docs = (IndexedDocument(index, "n.md", {"ax_path": "n.md", "text": "", "kind": "file", "mtime": mtime}),
                IndexedDocument(index, "n.md#s", section))
        return sink.write_files("t", [FileWrite("n.md", FileStamp(mtime * 1_000_000, 9, f"h{mtime}"), docs)], mtime)

    assert save(1_000, ["bread", "rye"]) == 2
    assert save(2_000, ["bread", "rye"]) == 1
    assert engine.store.get(index, "n.md#s")[0]["mtime"] == 1_000
    assert engine.store.get(index, "n.md")[0]["mtime"] == 2_000
    assert save(3_000, ["bread"]) == 2 and engine.store.get(index, "n.md#s")[0]["mtime"] == 3_000


def test_a_message_appended_to_a_mailbox_writes_that_message_and_the_card(engine, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    box = mailbox.mbox(folder / "inbox.mbox")
    for n in range(20):
        message = make_thread_message(f"<m{n}@example.org>", f"Batch {n}", f"Loaf number {n} rose.")
        if n % 4 == 0:
            message.add_attachment(b"proofing times", maintype="text", subtype="plain", filename=f"times{n}.txt")
        box.add(message)
    box.flush()
    run(engine, folder, brain="mail")
    before = documents_of_file(engine, "mail", "inbox.mbox", "ax-mail")
    box.add(make_thread_message("<m20@example.org>", "Batch 20", "Loaf twenty collapsed.", "<m3@example.org>"))
    box.flush()
    box.close()
    summary = run(engine, folder, brain="mail")
    after = documents_of_file(engine, "mail", "inbox.mbox", "ax-mail")
    assert after.keys() - before.keys() == {"inbox.mbox#msg-21"}
    assert after["inbox.mbox"]["messages"] == 21
    assert all(after[doc_id] == before[doc_id] for doc_id in before if doc_id != "inbox.mbox")
    assert summary.documents == 2 and summary.documents_kept == len(before) - 1
    assert summary.edges_by_type == {"email_thread": 1, "sequence": 1}  # the new message's edges only


def test_a_touched_file_keeps_its_documents_and_edges(engine, foam, monkeypatch):
    """A new mtime over the same bytes (touch, a copy without -p, a checkout) is no change: nothing is parsed,
    retired or taught again, and the new stamp is kept, so the next run does not read the file either."""
    run(engine, foam)
    before = edges_of(engine, "foam-docs")
    target = foam / "user/features/wikilinks.md"
    document = engine.store.get(index_of(engine, "foam-docs"), "user/features/wikilinks.md")
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    summary = run(engine, foam)
    assert summary.files_indexed == 0 and summary.files_unchanged == summary.files_seen
    assert summary.edges_written == 0 and summary.edges_invalidated == 0
    assert edges_of(engine, "foam-docs") == before  # byte-identical: the claims stand since they were first true
    assert engine.store.get(index_of(engine, "foam-docs"), "user/features/wikilinks.md") == document
    state = LocalSink(engine.store, engine.graph).load("foam-docs").files["user/features/wikilinks.md"]
    assert state.mtime_ns == stat.st_mtime_ns + 5_000_000_000 and state.docs
    monkeypatch.setattr(pipeline, "_same_bytes", lambda *_: pytest.fail("a restamped file was read again"))
    again = run(engine, foam)
    assert again.files_unchanged == again.files_seen and again.edges_written == 0


def test_an_edit_that_keeps_the_size_is_a_change(engine, foam):
    run(engine, foam)
    target = foam / "user/features/wikilinks.md"
    data = target.read_bytes()
    edited = data.replace(b"Foam", b"FOAM", 1)
    assert edited != data and len(edited) == len(data)
    stat = target.stat()
    target.write_bytes(edited)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    summary = run(engine, foam)
    assert summary.files_indexed == 1
    found = engine.store.get(index_of(engine, "foam-docs"), "user/features/wikilinks.md")[0]
    assert found["mtime"] == (stat.st_mtime_ns + 5_000_000_000) // 1_000_000


def test_removed_file_retires_what_it_taught(engine, foam):
    run(engine, foam)
    before = live(edges_of(engine, "foam-docs"))
    target = "user/features/tags.md"
    (foam / target).unlink()
    summary = run(engine, foam)
    assert summary.files_removed == 1
    after = edges_of(engine, "foam-docs")
    for key, edge in before.items():
        if edge["src_file"] == target:
            assert "invalid_at" in after[key]
    assert engine.store.get(index_of(engine, "foam-docs"), target) is None


def test_a_rejected_claim_stays_rejected_after_its_file_is_saved_again(engine, foam):
    run(engine, foam)
    edges = live(edges_of(engine, "foam-docs"))
    edge_id, edge = next((k, e) for k, e in sorted(edges.items()) if e["type"] == "wikilink")
    engine.graph.unlink("foam-docs", edge_id)
    save_again(foam / edge["src_file"], 7)
    summary = run(engine, foam)
    assert summary.claims_suppressed >= 1
    same_claim = [e for e in edges_of(engine, "foam-docs").values()
                  if (e["src"], e["type"], e["dst"]) == (edge["src"], edge["type"], edge["dst"])]
    assert len(same_claim) == 2 and all("invalid_at" in e for e in same_claim)


def test_small_folder_has_no_shared_term_edges(engine, tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    for i in range(8):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nfermentation lactobacillus sourdough kimchi {i}\n")
    summary = run(engine, folder)
    assert summary.edges_by_type.get("shared_term", 0) == 0
    assert summary.edges_by_type.get("same_dir", 0) == 7  # a chain, never a clique


def test_a_logseq_graph_links_by_its_page_names_and_leaves_its_backups_out(engine, tmp_path):
    """Logseq names a page by its namespace (``Project___Alpha.md`` is ``Project/Alpha``), its ``title::`` and
    ``alias::`` properties and, for a journal day, its date's title; ``[[links]]`` find pages by each. The copies
    in ``logseq/bak`` are not pages of the graph."""
    graph = tmp_path / "graph"
    for folder in ("pages", "journals", "logseq/bak/pages"):
        (graph / folder).mkdir(parents=True)
    (graph / "logseq/config.edn").write_text("{:meta/version 1}\n")
    (graph / "pages/Project___Alpha.md").write_text("alias:: PA\ntags:: work\n\n- The pilot.\n\t- Owner: [[Maria]]\n")
    (graph / "pages/Maria.md").write_text("- Baker. Works on [[PA]].\n")
    (graph / "pages/Recipes%2FRye.md").write_text("title:: Recipes/Rye\n- Rye loaf notes.\n")
    (graph / "pages/Plan.md").write_text("- Planned on [[Jan 15th, 2024]]\n")
    (graph / "pages/Rye.md").write_text("- As ((6571a1b2-0c3d-4e5f-8a9b-0c1d2e3f4a5b)) says\n")
    (graph / "journals/2024_01_15.md").write_text("- Met [[Maria]] about [[Project/Alpha]]\n\t- Tried [[Recipes/Rye]]\n"
                                                  "\t  id:: 6571a1b2-0c3d-4e5f-8a9b-0c1d2e3f4a5b\n")
    (graph / "logseq/bak/pages/Maria.md").write_text("- Baker. Works on [[PA]] and [[Plan]].\n")
    summary = run(engine, graph, brain="graph")
    links = {(e["src"], e["dst"]) for e in live(edges_of(engine, "graph")).values() if e["type"] == "wikilink"}
    assert links == {("pages/Project___Alpha.md", "pages/Maria.md"), ("pages/Maria.md", "pages/Project___Alpha.md"),
                     ("pages/Plan.md", "journals/2024_01_15.md"), ("journals/2024_01_15.md", "pages/Maria.md"),
                     ("journals/2024_01_15.md", "pages/Project___Alpha.md"),
                     ("journals/2024_01_15.md", "pages/Recipes%2FRye.md"), ("pages/Rye.md", "journals/2024_01_15.md")}
    assert {"kind": "ignored", "path": "logseq/bak", "reason": "a Logseq graph's copies of its pages "
            "(logseq/bak, logseq/version-files)"} in summary.files_skipped
    card = engine.store.get(index_of(engine, "graph"), "journals/2024_01_15.md")[0]
    assert card["title"] == "Jan 15th, 2024"


def test_an_org_roam_directory_links_by_ids(engine, tmp_path):
    """The org format and the orglink detector are registered as built-ins: a run over org-roam notes links them."""
    roam = tmp_path / "roam"
    (roam / "daily").mkdir(parents=True)
    (roam / "foo.org").write_text(":PROPERTIES:\n:ID: 884b2341-b7fe-434d-848c-5282c0727861\n:END:\n#+title: Foo\n")
    (roam / "daily/2025-11-11.org").write_text(":PROPERTIES:\n:ID: 75200446-930f-4ce5-9b05-1aa574aa2a95\n:END:\n"
                                               "#+title: 2025-11-11\n* Read\n[[id:884b2341-b7fe-434d-848c-5282c0727861]"
                                               "[Foo]]\n")
    summary = run(engine, roam, brain="roam")
    links = {(e["src"], e["dst"], e["detector"]) for e in live(edges_of(engine, "roam")).values()
             if e["type"] == "orglink"}
    assert links == {("daily/2025-11-11.org#read", "foo.org", "orglink@1")}
    assert engine.store.get(index_of(engine, "roam"), "daily/2025-11-11.org#read")[0]["format"] == "org"
    assert not summary.files_skipped


def test_an_arrow_drawn_on_a_canvas_puts_two_notes_two_hops_apart(engine, tmp_path):
    vault = tmp_path / "vault"
    (vault / "notes").mkdir(parents=True)
    (vault / "notes/starter.md").write_text("# Starter\n")
    (vault / "notes/loaf.md").write_text("# Loaf\n")
    (vault / "Bread.canvas").write_text(json.dumps({
        "nodes": [{"id": "s", "type": "file", "file": "notes/starter.md", "x": 0, "y": 0, "width": 9, "height": 9},
                  {"id": "l", "type": "file", "file": "notes/loaf.md", "x": 20, "y": 0, "width": 9, "height": 9}],
        "edges": [{"id": "e", "fromNode": "s", "toNode": "l", "label": "leavens"}]}))
    run(engine, vault, brain="boards")
    near = engine.graph.ego("boards", {"node": "notes/starter.md", "hops": 2, "types": ["canvas"]})
    assert "notes/loaf.md" in near["neighbors"]
    assert {e["evidence"]["quote"] for e in near["edges"]} == {"starter → loaf: leavens", "Bread shows notes/loaf.md",
                                                                 "Bread shows notes/starter.md"}


def test_evernote_exports_link_notes_across_notebooks_and_find_their_attachments(engine, tmp_path):
    folder = copy_corpus(Path(__file__).parent / "fixtures/evernote", tmp_path / "evernote")
    summary = run(engine, folder, brain="evernote")
    assert not summary.files_failed, summary.files_failed
    links = sorted((e["src"], e["dst"]) for e in live(edges_of(engine, "evernote")).values()
                   if e["type"] == "note_link")
    a, b = (f"LinkedInterNotebooks/test-internotebook_links_{name}.enex" for name in "AB")
    assert (f"{b}#note-2", f"{a}#note-2") in links  # "Reference to Note in Notebook A", another notebook's note
    assert (f"{a}#note-3", f"{a}#note-1") in links and ("test-links.enex#note-1", "test-links.enex#note-2") in links
    near = engine.graph.ego("evernote", {"node": "test-noteWithPdf.enex#note-1", "hops": 1})
    assert "test-noteWithPdf.enex#note-1.res-1" in near["neighbors"]
    hits = SearchService(engine.store).search(index_of(engine, "evernote"),
                                              {"query": {"match": {"text": "task with a reminder"}}})
    assert hits["hits"]["hits"][0]["_id"] == "test-things-to-do.enex#note-1"
    card = engine.store.get(index_of(engine, "evernote"), "test.enex")[0]
    assert card["malformed"].startswith("line 14:")  # broken XML: its note is read, the card says where


def test_a_joplin_sync_folder_is_notes_in_notebooks_with_tags(engine, tmp_path):
    folder = tmp_path / "joplin"
    (folder / ".resource").mkdir(parents=True)
    note, book, tag, photo = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)
    items = {
        note: f"Bread\n\nKnead, then bake. ![crumb](:/{photo})\n\nid: {note}\nparent_id: {book}\nis_todo: 0\ntype_: 1",
        book: f"Kitchen\n\nid: {book}\nparent_id: \ntype_: 2",
        tag: f"sourdough\n\nid: {tag}\ntype_: 5",
        photo: f"crumb.jpg\n\nid: {photo}\nmime: image/jpeg\nsize: 4\ntype_: 4",
        "e" * 32: f"id: {'e' * 32}\nnote_id: {note}\ntag_id: {tag}\ntype_: 6",
        "f" * 32: f"id: {'f' * 32}\nitem_id: {note}\ntitle_diff: []\ntype_: 13",  # a revision: Joplin's own
    }
    for item_id, text in items.items():
        (folder / f"{item_id}.md").write_text(text)
    (folder / ".resource" / photo).write_bytes(b"\xff\xd8\xff\xe0")
    summary = run(engine, folder, brain="joplin")
    assert not summary.files_failed and summary.skipped_by_kind.get("joplin_internal") == 1
    near = engine.graph.ego("joplin", {"node": f"{note}.md", "hops": 1})
    assert {e["type"]: e["dst"] for e in near["edges"] if e["src"] == f"{note}.md"} == {
        "notebook": f"{book}.md", "tagged": f"{tag}.md", "mdlink": f"{photo}.md"}
    hits = SearchService(engine.store).search(index_of(engine, "joplin"), {"query": {"match": {"title": "bread"}}})
    assert [h["_id"] for h in hits["hits"]["hits"]] == [f"{note}.md"]


def test_an_epub_is_a_book_whose_chapters_are_found_and_linked(engine, tmp_path):
    from .test_formats import LOAF, make_epub

    folder = tmp_path / "library"
    (folder / "books").mkdir(parents=True)
    (folder / "books" / "loaf.epub").write_bytes(make_epub(LOAF))
    (folder / "reading.md").write_text("# Reading\n\nNow: [The Loaf](books/loaf.epub).\n")
    summary = run(engine, folder, brain="library")
    assert not summary.files_failed and index_of(engine, "library", "ax-books") in summary.datasets
    books = index_of(engine, "library", "ax-books")
    hits = SearchService(engine.store).search(books, {"query": {"match": {"text": "bake degrees"}}})
    assert [h["_id"] for h in hits["hits"]["hits"]] == ["books/loaf.epub#ch-2"]
    assert engine.store.get(books, "books/loaf.epub")[0]["authors"] == ["Ada Baker", "Bo Miller"]
    near = engine.graph.ego("library", {"node": "reading.md#reading", "hops": 2})
    assert {"books/loaf.epub", "books/loaf.epub#ch-1"} <= set(near["neighbors"])  # the link, then the book's order


def test_email_thread_from_a_generated_mbox(engine, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    box = mailbox.mbox(folder / "thread.mbox")
    first = EmailMessage()
    first["Message-ID"] = "<root@example.org>"
    first["Subject"] = "Sourdough starter"
    first["From"] = "a@example.org"
    first.set_content("How do I feed a starter?")
    reply = EmailMessage()
    reply["Message-ID"] = "<reply@example.org>"
    reply["In-Reply-To"] = "<root@example.org>"
    reply["References"] = "<root@example.org>"
    reply["Subject"] = "Re: Sourdough starter"
    reply["From"] = "b@example.org"
    reply.set_content("Flour and water, daily.")
    reply.add_attachment(b"feeding schedule", maintype="text", subtype="plain", filename="schedule.txt")
    box.add(first)
    box.add(reply)
    box.flush()
    summary = run(engine, folder, brain="mail")
    edges = edges_of(engine, "mail")
    thread = [e for e in edges.values() if e["detector"].startswith("emailthread@")]
    assert thread, summary.to_json()
    assert index_of(engine, "mail", "ax-mail") in summary.datasets


def test_a_maildir_is_read_message_by_message(engine, tmp_path):
    """A Maildir as mail programs keep one (each message a file of ``cur`` or ``new``, named by the delivering
    program): every message is a document, a reply in ``new`` links to the message it answers in ``cur``, and a
    file there that is not a message, or a ``new`` folder of a project, is passed by."""
    folder = tmp_path / "Mail"
    folder.mkdir()
    box = mailbox.Maildir(folder / "INBOX", create=True)
    first = mailbox.MaildirMessage(make_thread_message("<root@example.org>", "Sourdough starter", "Feed it?"))
    first.set_subdir("cur")
    first.set_flags("S")
    read_key = box.add(first)
    reply = make_thread_message("<reply@example.org>", "Re: Sourdough starter", "Daily.", parent="<root@example.org>")
    new_key = box.add(reply)
    (folder / "INBOX" / "new" / "1700000000.junk.host").write_text("Content-Type: text/plain\n\nno message\n")
    (folder / "app" / "new").mkdir(parents=True)
    (folder / "app" / "new" / "2024.notes").write_text("Subject of the talk: to be decided\n")
    # a Maildir++ folder (hidden, as Dovecot keeps them) is read; a hidden folder elsewhere is not
    sent_key = box.add_folder("Sent").add(make_thread_message("<sent@example.org>", "Thanks", "It rose."))
    hidden = mailbox.Maildir(folder / "app" / ".cache", create=True)
    hidden.add(make_thread_message("<cached@example.org>", "Cached", "not mail to read"))
    # what Dovecot keeps beside the mail, and a message half delivered, are not notes
    (folder / "INBOX" / "dovecot-uidlist").write_text("3 V1700000000 N2\n1 :1700000000.M1P1.host\n")
    (folder / "INBOX" / "dovecot.index.log").write_bytes(b"\x01\x02\x00\x00")
    (folder / "INBOX" / "subscriptions").write_text("Sent\n")
    (folder / "INBOX" / "tmp" / "1700000001.M2P2.host").write_text("Subject: half\n\nhalf del")
    (folder / "app" / "notes").mkdir()
    (folder / "app" / "notes" / "subscriptions").write_text("magazines to renew\n")  # no Maildir here: a note
    summary = run(engine, folder, brain="maildir")
    read_path, new_path = f"INBOX/cur/{read_key}:2,S", f"INBOX/new/{new_key}"
    with engine.store.reader(index_of(engine, "maildir", "ax-mail")) as reader:
        titles = {reader.id_of(int(row)): reader.document(int(row))[1]["title"] for row in reader.live_rows()}
    assert titles == {read_path: "Sourdough starter", new_path: "Re: Sourdough starter",
                      f"INBOX/.Sent/new/{sent_key}": "Thanks"}
    thread = [(e["src"], e["dst"]) for e in edges_of(engine, "maildir").values() if e["type"] == "email_thread"]
    assert thread == [(new_path, read_path)]
    assert summary.skipped_by_kind == {"no_format": 2, "ignored": 6} and not summary.files_failed
    ignored = sorted(skip["path"] for skip in summary.files_skipped if skip["kind"] == "ignored")
    assert ignored == ["INBOX/.Sent/maildirfolder", "INBOX/.Sent/tmp", "INBOX/dovecot-uidlist",
                       "INBOX/dovecot.index.log", "INBOX/subscriptions", "INBOX/tmp"]
    with engine.store.reader(index_of(engine, "maildir", "ax-notes")) as reader:
        assert sorted(reader.id_of(int(row)) for row in reader.live_rows()) == ["app/notes/subscriptions"]


def make_thread_message(message_id: str, subject: str, body: str, parent: str | None = None) -> EmailMessage:
    msg = EmailMessage()
    msg["Message-ID"], msg["Subject"], msg["From"] = message_id, subject, "a@example.org"
    if parent is not None:
        msg["In-Reply-To"] = msg["References"] = parent
    msg.set_content(body)
    return msg


def test_bad_input_is_reported_and_nothing_is_lost(engine, tmp_path, monkeypatch):
    folder = tmp_path / "messy"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.md").write_text("# Good\n\nSee [[other]].\n")
    (folder / "other.md").write_text("# Other\n")
    (folder / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "broken.eml").write_bytes(b"\xff\xfe not an email at all \x00\x01")
    (folder / "sub" / "loop").symlink_to(folder, target_is_directory=True)
    (folder / "dangling.md").symlink_to(folder / "nowhere.md")
    (folder / "self.md").symlink_to(folder / "self.md")  # stat answers ELOOP, not "no such file"
    (folder / "ping.md").symlink_to(folder / "pong.md")
    (folder / "pong.md").symlink_to(folder / "ping.md")
    os.mkfifo(folder / "pipe.md")  # reading it would wait for a writer forever
    (folder / "null.md").symlink_to("/dev/null")  # a link that resolves, to a device
    summary = run(engine, folder, brain="messy")
    skipped = {f["path"]: f["kind"] for f in summary.files_skipped}
    assert skipped["sub/loop"] == "symlink_loop" and skipped["dangling.md"] == "broken_symlink"
    assert skipped["self.md"] == skipped["ping.md"] == skipped["pong.md"] == "broken_symlink"
    assert [f["path"] for f in summary.files_failed] == ["broken.eml"]
    assert skipped["pipe.md"] == skipped["null.md"] == "not_a_regular_file"
    reasons = {f["path"]: f["reason"] for f in summary.files_skipped}
    assert reasons["sub/loop"] == "symlink loop: this directory was already walked as [.]"
    assert reasons["null.md"] == "symbolic link to something that is not a regular file"
    assert engine.store.get(index_of(engine, "messy"), "latin1.txt")[0]["text"] == "caf\u00e9"
    assert engine.store.get(index_of(engine, "messy"), "good.md") is not None
    # A file that later becomes unreadable keeps what was indexed for it.
    real_read = Path.read_bytes

    def flaky(self):
        if self.name == "good.md":
            raise PermissionError(13, "Permission denied")
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", flaky)
    os.utime(folder / "good.md", ns=(0, 10**18))
    again = run(engine, folder, brain="messy")
    assert any(f["path"] == "good.md" and "Permission denied" in f["reason"] for f in again.files_failed)
    assert engine.store.get(index_of(engine, "messy"), "good.md") is not None
    assert again.files_removed == 0


def test_a_file_gone_before_it_is_read_is_a_skip_not_a_failure(engine, tmp_path, monkeypatch):
    """An editor saves through a temporary file it renames away a moment later: the walk can see a file the run
    then finds gone. Nothing failed (a cron run must not exit 1 for it), and the next run does not know it."""
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nSee [[other]].\n")
    (folder / "other.md").write_text("# Other\n")
    (folder / "draft.md").write_text("# Draft\n")
    real_read = Path.read_bytes

    def vanishing(self):
        if self.name == "draft.md":
            self.unlink()  # gone between the walk and the read
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", vanishing)
    summary = run(engine, folder, brain="saves")
    assert summary.files_failed == []
    assert summary.files_skipped == [{"path": "draft.md", "kind": "vanished", "reason": "gone before it was read"}]
    assert summary.files_indexed == 2 and summary.edges_by_type.get("wikilink") == 1
    again = run(engine, folder, brain="saves")
    assert again.files_failed == again.files_skipped == [] and again.files_unchanged == 2


def test_missing_folder_and_bad_brain_name_fail_before_any_work(engine, tmp_path):
    with pytest.raises(IllegalArgument):
        run(engine, tmp_path / "does-not-exist")
    folder = tmp_path / "x"
    folder.mkdir()
    runner = CliRunner()
    cli = build_cli(get_plugin_manager())
    result = runner.invoke(cli, ["autoindex", str(folder), "--brain", "Bad..Name", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code != 0 and "brain" in result.output.lower()
    assert not (tmp_path / "d").exists()
    result = runner.invoke(cli, ["autoindex", str(tmp_path / "nope"), "--data-dir", str(tmp_path / "d")])
    assert result.exit_code != 0 and "does not exist" in result.output


def test_an_interrupted_run_leaves_whole_files_and_the_next_run_finishes(tmp_path, foam, pm, monkeypatch):
    monkeypatch.setattr(pipeline, "BATCH_FILES", 10)
    calls = {"n": 0}
    real = pipeline._detect_and_reconcile

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "_detect_and_reconcile", interrupted)
    with Engine(tmp_path / "data", pm, config=EngineConfig(tail_rows=8)) as eng:
        with pytest.raises(KeyboardInterrupt):
            run(eng, foam)
        monkeypatch.setattr(pipeline, "_detect_and_reconcile", real)
        summary = run(eng, foam)  # nothing changed on disk, but the last run never finished its edges
        assert summary.files_unchanged == summary.files_seen
        assert summary.edges_written > 0
        with Engine(tmp_path / "fresh", pm) as clean:
            run(clean, foam)
            assert sorted(live(edges_of(eng, "foam-docs"))) == sorted(live(edges_of(clean, "foam-docs")))


def test_cli_autoindex_json_summary(tmp_path, foam):
    result = CliRunner().invoke(build_cli(get_plugin_manager()),
                                ["autoindex", str(foam), "--json", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["brain"] == "foam-docs" and summary["edges_written"] > 0
    assert {"files_seen", "files_indexed", "files_unchanged", "files_removed", "files_failed", "documents",
            "edges_by_type", "edges_capped", "edges_invalidated", "claims_suppressed", "elapsed_s"} <= set(summary)


def test_disabling_a_detector_plugin(tmp_path, foam, monkeypatch):
    monkeypatch.setenv("XERJ_DISABLE_PLUGINS", "samedir")
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        summary = run(eng, foam)
    assert "same_dir" not in summary.edges_by_type and summary.edges_by_type["wikilink"] > 0


def test_no_graph_writes_documents_only(engine, foam):
    summary = run(engine, foam, graph=False)
    assert summary.documents > 0 and summary.edges_written == 0
    assert not engine.store.exists(".xerj-memory-foam-docs-edges")


def test_a_pip_installed_third_party_detector_emits_edges(tmp_path):
    pytest.importorskip("xerj_detect_hashtag", reason="contrib/xerj-detect-hashtag is not installed")
    folder = tmp_path / "tagged"
    folder.mkdir()
    (folder / "bread.md").write_text("# Bread\n\nA loaf a day. #baking\n")
    (folder / "cake.md").write_text("# Cake\n\nSponge and cream. #baking\n")
    with Engine(tmp_path / "installed", get_plugin_manager()) as installed:  # what the machine has installed
        summary = run(installed, folder, brain="tagged")
        edges = [e for e in edges_of(installed, "tagged").values() if e["type"] == "hashtag"]
    assert summary.edges_by_type.get("hashtag", 0) >= 1
    assert edges and all(e["detector"] == "hashtag@1" and e["evidence"]["quote"] for e in edges)


class _OrgMode:
    """A third-party format for ``.orgx`` files (one card each), installed between runs."""

    name, dataset, priority = "orgx", "ax-notes", 20

    def accepts(self, rel_path, head):
        return rel_path.endswith(".orgx")

    def parse(self, rel_path, data, mtime_ms):
        return text.TextFormat.parse(self, rel_path, data, mtime_ms)


class _OrgModePlugin:
    @hookimpl
    def xerj_register_formats(self, register):
        register(_OrgMode())


def test_a_format_installed_or_removed_later_is_read_with_on_the_next_run(tmp_path):
    """A file no format read is not forgotten: once a format plugin for it is installed, the next run reads it
    (every file is read again, since a new format may also outrank the one that read a file), and the run after
    is a no-change run again; once the plugin is gone, its documents go with it."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nSee the agenda.\n")
    (folder / "agenda.orgx").write_text("* Agenda\nthe quarterly plan\n")
    bare = get_plugin_manager(builtins_only=True)
    with_orgx = get_plugin_manager(builtins_only=True, extra_plugins=[("orgx", _OrgModePlugin())])

    def cards(eng):
        with eng.store.reader(index_of(eng, "notes")) as reader:
            return sorted(reader.id_of(int(row)) for row in reader.live_rows())

    with Engine(tmp_path / "d", bare) as eng:
        first = run(eng, folder, brain="notes", pm=bare)
        assert first.skipped_by_kind == {"no_format": 1} and not first.formats_changed
        assert "agenda.orgx" not in cards(eng)
        again = run(eng, folder, brain="notes", pm=bare)
        assert again.files_unchanged == 1 and again.skipped_by_kind == {"no_format": 1}
    with Engine(tmp_path / "d", with_orgx) as eng:
        installed = run(eng, folder, brain="notes", pm=with_orgx)
        assert installed.formats_changed and installed.files_indexed == 2 and not installed.files_skipped
        assert "agenda.orgx" in cards(eng)
        settled = run(eng, folder, brain="notes", pm=with_orgx)
        assert not settled.formats_changed and settled.files_unchanged == 2 and settled.documents == 0
    with Engine(tmp_path / "d", bare) as eng:
        removed = run(eng, folder, brain="notes", pm=bare)
        assert removed.formats_changed and removed.skipped_by_kind == {"no_format": 1}
        assert "agenda.orgx" not in cards(eng) and "plan.md" in cards(eng)


class _VersionedOrgMode(_OrgMode):
    """:class:`_OrgMode` whose acceptance changes with its ``version``: at 1 it reads ``.orgx`` files only, at 2
    also ``.orgy`` ones."""

    def __init__(self, version):
        self.version = version

    def accepts(self, rel_path, head):
        return rel_path.endswith(".orgx") or (self.version >= 2 and rel_path.endswith(".orgy"))


def test_a_format_that_raises_its_version_is_read_with_again(tmp_path):
    """A format that comes to read files it passed by says so with a new ``version``: the next run reads every
    file again, so a file skipped as no format's is read without waiting for it to be saved."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "agenda.orgx").write_text("* Agenda\nthe quarterly plan\n")
    (folder / "minutes.orgy").write_text("* Minutes\nthe plan was agreed\n")

    def manager(version):
        class Plugin:
            @hookimpl
            def xerj_register_formats(self, register):
                register(_VersionedOrgMode(version))
        return get_plugin_manager(builtins_only=True, extra_plugins=[("orgx", Plugin())])

    with Engine(tmp_path / "d", manager(1)) as eng:
        first = run(eng, folder, brain="notes", pm=manager(1))
        assert first.files_indexed == 1 and first.skipped_by_kind == {"no_format": 1}
        same = run(eng, folder, brain="notes", pm=manager(1))
        assert not same.formats_changed and same.files_unchanged == 1 and same.skipped_by_kind == {"no_format": 1}
        raised = run(eng, folder, brain="notes", pm=manager(2))
        assert raised.formats_changed and raised.files_indexed == 2 and not raised.files_skipped
        with eng.store.reader(index_of(eng, "notes")) as reader:
            assert sorted(reader.id_of(int(row)) for row in reader.live_rows()) == ["agenda.orgx", "minutes.orgy"]
        settled = run(eng, folder, brain="notes", pm=manager(2))
        assert not settled.formats_changed and settled.files_unchanged == 2


class _Mention:
    """A third-party detector at ``version``: ``see <name>`` links a note to ``<name>.md``; version 2 weighs its
    edges more and quotes the whole line."""

    name = type = "mention"
    confidence = 0.7

    def __init__(self, version):
        self.tag, self.weight, self.version = f"mention@{version}", 0.4 + version / 10, version

    def detect(self, file_docs, corpus, state):
        for doc in file_docs:
            for match in re.finditer(r"see (\w+)", doc.text):
                dst = corpus.card(f"{match.group(1)}.md")
                if dst is not None and dst.doc_id != doc.doc_id:
                    quote = line_at(doc.text.encode(), match.start()) if self.version > 1 else match.group(0)
                    yield make_draft(self, doc, dst, quote=quote, offset=match.start())


def _mentioning(version):
    """A plugin manager with the built-ins and ``_Mention`` at ``version``."""
    class Plugin:
        @hookimpl
        def xerj_register_detectors(self, register):
            register(_Mention(version))
    return get_plugin_manager(builtins_only=True, extra_plugins=[("mention", Plugin())])


def test_a_detector_that_raises_its_version_renews_the_edges_of_unchanged_files(tmp_path, monkeypatch):
    """A new version of a detector teaches unchanged files' claims again: their live edges become the new
    version's (tag, weight, evidence; the versions they replace kept in the history), a person's approval stays,
    and the brain's edges are a fresh build's. Before, an unchanged file's edge kept the old version's tag and
    evidence for good, since its id (claim and valid_at) stood already."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nPlease see b first.\n")
    (folder / "b.md").write_text("# B\n\nThen see a again, or see c.\n")
    (folder / "c.md").write_text("# C\n")

    def mentions(eng):
        return {eid: {f: v for f, v in edge.items() if f not in ("recorded_at", "created_at")}
                for eid, edge in edges_of(eng, "notes").items() if edge["type"] == "mention"}

    with Engine(tmp_path / "fresh", _mentioning(2)) as eng:
        run(eng, folder, brain="notes", pm=_mentioning(2))
        fresh = mentions(eng)
    assert len(fresh) == 3 and {e["detector"] for e in fresh.values()} == {"mention@2"}
    with Engine(tmp_path / "d", _mentioning(1)) as eng:
        run(eng, folder, brain="notes", pm=_mentioning(1))
        old = mentions(eng)
        assert old.keys() == fresh.keys() and {e["weight"] for e in old.values()} == {0.5}
        approved = next(eid for eid, e in old.items() if e["dst"] == "c.md")
        eng.graph.review("notes", {"approve": [approved]}, by="ana")
        from xerj_core.autoindex.sink import LocalSink
        asked, live_claims = [], LocalSink.live_claims
        monkeypatch.setattr(LocalSink, "live_claims", lambda sink, brain, files: (
            asked.extend(files), live_claims(sink, brain, files))[1])
        upgraded = run(eng, folder, brain="notes", pm=_mentioning(2))
        assert upgraded.files_unchanged == 3 and upgraded.edges_by_type == {"mention": 3}  # the others untouched
        # a renewed edge stands under its own id and continues no other: no file's claims were read (on 20,000
        # notes they were every live claim of the brain, held until the run ended)
        assert asked == []
        monkeypatch.undo()
        assert upgraded.edges_continued == 0
        renewed = mentions(eng)
        assert renewed[approved]["trust"] == "approved" and renewed[approved]["reviewed_by"] == "ana"
        review = ("trust", "reviewed_by", "reviewed_at", "review_note")
        assert {eid: {f: v for f, v in e.items() if f not in review} for eid, e in renewed.items()} == {
            eid: {f: v for f, v in e.items() if f not in review} for eid, e in fresh.items()}
        with eng.store.reader(history_index("notes")) as reader:
            archived = [reader.document(int(row))[1] for row in reader.live_rows()]
        # mention@1's three edges as the upgrade found them, and the approved one as it was before the review
        assert sorted(e["detector"] for e in archived if e.get("type") == "mention") == ["mention@1"] * 4
        again = run(eng, folder, brain="notes", pm=_mentioning(2))
        assert again.edges_written == 0 and mentions(eng) == renewed
        (folder / "c.md").unlink()  # every file detected again, under the tags of the last run: none renewed
        removed = run(eng, folder, brain="notes", pm=_mentioning(2))
        standing = sorted(e["dst"] for e in mentions(eng).values() if e.get("invalid_at") is None)
        assert removed.edges_continued == 0 and standing == ["a.md", "b.md"]


def test_a_raised_version_renews_edges_whose_claims_were_remembered_as_continued(tmp_path):
    """A file saved again under one version has its drafts remembered to continue their edges; when the
    detector's version rises, those drafts are compared (and renewed) anyway, not settled by the memory."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nPlease see b first.\n")
    (folder / "b.md").write_text("# B\n")

    with Engine(tmp_path / "d", _mentioning(1)) as eng:
        run(eng, folder, brain="notes", pm=_mentioning(1))
        save_again(folder / "a.md", 5)
        assert run(eng, folder, brain="notes", pm=_mentioning(1)).edges_continued >= 1
        save_again(folder / "b.md", 5)  # a run that settles a.md's drafts by the memory
        run(eng, folder, brain="notes", pm=_mentioning(1))
        upgraded = run(eng, folder, brain="notes", pm=_mentioning(2))
        assert upgraded.edges_by_type == {"mention": 1}
        standing = [e for e in live(edges_of(eng, "notes")).values() if e["type"] == "mention"]
        assert [(e["src_file"], e["detector"]) for e in standing] == [("a.md", "mention@2")]


class _Records:
    """A third-party format for ``.rec`` files whose card's ``priority`` is the file's first word: a number in one
    file, a word in another, as a plugin's fields can be."""

    name, dataset, priority = "rec", "ax-notes", 20

    def accepts(self, rel_path, head):
        return rel_path.endswith(".rec")

    def parse(self, rel_path, data, mtime_ms):
        card, *rest = text.TextFormat.parse(self, rel_path, data, mtime_ms)
        first = data.decode().split()[0]
        card.fields["priority"] = int(first) if first.isdigit() else first
        return [card, *rest]


def records_manager():
    class Plugin:
        @hookimpl
        def xerj_register_formats(self, register):
            register(_Records())
    return get_plugin_manager(builtins_only=True, extra_plugins=[("rec", Plugin())])


def records_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.rec").write_text("3 water the plants\n")
    (folder / "b.rec").write_text("high fix the roof\n")
    (folder / "c.rec").write_text("5 paint the fence\n")
    (folder / "plan.md").write_text("# Plan\n\nSee a.rec and c.rec.\n")
    return folder


def test_a_document_the_store_refuses_fails_its_file_and_the_run_goes_on(tmp_path):
    """A field mapped as a number by one file's document and given a word by another's: that file is reported
    failed with the document and the store's reason, the others are written, and the next run tries it again."""
    folder = records_folder(tmp_path / "records")
    pm = records_manager()
    with Engine(tmp_path / "d", pm) as eng:
        first = run(eng, folder, brain="records", pm=pm)
        assert [f["path"] for f in first.files_failed] == ["b.rec"]
        reason = first.files_failed[0]["reason"]
        assert reason.startswith("document [b.rec] was refused: mapper_parsing_exception:") and "priority" in reason
        assert first.files_indexed == 3
        with eng.store.reader(index_of(eng, "records")) as reader:
            written = sorted(reader.id_of(int(row)) for row in reader.live_rows())
        assert written == ["a.rec", "c.rec", "plan.md", "plan.md#plan"]
        again = run(eng, folder, brain="records", pm=pm)
        assert [f["path"] for f in again.files_failed] == ["b.rec"] and again.files_unchanged == 3
        (folder / "b.rec").write_text("7 fix the roof\n")
        fixed = run(eng, folder, brain="records", pm=pm)
        assert not fixed.files_failed and fixed.files_indexed == 1
    many = records_folder(tmp_path / "many")  # every other file refused: each fails alone, the others are written
    for n in range(40):
        (many / f"r{n:02}.rec").write_text(f"{n} task\n" if n % 2 else f"word{n} task\n")
    with Engine(tmp_path / "many-data", pm) as eng:
        summary = run(eng, many, brain="many", pm=pm)
    assert sorted(f["path"] for f in summary.files_failed) == ["b.rec", *(f"r{n:02}.rec" for n in range(0, 40, 2))]
    assert summary.files_indexed == 3 + 20
    result = CliRunner().invoke(build_cli(pm), ["autoindex", str(records_folder(tmp_path / "cli")), "--data-dir",
                                                str(tmp_path / "cli-data"), "--json"])
    summary = json.JSONDecoder().raw_decode(result.output)[0]  # then the line saying a file failed
    assert result.exit_code == 1 and summary["files_failed"][0]["path"] == "b.rec"


def test_source_files_scripts_and_conventional_documents_are_read(engine, tmp_path):
    """What a project folder holds beside Markdown: sources in many languages, scripts known by their ``#!`` line,
    build files, and documents named by convention whatever their suffix (``README.Debian``, also gzipped), each
    searchable, filterable by ``language`` and linked by the paths prose cites; a video that shares TypeScript's
    extension and a minified bundle are passed by."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "README.Debian").write_text("The entry point is src/main.go; scripts/deploy ships it.\n")
    changelog = b"project (1.0) unstable; urgency=low\n  * First.\n"
    (folder / "changelog.Debian.gz").write_bytes(gzip.compress(changelog))
    (folder / "src" / "main.go").write_text("package main\n\nfunc main() { serve(gophers) }\n")
    (folder / "src" / "view.tsx").write_text("export const Gallery = () => <div>gophers</div>;\n")
    (folder / "scripts" / "deploy").write_text("#!/usr/bin/env bash\nrsync -a build/ host:/srv/gophers\n")
    (folder / "scripts" / "report").write_text("#!/usr/bin/env python3\nimport sys\n\ndef main():\n    return 0\n")
    (folder / "Makefile").write_text("all:\n\tgo build ./src\n")
    (folder / "clip.ts").write_bytes(b"\x47\x40\x00\x10" + bytes(300))
    (folder / "app.min.js").write_text("var gophers=1;")
    summary = run(engine, folder, brain="project")
    assert summary.files_indexed == 7 and summary.skipped_by_kind == {"no_format": 2} and not summary.files_failed
    assert {f["path"] for f in summary.files_skipped} == {"clip.ts", "app.min.js"}
    search = SearchService(engine.store)
    code_index = index_of(engine, "project", "ax-code")

    def languages(query):
        body = {"size": 20, "query": query, "_source": ["language"]}
        return {hit["_id"]: hit["_source"].get("language") for hit in search.search(code_index, body)["hits"]["hits"]}

    assert languages({"match_all": {}}) == {
        "src/main.go": "go", "src/view.tsx": "typescript", "scripts/deploy": "shell", "Makefile": "make",
        "scripts/report": "python", "scripts/report#main": "python"}
    assert languages({"bool": {"must": [{"match": {"text": "gophers"}}], "filter": [{"term": {"language": "go"}}]}}) \
        == {"src/main.go": "go"}
    with engine.store.reader(code_index) as reader:
        assert reader.mapping.fields["language"].type == "keyword"
    notes = index_of(engine, "project")
    found = search.search(notes, {"query": {"match": {"text": "urgency"}}, "_source": ["format"]})["hits"]["hits"]
    assert [(hit["_id"], hit["_source"]["format"]) for hit in found] == [("changelog.Debian.gz", "text")]
    cited = {(e["src"], e["dst"]) for e in edges_of(engine, "project").values() if e["type"] == "pathcite"}
    assert cited == {("README.Debian", "src/main.go")}


def _site_with_generated_scripts(folder: Path) -> None:
    """A documentation site as generators leave it: pages, a hand-written script, and two generated ones whose
    vocabulary is every page's (a search index on one line, a bundle on a few long ones)."""
    (folder / "assets").mkdir(parents=True)
    (folder / "ownership.md").write_text("# Ownership\nMoves and borrows of a value.\n")
    (folder / "lifetimes.md").write_text("# Lifetimes\nBorrows outlive nothing they borrow.\n")
    (folder / "assets" / "theme.js").write_text("// toggles the theme\nexport function toggle(page) {\n"
                                                "  page.dark = !page.dark;\n}\n")
    index = '{"docs":["ownership","lifetimes"],"terms":{"moves":[0],"borrows":[0,1],"outlive":[1]}}'
    (folder / "searchindex.js").write_text(f"window.search = JSON.parse('{index * 40}');")
    (folder / "assets" / "index-Bq7.js").write_text("/*! bundle | MIT */\n" + "\n".join(
        ["var a=function(b){return b.moves&&b.borrows&&b.outlive},c=" + "a(b)," * 40 + "0;"] * 20))


def test_a_generated_script_is_skipped_as_generated_and_remembered_so(engine, tmp_path):
    """A minified or generated script (a site's search index, a bundle) is skipped as ``generated`` with the
    reason, not failed and not read into the brain; a later run, the files unchanged or only touched, reports it
    the same without reading it again."""
    folder = tmp_path / "site"
    _site_with_generated_scripts(folder)
    summary = run(engine, folder, brain="site")
    assert summary.files_indexed == 3 and not summary.files_failed
    assert summary.skipped_by_kind == {"generated": 2}
    skipped = {item["path"]: item["reason"] for item in summary.files_skipped}
    assert set(skipped) == {"searchindex.js", "assets/index-Bq7.js"}
    assert all(reason.startswith("minified or generated: its lines average") for reason in skipped.values())
    with engine.store.reader(index_of(engine, "site", "ax-code")) as reader:
        assert [reader.id_of(int(row)) for row in reader.live_rows()] == ["assets/theme.js"]
    assert all("searchindex.js" not in (e["src"], e["dst"]) for e in edges_of(engine, "site").values())
    again = run(engine, folder, brain="site")
    assert again.files_unchanged == 3 and again.files_skipped == summary.files_skipped
    stat = (folder / "searchindex.js").stat()
    os.utime(folder / "searchindex.js", ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    touched = run(engine, folder, brain="site")
    assert touched.files_skipped == summary.files_skipped and touched.files_indexed == 0
    assert run(engine, folder, brain="site").files_skipped == summary.files_skipped


def test_a_dataset_index_made_before_a_field_was_mapped_maps_it_before_its_first_value(engine, tmp_path):
    """A brain's code index made before ``language`` was mapped gets it mapped as a keyword on the next write,
    not as the text a dynamic mapping would make of it."""
    folder = tmp_path / "older"
    folder.mkdir()
    (folder / "tool.c").write_text("int main(void) { return 0; }\n")
    code_index = dataset_index("ax-code", derive_root_id("older"))
    engine.store.create_index(code_index, {"properties": {
        path: spec for path, spec in DATASET_MAPPING["properties"].items() if path != "language"}})
    run(engine, folder, brain="older")
    with engine.store.reader(code_index) as reader:
        assert reader.mapping.fields["language"].type == "keyword"
    hits = SearchService(engine.store).search(code_index, {"query": {"term": {"language": "c"}}})["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["tool.c"]


def test_gzip_files_are_indexed_and_linked_like_the_files_they_hold(engine, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "setup.md").write_text("# Setup\n\nInstall it.\n")
    (folder / "guide.md.gz").write_bytes(gzip.compress(b"# Guide\n\nFirst do the [[setup]].\n"))
    (folder / "changelog.gz").write_bytes(gzip.compress(b"release 2: faster setup\n"))
    (folder / "broken.md.gz").write_bytes(gzip.compress(b"# Cut\n")[:-4])
    summary = run(engine, folder, brain="docs")
    assert summary.files_indexed == 3 and [f["path"] for f in summary.files_failed] == ["broken.md.gz"]
    assert "cut short" in summary.files_failed[0]["reason"]
    links = [(e["src"], e["dst"]) for e in edges_of(engine, "docs").values() if e["type"] == "wikilink"]
    assert ("guide.md.gz#guide", "setup.md") in links or ("guide.md.gz", "setup.md") in links, links
    with engine.store.reader(index_of(engine, "docs")) as reader:
        assert {"changelog.gz", "guide.md.gz", "guide.md.gz#guide"} <= {reader.id_of(int(r)) for r in reader.live_rows()}


def test_edges_written_in_bounded_transactions_match_one_transaction(tmp_path, foam, monkeypatch):
    """The embedded sink writes and retires edges a bounded number per transaction; the brain is the same."""
    from xerj_core.autoindex import sink

    with Engine(tmp_path / "whole") as engine:
        whole = run(engine, foam, brain="b", clock=lambda: 1_700_000_000_000)
        expected = without_system_time(edges_of(engine, "b"))
    monkeypatch.setattr(sink, "EDGES_PER_TRANSACTION", 7)
    with Engine(tmp_path / "chunked") as engine:
        chunked = run(engine, foam, brain="b", clock=lambda: 1_700_000_000_000)
        assert without_system_time(edges_of(engine, "b")) == expected
        assert (chunked.edges_written, chunked.edges_by_type) == (whole.edges_written, whole.edges_by_type)
        note = next(foam.rglob("*.md"))
        note.unlink()
        again = run(engine, foam, brain="b", clock=lambda: 1_700_000_100_000)
        assert again.edges_invalidated > 0
        assert sum(1 for e in edges_of(engine, "b").values() if "invalid_at" in e) == again.edges_invalidated


def _documents_with_text() -> list:
    """Parsed documents alive in this process that still carry their text."""
    import gc

    from xerj_core.model import SourceDocument

    return [obj for obj in gc.get_objects() if type(obj) is SourceDocument and obj.text]


def _texts_held(earlier: set[int] = frozenset()) -> int:
    """How many of :func:`_documents_with_text` are not among ``earlier`` (ids of objects kept alive)."""
    return sum(1 for obj in _documents_with_text() if id(obj) not in earlier)


def test_a_run_streams_holding_a_bounded_number_of_documents(tmp_path, pm, monkeypatch):
    """Parsed documents with their text are held a parse batch and a write batch (or a detect batch) at a
    time, however big the folder; the brain is the one a run with whole-corpus batches builds."""
    folder = tmp_path / "notes"
    for i in range(300):
        (folder / f"d{i % 5}").mkdir(parents=True, exist_ok=True)
        (folder / f"d{i % 5}" / f"n{i}.md").write_text(
            f"# Note {i}\n\ntext {i} [[n{(i * 7) % 300}]]\n\n## Part\nmore words w{i % 13} w{i % 17}\n")
    with Engine(tmp_path / "whole", pm) as engine:
        whole = run(engine, folder, brain="b", clock=lambda: 1_700_000_000_000)
        expected = without_system_time(edges_of(engine, "b"))
    docs_per_file = whole.documents // whole.files_indexed
    assert docs_per_file >= 2 and whole.files_indexed == 300

    monkeypatch.setattr(pipeline, "BATCH_FILES", 10)
    monkeypatch.setattr(pipeline, "PARSE_BATCH_FILES", 5)
    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 20)
    monkeypatch.setattr(pipeline, "EDGES_PER_TRANSACTION", 50)
    held: dict[str, int] = {"write": 0, "detect": 0}
    # Documents other tests left alive (a module's cache, garbage not yet collected) are not this run's:
    # they are kept referenced here so no new document can reuse their ids.
    import gc

    gc.collect()
    leftovers = _documents_with_text()
    earlier = {id(obj) for obj in leftovers}
    edge_writes = []

    class Counting(LocalSink):
        def write_files(self, brain, files, indexed_at, counted=None):
            held["write"] = max(held["write"], _texts_held(earlier))
            return super().write_files(brain, files, indexed_at, counted)

        def write_edges(self, brain, drafts, **kwargs):
            edge_writes.append(len(drafts))
            return super().write_edges(brain, drafts, **kwargs)

    real_detect = parallel.detect_file

    def detect_file(*args, **kwargs):  # as each file is detected: its batch's texts are put back one by one
        held["detect"] = max(held["detect"], _texts_held(earlier))
        return real_detect(*args, **kwargs)

    monkeypatch.setattr(parallel, "detect_file", detect_file)
    with Engine(tmp_path / "streamed", pm) as engine:
        streamed = run(Counting(engine.store, engine.graph), folder, brain="b", clock=lambda: 1_700_000_000_000,
                       pm=pm)
        assert without_system_time(edges_of(engine, "b")) == expected
    assert (streamed.documents, streamed.edges_by_type) == (whole.documents, whole.edges_by_type)
    # a write batch plus the parse batch being queued; a detect batch (its texts put back) at a time
    assert 0 < held["write"] <= (10 + 5) * docs_per_file
    assert 0 < held["detect"] <= 20 * docs_per_file
    # fresh edges were written as detection streamed, about 50 at a time, not in one go at the end
    assert len(edge_writes) > 3 and max(edge_writes) < 50 + 20 * 10 and sum(edge_writes) == whole.edges_written


def test_a_run_gives_back_what_it_kept_out_of_the_cyclic_collector(tmp_path, pm):
    """A run freezes what existed when it started (so full collections skip it) and unfreezes it on every way
    out: after a run, and after a run that failed, the collector sees every object again. In a process that
    froze objects of its own, a run leaves them frozen."""
    import gc

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nsee [[b]]\n")
    (folder / "b.md").write_text("# B\n")
    before = gc.get_freeze_count()
    seen_frozen = []

    class Watching(LocalSink):
        def write_files(self, brain, files, indexed_at, counted=None):
            seen_frozen.append(gc.get_freeze_count())
            return super().write_files(brain, files, indexed_at, counted)

    with Engine(tmp_path / "data", pm) as engine:
        run(Watching(engine.store, engine.graph), folder, brain="b", pm=pm)
        assert seen_frozen and seen_frozen[0] > before
        assert gc.get_freeze_count() == before

        class Failing(LocalSink):
            def write_files(self, brain, files, indexed_at, counted=None):
                raise RuntimeError("disk gone")

        with pytest.raises(RuntimeError):
            run(Failing(engine.store, engine.graph), folder, brain="c", pm=pm)
        assert gc.get_freeze_count() == before
        gc.freeze()
        try:
            run(engine, folder, brain="d", pm=pm)
            assert gc.get_freeze_count() > 0  # not unfrozen (a few of the frozen objects may be freed meanwhile)
        finally:
            gc.unfreeze()


def test_two_links_to_one_directory_walk_it_once_and_name_where(tmp_path):
    from xerj_core.autoindex.walk import SYMLINK_LOOP, FileEntry, Skipped, walk

    folder = tmp_path / "docs"
    (folder / "shared").mkdir(parents=True)
    (folder / "shared" / "a.md").write_text("# A\n")
    (folder / "gcc").symlink_to(folder / "shared", target_is_directory=True)
    (folder / "g++").symlink_to(folder / "shared", target_is_directory=True)
    seen = list(walk(folder))
    files = [entry.rel_path for entry in seen if isinstance(entry, FileEntry)]
    skipped = {entry.rel_path: entry for entry in seen if isinstance(entry, Skipped)}
    # the directory keeps its own path, though both links sort before it
    assert files == ["shared/a.md"] and sorted(skipped) == ["g++", "gcc"]
    for entry in skipped.values():
        assert entry.kind == SYMLINK_LOOP
        assert entry.reason == "link to a directory already walked as [shared]"


def test_a_link_to_a_directory_outside_the_folder_is_walked_where_it_sits_after_the_rest(tmp_path):
    from xerj_core.autoindex.walk import FileEntry, walk

    outside, folder = tmp_path / "elsewhere", tmp_path / "notes"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "b.md").write_text("# B\n")
    (outside / "c.md").write_text("# C\n")
    (folder / "m").mkdir(parents=True)
    (folder / "m" / "z.md").write_text("# Z\n")
    (folder / "a-link").symlink_to(outside, target_is_directory=True)
    (folder / "m" / "inner").symlink_to(folder / "m", target_is_directory=True)  # a loop, reported
    seen = list(walk(folder))
    assert [e.rel_path for e in seen if isinstance(e, FileEntry)] == ["m/z.md", "a-link/c.md", "a-link/deep/b.md"]
    assert [(e.rel_path, e.reason) for e in seen if not isinstance(e, FileEntry)] == [
        ("m/inner", "symlink loop: this directory was already walked as [m]")]
