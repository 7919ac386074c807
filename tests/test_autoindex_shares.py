"""A file too big for one write transaction is written in shares; a run stopped or refused between them loses
track of no document; ``--max-file-mib`` moves the size past which a file is skipped."""

from __future__ import annotations

import json
import mailbox
from pathlib import Path

import pytest
from click.testing import CliRunner

from xerj_core.autoindex import pipeline
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import UNFINISHED, LocalSink
from xerj_core.autoindex.walk import TOO_LARGE, walk
from xerj_core.cli import build_cli
from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import DocumentRefused
from xerj_core.plugins import get_plugin_manager

from .test_autoindex import edges_of, index_of, make_thread_message, without_system_time

SHARE_DOCS = 4
NOW = 1_767_225_600_000  # both runs' clock, so their edges compare field for field


class Writes(list):
    """The document ids of each write transaction, and of each file written there whether it continued the
    file's recorded state (a share)."""

    def __init__(self) -> None:
        super().__init__()
        self.continuing: list[list[bool]] = []


class Stopped(Exception):
    """Stands for the run's process being stopped between two of a file's shares."""


def write_mailbox(folder, subjects: list[str]) -> None:
    """``folder/inbox.mbox`` holding one message per subject, every third with an attachment, each a reply to the
    one before (so ``email_thread`` and ``sequence`` both teach edges)."""
    folder.mkdir(exist_ok=True)
    path = folder / "inbox.mbox"
    path.unlink(missing_ok=True)
    box = mailbox.mbox(path)
    for n, subject in enumerate(subjects):
        parent = f"<m{n - 1}@example.org>" if n else None
        message = make_thread_message(f"<m{n}@example.org>", subject, f"{subject}: the crumb was open.", parent)
        if n % 3 == 0:
            message.add_attachment(f"proofing notes {n}".encode(), maintype="text", subtype="plain",
                                   filename=f"notes{n}.txt")
        box.add(message)
    box.flush()
    box.close()


def mailbox_documents(engine, brain: str) -> dict[str, dict]:
    """Every document the brain's mail index holds, by id, read from the index (not from the file's state)."""
    index = index_of(engine, brain, "ax-mail")
    found = {}
    with engine.store.reader(index) as reader:
        for row in reader.live_rows():
            doc_id, source, _version = reader.document(int(row))
            found[doc_id] = source
    return found


def file_state(engine, brain: str):
    return LocalSink(engine.store, engine.graph).load(brain).files["inbox.mbox"]


@pytest.fixture
def shares(monkeypatch):
    """The write transactions the run makes, as the document ids each holds; files split past SHARE_DOCS."""
    monkeypatch.setattr(pipeline, "SHARE_DOCS", SHARE_DOCS)
    writes = Writes()
    write_files = LocalSink.write_files

    def recorded(self, brain, files, indexed_at, counted=None):
        writes.append([doc.id for item in files for doc in item.documents])
        writes.continuing.append([item.continues for item in files])
        # a share names its own documents only: the file's state holds the others' (a request stays small)
        assert not any(item.kept for item in files)
        return write_files(self, brain, files, indexed_at, counted)

    monkeypatch.setattr(LocalSink, "write_files", recorded)
    return writes


