"""Source code: Rust crates (``Cargo.toml``), Python modules (a section per top-level definition), and a card per
file of the other common languages, scripts and build files.

``Cargo.toml`` becomes one card titled with the package name (a workspace
manifest: ``workspace <dir>``) holding the manifest's text, with
``fields["crate"]`` (package name), ``crate_dir`` (its directory, ``""`` at the
root), ``version``, ``dependencies`` and ``members`` when present; the
``cratecite`` detector links prose to it. A malformed manifest is refused.

A ``.py``/``.pyi`` module gets a card (the lines outside top-level definitions:
docstring, imports, constants; ``fields["imports"]`` lists imported modules)
and one ``section`` per top-level ``def``/``class`` (decorators included),
labelled ``def name``/``class name`` with id ``{path}#{name}``. The outline is
read by a scan that builds no syntax tree (:mod:`.pyoutline`); a module the scan
cannot vouch for is parsed with ``ast``, and one that does not parse as Python is
still indexed, as a card holding all of its text.

Every other source file is one card holding all of its text: a file whose
extension :data:`LANGUAGES` names (``.rs``, ``.c``, ``.go``, ``.ts``, ``.sh``,
``.sql``, ``.yaml``...), a build file :data:`BUILD_FILES` names (``Makefile``,
``Dockerfile``, ``go.mod``), a project file of TypeScript, npm or Composer
(``tsconfig.json``, ``tsconfig.app.json``, ``jsconfig.json``, any ``.json``
whose first kilobyte says ``"compilerOptions"``: language ``tsconfig``;
``package.json``: ``npm``; ``composer.json``: ``composer``), an Obsidian base
(``Books.base``, language ``obsidian-base``), an extensionless
script whose first line is a ``#!`` naming an interpreter :data:`INTERPRETERS`
knows (one naming Python is read as a Python module), or an extensionless file whose first line is an
editor's mode line naming a language :data:`MODES` knows (libstdc++'s headers:
``// <algorithm> -*- C++ -*-``). Every document of a source file carries
``fields["language"]``. A file whose first kilobyte holds a NUL is not source (``.ts`` is also a video
container's extension), and a minified bundle (``app.min.js``) is not what
people write: neither is read. Nor is a generated one with an ordinary name (a
documentation site's ``searchindex.js``, a bundler's ``index-BwOPSdeb.js``):
a file of more than a kilobyte whose lines average more than
:data:`GENERATED_LINE_CHARS` characters is declined once read (skipped as
``generated``), since its vocabulary would tie it to every document.
"""

from __future__ import annotations

import ast
import posixpath
import re
import tomllib

from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.builtin_formats.pyoutline import outline, outline_from_tree
from xerj_core.autoindex.formats import SNIFF_BYTES, FormatDeclined, FormatError, decode_utf8, extension, file_name
from xerj_core import hookimpl
from xerj_core.model import SourceDocument

PYTHON_EXTENSIONS = frozenset({".py", ".pyi"})
# Above this average line length a source file is minified or generated: linguist draws its line there for
# minified JavaScript and CSS, and on this project's real folders (site-packages, /usr/include, /usr/share/doc,
# npm, the Rust docs) every non-Python source file above it is a bundle, a search index or a blob in a literal.
GENERATED_LINE_CHARS = 110
GENERATED = "generated"  # the skip kind of such a file

