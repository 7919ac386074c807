"""Small pieces the built-in formats share: building documents and unique section anchors."""

from __future__ import annotations

from typing import Any

from xerj_core.model import SourceDocument
from xerj_core.text import slugify


def document(
    fmt: Any,
    rel_path: str,
    mtime_ms: int,
    *,
    doc_id: str,
    title: str,
    text: str,
    section: str,
    kind: str,
    dataset: str | None = None,
    **fields: Any,
) -> SourceDocument:
    """A document of ``fmt`` for the file ``rel_path``; ``fields`` with value ``None`` are left out."""
    return SourceDocument(
        doc_id=doc_id,
        dataset=dataset or fmt.dataset,
        ax_path=rel_path,
        title=title,
        text=text,
        section=section,
        kind=kind,
        mtime_ms=mtime_ms,
        format=fmt.name,
        fields={k: v for k, v in fields.items() if v is not None},
    )


# An anchor becomes part of a document id, which is also a node id with a byte limit; a heading
# is a line, but a generated or pasted one can be kilobytes.
MAX_ANCHOR_CHARS = 100


class Anchors:
    """Hands out unique anchors within one file: ``intro``, ``intro-1``, ``intro-2`` (empty → ``fallback``)."""

    def __init__(self, fallback: str = "section") -> None:
        self._seen: dict[str, int] = {}
        self._fallback = fallback

    def __call__(self, label: str) -> str:
        base = slugify(label)[:MAX_ANCHOR_CHARS].rstrip("-") or self._fallback
        anchor = base
        while anchor in self._seen:
            self._seen[base] += 1
            anchor = f"{base}-{self._seen[base]}"
        self._seen[anchor] = 0
        return anchor
