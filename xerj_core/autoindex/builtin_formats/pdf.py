"""PDF documents (behind the ``pdf`` extra): a file card plus one ``page`` document per page.

The card's title is the document's ``/Title`` metadata, else the file name
without extension; its text is empty. Page ``n`` (from 1) is ``{path}#page-{n}``
with label ``page n`` and the text PDFium extracts (``pypdfium2``; ``pypdf``'s
extraction where PDFium cannot open the file or is not installed), then each
comment a reader left on the page (a sticky note, the words on a highlight or
a box), a line each: ``Comment (Ada): check this figure``. Without ``pypdf``
installed every PDF is refused with a reason naming the extra; a file that is
not a PDF, is damaged, or is encrypted with a password is refused with the
parser's reason.

``pypdf`` reads the file's structure (its title, encryption, the pages'
comments) and PDFium its text: on 193 papers of the papers-we-love collection
(4,654 pages) ``pypdf``'s extraction took 133 s and PDFium's 8.7 s, and where
they differ PDFium's is the text (``pypdf`` gave ``bet w een w eb pages`` and
``/#0Ccan t`` for a font without a Unicode map that PDFium reads as ``between
web pages``); the structure alone takes ``pypdf`` 1.7 s.
"""

from __future__ import annotations

import io
import logging
import threading
import zlib
from typing import Any

from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.formats import FormatError, extension, stem
from xerj_core import hookimpl
from xerj_core.model import SourceDocument

MISSING_EXTRA = "PDF support is not installed: install the pdf extra (pip install 'xerj[pdf]')"


def _load_pypdf():
    try:
        import pypdf
    except ImportError:
        return None
    return pypdf


def _load_pdfium():
    try:
        import pypdfium2
    except ImportError:
        return None
    return pypdfium2


# PDFium is not thread-safe (pypdfium2 says so): a process reading PDFs on several threads (a Dask worker with more
# than one) takes turns.
_PDFIUM = threading.Lock()


def _page_texts(data: bytes, fits: list[bool]) -> list[str | None] | None:
    """Each page's text as PDFium extracts it (None for a page whose content does not fit, see
    :func:`_content_fits`), or None when it cannot (not installed, refuses the file, finds another number of pages
    than pypdf, whose ``fits`` has one flag a page)."""
    pdfium = _load_pdfium()
    if pdfium is None or not any(fits):
        return None
    with _PDFIUM:
        return _read_pages(pdfium, data, fits)


