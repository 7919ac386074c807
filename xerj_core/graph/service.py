"""GraphService: the second brain's engine-level API, the writing and reading halves over one store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from xerj_core.errors import IndexNotFound
from xerj_core.graph import viewsweep
from xerj_core.graph.brain import RESERVED_PREFIX, edges_index, validate_brain_name
from xerj_core.graph.hop import EDGE_CAP, FRONTIER_CAP, ViewCache
from xerj_core.graph.history import EdgeHistory
from xerj_core.graph.reading import GraphReading
from xerj_core.graph.review import EdgeReview
from xerj_core.graph.writing import EdgeWriting, Notify
from xerj_core.store.env import Environment

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.query.service import SearchService
    from xerj_core.store import Store

__all__ = ["GraphService"]

MAX_SEEDS = 64


class GraphService(EdgeWriting, EdgeReview, EdgeHistory, GraphReading):
    """The graph contract over one store; every surface (HTTP, MCP, autoindex) calls this.

    Its collaborators are named: the ``store`` it reads and writes, ``notify``
    to announce committed edge writes (``xerj_edges_written``), the ``search``
    service whose aggregations build the overview, and ``embedder_of(brain)``, the
    embedder id the overview reports (the one the brain's memory namespace uses).
    """

    def __init__(self, store: "Store", *, notify: Notify, search: "SearchService",
                 embedder_of: Callable[[str], str | None]) -> None:
        self.store = store
        self.notify = notify
        self.search = search
        self.embedder_of = embedder_of
        # Sealed views live as mapped files beside the data: shared page cache, not per-worker private memory.
        # A large view is built by a child process opening the same LMDB directory (another backend has none).
        self.views = ViewCache(store.path / "views", store.path if isinstance(store.env, Environment) else None)
        # A dropped index's view files are never read again: removed at its drop, and here for drops unseen.
        viewsweep.sweep(store.path / "views", store)
        store.drop_listeners.append(lambda _names: viewsweep.sweep(store.path / "views", store))
        # The contract's bounds; instance attributes so a test can shrink them.
        self.max_seeds = MAX_SEEDS
        self.frontier_cap = FRONTIER_CAP
        self.edge_cap = EDGE_CAP

    def brains(self) -> list[str]:
        """The name of every brain that has an edges index, sorted."""
        head, tail = len(RESERVED_PREFIX), len("-edges")
        return sorted(name[head:-tail] for name in self.store.index_names()
                      if name.startswith(RESERVED_PREFIX) and name.endswith("-edges") and len(name) > head + tail)

    def warm(self, brain: str) -> None:
        """Build, or map, ``brain``'s sealed view now (its table, and each sealed segment's ids and edge listings),
        so the first ego after a run does not wait for it; a brain without an edges index has nothing to warm.

        The view's files are published under ``views/``, so a server started afterwards on the same data
        directory maps them instead of building them."""
        validate_brain_name(brain)
        with self.store.read_txn() as raw:
            try:
                reader = self.store.open_reader(raw, edges_index(brain))
            except IndexNotFound:
                return
            self.views.graph(reader)
