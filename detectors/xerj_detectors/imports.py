"""``imports``: a source file's import of another file of the corpus, linking the two.

What each language's statements name, and where it is looked for:

* Python (``import a.b``, ``from a.b import c``, ``from ..pkg import d``), in
  a module or in a Jupyter notebook's code cells (a Python kernel's):
  a relative import from the importing file's package; an absolute one from the
  root, then from each folder on the way down to the importing file that is not
  a package itself (a ``src/`` layout's ``src``), as ``a/b.py``, ``a/b.pyi`` or
  ``a/b/__init__.py``, in exactly that case. ``from a.b import c`` names the
  module ``a.b.c`` when there is one, else ``a.b``; a module the corpus does
  not hold stands for its nearest package that it does
  (``from numpy.linalg import norm`` in a copy of site-packages links to
  ``numpy/linalg/__init__.py``), and one whose package is not there either (the
  standard library, an uninstalled dependency) links nothing. Failing those
  roots, each Python project of the corpus (a folder holding ``pyproject.toml``,
  ``setup.py`` or ``setup.cfg``, and its ``src/``) is one, for a regular package
  of its own and never a standard library name: a workspace's members import
  each other as installed.
* JavaScript and TypeScript (``import ... from './x'``, ``export ... from``,
  ``import('./x')``, ``require('../x')``): relative specifiers, as Node and
  bundlers resolve them: the path itself, with each extension added, a
  TypeScript source for a ``.js`` specifier, then the folder's ``index``. A
  bare specifier is an alias when the nearest ``tsconfig.json`` (else
  ``jsconfig.json``) at or above the file says so, as the compiler reads it:
  ``compilerOptions.paths`` (the longest matching prefix of a ``*`` pattern, an
  exact pattern first, each target in turn), then ``baseUrl``; both as the
  config that sets them, or one it ``extends`` by a relative path, gives them
  (``"@/*": ["./src/*"]`` makes ``@/lib/db`` ``src/lib/db.ts``); the configs
  a package's name names (``"extends": "@acme/tsconfig/base.json"``) count when
  the corpus holds that package. Then a package of the corpus (a monorepo's
  workspace: each ``package.json``'s ``name``) by its name and subpath, as its
  ``exports`` map them (conditions in their order, ``*`` patterns, the first
  target the corpus holds: ``./dist`` is a build's), else its ``types``,
  ``module`` or ``main`` for the package itself, else the path below its folder,
  else below its ``src/`` (a package whose entries are all in its build's
  ``dist/``, which the folder does not hold).
  Any other package's name (``react``) links nothing.
* C and C++ (``#include "x.h"``, ``#include <lib/x.h>``): a quoted name from the
  including file's folder first; either form then as a path suffix, the
  nearest file ending in it (include paths are the build's, not the corpus's).
* Rust (``mod name;``): ``name.rs`` or ``name/mod.rs`` beside a crate's root
  or a ``mod.rs``, else in the folder named after the file; a ``#[path]``
  attribute's file beside the declaring file. A ``use``
  tree (``use crate::a::{b, c::D};``, ``pub use``, ``use super::*``, multi-line)
  names one module per path, found from the crate's root (the nearest
  ``lib.rs`` or ``main.rs`` up to its ``Cargo.toml``; a file with neither above
  it is a root itself, as a test or an example is): ``crate::`` from there,
  ``self::`` and ``super::`` from the module holding the statement (an inline
  ``mod tests {`` counted, by rustfmt's indentation), a first name that is a
  module beside the statement's (Rust 2018's uniform paths) from there, and
  the package name of a crate of the corpus (``grep_searcher::Searcher``, as
  ``extern crate`` does) from that crate's ``src/lib.rs``. A path's longest
  prefix that is a module file (``a/b.rs``, ``a/b/mod.rs``) is the edge's
  target, else the root file: an item's module, not a file per item. The
  standard library and crates the corpus does not hold link nothing.
* PHP (``use App\\Models\\User;``, ``use App\\Http\\{Request, Response as R};``,
  ``require __DIR__ . '/x.php';``): a class's file under the folder a
  ``composer.json`` of the corpus maps its namespace's longest registered
  prefix to (PSR-4, ``autoload`` and ``autoload-dev``), as Composer's autoloader
  finds it; a ``use`` at the start of a line only (one indented inside a class
  takes a trait, named relative to the file's imports), not ``use function`` or
  ``use const``; a ``require``/``include`` of ``__DIR__`` joined to a literal
  path, from the file's folder.
* Ruby (``require_relative "../lib/x"``, ``require "jekyll/page"``,
  ``autoload :Page, "jekyll/page"``): ``require_relative`` from the file's
  folder; ``require`` and ``autoload`` on the load path a project's ``lib/``
  folders make, the nearest file ending in ``lib/jekyll/page.rb``. A gem the
  corpus does not hold (``require "json"``) links nothing.
* Dart (``import 'package:app/ui/home.dart';``, ``export``, ``part``, a
  relative ``import '../x.dart';``): a package's path under the ``lib/`` beside
  the ``pubspec.yaml`` of the corpus that names it, a relative one from the
  file's folder; ``dart:`` libraries and packages the corpus does not hold link
  nothing.
* Go (``import "example.com/app/store"``, grouped ``import ( ... )``): a path
  under a module some ``go.mod`` of the corpus declares names the package in
  the folder beneath that ``go.mod``; a package is its files, so the edges go
  to each of its ``.go`` files but its tests. The standard library and other
  modules link nothing.
* Java, Kotlin, Scala and Groovy (``import a.b.C;``, ``import static
  a.b.C.member;``): the class's file, ``a/b/C.java`` (or ``.kt``, ``.scala``,
  ``.groovy``) under whatever source root holds it, the nearest when several
  do; a member's or a nested class's import names its class's file, and so
  does a wildcard over a class (``a.b.C.*``), while one over a package
  (``a.b.*``) names no one file and links nothing.

Go's module paths, Rust's, npm's and Dart's package names, PHP's namespace
prefixes and TypeScript's path aliases are what is read across files:
``summarize`` takes each ``go.mod``'s ``module`` line, each ``Cargo.toml``'s and
``pubspec.yaml``'s package name, each ``package.json``'s name and entry points,
each ``composer.json``'s PSR-4 prefixes and each ``tsconfig``'s ``baseUrl``,
``paths`` and ``extends``, and
``combine`` maps module paths, package names and prefixes to their folders and
each folder's config to the aliases it ends up with.

The edge goes from the document holding the statement (a Python section for an
import inside a function) to the imported file's card; its evidence is the
statement's line. Each statement is found from a literal (``import``,
``#include``, a quote before ``./``) searched in C, and only its line is matched
against a pattern, so a file costs about one pass of ``bytes.find``; what a
Python import resolves to from the root is looked up once per corpus, not once
per importing file.
"""

