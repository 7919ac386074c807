"""Markdown notes: a file card (front-matter ``title``/``aliases``) plus one section document per heading.

The card's ``doc_id`` is the root-relative path; its text is whatever precedes
the first heading (front matter removed), its title the front-matter ``title``,
else the first level-1 heading, else the file name without extension. Each ATX
heading (``#`` to ``######``, outside fenced code; also as a list item's whole
content, ``- ## Usage``, as Logseq writes a heading block) opens a section that
runs to the next heading of any level; the section's text starts with its heading line,
its label is the heading text and its id is ``{path}#{anchor}`` with the anchor
a forge-style slug made unique within the file (``intro``, ``intro-1``). A
heading's trailing attributes (``## Intro {#sec-intro .unnumbered}``, as
Pandoc, Quarto, kramdown and MkDocs write them) are left out of its label, and
its ``#id`` is listed in ``ids``, what a ``#sec-intro`` fragment finds it by,
and is its anchor (``{path}#sec-intro``), as the site's page names it.
Quarto (``.qmd``) and R Markdown (``.Rmd``) documents are read as Markdown.
Setext (underlined) headings are not recognised.

Front matter is the YAML block between a first line ``---`` and the next
``---`` or ``...`` line. Only a flat subset is read (``key: value``, flow lists
``[a, b]``, block lists of ``- item``); ``aliases`` (or ``alias``) and ``tags``
may be a list or a comma-separated string. A block that never closes is body text.
A page's declared URL, Jekyll's ``permalink`` or Hugo's ``url`` (``/docs/setup/``;
not a pattern such as ``/:year/:title/``), is the card's ``permalink``: the
address a site's links name the page by.

Logseq keeps a page's properties in its first lines instead (``title:: ...``,
``alias:: a, [[b]]``, ``tags:: x``; a leading ``- `` when they are the first
block's), and names a page by more than its file: ``Project___Alpha.md`` (and
the older ``Project%2FAlpha.md``) is the page ``Project/Alpha``, and
``journals/2024_01_15.md`` the day ``Jan 15th, 2024`` (also ``2024-01-15``).
Those names, ``title::`` and ``alias::`` are the card's ``aliases``, the names a
``[[link]]`` finds it by when no file is named so; front matter wins over them.

A document lists in ``blocks`` the ids of the blocks it holds, outside code:
``^id`` ending a line (Obsidian's and Foam's block anchors) and a Logseq block's
``id:: <uuid>``; ``[[note#^id]]`` and ``((uuid))`` link to the section holding one.
A MyST reference target, ``(install-guide)=`` on its own line, is a label of the
section whose heading follows it (else of the one it stands in), listed in
``labels`` as a reStructuredText file's are, for ``{ref}`` roles to find; so is
a Quarto cross-reference target it holds (``{#fig-a}`` after an image, table
or equation, a code chunk's ``#| label: fig-b``), for ``@fig-a`` to find.

An Excalidraw drawing (front matter ``excalidraw-plugin``, as Obsidian's
Excalidraw plugin writes ``*.excalidraw.md``) is read as its text elements,
element links and embedded files: the scene itself, a JSON block (compressed
to base64 by default, some 100 KB of it per drawing) after a ``%%`` and a
``Drawing`` heading, is left out, and so is the banner atop every drawing.
"""

from __future__ import annotations

import calendar
import datetime
import re
import urllib.parse
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Anchors, document, labels_at
from xerj_core.autoindex.detect import mask_code
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

