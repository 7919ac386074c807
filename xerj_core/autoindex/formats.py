"""Document formats: the protocol a format plugin satisfies, the registry, and sniffing.

A format turns the bytes of one file into :class:`~xerj_core.model.SourceDocument`
records. It never touches storage: the autoindex pipeline walks the folder,
reads each file, and calls, per file::

    formats = collect_formats(pm)                     # once per run
    docs = parse_file(formats, rel_path, data, mtime_ms)
    # -> None                 no format accepts the file: skip it silently
    # -> list[SourceDocument] the documents, file card first
    # raises FormatError      the file is unreadable: report (path, reason), go on
    # raises FormatDeclined   a FormatError that is a skip, not a failure (see below)

``rel_path`` is the root-relative path with ``/`` separators (it becomes
``ax_path``), ``data`` the file's bytes and ``mtime_ms`` its modification time in
epoch milliseconds (``stat().st_mtime_ns // 1_000_000``).

The contract every format keeps (``xerj_core.testing.AbstractFormatTests``
checks it):

- ``parse`` is a pure function of its arguments: the same bytes, path and mtime
  give equal documents in the same order.
- The first document is the file card and its ``doc_id`` is ``rel_path``;
  every other ``doc_id`` starts with ``rel_path + "#"`` and ids are unique.
- Every document carries ``ax_path == rel_path``, ``mtime_ms``, ``format ==
  fmt.name`` and a ``dataset`` (usually ``fmt.dataset``); ``kind`` says what it
  is (``file``, ``section``, ``message``, ``attachment``, ``page``, ...) and
  ``section`` labels it within the file (empty for a file card).
- Documents after the card come in reading order; sections and pages number
  themselves from 1 in ``fields["ordinal"]``.
- Unparseable input raises :class:`FormatError` with a reason a person can
  act on; nothing else escapes (``parse_file`` wraps a plugin's stray exception
  into a ``FormatError`` naming the format).
- A format that took a file by its name and, having read all of it, finds it
  is not what it reads (a minified bundle with a ``.js`` name) raises
  :class:`FormatDeclined` with a skip ``kind``: the run reports the file as
  skipped, under that kind, and does not count it as failed.

Fields the detectors read when present: ``aliases`` (list of str, on a card),
``message_id``/``in_reply_to``/``references`` (on a message), ``parent`` and
``filename`` (on an attachment), ``links`` (list of ``{"href", "offset"}`` on an
HTML document, offsets being UTF-8 byte offsets into its text), ``crate`` (the
package name, on a ``Cargo.toml`` card).

Sniffing is deterministic: formats are tried in descending ``priority`` (an
optional integer attribute, 0 when absent), ties by ``name``; the first whose
``accepts(rel_path, head)`` is true wins. ``head`` is the file's first
:data:`SNIFF_BYTES` bytes. Built-ins use priority 10 for extension matches and 0
for the plain-text fallback, so a plugin with priority above 10 overrides them.

A format may also carry ``version`` (an integer or a string). A run records
each format's name, class and version, and one that finds them changed reads
every file again; so a format that comes to accept files it passed by before,
or to make other documents of them, raises its version, and the next run of
every brain reads those files without waiting for them to be saved.

A run pauses Python's cyclic garbage collector (its own allocations make no
reference cycles; see ``store.collector_paused``), but a format's parser may:
the standard library's email parser does, per message. ``parse_file`` counts
what each parse made and frees what parses left in cycles once that adds up to
a collection's worth; a format that reads many records out of one file calls
:func:`release_cycles` between records, so a large mailbox holds one message's
garbage at a time, not all of them.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import attrs

from xerj_core.autoindex import compressed
from xerj_core.errors import FormatDeclined, FormatError, PluginError
from xerj_core.model import SourceDocument
from xerj_core.plugins import collect_registrations
from xerj_core.store.store import RELEASE_AFTER_OBJECTS, release_cycles, young_count
from xerj_core.text import WORDS_VERSION

__all__ = [
    "RELEASE_AFTER_OBJECTS",
    "Format",
    "FormatDeclined",
    "FormatError",
    "NO_FORMAT",
    "SNIFF_BYTES",
    "collect_formats",
    "decode_text",
    "decode_utf8",
    "format_identities",
    "parse_file",
    "release_cycles",
    "sniff",
]

SNIFF_BYTES = 1024
# The skip kind of a file no format reads (binaries, unknown extensions), and of one a format declines as another
# program's file that began as its own do (a ``.json`` that is no export).
NO_FORMAT = "no_format"

_NAME = re.compile(r"[a-z0-9][a-z0-9_.\-]*")
# A dataset becomes an index name with the root id appended (``ax-notes-1a2b3c4d``); index names hold 255 bytes.
MAX_DATASET_CHARS = 200


@runtime_checkable
class Format(Protocol):
    """Parses one kind of file into documents."""

    name: str
    dataset: str

    def accepts(self, rel_path: str, head: bytes) -> bool:
        """True when this format should parse the file at ``rel_path`` whose first bytes are ``head``."""
        ...

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        """The file's documents, file card first; raise :class:`FormatError` on unparseable input."""
        ...

    # Optional, for a format whose files grow at their end (a mailbox a program appends each message to):
    #
    #     def parse_appended(self, rel_path: str, data: bytes, start: int, before: Sequence[SourceDocument],
    #                        mtime_ms: int) -> list[SourceDocument] | None:
    #
    # ``data[:start]`` is the file an earlier parse read into ``before``; the documents ``parse(rel_path, data,
    # mtime_ms)`` would give, made from ``before`` and the bytes after ``start``, or None when the new bytes cannot
    # be read on their own (the whole file is then parsed). See parse_appended below.
    #
    # Optional, for a format that reads some files a record at a time (a mailbox):
    #
    #     def reads_mapped(self, rel_path: str, head: bytes) -> bool:
    #
    # True for a file whose parse takes a read-only memory map for ``data`` and never copies the whole of it: such
    # a file is read at any size, past the run's size limit. See xerj_core.autoindex.mapped.


