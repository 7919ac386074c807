"""Embedder ids earlier releases wrote into namespaces and no longer ship: registered so they explain themselves.

A namespace records the id of the embedder it was written with. When that
embedder is gone, "unknown embedder" would leave its owner guessing; a retired
id instead says the model is no longer installed and names its replacement and
the call that moves the namespace onto it. A retired embedder never runs.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from xerj_core import hookimpl
from xerj_core.errors import IllegalArgument


class RetiredEmbedder:
    """A placeholder for a removed embedder: the id, dims and history of what a namespace holds, and no model."""

    license = "none (retired)"

    def __init__(self, embedder_id: str, dims: int, what: str, why: str, replacement: str) -> None:
        self.id = embedder_id
        self.dims = dims
        self.source = f"retired: {what}"
        self.why = why
        self.replacement = replacement

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, replacement={self.replacement!r})"

    def unavailable(self) -> str:
        return (f"the model is no longer installed ({self.why}); its replacement is [{self.replacement}]: "
                f"move a namespace onto it with POST /_memory/{{ns}}/_reembed "
                f"{{\"embedder\": \"{self.replacement}\"}}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise IllegalArgument(f"embedder [{self.id}] is not installed: {self.unavailable()}", embedder=self.id)


# (id, dims, what it was, why it went, the id that replaces it)
RETIRED = (
    ("minilm-l6-v2-int8", 384, "all-MiniLM-L6-v2 with int8 weights, from packages without license metadata",
     "its packages carried no license and pulled in an unrelated SDK", "sentence-transformers/all-MiniLM-L6-v2"),
)


@hookimpl
def xerj_register_embedders(register) -> None:
    for entry in RETIRED:
        register(RetiredEmbedder(*entry))
