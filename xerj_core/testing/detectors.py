"""The conformance suite every detector passes: subclass ``AbstractDetectorTests``, provide two fixtures.

Usage, in a plugin's own tests::

    from xerj_core.testing import AbstractDetectorTests, parse_files

    class TestMyDetector(AbstractDetectorTests):
        @pytest.fixture
        def detector(self):
            return MyDetector()

        @pytest.fixture
        def corpus_files(self):
            # {root-relative path: [SourceDocument, ...] (card first)}, as formats parse them;
            # the detector must fire at least once on it
            return parse_files({"a.md": b"...", "b.md": b"..."})

        @pytest.fixture
        def plugin(self):  # optional: the object whose hookimpl registers the detector
            return my_plugin_module

:func:`parse_files` builds ``corpus_files`` from bytes with the built-in formats.
The mixin's name does not start with ``Test``, so pytest collects it only
through a subclass.

The contract checked here: the protocol's attributes, a tag ``name@N``, weight
and confidence in [0, 1]; it fires on the sample; two runs give identical
drafts, whatever order the files come in; every draft carries the tag, a
declared type, ``valid_at`` equal to its source file's mtime, and evidence
(``source`` the source file, a non-empty quote of at most 240 characters, an
offset inside the source text where the quote is that offset's line, or offset
0 with a quote or rationale); no self-edges; ``src`` is a document of the file
being read and ``dst`` a document of the corpus; one draft per ``(src, type,
dst)``; an empty corpus gives nothing; its detection can be remembered (it reads
the corpus and its state through lookups a run can note, and gives the same
drafts so); and, with ``plugin``, the hook registers a detector the core accepts.

The per-draft checks read what ``detect`` itself yields (the ``drafts``
fixture: ``summarize`` → ``combine`` → ``detect``, file by file), not the
runner's output: the runner refuses a draft that breaks the contract with a
``PluginError`` first, which would hide which rule broke.
"""

from __future__ import annotations

from typing import Mapping

import attrs
import pytest

from xerj_core.autoindex.detect import (
    QUOTE_MAX,
    Corpus,
    Detector,
    collect_detectors,
    combine,
    detect_file,
    edge_types,
    is_corpus_wide,
    line_at,
    run_detectors,
    summarize,
)
from xerj_core.autoindex.detectmemo import Answers, detect_noting
from xerj_core.model import EdgeDraft, SourceDocument
from xerj_core.plugins import get_plugin_manager

__all__ = ["AbstractDetectorTests", "DEFAULT_MTIME_MS", "detect_directly", "parse_files"]

DEFAULT_MTIME_MS = 1_700_000_000_000


def parse_files(
    files: Mapping[str, bytes], mtime_ms: int | Mapping[str, int] = DEFAULT_MTIME_MS
) -> dict[str, list[SourceDocument]]:
    """Parse ``{rel_path: bytes}`` with the built-in formats into ``{rel_path: documents}``.

    ``mtime_ms`` is one mtime for every file or a mapping per path. Files no
    format accepts are left out; a file that fails to parse raises.
    """
    from xerj_core.autoindex.builtin_formats import (asciidoc, bear, bibtex, canvas, chats, code, docx, email, enex,
                                                     epub, html, joplin, kindle, latex, markdown, notebook, odt, opml,
                                                     org, outlook, pdf, pptx, roam, rst, slack, table, telegram,
                                                     text, tiddlywiki, xlsx, zotero)
    from xerj_core.autoindex.formats import parse_file

    formats = [
        markdown.MarkdownFormat(), text.TextFormat(), html.HtmlFormat(),
        email.EmailFormat(), pdf.PdfFormat(), code.CodeFormat(), notebook.NotebookFormat(), rst.RstFormat(),
        org.OrgFormat(), canvas.CanvasFormat(), tiddlywiki.TiddlyWikiFormat(), asciidoc.AsciiDocFormat(),
        enex.EnexFormat(), joplin.JoplinFormat(), kindle.KindleFormat(), epub.EpubFormat(), docx.DocxFormat(),
        odt.OdtFormat(), pptx.PptxFormat(), xlsx.XlsxFormat(), opml.OpmlFormat(), table.TableFormat(),
        latex.LatexFormat(), bibtex.BibtexFormat(), zotero.ZoteroFormat(), chats.ChatExportFormat(),
        outlook.OutlookFormat(), roam.RoamFormat(), bear.BearFormat(), telegram.TelegramFormat(),
        slack.SlackFormat(),
    ]
    parsed: dict[str, list[SourceDocument]] = {}
    for path in sorted(files):
        mtime = mtime_ms[path] if isinstance(mtime_ms, Mapping) else mtime_ms
        docs = parse_file(formats, path, files[path], mtime)
        if docs:
            parsed[path] = docs
    return parsed


