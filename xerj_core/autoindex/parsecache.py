"""The parse cache: each file's documents (and detector partials) from its last parse, reused while its stamp holds.

An edit to one file makes a run detect over the whole corpus again (a new
heading can make an old ``[[link]]`` resolve), and detection needs every file's
documents. Without this cache each of those runs parsed every unchanged file
again: one edited page of ``/usr/share/doc`` (2,223 files) cost a run 42 s, as
much as indexing the folder. With it, an unchanged file's documents and
``summarize`` partials are read back instead. The documents are stored as
detection keeps them (:class:`~xerj_core.autoindex.kept.Kept`: without their
texts, which are compressed apart), so a file read back for the corpus only has
its texts decompressed when it is detected again, if ever.

An entry is keyed by the run's folder and the file's root-relative path, one
slot per file, and holds the file's stamp (mtime, size) when it was parsed and
what parsed it (the formats' fingerprint): it is used only while the stamp is
the one the run walked, the same test by which the run calls the file
unchanged, and the fingerprint this run's; or, for a file the run found
unchanged under a new mtime (touched, copied without its times, checked out
again over the same bytes), while the entry's digest is that of the bytes the
brain holds. Such a file's documents stay in the store as they were, under
the mtime they were parsed under, and so do the entry's: a checkout that
touched a whole folder used to cost the next edit a parse and a detection of
every file. Partials are used only under the
same detectors' fingerprint, else ``summarize`` runs on the cached documents.
A parse under other formats (xerj upgraded, a format edited) replaces the
file's entry rather than adding one beside it, so the cache holds one entry per
file whatever changed: entries keyed by fingerprint were never read again once
the code moved on, and a folder's cache grew by a copy with every upgrade. A
cache written by an older layout is emptied once, when a run first opens it.
Fingerprints name xerj's version, each plugin's class and the stamps of the
files beside its module, so an upgraded or edited format is not served stale
documents.

A folder's first run keeps nothing: it parses every file once and has no use
for the cache, whose writes (pickling and compressing every document) cost 6-10%
of the parsing CPU on real code (1,500 ``.py`` files). The next run that detects again (an edit, a removal)
parses the unchanged files for the corpus once more, and keeps them; from then
on an edit parses what changed.

Beside the parses, in ``detections.mdb`` of the same directory, each file's last
detection is kept (its drafts and the questions it asked: see ``detectmemo``),
from the same runs on: an environment of its own, so neither kind's entries
weigh on the other's pages or counts.
In ``continued/``, one file per folder and brain holds the drafts the last
run found to continue live edges (see ``continuations``).

The cache is a cache: an entry that does not verify (checksum, stamp,
fingerprint) is a miss; a cache that cannot be opened or written (a full disk,
a Dask worker on another machine, where the directory does not exist) is
skipped, never an error. It lives in one LMDB environment that every process of
a run (the writer, a companion, pool workers) opens on its own; a commit waits
for its data on disk but not for the meta page, so a crash can lose only the
last commits, never the environment's consistency.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import struct
import sys
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence

import attrs
import lmdb
import lz4.block
import numpy as np
import xxhash

from xerj_core import __version__
from xerj_core.autoindex.kept import Kept
from xerj_core.autoindex.walk import FileEntry
from xerj_core.store import residency
from xerj_core.text import WORDS_VERSION

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.autoindex.parallel import Plugins

__all__ = ["Cached", "ParseCache", "fingerprint", "open_cache", "user_cache_dir"]

# Bumped when an entry's layout or what it holds changes: a cache of another schema is emptied when opened.
SCHEMA = 3
# Address space only: LMDB grows the file as entries are written.
MAP_SIZE = 1 << 36
# An entry's header: mtime_ns, size, the formats' and the detectors' fingerprints and the payload's checksum.
_HEADER = struct.Struct("<qq16s16s8s")
# A kept detection's header: the fingerprint of the code that detected it, then its payload's checksum.
_DETECTION_HEADER = struct.Struct("<16s8s")
# Where each environment records the layout its entries were written in (entry keys are 16-byte digests).
_SCHEMA_KEY = b"\0xerj-cache-schema"
# Bumped when what a kept detection holds changes (see detectmemo): older entries then miss.
DETECTION_LAYOUT = 2


class Cached(NamedTuple):
    """One file's parse as it was cached: its documents as detection keeps them (texts compressed apart; its
    ``partial`` and ``stamp`` are the run's to set), its bytes' xxh3 digest and its partials (or None).
    ``mtime_ns``: the mtime it was parsed under, when the file's has moved since over the same bytes (touched,
    copied, checked out again): its documents carry that one, as the store's do."""

    kept: Kept
    digest: str
    partial: Mapping[str, Any] | None
    mtime_ns: int | None = None


