"""The PostgreSQL environment a store runs on: connection pools, snapshot reads, the single writer, replica reads."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format, TransactionStatus
from psycopg.types.string import BytesBinaryDumper
from psycopg_pool import ConnectionPool, PoolTimeout

from xerj_core.store.env import DB_NAMES
from xerj_core.storeopts import redact_url as redact
from xerj_postgres import schema
from xerj_postgres.project import project_edges
from xerj_postgres.kv import (DictTable, DocsTable, IdsTable, Streamer, Table, Txn, WriteCache, int8_array,
                              register_text)

T = TypeVar("T")
# Every write transaction of every process takes this lock first: xerj's store has one writer at a time.
WRITE_LOCK = 0x7865726A_77726974  # "xerjwrit"
CONNECT_TIMEOUT = 5
# How long a read on the replica waits for it to replay this process's last commit before reading the primary.
REPLICA_WAIT = 5.0
# How long a finished read's connection may wait for the thread's next read before its snapshot is ended.
PARK_SECONDS = 0.05
# How long a large write waits for a second connection to read on while its rows stream (else it does not stream).
STREAM_READER_WAIT = 0.05
# Databases every read transaction fetches whole at its start (one round trip): a record per index or dictionary.
_CONTROL = ("indices", "state", "dictn")


class _RawJson(Loader):
    """json values as their bytes: a document's text is handed back exactly as stored, never parsed here."""

    def load(self, data: Any) -> bytes:
        return bytes(data)


class _RawJsonBinary(_RawJson):
    """The same for results in binary format (json's binary form is its text), which the store's reads ask for:
    ``bytea`` then comes as its bytes, not as hex text the server encodes and the client decodes."""

    format = Format.BINARY


def _configure(conn: psycopg.Connection) -> None:
    """Raw json loading and dumping; statements run often are prepared on the server (psycopg's threshold).

    Planning a key lookup costs about as much as running it, so the reads'
    statements are prepared. A ``ROLLBACK`` makes psycopg drop them all with a
    ``DEALLOCATE ALL`` sent after it; inside the pipeline that opens a read it
    would land between ``COMMIT`` and ``BEGIN ISOLATION LEVEL`` and fail the
    read, so reads end with ``COMMIT`` (a read-only transaction has nothing to
    undo) and only a failed transaction is rolled back, outside any pipeline.
    """
    conn.adapters.register_loader("json", _RawJson)
    conn.adapters.register_loader("json", _RawJsonBinary)
    register_text(conn.adapters)
    # COPY picks the dumper by column type, and for bytea that is DB-API's Binary dumper (pure Python, registered
    # last); the bytes dumper (C in psycopg[binary]) writes the same bytes, several times faster.
    conn.adapters.register_dumper(bytes, BytesBinaryDumper)


def end_read(conn: Any) -> None:
    """End a read transaction: ``COMMIT`` keeps the prepared statements; a failed one is rolled back."""
    status = conn.info.transaction_status
    if not conn.closed and status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        conn.execute("COMMIT" if status == TransactionStatus.INTRANS else "ROLLBACK")


def unavailable(url: str, exc: BaseException) -> schema.StoreUnavailable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return schema.StoreUnavailable(f"the PostgreSQL store [{redact(url)}] is unavailable: {reason}")


def connect(url: str) -> psycopg.Connection:
    """One autocommit connection, for checks and migrations; an unreachable server raises StoreUnavailable."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        raise unavailable(url, exc) from None
    _configure(conn)
    return conn


def _lock_statement(conn: Any) -> str:
    """The statement a write transaction opens with: the single-writer lock, synchronous commit for this
    transaction, and lz4 for the values it TOASTs when the server has it.

    A merge writes every segment's columns and postings again as large ``bytea``
    values, which the server compresses as it stores them: pglz (the default)
    was about half the server's work on a bulk ingest, lz4 costs a fraction of
    that. Each value records its own method, so readers need nothing."""
    statement = "SELECT pg_advisory_xact_lock(%s), set_config('synchronous_commit', 'on', true)"
    lz4 = conn.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
                       ).fetchone()
    if lz4 is not None and lz4[0]:
        statement += ", set_config('default_toast_compression', 'lz4', true)"
    return statement


class _Guarded:
    """A connection whose statements turn a lost server (``OperationalError``) into :class:`StoreUnavailable`:
    the engine's reads run statements long after the transaction began, anywhere in a request."""

    __slots__ = ("raw", "url")

    def __init__(self, raw: psycopg.Connection, url: str) -> None:
        self.raw = raw
        self.url = url

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.raw.execute(*args, **kwargs)
        except psycopg.OperationalError as exc:
            raise unavailable(self.url, exc) from None

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return self.raw.cursor(*args, **kwargs)


