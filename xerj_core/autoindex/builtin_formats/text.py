"""Plain text: one file card holding the whole file; also the fallback for extensionless text files.

Accepted: ``.txt``, ``.text``, ``.rst``, ``.org``, ``.log``, and files without an
extension whose first bytes hold no NUL and decode as UTF-8 (``README``,
``LICENSE``). Priority 0, so every other format that accepts a file wins.
"""

from __future__ import annotations

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.formats import decode_text, extension, file_name
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".txt", ".text", ".rst", ".org", ".log"})


def looks_like_text(head: bytes) -> bool:
    """No NUL byte, and UTF-8 apart from a character the sniff window may have cut in half."""
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


class TextFormat:
    """Plain text files into ``ax-notes`` as a single card."""

    name = "text"
    dataset = "ax-notes"
    priority = 0

    def accepts(self, rel_path: str, head: bytes) -> bool:
        ext = extension(rel_path)
        if ext in EXTENSIONS:
            return True
        return ext == "" and not file_name(rel_path).startswith(".") and looks_like_text(head)

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        return [
            document(
                self,
                rel_path,
                mtime_ms,
                doc_id=rel_path,
                title=file_name(rel_path),
                text=decoded.text.strip(),
                section="",
                kind="file",
                ordinal=0,
                encoding=decoded.encoding,
            )
        ]


@hookimpl
def xerj_register_formats(register) -> None:
    register(TextFormat())