# Extension -> language, for the files read as one card each. Left out on purpose: ``.m`` (Objective-C or
# MATLAB), ``.json`` and ``.xml`` (mostly data and generated files, such as lock files and exports) and ``.conf``
# (any syntax at all).
LANGUAGES = {
    ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hh": "cpp", ".hpp": "cpp",
    ".hxx": "cpp", ".cs": "csharp", ".go": "go", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".groovy": "groovy", ".gradle": "groovy", ".swift": "swift", ".dart": "dart", ".zig": "zig",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript",
    ".mts": "typescript", ".cts": "typescript", ".tsx": "typescript", ".vue": "vue", ".svelte": "svelte",
    ".astro": "astro",
    ".rb": "ruby", ".php": "php", ".pl": "perl", ".pm": "perl", ".lua": "lua", ".r": "r", ".jl": "julia",
    ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml", ".ex": "elixir", ".exs": "elixir", ".erl": "erlang",
    ".hrl": "erlang", ".awk": "awk", ".perl": "perl", ".clj": "clojure", ".cljs": "clojure", ".nim": "nim",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "shell", ".bats": "shell", ".ps1": "powershell",
    ".psm1": "powershell", ".tcl": "tcl", ".bzl": "starlark", ".sql": "sql",
    ".proto": "protobuf", ".graphql": "graphql", ".tf": "terraform", ".css": "css", ".scss": "css", ".sass": "css",
    ".less": "css", ".cmake": "cmake", ".mk": "make", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml",
    ".ini": "ini", ".cfg": "ini", ".pyx": "cython", ".pxd": "cython", ".pxi": "cython", ".f": "fortran",
    ".for": "fortran", ".f90": "fortran", ".f95": "fortran", ".f03": "fortran", ".f08": "fortran",
}
# TypeScript's and JavaScript's project files (``tsconfig.json``, ``tsconfig.base.json``, ``jsconfig.json``): data,
# but the ``imports`` detector reads their path aliases, and a project's settings are worth finding.
_TS_CONFIG = re.compile(r"(?:ts|js)config(?:\.[\w-]+)*\.json")
_JSON_PROJECT_FILES = {"package.json": "npm", "composer.json": "composer"}
# An Obsidian base (``Books.base``: YAML naming the filters, formulas and views of a table of notes), which notes
# embed as ``![[Books.base]]``: one of its top-level keys opens its first kilobyte.
_BASE_KEY = re.compile(rb"^(?:filters|formulas|properties|summaries|views):", re.M)
# Build and project files known by their whole name.
BUILD_FILES = {
    "Makefile": "make", "makefile": "make", "GNUmakefile": "make", "Dockerfile": "dockerfile",
    "Containerfile": "dockerfile", "CMakeLists.txt": "cmake", "Jenkinsfile": "groovy", "Vagrantfile": "ruby",
    "Rakefile": "ruby", "Gemfile": "ruby", "Justfile": "just", "justfile": "just", "go.mod": "gomod",
    "Makefile.am": "make", "Makefile.in": "make", "meson.build": "meson", "BUILD.bazel": "starlark",
    "MODULE.bazel": "starlark", "WORKSPACE.bazel": "starlark",
}
# A script's interpreter (the ``#!`` line's program, or the one ``env`` runs) -> language.
INTERPRETERS = {
    "sh": "shell", "bash": "shell", "dash": "shell", "zsh": "shell", "ksh": "shell", "fish": "shell",
    "python": "python", "perl": "perl", "ruby": "ruby", "node": "javascript", "deno": "typescript",
    "lua": "lua", "php": "php", "Rscript": "r", "awk": "awk", "gawk": "awk", "tclsh": "tcl", "wish": "tcl",
    "bats": "shell", "pwsh": "powershell",
}
# ``#!/usr/bin/env -S python3 -u``, ``#! /bin/sh``, ``#!/usr/bin/python3.11``: the program's name, version cut off.
_SHEBANG = re.compile(rb"#![ \t]*(?:\S*/)?(?:env[ \t]+(?:-\S+[ \t]+)*)?([A-Za-z]+)")
# An editor's mode line, which extensionless sources use to say what they are (libstdc++'s ``<algorithm>`` opens
# with ``// <algorithm> -*- C++ -*-``; ``-*- mode: python; coding: utf-8 -*-``), and the modes it may name.
_MODE_LINE = re.compile(rb"-\*-[ \t]*(?:mode:[ \t]*)?([\w+-]+)[ \t]*(?:;[^\n]*?)?-\*-")
MODES = {
    "c++": "cpp", "c": "c", "python": "python", "perl": "perl", "cperl": "perl", "ruby": "ruby", "sh": "shell",
    "shell-script": "shell", "bash": "shell", "makefile": "make", "makefile-gmake": "make", "js": "javascript",
    "javascript": "javascript", "lua": "lua", "tcl": "tcl", "awk": "awk",
}


