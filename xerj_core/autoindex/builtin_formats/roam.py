"""Roam Research JSON exports: a card per exported graph, a document per page, its blocks as an outline.

Roam's "Export All" as JSON writes one file: a list of pages, each with its
``title``, ``uid``, ``create-time`` / ``edit-time`` (epoch milliseconds) and
``children``, blocks that hold a ``string`` of Roam markup, a ``uid``, an
optional ``heading`` (1-3) and children of their own. The file's card (kind
``file``, titled by the file's name, which is the graph's) counts the
``pages``. Each page is a document ``{path}#{page uid}`` (``#page-{n}`` for a
page without one) of kind ``page``, titled by the page's title: its text is
the outline, one block a line, indented two spaces a level (a heading block
behind ``#``s), with fields ``uid``, ``created_ms`` / ``updated_ms``,
``blocks`` (its blocks' uids: the corpus's ``by_block`` finds the page a
``((uid))`` cites, as it finds a Logseq block's) and ``links``: each page a block names (``[[Page]]``, nested ones too,
``#tag``, ``#[[Two words]]``, an attribute's ``Name::``) as ``{page,
offset}``, each block it cites (``((uid))``, in an embed or an alias too) as
``{block, offset}``, offsets in UTF-8 bytes of the text. Roam's own
components (``{{[[TODO]]}}``, ``{{[[embed]]: ...}}``) name no page, and code
(inline or fenced) names nothing. The ``roamlink`` detector follows them.

A file that reads so but is not such a list is passed by as ``no_format``; one
that is not JSON is refused.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document, json_head, load_json
from xerj_core.autoindex.formats import NO_FORMAT, FormatDeclined, stem
from xerj_core.model import SourceDocument

# The start of an export as Roam writes it (compact or indented): a list whose first page has a title, and keys
# of Roam's hyphenated spelling or a block's ``string`` close by (a chat export says ``create_time``).
_HEAD = re.compile(rb'^\s*\[\s*\{[^\[\]]{0,600}?"(?:title|children|uid|create-time|edit-time)"\s*:')
_ROAM_KEY = re.compile(rb'"(?:create-time|edit-time|create-email|edit-email)"\s*:|"children"\s*:\s*\[\s*\{\s*"string"')
# Markup that names a page or a block. A block reference's uid is what Roam makes (nine characters) or any run of
# word characters and hyphens: ``((an aside))`` with a space is a parenthetical, not a reference.
_BLOCK_REF = re.compile(r"\(\(([\w-]+)\)\)")
_TAG = re.compile(r"(?<![\w#/&])#(?!\[\[)([^\s\[\]{}()#,;!?\"'`]+)")
_ATTRIBUTE = re.compile(r"^([^:`\n\[\]{}]{1,200}?)::")
# Roam's components, written as a page reference inside double braces: no page is meant
_COMPONENT = re.compile(r"\{\{\s*\[\[([^\[\]]*)\]\]")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


class RoamFormat:
    """Roam Research ``.json`` exports into ``ax-notes``: a card, a document per page."""

    name = "roam"
    dataset = "ax-notes"
    priority = 20
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        head = json_head(rel_path, head)
        return head is not None and _HEAD.match(head) is not None and _ROAM_KEY.search(head) is not None

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        pages = load_json(data, rel_path, [])
        if not isinstance(pages, list) or not all(isinstance(page, dict) for page in pages):
            # another program's JSON that began as one does: passed by, as the other exports' formats do
            raise FormatDeclined("not a Roam export: not a list of pages", kind=NO_FORMAT)
        docs = [self._page(rel_path, mtime_ms, page, n) for n, page in enumerate(pages, start=1)
                if isinstance(page.get("title"), str)]
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=stem(rel_path) or rel_path, text="",
                        section="", kind="file", pages=len(docs))
        return [card, *docs]

    def _page(self, rel_path: str, mtime_ms: int, page: dict[str, Any], n: int) -> SourceDocument:
        title = page["title"]
        uid = page.get("uid") if isinstance(page.get("uid"), str) and page.get("uid") else None
        lines: list[str] = []
        links: list[dict[str, Any]] = []
        uids: list[str] = []
        at = 0  # the UTF-8 byte where the next line starts
        for depth, block in _blocks(page.get("children")):
            string = block.get("string")
            string = string if isinstance(string, str) else ""
            heading = block.get("heading")
            lead = "  " * depth + ("#" * heading + " " if heading in (1, 2, 3) else "")
            line = lead + string
            start = at + len(lead.encode())
            links += ({**link, "offset": start + len(string[:link["offset"]].encode())} for link in _links(string))
            if isinstance(block.get("uid"), str) and block["uid"]:
                uids.append(block["uid"])
            lines.append(line)
            at += len(line.encode()) + 1
        return document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{uid or f'page-{n}'}", title=title,
                        text="\n".join(lines), section=title, kind="page", ordinal=n, uid=uid,
                        created_ms=_instant(page.get("create-time")), updated_ms=_instant(page.get("edit-time")),
                        blocks=uids or None, links=links or None)


def _instant(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _blocks(children: Any, depth: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each block under ``children`` in outline order with its depth; a stack, not recursion: a deep outline does
    not meet Python's recursion limit."""
    stack = [(depth, iter(children if isinstance(children, list) else ()))]
    while stack:
        level, items = stack[-1]
        block = next(items, None)
        if block is None:
            stack.pop()
            continue
        if isinstance(block, dict):
            yield level, block
            if isinstance(block.get("children"), list) and block["children"]:
                stack.append((level + 1, iter(block["children"])))


def _links(string: str) -> list[dict[str, Any]]:
    """The pages and blocks one block's ``string`` names, each with its character offset, in order."""
    if not any(mark in string for mark in ("[[", "#", "((", "::")):
        return []
    masked = _CODE.sub(lambda m: " " * len(m.group()), string)
    # a component's own name blanked (its ``[[`` to ``]]``), what follows it kept: an embed's target is a link
    masked = _COMPONENT.sub(lambda m: m.group()[:m.start(1) - 2 - m.start()] + " " * (m.end() - m.start(1) + 2),
                            masked)
    found: list[tuple[int, dict[str, Any]]] = []
    found += ((start, {"page": title}) for start, title in _page_refs(masked))
    found += ((m.start(), {"block": m.group(1)}) for m in _BLOCK_REF.finditer(masked))
    found += ((m.start(), {"page": m.group(1).rstrip(".:")}) for m in _TAG.finditer(masked) if m.group(1).rstrip(".:"))
    attribute = _ATTRIBUTE.match(masked)
    if attribute and attribute.group(1).strip():
        found.append((0, {"page": attribute.group(1).strip()}))
    found.sort(key=lambda item: item[0])
    return [{**link, "offset": start} for start, link in found]


def _page_refs(string: str) -> Iterator[tuple[int, str]]:
    """Each ``[[...]]`` of ``string`` with its start, nested ones too (``[[a [[b]]]]`` names ``a [[b]]`` and
    ``b``), by matching the brackets; an unclosed one names nothing."""
    opened: list[int] = []
    at = 0
    while True:
        next_open, next_close = string.find("[[", at), string.find("]]", at)
        if next_close < 0:
            return
        if 0 <= next_open < next_close:
            opened.append(next_open)
            at = next_open + 2
            continue
        if opened:
            start = opened.pop()
            title = string[start + 2:next_close].strip()
            if title:
                yield start, title
        at = next_close + 2


@hookimpl
def xerj_register_formats(register) -> None:
    register(RoamFormat())
