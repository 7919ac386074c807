"""``rstlink``: how a Sphinx tree links its documents: ``toctree`` entries, ``:doc:``, ``:ref:`` and ``:pep:``
roles, and the files ``include``, ``literalinclude``, ``image`` and ``figure`` directives name.

reStructuredText documents are read (format ``rst``), and Markdown ones as
Sphinx reads them through MyST: ``{doc}`name```, ``{ref}`label```, a
```` ```{toctree} ```` (or ``:::{toctree}``) fence's entries, ``{include}``
and ``{literalinclude}`` fences, and the ``(label)=`` targets before headings. A document name
(a ``toctree`` entry, a ``:doc:`` target, either as ``Title <name>`` too) has
no extension: relative to the linking file's folder, or, starting with ``/``,
to the source folder, which is the indexed folder or one below it (the nearest
file whose path ends so). A directive's path resolves as a Markdown link's does
(relative, or ``/``-rooted), and also as a path ending when ``/``-rooted.
``self``, URLs and glob entries (``*``) name no file. A ``:ref:`` names a label
(``.. _name:``, ``Title <name>`` too) of any ``.rst`` file of the corpus, and
lands on the section the label opens (or is written in): a corpus-wide
detector, whose ``summarize`` lists each file's labels and ``combine`` keeps,
for a label defined twice, the smallest document id. A ``:pep:`8``` (also
``:pep:`Title <8>``` and ``:pep:`8#anchor```, as docutils and Sphinx take it)
names the Python Enhancement Proposal of that number, a file of the corpus
named as the PEPs repository names them, ``pep-0008`` (any extension; the
nearest such file), landing on the anchor's section when the file has one.
Edge: from the document holding the line to the named file's card, or to the
labelled section; evidence is that line.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Iterator, Sequence

from xerj_core.detectors import (MARKDOWN_FORMATS, Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl,
                                 label_key, labels_of, line_at, make_draft, note_candidates, resolve_relative,
                                 smallest_owners, within_root)

RST_FORMATS = frozenset({"rst"})
# Sphinx reads Markdown through MyST, whose roles and directives name what reStructuredText's do
READ_FORMATS = RST_FORMATS | MARKDOWN_FORMATS
# a toctree directive and its indented body (entries and options), up to the first line back at its margin
_TOCTREE = re.compile(rb"^([ \t]*)\.\. toctree::[^\n]*\n((?:(?:\1[ \t]+[^\n]*)?(?:\n|\Z))*)", re.M)
_DOC_ROLE = re.compile(rb":doc:`([^`\n]+)`")
_REF_ROLE = re.compile(rb":ref:`([^`\n]+)`")
_PATH_DIRECTIVE = re.compile(rb"^[ \t]*\.\. (?:include|literalinclude|image|figure)::[ \t]*(\S[^\n]*?)[ \t]*$",
                             re.M)
_TITLED = re.compile(r"(?s).*?<([^<>]+)>")
# MyST: {doc}`name`, {ref}`label`, a ```{toctree} fence (or :::{toctree}) and {include}/{literalinclude}/{image}
_MYST_DOC_ROLE = re.compile(rb"\{doc\}`([^`\n]+)`")
_MYST_REF_ROLE = re.compile(rb"\{ref\}`([^`\n]+)`")
_MYST_TOCTREE = re.compile(rb"^[ \t]*(`{3,}|:{3,})\{toctree\}[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_MYST_PATH_DIRECTIVE = re.compile(rb"^[ \t]*(?:`{3,}|:{3,})\{(?:include|literalinclude|image|figure)\}[ \t]+"
                                  rb"(\S[^\n]*?)[ \t]*$", re.M)
_MYST_MARKS = ("{doc}", "{ref}", "{toctree}", "{include}", "{literalinclude}", "{image}", "{figure}", "{pep}")
_PEP_ROLE = re.compile(rb":pep:`([^`\n]+)`")
_MYST_PEP_ROLE = re.compile(rb"\{pep\}`([^`\n]+)`")
_PEP_NUMBER = re.compile(r"0*(\d{1,5})(?:#(.*))?")
# each syntax's toctree, doc role, ref role, path directive and PEP role
_RST = (_TOCTREE, _DOC_ROLE, _REF_ROLE, _PATH_DIRECTIVE, _PEP_ROLE)
_MYST = (_MYST_TOCTREE, _MYST_DOC_ROLE, _MYST_REF_ROLE, _MYST_PATH_DIRECTIVE, _MYST_PEP_ROLE)


class RstlinkDetector:
    name = "rstlink"
    type = "rstlink"
    # 2: Markdown read through MyST: {doc} and {ref} roles, {toctree} and {include} fences, (label)= targets;
    # 3: :pep: roles
    tag = "rstlink@3"
    weight = 0.9
    confidence = 0.9

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[tuple[str, str], ...] | None:
        return labels_of(file_docs, READ_FORMATS)

    def combine(self, partials: Iterable[tuple[tuple[str, str], ...] | None], corpus: Corpus) -> DetectorState:
        return DetectorState(data=smallest_owners(partials))

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        labels: dict[str, str] = state.data if state is not None and state.data else {}
        for doc in file_docs:
            myst = doc.format in MARKDOWN_FORMATS
            if myst:
                if "{" not in doc.text or not any(mark in doc.text for mark in _MYST_MARKS):
                    continue
            elif doc.format not in RST_FORMATS or (".. " not in doc.text and ":doc:" not in doc.text
                                                    and ":ref:" not in doc.text and ":pep:" not in doc.text):
                continue
            data = doc.text.encode("utf-8")
            seen: set[str] = set()
            for offset, target, kind in sorted(_targets(data, _MYST if myst else _RST)):
                if kind == _REF:
                    owner = labels.get(label_key(target))
                    dst = corpus.document(owner) if owner is not None else None
                elif kind == _DOC:
                    dst = _document_named(corpus, doc.ax_path, target)
                elif kind == _PEP:
                    dst = _pep(corpus, doc.ax_path, target)
                else:
                    dst = resolve_relative(corpus, doc.ax_path, target)
                    if dst is None and target.startswith("/"):
                        dst = _nearest_card(corpus, doc.ax_path, note_candidates(corpus, doc.ax_path,
                                                                                 target.strip("/")))
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, offset), offset=offset)


# what a target names: a document (toctree, :doc:), a label (:ref:), a file by its path (a directive), a PEP
_DOC, _REF, _PATH, _PEP = 0, 1, 2, 3


def _targets(data: bytes, syntax: tuple[re.Pattern[bytes], ...]) -> Iterator[tuple[int, str, int]]:
    """``(byte offset, target, what it names)`` of every link the text makes in ``syntax`` (:data:`_RST` or
    :data:`_MYST`: its toctree, doc role, ref role, path directive and PEP role)."""
    toctree, doc_role, ref_role, path_directive, pep_role = syntax
    for match in pep_role.finditer(data):
        yield match.start(), _named(match.group(1).decode("utf-8", "replace")), _PEP
    for match in toctree.finditer(data):
        yield from _toctree_entries(match)
    for match in doc_role.finditer(data):
        yield match.start(), _named(match.group(1).decode("utf-8", "replace")), _DOC
    for match in ref_role.finditer(data):
        yield match.start(), _named(match.group(1).decode("utf-8", "replace")), _REF
    for match in path_directive.finditer(data):
        yield match.start(1), match.group(1).decode("utf-8", "replace"), _PATH


def _toctree_entries(match: re.Match[bytes]) -> Iterator[tuple[int, str, int]]:
    """The document entries of a toctree whose body is ``match``'s group 2 (its ``:option:`` lines left out)."""
    at = match.start(2)
    for line in match.group(2).split(b"\n"):
        entry = line.strip().decode("utf-8", "replace")
        if entry and not entry.startswith(":"):
            yield at + len(line) - len(line.lstrip()), _named(entry), _DOC
        at += len(line) + 1


