"""Bibliographies (``.bib``: BibTeX and BibLaTeX, as Zotero, JabRef, Mendeley and a paper's references keep them):
a card plus one document per entry.

The file is read by bibtexparser: ``@string`` abbreviations resolved, field
names lowercased, names split at ``and``. Each entry is a document
(``{path}#{key}``, kind ``entry``, dataset ``ax-refs``) titled by its title,
whose text is what a reader of a reference list sees: title, names, kind and
year, where it appeared, then its abstract, keywords and note. Field values
are LaTeX, shown as text (``M{\\"u}ller`` is ``Müller``). It keeps ``citekey``
(what ``\\cite{...}`` and ``[@...]`` name it by), ``entry_type``, ``authors``,
``editors``, ``year``, ``venue``, ``doi``, ``url``, ``keywords``, and as
written its ``file`` (the attached files a reference manager lists) and
``crossref``/``xdata`` (the entries it takes fields from), which the
``bibtex`` detector follows.

The card counts the ``entries``; an entry written twice under one key is read
once (the first, as BibTeX does), and each block that could not be read is
listed in ``unread`` with its line and why: a damaged entry does not cost the
others. An entry whose names cannot be split (``Baklouti, F.; Huang, S. C.``)
or that sets a field twice is read as written, its ``problem`` saying so.
"""

from __future__ import annotations

import logging
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import MAX_ANCHOR_CHARS, Anchors, document
from xerj_core.autoindex.builtin_formats._latex import to_text
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".bib", ".biblatex"})
DATASET = "ax-refs"
# where an entry appeared, by the field that says so for its kind
_VENUES = ("journal", "journaltitle", "booktitle", "publisher", "school", "institution", "organization",
           "howpublished", "series")
# bibtexparser logs each block it cannot read as a warning; the card lists them instead of the run's output
logging.getLogger("bibtexparser").setLevel(logging.ERROR)


def _value(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    return to_text(value) if isinstance(value, str) and value.strip() else ""


def _names(fields: dict[str, Any], name: str) -> list[str]:
    value = fields.get(name)
    names = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return [text for text in (to_text(n) for n in names if isinstance(n, str)) if text and text != "others"]


def _keywords(value: str) -> list[str]:
    separator = ";" if ";" in value else ","
    return list(dict.fromkeys(word.strip() for word in value.split(separator) if word.strip()))


def _why(error: Exception) -> str:
    """What bibtexparser says of a block it could not read (an aborted block keeps it in ``abort_reason``)."""
    said = getattr(error, "abort_reason", None) or str(error)
    return " ".join(str(said).split()) or type(error).__name__


def _anchor(key: str, anchors: Anchors) -> str:
    """The key itself (what people type after the file's name) when it can be an anchor, else its slug."""
    if key and len(key) <= MAX_ANCHOR_CHARS and not any(c.isspace() or c in "#?" for c in key):
        return key
    return anchors(key)


def entry_document(fmt: Any, rel_path: str, mtime_ms: int, entry: Any, ordinal: int, anchors: Anchors, *,
                   problem: str | None = None) -> SourceDocument:
    fields = {name: field.value for name, field in entry.fields_dict.items()}
    key = entry.key
    title = _value(fields, "title") or key
    authors, editors = _names(fields, "author"), _names(fields, "editor")
    year = _value(fields, "year") or _value(fields, "date")[:4]
    venue = next((text for text in map(lambda name: _value(fields, name), _VENUES) if text), "")
    keywords = _keywords(_value(fields, "keywords"))
    lines = [title, "; ".join(authors or editors), " ".join(filter(None, (entry.entry_type, year))), venue,
             _value(fields, "abstract"), ", ".join(keywords), _value(fields, "note"), _value(fields, "annotation")]
    return document(fmt, rel_path, mtime_ms, doc_id=f"{rel_path}#{_anchor(key, anchors)}", title=title,
                    text="\n".join(line for line in lines if line), section=title, kind="entry", dataset=DATASET,
                    ordinal=ordinal, citekey=key, entry_type=entry.entry_type.lower(), authors=authors or None,
                    editors=editors or None, year=year or None, venue=venue or None,
                    doi=_value(fields, "doi") or None, url=_value(fields, "url") or None, keywords=keywords or None,
                    file=str(fields["file"]) if fields.get("file") else None,
                    crossref=[str(fields[name]).strip() for name in ("crossref", "xdata") if fields.get(name)] or None,
                    line=(entry.start_line or 0) + 1, problem=problem)


class BibtexFormat:
    """BibTeX files into ``ax-refs``: a card and one document per entry."""

    name = "bibtex"
    dataset = DATASET
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        import bibtexparser  # imported with the first bibliography: runs over no .bib file never load it
        from bibtexparser import middlewares, model

        decoded = decode_text(data, rel_path)
        library = bibtexparser.parse_string(decoded.text, append_middleware=[
            middlewares.NormalizeFieldKeys(), middlewares.SeparateCoAuthors(), middlewares.SplitNameParts(),
            middlewares.MergeNameParts(style="first")])
        # an entry a middleware could not finish (a name list BibTeX would not split either) or that sets a field
        # twice is read as it was written, and says so in ``problem``
        kept = {id(block.ignore_error_block): _why(block.error) for block in library.failed_blocks
                if isinstance(block, (model.MiddlewareErrorBlock, model.DuplicateFieldKeyBlock))
                and isinstance(block.ignore_error_block, model.Entry)}
        entries = sorted([*library.entries, *(block.ignore_error_block for block in library.failed_blocks
                                              if id(block.ignore_error_block) in kept)],
                         key=lambda entry: entry.start_line or 0)
        anchors = Anchors("entry")
        docs = [entry_document(self, rel_path, mtime_ms, entry, n, anchors, problem=kept.get(id(entry)))
                for n, entry in enumerate(entries, 1)]
        duplicates = [block.key for block in library.failed_blocks if isinstance(block, model.DuplicateBlockKeyBlock)]
        unread = [f"line {(block.start_line or 0) + 1}: {_why(block.error)}" for block in library.failed_blocks
                  if not isinstance(block, model.DuplicateBlockKeyBlock) and id(block.ignore_error_block) not in kept]
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=stem(rel_path), text="", section="",
                        kind="file", ordinal=0, entries=len(docs), encoding=decoded.encoding,
                        unread=unread or None, duplicate_keys=[k for k in duplicates if k] or None)
        return [card, *docs]


@hookimpl
def xerj_register_formats(register) -> None:
    register(BibtexFormat())
