"""``joplin``: a Joplin note to its notebook and to its tags, a notebook to the notebook holding it.

Read off the items the ``joplin`` format reads (see its module): two edge
types, one detector (tag ``joplin@1``), both generated rationales at offset 0
(what joins the items is a property, not a line of text):

- ``notebook`` (weight 0.5, confidence 0.99): from a note, or a notebook, to
  the notebook its ``parent_id`` names: ``"<title> is in notebook <title>"``;
- ``tagged`` (weight 0.6, confidence 0.99): from a note to each tag put on it:
  ``"<title> is tagged <tag>"``.

A corpus-wide detector: ``summarize`` lists each tagging's (note, tag) pair,
``combine`` maps each note's id to its tags' ids; items are found by their
file name, which is their id.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft

NOTEBOOK = "notebook"
TAGGED = "tagged"


def _item(corpus: Corpus, item_id: Any, wanted: str) -> SourceDocument | None:
    """The card of the Joplin item ``item_id`` when it is a ``wanted`` one (``joplin_type``)."""
    if not isinstance(item_id, str) or not item_id:
        return None
    for path in corpus.by_stem(item_id):
        card = corpus.card(path)
        if card is not None and card.format == "joplin" and card.fields.get("joplin_type") == wanted:
            return card
    return None


class JoplinDetector:
    name = "joplin"
    type = NOTEBOOK
    types = (NOTEBOOK, TAGGED)
    tag = "joplin@1"
    weight = 0.5
    confidence = 0.99
    tagged_weight = 0.6

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        card = file_docs[0] if file_docs else None
        if card is None or card.format != "joplin" or card.fields.get("joplin_type") != "tagging":
            return None
        note, tag = card.fields.get("note_id"), card.fields.get("tag_id")
        return ((note, tag),) if isinstance(note, str) and isinstance(tag, str) else None

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        tags: dict[str, set[str]] = {}
        for partial in partials:
            for note, tag in partial or ():
                tags.setdefault(note, set()).add(tag)
        return DetectorState(data={note: tuple(sorted(ids)) for note, ids in tags.items()})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        card = file_docs[0] if file_docs else None
        if card is None or card.format != "joplin" or card.fields.get("joplin_type") not in ("note", "notebook"):
            return
        notebook = _item(corpus, card.fields.get("parent_id"), "notebook")
        if notebook is not None and notebook.doc_id != card.doc_id:
            yield make_draft(self, card, notebook, quote=clip(f"{card.title} is in notebook {notebook.title}"))
        if card.fields.get("joplin_type") != "note" or state is None or not state.data:
            return
        tags: Mapping[str, tuple[str, ...]] = state.data
        for tag_id in tags.get(str(card.fields.get("joplin_id")), ()):
            tag = _item(corpus, tag_id, "tag")
            if tag is not None:
                yield make_draft(self, card, tag, type=TAGGED, weight=self.tagged_weight,
                                 quote=clip(f"{card.title} is tagged {tag.title}"))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(JoplinDetector())
