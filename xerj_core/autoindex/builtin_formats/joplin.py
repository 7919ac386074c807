"""Joplin's own folder of items (a file-system sync target, a "RAW - Joplin Export Directory"): notes as notes.

Joplin keeps each item as ``<id>.md``, ``id`` 32 hexadecimal digits: the
item's title on the first line, a blank line, its body, a blank line, then its
properties as ``key: value`` lines, the last ``type_: N``. A note (``type_:
1``) is read as Markdown (an HTML note, ``markup_language: 2``, for its
visible text), titled by its title, which is also its one alias (the name a
``[[link]]`` finds it by); its links to other items, ``[text](:/<id>)``, are
followed by ``mdlink``. A notebook (``2``), a tag (``5``) and an attachment
(``4``: its ``mime`` and ``size``; its bytes lie in ``.resource/``, which the
walk passes by) are a card each, titled alike. A tag put on a note (``6``) is
a card without title or text naming ``note_id`` and ``tag_id``, so that the
``joplin`` detector can join the two.

Every card says which item it is in ``joplin_type`` (``note``, ``notebook``,
``tag``, ``resource``, ``tagging``) and keeps ``joplin_id``, ``parent_id`` (a
note's or a notebook's notebook) and ``created`` / ``updated`` (the times its
user saw, ISO 8601) with ``created_ms`` / ``updated_ms``; a note's card also
``source_url``, ``author`` and, for a to-do, ``todo_completed``.

Items Joplin keeps for itself (revisions, settings, master keys, item changes)
are passed by as ``joplin_internal``; so is an item encrypted end to end, whose
text only Joplin can read. A ``.md`` file so named that holds no properties
block is read as any Markdown note.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import attrs

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.builtin_formats.html import html_to_text
from xerj_core.autoindex.builtin_formats.markdown import MarkdownFormat
from xerj_core.autoindex.formats import FormatDeclined, decode_text, file_name
from xerj_core.model import SourceDocument

ITEM_NAME = re.compile(r"[0-9a-f]{32}\.md")
# The properties block: "key: value" lines after the last blank line, the last one "type_: N".
_PROPERTY = re.compile(r"([a-z_]+): ?(.*)")
INTERNAL = "joplin_internal"
NOTE, NOTEBOOK, RESOURCE, TAG, TAGGING = 1, 2, 4, 5, 6
_TYPES = {NOTE: "note", NOTEBOOK: "notebook", RESOURCE: "resource", TAG: "tag", TAGGING: "tagging"}
_INTERNAL_NAMES = {3: "setting", 7: "saved search", 8: "alarm", 9: "master key", 10: "item change",
                   11: "note resource", 12: "resource state", 13: "revision", 14: "migration", 15: "smart filter",
                   16: "command"}


def properties(text: str) -> tuple[str, dict[str, str]] | None:
    """``(title and body, properties)`` of a Joplin item's text, or None when it ends in no properties block."""
    stripped = text.rstrip("\n")
    cut = stripped.rfind("\n\n")
    block = stripped[cut + 2:] if cut >= 0 else stripped
    found: dict[str, str] = {}
    for line in block.split("\n"):
        match = _PROPERTY.fullmatch(line)
        if match is None:
            return None
        found[match.group(1)] = match.group(2)
    if not found.get("type_", "").isdecimal() or "id" not in found:
        return None
    return (stripped[:cut] if cut >= 0 else ""), found


def _instant_ms(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


class JoplinFormat:
    """Joplin's items (``<32 hex digits>.md``) into ``ax-notes``: notes, notebooks, tags and taggings."""

    name = "joplin"
    dataset = "ax-notes"
    priority = 20  # over Markdown, whose extension its items carry
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return ITEM_NAME.fullmatch(file_name(rel_path)) is not None

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        text = decode_text(data, rel_path).text
        split = properties(text)
        if split is None:  # a Markdown note that happens to be named so (its documents this format's, as any)
            return [attrs.evolve(doc, format=self.name) for doc in MarkdownFormat().parse(rel_path, data, mtime_ms)]
        content, props = split
        kind = int(props["type_"])
        if kind not in _TYPES:
            raise FormatDeclined(f"a Joplin {_INTERNAL_NAMES.get(kind, f'type {kind}')} item, which Joplin keeps "
                                 f"for itself", kind=INTERNAL)
        if props.get("encryption_applied") == "1":
            raise FormatDeclined("a Joplin item encrypted end to end: only Joplin can read it", kind=INTERNAL)
        title, _, body = content.partition("\n")
        title = title.strip() or "Untitled"
        common: dict[str, Any] = {
            "joplin_id": props["id"], "joplin_type": _TYPES[kind], "parent_id": props.get("parent_id") or None,
            "created": props.get("user_created_time") or props.get("created_time") or None,
            "updated": props.get("user_updated_time") or props.get("updated_time") or None,
        }
        common["created_ms"], common["updated_ms"] = _instant_ms(common["created"]), _instant_ms(common["updated"])
        if kind == TAGGING:
            return [document(self, rel_path, mtime_ms, doc_id=rel_path, title="", text="", section="",
                             kind="file", note_id=props.get("note_id") or None, tag_id=props.get("tag_id") or None,
                             **common)]
        if kind != NOTE:
            extra = {"mime": props.get("mime") or None, "size": int(props["size"]) if props.get("size", "").isdecimal()
                     else None} if kind == RESOURCE else {}
            return [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text="", section="",
                             kind="file", aliases=[title], **common, **extra)]
        body = body.lstrip("\n")
        if props.get("markup_language") == "2":  # an HTML note
            body = html_to_text(body) if body.strip() else ""
        docs = MarkdownFormat().parse(rel_path, body.encode("utf-8"), mtime_ms)
        card = docs[0]
        fields = {**card.fields, "aliases": [title],
                  **{key: value for key, value in common.items() if value is not None}}
        for key in ("source_url", "author"):
            if props.get(key):
                fields[key] = props[key]
        if props.get("is_todo") == "1":
            fields["todo_completed"] = props.get("todo_completed", "0") not in ("", "0")
        out = [attrs.evolve(card, title=title, format=self.name, fields=fields)]
        out.extend(attrs.evolve(doc, format=self.name) for doc in docs[1:])
        return out


@hookimpl
def xerj_register_formats(register) -> None:
    register(JoplinFormat())
