"""OpenDocument text (``.odt``, LibreOffice's and others'): a card plus one section per heading, as a note is read.

An ``.odt`` is a zip whose ``content.xml`` holds the text: headings
(``text:h``, their ``text:outline-level``), paragraphs, lists and tables (a row
a line, its cells apart), with the spaces, tabs and line breaks its elements
stand for. A heading opens a section (``{path}#{anchor}``, kind ``section``,
its ``level`` and ``anchor`` as a Markdown heading's). Changes tracked as
deleted (kept apart, in ``text:tracked-changes``) are not the document's words.
The card is titled by the document's title property (``meta.xml``), else its
first heading, else the file name, and keeps ``author``, ``keywords``,
``created`` and ``modified``; its text is what comes before the first heading,
then each footnote and endnote as a line (``[1] ...``) and each comment
(``Comment (Ada): ...``); a comment is not part of the text it is made on.

A file that is not a zip or holds no ``content.xml`` is refused; what its
members expand to is counted before any is read.
"""

from __future__ import annotations

from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Package, headed_documents
from xerj_core.autoindex.formats import FormatError, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".odt", ".ott"})
WHAT = "OpenDocument"
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"
_DC = "{http://purl.org/dc/elements/1.1/}"
# What holds no words where it stands: tracked deletions, a note's body (read apart), a heading's numbering.
_SKIPPED = frozenset({f"{_TEXT}tracked-changes", f"{_TEXT}note", f"{_TEXT}number", f"{_OFFICE}annotation"})


def _text(element: Any) -> str:
    """The words of a paragraph or heading as an editor shows them."""
    out = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{_TEXT}s":
            count = child.get(f"{_TEXT}c")
            out.append(" " * (int(count) if count and count.isdecimal() else 1))
        elif tag == f"{_TEXT}tab":
            out.append(" ")
        elif tag == f"{_TEXT}line-break":
            out.append("\n")
        elif tag not in _SKIPPED:
            out.append(_text(child))
        out.append(child.tail or "")
    return "".join(out)


def _table(table: Any) -> str:
    """A table's text: a row a line, its cells apart (``|``); rows without text left out."""
    rows = ([" ".join(_text(paragraph) for paragraph in cell.iter(f"{_TEXT}p", f"{_TEXT}h")).strip()
             for cell in row.iterfind(f"{_TABLE}table-cell")] for row in table.iter(f"{_TABLE}table-row"))
    return "\n".join(" | ".join(cells) for cells in rows if any(cells))


def _blocks(parent: Any) -> Any:
    """Headings, paragraphs and tables in document order, through lists and sections."""
    for child in parent:
        if child.tag in (f"{_TEXT}h", f"{_TEXT}p", f"{_TABLE}table"):
            yield child
        elif child.tag not in _SKIPPED:
            yield from _blocks(child)


class OdtFormat:
    """OpenDocument text into ``ax-notes``: a card and one section per heading."""

    name = "odt"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        with Package(data, WHAT) as package:
            content, meta = package.xml("content.xml"), package.xml("meta.xml")
        if content is None:
            raise FormatError(f"not an {WHAT}: it holds no content.xml")
        body = content.find(f"{_OFFICE}body/{_OFFICE}text")
        if body is None:
            raise FormatError("not an OpenDocument text: its content holds no office:text")
        preamble: list[str] = []
        sections: list[tuple[int, str, list[str]]] = []
        for block in _blocks(body):
            if block.tag == f"{_TABLE}table":
                text = _table(block)
            else:
                text = _text(block).strip()
            if not text:
                continue
            level = block.get(f"{_TEXT}outline-level") if block.tag == f"{_TEXT}h" else None
            if block.tag == f"{_TEXT}h":
                sections.append((int(level) if level and level.isdecimal() else 1, " ".join(text.split()), []))
            else:
                (sections[-1][2] if sections else preamble).append(text)
        notes = [" ".join(_text(paragraph).strip() for paragraph in note.iter(f"{_TEXT}p")).strip()
                 for note in body.iter(f"{_TEXT}note-body")]
        remarks = [(" ".join("".join(comment.findtext(f"{_DC}creator") or "").split()),
                    " ".join(" ".join(_text(paragraph) for paragraph in comment.iter(f"{_TEXT}p")).split()))
                   for comment in body.iter(f"{_OFFICE}annotation")]
        props = self._properties(meta)
        title = props.pop("title", "") or (sections[0][1] if sections else "") or stem(rel_path)
        return headed_documents(self, rel_path, mtime_ms, title, [
            *preamble, *(f"[{n}] {note}" for n, note in enumerate(notes, 1) if note),
            *(f"Comment ({author}): {remark}" if author else f"Comment: {remark}" for author, remark in remarks
              if remark)], sections, **props)

    @staticmethod
    def _properties(meta: Any) -> dict[str, Any]:
        if meta is None:
            return {}
        found: dict[str, Any] = {}
        for key, tags in (("title", (f"{_DC}title",)), ("author", (f"{_META}initial-creator", f"{_DC}creator")),
                          ("created", (f"{_META}creation-date",)), ("modified", (f"{_DC}date",))):
            for tag in tags:
                element = next(meta.iter(tag), None)
                value = " ".join((element.text or "").split()) if element is not None else ""
                if value:
                    found[key] = value
                    break
        keywords = [" ".join((element.text or "").split()) for element in meta.iter(f"{_META}keyword")]
        if any(keywords):
            found["keywords"] = ", ".join(keyword for keyword in keywords if keyword)
        return found


@hookimpl
def xerj_register_formats(register) -> None:
    register(OdtFormat())
