"""``adoclink``: how AsciiDoc documents link each other: ``xref:``, ``<<...>>`` cross references and ``include::``.

Only AsciiDoc documents are read (format ``asciidoc``), with listing, literal,
passthrough and comment blocks, ``//`` comment lines, backtick code spans and
```` ``` ```` fences masked: what they hold is an example. Read:

* ``xref:other.adoc#install[Install]`` and ``<<other.adoc#install,Install>>``
  (``<<other#install>>`` too): the file, relative to the linking file, and the
  section the fragment names (its id, set or generated, or its title);
* ``include::partials/setup.adoc[]``: the included file, relative likewise.

A reference names a file when it ends in ``.adoc`` or holds a ``#``; one to an
id alone (``<<install>>``, ``xref:install[]``) stays in its document.

In an Antora site (the file under ``modules/<module>/pages/``), a page is
named from its module's ``pages`` folder: ``xref:install.adoc[]`` is
``modules/<module>/pages/install.adoc``, ``xref:cli:options.adoc[]`` the
``cli`` module's, ``./sibling.adoc`` relative to the page, and an
``include::partial$setup.adoc[]`` the module's ``partials`` (``example$``:
``examples``; an include without one is relative to its file, as anywhere); a
coordinate naming another component
(``2.0@other:module:page.adoc``) is looked for in this one, where it may not be.
A reference to an id of its own document makes no edge, as a Markdown
``#anchor`` does not. Edge: from the
document holding the reference to the named file's card, or to its section;
evidence is the line holding it.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, link_drafts,
                                 mask_code, target_document, within_root)

ADOC_FORMATS = frozenset({"asciidoc"})
_XREF = re.compile(rb"(?<![\w:])xref:([^\s\[\]]*)\[")
_ANGLE = re.compile(rb"<<([^<>,\n]+)(?:,[^<>\n]*)?>>")
_INCLUDE = re.compile(rb"^include::([^\s\[\]]+)\[", re.M)
# blocks whose content is shown as written (listing, literal, passthrough) or not at all (comment)
_MASKED_BLOCK = re.compile(rb"^(-{4,}|\.{4,}|\+{4,}|/{4,})[ \t]*\n.*?^\1[ \t]*$", re.M | re.S)
_COMMENT_LINE = re.compile(rb"^//(?!/).*$", re.M)
_ANTORA = re.compile(r"^(.*?)modules/([^/]+)/")
_FAMILIES = {"page": "pages", "partial": "partials", "example": "examples", "attachment": "attachments"}


class AdoclinkDetector:
    name = "adoclink"
    type = "adoclink"
    tag = "adoclink@1"
    weight = 0.9
    confidence = 0.9

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format not in ADOC_FORMATS or not any(mark in doc.text for mark in ("xref:", "<<", "include::")):
                continue
            data = doc.text.encode("utf-8")
            scanned = _masked(data)
            found = [(m.start(), _resolve(corpus, doc.ax_path, m.group(1).decode("utf-8", "replace"), "page"))
                     for pattern in (_XREF, _ANGLE) for m in pattern.finditer(scanned)]
            found += [(m.start(), _resolve(corpus, doc.ax_path, m.group(1).decode("utf-8", "replace"), "partial",
                                           include=True)) for m in _INCLUDE.finditer(scanned)]
            found.sort(key=lambda item: item[0])
            yield from link_drafts(self, doc, data, found)


def _masked(data: bytes) -> bytes:
    """``data`` with what AsciiDoc shows as written, or hides, blanked (offsets kept): its own delimited blocks
    and comment lines here, then backtick spans and Markdown-style ```` ``` ```` fences (which Asciidoctor reads
    too) as ``mask_code`` blanks them for Markdown."""
    def blank(match: re.Match[bytes]) -> bytes:
        return re.sub(rb"[^\n]", b" ", match.group(0))
    return mask_code(_COMMENT_LINE.sub(blank, _MASKED_BLOCK.sub(blank, data)))


def _resolve(corpus: Corpus, from_path: str, written: str, family: str, *, include: bool = False
             ) -> SourceDocument | None:
    """The document a reference written in ``from_path`` names (``family``: what a bare Antora name is)."""
    target, hashed, fragment = written.strip().partition("#")
    if not target:
        return None  # an id of this document
    if not include and not hashed and not target.endswith(".adoc"):
        return None  # <<install>>, xref:install[]: an id of this document, as Asciidoctor reads them
    antora = _ANTORA.match(from_path)
    if antora is not None and not (include and "$" not in target and ":" not in target):
        path = _antora_path(antora, from_path, target, family)
    else:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), target))
    if path is None or not within_root(path):
        return None
    found = corpus.lookup_path(path)
    if found is None and not include and not posixpath.splitext(path)[1]:
        found = corpus.lookup_path(path + ".adoc")  # <<other#id>> names other.adoc
    if found is None:
        return None
    return target_document(corpus, found, fragment)


def _antora_path(antora: re.Match[str], from_path: str, target: str, family: str) -> str | None:
    """An Antora resource id's path: ``[version@][component:][module:][family$]relative``."""
    root, module = antora.group(1), antora.group(2)
    coordinates = target.split("@", 1)[-1].split(":")
    if len(coordinates) > 1:
        module = coordinates[-2] or module
    relative = coordinates[-1]
    if "$" in relative:
        family, relative = relative.split("$", 1)
    if relative.startswith("./") or relative.startswith("../"):
        return posixpath.normpath(posixpath.join(posixpath.dirname(from_path), relative))
    folder = _FAMILIES.get(family)
    if folder is None:
        return None
    return posixpath.normpath(f"{root}modules/{module}/{folder}/{relative}")


@hookimpl
def xerj_register_detectors(register) -> None:
    register(AdoclinkDetector())
