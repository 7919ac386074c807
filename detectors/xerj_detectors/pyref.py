"""``pyref``: Sphinx's Python cross-references (``:func:`flask.url_for```) linking to the code defining them.

API documentation names code by its dotted Python name: the Python domain's
roles (``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:attr:``, ``:data:``,
``:const:``, ``:exc:``, ``:obj:``, ``:type:``, optionally ``:py:``-prefixed,
and MyST's ``{func}`...``` in Markdown) and its object and autodoc directives
(``.. autoclass:: Flask``, ``.. function:: url_for(endpoint)``, ``.. automodule::``).
They are read from reStructuredText and Markdown documents, and the roles from
Python source too, where docstrings write them.

A ``.py`` file's module name is its path from the outermost folder of its
package (folders holding ``__init__.py``; ``src/flask/app.py`` is
``flask.app``, ``src/flask/__init__.py`` is ``flask``). A name resolves through
its longest dotted prefix that is a module: the next part names a top-level
class or function there (its section of the file), else the module's card, so
``flask.Flask.route`` lands on ``class Flask``. A package stands for what its
modules define (a package re-exports them): ``flask.Flask`` is ``class Flask``
of ``flask/app.py``, the shallowest module below defining it, then the smaller
path; a definition of the package's own comes first. Of several files with one
module name, a package's comes before a loose module's, then the nearest.

As Sphinx does, a name is first looked up under the module the document has set
(``.. module::``, ``.. currentmodule::``, ``.. automodule::``, holding from
their line to the next such directive; in source, the file's own module), then
as written; under the module it must name a definition or a module beyond it,
so a name the code does not define links nothing rather than the module it was
looked up under. ``~`` is dropped, ``Title <name>`` names ``name``, and
``!name`` is not a link. Names the corpus does not define (the standard
library, another package) link nothing. ``currentmodule`` sets the module and
links nothing itself.

A corpus-wide detector: ``summarize`` names a ``.py`` file and the names any
document refers to; ``combine`` maps the modules and, reading the corpus's
sections, the definitions of referred names only (nothing when no document
refers to one). Edge: from the document holding the reference to the definition's section
or the module's card; evidence is the line holding the reference.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from typing import Iterable, Sequence

from xerj_core.detectors import (MARKDOWN_FORMATS, Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl,
                                 line_at, make_draft)

READ_FORMATS = frozenset({"rst"}) | MARKDOWN_FORMATS
_KINDS = rb"mod|func|data|const|class|meth|attr|exc|obj|type"
_OBJECTS = rb"module|currentmodule|function|class|method|attribute|data|exception|decorator|property"
# led by its ":" (a pattern opening on a literal is searched for that byte first, several times faster than one
# opening on a look-behind); the byte before it, which must not make it part of another role (``:c:func:``), is
# checked apart
_ROLE = re.compile(rb":(?:py:)?(" + _KINDS + rb"):`([^`\n]+)`")
_MYST_ROLE = re.compile(rb"\{(?:py:)?(" + _KINDS + rb")\}`([^`\n]+)`")
_DIRECTIVE = re.compile(rb"^[ \t]*(?:\.\. |(?:```+|:::+)\{)(?:py:)?(?:auto)?(" + _OBJECTS + rb")(?:::|\})[ \t]*"
                        rb"([A-Za-z_][\w.]*)", re.M)
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_PART_OF_A_ROLE = re.compile(rb"[\w:]")
# the directives after which a document's names are looked up under a module (automodule writes a module's)
_SETS_MODULE = frozenset({b"module", b"currentmodule"})
# what summarize says of a file: its path when it is Python source, and the names it refers to
Summary = tuple[str | None, tuple[str, ...]]


class PyrefDetector:
    name = "pyref"
    type = "pyref"
    tag = "pyref@1"
    weight = 0.8
    confidence = 0.85

    def summarize(self, file_docs: Sequence[SourceDocument]) -> Summary | None:
        """A Python file's path, and the names (each part of a dotted one) the file's documents refer to; ``None``
        for a file that is neither. Its definitions are read from the corpus by ``combine``, and only when some
        file refers to a name: a run holds every file's partial until it combines."""
        card = file_docs[0] if file_docs else None
        if card is None:
            return None
        python = _is_python(card)
        referred = tuple(sorted({part for doc in file_docs for _offset, name, _directive in _references(doc, python)
                                 for part in name.split(".")}))
        if python:
            return card.ax_path, referred
        return (None, referred) if referred else None

    def combine(self, partials: Iterable[Summary | None], corpus: Corpus) -> DetectorState:
        """The code's names that documents refer to: ``"m <module>"`` → the files of that module name,
        ``"d <path> <symbol>"`` → the section defining it there, ``"b <package file> <symbol>"`` → the shallowest
        definition below that package (then the smaller path)."""
        summaries = [partial for partial in partials if partial is not None]
        referred = {name for _path, names in summaries for name in names}
        if not referred:
            return DetectorState(data={})
        files: dict[str, list[str]] = defaultdict(list)
        names: dict[str, object] = {}
        below: dict[str, tuple[int, str, str]] = {}
        for path in sorted(path for path, _names in summaries if path is not None):
            packages = _package_files(corpus, path)
            module = _module_name(path, packages)
            if module is None:
                continue
            files[f"m {module}"].append(path)
            for doc in corpus.documents(path)[1:]:
                symbol, doc_id = doc.fields.get("symbol"), doc.doc_id
                if not isinstance(symbol, str) or symbol not in referred:
                    continue
                names[f"d {path} {symbol}"] = doc_id
                for depth, package in enumerate(packages):  # depth: packages between the two, 0 for its own
                    key, rank = f"b {package} {symbol}", (depth, path, doc_id)
                    held = below.get(key)
                    if held is None or rank < held:
                        below[key] = rank
        names.update((key, tuple(paths)) for key, paths in files.items())
        names.update((key, doc_id) for key, (_depth, _path, doc_id) in below.items())
        return DetectorState(data=names)

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        # names are asked for one by one (never their number): a remembered detection then hangs on the names it
        # asked, not on every name of the code
        names = state.data if state is not None else None
        if names is None or not file_docs:
            return
        python = _is_python(file_docs[0])
        module: str | None = None
        for doc in file_docs:
            found = _references(doc, python)
            if not found:
                continue
            if python and module is None:
                module = _module_name(doc.ax_path, _package_files(corpus, doc.ax_path))
            data = doc.text.encode("utf-8")
            seen: set[str] = set()
            for offset, written, directive in found:
                if directive in _SETS_MODULE:
                    module = written
                    if directive == b"currentmodule":
                        continue  # context only: the module is documented where its module directive is
                target = _resolve(corpus, names, doc.ax_path, module, written)
                if target is None or target.doc_id == doc.doc_id or target.doc_id in seen:
                    continue
                seen.add(target.doc_id)
                yield make_draft(self, doc, target, quote=line_at(data, offset), offset=offset)


