"""``citekey``: a note's citations, followed to the bibliography entries they cite.

Notes written for Pandoc, Quarto, Zettlr or Obsidian's citation plugins cite
a reference by its key: ``[@knuth84, p. 3]``, ``[see @knuth84; -@lamport86]``,
``@knuth84 says`` or ``@{odd:key}``. Org cites as org-cite (``[cite:@knuth84]``,
whose keys are the same ``@key``) or org-ref (``cite:knuth84,lamport86``), and
reStructuredText as sphinxcontrib-bibtex (``:cite:p:`knuth84```). A key is a
letter, digit or ``_`` and what follows it, with punctuation (``:.#$%&-+?<>~/``)
only inside; an ``@`` right after a word (``ada@example.org``) is no citation.

Markdown notes (outside code), Org files (outside ``#+begin_`` blocks) and
reStructuredText files are read; a key is followed only to an entry of a
bibliography in the corpus (see :meth:`~xerj_core.detectors.Corpus.by_citekey`:
the entry of the same case first, then the one in the nearest file), so a
handle such as ``@ada`` names nothing unless a bibliography has that key.
Edge ``cites`` from the note to the entry; the evidence is the citation's line.

Quarto writes its cross-references the same way, with a prefix: ``@fig-growth``,
``@tbl-a``, ``@eq-b``, ``@sec-intro``. Such a key in a Markdown document names
the section holding that target (a ``{#fig-growth}`` after an image, a code
chunk's ``#| label: fig-growth``, a heading's ``{#sec-intro}``; see the
``markdown`` format's ``labels`` and ``ids``): in the same file first, else
the smallest document id of the corpus holding it (a book's chapters refer to
each other). Edge ``cross_ref``; a corpus-wide detector for these, whose
``summarize`` lists each file's targets.

A Markdown note's front matter may name its ``bibliography`` (Pandoc, Quarto:
a path or a list of them), as an Org file's ``#+bibliography:`` lines do: an
edge ``bibliography`` to each, and its citations are followed to the entries
of those files first. A literature note
names the reference it is about as ``citekey: knuth84`` (Obsidian's Zotero
plugins write it): an edge ``cites`` from its card to that entry.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

from xerj_core.detectors import MARKDOWN_FORMATS, Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, \
    line_at, make_draft, mask_code, resolve_relative, smallest_owners
from xerj_detectors.latex import BIBLIOGRAPHY, CITES, cited_entry
from xerj_detectors.orglink import mask_blocks

_WORD = rb"A-Za-z0-9_\x80-\xff"
_KEY = rb"[" + _WORD + rb"](?:[" + _WORD + rb"]|[:.#$%&\-+?<>~/](?=[" + _WORD + rb"]))*"
# Pandoc's @key and @{key}, not after a word, a dot or a slash (an address, a path, a scoped package's name)
_PANDOC = re.compile(rb"(?<![" + _WORD + rb".@/\\])-?@(?:\{([^{}\n]+)\}|(" + _KEY + rb"))")
# org-ref: cite:key1,key2 (and citep:, citet:, ..., v3's &key)
_ORG_REF = re.compile(rb"(?<![" + _WORD + rb"])(?:cite|citep|citet|citeauthor|citeyear|parencite|textcite|autocite|"
                      rb"footcite|nocite)[a-z]*:(&?" + _KEY + rb"(?:,&?" + _KEY + rb")*)")
# sphinxcontrib-bibtex: :cite:`a,b`, :cite:p:`a`, :footcite:t:`a`
_RST_CITE = re.compile(rb":(?:foot)?cite(?::[a-z]+)?:`([^`\n]+)`")
ORG_FORMATS = frozenset({"org"})
RST_FORMATS = frozenset({"rst"})
# the formats whose card may name the document's bibliography (front matter, org-cite's #+bibliography:)
NAMING_FORMATS = MARKDOWN_FORMATS | ORG_FORMATS
CROSS_REF = "cross_ref"
# Quarto's cross-reference prefixes: @fig-a names a figure's target, not a reference
_CROSS_REF_KEY = re.compile(r"(?:fig|tbl|eq|lst|sec|thm|lem|cor|prp|cnj|def|exm|exr|sol|rem)-")


def citations(data: bytes, fmt: str) -> Iterator[tuple[int, str]]:
    """``(offset, key)`` of each citation in the text ``data`` of a document of format ``fmt``, in offset order."""
    found: list[tuple[int, str]] = []
    if fmt in RST_FORMATS:
        for match in _RST_CITE.finditer(data):
            found.extend((match.start(), key.strip()) for key in match.group(1).decode("utf-8", "replace").split(","))
        return iter(sorted(found))
    scanned = mask_blocks(data) if fmt in ORG_FORMATS else mask_code(data)
    if b"@" in scanned:
        for match in _PANDOC.finditer(scanned):
            found.append((match.start(), (match.group(1) or match.group(2)).decode("utf-8", "replace")))
    if fmt in ORG_FORMATS and b"cite" in scanned:
        for match in _ORG_REF.finditer(scanned):
            keys = match.group(1).decode("utf-8", "replace").split(",")
            found.extend((match.start(), key.lstrip("&")) for key in keys)
    return iter(sorted(found))


def _cross_ref_targets(file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
    """``(id, doc_id)`` of each Quarto cross-reference target the file's Markdown documents hold: their labels
    (``{#fig-a}``) and their headings' ids (``{#sec-intro}``) of a Quarto prefix."""
    found = tuple((target, doc.doc_id) for doc in file_docs if doc.format in MARKDOWN_FORMATS
                  for target in (*(doc.fields.get("labels") or ()), *(doc.fields.get("ids") or ()))
                  if isinstance(target, str) and _CROSS_REF_KEY.match(target))
    return found or None


class CitekeyDetector:
    name = "citekey"
    type = CITES
    types = (CITES, BIBLIOGRAPHY, CROSS_REF)
    tag = "citekey@1"
    weight = 1.0
    confidence = 0.9

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        return _cross_ref_targets(file_docs)

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        return DetectorState(data=smallest_owners(partials))

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        card = file_docs[0] if file_docs else None
        own: dict[str, str] = {}  # the file's own targets, each where it first stands
        for target, doc_id in _cross_ref_targets(file_docs) or ():
            own.setdefault(target, doc_id)
        named = card.fields.get("bibliography") if card is not None and card.format in NAMING_FORMATS else None
        bibliographies: list[str] = []
        for name in named or ():
            bib = resolve_relative(corpus, card.ax_path, name) if isinstance(name, str) else None
            if bib is not None and bib.ax_path not in bibliographies:
                bibliographies.append(bib.ax_path)
                yield make_draft(self, card, bib, type=BIBLIOGRAPHY, quote=clip(f"bibliography: {name}"))
        key = card.fields.get("reference_key") if card is not None else None
        entry = cited_entry(corpus, card.ax_path, key, bibliographies) if isinstance(key, str) and key else None
        if entry is not None:
            yield make_draft(self, card, entry, quote=clip(f"citekey: {key}"))
        for doc in file_docs:
            fmt, text = doc.format, doc.text
            if fmt in RST_FORMATS:
                if ":cite" not in text and ":footcite" not in text:
                    continue
            elif fmt in MARKDOWN_FORMATS:
                if "@" not in text:
                    continue
            elif fmt not in ORG_FORMATS or ("@" not in text and "cite" not in text):
                continue
            data = doc.text.encode("utf-8")
            seen: set[tuple[str, str]] = set()
            for offset, key in citations(data, fmt):
                if fmt in MARKDOWN_FORMATS and _CROSS_REF_KEY.match(key):
                    owner = own.get(key) or (state.data.get(key) if state is not None and state.data else None)
                    dst, edge = (corpus.document(owner) if owner else None), CROSS_REF
                else:
                    dst, edge = (cited_entry(corpus, doc.ax_path, key, bibliographies) if key else None), CITES
                if dst is None or dst.doc_id == doc.doc_id or (edge, dst.doc_id) in seen:
                    continue
                seen.add((edge, dst.doc_id))
                yield make_draft(self, doc, dst, type=edge, quote=line_at(data, offset), offset=offset)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(CitekeyDetector())
