"""What detection keeps of a parsed file (:class:`Kept`): its documents without their texts, the texts compressed apart.

A run holds every file's kept form from its parse to its detect batch, and the parse cache stores it as it is,
so a file read back for the corpus only (an unchanged file of a run that detects) costs neither its texts'
decompression nor their compression again; the texts are put back (:meth:`Kept.documents`) only when the file
is detected again or its documents are to be written.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import attrs
import lz4.block
import orjson
import xxhash

from xerj_core.autoindex.detect import OWN_FIELDS, corpus_view
from xerj_core.model import SourceDocument

if TYPE_CHECKING:
    from xerj_core.autoindex.parallel import ParseOutcome


def file_stamp(digest: str, mtime_ns: int) -> int:
    """A file's content as read and its mtime in one number (see ``Corpus.stamps``)."""
    return xxhash.xxh3_64_intdigest(f"{digest}:{mtime_ns}".encode())


def squeeze(data: bytes) -> bytes:
    """``data`` compressed for shipping within a run (a parse batch): LZ4, which on 5,000 files of real code
    compressed 68 MB in 0.12 s of CPU against zlib's 0.55 s at its fastest level and decompressed in 0.03 s
    against 0.24 s."""
    return lz4.block.compress(data)


def unsqueeze(blob: bytes) -> bytes:
    return lz4.block.decompress(blob)


# A kept file's texts are held from its parse to its detect batch, so the whole corpus's at once. They are packed
# as a parse batch is (LZ4): zlib at its fastest level held 19 MB of 5,000 files of real code where LZ4 holds 25 (on
# 20k notes, the companion's peak was 6-10 MB lower), but cost 0.6 s to compress and 0.28 s to decompress against
# 0.14 and 0.03 s, and on real code the companion's parse and combine set the run's wall time (its writer waits
# for the combine).

# Values of a document's ``fields`` that let equal maps be shared (see :func:`shared_fields`): a map holding any
# other value (a list, a float, whose -0.0 equals 0.0) is kept as it is.
_SHAREABLE = frozenset({str, int, bool})


def shared_fields(docs: Sequence[SourceDocument], table: dict[int, dict[str, Any]]) -> tuple[SourceDocument, ...]:
    """``docs``, each whose ``fields`` equal a map ``table`` holds (same keys and values of the same types, in
    the same order) given that map instead: a run keeps every file's text-free documents until detection, and
    most of their maps repeat (every note's card, the sections of a level, an anchor such as ``summary``), at
    some 200 bytes each. Documents never change their fields, so sharing one map changes no result.

    ``table`` holds each map by the hash of its items and their types, not by a tuple of them: code's maps are
    mostly unique (a symbol, a line), and those tuples, kept for maps no other document shared, were 22 MB of
    11k files' 80k documents. Two maps meeting on a hash are compared; unequal ones stay apart."""
    out = []
    for doc in docs:
        fields = doc.fields
        if fields and all(type(value) in _SHAREABLE for value in fields.values()):
            held = table.setdefault(hash((*fields.items(), *map(type, fields.values()))), fields)
            if held is not fields and _same_map(held, fields):
                doc = remade(doc, doc.text, held)
        out.append(doc)
    return tuple(out)


def _same_map(held: dict[str, Any], fields: dict[str, Any]) -> bool:
    """The same keys in the same order, each with an equal value of the same type (``True`` is not ``1``)."""
    return list(held) == list(fields) and all(a == b and type(a) is type(b)
                                              for a, b in zip(held.values(), fields.values()))


