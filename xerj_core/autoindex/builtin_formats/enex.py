"""Evernote exports (``.enex``): a card per exported file, a document per note, one per attachment.

Evernote exports a notebook (or a choice of notes) as one XML file, an
``<en-export>`` of ``<note>`` elements; each note's ``<content>`` is ENML (XHTML
in an ``<en-note>``), its attachments ``<resource>`` elements holding their
bytes in base64. The file's card (kind ``file``, titled by the file's name,
which is the notebook's when Evernote named it) counts the ``notes``. Each note
is a document ``{path}#note-{n}`` (``n`` from 1 in file order) of kind ``note``:
its title, the visible text of its content (an encrypted block is left out,
``[encrypted]`` in its place; each task, an ``<task>`` of Evernote 10, a line
``[ ] title`` or ``[x] title``), and the fields ``created`` / ``updated`` as
written (``20200528T141404Z``) with ``created_ms`` / ``updated_ms``, ``tags``,
``author``, ``source_url``, ``attachments`` (their document ids) and
``links``: each link to another note (``evernote:///view/...``, or a
``https://www.evernote.com/shard/.../nl/...`` note link) with the note's
``guid``, its anchor ``text`` and ``offset``, which the ``enexlink`` detector follows by the title it shows.

An attachment is a document ``{path}#note-{n}.res-{k}`` of kind ``attachment``,
titled by its file name (else its type): its text is what Evernote's
recognition read in it (the likeliest reading of each word of an image), the
text of a PDF's pages (with the ``pdf`` extra; one it cannot read keeps the
reason in ``unread``) or a text file's text; fields ``parent``, ``filename``,
``content_type`` and ``size``. A file that is not an export (another root
element) is refused; one whose XML is broken is read as far as it can be (a
mismatched tag costs the rest of its note at most), the card saying where in
``malformed``.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from datetime import datetime, timezone
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document, parse_xml
from xerj_core.autoindex.builtin_formats.html import html_to_text, text_and_links
from xerj_core.autoindex.builtin_formats.pdf import read_pdf
from xerj_core.autoindex.formats import FormatError, decode_text, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".enex"})
# An Evernote note link: evernote:///view/<user>/<shard>/<note guid>/<guid>/, or the web client's
# https://www.evernote.com/shard/<shard>/nl/<user>/<note guid>/; the group is the note's guid.
NOTE_LINK = re.compile(r"evernote:///view/[^/]+/[^/]+/([0-9a-fA-F-]{8,})"
                       r"|https?://(?:www\.)?evernote\.com/shard/[^/]+/nl/[^/]+/([0-9a-fA-F-]{8,})")
_ENCRYPTED = re.compile(r"<en-crypt\b[^>]*>.*?</en-crypt\s*>", re.S | re.I)
_DATE = "%Y%m%dT%H%M%SZ"


def note_guid(href: str) -> str | None:
    """The guid of the note ``href`` links to, when it is an Evernote note link."""
    match = NOTE_LINK.match(href)
    return None if match is None else (match.group(1) or match.group(2)).lower()


def _instant_ms(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(datetime.strptime(value, _DATE).replace(tzinfo=timezone.utc).timestamp() * 1000)
    except ValueError:
        return None


def _text(element: Any, path: str) -> str | None:
    found = element.findtext(path)
    return found.strip() or None if found else None


def _recognized(xml: str) -> str:
    """The words Evernote's recognition read in an image or a PDF: each item's likeliest reading (its first)."""
    try:
        root = parse_xml(xml.encode("utf-8"), "recognition index")
    except FormatError:
        return ""
    words = []
    for item in root.iter("item"):
        first = item.find("t")
        if first is not None and first.text and first.text.strip():
            words.append(first.text.strip())
    return " ".join(words)


class EnexFormat:
    """Evernote ``.enex`` exports into ``ax-notes``: a card, a document per note and per attachment."""

    name = "enex"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        from lxml import etree

        try:
            root, notes = self._notes(rel_path, data, mtime_ms, recover=False)
            malformed = None
        except etree.XMLSyntaxError as exc:
            # read again as libxml2 reads a broken page: a mismatched tag costs the rest of its note, not the notes
            # after it, and a file cut short keeps the notes before the cut (the card says what broke)
            malformed = f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc)
            try:
                root, notes = self._notes(rel_path, data, mtime_ms, recover=True)
            except etree.XMLSyntaxError:
                root, notes = None, []
            if root is None:
                raise FormatError(f"not an Evernote export: {malformed}") from None
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=stem(rel_path) or rel_path, text="",
                        section="", kind="file", notes=len(notes), exported=root.get("export-date"),
                        application=root.get("version") or root.get("application"), malformed=malformed)
        return [card, *(doc for docs in notes for doc in docs)]

    def _notes(self, rel_path: str, data: bytes, mtime_ms: int, *, recover: bool
               ) -> tuple[Any, list[list[SourceDocument]]]:
        """The export's root element and each note's documents, read note by note."""
        from lxml import etree

        # no DTD is fetched or read, no entity expanded: an export names Evernote's DTD by URL, and needs neither
        events = etree.iterparse(io.BytesIO(data), events=("start", "end"), huge_tree=True, resolve_entities=False,
                                 no_network=True, load_dtd=False, remove_comments=True, recover=recover)
        notes: list[list[SourceDocument]] = []
        root: Any = None
        for event, element in events:
            if root is None:
                root = element
                if element.tag != "en-export":
                    raise FormatError(f"not an Evernote export: its root element is <{element.tag}>, not <en-export>")
                continue
            if event == "end" and element.tag == "note" and element.getparent() is root:
                notes.append(self._note(element, rel_path, mtime_ms, len(notes) + 1))
                element.clear()
                root.remove(element)  # a note's resources are its bulk: let each go once read
        if root is None:
            raise FormatError("not an Evernote export: no XML element in it")
        return root, notes

    def _note(self, note: Any, rel_path: str, mtime_ms: int, n: int) -> list[SourceDocument]:
        doc_id = f"{rel_path}#note-{n}"
        title = _text(note, "title") or "Untitled"
        content = _ENCRYPTED.sub("<div>[encrypted]</div>", note.findtext("content") or "")
        text, found = text_and_links(content) if content.strip() else ("", [])
        links = [{"href": link["href"], "guid": guid, "text": link["text"], "offset": link["offset"]}
                 for link in found if isinstance(link["href"], str) and (guid := note_guid(link["href"]))]
        tasks = [f"[{'x' if _text(task, 'taskStatus') == 'completed' else ' '}] {name}"
                 for task in note.iterfind("task") if (name := _text(task, "title"))]
        if tasks:
            text = "\n".join([text, *tasks]) if text else "\n".join(tasks)
        attachments = [self._resource(resource, rel_path, mtime_ms, f"{doc_id}.res-{k}", k, doc_id)
                       for k, resource in enumerate(note.iterfind("resource"), start=1)]
        created, updated = _text(note, "created"), _text(note, "updated")
        tags = [tag for element in note.iterfind("tag") if (tag := (element.text or "").strip())]
        fields: dict[str, Any] = {
            "created": created, "created_ms": _instant_ms(created),
            "updated": updated, "updated_ms": _instant_ms(updated),
            "tags": tags or None,
            "author": _text(note, "note-attributes/author"),
            "source_url": _text(note, "note-attributes/source-url"),
            "attachments": [a.doc_id for a in attachments] or None,
            "links": links or None,
        }
        return [document(self, rel_path, mtime_ms, doc_id=doc_id, title=title, text=text, section=title,
                         kind="note", ordinal=n, **fields), *attachments]

    def _resource(self, resource: Any, rel_path: str, mtime_ms: int, doc_id: str, k: int,
                  parent: str) -> SourceDocument:
        content_type = _text(resource, "mime") or "application/octet-stream"
        filename = _text(resource, "resource-attributes/file-name")
        try:
            payload = base64.b64decode(resource.findtext("data") or "")
        except (binascii.Error, ValueError):
            payload = b""
        text, unread = "", None
        recognition = resource.findtext("recognition")
        if content_type == "application/pdf" or (filename or "").lower().endswith(".pdf"):
            try:
                text = "\n\n".join(page for page in read_pdf(payload)[1] if page)
            except FormatError as refused:  # the note and its other attachments are read all the same
                unread = refused.reason
        elif content_type.startswith("text/") and payload:
            try:
                text = decode_text(payload).text
                text = (html_to_text(text) if content_type == "text/html" else text).strip()
            except FormatError as refused:
                unread = refused.reason
        if not text and recognition:
            text = _recognized(recognition)
        name = filename or f"{content_type} attachment {k}"
        return document(self, rel_path, mtime_ms, doc_id=doc_id, title=name, text=text, section=name,
                        kind="attachment", ordinal=k, parent=parent, filename=filename, content_type=content_type,
                        size=len(payload), unread=unread)


@hookimpl
def xerj_register_formats(register) -> None:
    register(EnexFormat())
