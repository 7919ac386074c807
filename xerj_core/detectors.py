"""Everything a detector plugin imports, from one public module: ``from xerj_core.detectors import ...``.

A detector reads the documents of one file (and, through :class:`Corpus`, the
names of every other document of the run) and proposes :class:`EdgeDraft`
records; it never touches storage. The full contract is in
:mod:`xerj_core.autoindex.detect`; docs/plugins.md builds one step by step,
and :class:`xerj_core.testing.AbstractDetectorTests` checks it.

What is here:

* the hook marker :data:`hookimpl` (the same object as ``xerj_core.hookimpl``);
* the records: :class:`SourceDocument` (what a format parsed), :class:`EdgeDraft`
  and :class:`Evidence` (what a detector proposes), :class:`DetectorState`
  (what a corpus-wide detector's ``combine`` hands to ``detect``);
* the protocol :class:`Detector` and the lookups of :class:`Corpus`;
* building drafts: :func:`make_draft` (:func:`link_drafts`: a link detector's, one per target); evidence: :func:`line_at` (the line
  holding an offset), :func:`clip` (a generated rationale cut to
  :data:`QUOTE_MAX`); reading Markdown: :func:`mask_code` (code blanked out,
  offsets kept);
* which formats' documents are Markdown text: :data:`MARKDOWN_FORMATS`;
* resolving what a file writes to a document: :func:`resolve_relative`
  (``[text](../a.md#part)``), :func:`resolve_wikilink` (``[[Name#Heading]]``),
  :func:`resolve_note` and :func:`note_candidates` (a bare note name),
  :func:`target_document` (a path plus fragment), :func:`within_root`;
  :func:`label_key` (a reStructuredText label as Sphinx compares them), :func:`fold_name` (a name as the
  corpus's lookups compare names);
* a corpus-wide detector's key index: :func:`smallest_owners` (of the labels documents define:
  :func:`labels_of`).
"""

from xerj_core.autoindex.detect import (
    QUOTE_MAX,
    Corpus,
    Detector,
    DetectorState,
    clip,
    fold_name,
    labels_of,
    line_at,
    link_drafts,
    make_draft,
    mask_code,
    smallest_owners,
)
from xerj_core.autoindex.links import (
    MARKDOWN_FORMATS,
    NOTE_EXTENSIONS,
    note_candidates,
    resolve_note,
    resolve_relative,
    resolve_wikilink,
    target_document,
    within_root,
)
from xerj_core.hookspecs import hookimpl
from xerj_core.model import EdgeDraft, Evidence, SourceDocument
from xerj_core.text import label_key

__all__ = [
    "MARKDOWN_FORMATS",
    "NOTE_EXTENSIONS",
    "QUOTE_MAX",
    "Corpus",
    "Detector",
    "DetectorState",
    "EdgeDraft",
    "Evidence",
    "SourceDocument",
    "clip",
    "fold_name",
    "hookimpl",
    "label_key",
    "labels_of",
    "line_at",
    "link_drafts",
    "make_draft",
    "mask_code",
    "note_candidates",
    "resolve_note",
    "resolve_relative",
    "resolve_wikilink",
    "smallest_owners",
    "target_document",
    "within_root",
]
