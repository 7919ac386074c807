"""``wikilink``: ``[[Target]]``, ``[[Target|alias]]``, ``[[Target#Heading]]`` and embeds ``![[…]]``.

Resolution follows what note-taking tools do. The target (before ``|`` and
``#``) is matched case-insensitively:

1. with a ``/`` in it: against the root-relative path without extension (or
   with it), then as a path suffix (``[[house/todo]]`` finds ``notes/house/todo.md``);
   a target starting ``./`` or ``../`` is taken relative to the linking file;
2. without one: against file names without extension, then with extension
   (``[[diagram.png]]``);
3. failing both, against the front-matter ``aliases`` of every note.

Several candidates: the one in the folder nearest the linking file wins
(fewest steps up and down the tree), then the smaller path. ``#Heading`` picks
that section of the target when it exists (``[[#Heading]]`` alone: of the same
file); ``#^block`` references land on the file. Links inside fenced or inline
code are examples, not links, and are skipped; source files (format ``code``)
are not read. Edge: from the document holding the link to the target document;
evidence is the line holding ``[[``.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Sequence

from xerj_core.autoindex.detect import Corpus, DetectorState, line_at, make_draft, mask_code
from xerj_core.hookspecs import hookimpl
from xerj_core.model import EdgeDraft, SourceDocument
from xerj_detectors._resolve import NOTE_EXTENSIONS, target_document, within_root

_WIKILINK = re.compile(rb"!?\[\[([^\[\]\n]+?)\]\]")


def _strip_note_extension(name: str) -> str:
    lowered = name.lower()
    for ext in NOTE_EXTENSIONS:
        if lowered.endswith(ext) and len(name) > len(ext):
            return name[: -len(ext)]
    return name


def resolve_note(corpus: Corpus, from_path: str, name: str) -> str | None:
    """The corpus path a wikilink target names, or ``None``."""
    name = name.strip().replace("\\", "/")
    if not name:
        return None
    bare = _strip_note_extension(name)
    candidates: tuple[str, ...] = ()
    if name.startswith("./") or name.startswith("../"):
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), bare))
        if within_root(joined):
            candidates = corpus.by_path_without_extension(joined) or tuple(
                p for p in [corpus.lookup_path(posixpath.normpath(posixpath.join(posixpath.dirname(from_path), name)))] if p
            )
    elif "/" in name.strip("/"):
        rooted = bare.strip("/")
        candidates = corpus.by_path_without_extension(rooted)
        if not candidates:
            exact = corpus.lookup_path(name.strip("/"))
            candidates = (exact,) if exact else ()
        if not candidates:
            suffix = "/" + rooted.lower()
            last = rooted.rsplit("/", 1)[-1]
            candidates = tuple(
                p for p in corpus.by_stem(last) + corpus.by_file_name(last)
                if posixpath.splitext(p)[0].lower().endswith(suffix) or p.lower().endswith(suffix)
            )
    else:
        bare = bare.strip("/")
        candidates = corpus.by_stem(bare) or corpus.by_file_name(name.strip("/"))
    if not candidates:
        candidates = corpus.by_alias(name)
    return corpus.nearest(candidates, from_path)


def resolve_wikilink(corpus: Corpus, from_doc: SourceDocument, inner: str) -> SourceDocument | None:
    """The document ``[[inner]]`` written in ``from_doc`` links to, or ``None``."""
    target = inner.split("|", 1)[0].rstrip("\\")  # [[a\|b]] inside a table escapes its pipe
    name, _, heading = target.partition("#")
    heading = heading.strip()
    if not name.strip():
        if not heading:
            return None
        path: str | None = from_doc.ax_path
    else:
        path = resolve_note(corpus, from_doc.ax_path, name)
    if path is None:
        return None
    return target_document(corpus, path, heading)


class WikilinkDetector:
    name = "wikilink"
    type = "wikilink"
    tag = "wikilink@2"
    weight = 1.0
    confidence = 0.95

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format == "code" or "[[" not in doc.text:
                continue
            data = doc.text.encode("utf-8")
            scanned = mask_code(data) if doc.format == "markdown" else data
            seen: set[str] = set()
            for match in _WIKILINK.finditer(scanned):
                dst = resolve_wikilink(corpus, doc, match.group(1).decode("utf-8", "replace"))
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, match.start()), offset=match.start())


@hookimpl
def xerj_register_detectors(register) -> None:
    register(WikilinkDetector())
