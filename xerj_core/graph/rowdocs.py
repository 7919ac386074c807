"""Every sealed row's edge as ego lists it with evidence, packed per segment into mapped files: one slice per edge.

Ego with evidence lists each edge's whole stored document (evidence, detector,
any field a writer added) less a few bookkeeping fields, with its ``edge_id``.
Read from LMDB that is a get, a splice and a clean-up per edge. A sealed
segment's rows never change (a write adds a row, a compaction seals new
segments under a new stamp), so each row's listing is prepared once, in one
cursor pass over the segment's stored sources, as the JSON text of the edge up
to where ego adds ``hop`` and ``direction`` (a *fragment*), and published under
``<data>/views`` (see :mod:`.mapped`): page cache shared by every worker. The
sealed view then keeps, per edge in table order, where its fragment lies
(:data:`DOC_SPAN`), so 100 edges' evidence is 100 slices of mapped blobs and
one ``orjson.loads`` of their join. ``hop`` and ``direction`` follow each
fragment as text: a document already holding one of them keeps it in its own
place with ego's value, as JSON's repeated key decodes (the last value, in
the first key's place), which is what setting it on the decoded dict does.
A row with no fragment (a document that is not an object) is read as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from xerj_core.graph.segfiles import SegmentFiles
from xerj_core.store import IndexReader, Segment, keys

_FORMAT = 1  # of the published files

# The stored fields ego leaves out of an edge, and those it lists as null when the document has none (after
# ``edge_id``, ``hop`` and ``direction``, in this order).
LEFT_OUT = ("schema_version", "src_file", "src_format", "dst_format")
NULL_WHEN_ABSENT = ("invalid_at", "expired_at", "evidence")
UNCOVERED = 0xFF  # a row's ``nulls`` when it has no fragment (no live document, or a document placed otherwise)
# Where a sealed edge's fragment lies: ``lo`` and ``size`` in the blob of the view's segment ``seg``; ``nulls``:
# bit k set when the document lacks NULL_WHEN_ABSENT[k], or UNCOVERED.
DOC_SPAN = np.dtype([("lo", "<u4"), ("size", "<u2"), ("seg", "u1"), ("nulls", "u1")])
_MAX_LO = 2**32 - 1
_MAX_SIZE = 2**16 - 1
_MAX_SEGMENTS = 255


def fragment(doc_id: str, source: bytes | memoryview) -> tuple[bytes, int] | None:
    """The edge stored under ``doc_id`` with ``source`` as ego lists it, as JSON text up to ``hop``: ``{`` and its
    fields but ``LEFT_OUT`` in stored order, ``edge_id`` (in its own place if the document has one), no closing
    brace; with its ``nulls`` bits. None when the source is not a JSON object."""
    try:
        doc = orjson.loads(source)
    except orjson.JSONDecodeError:
        return None
    if type(doc) is not dict:
        return None
    for name in LEFT_OUT:
        doc.pop(name, None)
    doc["edge_id"] = doc_id
    nulls = 0
    for bit, name in enumerate(NULL_WHEN_ABSENT):
        if name not in doc:
            nulls |= 1 << bit
    return orjson.dumps(doc)[:-1], nulls


def record_fragment(record: bytes) -> tuple[bytes, int] | None:
    """:func:`fragment` of a stored source record (see :func:`keys.pack_source`)."""
    _version, doc_id, offset = keys.unpack_source_header(record)
    return fragment(doc_id, memoryview(record)[offset:])


class _Tails(dict):
    """(hop, followed out, nulls) -> the JSON closing an edge after its fragment, and a comma:
    ``,"hop":1,"direction":"out","evidence":null},``."""

    def __missing__(self, key: tuple[int, bool, int]) -> bytes:
        hop, out, nulls = key
        found = b',"hop":%d,"direction":"%s"' % (hop, b"out" if out else b"in")
        found += b"".join(b',"%s":null' % name.encode() for bit, name in enumerate(NULL_WHEN_ABSENT)
                          if nulls & (1 << bit))
        self[key] = found = found + b"},"
        return found


TAILS = _Tails()


def _read_segment(reader: IndexReader, segment: Segment) -> dict[str, np.ndarray]:
    """The segment's fragments: ``blob`` (their bytes, in row order), ``offsets`` (row ``start + i``'s fragment is
    ``blob[offsets[i]:offsets[i + 1]]``) and ``nulls`` (UNCOVERED for a row without one), from one cursor pass.

    :func:`fragment`, row by row, with its steps written out: a million rows pass through here."""
    prefix = keys.ix_key(reader.ix)
    first, stop = prefix + keys.u64(segment.start), prefix + keys.u64(segment.end)
    size = segment.end - segment.start
    blob = bytearray()  # grown in place, row after row (the cursor goes in row order): no list of pieces to join
    ends = np.zeros(size, np.int64)  # where each row's fragment ends in ``blob``; 0 for a row without one
    nulls = bytearray([UNCOVERED]) * size
    unpack, read_row, skip = keys.SRC_HEADER.unpack_from, keys.read_u64, len(prefix)
    begin, base = keys.SRC_HEADER.size, segment.start
    loads, dumps, decode_error = orjson.loads, orjson.dumps, orjson.JSONDecodeError
    left_out = LEFT_OUT
    invalid, expired, evidence = NULL_WHEN_ABSENT
    with reader.txn.cursor(db=reader.dbs["src"]) as cursor:
        if cursor.set_range(first):
            for key, value in cursor.iternext():
                if key >= stop:
                    break
                start = begin + unpack(value)[1]
                try:
                    doc_id = bytes(value[begin:start]).decode()
                    doc = loads(memoryview(value)[start:])
                except (UnicodeDecodeError, decode_error):
                    continue
                if type(doc) is not dict:
                    continue
                for name in left_out:
                    if name in doc:
                        del doc[name]
                doc["edge_id"] = doc_id
                local = read_row(key, skip) - base
                blob += dumps(doc)[:-1]
                ends[local] = len(blob)
                nulls[local] = (invalid not in doc) | ((expired not in doc) << 1) | ((evidence not in doc) << 2)
    offsets = np.zeros(size + 1, np.int64)
    np.maximum.accumulate(ends, out=offsets[1:])  # a row without a fragment ends where the one before it did
    return {"blob": np.frombuffer(blob, np.uint8), "offsets": offsets,
            "nulls": np.frombuffer(nulls, np.uint8).copy()}


class _Segment:
    """One segment's mapped fragments."""

    __slots__ = ("start", "end", "blob", "offsets", "nulls", "view")

    def __init__(self, segment: Segment, arrays: dict[str, np.ndarray]) -> None:
        self.start, self.end = segment.start, segment.end
        self.blob, self.offsets, self.nulls = arrays["blob"], arrays["offsets"], arrays["nulls"]
        self.view = memoryview(self.blob)


