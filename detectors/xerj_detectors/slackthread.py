"""``slackthread``: a Slack thread that ran past its day, followed back to the day it began; a mention to its person.

The ``slack`` format reads a channel's day (``general/2024-01-15.json``) as
one document, listing the ``ts`` of the threads begun that day (``threads``),
the threads its replies belong to when those began another day
(``replies_to``), and the people its messages mention (``mentions``, user
ids). Two edge types, one detector (tag ``slackthread@1``):

- ``thread_reply`` (weight 0.9, confidence 0.99: read off the export's own
  ``thread_ts``): from a day holding replies to the day of the channel (the
  same folder) whose thread they continue, once a day; the evidence is the
  first such reply's line;
- ``mention`` (weight 0.6, confidence 0.95): from a day to the person
  (``users.json#U123`` of the same export: the folder above the channel's)
  each of its messages mentions, once a day; the evidence is the first line
  naming them.

A corpus-wide detector: ``summarize`` lists each day's thread roots and each
``users.json``'s people, ``combine`` maps ``("root", channel folder, ts)``
and ``("person", export folder, user id)`` to documents.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Mapping, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, line_at,
                                 make_draft)

THREAD = "thread_reply"
MENTION = "mention"


class SlackthreadDetector:
    name = "slackthread"
    type = THREAD
    types = (THREAD, MENTION)
    tag = "slackthread@1"
    weight = 0.9
    confidence = 0.99
    mention_weight = 0.6
    mention_confidence = 0.95

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple, ...] | None:
        found = []
        for doc in file_docs:
            if doc.format != "slack":
                continue
            if doc.kind == "day":
                folder = posixpath.dirname(doc.ax_path)
                found += (("root", folder, ts, doc.doc_id) for ts in doc.fields.get("threads") or ())
            elif doc.kind == "person" and isinstance(doc.fields.get("user_id"), str):
                found.append(("person", posixpath.dirname(doc.ax_path), doc.fields["user_id"], doc.doc_id))
        return tuple(found) or None

    def combine(self, partials: Iterable[tuple[tuple, ...] | None], corpus: Corpus) -> DetectorState:
        data: dict[tuple[str, str, str], str] = {}
        for partial in partials:
            for kind, folder, key, doc_id in partial or ():
                data.setdefault((kind, folder, key), doc_id)
        return DetectorState(data=data)

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        days = [doc for doc in file_docs if doc.format == "slack" and doc.kind == "day"
                and (doc.fields.get("replies_to") or doc.fields.get("mentions"))]
        if not days:  # asks nothing of the state: a run remembers every other file's detection without a question
            return
        data: Mapping[tuple[str, str, str], Any] = state.data if state is not None and state.data else {}
        for doc in days:
            folder = posixpath.dirname(doc.ax_path)
            lines = doc.text.splitlines()
            encoded = doc.text.encode("utf-8")
            # two threads begun the same day make one claim: detect_file keeps the first draft of each
            for reply in doc.fields.get("replies_to") or ():
                root, offset = reply.get("thread"), reply.get("offset")
                dst = corpus.document(data.get(("root", folder, root)) or "") if isinstance(root, str) else None
                if dst is None or dst.doc_id == doc.doc_id or not isinstance(offset, int):
                    continue
                quote = line_at(encoded, offset) or clip(f"{doc.title} {doc.section} continues a thread")
                yield make_draft(self, doc, dst, quote=quote, offset=offset)
            export = posixpath.dirname(folder)
            for user in dict.fromkeys(doc.fields.get("mentions") or ()):
                dst = corpus.document(data.get(("person", export, user)) or "")
                if dst is None:
                    continue
                quote = next((line.strip() for line in lines if f"@{dst.title}" in line or f"@{user}" in line), "")
                yield make_draft(self, doc, dst, type=MENTION, weight=self.mention_weight,
                                 confidence=self.mention_confidence,
                                 quote=quote or clip(f"{doc.title} {doc.section} mentions {dst.title}"))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(SlackthreadDetector())
