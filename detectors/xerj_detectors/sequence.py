"""``sequence``: reading order inside one file — the card opens the first section, each section precedes the next.

The chain is the file card followed by the file's other documents in the
order the format returned them, attachments left out (``emailthread`` links
those). A file with only a card has no sequence edges. The evidence is a
generated rationale at offset 0: ``"<label> opens <file>"`` for the card's
edge, ``"<label> precedes <label> of <file>"`` for the others, a label being
the section label (else the title).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft


def label(doc: SourceDocument) -> str:
    return doc.section or doc.title or doc.doc_id


class SequenceDetector:
    name = "sequence"
    type = "sequence"
    tag = "sequence@2"
    weight = 0.8
    confidence = 0.99

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        if len(file_docs) < 2:
            return
        card = file_docs[0]
        chain = [card, *(doc for doc in file_docs[1:] if doc.kind != "attachment")]
        for before, after in zip(chain, chain[1:]):
            if before is card:
                rationale = f"{label(after)} opens {card.ax_path}"
            else:
                rationale = f"{label(before)} precedes {label(after)} of {card.ax_path}"
            yield make_draft(self, before, after, quote=clip(rationale), offset=0)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(SequenceDetector())
