"""Outlook ``.msg`` files: a message saved from Outlook, read as an ``.eml`` is, attachments as documents.

A ``.msg`` is an OLE compound file (read with ``olefile``) holding the message's
MAPI properties, each a stream named ``__substg1.0_<id><type>`` (strings
``001F`` UTF-16, ``001E`` in the message's code page; binaries ``0102``), the
fixed-size ones (the send time) in the ``__properties_version1.0`` stream, and
each attachment in a storage ``__attach_version1.0_#<n>``.

The file's card *is* the message, as an ``.eml``'s is (kind ``message``,
``doc_id`` the path; format ``outlook``, dataset ``ax-mail``): its title the
subject, its text the plain body (the HTML body's visible text when there is
none), and the fields the email format gives a message, so that ``email_thread``
links a reply saved from Outlook to the message it answers in a mailbox and the
other way round: ``message_id``, ``in_reply_to``, ``references``, ``from``,
``to``, ``date`` and ``date_ms`` (when the message was sent), ``attachments``.
Each attachment is a document of kind ``attachment`` (``{path}#att-{k}``, ``parent``,
``filename``, ``content_type``, ``size``): a text attachment keeps its text, a
PDF the text of its pages (the ``pdf`` extra), a message attached to it its
subject; others are known by their name. A body kept only as compressed RTF
(older Outlook) is not read: the message keeps its subject and fields, and
``unread`` says so. Contacts, appointments and tasks saved as ``.msg`` are read
the same way (their subject and notes); ``message_class`` says which.
A file that is not an OLE compound file is refused.
"""

from __future__ import annotations

import email.utils
import struct
from datetime import datetime, timezone
from typing import Any

import olefile

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.builtin_formats.email import message_ids
from xerj_core.autoindex.builtin_formats.html import html_to_text
from xerj_core.autoindex.builtin_formats.pdf import read_pdf
from xerj_core.autoindex.formats import FormatError, extension
from xerj_core.model import SourceDocument

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_PROPERTIES = "__properties_version1.0"
# A property entry of a properties stream: tag (type in the low 16 bits, id in the high), flags, 8-byte value.
_ENTRY = struct.Struct("<IIQ")
# Bytes before the first entry: the message's own stream has a 32-byte header, an attachment's or embedded one's 8/24.
_MESSAGE_HEADER, _ATTACHMENT_HEADER = 32, 8
_SYSTIME, _INT32 = 0x0040, 0x0003
_CLIENT_SUBMIT_TIME, _DELIVERY_TIME, _CODEPAGE = 0x0039, 0x0E06, 0x3FFD
# 100-nanosecond intervals between 1601-01-01 (a FILETIME's epoch) and 1970-01-01
_FILETIME_EPOCH = 116_444_736_000_000_000
_WINDOWS_1252 = "cp1252"

# MAPI property ids
SUBJECT, BODY, HTML_BODY, RTF_BODY = 0x0037, 0x1000, 0x1013, 0x1009
MESSAGE_CLASS, SENDER_NAME, SENDER_ADDRESS, SENDER_SMTP = 0x001A, 0x0C1A, 0x0C1F, 0x5D01
DISPLAY_TO, MESSAGE_ID, IN_REPLY_TO, REFERENCES = 0x0E04, 0x1035, 0x1042, 0x1039
ATTACH_DATA, ATTACH_FILENAME, ATTACH_LONG_FILENAME, ATTACH_MIME = 0x3701, 0x3704, 0x3707, 0x370E


class _Storage:
    """One storage of a ``.msg`` (the message, or an attachment's): its properties by id."""

    def __init__(self, ole: olefile.OleFileIO, prefix: str, codepage: str) -> None:
        self.ole, self.prefix, self.codepage = ole, prefix, codepage

    def _stream(self, name: str) -> bytes | None:
        path = self.prefix + name
        return self.ole.openstream(path).read() if self.ole.exists(path) else None

    def text(self, prop: int) -> str:
        """A string property: UTF-16 (``001F``) or in the message's code page (``001E``); "" when absent."""
        wide = self._stream(f"__substg1.0_{prop:04X}001F")
        if wide is not None:
            return wide.decode("utf-16-le", "replace").rstrip("\0").strip()
        narrow = self._stream(f"__substg1.0_{prop:04X}001E")
        return narrow.decode(self.codepage, "replace").rstrip("\0").strip() if narrow is not None else ""

    def binary(self, prop: int) -> bytes | None:
        return self._stream(f"__substg1.0_{prop:04X}0102")

    def fixed(self, header: int) -> dict[int, tuple[int, int]]:
        """The fixed-size properties: ``id -> (type, 8-byte value)``."""
        data = self._stream(_PROPERTIES) or b""
        found = {}
        for at in range(header, len(data) - _ENTRY.size + 1, _ENTRY.size):
            tag, _flags, value = _ENTRY.unpack_from(data, at)
            found[tag >> 16] = (tag & 0xFFFF, value)
        return found


def _sent_ms(fixed: dict[int, tuple[int, int]]) -> int | None:
    """When the message was sent (else delivered), in epoch milliseconds."""
    for prop in (_CLIENT_SUBMIT_TIME, _DELIVERY_TIME):
        kind, value = fixed.get(prop, (0, 0))
        if kind == _SYSTIME and value > _FILETIME_EPOCH:
            return (value - _FILETIME_EPOCH) // 10_000
    return None


