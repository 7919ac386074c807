"""Background merges: big merges leave the write path, run from a snapshot, and swap in with a check-and-swap."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np

from xerj_core.store import BulkOp, Store
from xerj_core.store import merge as merges
from xerj_core.store import mergeproc
from xerj_core.store.mergeproc import MergeWorker
from xerj_core.store.write import segment_layout
from xerj_core.text import tokenize

WORDS = [f"w{i}" for i in range(60)]
MAPPING = {"properties": {"text": {"type": "text"}, "tag": {"type": "keyword"}, "n": {"type": "long"}}}


def _doc(rng: random.Random, n: int) -> dict:
    return {"text": " ".join(rng.choices(WORDS, k=rng.randint(1, 5))), "tag": rng.choice("abcde"), "n": n}


def _picture(store: Store, index: str) -> dict:
    """Every live document with its column values and the rows of each of its terms, by id."""
    out = {}
    with store.reader(index) as r:
        tags, ns = r.column("tag"), r.column("n")
        terms = r.field_dictionary("tag").terms
        postings = {word: set(r.postings("text", word)[0].tolist()) for word in WORDS}
        for row in r.live_rows().tolist():
            doc_id, source, version = r.document(row)
            words = set(tokenize(source["text"]))
            assert all(row in postings[w] for w in words)
            assert not any(row in postings[w] for w in set(WORDS) - words)
            out[doc_id] = (source, version, terms[tags.values[row]], int(ns.values[row]))
    return out


def _layout(store: Store, index: str) -> list[tuple[int, int]]:
    with store.reader(index) as r:
        return [(s.start, s.end) for s in r.segments], r.state.sealed_rows


def test_a_merge_left_to_the_thread_gives_the_store_an_inline_merge_gives(tmp_path):
    rng = random.Random(3)
    batches = [[BulkOp("index", "m", f"d{rng.randrange(300)}", _doc(rng, b * 100 + i)) for i in range(rng.randint(1, 9))]
               for b in range(120)]
    with Store(tmp_path / "inline", tail_rows=4, merge_above=None) as inline, \
            Store(tmp_path / "background", tail_rows=4, merge_above=8) as background:
        for store in (inline, background):
            store.create_index("m", MAPPING)
        for ops in batches:
            inline.bulk(ops)
            background.bulk(ops)
            if rng.random() < 0.2:
                doomed = f"d{rng.randrange(300)}"
                inline.delete("m", doomed)
                background.delete("m", doomed)
        background.wait_merges()
        assert background._merger.merged  # the test exercised the background merges
        assert background._merger.worker.proc is not None  # in the merge worker process
        segments, sealed = _layout(background, "m")
        assert segments == segment_layout(sealed, 4) == _layout(inline, "m")[0]
        assert _picture(background, "m") == _picture(inline, "m")
        with inline.reader("m") as a, background.reader("m") as b:
            assert a.n_rows == b.n_rows and a.doc_count == b.doc_count
            for seg_a, seg_b in zip(a.segments, b.segments):
                for path in ("tag", "n", "text"):
                    ca, cb = a.segment_column(seg_a, path), b.segment_column(seg_b, path)
                    assert np.array_equal(ca.values, cb.values) and np.array_equal(ca.present, cb.present)


def test_a_merge_whose_sources_changed_is_abandoned_and_planned_again(tmp_path):
    with Store(tmp_path / "data", tail_rows=4, merge_above=None) as store:
        store.create_index("m", MAPPING)
        rng = random.Random(5)
        for b in range(40):
            store.bulk([BulkOp("index", "m", f"d{b}-{i}", _doc(rng, i)) for i in range(3)])
        # Leave the segments out of their canonical layout, as a deferred seal does.
        store.merge_above = 0
        for b in range(3):
            store.bulk([BulkOp("index", "m", f"x{b}-{i}", _doc(rng, i)) for i in range(4)])
        store.merge_above = None
        before = _picture(store, "m")
        segments, sealed = _layout(store, "m")
        assert segments != segment_layout(sealed, 4)
        with store.read_txn() as raw:
            plan = merges.plan(raw, store.env.dbs, "m", 4)
        assert plan is not None
        for i in range(3):
            store.delete("m", f"d{i}-0")  # deletes do not touch sealed segments: the plan still applies
        store.forcemerge("m")  # a compaction renumbers rows: the plan no longer applies
        assert store.transact(lambda txn: merges.apply(txn, plan)) is False
        assert merges.merge_index(store, "m")
        segments, sealed = _layout(store, "m")
        assert segments == segment_layout(sealed, 4)
        expected = {k: v for k, v in before.items() if k not in {f"d{i}-0" for i in range(3)}}
        assert {k: v[0] for k, v in _picture(store, "m").items()} == {k: v[0] for k, v in expected.items()}


def test_readers_keep_their_snapshot_while_writers_and_the_merge_thread_run(tmp_path):
    with Store(tmp_path / "data", tail_rows=4, merge_above=4) as store:
        store.create_index("m", MAPPING)
        rng = random.Random(11)
        expected: dict[str, dict] = {}
        lock = threading.Lock()
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            try:
                local = random.Random(worker)
                for b in range(60):
                    ops = [BulkOp("index", "m", f"w{worker}-{local.randrange(80)}", _doc(local, b)) for _ in range(4)]
                    with lock:
                        store.bulk(ops)
                        for op in ops:
                            expected[op.doc_id] = op.doc
                        if local.random() < 0.3:
                            doomed = f"w{worker}-{local.randrange(80)}"
                            store.delete("m", doomed)
                            expected.pop(doomed, None)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        store.bulk([BulkOp("index", "m", f"seed{i}", _doc(rng, i)) for i in range(40)])
        with store.reader("m") as old:
            old_rows = old.postings("text", "w1")[0].tolist()
            old_n = old.column("n").values.copy()
            threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            store.wait_merges()
            assert old.postings("text", "w1")[0].tolist() == old_rows
            assert np.array_equal(old.column("n").values, old_n)
        assert not errors
        segments, sealed = _layout(store, "m")
        assert segments == segment_layout(sealed, 4)
        assert {k: v[0] for k, v in _picture(store, "m").items() if not k.startswith("seed")} == expected


MERGING_WRITER = textwrap.dedent(
    """
    import random, sys
    from xerj_core.store import BulkOp, Store
    words = [f"w{i}" for i in range(60)]
    store = Store(sys.argv[1], tail_rows=4, merge_above=4)
    rng = random.Random(int(sys.argv[2]))
    i = 0
    while True:
        ops = [BulkOp("index", "crash", f"doc-{i + k}", {"text": " ".join(rng.choices(words, k=3)), "n": i + k})
               for k in range(rng.randint(1, 6))]
        store.bulk(ops)
        i += len(ops)
        print(i, flush=True)  # every document below i is acknowledged
    """
)


def test_kill_9_during_background_merges_leaves_a_valid_store(tmp_path):
    data = tmp_path / "data"
    for round_no in range(4):
        proc = subprocess.Popen([sys.executable, "-c", MERGING_WRITER, str(data), str(round_no)],
                                stdout=subprocess.PIPE, text=True)
        acknowledged = 0
        deadline = time.monotonic() + 30
        target = 150 + 70 * round_no
        while acknowledged < target and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acknowledged = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert acknowledged >= target, "writer died before reaching its target"
        with Store(data, tail_rows=4, merge_above=None) as store:
            with store.reader("crash") as r:
                bounds = [(s.start, s.end) for s in r.segments]
                assert bounds and bounds[0][0] == 0 and bounds[-1][1] == r.tail_start
                assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous, whatever the layout
                ns = r.column("n")
                for i in range(acknowledged):
                    row = r.row_of(f"doc-{i}")
                    source, _version = r.get(f"doc-{i}")
                    assert source["n"] == i and ns.values[row] == i
                    for word in set(source["text"].split()):
                        assert row in r.postings("text", word)[0]
        # The next writer starts from whatever layout the kill left (each round overwrites from doc-0).


def _fill(store: Store, rng: random.Random, batches: int, prefix: str) -> None:
    for b in range(batches):
        store.bulk([BulkOp("index", "m", f"{prefix}{b}-{i}", _doc(rng, i)) for i in range(4)])


def _canonical(store: Store) -> bool:
    segments, sealed = _layout(store, "m")
    return segments == segment_layout(sealed, 4)


def test_merges_run_in_a_worker_process_that_ends_with_the_store(tmp_path):
    store = Store(tmp_path / "data", tail_rows=4, merge_above=4)
    try:
        store.create_index("m", MAPPING)
        _fill(store, random.Random(7), 30, "d")
        store.wait_merges()
        proc = store._merger.worker.proc
        assert store._merger.merged and proc is not None and proc.poll() is None and proc.pid != os.getpid()
        assert _canonical(store)
        # Ctrl-C in a terminal reaches the worker too: it keeps merging until the store ends it
        os.kill(proc.pid, signal.SIGINT)
        merged = store._merger.merged
        _fill(store, random.Random(8), 30, "e")
        store.wait_merges()
        assert store._merger.merged > merged and store._merger.worker.proc is proc and proc.poll() is None
        assert _canonical(store)
    finally:
        store.close()
    assert proc.poll() == 0  # closing the store ended it


def test_a_killed_merge_worker_is_replaced_and_its_merges_are_done(tmp_path):
    rng = random.Random(9)
    with Store(tmp_path / "inline", tail_rows=4, merge_above=None) as inline, \
            Store(tmp_path / "background", tail_rows=4, merge_above=4) as background:
        for store in (inline, background):
            store.create_index("m", MAPPING)
        seed = rng.random()
        for store in (inline, background):
            _fill(store, random.Random(seed), 30, "d")
        background.wait_merges()
        first = background._merger.worker.proc
        first.kill()
        first.wait()
        for store in (inline, background):
            _fill(store, random.Random(seed), 40, "e")
        background.wait_merges()
        second = background._merger.worker.proc
        assert second is not None and second.pid != first.pid
        assert _canonical(background)
        assert _picture(background, "m") == _picture(inline, "m")


def test_an_idle_merge_worker_exits_and_another_starts_when_a_merge_is_wanted(tmp_path, monkeypatch):
    monkeypatch.setattr(merges, "REAP_SECONDS", 0.1)
    with Store(tmp_path / "data", tail_rows=4, merge_above=4) as store:
        store._merger.worker = MergeWorker(store.path, 4, store.env.sync, idle_seconds=0.2)
        store.create_index("m", MAPPING)
        rng = random.Random(13)
        _fill(store, rng, 30, "d")
        store.wait_merges()
        first = store._merger.worker.proc
        deadline = time.monotonic() + 30
        while store._merger.worker.proc is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        # the merge thread collected it: no zombie left behind
        assert store._merger.worker.proc is None and first.returncode == 0
        merged = store._merger.merged
        _fill(store, rng, 30, "e")
        store.wait_merges()
        assert store._merger.merged > merged and store._merger.worker.proc.pid != first.pid
        assert _canonical(store)


def test_a_worker_that_cannot_run_leaves_the_merges_to_the_store_itself(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(mergeproc, "_ENTRY", "raise SystemExit(3)")
    with Store(tmp_path / "data", tail_rows=4, merge_above=4) as store:
        store.create_index("m", MAPPING)
        _fill(store, random.Random(17), 30, "d")
        store.wait_merges()
        assert store._merger.worker is None and store._merger.merged
        assert "merge worker process is unavailable" in caplog.text
        assert _canonical(store)


def test_the_worker_imports_the_parents_xerj_core_without_putting_a_site_directory_first(tmp_path, monkeypatch):
    import sysconfig
    from pathlib import Path

    import xerj_core

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(xerj_core, "__file__", str(tmp_path / "checkout" / "xerj_core" / "__init__.py"))
    assert mergeproc._worker_environment()["PYTHONPATH"].split(os.pathsep) == [
        str((tmp_path / "checkout").resolve()), "/elsewhere"]
    monkeypatch.delenv("PYTHONPATH")
    monkeypatch.setattr(xerj_core, "__file__", str(Path(sysconfig.get_path("purelib")) / "xerj_core" / "__init__.py"))
    assert "PYTHONPATH" not in mergeproc._worker_environment()


def test_a_merge_gives_back_the_pages_of_each_segment_it_read(tmp_path, monkeypatch):
    """A merge into big segments reads every source segment's postings (about 100 MB of real code's); what it
    read is copied out, so the merge gives the map's pages back after each segment, not once its plan is made
    (where the pages of them all stayed resident through the grouping), and its swap gives back the pages its
    drops walked before it puts the new segments."""
    with Store(tmp_path / "data", tail_rows=4, merge_above=None) as store:
        store.create_index("m", MAPPING)
        rng = random.Random(6)
        for b in range(40):
            store.bulk([BulkOp("index", "m", f"d{b}-{i}", _doc(rng, i)) for i in range(3)])
        store.merge_above = 0  # the segments out of their canonical layout, as a deferred seal leaves them
        for b in range(3):
            store.bulk([BulkOp("index", "m", f"x{b}-{i}", _doc(rng, i)) for i in range(4)])
        store.merge_above = None
        before = _picture(store, "m")
        calls = []
        with store.read_txn() as raw:
            plan = merges.plan(raw, store.env.dbs, "m", 4, release=lambda: calls.append(1))
            bare = merges.plan(raw, store.env.dbs, "m", 4)
        assert plan is not None and len(calls) == len(plan.sources)  # one text field: once per source segment
        assert plan.postings == bare.postings

        events = []

        class Counted(merges.PageRelease):
            def __call__(self) -> None:
                events.append("release")
                super().__call__()

        def noted(method, event):
            def call(*args, **kwargs):
                events.append(event)
                return method(*args, **kwargs)
            return call

        from xerj_core.store.write import IndexWrite
        monkeypatch.setattr(merges, "PageRelease", Counted)
        monkeypatch.setattr(IndexWrite, "_drop_segment", noted(IndexWrite._drop_segment, "drop"))
        monkeypatch.setattr(IndexWrite, "_write_segments", noted(IndexWrite._write_segments, "write"))
        assert merges.merge_index(store, "m")
        # each segment read, then once the swap dropped the sources and before it writes the new ones
        assert events[:len(plan.sources)] == ["release"] * len(plan.sources)
        first_write = events.index("write")
        assert events[first_write - 1] == "release" and events[first_write - 2] == "drop"
        segments, sealed = _layout(store, "m")
        assert segments == segment_layout(sealed, 4)
        assert _picture(store, "m") == before
