"""``bibtex``: a bibliography entry to the files attached to it and to the entries it takes fields from.

Entries are read as the ``bibtex`` format keeps them. Two edge types, one
detector (tag ``bibtex@1``):

- ``entry_file``: to the card of each file its ``file`` field lists, as
  JabRef (``Description:path:Type``, several joined by ``;``, ``\\:`` for a
  colon), Mendeley (``:C$\\backslash$:/...pdf:pdf``) and Zotero's Better BibTeX
  (bare paths) write it. A relative path is followed from the bibliography's
  folder (confidence 0.95); a path that is absolute or leads nowhere names the
  file of that name nearest the bibliography (confidence 0.8: a reference
  manager keeps its files where it likes, and a folder indexed with them holds
  them under the same names). URLs name no file;
- ``crossref``: to the entry its ``crossref`` or ``xdata`` names (the
  proceedings a paper is in), the one of the same bibliography first.

The evidence is the field as written: ``knuth84: file = {:papers/knuth84.pdf:PDF}``.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Iterator, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft
from xerj_detectors.latex import cited_entry

FILE, CROSSREF = "entry_file", "crossref"
_UNESCAPED_SEMICOLON = re.compile(r"(?<!\\);")
_UNESCAPED_COLON = re.compile(r"(?<!\\):")
_ABSOLUTE = re.compile(r"(?:/|~|[A-Za-z]:[\\/]|\\\\)")


def attached_paths(value: str) -> Iterator[str]:
    """The paths a ``file`` field lists, unescaped, with ``\\`` as ``/``."""
    value = value.replace("$\\backslash$", "\\")
    for item in _UNESCAPED_SEMICOLON.split(value):
        parts = _UNESCAPED_COLON.split(item.strip())
        path = ":".join(parts[1:-1]) if len(parts) >= 3 else item.strip()
        path = path.replace("\\:", ":").replace("\\;", ";").replace("\\\\", "\\").strip()
        if path and "://" not in path:
            yield path


def attached_file(corpus: Corpus, bib_path: str, path: str) -> tuple[SourceDocument | None, bool]:
    """The card of the file ``path`` names, from the bibliography ``bib_path``, and whether it was found by its name
    alone (see the module doc)."""
    if not _ABSOLUTE.match(path):
        found = corpus.lookup_path(posixpath.normpath(posixpath.join(posixpath.dirname(bib_path),
                                                                     path.replace("\\", "/"))))
        if found is not None:
            return corpus.card(found), False
    name = posixpath.basename(path.replace("\\", "/"))
    nearest = corpus.nearest(corpus.by_file_name(name), bib_path) if name else None
    return (corpus.card(nearest) if nearest is not None else None), True


class BibtexDetector:
    name = "bibtex"
    type = FILE
    types = (FILE, CROSSREF)
    tag = "bibtex@1"
    weight = 0.9
    confidence = 0.95
    by_name_confidence = 0.8

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format != "bibtex" or doc.kind != "entry":
                continue
            key, seen = doc.fields.get("citekey"), {doc.doc_id}
            raw = doc.fields.get("file")
            for path in attached_paths(raw) if isinstance(raw, str) else ():
                dst, by_name = attached_file(corpus, doc.ax_path, path)
                if dst is not None and dst.doc_id not in seen:
                    seen.add(dst.doc_id)
                    yield make_draft(self, doc, dst, type=FILE, quote=clip(f"{key}: file = {{{raw}}}"),
                                     confidence=self.by_name_confidence if by_name else None)
            for target in doc.fields.get("crossref") or ():
                dst = cited_entry(corpus, doc.ax_path, target) if isinstance(target, str) else None
                if dst is not None and dst.doc_id not in seen:
                    seen.add(dst.doc_id)
                    yield make_draft(self, doc, dst, type=CROSSREF, quote=clip(f"{key}: crossref = {{{target}}}"))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(BibtexDetector())
