"""``roamlink``: a Roam page's references, followed to the page it names or the page holding the block it cites.

The ``roam`` format records each page's ``links`` (``{page, offset}`` for
``[[Page]]``, ``#tag``, ``#[[Two words]]`` and an attribute's ``Name::``;
``{block, offset}`` for ``((uid))``, in an embed or an alias too) and its
blocks' uids. A page is named by its title as Roam compares titles (case and
composition aside: ``fold_name``): the one page of the corpus titled so, or,
where several graphs hold one, the one in the citing page's own export. A
block is found by its uid among every document's blocks (``Corpus.by_block``,
the first by path when two exports hold it). Two edge types, one
detector (tag ``roamlink@1``):

- ``page_ref`` (weight 1.0, confidence 0.95, as a wikilink's): a page to each
  page it names;
- ``block_ref`` (weight 0.9, confidence 0.95): a page to the page holding a
  block it cites or embeds (a citation of its own block makes none).

Each page and block is linked once per citing page, the evidence the line of
the outline holding its first mention. A reference to a page or block that is
not in the corpus makes no edge (Roam makes a page for every title named, so
an export names few that it lacks).

A corpus-wide detector: ``summarize`` lists each file's page titles,
``combine`` maps each folded title to the ids of the pages titled so.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, fold_name, hookimpl, line_at,
                                 make_draft)

PAGE = "page_ref"
BLOCK = "block_ref"


def _pages(file_docs: Sequence[SourceDocument]) -> Iterable[SourceDocument]:
    return (doc for doc in file_docs if doc.format == "roam" and doc.kind == "page")


class RoamlinkDetector:
    name = "roamlink"
    type = PAGE
    types = (PAGE, BLOCK)
    tag = "roamlink@1"
    weight = 1.0
    confidence = 0.95
    block_weight = 0.9

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        return tuple((fold_name(doc.title), doc.doc_id) for doc in _pages(file_docs)) or None

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        titles: dict[str, list[str]] = {}
        for partial in partials:
            for title, doc_id in partial or ():
                titles.setdefault(title, []).append(doc_id)
        # read by key: a run remembers each file's detection by the keys it read
        return DetectorState(data={title: tuple(sorted(ids)) for title, ids in titles.items()})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        pages = list(_pages(file_docs))
        if not pages:  # asks nothing of the state: a run remembers every other file's detection without a question
            return
        data: Mapping[str, Any] = state.data if state is not None and state.data else {}
        for doc in pages:
            own_export = doc.ax_path + "#"
            seen: set[tuple[str, str]] = set()
            encoded = None
            for link in doc.fields.get("links") or ():
                offset = link.get("offset")
                if not isinstance(offset, int):
                    continue
                if isinstance(link.get("page"), str):
                    kind = PAGE
                    ids = data.get(fold_name(link["page"]), ())
                    if len(ids) > 1:
                        ids = [doc_id for doc_id in ids if doc_id.startswith(own_export)]
                    dst = corpus.document(ids[0]) if len(ids) == 1 else None
                elif isinstance(link.get("block"), str):
                    kind, dst = BLOCK, corpus.by_block(link["block"])
                else:
                    continue
                if dst is None or dst.doc_id == doc.doc_id or (kind, dst.doc_id) in seen:
                    continue
                seen.add((kind, dst.doc_id))
                if encoded is None:
                    encoded = doc.text.encode("utf-8")
                yield make_draft(self, doc, dst, type=kind, quote=line_at(encoded, offset) or doc.title,
                                 offset=offset, weight=self.weight if kind == PAGE else self.block_weight)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(RoamlinkDetector())
