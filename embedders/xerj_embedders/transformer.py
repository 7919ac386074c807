"""Transformer sentence embedders through fastembed (Apache-2.0; ONNX Runtime, no PyTorch), behind the ``neural`` extra.

Every text model fastembed knows is registered under fastembed's own id
(``BAAI/bge-small-en-v1.5``, ``sentence-transformers/all-MiniLM-L6-v2``, ...),
with the dimension, license and hub repository fastembed's catalogue records,
so ``xerj plugins --all`` and ``xerj models list`` say where each model comes
from before anything is fetched.

Model files live in the model cache (``--model-cache DIR`` / ``XERJ_MODEL_CACHE``,
default the user cache directory). ``xerj models pull ID`` fills it. Without
``--offline`` a model missing from the cache is fetched on first use; with
``--offline`` only the cache is read, and a missing model is a clear refusal
naming the model and the command that fetches it, never a stack trace and
never a quiet fallback to another embedder.

Blank text embeds to the zero row and every other row is L2-normalised here,
whatever pooling the model uses.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xerj_core import hookimpl
from xerj_core.embedding import EmbedderSettings, default_model_cache, embed_non_blank
from xerj_core.errors import IllegalArgument

EXTRA_HINT = "it needs the 'neural' extra: pip install 'xerj[neural]'"
# Texts per onnxruntime call; fastembed pads a batch to its longest text.
BATCH_SIZE = 64
# fastembed's catalogue writes licenses in lower case; SPDX spells these so.
_SPDX = {"mit": "MIT", "apache-2.0": "Apache-2.0", "cc-by-nc-4.0": "CC-BY-NC-4.0"}
# Named even without fastembed installed, so choosing them is refused with the extra named
# instead of "unknown embedder": (dims, license, hub repository) as fastembed 0.9 lists them.
_WELL_KNOWN = {
    "BAAI/bge-small-en-v1.5": (384, "MIT", "Qdrant/bge-small-en-v1.5-onnx-Q"),
    "sentence-transformers/all-MiniLM-L6-v2": (384, "Apache-2.0", "Qdrant/all-MiniLM-L6-v2-onnx"),
}


def fastembed_installed() -> bool:
    return importlib.util.find_spec("fastembed") is not None


def catalogue() -> dict[str, tuple[int, str, str]]:
    """``{model id: (dims, license, hub repository or URL)}`` for every text model fastembed can run."""
    if not fastembed_installed():
        return dict(_WELL_KNOWN)
    from fastembed import TextEmbedding

    found = {}
    for model in TextEmbedding.list_supported_models():
        sources = model.get("sources") or {}
        where = sources.get("hf") or sources.get("url") or "unknown"
        license_ = str(model.get("license") or "unknown")
        found[model["model"]] = (int(model["dim"]), _SPDX.get(license_.lower(), license_), where)
    return found


def _quiet_fastembed() -> None:
    """fastembed logs every failed cache probe and download attempt through loguru; xerj reports them itself."""
    try:
        from loguru import logger
    except ImportError:  # pragma: no cover - loguru comes with fastembed
        return
    logger.disable("fastembed")


class FastEmbedEmbedder:
    """One fastembed text model, loaded from the model cache on first use."""

    def __init__(self, model_id: str, dims: int, license: str, hub_source: str) -> None:
        self.id = model_id
        self.dims = dims
        self.license = license
        self.source = f"fastembed, model files from the hub repository {hub_source}"
        self.hub_source = hub_source
        self.settings = EmbedderSettings()
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    def configure(self, settings: EmbedderSettings) -> None:
        self.settings = settings

    @property
    def cache_dir(self) -> Path:
        return Path(self.settings.model_cache or default_model_cache()).expanduser()

    def unavailable(self) -> str | None:
        return None if fastembed_installed() else EXTRA_HINT

    def cached(self) -> bool:
        """Whether the model cache holds a snapshot of this model (the hub client's layout); nothing is loaded."""
        snapshots = self.cache_dir / f"models--{self.hub_source.replace('/', '--')}" / "snapshots"
        return snapshots.is_dir() and any(snapshots.iterdir())

    def pull_command(self) -> str:
        cache = f" --model-cache {self.cache_dir}" if self.settings.model_cache else ""
        return f"xerj models pull {self.id}{cache}"

    def _open(self, *, offline: bool) -> Any:
        if not fastembed_installed():
            raise IllegalArgument(f"embedder [{self.id}] is not installed: {EXTRA_HINT}", embedder=self.id)
        from fastembed import TextEmbedding

        _quiet_fastembed()
        try:
            return TextEmbedding(model_name=self.id, cache_dir=str(self.cache_dir), local_files_only=offline)
        except Exception as exc:  # noqa: BLE001 - fastembed raises ValueError, hub and OS errors alike
            if offline:
                raise IllegalArgument(
                    f"model [{self.id}] is not in the model cache [{self.cache_dir}] and offline mode forbids "
                    f"fetching it; fetch it once with: {self.pull_command()}", embedder=self.id) from None
            raise IllegalArgument(
                f"model [{self.id}] could not be loaded into the model cache [{self.cache_dir}]: "
                f"{str(exc).strip() or type(exc).__name__}; fetch it with: {self.pull_command()}",
                embedder=self.id) from None

    def _loaded(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._open(offline=self.settings.offline)
        return self._model

    def pull(self) -> Path:
        """Fetch the model into the cache (never offline) and load it once to prove the files work."""
        self._model = self._open(offline=False)
        return self.cache_dir

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dims)`` float32 array of unit rows (zero rows for blank text)."""
        def model(batch: list[str]) -> np.ndarray:
            return np.asarray(list(self._loaded().embed(batch, batch_size=BATCH_SIZE)), dtype=np.float32)

        return embed_non_blank(texts, self.dims, model)


@hookimpl
def xerj_register_embedders(register) -> None:
    for model_id, (dims, license_, source) in catalogue().items():
        register(FastEmbedEmbedder(model_id, dims, license_, source))