def _named(text: str) -> str:
    """The target of ``Title <target>``, or the text itself."""
    titled = _TITLED.fullmatch(text.strip())
    return (titled.group(1) if titled else text).strip()


def _document_named(corpus: Corpus, from_path: str, name: str) -> SourceDocument | None:
    if not name or name == "self" or "*" in name or "://" in name:
        return None
    for extension in (".rst", ".md"):
        if name.endswith(extension):
            name = name[:-len(extension)]
    if name.startswith("/"):
        rooted = name.strip("/")
        candidates = corpus.by_path_without_extension(rooted) or note_candidates(corpus, from_path, rooted)
    else:
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), name))
        candidates = corpus.by_path_without_extension(joined) if within_root(joined) else ()
    return _nearest_card(corpus, from_path, candidates)


def _pep(corpus: Corpus, from_path: str, target: str) -> SourceDocument | None:
    """The file of the PEP ``target`` numbers (``8``, ``0008#anchor``): ``pep-0008.*``, the nearest, or its section
    the anchor names."""
    numbered = _PEP_NUMBER.fullmatch(target)
    if numbered is None:
        return None
    card = _nearest_card(corpus, from_path, corpus.by_stem(f"pep-{int(numbered.group(1)):04d}"))
    if card is not None and numbered.group(2):
        return corpus.section(card.ax_path, numbered.group(2)) or card
    return card


def _nearest_card(corpus: Corpus, from_path: str, candidates: Sequence[str]) -> SourceDocument | None:
    path = corpus.nearest(candidates, from_path)
    return corpus.card(path) if path is not None else None


@hookimpl
def xerj_register_detectors(register) -> None:
    register(RstlinkDetector())
