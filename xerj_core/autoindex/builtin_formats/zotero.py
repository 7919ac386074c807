"""A Zotero library (``zotero.sqlite``, in the Zotero data folder beside ``storage/``): a document per reference,
per note and per annotated file.

Zotero keeps its library in SQLite. The file's bytes are opened in memory
(``sqlite3``'s ``deserialize``: nothing is written, the database Zotero has
open is not touched) and read as Zotero's schema lays it out: items and their
fields, creators, tags, collections, notes, attachments and the annotations of
its PDF reader. Items in the trash and feed items are left out.

- Each reference (any item not an attachment, note or annotation) is a
  document ``zotero.sqlite#<item key>`` of the ``ax-refs`` dataset, kind
  ``entry``, titled by its title, whose text is what a reference list shows
  (title, names, kind and year, where it appeared), then its abstract, tags and
  collections. It keeps ``zotero_key``, ``entry_type``, ``authors``, ``editors``,
  ``year``, ``venue``, ``doi``, ``url``, ``keywords`` (its tags), ``collections``
  (as paths, ``Thesis/Chapter 2``), ``group`` (the group library's name, for
  an item of a shared group), ``citekey`` when it has one (Zotero 7's
  citation key field, else Better BibTeX's ``Citation Key:`` line in Extra),
  and ``files``: where its attachments are, ``storage/<key>/<name>`` beside
  the library for a stored file, the path as Zotero has it for a linked one;
- each note is a document ``#<note key>`` of ``ax-notes`` (kind ``note``), its
  HTML as text, with ``parent`` the id of the reference it belongs to;
- the annotations of each attached file (highlights, underlines, notes, each
  with its page and comment, in reading order) are one document
  ``#<attachment key>-annotations`` (kind ``annotations``), with ``parent`` and
  ``file``.

The ``zotero`` detector links a reference to its files, notes and annotations.
"""

from __future__ import annotations

import posixpath
import re
import sqlite3
from collections import defaultdict
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.builtin_formats.bibtex import DATASET
from xerj_core.autoindex.builtin_formats.html import html_to_text
from xerj_core.autoindex.formats import FormatError
from xerj_core.model import SourceDocument

NAMES = frozenset({"zotero.sqlite"})
_SQLITE = b"SQLite format 3\x00"
NOTES_DATASET = "ax-notes"
# where a reference appeared, by the field its kind says it in
_VENUES = ("publicationTitle", "bookTitle", "proceedingsTitle", "conferenceName", "university", "publisher",
           "institution", "websiteTitle", "blogTitle", "forumTitle", "repository", "programTitle")
_NOT_REFERENCES = ("attachment", "note", "annotation")
_CITATION_KEY = re.compile(r"^\s*Citation Key:\s*(\S+)\s*$", re.M | re.I)


def _rows(db: sqlite3.Connection, sql: str) -> list[tuple]:
    """The rows ``sql`` reads; none when this database lacks a table it names (an older Zotero's)."""
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) or "no such column" in str(exc):
            return []
        raise


