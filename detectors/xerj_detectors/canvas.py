"""``canvas``: what an Obsidian canvas shows and the arrows a person drew on it between notes.

Only canvas documents are read (format ``canvas``). The board's card links to
each file a ``file`` node shows (its ``shows``: vault-relative paths, taken
from the indexed folder's root, else as a path ending when a vault is indexed
from one of its folders; a ``#heading`` or ``#^block`` picks that section), and each arrow between two file nodes, a document of its own, links
to both ends (its ``connects``), so two notes a person joined on a board are
two hops apart through the arrow. Evidence: ``<board> shows <path>``, or the
arrow's text (``a → b: label``).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, link_drafts,
                                 resolve_note, resolve_relative, target_document)

CANVAS_FORMATS = frozenset({"canvas"})


def _targets(corpus: Corpus, doc: SourceDocument,
             paths: Iterable[object]) -> Iterator[tuple[str, SourceDocument | None]]:
    """Each vault-relative path (a fragment picking a section) with the document it names, or None: from the
    indexed folder's root, else (a vault indexed from one of its folders) as a path ending, as ``[[a/b]]`` finds
    one."""
    for path in paths:
        if not isinstance(path, str) or not path.strip():
            continue
        path = path.strip()
        found = resolve_relative(corpus, doc.ax_path, "/" + path.lstrip("/"))
        if found is None:
            name, _, fragment = path.partition("#")
            within = resolve_note(corpus, doc.ax_path, name)
            found = None if within is None else target_document(corpus, within, fragment)
        yield path, found


class CanvasDetector:
    name = "canvas"
    type = "canvas"
    tag = "canvas@1"
    weight = 1.0
    confidence = 0.95

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            if doc.format not in CANVAS_FORMATS:
                continue
            if doc.kind == "arrow":
                ends = [(0, target) for _path, target in _targets(corpus, doc, doc.fields.get("connects") or ())]
                yield from link_drafts(self, doc, doc.text.encode("utf-8"), ends)
                continue
            # each quote names the node's path (not a line of the card's text: offset 0), and two nodes may show one
            # document (a note, and a heading of it that is gone): its first node's path is the one quoted
            seen: set[str] = set()
            for path, target in _targets(corpus, doc, doc.fields.get("shows") or ()):
                if target is not None and target.doc_id not in seen:
                    seen.add(target.doc_id)
                    yield from link_drafts(self, doc, f"{doc.title} shows {path}".encode("utf-8"), [(0, target)])


@hookimpl
def xerj_register_detectors(register) -> None:
    register(CanvasDetector())
