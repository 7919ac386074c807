"""Large mailboxes read through a memory map: the same documents as reading them whole, at any size, holding
one message's bytes at a time."""

from __future__ import annotations

import base64
import gzip
import mmap
import random
import tempfile
import tracemalloc
from pathlib import Path

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings, strategies as st

from xerj_core.autoindex import mapped, pipeline
from xerj_core.autoindex.builtin_formats import email
from xerj_core.autoindex.formats import SNIFF_BYTES, collect_formats
from xerj_core.autoindex.parallel import Plugins, parse_batch
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.walk import TOO_LARGE, FileEntry, walk
from xerj_core.engine import Engine
from xerj_core.plugins import get_plugin_manager

from .test_autoindex_shares import NOW, edges_of, mailbox_documents, without_system_time, write_mailbox
from .test_formats import APPENDED_PIECES

MTIME = 1_700_000_000_000


@pytest.fixture
def formats():
    return collect_formats(get_plugin_manager(builtins_only=True))


def export(path: Path, messages: int, attachment: int, seed: int = 3) -> None:
    """A mail export at ``path``: ``messages`` messages, each a short text with a photo of ``attachment`` random
    bytes (base64), as most of a Gmail Takeout mailbox's bytes are."""
    rng = random.Random(seed)
    with open(path, "wb") as out:
        for n in range(messages):
            photo = base64.encodebytes(rng.randbytes(attachment)).decode()
            out.write(f"""From a@example.org Mon Jan  6 10:00:{n % 60:02d} 2025
From: Ada <a@example.org>
Subject: trip photo {n}
Message-ID: <{n}@example.org>
In-Reply-To: <{n - 1}@example.org>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/plain; charset=utf-8

the levain rose overnight, photo {n} attached
--b
Content-Type: image/jpeg; name="p{n}.jpg"
Content-Disposition: attachment; filename="p{n}.jpg"
Content-Transfer-Encoding: base64

{photo}--b--

""".encode())


def mapped_file(data: bytes):
    """``data`` written to a temporary file and mapped read-only (the caller closes the map)."""
    with tempfile.TemporaryFile() as file:
        file.write(data)
        file.flush()
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(APPENDED_PIECES), min_size=1, max_size=40).map(
    lambda pieces: b"From a@b Mon Jan  1 00:00:00 2024\n" + b"".join(pieces)), st.floats(min_value=0, max_value=1))
def test_a_mapped_mailbox_reads_as_its_bytes_do(data, where):
    """Messages, documents and the appended read of a map are those of the same bytes in memory."""
    fmt = email.EmailFormat()
    view = mapped_file(data)
    try:
        assert list(email.iter_mbox(view)) == email.split_mbox(data)
        assert fmt.parse("box.mbox", view, MTIME) == fmt.parse("box.mbox", data, MTIME)
        start = max(6, min(len(data) - 1, int(len(data) * where)))
        before = fmt.parse("box.mbox", data[:start], MTIME)
        assert fmt.parse_appended("box.mbox", view, start, before, MTIME) == \
            fmt.parse_appended("box.mbox", data, start, before, MTIME)
        assert mapped.digest(view) == xxhash.xxh3_64_hexdigest(data)
        assert mapped.digest(view, start) == xxhash.xxh3_64_hexdigest(data[:start])
    finally:
        view.close()


def traced_peak(call):
    """``call()``'s result and the peak of Python's allocations while it ran."""
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_mailbox_is_parsed_mapped_holding_a_message_at_a_time(tmp_path, formats, monkeypatch):
    box = tmp_path / "All mail.mbox"
    export(box, 120, 60_000)
    size = box.stat().st_size
    entry = FileEntry("All mail.mbox", box, box.stat().st_mtime_ns, size)
    plugins = Plugins(formats, ())
    (whole,), read_whole = traced_peak(lambda: parse_batch(plugins, [entry], False))
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 16)  # the file is now large enough to be mapped
    monkeypatch.setattr(mapped, "GIVE_BACK_BYTES", 1 << 16)  # and its pages given back as the parse passes them
    given_back = []
    give_back = mapped.give_back
    monkeypatch.setattr(mapped, "give_back", lambda data, upto, given: given_back.append(
        (isinstance(data, mmap.mmap), upto)) or give_back(data, upto, given))
    (outcome,), read_mapped = traced_peak(lambda: parse_batch(plugins, [entry], False))
    assert outcome.docs == whole.docs and outcome.digest == whole.digest == xxhash.xxh3_64_hexdigest(
        box.read_bytes())
    assert len(outcome.docs) == 1 + 120 + 120 and outcome.docs[0].fields["messages"] == 120
    # read whole, the parse holds the file (about 9.8 MB) at least once; mapped, about one message's bytes
    assert read_whole > size and read_mapped < size / 8, (read_whole, read_mapped, size)
    # given back as the messages were read (not only by the digest, which reads the whole file)
    assert all(is_map for is_map, _upto in given_back) and any(0 < upto < size / 2 for _is_map, upto in given_back)