from __future__ import annotations

import bisect
import json
import posixpath
import re
import sys
import weakref
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, line_at, make_draft,
                                 within_root)

_PY_FROM = re.compile(rb"[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import\b")
_PY_NAME = re.compile(rb"\*|[^\W\d]\w*")
# a parenthesized list of names spans at most this many bytes (long lists run to a few hundred names)
_MAX_NAMES_BYTES = 16384
_PY_IMPORT = re.compile(rb"[ \t]*import[ \t]+([\w., \t]+)")
_PY_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")  # what makes a folder a Python project's
_PY_CELL = re.compile(rb"^(`{3,})python[ \t]*\n(.*?)^\1[ \t]*$", re.M | re.S)  # a notebook's code cell
_JS_SPEC = re.compile(rb"(?:\bfrom|\bimport|\brequire[ \t]*\(|\bimport[ \t]*\()[ \t]*$")
# a specifier that is not relative: an alias, a package of the corpus, or one it does not hold
_JS_BARE = re.compile(rb"(?:\bfrom|\bimport|\brequire[ \t]*\(|\bimport[ \t]*\()[ \t]*"
                      rb"""(['"`])([^'"`.\s][^'"`\s]*)\1""")
# a JSONC string, a comment, or a comma closing nothing (what ``tsconfig.json`` allows beyond JSON)
_JSONC = re.compile(r'("(?:[^"\\]|\\.)*")|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.S)
_TSCONFIG = "tsconfig:"  # a partial's key naming a tsconfig's path; the combined state's is _ALIASES + its folder
_ALIASES = "ts:"
_TS_CONFIG_NAMES = ("tsconfig.json", "jsconfig.json")  # the one a folder's files follow, in order of preference
_NO_ALIASES: tuple = (None, ())
_NPM = "npm:"  # the combined state's key of an npm package's name
# a package.json's fields naming the package's own entry, after its ``exports``: TypeScript's first, then bundlers'
_NPM_ENTRY_FIELDS = ("types", "typings", "module", "main")
_C_INCLUDE = re.compile(rb"[ \t]*#[ \t]*include[ \t]*([\"<])([^\">\n]+)[\">]")
_RS_MOD = re.compile(rb"[ \t]*(?:pub(?:\([^)\n]*\))?[ \t]+)?mod[ \t]+(\w+)[ \t]*;")
_RS_USE = re.compile(rb"[ \t]*(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:use[ \t]+|extern[ \t]+crate[ \t]+(?=\w))")
_RS_INLINE_MOD = re.compile(rb"^([ \t]*)(?:pub(?:\([^)\n]*\))?[ \t]+)?mod[ \t]+(\w+)[ \t]*\{[ \t]*(?://.*)?$", re.M)
_RS_PATH = re.compile(rb'#\[[ \t]*path[ \t]*=[ \t]*"([^"\n]+)"[ \t]*\]')
_RS_TOKEN = re.compile(rb"::|[{},*;]|(?:r#)?\w+")
_RS_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.S)
# a use tree longer than this many bytes, or naming more paths than this, is read up to there
_RS_MAX_TREE = 8192
_RS_MAX_PATHS = 256
_CRATE = "crate:"  # the combined state's key of a Rust crate's name (Go's module paths hold no colon)
_DART = "pub:"  # the combined state's key of a Dart package's name (a pubspec.yaml's), its folder the value
_PUBSPEC_NAME = re.compile(rb"^name:[ \t]*['\"]?([A-Za-z_]\w*)", re.M)
_DART_DIRECTIVE = re.compile(rb"^[ \t]*(?:import|export|part(?:[ \t]+of)?)[ \t]+(['\"])([^'\"\n]+)\1", re.M)
_PSR4 = "psr4:"  # the combined state's key of a PHP namespace prefix (``App\\``), its value the folders it maps to
_PHP_USE = re.compile(rb"^use[ \t]+(?!function\b|const\b)([^;]{1,4096});", re.M)
_PHP_NAME = re.compile(r"\\?([A-Za-z_\x80-\uffff][\w\x80-\uffff]*(?:\\[A-Za-z_\x80-\uffff][\w\x80-\uffff]*)*)")
# ``require __DIR__ . '/x.php'`` (or ``dirname(__FILE__)``): a path from the file's folder; a bare literal is
# looked for on the include path and from the working directory, which the corpus does not say
_PHP_REQUIRE = re.compile(rb"^[ \t]*(?:require|include)(?:_once)?[ \t(]*(?:__DIR__|dirname\(__FILE__\))[ \t]*\.[ \t]*"
                          rb"""(['"])(/[^'"\n]+)\1""", re.M)
_PHP_AS = re.compile(r"\s+as\s+", re.IGNORECASE)
# ``require "x"``, ``require_relative "x"``, ``autoload :X, "x"``, a literal without interpolation
_RB_REQUIRE = re.compile(rb"^[ \t]*(require_relative|require|autoload[ \t(]*:\w+[ \t]*,)[ \t(]*"
                         rb"""(['"])([^'"\n#{}]+)\2""", re.M)
_GO_MODULE = re.compile(rb"^[ \t]*module[ \t]+\"?([^\s\"]+)", re.M)
_GO_IMPORT = re.compile(rb"[ \t]*import[ \t]*(\(|(?:[\w.]+[ \t]+)?\"([^\"\n]+)\")")
_GO_SPEC = re.compile(rb"^[ \t]*(?:[\w.]+[ \t]+)?\"([^\"\n]+)\"", re.M)
_JVM_IMPORT = re.compile(rb"[ \t]*import[ \t]+(?:static[ \t]+)?([A-Za-z_][\w.]*)(\.\*)?[ \t]*(?:;|$|[ \t]+as\b)")
# The files a class of the JVM languages lives in (Kotlin and Scala code imports Java classes too).
_JVM_EXTENSIONS = (".java", ".kt", ".scala", ".groovy")

_JS_LANGUAGES = frozenset({"javascript", "typescript", "vue", "svelte", "astro"})
_JS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte", ".astro")
# A ``.js`` specifier in TypeScript's ESM output names the ``.ts`` source it is compiled from.
_JS_COMPILED = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


