"""The LMDB-shaped transaction and cursor layer over PostgreSQL tables that xerj's store engine runs on.

xerj's store (``xerj_core.store``) speaks to named key-value databases through
a handful of LMDB calls: ``get``, ``put`` (``overwrite=False`` included),
``delete``, ``pop`` and ordered cursors (``set_range``, ``set_key``, iteration,
``delete``). :class:`Txn` offers exactly those calls over PostgreSQL, so the
engine itself (segments, postings, columns, BM25, kNN, hops, the bitemporal
filter) runs unchanged and its answers are the LMDB backend's by construction.

Each named database is a :class:`Table`: most share ``xerj_kv`` (bytea keys in
LMDB's order), while ``src`` (documents) and ``ids`` (the id map) are real
tables, ``xerj_docs`` and ``xerj_ids``, whose rows a SQL client reads directly.

A write transaction holds PostgreSQL's single-writer advisory lock, so the
tables cannot change under it; its writes are kept in an overlay that reads and
cursors merge in, and are flushed at commit with ``COPY``. A read transaction is
a ``REPEATABLE READ`` snapshot; what it fetched is remembered until it ends.
"""

from __future__ import annotations

import bisect
import queue
import struct
import threading
from typing import Any, Callable, Iterable, Iterator

from xerj_core.store import keys

_BYTES = {bytes}
_DELETED = object()
_MISSING = object()
# Rows a cursor fetches per round trip; sequential reads (a seal reading the tail) hit the batch.
SCAN_BATCH = 512
SCAN_BATCH_MAX = 32768
PROBE_BATCH = 8  # rows a cursor fetches first when it leaves a segment it read from memory
_IX_ROW = struct.Struct(">IQ")
SEGMENT_KEY = 12  # a sealed segment's key prefix in cols and post: the index (4 bytes) and its first row (8)
# COPY's binary format (the server's own layout): a signature, flags and an empty extension area; each tuple its
# field count and each field its length and bytes; -1 at the end. Built here a chunk at a time with one join,
# several times cheaper per row than psycopg's write_row.
_COPY_HEAD = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_END = b"\xff\xff"
_COPY_CHUNK = 4096  # tuples per write
_I4 = struct.Struct(">i")
_KV_TUPLE = struct.Struct(">hihi")  # 3 fields; db (int2) with its length; the key's length
_DOC_TUPLE = struct.Struct(">hiIiqi")  # 5 fields; ix (int4); row (int8); the id's length
_ID_TUPLE = struct.Struct(">hiIi")  # 3 fields; ix (int4); the id's length
_VERSION = struct.Struct(">iqi")  # version (int8) with its length; the source's length
_ROW8 = struct.Struct(">iq")  # an int8 field with its length


def copy_binary(conn: Any, statement: str, tuples: Iterable[bytes]) -> None:
    """``COPY ... FROM STDIN (FORMAT BINARY)`` of tuples already encoded (see :data:`_COPY_HEAD`)."""
    with conn.cursor().copy(statement) as copy:
        chunk = [_COPY_HEAD]
        for encoded in tuples:
            chunk.append(encoded)
            if len(chunk) >= _COPY_CHUNK:
                copy.write(b"".join(chunk))
                chunk = []
        chunk.append(_COPY_END)
        copy.write(b"".join(chunk))


