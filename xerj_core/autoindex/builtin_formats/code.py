"""Source code: Rust crates (``Cargo.toml``), Python modules (a section per top-level definition), Rust files.

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
``.rs`` files are one card each.
"""

from __future__ import annotations

import ast
import posixpath
import tomllib

from xerj_core.autoindex.builtin_formats._common import Anchors, document
from xerj_core.autoindex.builtin_formats.pyoutline import outline, outline_from_tree
from xerj_core.autoindex.formats import FormatError, decode_utf8, extension, file_name
from xerj_core import hookimpl
from xerj_core.model import SourceDocument

PYTHON_EXTENSIONS = frozenset({".py", ".pyi"})
OTHER_EXTENSIONS = frozenset({".rs"})


class CodeFormat:
    """Source files into ``ax-code``."""

    name = "code"
    dataset = "ax-code"
    priority = 10

    def accepts(self, rel_path: str, head: bytes) -> bool:
        ext = extension(rel_path)
        return file_name(rel_path) == "Cargo.toml" or ext in PYTHON_EXTENSIONS or ext in OTHER_EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        text = decode_utf8(data, rel_path)
        if file_name(rel_path) == "Cargo.toml":
            return [self._cargo(rel_path, text, mtime_ms)]
        if extension(rel_path) in PYTHON_EXTENSIONS:
            return self._python(rel_path, text, mtime_ms)
        return [self._card(rel_path, text.strip(), mtime_ms, title=file_name(rel_path))]

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
                return [self._card(rel_path, text.strip(), mtime_ms, title=file_name(rel_path))]
        lines = text.split("\n")
        # the card holds the lines outside every definition (definitions come in order and never overlap)
        outside: list[str] = []
        done = 0
        for definition in found.definitions:
            outside.extend(lines[done:definition.start])
            done = max(done, definition.end)
        outside.extend(lines[done:])
        docs = [self._card(rel_path, "\n".join(outside).strip(), mtime_ms, title=file_name(rel_path),
                           imports=list(found.imports) or None)]
        anchors = Anchors("definition")
        for ordinal, (start, end, keyword, symbol) in enumerate(found.definitions, start=1):
            docs.append(
                document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchors(symbol)}", title=file_name(rel_path),
                         text="\n".join(lines[start:end]).strip(), section=f"{keyword} {symbol}", kind="section",
                         ordinal=ordinal, symbol=symbol, line=start + 1)
            )
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(CodeFormat())
