"""Word documents (``.docx``, and ``.docm``/``.dotx``): a card plus one section per heading, as a note is read.

A ``.docx`` is a zip of XML (Office Open XML). Its body's paragraphs are read
in order, with the text of their runs (tabs and breaks as spaces and line
ends), of tables (a row a line, its cells apart), of content controls and
smart tags, and of changes tracked as inserted; text tracked as deleted and
field instructions are not the document's words. A paragraph is a heading when
its style is one (Word's built-in ``heading 1`` to ``heading 9``, whatever the
style is called in the document's language: ``Überschrift 1``'s style is
still named ``heading 1`` in ``styles.xml``), or when it or its style sets an
outline level; it opens a section (``{path}#{anchor}``, kind ``section``, its
``level`` and ``anchor`` as a Markdown heading's). The ``Title`` style's first
paragraph, else the document's title property, else its first heading, else
the file name titles the card, which keeps ``author``, ``keywords``,
``created`` and ``modified`` from its properties; its text is what comes
before the first heading, then each footnote and endnote as a line (``[1]
...``) and each reviewer's comment (``Comment (Ada): ...``), so their words
are found. A file Word keeps open beside a document
(``~$name.docx``, its lock) is no document.

A file that is not a zip or holds no main document (``word/document.xml``,
or wherever the package's relationships put it) is refused; what its members
expand to is counted before any is read.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Iterator

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Package, core_properties, headed_documents, is_lock_file
from xerj_core.autoindex.formats import FormatError, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".docx", ".docm", ".dotx"})
WHAT = "Word document"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_NAME = re.compile(r"heading\s*([1-9])", re.I)
# What a run holds that is not its text: line and page breaks, tabs, and the hyphens Word shows as such.
_BREAKS = {f"{_W}tab": " ", f"{_W}br": "\n", f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-", f"{_W}softHyphen": ""}
# What holds no words of the document: properties, and the place text was moved from (tracked, it is read where
# it was moved to). Deleted text and field instructions are w:delText and w:instrText, which are not read at all.
_SKIPPED = frozenset({f"{_W}rPr", f"{_W}pPr", f"{_W}sectPr", f"{_W}moveFrom"})


def _text(element: Any) -> str:
    """The words of ``element`` (a paragraph, a cell) as Word shows them."""
    out: list[str] = []

    def walk(node: Any) -> None:
        for child in node:
            tag = child.tag
            if tag in _SKIPPED:
                continue
            if tag == f"{_W}t":
                out.append(child.text or "")
            elif tag in _BREAKS:
                out.append(_BREAKS[tag])
            elif tag == f"{_W}tbl":
                out.append("\n" + _table(child) + "\n")
            else:
                walk(child)

    walk(element)
    return "".join(out)


def _paragraphs(element: Any) -> str:
    """The words of a note or a comment, its paragraphs apart, on one line."""
    return " ".join(" ".join(_text(paragraph).split()) for paragraph in element.iter(f"{_W}p")).strip()


def _table(table: Any) -> str:
    """A table's text: a row a line, its cells apart (``|``); rows without text left out."""
    rows = ([" ".join(_text(paragraph) for paragraph in cell.iter(f"{_W}p")).strip()
             for cell in row.iterfind(f"{_W}tc")] for row in table.iter(f"{_W}tr"))
    return "\n".join(" | ".join(cells) for cells in rows if any(cells))


def _blocks(body: Any) -> Iterator[Any]:
    """The body's paragraphs and tables in order, through content controls (``w:sdt``) and tracked insertions."""
    for child in body:
        if child.tag in (f"{_W}p", f"{_W}tbl"):
            yield child
        elif child.tag in (f"{_W}sdt", f"{_W}sdtContent", f"{_W}ins", f"{_W}customXml", f"{_W}moveTo"):
            yield from _blocks(child)


class DocxFormat:
    """Word documents into ``ax-notes``: a card and one section per heading."""

    name = "docx"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS and not is_lock_file(rel_path)

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        with Package(data, WHAT) as package:
            read = package.xml
            main, root = package.main_part("word/document.xml")
            folder = posixpath.dirname(main)
            styles, core = read(posixpath.join(folder, "styles.xml")), read("docProps/core.xml")
            notes = [_paragraphs(note) for part in ("footnotes.xml", "endnotes.xml")
                     if (found := read(posixpath.join(folder, part))) is not None
                     for note in found.iter(f"{_W}footnote", f"{_W}endnote")
                     if note.get(f"{_W}type") in (None, "normal")]
            comments = read(posixpath.join(folder, "comments.xml"))
            remarks = [(comment.get(f"{_W}author") or "", _paragraphs(comment))
                       for comment in (comments.iter(f"{_W}comment") if comments is not None else ())]
        body = root.find(f"{_W}body")
        if body is None:
            raise FormatError("malformed Word document: its document holds no body")
        levels, titles = self._styles(styles)
        preamble: list[str] = []
        sections: list[tuple[int, str, list[str]]] = []
        title = ""
        for block in _blocks(body):
            if block.tag == f"{_W}tbl":
                table = _table(block)
                if table:
                    (sections[-1][2] if sections else preamble).append(table)
                continue
            text = _text(block).strip()
            if not text:
                continue
            style = block.find(f"{_W}pPr/{_W}pStyle")
            style_id = style.get(f"{_W}val") if style is not None else None
            outline = block.find(f"{_W}pPr/{_W}outlineLvl")
            level = int(outline.get(f"{_W}val")) + 1 if outline is not None and \
                (outline.get(f"{_W}val") or "").isdecimal() else levels.get(style_id)
            if style_id in titles and not title:
                title = " ".join(text.split())
                continue
            if level is not None and 1 <= level <= 9:
                sections.append((level, " ".join(text.split()), []))
            else:
                (sections[-1][2] if sections else preamble).append(text)
        props: dict[str, str] = core_properties(core)
        title = title or props.pop("title", "") or (sections[0][1] if sections else "") or stem(rel_path)
        props.pop("title", None)
        return headed_documents(self, rel_path, mtime_ms, title, [
            *preamble, *(f"[{n}] {note.strip()}" for n, note in enumerate(notes, 1) if note.strip()),
            *(f"Comment ({author}): {remark}" if author else f"Comment: {remark}" for author, remark in remarks
              if remark)], sections, **props)

    @staticmethod
    def _styles(styles: Any) -> tuple[dict[str, int], set[str]]:
        """Each paragraph style's heading level (by its built-in name, else its outline level), and the title
        styles' ids."""
        levels: dict[str, int] = {}
        titles: set[str] = {"Title"}
        if styles is None:
            levels.update({f"Heading{n}": n for n in range(1, 10)})
            return levels, titles
        for style in styles.iter(f"{_W}style"):
            style_id = style.get(f"{_W}styleId")
            name_element = style.find(f"{_W}name")
            name = name_element.get(f"{_W}val", "") if name_element is not None else ""
            heading = _HEADING_NAME.fullmatch(name.strip())
            outline = style.find(f"{_W}pPr/{_W}outlineLvl")
            if heading is not None:
                levels[style_id] = int(heading.group(1))
            elif outline is not None and (outline.get(f"{_W}val") or "").isdecimal() and \
                    int(outline.get(f"{_W}val")) < 9:
                levels[style_id] = int(outline.get(f"{_W}val")) + 1
            if name.strip().lower() == "title":
                titles.add(style_id)
        return levels, titles


@hookimpl
def xerj_register_formats(register) -> None:
    register(DocxFormat())
