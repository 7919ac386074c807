"""A PostgreSQL server for the tests (given, or a throwaway cluster) and a fresh schema per test."""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Iterator
from urllib.parse import quote

import pytest

_SCHEMAS = itertools.count()


@contextlib.contextmanager
def server(given: str | None, required: bool) -> Iterator[str]:
    if given:
        yield given
        return
    try:
        import psycopg  # noqa: F401

        from xerj_postgres.cluster import Cluster, find_bindir
    except ImportError as exc:
        problem = f"psycopg is not installed ({exc}): pip install '.[postgres]'"
    else:
        if find_bindir() is not None:
            cluster = Cluster()
            try:
                yield cluster.start()
            finally:
                cluster.stop()
            return
        problem = "no PostgreSQL server binaries (apt-get install postgresql)"
    if required:
        pytest.fail(f"XERJ_REQUIRE_PG=1 but {problem}")
    pytest.skip(problem)


def with_schema(url: str, schema: str) -> str:
    """``url`` whose sessions use ``schema`` (search_path), so each test has tables of its own."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema}')}"


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    import psycopg

    schema = f"xt_{os.getpid()}_{next(_SCHEMAS)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
