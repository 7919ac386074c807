"""``hashtag``: notes that carry the same inline ``#tag`` are linked — an example third-party detector.

A tag is ``#`` followed by a letter and then letters, digits, ``_``, ``-`` or
``/`` (``#baking``, ``#project/xerj``), written in prose: not after a word
character, ``#``, ``&``, ``/`` or ``(`` (URL fragments, entities, anchors), not
inside Markdown code, and not a bare hex colour (``#fff``, ``#a0b1c2``). Tags
compare case-insensitively. Source files (format ``code``) are not read.

The files carrying one tag are chained in path order, each to the next (never
a clique): the edge goes from the document where the tag first appears in the
earlier file to the later file's card, and its evidence is the line holding the
tag. A corpus-wide detector: ``summarize`` lists each file's tags, ``combine``
builds the per-tag chains, ``detect`` emits one file's links.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, line_at, make_draft,
                                 mask_code)

__version__ = "0.1.0"

_TAG = re.compile(rb"(?<![\w#&/(])#([A-Za-z][\w/\-]*)")
_HEX_COLOUR = re.compile(r"[0-9a-fA-F]{3}|[0-9a-fA-F]{6}")


def tag_occurrences(file_docs: Sequence[SourceDocument]) -> dict[str, tuple[SourceDocument, int]]:
    """``{tag: (document, byte offset)}`` of each tag's first appearance in one file."""
    first: dict[str, tuple[SourceDocument, int]] = {}
    for doc in file_docs:
        if doc.format == "code" or "#" not in doc.text:
            continue
        data = doc.text.encode("utf-8")
        scanned = mask_code(data) if doc.format == "markdown" else data
        for match in _TAG.finditer(scanned):
            raw = match.group(1).decode("utf-8", "replace").rstrip("/-")
            if not raw or _HEX_COLOUR.fullmatch(raw):
                continue
            first.setdefault(raw.lower(), (doc, match.start()))
    return first


class HashtagDetector:
    name = "hashtag"
    type = "hashtag"
    tag = "hashtag@1"
    weight = 0.4
    confidence = 0.6

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, tuple[str, ...]] | None:
        if not file_docs:
            return None
        return (file_docs[0].ax_path, tuple(sorted(tag_occurrences(file_docs))))

    def combine(self, partials: Iterable[tuple[str, tuple[str, ...]] | None], corpus: Corpus) -> DetectorState:
        carriers: dict[str, list[str]] = defaultdict(list)
        for partial in sorted(p for p in partials if p is not None):
            path, tags = partial
            for tag in tags:
                carriers[tag].append(path)
        following: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for tag in sorted(carriers):
            paths = carriers[tag]
            for here, after in zip(paths, paths[1:]):
                following[here].append((tag, after))
        return DetectorState(data=dict(following))

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        if not file_docs or state is None or not state.data:
            return
        links = state.data.get(file_docs[0].ax_path)
        if not links:
            return
        where = tag_occurrences(file_docs)
        seen: set[tuple[str, str]] = set()
        for tag, after in links:
            dst = corpus.card(after)
            if dst is None or tag not in where:
                continue
            doc, offset = where[tag]
            if (doc.doc_id, dst.doc_id) in seen or doc.doc_id == dst.doc_id:
                continue
            seen.add((doc.doc_id, dst.doc_id))
            yield make_draft(self, doc, dst, quote=line_at(doc.text.encode("utf-8"), offset), offset=offset)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(HashtagDetector())
