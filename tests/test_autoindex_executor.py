"""Autoindex through an executor: a process pool gives the inline run's drafts, counters and documents."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from xerj_core.autoindex import pipeline
from xerj_core.autoindex.detect import DetectionResult
from xerj_core.autoindex.parallel import InlineExecutor, parse_batch
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink, dataset_index
from xerj_core.autoindex.walk import FileEntry
from xerj_core.cli import build_cli
from xerj_core.engine import Engine
from xerj_core.errors import PluginError
from xerj_core import hookimpl
from xerj_core.plugins import get_plugin_manager

from .conftest import CORPORA

FOAM = CORPORA / "foam-docs"
CLOCK = lambda: 1_700_000_000_000  # noqa: E731  the same created_at on both sides of a comparison


def generate(root: Path, notes: int, seed: int = 5) -> Path:
    """A folder of linked notes over a Zipf-ish vocabulary (so shared_term fires), plus a few bad files."""
    rng = random.Random(seed)
    words = [f"term{i}" for i in range(400)]
    weights = [1 / (k + 1) for k in range(len(words))]
    for i in range(notes):
        folder = root / f"topic-{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choices(words, weights=weights, k=30))
        link = f"[[note-{rng.randrange(notes)}]]"
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\n## Part\n{body} {link}\n\n## More\nSee {link}.\n")
        os.utime(folder / f"note-{i}.md", ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
    (root / "junk.txt").write_bytes(bytes(range(128, 256)) * 2)  # no encoding reads it: a failure
    (root / "picture.bin").write_bytes(bytes(range(256)))
    return root


class Recorded:
    """Captures each run's detection result (drafts in the order detection streamed them, and counters)."""

    def __init__(self, monkeypatch) -> None:
        self.results = []
        real = pipeline._Detection.batches

        def batches(detection):
            drafts = []
            for batch in real(detection):
                drafts.extend(batch[0])  # (drafts, their edge ids when a companion worked them out)
                yield batch
            self.results.append(DetectionResult(edges=tuple(drafts), counters=detection.counters()))

        monkeypatch.setattr(pipeline._Detection, "batches", batches)


def comparable(summary) -> dict:
    body = summary.to_json()
    body.pop("elapsed_s")
    body.pop("root")
    return body


def stored(engine, brain: str) -> dict:
    edges = {}
    with engine.store.reader(f".xerj-memory-{brain}-edges") as r:
        for row in r.live_rows():
            doc_id, source, _version = r.document(int(row))
            if "src" in source:  # the brain's meta document carries the wall clock, as do expired_at and recorded_at
                edges[doc_id] = {k: v for k, v in source.items() if k not in ("expired_at", "recorded_at")}
    return edges


def documents(engine, index: str) -> dict:
    """Every live document of ``index``: id to source."""
    with engine.store.reader(index) as r:
        return {doc_id: source for doc_id, source, _version in (r.document(int(row)) for row in r.live_rows())}


def run_both(tmp_path, folder: Path, monkeypatch, executor, steps=(lambda work: None,)):
    """Run inline and through ``executor`` into two data dirs, once per step; the summaries and detections."""
    return run_each(tmp_path, folder, monkeypatch, {"inline": InlineExecutor(), "pooled": executor}, steps)


# In place of an executor: the run's own companion process (see pipeline.companion_default), on any machine.
COMPANION = "companion"


def run_each(tmp_path, folder: Path, monkeypatch, executors: dict, steps=(lambda work: None,),
             pools: list | None = None) -> list:
    """Run through each named executor into its own data dir, once per step.

    Per executor: the summaries, the detection results (drafts with evidence, counters), the stored
    edges and the stored notes (ids and sources). The pools the runs open are added to ``pools``.
    """
    outcomes = []
    for name, chosen in executors.items():
        work = tmp_path / f"{name}-folder"
        shutil.copytree(folder, work, copy_function=shutil.copy2)
        recorded = Recorded(monkeypatch)
        if pools is not None:
            real_open = pipeline.open_pool
            monkeypatch.setattr(pipeline, "open_pool", lambda n, **kw: pools.append(real_open(n, **kw)) or pools[-1])
        if chosen == COMPANION:
            monkeypatch.setattr(pipeline, "companion_default", lambda: True)
            chosen = None
        monkeypatch.setattr(pipeline, "BATCH_FILES", 40)  # detection starts while documents are still written
        summaries = []
        with Engine(tmp_path / name, get_plugin_manager()) as eng:
            for step in steps:
                step(work)
                summaries.append(comparable(run(eng, work, brain="b", clock=CLOCK, executor=chosen)))
            edges = stored(eng, "b")
            notes = documents(eng, dataset_index("ax-notes", LocalSink(eng.store, eng.graph).load("b").root_id))
        outcomes.append((summaries, recorded.results, edges, notes))
        monkeypatch.undo()
    return outcomes


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2) as executor:
        yield executor


@pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")
def test_a_process_pool_gives_the_inline_drafts_on_the_foam_vault(tmp_path, monkeypatch, pool):
    inline, pooled = run_both(tmp_path, FOAM, monkeypatch, pool, steps=(lambda work: None,))
    assert inline[1] and inline[1][0].edges
    assert pooled == inline  # same drafts in the same order, same counters, summaries and stored edges


def unchanged(work: Path) -> None:
    pass


def edit_one_remove_one(work: Path) -> None:
    touched = work / "topic-3" / "note-3.md"
    touched.write_text(touched.read_text() + "\nAlso [[note-10]].\n")
    os.utime(touched, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))  # same valid_at both sides
    (work / "topic-4" / "note-4.md").unlink()


# a first run, a no-change re-run, and a run after one file changed and one went away
RERUN_STEPS = (unchanged, unchanged, edit_one_remove_one)


def test_a_process_pool_gives_the_inline_drafts_on_a_generated_corpus(tmp_path, monkeypatch, pool):
    folder = generate(tmp_path / "gen", 260)
    inline, pooled = run_both(tmp_path, folder, monkeypatch, pool, steps=RERUN_STEPS)
    summaries, results = inline[0], inline[1]
    assert summaries[0]["files_failed"] == [{"path": "junk.txt", "reason": summaries[0]["files_failed"][0]["reason"]}]
    assert summaries[0]["edges_by_type"].get("shared_term") and summaries[0]["edges_by_type"].get("wikilink")
    assert summaries[1]["edges_written"] == 0 and len(results) == 2  # the no-change re-run detects nothing
    assert summaries[2]["files_indexed"] == 1 and summaries[2]["files_removed"] == 1
    assert pooled == inline


@pytest.mark.parametrize("forked", [True, False])
def test_a_companion_gives_the_inline_drafts_documents_and_edges(tmp_path, monkeypatch, forked):
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 60)
    pools: list = []

    def step(work):
        # forked where the run finds it safe, else spawned: both give the inline run's results
        monkeypatch.setattr(pipeline, "may_fork", lambda: forked)

    steps = tuple(lambda work, real=real: (step(work), real(work)) for real in RERUN_STEPS)
    inline, accompanied = run_each(tmp_path, folder, monkeypatch, {"inline": InlineExecutor(), "c": COMPANION},
                                   steps=steps, pools=pools)
    assert [pool._mp_context.get_start_method() for pool in pools] == ["fork" if forked else "spawn"] * 2
    summaries = inline[0]
    assert summaries[0]["edges_by_type"].get("shared_term") and summaries[0]["files_failed"]
    assert summaries[2]["files_indexed"] == 1 and summaries[2]["files_removed"] == 1 and summaries[2]["edges_written"]
    assert accompanied == inline  # the drafts in the same order, counters, summaries, stored edges and documents
    # one companion per run that had files to parse or detect: the first, and the one after the change (which
    # parses the unchanged files for the corpus in the companion); the no-change re-run opens none
    assert [pool._max_workers for pool in pools] == [1, 1]
    assert not [proc for pool in pools for proc in (pool._processes or {}).values() if proc.is_alive()]


