"""The embedder protocol and the registry that collects embedders from plugins."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.plugins import collect_registrations

DEFAULT_EMBEDDER = "lexical-feature-hash"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows of a fixed dimension."""

    id: str
    dims: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dims)`` float32 array; rows have unit norm (zero for empty text)."""
        ...


def collect_embedders(pm) -> dict[str, Embedder]:
    """Every embedder the plugins registered, keyed by id; a duplicate id is an error naming the plugin."""
    found: dict[str, Embedder] = {}
    for plugin, (embedder, *_rest) in collect_registrations(pm, "xerj_register_embedders"):
        if not isinstance(embedder, Embedder):
            raise PluginError(f"plugin {plugin!r} registered {embedder!r}, which is not an Embedder")
        if embedder.id in found:
            raise PluginError(f"plugin {plugin!r} registered embedder {embedder.id!r}, which is already registered")
        found[embedder.id] = embedder
    return found


def get_embedder(embedders: dict[str, Embedder], embedder_id: str) -> Embedder:
    try:
        return embedders[embedder_id]
    except KeyError:
        known = ", ".join(sorted(embedders)) or "none"
        raise IllegalArgument(f"unknown embedder [{embedder_id}]; installed: {known}") from None
