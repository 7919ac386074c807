"""The PostgreSQL environment a store runs on: connection pools, snapshot reads, the single writer, replica reads."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from xerj_core.store.env import DB_NAMES
from xerj_core.storeopts import redact_url as redact
from xerj_postgres import schema
from xerj_postgres.project import project_edges
from xerj_postgres.kv import DictTable, DocsTable, IdsTable, Table, Txn, WriteCache, register_text

T = TypeVar("T")
# Every write transaction of every process takes this lock first: xerj's store has one writer at a time.
WRITE_LOCK = 0x7865726A_77726974  # "xerjwrit"
CONNECT_TIMEOUT = 5
# How long a read on the replica waits for it to replay this process's last commit before reading the primary.
REPLICA_WAIT = 5.0
# How long a finished read's connection may wait for the thread's next read before it is rolled back.
PARK_SECONDS = 0.05
# Databases every read transaction fetches whole at its start (one round trip): a record per index or dictionary.
_CONTROL = ("indices", "state", "dictn")


class _RawJson(Loader):
    """json values as their bytes: a document's text is handed back exactly as stored, never parsed here."""

    def load(self, data: Any) -> bytes:
        return bytes(data)


def _configure(conn: psycopg.Connection) -> None:
    """Raw json loading and dumping, and no server-side prepared statements.

    After a ``ROLLBACK`` psycopg drops its prepared statements with a
    ``DEALLOCATE ALL`` sent before whatever statement comes next; when that is
    the ``BEGIN ISOLATION LEVEL`` of a pipelined read, which must come first in
    its transaction, the read fails. Our statements are small key lookups whose
    planning costs little next to a round trip.
    """
    conn.prepare_threshold = None
    conn.adapters.register_loader("json", _RawJson)
    register_text(conn.adapters)


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
    """A read snapshot (``REPEATABLE READ``) on a pooled connection, given back when it ends."""

    def __init__(self, env: "PgEnvironment", pool: ConnectionPool, conn: Any, url: str) -> None:
        super().__init__(_Guarded(conn, url), env.tables, write=False)
        self._raw = conn
        self._env = env
        self._pool = pool

    def abort(self) -> None:
        conn, self._raw = self._raw, None
        if conn is None:
            return
        self.conn = _ENDED  # a read after the end must fail, not run on a connection given to someone else
        if (self._pool is not self._env.read_pool and conn.info.transaction_status == TransactionStatus.INTRANS
                and self._env.parking.park(self._pool, conn)):
            return  # its ROLLBACK goes with the thread's next BEGIN
        try:
            if not conn.closed:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            pass  # a broken connection: the pool discards it
        finally:
            self._env.give_back(self._pool, conn)

    commit = abort

    def __enter__(self) -> "ReadTxn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


class _Parking:
    """Read connections whose snapshot is over but whose ``ROLLBACK`` is not sent yet, one per thread.

    The thread's next read sends it in the same round trip as its ``BEGIN``, so
    a read costs one round trip fewer; a connection parked longer than
    :data:`PARK_SECONDS` is rolled back and given back by a reaper thread, so no
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
            if not conn.closed:
                conn.execute("ROLLBACK")
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
        conn = connect(url)
        try:
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

    def begin_read(self, *, buffers: bool = False) -> ReadTxn:
        """A read snapshot; on a replica (``read_url``) once it has replayed this process's last commit."""
        pool, url = self.pool, self.url
        if self.read_pool is not None:
            pool, url = self.read_pool, self.read_url or self.url
        parked = self.parking.take(pool) if self.read_pool is None else None
        conn = parked if parked is not None else self._take(pool)
        txn = ReadTxn(self, pool, conn, url)
        try:
            with self._guard(pool, url):
                if pool is self.read_pool and self.last_lsn is not None and not self._caught_up(conn):
                    txn.abort()
                    pool, url = self.pool, self.url
                    conn = self._take(pool)
                    txn = ReadTxn(self, pool, conn, url)
                numbers = [self.tables[name].number for name in _CONTROL]
                found: dict[int, dict[bytes, bytes]] = {n: {} for n in numbers}
                with conn.pipeline():  # one round trip for all
                    if parked is not None:
                        conn.execute("COMMIT")  # the snapshot of this thread's previous read (it wrote nothing)
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    cur = conn.execute("SELECT db, k, v FROM xerj_kv WHERE db = ANY(%s)", (numbers,))
                for db, k, v in cur:
                    found[db][bytes(k)] = v
                for name in _CONTROL:
                    txn.remember(name, found[self.tables[name].number], complete=True)
        except BaseException:
            txn.abort()
            raise
        return txn

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
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                        if self.read_pool is not None:  # read-your-writes needs the commit on disk to wait for it
                            conn.execute("SET LOCAL synchronous_commit = on")
                        seq = conn.execute("UPDATE xerj_commits SET seq = seq + 1 RETURNING seq").fetchone()[0]
                        self.cache.adopt(seq - 1)
                        txn = Txn(_Guarded(conn, self.url), self.tables, write=True, cache=self.cache)
                        result = fn(txn)
                        changed = txn.flush()
                        project_edges(conn, changed)
                        conn.execute("COMMIT")
                        self.cache.committed(seq, changed)
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

    def close(self) -> None:
        self.parking.close()
        self.pool.close()
        if self.read_pool is not None:
            self.read_pool.close()
