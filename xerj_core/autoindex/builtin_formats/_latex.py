"""LaTeX source as the words a reader sees (through pylatexenc), with what it cites, includes and refers to.

pylatexenc parses LaTeX into nodes and renders them as text: accents as the
letters they make (``M{\\"u}ller`` is ``Müller``), formatting commands as their
argument's words, math as written. The contexts below teach it the commands of
theses and papers it does not know: biblatex's citations, ``\\subfile`` and
``\\import``, ``\\addbibresource``, and commands whose arguments are no words
of the document (``\\label``, ``\\index``, ``\\graphicspath``, package options).
A citation is rendered as its keys in brackets (``[knuth84; lamport86]``), a
cross-reference as its label, an included file as its name: the words a person
would search the document by, and the places a detector quotes.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterator

import attrs

from xerj_core.autoindex.formats import FormatError

# What a run of LaTeX names, by the kind of command that named it.
CITE, INPUT, BIBLIOGRAPHY, REF, LABEL = "cite", "input", "bibliography", "ref", "label"

# natbib's (which pylatexenc knows) and biblatex's citation commands: the last argument is the keys.
_CITES = ("cite", "citet", "citep", "citealt", "citealp", "citeauthor", "citeyear", "citeyearpar", "Citet", "Citep",
          "Citealt", "Citealp", "Citeauthor", "citefullauthor", "citenum", "nocite", "autocite", "Autocite",
          "parencite", "Parencite", "textcite", "Textcite", "footcite", "footcitetext", "smartcite", "Smartcite",
          "supercite", "fullcite", "footfullcite", "citetitle", "citeurl", "citedate", "notecite", "pnotecite")
_REFS = ("ref", "autoref", "cref", "Cref", "vref", "Vref", "nameref", "pageref", "eqref", "hyperref")
# command -> its arguments, as pylatexenc's specs write them ("*" a star, "[" optional, "{" required)
_ARGS = {**{name: "*[[{" for name in _CITES}, "nocite": "{", "citenum": "{",
         **{name: "*[{" for name in _REFS}, "hyperref": "[{",
         "input": "{", "include": "{", "subfile": "{", "import": "*{{", "subimport": "*{{", "inputfrom": "{{",
         "subinputfrom": "{{", "includefrom": "{{", "subincludefrom": "{{",
         "bibliography": "{", "addbibresource": "[{", "addglobalbib": "[{", "bibliographystyle": "{",
         "printbibliography": "[", "includeonly": "{", "graphicspath": "{", "nomenclature": "[{{", "index": "[{",
         "glossary": "{", "texorpdfstring": "{{", "href": "[{{", "usepackage": "[{[", "RequirePackage": "[{[",
         "documentclass": "[{[", "title": "[{", "author": "[{", "date": "{", "thanks": "{", "keywords": "{",
         "hypersetup": "{", "pdfbookmark": "[{{", "addcontentsline": "{{{", "setlength": "{{", "setcounter": "{{",
         "hspace": "*{", "vspace": "*{", "newcommand": "*{[[{", "renewcommand": "*{[[{", "providecommand": "*{[[{",
         "DeclareMathOperator": "*{{", "newenvironment": "*{[[{{", "renewenvironment": "*{[[{{",
         "newtheorem": "{[{[", "part": "*[{", "chapter": "*[{", "section": "*[{", "subsection": "*[{",
         "subsubsection": "*[{", "paragraph": "*[{", "subparagraph": "*[{", "caption": "*[{", "footnote": "[{",
         "label": "{", "url": "{", "includegraphics": "*[[{", "bibitem": "[{"}
# Commands whose arguments are not the document's words.
_DISCARDED = ("includeonly", "graphicspath", "nomenclature", "index", "glossary", "usepackage", "RequirePackage",
              "documentclass", "bibliographystyle", "printbibliography", "hypersetup", "pdfbookmark",
              "addcontentsline", "setlength", "setcounter", "hspace", "vspace", "newcommand", "renewcommand",
              "providecommand", "DeclareMathOperator", "newenvironment", "renewenvironment", "newtheorem",
              "includegraphics", "title", "author", "date", "thanks", "maketitle", "tableofcontents",
              "listoffigures", "listoftables", "printnomenclature", "printindex", "frontmatter", "mainmatter",
              "backmatter", "appendix", "clearpage", "cleardoublepage", "newpage", "noindent", "centering")
# Environments whose body is code or a comment, not LaTeX (a \cite in a listing is an example): pylatexenc reads
# only ``verbatim`` so, and not one opened with options (``\begin{lstlisting}[language=Python]``), so the others
# are written as ``verbatim`` before it parses, and a comment package's comment is dropped.
_LISTING = re.compile(r"\\begin\{(lstlisting|Verbatim|BVerbatim|LVerbatim|minted)\}(.*?)\\end\{\1\}", re.S)
_OPTIONS = re.compile(r"\A(?:\[[^\]\n]*\])?")  # \begin{lstlisting}[language=Python]
_MINTED = re.compile(r"\A(?:\[[^\]\n]*\])?\{[^}\n]*\}")  # \begin{minted}[linenos]{python}
_COMMENT = re.compile(r"\\begin\{comment\}.*?\\end\{comment\}", re.S)
SECTIONING = {"part": 0, "chapter": 1, "section": 2, "subsection": 3, "subsubsection": 4, "paragraph": 5,
              "subparagraph": 6}


@attrs.frozen
class Named:
    """Something a run of LaTeX names: a citation's keys, an included file, a bibliography, a label or a reference
    to one (``kind``), as written (``target``), and where its rendering starts in the text (``offset``)."""

    kind: str
    target: str
    offset: int = 0


@functools.cache
def _contexts() -> tuple[Any, Any]:
    """pylatexenc's parsing and rendering contexts with the commands above (made once, on the first file)."""
    from pylatexenc import latexwalker, macrospec
    from pylatexenc.latex2text import EnvironmentTextSpec, MacroTextSpec, get_default_latex_context_db

    parsing = latexwalker.get_default_latex_context_db()
    parsing.add_context_category("xerj", prepend=True,
                                 macros=[macrospec.MacroSpec(name, args) for name, args in _ARGS.items()],
                                 environments=[macrospec.EnvironmentSpec("thebibliography", "{")])
    rendering = get_default_latex_context_db()
    macros = [MacroTextSpec(name, discard=True) for name in _DISCARDED]
    macros += [MacroTextSpec(name, simplify_repl=_cited) for name in _CITES]
    macros += [MacroTextSpec(name, simplify_repl=_referred) for name in _REFS]
    macros += [MacroTextSpec(name, simplify_repl=_included) for name in
               ("input", "include", "subfile", "import", "subimport", "inputfrom", "subinputfrom", "includefrom",
                "subincludefrom")]
    macros += [MacroTextSpec(name, simplify_repl=_bibliographies) for name in
               ("bibliography", "addbibresource", "addglobalbib")]
    macros += [MacroTextSpec("label", discard=True),
               MacroTextSpec("texorpdfstring", simplify_repl=_first_arg),
               MacroTextSpec("url", simplify_repl=_first_arg),
               MacroTextSpec("href", simplify_repl=_linked),
               MacroTextSpec("LaTeX", simplify_repl="LaTeX"), MacroTextSpec("LaTeXe", simplify_repl="LaTeX2e"),
               MacroTextSpec("TeX", simplify_repl="TeX"), MacroTextSpec("BibTeX", simplify_repl="BibTeX"),
               MacroTextSpec("caption", simplify_repl=_caption)]
    rendering.add_context_category("xerj", prepend=True, macros=macros,
                                   environments=[EnvironmentTextSpec("verbatim", simplify_repl=_verbatim)])
    return parsing, rendering


