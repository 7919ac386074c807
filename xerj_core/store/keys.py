"""Key layouts of the LMDB sub-databases and the packed per-index state record."""

from __future__ import annotations

import struct
from itertools import repeat
from typing import Iterable

import attrs
import numpy as np

_IX = struct.Struct(">I")
_U64 = struct.Struct(">Q")
TAIL_SEGMENT = 0xFFFF_FFFF_FFFF_FFFF
NEXT_IX_KEY = b"\x00next_ix"


def ix_key(ix: int) -> bytes:
    return _IX.pack(ix)


def row_key(ix: int, row: int) -> bytes:
    return _IX.pack(ix) + _U64.pack(row)


u64 = _U64.pack  # value -> 8 big-endian bytes; the struct's own method, so C-level maps over rows stay in C
_ROW = struct.Struct(">IQ")


def row_keys(ix: int, rows: Iterable[int]) -> list[bytes]:
    """``row_key(ix, row)`` of each of ``rows``: one struct call per row, mapped in C."""
    return list(map(_ROW.pack, repeat(ix), rows))


_ROW_ARRAY = np.dtype([("ix", ">u4"), ("row", ">u8")])


def row_key_range(ix: int, start: int, stop: int) -> list[bytes]:
    """``row_keys(ix, range(start, stop))`` made by numpy: the keys laid out in one array whose 12-byte items
    ``tolist`` hands back as bytes (no int or struct call per row)."""
    found = np.empty(stop - start, _ROW_ARRAY)
    found["ix"] = ix
    found["row"] = np.arange(start, stop, dtype=np.uint64)
    return found.view("V12").tolist()  # type: ignore[no-any-return]


def read_u64(blob: bytes, offset: int = 0) -> int:
    return _U64.unpack_from(blob, offset)[0]


def seg_key(ix: int, start: int) -> bytes:
    return _IX.pack(ix) + _U64.pack(start)


def col_key(ix: int, start: int, field: str) -> bytes:
    return seg_key(ix, start) + field.encode()


def post_prefix(ix: int, start: int, field: str) -> bytes:
    return seg_key(ix, start) + field.encode() + b"\x00"


def dict_key(ix: int, name: str, term: str) -> bytes:
    return _IX.pack(ix) + name.encode() + b"\x00" + term.encode()


def dictr_key(ix: int, name: str, ordinal: int) -> bytes:
    return _IX.pack(ix) + name.encode() + b"\x00" + _IX.pack(ordinal)


def dictn_key(ix: int, name: str) -> bytes:
    return _IX.pack(ix) + name.encode()


def skipped_key(ix: int) -> bytes:
    """The ``aux`` record counting terms and keyword values an index left out for their length."""
    return _IX.pack(ix) + b"\x00skipped"


def id_key(ix: int, doc_id: str) -> bytes:
    return _IX.pack(ix) + doc_id.encode()


_STATE = struct.Struct(">QQQQQQQ")
_STATE_BEFORE_EPOCHS = struct.Struct(">QQQQQQ")


@attrs.define
class IndexState:
    """Counters of one index, rewritten by every write transaction that touches it.

    ``generation`` is what every in-process cache is keyed on; ``epoch`` moves
    when a compaction renumbers rows, so a cache drops everything it knew by row.
    """

    generation: int = 0
    next_row: int = 0
    sealed_rows: int = 0
    dead_seq: int = 0
    live: int = 0
    mapping_version: int = 0
    epoch: int = 0

    def pack(self) -> bytes:
        return _STATE.pack(self.generation, self.next_row, self.sealed_rows, self.dead_seq, self.live,
                           self.mapping_version, self.epoch)

    @classmethod
    def unpack(cls, blob: bytes) -> "IndexState":
        if len(blob) == _STATE_BEFORE_EPOCHS.size:  # written before compaction existed: epoch 0
            return cls(*_STATE_BEFORE_EPOCHS.unpack(blob))
        return cls(*_STATE.unpack(blob))


SRC_HEADER = struct.Struct(">QH")  # version, length of the _id


def pack_source(version: int, doc_id: str, source_json: bytes) -> bytes:
    raw_id = doc_id.encode()
    return SRC_HEADER.pack(version, len(raw_id)) + raw_id + source_json


def unpack_source_header(blob: bytes) -> tuple[int, str, int]:
    """``(version, _id, offset of the JSON)`` of a stored source record."""
    version, id_len = SRC_HEADER.unpack_from(blob)
    start = SRC_HEADER.size
    return version, blob[start:start + id_len].decode(), start + id_len