class Table:
    """One named database in the shared ``xerj_kv`` table: opaque bytea keys and values."""

    SCOPE_BYTES = 0  # when :meth:`scope` is the key's first N bytes (for keys of at least N bytes): N

    def __init__(self, number: int) -> None:
        self.number = number

    def get(self, conn: Any, key: bytes) -> bytes | None:
        row = conn.execute("SELECT v FROM xerj_kv WHERE db = %s AND k = %s", (self.number, key), binary=True).fetchone()
        return None if row is None else row[0]

    def fetch(self, conn: Any, key: bytes) -> tuple[bytes | None, dict[str, dict[bytes, bytes]]]:
        """``key``'s value, and rows of other databases the same round trip brought (which a read soon needs)."""
        return self.get(conn, key), {}

    def get_many(self, conn: Any, found: list[bytes]) -> dict[bytes, bytes]:
        return self.collect(self.send_many(conn, found))

    def send_many(self, conn: Any, found: list[bytes]) -> list[Any]:
        """Send the statements fetching ``found`` without reading their rows (so they can share a pipeline);
        :meth:`collect` reads them."""
        return [conn.execute("SELECT k, v FROM xerj_kv WHERE db = %s AND k = ANY(%b)", (self.number, found),
                             binary=True)]

    def collect(self, sent: list[Any]) -> dict[bytes, bytes]:
        return {bytes(k): v for cur in sent for k, v in cur}

    def scan(self, conn: Any, start: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        rows = conn.execute("SELECT k, v FROM xerj_kv WHERE db = %s AND k >= %s ORDER BY k LIMIT %s",
                            (self.number, start, limit), binary=True)
        return [(bytes(k), v) for k, v in rows]

    def scope(self, key: bytes) -> bytes | None:
        """The key range :meth:`load` fetches whole once a transaction misses often in it (None: never loaded)."""
        return None

    def load(self, conn: Any, scope: bytes) -> dict[bytes, bytes]:
        """Every row whose key starts with ``scope``."""
        upper = _after(scope)
        rows = conn.execute("SELECT k, v FROM xerj_kv WHERE db = %s AND k >= %s" + (" AND k < %s" if upper else ""),
                            (self.number, scope, upper) if upper else (self.number, scope), binary=True)
        return {bytes(k): v for k, v in rows}

    def _above(self, conn: Any, found: list[bytes]) -> set[bytes]:
        """Which of ``found`` sort after every stored key of their index (so cannot be stored): one ``max`` per index.

        Rows, segments and log entries are numbered upwards, so most keys a write
        adds are past the end of their index's range and need no delete first.
        """
        by_ix: dict[bytes, list[bytes]] = {}
        for key in found:
            by_ix.setdefault(key[:4], []).append(key)
        out: set[bytes] = set()
        for ix, group in by_ix.items():
            upper = _after(ix)
            row = conn.execute("SELECT k FROM xerj_kv WHERE db = %s AND k >= %s" + (" AND k < %s" if upper else "")
                               + " ORDER BY k DESC LIMIT 1", (self.number, ix, upper) if upper else (self.number, ix)
                               , binary=True).fetchone()
            top = None if row is None else bytes(row[0])
            out.update(group if top is None else (k for k in group if k > top))
        return out

    def last(self, conn: Any, ix: bytes) -> bytes | None:
        """The largest stored key starting with ``ix`` (an index's 4 bytes), None when there is none."""
        upper = _after(ix)
        row = conn.execute("SELECT k FROM xerj_kv WHERE db = %s AND k >= %s" + (" AND k < %s" if upper else "")
                           + " ORDER BY k DESC LIMIT 1", (self.number, ix, upper) if upper else (self.number, ix)
                           , binary=True).fetchone()
        return None if row is None else bytes(row[0])

    def clear(self, conn: Any, prefixes: Iterable[bytes]) -> None:
        """Delete every row whose key starts with one of ``prefixes``, one statement each (no key is read)."""
        for prefix in prefixes:
            upper = _after(prefix)
            conn.execute("DELETE FROM xerj_kv WHERE db = %s AND k >= %s" + (" AND k < %s" if upper else ""),
                         (self.number, prefix, upper) if upper else (self.number, prefix))

    def flush(self, conn: Any, puts: dict[bytes, bytes], gone: list[bytes], fresh: set[bytes]) -> None:
        """Apply the overlay: ``gone`` keys deleted, ``puts`` written (``fresh`` ones known absent before)."""
        unknown = [k for k in puts if k not in fresh]
        if len(unknown) > 8:
            above = self._above(conn, unknown)
            unknown = [k for k in unknown if k not in above]
        stale = gone + unknown
        if stale:
            conn.execute("DELETE FROM xerj_kv WHERE db = %s AND k = ANY(%b)", (self.number, stale))
        if puts:
            head, i4 = _KV_TUPLE.pack, _I4.pack
            number = self.number
            copy_binary(conn, "COPY xerj_kv (db, k, v) FROM STDIN (FORMAT BINARY)",
                        (b"".join((head(3, 2, number, len(k)), k, i4(len(v)), v)) for k, v in puts.items()))


def int8_array(numbers: Iterable[int]) -> str:
    """``numbers`` as an array literal (``{1,2,3}``), cast in the statement: psycopg adapts a Python list item
    by item in Python, a string in C (ego sends a hundred row numbers per read)."""
    return "{" + ",".join(map(str, numbers)) + "}"


def _after(prefix: bytes) -> bytes | None:
    """The smallest key above every key starting with ``prefix`` (None when there is none)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


class DictTable(Table):
    """``dict``: keyword terms to ordinals, ``ix + dictionary + NUL + term``; a bulk write loads a dictionary
    whole once it misses often, so new terms cost no round trip each."""

    def scope(self, key: bytes) -> bytes | None:
        cut = key.find(b"\x00", 4)
        return key[:cut + 1] if cut >= 0 else None


def _ix_row(key: bytes) -> tuple[int, int]:
    """``(ix, row)`` of a 12-byte row key; a shorter key (a prefix) is the smallest row key at or after it."""
    return _IX_ROW.unpack(key[:12].ljust(12, b"\x00"))


class DocsTable(Table):
    """``src``: one row per stored document, ``(ix, row) → (doc_id, version, source json)``.

    The source is PostgreSQL ``json``, which keeps the text exactly as written
    (key order, number spelling), so ``_source`` comes back byte for byte as
    from LMDB; ``source::jsonb`` queries it.
    """

    def __init__(self) -> None:
        super().__init__(-1)

    @staticmethod
    def _blob(version: int, doc_id: bytes, source: bytes) -> bytes:
        return keys.SRC_HEADER.pack(version, len(doc_id)) + doc_id + source

    def get(self, conn: Any, key: bytes) -> bytes | None:
        if len(key) != 12:
            return None
        row = conn.execute("SELECT version, doc_id, source FROM xerj_docs WHERE ix = %s AND row = %s",
                           _ix_row(key), binary=True).fetchone()
        return None if row is None else self._blob(*row)

    def send_many(self, conn: Any, found: list[bytes]) -> list[Any]:
        by_ix: dict[int, list[int]] = {}
        for key in found:
            if len(key) == 12:
                ix, row = _IX_ROW.unpack(key)
                by_ix.setdefault(ix, []).append(row)
        return [(ix, conn.execute("SELECT row, version, doc_id, source FROM xerj_docs WHERE ix = %s "
                                  "AND row = ANY(%s::int8[])", (ix, int8_array(rows)), binary=True))
                for ix, rows in by_ix.items()]

    def collect(self, sent: list[Any]) -> dict[bytes, bytes]:
        pack, blob = _IX_ROW.pack, self._blob
        return {pack(ix, row): blob(version, doc_id, source) for ix, cur in sent
                for row, version, doc_id, source in cur}

    def last(self, conn: Any, ix: bytes) -> bytes | None:
        number = _IX_ROW.unpack(ix + bytes(8))[0]
        top = conn.execute("SELECT max(row) FROM xerj_docs WHERE ix = %s", (number,), binary=True).fetchone()[0]
        return None if top is None else _IX_ROW.pack(number, top)

    def scan(self, conn: Any, start: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        rows = conn.execute("SELECT ix, row, version, doc_id, source FROM xerj_docs WHERE (ix, row) >= (%s, %s) "
                            "ORDER BY ix, row LIMIT %s", (*_ix_row(start), limit), binary=True)
        return [(_IX_ROW.pack(ix, row), self._blob(version, doc_id, source)) for ix, row, version, doc_id, source
                in rows]

    def flush(self, conn: Any, puts: dict[bytes, bytes], gone: list[bytes], fresh: set[bytes]) -> None:
        unknown = [k for k in puts if k not in fresh]
        if unknown:  # rows past an index's last stored row are new (rows are numbered upwards)
            tops = {}
            for ix in {_IX_ROW.unpack(k)[0] for k in unknown}:
                tops[ix] = conn.execute("SELECT max(row) FROM xerj_docs WHERE ix = %s", (ix,),
                                        binary=True).fetchone()[0]
            unknown = [k for k in unknown if tops[_IX_ROW.unpack(k)[0]] is not None
                       and _IX_ROW.unpack(k)[1] <= tops[_IX_ROW.unpack(k)[0]]]
        stale = gone + unknown
        _delete_rows(conn, "xerj_docs", stale)
        if puts:
            header, start = keys.SRC_HEADER, keys.SRC_HEADER.size
            unkey, unhead, head, tail = _IX_ROW.unpack, header.unpack_from, _DOC_TUPLE.pack, _VERSION.pack

            def encoded(key: bytes, blob: bytes) -> bytes:
                ix, row = unkey(key)
                version, id_len = unhead(blob)
                cut = start + id_len
                # json's binary form is its text, sent as stored
                return b"".join((head(5, 4, ix, 8, row, id_len), blob[start:cut], tail(8, version, len(blob) - cut),
                                 blob[cut:]))

            copy_binary(conn, "COPY xerj_docs (ix, row, doc_id, version, source) FROM STDIN (FORMAT BINARY)",
                        (encoded(k, v) for k, v in puts.items()))


class _Text(bytes):
    """JSON text already encoded: written to a ``json`` column as it is (see :class:`_TextDumper`)."""


def register_text(adapters: Any) -> None:
    """Teach ``adapters`` to send :class:`_Text` as json text without decoding it into a str first."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class _TextDumper(Dumper):
        format = Format.BINARY  # json's binary form is its text
        oid = adapters.types["json"].oid

        def dump(self, obj: bytes) -> bytes:
            return obj

    adapters.register_dumper(_Text, _TextDumper)


def _delete_rows(conn: Any, table: str, found: list[bytes]) -> None:
    by_ix: dict[int, list[int]] = {}
    for key in found:
        ix, row = _IX_ROW.unpack(key)
        by_ix.setdefault(ix, []).append(row)
    for ix, rows in by_ix.items():
        conn.execute(f"DELETE FROM {table} WHERE ix = %s AND row = ANY(%s::int8[])", (ix, int8_array(rows)))


class IdsTable(Table):
    """``ids``: the id map, ``(ix, doc_id) → row``; ``doc_id`` is the id's UTF-8 bytes (``bytea``: an id may hold
    any character, NUL included, and sorts bytewise as LMDB's keys do)."""

    def __init__(self) -> None:
        super().__init__(-2)

    @staticmethod
    def _split(key: bytes) -> tuple[int, bytes]:
        return struct.unpack(">I", key[:4].ljust(4, b"\x00"))[0], key[4:]

    SCOPE_BYTES = 4

    def scope(self, key: bytes) -> bytes | None:
        return key[:4] if len(key) >= 4 else None

    def load(self, conn: Any, scope: bytes) -> dict[bytes, bytes]:
        rows = conn.execute("SELECT doc_id, row FROM xerj_ids WHERE ix = %s", (self._split(scope)[0],), binary=True)
        return {scope + doc_id: keys.u64(row) for doc_id, row in rows}

    def get(self, conn: Any, key: bytes) -> bytes | None:
        row = conn.execute("SELECT row FROM xerj_ids WHERE ix = %s AND doc_id = %s", self._split(key),
                           binary=True).fetchone()
        return None if row is None else keys.u64(row[0])

    def fetch(self, conn: Any, key: bytes) -> tuple[bytes | None, dict[str, dict[bytes, bytes]]]:
        """A read looks an id up to read its document next: both come back in one round trip."""
        ix, doc_id = self._split(key)
        row = conn.execute("SELECT i.row, d.version, d.doc_id, d.source FROM xerj_ids i LEFT JOIN xerj_docs d "
                           "ON d.ix = i.ix AND d.row = i.row WHERE i.ix = %s AND i.doc_id = %s", (ix, doc_id),
                           binary=True).fetchone()
        if row is None:
            return None, {}
        found, version, stored_id, source = row
        extra = {} if version is None else {"src": {_IX_ROW.pack(ix, found): DocsTable._blob(version, stored_id, source)}}
        return keys.u64(found), extra

    def send_many(self, conn: Any, found: list[bytes]) -> list[Any]:
        by_ix: dict[int, list[bytes]] = {}
        for key in found:
            ix, doc_id = self._split(key)
            by_ix.setdefault(ix, []).append(doc_id)
        return [(ix, conn.execute("SELECT doc_id, row FROM xerj_ids WHERE ix = %s AND doc_id = ANY(%b)", (ix, ids),
                                  binary=True))
                for ix, ids in by_ix.items()]

    def collect(self, sent: list[Any]) -> dict[bytes, bytes]:
        return {keys.ix_key(ix) + bytes(doc_id): keys.u64(row) for ix, cur in sent for doc_id, row in cur}

    def scan(self, conn: Any, start: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        rows = conn.execute("SELECT ix, doc_id, row FROM xerj_ids WHERE (ix, doc_id) >= (%s, %s) "
                            "ORDER BY ix, doc_id LIMIT %s", (*self._split(start), limit), binary=True)
        return [(keys.ix_key(ix) + doc_id, keys.u64(row)) for ix, doc_id, row in rows]

    def flush(self, conn: Any, puts: dict[bytes, bytes], gone: list[bytes], fresh: set[bytes]) -> None:
        stale: dict[int, list[bytes]] = {}
        for key in gone + [k for k in puts if k not in fresh]:
            ix, doc_id = self._split(key)
            stale.setdefault(ix, []).append(doc_id)
        for ix, ids in stale.items():
            conn.execute("DELETE FROM xerj_ids WHERE ix = %s AND doc_id = ANY(%b)", (ix, ids))
        if puts:
            head, row8 = _ID_TUPLE.pack, _ROW8.pack
            copy_binary(conn, "COPY xerj_ids (ix, doc_id, row) FROM STDIN (FORMAT BINARY)",
                        (b"".join((head(3, 4, int.from_bytes(k[:4], "big"), len(k) - 4), k[4:],
                                   row8(8, keys.read_u64(v)))) for k, v in puts.items()))


class _Overlay:
    """A write transaction's pending changes to one database, with the sorted key list cursors walk."""

    __slots__ = ("values", "_sorted", "_unsorted")

    def __init__(self) -> None:
        self.values: dict[bytes, Any] = {}  # key -> bytes, or _DELETED
        self._sorted: list[bytes] = []
        self._unsorted: list[bytes] = []

    def set(self, key: bytes, value: Any) -> None:
        if key not in self.values:
            self._unsorted.append(key)
        self.values[key] = value

    def sorted_keys(self) -> list[bytes]:
        if self._unsorted:
            if len(self._unsorted) < 32:
                for key in self._unsorted:
                    bisect.insort(self._sorted, key)
            else:
                self._sorted = sorted(self.values)
            self._unsorted = []
        return self._sorted


class WriteCache:
    """What this process knows of the committed tables, kept across its write transactions while no other
    process writes (the commit counter says so): the id map and dictionaries an ingest keeps looking up."""

    DBS = ("ids", "dict", "dictn", "dictr", "indices", "state", "mappings")
    LIMIT = 4_000_000  # entries; past this it starts over rather than grow without bound

    def __init__(self) -> None:
        self.seq: int | None = None
        self.values: dict[str, dict[bytes, Any]] = {db: {} for db in self.DBS}
        self.complete: dict[str, set[bytes]] = {db: set() for db in self.DBS}
        self.segments = SegmentCache()

    def clear(self) -> None:
        for db in self.DBS:
            self.values[db].clear()
            self.complete[db].clear()
        self.segments.clear()

    def adopt(self, seq: int) -> None:
        """Start a write transaction whose lock-holding commit counter read ``seq`` (before its own bump)."""
        if self.seq != seq or sum(map(len, self.values.values())) > self.LIMIT:
            self.clear()
        self.seq = None  # until this transaction commits

    def committed(self, seq: int, changed: list[tuple[str, dict[bytes, bytes], list[bytes]]],
                  segments: dict[str, tuple[tuple[bytes, ...], set[bytes]]] | None = None) -> None:
        """After the commit of a transaction that began with :meth:`adopt`: what it wrote (``changed``) and, for
        the segment databases, the prefixes it cleared and the segments it knows it wrote whole (Txn.flush)."""
        for db, puts, gone in changed:
            known = self.values.get(db)
            if known is not None:
                known.update(puts)
                known.update(dict.fromkeys(gone))
            elif db in SegmentCache.DBS:
                cleared, whole = (segments or {}).get(db, ((), set()))
                self.segments.committed(db, puts, gone, cleared, whole)
        self.segments.trim()
        self.seq = seq


class SegmentCache:
    """The committed columns and postings of the sealed segments this process wrote, segment by segment, kept
    while no other process writes (with :class:`WriteCache`): a merge reads back the segments it rewrites,
    and reading them here saves the server detoasting them and this process decoding them off the wire.

    A segment is kept only when its whole content is known: this process cleared it (or found nothing stored
    under it) and wrote it, or kept it whole since. Past :data:`LIMIT` bytes the segments at the lowest row
    numbers go first: the full ones, which are never merged again.
    """

    DBS = ("cols", "post")
    LIMIT = 256 << 20

    def __init__(self) -> None:
        self.scopes: dict[str, dict[bytes, dict[bytes, bytes]]] = {db: {} for db in self.DBS}
        self._sizes: dict[tuple[str, bytes], int] = {}
        self._sorted: dict[tuple[str, bytes], tuple[list[tuple[bytes, bytes]], list[bytes]]] = {}

    def clear(self) -> None:
        for scopes in self.scopes.values():
            scopes.clear()
        self._sizes.clear()
        self._sorted.clear()

    def get(self, db: str, key: bytes) -> dict[bytes, bytes] | None:
        """The known content of ``key``'s segment in ``db`` (None: not known here)."""
        scopes = self.scopes.get(db)
        return scopes.get(key[:SEGMENT_KEY]) if scopes and len(key) >= SEGMENT_KEY else None

    def items(self, db: str, scope: bytes) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
        """A known segment's rows in key order, and their keys."""
        found = self._sorted.get((db, scope))
        if found is None:
            rows = sorted(self.scopes[db][scope].items())
            found = self._sorted[db, scope] = (rows, [k for k, _v in rows])
        return found

    def committed(self, db: str, puts: dict[bytes, bytes], gone: list[bytes], cleared: tuple[bytes, ...],
                  whole: set[bytes]) -> None:
        scopes = self.scopes[db]
        for prefix in cleared:
            for scope in [s for s in scopes if s.startswith(prefix[:SEGMENT_KEY])]:
                if len(prefix) <= SEGMENT_KEY:
                    self._drop(db, scope)
                else:  # part of one segment (a field's keys): the rest of it is still known
                    contents = scopes[scope]
                    for key in [k for k in contents if k.startswith(prefix)]:
                        del contents[key]
                    self._touch(db, scope)
        for scope in whole:
            if scope not in scopes:
                scopes[scope] = {}
        touched = set()
        for key, value in puts.items():
            scope = key[:SEGMENT_KEY]
            contents = scopes.get(scope)
            if contents is not None:
                contents[key] = value
                touched.add(scope)
        for key in gone:
            contents = scopes.get(key[:SEGMENT_KEY])
            if contents is not None and contents.pop(key, None) is not None:
                touched.add(key[:SEGMENT_KEY])
        for scope in touched | whole:
            self._touch(db, scope)

    def _touch(self, db: str, scope: bytes) -> None:
        self._sorted.pop((db, scope), None)
        self._sizes[db, scope] = sum(map(len, self.scopes[db][scope].values()))

    def _drop(self, db: str, scope: bytes) -> None:
        del self.scopes[db][scope]
        self._sizes.pop((db, scope), None)
        self._sorted.pop((db, scope), None)

    def trim(self) -> None:
        total = sum(self._sizes.values())
        if total <= self.LIMIT:
            return
        for db, scope in sorted(self._sizes, key=lambda pair: pair[1][4:]):  # by start row, lowest first
            total -= self._sizes[db, scope]
            self._drop(db, scope)
            if total <= self.LIMIT * 3 // 4:
                return


class Streamer:
    """Rows a write transaction adds, sent to their tables on the transaction's connection by a thread of their
    own while the engine goes on preparing the rest (its reads then go through a second connection).

    Only rows the committed tables cannot hold are sent (a new document's row, its id, its tail record), so
    each is a plain ``COPY`` with nothing to delete first; the transaction's final flush sends the rest and
    deletes again any row sent here that the transaction later changed. The server ingests one part while
    the client prepares the next: on a machine with two cores they overlap.
    """

    def __init__(self, conn: Any, tables: dict[str, Table]) -> None:
        self.conn = conn
        self.tables = tables
        self._queue: queue.SimpleQueue[tuple[str, dict[bytes, bytes]] | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="xerj-pg-stream", daemon=True)
        self._thread.start()

    def send(self, db: str, puts: dict[bytes, bytes]) -> None:
        self._queue.put((db, puts))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                db, puts = item
                try:
                    self.tables[db].flush(self.conn, puts, [], set(puts))
                except BaseException as exc:  # raised in the transaction's thread by finish()
                    self._error = exc

    def finish(self) -> None:
        """Wait until everything sent is in the tables; a failure to send is raised here."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


class Txn:
    """A transaction with LMDB's calls over PostgreSQL; see the module docstring.

    ``dbs`` names the tables (the store's named databases). A read transaction
    caches what it fetched (its snapshot never changes); a write transaction
    also caches, since it holds the single-writer lock and keeps its own writes
    in the overlay until :meth:`flush`, and with ``cache`` it shares what it
    read of the committed tables with the process's later write transactions.
    """

    # The store engine's batch paths (xerj_core.store.write._batch_calls) may use Cursor.getmulti.
    batch_calls = True
    # Misses in one key range (an index's id map, a dictionary) after which a write transaction loads it whole.
    LOAD_AFTER = 32
    # Databases whose new rows a large write streams (see Streamer), and how many at once start it.
    STREAM_DBS = ("src", "ids", "tail")
    STREAM_MIN = 1024

    def __init__(self, conn: Any, tables: dict[str, Table], *, write: bool, cache: WriteCache | None = None,
                 stream: Callable[[], Any] | None = None) -> None:
        self.conn = conn
        # Where the writes go; reads move to another connection (``stream()``'s) once rows are streamed.
        self.writer = conn
        self._stream = stream
        self._streamer: Streamer | None = None
        self._streamed: dict[str, dict[bytes, bytes]] = {}
        self._tops: dict[tuple[str, bytes], bytes | None] = {}
        self.tables = tables
        self.write = write
        self._seen: dict[str, dict[bytes, Any]] = {name: {} for name in tables}
        self._ranges: dict[str, set[bytes]] = {name: set() for name in tables}
        # The committed segments this process knows whole (SegmentCache), read in place of the tables.
        self._segments: SegmentCache | None = None
        if cache is not None:
            self._seen.update(cache.values)
            self._ranges.update(cache.complete)
            self._segments = cache.segments
        # Set by flush for the commit: per segment database, the prefixes cleared and the segments written whole.
        self.segment_writes: dict[str, tuple[tuple[bytes, ...], set[bytes]]] = {}
        self._misses: dict[tuple[str, bytes], int] = {}
        self._overlay: dict[str, _Overlay] = {}
        self._complete: set[str] = set()  # databases fetched whole: a key not seen is absent
        # Key prefixes this transaction deleted whole (delete_prefix): the table's rows under them are gone.
        self._cleared: dict[str, tuple[bytes, ...]] = {}

    # -- reading -------------------------------------------------------------------------------

    def not_absent(self, db: str, found: Iterable[bytes]) -> list[bytes]:
        """Those of ``found`` not known to be missing from the table (:meth:`_absent`, a batch at a time)."""
        if db in self._complete:
            return []
        cleared = self._cleared.get(db)
        if cleared:
            found = [k for k in found if not k.startswith(cleared)]
        ranges = self._ranges[db]
        if ranges:
            if self.tables[db].SCOPE_BYTES:  # a fixed-length scope: sliced, no call per key
                cut = self.tables[db].SCOPE_BYTES
                return [k for k in found if len(k) < cut or k[:cut] not in ranges]
            scope = self.tables[db].scope
            return [k for k in found if scope(k) not in ranges]
        return list(found)

    def _absent(self, db: str, key: bytes) -> bool:
        """Is ``key`` known to be missing from the table without asking it?"""
        if db in self._complete:
            return True
        cleared = self._cleared.get(db)
        if cleared is not None and key.startswith(cleared):
            return True
        ranges = self._ranges[db]
        if not ranges:
            return False
        scope = self.tables[db].scope(key)
        return scope is not None and scope in ranges

    def _fetch(self, db: str, key: bytes) -> Any:
        table = self.tables[db]
        if self.write:
            scope = table.scope(key)
            if scope is not None:
                misses = self._misses[db, scope] = self._misses.get((db, scope), 0) + 1
                if misses >= self.LOAD_AFTER:
                    self._load(db, scope)
                    return self._seen[db].get(key)
            return table.get(self.conn, key)
        value, extra = table.fetch(self.conn, key)
        for other, rows in extra.items():
            self._seen[other].update(rows)
        return value

    def get(self, key: bytes, default: Any = None, db: str = "") -> Any:
        key = bytes(key)
        overlay = self._overlay.get(db)
        if overlay is not None:
            found = overlay.values.get(key, _MISSING)
            if found is not _MISSING:
                return default if found is _DELETED else found
        seen = self._seen[db]
        found = seen.get(key, _MISSING)
        if found is _MISSING:
            if self._absent(db, key):
                found = None
            else:
                known = self._segments.get(db, key) if self._segments is not None else None
                found = known.get(key) if known is not None else self._fetch(db, key)
            seen[key] = found
        return default if found is None else found

    def segment_items(self, db: str, scope: bytes) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
        """A segment :meth:`known_segment` knows: its committed rows in key order, and their keys."""
        return self._segments.items(db, scope)

    def known_segment(self, db: str, key: bytes) -> dict[bytes, bytes] | None:
        """The committed content of ``key``'s sealed segment when this process knows it whole (else None)."""
        return self._segments.get(db, key) if self._segments is not None else None

    def prefetch(self, db: str, wanted: Iterable[bytes]) -> None:
        """Fetch ``wanted`` keys of ``db`` in one round trip, so the ``get`` calls that follow are local.

        A write transaction counts the misses per key range as :meth:`get` does, and loads a range whole
        once they pass :data:`LOAD_AFTER` (an ingest's new ids: the process then knows them all absent)."""
        missing = self.missing(db, wanted)
        if missing and self.write:
            scope = self.tables[db].scope
            counts: dict[bytes, int] = {}
            for key in missing:
                found = scope(key)
                if found is not None:
                    counts[found] = counts.get(found, 0) + 1
            for found, count in counts.items():
                misses = self._misses[db, found] = self._misses.get((db, found), 0) + count
                if misses >= self.LOAD_AFTER:
                    self._load(db, found)
            if counts:
                missing = self.missing(db, missing)
        if missing:
            self.fetched(db, missing, self.tables[db].get_many(self.conn, missing))

    def _load(self, db: str, scope: bytes) -> None:
        """Fetch the key range ``scope`` of ``db`` whole: a key in it that is not seen is then absent."""
        seen = self._seen[db]
        for k, v in self.tables[db].load(self.conn, scope).items():
            seen.setdefault(k, v)  # the overlay, not seen, holds this transaction's own writes
        self._ranges[db].add(scope)

    def fetched_items(self, db: str, wanted: list[bytes]) -> list[tuple[bytes, bytes]]:
        """``(key, value)`` of each of ``wanted`` that is stored, after :meth:`prefetch` of them: a key neither
        pending nor fetched is known absent (or in a segment known whole)."""
        overlay = self._overlay.get(db)
        pending = overlay.values if overlay is not None else {}
        seen = self._seen[db]
        segments = self._segments is not None and db in SegmentCache.DBS
        out = []
        for key in wanted:
            value = pending.get(key, _MISSING)
            if value is _MISSING:
                value = seen.get(key, _MISSING)
                if value is _MISSING:
                    if not segments:
                        continue
                    value = self.get(key, db=db)
            elif value is _DELETED:
                continue
            if value is not None:
                out.append((key, value))
        return out

    def missing(self, db: str, wanted: Iterable[bytes]) -> list[bytes]:
        """Which of ``wanted`` this transaction has not fetched yet (nor knows to be absent)."""
        if db in self._complete:
            return []
        seen = self._seen[db]
        found = self.not_absent(db, [k for k in wanted if k not in seen])
        if found and self._segments is not None and db in SegmentCache.DBS:
            known = self._segments.get
            found = [k for k in found if known(db, k) is None]
        return found

    def fetched(self, db: str, asked: list[bytes], found: dict[bytes, bytes]) -> None:
        """Remember what fetching ``asked`` found (a key asked for and not found is absent)."""
        seen = self._seen[db]
        for key in asked:
            seen[key] = found.get(key)

    def remember(self, db: str, values: dict[bytes, Any], *, complete: bool = False) -> None:
        """Values (None for absent) known from elsewhere in this snapshot; ``complete``: they are all of ``db``."""
        self._seen[db].update(values)
        if complete:
            self._complete.add(db)

    def cursor(self, db: str = "") -> "Cursor":
        return Cursor(self, db)

    @property
    def complete_dbs(self) -> set[str]:
        return self._complete

    def seen(self, db: str) -> dict[bytes, Any]:
        return self._seen[db]

    # -- writing -------------------------------------------------------------------------------

    def _pending(self, db: str) -> _Overlay:
        if not self.write:
            raise RuntimeError("a read transaction cannot write")
        overlay = self._overlay.get(db)
        if overlay is None:
            overlay = self._overlay[db] = _Overlay()
        return overlay

    def put(self, key: bytes, value: bytes, dupdata: bool = False, overwrite: bool = True, append: bool = False,
            db: str = "") -> bool:
        key = bytes(key)
        overlay = self._pending(db)
        if not overwrite and self.get(key, db=db) is not None:
            return False
        overlay.set(key, bytes(value))
        return True

    def putmulti(self, items: Iterable[tuple[bytes, bytes]], db: str = "") -> None:
        """Put every ``(key, value)`` (LMDB's ``Cursor.putmulti``, overwriting): the store's bulk writes; a
        large batch of new rows is streamed to its table at once (see :class:`Streamer`)."""
        overlay = self._pending(db)
        values = overlay.values
        added = dict(items)  # the engine's keys and values are bytes: the loops stay in C
        if not (set(map(type, added)) <= _BYTES and set(map(type, added.values())) <= _BYTES):
            added = {bytes(k): bytes(v) for k, v in added.items()}
        overlay._unsorted.extend(added.keys() - values.keys() if values else added)
        values.update(added)
        if db in self.STREAM_DBS and len(added) >= self.STREAM_MIN and self._stream is not None:
            self._send(db, added)

    def _send(self, db: str, added: dict[bytes, bytes]) -> None:
        sent = self._streamed.setdefault(db, {})
        new = self._new_keys(db, added.keys() - sent.keys())
        fresh = {k: v for k, v in added.items() if k in new}  # in the engine's order (ascending rows)
        if len(fresh) < self.STREAM_MIN:
            return
        if self._streamer is None:
            started = self._stream()
            if started is None:  # no second connection to read on: the final flush sends everything
                self._stream = None
                return
            self.conn, self._streamer = started
        sent.update(fresh)
        self._streamer.send(db, fresh)

    def _new_keys(self, db: str, candidates: set[bytes]) -> set[bytes]:
        """Which of ``candidates`` the committed table cannot hold: known absent, or past their index's last
        stored key (rows and log entries are numbered upwards). Set operations, so a batch costs little."""
        seen = self._seen[db]
        known = {k for k in candidates if k in seen}  # (not candidates & seen.keys(): that walks all of seen)
        new = {k for k in known if seen[k] is None}
        rest = set(self.not_absent(db, candidates - known))
        new |= candidates - known - rest
        if not rest or db == "ids":
            return new
        for ix in {k[:4] for k in rest}:
            group = [k for k in rest if k[:4] == ix]
            if (db, ix) not in self._tops:
                self._tops[db, ix] = self.tables[db].last(self.conn, ix)
            top = self._tops[db, ix]
            new.update(group if top is None or min(group) > top else (k for k in group if k > top))
        return new

    def stop_stream(self) -> None:
        """Wait for the streaming thread (a failed transaction's too, before its connection rolls back)."""
        streamer, self._streamer = self._streamer, None
        if streamer is not None:
            streamer.finish()

    def delete(self, key: bytes, value: bytes = b"", db: str = "") -> bool:
        key = bytes(key)
        existed = self.get(key, db=db) is not None
        if existed:
            self._pending(db).set(key, _DELETED)
        return existed

    def drop(self, key: bytes, db: str) -> None:
        """Delete ``key``, known to exist (a cursor stands on it)."""
        self._pending(db).set(key, _DELETED)

    def pop(self, key: bytes, db: str = "") -> bytes | None:
        found = self.get(key, db=db)
        if found is not None:
            self._pending(db).set(bytes(key), _DELETED)
        return found

    def delete_prefix(self, prefix: bytes, db: str = "") -> bool:
        """Delete every key starting with ``prefix`` without reading them (one statement at commit); False when
        ``db`` cannot (the id map, documents and the databases the process caches), so the caller walks a cursor."""
        table = self.tables[db]
        if not self.write:
            raise RuntimeError("a read transaction cannot write")
        if type(table) is not Table or db in WriteCache.DBS:
            return False
        prefix = bytes(prefix)
        overlay = self._pending(db)
        for key, value in overlay.values.items():
            if value is not _DELETED and key.startswith(prefix):
                overlay.values[key] = _DELETED
        seen = self._seen[db]
        for key in [k for k in seen if k.startswith(prefix)]:
            del seen[key]
        self._cleared[db] = (*self._cleared.get(db, ()), prefix)
        return True

    def flush(self) -> list[tuple[str, dict[bytes, bytes], list[bytes]]]:
        """Write the overlay to the tables (``COPY`` for the puts); returns what changed, per database."""
        self.stop_stream()
        changed = []
        conn = self.writer
        for db, overlay in self._overlay.items():
            seen = self._seen[db]
            cleared = self._cleared.get(db, ())
            if cleared:
                self.tables[db].clear(conn, cleared)
            sent = self._streamed.get(db, {})
            # Keys the table is known not to hold: no delete needed before their COPY.
            fresh = {k for k in overlay.values if k not in sent and (seen.get(k, _MISSING) is None or
                                                                     (k not in seen and self._absent(db, k)))}
            if self._segments is not None and db in SegmentCache.DBS:
                known = self._segments.get
                fresh.update(k for k in overlay.values if k not in seen and k not in fresh
                             and (found := known(db, k)) is not None and k not in found)
                self.segment_writes[db] = (cleared, self._whole(db, overlay.values, cleared))
            puts = {k: v for k, v in overlay.values.items() if v is not _DELETED}
            gone = [k for k, v in overlay.values.items() if v is _DELETED and k not in fresh]
            # A row streamed and since changed is in the table: deleted (above, with gone) and sent again.
            gone += [k for k, v in puts.items() if k in sent and sent[k] is not v]
            unsent = {k: v for k, v in puts.items() if sent.get(k) is not v} if sent else puts
            if puts or gone or cleared:
                self.tables[db].flush(conn, unsent, gone, fresh)
                changed.append((db, puts, gone))
        self._overlay.clear()
        self._cleared.clear()
        return changed

    def _whole(self, db: str, values: dict[bytes, Any], cleared: tuple[bytes, ...]) -> set[bytes]:
        """The segments of ``db`` this transaction writes whose whole content is known once it commits: those it
        cleared, and those under which the table (its cleared prefixes deleted) holds nothing."""
        scopes = {k[:SEGMENT_KEY] for k in values if len(k) >= SEGMENT_KEY}
        known = self._segments.scopes[db] if self._segments is not None else {}
        whole = {s for s in scopes if s in known or s in cleared}
        rest = scopes - whole
        for ix in {s[:4] for s in rest}:
            top = self.tables[db].last(self.writer, ix)
            whole.update(s for s in rest if s[:4] == ix and (top is None or top < s))
        return whole

    # -- cursors' merged view ------------------------------------------------------------------

    def overlay_of(self, db: str) -> _Overlay | None:
        return self._overlay.get(db)

    def cleared(self, db: str) -> tuple[bytes, ...]:
        return self._cleared.get(db, ())


class Cursor:
    """An LMDB-style cursor over one database: the table's rows (fetched in batches) merged with the
    transaction's own pending writes, in key order."""

    def __init__(self, txn: Txn, db: str) -> None:
        self.txn = txn
        self.db = db
        self.table = txn.tables[db]
        self._key: bytes | None = None
        self._value: Any = None
        # The last batch fetched: every row from _lo up to _hi (excluded; None: the end of the table).
        self._batch: list[tuple[bytes, bytes]] = []
        self._batch_keys: list[bytes] = []
        self._lo: bytes | None = None
        self._hi: bytes | None = None
        self._known = False  # the batch is a segment known whole (Txn.known_segment), not a fetch
        self._at: int | None = None  # where the current row is in the batch (None: not from it)
        self._size = SCAN_BATCH

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._batch = []
        self._batch_keys = []

    def _table_from(self, key: bytes, strict: bool) -> tuple[bytes, bytes] | None:
        """The table's first row at (or after, when ``strict``) ``key`` that the overlay does not shadow."""
        overlay = self.txn.overlay_of(self.db)
        shadow = overlay.values if overlay is not None else {}
        cleared = self.txn.cleared(self.db)
        if self.db in self.txn.complete_dbs and self._lo is None:  # fetched whole with the snapshot: no round trip
            self._batch = sorted((k, v) for k, v in self.txn.seen(self.db).items() if v is not None)
            self._batch_keys = [k for k, _v in self._batch]
            self._lo, self._hi, self._known = b"", None, False
        while True:
            covered = self._lo is not None and self._lo <= key and (self._hi is None or key < self._hi)
            if not covered:
                known = self.txn.known_segment(self.db, key)
                if known is not None:  # a segment this process knows whole: no round trip
                    scope = key[:SEGMENT_KEY]
                    self._batch, self._batch_keys = self.txn.segment_items(self.db, scope)
                    self._lo, self._hi, self._known = scope, _after(scope), True
                else:
                    self._batch = self.table.scan(self.txn.conn, key, self._size)
                    self._batch_keys = [k for k, _v in self._batch]
                    self._lo, self._known = key, False
                    self._hi = self._batch_keys[-1] if len(self._batch) >= self._size else None
            at = (bisect.bisect_right if strict else bisect.bisect_left)(self._batch_keys, key)
            while at < len(self._batch) and (self._batch_keys[at] in shadow or
                                             (cleared and self._batch_keys[at].startswith(cleared))):
                at += 1
            if at < len(self._batch):
                self._at = at
                return self._batch[at]
            if self._hi is None:
                return None
            if self._known:
                # On past the known segment: a reader of one segment's range stops at the first key after it,
                # so the first fetch is a probe of a few rows (the size grows again if the cursor walks on).
                key, strict = self._hi, False
                self._size = PROBE_BATCH
            else:
                key, strict = self._batch_keys[-1], True
                # a cursor walking on past a batch is reading a range (a segment's postings): fewer, larger fetches
                self._size = min(self._size * 4, SCAN_BATCH_MAX)
            self._lo = None  # fetch the next batch

    def _overlay_from(self, key: bytes, strict: bool) -> tuple[bytes, bytes] | None:
        overlay = self.txn.overlay_of(self.db)
        if overlay is None:
            return None
        ordered = overlay.sorted_keys()
        at = (bisect.bisect_right if strict else bisect.bisect_left)(ordered, key)
        values = overlay.values
        while at < len(ordered):
            value = values[ordered[at]]
            if value is not _DELETED:
                return ordered[at], value
            at += 1
        return None

    def _seek(self, key: bytes, strict: bool) -> bool:
        self._at = None
        found = self._table_from(key, strict)
        pending = self._overlay_from(key, strict)
        if pending is not None and (found is None or pending[0] < found[0]):
            found = pending
            self._at = None
        if found is None:
            self._key = self._value = None
            return False
        self._key, self._value = found
        return True

    # -- LMDB's cursor calls -------------------------------------------------------------------

    def set_range(self, key: bytes) -> bool:
        return self._seek(bytes(key), False)

    def set_key(self, key: bytes) -> bool:
        key = bytes(key)
        value = self.txn.get(key, db=self.db)
        self._at = None
        if value is None:
            self._key = self._value = None
            return False
        self._key, self._value = key, value
        return True

    def get(self, key: bytes, default: Any = None) -> Any:
        """The value at ``key`` (the cursor left there), else ``default``; reads in batches like a scan."""
        key = bytes(key)
        if self._seek(key, False) and self._key == key:
            return self._value
        self._key = self._value = None
        return default

    def first(self) -> bool:
        return self._seek(b"", False)

    def next(self) -> bool:
        if self._key is None:
            return self.first()
        at = self._at
        if at is not None and at + 1 < len(self._batch):
            # The current row is the batch's row at: with nothing pending or deleted in this database, the next
            # row is the batch's next one (a merge reading a segment's postings walks thousands of them).
            overlay = self.txn.overlay_of(self.db)
            if (overlay is None or not overlay.values) and not self.txn.cleared(self.db):
                self._at = at + 1
                self._key, self._value = self._batch[at + 1]
                return True
        return self._seek(self._key, True)

    def getmulti(self, wanted: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
        """LMDB's ``Cursor.getmulti``: the ``(key, value)`` of each of ``wanted`` that is stored, in order, fetched
        in one round trip (the store engine's batch paths: an ingest's ids, a merge's postings)."""
        wanted = list(map(bytes, wanted))
        self.txn.prefetch(self.db, wanted)
        return self.txn.fetched_items(self.db, wanted)

    def key(self) -> bytes:
        return self._key if self._key is not None else b""

    def value(self) -> bytes:
        return self._value if self._key is not None else b""

    def item(self) -> tuple[bytes, bytes]:
        return self.key(), self.value()

    def delete(self, dupdata: bool = False) -> bool:
        """Delete the current row and move to the next, as LMDB's cursor does."""
        if self._key is None:
            return False
        key = self._key
        self.txn.drop(key, self.db)  # the cursor stands on it: it exists, no lookup needed
        self._seek(key, True)
        return True

    def iternext(self, keys: bool = True, values: bool = True) -> Iterator[Any]:
        if self._key is None and not self.first():
            return
        while self._key is not None:
            if keys and values:
                yield self._key, self._value
            elif keys:
                yield self._key
            else:
                yield self._value
            self.next()

    __iter__ = iternext