def _read_pages(pdfium: Any, data: bytes, fits: list[bool]) -> list[str | None] | None:
    try:
        document = pdfium.PdfDocument(data)
    except Exception:  # damage pypdf reads past, or a format PDFium does not take: pypdf's text then
        return None
    try:
        if len(document) != len(fits):
            return None
        texts: list[str | None] = []
        for index, fit in enumerate(fits):
            if not fit:
                texts.append(None)
                continue
            page = document[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return texts
    except Exception:
        return None
    finally:
        document.close()


# Bytes of decoded content (the page's streams and the forms it draws) a page may hold for PDFium to read it: PDFium
# decodes a page's content whole when it loads the page, so a 1 GB page stream deflated into 1 MB (the reliability
# harness's bomb) held 2.1 GB; pypdf, which reads such a page instead, stops decoding a stream at 75 MB (from 6.6,
# the least the pdf extra takes). Real pages hold kilobytes to a few megabytes.
MAX_PAGE_CONTENT = 256 << 20
# The most a filter can make of one encoded byte: deflate's longest match (258 bytes) from about two bits; LZW a
# string of up to 4,096 bytes from a code of at least 9 bits; run-length 128 bytes from two; ASCII85's ``z`` four
# zero bytes. A stream whose encoded length times its filters' factors fits is not decoded to be measured.
_MOST_PER_BYTE = {"/FlateDecode": 1032, "/Fl": 1032, "/LZWDecode": 3641, "/LZW": 3641, "/RunLengthDecode": 64,
                  "/RL": 64, "/ASCII85Decode": 4, "/A85": 4, "/ASCIIHexDecode": 1, "/AHx": 1}
_FORM_DEPTH = 4  # forms drawn by forms drawn by ... a page: deeper ones are not looked into (nor counted)


def _content_fits(page: Any) -> bool:
    """Whether ``page``'s content streams and the form XObjects it draws decode to at most
    :data:`MAX_PAGE_CONTENT` bytes: each stream's encoded length times its filters' factors bounds what it can
    decode to, and only a deflated stream whose bound does not fit is inflated (a megabyte at a time, stopping at
    the limit); any other whose bound does not fit does not fit."""
    left = [MAX_PAGE_CONTENT]

    def fits(stream: Any) -> bool:
        raw = getattr(stream, "_data", None)  # the encoded bytes of a stream pypdf read from the file
        if not isinstance(raw, bytes):
            return False
        filters = stream.get("/Filter")
        filters = [] if filters is None else list(filters) if isinstance(filters, list) else [filters]
        bound = len(raw)
        for name in filters:
            bound *= _MOST_PER_BYTE.get(name, MAX_PAGE_CONTENT)
        if bound <= left[0]:
            left[0] -= bound
            return True
        if filters != ["/FlateDecode"]:  # deflate alone is inflated to be measured; other chains do not fit
            return False
        inflate, size, pending = zlib.decompressobj(), 0, raw
        while pending and not inflate.eof:  # a megabyte of output at a time, counted and let go
            size += len(inflate.decompress(pending, 1 << 20))
            if size > left[0]:
                return False
            pending = inflate.unconsumed_tail
        left[0] -= size
        return True

    def drawn(resources: Any, depth: int, seen: set[int]) -> bool:
        if depth > _FORM_DEPTH or resources is None:
            return True
        xobjects = resources.get_object().get("/XObject")
        for reference in (xobjects.get_object().values() if xobjects is not None else ()):
            number = getattr(reference, "idnum", None)
            if number in seen:
                continue
            seen.add(number)
            form = reference.get_object()
            if form.get("/Subtype") != "/Form":
                continue  # an image: text extraction does not decode it
            if not fits(form) or not drawn(form.get("/Resources"), depth + 1, seen):
                return False
        return True

    try:
        contents = page.get("/Contents")
        contents = contents.get_object() if contents is not None else []
        streams = [item.get_object() for item in contents] if isinstance(contents, list) else [contents]
        return all(map(fits, streams)) and drawn(page.get("/Resources"), 1, set())
    except Exception:  # a structure pypdf cannot follow: PDFium is not given the page
        return False


# Control characters in a page's text (a glyph of a font with no Unicode map, say: PDFium gives a ``fi`` ligature
# as \x0c) become spaces; a tab and a newline stay, a NUL goes.
_CONTROLS = {code: " " for code in (*range(0x01, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)} | {0: None}


def read_pdf(data: bytes) -> tuple[str, list[str]]:
    """A PDF's ``/Title`` (``""`` when it has none) and the text of each page; a :class:`FormatError` saying why
    it cannot be read (pypdf missing, not a PDF, damaged, encrypted with a password)."""
    pypdf = _load_pypdf()
    if pypdf is None:
        raise FormatError(MISSING_EXTRA)
    if not data.lstrip()[:5] == b"%PDF-":
        raise FormatError("not a PDF: the file does not start with %PDF-")
    # pypdf reports recoverable damage through logging; the reason we raise is what matters
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FormatError("encrypted PDF: it needs a password")
        metadata = reader.metadata
        title = str(metadata.title).strip() if metadata is not None and metadata.title else ""
        comments = [_comments(page) for page in reader.pages]
        texts = _page_texts(data, [_content_fits(page) for page in reader.pages]) or [None] * len(comments)
        pages = ["\n".join([page.extract_text() or "" if text is None else text, *notes])
                 for page, text, notes in zip(reader.pages, texts, comments)]
    except FormatError:
        raise
    except Exception as exc:
        raise FormatError(f"malformed PDF: {type(exc).__name__}: {exc}") from None
    return title, [raw.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROLS).strip() for raw in pages]


# Annotations that are not a reader's comment: a comment's pop-up window (its parent holds the words), a link,
# a form field, and the marks printers and editors add.
_NOT_COMMENTS = frozenset({"/Popup", "/Link", "/Widget", "/PrinterMark", "/TrapNet", "/Watermark"})


def _comments(page: Any) -> list[str]:
    """The comments a reader left on ``page`` (a sticky note, a highlight's or a box's words), ``Comment (who):
    ...`` each; a damaged annotation, or list of them, is passed over: the page's text stands."""
    found = []
    try:
        annotations = page.get("/Annots")
        references = list(annotations.get_object() or ()) if annotations is not None else []
    except Exception:
        return []
    for reference in references:
        try:
            annotation = reference.get_object()
            if annotation.get("/Subtype") in _NOT_COMMENTS:
                continue
            words = " ".join(str(annotation.get("/Contents") or "").split())
            author = " ".join(str(annotation.get("/T") or "").split())
        except Exception:  # an annotation pypdf cannot resolve costs its page nothing
            continue
        if words:
            found.append(f"Comment ({author}): {words}" if author else f"Comment: {words}")
    return found


class PdfFormat:
    """PDF files into ``ax-pdfs``, one document per page."""

    name = "pdf"
    dataset = "ax-pdfs"
    priority = 10
    # 2: the comments readers left on a page (sticky notes, highlights' and boxes' words) end its text; 3: the
    # pages' text extracted by PDFium, control characters as spaces
    version = 3

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) == ".pdf" or head.startswith(b"%PDF-")

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        title, pages = read_pdf(data)
        title = title or stem(rel_path)
        docs = [
            document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text="", section="", kind="file",
                     ordinal=0, pages=len(pages))
        ]
        for n, text in enumerate(pages, start=1):
            docs.append(
                document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#page-{n}", title=title, text=text,
                         section=f"page {n}", kind="page", ordinal=n)
            )
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(PdfFormat())
