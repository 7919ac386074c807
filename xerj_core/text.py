"""Text helpers shared by the store, the query engine and the detectors: the one tokenizer."""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lowercase Unicode words, in order; no stemming, no stop words."""
    return _WORD.findall(text.lower())
