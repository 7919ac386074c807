"""attrs records shared across the core's modules (the edges' cattrs converters are in autoindex.wire)."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Evidence:
    """The text that taught an edge: a quote (or a generated rationale), its file, its byte offset."""

    quote: str
    source: str
    offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"quote": self.quote, "source": self.source, "offset": self.offset}


@attrs.frozen
class EdgeDraft:
    """An edge a detector proposes, before the graph derives its id and stamps its clocks.

    ``valid_at`` is epoch-ms (a detector uses the source file's mtime) and is
    part of the edge identity; ``created_at`` is stamped by the writer.
    """

    src: str
    dst: str
    type: str
    detector: str
    weight: float
    confidence: float
    valid_at: int
    evidence: Evidence | None = None
    src_format: str | None = None
    dst_format: str | None = None


@attrs.frozen
class SourceDocument:
    """One indexable document a format produced from a file (a file card, a section, an attachment).

    ``doc_id`` is deterministic from the root-relative path (and section), so
    re-runs overwrite instead of duplicating. ``fields`` are format-specific
    extras stored beside the standard ones (aliases, hrefs, message ids, ...).
    """

    doc_id: str
    dataset: str
    ax_path: str
    title: str
    text: str
    section: str
    kind: str
    mtime_ms: int
    format: str
    fields: dict[str, Any] = attrs.field(factory=dict)

    def to_source(self) -> dict[str, Any]:
        source = {
            "ax_path": self.ax_path,
            "title": self.title,
            "text": self.text,
            "section": self.section,
            "kind": self.kind,
            "mtime": self.mtime_ms,
            "format": self.format,
        }
        source.update(self.fields)
        return source