@pytest.mark.parametrize("bound", [None, 1])
def test_batches_taken_back_from_a_starting_companion_give_the_inline_drafts_documents_and_edges(tmp_path,
                                                                                                monkeypatch, bound):
    # small batches: the writer reaches the companion's first batch at once, and parses the last batches the still
    # starting companion has not begun (up to a bound in bytes of files); the companion keeps those files too
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 140)
    taken_back: list = []
    real_take_back = pipeline._Runner.take_back

    def take_back(runner, future):
        outcomes = real_take_back(runner, future)
        if outcomes is not None:
            taken_back.append(len(outcomes))
        return outcomes

    def patched(step):
        def run_step(work):
            monkeypatch.setattr(pipeline, "PARSE_BATCH_FILES", 16)
            monkeypatch.setattr(pipeline._Runner, "take_back", take_back)
            if bound is not None:
                monkeypatch.setattr(pipeline, "TAKE_BACK_BYTES", bound)
            step(work)
        return run_step

    inline, accompanied = run_each(tmp_path, folder, monkeypatch, {"inline": InlineExecutor(), "c": COMPANION},
                                   steps=tuple(map(patched, RERUN_STEPS)))
    assert taken_back and sum(taken_back) < pipeline.POOL_MIN_FILES + 140  # some batches, never all of them
    if bound is not None:  # past the bound, one batch per run that takes back at all
        assert len(taken_back) <= 2
    assert inline[0][0]["edges_by_type"].get("shared_term") and inline[2] and inline[3]
    assert accompanied == inline  # the drafts in the same order, counters, summaries, stored edges and documents


@pytest.mark.parametrize("forked, signum", [(False, 9), (True, 9), (True, 15)])
def test_a_companion_killed_mid_run_fails_the_run_and_the_next_run_finishes(tmp_path, monkeypatch, forked, signum):
    import signal

    from xerj_core.errors import BatchFailed

    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 60)
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "may_fork", lambda: forked)
    # a forked companion inherits its parent's handlers (``autoindex --watch`` has one for SIGTERM that only
    # notes the stop): SIGTERM must still end it
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    monkeypatch.setattr(pipeline, "BATCH_FILES", 50)
    pools = Pools(monkeypatch)

    class Killing(LocalSink):
        calls = 0

        def write_files(self, brain, files, now_ms, counted=None):
            Killing.calls += 1
            if Killing.calls == 2:  # the companion dies while the writer still has files to take from it
                for proc in pools.opened[0]._processes.values():
                    os.kill(proc.pid, signum)
            return super().write_files(brain, files, now_ms, counted)

    try:
        with Engine(tmp_path / "d", get_plugin_manager()) as eng:
            with pytest.raises(BatchFailed):
                run(Killing(eng.store, eng.graph), folder, brain="b", pm=eng.pm)
            assert pools.workers_left() == [] and LocalSink(eng.store, eng.graph).load("b").run.dirty
            assert [pool._mp_context.get_start_method() for pool in pools.opened] == ["fork" if forked else "spawn"]
    finally:
        signal.signal(signal.SIGTERM, previous)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        summary = run(eng, folder, brain="b")
        assert summary.edges_written > 0 and not LocalSink(eng.store, eng.graph).load("b").run.dirty
    with Engine(tmp_path / "inline", get_plugin_manager()) as eng:
        expected = run(eng, folder, brain="b", workers=1)
    assert summary.edges_by_type == expected.edges_by_type


UNGUARDED_SCRIPT = """
import sys
from pathlib import Path
from xerj_core.autoindex import pipeline
from xerj_core.engine import Engine

pipeline.companion_default = lambda: True
with Engine(Path(sys.argv[1])) as engine:
    summary = pipeline.run(engine, Path(sys.argv[2]), brain="b")
print("edges", summary.edges_written)
"""


def test_a_script_without_a_main_guard_gets_its_companion(tmp_path):
    # a spawned worker would run such a script again (and start a run of its own) unless the pool leaves it behind
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 20)
    script = tmp_path / "index_my_notes.py"
    script.write_text(UNGUARDED_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "d"), str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2] == "edges" and int(done.stdout.split()[-1]) > 0


class Pools:
    """Records the pools the pipeline opens, to check that every worker is gone afterwards."""

    def __init__(self, monkeypatch) -> None:
        self.opened = []
        real = pipeline.open_pool

        def open_pool(workers, **kw):
            pool = real(workers, **kw)
            self.opened.append(pool)
            return pool

        monkeypatch.setattr(pipeline, "open_pool", open_pool)

    def workers_left(self) -> list:
        return [proc for pool in self.opened for proc in (pool._processes or {}).values() if proc.is_alive()]


