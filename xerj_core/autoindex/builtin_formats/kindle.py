"""Kindle's ``My Clippings.txt``: the highlights and notes made on a Kindle, gathered into one document per book.

A Kindle appends every highlight, note and bookmark to one text file, in the
order they were made, each entry ``Title (Author)``, a line of what and where
(``- Your Highlight on page 3 | Location 145-147 | Added on ...``, in the
Kindle's language), a blank line, the text, then a line of ``=`` signs. Read as
plain text, a reader's highlights of forty books were one card mixing them all.

The file's card (kind ``file``) counts ``books``, ``highlights`` and ``notes``
(bookmarks hold no text and are counted as ``bookmarks``). Each book is a
document ``{path}#book-{n}`` (``n`` from 1 in the order the file first names
them) of kind ``book``, titled by the book's title, whose text is its
highlights and notes in reading order (by location, else page), one paragraph
each, a note's opening ``Note:``; fields ``author`` (the entry's last
parenthesised part), ``highlights``, ``notes`` and ``added_first`` /
``added_last`` (as the Kindle wrote them). A Kindle writes a highlight again
when it is extended or made twice: a highlight another of the book holds
whole, from the same location on, is left out.

Accepted: a file named ``My Clippings.txt`` (any case), and a ``.txt`` file
that opens as one does (an entry's title, its metadata line with a ``|``, and
a line of ten ``=`` signs).
"""

from __future__ import annotations

import re
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.formats import decode_text, extension, file_name, stem
from xerj_core.model import SourceDocument

SEPARATOR = re.compile(r"^={10}\s*$", re.M)
# An entry's head as the file's first bytes show it: title, the metadata line, its blank line.
_HEAD = re.compile(rb"\A(?:\xef\xbb\xbf)?[^\r\n=][^\r\n]*\r?\n- [^\r\n]*\|[^\r\n]*\r?\n\r?\n")
# What an entry is, by the words Kindles write in their languages (a bookmark's metadata, a note's, else a highlight).
_BOOKMARK = re.compile(r"bookmark|lesezeichen|signet|marcador|segnalibro|bladwijzer|закладка|书签|書籤|ブックマーク", re.I)
_NOTE = re.compile(r"\bnote\b|notiz|\bnota\b|notitie|заметка|笔记|筆記|メモ", re.I)
# Where it is: a location (or Kindle's older "Loc."), else a page.
_LOCATION = re.compile(r"(?:location|loc\.|position|posición|posizione|emplacement|positie|posição|место|位置|"
                       r"位置No\.)\s*#?\s*(\d+)", re.I)
_PAGE = re.compile(r"(?:page|seite|página|pagina|страница|第)\s*(\d+)", re.I)
_ADDED = re.compile(r"\|\s*(?:added on|hinzugefügt am|ajouté le|añadido el|aggiunto il|toegevoegd op|"
                    r"adicionado em|добавлено|添加于|追加日)\s*(.+?)\s*$", re.I)
_AUTHOR = re.compile(r"\s*\(([^()]*)\)\s*$")


def _entries(text: str) -> list[tuple[str, str, str]]:
    """Each entry's ``(title line, metadata line, text)``, in file order."""
    found = []
    for chunk in SEPARATOR.split(text):
        lines = chunk.strip("\r\n\ufeff ").split("\n")
        if len(lines) < 2 or not lines[1].lstrip("\ufeff").startswith("- "):
            continue
        body = "\n".join(line.rstrip("\r") for line in lines[2:]).strip()
        found.append((lines[0].strip("\ufeff \r"), lines[1].strip("\ufeff \r")[2:], body))
    return found


class KindleFormat:
    """A Kindle's ``My Clippings.txt`` into ``ax-notes``: a card and one document per book."""

    name = "kindle"
    dataset = "ax-notes"
    priority = 10  # over plain text, which reads every .txt
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        if file_name(rel_path).lower() == "my clippings.txt":
            return True
        return extension(rel_path) == ".txt" and _HEAD.match(head) is not None and b"\n==========" in head

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        books: dict[str, dict[str, Any]] = {}
        bookmarks = 0
        for order, (title_line, meta, body) in enumerate(_entries(decode_text(data, rel_path).text)):
            if _BOOKMARK.search(meta) or not body:
                bookmarks += 1
                continue
            author = _AUTHOR.search(title_line)
            title = title_line[:author.start()].strip() if author else title_line
            book = books.setdefault(title_line, {"title": title or title_line, "author": author.group(1).strip()
                                                 if author else None, "entries": []})
            location, page = _LOCATION.search(meta), _PAGE.search(meta)
            where = (int(location.group(1)) if location else -1, int(page.group(1)) if page else -1, order)
            added = _ADDED.search(meta)
            book["entries"].append((where, bool(_NOTE.search(meta)), body, added.group(1) if added else None))
        docs = []
        highlights = notes = 0
        for n, book in enumerate(books.values(), start=1):
            kept = self._distinct(book["entries"])
            marked = sum(1 for _where, is_note, _body, _added in kept if not is_note)
            highlights, notes = highlights + marked, notes + len(kept) - marked
            added = [entry[3] for entry in sorted(book["entries"], key=lambda entry: entry[0][2]) if entry[3]]
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#book-{n}", title=book["title"],
                                 text="\n\n".join(f"Note: {body}" if is_note else body
                                                  for _where, is_note, body, _added in kept),
                                 section=book["title"], kind="book", ordinal=n, author=book["author"],
                                 highlights=marked, notes=len(kept) - marked,
                                 added_first=added[0] if added else None, added_last=added[-1] if added else None))
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=stem(rel_path) or rel_path, text="",
                        section="", kind="file", books=len(docs), highlights=highlights, notes=notes,
                        bookmarks=bookmarks)
        return [card, *docs]

    @staticmethod
    def _distinct(entries: list[tuple]) -> list[tuple]:
        """A book's entries in reading order, without a highlight another holds whole from the same place on."""
        ordered = sorted(entries, key=lambda entry: entry[0])
        kept = []
        for at, entry in enumerate(ordered):
            where, is_note, body, _added = entry
            if not is_note and any(other is not entry and not other[1] and other[0][:2] == where[:2]
                                   and body in other[2] and (len(other[2]) > len(body) or other[0][2] > where[2])
                                   for other in ordered[max(0, at - 50):at + 50]):
                continue
            kept.append(entry)
        return kept


@hookimpl
def xerj_register_formats(register) -> None:
    register(KindleFormat())