class _Ended:
    """The connection of a transaction that ended: any statement is a programming error."""

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this read transaction has ended")

    cursor = execute


_ENDED = _Ended()


class ReadTxn(Txn):
    """A read snapshot (``REPEATABLE READ``) on a pooled connection, given back when it ends.

    A transaction begun with ``guess`` (the control records of an earlier
    snapshot, see :meth:`PgEnvironment.read`) has not opened its snapshot yet:
    it reads those records, and its first statement goes to the server in one
    round trip with the ``BEGIN`` and the fetch of the real ones. When they
    differ the statement's caller is unwound with :class:`_Restart`.
    """

    def __init__(self, env: "PgEnvironment", pool: ConnectionPool, conn: Any, url: str, *, parked: bool = False,
                 guess: dict[str, dict[bytes, bytes]] | None = None) -> None:
        super().__init__(_Guarded(conn, url), env.tables, write=False)
        self._raw = conn
        self._env = env
        self._pool = pool
        self._url = url
        self._parked = parked  # the connection still holds the thread's previous snapshot
        self.opened = guess is None
        if guess is not None:
            self.conn = _Opening(self)
            for name, rows in guess.items():
                self.remember(name, dict(rows), complete=True)
        self._guess = guess

    def open(self, statement: tuple[tuple[Any, ...], dict[str, Any]] | None = None) -> Any:
        """Begin the snapshot and read its control records, with ``statement`` (``execute``'s arguments) in the
        same round trip; returns the statement's cursor. Raises :class:`_Restart` when a guess turns out wrong."""
        conn, env = self._raw, self._env
        numbers = [self.tables[name].number for name in _CONTROL]
        found: dict[int, dict[bytes, bytes]] = {n: {} for n in numbers}
        listed = int8_array(numbers)
        cur = None
        with env._guard(self._pool, self._url):
            with conn.pipeline():  # one round trip for all
                if self._parked:
                    conn.execute("COMMIT")  # the snapshot of this thread's previous read (it wrote nothing)
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                control = conn.execute("SELECT db, k, v FROM xerj_kv WHERE db = ANY(%s::int2[])", (listed,),
                                       binary=True)
                if statement is not None:
                    cur = conn.execute(*statement[0], **statement[1])
            for db, k, v in control:
                found[db][bytes(k)] = v
        self._parked = False
        self.opened = True
        self.conn = _Guarded(conn, self._url)
        records = {name: found[self.tables[name].number] for name in _CONTROL}
        env._known = records
        if self._guess is not None and records != self._guess:
            self._guess = None
            self.reset(records)
            raise _Restart()
        self._guess = None
        if statement is None:
            for name in _CONTROL:
                self.remember(name, records[name], complete=True)
        return cur

    def reset(self, records: dict[str, dict[bytes, bytes]]) -> None:
        """Forget what was read on a wrong guess; ``records`` are the snapshot's control records."""
        self._seen = {name: {} for name in self.tables}
        for name in _CONTROL:
            self.remember(name, records[name], complete=True)

    def abort(self) -> None:
        conn, self._raw = self._raw, None
        if conn is None:
            return
        self.conn = _ENDED  # a read after the end must fail, not run on a connection given to someone else
        if self._parked:  # never opened: the previous snapshot it still holds parks again
            status_ok = conn.info.transaction_status == TransactionStatus.INTRANS
        else:
            status_ok = self.opened and conn.info.transaction_status == TransactionStatus.INTRANS
        if self._pool is not self._env.read_pool and status_ok and self._env.parking.park(self._pool, conn):
            return  # its end goes with the thread's next BEGIN
        try:
            end_read(conn)
        except psycopg.Error:
            pass  # a broken connection: the pool discards it
        finally:
            self._env.give_back(self._pool, conn)

    commit = abort

    def __enter__(self) -> "ReadTxn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


class _Restart(BaseException):
    """A read ran on a wrong guess of the control records: run it again on its snapshot (see PgEnvironment.read).

    A BaseException, so that no ``except Exception`` on the way swallows it.
    """


def _guessed_wrong(txn: ReadTxn) -> bool:
    """Open ``txn``'s snapshot: did its guess of the control records differ from them?"""
    try:
        txn.open()
    except _Restart:
        return True
    return False


class _Opening:
    """The connection of a read that has not opened its snapshot: the first statement opens it (ReadTxn.open)."""

    __slots__ = ("txn",)

    def __init__(self, txn: ReadTxn) -> None:
        self.txn = txn

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self.txn.open((args, kwargs))

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a read transaction cannot write")


