"""Autoindex on a Dask LocalCluster: the inline run's documents and edges exactly, a killed worker's batch rerun or named."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from xerj_core.autoindex import pipeline
from xerj_core.autoindex.detect import Corpus
from xerj_core.autoindex.executors import open_executor
from xerj_core.autoindex.parallel import InlineExecutor, detect_batch, parse_batch
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink
from xerj_core.cli import build_cli
from xerj_core.engine import Engine
from xerj_core.errors import BatchFailed
from xerj_core.plugins import get_plugin_manager

from .test_autoindex_executor import CLOCK, FOAM, RERUN_STEPS, generate, run_each, stored

distributed = pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (installed with distributed)
import dask  # noqa: E402

# The sabotage helpers below run on the workers: ship them by value rather than by a module path.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

WORKERS = 2


@pytest.fixture(scope="module")
def dask_executor():
    """One LocalCluster of two worker processes for the module, opened the way `--executor dask` opens it.

    A task is rerun after one worker died under it and fails (KilledWorker) when a second one dies,
    so the tests that kill workers stay short.
    """
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        executor = open_executor("dask", get_plugin_manager(), workers=WORKERS)
    yield executor
    pids = list(executor.client.run(os.getpid).values())
    executor.shutdown()
    assert not [pid for pid in pids if _alive(pid)], "the LocalCluster's workers outlived its shutdown"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def cluster(dask_executor):
    """The module's cluster with both workers up (a test before may have killed one; the nanny restarts it)."""
    dask_executor.client.wait_for_workers(WORKERS, timeout=180)
    return dask_executor


@pytest.fixture(scope="module")
def pool():
    with cf.ProcessPoolExecutor(WORKERS) as executor:
        yield executor


class Sabotaged(cf.Executor):
    """Submits through ``inner``, wrapping in ``wrapper`` (on the worker) the batches ``doomed(fn, args)`` picks."""

    def __init__(self, inner, doomed, wrapper) -> None:
        self.inner, self.doomed, self.wrapper = inner, doomed, wrapper

    def submit(self, fn, /, *args, **kwargs):
        if self.doomed(fn, args):
            return self.inner.submit(self.wrapper, fn, *args)
        return self.inner.submit(fn, *args)

    def broadcast(self, value):
        return self.inner.broadcast(value)


def _stalls_once(marker: str, fn, *args):
    """The first worker to run this writes its pid to ``marker`` and waits to be killed; later runs do ``fn``."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return fn(*args)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(600)
    raise AssertionError("the worker was not killed")


def _dies(fn, *args):
    """The worker running this batch is killed (SIGKILL) mid-task, every time."""
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_when_stalled(marker: Path) -> threading.Thread:
    """From outside, SIGKILL the worker process whose pid appears in ``marker``."""

    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            text = marker.read_text() if marker.exists() else ""
            if text:
                os.kill(int(text), signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")
def test_inline_process_pool_and_dask_agree_on_the_foam_vault(tmp_path, monkeypatch, pool, cluster):
    inline, pooled, dasked = run_each(tmp_path, FOAM, monkeypatch,
                                      {"inline": InlineExecutor(), "pooled": pool, "dask": cluster})
    summaries, results, edges, notes = inline
    assert results[0].edges and len(edges) == summaries[0]["edges_written"] and len(notes) == summaries[0]["documents"]
    assert {"shared_term", "sequence", "same_dir", "wikilink"} <= set(summaries[0]["edges_by_type"])
    # same summaries, drafts (ids, types, evidence) in the same order, counters, stored edges and documents
    assert pooled == inline
    assert dasked == inline


def test_inline_process_pool_and_dask_agree_on_a_generated_corpus(tmp_path, monkeypatch, pool, cluster):
    folder = generate(tmp_path / "gen", 260)
    inline, pooled, dasked = run_each(tmp_path, folder, monkeypatch,
                                      {"inline": InlineExecutor(), "pooled": pool, "dask": cluster},
                                      steps=RERUN_STEPS)
    summaries = inline[0]
    assert summaries[0]["edges_by_type"].get("shared_term") and summaries[0]["edges_by_type"].get("same_dir")
    assert summaries[1]["edges_written"] == 0 and summaries[2]["files_removed"] == 1
    assert pooled == inline
    assert dasked == inline


class Recording(cf.Executor):
    """Passes every task to ``inner`` and keeps what it was handed: the broadcast value and each task's arguments."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.broadcasts: list = []
        self.tasks: list = []

    def submit(self, fn, /, *args, **kwargs):
        self.tasks.append((fn, args))
        return self.inner.submit(fn, *args)

    def broadcast(self, value):
        self.broadcasts.append(value)
        return self.inner.broadcast(value)


def test_workers_get_their_batch_and_one_broadcast_without_text(tmp_path, monkeypatch, cluster):
    """Map → combine → broadcast → map: no task carries the corpus's text, only its own batch's."""
    folder = generate(tmp_path / "gen", 300)
    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 64)
    recording = Recording(cluster)
    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        summary = run(eng, folder, brain="b", executor=recording)
    assert summary.edges_by_type["shared_term"] > 0
    [(corpus, states)] = recording.broadcasts
    assert isinstance(corpus, Corpus) and "sharedterm" in states
    assert all(doc.text == "" for path in corpus.paths for doc in corpus.documents(path))
    parses = [args for fn, args in recording.tasks if fn is parse_batch]
    detects = [args for fn, args in recording.tasks if fn is detect_batch]
    # parse tasks carry paths, not contents: each worker reads its own batch
    assert all(len(entries) <= pipeline.PARSE_BATCH_FILES for _ref, entries, *_options in parses)
    handles = {id(shared) for _ref, shared, _batch, *_options in detects}
    assert len(handles) == 1 and all(isinstance(shared, distributed.Future) for _ref, shared, *_rest in detects)
    batches = [[path for path, _docs in batch] for _ref, _shared, batch, *_options in detects]
    assert all(len(paths) <= 64 for paths in batches) and len(batches) > 1
    assert sorted(path for paths in batches for path in paths) == sorted(corpus.paths)  # each file in one batch


