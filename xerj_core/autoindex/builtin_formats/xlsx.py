"""Excel workbooks (``.xlsx``, and ``.xlsm``): a card, then each sheet read as the ``table`` format reads a CSV.

A ``.xlsx`` is a zip of XML (Office Open XML): the workbook lists its sheets in
order, each a part of its own, their text cells pointing into one table of
shared strings. Each sheet with cells is a document ``{path}#{anchor}`` of
kind ``sheet`` (labelled by the sheet's name, anchored as a heading is), and
is read as a table (see :mod:`.table`): when one of its columns holds prose,
each row is a document ``{path}#{anchor}-row-{n}`` and the sheet's text is its
column names; else the sheet's text is the table itself. A sheet's first row
is its header when all its cells are text and none is prose; the first 1,000
columns are read. Cells are read as stored: a formula's last value, a number as written (a date as Excel's serial
number). The card is titled by the workbook's title property, else the file
name, and keeps ``author``, ``keywords``, dates and the ``sheets``' names.

A file that is not a zip or names no workbook is refused; what its members
expand to is counted before any is read. Excel's lock file beside an open
workbook (``~$name.xlsx``) is no workbook.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import (Anchors, Package, core_properties, document, is_lock_file,
                                                          package_part)
from xerj_core.autoindex.builtin_formats.table import is_prose, read_table
from xerj_core.autoindex.formats import extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".xlsx", ".xlsm"})
WHAT = "Excel workbook"
_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_COLUMN = re.compile(r"([A-Z]+)")
_TEXT_TYPES = frozenset({"s", "inlineStr", "str"})
# Columns read of a sheet: a table people write in is narrower, and a cell at column XFD (16,384) must not make
# every row a list of sixteen thousand cells.
MAX_COLUMNS = 1_000


def _column(reference: str | None, at: int) -> int:
    """A cell's column index from its reference (``C7``: 2), else ``at``, where the row's cells have reached."""
    match = _COLUMN.match(reference or "")
    if match is None:
        return at
    index = 0
    for letter in match.group(1):
        index = index * 26 + ord(letter) - 64
    return index - 1


def _rows(sheet: Any, strings: list[str]) -> tuple[list[list[str]], bool]:
    """A sheet's rows of cell texts (empty rows left out), and whether its first row is all text."""
    rows, first_all_text = [], True
    for row in sheet.iter(f"{_S}row"):
        cells: dict[int, str] = {}
        all_text = True
        for cell in row.iterfind(f"{_S}c"):
            kind = cell.get("t")
            inline = cell.find(f"{_S}is") if kind == "inlineStr" else None
            if inline is not None:
                value = "".join(inline.itertext())
            else:
                value = cell.findtext(f"{_S}v") or ""
                if kind == "s":
                    value = strings[int(value)] if value.isdecimal() and int(value) < len(strings) else ""
            value = " ".join(value.split()) if kind in _TEXT_TYPES else value.strip()
            if value and kind not in _TEXT_TYPES:
                all_text = False
            column = _column(cell.get("r"), len(cells))
            if value and column < MAX_COLUMNS:
                cells[column] = value
        if cells:
            if not rows:
                first_all_text = all_text
            rows.append([cells.get(k, "") for k in range(max(cells) + 1)])
    return rows, first_all_text


class XlsxFormat:
    """Excel workbooks into ``ax-notes``: a card and each sheet as a table."""

    name = "xlsx"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS and not is_lock_file(rel_path)

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        with Package(data, WHAT) as book:
            read = book.xml
            workbook_path, workbook = book.main_part("xl/workbook.xml")
            folder = posixpath.dirname(workbook_path)
            rels = book.relationships(workbook_path)
            shared = read(package_part(rels, folder, type_suffix="/sharedStrings")
                          or posixpath.join(folder, "sharedStrings.xml"))
            strings = ["".join(item.itertext()) for item in shared.iterfind(f"{_S}si")] if shared is not None else []
            sheets = []
            for sheet in workbook.iter(f"{_S}sheet"):
                part = read(package_part(rels, folder, rid=sheet.get(f"{_R}id")))
                if part is not None:
                    sheets.append((sheet.get("name") or f"sheet {len(sheets) + 1}", *_rows(part, strings)))
            props = core_properties(read("docProps/core.xml"))
        title = props.pop("title", "") or stem(rel_path)
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text="", section="", kind="file",
                         ordinal=0, sheets=[name for name, *_ in sheets] or None, **props)]
        anchors = Anchors("sheet")
        for n, (name, rows, first_all_text) in enumerate(sheets, 1):
            if not rows:
                continue
            has_header = len(rows) > 1 and first_all_text and not any(map(is_prose, rows[0]))
            table = read_table(rows, has_header)
            anchor = anchors(name)
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchor}", title=title,
                                 text=table.text, section=name, kind="sheet", ordinal=n, anchor=anchor,
                                 columns=table.columns, rows=table.rows))
            docs.extend(table.documents(self, rel_path, mtime_ms, f"{rel_path}#{anchor}-row-"))
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(XlsxFormat())