class AbstractDetectorTests:
    """Contract tests for a :class:`~xerj_core.autoindex.detect.Detector`."""

    @pytest.fixture
    def detector(self) -> Detector:
        raise NotImplementedError("override the `detector` fixture to return the detector under test")

    @pytest.fixture
    def corpus_files(self) -> dict[str, list[SourceDocument]]:
        raise NotImplementedError(
            "override the `corpus_files` fixture: {path: [documents, card first]} on which the detector fires"
        )

    @pytest.fixture
    def plugin(self) -> object | None:
        return None

    @pytest.fixture
    def edges(self, detector, corpus_files):
        return run_detectors([detector], corpus_files).edges

    @pytest.fixture
    def drafts(self, detector, corpus_files) -> list[tuple[str, EdgeDraft]]:
        """``(path of the file read, draft)`` for every draft ``detect`` yields, unchecked by any runner."""
        return detect_directly(detector, corpus_files)

    # -- identity --------------------------------------------------------

    def test_satisfies_protocol(self, detector):
        assert isinstance(detector, Detector)
        assert callable(detector.detect)

    def test_tag_is_versioned(self, detector):
        name, _, version = detector.tag.partition("@")
        assert name == detector.name and version.isdigit() and int(version) >= 1

    def test_weight_and_confidence_in_range(self, detector):
        for value in (detector.weight, detector.confidence):
            assert isinstance(value, (int, float)) and not isinstance(value, bool)
            assert 0.0 <= value <= 1.0

    def test_registers_through_its_hook(self, detector, plugin):
        if plugin is None:
            pytest.skip("no `plugin` fixture: the hook registration is not checked")
        pm = get_plugin_manager(load_entrypoints=False, extra_plugins=[(detector.name, plugin)])
        collected = collect_detectors(pm)
        assert detector.name in collected
        assert collected[detector.name].tag == detector.tag

    # -- behaviour on the sample -----------------------------------------

    def test_fires_on_the_sample(self, edges):
        assert edges, "the sample corpus should give the detector something to find"

    def test_deterministic(self, detector, corpus_files, edges):
        again = run_detectors([detector], corpus_files, Corpus(corpus_files)).edges
        assert again == edges
        shuffled = dict(reversed(list(corpus_files.items())))
        assert run_detectors([detector], shuffled, Corpus(shuffled)).edges == edges

    def test_detect_yields_edge_drafts(self, drafts):
        for path, draft in drafts:
            assert isinstance(draft, EdgeDraft), f"{path}: detect yielded {draft!r}"

    def test_every_edge_carries_the_versioned_tag_and_a_declared_type(self, detector, drafts):
        for _path, edge in drafts:
            assert edge.detector == detector.tag
            assert edge.type in edge_types(detector)

    def test_evidence_on_every_edge(self, corpus_files, drafts):
        docs = {doc.doc_id: doc for file_docs in corpus_files.values() for doc in file_docs}
        for _path, edge in drafts:
            evidence = edge.evidence
            assert evidence is not None, f"{edge.src} -> {edge.dst} has no evidence"
            source = docs[edge.src]
            assert evidence.source == source.ax_path
            assert evidence.quote and evidence.quote == evidence.quote.strip()
            assert len(evidence.quote) <= QUOTE_MAX
            text = source.text.encode("utf-8")
            assert 0 <= evidence.offset <= len(text)
            if evidence.offset:
                assert evidence.quote == line_at(text, evidence.offset)

    def test_no_self_edges(self, drafts):
        for path, edge in drafts:
            assert edge.src != edge.dst, f"{path}: a self-edge on {edge.src!r}"

    def test_ids_resolve_to_documents_of_the_corpus(self, corpus_files, drafts):
        owner = {doc.doc_id: path for path, file_docs in corpus_files.items() for doc in file_docs}
        for path, edge in drafts:
            assert owner.get(edge.src) == path, f"{path}: src {edge.src!r} is not a document of the file read"
            assert edge.dst in owner, f"{path}: dst {edge.dst!r} is not a document of the corpus"
            assert edge.evidence is not None and edge.evidence.source == path

    def test_valid_at_is_the_source_file_mtime(self, corpus_files, drafts):
        for path, edge in drafts:
            assert edge.valid_at == corpus_files[path][0].mtime_ms

    def test_one_draft_per_claim_from_detect_itself(self, drafts):
        per_file: dict[str, list[tuple[str, str, str]]] = {}
        for path, d in drafts:
            per_file.setdefault(path, []).append((d.src, d.type, d.dst))
        for path, claims in per_file.items():
            assert len(claims) == len(set(claims)), f"{path}: the same claim was proposed twice"

    def test_corpus_wide_detector_summarizes_every_file(self, detector, corpus_files):
        if not is_corpus_wide(detector):
            pytest.skip("not a corpus-wide detector")
        partials = [detector.summarize(corpus_files[p]) for p in sorted(corpus_files)]
        assert partials == [detector.summarize(corpus_files[p]) for p in sorted(corpus_files)]

    def test_its_detection_can_be_remembered(self, detector, corpus_files):
        """A run remembers each file's detection by the questions the detector asks of the corpus and of its state
        (see ``xerj_core.autoindex.detectmemo``): asked through those views it gives the same drafts, asks only
        questions that can be noted (lookups, a state mapping read by key), and each gets the same answer when
        asked again. A detector that reads past them still works, but is detected over every file on every run."""
        corpus = Corpus(corpus_files, stamps={path: f"stamp of {path}" for path in corpus_files})
        ordered = sorted(corpus_files)
        states = combine([detector], (summarize([detector], corpus_files[p]) for p in ordered), corpus)
        answers = Answers(corpus, states)
        for path in ordered:
            drafts, noted = detect_noting([detector], corpus_files[path], corpus, states)
            assert drafts == detect_file([detector], corpus_files[path], corpus, states), path
            assert noted.kept, f"{detector.name} read {path}'s corpus or state past the lookups a run can note"
            assert answers.agree(noted), path

    def test_empty_corpus_gives_nothing(self, detector):
        assert run_detectors([detector], {}).edges == ()

    def test_mtime_moves_valid_at_and_nothing_else(self, detector, corpus_files, edges):
        shifted = {
            path: [_with_mtime(doc, doc.mtime_ms + 1000) for doc in docs] for path, docs in corpus_files.items()
        }
        moved = run_detectors([detector], shifted).edges
        assert [(e.src, e.type, e.dst, e.evidence) for e in moved] == [(e.src, e.type, e.dst, e.evidence) for e in edges]
        assert all(m.valid_at == e.valid_at + 1000 for m, e in zip(moved, edges))


def detect_directly(detector: Detector, corpus_files: Mapping[str, list[SourceDocument]]
                    ) -> list[tuple[str, EdgeDraft]]:
    """Every draft ``detector.detect`` yields over ``corpus_files``, file by file, with no runner check."""
    corpus = Corpus(corpus_files)
    detectors = [detector]
    ordered = sorted(corpus_files)
    states = combine(detectors, (summarize(detectors, corpus_files[p]) for p in ordered), corpus)
    return [(path, draft) for path in ordered
            for draft in detector.detect(corpus_files[path], corpus, states.get(detector.name))]


def _with_mtime(doc: SourceDocument, mtime_ms: int) -> SourceDocument:
    return attrs.evolve(doc, mtime_ms=mtime_ms)