def fingerprint(plugins: Iterable[Any], *names: str) -> bytes:
    """A 16-byte digest naming ``plugins`` as the code that runs them: each one's class and the stamps of its
    module's folder, with xerj's version, the words' (``text.WORDS_VERSION``) and ``names`` (the plugins' names,
    priorities and tags, as given)."""
    hasher = xxhash.xxh3_128()
    # the words a parse's anchors and counts are made of (text.WORDS_VERSION), whichever plugin's code moved
    hasher.update(f"{SCHEMA}\0{__version__}\0{WORDS_VERSION}\0".encode())
    for name in names:
        hasher.update(f"{name}\0".encode())
    for plugin in plugins:
        module = sys.modules.get(type(plugin).__module__)
        stamp = _code_stamp(getattr(module, "__file__", None))
        hasher.update(f"{type(plugin).__module__}.{type(plugin).__qualname__}\0{stamp}\0".encode())
    return hasher.digest()


@functools.lru_cache(maxsize=None)
def _code_stamp(module_file: str | None) -> str:
    """The stamps (mtime, size) of the ``.py`` files beside ``module_file``: a plugin's module and the helpers of
    its own package, edited in place or installed anew. Taken once per process, as the code it runs is loaded
    once."""
    if not module_file:
        return ""
    stamps = []
    with contextlib.suppress(OSError):
        for found in sorted(Path(module_file).parent.glob("*.py")):
            with contextlib.suppress(OSError):
                stat = found.stat()
                stamps.append(f"{found.name}:{stat.st_mtime_ns}:{stat.st_size}")
    return ",".join(stamps)


