"""PDF documents (behind the ``pdf`` extra): a file card plus one ``page`` document per page.

The card's title is the document's ``/Title`` metadata, else the file name
without extension; its text is empty. Page ``n`` (from 1) is ``{path}#page-{n}``
with label ``page n`` and the text ``pypdf`` extracts, then each comment a
reader left on the page (a sticky note, the words on a highlight or a box),
a line each: ``Comment (Ada): check this figure``. Without ``pypdf``
installed every PDF is refused with a reason naming the extra; a file that is
not a PDF, is damaged, or is encrypted with a password is refused with the
parser's reason.
"""

from __future__ import annotations

import io
import logging
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
        pages = ["\n".join([page.extract_text() or "", *_comments(page)]) for page in reader.pages]
    except FormatError:
        raise
    except Exception as exc:
        raise FormatError(f"malformed PDF: {type(exc).__name__}: {exc}") from None
    return title, [raw.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n").strip() for raw in pages]


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
    # 2: the comments readers left on a page (sticky notes, highlights' and boxes' words) end its text
    version = 2

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