class CodeFormat:
    """Source files into ``ax-code``."""

    name = "code"
    dataset = "ax-code"
    priority = 10
    # 2: the other languages, scripts and build files; ``language`` on every document. 3: generated files declined.
    # 4: bats, PowerShell modules, Tcl, Starlark; automake, meson and Bazel build files.
    # 5: TypeScript's configs, package.json, composer.json, Obsidian's bases and Astro's components
    version = 5

    def accepts(self, rel_path: str, head: bytes) -> bool:
        name = file_name(rel_path)
        if name == "Cargo.toml" or extension(rel_path) in PYTHON_EXTENSIONS:
            return True
        return language_of(rel_path, head) is not None and b"\0" not in head

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        text = decode_utf8(data, rel_path)
        if file_name(rel_path) == "Cargo.toml":
            return [self._cargo(rel_path, text, mtime_ms)]
        language = "python" if extension(rel_path) in PYTHON_EXTENSIONS else language_of(rel_path, data[:SNIFF_BYTES])
        if language == "python":
            return self._python(rel_path, text, mtime_ms)
        _decline_generated(text)
        return [self._card(rel_path, text.strip(), mtime_ms, title=file_name(rel_path), language=language)]

    def _card(self, rel_path: str, text: str, mtime_ms: int, *, title: str, **fields) -> SourceDocument:
        return document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text=text, section="",
                        kind="file", ordinal=0, **fields)

    def _cargo(self, rel_path: str, text: str, mtime_ms: int) -> SourceDocument:
        try:
            manifest = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise FormatError(f"malformed Cargo.toml: {exc}") from None
        crate_dir = posixpath.dirname(rel_path)
        package = manifest.get("package")
        package = package if isinstance(package, dict) else {}
        crate = package.get("name") if isinstance(package.get("name"), str) else None
        version = package.get("version") if isinstance(package.get("version"), str) else None
        deps: set[str] = set()
        for key in ("dependencies", "dev-dependencies", "build-dependencies"):
            table = manifest.get(key)
            if isinstance(table, dict):
                deps.update(str(name) for name in table)
        workspace = manifest.get("workspace")
        members = workspace.get("members") if isinstance(workspace, dict) else None
        members = [str(m) for m in members] if isinstance(members, list) else None
        title = crate or f"workspace {posixpath.basename(crate_dir) or '.'}"
        return self._card(rel_path, text.strip(), mtime_ms, title=title, crate=crate, crate_dir=crate_dir,
                          version=version, dependencies=sorted(deps) or None, members=members)

    def _python(self, rel_path: str, text: str, mtime_ms: int) -> list[SourceDocument]:
        found = outline(text)
        if found is None:  # outside what the scan vouches for: the parser decides
            try:
                found = outline_from_tree(ast.parse(text))
            except (SyntaxError, ValueError):
                return [self._card(rel_path, text.strip(), mtime_ms, title=file_name(rel_path), language="python")]
        lines = text.split("\n")
        # the card holds the lines outside every definition (definitions come in order and never overlap)
        outside: list[str] = []
        done = 0
        for definition in found.definitions:
            outside.extend(lines[done:definition.start])
            done = max(done, definition.end)
        outside.extend(lines[done:])
        docs = [self._card(rel_path, "\n".join(outside).strip(), mtime_ms, title=file_name(rel_path),
                           language="python", imports=list(found.imports) or None)]
        anchors = Anchors("definition")
        for ordinal, (start, end, keyword, symbol) in enumerate(found.definitions, start=1):
            docs.append(
                document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchors(symbol)}", title=file_name(rel_path),
                         text="\n".join(lines[start:end]).strip(), section=f"{keyword} {symbol}", kind="section",
                         ordinal=ordinal, language="python", symbol=symbol, line=start + 1)
            )
        return docs


def _decline_generated(text: str) -> None:
    """Raise :class:`FormatDeclined` when ``text`` is a minified or generated file: more than a kilobyte whose lines
    average more than :data:`GENERATED_LINE_CHARS` characters (characters, not bytes, so CJK comments count as
    people read them)."""
    if len(text) <= SNIFF_BYTES:
        return
    average = len(text) / (text.count("\n") + 1)
    if average > GENERATED_LINE_CHARS:
        raise FormatDeclined(f"minified or generated: its lines average {average:,.0f} characters (code people "
                             f"write stays under {GENERATED_LINE_CHARS})", kind=GENERATED)


def language_of(rel_path: str, head: bytes) -> str | None:
    """The language of a source file known by its name or its ``#!`` line (see the module doc), from its name and
    its first bytes; None for any other (``Cargo.toml`` and ``.py`` files are known by their own rules). A script
    whose ``#!`` names Python is ``"python"``, and the format reads it as a module."""
    name = file_name(rel_path)
    ext = extension(rel_path)
    if ext:
        if ".min." in name.lower():
            return None
        if ext == ".json":  # a project's own files only (see the module doc)
            if name in _JSON_PROJECT_FILES:
                return _JSON_PROJECT_FILES[name]
            # a shared base config has any name (create-t3-turbo's tooling/typescript/base.json)
            return "tsconfig" if _TS_CONFIG.fullmatch(name) or b'"compilerOptions"' in head else None
        if ext == ".base":
            return "obsidian-base" if _BASE_KEY.search(head) else None
        found = LANGUAGES.get(ext)
        return found if found is not None else BUILD_FILES.get(name)
    found = BUILD_FILES.get(name)
    if found is not None:
        return found
    if head.startswith(b"#!"):
        match = _SHEBANG.match(head)
        return INTERPRETERS.get(match.group(1).decode()) if match else None
    match = _MODE_LINE.search(head, 0, head.find(b"\n") if b"\n" in head else len(head))
    return MODES.get(match.group(1).decode().lower()) if match else None


@hookimpl
def xerj_register_formats(register) -> None:
    register(CodeFormat())
