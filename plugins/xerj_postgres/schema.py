"""The PostgreSQL schema: versioned migrations, applied on start or by ``xerj db upgrade``; a newer one is refused."""

from __future__ import annotations

from typing import Any

from xerj_core.errors import XerjError

# Serialises migrations between processes starting at once (pg_advisory_xact_lock takes a bigint).
MIGRATION_LOCK = 0x7865726A_6D696772  # "xerjmigr"

# Each entry moves the schema from version N-1 to N. Never edit a released entry: add the next one.
MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "key-value tables of the store engine, documents, the id map and brain edges", [
        # Every named database of the engine but src and ids: bytea keys sort as LMDB's do (bytewise).
        "CREATE TABLE xerj_kv (db int2 NOT NULL, k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (db, k))",
        # One row per stored document version; source is json (not jsonb) because json keeps the text exactly
        # as written, so _source comes back byte for byte; query it as source::jsonb.
        "CREATE TABLE xerj_docs (ix int4 NOT NULL, row int8 NOT NULL, doc_id bytea NOT NULL, "
        "version int8 NOT NULL, source json NOT NULL, PRIMARY KEY (ix, row))",
        # The id map: the live row of each document id. Ids are their UTF-8 bytes (bytea): an id may hold any
        # character, NUL included, which text refuses; convert_from(doc_id, 'UTF8') reads the others as text.
        "CREATE TABLE xerj_ids (ix int4 NOT NULL, doc_id bytea NOT NULL, row int8 NOT NULL, "
        "PRIMARY KEY (ix, doc_id))",
        # The live edges of every brain's edges index, typed, maintained in the transaction that writes them;
        # the covering indexes make a hop from a node an index-only scan.
        "CREATE TABLE xerj_edges (ix int4 NOT NULL, row int8 NOT NULL, src text COLLATE \"C\" NOT NULL, "
        "dst text COLLATE \"C\" NOT NULL, type text NOT NULL, valid_at int8, invalid_at int8, weight float8, "
        "confidence float8, trust text, PRIMARY KEY (ix, row))",
        "CREATE INDEX xerj_edges_out ON xerj_edges (ix, src, valid_at, invalid_at) "
        "INCLUDE (dst, type, weight, confidence, trust)",
        "CREATE INDEX xerj_edges_in ON xerj_edges (ix, dst, valid_at, invalid_at) "
        "INCLUDE (src, type, weight, confidence, trust)",
        # Bumped by every write transaction: a writer whose last commit is the latest knows its caches are current.
        "CREATE TABLE xerj_commits (id int4 PRIMARY KEY CHECK (id = 1), seq int8 NOT NULL)",
        "INSERT INTO xerj_commits VALUES (1, 0)",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


class StoreUnavailable(XerjError):
    """The PostgreSQL store cannot be reached (down at start, or a connection lost mid-request): retry later."""

    status = 503
    error_type = "store_unavailable_exception"
    retry_after = 5


class SchemaTooNew(StoreUnavailable):
    """The database was written by a newer xerj: this one refuses it rather than misread it."""

    error_type = "store_schema_exception"


def _xerj_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("xerj")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without metadata
        return "unknown"


def current_version(conn: Any) -> int:
    """The schema version of the database (0 when xerj never wrote to it)."""
    found = conn.execute("SELECT to_regclass('xerj_schema') IS NOT NULL").fetchone()[0]
    if not found:
        return 0
    row = conn.execute("SELECT max(version) FROM xerj_schema").fetchone()
    return int(row[0] or 0)


def check(conn: Any, where: str) -> int:
    """The database's version; a newer one than this xerj knows is refused, naming both."""
    have = current_version(conn)
    if have > SCHEMA_VERSION:
        raise SchemaTooNew(f"the PostgreSQL store [{where}] has schema version {have}, written by a newer xerj; "
                           f"this xerj ({_xerj_version()}) knows schema versions up to {SCHEMA_VERSION}: "
                           f"upgrade xerj to use it")
    return have


def upgrade(conn: Any, where: str) -> list[int]:
    """Apply every migration the database lacks, in one transaction; the versions applied (none when current).

    ``conn`` is in autocommit mode; concurrent starters wait on an advisory lock
    and then find the work done.
    """
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        have = check(conn, where)
        if have == 0:
            conn.execute("CREATE TABLE xerj_schema (version int4 PRIMARY KEY, description text NOT NULL, "
                         "xerj_version text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        applied = []
        for version, description, statements in MIGRATIONS:
            if version <= have:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO xerj_schema (version, description, xerj_version) VALUES (%s, %s, %s)",
                         (version, description, _xerj_version()))
            applied.append(version)
        conn.execute("COMMIT")
        return applied
    except BaseException:
        if not conn.closed:
            conn.execute("ROLLBACK")
        raise
