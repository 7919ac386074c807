"""TiddlyWiki tiddler files (``.tid``, as a Node.js wiki keeps them): a card plus one section per heading.

A ``.tid`` file is a header of ``field: value`` lines, a blank line, then the
tiddler's text. The card's title is the ``title`` field (else the file name),
and since a tiddler is linked by title while its file name is the title made
safe for a file system (``SystemTag: $:/tags/Foo`` is ``SystemTag_
$__tags_Foo.tid``), the title is also the card's one alias, the name a
``[[link]]`` finds it by. ``tags`` (TiddlyWiki's list syntax: ``[[two words]]
one``) become the card's ``tags``; ``created`` and ``modified`` are kept as
written. WikiText headings (``!`` to ``!!!!!!`` at a line's start, outside
fenced code) open sections, as a Markdown heading does. A tiddler whose
``type`` is not text (an image, audio, a JSON data tiddler) keeps its card,
so links to it resolve, without its text.
"""

from __future__ import annotations

import re

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

# TiddlyWiki's field names: letters, digits, "-", "_", "." (a prose line such as "Dear all:" is no field)
_FIELD = re.compile(r"([\w.\-]+):[ \t]*(.*)")
_HEADING = re.compile(r"^(!{1,6})[ \t]*(.*?)[ \t]*$", re.M)
_FENCE = re.compile(r"^```", re.M)
_LIST_ITEM = re.compile(r"\[\[(.*?)\]\]|(\S+)")


def header(text: str) -> tuple[dict[str, str], str]:
    """The fields of a ``.tid`` file's header and the text after it (a file without a header: none, all of it)."""
    fields: dict[str, str] = {}
    head, blank, body = text.partition("\n\n")
    for line in head.rstrip("\n").split("\n"):
        match = _FIELD.fullmatch(line)
        if match is None:
            return {}, text
        fields.setdefault(match.group(1).lower(), match.group(2).strip())
    return fields, body if blank else ""


def title_list(value: str) -> list[str]:
    """TiddlyWiki's title list syntax: ``[[two words]] one`` is ``["two words", "one"]``."""
    return [item for bracketed, bare in _LIST_ITEM.findall(value) if (item := (bracketed or bare).strip())]


def headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset, level, label)`` of each WikiText heading outside fenced code."""
    fences = [match.start() for match in _FENCE.finditer(text)] if "```" in text else []
    found, k, inside = [], 0, False
    for match in _HEADING.finditer(text):
        while k < len(fences) and fences[k] < match.start():
            inside, k = not inside, k + 1
        if not inside:
            found.append((match.start(), len(match.group(1)), match.group(2)))
    return found


class TiddlyWikiFormat:
    """``.tid`` tiddlers into ``ax-notes``: a card and one section per heading."""

    name = "tiddlywiki"
    dataset = "ax-notes"
    priority = 10

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == ".tid"

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        fields, text = header(decoded.text)
        title = fields.get("title") or stem(rel_path)
        kind = fields.get("type", "")
        if kind and not kind.startswith("text/"):
            text = ""  # data (an image, audio, JSON): the card alone, so links to it resolve
        found = headings(text)
        tags = title_list(fields.get("tags", ""))
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title,
                         text=text[: found[0][0] if found else len(text)].strip(), section="", kind="file",
                         aliases=[title] if title != stem(rel_path) else None, tags=tags or None,
                         tiddler_type=kind or None, created=fields.get("created") or None,
                         modified=fields.get("modified") or None, ordinal=0, encoding=decoded.encoding)]
        anchors = Anchors()
        ends = [start for start, _, _ in found[1:]] + [len(text)]
        for index, ((start, level, label), end) in enumerate(zip(found, ends), 1):
            anchor = anchors(label)
            docs.append(SourceDocument(f"{rel_path}#{anchor}", self.dataset, rel_path, title,
                                       text[start:end].strip(), label, "section", mtime_ms, self.name,
                                       {"ordinal": index, "level": level, "anchor": anchor}))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(TiddlyWikiFormat())
