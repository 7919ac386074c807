"""Large files read through a read-only memory map, for formats that read them a record at a time.

Most formats need a file's bytes whole, and the walk skips a file over
``--max-file-mib`` (see ``walk.MAX_FILE_BYTES``). A format with a method
``reads_mapped(rel_path, head) -> bool`` promises, for each file it answers True
for, that its ``parse`` (and ``parse_appended``) takes any bytes-like ``data`` a
memory map gives (slices, ``find``, regular expressions; no ``bytes`` methods
such as ``startswith``) and never holds a copy of the whole of it: the email
format reads an mbox a message at a time (and a lone message whole, so it says
False for one). Those files are read at any size, mapped from :data:`MAP_FROM`
bytes up, and the pages a parse has passed are given back as it goes
(:func:`give_back`), so a run holds about what the documents hold, not the
file: a mail export is mostly its attachments' bytes, which become no text.

A compressed file is always expanded whole, under the size limit.
"""

from __future__ import annotations

import contextlib
import mmap
from pathlib import Path
from typing import Any, Iterator, Mapping

import xxhash

from xerj_core.autoindex import compressed
from xerj_core.autoindex.formats import sniff
from xerj_core.autoindex.walk import FileEntry

# Files this large or larger are mapped when their format reads mapped files; smaller ones are read whole, which
# costs less than a map's page faults.
MAP_FROM = 16 << 20
# A map's pages are given back once this many bytes of it lie behind the parse (each call is one madvise).
GIVE_BACK_BYTES = 32 << 20
# Bytes of a map hashed at a time by :func:`digest`, each slice's pages given back after it.
_DIGEST_SLICE = 32 << 20


def reads_mapped(formats: Mapping[str, Any], rel_path: str, path: Path, sniff_bytes: int) -> bool:
    """Whether the format that reads the file ``path`` reads it mapped: its first ``sniff_bytes`` bytes read and
    sniffed as ``parse_file`` would. False for a compressed file, and when the file cannot be read or a format's
    ``accepts`` fails (the parse then reports that, or the walk's size limit skips the file)."""
    try:
        with open(path, "rb") as opened:
            head = opened.read(sniff_bytes)
        if compressed.inner_name(rel_path, head[:2]) is not None:
            return False
        asked = getattr(sniff(formats, rel_path, head), "reads_mapped", None)
        return callable(asked) and bool(asked(rel_path, head))
    except Exception:
        return False


@contextlib.contextmanager
def file_data(entry: FileEntry, formats: Mapping[str, Any], sniff_bytes: int) -> Iterator[Any]:
    """The bytes of ``entry`` for its parse: read whole, or a read-only map of the file when it is at least
    :data:`MAP_FROM` bytes and its format reads mapped files. The map is closed on leaving (a view of it still
    held elsewhere leaves it to be freed with that view). ``OSError`` as ``Path.read_bytes`` raises it."""
    if entry.size < MAP_FROM or not reads_mapped(formats, entry.rel_path, entry.path, sniff_bytes):
        yield entry.path.read_bytes()
        return
    with open(entry.path, "rb") as opened:
        try:
            data = mmap.mmap(opened.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # emptied since the walk: a map cannot be empty
            data = None
    if data is None:
        yield b""
        return
    try:
        yield data
    finally:
        with contextlib.suppress(BufferError):
            data.close()


def give_back(data: Any, upto: int, given: int) -> int:
    """Drop from this process's memory the pages of the map ``data`` between ``given`` and ``upto`` once
    :data:`GIVE_BACK_BYTES` or more lie there (they stay in the page cache, and a later read faults them in
    again unchanged); returns the offset given back up to. Anything but a map: nothing done."""
    if not isinstance(data, mmap.mmap) or upto - given < GIVE_BACK_BYTES or not hasattr(mmap, "MADV_DONTNEED"):
        return given
    end = upto - upto % mmap.PAGESIZE
    with contextlib.suppress(OSError, ValueError):
        data.madvise(mmap.MADV_DONTNEED, given, end - given)
    return end


def digest(data: Any, size: int | None = None) -> str:
    """``xxh3_64_hexdigest`` of ``data[:size]`` (all of it by default): a map in slices, each given back."""
    if not isinstance(data, mmap.mmap):
        return xxhash.xxh3_64_hexdigest(data if size is None else memoryview(data)[:size])
    end = len(data) if size is None else min(size, len(data))
    hasher = xxhash.xxh3_64()
    given = 0
    for at in range(0, end, _DIGEST_SLICE):
        with memoryview(data) as view:
            hasher.update(view[at:min(end, at + _DIGEST_SLICE)])
        given = give_back(data, min(end, at + _DIGEST_SLICE), given)
    return hasher.hexdigest()


def file_digest(path: Path, size: int) -> str:
    """``xxh3_64_hexdigest`` of the file's bytes (``size`` as the walk saw it): read whole when small, else a
    slice at a time, so a large file is not held whole."""
    if size < MAP_FROM:
        return xxhash.xxh3_64_hexdigest(path.read_bytes())
    hasher = xxhash.xxh3_64()
    with open(path, "rb") as opened:
        while chunk := opened.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()