def _codepage(fixed: dict[int, tuple[int, int]]) -> str:
    """The Python codec of the message's code page (8-bit strings), Windows-1252 when unknown."""
    kind, value = fixed.get(_CODEPAGE, (0, 0))
    name = f"cp{value & 0xFFFFFFFF}" if kind == _INT32 else _WINDOWS_1252
    try:
        "".encode(name)
    except LookupError:
        return _WINDOWS_1252
    return "utf-8" if name == "cp65001" else name


class OutlookFormat:
    """Outlook ``.msg`` messages into ``ax-mail``."""

    name = "outlook"
    dataset = "ax-mail"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == ".msg" and head.startswith(_OLE_MAGIC)

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        # olefile meets a damaged compound file with whatever its reading stumbles on (a cut file's directory
        # raised AttributeError), so any failure of its reading is the file's refusal
        try:
            ole = olefile.OleFileIO(bytes(data))
        except Exception as exc:
            raise FormatError(f"not an Outlook message (an OLE compound file): {exc}") from None
        try:
            return self._message(ole, rel_path, mtime_ms)
        except FormatError:
            raise
        except Exception as exc:
            raise FormatError(f"a damaged Outlook message: {type(exc).__name__}: {exc}") from None
        finally:
            ole.close()

    def _message(self, ole: olefile.OleFileIO, rel_path: str, mtime_ms: int) -> list[SourceDocument]:
        fixed = _Storage(ole, "", _WINDOWS_1252).fixed(_MESSAGE_HEADER)
        message = _Storage(ole, "", _codepage(fixed))
        subject = message.text(SUBJECT) or "(no subject)"
        body, unread = message.text(BODY).replace("\r\n", "\n"), None
        if not body:
            html = message.text(HTML_BODY) or (message.binary(HTML_BODY) or b"").decode("utf-8", "replace")
            body = html_to_text(html).strip() if html else ""
        if not body and message.binary(RTF_BODY):
            unread = "the body is kept only as compressed RTF, which is not read"
        sent = _sent_ms(fixed)
        sender = message.text(SENDER_NAME)
        address = message.text(SENDER_SMTP) or message.text(SENDER_ADDRESS)
        attachments = self._attachments(ole, rel_path, mtime_ms, message.codepage)
        fields: dict[str, Any] = {
            "message_id": (message_ids(message.text(MESSAGE_ID)) or [None])[0],
            "in_reply_to": (message_ids(message.text(IN_REPLY_TO)) or [None])[0],
            "references": message_ids(message.text(REFERENCES)) or None,
            "from": email.utils.formataddr((sender, address)) if address and "@" in address else sender or None,
            "to": message.text(DISPLAY_TO) or None,
            "date": email.utils.format_datetime(datetime.fromtimestamp(sent / 1000, timezone.utc))
            if sent is not None else None,
            "date_ms": sent,
            "attachments": [doc.doc_id for doc in attachments] or None,
            "message_class": message.text(MESSAGE_CLASS) or None,
            "unread": unread,
        }
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=subject, text=body, section="",
                        kind="message", ordinal=0, **fields)
        return [card, *attachments]

    def _attachments(self, ole: olefile.OleFileIO, rel_path: str, mtime_ms: int, codepage: str
                     ) -> list[SourceDocument]:
        storages = sorted({entry[0] for entry in ole.listdir(streams=True, storages=True)
                           if entry[0].startswith("__attach_version1.0_#")})
        docs = []
        for k, storage in enumerate(storages, start=1):
            part = _Storage(ole, storage + "/", codepage)
            filename = part.text(ATTACH_LONG_FILENAME) or part.text(ATTACH_FILENAME) or f"attachment-{k}"
            content_type = part.text(ATTACH_MIME) or "application/octet-stream"
            payload = part.binary(ATTACH_DATA)
            text, unread = "", None
            if payload is None and ole.exists(f"{storage}/__substg1.0_{ATTACH_DATA:04X}000D"):
                # a message attached to this one: known by its subject
                inner = _Storage(ole, f"{storage}/__substg1.0_{ATTACH_DATA:04X}000D/", codepage)
                filename = part.text(ATTACH_LONG_FILENAME) or inner.text(SUBJECT) or filename
                text, content_type = inner.text(BODY), "message/rfc822"
            elif payload is not None and (content_type.startswith("text/") or filename.lower().endswith(".txt")):
                text = payload.decode("utf-8", "replace").strip()
            elif payload is not None and (content_type == "application/pdf" or filename.lower().endswith(".pdf")):
                try:
                    text = "\n\n".join(page for page in read_pdf(payload)[1] if page)
                except FormatError as refused:  # the message and its other attachments are read all the same
                    unread = refused.reason
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#att-{k}", title=filename, text=text,
                                 section=filename, kind="attachment", ordinal=k, parent=rel_path, filename=filename,
                                 content_type=content_type, size=len(payload) if payload is not None else 0,
                                 **({"unread": unread} if unread else {})))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(OutlookFormat())
