"""PowerPoint decks (``.pptx``, and ``.pptm``/``.ppsx``/``.potx``): a card plus one document per slide, in order.

A ``.pptx`` is a zip of XML (Office Open XML): the presentation lists its
slides in order, each a part of its own. A slide is a document
``{path}#slide-{n}`` (``n`` from 1 as the deck shows them) of kind ``slide``,
its label the slide's title (its title placeholder's text) else ``slide n``:
its text is every paragraph of its shapes, groups and tables (a row a line,
cells apart), then its speaker notes after ``Notes:``. A slide its author hid
is read, and says so (``hidden``). The card is titled by the deck's title
property, else its first slide's title, else the file name, and keeps
``author``, ``keywords``, ``created``, ``modified`` and ``slides``.

A file that is not a zip or names no presentation is refused; what its
members expand to is counted before any is read. PowerPoint's lock file
beside an open deck (``~$name.pptx``) is no deck.
"""

from __future__ import annotations

import posixpath
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Package, core_properties, document, is_lock_file, package_part
from xerj_core.autoindex.formats import extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".pptx", ".pptm", ".ppsx", ".potx"})
WHAT = "PowerPoint deck"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_TITLES = frozenset({"title", "ctrTitle"})


def _paragraphs(element: Any) -> list[str]:
    """The text of each DrawingML paragraph under ``element`` (runs, fields and line breaks)."""
    found = []
    for paragraph in element.iter(f"{_A}p"):
        text = "".join("\n" if child.tag == f"{_A}br" else "".join(child.itertext())
                       for child in paragraph if child.tag in (f"{_A}r", f"{_A}fld", f"{_A}br")).strip()
        if text:
            found.append(text)
    return found


def _table(frame: Any) -> list[str]:
    rows = ([" ".join(_paragraphs(cell)) for cell in row.iterfind(f"{_A}tc")] for row in frame.iter(f"{_A}tr"))
    return [" | ".join(cells) for cells in rows if any(cells)]


def _shapes(tree: Any) -> tuple[str, list[str]]:
    """A slide's shape tree as ``(its title, its text)``: shapes and groups in order, tables row by row."""
    title, lines = "", []
    for shape in tree:
        tag = shape.tag
        if tag == f"{_P}grpSp":
            inner_title, inner = _shapes(shape)
            title, lines = title or inner_title, lines + inner
        elif tag == f"{_P}graphicFrame":
            lines += _table(shape)
        elif tag == f"{_P}sp":
            placeholder = shape.find(f"{_P}nvSpPr/{_P}nvPr/{_P}ph")
            text = _paragraphs(shape.find(f"{_P}txBody")) if shape.find(f"{_P}txBody") is not None else []
            if placeholder is not None and placeholder.get("type") in _TITLES and text and not title:
                title = " ".join(" ".join(text).split())
            lines += text
    return title, lines


class PptxFormat:
    """PowerPoint decks into ``ax-notes``: a card and one document per slide."""

    name = "pptx"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS and not is_lock_file(rel_path)

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        with Package(data, WHAT) as deck:
            read = deck.xml
            presentation_path, presentation = deck.main_part("ppt/presentation.xml")
            folder = posixpath.dirname(presentation_path)
            rels = deck.relationships(presentation_path)
            slides = []
            for slide_id in presentation.iter(f"{_P}sldId"):
                path = package_part(rels, folder, rid=slide_id.get(f"{_R}id"))
                slide = read(path) if path else None
                if slide is None:
                    continue
                tree = slide.find(f"{_P}cSld/{_P}spTree")
                title, lines = _shapes(tree) if tree is not None else ("", [])
                slide_rels = deck.relationships(path)
                notes_path = package_part(slide_rels, posixpath.dirname(path), type_suffix="/notesSlide")
                notes = self._notes(read(notes_path)) if notes_path else []
                slides.append((title, lines, notes, slide.get("show") == "0"))
            core = read("docProps/core.xml")
        props: dict[str, str] = core_properties(core)
        title = props.pop("title", "") or next((slide[0] for slide in slides if slide[0]), "") or stem(rel_path)
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text="", section="", kind="file",
                         ordinal=0, slides=len(slides), **props)]
        for n, (label, lines, notes, hidden) in enumerate(slides, 1):
            text = "\n".join(lines + ([f"Notes: {' '.join(notes)}"] if notes else []))
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#slide-{n}", title=title, text=text,
                                 section=label or f"slide {n}", kind="slide", ordinal=n,
                                 hidden=True if hidden else None))
        return docs

    @staticmethod
    def _notes(notes: Any) -> list[str]:
        """A notes page's text: its body placeholder's paragraphs (not the slide image's, nor the page number's)."""
        if notes is None:
            return []
        found = []
        for shape in notes.iter(f"{_P}sp"):
            placeholder = shape.find(f"{_P}nvSpPr/{_P}nvPr/{_P}ph")
            if placeholder is not None and placeholder.get("type") == "body" and shape.find(f"{_P}txBody") is not None:
                found += _paragraphs(shape.find(f"{_P}txBody"))
        return found


@hookimpl
def xerj_register_formats(register) -> None:
    register(PptxFormat())
