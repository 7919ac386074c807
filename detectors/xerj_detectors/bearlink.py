"""``bearlink``: a link between Bear notes, followed to the note its title names, or to one of its headings.

The ``bear`` format records each note's ``[[Title]]``, ``[[Title/Heading]]``
and ``[[Title|label]]`` as ``note_links`` (``{target, offset}``). A target is
a note's title as Bear compares titles (case and composition aside:
``fold_name``), or a title, a slash and one of that note's headings (the
section so labelled, else the one whose anchor the heading's slug is: Bear
shows ``Bear ==Pro==`` as "Bear Pro"); a target naming a note whole wins
over reading its slash as a heading's. Among several notes of one title, the
one in the linking note's own backup is meant; where that leaves several,
none is; a note naming itself links nothing. One
edge type (tag ``bearlink@1``): ``note_link`` (weight 1.0, confidence 0.95,
as a wikilink's) from the document holding the link to the note, or its
section; the evidence is the line holding the link, a target once per
document.

A corpus-wide detector: ``summarize`` lists each backup's note titles and its
sections' headings and anchors, ``combine`` maps ``("note", folded title)`` to
the ids of the notes titled so, ``("heading", note id, folded heading)`` and
``("anchor", note id, anchor)`` to a section.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, fold_name, hookimpl, line_at,
                                 make_draft)
from xerj_core.text import slugify

LINK = "note_link"


class BearlinkDetector:
    name = "bearlink"
    type = LINK
    tag = "bearlink@1"
    weight = 1.0
    confidence = 0.95

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple, tuple] | None:
        notes, headings = [], []
        for doc in file_docs:
            if doc.format != "bear":
                continue
            if doc.kind == "note":
                notes.append((fold_name(doc.title), doc.doc_id))
            elif doc.section and isinstance(doc.fields.get("note"), str):
                headings.append((doc.fields["note"], fold_name(doc.section), doc.fields.get("anchor"), doc.doc_id))
        return (tuple(notes), tuple(headings)) if notes else None

    def combine(self, partials: Iterable[tuple[tuple, tuple] | None], corpus: Corpus) -> DetectorState:
        found: dict[tuple, Any] = {}
        for partial in partials:
            if partial is None:
                continue
            for title, doc_id in partial[0]:
                found[("note", title)] = (*found.get(("note", title), ()), doc_id)
            for note, heading, anchor, doc_id in partial[1]:
                found.setdefault(("heading", note, heading), doc_id)  # the first section of a repeated heading
                found.setdefault(("anchor", note, anchor), doc_id)
        return DetectorState(data=found)

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        linking = [doc for doc in file_docs if doc.format == "bear" and doc.fields.get("note_links")]
        if not linking:  # asks nothing of the state: a run remembers every other file's detection without a question
            return
        data: Mapping[tuple, Any] = state.data if state is not None and state.data else {}
        for doc in linking:
            seen = {doc.doc_id, doc.fields.get("note", doc.doc_id)}  # itself, and its own note's card
            encoded = None
            for link in doc.fields["note_links"]:
                target, offset = link.get("target"), link.get("offset")
                if not isinstance(target, str) or not isinstance(offset, int):
                    continue
                dst = corpus.document(_resolved(data, target, doc.ax_path) or "")
                if dst is None or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                if encoded is None:
                    encoded = doc.text.encode("utf-8")
                yield make_draft(self, doc, dst, quote=line_at(encoded, offset) or target, offset=offset)


def _resolved(data: Mapping[tuple, Any], target: str, own_backup: str) -> str | None:
    """The id ``target`` names: a note by its whole title, else a note's section by ``title/heading``."""
    note = _note(data, target, own_backup)
    if note is not None:
        return note
    at = target.find("/")
    while at > 0:
        note = _note(data, target[:at], own_backup)
        if note is not None:
            heading = target[at + 1:].strip()
            return data.get(("heading", note, fold_name(heading))) or data.get(("anchor", note, slugify(heading)))
        at = target.find("/", at + 1)
    return None


def _note(data: Mapping[tuple, Any], title: str, own_backup: str) -> str | None:
    ids = data.get(("note", fold_name(title.strip())), ())
    if len(ids) > 1:
        ids = [doc_id for doc_id in ids if doc_id.startswith(own_backup + "#")]
    return ids[0] if len(ids) == 1 else None


@hookimpl
def xerj_register_detectors(register) -> None:
    register(BearlinkDetector())