def test_give_back_drops_whole_pages_behind_the_parse_and_keeps_what_they_hold(tmp_path, monkeypatch):
    data = bytes(range(256)) * 4096  # 1 MiB
    view = mapped_file(data)
    try:
        assert mapped.give_back(data, len(data), 0) == 0  # bytes in memory: nothing to give back
        assert mapped.give_back(view, 1000, 0) == 0  # not enough behind the parse yet
        monkeypatch.setattr(mapped, "GIVE_BACK_BYTES", 1)
        upto = mapped.give_back(view, 3 * mmap.PAGESIZE + 17, 0)
        assert upto == 3 * mmap.PAGESIZE
        assert mapped.give_back(view, 5 * mmap.PAGESIZE, upto) == 5 * mmap.PAGESIZE
        assert view[:] == data  # given back pages read again from the file, unchanged
    finally:
        view.close()


def test_a_mailbox_over_the_size_limit_is_read_and_makes_the_brain_a_raised_limit_makes(tmp_path, monkeypatch):
    folder = tmp_path / "mail"
    write_mailbox(folder, [f"Batch {n}" for n in range(12)])
    limit = 1_000
    assert (folder / "inbox.mbox").stat().st_size > 4 * limit
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 10)  # mapped, as a mailbox of many MiB is
    with Engine(tmp_path / "limited") as engine:
        limited = run(engine, folder, brain="mail", max_file_bytes=limit, clock=lambda: NOW)
        documents, edges = mailbox_documents(engine, "mail"), edges_of(engine, "mail")
    with Engine(tmp_path / "raised") as engine:
        raised = run(engine, folder, brain="mail", max_file_bytes=1 << 30, clock=lambda: NOW)
        assert mailbox_documents(engine, "mail") == documents
        assert without_system_time(edges_of(engine, "mail")) == without_system_time(edges)
    assert limited.files_indexed == raised.files_indexed == 1 and not limited.files_skipped
    assert len(documents) == 1 + 12 + 4 and limited.edges_by_type == raised.edges_by_type
    assert limited.edges_by_type["email_thread"] == 11
    # beside it, a text file and a compressed mailbox (expanded whole) over the limit are skipped, as a bare walk
    # skips all three
    (folder / "notes.txt").write_text("levain and rye " * 200)
    noise = base64.encodebytes(random.Random(2).randbytes(3_000))  # so the compressed mailbox is over the limit
    (folder / "old.mbox.gz").write_bytes(gzip.compress((folder / "inbox.mbox").read_bytes() + b"\n" + noise))
    with Engine(tmp_path / "limited") as engine:
        again = run(engine, folder, brain="mail", max_file_bytes=limit, clock=lambda: NOW)
    assert sorted((s["path"], s["kind"]) for s in again.files_skipped) == [
        ("notes.txt", TOO_LARGE), ("old.mbox.gz", TOO_LARGE)]
    assert again.files_unchanged == 1
    skipped = {s.rel_path: s.kind for s in walk(folder, max_file_bytes=limit) if not hasattr(s, "mtime_ns")}
    assert skipped == {"inbox.mbox": TOO_LARGE, "notes.txt": TOO_LARGE, "old.mbox.gz": TOO_LARGE}


def test_a_file_that_cannot_be_sniffed_is_not_taken_past_the_limit(tmp_path, formats):
    assert not mapped.reads_mapped(formats, "gone.mbox", tmp_path / "gone.mbox", SNIFF_BYTES)
    (tmp_path / "x.mbox.gz").write_bytes(gzip.compress(b"From a@b Mon Jan  1 00:00:00 2024\nSubject: s\n\nhi\n"))
    assert not mapped.reads_mapped(formats, "x.mbox.gz", tmp_path / "x.mbox.gz", SNIFF_BYTES)
    box = b"From a@b Mon Jan  1 00:00:00 2024\nSubject: s\n\nhi\n"
    for name in ("x.mbox", "INBOX", "Sent.mbx", "one.eml", "cur/1701234567.M1P2.host:2,S", "1.emlx", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(box)
    # mailboxes only: a message file is one message, parsed whole, so the size limit stands for it
    assert [name for name in ("x.mbox", "INBOX", "Sent.mbx", "one.eml", "cur/1701234567.M1P2.host:2,S", "1.emlx",
                              "notes.txt") if mapped.reads_mapped(formats, name, tmp_path / name, SNIFF_BYTES)] == [
        "x.mbox", "INBOX", "Sent.mbx"]


def test_an_unchanged_large_file_is_told_by_its_digest_read_a_slice_at_a_time(tmp_path, monkeypatch):
    path = tmp_path / "box.mbox"
    data = random.Random(1).randbytes(3 << 20)
    path.write_bytes(data)
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 20)  # the file is read a slice at a time, a small one whole
    assert mapped.file_digest(path, len(data)) == mapped.file_digest(path, 1) == xxhash.xxh3_64_hexdigest(data)
    entry = FileEntry("box.mbox", path, 1, len(data))
    assert pipeline._same_bytes(entry, xxhash.xxh3_64_hexdigest(data))
    assert not pipeline._same_bytes(entry, xxhash.xxh3_64_hexdigest(data[1:]))
