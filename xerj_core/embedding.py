"""The embedder protocol, the settings embedders are configured with, and the registry that collects them from plugins."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence, runtime_checkable

import attrs
import numpy as np

from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.plugins import collect_registrations

LEXICAL_EMBEDDER = "lexical-feature-hash"
STATIC_EMBEDDER = "wordllama-l2-supercat-256-sif"
# The same static model averaged without weights: what namespaces made before the weighted pooling hold.
STATIC_MEAN_EMBEDDER = "wordllama-l2-supercat-256"
# The static model's vector beside hashed word, trigram and word-pair features: meaning and exact terms in one cosine.
HYBRID_EMBEDDER = "wordllama-l2-supercat-256-sif-hash-2048"
# The same vector with a text's title line (a short first line above the rest) weighed in as a field of its own.
TITLED_HYBRID_EMBEDDER = "wordllama-l2-supercat-256-sif-hash-2048-title"
# Kept for callers that mean "the embedder that is always there".
DEFAULT_EMBEDDER = LEXICAL_EMBEDDER
# A new namespace gets the first of these that is installed: the hybrid of the static model and
# hashed terms with its title field when the semantic extra is there (it ranks best in
# tests/bench/bench_embedders.py), else the lexical hashing that needs nothing.
DEFAULT_PREFERENCE = (TITLED_HYBRID_EMBEDDER, HYBRID_EMBEDDER, STATIC_EMBEDDER, LEXICAL_EMBEDDER)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows of a fixed dimension, and says where its model comes from.

    Optional members: ``unavailable() -> str | None`` (why it cannot run here, without loading
    anything; None when it can) and ``configure(settings: EmbedderSettings)`` (called once after
    collection with the operator's model cache and offline choice).
    """

    id: str
    dims: int
    # An SPDX identifier of the model's (or the code's, for a model-free embedder) license.
    license: str
    # Where the model comes from: the package that ships it or the hub repository it is fetched from.
    source: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dims)`` float32 array; rows have unit norm (zero for empty text)."""
        ...


@attrs.frozen
class EmbedderSettings:
    """What an operator decides about model files: where they are cached and whether fetching them is allowed."""

    model_cache: Path | None = None
    offline: bool = False


def embed_non_blank(texts: Sequence[str], dims: int, model: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """Rows for ``texts`` from ``model`` run on the non-blank ones only, L2-normalised; blank text gets the zero row.

    A model would give whitespace a vector of its own; the protocol wants the
    zero row, and normalising here holds whatever pooling the model uses.
    """
    out = np.zeros((len(texts), dims), dtype=np.float32)
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    if not wanted:
        return out
    rows = np.asarray(model([texts[i] for i in wanted]), dtype=np.float32)
    if rows.shape != (len(wanted), dims):
        raise IllegalArgument(f"the model returned vectors of shape {rows.shape[1:]}, not the {dims} dimensions "
                              f"its embedder is registered with")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.divide(rows, norms, out=rows, where=norms > 0)
    out[wanted] = rows
    return out


def default_model_cache() -> Path:
    """The platform's user cache directory for downloaded models (``~/.cache/xerj/models`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("xerj")) / "models"


def collect_embedders(pm, settings: EmbedderSettings | None = None) -> dict[str, Embedder]:
    """Every embedder the plugins registered, keyed by id and configured; a duplicate id is an error naming the plugin."""
    found: dict[str, Embedder] = {}
    for plugin, (embedder, *_rest) in collect_registrations(pm, "xerj_register_embedders"):
        if not isinstance(embedder, Embedder):
            raise PluginError(f"plugin {plugin!r} registered {embedder!r}, which is not an Embedder "
                              f"(it needs id, dims, license, source and embed)")
        if embedder.id in found:
            raise PluginError(f"plugin {plugin!r} registered embedder {embedder.id!r}, which is already registered")
        configure = getattr(embedder, "configure", None)
        if configure is not None:
            configure(settings or EmbedderSettings())
        found[embedder.id] = embedder
    return found


def unavailable(embedder: Embedder) -> str | None:
    """Why ``embedder`` cannot run on this machine, or None when it can (nothing is loaded to find out)."""
    check = getattr(embedder, "unavailable", None)
    return check() if check is not None else None


def installed(embedders: dict[str, Embedder]) -> list[str]:
    """The ids of the embedders that can run here, sorted."""
    return sorted(i for i, e in embedders.items() if unavailable(e) is None)


def _installed_list(embedders: dict[str, Embedder]) -> str:
    return ", ".join(installed(embedders)) or "none"


def get_embedder(embedders: dict[str, Embedder], embedder_id: str) -> Embedder:
    """The embedder ``embedder_id``; IllegalArgument naming the installed ones when it is unknown or cannot run."""
    embedder = embedders.get(embedder_id) if isinstance(embedder_id, str) else None
    if embedder is None:
        raise IllegalArgument(f"unknown embedder [{embedder_id}]; installed: {_installed_list(embedders)}")
    why = unavailable(embedder)
    if why is not None:
        raise IllegalArgument(f"embedder [{embedder_id}] is not installed: {why}", embedder=embedder_id)
    return embedder


def default_embedder_id(embedders: dict[str, Embedder], configured: str | None = None,
                        preference: Iterable[str] = DEFAULT_PREFERENCE) -> str:
    """The embedder a new namespace gets: the configured one (checked), else the first installed preference."""
    if configured:
        return get_embedder(embedders, configured).id
    for candidate in preference:
        found = embedders.get(candidate)
        if found is not None and unavailable(found) is None:
            return candidate
    return LEXICAL_EMBEDDER


def describe(embedder: Embedder) -> dict[str, object]:
    """The public description of an embedder: id, dims, license, source and whether it runs here."""
    why = unavailable(embedder)
    body: dict[str, object] = {"id": embedder.id, "dims": embedder.dims, "license": embedder.license,
                               "source": embedder.source, "installed": why is None}
    if why is not None:
        body["unavailable"] = why
    return body
