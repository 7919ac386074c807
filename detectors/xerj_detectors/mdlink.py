"""``mdlink``: Markdown links ``[text](relative/path.md)`` (and images, and ``[id]: path`` definitions).

Only Markdown documents are read (notes, and the Markdown a Jupyter notebook's
cells make), with code blocks and spans masked. A
destination resolves relative to the linking file (``/``-rooted: to the root);
URLs with a scheme, ``//host`` links and bare ``#anchors`` are not corpus
files. A destination without extension may name a note (``.md``); a folder
names its ``index.md``/``README.md``. ``#fragment`` picks that section of the
target when it exists. Evidence is the line holding the link's ``[``.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from xerj_core.detectors import (MARKDOWN_FORMATS, Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl,
                                 line_at, make_draft, mask_code, resolve_relative)

# [text](dest "title") — text may hold one level of brackets; dest is <...> or has balanced parentheses
_INLINE = re.compile(
    rb"!?\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]"
    rb"\(\s*(<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))+)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_DEFINITION = re.compile(rb"^ {0,3}\[(?!\^)[^\]\n]+\]:[ \t]*(<[^<>\n]*>|\S+)", re.M)
INDEX_NAMES = ("index.md", "README.md", "readme.md")


class MdlinkDetector:
    name = "mdlink"
    type = "mdlink"
    tag = "mdlink@2"
    weight = 0.9
    confidence = 0.9

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format not in MARKDOWN_FORMATS or ("](" not in doc.text and "]:" not in doc.text):
                continue
            data = doc.text.encode("utf-8")
            scanned = mask_code(data)
            found = [(m.start(), m.group(1)) for m in _INLINE.finditer(scanned)]
            found += [(m.start(), m.group(1)) for m in _DEFINITION.finditer(scanned)]
            found.sort()
            seen: set[str] = set()
            for offset, destination in found:
                dst = resolve_relative(
                    corpus, doc.ax_path, destination.decode("utf-8", "replace"), index_names=INDEX_NAMES
                )
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, offset), offset=offset)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(MdlinkDetector())
