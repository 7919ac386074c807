"""The offline semantic embedder: WordLlama's static token embeddings (MIT), shipped inside the ``wordllama`` wheel.

``pip install 'xerj[semantic]'`` is the only step. The wheel carries the
``l2_supercat`` 256-dimension weights and their tokenizer configuration, so
nothing is fetched, no PyTorch is needed, and embedding is a table look-up and
a mean per text (tens of thousands of short texts a second on one core).

Loading has one trap (wordllama 0.4.0.post1): ``WordLlama.load`` looks for the
packaged tokenizer under ``wordllama/tokenizer/`` while the wheel ships it
under ``wordllama/tokenizers/``, so a plain load falls through to a download.
The loader here hands ``load`` a private cache directory whose ``tokenizers/``
folder holds the packaged file, with ``disable_download=True``: a missing file
is an error, never a network call.

Vectors are wordllama's average-pooled token embeddings, L2-normalised here;
blank text embeds to the zero row, as the protocol asks (wordllama would give a
whitespace token a vector). The plugin always registers; without the extra,
choosing the embedder is refused with the extra named.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xerj_core import hookimpl
from xerj_core.embedding import STATIC_EMBEDDER, embed_non_blank
from xerj_core.errors import IllegalArgument

CONFIG = "l2_supercat"
DIMS = 256
TOKENIZER_FILE = "l2_supercat_tokenizer_config.json"
EXTRA_HINT = "it needs the 'semantic' extra: pip install 'xerj[semantic]'"
# wordllama pads each batch to its longest text; its own default of 64 measured fastest here
# (20,000 vault sentences: 32, 64 and 256 a batch, four interleaved rounds).
BATCH_SIZE = 64


def _import_quietly() -> Any:
    """Import wordllama without letting it configure the process's logging.

    Its inference module calls ``logging.basicConfig(level=INFO)`` at import,
    which would add a stderr handler to the root logger of whatever embeds it
    (a server, a test run); the handlers it adds are taken off again.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return wordllama


def _load() -> Any:
    """The WordLlama inference object, loaded from the wheel's own files with downloads disabled."""
    try:
        wordllama = _import_quietly()
    except ImportError as exc:
        raise IllegalArgument(f"embedder [{STATIC_EMBEDDER}] cannot load ({exc}); {EXTRA_HINT}",
                              embedder=STATIC_EMBEDDER) from None
    packaged = Path(wordllama.__file__).parent / "tokenizers" / TOKENIZER_FILE
    if not packaged.is_file():
        raise IllegalArgument(f"embedder [{STATIC_EMBEDDER}]: the wordllama wheel has no {TOKENIZER_FILE}; "
                              f"reinstall it: pip install --force-reinstall 'xerj[semantic]'",
                              embedder=STATIC_EMBEDDER)
    with tempfile.TemporaryDirectory(prefix="xerj-wordllama-") as cache:
        (Path(cache) / "tokenizers").mkdir()
        shutil.copyfile(packaged, Path(cache) / "tokenizers" / TOKENIZER_FILE)
        try:
            # Weights and tokenizer are read into memory here, so the folder may go afterwards.
            return wordllama.WordLlama.load(CONFIG, cache_dir=Path(cache), dim=DIMS, disable_download=True)
        except (FileNotFoundError, OSError, ValueError) as exc:
            raise IllegalArgument(f"embedder [{STATIC_EMBEDDER}] cannot load its packaged model: {exc}",
                                  embedder=STATIC_EMBEDDER) from None


class StaticEmbedder:
    """WordLlama ``l2_supercat`` static embeddings, 256 dims, from the ``semantic`` extra; never downloads."""

    id = STATIC_EMBEDDER
    dims = DIMS
    license = "MIT"
    source = "the wordllama package (weights and tokenizer inside its wheel), l2_supercat 256-dimension model"

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    def unavailable(self) -> str | None:
        return None if importlib.util.find_spec("wordllama") is not None else EXTRA_HINT

    def _loaded(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load()
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 256)`` float32 array of unit rows (zero rows for blank text)."""
        return embed_non_blank(texts, DIMS, lambda batch: self._loaded().embed(batch, norm=False,
                                                                                 batch_size=BATCH_SIZE))


@hookimpl
def xerj_register_embedders(register) -> None:
    register(StaticEmbedder())