# with Quarto's and R Markdown's documents (Markdown, their code chunks fenced)
EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx", ".qmd", ".rmd"})

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# An ATX heading line, or a list item that is one (``- ## Usage``: a Logseq page's heading blocks, nested or not;
# CommonMark reads a list item's heading as a heading too).
_HEADING = re.compile(r"(?: {0,3}|[ \t]*[-*+][ \t]+)(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
# The same heading line found anywhere in a body (``^``/``$`` at line ends; no part of it spans a newline).
_HEADING_LINE = re.compile(r"^(?: {0,3}|[ \t]*[-*+][ \t]+)(#{1,6})(?:[ \t]+(.*?))?[ \t]*$", re.M)
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FM_KEY = re.compile(r"([A-Za-z_][\w\-]*)[ \t]*:(?:[ \t]+(.*))?$")
# Logseq's page properties: the lines ``key:: value`` a page opens with (matched at the body's start only).
_PROPERTY_LINES = re.compile(r"(?:[ \t]*(?:- )?[A-Za-z][\w\-]*::[^\n]*(?:\n|$))+")
_PROPERTY = re.compile(r"[ \t]*(?:- )?([A-Za-z][\w\-]*)::[ \t]*(.*?)[ \t]*$")
_ESCAPED = re.compile(r"%[0-9A-Fa-f]{2}")
# a heading's attributes as Pandoc, Quarto, kramdown and MkDocs read them: ``## Intro {#sec-intro .unnumbered}``
_ATTRIBUTE = r"(?:[#.][\w\-:.]+|-|[\w\-]+=(?:\"[^\"\n]*\"|[^\s}]+))"
_HEADING_ATTRIBUTES = re.compile(rf"[ \t]*\{{:?[ \t]*({_ATTRIBUTE}(?:[ \t]+{_ATTRIBUTE})*)[ \t]*\}}$")
# MyST's reference target, ``(install-guide)=`` alone on its line, what a ``{ref}`` role names
_MYST_LABEL = re.compile(r"^\(([^()\s][^()\n]*)\)=[ \t]*$", re.M)
# Quarto's and Pandoc-crossref's cross-reference targets: a figure, table, equation, listing or theorem's id in
# attributes (``![Cap](a.png){#fig-a}``, ``$$ ... $$ {#eq-b}``) or a code chunk's ``#| label: fig-c``
_QUARTO_LABEL = re.compile(r"\{#((?:fig|tbl|eq|lst|thm|lem|cor|prp|cnj|def|exm|exr|sol|rem)-[^\s}]+)"
                           r"|^#\|[ \t]*label:[ \t]*((?:fig|tbl|lst)-\S+)", re.M)
# An Excalidraw drawing (Obsidian's Excalidraw plugin: front matter ``excalidraw-plugin``): the banner the plugin
# writes atop every drawing, and the hidden part where the scene is kept (``%%``, then ``# Drawing`` or
# ``## Drawing`` and a JSON block, compressed or not), which ends the file
_EXCALIDRAW_BANNER = re.compile(r"^==⚠.*EXCALIDRAW VIEW.*\n?", re.M)
_EXCALIDRAW_SCENE = re.compile(r"^%%[ \t]*\n(?:[ \t]*\n)*#{1,2}[ \t]+Drawing[ \t]*$", re.M)
_BLANK_OR_MYST_LABEL = re.compile(r"(?:[ \t]*\n|\([^()\s][^()\n]*\)=[ \t]*\n)*")
_JOURNAL_DAY = re.compile(r"(\d{4})_(\d{2})_(\d{2})")
# A block's id: ``^id`` ending a line (Obsidian, Foam), or a Logseq block's ``id:: <uuid>`` property.
_BLOCK_ID = re.compile(rb"(?:(?<=[ \t])|^)\^([A-Za-z0-9-]+)[ \t]*$|^[ \t]*(?:- )?id::[ \t]*([0-9A-Fa-f-]{36})[ \t]*$",
                       re.M)


def _scalar(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if " #" in raw:  # a YAML comment after a plain scalar
        raw = raw.split(" #", 1)[0].rstrip()
    return raw


def _value(raw: str) -> Any:
    raw = raw.strip()
    if raw.startswith("[") and raw.endswith("]"):
        return [_scalar(part) for part in raw[1:-1].split(",") if part.strip()]
    return _scalar(raw)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """``(front matter, body)``; an absent or unterminated block gives ``({}, text)``."""
    if not (text.startswith("---\n") or text.startswith("---\t") or text.startswith("--- ")):
        return {}, text
    first_nl = text.find("\n")
    if first_nl < 0 or text[:first_nl].strip() != "---":
        return {}, text
    match = re.search(r"^(?:---|\.\.\.)[ \t]*$", text[first_nl + 1 :], re.M)
    if match is None:
        return {}, text
    block = text[first_nl + 1 : first_nl + 1 + match.start()]
    body = text[first_nl + 1 + match.end() :]
    if body.startswith("\n"):
        body = body[1:]
    meta: dict[str, Any] = {}
    current: str | None = None
    for line in block.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t-":
            item = line.strip()
            if current is not None and item.startswith("- "):
                existing = meta.get(current)
                if not isinstance(existing, list):
                    existing = meta[current] = []
                existing.append(_scalar(item[2:]))
            continue
        key = _FM_KEY.match(line)
        if key is None:
            current = None
            continue
        current = key.group(1)
        meta[current] = _value(key.group(2) or "") if key.group(2) else []
    return meta, body


def property_links(front_matter: str) -> list[str] | None:
    """The front matter's properties holding a ``[[link]]``, a line each, as ``key: value`` (a list's item named
    by its list's key: ``categories: "[[Books]]"``); Obsidian links a note to what its properties name as it
    does to what its text names. None when there is none."""
    if "[[" not in front_matter:
        return None
    found: list[str] = []
    key = None
    for line in front_matter.split("\n"):
        named = _FM_KEY.match(line)
        if named is not None:
            key = named.group(1)
        if "[[" not in line:
            continue
        item = line.strip()
        if named is None and item.startswith("- ") and key is not None:
            item = f"{key}: {item[2:].strip()}"
        found.append(item)
    return found or None


def _string_list(value: Any) -> list[str]:
    if isinstance(value, list):
        items = [str(v).strip() for v in value]
    elif isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    else:
        return []
    return [item for item in items if item]


def page_properties(body: str) -> dict[str, str]:
    """The ``key:: value`` lines a Logseq page opens with, keys lowercased (the first of a key wins)."""
    block = _PROPERTY_LINES.match(body)
    if block is None:
        return {}
    found: dict[str, str] = {}
    for line in block.group(0).splitlines():
        match = _PROPERTY.match(line)
        if match is not None:
            found.setdefault(match.group(1).lower(), match.group(2))
    return found


def _property_list(value: str) -> list[str]:
    """``a, [[b c]], #d`` as Logseq lists pages in a property: each name without its brackets or ``#``."""
    names = []
    for part in value.split(","):
        name = part.strip().lstrip("#").strip()
        if name.startswith("[[") and name.endswith("]]"):
            name = name[2:-2].strip()
        if name:
            names.append(name)
    return names


def page_names(rel_path: str) -> list[str]:
    """The names Logseq gives the page in ``rel_path`` beyond its file name: a namespace's ``/`` (written ``___``,
    or ``%2F`` and other escapes in older graphs), and a journal day's title (the default ``MMM do, yyyy``) and
    date."""
    name, names = stem(rel_path), []
    if "___" in name:
        names.append(name.replace("___", "/"))
    if _ESCAPED.search(name):
        decoded = urllib.parse.unquote(name.replace("___", "/"))
        if decoded != name:
            names.append(decoded)
    day = _JOURNAL_DAY.fullmatch(name)
    folder = rel_path.rsplit("/", 2)[-2] if rel_path.count("/") else ""
    if day is not None and folder == "journals":
        try:
            date = datetime.date(int(day.group(1)), int(day.group(2)), int(day.group(3)))
        except ValueError:
            return names
        suffix = "th" if 11 <= date.day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(date.day % 10, "th")
        names += [f"{calendar.month_abbr[date.month]} {date.day}{suffix}, {date.year}", date.isoformat()]
    return names


def block_ids(text: str) -> list[str] | None:
    """The ids of the blocks ``text`` holds (outside code: an example is not an anchor), in order; None if none."""
    if "^" not in text and "id::" not in text:
        return None
    found = [(m.group(1) or m.group(2)).decode() for m in _BLOCK_ID.finditer(mask_code(text.encode("utf-8")))]
    return list(dict.fromkeys(found)) or None


def headings(body: str) -> list[tuple[int, int, str]]:
    """``(char offset of the line, level, label)`` for every ATX heading outside fenced code."""
    if "```" not in body and "~~~" not in body:
        # no fence can open, so every heading line counts: one regex pass over the body finds them, where the
        # line walk below costs a Python step per line (about a third of parsing a note)
        return [(match.start(), len(match.group(1)), _CLOSING_HASHES.sub("", match.group(2) or "").strip())
                for match in _HEADING_LINE.finditer(body)]
    found: list[tuple[int, int, str]] = []
    fence: str | None = None
    pos = 0
    for line in body.split("\n"):
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence) and not line[opener.end() :].strip():
                fence = None
        elif opener is not None:
            fence = opener.group(1)
        elif "#" in line:
            match = _HEADING.match(line)
            if match is not None:
                label = _CLOSING_HASHES.sub("", match.group(2) or "").strip()
                found.append((pos, len(match.group(1)), label))
        pos += len(line) + 1
    return found


class MarkdownFormat:
    """Markdown notes into ``ax-notes``: a card and one section per heading."""

    name = "markdown"
    dataset = "ax-notes"
    priority = 10
    # 2: Logseq's page properties and page names, and block ids, read (a run finding it reads every note again)
    # 3: a list item that is a heading (a Logseq heading block, ``- ## Usage``) opens a section
    # 4: a page's declared address (``permalink``, ``url``) and MyST's ``(label)=`` targets (``labels``) kept;
    # Quarto's and R Markdown's documents; a heading's ``{#id .class}`` attributes (the id in ``ids``)
    # 5: front matter's ``bibliography`` (Pandoc, Quarto) and ``citekey`` (a literature note's) kept; Quarto's
    # cross-reference targets (``{#fig-a}``, ``#| label: fig-a``) listed in ``labels``
    # 6: an Excalidraw drawing's scene (base64 of its JSON) and banner left out
    # 7: front matter properties holding [[links]] kept (``property_links``), as Obsidian links them
    version = 7

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        meta, body = split_front_matter(decoded.text)
        if "excalidraw-plugin" in meta:
            body = _drawing_text(body)
        found = headings(body)
        heading_ids: list[list[str] | None] = [None] * len(found)
        for at, (start, level, label) in enumerate(found):
            attributes = _HEADING_ATTRIBUTES.search(label) if label.endswith("}") else None
            if attributes is not None:
                found[at] = (start, level, label[:attributes.start()])
                heading_ids[at] = [token[1:] for token in attributes.group(1).split() if token.startswith("#")]
        properties = page_properties(body)
        named = page_names(rel_path)
        title = str(meta.get("title") or "").strip() or properties.get("title", "")
        if not title:
            title = next((label for _, level, label in found if level == 1 and label), "") or \
                (named[0] if named else stem(rel_path))
        aliases = _string_list(meta.get("aliases", meta.get("alias")))
        if properties or named:
            # in Logseq a page's title is a name it is linked by, as its aliases are
            extra = [properties.get("title", ""), *_property_list(properties.get("alias", "")), *named]
            aliases = list(dict.fromkeys(name for name in [*aliases, *extra] if name and name != stem(rel_path)))
        tags = _string_list(meta.get("tags", meta.get("tag"))) or _property_list(properties.get("tags", ""))
        permalink = meta.get("permalink", meta.get("url"))
        if not (isinstance(permalink, str) and permalink.startswith("/") and ":" not in permalink):
            permalink = None
        citekey = meta.get("citekey")
        citekey = str(citekey).strip().lstrip("@") if isinstance(citekey, (str, int)) else ""
        preamble_end = found[0][0] if found else len(body)
        card = document(
            self,
            rel_path,
            mtime_ms,
            doc_id=rel_path,
            title=title,
            text=body[:preamble_end].strip(),
            section="",
            kind="file",
            aliases=aliases or None,
            tags=tags or None,
            permalink=permalink,
            bibliography=_string_list(meta.get("bibliography")) or None,
            reference_key=citekey or None,
            blocks=block_ids(body[:preamble_end]),
            property_links=property_links(decoded.text[:len(decoded.text) - len(body)]) if meta else None,
            ordinal=0,
            encoding=decoded.encoding,
        )
        docs = [card]
        anchors = Anchors()
        dataset, name = self.dataset, self.name
        ends = [start for start, _, _ in found[1:]] + [len(body)]
        for index, ((start, level, label), end, ids) in enumerate(zip(found, ends, heading_ids), 1):
            anchor = anchors(ids[0] if ids else label)  # the id a site gives the heading, when it sets one
            # what ``document`` makes of these arguments (none is None), built directly: a note has a few sections
            # and each went through a keyword-argument call and a filtering of its fields
            text = body[start:end].strip()
            fields: dict[str, Any] = {"ordinal": index, "level": level, "anchor": anchor}
            blocks = block_ids(text)
            if blocks:
                fields["blocks"] = blocks
            if ids:
                fields["ids"] = ids
            docs.append(SourceDocument(f"{rel_path}#{anchor}", dataset, rel_path, title, text, label, "section",
                                       mtime_ms, name, fields))
        if ")=" in body:
            for at, label in labels_at(body, [start for start, _, _ in found], _MYST_LABEL, _BLANK_OR_MYST_LABEL):
                labels = docs[at].fields.setdefault("labels", [])
                if label not in labels:
                    labels.append(label)
        if "{#" in body or "label:" in body:
            for doc in docs:
                for match in _QUARTO_LABEL.finditer(doc.text):
                    labels = doc.fields.setdefault("labels", [])
                    if (match.group(1) or match.group(2)) not in labels:
                        labels.append(match.group(1) or match.group(2))
        return docs


def _drawing_text(body: str) -> str:
    """An Excalidraw drawing's body without the scene and the banner: what a person wrote and linked in it."""
    scene = _EXCALIDRAW_SCENE.search(body)
    return _EXCALIDRAW_BANNER.sub("", body[:scene.start()] if scene else body, count=1)


@hookimpl
def xerj_register_formats(register) -> None:
    register(MarkdownFormat())
