"""The writer shares a companion's parsing: it parses a batch the companion has not begun whenever it would wait.

The companion's combine, asked for once every parse batch is sent, waits in the
companion for the batches the writer took back and adopts later; the results
stay the inline run's. The pool's pipes are widened so a parse batch's result
does not stall the companion.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

import pytest

from xerj_core.autoindex import parallel, pipeline
from xerj_core.autoindex.detect import collect_detectors
from xerj_core.autoindex.formats import collect_formats
from xerj_core.autoindex.parallel import InlineExecutor, Kept, Plugins
from xerj_core.autoindex.walk import FileEntry
from xerj_core.plugins import get_plugin_manager

from .test_autoindex_executor import COMPANION, RERUN_STEPS, generate, run_each

_PARENT = os.getpid()
_real_parse_and_keep = parallel.parse_and_keep


def _slow_parse_and_keep(*args, **kwargs):
    """The companion's parse, slowed in the companion only: the writer waits for it and takes batches back."""
    if os.getpid() != _PARENT:
        time.sleep(0.15)
    return _real_parse_and_keep(*args, **kwargs)


def test_the_writer_takes_batches_back_all_run_long_and_the_results_are_the_inline_runs(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 140)
    waits: list[int] = []  # the batch the writer waited for, each time it took batches back
    taken: list[int] = []  # the batches taken back, in the order taken
    batches: list[int] = []  # each run's changed-file parse batches (numbered first, from 0)
    real_wait = pipeline._take_back_while_waiting
    real_take_back = pipeline._Runner.take_back

    def take_back_while_waiting(runner, parses, position, detection):
        waits.append(position)
        if not batches or batches[-1] != len(parses):
            batches.append(len(parses))
        return real_wait(runner, parses, position, detection)

    def take_back(runner, future):
        outcomes = real_take_back(runner, future)
        if outcomes is not None:
            taken.append(future.seq)
        return outcomes

    def patched(step):
        def run_step(work):
            # forked, so the slowed parse (a function of this module) is the companion's too
            monkeypatch.setattr(pipeline, "may_fork", lambda: True)
            monkeypatch.setattr(pipeline, "PARSE_BATCH_FILES", 16)
            monkeypatch.setattr(pipeline, "parse_and_keep", _slow_parse_and_keep)
            monkeypatch.setattr(pipeline, "_take_back_while_waiting", take_back_while_waiting)
            monkeypatch.setattr(pipeline._Runner, "take_back", take_back)
            monkeypatch.setattr(pipeline, "TAKE_TAIL_BYTES", 2000)  # a batch or two of these notes
            step(work)
        return run_step

    inline, accompanied = run_each(tmp_path, folder, monkeypatch, {"inline": InlineExecutor(), "c": COMPANION},
                                   steps=tuple(map(patched, RERUN_STEPS)))
    # not only while the companion starts (the first batch): later batches too
    assert any(position > 0 for position in waits), waits
    # the first run's first batch taken back is its last (so the companion combines while the writer writes it);
    # batches next in line follow
    assert taken[0] == batches[0] - 1, (taken, batches)
    assert any(seq < batches[0] - 3 for seq in taken), (taken, batches)
    assert inline[0][0]["edges_by_type"].get("shared_term") and inline[2] and inline[3]
    assert accompanied == inline  # the drafts in the same order, counters, summaries, stored edges and documents


def _plugins() -> Plugins:
    pm = get_plugin_manager()
    return Plugins(collect_formats(pm), tuple(collect_detectors(pm).values()))


def _entries(folder: Path) -> list[FileEntry]:
    out = []
    for path in sorted(folder.rglob("*.md")):
        stat = path.stat()
        out.append(FileEntry(path=path, rel_path=path.relative_to(folder).as_posix(), size=stat.st_size,
                             mtime_ns=stat.st_mtime_ns))
    return out


def test_a_combine_asked_before_a_batch_is_adopted_waits_for_it(tmp_path, monkeypatch):
    folder = generate(tmp_path / "gen", 60)
    entries = _entries(folder)
    first, second = entries[:30], entries[30:]
    plugins = _plugins()

    def drafts(token: str, paths: list[str]) -> list:
        return parallel.unpack_drafts(parallel.detect_kept(plugins, token, paths))[0]

    monkeypatch.setattr(parallel, "_WORKER", {})
    # the whole corpus kept by the companion alone: what the combine and detection must give
    parallel.parse_and_keep(plugins, "all", first, True, True, 0)
    parallel.parse_and_keep(plugins, "all", second, True, True, 1)
    expected = parallel.combine_kept(plugins, "all", 2)
    assert expected is not None and expected[0] == sorted(e.rel_path for e in entries if e.rel_path.endswith(".md"))
    expected_drafts = drafts("all", expected[0])
    assert any(d.type == "shared_term" for d in expected_drafts) and any(d.type != "shared_term" for d in expected_drafts)

    monkeypatch.setattr(parallel, "_WORKER", {})
    parallel.parse_and_keep(plugins, "run", first, True, True, 0)
    # the second batch was taken back by the writer: the combine, asked for now, waits for it
    assert parallel.combine_kept(plugins, "run", 2) is None
    taken = parallel.parse_batch(plugins, second, True, True)
    assert parallel.adopt_kept(plugins, "run", [(o.entry.rel_path, Kept.of(o)) for o in taken if o.docs], 1) \
        == expected
    assert drafts("run", expected[0]) == expected_drafts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's")
def test_a_pools_pipes_hold_a_parse_batchs_result():
    with open("/proc/sys/fs/pipe-max-size") as limit:
        wanted = min(parallel.PIPE_BYTES, int(limit.read()))
    pool = parallel.open_pool(1)
    try:
        for queue in (pool._result_queue, pool._call_queue):
            assert fcntl.fcntl(queue._reader.fileno(), 1032) >= wanted  # F_GETPIPE_SZ
    finally:
        pool.shutdown()


def test_each_detect_batch_gives_its_kept_files_pages_back(tmp_path, monkeypatch):
    # the run's RSS adds the companion's to the writer's, whose edge transactions are its peak: each detect batch
    # lets its kept files go, and their pages go back then rather than when the companion exits
    folder = generate(tmp_path / "gen", 40)
    entries = _entries(folder)
    plugins = _plugins()
    monkeypatch.setattr(parallel, "_WORKER", {})
    parallel.parse_and_keep(plugins, "t", entries, True, True, 0)
    ordered, _counters = parallel.combine_kept(plugins, "t", 1)
    trims = []
    monkeypatch.setattr(parallel, "trim_heap", lambda: trims.append(1))
    for lo in range(0, len(ordered), 10):
        parallel.detect_kept(plugins, "t", ordered[lo:lo + 10])
    assert len(trims) == -(-len(ordered) // 10)
