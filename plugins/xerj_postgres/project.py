"""The typed edges table: every brain's live edge rows projected into ``xerj_edges`` in the writing transaction."""

from __future__ import annotations

from typing import Any

import orjson

from xerj_core.graph.brain import RESERVED_PREFIX
from xerj_core.store import keys
from xerj_postgres.kv import _IX_ROW, _delete_rows

_COLUMNS = ("src", "dst", "type", "valid_at", "invalid_at", "weight", "confidence", "trust")


def edge_indices(conn: Any) -> set[int]:
    """Index numbers of the brains' edges indices (``.xerj-<brain>-edges``), as this transaction sees them."""
    found = set()
    for k, v in conn.execute("SELECT k, v FROM xerj_kv WHERE db = 0"):  # db 0: the index records
        name = bytes(k)
        if name.startswith(RESERVED_PREFIX.encode()) and name.endswith(b"-edges"):
            found.add(orjson.loads(v)["ix"])
    return found


def _row(ix: int, row: int, doc: dict[str, Any]) -> tuple[Any, ...] | None:
    src, dst, kind = doc.get("src"), doc.get("dst"), doc.get("type")
    if not (isinstance(src, str) and isinstance(dst, str) and isinstance(kind, str)):
        return None  # the brain's meta record and anything else that is not an edge
    if "\x00" in src + dst + kind:
        return None  # text cannot hold NUL; such an edge is still in the store, only not in this table
    values = [doc.get(c) for c in _COLUMNS[3:]]
    for at in (0, 1):
        if not isinstance(values[at], int) or isinstance(values[at], bool):
            values[at] = None
    for at in (2, 3):
        if not isinstance(values[at], (int, float)) or isinstance(values[at], bool):
            values[at] = None
    if not isinstance(values[4], str) or "\x00" in values[4]:
        values[4] = None
    return (ix, row, src, dst, kind, *values)


def project_edges(conn: Any, changed: list[tuple[str, dict[bytes, bytes], list[bytes]]]) -> None:
    """Mirror the documents a transaction wrote to, or removed from, an edges index into ``xerj_edges``."""
    src = next(((puts, gone) for db, puts, gone in changed if db == "src"), None)
    if src is None:
        return
    puts, gone = src
    edges = edge_indices(conn)
    if not edges:
        return
    stale = [k for k in gone if int.from_bytes(k[:4], "big") in edges]
    stale += [k for k in puts if int.from_bytes(k[:4], "big") in edges]
    _delete_rows(conn, "xerj_edges", stale)
    header, start = keys.SRC_HEADER, keys.SRC_HEADER.size
    rows = []
    for key, blob in puts.items():
        ix, row = _IX_ROW.unpack(key)
        if ix not in edges:
            continue
        _version, id_len = header.unpack_from(blob)
        doc = orjson.loads(memoryview(blob)[start + id_len:])
        found = _row(ix, row, doc) if isinstance(doc, dict) else None
        if found is not None:
            rows.append(found)
    if rows:
        with conn.cursor().copy(f"COPY xerj_edges (ix, row, {', '.join(_COLUMNS)}) FROM STDIN") as copy:
            for found in rows:
                copy.write_row(found)
