"""The default embedder: hashed word and character n-gram features, no model, fully offline.

Every text becomes a sparse bag of features, each feature is hashed with
xxh3_64 into one of ``dims`` buckets (63 bits of the hash) with a sign (its
top bit), term frequencies are damped to ``1 + log(tf)``, and each row is
L2-normalised. The hash is seedless xxh3, never Python's ``hash()``, so the
same text gives the same vector in every process, on every machine.

Features, from the core's lowercase Unicode word tokens (:func:`xerj_core.text.run_words`):

* each word itself (weight ``WORD_WEIGHT``);
* each character ``char_ngram``-gram of the word padded with ``<`` and ``>``
  (weight ``CHAR_WEIGHT``), so "ferments" and "fermented" share most of their
  features while no stemming is pretended.

A text with no word token (empty, whitespace, punctuation only) has no
feature and embeds to the zero row. The vectors are lexical, not semantic:
texts are close when they share words or word pieces.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
import xxhash

from xerj_core import hookimpl
from xerj_core.text import run_words

EMBEDDER_ID = "lexical-feature-hash"
DEFAULT_DIMS = 384
DEFAULT_CHAR_NGRAM = 3

WORD_WEIGHT = 1.0
# A word of n letters yields n character n-grams but only one word feature;
# a smaller per-gram weight keeps whole-word matches the stronger signal.
CHAR_WEIGHT = 0.5

# Each feature kind hashes under its own prefix so a word never collides
# with an n-gram that happens to spell the same characters.
_WORD_PREFIX = b"w\x1f"
_CHAR_PREFIX = b"c\x1f"
# The top bit of a feature's hash is its sign; the other 63 pick its bucket.
_SIGN_BIT = np.uint64(1 << 63)
_BUCKET_BITS = np.uint64((1 << 63) - 1)


# Vocabularies repeat, so each word's hashes are computed once per process;
# about 400 bytes an entry, so the bound keeps the cache near 13 MB.
@lru_cache(maxsize=1 << 15)
def word_features(word: str, char_ngram: int) -> np.ndarray:
    """The feature hashes of one word: the word itself first, then its character n-grams."""
    hashes = [xxhash.xxh3_64_intdigest(_WORD_PREFIX + word.encode("utf-8"))]
    padded = f"<{word}>"
    for start in range(max(len(padded) - char_ngram + 1, 0)):
        gram = padded[start : start + char_ngram]
        hashes.append(xxhash.xxh3_64_intdigest(_CHAR_PREFIX + gram.encode("utf-8")))
    return np.array(hashes, dtype=np.uint64)


def signed_buckets(hashes: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """The bucket (int64, from the low 63 bits) and the sign (+1.0 or -1.0, from the top bit) of each uint64 hash."""
    buckets = ((hashes & _BUCKET_BITS) % np.uint64(dims)).astype(np.int64)
    return buckets, np.where(hashes & _SIGN_BIT, -1.0, 1.0)


class LexicalFeatureHashEmbedder:
    """Feature-hashing embedder: deterministic, dependency-light, no model to load."""

    id = EMBEDDER_ID
    # No model: the code is all there is, and it is xerj's own.
    license = "Apache-2.0"
    source = "built in (xerj_embedders.lexical), no model file"

    def __init__(self, dims: int = DEFAULT_DIMS, char_ngram: int = DEFAULT_CHAR_NGRAM) -> None:
        if dims < 1:
            raise ValueError(f"dims must be positive, got {dims}")
        if char_ngram < 1:
            raise ValueError(f"char_ngram must be positive, got {char_ngram}")
        self.dims = dims
        self.char_ngram = char_ngram

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dims={self.dims}, char_ngram={self.char_ngram})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dims)`` float32 array of unit rows (zero rows for featureless text)."""
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dims), dtype=np.float32)

        # 1. Tokenise and number the distinct words of this batch.
        vocabulary: dict[str, int] = {}
        token_rows: list[int] = []
        token_words: list[int] = []
        for row, text in enumerate(texts):
            words = run_words(text)
            token_rows.extend([row] * len(words))
            token_words.extend(vocabulary.setdefault(word, len(vocabulary)) for word in words)
        if not vocabulary:
            return np.zeros((n, self.dims), dtype=np.float32)

        # 2. Features of each distinct word, as one flat table with CSR offsets.
        per_word = [word_features(word, self.char_ngram) for word in vocabulary]
        lengths = np.fromiter(map(len, per_word), dtype=np.int64, count=len(per_word))
        offsets = np.zeros(len(per_word) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        table_hashes = np.concatenate(per_word)
        table_weights = np.full(len(table_hashes), CHAR_WEIGHT)
        table_weights[offsets[:-1]] = WORD_WEIGHT
        # Number distinct feature hashes so (row, feature) pairs pack into one int64.
        unique_hashes, table_feature = np.unique(table_hashes, return_inverse=True)

        # 3. Expand every token occurrence into its word's features.
        rows = np.asarray(token_rows, dtype=np.int64)
        words = np.asarray(token_words, dtype=np.int64)
        counts = lengths[words]
        total = int(counts.sum())
        starts = offsets[words]
        run_starts = np.repeat(np.cumsum(counts) - counts, counts)
        table_index = np.repeat(starts, counts) + (np.arange(total, dtype=np.int64) - run_starts)
        occurrence_rows = np.repeat(rows, counts)
        occurrence_features = table_feature[table_index]

        # 4. Term frequency per (row, feature), damped sublinearly.
        n_features = len(unique_hashes)
        keys, tf = np.unique(occurrence_rows * n_features + occurrence_features, return_counts=True)
        key_rows = keys // n_features
        key_features = keys % n_features
        # Kind weight per distinct feature (a hash is a word or an n-gram, never both).
        feature_weight = np.empty(n_features, dtype=np.float64)
        feature_weight[table_feature] = table_weights
        values = (1.0 + np.log(tf)) * feature_weight[key_features]

        # 5. Hash each feature to a signed bucket and accumulate.
        buckets, signs = signed_buckets(unique_hashes[key_features], self.dims)
        flat = np.bincount(key_rows * self.dims + buckets, weights=signs * values, minlength=n * self.dims)
        matrix = flat.reshape(n, self.dims)

        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return matrix.astype(np.float32)


@hookimpl
def xerj_register_embedders(register) -> None:
    register(LexicalFeatureHashEmbedder())
