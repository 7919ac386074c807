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
  proceedings a paper is in), the one of the same bibliography first;
- ``literature_note``: to the note named after its key (``@knuth84.md``, as
  Obsidian's Zotero and citation plugins name a literature note, or
  ``knuth84.md``/``.org``), the nearest when several are.

An entry whose ``file`` field leads to no file is also linked (``entry_file``,
confidence 0.7) to the document file (PDF, EPUB, Word, OpenDocument) named after its
key (``papers/knuth84.pdf``), as JabRef's default file pattern and Zotero's
renaming plugins name them.

The evidence is the field as written: ``knuth84: file = {:papers/knuth84.pdf:PDF}``.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Iterator, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft
from xerj_detectors.latex import cited_entry

FILE, CROSSREF, NOTE = "entry_file", "crossref", "literature_note"
# the formats of a file a reference manager attaches, and of a note written about a reference
ATTACHED_FORMATS = frozenset({"pdf", "epub", "docx", "odt"})
NOTE_FORMATS = frozenset({"markdown", "org", "joplin"})
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
    types = (FILE, CROSSREF, NOTE)
    tag = "bibtex@1"
    weight = 0.9
    confidence = 0.95
    by_name_confidence = 0.8
    by_key_confidence = 0.7

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format == "bibtex" and doc.kind == "entry":
                yield from self._entry(doc, corpus)

    def _entry(self, doc: SourceDocument, corpus: Corpus) -> Iterator[EdgeDraft]:
        key, seen = doc.fields.get("citekey"), {doc.doc_id}
        key = key if isinstance(key, str) else ""
        raw = doc.fields.get("file")
        for path in attached_paths(raw) if isinstance(raw, str) else ():
            dst, by_name = attached_file(corpus, doc.ax_path, path)
            if dst is not None and dst.doc_id not in seen:
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, type=FILE, quote=clip(f"{key}: file = {{{raw}}}"),
                                 confidence=self.by_name_confidence if by_name else None)
        attached = _named_after(corpus, doc, key, ATTACHED_FORMATS) if key and len(seen) == 1 else None
        if attached is not None:  # no file the field lists is here: the one named after the key
            seen.add(attached.doc_id)
            yield make_draft(self, doc, attached, type=FILE, confidence=self.by_key_confidence,
                             quote=clip(f"{key}: the file {attached.ax_path} is named after the entry's key"))
        note = _named_after(corpus, doc, key, NOTE_FORMATS) if key else None
        if note is not None and note.doc_id not in seen:
            seen.add(note.doc_id)
            yield make_draft(self, doc, note, type=NOTE,
                             quote=clip(f"{key}: the note {note.ax_path} is named after the entry's key"))
        for target in doc.fields.get("crossref") or ():
            dst = cited_entry(corpus, doc.ax_path, target) if isinstance(target, str) else None
            if dst is not None and dst.doc_id not in seen:
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, type=CROSSREF, quote=clip(f"{key}: crossref = {{{target}}}"))


def _named_after(corpus: Corpus, entry: SourceDocument, key: str, formats: frozenset[str]) -> SourceDocument | None:
    """The card of the file of ``formats`` nearest the entry's bibliography whose name without extension is the key,
    or the key after an ``@``."""
    cards = {path: card for stem in (key, f"@{key}") for path in corpus.by_stem(stem)
             if (card := corpus.card(path)) is not None and card.format in formats}
    nearest = corpus.nearest(sorted(cards), entry.ax_path) if cards else None
    return cards.get(nearest) if nearest is not None else None


@hookimpl
def xerj_register_detectors(register) -> None:
    register(BibtexDetector())