def raw_arg(node: Any, index: int = -1) -> str:
    """The source of the macro ``node``'s argument ``index`` without its braces ('' when absent)."""
    args = node.nodeargd.argnlist if node.nodeargd is not None else []
    arg = args[index] if args and -len(args) <= index < len(args) else None
    if arg is None:
        return ""
    if arg.isNodeType(node_types()[0]):  # a group: its contents
        return "".join(child.latex_verbatim() for child in arg.nodelist)
    return arg.latex_verbatim()


@functools.cache
def node_types() -> tuple[Any, ...]:
    from pylatexenc import latexwalker

    return (latexwalker.LatexGroupNode, latexwalker.LatexMacroNode, latexwalker.LatexEnvironmentNode,
            latexwalker.LatexCommentNode)


def is_written(target: str) -> bool:
    """Whether ``target`` is a name as written, not one a macro makes (``\\olpath/version``, a parameter ``#1``):
    only TeX knows what those expand to."""
    return bool(target) and "\\" not in target and "#" not in target


def _noted(l2tobj: Any, kind: str, targets: list[str], shown: str) -> str:
    """``shown``, the rendering of a command naming ``targets``, after noting them (see :meth:`Renderer.text`)."""
    if targets:
        l2tobj.xerj_named.append((kind, targets, shown.strip()))
    return shown


