"""Obsidian canvases (JSON Canvas, ``.canvas``): a card for the board plus one document per arrow between notes.

A canvas lays out nodes (``text``, ``file``, ``link``, ``group``) and draws
``edges`` between them. The card's text is what a person wrote on the board
(text nodes, group and arrow labels); its ``shows`` field lists the files its
``file`` nodes show (vault-relative paths, a ``#heading`` or ``#^block`` kept
as written). Each arrow between two file nodes is a document of its own
(``{path}#arrow-{n}``, kind ``arrow``, its text ``a → b: label``) whose
``connects`` field holds the two files, from first: the ``canvas`` detector
links it to both, so a note's neighbourhood reaches the note a person drew an
arrow to. A file that is not a JSON Canvas (no ``nodes`` list) is refused.
"""

from __future__ import annotations

from typing import Any

import orjson

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.formats import FormatError, decode_text, extension, stem
from xerj_core.model import SourceDocument


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


class CanvasFormat:
    """JSON Canvas boards into ``ax-notes``."""

    name = "canvas"
    dataset = "ax-notes"
    priority = 10

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == ".canvas"

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        try:
            board = orjson.loads(decoded.text) if decoded.text.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise FormatError(f"not a JSON Canvas: {exc}") from None
        nodes = board.get("nodes", []) if isinstance(board, dict) else None
        if not isinstance(nodes, list):
            raise FormatError("not a JSON Canvas: no [nodes] list")
        files: dict[str, str] = {}  # node id -> the file it shows
        written: list[str] = []
        for node in nodes:
            if not isinstance(node, dict):
                continue
            kind = node.get("type")
            if kind == "file" and _text(node.get("file")):
                files[str(node.get("id"))] = _text(node["file"]) + _text(node.get("subpath"))
            elif kind == "text" and _text(node.get("text")):
                written.append(_text(node["text"]))
            elif kind == "group" and _text(node.get("label")):
                written.append(_text(node["label"]))
        arrows = []
        for edge in board.get("edges", []) if isinstance(board.get("edges"), list) else []:
            if not isinstance(edge, dict):
                continue
            label = _text(edge.get("label"))
            if label:
                written.append(label)
            ends = files.get(str(edge.get("fromNode"))), files.get(str(edge.get("toNode")))
            if ends[0] and ends[1] and ends[0] != ends[1]:
                arrows.append((ends[0], ends[1], label))
        title = stem(rel_path)
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text="\n\n".join(written),
                         section="", kind="file", shows=list(dict.fromkeys(files.values())) or None, ordinal=0,
                         encoding=decoded.encoding)]
        for n, (first, second, label) in enumerate(arrows, 1):
            # the notes by name: their paths are in connects (a path in the text would be cited again by pathcite)
            text = f"{stem(first.split('#')[0])} → {stem(second.split('#')[0])}" + (f": {label}" if label else "")
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#arrow-{n}", title=title, text=text,
                                 section=label or f"arrow {n}", kind="arrow", connects=[first, second], ordinal=n))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(CanvasFormat())
