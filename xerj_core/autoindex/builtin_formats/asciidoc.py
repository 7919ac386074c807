"""AsciiDoc (Asciidoctor, Antora sites): a file card plus one section document per section title.

The card's title is the document title (``= Title``, the first line that is not
a comment or attribute), else the file name; its text what precedes the first
section. A section title is ``==`` to ``======`` (or Markdown's ``##`` to
``######``) then a space at a line's start, outside delimited blocks (listing
``----``, literal ``....``, example ``====``, sidebar ``****``, passthrough
``++++``, quote ``____`` and comment ``////``). A section runs to the next title of any level; its label is the title
and its id ``{path}#{anchor}`` (a slug unique in the file, as Markdown's are).
What a cross reference names it by is in ``ids``: an id set on the title
(``[[install]]``, ``[#install]`` on the line before, or ``[[install]]`` at the
title's end) and the id Asciidoctor generates (``_install_the_gem``: ``_`` then
the lowercased words joined by ``_``).

What links documents (``xref:``, ``<<...>>``, ``include::``) is left in the text
for the ``adoclink`` detector.
"""

from __future__ import annotations

import re

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

# not .asc, which Asciidoctor also reads: far more .asc files are PGP signatures and keys (KEYS.asc, x.tar.gz.asc)
EXTENSIONS = frozenset({".adoc", ".asciidoc"})
_TITLE = re.compile(r"^(={1,6}|#{1,6})[ \t]+(\S.*?)[ \t]*$")
# a delimited block's fence: four or more of one of these characters, alone on its line
_FENCE = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|\+{4,}|_{4,}|/{4,})[ \t]*$")
_BLOCK_ID = re.compile(r"^\[\[([^\[\],\s]+)(?:,[^\]]*)?\]\]$|^\[#([^\[\].,%\s]+)[^\]]*\]$")
_TRAILING_ID = re.compile(r"[ \t]*\[\[([^\[\],\s]+)(?:,[^\]]*)?\]\]$")
_WORDS = re.compile(r"[^\w]+")


def generated_id(title: str) -> str:
    """The id Asciidoctor gives a section by default: ``_`` and the title's words, lowercased, joined by ``_``."""
    words = _WORDS.sub("_", re.sub(r"<[^>]*>|&\w+;", "", title).lower()).strip("_")
    return f"_{words}" if words else ""


def sections(text: str) -> list[tuple[int, int, str, list[str]]]:
    """``(offset, level, label, ids)`` of each section title outside delimited blocks and comments (level 0:
    the document title)."""
    found: list[tuple[int, int, str, list[str]]] = []
    fence: str | None = None
    offset, pending = 0, []
    for line in text.split("\n"):
        stripped = line.rstrip()
        block = _FENCE.match(stripped)
        if fence is not None:
            if block is not None and stripped == fence:
                fence = None
        elif block is not None:
            fence = stripped
        elif (title := _TITLE.match(stripped)) is not None:
            label = title.group(2)
            ids = list(pending)
            trailing = _TRAILING_ID.search(label)
            if trailing is not None:
                ids.append(trailing.group(1))
                label = label[:trailing.start()]
            generated = generated_id(label)
            found.append((offset, len(title.group(1)) - 1, label, ids + ([generated] if generated else [])))
            pending = []
        elif (given := _BLOCK_ID.match(stripped)) is not None:
            pending.append(given.group(1) or given.group(2))
        elif stripped:
            pending = []
        offset += len(line) + 1
    return found


class AsciiDocFormat:
    """AsciiDoc files into ``ax-notes``: a card and one section per section title."""

    name = "asciidoc"
    dataset = "ax-notes"
    priority = 10

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        text = decoded.text
        found = sections(text)
        title = stem(rel_path)
        if found and found[0][1] == 0:  # the document title; a later one opens a part of a book, a section
            title = found[0][2]
            found = found[1:]
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title,
                         text=text[: found[0][0] if found else len(text)].strip(), section="", kind="file",
                         ordinal=0, encoding=decoded.encoding)]
        anchors = Anchors()
        ends = [start for start, *_ in found[1:]] + [len(text)]
        for index, ((start, level, label, ids), end) in enumerate(zip(found, ends), 1):
            anchor = anchors(label)
            docs.append(SourceDocument(f"{rel_path}#{anchor}", self.dataset, rel_path, title,
                                       text[start:end].strip(), label, "section", mtime_ms, self.name,
                                       {"ordinal": index, "level": level, "anchor": anchor, "ids": ids}))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(AsciiDocFormat())
