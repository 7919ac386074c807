"""LaTeX documents (``.tex``: papers, theses and the chapters they include): a card plus one section per heading.

The source is read by pylatexenc (see :mod:`._latex`) and shown as its words:
accents as letters, formatting as its text, math as written, a citation as its
keys in brackets, a cross-reference as its label. A main file's preamble (what
comes before ``\\begin{document}``) sets things up and is not its text; its
``\\title`` and ``\\author`` title the card and are kept in ``author``. A file
with no ``document`` environment (a chapter a main file includes) is all text,
titled by its first heading.

Each sectioning command (``\\part`` to ``\\subparagraph``, starred or not, at the
top of the body or of an ``appendices`` environment) opens a section that runs
to the next one (``{path}#{anchor}``, kind ``section``): its label is the
heading's text, its ``level`` the command's rank among those the file uses (1
the highest). What each document cites, includes, names as its bibliography and
refers to is kept in ``links`` (``kind``, ``target`` as written, ``offset`` in the
text) for the ``latex`` detector, and the labels it defines in ``labels``.

A reference list written in the document (``thebibliography``, as a paper
pastes its ``.bbl``) is no section's text: each ``\\bibitem{key}`` is an entry
of the ``ax-refs`` dataset, as a ``.bib`` file's are (kind ``entry``, its
``citekey``, titled by its text), so the document's citations land on it.
"""

from __future__ import annotations

from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats import _latex, bibtex
from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".tex", ".ltx", ".latex"})
WHAT = "LaTeX document"
# environments whose headings are the document's own (the appendix package's)
_SPLICED = frozenset({"appendices", "subappendices"})
_ENTRY_TITLE = 200  # characters of a \bibitem's text that title its entry (it has no title of its own)
_PREAMBLE_LINKS = frozenset({"addbibresource", "addglobalbib", "bibliography", "input", "include", "import",
                             "subimport", "subfile"})


def _is_macro(node: Any, names: Any) -> bool:
    return node is not None and node.isNodeType(_latex.node_types()[1]) and node.macroname in names


def _is_environment(node: Any, names: Any) -> bool:
    return node is not None and node.isNodeType(_latex.node_types()[2]) and node.environmentname in names


def _spliced(nodes: list[Any]) -> list[Any]:
    out = []
    for node in nodes:
        if _is_environment(node, _SPLICED):
            out.extend(_spliced(node.nodelist))
        else:
            out.append(node)
    return out


def _firsts(nodes: list[Any], names: tuple[str, ...]) -> dict[str, str]:
    """The text of the first ``\\name{...}`` of each of ``names`` in ``nodes`` (at any depth), in one walk."""
    found: dict[str, str] = {}
    for node in _latex.walk(nodes):
        if _is_macro(node, names) and node.macroname not in found:
            found[node.macroname] = _latex.to_text(_latex.raw_arg(node))
            if len(found) == len(names):
                break
    return found


def _bibitems(environment: Any) -> list[tuple[str, list[Any]]]:
    """``(key, nodes)`` of each ``\\bibitem{key}`` of a ``thebibliography`` environment, its nodes what follows it
    up to the next."""
    items: list[tuple[str, list[Any]]] = []
    for node in environment.nodelist:
        if _is_macro(node, ("bibitem",)):
            key = _latex.raw_arg(node).strip()
            items.append((key, []))
        elif items:
            items[-1][1].append(node)
    return [(key, content) for key, content in items if _latex.is_written(key)]


def _links(named: list[_latex.Named], shift: int = 0) -> dict[str, Any]:
    """``links`` and ``labels`` fields of a document whose text is the rendering after ``shift`` characters."""
    links = [{"kind": n.kind, "target": n.target, "offset": n.offset + shift} for n in named
             if n.kind != _latex.LABEL]
    labels = list(dict.fromkeys(n.target for n in named if n.kind == _latex.LABEL))
    return {"links": links or None, "labels": labels or None}


class LatexFormat:
    """LaTeX files into ``ax-notes``: a card and one section per heading."""

    name = "latex"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        nodes = _latex.parse(decoded.text, WHAT)
        body = next((node.nodelist for node in nodes if _is_environment(node, ("document",))), None)
        main = body is not None
        # a main file's preamble is no text, but the files it reads in and its bibliography (biblatex's
        # \addbibresource) are the document's
        preamble = [node for node in nodes if _is_macro(node, _PREAMBLE_LINKS)] if main else []
        parts: list[tuple[Any, list[Any]]] = [(None, list(preamble))]
        references: list[Any] = []  # thebibliography environments: their items are entries of their own
        for node in _spliced(body if main else nodes):
            if _is_macro(node, _latex.SECTIONING):
                parts.append((node, []))
            elif _is_environment(node, ("thebibliography",)):
                references.append(node)
            else:
                parts[-1][1].append(node)
        renderer = _latex.Renderer()
        levels = sorted({_latex.SECTIONING[heading.macroname] for heading, _ in parts[1:]})
        front = _firsts(nodes, ("title", "author")) if main else {}
        title = front.get("title", "")
        headings = [(heading, _latex.to_text(_latex.raw_arg(heading))) for heading, _ in parts[1:]]
        title = title or next((label for _, label in headings if label), "") or stem(rel_path)
        text, named = renderer.text(parts[0][1])
        author = front.get("author") or None
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text=text, section="", kind="file",
                         ordinal=0, author=author, encoding=decoded.encoding, sections=len(headings),
                         **_links(named))]
        anchors = Anchors()
        for n, ((heading, label), (_, content)) in enumerate(zip(headings, parts[1:]), 1):
            label = label or f"section {n}"
            anchor = anchors(label)
            text, named = renderer.text(content)
            fields = {"ordinal": n, "level": levels.index(_latex.SECTIONING[heading.macroname]) + 1,
                      "anchor": anchor, **{k: v for k, v in _links(named, len(label) + 1).items() if v is not None}}
            docs.append(SourceDocument(f"{rel_path}#{anchor}", self.dataset, rel_path, title,
                                       f"{label}\n{text}" if text else label, label, "section", mtime_ms, self.name,
                                       fields))
        for key, content in (item for environment in references for item in _bibitems(environment)):
            text, _ = renderer.text(content)
            label = " ".join(text.split())
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchors(key)}",
                                 title=label[:_ENTRY_TITLE] or key, text=text, section=key, kind="entry",
                                 dataset=bibtex.DATASET, ordinal=len(docs), citekey=key))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(LatexFormat())
