"""Autoindex's memory: tasks go out a window at a time, and the data file's map does not stay resident."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xerj_core.autoindex import pipeline
from xerj_core.autoindex.parallel import InlineExecutor, parse_batch
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink
from xerj_core.engine import Engine
from xerj_core.plugins import get_plugin_manager
from xerj_core.store import residency
from xerj_core.store.env import Environment

from .test_autoindex_executor import CLOCK, generate, stored


class Counting(InlineExecutor):
    """An executor that counts the parse tasks it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.parses = 0

    def submit(self, fn, /, *args, **kwargs):
        self.parses += fn is parse_batch
        return super().submit(fn, *args, **kwargs)


def test_parse_tasks_go_out_a_window_at_a_time(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", 120)
    monkeypatch.setattr(pipeline, "PARSE_BATCH_FILES", 4)
    monkeypatch.setattr(pipeline, "BATCH_FILES", 4)
    executor = Counting()
    out_at_writes: list[int] = []

    class Watching(LocalSink):
        def write_files(self, brain, files, indexed_at, counted=None):
            out_at_writes.append(executor.parses)
            return super().write_files(brain, files, indexed_at, counted)

    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        summary = run(Watching(eng.store, eng.graph), folder, brain="b", clock=CLOCK, executor=executor, workers=1,
                      pm=eng.pm)
        edges = stored(eng, "b")
    batches = -(-122 // 4)
    assert executor.parses >= batches  # every changed file parsed (and the unchanged none: a first run)
    # with one worker the window is two tasks: at each write the batches taken so far (one or two, as the
    # junk file fails and picture.bin yields nothing) and two more are out, never the whole corpus
    assert out_at_writes[0] <= 4 < batches
    assert all(later - earlier <= 4 for earlier, later in zip(out_at_writes, out_at_writes[1:]))
    with Engine(tmp_path / "inline", get_plugin_manager()) as eng:
        expected = run(eng, folder, brain="b", clock=CLOCK)
        assert stored(eng, "b") == edges
    assert summary.edges_by_type == expected.edges_by_type and summary.documents == expected.documents


def _resident_mb(path: Path) -> float:
    """This process's resident MB of its read-only shared mappings of ``path`` (``/proc/self/smaps``)."""
    target, resident, inside = str(path.resolve()), 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                inside = len(fields) == 6 and fields[1] == "r--s" and fields[5] == target
            elif inside and fields[0] == "Rss:":
                resident += int(fields[1])
    return resident / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the map's pages are given back on Linux only")
def test_release_pages_drops_the_map_and_reads_stay_right(tmp_path):
    env = Environment(tmp_path / "d")
    try:
        values = {f"k{i:05d}".encode(): bytes([i % 251]) * 8192 for i in range(2000)}  # ~16 MB of overflow pages
        env.write(lambda txn: [txn.put(k, v, db=env.dbs["aux"]) for k, v in values.items()])
        with env.begin_read() as txn:
            assert all(txn.get(k, db=env.dbs["aux"]) == v for k, v in values.items())
        data = tmp_path / "d" / "data.mdb"
        assert residency.mapped_ranges(data) and _resident_mb(data) > 12
        before = residency.file_resident_bytes()
        env.release_pages()
        assert _resident_mb(data) < 1
        assert before - residency.file_resident_bytes() > 10 << 20  # what the sink checks before dropping
        with env.begin_read() as txn:  # the pages come back from the page cache, unchanged
            assert all(txn.get(k, db=env.dbs["aux"]) == v for k, v in values.items())
        # and during a write transaction, from another thread, as the sink does every RELEASE_EVERY_S
        def write(txn):
            for k, v in values.items():
                assert txn.get(k, db=env.dbs["aux"]) == v
                txn.put(k, v[::-1], db=env.dbs["aux"])
            with residency.Every(lambda: env.release_pages(heap=False), 0.001):
                for k, v in values.items():
                    assert txn.get(k, db=env.dbs["aux"]) == v[::-1]

        env.write(write)
        with env.begin_read() as txn:
            assert all(txn.get(k, db=env.dbs["aux"]) == v[::-1] for k, v in values.items())
    finally:
        env.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the map's pages are given back on Linux only")
def test_release_pages_since_drops_only_the_pages_mapped_since(tmp_path):
    """What a background merge does: the pages read after ``pages_mapped()`` are dropped, the ones mapped before
    it (a writer's working set) stay mapped, and reads stay right."""
    env = Environment(tmp_path / "d")
    try:
        kept = {f"a{i:05d}".encode(): bytes([i % 251]) * 8192 for i in range(1500)}  # ~12 MB each
        read = {f"b{i:05d}".encode(): bytes([i % 241]) * 8192 for i in range(1500)}
        env.write(lambda txn: [txn.put(k, v, db=env.dbs["aux"]) for k, v in {**kept, **read}.items()])
        data = tmp_path / "d" / "data.mdb"
        env.release_pages()
        with env.begin_read() as txn:
            assert all(txn.get(k, db=env.dbs["aux"]) == v for k, v in kept.items())
        before, mapped = env.pages_mapped(), _resident_mb(data)
        assert before is not None and mapped > 10
        with env.begin_read() as txn:
            assert all(txn.get(k, db=env.dbs["aux"]) == v for k, v in read.items())
        assert _resident_mb(data) > mapped + 5
        env.release_pages(heap=False, since=before)
        assert abs(_resident_mb(data) - mapped) < 0.5  # the kept pages are all still mapped, the others gone
        with env.begin_read() as txn:
            assert all(txn.get(k, db=env.dbs["aux"]) == v for k, v in {**kept, **read}.items())
        env.release_pages(heap=False)
        assert _resident_mb(data) < 1
    finally:
        env.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the map's pages are given back on Linux only")
def test_an_autoindex_run_leaves_little_of_the_map_resident(tmp_path):
    folder = generate(tmp_path / "gen", 400)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        run(eng, folder, brain="b", clock=CLOCK)
        data = tmp_path / "d" / "data.mdb"
        size = data.stat().st_size / 2**20
        assert size > 4 and _resident_mb(data) < size / 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the map's pages are given back on Linux only")
def test_naming_the_standing_edges_leaves_little_of_the_map_resident(tmp_path):
    """A re-run's reconcile names every standing edge; the first time, that reads each edge's record (to pack the
    segments' ids), and those pages are given back as a write's are."""
    folder = generate(tmp_path / "gen", 400)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        run(eng, folder, brain="b", clock=CLOCK)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        data = tmp_path / "d" / "data.mdb"
        before = _resident_mb(data)
        standing = LocalSink.of_engine(eng).standing_edges("b")
        size = data.stat().st_size / 2**20
        assert len(standing.live) > 1000 and size > 4
        assert _resident_mb(data) - before < size / 8


def test_kept_documents_share_equal_fields_maps_and_keep_every_value():
    from xerj_core.autoindex.kept import Kept, shared_fields
    from xerj_core.autoindex.parallel import ParseOutcome
    from xerj_core.autoindex.walk import FileEntry
    from xerj_core.model import SourceDocument

    def doc(doc_id: str, fields: dict) -> SourceDocument:
        return SourceDocument(doc_id, "ax-notes", "a.md", "t", "some text", "", "section", 1, "markdown", fields)

    maps = [{"ordinal": 1, "anchor": "x"}, {"ordinal": 1, "anchor": "x"}, {"anchor": "x", "ordinal": 1},
            {"ordinal": True, "anchor": "x"}, {"ordinal": 1.0, "anchor": "x"}, {"aliases": ["a"]},
            {"aliases": ["a"]}, {}, {"ordinal": 1, "anchor": "x"}]
    docs = [doc(f"a.md#{i}", dict(fields)) for i, fields in enumerate(maps)]
    table: dict = {}
    shared = shared_fields(docs, table)
    assert shared == tuple(docs)  # equal documents, every value and its type kept
    assert [list(d.fields.items()) for d in shared] == [list(m.items()) for m in maps]
    assert [type(d.fields.get("ordinal")) for d in shared] == [type(m.get("ordinal")) for m in maps]
    assert shared[1].fields is shared[0].fields and shared[8].fields is shared[0].fields
    assert shared[2].fields is not shared[0].fields  # another key order is another map
    assert shared[3].fields is not shared[0].fields and shared[4].fields is not shared[0].fields  # True, 1.0
    assert shared[6].fields is not shared[5].fields  # a list value is not shared
    # a kept file puts its texts back, and its maps are shared through the run's table
    entry = FileEntry.__new__(FileEntry)
    kept = Kept.of(ParseOutcome(entry, tuple(docs[:2])), table)
    assert kept.docs[0].fields is shared[0].fields and kept.docs[0].text == ""
    assert kept.documents() == tuple(docs[:2])
    assert Kept.of(ParseOutcome(entry, tuple(docs[:2]))).sharing(table).docs[1].fields is shared[0].fields


def test_the_shared_maps_table_holds_a_number_per_map_and_shares_only_equal_maps():
    """Code's maps are mostly unique (a symbol, a line): the table keeps each by a hash of its items, not a tuple of
    them, and a map meeting another on that hash is shared only when the two are equal, types and order too."""
    from xerj_core.autoindex.kept import shared_fields
    from xerj_core.model import SourceDocument

    def doc(doc_id: str, fields: dict) -> SourceDocument:
        return SourceDocument(doc_id, "ax-code", "a.py", "t", "", "", "symbol", 1, "python", fields)

    unique = [doc(f"a.py#{i}", {"symbol": f"f{i}", "line": i}) for i in range(500)]
    table: dict = {}
    shared_fields(unique, table)
    assert len(table) == 500 and all(type(key) is int for key in table)
    # another map filed under the hash of this one's items (a collision) is not given to it
    mine = {"symbol": "g", "line": 3}
    for other in ({"symbol": "h", "line": 3}, {"name": "g", "line": 3}, {"symbol": "g", "line": 3.0},
                  {"symbol": "g"}):
        table = {hash((*mine.items(), *map(type, mine.values()))): other}
        assert shared_fields([doc("a.py#g", dict(mine))], table)[0].fields == mine
        assert shared_fields([doc("a.py#g", dict(mine))], table)[0].fields is not other
    table = {hash((*mine.items(), *map(type, mine.values()))): dict(mine)}
    assert shared_fields([doc("a.py#g", dict(mine))], table)[0].fields is next(iter(table.values()))


def test_a_kept_page_holds_its_links_apart_and_the_corpus_never_sees_them():
    """A page's links are most of what a run keeps of it until detection, and only its own detection reads them:
    a kept file holds them compressed with its texts and puts the documents back whole, and a corpus (built
    from kept documents or from whole ones) holds none."""
    from xerj_core.autoindex.detect import Corpus
    from xerj_core.autoindex.kept import Kept
    from xerj_core.autoindex.parallel import ParseOutcome
    from xerj_core.autoindex.walk import FileEntry
    from xerj_core.model import SourceDocument

    links = [{"href": "b.html", "offset": 0, "label": "Next"}, {"href": "c.html#x", "offset": 12}]
    card = SourceDocument("a.html", "ax-web", "a.html", "A", "first line\nsecond", "", "file", 1, "html",
                          {"links": links, "encoding": "utf-8", "big": 2 ** 70})
    note = SourceDocument("n.md", "ax-notes", "n.md", "N", "text", "", "file", 1, "markdown", {"aliases": ["en"]})
    entry = FileEntry.__new__(FileEntry)
    kept = Kept.of(ParseOutcome(entry, (card,)), {})
    assert kept.docs[0].fields == {"encoding": "utf-8", "big": 2 ** 70} and kept.docs[0].text == ""
    assert kept.documents() == (card,) and list(kept.documents()[0].fields) == ["links", "encoding", "big"]
    plain = Kept.of(ParseOutcome(entry, (note,)))
    assert plain.own == b"" and plain.documents() == (note,)
    for corpus in (Corpus({"a.html": kept.docs, "n.md": plain.docs}), Corpus({"a.html": [card], "n.md": [note]})):
        assert "links" not in corpus.card("a.html").fields and corpus.card("a.html").fields["encoding"] == "utf-8"
        assert corpus.card("n.md").fields == {"aliases": ["en"]}


def test_remade_documents_keep_every_other_attribute():
    """``remade`` (and ``with_text`` through it) builds documents positionally for speed: it must equal
    ``attrs.evolve`` for every attribute, so a field added to SourceDocument cannot be dropped silently."""
    import attrs

    from xerj_core.autoindex.kept import remade, with_text
    from xerj_core.model import SourceDocument

    values = {a.name: f"v-{a.name}" for a in attrs.fields(SourceDocument)}
    values["mtime_ms"] = 7
    original = SourceDocument(**values)
    assert remade(original, "new", {"k": 1}) == attrs.evolve(original, text="new", fields={"k": 1})
    assert with_text(original, "x") == attrs.evolve(original, text="x")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the map's pages are given back on Linux only")
@pytest.mark.parametrize("giving_back", [True, False])
@pytest.mark.parametrize("kind", ["detections", "parses"])
def test_reading_the_cache_gives_its_pages_back_as_it_goes(tmp_path, monkeypatch, kind, giving_back):
    """A run reads each remembered detection and parse once: the pages of the cache's map it read are given back
    every GIVE_BACK_ENTRIES entries and at the end, not kept to the run's end (each read of a random key maps
    about 64 KB around it). Without giving back (the control), the same reads leave most of the file resident."""
    import os
    import pickle

    from xerj_core.autoindex import parsecache
    from xerj_core.autoindex.kept import Kept
    from xerj_core.autoindex.parallel import ParseOutcome
    from xerj_core.autoindex.walk import FileEntry
    from xerj_core.model import SourceDocument

    directory = tmp_path / "cache"
    directory.mkdir()
    parsecache._empty_older(str(directory))
    parsecache._empty_older(str(directory / "detections.mdb"), subdir=False)
    cache = parsecache.ParseCache(str(directory), "/folder", b"f" * 16, b"d" * 16)
    paths = [f"note-{i}.md" for i in range(2000)]
    if kind == "detections":
        entries = {path: ("entry", os.urandom(3000)) for path in paths}
        cache.keep_detections(entries)
        data = directory / "detections.mdb"
        read = lambda: cache.recall_detections(paths)  # noqa: E731
    else:
        files = [FileEntry(path, tmp_path / path, 10, 20) for path in paths]
        entries = {entry.rel_path: parsecache.Cached(Kept.of(ParseOutcome(None, (SourceDocument(
            entry.rel_path, "notes", entry.rel_path, "t", os.urandom(1500).hex(), "", "file", 1, "markdown", {}),))),
            "digest", None) for entry in files}
        cache.store([(entry, entries[entry.rel_path]) for entry in files])
        data = directory / "data.mdb"
        read = lambda: cache.lookup(files, False)  # noqa: E731
    size = data.stat().st_size / 2**20
    if not giving_back:
        monkeypatch.setattr(parsecache, "GIVE_BACK_ENTRIES", 10**9)
        monkeypatch.setattr(parsecache._Reads, "give_back", lambda self: None)
    residency.drop_pages(residency.mapped_ranges(data))
    seen = []
    loads = pickle.loads

    def sampled(blob):
        seen.append(_resident_mb(data) if len(seen) % 100 == 99 else 0.0)
        return loads(blob)

    monkeypatch.setattr(parsecache.pickle, "loads", sampled)
    assert read() == entries
    assert size > 6 and len(seen) >= 2000
    if giving_back:
        assert max(seen) < size / 2 and _resident_mb(data) < 0.5
    else:
        assert max(seen) > size / 2 and _resident_mb(data) > size / 2


def test_a_kept_files_texts_are_spilled_and_read_back_whole(tmp_path):
    """The companion writes kept files' compressed texts to an unnamed file beside the parse cache: a spilled
    file puts back the same documents, a spill holds nothing in memory but its place, leaves no file behind, and a
    spilled file pickled (sent elsewhere) carries its texts."""
    import pickle

    from xerj_core.autoindex.kept import Kept, Spill, Spilled
    from xerj_core.autoindex.parallel import ParseOutcome
    from xerj_core.autoindex.walk import FileEntry
    from xerj_core.model import SourceDocument

    entry = FileEntry.__new__(FileEntry)
    docs = [tuple(SourceDocument(f"f{n}.py#{i}", "ax-code", f"f{n}.py", "t", f"def f{i}():\n    return {n * i}\n" * 40,
                                 "", "symbol", 1, "python", {"symbol": f"f{i}", "line": i}) for i in range(5))
            for n in range(30)]
    kept = [Kept.of(ParseOutcome(entry, file_docs)) for file_docs in docs]
    spill = Spill(tmp_path)
    assert list(tmp_path.iterdir()) == []  # no name: nothing to leave behind
    spilled = [held.spilled(spill) for held in kept]
    assert all(type(held.texts) is Spilled for held in spilled)
    assert [held.documents() for held in reversed(spilled)] == list(reversed(docs))  # read back in any order
    again = pickle.loads(pickle.dumps(spilled[3]))
    assert type(again.texts) is bytes and again.documents() == docs[3]
    assert spilled[0].spilled(spill) is spilled[0]  # spilled once
    empty = Kept.of(ParseOutcome(entry, (SourceDocument("e.py", "ax-code", "e.py", "", "", "", "card", 1, "python",
                                                          {}),)))
    spill.close()
    assert empty.spilled(Spill(tmp_path)).documents() == empty.documents()


def test_the_companion_spills_the_texts_it_keeps_beside_the_parse_cache(tmp_path):
    """A companion with a parse cache keeps its files' texts in a spill there (not in its memory), and detects
    them as it would from memory; without a cache (no data directory) it keeps them in memory."""
    from xerj_core.autoindex import parallel
    from xerj_core.autoindex.kept import Spilled
    from xerj_core.autoindex.parsecache import open_cache
    from xerj_core.autoindex.walk import FileEntry
    from xerj_core.plugins import get_plugin_manager

    from .test_autoindex_executor import generate

    folder = generate(tmp_path / "gen", 40)
    entries = [FileEntry(p.relative_to(folder).as_posix(), p, 0, 0) for p in sorted(folder.rglob("*.md"))]
    plugins = parallel.Plugins.from_manager(get_plugin_manager())
    found = {}
    for name, cache in (("memory", None), ("spill", open_cache(tmp_path / "cache", str(folder), plugins))):
        token = f"spill-{name}"
        parallel.parse_and_keep(plugins, token, entries[:20], True, False, 0, cache)
        parallel.parse_and_keep(plugins, token, entries[20:], True, False, 1, cache)
        state = parallel._companion_state(token)
        kinds = {type(held.texts) for held in state["kept"].values()}
        assert kinds == ({Spilled} if cache is not None else {bytes})
        ordered, _counters = parallel.combine_kept(plugins, token, 2)
        columns, ids = parallel.unpack_drafts(parallel.detect_kept(plugins, token, ordered))
        found[name] = sorted(ids)
    assert found["spill"] == found["memory"] and found["memory"]
    assert not [p for p in (tmp_path / "cache").iterdir() if ".mdb" not in p.name]  # the spill has no name


def test_a_re_run_in_one_process_spills_the_texts_it_keeps_and_finds_the_same_edges(tmp_path, monkeypatch):
    """A re-run that detects in its own process (one file changed: no companion) keeps every file for the corpus;
    their texts wait for their detect batch in a spill beside the parse cache, and the run finds the edges a run
    keeping them in memory finds."""
    import os

    from xerj_core.autoindex import kept as kept_module
    from xerj_core.autoindex.kept import Kept

    spilled = []
    real = Kept.spilled

    def counted(self, spill):
        spilled.append(spill)
        return real(self, spill)

    found = {}
    for name in ("memory", "spill"):
        folder = generate(tmp_path / f"gen-{name}", 60)
        with monkeypatch.context() as patch:
            if name == "memory":
                patch.setattr(pipeline, "open_spill", lambda directory: None)
            patch.setattr(Kept, "spilled", counted)
            with Engine(tmp_path / name, get_plugin_manager()) as eng:
                run(eng, folder, brain="b", clock=CLOCK)
                note = sorted(folder.rglob("*.md"))[3]
                note.write_text(note.read_text() + "\nan edit\n")
                os.utime(note, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
                before = len(spilled)
                assert run(eng, folder, brain="b", clock=CLOCK).files_indexed == 1
                assert {type(s) for s in spilled[before:]} == ({kept_module.Spill} if name == "spill" else set())
                found[name] = stored(eng, "b")
    assert found["spill"] == found["memory"] and found["memory"]
