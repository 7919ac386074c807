"""``postgresql://`` stores: xerj's store engine on a :class:`~xerj_postgres.env.PgEnvironment`, and its registration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xerj_core import hookimpl
from xerj_core.errors import PluginError
from xerj_core.store.store import DEFAULT_TAIL_ROWS, Store


class PgStore(Store):
    """A :class:`~xerj_core.store.Store` whose named databases are PostgreSQL tables.

    ``local_dir`` holds what stays on this machine (sealed graph views mapped
    from files); every process and server opening the same database URL shares
    the indices, and each read transaction sees every commit made before it.
    """

    def __init__(self, url: str, *, tail_rows: int = DEFAULT_TAIL_ROWS, read_url: str | None = None,
                 local_dir: str | Path | None = None, pool_size: int = 16) -> None:
        try:  # imported here, so xerj without the postgres extra still starts (and names it when asked for)
            from xerj_postgres.env import PgEnvironment
        except ImportError as exc:
            raise PluginError(f"the PostgreSQL store needs the postgres extra (pip install 'xerj[postgres]'): "
                              f"{exc}") from None
        env = PgEnvironment(url, read_url=read_url, pool_size=pool_size)
        self.url = url
        try:
            super().__init__(Path(local_dir) if local_dir is not None else _default_local_dir(), tail_rows=tail_rows,
                             env=env)
        except BaseException:
            env.close()
            raise

    def close(self) -> None:
        self.env.close()


def _default_local_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("xerj")) / "postgres"


def open_postgres(location: str, **options: Any) -> PgStore:
    """The opener for ``postgresql://`` and ``postgres://`` URLs (``location`` is the whole URL)."""
    return PgStore(location, **options)


@hookimpl
def xerj_register_storage_backends(register) -> None:
    register("postgresql", open_postgres)
    register("postgres", open_postgres)