def test_a_big_mailbox_is_written_in_shares_that_make_the_brain_one_write_makes(tmp_path, pm, shares):
    folder = tmp_path / "mail"
    write_mailbox(folder, [f"Batch {n}" for n in range(14)])
    with Engine(tmp_path / "whole", pm, config=EngineConfig(tail_rows=8)) as engine:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pipeline, "SHARE_DOCS", 10_000)
            whole = run(engine, folder, brain="mail", clock=lambda: NOW)
        whole_docs, whole_edges = mailbox_documents(engine, "mail"), edges_of(engine, "mail")
    assert len(shares) == 1 and len(shares[0]) == 1 + 14 + 5  # card, messages, attachments: one transaction
    assert shares.continuing == [[False]]
    shares.clear()
    shares.continuing.clear()
    with Engine(tmp_path / "shared", pm, config=EngineConfig(tail_rows=8)) as engine:
        shared = run(engine, folder, brain="mail", clock=lambda: NOW)
        assert mailbox_documents(engine, "mail") == whole_docs
        assert without_system_time(edges_of(engine, "mail")) == without_system_time(whole_edges)
        state = file_state(engine, "mail")
        assert state.hash != UNFINISHED.hash and sorted(state.docs) == sorted(
            f"{index_of(engine, 'mail', 'ax-mail')}/{doc_id}" for doc_id in whole_docs)
    assert [len(ids) for ids in shares] == [4, 4, 4, 4, 4] and shares.continuing == [[True]] * 5
    assert [doc_id for ids in shares for doc_id in ids] == list(whole_docs)  # in the file's order, each once
    assert shared.documents == whole.documents == 20 and shared.edges_by_type == whole.edges_by_type
    assert shared.files_indexed == 1 and not shared.files_failed
    # a message appended: every share compares its documents with the stored ones and writes only what changed
    # (the card, which carries the file's mtime, and the new message)
    write_mailbox(folder, [f"Batch {n}" for n in range(15)])
    with Engine(tmp_path / "shared", pm, config=EngineConfig(tail_rows=8)) as engine:
        appended = run(engine, folder, brain="mail", clock=lambda: NOW)
        assert mailbox_documents(engine, "mail")["inbox.mbox#msg-3"] == whole_docs["inbox.mbox#msg-3"]
    assert appended.documents == 2 and appended.documents_kept == 19 and len(shares) == 5 + 6


def test_a_run_stopped_between_shares_leaves_the_file_to_be_read_again_and_no_document_behind(
        tmp_path, pm, shares, monkeypatch):
    folder = tmp_path / "mail"
    write_mailbox(folder, [f"Batch {n}" for n in range(6)])
    with Engine(tmp_path / "data", pm, config=EngineConfig(tail_rows=8)) as engine:
        run(engine, folder, brain="mail")
        first = mailbox_documents(engine, "mail")
        write_mailbox(folder, [f"Second batch {n}" for n in range(18)])
        write_files = LocalSink.write_files
        shares.clear()

        def stopped_after_one_share(self, brain, files, indexed_at, counted=None):
            if len(shares) == 1:
                raise Stopped
            return write_files(self, brain, files, indexed_at, counted)

        with monkeypatch.context() as patch:
            patch.setattr(LocalSink, "write_files", stopped_after_one_share)
            with pytest.raises(Stopped):
                run(engine, folder, brain="mail")
        # the first share is in; the file is recorded unfinished, with its old documents and the share's
        interrupted = mailbox_documents(engine, "mail")
        assert len(shares) == 1 and len(shares[0]) == SHARE_DOCS and set(shares[0]) <= set(interrupted)
        assert interrupted["inbox.mbox#msg-2"]["title"] == "Second batch 1"
        state = file_state(engine, "mail")
        assert (state.mtime_ns, state.size, state.hash) == (-1, -1, "")
        assert {ref.split("/", 1)[1] for ref in state.docs} == set(interrupted) == set(first) | set(shares[0])
        # before the next run the mailbox shrinks: whatever either version left in the index goes
        write_mailbox(folder, [f"Third batch {n}" for n in range(3)])
        summary = run(engine, folder, brain="mail")
        assert summary.files_indexed == 1 and not summary.files_failed
        final = mailbox_documents(engine, "mail")
        assert sorted(final) == sorted(["inbox.mbox", "inbox.mbox#msg-1", "inbox.mbox#msg-1.att-1",
                                        "inbox.mbox#msg-2", "inbox.mbox#msg-3"])
        assert final["inbox.mbox#msg-3"]["title"] == "Third batch 2"
        state = file_state(engine, "mail")
        assert state.size == (folder / "inbox.mbox").stat().st_size
        assert sorted(state.docs) == sorted(f"{index_of(engine, 'mail', 'ax-mail')}/{doc_id}" for doc_id in final)
        again = run(engine, folder, brain="mail")
        assert again.files_unchanged == 1 and again.documents == 0