class Library:
    """What one ``zotero.sqlite`` holds, read into plain maps (items by id)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        if not _rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'itemDataValues'"):
            raise FormatError("not a Zotero library: it has no itemDataValues table")
        gone = {row[0] for row in _rows(db, "SELECT itemID FROM deletedItems")}
        feeds = {row[0] for row in _rows(db, "SELECT libraryID FROM libraries WHERE type = 'feed'")}
        # a group library's items are told apart by the group's name (the user's own library has none)
        groups = dict(_rows(db, "SELECT libraryID, name FROM groups"))
        self.items: dict[int, tuple[str, str]] = {}
        self.group: dict[int, str] = {}
        for item_id, key, kind, library in _rows(db, "SELECT i.itemID, i.key, t.typeName, i.libraryID FROM items i "
                                                     "JOIN itemTypes t USING (itemTypeID) ORDER BY i.itemID"):
            if item_id in gone or library in feeds:
                continue
            self.items[item_id] = (key, kind)
            if library in groups:
                self.group[item_id] = groups[library]
        self.fields: dict[int, dict[str, str]] = defaultdict(dict)
        for item_id, name, value in _rows(db, "SELECT d.itemID, f.fieldName, v.value FROM itemData d "
                                              "JOIN fields f USING (fieldID) JOIN itemDataValues v USING (valueID)"):
            self.fields[item_id][name] = str(value)
        self.creators: dict[int, list[tuple[str, str]]] = defaultdict(list)
        for item_id, first, last, role in _rows(
                db, "SELECT ic.itemID, c.firstName, c.lastName, ct.creatorType FROM itemCreators ic "
                    "JOIN creators c USING (creatorID) JOIN creatorTypes ct USING (creatorTypeID) "
                    "ORDER BY ic.itemID, ic.orderIndex"):
            self.creators[item_id].append((role, " ".join(part for part in (first, last) if part)))
        self.tags: dict[int, list[str]] = defaultdict(list)
        for item_id, name in _rows(db, "SELECT it.itemID, t.name FROM itemTags it JOIN tags t USING (tagID) "
                                       "ORDER BY it.itemID, t.name"):
            self.tags[item_id].append(name)
        collections = {cid: (name, parent) for cid, name, parent in _rows(
            db, "SELECT collectionID, collectionName, parentCollectionID FROM collections")}
        self.collections: dict[int, list[str]] = defaultdict(list)
        for cid, item_id in _rows(db, "SELECT collectionID, itemID FROM collectionItems"):
            self.collections[item_id].append(_collection_path(collections, cid))
        self.collection_count = len(collections)
        self.notes = [row for row in _rows(db, "SELECT itemID, parentItemID, note, title FROM itemNotes "
                                                "ORDER BY itemID") if row[0] in self.items]
        self.attachments = [row for row in _rows(db, "SELECT itemID, parentItemID, linkMode, path "
                                                      "FROM itemAttachments ORDER BY itemID") if row[0] in self.items]
        self.annotations = [row for row in _rows(
            db, "SELECT itemID, parentItemID, type, text, comment, pageLabel FROM itemAnnotations "
                "ORDER BY parentItemID, sortIndex, itemID") if row[0] in self.items]


def _collection_path(collections: dict[int, tuple[str, int | None]], cid: int) -> str:
    """A collection's name after its parents' (``Thesis/Chapter 2``); a loop in the parents ends it."""
    names, seen = [], set()
    while cid in collections and cid not in seen:
        seen.add(cid)
        name, cid = collections[cid]
        names.append(str(name))
    return "/".join(reversed(names))


# Zotero's annotation types (itemAnnotations.type)
_ANNOTATION_KINDS = {1: "highlight", 2: "note", 3: "image", 4: "ink", 5: "underline", 6: "text"}


class ZoteroFormat:
    """A Zotero library into ``ax-refs`` (references) and ``ax-notes`` (notes, annotations)."""

    name = "zotero"
    dataset = DATASET
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return posixpath.basename(rel_path) in NAMES and head.startswith(_SQLITE)

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        if not data.startswith(_SQLITE):
            raise FormatError("not a Zotero library: not an SQLite database")
        if data[18:20] == b"\x02\x02":
            # a database in WAL mode: its image opens in memory only as a rollback-journal one (what the -wal file
            # beside it holds and has not checkpointed yet is not read)
            data = data[:18] + b"\x01\x01" + data[20:]
        db = sqlite3.connect(":memory:")
        try:
            db.deserialize(data)
            db.execute("PRAGMA query_only = ON")
            library = Library(db)
        except sqlite3.DatabaseError as exc:
            raise FormatError(f"malformed Zotero library: {exc}") from None
        finally:
            db.close()
        return _documents(self, rel_path, mtime_ms, library)


def _documents(fmt: ZoteroFormat, rel_path: str, mtime_ms: int, library: Library) -> list[SourceDocument]:
    folder = posixpath.dirname(rel_path)
    ids = {item_id: f"{rel_path}#{key}" for item_id, (key, _kind) in library.items.items()}
    files: dict[int, list[str]] = defaultdict(list)  # a reference's attachments' paths
    where: dict[int, str] = {}  # an attachment's path
    owner: dict[int, int] = {}  # an attachment's reference
    for item_id, parent, _mode, path in library.attachments:
        if parent is not None:
            owner[item_id] = parent
        located = _located(folder, library.items[item_id][0], path)
        if located:
            where[item_id] = located
            if parent in ids:
                files[parent].append(located)
    references = [item_id for item_id, (_key, kind) in library.items.items() if kind not in _NOT_REFERENCES]
    docs = [document(fmt, rel_path, mtime_ms, doc_id=rel_path, title="Zotero library", text="", section="",
                     kind="file", ordinal=0, items=len(references), notes=len(library.notes),
                     collection_count=library.collection_count)]
    for item_id in references:
        docs.append(_reference(fmt, rel_path, mtime_ms, library, item_id, ids[item_id], files.get(item_id), len(docs)))
    for item_id, parent, note, title in library.notes:
        text = html_to_text(note or "").strip()
        label = (title or "").strip() or (text.splitlines()[0][:200] if text else "note")
        docs.append(document(fmt, rel_path, mtime_ms, doc_id=ids[item_id], title=label, text=text, section=label,
                             kind="note", dataset=NOTES_DATASET, ordinal=len(docs),
                             zotero_key=library.items[item_id][0], parent=ids.get(parent)))
    by_file: dict[int, list[tuple]] = defaultdict(list)
    for row in library.annotations:
        by_file[row[1]].append(row)
    for attachment, rows in by_file.items():
        if attachment not in library.items:
            continue
        parent = owner.get(attachment)
        about = library.fields.get(parent, {}).get("title") or library.fields.get(attachment, {}).get("title") or ""
        lines = []
        for _id, _parent, kind, text, comment, page in rows:
            said = " ".join(filter(None, (f"p. {page}:" if page else "", f"“{text.strip()}”" if text else "")))
            lines.append(" ".join(filter(None, (said, (comment or "").strip()))) or _ANNOTATION_KINDS.get(kind, ""))
        label = f"Annotations of {about}".strip() if about else "Annotations"
        docs.append(document(fmt, rel_path, mtime_ms, doc_id=f"{rel_path}#{library.items[attachment][0]}-annotations",
                             title=label, text="\n".join(line for line in lines if line), section=label,
                             kind="annotations", dataset=NOTES_DATASET, ordinal=len(docs), annotations=len(rows),
                             parent=ids.get(parent), file=where.get(attachment)))
    return docs


def _located(folder: str, key: str, path: Any) -> str | None:
    """Where an attachment is: ``storage/<key>/<name>`` beside the library for a file Zotero stores, the path as
    Zotero keeps it for a linked one (``attachments:`` relative to a base folder: the path after it)."""
    if not isinstance(path, str) or not path:
        return None
    if path.startswith("storage:"):
        return posixpath.join(folder, "storage", key, path[len("storage:"):])
    if path.startswith("attachments:"):
        return path[len("attachments:"):]
    return path


def _reference(fmt: ZoteroFormat, rel_path: str, mtime_ms: int, library: Library, item_id: int, doc_id: str,
               files: list[str] | None, ordinal: int) -> SourceDocument:
    key, kind = library.items[item_id]
    fields = library.fields.get(item_id, {})
    title = fields.get("title", "").strip() or key
    people = library.creators.get(item_id, [])
    authors = [name for role, name in people if role not in ("editor", "seriesEditor")]
    editors = [name for role, name in people if role in ("editor", "seriesEditor")]
    # Zotero writes a date as its parsed form then as typed ("2024-05-12 May 12, 2024"; "2024-00-00 2024")
    year = fields.get("date", "")[:4] if fields.get("date", "")[:4].isdigit() else ""
    venue = next((fields[name].strip() for name in _VENUES if fields.get(name, "").strip()), "")
    tags, collections = library.tags.get(item_id, []), sorted(library.collections.get(item_id, []))
    cited = _CITATION_KEY.search(fields.get("extra", ""))
    citekey = fields.get("citationKey", "").strip() or (cited.group(1) if cited else "")
    lines = [title, "; ".join(authors or editors), " ".join(filter(None, (kind, year))), venue,
             fields.get("abstractNote", "").strip(), ", ".join(tags), ", ".join(collections)]
    return document(fmt, rel_path, mtime_ms, doc_id=doc_id, title=title, text="\n".join(line for line in lines if line),
                    section=title, kind="entry", ordinal=ordinal, zotero_key=key, entry_type=kind,
                    authors=authors or None, editors=editors or None, year=year or None, venue=venue or None,
                    doi=fields.get("DOI") or None, url=fields.get("url") or None, keywords=tags or None,
                    collections=collections or None, citekey=citekey or None, files=files or None,
                    group=library.group.get(item_id))


@hookimpl
def xerj_register_formats(register) -> None:
    register(ZoteroFormat())
