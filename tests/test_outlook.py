"""Outlook .msg files (real ones, from hfig/MAPI and ruby-msg): a message as an .eml is, its attachments as
documents, its thread linked to mail in mailboxes."""

from __future__ import annotations

import importlib.util
import mailbox
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from xerj_core.autoindex.builtin_formats import outlook
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import FormatError
from xerj_core.testing.formats import AbstractFormatTests

from .test_autoindex import edges_of, index_of, make_thread_message

OUTLOOK = Path(__file__).parent / "fixtures/outlook"
APPLE_MAIL = Path(__file__).parent / "fixtures/apple-mail"
MTIME = 1_700_000_000_000
SAMPLE_ID = "<20050430192829.0489.mlemos@acm.org>"


def read(name: str) -> bytes:
    return (OUTLOOK / name).read_bytes()


class TestOutlookConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return outlook.OutlookFormat()

    @pytest.fixture
    def sample_files(self):
        return {name: read(name) for name in ("sample.msg", "qwerty_1-orig.msg", "note.msg", "contact-unicode.msg")}

    @pytest.fixture
    def bad_files(self):
        # an OLE compound file's magic, then nothing a compound file holds
        return {"cut.msg": read("sample.msg")[:600], "x.msg": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100)}

    @pytest.fixture
    def plugin(self):
        return outlook


def test_a_message_saved_from_outlook_reads_as_an_eml_does():
    message, text, logo, background = outlook.OutlookFormat().parse("mail/sample.msg", read("sample.msg"), MTIME)
    assert message.doc_id == "mail/sample.msg" and message.kind == "message" and message.format == "outlook"
    assert message.dataset == "ax-mail"
    assert message.title == "Testing Manuel Lemos' MIME E-mail composing and sending PHP class: HTML message"
    assert message.text.startswith(message.title + "\n") and "\r" not in message.text
    assert message.fields["message_id"] == SAMPLE_ID and message.fields["to"] == "Manuel Lemos"
    assert message.fields["from"] == '"mlemos@acm.org" <mlemos@acm.org>'
    assert message.fields["date"] == "Sat, 30 Apr 2005 22:28:29 +0000" and message.fields["date_ms"] == 1114900109000
    assert message.fields["attachments"] == ["mail/sample.msg#att-1", "mail/sample.msg#att-2", "mail/sample.msg#att-3"]
    assert (text.title, text.fields["content_type"], text.fields["size"]) == ("attachment.txt", "text/plain", 64)
    assert text.text == "This is just a plain text attachment file named attachment.txt ."
    assert text.fields["parent"] == "mail/sample.msg" and text.kind == "attachment"
    assert (logo.title, logo.text, logo.fields["size"]) == ("logo.gif", "", 1195)
    assert background.fields["content_type"] == "image/gif"


def test_notes_and_contacts_saved_as_msg_keep_their_kind_and_unicode_strings():
    fmt = outlook.OutlookFormat()
    (note,) = fmt.parse("note.msg", read("note.msg"), MTIME)
    assert note.fields["message_class"] == "IPM.StickyNote" and note.title == "note sample"
    assert note.text == "note sample\n\nJust any information to store in Outlook"
    assert note.fields["date_ms"] == 990452498650  # when it was submitted, not delivered (60 ms later)
    (contact,) = fmt.parse("contact.msg", read("contact-unicode.msg"), MTIME)  # its strings are UTF-16
    assert contact.fields["message_class"] == "IPM.Contact"
    assert contact.title == "(full name) A completely bogus contact"
    (plain,) = fmt.parse("q.msg", read("qwerty_1-orig.msg"), MTIME)  # its strings are in its code page
    assert plain.title == "qwerty" and plain.fields["to"] == "asdf" and "Freehills" in plain.text
    assert plain.fields["date"] == "Fri, 03 Nov 2006 00:43:19 +0000"  # delivered: no submit time is kept


def test_only_ole_files_named_msg_are_taken_and_a_broken_one_is_refused():
    fmt = outlook.OutlookFormat()
    assert fmt.accepts("a/b.msg", read("note.msg")[:64])
    assert not fmt.accepts("a/b.msg", b"Subject: a gettext catalog?\n") and not fmt.accepts("a.doc", read("note.msg"))
    with pytest.raises(FormatError, match="Outlook message"):
        fmt.parse("x.msg", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), MTIME)


def test_a_reply_in_a_mailbox_threads_to_the_message_saved_from_outlook(engine, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "sample.msg").write_bytes(read("sample.msg"))
    box = mailbox.mbox(folder / "inbox.mbox")
    box.add(make_thread_message("<reply@x>", "Re: Testing", "Thanks, it works.", SAMPLE_ID))
    box.flush()
    summary = run(engine, folder, brain="mail")
    assert summary.files_indexed == 2 and not summary.files_failed
    threads = [(edge["src"], edge["dst"]) for edge in edges_of(engine, "mail").values()
               if edge["type"] == "email_thread" and edge.get("invalid_at") is None]
    assert threads == [("inbox.mbox#msg-1", "sample.msg")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["sample.msg", "note.msg", "contact-unicode.msg"]),
       st.lists(st.tuples(st.integers(0, 26_623), st.integers(0, 255)), min_size=1, max_size=12))
def test_a_damaged_msg_is_refused_or_read_never_a_crash(name, flips):
    data = bytearray(read(name))
    for at, value in flips:
        data[at % len(data)] = value
    try:
        docs = outlook.OutlookFormat().parse(name, bytes(data), MTIME)
    except FormatError as exc:
        assert exc.reason
    else:
        assert docs[0].doc_id == name and all(doc.doc_id.startswith(name) for doc in docs)


def test_an_apple_mail_folder_gives_its_messages_and_the_attachments_stored_apart(engine, tmp_path):
    """Mail's own layout: Messages/<n>.emlx and, for a partial message, Attachments/<n>/<part>/<file>."""
    import shutil

    folder = tmp_path / "INBOX.mbox"  # Apple Mail names a mailbox's folder so
    shutil.copytree(APPLE_MAIL, folder, ignore=shutil.ignore_patterns("LICENSE", "SOURCE"))
    summary = run(engine, folder, brain="apple")
    assert not summary.files_failed
    found = {doc_id for doc_id, _source in documents(engine, "apple", "ax-mail")}
    assert found == {"Messages/114862.emlx", "Messages/207046.partial.emlx", "Messages/207046.partial.emlx#att-1",
                     "Messages/465622.partial.emlx", "Messages/465622.partial.emlx#att-1"}
    sources = dict(documents(engine, "apple", "ax-mail"))
    # as the message names it: decomposed (u and a combining diaeresis), as macOS writes names
    assert sources["Messages/207046.partial.emlx#att-1"]["title"] == "Tu\u0308bingen.pdf"
    assert sources["Messages/207046.partial.emlx"]["title"] == "Bericht"
    pdf = "Attachments/207046/2/T\u00fcbingen.pdf"  # the file Mail stored, read as the PDF it is (pdf extra)
    if importlib.util.find_spec("pypdf") is not None:
        assert pdf in {doc_id for doc_id, _source in documents(engine, "apple", "ax-pdfs")}
    else:
        assert pdf in {skipped["path"] for skipped in summary.files_skipped}


def documents(engine, brain: str, dataset: str) -> list[tuple[str, dict]]:
    index = index_of(engine, brain, dataset)
    with engine.store.reader(index) as reader:
        return [reader.document(int(row))[:2] for row in reader.live_rows()]
