"""The ``--store`` and ``--read-url`` options of every command that opens a store, and the check that it opens."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import click


def store_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--store URL`` (``store``) and ``--read-url URL`` (``read_url``) to a command."""
    fn = click.option("--read-url", default=None, envvar="XERJ_READ_URL", metavar="URL",
                      help="A streaming replica of --store that reads go to; a read after a write through "
                           "this process waits until the replica has it. Also XERJ_READ_URL.")(fn)
    return click.option("--store", default=None, envvar="XERJ_STORE", metavar="URL",
                        help="Keep the indices in this storage backend (postgresql://user@host:port/db with the "
                             "postgres extra) instead of the data directory, which keeps only local files "
                             "(keys, audit log, caches). Also XERJ_STORE.")(fn)


def check_store(command: str, store: str | None, read_url: str | None, pm: Any = None,
                data_dir: Path | None = None) -> None:
    """Open and close ``store`` (else the LMDB data directory ``data_dir``, when it holds one) once, so a database
    that is down or refuses this xerj stops the command here with its reason (exit status 2) rather than in each
    worker."""
    from xerj_core.errors import XerjError

    if not store:
        if read_url:
            click.echo(f"xerj {command}: --read-url needs --store", err=True)
            sys.exit(2)
        if data_dir is not None and (Path(data_dir) / "data.mdb").exists():
            from xerj_core.store import env as envs

            try:
                envs.release(envs.acquire(Path(data_dir)))  # refuses a store format newer than this xerj's
            except XerjError as exc:
                click.echo(f"xerj {command}: {exc.reason}", err=True)
                sys.exit(2)
        return
    from xerj_core.plugins import get_plugin_manager
    from xerj_core.store.backends import open_store

    options = {"read_url": read_url} if read_url else {}
    try:
        open_store(store, pm or get_plugin_manager(), **options).close()
    except XerjError as exc:
        click.echo(f"xerj {command}: {exc.reason}", err=True)
        sys.exit(2)


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))
