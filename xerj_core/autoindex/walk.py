"""Walking a folder: every regular file once, in path order (links last), with what it could not read reported."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable, Iterator

import attrs

from xerj_core.autoindex.ignore import Scope, scope_of

# Larger files are reported and skipped (unless a run says otherwise, ``--max-file-mib``): a second
# brain indexes what people write, not disk images, and most formats parse a file whole. A format that reads a
# file a record at a time from a map of it (a mailbox: see mapped) is exempt, through ``walk``'s ``unlimited``.
MAX_FILE_BYTES = 64 * 1024 * 1024


@attrs.frozen
class FileEntry:
    """A regular file under the root: its root-relative path (``/`` separators), what stat said, and the most
    bytes the run reads of it (``--max-file-mib``): a compressed file expanding past that is refused as a plain
    file that size is skipped. ``digest``: the xxh3 of its bytes as the brain holds them, for a file the run
    found unchanged (a parse cached under an older mtime over those bytes still serves: see ``parsecache``)."""

    rel_path: str
    path: Path
    mtime_ns: int
    size: int
    limit: int = MAX_FILE_BYTES
    digest: str | None = None

    @property
    def mtime_ms(self) -> int:
        return self.mtime_ns // 1_000_000


# The folders of a Logseq graph's ``logseq/`` (beside its ``config.edn``) that hold earlier copies of its pages.
LOGSEQ_COPIES = frozenset({"bak", "version-files"})
# Python's compiled-bytecode caches: no format reads a ``.pyc``, and a folder without a ``.gitignore`` (an
# installed package, the standard library) holds one beside every module: CPython's test/ alone 2,424 skips.
BYTECODE_CACHE = "__pycache__"

# What a Maildir (a folder holding ``cur`` and ``new``) keeps beside its mail: ``tmp``, where a message lies while
# it is delivered (whole only once moved to ``new``), the Maildir++ marker of a folder, and the bookkeeping of
# Dovecot and Courier (uid lists, indexes, keywords, subscriptions), which the text format would read as notes.
MAILDIR_BOOKKEEPING = frozenset({"tmp", "maildirfolder", "subscriptions"})
MAILDIR_BOOKKEEPING_PREFIXES = ("dovecot", "courierimap", "courierpop3")

# Why the walk passes a path by. Each is a column of the run's ``skipped`` account, except
# UNREADABLE, which is a failure: the file or directory should have been read and could not be.
TOO_LARGE = "too_large"
SYMLINK_LOOP = "symlink_loop"
BROKEN_SYMLINK = "broken_symlink"
NOT_A_FILE = "not_a_regular_file"
NAME_CLASH = "name_clash"
IGNORED = "ignored"  # left out by a .gitignore or .xerjignore line; unlike the others, a removal when indexed before
UNREADABLE = "unreadable"
# walked, then gone when the run came to read it (an editor's temporary file, a file moved away): nothing failed,
# and the next run finds it removed
VANISHED = "vanished"


@attrs.frozen
class Skipped:
    """A path the walk could not take, why, and the kind of reason (one of the constants above)."""

    rel_path: str
    reason: str
    kind: str = UNREADABLE


def display_name(name: str) -> str:
    """A file name as ids and paths carry it: itself, or, when its bytes are not UTF-8, each bad byte as ``\\xNN``.

    ``os.scandir`` hands such bytes over as lone surrogates, which no key, JSON
    body or document id can hold; the escaped form is readable and names the
    same bytes (a sibling already called by that form is reported, not overwritten).
    """
    try:
        name.encode()
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return name


def _maildir_folder(entry: os.DirEntry) -> bool:
    """Is ``entry`` (a hidden entry of a Maildir) one of its Maildir++ folders, a directory holding ``cur``?"""
    try:
        return entry.is_dir() and os.path.isdir(os.path.join(entry.path, "cur"))
    except OSError:
        return False


# A Zotero data folder: its library, and the folders of the program's own parts (import translators, citation
# styles, lookup engines) that sit beside the library and the ``storage/`` of the files it keeps.
ZOTERO_LIBRARY = "zotero.sqlite"
ZOTERO_PROGRAM = frozenset({"translators", "styles", "locate", "pipes"})


def walk(root: Path, *, ignore_files: bool = True, max_file_bytes: int = MAX_FILE_BYTES,
         unlimited: Callable[[str, Path], bool] | None = None) -> Iterator[FileEntry | Skipped]:
    """Yield every file under ``root`` in path order, and a :class:`Skipped` for what cannot be read.

    Hidden entries (a leading ``.``: ``.git``, ``.obsidian``) are not part of a
    corpus, but for a Maildir's folders (Maildir++, as Dovecot keeps them: a
    ``.Sent`` holding ``cur``, beside the Maildir's own ``cur`` and ``new``).
    Nor, with ``ignore_files``, is what ``.gitignore`` and ``.xerjignore`` files
    leave out (:mod:`xerj_core.autoindex.ignore`), a Logseq graph's copies
    of its pages (:data:`LOGSEQ_COPIES`), Python's ``__pycache__`` folders,
    what a Maildir keeps beside its mail (:data:`MAILDIR_BOOKKEEPING`) or a
    Zotero data folder's program parts (:data:`ZOTERO_PROGRAM`): each
    such file or directory is one ``IGNORED`` skip, and an ignored directory is
    not entered.
    Symbolic links are followed, but a directory reached twice (a link loop, or
    two links to one place) is walked once and reported the second time: the
    directories reached through links are walked after all the others, so a
    directory of the folder that a link also names keeps its own path (a
    checkout's ``HomebrewFormula -> pkg/brew`` is walked as ``pkg/brew``), and
    what lies behind links comes out last, in path order among itself. A file
    larger than ``max_file_bytes`` is a ``TOO_LARGE`` skip, unless ``unlimited(rel_path, path)`` says its
    format reads it without holding it whole (see xerj_core.autoindex.mapped).
    """
    visited: dict[tuple[int, int], str] = {}  # each directory walked -> where it was walked
    stack: list[tuple[Path, str, Scope | None]] = [(root, "", scope_of(root) if ignore_files else None)]
    linked: list[tuple[Path, str, Scope | None]] = []  # directories reached through a link, walked after the rest
    while stack or linked:
        if not stack:
            stack, linked = linked[::-1], []
        directory, rel_dir, scope = stack.pop()
        try:
            info = directory.stat()
        except OSError as exc:
            yield Skipped(rel_dir or ".", f"unreadable directory: {exc.strerror or exc}")
            continue
        key = (info.st_dev, info.st_ino)
        first = visited.get(key)
        if first is not None:
            looped = not first or rel_dir.startswith(f"{first}/")  # a link back to a directory holding it
            yield Skipped(rel_dir, f"symlink loop: this directory was already walked as [{first or '.'}]" if looped
                          else f"link to a directory already walked as [{first}]", SYMLINK_LOOP)
            continue
        visited[key] = rel_dir
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield Skipped(rel_dir or ".", f"unreadable directory: {exc.strerror or exc}")
            continue
        subdirs = []
        names = {entry.name for entry in entries}
        if scope is not None:
            try:
                scope = scope.enter(directory, rel_dir, names)
            except OSError as exc:  # walked without that file's lines, and the run says so
                yield Skipped(rel_dir or ".", f"unreadable ignore file {Path(exc.filename or '').name}: "
                                              f"{exc.strerror or exc}")
        maildir = "cur" in names and "new" in names
        # a Zotero data folder holds its program's parts beside the library: 700 translators' JavaScript, styles
        zotero = scope is not None and ZOTERO_LIBRARY in names
        # a Logseq graph's own folder keeps a copy of a page at each conflicting save: the graph's pages again
        copies = LOGSEQ_COPIES if scope is not None and directory.name == "logseq" and "config.edn" in names \
            else frozenset()
        for entry in entries:
            if entry.name.startswith(".") and not (maildir and _maildir_folder(entry)):
                continue
            name = display_name(entry.name)
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if name != entry.name and name in names:
                yield Skipped(rel, "its name is not valid UTF-8, and its escaped form names another file here",
                              NAME_CLASH)
                continue
            try:
                is_dir = entry.is_dir()
                why = scope.why_ignored(rel, is_dir) if scope is not None else None
                if is_dir and entry.name in copies:
                    why = "a Logseq graph's copies of its pages (logseq/bak, logseq/version-files)"
                elif is_dir and scope is not None and entry.name == BYTECODE_CACHE:
                    why = "Python's compiled-bytecode cache (__pycache__), which no format reads"
                elif maildir and scope is not None and (entry.name in MAILDIR_BOOKKEEPING
                                                        or entry.name.startswith(MAILDIR_BOOKKEEPING_PREFIXES)):
                    why = "a Maildir's own bookkeeping, not mail (tmp, maildirfolder, dovecot-uidlist, ...)"
                elif zotero and is_dir and entry.name in ZOTERO_PROGRAM:
                    why = "a Zotero data folder's program parts (translators, citation styles), not its library"
                if why is not None:
                    yield Skipped(rel, why, IGNORED)
                    continue
                if is_dir:
                    (linked if entry.is_symlink() else subdirs).append((Path(entry.path), rel, scope))
                    continue
                if not entry.is_file():
                    if not entry.is_symlink():
                        yield Skipped(rel, "not a regular file", NOT_A_FILE)
                    elif os.path.exists(entry.path):  # a link to a device (/dev/zero), a pipe, a socket
                        yield Skipped(rel, "symbolic link to something that is not a regular file", NOT_A_FILE)
                    else:
                        yield Skipped(rel, "broken symbolic link", BROKEN_SYMLINK)
                    continue
                stat = entry.stat()
            except OSError as exc:
                # A link chain that comes back to itself raises where a dangling one answers False: both are
                # links that end in no file, not files that failed.
                if exc.errno == errno.ELOOP and entry.is_symlink():
                    yield Skipped(rel, "symbolic link that loops back on itself", BROKEN_SYMLINK)
                else:
                    yield Skipped(rel, f"unreadable: {exc.strerror or exc}")
                continue
            if stat.st_size > max_file_bytes and not (unlimited is not None and unlimited(rel, Path(entry.path))):
                wanted = f"--max-file-mib {-(-stat.st_size // (1 << 20))} reads it" if entry.name == ZOTERO_LIBRARY \
                    else "--max-file-mib raises the limit"  # a library is one file, whole or not at all
                yield Skipped(rel, f"larger than {max_file_bytes / (1 << 20):g} MiB ({wanted})", TOO_LARGE)
                continue
            yield FileEntry(rel, Path(entry.path), stat.st_mtime_ns, stat.st_size, max_file_bytes)
        # Reversed onto the stack so directories come out in path order.
        stack.extend(reversed(subdirs))
