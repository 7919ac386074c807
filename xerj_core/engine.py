"""The Engine facade every surface uses (HTTP, CLI, MCP, console): store, plugins, configuration."""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from xerj_core.plugins import XerjPluginManager, get_plugin_manager
from xerj_core.store import Store

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.audit import AuditTrail
    from xerj_core.embedding import Embedder
    from xerj_core.graph.service import GraphService
    from xerj_core.memory.service import MemoryService
    from xerj_core.query.service import SearchService

log = logging.getLogger(__name__)


def default_data_dir() -> Path:
    """The platform's user data directory for xerj (``~/.local/share/xerj`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("xerj"))


@attrs.define
class EngineConfig:
    """Settings an operator chooses; surfaces pass them in, nothing reads the environment behind them."""

    # The embedder new memory namespaces get; None picks the best installed one
    # (xerj_core.embedding.DEFAULT_PREFERENCE). A namespace keeps the one it was created with.
    embedder: str | None = None
    tail_rows: int = 1024
    # Where embedders find their model files, and whether they may fetch missing ones.
    model_cache: Path | None = None
    offline: bool = False
    # Which successful reads the HTTP audit slot records: ``all``, ``reserved``
    # (reads touching a ``.xerj-`` index) or ``none``. Writes and denials always are.
    audit_reads: str = "reserved"
    # The JSONL audit sink rotates its file to a numbered one past this size.
    audit_max_bytes: int = 64 * 2**20
    # A storage backend URL (``postgresql://...``) holding the indices instead of the data directory's LMDB;
    # the data directory then keeps only what is local (keys, audit log, derived views). ``read_url``: a
    # replica of it that reads may go to (read-your-writes is kept; see docs/scale-out.md).
    store_url: str | None = None
    read_url: str | None = None


class Engine:
    """One data directory served by one store, with the plugin manager and the engine-level APIs.

    ``search``, ``graph`` and ``memory`` are built on first use so a command that
    needs only one of them pays for nothing else. Surfaces never open LMDB themselves.
    """

    def __init__(self, data_dir: str | Path, pm: XerjPluginManager | None = None, *,
                 config: EngineConfig | None = None, store: Store | None = None) -> None:
        """``data_dir`` is a folder (LMDB) or a backend URL such as ``lmdb:///srv/xerj``."""
        from xerj_core.store.backends import open_store, split_target

        self.data_dir = Path(split_target(data_dir)[1])
        self.pm = pm if pm is not None else get_plugin_manager()
        self.config = config or EngineConfig()
        if store is None:
            options: dict[str, Any] = {"tail_rows": self.config.tail_rows}
            if self.config.store_url:
                options["local_dir"] = self.data_dir
            if self.config.read_url:
                options["read_url"] = self.config.read_url
            store = open_store(self.config.store_url or data_dir, self.pm, **options)
        self.store = store
        self.store.listeners.append(self._documents_written)
        from xerj_core.autoindex.migrate import migrate

        migrate(self.store)  # a directory written by an older build is brought up to date before any read

    def close(self) -> None:
        if "audit" in self.__dict__:
            self.audit.close()
        self.store.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _documents_written(self, index: str, ids: list[str], deleted: list[str]) -> None:
        try:
            self.pm.hook.xerj_documents_written(index=index, ids=ids, deleted=deleted)
        except Exception:  # an observer must never undo or fail a committed write
            log.exception("xerj_documents_written observer failed")

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Call an event hook after a commit; observer failures are logged, never raised."""
        try:
            getattr(self.pm.hook, hook)(**kwargs)
        except Exception:
            log.exception("%s observer failed", hook)

    @cached_property
    def audit(self) -> "AuditTrail":
        """The audit trail: every registered sink, opened on this data directory on first use."""
        from xerj_core.audit import AuditTrail

        return AuditTrail(self.pm, self.data_dir, self.config)

    @cached_property
    def embedders(self) -> dict[str, Embedder]:
        from xerj_core.embedding import EmbedderSettings, collect_embedders

        settings = EmbedderSettings(model_cache=self.config.model_cache, offline=self.config.offline)
        return collect_embedders(self.pm, settings)

    @property
    def default_embedder(self) -> str:
        """The id of the embedder a new memory namespace gets (the configured one, checked, or the best installed)."""
        from xerj_core.embedding import default_embedder_id

        return default_embedder_id(self.embedders, self.config.embedder)

    def _embedders(self) -> dict[str, Embedder]:
        return self.embedders

    # Each service is built on first use and handed only the collaborators it needs.

    @cached_property
    def search(self) -> SearchService:
        from xerj_core.query.service import SearchService

        return SearchService(self.store, embedders=self._embedders)

    @cached_property
    def graph(self) -> GraphService:
        from xerj_core.graph.service import GraphService

        return GraphService(self.store, notify=self.notify, search=self.search,
                            embedder_of=lambda brain: self.memory.embedder_of(brain))

    @cached_property
    def memory(self) -> MemoryService:
        from xerj_core.memory.service import MemoryService

        return MemoryService(self.store, graph=self.graph, embedders=self._embedders,
                             default_embedder=lambda: self.default_embedder, config=self.config)
