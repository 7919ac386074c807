"""Plain text: one file card holding the whole file; also the fallback for extensionless text files.

Accepted: ``.txt``, ``.text``, ``.rst``, ``.org``, ``.log``, and, when their first
bytes hold no NUL and decode as UTF-8, files without an extension (``README``,
``LICENSE``) and a project's conventional documents whatever follows their name
(``README.Debian``, ``changelog.Debian.gz``, ``NEWS.old``, ``COPYING.LIB``: on
``/usr/share/doc`` a thousand files no format read before). Priority 0, so every
other format that accepts a file wins (``README.md`` is Markdown, ``guide.rst``
reStructuredText, ``notes.org`` Org; this one reads such a file only where that format is disabled).
"""

from __future__ import annotations

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document
from xerj_core.autoindex.formats import decode_text, extension, file_name
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".txt", ".text", ".rst", ".org", ".log"})
# The names (before their first dot, any case) of the documents a project ships beside its code.
CONVENTIONAL = frozenset({"README", "READ_ME", "NEWS", "CHANGES", "CHANGELOG", "HISTORY", "RELEASE-NOTES",
                          "RELEASE_NOTES", "TODO", "INSTALL", "AUTHORS", "CONTRIBUTORS", "CREDITS", "THANKS",
                          "COPYING", "COPYRIGHT", "LICENSE", "LICENCE", "NOTICE", "HACKING", "CONTRIBUTING",
                          "MAINTAINERS", "BUGS", "FAQ"})


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
    # 2: conventional documents with a suffix (README.Debian)
    version = 2

    def accepts(self, rel_path: str, head: bytes) -> bool:
        ext = extension(rel_path)
        if ext in EXTENSIONS:
            return True
        name = file_name(rel_path)
        if name.startswith(".") or (ext and name.split(".", 1)[0].upper() not in CONVENTIONAL):
            return False
        return looks_like_text(head)

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
