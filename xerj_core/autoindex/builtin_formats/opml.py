"""Outlines (``.opml``: Workflowy, Dynalist, Logseq, OmniOutliner and Bike export them): a card plus one section per
top-level item.

An OPML file's ``body`` nests ``outline`` elements, each item's words in its
``text`` attribute (``title`` where ``text`` is missing) and an outliner's note
for it in ``_note``. The card is titled by the head's ``title``, else the file
name, and counts the top-level ``items``; each top-level item is a section
(``{path}#{anchor}``, kind ``section``, level 1, as a Markdown heading's),
labelled by its words, whose text is the item, then its subtree as an indented
outline (two spaces a level), an item's note and the address of an item that
is a link (a feed reader's subscription list: ``xmlUrl``, ``htmlUrl``,
``url``: ``<...>``) each on the line after it. A file whose root is not
``opml`` is refused; its XML is read with no DTD, entity or network.
"""

from __future__ import annotations

from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import headed_documents, parse_xml
from xerj_core.autoindex.builtin_formats.html import html_to_text
from xerj_core.autoindex.formats import FormatError, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".opml"})
_LINKS = ("url", "htmlUrl", "xmlUrl")


def _words(item: Any) -> str:
    """An item's words: its ``text`` (which outliners may write as HTML), else its ``title``."""
    raw = item.get("text") or item.get("title") or ""
    return " ".join((html_to_text(raw) if "<" in raw else raw).split())


def _below(item: Any, depth: int, lines: list[str]) -> None:
    """An item's link and note, then its subtree, as indented lines at ``depth`` (two spaces a level)."""
    indent = "  " * depth
    link = next((item.get(key) for key in _LINKS if item.get(key)), None)
    if link:
        lines.append(f"{indent}<{link}>")
    note = " ".join((item.get("_note") or "").split())
    if note:
        lines.append(f"{indent}{note}")
    for child in item.iterfind("outline"):
        words = _words(child)
        if words:
            lines.append(f"{indent}{words}")
        _below(child, depth + 1, lines)


class OpmlFormat:
    """OPML outlines into ``ax-notes``: a card and one section per top-level item."""

    name = "opml"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        root = parse_xml(data, "OPML outline")
        if root.tag != "opml":
            raise FormatError(f"not an OPML outline: its root element is <{root.tag}>, not <opml>")
        title = " ".join((root.findtext("head/title") or "").split()) or stem(rel_path)
        body = root.find("body")
        items = list(body.iterfind("outline")) if body is not None else []
        sections = []
        for n, item in enumerate(items, 1):
            lines: list[str] = []
            _below(item, 1, lines)
            sections.append((1, _words(item) or f"item {n}", lines))
        return headed_documents(self, rel_path, mtime_ms, title, [], sections, items=len(items))


@hookimpl
def xerj_register_formats(register) -> None:
    register(OpmlFormat())