def test_a_refused_share_fails_the_file_and_writes_none_of_the_shares_after_it(tmp_path, pm, shares, monkeypatch):
    folder = tmp_path / "mail"
    write_mailbox(folder, [f"Batch {n}" for n in range(14)])
    write_files = LocalSink.write_files

    def refusing(self, brain, files, indexed_at, counted=None):
        for item in files:
            if any(doc.id == "inbox.mbox#msg-7" for doc in item.documents):
                raise DocumentRefused("document [inbox.mbox#msg-7] was refused: test", path=item.path,
                                      doc_id="inbox.mbox#msg-7", error_type="mapper_parsing_exception")
        return write_files(self, brain, files, indexed_at, counted)

    with Engine(tmp_path / "data", pm, config=EngineConfig(tail_rows=8)) as engine:
        with monkeypatch.context() as patch:
            patch.setattr(LocalSink, "write_files", refusing)
            refused = run(engine, folder, brain="mail")
        assert [failure["path"] for failure in refused.files_failed] == ["inbox.mbox"]
        assert "msg-7" in refused.files_failed[0]["reason"]
        # the two shares before the refused one are in; the refused one (msg-6 to msg-8) and those after it are not
        assert len(shares) == 2
        assert set(mailbox_documents(engine, "mail")) == {doc_id for ids in shares for doc_id in ids}
        assert shares[-1][-1] == "inbox.mbox#msg-5"
        assert file_state(engine, "mail").hash == ""
        summary = run(engine, folder, brain="mail")
        assert summary.files_indexed == 1 and not summary.files_failed
        assert len(mailbox_documents(engine, "mail")) == 1 + 14 + 5


def _autoindex(folder: Path, data: Path, *options: str) -> dict:
    """``xerj autoindex folder --data-dir data --no-graph --json OPTIONS`` through the CLI: its summary."""
    result = CliRunner().invoke(build_cli(get_plugin_manager(builtins_only=True)),
                                ["autoindex", str(folder), "--data-dir", str(data), "--no-graph", "--json", *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_max_file_mib_moves_the_size_past_which_a_file_is_skipped(tmp_path, monkeypatch):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "small.txt").write_text("proofing basket\n")
    (folder / "big.txt").write_text(("levain and rye " * 80 + "\n") * 1_500)  # about 1.8 MB
    skipped = {s.rel_path: s for s in walk(folder, max_file_bytes=1 << 20) if not hasattr(s, "mtime_ns")}
    assert skipped["big.txt"].kind == TOO_LARGE
    assert skipped["big.txt"].reason == "larger than 1 MiB (--max-file-mib raises the limit)"
    limited = _autoindex(folder, tmp_path / "data", "--max-file-mib", "1.5")
    assert limited["files_indexed"] == 1 and limited["files_skipped"] == [
        {"kind": TOO_LARGE, "path": "big.txt", "reason": "larger than 1.5 MiB (--max-file-mib raises the limit)"}]
    raised = _autoindex(folder, tmp_path / "data", "--max-file-mib", "2")
    assert raised["files_indexed"] == 1 and raised["files_unchanged"] == 1 and not raised["files_skipped"]
    refused = CliRunner().invoke(build_cli(get_plugin_manager(builtins_only=True)),
                                 ["autoindex", str(folder), "--max-file-mib", "0"])
    assert refused.exit_code == 2 and "--max-file-mib" in refused.output


def test_max_file_mib_bounds_what_a_gzip_file_may_expand_to(tmp_path):
    # A gzip file is read as what it holds: the run's limit is the size that content may reach, as a plain
    # file's, and a run with a higher limit reads the file it refused.
    import gzip

    folder = tmp_path / "gz"
    folder.mkdir()
    (folder / "small.txt").write_text("proofing basket\n")
    (folder / "notes.txt.gz").write_bytes(gzip.compress((("levain and rye " * 80 + "\n") * 1_500).encode()))
    assert (folder / "notes.txt.gz").stat().st_size < 64 * 1024  # the walk passes it at any limit
    limited = _autoindex(folder, tmp_path / "data", "--max-file-mib", "1.5", "--allow-failures")
    assert limited["files_indexed"] == 1
    assert [(f["path"], f["reason"]) for f in limited["files_failed"]] == [
        ("notes.txt.gz", "decompresses to more than 1.5 MiB (--max-file-mib raises the limit)")]
    raised = _autoindex(folder, tmp_path / "data", "--max-file-mib", "2")
    assert raised["files_indexed"] == 1 and raised["files_unchanged"] == 1 and not raised["files_failed"]