def _is_python(card: SourceDocument) -> bool:
    return card.format == "code" and card.ax_path.endswith(".py")


def _references(doc: SourceDocument, python: bool) -> list[tuple[int, str, bytes | None]]:
    """``(offset, name, directive)`` of each Python reference of ``doc``, in order (``None`` for a role); a
    Python source's roles only (its docstrings'), and nothing from other formats."""
    if not python and doc.format not in READ_FORMATS:
        return []
    text = doc.text
    if python:
        if ":`" not in text and "}`" not in text:
            return []
    elif ":`" not in text and "}`" not in text and ".. " not in text and "{" not in text:
        return []
    data = text.encode("utf-8")
    found: list[tuple[int, str, bytes | None]] = []
    for pattern in (_ROLE, _MYST_ROLE):
        for match in pattern.finditer(data):
            start = match.start()
            if pattern is _ROLE and start and _PART_OF_A_ROLE.match(data, start - 1):
                continue
            name = _role_target(match.group(2).decode("utf-8", "replace"))
            if name is not None:
                found.append((start, name, None))
    if not python:
        for match in _DIRECTIVE.finditer(data):
            found.append((match.start(), match.group(2).decode("ascii").rstrip("."), match.group(1)))
    found.sort(key=lambda item: item[0])
    return found


def _role_target(written: str) -> str | None:
    """The dotted name a role's text names, or ``None`` (``!name`` is not a link)."""
    written = written.strip()
    if "<" in written and written.endswith(">"):
        written = written[written.rindex("<") + 1:-1].strip()
    written = written.lstrip("~.")  # a "!name" is no name: not a link
    if written.endswith("()"):
        written = written[:-2]
    return written if _NAME.fullmatch(written) else None


def _resolve(corpus: Corpus, names: dict, from_path: str, module: str | None, written: str) -> SourceDocument | None:
    """The document ``written`` names, looked up under ``module`` first (beyond it only), then as written: the
    longest dotted prefix that is a module, then the definition the next part names in it, else the module."""
    tries = [(f"{module}.{written}", module.count(".") + 2)] if module and written != module else []
    for qualified, least in [*tries, (written, 1)]:
        parts = qualified.split(".")
        for cut in range(len(parts), 0, -1):
            paths = names.get("m " + ".".join(parts[:cut]))
            if not paths:
                continue
            path = _preferred(corpus, paths, from_path)
            if cut < len(parts):
                symbol = parts[cut]
                doc_id = names.get(f"d {path} {symbol}") or names.get(f"b {path} {symbol}")
                if doc_id is not None:
                    return corpus.document(doc_id)
            if cut >= least:
                return corpus.card(path)
            break
    return None


def _preferred(corpus: Corpus, paths: tuple[str, ...], from_path: str) -> str:
    """Of the files with one module name, a package's (what a project documents) before a loose module's, then
    the nearest to the document."""
    packages = [path for path in paths if path.endswith("/__init__.py") or path == "__init__.py"]
    return corpus.nearest(packages or paths, from_path) or paths[0]


def _package_files(corpus: Corpus, path: str) -> list[str]:
    """The ``__init__.py`` files of the packages holding the module ``path``, innermost first (not its own)."""
    folder = posixpath.dirname(path)
    if posixpath.basename(path) == "__init__.py":
        folder = posixpath.dirname(folder)
    found = []
    while folder and f"{folder}/__init__.py" in corpus:
        found.append(f"{folder}/__init__.py")
        folder = posixpath.dirname(folder)
    return found


def _module_name(path: str, packages: list[str]) -> str | None:
    """``path``'s dotted module name, from the packages holding it (:func:`_package_files`): its path from the
    outermost of them (``None`` when a part is no Python name)."""
    folder, file_name = posixpath.split(path)
    own = posixpath.basename(folder) if file_name == "__init__.py" else file_name[:-len(".py")]
    parts = [posixpath.basename(posixpath.dirname(package)) for package in reversed(packages)] + [own]
    return ".".join(parts) if all(part.isidentifier() for part in parts) else None


@hookimpl
def xerj_register_detectors(register) -> None:
    register(PyrefDetector())
