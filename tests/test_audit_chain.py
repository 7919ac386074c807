"""The JSONL audit sink on disk: the conformance suite, tampering found at its seq, torn lines, rotation, the CLI."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from xerj_audit.chain import GENESIS, canonical, entry_hash, verify_files
from xerj_audit.jsonl import ACTIVE, JsonlAuditSink, JsonlAuditSinkFactory, log_files
from xerj_core.audit_query import AuditQuery
from xerj_core.cli import build_cli
from xerj_core.testing.audit_sinks import AbstractAuditSinkTests, event


class TestJsonlSinkConformance(AbstractAuditSinkTests):
    @pytest.fixture
    def sink_factory(self):
        return JsonlAuditSinkFactory()

    def make_unwritable(self, data_dir: Path) -> None:
        # A full disk: every write to /dev/full fails with ENOSPC (root ignores permission bits, this does not).
        (data_dir / ACTIVE).symlink_to("/dev/full")


def filled(tmp_path: Path, count: int = 10, **kwargs) -> JsonlAuditSink:
    sink = JsonlAuditSink(tmp_path / "data", **kwargs)
    for n in range(count):
        sink.append(event(n))
    return sink


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def broken_at(sink: JsonlAuditSink) -> tuple[int, str]:
    verdict = sink.verify()
    assert not verdict.valid
    return verdict.first_broken.seq, verdict.first_broken.reason


def test_entries_carry_the_chain_fields_and_hash_their_canonical_json(tmp_path):
    sink = filled(tmp_path, 3)
    entries = [json.loads(line) for line in lines_of(sink.path)]
    assert [e["seq"] for e in entries] == [1, 2, 3]
    assert entries[0]["prev_hash"] == GENESIS
    for before, entry in zip([None, *entries], entries):
        body = {k: v for k, v in entry.items() if k != "hash"}
        # re-checkable with nothing but the standard library
        standard = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert entry["hash"] == hashlib.sha256(standard).hexdigest() == entry_hash(entry)
        if before is not None:
            assert entry["prev_hash"] == before["hash"]
        assert {"op", "subject", "resource", "privilege", "outcome", "status", "remote_addr",
                "request_id", "ts"} <= set(entry)
    assert sink.verify().to_dict() == {"valid": True, "entries": 3, "files": 1, "last_seq": 3,
                                       "last_hash": entries[-1]["hash"]}


def tampered(tmp_path: Path, edit) -> tuple[int, str]:
    """Fill a log, let ``edit`` change its list of lines, write it back: where does verify say it breaks?"""
    sink = filled(tmp_path)
    lines = lines_of(sink.path)
    edit(lines)
    sink.path.write_bytes(b"".join(lines))
    return broken_at(sink)


def test_an_edited_line_is_reported_at_its_seq(tmp_path):
    def edit(lines):
        lines[4] = lines[4].replace(b'"status":200', b'"status":201')

    seq, reason = tampered(tmp_path, edit)
    assert seq == 5 and "edited" in reason


def test_an_edit_that_recomputes_its_hash_is_caught_by_the_next_link(tmp_path):
    def edit(lines):
        entry = json.loads(lines[4])
        entry["subject"] = "someone-else"
        entry["hash"] = entry_hash(entry)
        lines[4] = canonical(entry) + b"\n"

    seq, reason = tampered(tmp_path, edit)
    assert seq == 6 and "seq 5 was rewritten" in reason


def test_a_deleted_line_is_reported_at_the_missing_seq(tmp_path):
    seq, reason = tampered(tmp_path, lambda lines: lines.pop(6))
    assert seq == 7 and "missing" in reason


def test_a_swapped_pair_is_reported_at_the_first_of_the_two(tmp_path):
    def swap(lines):
        lines[2], lines[3] = lines[3], lines[2]

    seq, reason = tampered(tmp_path, swap)
    assert seq == 3 and "reordered" in reason


def test_a_deleted_last_line_and_a_truncated_log_still_verify_up_to_where_they_end(tmp_path):
    # Without an anchor outside the log nothing can tell a dropped tail from a shorter log:
    # verify reports the last seq and hash so an operator can hold on to them.
    sink = filled(tmp_path)
    lines = lines_of(sink.path)
    sink.path.write_bytes(b"".join(lines[:-1]))
    verdict = sink.verify()
    assert verdict.valid and verdict.last_seq == 9


def test_a_torn_last_line_is_reported_then_recorded_and_removed_by_the_next_append(tmp_path):
    sink = filled(tmp_path, 4)
    whole = canonical({"op": "half", "seq": 5}) + b"\n"
    with open(sink.path, "ab") as handle:
        handle.write(whole[: len(whole) // 2])
    seq, reason = broken_at(sink)
    assert seq == 5 and "torn" in reason
    # A fresh process (no cached tail) appends next.
    entry = JsonlAuditSink(sink.directory).append(event(99))
    assert entry["seq"] == 6
    verdict = sink.verify()
    assert verdict.valid and verdict.entries == 6
    repair = sink.search(AuditQuery(op="audit.repair"))["entries"]
    assert len(repair) == 1 and repair[0]["seq"] == 5
    assert repair[0]["torn"] == whole[: len(whole) // 2].decode()
    assert f"{len(whole) // 2} bytes" in repair[0]["note"]


def test_a_torn_line_in_a_full_file_is_repaired_before_the_file_rotates(tmp_path):
    sink = filled(tmp_path, 3, max_bytes=100_000)
    with open(sink.path, "ab") as handle:
        handle.write(b'{"op":"cut sho')
    JsonlAuditSink(sink.directory, max_bytes=10).append(event(3))  # over the limit: appends, then rotates
    assert not sink.path.exists() and [p.name for p in log_files(sink.directory)] == ["audit.000001.jsonl"]
    sink.append(event(4))
    verdict = sink.verify()
    assert verdict.valid and verdict.entries == 6 and verdict.files == 2
    assert sink.search(AuditQuery(op="audit.repair"))["entries"][0]["torn"] == '{"op":"cut sho'


def test_an_unreadable_last_entry_refuses_to_append_rather_than_fork_the_chain(tmp_path):
    sink = filled(tmp_path, 2)
    with open(sink.path, "ab") as handle:
        handle.write(b"not json at all\n")
    with pytest.raises(Exception, match="unreadable"):
        JsonlAuditSink(sink.directory).append(event(3))


def test_rotation_continues_the_chain_across_numbered_files(tmp_path):
    sink = filled(tmp_path, 60, max_bytes=2000)
    files = log_files(sink.directory)
    assert len(files) > 3
    assert files[0].name == "audit.000001.jsonl"
    assert all(path.stat().st_size < 2000 + 1000 for path in files)
    verdict = sink.verify()
    assert verdict.valid and verdict.entries == 60 and verdict.files == len(files)
    first_of_second = json.loads(lines_of(files[1])[0])
    last_of_first = json.loads(lines_of(files[0])[-1])
    assert first_of_second["prev_hash"] == last_of_first["hash"]
    assert first_of_second["seq"] == last_of_first["seq"] + 1
    # every entry is still searchable, newest first
    found = sink.search(AuditQuery(size=100))
    assert found["total"] == 60 and [e["seq"] for e in found["entries"]] == list(range(60, 0, -1))
    # a second process rotating concurrently never forks the chain
    other = JsonlAuditSink(sink.directory, max_bytes=2000)
    for n in range(20):
        (sink if n % 2 else other).append(event(n))
    assert sink.verify().valid and sink.verify().entries == 80


def test_a_removed_numbered_file_is_reported_at_its_first_seq(tmp_path):
    sink = filled(tmp_path, 40, max_bytes=1500)
    files = log_files(sink.directory)
    first_missing = json.loads(lines_of(files[1])[0])["seq"]
    files[1].unlink()
    seq, reason = broken_at(sink)
    assert seq == first_missing and "missing" in reason


def test_the_cli_verifies_offline_and_exits_non_zero_on_a_broken_chain(tmp_path, pm):
    sink = filled(tmp_path, 5)
    cli = build_cli(pm)
    ok = CliRunner().invoke(cli, ["audit", "verify", "--data-dir", str(sink.directory)])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["valid"] is True and json.loads(ok.stdout)["entries"] == 5
    lines = lines_of(sink.path)
    del lines[1]
    sink.path.write_bytes(b"".join(lines))
    bad = CliRunner().invoke(cli, ["audit", "verify", "--data-dir", str(sink.directory)])
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert report["valid"] is False and report["first_broken"]["seq"] == 2
    assert report["first_broken"]["file"] == ACTIVE
    assert "broken at seq 2" in bad.stderr
    missing = CliRunner().invoke(cli, ["audit", "verify", "--data-dir", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no data directory" in missing.output


APPENDER = """
import sys
from xerj_audit.jsonl import JsonlAuditSink
sink = JsonlAuditSink(sys.argv[1], max_bytes=int(sys.argv[2]))
n = 0
while True:
    n += 1
    sink.append({"op": "burst", "subject": "cli", "resource": "x", "privilege": "write", "outcome": "success",
                 "status": 200, "remote_addr": None, "request_id": f"{sys.argv[3]}-{n}", "note": "y" * 300})