def test_a_worker_killed_mid_batch_is_rerun_and_the_edges_are_the_inline_ones(tmp_path, monkeypatch, cluster):
    folder = generate(tmp_path / "gen", 120)
    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 32)
    with Engine(tmp_path / "inline", get_plugin_manager()) as eng:
        expected = run(eng, folder, brain="b", clock=CLOCK, executor=InlineExecutor())
        expected_edges = stored(eng, "b")
    for step in (parse_batch, detect_batch):
        pids_before = set(cluster.client.run(os.getpid).values())
        marker = tmp_path / f"stalled-{step.__name__}"
        killer = _kill_when_stalled(marker)
        sabotaged = Sabotaged(cluster, lambda fn, args, step=step: fn is step,
                              functools.partial(_stalls_once, str(marker)))
        with Engine(tmp_path / step.__name__, get_plugin_manager()) as eng:
            summary = run(eng, folder, brain="b", clock=CLOCK, executor=sabotaged)
            edges = stored(eng, "b")
        killer.join(timeout=5)
        assert marker.read_text() and int(marker.read_text()) in pids_before  # a worker of the cluster died
        assert summary.edges_by_type == expected.edges_by_type and summary.files_failed == expected.files_failed
        assert edges == expected_edges
        cluster.client.wait_for_workers(WORKERS, timeout=180)


def test_a_batch_whose_worker_dies_every_time_fails_the_run_naming_its_files(tmp_path, monkeypatch, cluster):
    folder = generate(tmp_path / "gen", 80)
    monkeypatch.setattr(pipeline, "DETECT_BATCH_FILES", 16)
    doomed_file = "topic-2/note-9.md"

    def doomed(fn, args):
        return fn is detect_batch and doomed_file in [path for path, _docs in args[2]]

    with Engine(tmp_path / "d", get_plugin_manager()) as eng:
        with pytest.raises(BatchFailed) as failed:
            run(eng, folder, brain="b", clock=CLOCK, executor=Sabotaged(cluster, doomed, _dies))
        err = failed.value
        # every lost batch is named whole: the doomed one, and any Dask gave up on because it was queued on the
        # workers that died (the scheduler counts their deaths against every task they held)
        notes = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md"))
        batches = [notes[start:start + 16] for start in range(0, len(notes), 16)]
        assert err.step == "detect" and doomed_file in err.files and len(err.files) == 16 * err.batches
        assert all(set(batch) <= set(err.files) or not set(batch) & set(err.files) for batch in batches)
        assert "KilledWorker" in err.reason and all(path in err.reason for path in err.files)
        assert err.status == 503 and err.to_body()["error"]["files"] == list(err.files)
        # nothing of the lost run is reported as complete: no edge written, the run still marked dirty
        assert not eng.store.exists(".xerj-memory-b-edges") or stored(eng, "b") == {}
        assert LocalSink(eng.store, eng.graph).load("b").run.dirty
        cluster.client.wait_for_workers(WORKERS, timeout=180)
        again = run(eng, folder, brain="b", clock=CLOCK, executor=cluster)
        edges = stored(eng, "b")
    with Engine(tmp_path / "inline", get_plugin_manager()) as eng:
        expected = run(eng, folder, brain="b", clock=CLOCK, executor=InlineExecutor())
        assert edges == stored(eng, "b")
    assert again.edges_by_type == expected.edges_by_type


def test_cli_executor_option(tmp_path, monkeypatch, cluster):
    folder = generate(tmp_path / "gen", 40)
    cli = build_cli(get_plugin_manager())
    address = cluster.client.scheduler.address.removeprefix("tcp://")
    outputs = {}
    for name, spec in (("inline", "inline"), ("dask", f"dask://{address}")):
        result = CliRunner().invoke(cli, ["autoindex", str(folder), "--executor", spec, "--json", "--allow-failures",
                                          "--data-dir", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        outputs[name] = json.loads(result.output[result.output.index("{"):])
    assert outputs["dask"]["edges_by_type"] == outputs["inline"]["edges_by_type"] and outputs["inline"]["edges_written"]
    assert outputs["dask"]["documents"] == outputs["inline"]["documents"]

    def refused(*args: str) -> str:
        result = CliRunner().invoke(cli, ["autoindex", str(folder), "--data-dir", str(tmp_path / "x"), *args])
        assert result.exit_code == 2, result.output
        return result.output

    assert "no executor for [nosuch]; installed: dask, inline, process" in refused("--executor", "nosuch")
    assert "has the workers it has" in refused("--executor", f"dask://{address}", "--workers", "2")
    assert "takes no address" in refused("--executor", "process://somewhere:1")
    monkeypatch.setattr("xerj_dask.executor.CONNECT_TIMEOUT_S", 1)
    assert "no Dask scheduler answered at dask://127.0.0.1:9" in refused("--executor", "dask://127.0.0.1:9")