class _Parking:
    """Read connections whose snapshot is over but whose ``COMMIT`` is not sent yet, one per thread.

    The thread's next read sends it in the same round trip as its ``BEGIN``, so
    a read costs one round trip fewer; a connection parked longer than
    :data:`PARK_SECONDS` is ended and given back by a reaper thread, so no
    snapshot is held for longer than that.
    """

    def __init__(self, env: "PgEnvironment") -> None:
        self._env = env
        self._lock = threading.Lock()
        self._slots: dict[int, tuple[ConnectionPool, Any, float]] = {}
        self._wake = threading.Event()
        self._closed = False
        self._reaper: threading.Thread | None = None

    def park(self, pool: ConnectionPool, conn: Any) -> bool:
        with self._lock:
            me = threading.get_ident()
            if self._closed or me in self._slots:
                return False
            self._slots[me] = (pool, conn, time.monotonic())
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="xerj-pg-parking", daemon=True)
                self._reaper.start()
            return True

    def take(self, pool: ConnectionPool) -> Any:
        with self._lock:
            found = self._slots.get(threading.get_ident())
            if found is None or found[0] is not pool:
                return None
            del self._slots[threading.get_ident()]
            return found[1]

    def _release(self, pool: ConnectionPool, conn: Any) -> None:
        try:
            end_read(conn)
        except psycopg.Error:
            pass  # a broken connection: the pool discards it
        self._env.give_back(pool, conn)

    def _reap(self) -> None:
        while not self._closed:
            self._wake.wait(PARK_SECONDS)
            cutoff = time.monotonic() - PARK_SECONDS
            with self._lock:
                old = [k for k, (_p, _c, since) in self._slots.items() if since <= cutoff or self._closed]
                due = [self._slots.pop(k) for k in old]
            for pool, conn, _since in due:
                self._release(pool, conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            due = list(self._slots.values())
            self._slots.clear()
        self._wake.set()
        for pool, conn, _since in due:
            self._release(pool, conn)
        if self._reaper is not None:
            self._reaper.join(timeout=5)


class PgEnvironment:
    """The PostgreSQL counterpart of :class:`xerj_core.store.env.Environment`: ``dbs``, ``begin_read`` and
    ``write`` with the same meaning, so :class:`xerj_core.store.Store` runs on it unchanged.

    Database errors that mean the server went away (a dropped connection, a
    restart) become :class:`~xerj_postgres.schema.StoreUnavailable` (HTTP 503)
    and the pool replaces its broken connections.
    """

    def __init__(self, url: str, *, read_url: str | None = None, pool_size: int = 16) -> None:
        self.url = url
        self.read_url = read_url
        self.dbs = {name: name for name in DB_NAMES}
        self.tables: dict[str, Table] = {name: Table(number) for number, name in enumerate(DB_NAMES)}
        self.tables["src"] = DocsTable()
        self.tables["ids"] = IdsTable()
        self.tables["dict"] = DictTable(self.tables["dict"].number)
        self.cache = WriteCache()
        self.write_lock = threading.Lock()
        self.last_lsn: str | None = None
        self.parking = _Parking(self)
        # The control records of the last snapshot read, which read() starts on (None once this process writes).
        self._known: dict[str, dict[bytes, bytes]] | None = None
        conn = connect(url)
        try:
            self._lock_statement = _lock_statement(conn)
            if read_url:  # a migration this process applies must be on disk before the replica's first read waits
                conn.execute("SET synchronous_commit = on")
            schema.upgrade(conn, redact(url))
            if read_url:  # the replica's first read waits until it has everything committed so far, the schema too
                self.last_lsn = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        except psycopg.Error as exc:
            raise unavailable(url, exc) from None
        finally:
            conn.close()
        self.pool = self._pool(url, pool_size)
        self.read_pool = self._pool(read_url, pool_size) if read_url else None

    def _pool(self, url: str, size: int) -> ConnectionPool:
        pool = ConnectionPool(url, min_size=1, max_size=size, open=False, configure=_configure,
                              kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
                              timeout=CONNECT_TIMEOUT * 2, reconnect_timeout=60)
        try:
            pool.open(wait=True, timeout=CONNECT_TIMEOUT * 2)
        except PoolTimeout as exc:
            pool.close()
            raise unavailable(url, exc) from None
        return pool

    def _take(self, pool: ConnectionPool) -> Any:
        try:
            return pool.getconn()
        except PoolTimeout as exc:
            raise unavailable(self.url, exc) from None

    def give_back(self, pool: ConnectionPool, conn: Any) -> None:
        broken = conn.closed or conn.broken
        pool.putconn(conn)
        if broken:
            pool.check()  # the others may be dead too (a restart, terminated backends): replace them now

    @contextlib.contextmanager
    def _guard(self, pool: ConnectionPool, url: str) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError as exc:
            raise unavailable(url, exc) from None

    # -- reading -------------------------------------------------------------------------------

    def begin_read(self, *, buffers: bool = False, guess: dict[str, dict[bytes, bytes]] | None = None) -> ReadTxn:
        """A read snapshot; on a replica (``read_url``) once it has replayed this process's last commit.

        With ``guess`` (and no replica) the snapshot opens with the read's first statement (see :meth:`read`).
        """
        pool, url = self.pool, self.url
        if self.read_pool is not None:
            pool, url = self.read_pool, self.read_url or self.url
            guess = None
        parked = self.parking.take(pool) if self.read_pool is None else None
        conn = parked if parked is not None else self._take(pool)
        txn = ReadTxn(self, pool, conn, url, parked=parked is not None, guess=guess)
        if guess is not None:
            return txn
        try:
            with self._guard(pool, url):
                if pool is self.read_pool and self.last_lsn is not None and not self._caught_up(conn):
                    txn.abort()
                    pool, url = self.pool, self.url
                    txn = ReadTxn(self, pool, self._take(pool), url)
                txn.open()
        except BaseException:
            txn.abort()
            raise
        return txn

    def read(self, fn: Callable[[Txn], T]) -> T:
        """``fn(txn)`` in one read snapshot, in one round trip when it needs one statement.

        ``fn`` starts on the control records of this process's last snapshot
        (the records of every index, which the store's own caches were built
        from), so it reads from the caches alone until it needs the server. Its
        first statement then goes with the ``BEGIN`` and the fetch of the real
        records, and no row comes back to ``fn`` before they are compared: on a
        difference (another process wrote) ``fn`` is unwound and runs again on
        the real ones. ``fn`` that needs no statement has its snapshot checked
        the same way when it returns, or before an error it raised is believed.
        """
        txn = self.begin_read(guess=self._known)
        try:
            try:
                result = fn(txn)
                if not txn.opened:
                    txn.open()
                return result
            except _Restart:
                pass
            except Exception:
                if txn.opened or not _guessed_wrong(txn):
                    raise
            return fn(txn)
        finally:
            txn.abort()

    def _caught_up(self, conn: Any) -> bool:
        deadline = time.monotonic() + REPLICA_WAIT
        while True:
            row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (self.last_lsn,)).fetchone()
            if row[0] is None or row[0]:  # None: not a replica at all, so it holds every commit
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    # -- writing -------------------------------------------------------------------------------

    def write(self, fn: Callable[[Txn], T]) -> T:
        """Run ``fn`` in one write transaction (the cluster-wide single writer) and commit it."""
        with self.write_lock:
            conn = self._take(self.pool)
            try:
                with self._guard(self.pool, self.url):
                    conn.execute("BEGIN")
                    try:
                        # An acknowledged write must survive a crash whatever the server's default, and
                        # read-your-writes on a replica waits for the commit's flush: the commit waits for its
                        # WAL to be on disk (set in the lock's statement: no round trip of its own).
                        conn.execute(self._lock_statement, (WRITE_LOCK,))
                        seq = conn.execute("UPDATE xerj_commits SET seq = seq + 1 RETURNING seq").fetchone()[0]
                        self.cache.adopt(seq - 1)
                        readers: list[Any] = []
                        writer = _Guarded(conn, self.url)
                        txn = Txn(writer, self.tables, write=True, cache=self.cache,
                                  stream=lambda: self._stream_reader(readers, writer))
                        self._known = None  # the caches may now be ahead of the last read's records
                        try:
                            result = fn(txn)
                            changed = txn.flush()
                        finally:
                            try:
                                txn.stop_stream()  # a failed one's thread stops before the connection rolls back
                            finally:
                                for reader in readers:
                                    self.give_back(self.pool, reader)
                        project_edges(conn, changed)
                        conn.execute("COMMIT")
                        self.cache.committed(seq, changed, txn.segment_writes)
                    except BaseException:
                        if not conn.closed and not conn.broken:
                            conn.execute("ROLLBACK")
                        raise
                    if self.read_pool is not None:
                        # Our commit was flushed (synchronous_commit on, below): the flush position is at or past
                        # its end, so the replica has our commit once its replay position reaches it.
                        self.last_lsn = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
                return result
            finally:
                self.give_back(self.pool, conn)

    def _stream_reader(self, readers: list[Any], writer: Any) -> tuple[Any, Streamer] | None:
        """For a write that starts streaming rows on its own connection: a second connection for its reads
        and the streamer; None when the pool has none free at once (the write then sends everything at its end).

        The reads see the committed tables, which no one else can change while this writer holds the lock,
        and the writer's own rows come from its overlay, as before.
        """
        try:
            reader = self.pool.getconn(timeout=STREAM_READER_WAIT)
        except PoolTimeout:
            return None
        readers.append(reader)
        return _Guarded(reader, self.url), Streamer(writer, self.tables)

    def close(self) -> None:
        self.parking.close()
        self.pool.close()
        if self.read_pool is not None:
            self.read_pool.close()