"""


def bytes_logged(data: Path) -> int:
    """The size of every log file now; a writer may rotate ``audit.jsonl`` away between the listing and a stat."""
    total = 0
    for path in data.glob("audit*.jsonl"):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def test_kill_9_in_the_middle_of_a_burst_leaves_a_chain_that_verifies_or_reports_the_torn_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(data), "20000", f"p{k}"]) for k in range(3)]
    try:
        deadline = time.monotonic() + 30
        while bytes_logged(data) < 60_000 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for proc in procs:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    files = log_files(data)
    verdict = verify_files(files)
    tail = files[-1].read_bytes()
    if verdict.valid:
        # a kill just after a rotation opened the new file and before its first line leaves it empty
        assert tail == b"" or tail.endswith(b"\n")
    else:  # only an interrupted last line is acceptable, and it must be said
        assert "torn" in verdict.first_broken.reason and not tail.endswith(b"\n")
    assert verdict.entries >= 50 and len(files) > 1  # the burst was under way when it was killed
    # the next writer continues the chain (recording any torn line it removed)
    JsonlAuditSink(data, max_bytes=20000).append(event(1))
    after = verify_files(log_files(data))
    assert after.valid and after.entries == verdict.entries + 1 + (0 if verdict.valid else 1)
    seqs = [orjson.loads(line)["seq"] for path in log_files(data) for line in lines_of(path)]
    assert seqs == list(range(1, len(seqs) + 1))
