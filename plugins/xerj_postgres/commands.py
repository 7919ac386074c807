"""``xerj db upgrade`` and ``xerj db status``: the PostgreSQL store's schema version, brought up to date on demand."""

from __future__ import annotations

import sys

import click

from xerj_core import hookimpl
from xerj_core.errors import XerjError


def _url_option(fn):
    return click.option("--store", "url", required=True, envvar="XERJ_STORE", metavar="URL",
                        help="The PostgreSQL store (postgresql://user@host:port/db); also XERJ_STORE.")(fn)


@click.group("db")
def db_group() -> None:
    """The PostgreSQL store's schema (migrations are also applied whenever a server or command opens it)."""


def _on_database(command: str, url: str, fn):
    """``fn(conn, where)`` on one connection to ``url``; a refusal is one line and exit status 2."""
    from xerj_core.storeopts import redact_url
    from xerj_postgres.env import connect

    try:
        conn = connect(url)
        try:
            return fn(conn, redact_url(url))
        finally:
            conn.close()
    except XerjError as exc:
        click.echo(f"xerj db {command}: {exc.reason}", err=True)
        sys.exit(2)


@db_group.command("upgrade")
@_url_option
def upgrade_command(url: str) -> None:
    """Apply the schema migrations the database lacks; refuses a schema from a newer xerj."""
    from xerj_postgres import schema

    applied = _on_database("upgrade", url, schema.upgrade)
    if applied:
        click.echo(f"schema upgraded to version {applied[-1]} (applied {', '.join(map(str, applied))})")
    else:
        click.echo(f"schema is current (version {schema.SCHEMA_VERSION})")


@db_group.command("status")
@_url_option
def status_command(url: str) -> None:
    """Print the database's schema version and this xerj's."""
    from xerj_postgres import schema

    have = _on_database("status", url, lambda conn, _where: schema.current_version(conn))
    click.echo(f"database schema version {have}; this xerj knows up to {schema.SCHEMA_VERSION}")


@hookimpl
def xerj_register_commands(cli: click.Group) -> None:
    cli.add_command(db_group)