def test_a_companion_detects_a_bounded_way_ahead_and_is_gone_before_the_last_edges_are_written(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 60)
    with Engine(tmp_path / "inline", get_plugin_manager()) as eng:
        run(eng, folder, brain="b", workers=1, clock=CLOCK)
        expected = stored(eng, "b")
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 10)
    monkeypatch.setattr(pipeline, "DETECT_AHEAD_BATCHES", 3)
    monkeypatch.setattr(pipeline, "EDGES_PER_TRANSACTION", 40)
    pools = Pools(monkeypatch)
    ahead: list[int] = []
    real_send = pipeline._Detection._send_detects

    def send_detects(self):
        real_send(self)
        ahead.append(len(self.dispatched))

    monkeypatch.setattr(pipeline._Detection, "_send_detects", send_detects)
    alive_at_edge_writes: list[bool] = []

    class Watching(LocalSink):
        def write_edges(self, brain, drafts, **kwargs):
            alive_at_edge_writes.append(bool(pools.workers_left()))
            return super().write_edges(brain, drafts, **kwargs)

    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        run(Watching(eng.store, eng.graph), folder, brain="b", pm=eng.pm, clock=CLOCK)
        assert stored(eng, "b") == expected and expected
    assert len(pools.opened) == 1 and ahead and max(ahead) == 3  # never more than 3 batches' results held
    # the companion was let go once its last detect batch was in, before the writer wrote the last edges
    assert len(alive_at_edge_writes) > 3 and not alive_at_edge_writes[-1]
    assert pools.workers_left() == []


def test_the_default_pool_starts_for_a_large_run_and_leaves_no_process(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 20)
    pools = Pools(monkeypatch)
    monkeypatch.setenv("XERJ_DISABLE_PLUGINS", "samedir")  # spawned workers inherit the environment
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        summary = run(eng, folder, brain="b", workers=2)
        assert len(pools.opened) == 1 and pools.opened[0]._max_workers == 2
        assert "same_dir" not in summary.edges_by_type and summary.edges_by_type["wikilink"] > 0
        # the bad file is parsed again, fails again: no detection, so no pool for the unchanged files
        again = run(eng, folder, brain="b", workers=2)
    assert len(pools.opened) == 1 and again.edges_written == 0 and again.files_failed
    assert pools.workers_left() == []


def test_small_runs_and_one_worker_stay_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "open_pool", lambda n: pytest.fail("no pool for this run"))
    small = generate(tmp_path / "small", 20)
    large = generate(tmp_path / "large", pipeline.POOL_MIN_FILES + 5)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        assert run(eng, small, brain="small", workers=2).edges_written > 0
        assert run(eng, large, brain="large", workers=1).edges_written > 0


class Marker:
    """A detector that exists only in this process, registered by hand."""

    name = "marker"
    type = "marked"
    tag = "marker@1"
    weight = 0.5
    confidence = 0.5

    def detect(self, file_docs, corpus, state):
        return ()


class MarkerPlugin:
    @hookimpl
    def xerj_register_detectors(self, register):
        register(Marker())


def test_a_hand_registered_plugin_keeps_the_run_inline(tmp_path, monkeypatch, pool):
    plugin = MarkerPlugin()
    pm = get_plugin_manager()
    pm.register(plugin, name="marker")
    try:
        folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 5)
        monkeypatch.setattr(pipeline, "open_pool", lambda n: pytest.fail("a worker would not know 'marker'"))
        with Engine(tmp_path / "d", pm) as eng:
            assert run(eng, folder, brain="b", workers=2).edges_written > 0
            os.utime(folder / "topic-1" / "note-1.md", ns=(0, 10**18))
            # an executor given explicitly is used, and its workers refuse plugins they do not have
            with pytest.raises(PluginError, match="other formats or detectors"):
                run(eng, folder, brain="b", executor=pool)
    finally:
        pm.unregister(plugin)


