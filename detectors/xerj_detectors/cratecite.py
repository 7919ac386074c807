"""``cratecite``: a crate's name in prose, linking to that crate's ``Cargo.toml``.

The names are the corpus's crates: each ``Cargo.toml``'s package name and its
directory's name (at least 3 characters). A whole token of prose (``-`` and
``_`` are part of a token; ``xerj_api`` also names ``xerj-api``) that equals one
links the document to that manifest, the nearest one when several share the
name. Every format but ``code`` is prose. Evidence is the line holding the name.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from xerj_core.autoindex.detect import Corpus, DetectorState, line_at, make_draft
from xerj_core.hookspecs import hookimpl
from xerj_core.model import EdgeDraft, SourceDocument

_TOKEN = re.compile(rb"(?<![\w\-])[A-Za-z0-9_][\w\-]*[A-Za-z0-9_]")
MIN_NAME = 3


class CrateciteDetector:
    name = "cratecite"
    type = "cratecite"
    tag = "cratecite@1"
    weight = 0.5
    confidence = 0.6

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        names = {name for name in corpus.crate_names if len(name) >= MIN_NAME}
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
                manifest = corpus.nearest(corpus.crate_manifests(name), doc.ax_path)
                dst = corpus.card(manifest) if manifest else None
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, match.start()), offset=match.start())


@hookimpl
def xerj_register_detectors(register) -> None:
    register(CrateciteDetector())
