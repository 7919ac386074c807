"""``orglink``: Org mode links ``[[target]]`` and ``[[target][description]]``, as org-roam writes them.

Only Org documents are read (format ``org``), outside ``#+begin_``/``#+end_``
blocks. A target is:

- ``id:ID``: the document whose property drawer holds that ``:ID:`` (its
  ``blocks``), in whichever file (org-roam's links between notes);
- ``roam:Title``: the note of that title or alias, as a ``[[wikilink]]`` names one;
- ``file:path``, or a bare ``./path``, ``../path`` or ``path.org``: the file,
  relative to the linking one (``/``-rooted: to the indexed folder; a ``~`` or
  absolute path outside it names nothing), with ``::*Heading`` or
  ``::#custom-id`` picking a section of it;
- ``*Heading``, ``#custom-id``, or any other text: a section of the same file,
  by its heading (the text matched as Org's search matches a heading) or its
  ``:CUSTOM_ID:``.

URLs (``https:``, ``mailto:``, any other ``scheme:``) name nothing in the
corpus. Edge: from the document holding the link to the named document;
evidence is the link's line.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, link_drafts,
                                 resolve_note, resolve_relative)

ORG_FORMATS = frozenset({"org"})
# the target on one line; a description may run over several (a filled paragraph breaks where it falls)
_LINK = re.compile(rb"\[\[((?:[^\[\]\n\\]|\\.)+)\](?:\[[^\[\]]*\])?\]")
_BLOCK = re.compile(rb"^[ \t]*#\+begin_\w+.*?^[ \t]*#\+end_\w+[^\n]*", re.M | re.S | re.I)
# a link type (https:, mailto:, elisp:, ...): a name, a colon, then no space ("[[Note: intro]]" is a heading's text)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:(?!\s)")


def _blank(match: re.Match[bytes]) -> bytes:
    return re.sub(rb"[^\n]", b" ", match.group(0))


def mask_blocks(data: bytes) -> bytes:
    """Org ``data`` with its ``#+begin_``/``#+end_`` blocks (source, examples, quotes) blanked to spaces, offsets
    kept: a link written in one is an example, not a link."""
    return _BLOCK.sub(_blank, data) if b"#+" in data else data


def in_file(corpus: Corpus, path: str, search: str) -> SourceDocument | None:
    """The section of ``path`` a link's search names: ``*Heading``, ``#custom-id``, or a heading's text."""
    search = search.strip()
    if search.startswith("#"):
        wanted = search[1:].strip()
        return next((doc for doc in corpus.documents(path) if wanted in (doc.fields.get("custom_ids") or ())), None)
    return corpus.section(path, search.lstrip("*").strip()) if search else None


def resolve_org(corpus: Corpus, from_doc: SourceDocument, target: str) -> SourceDocument | None:
    """The document an Org link's target names, written in ``from_doc``, or None."""
    target = target.replace("\\[", "[").replace("\\]", "]").strip()
    lowered = target.lower()
    if lowered.startswith("id:"):
        return corpus.by_block(target[3:])
    if lowered.startswith("roam:"):
        path = resolve_note(corpus, from_doc.ax_path, target[5:])
        return None if path is None else corpus.card(path)
    if lowered.startswith("file:"):
        target = target[5:]
    elif _SCHEME.match(target):
        return None  # a URL, or a link type that names nothing in the corpus
    elif not (target.startswith(("./", "../", "/")) or ".org" in lowered):
        return in_file(corpus, from_doc.ax_path, target)
    path, _, search = target.partition("::")
    if path.startswith("~"):
        return None
    file = resolve_relative(corpus, from_doc.ax_path, path) if path else corpus.card(from_doc.ax_path)
    if file is None or not search:
        return file
    return in_file(corpus, file.ax_path, search) or corpus.card(file.ax_path)


class OrglinkDetector:
    name = "orglink"
    type = "orglink"
    tag = "orglink@1"
    weight = 1.0
    confidence = 0.95

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format not in ORG_FORMATS or "[[" not in doc.text:
                continue
            data = doc.text.encode("utf-8")
            yield from link_drafts(self, doc, data, ((m.start(), resolve_org(corpus, doc, m.group(1).decode(
                "utf-8", "replace"))) for m in _LINK.finditer(mask_blocks(data))))


@hookimpl
def xerj_register_detectors(register) -> None:
    register(OrglinkDetector())
