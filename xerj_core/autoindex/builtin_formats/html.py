"""HTML pages: a file card with the page's title, plus one section document per heading, each with its links.

The text keeps block structure as lines (a paragraph, list item, heading or
table row ends a line), collapses other whitespace, keeps ``<pre>`` verbatim and
drops ``<head>``, ``<script>``, ``<style>``, ``<template>`` and ``<noscript>``.
The title is ``<title>``, else the first ``<h1>``, else the file name.

As a Markdown note is, a page is cut at its headings (``<h1>`` to ``<h6>`` with
text): the card holds the text before the first one, and each opens a section
that runs to the next heading of any level, its text starting with the
heading's, its label the heading's text, its id ``{path}#{anchor}`` (a slug of
the label made unique within the page). A heading opens one only when it heads
:data:`MIN_SECTION_CHARS` characters beyond its own; else it stays in the part
before it. A section lists in ``ids`` the element ids that name it: the
heading's own, those of elements inside it, and those of elements opened since
the last text before it (``<section id="usage"><h2>``, rustdoc's
``<section id="method.push"><h4>``, ``<a name="x"></a><h2>``), so a
``page.html#usage`` link lands on it.

Each document's ``fields["links"]`` lists every ``<a href>`` in its text, in
order, as ``{"href", "offset"}``, ``offset`` being the UTF-8 byte offset in that
text where the anchor's text starts, so the ``href`` detector can quote the line
that holds the link. An anchor with no text of its own (an icon, an image) also
carries ``label``: its ``title``, ``aria-label`` or image ``alt``, else ``""``;
the line at its offset is the text after it, which says nothing of the link.

Bytes are read in the codec a ``<meta charset>`` (or ``http-equiv`` content
type) in the first kilobytes names, else as UTF-8, else in the encoding
detected (see ``decode_text``); the card's ``encoding`` says which.

The markup is tokenized by lxml's HTML parser (libxml2, in C), which hands each
start tag, end tag and run of text to the extractor below: like a browser it
closes elements left open, ignores end tags that close nothing and reads a NUL
as U+FFFD.
"""

from __future__ import annotations

import codecs
import re
import threading
from bisect import bisect_right
from typing import Any

import attrs

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.formats import Decoded, FormatError, decode_text, extension, file_name, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_\-:.]+)", re.I)
_WS = re.compile(r"\s+")
_BLOCK = frozenset(
    "address article aside blockquote br dd details div dl dt figcaption figure footer form h1 h2 h3 h4 "
    "h5 h6 header hr li main nav ol p pre section summary table tbody td tfoot th thead tr ul".split()
)
_SKIP = frozenset({"head", "script", "style", "template", "noscript"})
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
# What a heading's label drops at its ends: white space, and the marks of the link to itself generators put beside
# it (Sphinx's "¶", rustdoc's "§"), which are no part of its name.
_HEADERLINK_MARKS = " ¶§"
# The text a heading must head, beyond its own, to open a section: generated pages head every method, impl and
# field (rustdoc's std pages: 132k sections of 2,617 pages, most a signature and a line, against 2.6k documents,
# three times the run and five times the data directory), where a note's sections hold paragraphs.
MIN_SECTION_CHARS = 256


