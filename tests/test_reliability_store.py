"""The store under threads and a full disk: map growth waits for this process's readers; a full disk is a 507."""

from __future__ import annotations

import os
import threading
import time

import lmdb
import pytest

from xerj_core.errors import InsufficientStorage
from tests.reliability.common import mount_tmpfs, unmount
from xerj_core.store.env import Environment


def test_map_growth_waits_for_readers_of_other_threads(tmp_path):
    env = Environment(tmp_path / "db", map_size=1 << 20)
    reading = threading.Event()
    release = threading.Event()
    seen: list[bytes | None] = []

    def reader() -> None:
        txn = env.begin_read()
        try:
            reading.set()
            release.wait(10)
            seen.append(txn.get(b"k0", db=env.dbs["aux"]))
        finally:
            txn.abort()

    t = threading.Thread(target=reader)
    t.start()
    reading.wait(10)
    done = threading.Event()

    def writer() -> None:
        # Several megabytes into a 1 MB map: the write must grow the map, which must wait for the reader.
        for n in range(8):
            env.write(lambda txn, n=n: txn.put(b"k%d" % n, os.urandom(1 << 20), db=env.dbs["aux"]))
        done.set()

    w = threading.Thread(target=writer)
    w.start()
    time.sleep(0.5)
    assert not done.is_set(), "the map grew while another thread held a read transaction"
    release.set()
    t.join(10)
    w.join(30)
    assert done.is_set()
    assert seen == [None]  # the reader saw its snapshot, from before the writes
    assert env.env.info()["map_size"] > 8 << 20
    with env.begin_read() as txn:
        assert len(txn.get(b"k7", db=env.dbs["aux"])) == 1 << 20
    env.close()


def test_a_nested_reader_is_not_held_back_by_a_pending_resize(tmp_path):
    env = Environment(tmp_path / "db", map_size=1 << 20)
    outer = env.begin_read()
    grown = threading.Event()

    def writer() -> None:
        env.write(lambda txn: txn.put(b"big", os.urandom(2 << 20), db=env.dbs["aux"]))
        grown.set()

    w = threading.Thread(target=writer)
    w.start()
    time.sleep(0.3)
    inner = env.begin_read(buffers=True)  # would deadlock if a pending resize held this thread back
    inner.abort()
    outer.abort()
    w.join(30)
    assert grown.is_set()
    env.close()


def test_a_write_that_must_grow_under_its_own_reader_is_refused_not_hung(tmp_path):
    env = Environment(tmp_path / "db", map_size=1 << 20)
    with env.begin_read():
        with pytest.raises(InsufficientStorage):
            env.write(lambda txn: txn.put(b"big", os.urandom(2 << 20), db=env.dbs["aux"]))
    env.write(lambda txn: txn.put(b"big", os.urandom(2 << 20), db=env.dbs["aux"]))
    env.close()


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MB tmpfs (needs root to mount); skipped where it cannot be mounted."""
    mount = tmp_path / "small"
    if not mount_tmpfs(mount, "8m"):
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    unmount(mount)


def test_a_full_disk_is_insufficient_storage_and_recovers(small_disk):
    env = Environment(small_disk / "db")
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (7 << 20))
    with pytest.raises(InsufficientStorage) as caught:
        for n in range(64):
            env.write(lambda txn, n=n: txn.put(b"k%d" % n, os.urandom(256 << 10), db=env.dbs["aux"]))
    assert caught.value.status == 507 and "full" in caught.value.reason
    with env.begin_read() as txn:  # reads keep working
        assert txn.get(b"k0", db=env.dbs["aux"]) is not None
    ballast.unlink()
    env.write(lambda txn: txn.put(b"after", b"x" * 1000, db=env.dbs["aux"]))
    with env.begin_read() as txn:
        assert txn.get(b"after", db=env.dbs["aux"]) == b"x" * 1000
    env.close()
    reopened = Environment(small_disk / "db")
    with reopened.begin_read() as txn:
        assert txn.get(b"after", db=reopened.dbs["aux"]) == b"x" * 1000
    reopened.close()
    assert not isinstance(caught.value, lmdb.Error)


def test_a_bool_past_the_clause_limit_is_refused_before_it_runs():
    from xerj_core.errors import IllegalArgument
    from xerj_core.query import dsl

    ok = {"bool": {"should": [{"term": {"t": f"w{n}"}} for n in range(dsl.MAX_CLAUSE_COUNT)]}}
    assert len(dsl.parse_query(ok).should) == dsl.MAX_CLAUSE_COUNT
    with pytest.raises(IllegalArgument, match="maxClauseCount is set to 4096"):
        dsl.parse_query({"bool": {"should": [{"term": {"t": f"w{n}"}} for n in range(100_000)]}})


def test_an_email_whose_mime_parameters_break_the_stdlib_parser_is_refused_not_crashed():
    """Found by atheris (tests/reliability/fuzz.py email): IndexError from email._header_value_parser."""
    import base64

    from xerj_core.autoindex.formats import FormatError, collect_formats
    from xerj_core.plugins import get_plugin_manager

    data = base64.b64decode(
        "MDQ6Cio7JjoKY29udGVudC10eXBlOm1lc3NhZ2UvZGX5ADI69s07MDkwKgo5OkAKNDoKKjs6Cgo6KjkKNDoKc2FnZS9kZfkAMjr2zTsw"
        "OTA6Cjk6QAo0OgoqOzoKCjoqOQpydC9kCiotOjQ7OggKMDkwOgo5OjoKOghlNC06NDs6h4eHh4eHh4c6")
    with pytest.raises(FormatError, match="malformed email"):
        collect_formats(get_plugin_manager())["email"].parse("mail.eml", data, 0)
