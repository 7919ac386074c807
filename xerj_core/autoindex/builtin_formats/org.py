"""Org files (Emacs Org mode, org-roam): a file card plus one section document per heading.

The card's ``doc_id`` is the root-relative path; its title is ``#+title:``
(else the first heading, else the file name), its text what precedes the first
heading. Each heading line (``*``, ``**``, ... then a space), outside
``#+begin_``/``#+end_`` blocks, opens a section that runs to the next heading
of any level; its label is the heading's text without a ``TODO``/``DONE``
keyword, a ``[#A]`` priority or trailing ``:tags:``, as Org's own ``[[*Heading]]``
search reads it, and its id is ``{path}#{anchor}`` (a slug, unique in the file).

org-roam names a note by the ``:ID:`` in the property drawer of the file (before
any heading) or of a heading: those ids are the document's ``blocks`` (the ids a
``[[id:...]]`` link finds it by, as it finds a Logseq block), ``:CUSTOM_ID:``
its ``custom_ids`` (``[[#custom-id]]``). The title, ``:ROAM_ALIASES:`` (space-separated,
a quoted alias may hold spaces) and ``#+roam_alias:`` are the card's
``aliases`` (the names org-roam finds a note by), ``#+filetags: :a:b:`` its ``tags``,
and org-cite's ``#+bibliography:`` lines its ``bibliography``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

_HEADING = re.compile(r"^(\*+)[ \t]+(.*?)[ \t]*$", re.M)
_BLOCK_EDGE = re.compile(r"^[ \t]*#\+(begin|end)_\w+", re.M | re.I)
_KEYWORD = re.compile(r"^[ \t]*#\+([A-Za-z_]+):[ \t]*(.*?)[ \t]*$", re.M)
_DRAWER = re.compile(r"\A(?:[ \t]*\n)*[ \t]*:PROPERTIES:[ \t]*\n(.*?)^[ \t]*:END:[ \t]*$", re.M | re.S | re.I)
_PROPERTY = re.compile(r"^[ \t]*:([A-Za-z_][\w-]*):[ \t]*(.*?)[ \t]*$", re.M)
_TODO = re.compile(r"^(?:TODO|DONE|NEXT|WAITING|HOLD|CANCELLED|CANCELED)(?:[ \t]+|$)")
_PRIORITY = re.compile(r"^\[#[A-Za-z0-9]\][ \t]*")
_TAGS = re.compile(r"[ \t]+:[\w@#%:]+:$")


def heading_label(raw: str) -> str:
    """A heading line's text as ``[[*Heading]]`` matches it: no TODO keyword, priority cookie or tags."""
    label = _TAGS.sub("", raw)
    label = _TODO.sub("", label)
    return _PRIORITY.sub("", label).strip()


def properties(text: str) -> dict[str, str]:
    """The property drawer ``text`` opens with (blank lines before it allowed), keys uppercased."""
    drawer = _DRAWER.match(text)
    if drawer is None:
        return {}
    return {m.group(1).upper(): m.group(2) for m in _PROPERTY.finditer(drawer.group(1))}


def _aliases(value: str) -> list[str]:
    """``Batman "The Dark Knight"``: org-roam's space-separated aliases, quotes holding spaces."""
    try:
        return [alias for alias in shlex.split(value) if alias.strip()]
    except ValueError:  # an unbalanced quote: the words as they stand
        return value.split()


def headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset of the line, level, label)`` of every heading outside ``#+begin_``/``#+end_`` blocks."""
    found = []
    edges = [(m.start(), m.group(1).lower()) for m in _BLOCK_EDGE.finditer(text)] if "#+" in text else []
    inside, k = False, 0
    for match in _HEADING.finditer(text):
        while k < len(edges) and edges[k][0] < match.start():
            inside = edges[k][1] == "begin"
            k += 1
        if not inside:
            found.append((match.start(), len(match.group(1)), heading_label(match.group(2))))
    return found


class OrgFormat:
    """Org files into ``ax-notes``: a card and one section per heading."""

    name = "org"
    dataset = "ax-notes"
    priority = 10
    # 2: org-cite's #+bibliography: lines kept (bibliography)
    version = 2

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == ".org"

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        text = decoded.text
        found = headings(text)
        preamble = text[: found[0][0] if found else len(text)]
        keywords: dict[str, str] = {}
        bibliography: list[str] = []  # org-cite's #+bibliography: lines, one file each, as many as it has
        for match in _KEYWORD.finditer(preamble):
            keywords.setdefault(match.group(1).lower(), match.group(2))
            if match.group(1).lower() == "bibliography" and match.group(2).strip():
                bibliography.append(match.group(2).strip().strip('"'))
        drawer = properties(preamble)
        title = keywords.get("title") or next((label for _, level, label in found if level == 1 and label), "") \
            or stem(rel_path)
        # org-roam names a note by its title as much as by its aliases ([[roam:Title]], its completion)
        aliases = [keywords.get("title", "")] + _aliases(drawer.get("ROAM_ALIASES", "")) + \
            _aliases(keywords.get("roam_alias", ""))
        aliases = [alias for alias in aliases if alias and alias != stem(rel_path)]
        tags = [tag for tag in keywords.get("filetags", "").split(":") if tag.strip()]
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text=preamble.strip(), section="",
                         kind="file", aliases=list(dict.fromkeys(aliases)) or None, tags=tags or None,
                         blocks=[drawer["ID"]] if drawer.get("ID") else None,
                         custom_ids=[drawer["CUSTOM_ID"]] if drawer.get("CUSTOM_ID") else None,
                         bibliography=bibliography or None, ordinal=0,
                         encoding=decoded.encoding)]
        anchors = Anchors()
        ends = [start for start, _, _ in found[1:]] + [len(text)]
        for index, ((start, level, label), end) in enumerate(zip(found, ends), 1):
            body = text[start:end]
            own = properties(body[body.find("\n") + 1:] if "\n" in body else "")
            anchor = anchors(label)
            fields: dict[str, Any] = {"ordinal": index, "level": level, "anchor": anchor}
            if own.get("ID"):
                fields["blocks"] = [own["ID"]]
            if own.get("CUSTOM_ID"):
                fields["custom_ids"] = [own["CUSTOM_ID"]]
            docs.append(SourceDocument(f"{rel_path}#{anchor}", self.dataset, rel_path, title, body.strip(), label,
                                       "section", mtime_ms, self.name, fields))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(OrgFormat())
