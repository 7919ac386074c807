"""``doi``: a reference to the PDF whose first page carries its DOI, and to its copies in other bibliographies.

A paper a publisher's site hands out prints its DOI on its first page
(``DOI: 10.1002/lpor.202300973``), whatever its file is called
(``S0169433221010588.pdf``, ``full-text.pdf``). So a bibliography entry or a
Zotero reference with a ``doi`` is linked (``doi_match``, confidence 0.85) to
each PDF of the corpus whose first page holds that DOI, at most
:data:`MAX_FILES` of them (copies), by path. Only the first page counts: the
reference list at a paper's end names the DOIs of other papers. DOIs compare
case-insensitively, as the DOI system does.

An entry is also linked (``same_reference``, confidence 0.95) to the entries of
other files with its DOI: one paper in a thesis's ``.bib``, a Better BibTeX
export and the Zotero library, each copy leading to the others.

A corpus-wide detector: ``summarize`` lists the DOIs on each PDF's first page
and those of each file's entries, ``combine`` maps each to the documents
holding it (at most :data:`MAX_FILES` each, by id). The evidence is a
generated rationale (``"<key>: doi 10.1002/... is on the first page of
<file>"``).
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
SAME = "same_reference"
PDF, ENTRY = "pdf", "entry"  # what holds a DOI, in the state's keys


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
    types = ("doi_match", SAME)
    tag = "doi@1"
    weight = 0.9
    confidence = 0.85
    same_confidence = 0.95

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str, str], ...] | None:
        if not file_docs:
            return None
        if file_docs[0].format == "pdf":
            card = file_docs[0].doc_id
            return tuple((PDF, doi, card) for doi in first_page_dois(file_docs)) or None
        found = tuple((ENTRY, normalized(doc.fields["doi"]), doc.doc_id) for doc in file_docs
                      if doc.kind == "entry" and isinstance(doc.fields.get("doi"), str) and doc.fields["doi"].strip())
        return found or None

    def combine(self, partials: Iterable[tuple[tuple[str, str, str], ...] | None], corpus: Corpus) -> DetectorState:
        holders: dict[tuple[str, str], list[str]] = {}
        for partial in partials:
            for kind, doi, doc_id in partial or ():
                holders.setdefault((kind, doi), []).append(doc_id)
        # one flat mapping, read by key: a run remembers each file's detection by the keys it read
        return DetectorState(data={key: tuple(sorted(ids)[:MAX_FILES]) for key, ids in holders.items()})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            doi = doc.fields.get("doi") if doc.kind == "entry" else None
            # the state is read only for an entry with a DOI: a run remembers every other file's detection
            # without a question about it
            if not isinstance(doi, str) or not doi.strip() or state is None or not state.data:
                continue
            key = doc.fields.get("citekey") or doc.fields.get("zotero_key") or doc.title
            for card in state.data.get((PDF, normalized(doi)), ()):
                dst = corpus.document(card)
                if dst is not None:
                    yield make_draft(self, doc, dst, quote=clip(f"{key}: doi {doi.strip()} is on the first page "
                                                                f"of {dst.ax_path}"))
            for other in state.data.get((ENTRY, normalized(doi)), ()):
                dst = corpus.document(other)
                if dst is not None and dst.ax_path != doc.ax_path:
                    yield make_draft(self, doc, dst, type=SAME, confidence=self.same_confidence,
                                     quote=clip(f"{key} and {dst.ax_path}'s entry share doi {doi.strip()}"))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(DoiDetector())