class ImportsDetector:
    name = "imports"
    type = "imports"
    tag = "imports@2"
    # a statement the language runs: as sure as a link, and more than a path written in prose
    weight = 0.8
    confidence = 0.9

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, str, tuple | None] | None:
        """``(folder, key, value)``: a ``go.mod``'s module path, a ``Cargo.toml``'s ``crate:`` and package name as
        Rust code writes it (``grep-cli``: ``crate:grep_cli``), a tsconfig's ``tsconfig:`` and path with what it
        sets (:func:`_tsconfig`), a ``package.json``'s ``npm:`` and name with its entry points
        (:func:`_npm_package`); None for any other file."""
        card = file_docs[0] if file_docs else None
        if card is None or card.format != "code":
            return None
        name, folder = posixpath.basename(card.ax_path), posixpath.dirname(card.ax_path)
        if name == "Cargo.toml":
            crate = card.fields.get("crate")
            return (folder, _CRATE + crate.replace("-", "_"), None) if isinstance(crate, str) and crate else None
        if card.fields.get("language") == "tsconfig":
            config = _tsconfig(card.text, folder)
            return None if config is None else (folder, _TSCONFIG + card.ax_path, config)
        if card.fields.get("language") == "npm":
            package = _npm_package(card.text, folder)
            return None if package is None else (folder, _NPM + package[0], package[1])
        if card.fields.get("language") == "composer":
            prefixes = _composer_prefixes(card.text, folder)
            return None if not prefixes else (folder, _PSR4 + card.ax_path, prefixes)
        if name == "pubspec.yaml":
            match = _PUBSPEC_NAME.search(card.text.encode("utf-8"))
            return (folder, _DART + match.group(1).decode(), None) if match else None
        if name != "go.mod":
            return None
        match = _GO_MODULE.search(card.text.encode("utf-8"))
        return (folder, match.group(1).decode(), None) if match else None

    def combine(self, partials: Iterable[tuple[str, str, tuple | None] | None], corpus: Corpus) -> DetectorState:
        """Each module path's and crate name's folder and each npm package's folder and entry points (two of one
        name: the one nearer the root), and each folder's config's aliases (``ts:`` and the folder: see
        :func:`_ts_aliases`)."""
        modules: dict[str, Any] = {}
        configs: dict[str, tuple] = {}
        for folder, key, value in sorted((p for p in partials if p is not None), key=lambda p: (p[0].count("/"), p)):
            if key.startswith(_TSCONFIG):
                configs[key[len(_TSCONFIG):]] = value  # type: ignore[assignment]
            elif key.startswith(_NPM):
                modules.setdefault(key, (folder, value))
            elif key.startswith(_PSR4):  # a prefix two manifests map: the folders of both, the nearer root's first
                for prefix, folders in value:  # type: ignore[union-attr]
                    modules[_PSR4 + prefix] = (*modules.get(_PSR4 + prefix, ()), *folders)
            else:
                modules.setdefault(key, folder)
        packaged = partial(_npm_config, modules)
        for name in _TS_CONFIG_NAMES:
            for path in sorted(p for p in configs if posixpath.basename(p) == name):
                # a config without aliases is kept too: a folder under it follows it, not a config further up
                aliases = _ts_aliases(configs, path, packaged)
                modules.setdefault(_ALIASES + posixpath.dirname(path), aliases or _NO_ALIASES)
        return DetectorState(data=modules)

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        card = file_docs[0] if file_docs else None
        if card is None or card.format not in ("code", "notebook"):
            return
        language = card.fields.get("language")
        if card.format == "notebook":  # its code cells, in the kernel's language
            language = "notebook" if language == "python" else None
        if language == "go":
            modules = state.data if state is not None and state.data else None
            if not modules:
                return
            yield from _go_edges(self, file_docs, corpus, modules)
            return
        finder = _FINDERS.get(language)  # type: ignore[arg-type]
        if finder is None:
            return
        # (the state read by key only: a file's remembered detection then depends on the keys it asked)
        known = state.data if state is not None and state.data is not None else {}
        if language == "rust":
            finder = partial(_rust, crates=known)
        elif language in _JS_LANGUAGES:
            finder = partial(_javascript, aliases=_ts_config_of(known, card.ax_path), packages=known)
        elif language == "php":
            finder = partial(_php, prefixes=known)
        elif language == "dart":
            finder = partial(_dart, packages=known)
        resolved: dict[tuple, str | None] = {}  # a file names the same module in several documents
        for doc in file_docs:
            if not doc.text:
                continue
            data = doc.text.encode("utf-8")
            seen: set[str] = set()
            for offset, key, resolve, stands in finder(data):
                path = resolved.get(key, resolved)
                if path is resolved:
                    path = resolved[key] = resolve(corpus, card.ax_path)
                if path is None or path == card.ax_path or path in seen or (stands is not None and not stands(offset)):
                    continue
                dst = corpus.card(path)
                if dst is None:
                    continue
                seen.add(path)
                yield make_draft(self, doc, dst, quote=line_at(data, offset), offset=offset)


# What a language's finder yields per statement: its line's offset, a key naming what it imports (statements
# with one key resolve once per file), how to resolve it, and None or a check that the line is a statement (asked
# only of the few that resolve: the rest import what the corpus does not hold).
Found = Iterator[tuple[int, tuple, Callable[[Corpus, str], "str | None"], "Callable[[int], bool] | None"]]

# Per corpus (a run's, shared by every file it detects over in this process): the Python lookups that do not
# depend on the importing file, so a module the standard library holds is looked for once, not once per file.
_MEMOS: "weakref.WeakKeyDictionary[Corpus, dict]" = weakref.WeakKeyDictionary()


# The last corpus asked about and its memo, as one pair replaced whole: a run asks about one corpus
# over and over, and a weak reference's call is cheaper than the weak dictionary's lookup.
_LAST: "tuple[Callable[[], Corpus | None], dict]" = (lambda: None, {})


def _memo(corpus: Corpus) -> dict:
    global _LAST
    ref, found = _LAST
    if ref() is corpus:
        return found
    found = _MEMOS.get(corpus)
    if found is None:
        found = _MEMOS[corpus] = {}
    _LAST = (weakref.ref(corpus), found)
    return found


def _lines_with(data: bytes, literal: bytes) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each line holding ``literal``, once each, in order."""
    at = data.find(literal)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        yield start, end
        at = data.find(literal, end)


# -- Python -------------------------------------------------------------------------------------------


def _python(data: bytes) -> Found:
    def stands(offset: int) -> bool:
        """Whether the line at ``offset`` is a statement, not an example in a docstring: outside an odd number of
        triple quotes of either kind (imports come first in a file, so the count stops early)."""
        return not (data.count(b'"""', 0, offset) % 2 or data.count(b"'''", 0, offset) % 2)

    for start, end in _lines_with(data, b"import"):
        line = data[start:end]
        match = _PY_FROM.match(line) or _PY_IMPORT.match(line)
        if match is None:
            continue
        if match.re is _PY_IMPORT:
            for item in match.group(1).decode().split(","):
                parts = item.split()
                if parts:
                    yield start, ("import", parts[0]), _python_absolute(parts[0].split(".")), stands
            continue
        dots, module = len(match.group(1)), match.group(2).decode()
        if not dots and not module:
            continue
        # each name may be a module of its own (``from . import utils, models``): an edge to each that is
        for name in [n for n in _imported_names(data, start + match.end(), end) if n != "*"] or [""]:
            yield start, ("from", dots, module, name), _python_from(dots, module, (name,) if name else ()), stands


