"""Jupyter notebooks (``.ipynb``): read as the Markdown note their cells make, each code cell a fenced block.

A notebook is JSON; what people write in it is its cells' sources. Markdown
cells are taken as they are, code cells inside a fence tagged with the kernel's
language (a fence longer than any run of backticks the cell holds), raw cells as
plain text; their outputs (images, tables, tracebacks, often most of the file's
bytes) are not read. The note they make is parsed as :mod:`.markdown` parses a
note: a card titled with the first level-1 heading (else the file name) holding
what precedes the first heading, and a section per heading, so a notebook's
``## Results`` is ``analysis.ipynb#results``. Every document carries the
kernel's ``language`` (``metadata.kernelspec.language``, else
``metadata.language_info.name``) and the card the number of ``cells``.

nbformat 4 (``cells``) and 3 (``worksheets`` of cells, a code cell's source in
``input``, heading cells with a ``level``) are read. A file that is not a JSON
object with a list of cells is refused with a reason.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import orjson

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats.markdown import MarkdownFormat
from xerj_core.autoindex.formats import FormatError, extension
from xerj_core.model import SourceDocument

_BACKTICKS = re.compile(r"`{3,}")
_LANGUAGE_TAG = re.compile(r"[\w+#.-]+")


class NotebookFormat:
    """Jupyter notebooks into ``ax-notes``: a card and one section per heading of their Markdown cells."""

    name = "notebook"
    dataset = "ax-notes"
    priority = 10

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == ".ipynb"

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        try:
            notebook = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise FormatError(f"malformed notebook: not JSON ({exc})") from None
        if not isinstance(notebook, dict):
            raise FormatError("malformed notebook: not a JSON object")
        cells = _cells(notebook)
        metadata = notebook.get("metadata")
        language = _language(metadata if isinstance(metadata, dict) else {})
        note = "\n\n".join(filter(None, (_as_markdown(cell, language) for cell in cells)))
        docs = MarkdownFormat().parse(rel_path, note.encode("utf-8"), mtime_ms)
        name, dataset = self.name, self.dataset
        out = []
        for doc in docs:
            fields = {**doc.fields, "language": language} if language else dict(doc.fields)
            if doc.kind == "file":
                fields["cells"] = len(cells)
            out.append(attrs.evolve(doc, format=name, dataset=dataset, fields=fields))
        return out


def _cells(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    cells = notebook.get("cells")
    if cells is None and isinstance(notebook.get("worksheets"), list):  # nbformat 3
        cells = [cell for sheet in notebook["worksheets"] if isinstance(sheet, dict)
                 for cell in (sheet.get("cells") if isinstance(sheet.get("cells"), list) else [])]
    if not isinstance(cells, list):
        raise FormatError("malformed notebook: no list of cells")
    return [cell for cell in cells if isinstance(cell, dict)]


def _language(metadata: dict[str, Any]) -> str | None:
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        value = section.get(field) if isinstance(section, dict) else None
        if isinstance(value, str) and _LANGUAGE_TAG.fullmatch(value.strip().lower()):
            return value.strip().lower()
    return None


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", cell.get("input"))  # nbformat 3 keeps a code cell's source in ``input``
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def _as_markdown(cell: dict[str, Any], language: str | None) -> str:
    """The cell as a piece of the note (empty for an empty cell or an unknown kind)."""
    source = _source(cell).strip("\n")
    if not source.strip():
        return ""
    kind = cell.get("cell_type")
    if kind == "markdown" or kind == "raw":
        return source
    if kind == "heading":  # nbformat 3
        level = cell.get("level")
        level = level if isinstance(level, int) and 1 <= level <= 6 else 1
        return f"{'#' * level} {' '.join(source.split())}"
    if kind == "code":
        fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(source)), default=0) + 1)
        return f"{fence}{language or ''}\n{source}\n{fence}"
    return ""


@hookimpl
def xerj_register_formats(register) -> None:
    register(NotebookFormat())
