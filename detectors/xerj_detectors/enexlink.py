"""``enexlink``: a link between Evernote notes, followed to the note it names; a note to its attachments.

An export carries no note's guid, so a note link (``evernote:///view/...``, as
the ``enex`` format records it in ``links``) is followed by the title its
anchor shows, which is the linked note's title as Evernote wrote it
(case-insensitive): the one note of the corpus titled so, or, where several
are, the one in the linking note's own export, else the one in an export of
the same folder (a notebook's link into another notebook of one account). A link whose text names no
note (edited after it was made, or several notes in other exports) is
followed by its guid, when another link to the same guid names exactly one
note. Two edge types, one detector (tag ``enexlink@1``):

- ``note_link`` (weight 1.0, confidence 0.9): the evidence is the line of the
  note's text holding the anchor;
- ``note_attachment`` (weight 0.8, confidence 0.99: read off the export's
  structure): from a note to each attachment, with the rationale ``"<title>
  carries attachment <file name>"``.

A corpus-wide detector: ``summarize`` lists each file's note titles and its
links' (guid, text) pairs, ``combine`` builds one lookup of both: ``("title", folded
title)`` to the note ids titled so, ``("guid", guid)`` to the note a guid names.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Mapping, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, clip, fold_name, hookimpl,
                                 line_at, make_draft)

LINK = "note_link"
ATTACHMENT = "note_attachment"


def _notes(file_docs: Sequence[SourceDocument]) -> Iterable[SourceDocument]:
    return (doc for doc in file_docs if doc.format == "enex" and doc.kind == "note")


class EnexlinkDetector:
    name = "enexlink"
    type = LINK
    types = (LINK, ATTACHMENT)
    tag = "enexlink@1"
    weight = 1.0
    confidence = 0.9
    attachment_weight = 0.8
    attachment_confidence = 0.99

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple, tuple] | None:
        titles, links = [], []
        for doc in _notes(file_docs):
            titles.append((fold_name(doc.title), doc.doc_id))
            for link in doc.fields.get("links") or ():
                guid, text = link.get("guid"), link.get("text")
                if isinstance(guid, str) and isinstance(text, str) and text:
                    links.append((guid, fold_name(text)))
        return (tuple(titles), tuple(links)) if titles or links else None

    def combine(self, partials: Iterable[tuple[tuple, tuple] | None], corpus: Corpus) -> DetectorState:
        titles: dict[str, list[str]] = {}
        texts: dict[str, set[str]] = {}
        for partial in partials:
            if partial is None:
                continue
            for title, doc_id in partial[0]:
                titles.setdefault(title, []).append(doc_id)
            for guid, text in partial[1]:
                texts.setdefault(guid, set()).add(text)
        # one flat mapping, read by key: a run remembers each file's detection by the keys it read
        found: dict[tuple[str, str], Any] = {("title", title): tuple(sorted(ids)) for title, ids in titles.items()}
        for guid, named in texts.items():
            owners = {ids[0] for text in named if len(ids := found.get(("title", text), ())) == 1}
            if len(owners) == 1:  # every text naming one note names the same one
                found[("guid", guid)] = owners.pop()
        return DetectorState(data=found)

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        notes = list(_notes(file_docs))
        if not notes:  # asks nothing of the state: a run remembers every other file's detection without a question
            return
        data: Mapping[tuple[str, str], Any] = state.data if state is not None and state.data else {}
        for doc in notes:
            seen: set[str] = set()
            encoded = None
            own_file, own_folder = doc.ax_path + "#", posixpath.dirname(doc.ax_path)
            for link in doc.fields.get("links") or ():
                text, offset = link.get("text"), link.get("offset", 0)
                if not isinstance(text, str) or not isinstance(offset, int):
                    continue
                ids = data.get(("title", fold_name(text)), ())
                if len(ids) > 1:
                    ids = [doc_id for doc_id in ids if doc_id.startswith(own_file)] or \
                        [doc_id for doc_id in ids if posixpath.dirname(doc_id.rpartition("#note-")[0]) == own_folder]
                target = ids[0] if len(ids) == 1 else data.get(("guid", str(link.get("guid"))))
                dst = corpus.document(target) if target else None
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                if encoded is None:
                    encoded = doc.text.encode("utf-8")
                quote = line_at(encoded, offset) or clip(f"{doc.title} links to note {text}")
                yield make_draft(self, doc, dst, quote=quote, offset=offset)
            for attachment_id in doc.fields.get("attachments") or ():
                attachment = corpus.document(attachment_id)
                if attachment is None:
                    continue
                filename = attachment.fields.get("filename") or attachment.title
                yield make_draft(self, doc, attachment, type=ATTACHMENT, weight=self.attachment_weight,
                                 confidence=self.attachment_confidence,
                                 quote=clip(f"{doc.title} carries attachment {filename}"))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(EnexlinkDetector())
