"""Bear backups (``.bear2bk``): a card per backup, each note in it read as a Markdown note of its own.

Bear's "Backup Notes" writes one zip of TextBundles: a folder
``<title>.textbundle/`` per note holding its Markdown (``text.md``, or
``text.markdown`` / ``text.txt``), an ``info.json`` whose ``net.shinyfrog.bear``
object keeps the note's ``uniqueIdentifier``, ``creationDate`` and
``modificationDate``, whether it is ``archived``, ``trashed``, ``pinned`` or
``encrypted``, and ``assets/`` with its images and files. The backup's card
(kind ``file``, titled by the file's name) counts its ``notes`` (and the
notes it left out as in Bear's trash, ``trashed``). Each note is
read as the ``markdown`` format reads a note (a card and a section per
heading), its ids the backup's and the bundle's name: ``Bear.bear2bk#Recipes``
and ``Bear.bear2bk#Recipes#sourdough`` (a section's ``note`` field names its
note). Its card is
of kind ``note``, titled by its first heading (else the bundle's name), with
fields ``bear_id``, ``created_ms`` / ``updated_ms``, ``archived`` and
``pinned`` (when true), ``tags`` (Bear's ``#tag``, ``#nested/tag`` and
``#multi word tag#``, outside code), ``attachments`` (the assets' names) and
``note_links``: each ``[[Title]]``, ``[[Title/Heading]]`` or
``[[Title|label]]`` as ``{target, offset}`` (the text before any ``|``, and
UTF-8 bytes into the text of the document holding it), which the ``bearlink``
detector follows. A note
in Bear's trash is left out; an encrypted one is its title and ``encrypted:
true``, its text being cipher text Bear alone opens.

Only the notes' text and ``info.json`` are read, never an asset, so a backup is
read at any size (through a map: see ``mapped``); what the read members expand
to is checked against the file limit first.
"""

from __future__ import annotations

import io
import mmap
import posixpath
import re
import zipfile
from datetime import datetime
from typing import Any

import attrs
import orjson

from xerj_core import hookimpl
from xerj_core.autoindex import compressed
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.builtin_formats.markdown import MarkdownFormat
from xerj_core.autoindex.detect import mask_code
from xerj_core.autoindex.formats import FormatError, decode_text, extension, stem
from xerj_core.model import SourceDocument

EXTENSION = ".bear2bk"
BUNDLE = ".textbundle"
TEXT_NAMES = ("text.md", "text.markdown", "text.txt")
_BEAR = "net.shinyfrog.bear"
# [[Title]], [[Title/Heading]], [[Title|label]]: Bear names a note by its title and a heading after a slash
_WORDLIKE = re.compile(r"\w")
_NOTE_LINK = re.compile(r"\[\[([^\[\]|\n]+?)(?:\|[^\[\]\n]*)?\]\]")
# #tag, #nested/tag, and #a tag of several words# closed by a second hash (Bear ends a tag at a space otherwise);
# never a heading's "# " (a space after the hash), an escaped "\#", nor a hash inside a word or a URL
_TAG = re.compile(r"(?<![\w#&/\\])#(?![\s#])(?:([^#\n]*?[^\s#\\])#(?![\w#])|([^\s#]+))")


