"""Remembered detection: after each kind of edit, a run that reuses the detections it remembered builds the brain a
run without any cache builds, and detects again only the files whose questions' answers changed."""

from __future__ import annotations

import os
import pickle
import shutil
import sys
from pathlib import Path

import lmdb
import pytest

from xerj_core import hookimpl
from xerj_core.autoindex import detectmemo, parallel, parsecache, pipeline
from xerj_core.autoindex.detect import Corpus, DetectorState
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink
from xerj_core.engine import Engine
from xerj_core.errors import PluginError
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.plugins import get_plugin_manager

from .test_autoindex import edges_of
from .test_autoindex_remote import without_clock

NOTES = 40
RARE = [f"zephyrine{k}" for k in range(12)]  # words two notes share, so sharedterm links them


def _note(i: int, notes: int) -> str:
    links = [f"[[n{(i * 7 + 3) % notes}]]", f"[[n{(i * 11 + 5) % notes}#Part B]]", f"[[alias-{(i + 1) % notes}]]"]
    if i % 5 == 0:
        links.append("[[future]]")  # names no note yet
    if i % 6 == 1:
        links.append("[[alias-later]]")  # an alias no note bears yet
    rare = " ".join(RARE[(i // 2 + j) % len(RARE)] for j in range(3))
    return (f"---\naliases: [alias-{i}]\n---\n# Note {i}\n\nthe and of {rare} {' '.join(links)}\n\n"
            f"## Part A\n\nsome words here [n{(i + 2) % notes}](n{(i + 2) % notes}.md)\n\n## Part B\n\nmore words\n")


def _vault(root: Path, notes: int) -> Path:
    for i in range(notes):
        folder = root / ("one" if i % 2 else "two")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i}.md").write_text(_note(i, notes))
    return root


class _Twins:
    """The same folder twice, one indexed with the cache and one without, edited alike (same bytes, same
    mtimes), each run's edges compared."""

    def __init__(self, tmp_path: Path, monkeypatch, notes: int = NOTES, companion: bool = False) -> None:
        self.monkeypatch = monkeypatch
        self.folders = [_vault(tmp_path / "remembered", notes), tmp_path / "fresh"]
        shutil.copytree(self.folders[0], self.folders[1], copy_function=shutil.copy2)
        self.engines = [Engine(tmp_path / "data-remembered"), Engine(tmp_path / "data-fresh")]
        self.clock = 1_000
        self.companion = companion
        # the files detected, one per line: a companion (forked, with these patches) detects in its own process
        self.detected = tmp_path / "detected"
        real = detectmemo.detect_file

        def counted(detectors, file_docs, *args, detected=self.detected, **kwargs):
            with detected.open("a") as out:
                out.write(file_docs[0].ax_path + "\n")
            return real(detectors, file_docs, *args, **kwargs)

        monkeypatch.setattr(detectmemo, "detect_file", counted)
        monkeypatch.setattr(parallel, "detect_file", counted)  # where a run that remembers nothing detects
        if companion:
            monkeypatch.setattr(pipeline, "companion_default", lambda: True)
            monkeypatch.setattr(pipeline, "may_fork", lambda: True)

    def edit(self, change) -> None:
        for folder in self.folders:
            change(folder)
        stamp = 1_700_000_000_000_000_000 + self.clock * 1_000_000_000
        for path in self.folders[0].rglob("*.md"):
            twin = self.folders[1] / path.relative_to(self.folders[0])
            if path.stat().st_mtime_ns != twin.stat().st_mtime_ns:  # what the edit touched: the same mtime
                os.utime(path, ns=(stamp, stamp))
                os.utime(twin, ns=(stamp, stamp))

    def run(self) -> list[str]:
        """Both runs, their edges compared; the files the remembering run detected (in its own process or its
        companion's)."""
        self.clock += 1
        self.detected.write_text("")
        remembered = run(self.engines[0], self.folders[0], brain="b", clock=lambda: self.clock,
                         workers=None if self.companion else 1)
        detected = sorted(self.detected.read_text().split())
        with self.monkeypatch.context() as patched:
            patched.setattr(LocalSink, "cache_dir", lambda sink: None)
            patched.setattr(pipeline, "companion_default", lambda: False)
            fresh = run(self.engines[1], self.folders[1], brain="b", clock=lambda: self.clock, workers=1)
        assert remembered.files_failed == fresh.files_failed == []
        assert without_clock(edges_of(self.engines[0], "b")) == without_clock(edges_of(self.engines[1], "b"))
        return detected

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


@pytest.fixture
def twins(tmp_path, monkeypatch):
    made = _Twins(tmp_path, monkeypatch)
    yield made
    made.close()


def test_a_companion_remembers_and_reuses_detections_alike(tmp_path, monkeypatch):
    """A run with files enough to parse gets a companion (the worker that parses, combines and detects on two
    cores), which keeps and reuses the same entries; the brain is the one a run without the cache builds."""
    twins = _Twins(tmp_path, monkeypatch, companion=True)
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 2)  # two files changed are enough for a companion
    pools: list = []
    real_open = pipeline.open_pool
    monkeypatch.setattr(pipeline, "open_pool", lambda n, **kw: pools.append(real_open(n, **kw)) or pools[-1])
    try:
        everything = twins.run()
        assert len(everything) == NOTES
        two = (_append("one/n3.md", "\nthe and of\n"), _append("two/n4.md", "\nthe and of\n"))
        for change in two:
            twins.edit(change)
        assert twins.run() == everything  # the companion remembers every file
        for change in two:
            twins.edit(change)
        detected = twins.run()  # and reuses what holds
        assert {"one/n3.md", "two/n4.md"} <= set(detected) and len(detected) < NOTES // 2
        assert [pool._max_workers for pool in pools] == [1, 1, 1]  # a companion each run
    finally:
        twins.close()


def _append(rel: str, text: str):
    def change(folder: Path) -> None:
        with (folder / rel).open("a") as out:
            out.write(text)
    return change


def _replace(rel: str, old: str, new: str):
    def change(folder: Path) -> None:
        path = folder / rel
        content = path.read_text()
        assert old in content
        path.write_text(content.replace(old, new))
    return change


def test_each_kind_of_edit_builds_the_brain_a_run_without_the_cache_builds(twins):
    everything = sorted(f"{'one' if i % 2 else 'two'}/n{i}.md" for i in range(NOTES))
    assert twins.run() == everything  # a first run remembers nothing
    twins.edit(_append("one/n3.md", "\nthe and of\n"))
    assert twins.run() == everything  # the first run that detects again remembers every file
    # the words of n3 change but none it shares: n3 is detected, and the files that asked about its documents
    twins.edit(_append("one/n3.md", "\nof the and\n"))
    detected = twins.run()
    assert "one/n3.md" in detected and len(detected) < NOTES // 2
    # a note bearing a name four links wanted: the files naming it are detected again, and link to it
    twins.edit(lambda folder: (folder / "two" / "future.md").write_text("# Future\n\nthe and of\n"))
    detected = twins.run()
    assert {f"two/n{i}.md" for i in range(0, NOTES, 10)} <= set(detected) and len(detected) < NOTES
    # a heading renamed: [[n5#Part B]] no longer finds it
    twins.edit(_replace("one/n5.md", "## Part B", "## Part Z"))
    assert twins.run()
    # an alias moved to another note
    twins.edit(_replace("one/n7.md", "aliases: [alias-7]", "aliases: [alias-7b]"))
    twins.edit(_replace("two/n8.md", "aliases: [alias-8]", "aliases: [alias-8, alias-7]"))
    assert twins.run()
    # an alias a note comes to bear, which links asked for in vain: no path changed, but a name did
    twins.edit(_replace("two/n10.md", "aliases: [alias-10]", "aliases: [alias-10, alias-later]"))
    detected = twins.run()
    assert {"one/n1.md", "one/n7.md", "one/n13.md"} <= set(detected)
    # words two notes come to share: sharedterm's state changes for them
    twins.edit(_append("two/n12.md", "\nquixotical thaumaturgy\n"))
    twins.edit(_append("one/n31.md", "\nquixotical thaumaturgy\n"))
    detected = twins.run()
    assert {"two/n12.md", "one/n31.md"} <= set(detected) and len(detected) < NOTES
    # a note removed
    twins.edit(lambda folder: (folder / "one" / "n9.md").unlink())
    assert twins.run()
    # nothing changed: nothing detected
    assert twins.run() == []


def test_a_damaged_entry_is_detected_again(twins, tmp_path):
    twins.run()
    twins.edit(_append("one/n3.md", "\nthe and of\n"))
    twins.run()
    env = parsecache._open(str(tmp_path / "data-remembered" / "autoindex-cache" / "detections.mdb"), subdir=False)
    with env.begin(write=True) as txn:
        keys = [bytes(key) for key, _ in txn.cursor() if bytes(key) != parsecache._SCHEMA_KEY]
        assert len(keys) == NOTES  # one entry per file
        for position, key in enumerate(keys[:9]):  # a torn header, a flipped payload byte, an empty value
            value = txn.get(key)
            txn.put(key, (value[:5], value[:-1] + bytes([value[-1] ^ 1]), b"")[position % 3])
    twins.edit(_append("one/n3.md", "\nof the and\n"))
    assert len(twins.run()) >= 9


def _corpus(*paths: str) -> Corpus:
    from xerj_core.model import SourceDocument
    return Corpus({p: [SourceDocument(p, "ax-notes", p, p, "", "", "file", 1, "markdown", {})] for p in paths},
                  stamps={p: f"digest-{p}" for p in paths})


def test_what_cannot_be_keyed_is_not_remembered():
    corpus = _corpus("a.md", "b.md")
    questions = detectmemo.Noted()
    reading = detectmemo.ReadingCorpus(corpus, questions)
    assert reading.card("a.md").doc_id == "a.md" and reading.by_stem("b") == ("b.md",)
    assert questions.kept and questions.asked == {("card", "a.md"): ("doc", "a.md", "digest-a.md")}
    assert questions.by_name == {("by_stem", "b"): ("tuple", ("b.md",))}
    assert reading.paths == ("a.md", "b.md") and len(reading) == 2  # the paths: the names digest stands for them
    assert questions.by_name[("paths",)] == corpus.names_digest() and questions.kept
    assert reading.stamps == corpus.stamps and not questions.kept  # read past the lookups
    questions = detectmemo.Noted()
    assert list(detectmemo.ReadingCorpus(corpus, questions).named_candidates.items()) == [] and not questions.kept
    questions = detectmemo.Noted()
    states = detectmemo._reading_states({"d": DetectorState({"a.md": ["b.md"]})}, questions, corpus.stamps, {})
    assert states["d"].data.get("a.md") == ["b.md"] and states["d"].data.get("c.md", ()) == ()
    assert questions.kept and questions.asked == {("state", "d", "get", "a.md"): ("list", ("b.md",)),
                                                  ("state", "d", "get", "c.md"): ("absent",)}
    # read whole (its keys, its length, iterated), the state is one question: its digest
    assert list(states["d"].data.keys()) == ["a.md"] and len(states["d"].data) == 1 and questions.kept
    assert ("state", "d", "stamp", None) in questions.asked
    questions = detectmemo.Noted()
    states = detectmemo._reading_states({"d": DetectorState({"a.md": lambda: None})}, questions, corpus.stamps, {})
    assert list(states["d"].data) == ["a.md"] and not questions.kept  # a state that does not pickle
    now = _corpus("a.md")  # b.md is gone, c.md came

    def entry(names=b"", by_name=(), asked=()):
        return ("stamp", names, pickle.dumps((tuple(q for q, _ in by_name), tuple(k for _, k in by_name))),
                tuple(q for q, _ in asked), tuple(k for _, k in asked), [], [])

    answers = detectmemo.Answers(now, {"d": DetectorState({"a.md": ["b.md"], "c.md": []})})
    card = (("card", "a.md"), ("doc", "a.md", "digest-a.md"))
    assert answers.hold(entry(asked=[card])) and not answers.hold(entry(asked=[(card[0], ("doc", "a.md", "x"))]))
    assert not answers.hold(entry(by_name=[(("by_stem", "b"), ("tuple", ("b.md",)))], asked=[card]))
    # asked under the same names (paths, aliases), an answer by name is not asked again
    assert answers.hold(entry(now.names_digest(), [(("by_stem", "b"), ("tuple", ("b.md",)))], [card]))
    assert not answers.hold(entry(asked=[(("state", "d", "get", "c.md"), ("absent",))]))
    assert not answers.hold(entry(asked=[(("mtime", "b.md"), 1)]))  # raises now (b.md is gone): asked again


class _Blind:
    """A detector that names its target without asking the corpus (which the contract does not allow): every note
    links to ``target.md``."""

    name, type, tag, weight, confidence = "blind", "blind", "blind@1", 0.5, 0.5

    def detect(self, file_docs, corpus, state):
        card = file_docs[0]
        if card.ax_path != "t/target.md":
            yield EdgeDraft(card.doc_id, "t/target.md", "blind", "blind@1", 0.5, 0.5, card.mtime_ms,
                            Evidence("names t/target.md", card.ax_path, 0))


def test_a_remembered_target_gone_is_detected_again(tmp_path):
    """A remembered draft whose target is no longer a document is not reused: the file is detected again, and
    the detector's breach is reported as a run without the cache reports it, not written as an edge to nothing."""
    class Plugin:
        @hookimpl
        def xerj_register_detectors(self, register):
            register(_Blind())

    pm = get_plugin_manager(builtins_only=True, extra_plugins=[("blind", Plugin())])
    folder = tmp_path / "notes"
    for name in ("a/a", "a/b", "t/target"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.md").write_text(f"# {name}\n\nthe words of {name}\n")
    with Engine(tmp_path / "data", pm) as engine:
        run(engine, folder, brain="b", pm=pm, workers=1)
        with (folder / "a" / "b.md").open("a") as out:
            out.write("more\n")
        run(engine, folder, brain="b", pm=pm, workers=1)  # remembers a.md's draft to t/target.md
        (folder / "t" / "target.md").unlink()  # a.md asked nothing about it
        with pytest.raises(PluginError, match="blind.*t/target.md"):
            run(engine, folder, brain="b", pm=pm, workers=1)


def test_a_runs_answers_go_with_its_corpus():
    import gc
    import weakref

    corpus = _corpus("a.md")
    answers = detectmemo.Answers.of(corpus, {})
    assert detectmemo.Answers.of(corpus, {}) is not answers  # other states: another run's
    states = {}
    assert detectmemo.Answers.of(corpus, states) is detectmemo.Answers.of(corpus, states)
    gone = weakref.ref(corpus)
    del corpus
    gc.collect()
    assert gone() is None and len(detectmemo._RUNS) == 0


def test_a_runs_answers_are_freed_without_the_collector():
    """A run's answers (every question its files asked) are no reference cycle: they go when the run's corpus
    goes, not at the collector's next pass, which would walk them all."""
    import gc
    import weakref

    corpus = _corpus("a.md")
    answers = detectmemo.Answers.of(corpus, {})
    assert answers.hold((None, answers.names, b"", (("card", "a.md"),), (answers._known[("card", "a.md")],),
                         None, None))
    known = weakref.ref(answers._known)
    del answers
    gc.disable()
    try:
        del corpus
        assert known() is None and len(detectmemo._RUNS) == 0
    finally:
        gc.enable()


def test_a_change_to_the_core_detection_code_forgets_what_was_remembered(twins, monkeypatch):
    """xerj_core/autoindex (the link helpers, make_draft, this memo) edited in place under one version: every file
    is detected again."""
    twins.run()
    twins.edit(_append("one/n3.md", "\nthe and of\n"))
    twins.run()
    twins.edit(_append("one/n3.md", "\nof the and\n"))
    assert len(twins.run()) < NOTES // 2
    real = parsecache._code_stamp
    core = str(Path(parsecache.__file__))
    monkeypatch.setattr(parsecache, "_code_stamp", lambda f: real(f) + ",edited" if f == core else real(f))
    twins.edit(_append("one/n3.md", "\nthe of and\n"))
    assert len(twins.run()) == NOTES


def test_a_companion_is_not_forked_while_this_process_holds_the_cache(tmp_path, monkeypatch):
    """Lookups made here (an inline run's, the probe of a cache that may be cold) leave the cache's environment
    open in this process; a companion forked then could not open the cache itself and would keep nothing for
    the next run, so it is spawned instead."""
    monkeypatch.setattr(parsecache, "_ENVS", {})
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    lmdb.open(str(tmp_path / "cache")).close()
    assert parallel.may_fork() == sys.platform.startswith("linux") and not parsecache.held_here()
    assert parsecache._open(str(tmp_path / "cache")) is not None
    assert parsecache.held_here() and not parallel.may_fork()


def test_a_companion_after_lookups_here_still_remembers_for_the_next_run(tmp_path, monkeypatch):
    """An edit's run (one file: no companion) looks parses and detections up in this process, which leaves the
    parse cache open here; the next run that gets a companion (six files edited) remembers their new detections
    all the same, so the edit after it does not detect them again. (A companion forked then could not open the
    cache and remembered nothing: the edit after it detected those six again, and on 2,000 generated notes after
    a removal, 1,175 files.)"""
    monkeypatch.setattr(parsecache, "_ENVS", {})  # this process holds no cache yet, as at a command's start
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 4)
    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 8)
    detected: list[str] = []  # in this process (a companion detects in its own)
    real = detectmemo.detect_file

    def counted(detectors, file_docs, *args, **kwargs):
        detected.append(file_docs[0].ax_path)
        return real(detectors, file_docs, *args, **kwargs)

    monkeypatch.setattr(detectmemo, "detect_file", counted)
    monkeypatch.setattr(parallel, "detect_file", counted)
    folder = _vault(tmp_path / "vault", NOTES)
    clock = iter(range(1_000, 2_000))
    with Engine(tmp_path / "data") as engine:
        def again() -> list[str]:
            detected.clear()
            assert run(engine, folder, brain="b", clock=lambda: next(clock)).files_failed == []
            return sorted(detected)

        again()
        _append("one/n3.md", "\nthe and of\n")(folder)
        assert len(again()) == NOTES  # here, every file, each remembered
        assert parsecache.held_here()  # the cache is open in this process from now on
        edited = [f"{'one' if i % 2 else 'two'}/n{i}.md" for i in range(10, 16)]
        for rel in edited:
            _append(rel, f"\nquillwort {rel}\n")(folder)
        again()  # six files: a companion, which detects them again and remembers their new detections
        _append("one/n3.md", "\nmore words\n")(folder)
        after = again()
        assert "one/n3.md" in after and not set(after) & set(edited)
