"""EPUB books (``.epub``): a card with the book's metadata, then one document per chapter in reading order.

An EPUB is a zip: ``META-INF/container.xml`` names the package document
(``.opf``), whose metadata names the book and whose spine lists its content
documents (XHTML) in reading order. The card (kind ``file``) is titled by the
book's ``dc:title`` (else the file name) and keeps ``authors`` (its
``dc:creator``\\s), ``language``, ``publisher``, ``published`` (``dc:date`` as
written), ``subjects`` and ``chapters``. Each content document with text is a
document ``{path}#ch-{n}`` (``n`` from 1 in spine order) of kind ``chapter``:
its visible text, titled by the table of contents' label for it (EPUB 3's
navigation document, else EPUB 2's NCX), else its first heading, else
``chapter n``. Documents the table of contents names nothing in and holds no
heading of (a cover, a title page) are read all the same.

A file that is not a zip, lacks the container or package, or names content
it does not hold is refused; so is a book whose content is encrypted (DRM),
which only its reader can open (a book whose fonts alone are obfuscated, as
EPUB allows, is read). What the book's members expand to is counted against the run's
file limit before any is read, so a zip bomb is refused, not expanded.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import unquote

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Package, document, parse_xml
from xerj_core.autoindex.builtin_formats.html import extract_parts
from xerj_core.autoindex.formats import FormatError, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".epub"})
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_XHTML = "{http://www.w3.org/1999/xhtml}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
_CONTENT_TYPES = frozenset({"application/xhtml+xml", "text/html", "application/x-dtbook+xml"})


def _xml(data: bytes) -> Any:
    return parse_xml(data, "EPUB", recover=True)


def _texts(parent: Any, tag: str) -> list[str]:
    return [" ".join(found.split()) for element in parent.iter(tag) if (found := "".join(element.itertext()).strip())]


class EpubFormat:
    """EPUB books into ``ax-books``: a card and a document per chapter."""

    name = "epub"
    dataset = "ax-books"
    priority = 10
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        with Package(data, "EPUB") as book:

            def read(name: str) -> bytes:
                if name not in book.names:
                    raise FormatError(f"malformed EPUB: it names {name}, which it does not hold")
                return book.read(name)

            container = _xml(read("META-INF/container.xml"))
            rootfile = next((element.get("full-path") for element in container.iter(f"{_CONTAINER}rootfile")
                             if element.get("full-path")), None)
            if rootfile is None:
                raise FormatError("malformed EPUB: its container names no package document")
            package = _xml(read(rootfile))
            base = posixpath.dirname(rootfile)
            manifest = {item.get("id"): item for item in package.iter(f"{_OPF}item")}

            def member(href: str) -> str:
                return posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0])))

            encrypted = self._encrypted(read, book.names)
            spine = [manifest[ref.get("idref")] for ref in package.iter(f"{_OPF}itemref")
                     if ref.get("idref") in manifest]
            contents = [member(item.get("href") or "") for item in spine
                        if item.get("media-type") in _CONTENT_TYPES and item.get("href")]
            locked = [name for name in contents if name in encrypted]
            if locked:
                raise FormatError(f"encrypted EPUB (DRM): {len(locked)} of its {len(contents)} content documents are "
                                  f"encrypted, which only its reader can open")
            labels = self._labels(read, manifest, package, member)
            chapters: list[SourceDocument] = []
            for name in dict.fromkeys(contents):
                _title, heading, parts = extract_parts(read(name).decode("utf-8", "replace"), any_heading=True)
                text = "\n\n".join(part.text for part in parts if part.text).strip()
                if not text:
                    continue
                n = len(chapters) + 1
                label = labels.get(name) or heading or f"chapter {n}"
                chapters.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#ch-{n}", title=label,
                                         text=text, section=label, kind="chapter", ordinal=n, member=name))
        metadata = package.find(f"{_OPF}metadata")
        metadata = metadata if metadata is not None else package
        titles, authors = _texts(metadata, f"{_DC}title"), _texts(metadata, f"{_DC}creator")
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=titles[0] if titles else stem(rel_path),
                        text="", section="", kind="file", authors=authors or None,
                        language=next(iter(_texts(metadata, f"{_DC}language")), None),
                        publisher=next(iter(_texts(metadata, f"{_DC}publisher")), None),
                        published=next(iter(_texts(metadata, f"{_DC}date")), None),
                        subjects=_texts(metadata, f"{_DC}subject") or None, chapters=len(chapters))
        return [card, *chapters]

    @staticmethod
    def _encrypted(read: Any, members: frozenset[str]) -> set[str]:
        """The members ``META-INF/encryption.xml`` says are encrypted (or obfuscated: fonts, which are no content)."""
        if "META-INF/encryption.xml" not in members:
            return set()
        return {posixpath.normpath(unquote(reference.get("URI")))
                for reference in _xml(read("META-INF/encryption.xml")).iter(f"{_ENC}CipherReference")
                if reference.get("URI")}

    @staticmethod
    def _labels(read: Any, manifest: dict[str, Any], package: Any, member: Any) -> dict[str, str]:
        """Each content document's label in the table of contents (its first entry naming it)."""
        labels: dict[str, str] = {}
        nav = next((item for item in manifest.values() if "nav" in (item.get("properties") or "").split()), None)
        if nav is not None and nav.get("href"):
            folder = posixpath.dirname(member(nav.get("href")))
            for anchor in _xml(read(member(nav.get("href")))).iter(f"{_XHTML}a"):
                href, label = anchor.get("href"), " ".join("".join(anchor.itertext()).split())
                if href and label and "://" not in href:
                    name = posixpath.normpath(posixpath.join(folder, unquote(href.split("#", 1)[0])))
                    labels.setdefault(name, label)
        spine = package.find(f"{_OPF}spine")
        ncx = manifest.get(spine.get("toc")) if spine is not None else None
        if not labels and ncx is not None and ncx.get("href"):
            folder = posixpath.dirname(member(ncx.get("href")))
            for point in _xml(read(member(ncx.get("href")))).iter(f"{_NCX}navPoint"):
                content, label = point.find(f"{_NCX}content"), point.find(f"{_NCX}navLabel")
                text = " ".join("".join(label.itertext()).split()) if label is not None else ""
                if content is not None and content.get("src") and text:
                    name = posixpath.normpath(posixpath.join(folder, unquote(content.get("src").split("#", 1)[0])))
                    labels.setdefault(name, text)
        return labels


@hookimpl
def xerj_register_formats(register) -> None:
    register(EpubFormat())