def test_ctrl_c_shuts_the_pool_down(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 40)
    monkeypatch.setattr(pipeline, "BATCH_FILES", 50)
    pools = Pools(monkeypatch)
    calls = {"n": 0}

    class Interrupting(pipeline.LocalSink):
        def write_files(self, brain, files, now_ms, counted=None):
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt
            return super().write_files(brain, files, now_ms, counted)

    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        with pytest.raises(KeyboardInterrupt):
            run(Interrupting(eng.store, eng.graph), folder, brain="b", workers=2, pm=eng.pm)
        assert len(pools.opened) == 1 and pools.workers_left() == []
        summary = run(eng, folder, brain="b", workers=2)  # the next run finishes the job
        # the first batch of 50 files was written: picture.bin (no format) among them, now skipped
        assert summary.files_unchanged + len(summary.files_skipped) == 50 and summary.edges_written > 0


def test_parse_failures_are_outcomes_not_exceptions(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(bytes(range(128, 256)) * 2)
    (tmp_path / "dir.md").mkdir()
    entries = [FileEntry("bad.txt", bad, 0, 2), FileEntry("gone.md", tmp_path / "gone.md", 0, 1),
               FileEntry("dir.md", tmp_path / "dir.md", 0, 1)]
    from xerj_core.autoindex.parallel import Plugins

    outcomes = parse_batch(Plugins.from_manager(get_plugin_manager()), entries, True)
    assert [o.entry.rel_path for o in outcomes] == ["bad.txt", "gone.md", "dir.md"]
    assert "undecodable" in outcomes[0].failure and not outcomes[0].gone
    # a file walked and gone when read is a skip the run reports (walk.VANISHED); one it cannot read fails
    assert (outcomes[1].failure, outcomes[1].gone) == ("gone before it was read", True)
    assert outcomes[2].failure.startswith("unreadable:") and not outcomes[2].gone


def test_cli_workers_option(tmp_path):
    folder = generate(tmp_path / "gen", 12)
    cli = build_cli(get_plugin_manager())
    result = CliRunner().invoke(cli, ["autoindex", str(folder), "--workers", "1", "--data-dir", str(tmp_path / "d"),
                                      "--allow-failures"])  # junk.txt fails
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["autoindex", str(folder), "--workers", "0", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code != 0 and "--workers" in result.output


def test_the_dask_executor_without_dask_installed_says_which_extra(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # what an install without the dask extra sees
    folder = generate(tmp_path / "gen", 3)
    result = CliRunner().invoke(build_cli(get_plugin_manager()),
                                ["autoindex", str(folder), "--executor", "dask", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 2 and "pip install 'xerj[dask]'" in result.output, result.output
    assert not (tmp_path / "d").exists()  # refused before anything was opened


class Failing:
    """A detector with a bug: it raises on two files (an ordinary exception, not a contract breach)."""

    name = "failing"
    type = "failed"
    tag = "failing@1"
    weight = 0.5
    confidence = 0.5
    bad = ("topic-1/note-1.md", "topic-5/note-5.md")

    def detect(self, file_docs, corpus, state):
        if file_docs[0].ax_path in self.bad:
            raise RuntimeError(f"cannot read {file_docs[0].ax_path}")
        return ()


class FailingPlugin:
    @hookimpl
    def xerj_register_detectors(self, register):
        register(Failing())


def test_every_failed_detect_batch_is_named_and_no_edge_is_written(tmp_path, monkeypatch):
    from xerj_core.errors import BatchFailed

    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 4)
    folder = generate(tmp_path / "gen", 40)
    pm = get_plugin_manager()
    pm.register(FailingPlugin(), name="failing")
    with Engine(tmp_path / "d", pm) as eng:
        with pytest.raises(BatchFailed) as failed:
            run(eng, folder, brain="b", executor=InlineExecutor())
        err = failed.value
        assert err.step == "detect" and err.batches == 2 and len(err.files) == 8
        assert set(Failing.bad) <= set(err.files) and isinstance(err.__cause__, RuntimeError)
        assert err.reason.startswith("the detect tasks of 2 batches (8 files) failed (RuntimeError: cannot read")
        assert not eng.store.exists(".xerj-memory-b-edges") and LocalSink(eng.store, eng.graph).load("b").run.dirty


def _reader_pids(env) -> set[int]:
    """The processes holding a slot in the LMDB reader table (``env.readers()``: a header, then a line each)."""
    lines = env.readers().splitlines()[1:]
    return {int(line.split()[0]) for line in lines if line.split() and line.split()[0].isdigit()}


def test_a_companion_forked_with_the_store_open_leaves_it_whole(tmp_path, monkeypatch):
    # the writer forks its companion with its LMDB environment open, here with a read snapshot held all along:
    # the child must not take a reader slot nor leave anything behind, and the store must go on reading and
    # writing in this process and open in a fresh one
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 60)
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "may_fork", lambda: True)
    pools = Pools(monkeypatch)
    children: set[int] = set()

    class Watching(LocalSink):
        def write_files(self, brain, files, now_ms, counted=None):
            children.update(pools.opened[-1]._processes or {})
            return super().write_files(brain, files, now_ms, counted)

    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        first = run(Watching(eng.store, eng.graph), folder, brain="b", pm=eng.pm, clock=CLOCK)
        edges = stored(eng, "b")
        env = eng.store.env.env
        with eng.store.reader(f".xerj-memory-b-edges") as held:
            edit_one_remove_one(folder)
            second = run(Watching(eng.store, eng.graph), folder, brain="b", pm=eng.pm, clock=CLOCK)
            assert sum(1 for _ in held.live_rows()) == len(edges) + 1  # the snapshot still reads what it read
            assert _reader_pids(env) <= {os.getpid()}
        assert [pool._mp_context.get_start_method() for pool in pools.opened] == ["fork", "fork"]
        assert children and pools.workers_left() == []
        assert not any(Path(f"/proc/{pid}").exists() for pid in children)  # exited and reaped
        assert first.edges_written and second.files_indexed == 1 and second.files_removed == 1
        after = stored(eng, "b")
    check = ("import sys; from pathlib import Path; from xerj_core.engine import Engine; "
             "from xerj_core.autoindex.pipeline import run\n"
             "with Engine(Path(sys.argv[1])) as eng:\n"
             "    s = run(eng, Path(sys.argv[2]), brain='b')\n"
             "print(s.files_unchanged, s.edges_written)")
    done = subprocess.run([sys.executable, "-c", check, str(tmp_path / "d"), str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(first.files_indexed - 1), "0"]  # a no-change run in a fresh process
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        assert stored(eng, "b") == after


def test_a_large_run_spawns_its_companion_where_it_could_fork(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 20)
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "may_fork", lambda: True)
    pools = Pools(monkeypatch)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        monkeypatch.setattr(pipeline, "FORK_BELOW_FILES", 10 * pipeline.POOL_MIN_FILES)
        run(eng, folder, brain="small")
        monkeypatch.setattr(pipeline, "FORK_BELOW_FILES", pipeline.POOL_MIN_FILES)  # the folder has more
        run(eng, folder, brain="large")
    assert [pool._mp_context.get_start_method() for pool in pools.opened] == ["fork", "spawn"]


def test_a_companion_is_forked_only_on_linux_while_one_thread_runs(monkeypatch):
    from xerj_core.autoindex import parallel, parsecache

    monkeypatch.setattr(parsecache, "_ENVS", {})  # no parse cache held open here (an earlier test's)
    monkeypatch.setattr(parallel.sys, "platform", "linux")
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    assert parallel.may_fork()
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 2)  # a merge thread, a server's threads
    assert not parallel.may_fork()
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    monkeypatch.setattr(parallel.sys, "platform", "darwin")
    assert not parallel.may_fork()
    monkeypatch.undo()
    import threading

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel.may_fork()
    finally:
        stop.set()
        other.join()


INIT_WORKER_CHECK = """
import signal, socket
from xerj_core.autoindex import parallel
pipe, _other = socket.socketpair()
pipe.setblocking(False)
signal.set_wakeup_fd(pipe.fileno())  # an event loop's, as a forked worker inherits it
signal.signal(signal.SIGTERM, lambda *_: None)  # a parent's own handler
parallel.init_worker()
print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
      signal.set_wakeup_fd(-1))
"""


def test_a_worker_leaves_ctrl_c_to_its_parent_and_takes_back_sigterm_and_the_wakeup_pipe():
    done = subprocess.run([sys.executable, "-c", INIT_WORKER_CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "-1"]