def _imported_names(data: bytes, at: int, end: int) -> list[str]:
    """The names a ``from ... import`` lists from byte ``at`` (after ``import``), its line ending at ``end``: up to
    the line's end, or across lines to the closing parenthesis; ``as`` aliases and comments left out."""
    rest = data[at:end]
    if rest.lstrip().startswith(b"(") and b")" not in rest:
        close = data.find(b")", at, at + _MAX_NAMES_BYTES)
        rest = data[at:close if close >= 0 else end]
    names: list[str] = []
    for line in rest.split(b"\n"):
        for item in line.split(b"#", 1)[0].split(b","):
            found = _PY_NAME.search(item)
            if found is not None:
                names.append(found.group().decode())
    return names


def _python_module(corpus: Corpus, base: str, parts: Sequence[str]) -> str | None:
    """The file of module ``parts`` under folder ``base`` (``""``: the root), or None."""
    stem = f"{base}/{'/'.join(parts)}" if base else "/".join(parts)
    memo = _memo(corpus)
    found = memo.get(stem, memo)
    if found is memo:
        found = memo[stem] = next((candidate for candidate in (stem + ".py", stem + ".pyi", stem + "/__init__.py",
                                                               stem + "/__init__.pyi")
                                   # exactly: ``from .abstracts import Algorithm`` is not ``abstracts/algorithm.py``
                                   if candidate in corpus), None)
    return found


def _import_roots(corpus: Corpus, path: str) -> list[str]:
    """Where an absolute import from ``path`` may start: the root, then each folder on the way to ``path``'s
    folder that is not a package itself (a ``src/`` layout's ``src``). A package's own folder is never one:
    ``from inspect import x`` in ``falcon/app.py`` names the standard library's module, not ``falcon/inspect.py``."""
    here = path.rpartition("/")[0]
    memo = _memo(corpus)
    found = memo.get(("roots", here))
    if found is None:
        found, parts = [""], here.split("/")
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder and folder + "/__init__.py" not in corpus:
                found.append(folder)
        memo["roots", here] = found
    return found


def _holds_top_level(corpus: Corpus, base: str, parts: Sequence[str]) -> bool:
    """Whether folder ``base`` holds the top of module ``parts``: a module file, or a folder on the module's path
    holding a file (a namespace package's first folders may hold none). Most imports name the standard library
    or a dependency the corpus does not hold, and a few lookups settle them before any candidate file is tried."""
    memo = _memo(corpus)
    key = ("top", base, *parts)
    found = memo.get(key)
    if found is None:
        top = f"{base}/{parts[0]}" if base else parts[0]
        found = top + ".py" in corpus or top + ".pyi" in corpus or any(
            corpus.directory("/".join((top, *parts[1:size]))) for size in range(1, len(parts) + 1))
        memo[key] = found
    return found


def _project_roots(corpus: Corpus) -> list[str]:
    """The folders of the corpus's Python projects (each holding a ``pyproject.toml``, ``setup.py`` or
    ``setup.cfg``) and their ``src/``: a workspace's members, whose packages its other members and tests import
    as installed (pydantic-ai's tests import ``pydantic_ai``, kept in ``pydantic_ai_slim/pydantic_ai``)."""
    memo = _memo(corpus)
    found = memo.get("projects")
    if found is None:
        folders = sorted({path.rpartition("/")[0] for name in _PY_PROJECT_FILES for path in corpus.by_file_name(name)
                          if path.rpartition("/")[2] == name})
        found = memo["projects"] = [root for folder in folders if folder
                                    for root in (folder, f"{folder}/src")]
    return found


def _python_absolute(parts: list[str], *, named: tuple[str, ...] = ()) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        if not all(parts):
            return None
        roots = _import_roots(corpus, from_path)  # (memoized: the same for every file of a folder)
        found = _python_from_roots(corpus, roots, parts, named)
        if found is not None or parts[0] in sys.stdlib_module_names:
            return found
        # then a project of the workspace, for a regular package of its own only, and never a name of the standard
        # library: its root's loose modules (a config.py) are not what another project's import names
        workspace = [base for base in _project_roots(corpus) if base not in roots
                     and f"{base}/{parts[0]}/__init__.py" in corpus]
        return _python_from_roots(corpus, workspace, parts, named) if workspace else None
    return resolve


def _python_from_roots(corpus: Corpus, roots: Sequence[str], parts: list[str], named: tuple[str, ...]
                       ) -> str | None:
    """The file module ``parts`` (or ``parts`` and one of ``named``) names under the first of ``roots`` holding it."""
    for base in roots:
        if not _holds_top_level(corpus, base, parts):
            continue
        for name in named:  # ``from a import b``: the module a.b when there is one
            found = _python_module(corpus, base, [*parts, name])
            if found is not None:
                return found
        for size in range(len(parts), 0, -1):  # else the module, or its nearest package held
            found = _python_module(corpus, base, parts[:size])
            if found is not None:
                return found
    return None


def _python_from(dots: int, module: str, named: tuple[str, ...]) -> Callable[[Corpus, str], str | None]:
    parts = module.split(".") if module else []
    if not dots:
        return _python_absolute(parts, named=named)

    def resolve(corpus: Corpus, from_path: str) -> str | None:
        base = posixpath.dirname(from_path)
        for _level in range(dots - 1):
            if not base:
                return None  # above the root
            base = posixpath.dirname(base)
        if not all(parts):
            return None
        for name in named:
            found = _python_module(corpus, base, [*parts, name])
            if found is not None:
                return found
        for size in range(len(parts), 0, -1):  # the module, else its nearest package held
            found = _python_module(corpus, base, parts[:size])
            if found is not None:
                return found
        # the package itself: ``from . import name`` of a name it defines, or a module it does not hold as a file
        package = posixpath.join(base, "__init__") if base else "__init__"
        return next((package + ext for ext in (".py", ".pyi") if package + ext in corpus), None)
    return resolve


def _notebook_python(data: bytes) -> Found:
    """A Jupyter notebook's Python cells (the fenced blocks the notebook format writes them as), each read as a
    module: ``from utils import plot`` in ``analysis.ipynb`` names ``utils.py`` beside it."""
    for fence in _PY_CELL.finditer(data):
        base = fence.start(2)
        for offset, key, resolve, stands in _python(fence.group(2)):
            yield base + offset, key, resolve, None if stands is None else partial(_shifted, stands, base)


def _shifted(stands: Callable[[int], bool], base: int, offset: int) -> bool:
    return stands(offset - base)


