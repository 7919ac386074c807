"""``doi``: a reference to the PDF whose first page carries its DOI.

A paper a publisher's site hands out prints its DOI on its first page
(``DOI: 10.1002/lpor.202300973``), whatever its file is called
(``S0169433221010588.pdf``, ``full-text.pdf``). So a bibliography entry or a
Zotero reference with a ``doi`` is linked (``doi_match``, confidence 0.85) to
each PDF of the corpus whose first page holds that DOI, at most
:data:`MAX_FILES` of them (copies), by path. Only the first page counts: the
reference list at a paper's end names the DOIs of other papers. DOIs compare
case-insensitively, as the DOI system does.

A corpus-wide detector: ``summarize`` lists the DOIs on each PDF's first page,
``combine`` maps each to the PDFs holding it. The evidence is a generated
rationale (``"<key>: doi 10.1002/... is on the first page of <file>"``).
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft

# a DOI: "10." then a registrant code of digits, a slash, and a suffix running to the next space (or a character a
# DOI written in running text or HTML does not hold)
_DOI = re.compile(r"\b10\.\d{4,9}/[^\s\"<>]+")
_TRAILING = ".,;:)]}'’”"
MAX_FILES = 3


def normalized(doi: str) -> str:
    """``doi`` as DOIs compare: lowercased, without a resolver's address or the punctuation a sentence ends on."""
    doi = doi.strip().lower()
    for prefix in ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:"):
        if doi.startswith(prefix):
            doi = doi[len(prefix):]
    return doi.rstrip(_TRAILING)


def first_page_dois(file_docs: Sequence[SourceDocument]) -> list[str]:
    """The DOIs on the first page of a PDF's documents (its card and pages, as the ``pdf`` format gives them)."""
    page = next((doc for doc in file_docs if doc.format == "pdf" and doc.fields.get("ordinal") == 1), None)
    return list(dict.fromkeys(normalized(match) for match in _DOI.findall(page.text))) if page is not None else []


class DoiDetector:
    name = "doi"
    type = "doi_match"
    tag = "doi@1"
    weight = 0.9
    confidence = 0.85

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        if not file_docs or file_docs[0].format != "pdf":
            return None
        card = file_docs[0].doc_id
        return tuple((doi, card) for doi in first_page_dois(file_docs)) or None

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        holders: dict[str, list[str]] = {}
        for partial in partials:
            for doi, card in partial or ():
                holders.setdefault(doi, []).append(card)
        return DetectorState(data={doi: tuple(sorted(cards)[:MAX_FILES]) for doi, cards in holders.items()})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            doi = doc.fields.get("doi") if doc.kind == "entry" else None
            # the state is read only for an entry with a DOI: a run remembers every other file's detection
            # without a question about it
            if not isinstance(doi, str) or not doi.strip() or state is None or not state.data:
                continue
            for card in state.data.get(normalized(doi), ()):
                dst = corpus.document(card)
                if dst is not None:
                    key = doc.fields.get("citekey") or doc.fields.get("zotero_key") or doc.title
                    yield make_draft(self, doc, dst, quote=clip(f"{key}: doi {doi.strip()} is on the first page "
                                                                f"of {dst.ax_path}"))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(DoiDetector())
