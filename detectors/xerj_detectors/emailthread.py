"""``emailthread``: a reply to the message it answers, and a message to its attachments.

Two edge types, one detector (tag ``emailthread@1``):

- ``email_thread`` (weight 0.8, confidence 0.95): from a message to its parent,
  the message whose Message-ID its ``In-Reply-To`` names, or failing that the
  nearest ancestor in ``References`` (read from the last) that is in the
  corpus — across files too (a reply saved as its own ``.eml``, or in another
  mailbox). Rationale: ``"<subject> replies to <subject> (In-Reply-To <id>)"``.
- ``email_attachment`` (weight 0.8, confidence 0.99: read off the MIME
  structure): from a message to each attachment document. Rationale:
  ``"<subject> carries attachment <file name>"``.

Both are generated rationales at offset 0: headers are not part of a message's text.

A corpus-wide detector: ``summarize`` lists each file's Message-IDs,
``combine`` builds the Message-ID → document index (the smallest document id
when several carry one), ``detect`` looks parents up in it.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft,
                                 smallest_owners)

THREAD = "email_thread"
ATTACHMENT = "email_attachment"


class EmailthreadDetector:
    name = "emailthread"
    type = THREAD
    types = (THREAD, ATTACHMENT)
    tag = "emailthread@1"
    weight = 0.8
    confidence = 0.95
    attachment_confidence = 0.99

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        found = tuple((doc.fields["message_id"], doc.doc_id) for doc in file_docs
                      if isinstance(doc.fields.get("message_id"), str) and doc.fields["message_id"])
        return found or None

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        return DetectorState(data=smallest_owners(partials))

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        owners: dict[str, str] = state.data if state is not None and state.data else {}
        for doc in file_docs:
            if doc.kind != "message":
                continue
            parent = None
            in_reply_to = doc.fields.get("in_reply_to")
            references = doc.fields.get("references") or []
            asked = [("In-Reply-To", in_reply_to)] + [("References", ref) for ref in reversed(references)]
            for header, message_id in asked:
                if not isinstance(message_id, str) or not message_id:
                    continue
                owner = owners.get(message_id)
                found = corpus.document(owner) if owner is not None else None
                if found is not None and found.doc_id != doc.doc_id:
                    parent = found
                    yield make_draft(
                        self, doc, parent, type=THREAD,
                        quote=clip(f"{doc.title} replies to {parent.title} ({header} {message_id})"),
                    )
                    break
            for attachment_id in doc.fields.get("attachments") or ():
                attachment = corpus.document(attachment_id)
                if attachment is None or attachment.doc_id == doc.doc_id:
                    continue
                filename = attachment.fields.get("filename") or attachment.title
                yield make_draft(
                    self, doc, attachment, type=ATTACHMENT, confidence=self.attachment_confidence,
                    quote=clip(f"{doc.title} carries attachment {filename}"),
                )


@hookimpl
def xerj_register_detectors(register) -> None:
    register(EmailthreadDetector())