# -- JavaScript and TypeScript ------------------------------------------------------------------------


def _javascript(data: bytes, aliases: tuple | None = None, packages: Mapping[str, Any] | None = None) -> Found:
    for quote in (b"'.", b'".', b"`."):
        for start, end in _lines_with(data, quote):
            if data[start:end].lstrip().startswith((b"//", b"/*", b"*")):
                continue  # a commented-out import
            at = data.find(quote, start, end)
            while at >= 0:
                close = data.find(quote[:1], at + 1, end)
                spec = data[at + 1:close] if close > at else b""
                if (spec.startswith(b"./") or spec.startswith(b"../")) and _JS_SPEC.search(data, start, at):
                    text = spec.decode("utf-8", "replace")
                    yield start, ("js", text), _javascript_resolve(text), None
                at = data.find(quote, at + 1, end)
    for match in _JS_BARE.finditer(data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        if data[start:match.start()].lstrip().startswith((b"//", b"/*", b"*")):
            continue
        spec = match.group(2).decode("utf-8", "replace")
        yield start, ("bare", spec), _javascript_bare(spec, aliases, packages or {}), None


def _js_file(corpus: Corpus, target: str) -> str | None:
    """The file a module path names, as Node and bundlers look: itself, the TypeScript source of a ``.js``, each
    extension added, then the folder's ``index``."""
    if not within_root(target):
        return None
    stem, ext = posixpath.splitext(target)
    candidates = [target, *(stem + source for source in _JS_COMPILED.get(ext, ()))]
    candidates += [target + extension for extension in _JS_EXTENSIONS]
    candidates += [f"{target}/index{extension}" for extension in _JS_EXTENSIONS]
    return next((candidate for candidate in candidates if candidate in corpus), None)


def _javascript_resolve(spec: str) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        return _js_file(corpus, posixpath.normpath(posixpath.join(posixpath.dirname(from_path), spec.split("?")[0])))
    return resolve


def _javascript_bare(spec: str, aliases: tuple | None, packages: Mapping[str, Any]
                     ) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, _from_path: str) -> str | None:
        found = None if aliases is None else _alias_file(corpus, spec, aliases)
        return found if found is not None else _package_file(corpus, spec, packages)
    return resolve


def _alias_file(corpus: Corpus, spec: str, aliases: tuple) -> str | None:
    """The file a tsconfig's ``paths``, then its ``baseUrl``, make of ``spec``."""
    base_url, paths = aliases
    candidates = _pattern_targets(spec, paths)
    if base_url is not None:
        candidates.append(posixpath.join(base_url, spec))
    return next(filter(None, (_js_file(corpus, posixpath.normpath(c)) for c in candidates)), None)