def collect_formats(pm) -> dict[str, Format]:
    """Every format the plugins registered, keyed by name.

    Refuses (``PluginError`` naming the plugin) something that is not a
    :class:`Format`, a name or dataset outside ``[a-z0-9][a-z0-9_.-]*``, a
    non-integer ``priority`` and a duplicate name.
    """
    found: dict[str, Format] = {}
    owner: dict[str, str] = {}
    for plugin, (fmt, *_rest) in collect_registrations(pm, "xerj_register_formats"):
        if not isinstance(fmt, Format):
            raise PluginError(f"plugin {plugin!r} registered {fmt!r}, which is not a Format")
        for attr in ("name", "dataset"):
            value = getattr(fmt, attr)
            if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > MAX_DATASET_CHARS:
                raise PluginError(
                    f"plugin {plugin!r} registered a format with {attr} {value!r}; "
                    f"expected lowercase [a-z0-9_.-], starting with a letter or digit, at most "
                    f"{MAX_DATASET_CHARS} characters"
                )
        priority = getattr(fmt, "priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise PluginError(f"plugin {plugin!r} registered format {fmt.name!r} with a non-integer priority")
        version = getattr(fmt, "version", None)
        if version is not None and (not isinstance(version, (int, str)) or isinstance(version, bool)):
            raise PluginError(f"plugin {plugin!r} registered format {fmt.name!r} with a version that is neither an "
                              f"integer nor a string")
        if fmt.name in found:
            raise PluginError(
                f"plugin {plugin!r} registered format {fmt.name!r}, which is already registered by plugin {owner[fmt.name]!r}"
            )
        found[fmt.name] = fmt
        owner[fmt.name] = plugin
    return found


def _ordered(formats: Mapping[str, Format] | Iterable[Format]) -> list[Format]:
    items = formats.values() if isinstance(formats, Mapping) else formats
    return sorted(items, key=lambda f: (-getattr(f, "priority", 0), f.name))


def format_identities(formats: Mapping[str, Format]) -> tuple[str, ...]:
    """Which formats a run reads with, as a run marker keeps them: each one's name, class and version (when it has
    one), sorted, then the containers opened and how text is cut into words (:data:`WORDS_MARK`). A run finding
    other formats than the last one reads every file again (a file no format read may have one now, and a file
    another format read may be read by a new one of higher priority)."""
    readers = sorted(f"{name}={type(fmt).__module__}.{type(fmt).__qualname__}{_version_mark(fmt)}"
                     for name, fmt in formats.items())
    return tuple(readers) + tuple(f"+{container}" for container in compressed.CONTAINERS) + (WORDS_MARK,)


# What the words of a run's documents were cut by (``text.WORDS_VERSION``): the store's terms and the sections'
# anchors. A brain whose last run did not have it has every document written again, even one whose source stands
# as stored (see ``sink._standing``): its terms are the older tokenizer's.
WORDS_MARK = f"+words@{WORDS_VERSION}"


def _version_mark(fmt: Format) -> str:
    version = getattr(fmt, "version", None)
    return "" if version is None else f"@{version}"


def sniff(formats: Mapping[str, Format] | Iterable[Format], rel_path: str, head: bytes) -> Format | None:
    """The one format that parses ``rel_path`` (highest priority, then name), or ``None``."""
    for fmt in _ordered(formats):
        if fmt.accepts(rel_path, head):
            return fmt
    return None


def parse_file(
    formats: Mapping[str, Format] | Iterable[Format], rel_path: str, data: bytes, mtime_ms: int, *,
    limit: int = compressed.MAX_FILE_BYTES,
) -> list[SourceDocument] | None:
    """Sniff and parse one file: ``None`` when no format accepts it, else its documents.

    Every failure surfaces as :class:`FormatError` with ``path`` set, so the
    pipeline reports it per file and carries on. A gzip file is read as what it
    holds (see :mod:`.compressed`), its documents under its own path; one that
    would expand past ``limit`` bytes is refused.
    """
    began = young_count()
    read_as = compressed.inner_name(rel_path, data[:2])
    try:
        # what a gzip file holds is sniffed from its first bytes alone: most that no format reads (a tar, a
        # PostScript manual) are never expanded
        head = data[:SNIFF_BYTES] if read_as is None else compressed.head(data, SNIFF_BYTES)
        fmt = sniff(formats, read_as or rel_path, head)
        if fmt is not None and read_as is not None:
            data = compressed.decompressed(data, limit)
    except FormatError as exc:
        raise FormatError(exc.reason, path=rel_path) from None
    except Exception as exc:  # a plugin's accepts() failing is that file's problem, not the run's
        raise FormatError(f"sniffing failed: {type(exc).__name__}: {exc}", path=rel_path) from exc
    if fmt is None:
        return None
    try:
        if read_as is None:
            return list(fmt.parse(rel_path, data, mtime_ms))
        return [_stored_as(doc, read_as, rel_path) for doc in fmt.parse(read_as, data, mtime_ms)]
    except FormatDeclined as exc:
        raise FormatDeclined(exc.reason, kind=exc.kind, path=rel_path) from None
    except FormatError as exc:
        if exc.path is None:
            raise FormatError(exc.reason, path=rel_path) from exc
        raise
    except Exception as exc:  # a plugin bug must not end the run; report it against the file
        raise FormatError(f"format {fmt.name!r} failed: {type(exc).__name__}: {exc}", path=rel_path) from exc
    finally:
        release_cycles(began=began)


def appender(formats: Mapping[str, Format] | Iterable[Format], rel_path: str, data: bytes) -> Any:
    """The ``parse_appended`` of the format that reads this file, when it has one; None for any other file (and a
    compressed one, always read whole), and when sniffing fails (the whole parse then reports it)."""
    if compressed.inner_name(rel_path, data[:2]) is not None:
        return None
    try:
        return getattr(sniff(formats, rel_path, data[:SNIFF_BYTES]), "parse_appended", None)
    except Exception:
        return None


def parse_appended(appending: Any, rel_path: str, data: bytes, mtime_ms: int, start: int,
                   before: Sequence[SourceDocument]) -> list[SourceDocument] | None:
    """The documents of a file that grew at its end, by its format's ``appending`` (see :func:`appender`), from
    ``before`` (an earlier parse of ``data[:start]``) and its new bytes; None when the format cannot, and on any
    failure: the whole file's parse then says what is wrong with it."""
    began = young_count()
    try:
        docs = appending(rel_path, data, start, before, mtime_ms)
    except Exception:  # read whole instead, which reports what fails
        return None
    finally:
        release_cycles(began=began)
    return None if docs is None else list(docs)


def _stored_as(doc: SourceDocument, read_as: str, rel_path: str) -> SourceDocument:
    """A document of a compressed file's content, moved to the stored file's path: its id (``NEWS`` →
    ``NEWS.gz``, ``NEWS#x`` → ``NEWS.gz#x``), ``ax_path`` and an attachment's ``parent``."""

    def moved(name: str) -> str:
        return rel_path + name[len(read_as):] if name == read_as or name.startswith(read_as + "#") else name

    fields = doc.fields
    if isinstance(fields.get("parent"), str):
        fields = {**fields, "parent": moved(fields["parent"])}
    return attrs.evolve(doc, doc_id=moved(doc.doc_id), ax_path=rel_path, fields=fields)


@attrs.frozen
class Decoded:
    """A file's text and the encoding it was read with (a Python codec name: ``utf-8``, ``cp1252``, ...)."""

    text: str
    encoding: str


# Wide encodings put NUL bytes between ASCII letters; without their byte-order mark a file is not in one.
_WIDE = ("utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le")
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")
# When the detector scores several single-byte code pages alike (short notes often do: "café" reads the
# same in a dozen), the Western Windows pages are the likeliest source of a note that is not UTF-8.
_PREFERRED_ON_TIE = ("cp1252", "cp1250")


def decode_text(data: bytes, rel_path: str | None = None) -> Decoded:
    """``data`` as text: UTF-8 (a BOM dropped) when it is, else the encoding ``charset-normalizer`` detects.

    CRLF/CR become LF. Only bytes no encoding reads raise ``FormatError``.
    """
    try:
        text, encoding = data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError as exc:
        text, encoding = _detect(data, rel_path, exc)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return Decoded(text, encoding)


def _detect(data: bytes, rel_path: str | None, utf8_error: UnicodeDecodeError) -> tuple[str, str]:
    import charset_normalizer

    exclude = [] if data.startswith(_WIDE_BOMS) else list(_WIDE)
    results = charset_normalizer.from_bytes(data, cp_exclusion=exclude)
    best = results.best()
    if best is None:
        raise FormatError(f"undecodable: not UTF-8 (byte 0x{data[utf8_error.start]:02x} at offset "
                          f"{utf8_error.start}) and no text encoding reads it", path=rel_path)
    ties = {r.encoding: r for r in results if (r.chaos, r.coherence) == (best.chaos, best.coherence)}
    chosen = next((ties[name] for name in _PREFERRED_ON_TIE if name in ties), best)
    return str(chosen), chosen.encoding


def decode_utf8(data: bytes, rel_path: str | None = None) -> str:
    """The text of :func:`decode_text`, for a format that does not record the encoding."""
    return decode_text(data, rel_path).text


def extension(rel_path: str) -> str:
    """The lowercased extension of ``rel_path`` with its dot (``.md``), or ``""``."""
    name = rel_path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def file_name(rel_path: str) -> str:
    """The last path component of ``rel_path``."""
    return rel_path.rsplit("/", 1)[-1]


def stem(rel_path: str) -> str:
    """The file name without its extension."""
    name = file_name(rel_path)
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name