class BearFormat:
    """Bear ``.bear2bk`` backups into ``ax-notes``: a card, and each note as a Markdown note's card and sections."""

    name = "bear"
    dataset = "ax-notes"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == EXTENSION

    def reads_mapped(self, rel_path: str, head: bytes) -> bool:
        return True  # its notes are read, not its assets, which are most of a backup's bytes

    def parse(self, rel_path: str, data: Any, mtime_ms: int) -> list[SourceDocument]:
        try:
            archive = zipfile.ZipFile(_Seekable(data) if isinstance(data, mmap.mmap) else io.BytesIO(data))
        except (zipfile.BadZipFile, ValueError) as exc:
            raise FormatError(f"not a Bear backup: not a zip file ({exc})") from None
        with archive:
            bundles = _bundles(archive)
            read = sum(info.file_size for members in bundles.values() for member, info in members.items()
                       if not member.startswith("assets/"))
            if read > compressed.MAX_FILE_BYTES:
                raise FormatError(f"its notes expand to {read / (1 << 20):,.1f} MiB, past the "
                                  f"{compressed.MAX_FILE_BYTES / (1 << 20):,.1f} MiB a file may hold")
            read_notes = [self._note(archive, rel_path, mtime_ms, name, bundles[name]) for name in sorted(bundles)]
        notes = [docs for docs in read_notes if docs]
        # what was left out is said, not lost in silence: the notes in Bear's trash
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=stem(rel_path) or rel_path, text="",
                        section="", kind="file", notes=len(notes), trashed=len(read_notes) - len(notes) or None)
        return [card, *(doc for docs in notes for doc in docs)]

    def _note(self, archive: zipfile.ZipFile, rel_path: str, mtime_ms: int, name: str,
              members: dict[str, zipfile.ZipInfo]) -> list[SourceDocument]:
        info = _json(archive, members.get("info.json"))
        bear = info.get(_BEAR) if isinstance(info.get(_BEAR), dict) else {}
        if bear.get("trashed"):
            return []
        found = next((members[text] for text in TEXT_NAMES if text in members), None)
        text = decode_text(_read(archive, found), rel_path).text if found is not None else ""
        base = f"{rel_path}#{name}"
        fields: dict[str, Any] = {
            "bear_id": bear.get("uniqueIdentifier") if isinstance(bear.get("uniqueIdentifier"), str) else None,
            "created_ms": _instant(bear.get("creationDate")), "updated_ms": _instant(bear.get("modificationDate")),
            "archived": True if bear.get("archived") else None, "pinned": True if bear.get("pinned") else None,
            "attachments": sorted(posixpath.basename(asset) for asset in members if asset.startswith("assets/")
                                  and not asset.endswith("/")) or None,
        }
        if bear.get("encrypted"):
            title = bear.get("title") if isinstance(bear.get("title"), str) and bear.get("title") else name
            return [document(self, rel_path, mtime_ms, doc_id=base, title=title, text="", section="", kind="note",
                             encrypted=True, **fields)]
        docs = MarkdownFormat().parse(base, text.encode("utf-8"), mtime_ms)
        title = next((doc.section for doc in docs[1:] if doc.fields.get("level") == 1 and doc.section), "") or name
        tags = list(dict.fromkeys(tag for doc in docs for tag in _tags(doc.text)))
        out = []
        for doc in docs:
            extra = {key: value for key, value in fields.items() if value is not None} if doc is docs[0] else \
                {"note": base}
            if doc is docs[0] and tags:
                extra["tags"] = tags
            links = _links(doc.text)
            if links:
                extra["note_links"] = links
            out.append(attrs.evolve(doc, ax_path=rel_path, format=self.name, title=title,
                                    kind="note" if doc is docs[0] else doc.kind, fields={**doc.fields, **extra}))
        return out


class _Seekable:
    """A memory map as the file ``zipfile`` reads (which asks ``seekable()``, a method a map lacks): its members
    are read where they lie, never the whole map copied."""

    def __init__(self, mapped: mmap.mmap) -> None:
        self._mapped = mapped

    def seekable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mapped, name)


def _bundles(archive: zipfile.ZipFile) -> dict[str, dict[str, zipfile.ZipInfo]]:
    """Each TextBundle of the backup by its name (without ``.textbundle``): its members by their path in it."""
    found: dict[str, dict[str, zipfile.ZipInfo]] = {}
    for info in archive.infolist():
        parts = info.filename.split("/")
        at = next((i for i, part in enumerate(parts) if part.endswith(BUNDLE)), None)
        if at is None or at + 1 >= len(parts) or not parts[at + 1]:
            continue
        member = "/".join(parts[at + 1:])
        if member in (*TEXT_NAMES, "info.json") or member.startswith("assets/"):
            found.setdefault(parts[at][:-len(BUNDLE)], {})[member] = info
    return found


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, ValueError) as exc:
        raise FormatError(f"malformed Bear backup: {info.filename} cannot be read ({exc})") from None


def _json(archive: zipfile.ZipFile, info: zipfile.ZipInfo | None) -> dict[str, Any]:
    if info is None:
        return {}
    try:
        found = orjson.loads(_read(archive, info))
    except orjson.JSONDecodeError:
        return {}  # a note whose info is damaged is still its text
    return found if isinstance(found, dict) else {}


def _instant(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _masked(text: str) -> str:
    """``text`` with its code blanked (byte for byte: a UTF-8 offset into it is one into ``text``)."""
    return mask_code(text.encode("utf-8")).decode("utf-8")


def _tags(text: str) -> list[str]:
    if "#" not in text:
        return []
    # a one-word tag ends at a space: the punctuation and emphasis closing a sentence or a **#tag** are not its own
    found = ((match.group(1) or match.group(2).rstrip(".,;:!?)]}\"'*_~")) for match in _TAG.finditer(_masked(text)))
    return [tag.strip() for tag in found if _WORDLIKE.search(tag)]


def _links(text: str) -> list[dict[str, Any]]:
    """Each ``[[...]]`` of ``text`` outside code: its ``target`` (a title, or a title and a heading after a
    slash) and its UTF-8 ``offset``."""
    if "[[" not in text:
        return []
    masked = _masked(text)
    return [{"target": match.group(1).strip(), "offset": len(masked[:match.start()].encode("utf-8"))}
            for match in _NOTE_LINK.finditer(masked) if match.group(1).strip()]


@hookimpl
def xerj_register_formats(register) -> None:
    register(BearFormat())
