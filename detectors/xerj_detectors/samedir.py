"""``samedir``: files of one directory chained in path order — each file's card to the next one's, never a clique.

A directory of ``n`` files gets ``n - 1`` edges. The evidence is a generated
rationale at offset 0: ``"<a> and <b> share directory <dir>"`` with the two
file names and the root-relative directory (``.`` for the root).
"""

from __future__ import annotations

import posixpath
from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft


class SamedirDetector:
    name = "samedir"
    type = "same_dir"
    tag = "samedir@2"
    weight = 0.3
    confidence = 0.4

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        if not file_docs:
            return
        card = file_docs[0]
        following = corpus.next_sibling(card.ax_path)
        dst = corpus.card(following) if following else None
        if dst is None or dst.doc_id == card.doc_id:
            return
        directory, name = posixpath.split(card.ax_path)
        rationale = f"{name} and {posixpath.basename(following)} share directory {directory or '.'}"
        yield make_draft(self, card, dst, quote=clip(rationale), offset=0)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(SamedirDetector())