def _cited(node: Any, l2tobj: Any) -> str:
    keys = [key.strip() for key in raw_arg(node).split(",") if is_written(key.strip())]
    return _noted(l2tobj, CITE, keys, f"[{'; '.join(keys)}]" if keys else "")


def _referred(node: Any, l2tobj: Any) -> str:
    if node.macroname == "hyperref":  # \hyperref[label]{text}: the text shows
        label = raw_arg(node, 0).strip()
        return _noted(l2tobj, REF, [label] if is_written(label) else [], _last_arg(node, l2tobj))
    labels = [label.strip() for label in raw_arg(node).split(",") if is_written(label.strip())]  # cleveref: a list
    return _noted(l2tobj, REF, labels, f"[{', '.join(labels)}]" if labels else "")


def _included(node: Any, l2tobj: Any) -> str:
    name = node.macroname
    if name in ("import", "subimport", "inputfrom", "subinputfrom", "includefrom", "subincludefrom"):
        path = (raw_arg(node, -2).strip().rstrip("/") + "/" + raw_arg(node).strip()).lstrip("/")
    else:
        path = raw_arg(node).strip()
    return _noted(l2tobj, INPUT, [path], f"\n[{path}]\n") if is_written(path) else ""


def _bibliographies(node: Any, l2tobj: Any) -> str:
    names = [name.strip() for name in raw_arg(node).split(",") if is_written(name.strip())]
    return "".join(_noted(l2tobj, BIBLIOGRAPHY, [name], f"\n[{name}]\n") for name in names)


def _arg_text(node: Any, l2tobj: Any, index: int) -> str:
    """The text of the macro ``node``'s argument ``index`` ('' when it has none there: TeX would read on)."""
    args = node.nodeargd.argnlist if node.nodeargd is not None else []
    arg = args[index] if -len(args) <= index < len(args) else None
    return l2tobj.nodelist_to_text([arg]) if arg is not None else ""


def _first_arg(node: Any, l2tobj: Any) -> str:
    return _arg_text(node, l2tobj, 0)


def _last_arg(node: Any, l2tobj: Any) -> str:
    return _arg_text(node, l2tobj, -1)


def _caption(node: Any, l2tobj: Any) -> str:
    return f"\n{_last_arg(node, l2tobj).strip()}\n"


def _verbatim(node: Any) -> str:
    code = getattr(node.nodeargd, "verbatim_text", None)
    return f"\n{code.strip(chr(10))}\n" if code else ""


def _linked(node: Any, l2tobj: Any) -> str:
    url, words = raw_arg(node, -2).strip(), _last_arg(node, l2tobj).strip()
    return f"{words} <{url}>" if words and url else words or url


def _as_verbatim(match: re.Match[str]) -> str:
    code = (_MINTED if match.group(1) == "minted" else _OPTIONS).sub("", match.group(2), count=1)
    return f"\\begin{{verbatim}}{code}\\end{{verbatim}}"


