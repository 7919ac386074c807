"""``latex``: how a LaTeX project holds together: the files a document reads in, its bibliography, the entries it
cites and the labels it refers to.

LaTeX documents are read (format ``latex``), through the ``links`` the format
noted (a command's target as written, and where it shows in the text). Four
edge types, one detector (tag ``latex@1``):

- ``latex_include``: ``\\input``, ``\\include``, ``\\subfile``, ``\\import`` and
  ``\\subimport`` to the card of the file they read in;
- ``bibliography``: ``\\bibliography{refs}`` and ``\\addbibresource{refs.bib}``
  to the card of each ``.bib`` file named;
- ``cites``: each key of ``\\cite``, ``\\citep``, ``\\autocite``, ... (natbib's and
  biblatex's) to the bibliography entry of that key (see
  :meth:`~xerj_core.detectors.Corpus.by_citekey`): where several files hold
  one, the entry of the same case first, then the nearest file;
- ``latex_ref``: ``\\ref``, ``\\cref``, ``\\autoref``, ... to the document whose
  text defines the label (``\\label{...}``): in the same file first, else the
  smallest document id of the corpus defining it. A corpus-wide detector for
  this: ``summarize`` lists each file's labels.

A file name is resolved as TeX finds it, from the folder it is compiled in,
which is the main file's: relative to the citing file's own folder, then to
each folder above it in turn, ``.tex`` (``.bib`` for a bibliography) added
when the name has none. The evidence is the line of the text where the command
stood.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, labels_of, line_at,
                                 make_draft, smallest_owners)

LATEX_FORMATS = frozenset({"latex"})
INCLUDE, BIBLIOGRAPHY, CITES, REF = "latex_include", "bibliography", "cites", "latex_ref"


def find_file(corpus: Corpus, from_path: str, name: str, extension: str) -> SourceDocument | None:
    """The card of the file ``name`` names (see the module doc), or None."""
    name = name.strip().strip('"').replace("\\", "/")
    if not name or name.startswith("/") or "://" in name:
        return None
    names = (name,) if posixpath.splitext(name)[1] == extension else (name + extension, name)
    folder = posixpath.dirname(from_path)
    while True:
        for candidate in names:
            found = corpus.lookup_path(posixpath.normpath(posixpath.join(folder, candidate)))
            if found is not None:
                return corpus.card(found)
        if not folder:
            return None
        folder = posixpath.dirname(folder)


def cited_entry(corpus: Corpus, from_path: str, key: str, bibliographies: Sequence[str] = ()) -> SourceDocument | None:
    """The bibliography entry ``key`` names for a document of ``from_path``: the entry of one of the
    ``bibliographies`` the document names (their paths) first, then the entry of the same case, then the one in the
    nearest file; None when no entry has the key."""
    ids = corpus.by_citekey(key)
    if len(ids) > 1:
        docs = [doc for doc in map(corpus.document, ids) if doc is not None]
        docs = [doc for doc in docs if doc.ax_path in bibliographies] or docs
        exact = [doc for doc in docs if doc.fields.get("citekey") == key.strip()] or docs
        by_path = {doc.ax_path: doc for doc in reversed(exact)}
        nearest = corpus.nearest(sorted(by_path), from_path)
        return by_path.get(nearest) if nearest is not None else None
    return corpus.document(ids[0]) if ids else None


class LatexDetector:
    name = "latex"
    type = INCLUDE
    types = (INCLUDE, BIBLIOGRAPHY, CITES, REF)
    tag = "latex@1"
    weight = 1.0
    confidence = 0.95

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        return labels_of(file_docs, LATEX_FORMATS)

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        return DetectorState(data=smallest_owners(partials))

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        own: dict[str, str] = {}
        for doc in file_docs:
            for label in doc.fields.get("labels") or ():
                own.setdefault(label, doc.doc_id)
        for doc in file_docs:
            links = doc.fields.get("links") if doc.format in LATEX_FORMATS else None
            if not links:
                continue
            data = doc.text.encode("utf-8")
            seen: set[tuple[str, str]] = set()
            chars = byte = 0  # the byte offset of character ``chars``, carried forward (links come in text order)
            for link in links:
                kind, target, offset = link.get("kind"), link.get("target"), link.get("offset", 0)
                if not isinstance(target, str) or not isinstance(offset, int):
                    continue
                dst, edge = self._resolve(corpus, doc, kind, target, own, state)
                if dst is None or dst.doc_id == doc.doc_id or (edge, dst.doc_id) in seen:
                    continue
                seen.add((edge, dst.doc_id))
                if offset < chars:
                    chars = byte = 0
                byte += len(doc.text[chars:offset].encode("utf-8"))
                chars = offset
                yield make_draft(self, doc, dst, type=edge, quote=line_at(data, byte), offset=byte)

    @staticmethod
    def _resolve(corpus: Corpus, doc: SourceDocument, kind: Any, target: str, own: dict[str, str],
                 state: DetectorState | None) -> tuple[SourceDocument | None, str]:
        if kind == "input":
            return find_file(corpus, doc.ax_path, target, ".tex"), INCLUDE
        if kind == "bibliography":
            return find_file(corpus, doc.ax_path, target, ".bib"), BIBLIOGRAPHY
        if kind == "cite":
            return cited_entry(corpus, doc.ax_path, target), CITES
        if kind == "ref":
            owner = own.get(target)
            if owner is None and state is not None and state.data:
                owner = state.data.get(target)
            return (corpus.document(owner) if owner is not None else None), REF
        return None, INCLUDE


@hookimpl
def xerj_register_detectors(register) -> None:
    register(LatexDetector())
