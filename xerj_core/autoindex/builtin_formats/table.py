"""Tables (``.csv``, ``.tsv``): a row a document when the table holds prose, else one card holding the table.

What people export as tables is often a list of things they wrote about: a
Goodreads library (a book a row, with the reader's review), a Notion database,
highlights from a reading service. Such a table (one of whose columns holds
prose: a fifth or more of its cells three words or longer) is a card (kind
``file``, titled by the file name, its text the column names, its fields
``columns`` and ``rows``) and one document per row, ``{path}#row-{n}`` (``n``
from 1 after the header) of kind ``row``: its text a line per filled cell,
``Column: value``, its label the row's title (the cell of a column named
``title``, ``name``, ``subject`` or ``book``, else of its first prose column),
else ``row n``. A table of figures, codes or single words is data, not notes:
the card alone, its text the table (a row a line, cells apart).

The dialect (comma, semicolon, tab or bar; quoting) is sniffed from the first
rows (a ``.tsv`` is tab-separated), and so is whether the first row is a
header: one that is not is read as a row, the columns named ``column 1`` on.
A file that is not text, or that the ``csv`` module cannot read (a field
past 4 MiB), is refused with its reason.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import attrs

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.formats import FormatError, decode_text, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".csv", ".tsv"})
_TITLE_COLUMNS = ("title", "name", "subject", "book", "book title")
# A prose cell: three words or more, one of them a word of letters (not a list of figures or dates)
_WORD = re.compile(r"[^\W\d_]{2,}")
PROSE_SHARE = 0.2
_SAMPLE = 64 * 1024
# The csv module refuses a field past 128 KiB, a limit it keeps for the whole process: raised once here (a long
# review or note fits in 4 MiB), never lowered, so no other reader of CSV in the process is refused what it read.
_FIELD_LIMIT = 4 << 20
if csv.field_size_limit() < _FIELD_LIMIT:
    csv.field_size_limit(_FIELD_LIMIT)


def is_prose(cell: str) -> bool:
    """Whether a cell holds prose: three words or more, one of them of letters."""
    return len(cell.split()) >= 3 and _WORD.search(cell) is not None


class TableFormat:
    """CSV and TSV tables into ``ax-notes``: a card, and a document per row when the table holds prose."""

    name = "table"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        text = decode_text(data, rel_path).text
        sample = text[:_SAMPLE]
        try:
            dialect: type[csv.Dialect] | csv.Dialect = csv.excel_tab if extension(rel_path) == ".tsv" else \
                csv.Sniffer().sniff(sample, delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
        try:
            rows = [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text), dialect)]
        except csv.Error as exc:
            raise FormatError(f"malformed table: {exc}") from None
        rows = [row for row in rows if any(row)]
        try:
            has_header = len(rows) > 1 and csv.Sniffer().has_header(sample)
        except csv.Error:
            has_header = False
        read = read_table(rows, has_header)
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=stem(rel_path) or rel_path, text=read.text,
                        section="", kind="file", ordinal=0, columns=read.columns or None, rows=read.rows)
        return [card, *read.documents(self, rel_path, mtime_ms, f"{rel_path}#row-")]


@attrs.frozen
class Table:
    """A table as read: its ``columns`` (named ``column n`` where it has no header), its number of ``rows`` (the
    header aside), the ``text`` its card holds (the column names, or the whole table when it holds no prose), and
    each row's ``(label, text)`` when it holds prose (else none)."""

    columns: list[str]
    rows: int
    text: str
    lines: list[tuple[str, str]]

    def documents(self, fmt: Any, rel_path: str, mtime_ms: int, prefix: str) -> list[SourceDocument]:
        """A document of kind ``row`` per row, ``{prefix}{n}`` (``n`` from 1)."""
        return [document(fmt, rel_path, mtime_ms, doc_id=f"{prefix}{n}", title=label, text=text, section=label,
                         kind="row", ordinal=n) for n, (label, text) in enumerate(self.lines, 1)]


def read_table(rows: list[list[str]], has_header: bool) -> Table:
    """``rows`` (cells stripped, empty rows left out) read as a table whose first row is its header or not."""
    width = max((len(row) for row in rows), default=0)
    header = rows[0] if has_header else []
    columns = [header[k] if k < len(header) and header[k] else f"column {k + 1}" for k in range(width)]
    body = rows[1:] if has_header else rows
    prose = [k for k in range(width) if _prose_column(body, k)]
    if not prose:
        return Table(columns, len(body), "\n".join(" | ".join(row) for row in rows), [])
    titled = next((k for k, column in enumerate(columns) if column.strip().lower() in _TITLE_COLUMNS), prose[0])
    lines = []
    for n, row in enumerate(body, 1):
        label = row[titled] if titled < len(row) and row[titled] else f"row {n}"
        lines.append((label, "\n".join(f"{columns[k]}: {cell}" if has_header else cell
                                       for k, cell in enumerate(row) if cell)))
    return Table(columns, len(body), ", ".join(columns), lines)


def _prose_column(rows: list[list[str]], k: int) -> bool:
    cells = [row[k] for row in rows if k < len(row) and row[k]]
    return bool(cells) and sum(map(is_prose, cells)) >= PROSE_SHARE * len(cells)


@hookimpl
def xerj_register_formats(register) -> None:
    register(TableFormat())
