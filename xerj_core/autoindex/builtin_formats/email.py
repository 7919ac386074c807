"""Email: ``.eml`` messages and mbox mailboxes, read with the standard library, attachments as documents.

An ``.eml`` file is one message and its card *is* that message (``kind``
``message``, ``doc_id`` the path), also when it opens with an envelope line
(``From - Sat Dec 05 ...``, as Thunderbird saves one); an ``.eml`` holding
several messages is read as a mailbox. So is a file of a Maildir (a file of a
``cur`` or ``new`` folder named as delivering programs name them,
``1701234567.M123P456.host:2,S``, that opens with a header), and so is Apple
Mail's ``.emlx`` (the message its first line counts the bytes of; the property
list after it is Mail's own). An mbox (``.mbox``/``.mbx``, or an
extensionless file that starts with a ``From `` line and carries headers) gets a
card of kind ``file`` plus one message document per message, ``{path}#msg-{n}``
with ``n`` from 1 in mailbox order. Every attachment is its own document of kind
``attachment``: ``{message id}#att-{k}`` for an ``.eml`` (``{path}#att-{k}``) and
``{path}#msg-{n}.att-{k}`` inside an mbox; text attachments keep their text
(an HTML one its visible text), a PDF attachment the text of its pages (with
the ``pdf`` extra; one it cannot read keeps the reason in ``unread``), others
are represented by their file name. A message a message encloses
(``message/rfc822``: forwarded as an attachment, bounced, one of a digest) is
an attachment titled by its subject, its text its body, and its own attachments
follow it; a message that is nothing but an enclosed one has that one's body.

A message's ``title`` and ``section`` are its subject, its text the plain-text
body (an HTML-only body is reduced to its visible text). ``fields`` carry
``message_id``, ``in_reply_to`` and ``references`` (angle-bracketed ids, as
written), ``from``, ``to``, ``date`` (and ``date_ms`` when it parses) and
``attachments`` (their document ids); a message from a Gmail export also has
``labels`` (its ``X-Gmail-Labels``, one string per label) and ``gmail_thread``
(its ``X-GM-THRID``). An attachment has ``parent`` (its message's document id),
``filename``, ``content_type`` and ``size``.

An ``.eml`` with none of From, To, Subject, Date or Message-ID (a MIME
fragment, a stray text) and an ``.mbox`` that does not start with a ``From ``
line are refused with a ``FormatError``. Inside a mailbox, a message is cut at a
``From `` line that opens the file or follows a blank line and carries a time of
day (``From nobody Mon Jan  1 00:00:00 2001``), so a body line such as "From 2019
on, ..." left unescaped by the program that wrote the mailbox does not cut a
message in two. A message the mailbox holds but that has none of those headers,
or that the standard library cannot parse, is still indexed (its raw text as
its body, ``malformed`` saying why) and its number listed in the card's
``malformed_messages``: one odd message does not cost the mailbox its others.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import functools
import itertools
import re
from email.headerregistry import HeaderRegistry
from email.message import EmailMessage
from typing import Any, Iterable, Iterator, Sequence

import attrs

from xerj_core.autoindex import mapped
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.builtin_formats.html import html_to_text
from xerj_core.autoindex.builtin_formats.pdf import read_pdf
from xerj_core.autoindex.formats import FormatError, extension, file_name, release_cycles
from xerj_core import hookimpl
from xerj_core.model import SourceDocument

MESSAGE_EXTENSIONS = frozenset({".eml"})
# Apple Mail's message files: the message's length on the first line, the message, then a property list of flags.
APPLE_MESSAGE_EXTENSION = ".emlx"
_EMLX_COUNT = re.compile(rb"[ \t]*(\d{1,12})[ \t]*\r?\n")
MAILBOX_EXTENSIONS = frozenset({".mbox", ".mbx"})
_KNOWN_HEADERS = ("from", "to", "subject", "date", "message-id")
_MSGID = re.compile(r"<[^<>\s]+>")
# A separator: "From ", the envelope sender, then a date holding a time of day, at the start or after a blank line.
_FROM_LINE = re.compile(rb"From \S+[ \t][^\n]*?\d{1,2}:\d{2}[^\n]*$", re.M)
_ESCAPED_FROM = re.compile(rb"^>(>*From )", re.M)
_HEADER_IN_HEAD = re.compile(rb"^(?:From|To|Subject|Date|Message-ID):", re.M | re.I)
# A Maildir's messages: files of its cur and new folders, named "<seconds>.<unique part>[:2,<flags>]".
_MAILDIR_FILE = re.compile(r"(?:^|/)(?:cur|new)/\d+\.[^/]+\Z")
_FIRST_HEADER = re.compile(rb"[A-Za-z][A-Za-z0-9-]*:")


class _MimeHeaders(HeaderRegistry):
    """A header registry that parses each MIME header's (name, value) once.

    The standard library parses a header anew (and makes a class for it) at every read, and its parser and
    ``get_content_type()`` read Content-Type some 23 times a message: 85% of the time a mailbox took. Header
    objects are immutable strings, so one parse serves every read, and these values repeat across a mailbox
    too. Only the MIME headers are kept: a parsed References or Subject can be large, and is read once.
    """

    REREAD = frozenset({"content-type", "content-disposition", "content-transfer-encoding"})

    def __init__(self) -> None:
        super().__init__()
        self._parsed = functools.lru_cache(maxsize=1024)(super().__call__)
        self._classes: dict[str, type] = {}

    def __call__(self, name: str, value: str):
        return self._parsed(name, value) if name.lower() in self.REREAD else super().__call__(name, value)

    def __getitem__(self, name: str) -> type:
        # The standard library makes a new class for every header it reads (its kind mixed with the base class),
        # each in a reference cycle: the same class per name serves every read, and leaves no garbage behind.
        key = name.lower()
        found = self._classes.get(key)
        if found is None:
            found = self._classes[key] = super().__getitem__(name)
        return found


_POLICY = email.policy.default.clone(header_factory=_MimeHeaders())


def message_ids(value: str | None) -> list[str]:
    """Every ``<id>`` in a Message-ID, In-Reply-To or References value, in order."""
    if not value:
        return []
    found = _MSGID.findall(value)
    if not found and value.strip() and " " not in value.strip():
        found = [f"<{value.strip().strip('<>')}>"]
    return found


def gmail_labels(value: str) -> list[str]:
    """The labels of an ``X-Gmail-Labels`` value: comma-separated, a label holding a comma or quote written in
    double quotes with backslash escapes (``Inbox,"Trips, 2024",Category Updates``), as written otherwise."""
    labels = []
    for quoted, plain in _LABEL.findall(value):
        label = _LABEL_ESCAPE.sub(r"\1", quoted[1:-1]) if quoted else plain.strip()
        if label:
            labels.append(label)
    return labels


_LABEL = re.compile(r'\s*("(?:[^"\\]|\\.)*")\s*(?:,|$)|([^,]+)')
_LABEL_ESCAPE = re.compile(r"\\(.)")


def _header(msg: EmailMessage, name: str) -> str:
    """The text of ``msg``'s first ``name`` header (a lowercase name), whitespace runs as one space; "" when absent.

    What the policy's parser reads is read without it where the answer is known (the parsers were 64% of a
    mailing list's parse): an address header's text is remembered by its raw value, since a mailbox's senders
    and recipients repeat; a plain ASCII subject or message-id reads as itself, and a plain date as the date
    it spells, formatted as the policy formats it."""
    if name not in _ADDRESS_HEADERS and name not in _PLAIN_READS:
        return _header_text(msg, name)
    raw = next((value for key, value in msg.raw_items() if key.lower() == name), None)
    if raw is None:
        return ""
    if name in _ADDRESS_HEADERS:
        return _address_text(name, raw)
    plain = _PLAIN_ID if name == "message-id" else _PLAIN_VALUE
    if not (raw.isascii() and plain.fullmatch(raw) and "=?" not in raw):
        return _header_text(msg, name)
    if name == "date":
        try:
            raw = email.utils.format_datetime(email.utils.parsedate_to_datetime("".join(raw.splitlines())))
        except (ValueError, TypeError, OverflowError):
            pass  # the policy keeps a date it cannot read as written
    return _WHITESPACE.sub(" ", raw).strip()


def _header_text(msg: EmailMessage, name: str) -> str:
    try:
        value = msg.get(name)
        value = None if value is None else str(value)
    except Exception:  # a header the policy cannot parse is read raw rather than failing the file
        value = next((raw for key, raw in msg.raw_items() if key.lower() == name), None)
    return "" if value is None else _WHITESPACE.sub(" ", value).strip()


_WHITESPACE = re.compile(r"\s+")
_ADDRESS_HEADERS = frozenset({"from", "to", "cc", "sender", "reply-to"})
# Headers whose plain value (printable ASCII and folding whitespace; no quote, comment, escape or encoded word)
# the policy reads as written (a date: as the date it spells).
_PLAIN_READS = frozenset({"subject", "message-id", "in-reply-to", "references", "date"})
_PLAIN_VALUE = re.compile(r'[\x21-\x7e \t\r\n]*')
# (a message-id the policy reads as written: one id, its two halves plain words; it mends others)
_PLAIN_ID = re.compile(r'\s*<[\w.+-]+@[\w.-]+>\s*', re.A)


@functools.lru_cache(maxsize=8192)
def _address_text(name: str, raw: str) -> str:
    """:func:`_header_text` of an address header whose raw value is ``raw``, as ``Message.get`` parses it."""
    try:
        value = str(_POLICY.header_fetch_parse(name, raw))
    except Exception:  # read raw, as _header_text reads a header the policy cannot parse
        value = raw
    return _WHITESPACE.sub(" ", value).strip()


def _part_text(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except Exception:
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    if isinstance(content, bytes):
        content = content.decode("utf-8", "replace")
    if not isinstance(content, str):
        return ""
    return content.replace("\r\n", "\n").replace("\r", "\n")


def _enclosed(part: EmailMessage) -> EmailMessage | None:
    """The message a ``message/rfc822`` part holds (a forwarded message, one of a digest, a bounced one), or None."""
    if part.get_content_type() != "message/rfc822":
        return None
    payload = part.get_payload()
    inner = payload[0] if isinstance(payload, list) and payload else None
    return inner if isinstance(inner, EmailMessage) else None


def _body(msg: EmailMessage) -> str:
    inner = _enclosed(msg)
    if inner is not None:  # a message that is a forwarded one and nothing else: that one's body is its body
        return _body(inner)
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except Exception:
        part = None
    if part is None:
        return "" if msg.is_multipart() else _part_text(msg).strip()
    text = _part_text(part)
    if part.get_content_subtype() == "html":
        text = html_to_text(text)
    return text.strip()


def _size_of(msg: EmailMessage) -> int:
    """An enclosed message's size in bytes, as written out again (the part's own bytes are not kept)."""
    try:
        return len(msg.as_bytes())
    except Exception:  # a malformed enclosed message is indexed all the same; only its size is unknown
        return 0


def _body_part(msg: EmailMessage) -> EmailMessage | None:
    try:
        return msg.get_body(preferencelist=("plain", "html"))
    except Exception:
        return None


def _attachments(msg: EmailMessage) -> list[EmailMessage]:
    """The parts of ``msg`` that are documents of their own: attachments, and each message it encloses
    (``message/rfc822``: forwarded, bounced, a digest's), whose own attachments follow it. A message's body part
    is its text, not an attachment, at every depth."""
    found = []
    bodies = [_body_part(msg)]
    outer = _enclosed(msg)
    if outer is not None:  # msg is one enclosed message: its body is msg's, its attachments msg's
        bodies.append(_body_part(outer))
    for part in msg.walk():
        if part is msg or part is outer or any(part is body for body in bodies):
            continue
        inner = _enclosed(part)
        if inner is not None:
            found.append(part)
            bodies.append(_body_part(inner))
            continue
        if part.is_multipart():
            continue
        if part.is_attachment() or part.get_filename():
            found.append(part)
    return found


def _apple_message(data: bytes) -> bytes:
    """The message an Apple Mail ``.emlx`` file holds: as many bytes as its first line counts, after that line (a
    ``.partial.emlx``'s attachments lie in files beside it, and its message names them)."""
    found = _EMLX_COUNT.match(data)
    if found is None:
        raise FormatError("not an Apple Mail message: an .emlx file opens with its message's length in bytes")
    return bytes(data[found.end():found.end() + int(found.group(1))])


def _parse_message(raw: bytes) -> EmailMessage:
    """The message in ``raw``; a :class:`FormatError` saying why when it is not one."""
    try:
        msg = email.message_from_bytes(raw, policy=_POLICY)
    except (IndexError, ValueError, TypeError, AttributeError) as exc:
        # The standard library's header parser raises these on some malformed MIME parameters
        # (a Content-Type ending in a bare ";"), found by atheris: a refusal, not a crash.
        raise FormatError(f"malformed email: {type(exc).__name__}: {exc}") from None
    if not any(name in msg for name in _KNOWN_HEADERS):
        raise FormatError("malformed email: no From, To, Subject, Date or Message-ID header")
    return msg  # type: ignore[return-value]


def _separators(data: bytes, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Where each separator line of ``data[start:end]`` starts: a ``From `` line (see :data:`_FROM_LINE`) that opens
    it or follows a blank line. The lines are found by ``find`` and only they are matched: one pattern searched over
    a whole mailbox (a lookbehind tried at every byte) took 7% of a 70 MB mailbox's run. Positions, not slices, so a
    mapped mailbox (see xerj_core.autoindex.mapped) is never copied."""
    end = len(data) if end is None else end
    if _FROM_LINE.match(data, start, end):
        yield start
    at = data.find(b"\nFrom ", start, end)
    while at >= 0:
        if _follows_blank_line(data, at) and _FROM_LINE.match(data, at + 1, end):
            yield at + 1
        at = data.find(b"\nFrom ", at + 1, end)


def _follows_blank_line(data: bytes, newline: int) -> bool:
    """Whether the line ending at ``data[newline]`` (a ``\\n``) is blank (``\\r\\n`` line ends too)."""
    return data[newline - 1:newline] == b"\n" or data[newline - 2:newline] == b"\n\r"


def _opens_mailbox(data: bytes, start: int = 0) -> bool:
    return data[start:start + 5] == b"From "


def iter_mbox(data: bytes, start: int = 0) -> Iterator[bytes]:
    """The raw messages of the mbox ``data[start:]`` one at a time, each without its ``From `` separator line,
    ``>From`` unescaped. Only the message yielded is copied out of ``data``, and a mapped mailbox's pages before it
    are given back (``mapped.give_back``), so a mailbox of any size is read holding one message's bytes."""
    cuts = _separators(data, start)
    at = next(cuts, None)
    if _opens_mailbox(data, start) and at != start:
        # the first line opens the first message, whatever its date looks like
        cuts = itertools.chain(() if at is None else (at,), cuts)
        at = start
    given = start
    while at is not None:
        end = next(cuts, None)
        stop = len(data) if end is None else end
        newline = data.find(b"\n", at, stop)
        given = mapped.give_back(data, at, given)
        yield b"" if newline < 0 else _ESCAPED_FROM.sub(rb"\1", data[newline + 1:stop])
        at = end


def split_mbox(data: bytes) -> list[bytes]:
    """The raw messages of an mbox (:func:`iter_mbox`) as a list."""
    return list(iter_mbox(data))


class EmailFormat:
    """Email messages and mailboxes into ``ax-mail``."""

    name = "email"
    dataset = "ax-mail"
    priority = 10
    # 2: mailboxes cut only at separator lines, their unreadable messages kept rather than failing the file, and
    # Maildir messages read (a run finding this version reads the files it passed by as no format's again)
    # 3: a PDF attachment's text read, and each enclosed message (forwarded, bounced, a digest's) a document
    # 4: a Gmail export's labels and thread id on each message; Apple Mail's .emlx messages read
    version = 4

    def reads_mapped(self, rel_path: str, head: bytes) -> bool:
        """A mailbox is read a message at a time from a map of it, at any size (see xerj_core.autoindex.mapped);
        a message file is one message, read whole under the size limit."""
        ext = extension(rel_path)
        return ext in MAILBOX_EXTENSIONS or (ext == "" and head.startswith(b"From ") and
                                             not _MAILDIR_FILE.search(rel_path))

    def accepts(self, rel_path: str, head: bytes) -> bool:
        ext = extension(rel_path)
        if ext in MESSAGE_EXTENSIONS or ext in MAILBOX_EXTENSIONS or ext == APPLE_MESSAGE_EXTENSION:
            return True
        if _MAILDIR_FILE.search(rel_path):
            opens = head.startswith(b"From ") or _FIRST_HEADER.match(head) is not None
            return opens and _HEADER_IN_HEAD.search(head) is not None
        return ext == "" and head.startswith(b"From ") and _HEADER_IN_HEAD.search(head) is not None

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        ext = extension(rel_path)
        if ext == APPLE_MESSAGE_EXTENSION:
            msg = _parse_message(_apple_message(data))
            return self._message_docs(msg, rel_path, mtime_ms, doc_id=rel_path, ordinal=0, att_prefix="#att-")
        opens = _opens_mailbox(data)
        raw_messages = iter_mbox(data) if opens else iter((bytes(data),))
        first = next(raw_messages, b"")
        if ext in MESSAGE_EXTENSIONS or _MAILDIR_FILE.search(rel_path):
            second = next(raw_messages, None)
            if second is None:
                # one message, whether or not it opens with an envelope line (Thunderbird saves .eml files so)
                msg = _parse_message(first)
                return self._message_docs(msg, rel_path, mtime_ms, doc_id=rel_path, ordinal=0, att_prefix="#att-")
            raw_messages = itertools.chain((second,), raw_messages)
        if not opens:
            raise FormatError("not an mbox: the file must start with a 'From ' separator line")
        docs, malformed, count = self._mailbox_messages(itertools.chain((first,), raw_messages), rel_path, mtime_ms,
                                                        first=1)
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=file_name(rel_path), text="", section="",
                        kind="file", ordinal=0, messages=count, malformed_messages=malformed or None)
        return [card, *docs]

    def parse_appended(self, rel_path: str, data: bytes, start: int, before: Sequence[SourceDocument],
                       mtime_ms: int) -> list[SourceDocument] | None:
        """A mailbox that messages were appended to since ``before`` was read from ``data[:start]``: its earlier
        messages' documents as they were (the file's mtime now theirs, as a whole parse gives it), its last one and
        those after it read again. None unless ``before`` is a mailbox's whose messages ``data`` still opens with.

        The last earlier message is read again because appending may have changed it: a program writing a message
        may put the blank line that ends the one before it first, or the mailbox may have been read while a
        message was being written. Every message before it is cut where it was: a separator line ends before the
        next message begins, so bytes after ``start`` cannot change one, and appending never unmakes a separator
        (the line it ends, once matched, still matches). The earlier parse's separators are counted again, so
        ``before`` is known to be the parse of ``data[:start]``.
        """
        card = before[0] if before else None
        count = card.fields.get("messages") if card is not None else None
        if card is None or card.kind != "file" or card.doc_id != rel_path or not isinstance(count, int) \
                or count < 1 or not _opens_mailbox(data):
            return None
        starts = list(_separators(data, 0, start))  # as the earlier parse found them
        if starts[:1] != [0]:
            starts.insert(0, 0)  # as iter_mbox does: the first line opens the first message
        if len(starts) != count:
            return None
        docs, malformed, read = self._mailbox_messages(iter_mbox(data, starts[-1]), rel_path, mtime_ms, first=count)
        last, last_parts = f"{rel_path}#msg-{count}", f"{rel_path}#msg-{count}.att-"
        kept = [SourceDocument(doc.doc_id, doc.dataset, doc.ax_path, doc.title, doc.text, doc.section, doc.kind,
                               mtime_ms, doc.format, doc.fields)
                for doc in before[1:] if doc.doc_id != last and not doc.doc_id.startswith(last_parts)]
        fields = {**card.fields, "messages": count - 1 + read}
        malformed = [n for n in card.fields.get("malformed_messages") or () if n != count] + malformed
        fields.pop("malformed_messages", None)
        if malformed:
            fields["malformed_messages"] = malformed
        return [attrs.evolve(card, mtime_ms=mtime_ms, fields=fields), *kept, *docs]

    def _mailbox_messages(self, raw_messages: Iterable[bytes], rel_path: str, mtime_ms: int, *, first: int
                          ) -> tuple[list[SourceDocument], list[int], int]:
        """The documents of a mailbox's messages numbered from ``first``, the numbers of the malformed ones, and
        how many messages there were."""
        docs: list[SourceDocument] = []
        malformed: list[int] = []
        read = 0
        for read, raw in enumerate(raw_messages, start=1):
            n = first + read - 1
            doc_id = f"{rel_path}#msg-{n}"
            try:
                msg = _parse_message(raw)
            except FormatError as refused:
                malformed.append(n)
                docs.append(self._unread_message(raw, rel_path, mtime_ms, doc_id, n, refused.reason))
                continue
            docs.extend(self._message_docs(msg, rel_path, mtime_ms, doc_id=doc_id, ordinal=n,
                                           att_prefix=f"#msg-{n}.att-"))
            # the standard library's header registry makes a class per header it reads (about 30 a message), each
            # in a reference cycle with its own mro; a run, with its collector paused, kept them all: a 60 MiB
            # mailbox of 48k messages peaked at 3.6 GB, and at 0.6 GB so
            release_cycles()
        return docs, malformed, read

    def _unread_message(self, raw: bytes, rel_path: str, mtime_ms: int, doc_id: str, ordinal: int,
                        reason: str) -> SourceDocument:
        """A mailbox's message that is not one the parser reads: its bytes as text, and why."""
        text = raw.decode("utf-8", "replace").replace("\r\n", "\n").strip()
        return document(self, rel_path, mtime_ms, doc_id=doc_id, title="(no subject)", text=text,
                        section="(no subject)", kind="message", ordinal=ordinal, malformed=reason)

    def _message_docs(
        self, msg: EmailMessage, rel_path: str, mtime_ms: int, *, doc_id: str, ordinal: int, att_prefix: str
    ) -> list[SourceDocument]:
        subject = _header(msg, "subject") or "(no subject)"
        own_id = message_ids(_header(msg, "message-id"))
        date = _header(msg, "date")
        date_ms: int | None = None
        if date:
            try:
                date_ms = int(email.utils.parsedate_to_datetime(date).timestamp() * 1000)
            except Exception:
                date_ms = None
        attachment_docs = []
        for k, part in enumerate(_attachments(msg), start=1):
            content_type = part.get_content_type()
            enclosed = _enclosed(part)
            payload = part.get_payload(decode=True)
            size = len(payload) if isinstance(payload, bytes) else 0
            text = _part_text(part).strip() if part.get_content_maintype() == "text" else ""
            if content_type == "text/html":
                text = html_to_text(text)
            if enclosed is not None:  # its subject names it, its body is its text
                filename = part.get_filename() or _header(enclosed, "subject") or f"message-{k}"
                text = _body(enclosed)
                size = _size_of(enclosed)
            else:
                filename = part.get_filename() or f"attachment-{k}"
            unread = None
            if isinstance(payload, bytes) and (content_type == "application/pdf"
                                               or filename.lower().endswith(".pdf")):
                try:
                    text = "\n\n".join(page for page in read_pdf(payload)[1] if page)
                except FormatError as refused:  # the message and its other parts are read all the same
                    unread = refused.reason
            attachment_docs.append(
                document(
                    self,
                    rel_path,
                    mtime_ms,
                    doc_id=f"{rel_path}{att_prefix}{k}",
                    title=filename,
                    text=text,
                    section=filename,
                    kind="attachment",
                    ordinal=k,
                    parent=doc_id,
                    filename=filename,
                    content_type=content_type,
                    size=size,
                    **({"unread": unread} if unread else {}),
                )
            )
        fields: dict[str, Any] = {
            "message_id": own_id[0] if own_id else None,
            "in_reply_to": (message_ids(_header(msg, "in-reply-to")) or [None])[0],
            "references": message_ids(_header(msg, "references")) or None,
            "from": _header(msg, "from") or None,
            "to": _header(msg, "to") or None,
            "date": date or None,
            "date_ms": date_ms,
            "attachments": [a.doc_id for a in attachment_docs] or None,
            "labels": gmail_labels(_header(msg, "x-gmail-labels")) or None,
            "gmail_thread": _header(msg, "x-gm-thrid") or None,
        }
        message = document(
            self,
            rel_path,
            mtime_ms,
            doc_id=doc_id,
            title=subject,
            text=_body(msg),
            section=subject if ordinal else "",
            kind="message",
            ordinal=ordinal,
            **fields,
        )
        return [message, *attachment_docs]


@hookimpl
def xerj_register_formats(register) -> None:
    register(EmailFormat())