@attrs.frozen
class ParseCache:
    """A handle on the cache at ``path`` for one run's folder and plugins; picklable, so it travels with the run's
    parse tasks and each process opens the environment itself (an LMDB environment is not shared across a fork).

    ``formats`` and ``detectors`` are :func:`fingerprint` digests; ``root`` is the folder's absolute path.
    """

    path: str
    root: str
    formats: bytes
    detectors: bytes
    keep: bool = True  # whether parses are stored, or only looked up

    def lookup(self, entries: Sequence[FileEntry], with_partials: bool) -> dict[str, Cached]:
        """The cached parses of those ``entries`` whose stamps still hold, by root-relative path; with
        ``with_partials``, only entries whose partials were summarized by this run's detectors keep them."""
        env = _open(self.path)
        if env is None:
            return {}
        found: dict[str, Cached] = {}
        reads = _Reads(env, os.path.join(self.path, "data.mdb"))
        try:
            with env.begin(buffers=True) as txn:
                for entry in entries:
                    value = txn.get(self._key(entry.rel_path))
                    if value is not None:
                        reads.note(value)
                        # read in place: unpickling copies what it keeps (the texts' bytes, once)
                        cached = self._verified(value, entry, with_partials)
                        if cached is not None:
                            found[entry.rel_path] = cached
        except lmdb.Error:
            return {}
        finally:
            reads.give_back()
        return found

    def earlier_size(self, entry: FileEntry) -> int | None:
        """The size of the earlier, shorter version of ``entry``'s file whose parse the cache holds, read off the
        entry's header alone (nothing unpickled); None when it holds none."""
        found = self._earlier(entry, parse=False)
        return None if found is None else found[0]

    def earlier(self, entry: FileEntry) -> tuple[int, Cached] | None:
        """The parse the cache holds of an earlier, shorter version of ``entry``'s file (read by these formats),
        with that version's size: what a format that reads appended bytes on their own starts from (the caller
        checks that the file still opens with those bytes, by their digest). None when it holds none."""
        found = self._earlier(entry, parse=True)
        return None if found is None or found[1] is None else (found[0], found[1])

    def _earlier(self, entry: FileEntry, *, parse: bool) -> tuple[int, Cached | None] | None:
        env = _open(self.path)
        if env is None:
            return None
        try:
            with env.begin(buffers=True) as txn:
                value = txn.get(self._key(entry.rel_path))
                if value is None or len(value) < _HEADER.size:
                    return None
                size = _HEADER.unpack_from(value)[1]
                if not 0 < size < entry.size:
                    return None
                return size, self._verified(value, entry, False, stamp=False) if parse else None
        except lmdb.Error:
            return None

    def store(self, parsed: Sequence[tuple[FileEntry, Cached]]) -> None:
        """Keep these files' parses, replacing what the cache held for their paths (best effort)."""
        env = _open(self.path) if self.keep and parsed else None
        if env is None:
            return
        try:
            with env.begin(write=True) as txn:
                for entry, cached in parsed:
                    kept = cached.kept
                    # the texts as they are kept (compressed already), the rest compressed here
                    meta = lz4.block.compress(pickle.dumps((kept.docs, cached.digest, cached.partial),
                                                           protocol=pickle.HIGHEST_PROTOCOL))
                    payload = pickle.dumps((meta, kept.texts, kept.own), protocol=pickle.HIGHEST_PROTOCOL)
                    header = _HEADER.pack(cached.mtime_ns or entry.mtime_ns, entry.size, self.formats,
                                          self.detectors if cached.partial is not None else bytes(16),
                                          xxhash.xxh3_64_digest(payload))
                    txn.put(self._key(entry.rel_path), header + payload)
            _give_back_written(env, os.path.join(self.path, "data.mdb"))
        except lmdb.Error:
            pass

    def forget(self, rel_paths: Iterable[str]) -> None:
        """Drop the entries of files the run found removed, parses and detections (best effort)."""
        rel_paths = list(rel_paths)
        for env, key in ((_open(self.path), self._key),
                         (_open(self._detections_path, subdir=False), self._detection_key)):
            if env is None:
                continue
            try:
                with env.begin(write=True) as txn:
                    for rel_path in rel_paths:
                        txn.delete(key(rel_path))
            except lmdb.Error:
                pass

    def recall_detections(self, rel_paths: Iterable[str]) -> dict[str, Any]:
        """The detections kept for these files under this run's formats and detectors (see ``detectmemo``), by
        root-relative path; an entry that does not verify is left out."""
        env = _open(self._detections_path, subdir=False)
        if env is None:
            return {}
        found: dict[str, Any] = {}
        code = self._detection_code()
        reads = _Reads(env, self._detections_path)
        try:
            with env.begin(buffers=True) as txn:
                for rel_path in rel_paths:
                    value = txn.get(self._detection_key(rel_path))
                    if value is None or len(value) < _DETECTION_HEADER.size:
                        continue
                    reads.note(value)
                    detected_by, checksum = _DETECTION_HEADER.unpack_from(value)
                    payload = bytes(value[_DETECTION_HEADER.size:])
                    if detected_by != code or xxhash.xxh3_64_digest(payload) != checksum:
                        continue
                    with contextlib.suppress(Exception):  # one that verified but does not load is a miss too
                        found[rel_path] = pickle.loads(lz4.block.decompress(payload))
        except lmdb.Error:
            return {}
        finally:
            reads.give_back()
        return found

    def keep_detections(self, entries: Mapping[str, Any]) -> None:
        """Keep these files' detections, replacing what the cache held for them (best effort)."""
        env = _open(self._detections_path, subdir=False) if self.keep and entries else None
        if env is None:
            return
        code = self._detection_code()
        try:
            with env.begin(write=True) as txn:
                for rel_path, entry in entries.items():
                    try:
                        payload = lz4.block.compress(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
                    except Exception:  # a lookup's arguments that do not pickle: that file detects every run
                        txn.delete(self._detection_key(rel_path))
                        continue
                    txn.put(self._detection_key(rel_path),
                            _DETECTION_HEADER.pack(code, xxhash.xxh3_64_digest(payload)) + payload)
            _give_back_written(env, self._detections_path)
        except lmdb.Error:
            pass

    def recall_continuations(self, label: str) -> bytes | None:
        """The continued claims kept for this folder under ``label`` (a brain on a server: see ``continuations``),
        or None; unlike a detection, kept whatever code detected them (each pair names two edge ids)."""
        try:
            with open(self._continuations_path(label), "rb") as kept:
                value = kept.read()
        except OSError:
            return None
        if len(value) < 8 or xxhash.xxh3_64_digest(value[8:]) != value[:8]:
            return None
        return value[8:]

    def keep_continuations(self, label: str, blob: bytes) -> None:
        """Keep ``blob`` as this folder's continued claims under ``label``, replacing what was kept (best effort).

        A file of its own, replaced whole, not an entry of the environments: the writer process reads and writes
        it, and one holding an environment open could not open it again in the companion it forks later."""
        if not self.keep:
            return
        path = self._continuations_path(label)
        partial = f"{path}.{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            with open(partial, "wb") as out:
                out.write(xxhash.xxh3_64_digest(blob) + blob)
            os.replace(partial, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(partial)

    def _continuations_path(self, label: str) -> str:
        return os.path.join(self.path, "continued", xxhash.xxh3_128_hexdigest(f"{self.root}\0{label}".encode()))

    @property
    def _detections_path(self) -> str:
        # an environment of its own, beside the parses' in the cache's directory: a file's parse and its detection
        # are kept and dropped on their own, and neither's size weighs on the other's pages
        return os.path.join(self.path, "detections.mdb")

    def _detection_key(self, rel_path: str) -> bytes:
        return xxhash.xxh3_128_digest(f"{self.root}\0{rel_path}\0detect".encode())

    def _detection_code(self) -> bytes:
        # the core's detection code too (the link helpers, make_draft, this memo: xerj_core/autoindex), which an
        # editable install may change under one version
        return xxhash.xxh3_128_digest(f"detect{DETECTION_LAYOUT}\0{_code_stamp(__file__)}\0".encode()
                                      + self.formats + self.detectors)

    def _key(self, rel_path: str) -> bytes:
        return xxhash.xxh3_128_digest(f"{self.root}\0{rel_path}\0".encode())

    def _verified(self, value: memoryview, entry: FileEntry, with_partials: bool, stamp: bool = True
                  ) -> Cached | None:
        """The entry ``value`` holds when it is whole and was read by these formats; with ``stamp``, only when it
        was read from the file as ``entry`` found it (same mtime and size), or from the same bytes under an
        earlier mtime (``entry.digest``, what the brain holds: the file was touched since, and its documents kept
        as they were)."""
        if len(value) < _HEADER.size:
            return None
        mtime_ns, size, formats, detectors, checksum = _HEADER.unpack_from(value)
        payload = memoryview(value)[_HEADER.size:]
        moved = stamp and mtime_ns != entry.mtime_ns
        if ((stamp and size != entry.size) or (moved and entry.digest is None) or formats != self.formats
                or xxhash.xxh3_64_digest(payload) != checksum):
            return None
        try:
            meta, texts, own = pickle.loads(payload)
            docs, digest, partial = pickle.loads(lz4.block.decompress(meta))
        except Exception:  # a payload that verified but does not load is a miss, like any other
            return None
        if moved and digest != entry.digest:
            return None
        if partial is not None and not (with_partials and detectors == self.detectors):
            partial = None
        return Cached(Kept(docs, texts, {}, own), digest, partial, mtime_ns if moved else None)


# Entries a run reads from a cache environment between two givings back of the pages it touched: each read of a
# random key maps about 64 KB (the kernel maps the pages around a fault that the page cache holds), so 512 entries
# (one batch's) left 33-36 MB of the detections' map resident.
GIVE_BACK_ENTRIES = 128
# The read-only mapping of a cache environment's data file, by file, with the environment it was found for (weakly):
# a map keeps its place while its environment is open, and this process keeps them open (see _Reads).
_MAPS: dict[str, tuple[weakref.ref, list[tuple[int, int]]]] = {}


class _Reads:
    """The entries one read transaction of ``env`` (whose data file is ``data_file``) takes, whose pages are given
    back every :data:`GIVE_BACK_ENTRIES` entries and at the end. A run reads each entry once and copies out what
    it keeps: the pages would otherwise count in its RSS until it ends (100 MB of an edit's run on 20,000 notes).
    The map is read-only, so a reader in another thread only faults a page back in from the page cache."""

    __slots__ = ("env", "data_file", "count", "ranges")

    def __init__(self, env: lmdb.Environment, data_file: str) -> None:
        self.env = env
        self.data_file = data_file
        self.count = 0
        self.ranges: list[tuple[int, int]] | None = None

    def note(self, value: memoryview) -> None:
        """One entry read, in place (``value`` lies in the environment's map)."""
        if self.ranges is None:
            self.ranges = _mapping_of(self.env, self.data_file, value)
        self.count += 1
        if self.count % GIVE_BACK_ENTRIES == 0:
            residency.drop_pages(self.ranges)

    def give_back(self) -> None:
        """After the transaction: the pages of the entries read since the last giving back."""
        if self.ranges and self.count % GIVE_BACK_ENTRIES:
            residency.drop_pages(self.ranges)


def _give_back_written(env: lmdb.Environment, data_file: str) -> None:
    """After a write transaction of ``env`` (committed: the environment is open): the pages of its map the write
    read (the B-tree it changed), which a run that keeps a whole folder's entries (its first edit) would
    otherwise hold to the end."""
    known = _MAPS.get(data_file)
    residency.drop_pages(known[1] if known is not None and known[0]() is env
                         else residency.mapped_ranges(Path(data_file)))


def _mapping_of(env: lmdb.Environment, data_file: str, value: memoryview) -> list[tuple[int, int]]:
    """The mapping of ``env``'s data file ``data_file``: the one found before for this environment, else the one
    of ``/proc/self/maps`` (about 1 ms to read in a run's process) holding ``value``, a buffer read from it."""
    known = _MAPS.get(data_file)
    if known is not None and known[0]() is env:
        return known[1]
    if not len(value):
        return []
    address = np.frombuffer(value, np.uint8).ctypes.data
    found = [(start, end) for start, end in residency.mapped_ranges(Path(data_file)) if start <= address < end]
    _MAPS[data_file] = (weakref.ref(env), found)
    return found


# This process's open environments, by path, with the pid that opened them: a forked child opens its own.
_ENVS: dict[str, tuple[int, lmdb.Environment | None]] = {}


def held_here() -> bool:
    """Whether this process holds a cache environment open: a companion forked from it then could not open its
    own (LMDB refuses an environment opened twice in one process, and a fork copies the first), and would go
    without the cache, remembering nothing for the next run (see ``parallel.may_fork``)."""
    pid = os.getpid()
    return any(held_by == pid and env is not None for held_by, env in _ENVS.values())


def _open(path: str, subdir: bool = True) -> lmdb.Environment | None:
    held = _ENVS.get(path)
    if held is not None and held[0] == os.getpid():
        return held[1]
    env: lmdb.Environment | None
    try:
        # created by the run's own process (see open_cache); a worker elsewhere finds no directory and goes without
        env = lmdb.open(path, map_size=MAP_SIZE, subdir=subdir, create=False, metasync=False, readahead=False,
                        max_readers=256, lock=True)
    except lmdb.Error:
        env = None
    _ENVS[path] = (os.getpid(), env)
    return env


def _empty_older(path: str, subdir: bool = True) -> None:
    """Empty the environment at ``path`` when its entries are of another schema (or of none: written before
    entries had one slot per file), and mark it with this one (best effort). Opened for this alone unless this
    process holds it already: a process that forks a companion must not hold an environment the companion opens."""
    held = _ENVS.get(path)
    own = held is None or held[0] != os.getpid()
    try:
        env = lmdb.open(path, map_size=MAP_SIZE, subdir=subdir, metasync=False, readahead=False, max_readers=256,
                        lock=True) if own else held[1]
    except lmdb.Error:
        return
    if env is None:
        return
    schema = f"{SCHEMA}.{DETECTION_LAYOUT}".encode()
    try:
        with env.begin() as txn:
            if txn.get(_SCHEMA_KEY) == schema:
                return
        with env.begin(write=True) as txn:
            if txn.get(_SCHEMA_KEY) != schema:
                txn.drop(env.open_db(txn=txn), delete=False)
                txn.put(_SCHEMA_KEY, schema)
    except lmdb.Error:
        pass
    finally:
        if own:
            env.close()


def open_cache(directory: Path, root: str, plugins: "Plugins", *, keep: bool = True) -> ParseCache | None:
    """The cache under ``directory`` for a run over ``root`` with ``plugins``, creating the directory (private to
    its user); None when it cannot be made. With ``keep`` false the run only looks parses up."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    _empty_older(str(directory))
    _empty_older(os.path.join(directory, "detections.mdb"), subdir=False)
    ref = plugins.ref(True)
    return ParseCache(str(directory), root, fingerprint(plugins.formats.values(), repr(ref.formats)),
                      fingerprint(plugins.detectors, repr(ref.detectors)), keep)


def user_cache_dir() -> Path:
    """Where a run that writes through a server keeps its parse cache: ``XERJ_CACHE_DIR``, else the platform's
    user cache directory (``~/.cache/xerj`` on Linux), under ``autoindex``."""
    import platformdirs

    return Path(os.environ.get("XERJ_CACHE_DIR") or platformdirs.user_cache_dir("xerj")) / "autoindex"