def _pattern_targets(key: str, patterns: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """The targets of ``key`` in ``(pattern, targets)`` pairs, as TypeScript's ``paths`` and Node's ``exports``
    match: an exact pattern, else the ``*`` pattern with the longest part before its star, the star's match put
    in each target."""
    exact = next((targets for pattern, targets in patterns if pattern == key), None)
    if exact is not None:
        return list(exact)
    best, found = -1, []
    for pattern, targets in patterns:
        head, star, tail = pattern.partition("*")
        if star and len(head) > best and key.startswith(head) and key.endswith(tail) \
                and len(key) >= len(head) + len(tail):
            matched = key[len(head):len(key) - len(tail)]
            best, found = len(head), [target.replace("*", matched) for target in targets]
    return found


def _package_name(spec: str) -> str:
    """The package part of a bare specifier: ``@scope/name`` or ``name``."""
    parts = spec.split("/")
    return "/".join(parts[:2] if spec.startswith("@") else parts[:1])


def _package_file(corpus: Corpus, spec: str, packages: Mapping[str, Any]) -> str | None:
    """The file of the corpus's package ``spec`` names: its ``exports``' target for the subpath (for the package
    itself, its entry fields'), else the path below its folder (its index for the package itself), else below
    its ``src/``: a package whose entries are all its build's (``./dist/index.mjs``, not in the folder) is
    built from the sources its ``src/`` mirrors them with (tRPC's examples import ``@trpc/server/observable``,
    ``packages/server/src/observable/index.ts``)."""
    name = _package_name(spec)
    package = packages.get(_NPM + name)
    if package is None:
        return None
    folder, entries = package
    subpath = "." + spec[len(name):]
    for target in _pattern_targets(subpath, entries):
        found = _js_file(corpus, target)
        if found is not None:
            return found
    for base in (folder, posixpath.join(folder, "src")):
        found = _js_file(corpus, posixpath.normpath(posixpath.join(base, subpath)))
        if found is not None:
            return found
    return None


def _npm_package(text: str, folder: str) -> tuple[str, tuple] | None:
    """A ``package.json``'s name and entry points: ``((subpath, (target, ...)), ...)``, targets as corpus paths
    in the order a resolver tries them (an ``exports`` entry's conditions as written, then for ``.`` the
    ``types``, ``module`` and ``main`` fields); None for a file without a name."""
    try:
        package = json.loads(text)
    except ValueError:
        return None
    name = package.get("name") if isinstance(package, dict) else None
    if not isinstance(name, str) or not name:
        return None
    exports = package.get("exports")
    if not isinstance(exports, dict) or not any(isinstance(k, str) and k.startswith(".") for k in exports):
        exports = {".": exports}  # a string, a list, or conditions for the package itself
    entries: dict[str, list[str]] = {}
    for subpath, value in exports.items():
        if isinstance(subpath, str) and subpath.startswith("."):
            entries[subpath] = list(_export_targets(value))
    entries.setdefault(".", []).extend(v for field in _NPM_ENTRY_FIELDS if isinstance(v := package.get(field), str))
    resolved = ((subpath, [posixpath.normpath(posixpath.join(folder, t)) for t in targets])
                for subpath, targets in entries.items())
    return name, tuple((subpath, tuple(t for t in targets if within_root(t))) for subpath, targets in resolved)


def _export_targets(value: Any) -> Iterator[str]:
    """The relative targets of one ``exports`` value (a string, a list, conditions nested to any depth), in order."""
    if isinstance(value, str):
        if value.startswith("./"):
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from _export_targets(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _export_targets(item)


def _npm_config(modules: Mapping[str, Any], spec: str) -> str | None:
    """The corpus path of the config an ``extends`` names by a package (``@acme/tsconfig/base.json``), when the
    corpus holds the package."""
    name = _package_name(spec)
    package = modules.get(_NPM + name)
    if package is None:
        return None
    rest = spec[len(name):].lstrip("/")
    path = posixpath.normpath(posixpath.join(package[0], rest or "tsconfig.json"))
    return path if path.endswith(".json") else path + ".json"


def _tsconfig(text: str, folder: str) -> tuple | None:
    """What a tsconfig sets that aliases follow from: ``(baseUrl, paths, extends)`` with ``baseUrl`` as a corpus
    path (None: unset), ``paths`` as ``(folder they are relative to unless a baseUrl says otherwise, ((pattern,
    (target, ...)), ...))`` (None: unset), and the corpus paths of the configs it extends (``npm:`` and the
    specifier for one a package holds). None for a file that is not a JSON object even with comments and
    trailing commas."""
    try:  # twice: a comma is closing nothing only once the comments after it are gone
        config = json.loads(_JSONC.sub(_kept_string, _JSONC.sub(_kept_string, text)))
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    options = config.get("compilerOptions")
    options = options if isinstance(options, dict) else {}
    base_url = options.get("baseUrl")
    base_url = posixpath.normpath(posixpath.join(folder, base_url)) if isinstance(base_url, str) else None
    paths = options.get("paths")
    if isinstance(paths, dict):
        paths = (folder, tuple((pattern, tuple(t for t in targets if isinstance(t, str)))
                               for pattern, targets in paths.items() if isinstance(targets, list)))
    else:
        paths = None
    extends = config.get("extends")
    extends = [extends] if isinstance(extends, str) else extends if isinstance(extends, list) else []
    parents = []
    for parent in extends:
        if isinstance(parent, str) and parent.startswith("."):
            parent = posixpath.normpath(posixpath.join(folder, parent))
            parents.append(parent if parent.endswith(".json") else parent + ".json")
        elif isinstance(parent, str) and parent:
            parents.append(_NPM + parent)  # a package's config: found once the corpus's packages are known
    return base_url, paths, tuple(parents)


def _kept_string(match: re.Match) -> str:
    return match.group(1) or ""


def _ts_aliases(configs: Mapping[str, tuple], path: str, packaged: Callable[[str], str | None]) -> tuple | None:
    """``(baseUrl, ((pattern, targets), ...))`` of the config at ``path``, its own settings over those of the
    configs it extends (the last of a list first), targets as corpus paths; None when it sets neither.
    ``packaged``: the corpus path of a config a package holds, from the specifier naming it."""
    base_url, paths, seen, todo = None, None, set(), [path]
    while todo and (base_url is None or paths is None):
        at = todo.pop(0)
        at = (packaged(at[len(_NPM):]) or "") if at.startswith(_NPM) else at
        config = configs.get(at)
        if config is None or at in seen:
            continue
        seen.add(at)
        own_base, own_paths, parents = config
        base_url = base_url if base_url is not None else own_base
        paths = paths if paths is not None else own_paths
        todo = [p for p in reversed(parents) if p not in todo] + todo
    if base_url is None and paths is None:
        return None
    folder, patterns = paths if paths is not None else (None, ())
    relative_to = base_url if base_url is not None else folder
    return base_url, tuple((pattern, tuple(posixpath.normpath(posixpath.join(relative_to, t)) for t in targets))
                           for pattern, targets in patterns)


def _ts_config_of(state: Mapping[str, Any], path: str) -> tuple | None:
    """The aliases of the nearest folder at or above ``path``'s whose config declares some."""
    folder = posixpath.dirname(path)
    while True:
        found = state.get(_ALIASES + folder)
        if found is not None or not folder:
            return None if found == _NO_ALIASES else found
        folder = posixpath.dirname(folder)


# -- PHP ----------------------------------------------------------------------------------------------


def _php(data: bytes, prefixes: Mapping[str, Any] | None = None) -> Found:
    for match in _PHP_USE.finditer(data):
        for name in _php_use_names(match.group(1).decode("utf-8", "replace")):
            yield match.start(), ("class", name), _php_class(name, prefixes or {}), None
    for match in _PHP_REQUIRE.finditer(data):
        path = match.group(2).decode("utf-8", "replace").lstrip("/")
        yield match.start(), ("require", path), _php_require(path), None


def _php_use_names(body: str) -> list[str]:
    """The classes one ``use`` statement imports: ``A\\B``, ``A\\B as C``, ``A\\B, C\\D``, ``A\\{B, C\\D as E}``."""
    brace = body.find("{")
    if brace < 0:
        prefix, items = "", body.split(",")
    else:
        prefix, items = body[:brace].strip().strip("\\"), body[brace + 1:body.rfind("}")].split(",")
    names = []
    for item in items:
        item = _PHP_AS.split(re.sub(r"^\s*(?:function|const)\s+", "", item))[0]
        match = _PHP_NAME.fullmatch(item.strip())
        if match is not None:
            names.append(f"{prefix}\\{match.group(1)}" if prefix else match.group(1))
    return names


def _php_class(name: str, prefixes: Mapping[str, Any]) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, _from_path: str) -> str | None:
        parts = name.split("\\")
        for size in range(len(parts) - 1, 0, -1):  # the longest registered prefix first
            folders = prefixes.get(_PSR4 + "\\".join(parts[:size]) + "\\")
            for folder in folders or ():
                candidate = posixpath.join(folder, *parts[size:]) + ".php"
                if candidate in corpus:
                    return candidate
        return None
    return resolve


def _php_require(path: str) -> Callable[[Corpus, str], str | None]:
    return lambda corpus, from_path: _beside(corpus, from_path, path)


def _composer_prefixes(text: str, folder: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A ``composer.json``'s PSR-4 namespace prefixes (``autoload`` and ``autoload-dev``) and the corpus folders
    each maps to."""
    try:
        manifest = json.loads(text)
    except ValueError:
        return ()
    found: dict[str, list[str]] = {}
    for section in ("autoload", "autoload-dev"):
        autoload = manifest.get(section) if isinstance(manifest, dict) else None
        psr4 = autoload.get("psr-4") if isinstance(autoload, dict) else None
        for prefix, folders in (psr4.items() if isinstance(psr4, dict) else ()):
            for sub in [folders] if isinstance(folders, str) else folders if isinstance(folders, list) else ():
                target = posixpath.normpath(posixpath.join(folder, sub)) if isinstance(sub, str) else None
                if isinstance(prefix, str) and prefix and target is not None and within_root(target):
                    found.setdefault(prefix if prefix.endswith("\\") else prefix + "\\", []).append(target)
    return tuple((prefix, tuple(folders)) for prefix, folders in sorted(found.items()))


# -- Dart ---------------------------------------------------------------------------------------------


def _dart(data: bytes, packages: Mapping[str, Any] | None = None) -> Found:
    for match in _DART_DIRECTIVE.finditer(data):
        uri = match.group(2).decode("utf-8", "replace")
        if not uri.startswith("dart:"):
            yield match.start(), ("dart", uri), _dart_resolve(uri, packages or {}), None


def _dart_resolve(uri: str, packages: Mapping[str, Any]) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        if uri.startswith("package:"):
            name, _, rest = uri[len("package:"):].partition("/")
            folder = packages.get(_DART + name)
            if folder is None or not rest:
                return None
            target = posixpath.normpath(posixpath.join(folder, "lib", rest))
            return target if within_root(target) and target in corpus else None
        return None if ":" in uri else _beside(corpus, from_path, uri)  # another scheme (a URL) names none
    return resolve


# -- Ruby ---------------------------------------------------------------------------------------------


def _ruby(data: bytes) -> Found:
    for match in _RB_REQUIRE.finditer(data):
        path = match.group(3).decode("utf-8", "replace")
        path = path if path.endswith(".rb") else path + ".rb"
        relative = match.group(1) == b"require_relative"
        yield match.start(), ("rb", relative, path), _ruby_resolve(path, relative), None


def _ruby_resolve(path: str, relative: bool) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        return _beside(corpus, from_path, path) if relative else _nearest_ending(corpus, "lib/" + path, from_path)
    return resolve


# -- C and C++ ----------------------------------------------------------------------------------------


def _c(data: bytes) -> Found:
    for start, end in _lines_with(data, b"include"):
        match = _C_INCLUDE.match(data, start, end)
        if match is not None:
            quoted, name = match.group(1) == b'"', match.group(2).decode("utf-8", "replace").strip()
            yield start, ("c", quoted, name), _c_resolve(name, quoted), None


def _c_resolve(name: str, quoted: bool) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        beside = _beside(corpus, from_path, name) if quoted else None
        if beside is not None:
            return beside
        plain = posixpath.normpath(name)
        return _nearest_ending(corpus, plain, from_path) if within_root(plain) else None
    return resolve


def _beside(corpus: Corpus, from_path: str, path: str) -> str | None:
    """The corpus file ``path`` names relative to ``from_path``'s folder, if the folder holds it."""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), path))
    return target if within_root(target) and target in corpus else None


def _nearest_ending(corpus: Corpus, path: str, from_path: str) -> str | None:
    """The corpus file nearest ``from_path`` that is ``path`` or ends in ``/path``, in exactly that case (the
    file name lookup folds case; include paths and class names do not)."""
    suffix = "/" + path
    candidates = [p for p in corpus.by_file_name(posixpath.basename(path)) if p == path or p.endswith(suffix)]
    return corpus.nearest(candidates, from_path)


# -- Go -----------------------------------------------------------------------------------------------


def _go_imports(data: bytes) -> Iterator[tuple[int, str]]:
    """``(offset of the line, import path)`` of each import, single or grouped."""
    for start, end in _lines_with(data, b"import"):
        match = _GO_IMPORT.match(data, start, end)
        if match is None:
            continue
        if match.group(2) is not None:
            yield start, match.group(2).decode("utf-8", "replace")
            continue
        close = data.find(b")", end)
        for spec in _GO_SPEC.finditer(data, end, close if close >= 0 else len(data)):
            yield spec.start(), spec.group(1).decode("utf-8", "replace")


def _go_package(corpus: Corpus, modules: dict[str, str], path: str) -> list[str]:
    """The non-test ``.go`` files of the package at import ``path``, under the longest module path holding it."""
    module = path
    while module and module not in modules:
        module = module.rpartition("/")[0]
    if not module:
        return []
    rest = path[len(module):].strip("/")
    folder = "/".join(part for part in (modules[module], rest) if part)
    return [p for p in corpus.directory(folder) if p.endswith(".go") and not p.endswith("_test.go")]


def _go_edges(detector: ImportsDetector, file_docs: Sequence[SourceDocument], corpus: Corpus,
              modules: dict[str, str]) -> Iterator[EdgeDraft]:
    """A Go file's edges: one to each file of each package it imports that the corpus holds."""
    packages: dict[str, list[str]] = {}
    here = file_docs[0].ax_path
    for doc in file_docs:
        data = doc.text.encode("utf-8")
        seen: set[str] = set()
        for offset, path in _go_imports(data):
            files = packages.get(path)
            if files is None:
                files = packages[path] = _go_package(corpus, modules, path)
            for target in files:
                dst = corpus.card(target)
                if target == here or target in seen or dst is None:
                    continue
                seen.add(target)
                yield make_draft(detector, doc, dst, quote=line_at(data, offset), offset=offset)


# -- Java, Kotlin, Scala, Groovy ----------------------------------------------------------------------


def _jvm(data: bytes) -> Found:
    for start, end in _lines_with(data, b"import"):
        match = _JVM_IMPORT.match(data, start, end)
        if match is not None:  # ``a.b.C.*`` names C's file; ``a.b.*``, a package, names none (nothing resolves)
            name = match.group(1).decode()
            yield start, ("jvm", name), _jvm_resolve(name.split(".")), None


def _jvm_resolve(parts: list[str]) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        # the class itself, else (a static import's member, a nested class) the class that holds it
        for size in range(len(parts), 1, -1):
            for extension in _JVM_EXTENSIONS:
                found = _nearest_ending(corpus, "/".join(parts[:size]) + extension, from_path)
                if found is not None:
                    return found
        return None
    return resolve


# -- Rust ---------------------------------------------------------------------------------------------


def _rust(data: bytes, crates: Mapping[str, str] | None = None) -> Found:
    for start, end in _lines_with(data, b"mod"):
        match = _RS_MOD.match(data, start, end)
        if match is not None:
            name, file = match.group(1).decode(), _rust_path_attribute(data, start)
            yield start, ("mod", name, file), _rust_resolve(name, file), None
    inline: tuple[list[int], list[tuple[str, ...]]] | None = None
    starts = sorted({start for literal in (b"use", b"extern") for start, _end in _lines_with(data, literal)})
    for start in starts:
        match = _RS_USE.match(data, start)
        if match is None:
            continue
        inline = _rust_inline_modules(data) if inline is None else inline
        within = inline[1][bisect.bisect_right(inline[0], start) - 1] if inline[0] else ()
        for offset, path in _rust_use_paths(data, match.end()):
            yield offset, ("use", path, within), _rust_use_resolve(path, within, crates or {}), None


def _rust_inline_modules(data: bytes) -> tuple[list[int], list[tuple[str, ...]]]:
    """Where the inline modules (``mod tests {``) holding each part of a file change: ascending offsets, and the
    names of the modules open from each (outermost first). Blocks are told by their lines' indentation, as
    rustfmt writes them: a ``}`` closes the blocks opened at its indentation or deeper."""
    offsets: list[int] = [0]
    names: list[tuple[str, ...]] = [()]
    if _RS_INLINE_MOD.search(data) is None:
        return offsets, names
    stack: list[tuple[int, str]] = []
    at = 0
    for line in data.split(b"\n"):
        stripped = line.lstrip(b" \t")
        indent = len(line) - len(stripped)
        before = len(stack)
        if stripped.startswith(b"}"):
            while stack and stack[-1][0] >= indent:
                stack.pop()
        opened = _RS_INLINE_MOD.match(line)
        if opened is not None:
            stack.append((indent, opened.group(2).decode()))
        if len(stack) != before or opened is not None:
            offsets.append(at + len(line))
            names.append(tuple(name for _indent, name in stack))
        at += len(line) + 1
    return offsets, names


def _rust_use_paths(data: bytes, at: int) -> list[tuple[int, tuple[str, ...]]]:
    """The paths a use tree starting at ``at`` names, each with the offset of its last name (``use a::{b,
    c::d};``: ``a::b`` and ``a::c::d``); a glob's path ends before its ``*``, and ``self`` in braces is the
    path the braces follow."""
    end = data.find(b";", at, at + _RS_MAX_TREE)
    text = _RS_COMMENT.sub(lambda m: b" " * len(m.group(0)), data[at:end if end >= 0 else at + _RS_MAX_TREE])
    # (bytes throughout, so a token's offset is the file's: comments are blanked, not cut)
    tokens = [(m.group(0).decode(), m.start()) for m in _RS_TOKEN.finditer(text)][:_RS_MAX_PATHS * 8]
    out: list[tuple[int, tuple[str, ...]]] = []

    def tree(i: int, prefix: tuple[str, ...], last: int) -> int:
        """Read the tree at token ``i`` under ``prefix`` (its last name at ``last``), adding its paths to ``out``;
        the token after it."""
        path = prefix
        while i < len(tokens):
            token, offset = tokens[i]
            if token == "{":
                i += 1
                while i < len(tokens) and tokens[i][0] not in ("}", ";"):
                    after = tree(i, path, last)
                    i = after + 1 if after < len(tokens) and tokens[after][0] == "," else max(after, i + 1)
                return i + 1
            if token in (",", "}", ";"):
                break
            if token == "as":
                i += 2  # the alias names nothing of the corpus
                break
            if token == "::":
                path = path or ("",)  # a leading ``::`` (Rust 2015): a crate's name follows
            elif token != "*" and not (token == "self" and path and len(path) == len(prefix)):
                path, last = (*path, token.removeprefix("r#")), offset
            i += 1
        if path and path != ("",) and len(out) < _RS_MAX_PATHS:
            out.append((at + last, path))
        return i

    tree(0, (), 0)
    return out


def _rust_module(corpus: Corpus, path: str) -> tuple[str, str, tuple[str, ...]]:
    """A Rust file's crate root file, the folder the root's modules live in, and the file's module path: the
    root is the nearest ``lib.rs`` or ``main.rs`` at or above the file's folder, up to its ``Cargo.toml``; a
    file with neither above it (a test, an example, ``build.rs``) is a crate root itself."""
    folder = posixpath.dirname(path)
    while True:
        root = next((candidate for name in ("lib.rs", "main.rs")
                     if (candidate := posixpath.join(folder, name)) in corpus), None)
        if root is not None:
            break
        if not folder or posixpath.join(folder, "Cargo.toml") in corpus:
            return path, posixpath.dirname(path), ()
        folder = posixpath.dirname(folder)
    if path in (posixpath.join(folder, "lib.rs"), posixpath.join(folder, "main.rs")):
        return path, folder, ()
    parts = (path[len(folder) + 1:] if folder else path).removesuffix(".rs").split("/")
    return root, folder, tuple(parts[:-1] if parts[-1] == "mod" else parts)


def _rust_locate(corpus: Corpus, root: str, folder: str, segments: Sequence[str]) -> str:
    """The file of the longest prefix of module path ``segments`` that is a module file, else the root."""
    for size in range(len(segments), 0, -1):
        base = posixpath.join(folder, *segments[:size])
        for candidate in (base + ".rs", posixpath.join(base, "mod.rs")):
            if candidate in corpus:
                return candidate
    return root


def _rust_use_resolve(path: tuple[str, ...], within: tuple[str, ...], crates: Mapping[str, str]
                      ) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        root, folder, module = _rust_module(corpus, from_path)
        head, rest = path[0], path[1:]
        if head == "crate":
            return _rust_locate(corpus, root, folder, rest)
        if head in ("self", "super"):
            here = (*module, *within)
            while rest and rest[0] == "super":
                here, rest = here[:-1], rest[1:]
            return _rust_locate(corpus, root, folder, (*(here if head == "self" else here[:-1]), *rest))
        if head == "":
            head, rest = rest[0], rest[1:]
        elif not within and (posixpath.join(folder, *module, head + ".rs") in corpus
                             or posixpath.join(folder, *module, head, "mod.rs") in corpus):
            return _rust_locate(corpus, root, folder, (*module, *path))  # a module beside the statement's
        crate = crates.get(_CRATE + head)
        if crate is None:
            return None
        source = posixpath.join(crate, "src")
        root = next((candidate for name in ("lib.rs", "main.rs")
                     if (candidate := posixpath.join(source, name)) in corpus), None)
        return None if root is None else _rust_locate(corpus, root, source, rest)
    return resolve


def _rust_path_attribute(data: bytes, start: int) -> str | None:
    """The file a ``#[path = "..."]`` among the attributes on the lines just above ``start`` names, if any."""
    while start > 0:
        above = data.rfind(b"\n", 0, start - 1) + 1
        line = data[above:start].strip()
        if not line.startswith(b"#["):
            return None
        match = _RS_PATH.match(line)
        if match is not None:
            return match.group(1).decode("utf-8", "replace")
        start = above
    return None


def _rust_resolve(name: str, file: str | None = None) -> Callable[[Corpus, str], str | None]:
    def resolve(corpus: Corpus, from_path: str) -> str | None:
        if file is not None:  # beside the declaring file, whatever module it is
            return _beside(corpus, from_path, file)
        # a crate root's modules lie beside it (an integration test's too), another module's in its own folder
        _root, folder, module = _rust_module(corpus, from_path)
        folder = posixpath.join(folder, *module)
        for candidate in (posixpath.join(folder, name + ".rs"), posixpath.join(folder, name, "mod.rs")):
            if candidate in corpus:
                return candidate
        return None
    return resolve


_FINDERS: dict[str, Callable[[bytes], Found]] = {
    "python": _python, "notebook": _notebook_python, "c": _c, "cpp": _c, "rust": _rust, "php": _php,
    "ruby": _ruby, "dart": _dart,
    **{language: _javascript for language in _JS_LANGUAGES},
    **{language: _jvm for language in ("java", "kotlin", "scala", "groovy")}}


@hookimpl
def xerj_register_detectors(register) -> None:
    register(ImportsDetector())