class RowDocs(SegmentFiles[_Segment]):
    """Per sealed segment, its rows' fragments: mapped from ``files`` when published, else read and published."""

    KIND = "docs"
    FORMAT = _FORMAT

    def _read(self, reader: IndexReader, segment: Segment) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {}, _read_segment(reader, segment)

    def _wrap(self, segment: Segment, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> _Segment:
        return _Segment(segment, arrays)

    def in_order(self, reader: IndexReader, rows: np.ndarray, alloc: Any = None) -> np.ndarray | None:
        """Each of the sealed ``rows``' :data:`DOC_SPAN` (``alloc(name, size, dtype)`` provides the array); a row
        outside every segment, or whose fragment does not fit the span's fields, is UNCOVERED. None when the
        layout has more segments than a span can name."""
        segments = reader.segments
        if len(segments) > _MAX_SEGMENTS:
            return None
        packs = [self._segment(reader, s) for s in segments]
        spans = alloc("doc_span", rows.size, DOC_SPAN) if alloc is not None else np.empty(rows.size, DOC_SPAN)
        spans["nulls"] = UNCOVERED
        spans["lo"] = spans["size"] = spans["seg"] = 0
        for lo, k, sel, found in self._groups(reader, rows):
            pack = packs[k]
            local = found - pack.start
            begin, end = pack.offsets[local], pack.offsets[local + 1]
            fits = (end <= _MAX_LO) & (end - begin <= _MAX_SIZE) & (pack.nulls[local] != UNCOVERED)
            sel, begin, end, local = (sel + lo)[fits], begin[fits], end[fits], local[fits]
            spans["lo"][sel] = begin
            spans["size"][sel] = end - begin
            spans["seg"][sel] = k
            spans["nulls"][sel] = pack.nulls[local]
        return spans

    def blobs(self, reader: IndexReader) -> list[memoryview]:
        """Each of ``reader``'s segments' fragment blob, in layout order (what a span's ``seg`` names)."""
        return [self._segment(reader, s).view for s in reader.segments]

