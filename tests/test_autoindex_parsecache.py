"""The parse cache: an edit re-parses the edited file only, with the brain a run without the cache builds; what
does not verify is a miss; a cache that cannot be used is skipped."""

from __future__ import annotations

import importlib
import mailbox
import os
import shutil
import sys
from email.message import EmailMessage
from pathlib import Path

import lmdb
import pytest

from xerj_core.autoindex import detectmemo, kept as kept_module, mapped, parallel, parsecache
from xerj_core.autoindex.kept import Kept
from xerj_core.autoindex.parallel import ParseOutcome
from xerj_core.autoindex.parsecache import Cached, ParseCache, fingerprint, user_cache_dir
from xerj_core.autoindex.pipeline import WARM_PROBE_FILES, run
from xerj_core.autoindex.sink import LocalSink
from xerj_core.autoindex.walk import FileEntry
from xerj_core.engine import Engine
from xerj_core.model import SourceDocument
from xerj_core.plugins import get_plugin_manager

from .test_autoindex import FOAM, copy_corpus, edges_of, index_of, save_again, without_system_time
from .test_autoindex_remote import autoindex, server, url, without_clock  # noqa: F401 - its server fixtures

pytestmark = pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")


@pytest.fixture
def foam(tmp_path):
    return copy_corpus(FOAM, tmp_path / "foam-docs")


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The root-relative paths each run parses (in this process: a run of 87 files opens no pool)."""
    seen: list[str] = []
    real = parallel.parse_file

    def counting(formats, rel_path, data, mtime_ms, **options):
        seen.append(rel_path)
        return real(formats, rel_path, data, mtime_ms, **options)

    monkeypatch.setattr(parallel, "parse_file", counting)
    return seen


def documents_of(engine, brain: str, dataset: str = "ax-notes") -> dict[str, dict]:
    with engine.store.reader(index_of(engine, brain, dataset)) as r:
        return {doc_id: source for doc_id, source, _ in (r.document(int(row)) for row in r.live_rows())}


def test_an_edit_parses_the_edited_file_only_and_builds_the_brain_a_run_without_the_cache_builds(
        tmp_path, foam, pm, parsed, monkeypatch):
    edited = foam / "user/features/wikilinks.md"
    copies = [copy_corpus(FOAM, tmp_path / "copy" / "foam-docs")]

    def edit(times: int) -> None:
        with edited.open("a") as out:
            out.write(f"\nSee [[index]] and docs/setup.md, {times} times.\n")
        save_again(edited, 5)
        copies.append(tmp_path / f"edit-{times}.md")
        shutil.copy2(edited, copies[-1])

    with Engine(tmp_path / "cached", pm) as engine:
        run(engine, foam, brain="b", clock=lambda: 1_000)
        assert len(parsed) == 87
        entries = [FileEntry(p.relative_to(foam).as_posix(), p, p.stat().st_mtime_ns, p.stat().st_size)
                   for p in foam.rglob("*.md")]
        cache = parsecache.open_cache(tmp_path / "cached" / "autoindex-cache", str(foam.resolve()),
                                      parallel.Plugins.from_manager(pm))
        assert cache.lookup(entries, True) == {}  # a first run keeps nothing
        for times, expect in ((1, 87), (2, 1), (3, 1)):
            parsed.clear()
            edit(times)
            summary = run(engine, foam, brain="b", clock=lambda: 1_000 + times)
            # the first edit parses the unchanged files for the corpus, and keeps them; the next ones need not
            assert (len(parsed), summary.files_indexed, summary.files_unchanged) == (expect, 1, 86)
        assert parsed == ["user/features/wikilinks.md"]
        cached_edges, cached_docs = without_clock(edges_of(engine, "b")), documents_of(engine, "b")

    monkeypatch.setattr(LocalSink, "cache_dir", lambda self: None)
    fresh = copies[0]
    with Engine(tmp_path / "uncached", pm) as engine:
        run(engine, fresh, brain="b", clock=lambda: 1_000)
        for times in (1, 2, 3):
            parsed.clear()
            shutil.copy2(copies[times], fresh / "user/features/wikilinks.md")
            run(engine, fresh, brain="b", clock=lambda: 1_000 + times)
            assert len(parsed) == 87  # without a cache, every unchanged file is parsed again for the corpus
        assert without_clock(edges_of(engine, "b")) == cached_edges
        assert documents_of(engine, "b") == cached_docs
    assert not (tmp_path / "uncached" / "autoindex-cache").exists()


def test_a_folder_touched_whole_is_not_parsed_nor_detected_again_at_the_next_edit(tmp_path, foam, pm, parsed,
                                                                                    monkeypatch):
    """A checkout, a copy without its times or a sync touches every file over the same bytes: the run after
    reads each once to tell, and keeps the brain as it was. The edit after that parses the edited file only:
    the cached parses of the others, under their earlier mtimes, still serve (their bytes are the brain's), and
    so do their remembered detections. Before, that edit parsed and detected the whole folder again."""
    detected: list[str] = []
    real_detect = detectmemo.detect_noting

    def noting(detectors, file_docs, *args, **kwargs):
        detected.append(list(file_docs)[0].ax_path)
        return real_detect(detectors, file_docs, *args, **kwargs)

    monkeypatch.setattr(detectmemo, "detect_noting", noting)
    edited = foam / "user/features/wikilinks.md"
    with Engine(tmp_path / "data", pm) as engine:
        run(engine, foam, brain="b", clock=lambda: 1_000)
        save_again(edited, 5)
        run(engine, foam, brain="b", clock=lambda: 2_000)  # keeps every file's parse and detection
        before = edges_of(engine, "b")
        parsed.clear(), detected.clear()
        save_again(edited, 5)
        plain = run(engine, foam, brain="b", clock=lambda: 3_000)  # an edit, for what it parses and detects
        plain_detected = set(detected)
        assert parsed == ["user/features/wikilinks.md"] and len(plain_detected) < 87 // 4
        later = 1_800_000_000_000_000_000
        for path in foam.rglob("*"):
            if path.is_file():
                os.utime(path, ns=(later, later))
        touched = run(engine, foam, brain="b", clock=lambda: 4_000)
        assert touched.files_indexed == 0 and touched.edges_written == 0 and edges_of(engine, "b") == before
        parsed.clear(), detected.clear()
        save_again(edited, 5)
        summary = run(engine, foam, brain="b", clock=lambda: 5_000)
        assert parsed == ["user/features/wikilinks.md"] and set(detected) == plain_detected
        assert (summary.edges_written, summary.edges_invalidated) == (0, 0)
        assert summary.edges_continued == plain.edges_continued  # the others' claims stand under their own ids
        assert edges_of(engine, "b") == before


@pytest.mark.parametrize("map_from", [mapped.MAP_FROM, 1], ids=["read", "mapped"])
def test_mail_appended_to_a_mailbox_is_read_alone_and_builds_the_brain_a_whole_read_builds(
        tmp_path, pm, parsed, monkeypatch, map_from):
    monkeypatch.setattr(mapped, "MAP_FROM", map_from)  # a mailbox of many MiB is read through a map

    def message(n: int) -> EmailMessage:
        msg = EmailMessage()
        msg["Subject"], msg["From"], msg["Message-ID"] = f"Note {n}", "ada@example.org", f"<{n}@x>"
        if n > 1:
            msg["In-Reply-To"] = f"<{n - 1}@x>"
        msg.set_content(f"Message {n} on sourdough.")
        return msg

    def append(folder: Path, n: int, seconds: int) -> None:
        box = mailbox.mbox(folder / "mail" / "inbox.mbox")
        box.add(message(n))
        box.flush()
        os.utime(folder / "mail" / "inbox.mbox", ns=(1, 1_700_000_000_000_000_000 + seconds * 1_000_000_000))

    results = []
    for cached in (True, False):
        folder = tmp_path / f"folder-{cached}"
        (folder / "mail").mkdir(parents=True)
        (folder / "mail" / "plan.md").write_text("# Plan\n\nBake.\n")
        os.utime(folder / "mail" / "plan.md", ns=(1, 1_700_000_000_000_000_000))
        for n in range(1, 4):
            append(folder, n, n)
        if not cached:
            monkeypatch.setattr(LocalSink, "cache_dir", lambda self: None)
        with Engine(tmp_path / f"data-{cached}", pm) as engine:
            run(engine, folder, brain="b", clock=lambda: 1_000)
            for n in (4, 5):
                parsed.clear()
                append(folder, n, n)
                summary = run(engine, folder, brain="b", clock=lambda: 1_000 + n)
                assert summary.files_indexed == 1 and not summary.files_failed
                if cached:
                    # the cache holds no parse of it before the first append (a first run keeps none), then does
                    assert parsed.count("mail/inbox.mbox") == (1 if n == 4 else 0)
            if cached:  # a note that grew is parsed whole, its earlier parse never read back
                asked: list[str] = []
                earlier = ParseCache.earlier
                with (folder / "mail" / "plan.md").open("a") as out:
                    out.write("More.\n")
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(ParseCache, "earlier", lambda self, entry: asked.append(entry.rel_path)
                                  or earlier(self, entry))
                    run(engine, folder, brain="b", clock=lambda: 1_010)
                assert asked == [] and "mail/plan.md" in parsed
                (folder / "mail" / "plan.md").write_text("# Plan\n\nBake.\n")
                os.utime(folder / "mail" / "plan.md", ns=(1, 1_700_000_000_000_000_000))
                run(engine, folder, brain="b", clock=lambda: 1_011)
            results.append((without_clock(edges_of(engine, "b")), documents_of(engine, "b", "ax-mail")))
    assert results[0] == results[1]
    docs = results[0][1]
    assert {f"mail/inbox.mbox#msg-{n}" for n in range(1, 6)} <= set(docs) and docs["mail/inbox.mbox"]["messages"] == 5
    assert sum(1 for edge in results[0][0].values() if edge["type"] == "email_thread") == 4


def test_a_damaged_cache_is_a_miss_and_the_run_parses_again(tmp_path, foam, pm, parsed):
    with Engine(tmp_path / "data", pm) as engine:
        run(engine, foam, brain="b")
        save_again(foam / "index.md", 5)
        run(engine, foam, brain="b")  # the first edit keeps every parse
        env = parsecache._open(str(tmp_path / "data" / "autoindex-cache"))  # one environment per process
        with env.begin(write=True) as txn:
            keys = [bytes(key) for key, _ in txn.cursor() if bytes(key) != parsecache._SCHEMA_KEY]
            assert len(keys) == 87 and txn.get(parsecache._SCHEMA_KEY) is not None  # an entry per file
            for position, key in enumerate(keys):  # a torn header, a flipped payload byte, an empty value
                value = txn.get(key)
                txn.put(key, (value[:10], value[:-1] + bytes([value[-1] ^ 1]), b"")[position % 3])
        before = without_system_time(edges_of(engine, "b"))
        parsed.clear()
        save_again(foam / "index.md", 5)
        summary = run(engine, foam, brain="b")
        assert sorted(parsed) == sorted(set(parsed)) and len(parsed) == 87
        assert summary.files_failed == [] and summary.files_indexed == 1
        assert set(without_system_time(edges_of(engine, "b"))) >= {
            eid for eid, edge in before.items() if "invalid_at" not in edge and edge["src"] != "index.md"}
        parsed.clear()
        save_again(foam / "index.md", 5)
        run(engine, foam, brain="b")  # what the last run parsed is cached again
        assert parsed == ["index.md"]


def test_a_cache_that_cannot_be_opened_is_skipped(tmp_path, foam, pm, parsed, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache's directory would be")
    monkeypatch.setattr(LocalSink, "cache_dir", lambda self: blocked / "autoindex-cache")
    with Engine(tmp_path / "data", pm) as engine:
        first = run(engine, foam, brain="b")
        save_again(foam / "index.md", 5)
        second = run(engine, foam, brain="b")
    assert first.files_indexed == 87 and second.files_indexed == 1 and second.files_failed == []
    assert len(parsed) == 87 + 87  # the edit parses every file again, as without a cache


def test_a_removed_file_leaves_the_cache(tmp_path, foam, pm):
    with Engine(tmp_path / "data", pm) as engine:
        run(engine, foam, brain="b")
        save_again(foam / "index.md", 5)
        run(engine, foam, brain="b")
        gone = foam / "inbox.md"
        entry = FileEntry("inbox.md", gone, gone.stat().st_mtime_ns, gone.stat().st_size)
        cache = parsecache.open_cache(tmp_path / "data" / "autoindex-cache", str(foam.resolve()),
                                      parallel.Plugins.from_manager(pm))
        assert set(cache.lookup([entry], True)) == {"inbox.md"}
        gone.unlink()
        run(engine, foam, brain="b")
        assert cache.lookup([entry], True) == {}


def test_a_run_through_a_server_keeps_its_cache_in_the_user_cache_directory(url, foam, parsed):  # noqa: F811
    assert Path(os.environ["XERJ_CACHE_DIR"]) in user_cache_dir().parents  # set for the tests by conftest
    autoindex(str(foam), "--brain", "cached-remote", "--url", url)
    for expect in (87, 1):
        parsed.clear()
        save_again(foam / "user/features/wikilinks.md", 5)
        summary = autoindex(str(foam), "--brain", "cached-remote", "--url", url)
        assert len(parsed) == expect and summary["files_indexed"] == 1
    assert parsed == ["user/features/wikilinks.md"] and (user_cache_dir() / "data.mdb").is_file()


# -- the cache itself ---------------------------------------------------------------------------------------

def _doc(path: str) -> SourceDocument:
    return SourceDocument(doc_id=path, dataset="notes", ax_path=path, title=path, text="some text", section="",
                          kind="file", mtime_ms=1, format="markdown", fields={"aliases": ["a"]})


def test_an_entry_serves_its_stamp_and_its_plugins_only(tmp_path):
    cache = ParseCache(str(tmp_path), "/root", b"f" * 16, b"d" * 16)
    entry = FileEntry("a.md", tmp_path / "a.md", 10, 20)
    held = Cached(Kept.of(ParseOutcome(None, (_doc("a.md"),))), "digest", {"sharedterm": (1, 2)})
    ParseCache(str(tmp_path), "/root", b"f" * 16, b"d" * 16, keep=False).store([(entry, held)])
    assert cache.lookup([entry], True) == {}  # a run that only looks up keeps nothing
    cache.store([(entry, held)])
    assert cache.lookup([entry], True) == {"a.md": held}
    assert cache.lookup([entry], True)["a.md"].kept.documents() == (_doc("a.md"),)  # its text put back
    assert cache.lookup([entry], False)["a.md"].partial is None  # a parse without partials gets none
    other_detectors = ParseCache(str(tmp_path), "/root", b"f" * 16, b"e" * 16)
    assert other_detectors.lookup([entry], True) == {"a.md": held._replace(partial=None)}
    for stale in (FileEntry("a.md", entry.path, 11, 20), FileEntry("a.md", entry.path, 10, 21)):
        assert cache.lookup([stale], True) == {}
    # touched since over the bytes the brain holds (the run passes their digest): served, with its older mtime
    touched = FileEntry("a.md", entry.path, 11, 20, digest="digest")
    assert cache.lookup([touched], True) == {"a.md": held._replace(mtime_ns=10)}
    for other in (FileEntry("a.md", entry.path, 11, 20, digest="other bytes"),
                  FileEntry("a.md", entry.path, 11, 21, digest="digest")):
        assert cache.lookup([other], True) == {}
    cache.store([(touched, held._replace(mtime_ns=10))])  # kept again (summarized anew): under its documents' mtime
    assert cache.lookup([touched], True)["a.md"].mtime_ns == 10
    assert ParseCache(str(tmp_path), "/root", b"g" * 16, b"d" * 16).lookup([entry], True) == {}
    assert ParseCache(str(tmp_path), "/other", b"f" * 16, b"d" * 16).lookup([entry], True) == {}
    missing = ParseCache(str(tmp_path / "missing"), "/root", b"f" * 16, b"d" * 16)
    missing.store([(entry, held)])
    assert missing.lookup([entry], True) == {} and not (tmp_path / "missing").exists()


def _entry_keys(path: str, subdir: bool = True) -> list[bytes]:
    env = lmdb.open(path, subdir=subdir, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return [bytes(key) for key, _ in txn.cursor() if bytes(key) != parsecache._SCHEMA_KEY]
    finally:
        env.close()


def test_a_file_keeps_one_entry_whatever_parsed_or_detected_it(tmp_path):
    """An upgrade (other formats, other detectors) replaces a file's entries rather than adding beside them: the
    cache stays one parse and one detection per file, and the older ones are misses."""
    directory = tmp_path / "cache"
    directory.mkdir()
    entry = FileEntry("a.md", tmp_path / "a.md", 10, 20)
    held = Cached(Kept.of(ParseOutcome(None, (_doc("a.md"),))), "digest", None)
    caches = [ParseCache(str(directory), "/root", formats * 16, detectors * 16)
              for formats, detectors in ((b"f", b"d"), (b"g", b"d"), (b"g", b"e"))]
    for cache in caches:
        parsecache._empty_older(cache.path)
        parsecache._empty_older(os.path.join(cache.path, "detections.mdb"), subdir=False)
        cache.store([(entry, held)])
        cache.keep_detections({"a.md": {"drafts": cache.detectors[:1].decode()}})
        assert cache.lookup([entry], False) == {"a.md": held}
        assert cache.recall_detections(["a.md"]) == {"a.md": {"drafts": cache.detectors[:1].decode()}}
    assert caches[0].lookup([entry], False) == {} and caches[0].recall_detections(["a.md"]) == {}
    assert caches[1].lookup([entry], False) == {"a.md": held}  # the same formats: its parse holds
    assert caches[1].recall_detections(["a.md"]) == {}  # other detectors: its detection does not
    parsecache._ENVS.clear()  # read from outside, as another process would
    assert len(_entry_keys(str(directory))) == 1
    assert len(_entry_keys(str(directory / "detections.mdb"), subdir=False)) == 1


def test_a_cache_of_an_older_layout_is_emptied_once(tmp_path):
    """Entries written when every fingerprint had its own key were never read again once the code moved on: a
    cache without this layout's mark is emptied when a run opens it, and only then."""
    directory = tmp_path / "cache"
    directory.mkdir()
    for path, subdir in ((str(directory), True), (str(directory / "detections.mdb"), False)):
        env = lmdb.open(path, subdir=subdir, map_size=1 << 24)
        with env.begin(write=True) as txn:
            for n in range(50):
                txn.put(n.to_bytes(16, "big"), b"an entry of the older layout")
        env.close()
    plugins = parallel.Plugins.from_manager(get_plugin_manager(builtins_only=True))
    cache = parsecache.open_cache(directory, "/root", plugins)
    assert _entry_keys(str(directory)) == [] and _entry_keys(str(directory / "detections.mdb"), subdir=False) == []
    entry = FileEntry("a.md", tmp_path / "a.md", 10, 20)
    cache.store([(entry, Cached(Kept.of(ParseOutcome(None, (_doc("a.md"),))), "digest", None))])
    parsecache.open_cache(directory, "/root", plugins)
    assert set(cache.lookup([entry], False)) == {"a.md"}  # marked: the next run keeps what it finds


def test_the_fingerprint_follows_the_plugin_code(tmp_path, monkeypatch):
    module = tmp_path / "xerj_cache_probe.py"
    module.write_text("class Probe:\n    name = 'probe'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = importlib.import_module("xerj_cache_probe").Probe()
    try:
        before = fingerprint([probe], "probe")
        assert fingerprint([probe], "probe") == before
        assert fingerprint([probe], "probe@2") != before  # a tag or priority given as a name
        stat = module.stat()
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # the module edited in place
        parsecache._code_stamp.cache_clear()  # as a new process would find it
        assert fingerprint([probe], "probe") != before
        before = fingerprint([probe], "probe")
        (tmp_path / "xerj_cache_probe_helpers.py").write_text("HELPER = 1\n")  # a helper beside it
        parsecache._code_stamp.cache_clear()
        assert fingerprint([probe], "probe") != before
        before = fingerprint([probe], "probe")
        monkeypatch.setattr(parsecache, "WORDS_VERSION", parsecache.WORDS_VERSION + 1)  # words cut otherwise
        assert fingerprint([probe], "probe") != before
    finally:
        sys.modules.pop("xerj_cache_probe", None)


def test_a_file_read_back_for_the_corpus_keeps_its_texts_compressed(tmp_path, foam, pm, monkeypatch):
    """A cached file parsed for detection's corpus only comes back as detection keeps it: no documents, its
    texts compressed as the cache holds them and put back whole (the same documents as a parse) when asked;
    the same entry parsed to be written comes back as documents."""
    plugins = parallel.Plugins.from_manager(pm)
    cache = parsecache.open_cache(tmp_path / "cache", str(foam.resolve()), plugins)
    entries = [FileEntry(rel, foam / rel, (foam / rel).stat().st_mtime_ns, (foam / rel).stat().st_size)
               for rel in ("index.md", "user/features/wikilinks.md")]
    fresh = parallel.parse_batch(plugins, entries, True, False, cache, True)
    assert all(o.docs and o.kept is not None for o in fresh)  # kept once, for the cache and detection alike
    decompressed, unsqueeze = [], kept_module.unsqueeze
    monkeypatch.setattr(kept_module, "unsqueeze", lambda blob: decompressed.append(blob) or unsqueeze(blob))
    again = parallel.parse_batch(plugins, entries, True, False, cache, True)
    assert [o.docs for o in again] == [(), ()] and all(o.yields for o in again) and not decompressed
    for before, after in zip(fresh, again):
        kept = parallel.Kept.of(after, {})
        assert kept.docs == parallel.Kept.of(before, {}).docs and kept.partial == before.partial
        assert kept.documents() == before.docs and after.for_writer() == before.for_writer()
        assert kept.stamp == parallel.Kept.of(before).stamp != 0
    written = parallel.parse_batch(plugins, entries, True, False, cache, False)
    assert [o.docs for o in written] == [o.docs for o in fresh] and all(o.kept is None for o in written)


def test_a_warm_run_fills_a_cold_cache_once_and_leaves_the_brain_as_it_was(tmp_path, foam, pm, parsed,
                                                                           monkeypatch):
    """``--watch``'s first poll: a folder indexed once has neither parses nor detections cached, so the first
    edit would parse and detect every file again; a warm run does that while nothing changed (the brain's
    edges, ids and instants untouched), only when the cache misses, and the edit after it parses the edited file
    and detects the few files its questions touch."""
    detected: list[str] = []
    real = detectmemo.detect_file
    monkeypatch.setattr(detectmemo, "detect_file",
                        lambda detectors, docs, *a, **k: detected.append(docs[0].ax_path) or real(detectors, docs,
                                                                                                     *a, **k))
    with Engine(tmp_path / "data", pm) as engine:
        run(engine, foam, brain="b", clock=lambda: 1_000)
        edges = edges_of(engine, "b")
        parsed.clear()
        assert run(engine, foam, brain="b", clock=lambda: 2_000).files_indexed == 0 and parsed == []  # not asked
        warmed = run(engine, foam, brain="b", clock=lambda: 3_000, warm=True)
        assert len(parsed) == 87 and len(detected) == 87 and edges_of(engine, "b") == edges
        assert (warmed.files_indexed, warmed.edges_written, warmed.edges_invalidated) == (0, 0, 0)
        parsed.clear(), detected.clear()
        looked_up: list[str] = []
        lookup = parsecache.ParseCache.lookup
        monkeypatch.setattr(parsecache.ParseCache, "lookup", lambda self, entries, *a: looked_up.extend(
            e.rel_path for e in entries) or lookup(self, entries, *a))
        run(engine, foam, brain="b", clock=lambda: 4_000, warm=True)  # warm already: a probe, nothing read
        assert parsed == [] and detected == [] and len(looked_up) == WARM_PROBE_FILES
        save_again(foam / "user/features/wikilinks.md", 5)
        assert run(engine, foam, brain="b", clock=lambda: 5_000).files_indexed == 1
        assert parsed == ["user/features/wikilinks.md"] and 0 < len(detected) < 20
