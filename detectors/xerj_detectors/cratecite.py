"""``cratecite``: a crate's name in prose, linking to that crate's ``Cargo.toml``.

The names are the corpus's crates: each ``Cargo.toml``'s package name and its
directory's name (at least 3 characters). A whole token of prose (``-`` and
``_`` are part of a token; ``xerj_api`` also names ``xerj-api``) that equals one
links the document to that manifest, the nearest one when several share the
name. Every format but ``code`` is prose. Evidence is the line holding the name.

A corpus-wide detector: ``summarize`` reads each ``Cargo.toml`` card's names,
``combine`` builds the name → manifests index, ``detect`` reads prose against it.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, line_at, make_draft

_TOKEN = re.compile(rb"(?<![\w\-])[A-Za-z0-9_][\w\-]*[A-Za-z0-9_]")
MIN_NAME = 3


class CrateciteDetector:
    name = "cratecite"
    type = "cratecite"
    tag = "cratecite@1"
    weight = 0.5
    confidence = 0.6

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, tuple[str, ...]] | None:
        """A manifest's path and the names it gives its crate (package name, directory name)."""
        card = file_docs[0] if file_docs else None
        if card is None or posixpath.basename(card.ax_path) != "Cargo.toml":
            return None
        names = {card.fields.get("crate"), posixpath.basename(posixpath.dirname(card.ax_path))}
        return card.ax_path, tuple(sorted(n for n in names if isinstance(n, str) and n))

    def combine(self, partials: Iterable[tuple[str, tuple[str, ...]] | None], corpus: Corpus) -> DetectorState:
        manifests: dict[str, list[str]] = defaultdict(list)
        for path, names in sorted(p for p in partials if p is not None):
            for name in names:
                manifests[name].append(path)
        return DetectorState(data={name: tuple(paths) for name, paths in manifests.items() if len(name) >= MIN_NAME})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        manifests: dict[str, tuple[str, ...]] = state.data if state is not None and state.data else {}
        names = manifests.keys()
        if not names:
            return
        for doc in file_docs:
            if doc.format == "code" or not doc.text:
                continue
            data = doc.text.encode("utf-8")
            seen: set[str] = set()
            for match in _TOKEN.finditer(data):
                token = match.group(0).decode("ascii", "replace")
                name = next((n for n in (token, token.replace("_", "-"), token.replace("-", "_")) if n in names), None)
                if name is None:
                    continue
                manifest = corpus.nearest(manifests[name], doc.ax_path)
                dst = corpus.card(manifest) if manifest else None
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, match.start()), offset=match.start())


@hookimpl
def xerj_register_detectors(register) -> None:
    register(CrateciteDetector())