@attrs.frozen
class Kept:
    """What detection keeps of a parsed file until it runs: its documents as the corpus holds them (without their
    text and ``detect.OWN_FIELDS``), the texts and those fields compressed apart (put back for the file's detect
    batch only), and the file's ``summarize`` partial."""

    docs: tuple[SourceDocument, ...]
    texts: "bytes | Spilled"  # compressed, in memory or written out (see Spill)
    partial: Any
    # each document's whole ``fields`` map when it held one of ``OWN_FIELDS`` (else None), pickled and compressed;
    # empty when none did
    own: bytes = b""
    # the file's content as read, its bytes' digest and its mtime in one number (see Corpus.stamps); 0 when unknown
    stamp: int = 0

    @classmethod
    def of(cls, outcome: ParseOutcome, fields: dict[int, dict[str, Any]] | None = None) -> "Kept":
        """``outcome`` kept; with ``fields``, its documents' equal ``fields`` maps shared (:func:`shared_fields`).
        An outcome that came kept from the parse cache (``outcome.kept``) is that."""
        if outcome.kept is not None:
            return outcome.kept if fields is None else outcome.kept.sharing(fields)
        texts = [doc.text for doc in outcome.docs]
        own = [doc.fields if not OWN_FIELDS.isdisjoint(doc.fields) else None for doc in outcome.docs]
        if any(own):
            docs = tuple(corpus_view(doc) for doc in outcome.docs)
            held = squeeze(pickle.dumps(own, protocol=pickle.HIGHEST_PROTOCOL))
        else:
            docs, held = tuple(with_text(doc, "") if doc.text else doc for doc in outcome.docs), b""
        if fields is not None:
            docs = shared_fields(docs, fields)
        stamp = file_stamp(outcome.digest, outcome.entry.mtime_ns) if outcome.digest and outcome.entry is not None \
            else 0
        return cls(docs, squeeze(orjson.dumps(texts)), outcome.partial or {}, held, stamp)

    def sharing(self, fields: dict[int, dict[str, Any]]) -> "Kept":
        """This file with its documents' ``fields`` maps shared through ``fields``."""
        return attrs.evolve(self, docs=shared_fields(self.docs, fields))

    def spilled(self, spill: "Spill") -> "Kept":
        """This file with its compressed texts written to ``spill`` (read back by :meth:`documents`)."""
        if type(self.texts) is not bytes or not self.texts:
            return self
        try:
            return attrs.evolve(self, texts=spill.put(self.texts))
        except OSError:  # a full or failing disk: the texts stay in memory, as they did before spills
            return self

    def documents(self) -> tuple[SourceDocument, ...]:
        texts = orjson.loads(unsqueeze(self.texts if type(self.texts) is bytes else self.texts.read()))
        if self.own:
            own = pickle.loads(unsqueeze(self.own))
            return tuple(remade(doc, text, fields if fields is not None else doc.fields)
                         for doc, text, fields in zip(self.docs, texts, own))
        return tuple(with_text(doc, text) if text else doc for doc, text in zip(self.docs, texts))


class Spill:
    """Kept files' compressed texts written out of memory: appended to an unnamed temporary file in ``directory``
    (the data directory's disk, where the parse cache lives, rather than a /tmp that may be memory), each read back
    once, for its file's detect batch.

    The companion keeps every file of a run until it is detected, and the texts were a third of that (58 MB of
    11k files of real code), needed by no corpus-wide detector; what was written stays in the page cache, which
    the kernel may reclaim, rather than in the process's memory. The file has no name, so nothing is left behind
    when the process ends, however it ends."""

    def __init__(self, directory: str | Path) -> None:
        self._file = tempfile.TemporaryFile(dir=directory)
        self._end = 0
        self._lock = threading.Lock()

    def put(self, data: bytes) -> "Spilled":
        with self._lock:
            at, self._end = self._end, self._end + len(data)
        written = os.pwrite(self._file.fileno(), data, at)
        if written != len(data):  # a full disk: the texts stay in memory as before
            raise OSError(f"wrote {written} of {len(data)} bytes")
        return Spilled(self, at, len(data))

    def read(self, at: int, size: int) -> bytes:
        return os.pread(self._file.fileno(), size, at)

    def close(self) -> None:
        self._file.close()


def open_spill(directory: str | None) -> Spill | None:
    """A spill in ``directory`` (a parse cache's), or None when there is none or it refuses one: the texts then
    stay in memory."""
    if directory is None:
        return None
    try:
        return Spill(directory)
    except OSError:
        return None


@attrs.frozen
class Spilled:
    """Bytes written to a :class:`Spill`; pickled, they are those bytes (a kept file sent elsewhere takes them)."""

    spill: Spill
    at: int
    size: int

    def read(self) -> bytes:
        return self.spill.read(self.at, self.size)

    def __reduce__(self) -> tuple[Any, ...]:
        return bytes, (self.read(),)


_DOCUMENT_FIELDS = ("doc_id", "dataset", "ax_path", "title", "text", "section", "kind", "mtime_ms", "format", "fields")
assert tuple(f.name for f in attrs.fields(SourceDocument)) == _DOCUMENT_FIELDS, "update with_text"


def with_text(doc: SourceDocument, text: str) -> SourceDocument:
    """``attrs.evolve(doc, text=text)`` at a fraction of its cost (a run makes one per document, twice)."""
    return remade(doc, text, doc.fields)


def remade(doc: SourceDocument, text: str, fields: dict[str, Any]) -> SourceDocument:
    """``attrs.evolve(doc, text=text, fields=fields)`` without evolve's per-call field walk."""
    return SourceDocument(doc.doc_id, doc.dataset, doc.ax_path, doc.title, text, doc.section, doc.kind,
                          doc.mtime_ms, doc.format, fields)
