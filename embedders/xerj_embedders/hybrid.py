"""The default semantic embedder: WordLlama's pooled meaning and hashed exact terms side by side in one vector.

A dense model matches meaning across different words but blurs names, titles
and phrases a note states exactly; hashed lexical features match those and
nothing else. Concatenating the two unit vectors, scaled by the square roots
of their shares, makes one cosine the weighted sum of both cosines::

    v = [sqrt(s) * dense / |dense|, sqrt(1 - s) * lexical / |lexical|]
    cos(v, w) = s * cos_dense + (1 - s) * cos_lexical

so kNN over one column ranks by meaning and exact terms together (the
dense-plus-sparse combination of hybrid retrieval, done inside the vector).

* The dense half is ``wordllama-l2-supercat-256-sif`` (256 dims): the same
  table and the same SIF and log-TF pooling (:mod:`xerj_embedders.static`).
* The lexical half (``LEXICAL_DIMS`` signed hashed buckets) holds, for each
  lowercase word of :func:`xerj_core.text.tokenize`: the word and its padded
  character trigrams, hashed as :mod:`xerj_embedders.lexical` hashes them,
  and each pair of adjacent words, so "code of conduct" matches that phrase
  more than its words strewn apart. A word's features count ``1 + ln(tf)``
  times its SIF weight ``a / (a + p)``, where ``p`` is the word's unigram
  probability under the static model's tokenizer (the product of its pieces'
  Zipf estimates), so "the" and "of" weigh little and a rare name much; a
  pair weighs by the product of its words' probabilities.

The constants were chosen on text other than the benchmark's vault (Markdown
sections of the READMEs and documents installed beside xerj, and docstrings of
installed Python packages, each queried by its heading or name and by its
first sentence): 1,024 buckets (256 and 512 lose to collisions, 2,048 gains
little for twice the size), trigrams at 0.3 of a word, pairs at 1.0, the dense
share at 0.25. The cost is 1,280 dimensions per vector.

Nothing is downloaded; the ``semantic`` extra is all it needs, and without it
choosing this embedder is refused with the extra named, as for the static one.
"""

from __future__ import annotations

import itertools
import threading
from typing import Sequence

import attrs
import numpy as np

from xerj_core import hookimpl
from xerj_core.embedding import HYBRID_EMBEDDER, embed_non_blank
from xerj_core.text import tokenize
from xerj_embedders import static
from xerj_embedders.lexical import signed_buckets, word_features

LEXICAL_DIMS = 1024
DIMS = static.DIMS + LEXICAL_DIMS
DENSE_SHARE = 0.25
CHAR_WEIGHT = 0.3
PAIR_WEIGHT = 1.0
CHAR_NGRAM = 3
# Lowercase words whose features are kept (about 0.3 kB each, so some 20 MB at most).
WORD_CACHE = 1 << 16

_DENSE_SCALE = np.float32(np.sqrt(DENSE_SHARE))
_LEXICAL_SCALE = np.float32(np.sqrt(1.0 - DENSE_SHARE))
# splitmix64's constants: a pair's hash is its two word hashes mixed, so pairs need no string building.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def pair_hashes(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each ordered pair of word hashes (uint64 arithmetic wraps, as intended)."""
    z = (left * _GOLDEN) ^ right
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


@attrs.define
class _Words:
    """Every lowercase word seen so far, numbered, with its hash, probability and lexical features as flat arrays."""

    ids: dict[str, int] = attrs.field(factory=dict)
    hashes: np.ndarray = attrs.field(factory=lambda: np.zeros(0, np.uint64))
    probability: np.ndarray = attrs.field(factory=lambda: np.zeros(0, np.float64))
    offsets: np.ndarray = attrs.field(factory=lambda: np.zeros(1, np.int64))  # word i: features offsets[i]:offsets[i+1]
    buckets: np.ndarray = attrs.field(factory=lambda: np.zeros(0, np.int64))
    values: np.ndarray = attrs.field(factory=lambda: np.zeros(0, np.float64))  # signed, kind- and SIF-weighted


def _word_probability(table: static._Table, word: str) -> float:
    """The word's probability as a sequence of the tokenizer's pieces, each as frequent as Zipf's law says."""
    ids = [i for i in table.tokenizer.encode(word, add_special_tokens=False).ids if i < table.vocab]
    return float(np.prod(table.probability[ids])) if ids else 0.0


