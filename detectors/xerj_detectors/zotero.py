"""``zotero``: a Zotero reference to its attached files, its notes and its annotations.

Documents of the ``zotero`` format are read. Three edge types, one detector
(tag ``zotero@1``):

- ``entry_file``: a reference to each file attached to it (its ``files``):
  ``storage/<key>/<name>`` beside the library when the folder indexed holds
  it (confidence 0.95), else the file of that name nearest the library (0.8: a
  linked file's path is the machine's own, and a folder indexed with it holds
  it under the same name);
- ``literature_note``: a reference to each of its notes and to each document of
  its annotations;
- ``annotates``: a file's annotations to the file.

The evidence is a generated rationale (``"<title> has the note <note>"``).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft
from xerj_detectors.bibtex import FILE, NOTE, attached_file

ANNOTATES = "annotates"


class ZoteroDetector:
    name = "zotero"
    type = FILE
    types = (FILE, NOTE, ANNOTATES)
    tag = "zotero@1"
    weight = 0.9
    confidence = 0.95
    by_name_confidence = 0.8

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        if not file_docs or file_docs[0].format != "zotero":
            return
        library = file_docs[0].ax_path
        by_id = {doc.doc_id: doc for doc in file_docs}
        for doc in file_docs:
            if doc.kind == "entry":
                seen = {doc.doc_id}
                for path in doc.fields.get("files") or ():
                    dst, by_name = _file(corpus, library, path)
                    if dst is not None and dst.doc_id not in seen:
                        seen.add(dst.doc_id)
                        yield make_draft(self, doc, dst, confidence=self.by_name_confidence if by_name else None,
                                         quote=clip(f"{doc.title} has the attachment {path}"))
            elif doc.kind in ("note", "annotations"):
                parent = by_id.get(doc.fields.get("parent"))
                if parent is not None:
                    yield make_draft(self, parent, doc, type=NOTE, quote=clip(f"{parent.title} has the {doc.kind} "
                                                                              f"{doc.title}"))
                path = doc.fields.get("file") if doc.kind == "annotations" else None
                dst, by_name = _file(corpus, library, path)
                if dst is not None:
                    yield make_draft(self, doc, dst, type=ANNOTATES, confidence=self.by_name_confidence if by_name
                                     else None, quote=clip(f"{doc.title}: annotations made on {path}"))


def _file(corpus: Corpus, library: str, path: object) -> tuple[SourceDocument | None, bool]:
    """The card of the attached file at ``path`` (root-relative, as the format gives a stored file's), else of the
    file of its name nearest the library; and whether it was found by its name alone."""
    if not isinstance(path, str):
        return None, False
    found = corpus.lookup_path(path)
    return (corpus.card(found), False) if found is not None else attached_file(corpus, library, path)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(ZoteroDetector())
