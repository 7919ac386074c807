"""Files stored gzip-compressed (``NEWS.gz``, ``notes.md.gz``): the name and bytes of what they hold, bounded.

A format reads what a file holds, not how it is stored: ``parse_file`` hands a
format the inner name and bytes, so ``changelog.gz`` is read by the plain-text
format and ``guide.md.gz`` by the markdown one, and its documents keep the
stored file's path. Decompression stops at the size the walk accepts for a
plain file (a small file that expands without end is refused, not read into
memory), and a damaged stream is that file's clear error.
"""

from __future__ import annotations

import zlib

from xerj_core.autoindex.walk import MAX_FILE_BYTES
from xerj_core.errors import FormatError

SUFFIX = ".gz"
_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib reads the gzip header and trailer itself
# What the run records of how it reads stored files (see formats.format_identities): a change here reads every
# file again, as a new format does.
CONTAINERS = ("gzip",)


def inner_name(rel_path: str, head: bytes) -> str | None:
    """The name a gzip file's content goes by (``NEWS.gz`` → ``NEWS``), or None when ``rel_path`` is not one (no
    ``.gz`` suffix, nothing before it, or not gzip's first bytes)."""
    if not rel_path.endswith(SUFFIX) or not head.startswith(_MAGIC):
        return None
    inner = rel_path[: -len(SUFFIX)]
    return inner if inner and not inner.endswith("/") else None


def head(data: bytes, size: int) -> bytes:
    """The first ``size`` bytes of what the gzip stream ``data`` holds (fewer when it holds fewer), for sniffing
    before the whole of it is expanded; FormatError when its start is damaged."""
    try:
        return zlib.decompressobj(_GZIP_WBITS).decompress(data, size)
    except zlib.error as exc:
        raise FormatError(f"not a readable gzip file: {exc}") from None


def decompressed(data: bytes, limit: int = MAX_FILE_BYTES) -> bytes:
    """Every member of the gzip stream ``data``, joined; FormatError when it is damaged or cut short, or when it
    would expand past ``limit`` bytes."""
    out: list[bytes] = []
    size = 0
    rest = data
    while rest:
        member = zlib.decompressobj(_GZIP_WBITS)
        try:
            chunk = member.decompress(rest, limit + 1 - size)
        except zlib.error as exc:
            raise FormatError(f"not a readable gzip file: {exc}") from None
        size += len(chunk)
        if size > limit:
            raise FormatError(f"decompresses to more than {limit / (1 << 20):g} MiB (--max-file-mib raises the "
                              f"limit)")
        out.append(chunk)
        if not member.eof:
            raise FormatError("the gzip stream is cut short")
        rest = member.unused_data
        # padding after the last member (tar and some tools write zeros) ends the stream
        if rest and not rest.startswith(_MAGIC):
            if rest.strip(b"\0"):
                raise FormatError("trailing bytes after the gzip stream")
            break
    return b"".join(out)
