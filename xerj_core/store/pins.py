"""Pinned snapshots: search contexts (scroll, point in time) recorded in LMDB so any process can reopen them.

Why not hold an LMDB read transaction: a read transaction belongs to the process
that began it, and gunicorn sends the next page of a scroll to whichever worker
is free; a long-held reader also stops LMDB from reusing pages, so the file
grows for as long as a client forgets to close its scroll. Instead a context
records, per index, the two counters that define a generation's visible rows:

* ``n_rows``: rows are numbered in append order and a seal or merge keeps row
  numbers, so a row at or above ``n_rows`` was written later. A compaction
  renumbers rows, so it waits while an index is pinned (``is_pinned``);
* ``dead_seq``: the deletion log is append-only, so a row whose death is logged
  at or after ``dead_seq`` was alive in the snapshot.

Columns and postings keep dead rows until a compaction, which never runs on a
pinned index, so everything a query reads is still there. Only ``_source`` is removed when a row dies; while
an index has an open context (``P`` key, a count), a dying row's source is kept
aside under an ``R`` key and dropped when the index's last context closes.

Every key here lives in the ``aux`` sub-database: ``C<id>`` a context record
(JSON), ``P<ix>`` the number of open contexts pinning index ``ix`` and the
latest expiry among them, ``R<ix><row>`` a retired source. Past that expiry no
context can read a source any more, so none is kept aside even before the
expired contexts are swept: retention is bounded by the keep-alive.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Iterator

import lmdb
import orjson

from xerj_core.store import keys

_PINNED = struct.Struct(">QQ")  # open contexts pinning the index, the latest expiry among them (epoch ms)
CONTEXT = b"C"
PINNED = b"P"
RETIRED = b"R"


def _context_key(context_id: str) -> bytes:
    return CONTEXT + context_id.encode()


def _pinned(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int) -> tuple[int, int]:
    blob = raw.get(PINNED + keys.ix_key(ix), db=dbs["aux"])
    return _PINNED.unpack(blob) if blob else (0, 0)


def is_pinned(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int) -> bool:
    """Does an open scroll or point in time, not yet expired, pin index ``ix``?"""
    count, expires = _pinned(raw, dbs, ix)
    return bool(count) and expires >= time.time() * 1000


def retire_source(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int, row: int) -> None:
    """Keep the source of ``row`` (about to be deleted) while a live context pins index ``ix``."""
    if not is_pinned(raw, dbs, ix):
        return
    blob = raw.get(keys.row_key(ix, row), db=dbs["src"])
    if blob is not None:
        raw.put(RETIRED + keys.row_key(ix, row), blob, db=dbs["aux"])


def retired_source(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int, row: int) -> bytes | None:
    return raw.get(RETIRED + keys.row_key(ix, row), db=dbs["aux"])


def drop_index(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int) -> None:
    """Forget the pins and retired sources of a deleted index (contexts on it then answer not found)."""
    raw.delete(PINNED + keys.ix_key(ix), db=dbs["aux"])
    from xerj_core.store.write import _delete_prefix  # write imports this module; import at use

    _delete_prefix(raw, dbs["aux"], RETIRED + keys.ix_key(ix))


def _adjust(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int, delta: int, expires: int = 0) -> None:
    count, latest = _pinned(raw, dbs, ix)
    count += delta
    if count > 0:
        raw.put(PINNED + keys.ix_key(ix), _PINNED.pack(count, max(latest, expires)), db=dbs["aux"])
    else:
        drop_index(raw, dbs, ix)


def pin(raw: lmdb.Transaction, dbs: dict[str, Any], name: str, expires: int) -> dict[str, Any]:
    """The snapshot counters of index ``name`` as it is in ``raw`` (a write transaction); counts one pin."""
    blob = raw.get(name.encode(), db=dbs["indices"])
    if blob is None:
        from xerj_core.errors import IndexNotFound

        raise IndexNotFound(name)
    meta = orjson.loads(blob)
    state = keys.IndexState.unpack(raw.get(keys.ix_key(meta["ix"]), db=dbs["state"]))
    _adjust(raw, dbs, meta["ix"], +1, expires)
    return {"index": name, "ix": meta["ix"], "uuid": meta["uuid"], "n_rows": state.next_row,
            "dead_seq": state.dead_seq}


def put_context(raw: lmdb.Transaction, dbs: dict[str, Any], context_id: str, record: dict[str, Any]) -> None:
    """Write a context record; its pinned indices keep sources aside at least until its expiry."""
    raw.put(_context_key(context_id), orjson.dumps(record), db=dbs["aux"])
    for item in record.get("pins", ()):
        count, latest = _pinned(raw, dbs, item["ix"])
        if count and record["expires"] > latest:
            raw.put(PINNED + keys.ix_key(item["ix"]), _PINNED.pack(count, record["expires"]), db=dbs["aux"])


def get_context(raw: lmdb.Transaction, dbs: dict[str, Any], context_id: str) -> dict[str, Any] | None:
    blob = raw.get(_context_key(context_id), db=dbs["aux"])
    return None if blob is None else orjson.loads(blob)


def delete_context(raw: lmdb.Transaction, dbs: dict[str, Any], context_id: str) -> bool:
    """Remove a context and release its pins; False when there was none."""
    record = get_context(raw, dbs, context_id)
    if record is None:
        return False
    raw.delete(_context_key(context_id), db=dbs["aux"])
    for item in record.get("pins", ()):
        current = raw.get(item["index"].encode(), db=dbs["indices"])
        # A pin of an index deleted (or deleted and re-created) since is already gone with it.
        if current is not None and orjson.loads(current)["ix"] == item["ix"]:
            _adjust(raw, dbs, item["ix"], -1)
    return True


def contexts(raw: lmdb.Transaction, dbs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    with raw.cursor(db=dbs["aux"]) as cur:
        if not cur.set_range(CONTEXT):
            return
        for key, value in cur:
            if not key.startswith(CONTEXT):
                break
            yield key[len(CONTEXT):].decode(), orjson.loads(value)


def killed_since(raw: lmdb.Transaction, dbs: dict[str, Any], ix: int, dead_seq: int, until: int) -> list[int]:
    """Rows whose deaths are logged at sequence numbers ``dead_seq`` .. ``until - 1``."""
    if until <= dead_seq:
        return []
    with raw.cursor(db=dbs["dead"]) as cur:
        if not cur.set_key(keys.row_key(ix, dead_seq)):
            return []
        return [keys.read_u64(v) for _i, (_k, v) in zip(range(until - dead_seq), cur)]