class _Lexicon:
    """The process's numbered words, grown under a lock; a batch works on the snapshot it was numbered against."""

    def __init__(self) -> None:
        self._words = _Words()
        self._lock = threading.Lock()

    def number(self, table: static._Table, words: list[str]) -> tuple[_Words, np.ndarray]:
        """The snapshot and the id of each of ``words`` in it, adding the unseen ones."""
        with self._lock:
            known = self._words
            unseen = list(dict.fromkeys(word for word in words if word not in known.ids))
            if unseen:
                if len(known.ids) + len(unseen) > WORD_CACHE:
                    # A bound on memory: features never change, so starting over loses only time.
                    known = _Words()
                    unseen = list(dict.fromkeys(words))
                known = self._grow(table, known, unseen)
                self._words = known
            ids = np.fromiter(map(known.ids.__getitem__, words), dtype=np.int64, count=len(words))
        return known, ids

    @staticmethod
    def _grow(table: static._Table, known: _Words, unseen: list[str]) -> _Words:
        probability = np.array([_word_probability(table, word) for word in unseen], dtype=np.float64)
        sif = static.SIF_COEFFICIENT / (static.SIF_COEFFICIENT + probability)
        per_word = [word_features(word, CHAR_NGRAM) for word in unseen]
        lengths = np.fromiter(map(len, per_word), dtype=np.int64, count=len(per_word))
        hashes = np.concatenate(per_word)
        buckets, signs = signed_buckets(hashes, LEXICAL_DIMS)
        kind = np.full(len(hashes), CHAR_WEIGHT)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        kind[starts] = 1.0  # each word's own feature comes first
        ids = dict(known.ids)
        ids.update((word, len(known.ids) + n) for n, word in enumerate(unseen))
        return _Words(
            ids=ids,
            hashes=np.concatenate([known.hashes, hashes[starts]]),
            probability=np.concatenate([known.probability, probability]),
            offsets=np.concatenate([known.offsets, known.offsets[-1] + np.cumsum(lengths)]),
            buckets=np.concatenate([known.buckets, buckets]),
            values=np.concatenate([known.values, signs * kind * np.repeat(sif, lengths)]),
        )


_lexicon = _Lexicon()


def lexical_rows(table: static._Table, texts: list[str]) -> np.ndarray:
    """``(len(texts), LEXICAL_DIMS)`` float64 sums of each text's weighted word and word-pair features (unnormalised)."""
    tokens = [tokenize(text) for text in texts]
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    words, ids = _lexicon.number(table, list(itertools.chain.from_iterable(tokens)))
    rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    if not len(ids):
        return np.zeros((len(texts), LEXICAL_DIMS))

    # Words: each distinct (text, word) once, weighted 1 + ln(tf), expanded into the word's features.
    pair_key, tf = np.unique(rows * len(words.ids) + ids, return_counts=True)
    text_of, word_of = np.divmod(pair_key, len(words.ids))
    per = np.diff(words.offsets)[word_of]
    feature = np.repeat(words.offsets[word_of] - (np.cumsum(per) - per), per) + np.arange(int(per.sum()))
    slots = [np.repeat(text_of, per) * LEXICAL_DIMS + words.buckets[feature]]
    weights = [words.values[feature] * np.repeat(1.0 + np.log(tf), per)]

    # Adjacent word pairs within a text: sorted by (text, pair hash) so a pair repeated in a text counts 1 + ln(tf).
    adjacent = np.flatnonzero(rows[1:] == rows[:-1])
    if len(adjacent):
        left, right = ids[adjacent], ids[adjacent + 1]
        hashes = pair_hashes(words.hashes[left], words.hashes[right])
        order = np.lexsort((hashes, rows[adjacent]))
        text_sorted, hash_sorted = rows[adjacent][order], hashes[order]
        # Runs of equal (text, hash): a new run starts where either changes.
        changed = np.concatenate(([True], (text_sorted[1:] != text_sorted[:-1]) | (hash_sorted[1:] != hash_sorted[:-1])))
        first = np.flatnonzero(changed)
        tf = np.diff(np.append(first, len(order)))
        probability = words.probability[left[order[first]]] * words.probability[right[order[first]]]
        buckets, signs = signed_buckets(hash_sorted[first], LEXICAL_DIMS)
        slots.append(text_sorted[first] * LEXICAL_DIMS + buckets)
        weights.append(signs * PAIR_WEIGHT * (1.0 + np.log(tf))
                       * static.SIF_COEFFICIENT / (static.SIF_COEFFICIENT + probability))

    flat = np.bincount(np.concatenate(slots), weights=np.concatenate(weights), minlength=len(texts) * LEXICAL_DIMS)
    return flat.reshape(len(texts), LEXICAL_DIMS)


def _unit(rows: np.ndarray, scale: np.float32) -> np.ndarray:
    rows = rows.astype(np.float32, copy=False)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.divide(rows, norms / scale, out=rows, where=norms > 0)
    return rows


def hybrid_rows(texts: list[str]) -> np.ndarray:
    """The dense half and the lexical half of each text, each of unit norm times the square root of its share."""
    table = static._loaded_table(HYBRID_EMBEDDER)
    dense = _unit(table.pool(texts, weighted=True), _DENSE_SCALE)
    lexical = _unit(lexical_rows(table, texts), _LEXICAL_SCALE)
    return np.hstack([dense, lexical])


class HybridEmbedder(static.StaticEmbedder):
    """WordLlama SIF pooling (256 dims) beside 1,024 hashed word, trigram and word-pair features; ``semantic`` extra."""

    id = HYBRID_EMBEDDER
    dims = DIMS
    license = "MIT"
    source = ("the wordllama package's l2_supercat 256-dimension model (weights and tokenizer inside its wheel), "
              "SIF and log-TF pooled, concatenated with 1,024 hashed word, character-trigram and word-pair "
              "features (xerj's own code); cosine = 0.25 of the model's + 0.75 of the words'")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 1280)`` float32 array of unit rows (zero rows for blank text)."""
        return embed_non_blank(texts, DIMS, hybrid_rows)


@hookimpl
def xerj_register_embedders(register) -> None:
    register(HybridEmbedder())