def parse(source: str, what: str) -> list[Any]:
    """The nodes of LaTeX ``source`` (a :class:`FormatError` naming ``what`` when pylatexenc cannot read it)."""
    from pylatexenc import latexwalker

    if "\\begin{" in source:
        source = _COMMENT.sub("", _LISTING.sub(_as_verbatim, source))
    try:
        walker = latexwalker.LatexWalker(source, latex_context=_contexts()[0], tolerant_parsing=True)
        return walker.get_latex_nodes()[0]
    except (latexwalker.LatexWalkerError, RecursionError, ValueError, IndexError) as exc:
        raise FormatError(f"malformed {what}: {type(exc).__name__}: {exc}") from None


class Renderer:
    """Renders node lists as text, noting what each names (see :class:`Named`)."""

    def __init__(self) -> None:
        from pylatexenc.latex2text import LatexNodes2Text

        self._l2t = LatexNodes2Text(latex_context=_contexts()[1], math_mode="verbatim", strict_latex_spaces=True)

    def text(self, nodes: list[Any]) -> tuple[str, list[Named]]:
        """``nodes`` as text, and what they name, each with the offset of its rendering in the text."""
        self._l2t.xerj_named = []
        try:
            text = tidy(self._l2t.nodelist_to_text(nodes))
        except RecursionError:
            raise FormatError("malformed LaTeX: nested too deeply to read") from None
        named: list[Named] = []
        at = 0
        for kind, targets, shown in self._l2t.xerj_named:  # in the order they show
            found = text.find(shown, at) if shown else -1
            offset = found if found >= 0 else at
            named += [Named(kind, target, offset) for target in targets]
            at = offset + len(shown) if found >= 0 else at
        # the labels are every \label the nodes hold, none shown: math is shown as written, so rendering never
        # meets a \label inside it (an equation's, the usual \eqref target)
        macro = node_types()[1]
        named += [Named(LABEL, label, 0) for label in dict.fromkeys(
            raw_arg(node).strip() for node in walk(nodes) if node.isNodeType(macro) and node.macroname == "label")
            if is_written(label)]
        return text, named


_BLANK_RUN = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_TRAILING = re.compile(r"[ \t]+\n")


def tidy(text: str) -> str:
    """Rendered text without its blank-line runs and trailing spaces (what removed commands leave); a tie (``~``,
    rendered as a no-break space) is a space."""
    return _BLANK_RUN.sub("\n\n", _TRAILING.sub("\n", text.replace("\xa0", " "))).strip()


@functools.lru_cache(maxsize=16384)
def to_text(latex: str) -> str:
    """A short run of LaTeX (a BibTeX field) as text; text with no command or math passes with its braces
    dropped, without being parsed. Remembered: a bibliography names the same people and journals again and again,
    and pylatexenc reads a field a character at a time (a third of a millisecond for a title)."""
    if "\\" not in latex and "$" not in latex:
        return " ".join(latex.replace("{", "").replace("}", "").replace("~", " ").split())
    try:
        text, _ = Renderer().text(parse(latex, "LaTeX"))
    except FormatError:
        return " ".join(latex.split())
    return " ".join(text.split())


def walk(nodes: list[Any]) -> Iterator[Any]:
    """Every node of ``nodes`` and of what they hold, in document order (a stack, not recursion: a file may nest
    its groups as deep as it likes)."""
    group, macro, environment, _ = node_types()
    stack = [iter(nodes)]
    while stack:
        node = next(stack[-1], _END)
        if node is _END:
            stack.pop()
            continue
        if node is None:
            continue
        yield node
        held = list(getattr(node, "nodelist", None) or ())  # a group's, an environment's, math's
        if (node.isNodeType(macro) or node.isNodeType(environment)) and node.nodeargd is not None:
            held += [arg for arg in node.nodeargd.argnlist if arg is not None]
        if held:
            stack.append(iter(held))


_END = object()
