"""LaTeX and BibTeX: the ``latex`` and ``bibtex`` formats, and the ``latex``, ``citekey`` and ``bibtex`` detectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.autoindex.builtin_formats import bibtex, latex
from xerj_core.autoindex.detect import Corpus, run_detectors
from xerj_core.autoindex.formats import FormatError
from xerj_core.autoindex.pipeline import run as run_pipeline
from xerj_core.model import SourceDocument
from xerj_core.testing.detectors import AbstractDetectorTests, parse_files
from xerj_core.testing.formats import AbstractFormatTests
from xerj_detectors import bibtex as bibtex_detector
from xerj_detectors import citekey, doi
from xerj_detectors import latex as latex_detector

MTIME = 1_700_000_000_000
UNDECODABLE = bytes(range(128, 256)) * 2  # no encoding reads it as text
THESIS = Path(__file__).parent / "fixtures/latex-thesis"

PAPER = rb"""\documentclass[11pt]{article}
\usepackage[utf8]{inputenc}
\usepackage{natbib}
\title{On the {Gr\"obner} Bases of Notes}
\author{J{\"o}rg M{\"u}ller \and Ada Lovelace}
\addbibresource{refs.bib}
\begin{document}
\maketitle
\begin{abstract}
We study memory.
\end{abstract}
% a comment is no text: \cite{hidden}
\section{Introduction}\label{sec:intro}
As \citet{knuth84} showed, and others~\citep[p.~3]{lamport86,knuth84}, na\"ive notes fail.
See Section~\ref{sec:method} and \url{https://example.org}.
\subsection*{A detail}
Math stays: $E = mc^2$. \textbf{Bold} \emph{words} 50\% --- \LaTeX{} too.
\input{sections/method}
\section{Conclusion}
\begin{figure}\includegraphics[width=3cm]{fig/a.png}\caption{A figure}\label{fig:a}\end{figure}
\begin{lstlisting}[language=Python]
print("\cite{code}")
\end{lstlisting}
\begin{comment}draft \cite{draft}\end{comment}
\end{document}
"""

METHOD = rb"""\section{Method}\label{sec:method}
We refer back to \cref{sec:intro} and to \autocite{knuth84}.
"""

REFS = rb"""@string{tug = "TeX Users Group"}
% Zotero export
@book{knuth84,
  title = {The {\TeX}book},
  author = {Knuth, Donald E.},
  publisher = tug,
  year = 1984,
  keywords = {typesetting, TeX},
  file = {:papers/knuth84.pdf:PDF},
}
@book{lamport86, title = "{\LaTeX:} A Document Preparation System", author = "Lamport, Leslie and others",
  year = {1986}, file = {/Users/ada/Zotero/storage/ABCD1234/lamport.pdf}, crossref = {series}}
@book{knuth84, title = {written twice}}
@misc{broken, title = {never closed
@collection{series, title = {Computers and Typesetting}, editor = {Knuth, Donald E.}}
@article{muller2020, title = {Notes}, author = {M{\"u}ller, J{\"o}rg}, journal = {J. Notes}, year = 2020,
  abstract = {Na\"ive notes}, doi = {10.1/xyz}}
"""


class TestLatexConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return latex.LatexFormat()

    @pytest.fixture
    def sample_files(self):
        return {"paper/main.tex": PAPER, "paper/sections/method.tex": METHOD, "empty.tex": b"",
                "latin1.tex": "\\section{Caf\xe9}\nna\xefve".encode("latin-1")}

    @pytest.fixture
    def bad_files(self):
        return {"thesis.tex": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return latex


class TestBibtexConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return bibtex.BibtexFormat()

    @pytest.fixture
    def sample_files(self):
        return {"paper/refs.bib": REFS, "empty.bib": b"", "notes.bib": b"% only a comment\n"}

    @pytest.fixture
    def bad_files(self):
        return {"refs.bib": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return bibtex


def test_latex_reads_a_paper_as_a_reader_sees_it_with_its_title_sections_citations_and_labels():
    card, intro, detail, conclusion = latex.LatexFormat().parse("paper/main.tex", PAPER, MTIME)
    assert (card.doc_id, card.kind, card.title, card.fields["author"]) == (
        "paper/main.tex", "file", "On the Gröbner Bases of Notes", "Jörg Müller Ada Lovelace")
    # the preamble is set-up, not text; its bibliography is the document's
    assert card.text == "[refs.bib]\n\nWe study memory." and card.fields["sections"] == 3
    assert card.fields["links"] == [{"kind": "bibliography", "target": "refs.bib", "offset": 0}]
    assert "usepackage" not in card.text and "hidden" not in card.text
    assert [(d.doc_id, d.section, d.fields["level"]) for d in (intro, detail, conclusion)] == [
        ("paper/main.tex#introduction", "Introduction", 1), ("paper/main.tex#a-detail", "A detail", 2),
        ("paper/main.tex#conclusion", "Conclusion", 1)]
    assert intro.text == ("Introduction\nAs [knuth84] showed, and others [lamport86; knuth84], naïve notes fail.\n"
                          "See Section [sec:method] and https://example.org.")
    assert intro.fields["labels"] == ["sec:intro"]
    # each link's offset is where its command's rendering starts: the two keys of one \citep share theirs
    assert [(link["kind"], link["target"], intro.text[link["offset"]:].split("]")[0] + "]")
            for link in intro.fields["links"]] == [
        ("cite", "knuth84", "[knuth84]"), ("cite", "lamport86", "[lamport86; knuth84]"),
        ("cite", "knuth84", "[lamport86; knuth84]"), ("ref", "sec:method", "[sec:method]")]
    assert "Math stays: $E = mc^2$. Bold words 50% — LaTeX too." in detail.text
    assert detail.fields["links"] == [{"kind": "input", "target": "sections/method",
                                       "offset": detail.text.index("[sections/method]")}]
    # a listing is code and a comment environment no text: neither cites
    assert conclusion.text == 'Conclusion\nA figure\n\nprint("\\cite{code}")' and "links" not in conclusion.fields
    assert conclusion.fields["labels"] == ["fig:a"]


def test_latex_labels_inside_math_are_labels_and_a_cleveref_list_refers_to_each():
    r"""An equation's \label (math is kept as written, so rendering never meets it) is found, as HoTT's book
    \eqref's its equations; \cref{a,b} names both; a repeated citation's offset is its own, not the first's."""
    source = (rb"\section{S}\begin{equation}\label{eq:x} x=1\end{equation} \[ y \label{eq:y} \]"
              rb" see \cref{eq:x,eq:y}, \cite{k} and again \cite{k}.")
    _card, section = latex.LatexFormat().parse("m.tex", source, MTIME)
    assert section.fields["labels"] == ["eq:x", "eq:y"]
    links = section.fields["links"]
    assert [(link["target"], section.text[link["offset"]:][:8]) for link in links] == [
        ("eq:x", "[eq:x, e"), ("eq:y", "[eq:x, e"), ("k", "[k] and "), ("k", "[k].")]
    found = {(e.src, e.dst) for e in run(latex_detector.LatexDetector(), {"m.tex": source, "n.tex": rb"\section{N}"
                                                                          rb"\eqref{eq:y}"})}
    assert found == {("n.tex#n", "m.tex#s")}


def test_latex_a_chapter_without_a_document_environment_is_all_text_titled_by_its_first_heading():
    card, method = latex.LatexFormat().parse("paper/sections/method.tex", METHOD, MTIME)
    assert (card.title, card.text, method.section, method.fields["labels"]) == ("Method", "", "Method", ["sec:method"])
    assert [link["target"] for link in method.fields["links"]] == ["sec:intro", "knuth84"]
    (only,) = latex.LatexFormat().parse("notes/plain.tex", b"Just words, no heading.", MTIME)
    assert (only.title, only.text) == ("plain", "Just words, no heading.")
    # a name a macro makes is TeX's to expand: it names nothing here, and shows as nothing
    (macros,) = latex.LatexFormat().parse("cover.tex", rb"\input{\olpath/version}\input\renewcommand"
                                                     rb"\newcommand{\c}[1]{\cite{#1}} Cover", MTIME)
    assert (macros.text, macros.fields.get("links")) == ("Cover", None)


def test_latex_reads_the_thesis_template_chapters_cites_and_includes():
    fmt = latex.LatexFormat()
    docs = fmt.parse("thesis.tex", (THESIS / "thesis.tex").read_bytes(), MTIME)
    assert [link["target"] for link in docs[0].fields["links"] if link["kind"] == "input"][:3] == [
        "Preamble/preamble", "thesis-info", "Dedication/dedication"]
    chapter = fmt.parse("Chapter1/chapter1.tex", (THESIS / "Chapter1/chapter1.tex").read_bytes(), MTIME)
    assert [doc.section for doc in chapter[1:]] == ["Getting started", "What is loren ipsum? Title with math $\\sigma$",
                                                   "Why do we use loren ipsum?", "Where does it come from?"]
    assert [doc.fields["level"] for doc in chapter[1:]] == [1, 2, 2, 2]
    assert "Lorem Ipsum [Aup91] has been" in chapter[2].text and "\\nomenclature" not in chapter[2].text
    assert "Cauchy" not in chapter[2].text  # the nomenclature's entries are no words of the section


INLINE_REFERENCES = rb"""\documentclass{article}
\begin{document}
\section{Intro}
As shown by \cite{knuth84} and \cite{lamport}.
\begin{thebibliography}{9}
\bibitem{knuth84} D.~E. Knuth, \emph{The \TeX book}, Addison-Wesley, 1984.
\bibitem[Lam86]{lamport} L.~Lamport, \emph{\LaTeX: A Document Preparation System}, 1986.
\end{thebibliography}
\end{document}
"""


def test_latex_a_reference_list_written_in_the_document_is_an_entry_per_bibitem_its_citations_land_on():
    card, intro, knuth, lamport = latex.LatexFormat().parse("paper.tex", INLINE_REFERENCES, MTIME)
    assert intro.text == "Intro\nAs shown by [knuth84] and [lamport]."
    assert [(d.doc_id, d.kind, d.dataset, d.fields["citekey"], d.title) for d in (knuth, lamport)] == [
        ("paper.tex#knuth84", "entry", "ax-refs", "knuth84", "D. E. Knuth, The TeXbook, Addison-Wesley, 1984."),
        ("paper.tex#lamport", "entry", "ax-refs", "lamport", "L. Lamport, LaTeX: A Document Preparation System, 1986.")]
    found = {(e.src, e.dst) for e in run(latex_detector.LatexDetector(), {"paper.tex": INLINE_REFERENCES,
                                                                          "refs.bib": REFS})}
    assert found == {("paper.tex#intro", "paper.tex#knuth84"), ("paper.tex#intro", "paper.tex#lamport")}


def test_latex_that_pylatexenc_cannot_read_is_the_files_failure_not_a_crash():
    deep = b"{" * 5000 + b"x" + b"}" * 5000
    try:
        docs = latex.LatexFormat().parse("deep.tex", deep, MTIME)
    except FormatError as refused:
        assert "malformed" in refused.reason
    else:
        assert "x" in docs[0].text


def test_bibtex_reads_each_entry_as_a_reference_list_shows_it():
    card, knuth, lamport, series, muller = bibtex.BibtexFormat().parse("paper/refs.bib", REFS, MTIME)
    assert (card.kind, card.title, card.fields["entries"], card.fields["duplicate_keys"]) == (
        "file", "refs", 4, ["knuth84"])
    assert card.fields["unread"] == ["line 14: Unexpected block start: `@collection`. Was still looking for "
                                     "field-value closing `}`"]
    assert (knuth.doc_id, knuth.kind, knuth.dataset, knuth.title) == (
        "paper/refs.bib#knuth84", "entry", "ax-refs", "The TeXbook")
    assert knuth.text == "The TeXbook\nDonald E. Knuth\nbook 1984\nTeX Users Group\ntypesetting, TeX"
    assert {key: knuth.fields.get(key) for key in ("citekey", "entry_type", "authors", "year", "venue", "keywords",
                                                    "file", "line")} == {
        "citekey": "knuth84", "entry_type": "book", "authors": ["Donald E. Knuth"], "year": "1984",
        "venue": "TeX Users Group", "keywords": ["typesetting", "TeX"], "file": ":papers/knuth84.pdf:PDF", "line": 3}
    assert (lamport.title, lamport.fields["authors"], lamport.fields["crossref"]) == (
        "LaTeX: A Document Preparation System", ["Leslie Lamport"], ["series"])
    assert (series.fields["editors"], series.text) == (["Donald E. Knuth"], "Computers and Typesetting\n"
                                                       "Donald E. Knuth\ncollection")
    assert muller.doc_id == "paper/refs.bib#muller2020"
    assert (muller.title, muller.fields["authors"], muller.fields["doi"]) == ("Notes", ["Jörg Müller"], "10.1/xyz")
    assert "Naïve notes" in muller.text


def test_bibtex_keeps_an_entry_whose_names_it_cannot_split_as_written():
    """A Biblioscape export (JabRef's tests) lists names with semicolons, which BibTeX would not split either."""
    source = b"@article{b95, title = {Nonsense codons}, author = {Baklouti, F.; Huang, S. C.; Tang, T. K.}, year=1995}"
    card, entry = bibtex.BibtexFormat().parse("refs.bib", source, MTIME)
    assert (card.fields["entries"], card.fields.get("unread")) == (1, None)
    assert (entry.title, entry.fields["authors"], entry.fields["year"]) == (
        "Nonsense codons", ["Baklouti, F.; Huang, S. C.; Tang, T. K."], "1995")
    assert entry.fields["problem"].startswith("Cannot split the following name")


# ---- detectors -------------------------------------------------------------------------------------------------

def run(detector, files):
    return run_detectors([detector], parse_files(files, MTIME)).edges


PROJECT = {"paper/main.tex": PAPER, "paper/sections/method.tex": METHOD, "paper/refs.bib": REFS,
           "paper/papers/knuth84.pdf.md": b"# not the pdf",
           "library/lamport.pdf.txt": b"x", "other/refs.bib": b"@book{knuth84, title={A copy}}\n"}


def test_latex_detector_links_includes_bibliography_citations_and_references():
    found = {(e.type, e.src, e.dst, e.evidence.quote) for e in run(latex_detector.LatexDetector(), PROJECT)}
    assert found == {
        ("bibliography", "paper/main.tex", "paper/refs.bib", "[refs.bib]"),
        # the nearest bibliography's entry, not the copy in other/
        ("cites", "paper/main.tex#introduction", "paper/refs.bib#knuth84",
         "As [knuth84] showed, and others [lamport86; knuth84], naïve notes fail."),
        ("cites", "paper/main.tex#introduction", "paper/refs.bib#lamport86",
         "As [knuth84] showed, and others [lamport86; knuth84], naïve notes fail."),
        ("latex_ref", "paper/main.tex#introduction", "paper/sections/method.tex#method",
         "See Section [sec:method] and https://example.org."),
        ("latex_include", "paper/main.tex#a-detail", "paper/sections/method.tex", "[sections/method]"),
        ("latex_ref", "paper/sections/method.tex#method", "paper/main.tex#introduction",
         "We refer back to [sec:intro] and to [knuth84]."),
        ("cites", "paper/sections/method.tex#method", "paper/refs.bib#knuth84",
         "We refer back to [sec:intro] and to [knuth84]."),
    }


def test_latex_detector_takes_a_label_of_the_citing_file_before_one_of_another():
    files = {"b.tex": rb"\section{A}\label{dup}\section{B}See \ref{dup}.", "a.tex": rb"\section{Z}\label{dup}",
             "c.tex": rb"\section{C}See \ref{dup}."}
    found = {(e.src, e.dst) for e in run(latex_detector.LatexDetector(), files)}
    assert found == {("b.tex#b", "b.tex#a"), ("c.tex#c", "a.tex#z")}


def test_latex_detector_quotes_the_line_of_a_citation_after_letters_of_several_bytes():
    """A link's offset counts characters; the quote is found in the text's UTF-8 bytes, so letters before it that take
    two bytes each must not move it onto an earlier line."""
    source = "\\section{S}\n" + "é" * 40 + "\nplain\n" + "\\cite{knuth84} then \\ref{s}\\label{s}"
    found = [(e.dst, e.evidence.quote) for e in run(latex_detector.LatexDetector(), {"u.tex": source.encode(),
                                                                                     "refs.bib": REFS})]
    assert found == [("refs.bib#knuth84", "[knuth84] then [s]")]


def test_latex_detector_finds_an_included_file_from_the_folder_a_main_file_compiles_in():
    files = {"thesis/main.tex": rb"\begin{document}\include{chapters/one}\end{document}",
             "thesis/chapters/one.tex": rb"\chapter{One}\input{chapters/two}\input{figures/plot.tikz}",
             "thesis/chapters/two.tex": rb"\section{Two}", "thesis/figures/plot.tikz.tex": b"%",
             "elsewhere/chapters/two.tex": rb"\section{Not this}"}
    found = {(e.src, e.dst) for e in run(latex_detector.LatexDetector(), files)}
    assert found == {("thesis/main.tex", "thesis/chapters/one.tex"),
                     ("thesis/chapters/one.tex#one", "thesis/chapters/two.tex"),
                     ("thesis/chapters/one.tex#one", "thesis/figures/plot.tikz.tex")}


def test_citekey_follows_pandoc_org_and_sphinx_citations_to_entries_and_nothing_else():
    files = {
        "refs.bib": REFS,
        "notes/draft.md": b"# Draft\n[see @knuth84, p. 3; -@lamport86] and @series says.\n"
                          b"Mail ada@example.org, follow @ada, cite @{knuth84}.\n"
                          b"```\n@lamport86 in code\n```\n",
        "notes/code-only.md": b"`@knuth84` is an example\n",
        "notes/org.org": b"#+title: Org\n[cite/t:@lamport86] and cite:knuth84,series\n"
                         b"#+begin_src python\n@muller2020\n#+end_src\n",
        "notes/doc.rst": b"Title\n=====\n\nAs :cite:p:`knuth84,lamport86` and :footcite:t:`series`.\n",
    }
    found = {(e.src, e.dst, e.type) for e in run(citekey.CitekeyDetector(), files)}
    assert found == {
        ("notes/draft.md#draft", "refs.bib#knuth84", "cites"), ("notes/draft.md#draft", "refs.bib#lamport86", "cites"),
        ("notes/draft.md#draft", "refs.bib#series", "cites"),
        ("notes/org.org", "refs.bib#lamport86", "cites"), ("notes/org.org", "refs.bib#knuth84", "cites"),
        ("notes/org.org", "refs.bib#series", "cites"),
        ("notes/doc.rst#title", "refs.bib#knuth84", "cites"), ("notes/doc.rst#title", "refs.bib#lamport86", "cites"),
        ("notes/doc.rst#title", "refs.bib#series", "cites")}


QUARTO_CHAPTER = b"""# Results {#sec-results}

![Growth](g.png){#fig-growth}

```{python}
#| label: fig-plot
plot()
```

$$ E = mc^2 $$ {#eq-energy}

## Discussion

As @fig-growth, @fig-plot and @eq-energy show, see @sec-results, @sec-method and @fig-nowhere.
"""


def test_citekey_follows_quarto_cross_references_to_the_section_holding_the_target():
    files = {"book/results.qmd": QUARTO_CHAPTER,
             "book/method.qmd": b"# Method {#sec-method}\nAs in @fig-growth.\n",
             "a/copy.qmd": b"# Copy\n![G](g.png){#fig-growth}\n"}
    found = {(e.type, e.src, e.dst) for e in run(citekey.CitekeyDetector(), files)}
    assert found == {("cross_ref", "book/results.qmd#discussion", "book/results.qmd#sec-results"),
                     ("cross_ref", "book/results.qmd#discussion", "book/method.qmd#sec-method"),
                     # another file's target: the smallest id holding it
                     ("cross_ref", "book/method.qmd#sec-method", "a/copy.qmd#copy")}


def test_citekey_prefers_the_key_of_the_same_case_then_the_nearest_bibliography():
    files = {"a/refs.bib": b"@book{Smith20, title={Upper}}\n@book{jones, title={A's}}\n",
             "b/refs.bib": b"@book{smith20, title={Lower}}\n@book{jones, title={B's}}\n",
             "b/notes/n.md": b"[@smith20] [@Smith20] [@jones]\n"}
    found = {e.dst for e in run(citekey.CitekeyDetector(), files)}
    assert found == {"b/refs.bib#smith20", "a/refs.bib#Smith20", "b/refs.bib#jones"}


def test_citekey_reads_a_notes_bibliography_and_citekey_from_its_front_matter():
    """Pandoc's ``bibliography`` links the note to each file and wins over a nearer copy of a key; a literature note's
    ``citekey`` links its card to the entry it is about."""
    files = {"shared/refs.bib": b"@book{smith20, title={Shared}}\n@book{knuth84, title={K}}\n",
             "notes/refs.bib": b"@book{smith20, title={Near}}\n",
             "notes/paper.md": b"---\ntitle: Paper\nbibliography: [../shared/refs.bib, missing.bib]\n---\n"
                               b"# Paper\nAs [@smith20] says.\n",
             "notes/plain.md": b"# Plain\nAs [@smith20] says.\n",
             "notes/texbook.md": b'---\ncitekey: "@knuth84"\n---\n# The TeXbook\n',
             "notes/draft.org": b"#+title: Draft\n#+bibliography: ../shared/refs.bib\n\nAs [cite:@smith20].\n"}
    found = {(e.type, e.src, e.dst, e.evidence.quote) for e in run(citekey.CitekeyDetector(), files)}
    assert found == {
        ("bibliography", "notes/paper.md", "shared/refs.bib", "bibliography: ../shared/refs.bib"),
        # org-cite names it as front matter does
        ("bibliography", "notes/draft.org", "shared/refs.bib", "bibliography: ../shared/refs.bib"),
        ("cites", "notes/draft.org", "shared/refs.bib#smith20", "As [cite:@smith20]."),
        ("cites", "notes/paper.md#paper", "shared/refs.bib#smith20", "As [@smith20] says."),
        ("cites", "notes/plain.md#plain", "notes/refs.bib#smith20", "As [@smith20] says."),
        ("cites", "notes/texbook.md", "shared/refs.bib#knuth84", "citekey: knuth84")}


def test_bibtex_detector_follows_attached_files_and_crossrefs():
    files = {"lib/refs.bib": b"@book{a, file = {:papers/a.pdf:PDF;Slides:C\\:\\\\talks\\\\a-slides.pdf:PDF}}\n"
                             b"@book{b, file = {:C$\\backslash$:/Users/me/Mendeley/b.pdf:pdf}, crossref={c}}\n"
                             b"@book{c, file = {/home/me/Zotero/storage/X1/c.pdf; https://example.org/c.pdf}}\n"
                             b"@book{d, file = {:papers/missing.pdf:PDF}, xdata = {nowhere}}\n"
                             b"@book{e, file = {:papers$\\backslash$a.pdf:pdf}}\n",
             "lib/papers/a.pdf.txt": b"x"}
    docs = parse_files(files, MTIME)
    for path in ("lib/papers/a.pdf", "talks/a-slides.pdf", "other/b.pdf", "lib/c.pdf", "far/away/c.pdf"):
        docs[path] = [pdf_card(path)]
    edges = run_detectors([bibtex_detector.BibtexDetector()], docs).edges
    found = {(e.type, e.src, e.dst, e.confidence) for e in edges}
    assert found == {("entry_file", "lib/refs.bib#a", "lib/papers/a.pdf", 0.95),
                     ("entry_file", "lib/refs.bib#a", "talks/a-slides.pdf", 0.8),
                     ("entry_file", "lib/refs.bib#b", "other/b.pdf", 0.8),
                     ("crossref", "lib/refs.bib#b", "lib/refs.bib#c", 0.95),
                     ("entry_file", "lib/refs.bib#c", "lib/c.pdf", 0.8),
                     ("entry_file", "lib/refs.bib#e", "lib/papers/a.pdf", 0.95)}
    quote = next(e.evidence.quote for e in edges if e.dst == "other/b.pdf")
    assert quote == "b: file = {:C$\\backslash$:/Users/me/Mendeley/b.pdf:pdf}"


def test_bibtex_detector_links_an_entry_to_the_note_and_the_pdf_named_after_its_key():
    """A literature note named ``@key`` (Obsidian's Zotero plugins) or ``key``; a PDF named after the key when the
    entry's own file field leads nowhere; a note or a PDF of another name, or named after another key, is not."""
    files = {"refs/library.bib": b"@book{knuth84, file = {:gone/texbook.pdf:PDF}}\n@book{lamport86}\n"
                                 b"@book{wirth76, file = {:wirth.pdf:PDF}}\n",
             "notes/@knuth84.md": b"# The TeXbook\n", "far/notes/knuth84.md": b"# Another\n",
             "notes/lamport86.org": b"* LaTeX\n", "notes/wirth.md": b"# Wirth\n"}
    docs = parse_files(files, MTIME)
    for path in ("refs/papers/knuth84.pdf", "other/lamport86.pdf", "refs/wirth.pdf", "refs/wirth76.pdf"):
        docs[path] = [pdf_card(path)]
    found = {(e.type, e.src, e.dst, e.confidence) for e in run_detectors([bibtex_detector.BibtexDetector()],
                                                                         docs).edges}
    assert found == {("literature_note", "refs/library.bib#knuth84", "notes/@knuth84.md", 0.95),
                     ("entry_file", "refs/library.bib#knuth84", "refs/papers/knuth84.pdf", 0.7),
                     ("literature_note", "refs/library.bib#lamport86", "notes/lamport86.org", 0.95),
                     ("entry_file", "refs/library.bib#lamport86", "other/lamport86.pdf", 0.7),
                     # its own file found, the one named after its key is not wanted
                     ("entry_file", "refs/library.bib#wirth76", "refs/wirth.pdf", 0.95)}


def pdf_card(path: str) -> SourceDocument:
    """A PDF's card as the ``pdf`` format gives it (without a PDF to read)."""
    return SourceDocument(path, "ax-pdfs", path, path, "", "", "file", MTIME, "pdf", {"ordinal": 0})


def test_corpus_by_citekey_is_case_insensitive_in_path_order():
    corpus = Corpus(parse_files({"b.bib": b"@book{Key, title={B}}", "a.bib": b"@book{key, title={A}}"}, MTIME))
    assert corpus.by_citekey("KEY") == ("a.bib#key", "b.bib#Key") and corpus.by_citekey("none") == ()


class TestLatexDetectorConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return latex_detector.LatexDetector()

    @pytest.fixture
    def plugin(self):
        return latex_detector

    @pytest.fixture
    def corpus_files(self):
        return parse_files({k: v for k, v in PROJECT.items() if k.endswith((".tex", ".bib"))})


class TestCitekeyConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return citekey.CitekeyDetector()

    @pytest.fixture
    def plugin(self):
        return citekey

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"refs.bib": REFS, "a.md": b"# A\nAs [@knuth84; @lamport86] said.\n",
                            "b.org": b"[cite:@series]\n"})


class TestBibtexDetectorConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return bibtex_detector.BibtexDetector()

    @pytest.fixture
    def plugin(self):
        return bibtex_detector

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"refs.bib": REFS, "papers/knuth84.md": b"# Knuth\n"})


def test_autoindex_links_the_thesis_template_and_a_note_citing_it(engine, tmp_path):
    """The real thesis (MIT): its main file includes its chapters and names its bibliography, its chapters cite
    their entries; a Markdown note beside it cites one entry as Pandoc does. Editing the bibliography so that a key
    is gone retires the note's edge on the next run, though the note did not change."""
    folder = tmp_path / "thesis"
    shutil.copytree(THESIS, folder, ignore=shutil.ignore_patterns("LICENSE", "SOURCE"))
    (folder / "notes.md").write_text("# Reading\nRead [@Ancey1996] before the third chapter.\n")
    summary = run_pipeline(engine, folder, brain="thesis")
    assert not summary.files_failed
    edges = live_edges(engine, "thesis")
    assert {(src, dst) for kind, src, dst in edges if kind == "latex_include"} == {
        ("thesis.tex", "thesis-info.tex"), ("thesis.tex", "Abstract/abstract.tex"),
        ("thesis.tex", "Chapter1/chapter1.tex"), ("thesis.tex", "Chapter2/chapter2.tex"),
        ("thesis.tex", "Chapter3/chapter3.tex")}
    assert ("bibliography", "thesis.tex", "References/references.bib") in edges
    cites = {(src, dst) for kind, src, dst in edges if kind == "cites"}
    assert cites == {
        ("Chapter1/chapter1.tex#what-is-loren-ipsum-title-with-math-sigma", f"References/references.bib#{key}")
        for key in ("Aup91", "AAB95", "Con90", "LM65")} | {
        ("Chapter3/chapter3.tex#first-section-of-the-third-chapter", f"References/references.bib#{key}")
        for key in ("Rea85", "Ancey1996")} | {("notes.md#reading", "References/references.bib#Ancey1996")}
    bib = folder / "References/references.bib"
    bib.write_text(bib.read_text().replace("Ancey1996", "Ancey1996b"))
    run_pipeline(engine, folder, brain="thesis")
    assert ("cites", "notes.md#reading", "References/references.bib#Ancey1996") not in live_edges(engine, "thesis")


def live_edges(engine, brain: str) -> set[tuple[str, str, str]]:
    """``(type, src, dst)`` of ``brain``'s edges not retired."""
    with engine.store.reader(f".xerj-memory-{brain}-edges") as reader:
        found = set()
        for row in reader.live_rows():
            _, source, _ = reader.document(int(row))
            if "src" in source and "invalid_at" not in source:
                found.add((source["type"], source["src"], source["dst"]))
        return found


LATEX_PIECES = [r"\section", r"\chapter*", r"\cite", r"\citep[p.~3]", r"\input", r"\import", r"\href", r"\hyperref",
                r"\ref", r"\label", r"\url", r"\caption", r"\begin{document}", r"\end{document}", r"\begin{figure}",
                r"\end{figure}", r"\begin{lstlisting}", r"\end{lstlisting}", r"\begin{minted}", r"\begin{comment}",
                r"\end{comment}", r"\begin{verbatim}", r"\end{verbatim}", r"\title", r"\author", r"\newcommand",
                r"\bibliography", r"\addbibresource", r"\texorpdfstring", r"\"", r"\'", r"\\", "{", "}", "[", "]",
                "$", "$$", "%", "#1", "~", "&", "^", "_", ",", "key", "a b", "\n", "\n\n", "ü", "@book{", "@string{",
                "title = ", "author = {", " and ", "file = ", "crossref", "=", '"', "@", "#"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LATEX_PIECES), max_size=40))
def test_latex_and_bibtex_refuse_or_read_any_text_but_never_crash(pieces):
    data = "".join(pieces).encode()
    for fmt, path in ((latex.LatexFormat(), "x.tex"), (bibtex.BibtexFormat(), "x.bib")):
        try:
            docs = fmt.parse(path, data, MTIME)
        except FormatError:
            continue
        assert docs[0].doc_id == path and all(doc.ax_path == path for doc in docs)


def test_doi_links_a_reference_to_the_pdf_whose_first_page_carries_its_doi():
    """A PDF named anything (full-text.pdf) is a reference's when its first page prints the reference's DOI, in
    any case and at a resolver's address; a DOI only in a reference list (a later page) is another paper's."""
    pytest.importorskip("pypdf")
    from tests.test_formats import make_pdf

    files = {"refs.bib": b"@article{a, title={A}, doi={10.1000/XYZ.1}}\n"
                         b"@article{b, title={B}, doi={https://doi.org/10.1000/abc}}\n"
                         b"@article{c, title={C}, doi={10.1000/cited}}\n",
             "papers/full-text.pdf": make_pdf(["A paper. DOI: 10.1000/xyz.1.", "References: 10.1000/cited"]),
             "other/x.pdf": make_pdf(["Read at https://doi.org/10.1000/ABC"]),
             "export/library.bib": b"@article{a2020, title={A again}, doi={10.1000/xyz.1}}\n"}
    found = {(e.type, e.src, e.dst, e.confidence) for e in run(doi.DoiDetector(), files)}
    assert found == {("doi_match", "refs.bib#a", "papers/full-text.pdf", 0.85),
                     ("doi_match", "export/library.bib#a2020", "papers/full-text.pdf", 0.85),
                     ("doi_match", "refs.bib#b", "other/x.pdf", 0.85),
                     # one paper in two bibliographies: each copy leads to the other
                     ("same_reference", "refs.bib#a", "export/library.bib#a2020", 0.95),
                     ("same_reference", "export/library.bib#a2020", "refs.bib#a", 0.95)}


class TestDoiConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return doi.DoiDetector()

    @pytest.fixture
    def plugin(self):
        return doi

    @pytest.fixture
    def corpus_files(self):
        pytest.importorskip("pypdf")
        from tests.test_formats import make_pdf

        return parse_files({"refs.bib": b"@article{a, doi={10.1000/x}}\n", "a.pdf": make_pdf(["doi 10.1000/x"])})
