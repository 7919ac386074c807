"""The conformance suite every audit sink passes: subclass ``AbstractAuditSinkTests`` and provide ``sink_factory``.

Usage, in a plugin's own tests::

    from xerj_core.testing.audit_sinks import AbstractAuditSinkTests

    class TestMySink(AbstractAuditSinkTests):
        @pytest.fixture
        def sink_factory(self):
            return MySinkFactory()

The factory is what the plugin registers through ``xerj_register_audit_sinks``:
a ``name`` and ``open(data_dir, config)``. The contract checked here: the
opened sink carries the factory's name; ``append`` takes every event field,
including text in any script, and leaves the caller's event alone; a sink
opened once and then used from several forked processes at the same time
(gunicorn workers) loses nothing; what was appended survives ``close`` and a
reopen; and a sink that cannot write raises instead of dropping the event.

A sink that offers ``search(query)`` and ``verify()`` (as the ``/_audit``
routes need) is also held to: entries come back newest first with a
``total``, each filter narrows, and ``verify()`` reports a valid chain with
one entry per append. Override ``make_unwritable(data_dir)`` to break the
sink's storage (the default skips that test).
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from xerj_core.audit_query import AuditQuery
from xerj_core.engine import EngineConfig

PROCESSES = 4
PER_PROCESS = 40


def event(n: int, **extra: Any) -> dict[str, Any]:
    return {"op": f"test.op{n % 3}", "subject": f"key:k{n % 2}:agent-{n % 2}", "resource": f".xerj-memory-ns{n % 2}",
            "privilege": "write", "outcome": ("success", "denied", "failure")[n % 3], "status": 200,
            "remote_addr": "127.0.0.1", "request_id": f"req-{n}", **extra}


def _append_in_child(sink: Any, start: int, count: int) -> None:
    for n in range(start, start + count):
        sink.append(event(n))


class AbstractAuditSinkTests:
    """Contract tests for an audit sink factory; needs the ``sink_factory`` fixture."""

    @pytest.fixture
    def sink_factory(self) -> Any:
        raise NotImplementedError("override the `sink_factory` fixture to return the factory the plugin registers")

    @pytest.fixture
    def data_dir(self, tmp_path: Path) -> Path:
        path = tmp_path / "data"
        path.mkdir()
        return path

    @pytest.fixture
    def sink(self, sink_factory: Any, data_dir: Path) -> Any:
        opened = sink_factory.open(data_dir, EngineConfig())
        yield opened
        opened.close()

    def make_unwritable(self, data_dir: Path) -> None:
        pytest.skip("this suite does not know how to break the sink's storage; override make_unwritable")

    @staticmethod
    def readable(sink: Any) -> bool:
        return callable(getattr(sink, "search", None)) and callable(getattr(sink, "verify", None))

    def require_readable(self, sink: Any) -> None:
        if not self.readable(sink):
            pytest.skip("the sink offers no search() and verify()")

    # -- identity --------------------------------------------------------

    def test_factory_and_sink_share_a_name(self, sink_factory, sink):
        assert isinstance(sink_factory.name, str) and sink_factory.name.strip() == sink_factory.name != ""
        assert sink.name == sink_factory.name

    # -- appending ------------------------------------------------------

    def test_append_takes_every_field_and_leaves_the_event_alone(self, sink):
        given = event(1, note="404 index_not_found_exception: no such index [zürich-東京]",
                       indices=[".xerj-memory-a", "books"])
        before = {key: (list(value) if isinstance(value, list) else value) for key, value in given.items()}
        sink.append(given)
        assert given == before

    def test_appends_survive_close_and_reopen(self, sink_factory, data_dir, sink):
        for n in range(5):
            sink.append(event(n))
        sink.close()
        again = sink_factory.open(data_dir, EngineConfig())
        try:
            again.append(event(5))
            if self.readable(again):
                found = again.search(AuditQuery(size=100))
                assert found["total"] == 6
                assert [entry["request_id"] for entry in found["entries"]] == [f"req-{n}" for n in range(5, -1, -1)]
                assert again.verify().valid
        finally:
            again.close()

    def test_forked_processes_lose_nothing(self, sink):
        """A sink opened before a fork (as gunicorn's master would) is used by every child at once."""
        sink.append(event(-1))
        ctx = multiprocessing.get_context("fork")
        children = [ctx.Process(target=_append_in_child, args=(sink, 1000 * (k + 1), PER_PROCESS))
                    for k in range(PROCESSES)]
        for child in children:
            child.start()
        _append_in_child(sink, 0, PER_PROCESS)
        for child in children:
            child.join(120)
            assert child.exitcode == 0
        if not self.readable(sink):
            return
        found = sink.search(AuditQuery(size=10_000))
        assert found["total"] == 1 + PER_PROCESS * (PROCESSES + 1)
        ids = [entry["request_id"] for entry in found["entries"]]
        assert len(set(ids)) == len(ids)
        verdict = sink.verify()
        assert verdict.valid, verdict
        assert verdict.entries == found["total"]

    def test_a_sink_that_cannot_write_raises(self, sink_factory, data_dir):
        self.make_unwritable(data_dir)
        broken = sink_factory.open(data_dir, EngineConfig())
        try:
            with pytest.raises(Exception):
                broken.append(event(1))
        finally:
            broken.close()

    # -- reading (sinks that offer search and verify) --------------------

    def test_search_is_newest_first_with_a_total(self, sink):
        self.require_readable(sink)
        for n in range(12):
            sink.append(event(n))
        found = sink.search(AuditQuery(size=3))
        assert found["total"] == 12
        assert [entry["request_id"] for entry in found["entries"]] == ["req-11", "req-10", "req-9"]
        assert sink.search(AuditQuery(size=0)) == {"total": 12, "entries": []}

    def test_each_filter_narrows(self, sink):
        self.require_readable(sink)
        for n in range(12):
            sink.append(event(n))

        def ids(**filters: Any) -> list[str]:
            return sorted(e["request_id"] for e in sink.search(AuditQuery(size=100, **filters))["entries"])

        assert ids(op="test.op1") == sorted(f"req-{n}" for n in range(12) if n % 3 == 1)
        assert ids(outcome="denied") == ids(op="test.op1")
        assert ids(subject="agent-1") == sorted(f"req-{n}" for n in range(12) if n % 2)
        assert ids(subject="k0") == sorted(f"req-{n}" for n in range(12) if n % 2 == 0)
        assert ids(resource=".xerj-memory-ns0") == ids(subject="k0")
        assert ids(op="test.*") == sorted(f"req-{n}" for n in range(12))
        assert ids(op="nothing") == []
        newest = sink.search(AuditQuery(size=1))["entries"][0]
        assert ids(from_ms=newest["ts"] + 1) == []
        assert "req-11" in ids(from_ms=newest["ts"], to_ms=newest["ts"])

    def test_verify_counts_one_entry_per_append(self, sink):
        self.require_readable(sink)
        for n in range(7):
            sink.append(event(n))
        verdict = sink.verify()
        assert verdict.valid and verdict.entries == 7