class _Extractor:
    """The page's text, title, headings and links, from the parser's events: an lxml parser target (the parser
    calls :meth:`start`, :meth:`end` and :meth:`data` with each event, then :meth:`close`)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start a page (and let the last one's text go)."""
        self.parts: list[str] = []
        # characters emitted so far: a link keeps the count where its anchor starts, and extract_parts() turns the
        # counts into UTF-8 byte offsets in one pass over each part's text, not one encode per piece
        self.nchars = 0
        self.at_line_start = True
        self.pending_space = False
        self.skip: list[str] = []
        self.pre = 0
        self.in_title = False
        self.title: list[str] = []
        # headings as [characters before it, level, its text's pieces, the ids naming it]; the open one's depth
        self.heads: list[list[Any]] = []
        self.head_depth = 0
        self.ids_before: list[str] = []  # ids of elements opened since the last text
        self.links: list[dict[str, object]] = []
        self.ends: list[int] = []  # per link, the characters emitted when its anchor closed (its text's end)
        self.words = 0  # runs of visible text emitted so far
        # the open anchor: its link's index, ``words`` when it opened, and what it is called
        self.anchor: tuple[int, int, str] | None = None

    def close(self) -> "_Extractor":
        self._close_anchor()  # one left open at the end of the page
        return self

    def _emit(self, piece: str) -> None:
        self.parts.append(piece)
        self.nchars += len(piece)

    def _newline(self) -> None:
        if not self.at_line_start:
            self._emit("\n")
            self.at_line_start = True
        self.pending_space = False

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        if tag == "title":
            self.in_title = True
            return
        if tag in _SKIP:
            # <head> stays open in malformed pages; only the tags below hide text
            if tag != "head":
                self.skip.append(tag)
            return
        if tag in _BLOCK:
            self._newline()
        named = attrib.get("id") or (attrib.get("name") if tag == "a" else None)
        level = _HEADINGS.get(tag)
        if level is not None:
            if not self.head_depth:
                self.heads.append([self.nchars, level, [], self.ids_before])
                self.ids_before = []
            self.head_depth += 1
        if named:
            (self.heads[-1][3] if self.head_depth else self.ids_before).append(named.strip())
        if tag == "pre":
            self.pre += 1
        elif tag == "a":
            self._close_anchor()  # an anchor left open ends where the next one starts, as browsers end it
            href = attrib.get("href")
            if href:
                self.links.append({"href": href.strip(), "offset": self.nchars})
                self.ends.append(self.nchars)
                label = attrib.get("title") or attrib.get("aria-label") or ""
                self.anchor = (len(self.links) - 1, self.words, _WS.sub(" ", label).strip())
        elif tag == "img" and self.anchor is not None and not self.anchor[2]:
            alt = attrib.get("alt")
            if alt:
                self.anchor = (*self.anchor[:2], _WS.sub(" ", alt).strip())

    def _text_starts(self) -> None:
        """Words are about to be emitted: an open anchor with none of its own yet starts here (after the space
        that may precede them), not where its tag opened."""
        if self.anchor is not None and self.anchor[1] == self.words:
            self.links[self.anchor[0]]["offset"] = self.nchars

    def _close_anchor(self) -> None:
        if self.anchor is not None:
            index, words, label = self.anchor
            if words == self.words:
                self.links[index]["label"] = label
            self.ends[index] = self.nchars
            self.anchor = None

    def end(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if self.skip and tag == self.skip[-1]:
            self.skip.pop()
            return
        if tag == "a":
            self._close_anchor()
        elif tag == "pre" and self.pre:
            self.pre -= 1
        if tag in _HEADINGS and self.head_depth:
            self.head_depth -= 1
        if tag in _BLOCK:
            self._newline()

    def data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if self.skip:
            return
        if self.head_depth:
            self.heads[-1][2].append(data)
        if self.pre:
            for index, line in enumerate(data.split("\n")):
                if index:
                    self._emit("\n")
                    self.at_line_start = True
                if line:
                    self._text_starts()
                    self._emit(line)
                    self.words += 1
                    self.ids_before = []
                    self.at_line_start = False
            self.pending_space = False
            return
        collapsed = _WS.sub(" ", data)
        words = collapsed.strip()
        if not words:
            if collapsed and not self.at_line_start:
                self.pending_space = True
            return
        if (self.pending_space or collapsed[0] == " ") and not self.at_line_start:
            self.parts.append(" ")
            self.nchars += 1
        self._text_starts()
        self.parts.append(words)
        self.nchars += len(words)
        self.words += 1
        self.ids_before = []
        self.at_line_start = False
        self.pending_space = collapsed[-1] == " "


def _decode(data: bytes, rel_path: str) -> Decoded:
    declared = _CHARSET.search(data[:4096])
    if declared is not None:
        name = declared.group(1).decode("ascii", "replace").lower()
        try:
            codec = codecs.lookup(name).name
        except LookupError:
            codec = "utf-8"
        if codec not in ("utf-8", "utf-8-sig"):
            try:
                return Decoded(data.decode(codec).replace("\r\n", "\n").replace("\r", "\n"), codec)
            except UnicodeDecodeError as exc:
                raise FormatError(f"not valid {name} (as declared): byte at offset {exc.start}", path=rel_path) from None
    return decode_text(data, rel_path)


# One parser and its extractor per thread, reused page after page: a parser made per page stays in a reference
# cycle with its target (and the page's text) until the cyclic collector runs, and parsing the Rust std docs so
# peaked at 200 MB where html.parser stayed at 57.
_LOCAL = threading.local()


def _reader() -> tuple[Any, _Extractor, type[Exception]]:
    """This thread's parser, its extractor, and the error the parser raises."""
    found = getattr(_LOCAL, "reader", None)
    if found is None:
        # imported with the first page: every process of a run imports the formats, and lxml's 4 MB stay out of
        # those that never read HTML
        from lxml import etree

        page = _Extractor()
        # recover: read what a browser would of a broken page; huge_tree: a text run of megabytes is text too
        found = _LOCAL.reader = (etree.HTMLParser(target=page, recover=True, no_network=True, huge_tree=True,
                                                  remove_comments=True, remove_pis=True), page, etree.Error)
    return found


def _read(markup: str) -> _Extractor:
    """This thread's extractor, having read ``markup`` (the caller resets it once done with what it holds)."""
    html_parser, page, parse_error = _reader()
    page.reset()
    try:
        html_parser.feed(markup)
        html_parser.close()
    except BaseException as exc:
        _LOCAL.reader = None  # a parser that failed mid-page is not trusted with the next one
        if isinstance(exc, parse_error):
            raise FormatError(f"malformed HTML: {exc}") from None
        raise
    return page


@attrs.frozen
class Part:
    """A stretch of a page's text: the text before its first heading (``level`` 0), or one heading's section."""

    level: int
    label: str
    text: str
    links: list[dict[str, object]]
    ids: list[str]


def extract_parts(markup: str, *, any_heading: bool = False) -> tuple[str, str, list[Part]]:
    """``(title, the first h1's text, parts)`` of an HTML string: the text before its first heading, then each heading's
    section (a heading without text opens none), each with its links (offsets in UTF-8 bytes of its text). With
    ``any_heading``, the second is the first heading's text, whatever its level."""
    page = _read(markup)
    text = "".join(page.parts).rstrip()
    found = [(min(start, len(text)), level, label, ids) for start, level, pieces, ids in page.heads
             if (label := _WS.sub(" ", "".join(pieces)).strip(_HEADERLINK_MARKS))]
    # a heading with little text of its own before the next one stays in the part before it, with its ids
    heads: list[tuple[int, int, str, list[str]]] = []
    for (start, level, label, ids), end in zip(found, [start for start, *_ in found[1:]] + [len(text)]):
        if end - start - len(label) >= MIN_SECTION_CHARS:
            heads.append((start, level, label, ids))
        elif heads:
            heads[-1][3].extend(ids)
    starts = [start for start, *_ in heads]
    bounds = [0, *starts, len(text)]
    placed: list[list[dict[str, object]]] = [[] for _ in bounds[1:]]
    for link in page.links:
        at = min(int(link["offset"]), len(text))
        placed[bisect_right(starts, at)].append({**link, "offset": at})
    parts = []
    for index, (start, end) in enumerate(zip(bounds, bounds[1:])):
        level, label, ids = heads[index - 1][1:] if index else (0, "", [])
        piece = text[start:end].rstrip()
        links = placed[index]
        # offsets from the part's start (its text is not stripped on the left: a heading starts a line), in bytes
        for link, offset in zip(links, _byte_offsets(piece, [min(int(link["offset"]) - start, len(piece))
                                                              for link in links])):
            link["offset"] = offset
        parts.append(Part(level, label, piece, links, list(dict.fromkeys(ids))))
    title = _WS.sub(" ", "".join(page.title)).strip()
    h1 = next((label for _start, level, label, _ids in found if level == 1 or any_heading), "")
    page.reset()
    return title, h1, parts


def _byte_offsets(text: str, chars: list[int]) -> list[int]:
    """The UTF-8 byte offsets in ``text`` of the ascending character offsets ``chars``."""
    if text.isascii():
        return chars
    found, at, nbytes = [], 0, 0
    for char in chars:
        nbytes += len(text[at:char].encode("utf-8"))
        at = char
        found.append(nbytes)
    return found


def text_and_links(markup: str) -> tuple[str, list[dict[str, object]]]:
    """The visible text of an HTML string (as :func:`html_to_text`) and its links, in page order: each its
    ``href``, the UTF-8 byte ``offset`` where its anchor's text starts, that ``text`` (whitespace collapsed), and
    the ``label`` of an anchor without text, as the HTML format records one."""
    page = _read(markup)
    text = "".join(page.parts).rstrip()
    links = []
    for link, end in zip(page.links, page.ends):
        start = min(int(link["offset"]), len(text))  # type: ignore[call-overload]
        links.append({**link, "offset": start, "text": text[start:min(end, len(text))].strip()})
    for link, offset in zip(links, _byte_offsets(text, [int(link["offset"]) for link in links])):  # type: ignore
        link["offset"] = offset
    page.reset()
    return text, links


def html_to_text(markup: str) -> str:
    """The visible text of an HTML string, block elements as lines (used for HTML-only email bodies)."""
    page = _read(markup)
    text = "".join(page.parts).rstrip()
    page.reset()
    return text


class HtmlFormat:
    """HTML pages into ``ax-web``: title, text and links."""

    name = "html"
    dataset = "ax-web"
    priority = 10
    # 2: an anchor without text carries its label (the href detector then does not quote the text after it).
    # 3: tokenized by libxml2 (end tags that close nothing are ignored, a NUL is U+FFFD), as browsers read pages
    # 4: a section per heading, each with its links and the element ids naming it; a link's offset where its text
    # starts (it was the space before it)
    version = 4

    def accepts(self, rel_path: str, head: bytes) -> bool:
        if extension(rel_path) in EXTENSIONS:
            return True
        start = head.lstrip()[:15].lower()
        return extension(rel_path) == "" and (start.startswith(b"<!doctype html") or start.startswith(b"<html"))

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = _decode(data, rel_path)
        title, h1, (preamble, *sections) = extract_parts(decoded.text)
        title = title or h1 or stem(rel_path) or file_name(rel_path)
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text=preamble.text, section="",
                         kind="file", ordinal=0, links=preamble.links, encoding=decoded.encoding)]
        anchors = Anchors()
        for ordinal, part in enumerate(sections, 1):
            anchor = anchors(part.label)
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchor}", title=title,
                                 text=part.text, section=part.label, kind="section", ordinal=ordinal,
                                 level=part.level, anchor=anchor, links=part.links or None, ids=part.ids or None))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(HtmlFormat())
