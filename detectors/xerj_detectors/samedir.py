"""``samedir``: files of one directory chained in path order — each file's card to the next one's, never a clique.

A directory of ``n`` files gets ``n - 1`` edges. The evidence is a generated
rationale at offset 0: ``"<a> and <b> share directory <dir>"`` with the two
file names and the root-relative directory (``.`` for the root). A Joplin
folder's items are left out: their notebooks group them.
"""

from __future__ import annotations

import posixpath
from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft


# The format of a Joplin folder's items (see xerj_core.autoindex.builtin_formats.joplin): their order in it is
# that of random ids, and their notebooks are what groups them (the joplin detector's edges).
JOPLIN = "joplin"


class SamedirDetector:
    name = "samedir"
    type = "same_dir"
    # 3: Joplin's items are left out: its folder holds every item of every notebook, named by random ids
    tag = "samedir@3"
    weight = 0.3
    confidence = 0.4

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        if not file_docs:
            return
        card = file_docs[0]
        if card.format == JOPLIN:
            return
        following = corpus.next_sibling(card.ax_path)
        dst = corpus.card(following) if following else None
        if dst is None or dst.doc_id == card.doc_id or dst.format == JOPLIN:
            return
        directory, name = posixpath.split(card.ax_path)
        rationale = f"{name} and {posixpath.basename(following)} share directory {directory or '.'}"
        yield make_draft(self, card, dst, quote=clip(rationale), offset=0)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(SamedirDetector())
