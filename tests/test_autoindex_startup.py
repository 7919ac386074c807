"""Autoindex's start-up: what a run pays before its companion starts, and plugin discovery's metadata reads."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from xerj_core.autoindex import pipeline
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink
from xerj_core.engine import Engine
from xerj_core import plugins as plugins_module
from xerj_core.plugins import get_plugin_manager

CLOCK = lambda: 1_700_000_000_000  # noqa: E731


def notes(root: Path, count: int) -> Path:
    for i in range(count):
        folder = root / f"topic-{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\n## Part\nwords here [[note-{(i * 7) % count}]]\n")
        os.utime(folder / f"note-{i}.md", ns=(1_600_000_000_000_000_000 + i,) * 2)
    return root


def test_a_sink_of_an_engine_builds_the_graph_service_only_when_the_edges_need_it(tmp_path):
    with Engine(tmp_path / "d") as engine:
        sink = LocalSink.of_engine(engine)
        sink.load("b")
        assert "graph" not in engine.__dict__  # loading the brain's files needs the store only
        assert not sink.standing_edges("b").live and list(sink.standing_edges("b").live) == []
        assert "graph" in engine.__dict__ and sink.graph is engine.graph


def test_a_run_opens_its_companion_before_it_builds_the_graph_service(tmp_path, monkeypatch):
    # the companion is on a small run's critical path: the graph's and the search's imports wait until the edges
    folder = notes(tmp_path / "notes", pipeline.POOL_MIN_FILES + 10)
    with Engine(tmp_path / "inline") as engine:
        expected = run(engine, folder, brain="b", workers=1, clock=CLOCK)
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    built_at_open: list[bool] = []
    real = pipeline.open_pool
    with Engine(tmp_path / "d") as engine:
        def open_pool(workers, **kw):
            built_at_open.append("graph" in engine.__dict__)
            return real(workers, **kw)

        monkeypatch.setattr(pipeline, "open_pool", open_pool)
        summary = run(engine, folder, brain="b", clock=CLOCK)
    assert built_at_open == [False]
    assert summary.edges_by_type == expected.edges_by_type and summary.documents == expected.documents > 0


def test_plugin_discovery_reads_each_distribution_metadata_once_per_field(monkeypatch):
    reads: Counter[int] = Counter()
    # the class that defines ``metadata`` for the distributions found (the stdlib's, or importlib_metadata's once a
    # library such as dask's has put that finder first)
    kind = type(next(iter(plugins_module.entry_points(group="xerj"))).dist)
    owner = next(c for c in kind.__mro__ if "metadata" in c.__dict__)
    real = owner.__dict__["metadata"]

    def counted(dist):
        reads[id(dist)] += 1
        return real.fget(dist)

    monkeypatch.setattr(owner, "metadata", property(counted))
    pm = get_plugin_manager()
    # the name, and the version (which reads the metadata again), once per distribution, not per entry point
    assert len(pm.origins) > len(reads) > 0 and max(reads.values()) <= 2
    assert pm.origins["core_commands"].builtin and pm.origins["core_commands"].version


def test_a_forked_companion_keeps_the_runs_plugins_instead_of_loading_them_again(tmp_path, monkeypatch):
    folder = notes(tmp_path / "notes", pipeline.POOL_MIN_FILES + 10)
    with Engine(tmp_path / "inline") as engine:
        expected = run(engine, folder, brain="b", workers=1, clock=CLOCK)
    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "may_fork", lambda: True)
    parent = os.getpid()
    real = plugins_module.get_plugin_manager

    def in_this_process_only(*args, **kwargs):
        if os.getpid() != parent:  # a forked companion loading the plugins again
            raise AssertionError("the companion loaded the plugins again")
        return real(*args, **kwargs)

    monkeypatch.setattr(plugins_module, "get_plugin_manager", in_this_process_only)
    with Engine(tmp_path / "d") as engine:
        summary = run(engine, folder, brain="b", clock=CLOCK)
    assert summary.edges_by_type == expected.edges_by_type and summary.documents == expected.documents > 0


def test_the_shared_term_combine_does_not_import_numpy_ma(tmp_path):
    # numpy's unique imports numpy.ma on first use; the companion's combine, on a run's critical path, avoids it
    script = tmp_path / "combine.py"
    repo = Path(__file__).resolve().parents[1]
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(repo)!r})\n"
        "from tests.test_detectors import parse_files, vocabulary_corpus\n"
        "from xerj_core.autoindex.detect import run_detectors\n"
        "from xerj_detectors import sharedterm\n"
        "extra = {i: 'alphaterm betaterm' for i in range(0, 200, 11)[:17]}\n"
        "result = run_detectors([sharedterm.SharedtermDetector()], parse_files(vocabulary_corpus(extra, size=200)))\n"
        "assert result.edges\n"
        "print('numpy.ma' in sys.modules)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "False"
