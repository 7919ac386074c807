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
  lowercase word of :func:`xerj_core.text.run_words`: the word and its padded
  character trigrams, hashed as :mod:`xerj_embedders.lexical` hashes them,
  and each pair of adjacent words, so "code of conduct" matches that phrase
  more than its words strewn apart. A word's features count ``1 + ln(tf)``
  times its SIF weight ``a / (a + p)``, where ``p`` is the word's unigram
  probability under the static model's tokenizer (the product of its pieces'
  Zipf estimates), so "the" and "of" weigh little and a rare name much; a
  pair weighs by the product of its words' probabilities.

The constants were chosen on text other than the benchmark's vault, with
``tests/bench/tune_hybrid.py`` (it prints the grid): Markdown sections of the
READMEs and documents installed beside xerj and docstrings of installed Python
packages, each queried by its heading or name and by its first sentence, and
30 hand-written paraphrase pairs that share no content word. The dense share
and the trigram weight trade exact terms against paraphrase: at a share of
0.25 the sections rank best, but the paraphrase pairs keep 0.72 of MRR@10
against the static model's 0.92 (1,024 buckets). The mean over the three sets
is flat for shares from 0.3 to 0.45 and trigram weights from 0.1 to 0.2; the
middle, 0.4 and 0.15, is what ships; word pairs at 1.0 of a word (0 or 0.5
rank lower). 2,048 buckets: the grid's 20 best points all have them.
512 and 1,024 lose to collisions, which matter most for short texts: with
1,024, one chance collision of two hashed features of a short memory
outweighs the model's evidence often enough that the paraphrase pairs drop
from 0.88 to 0.85 and the car-battery example of issue #21 is lost. So a
vector is 2,304 float32s (9 kB) against the static model's 256.

Nothing is downloaded; the ``semantic`` extra is all it needs, and without it
choosing this embedder is refused with the extra named, as for the static one.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable, Sequence

import attrs
import numpy as np

from xerj_core import hookimpl
from xerj_core.embedding import HYBRID_EMBEDDER, TITLED_HYBRID_EMBEDDER
from xerj_core.growing import GrowingRows
from xerj_core.text import run_words
from xerj_embedders import static
from xerj_embedders.lexical import signed_buckets, word_features

LEXICAL_DIMS = 2048
DIMS = static.DIMS + LEXICAL_DIMS
DENSE_SHARE = 0.4
CHAR_WEIGHT = 0.15
PAIR_WEIGHT = 1.0
CHAR_NGRAM = 3
# The titled variant: a title is a first line of at most TITLE_WORDS words with more text below it,
# and its own vector holds TITLE_SHARE of the text's (see TitledHybridEmbedder).
TITLE_SHARE = 0.1
TITLE_WORDS = 16
# Lowercase words whose features are kept (about 0.3 kB each, so some 20 MB at most, and up to as much again in
# the spare capacity of the buffers they grow in).
WORD_CACHE = 1 << 16

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


def _ranges(offsets: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the runs ``offsets[k]:offsets[k + 1]`` for each k of ``which``, end to end, and each run's length."""
    starts = offsets[which]
    counts = offsets[which + 1] - starts
    return np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum())), counts


@attrs.frozen
class _Arrays:
    """What the process has learned so far, as flat arrays (one snapshot, views that later words leave as they are).

    Lowercase words, by number: hash, probability and their lexical features
    (CSR: word k's are ``feature_offsets[k]:feature_offsets[k + 1]``).
    Whitespace-separated words, by entry: their model pieces and their
    lowercase words' numbers (CSR likewise).
    """

    hashes: np.ndarray
    probability: np.ndarray
    feature_offsets: np.ndarray
    buckets: np.ndarray
    values: np.ndarray  # signed, kind- and SIF-weighted
    piece_offsets: np.ndarray
    pieces: np.ndarray
    number_offsets: np.ndarray
    numbers: np.ndarray


def _growing(*columns: np.ndarray) -> GrowingRows:
    """A :class:`GrowingRows` holding ``columns`` (which set its dtypes)."""
    grown = GrowingRows()
    grown.append(columns)
    return grown


def _offsets() -> GrowingRows:
    return _growing(np.zeros(1, np.int64))


class _Grown:
    """The lexicon's arrays, appended in place (:class:`GrowingRows`): a word learned copies only its own entries.
    Each was a new array made by concatenation, which copied the whole lexicon for every text with a word not
    seen before: 0.35 ms of a 0.84 ms embedding at 22k words, where a text of known words takes 0.37 ms."""

    def __init__(self) -> None:
        self.words = _growing(np.zeros(0, np.uint64), np.zeros(0, np.float64))  # hashes, probability
        self.feature_offsets = _offsets()
        self.features = _growing(np.zeros(0, np.int64), np.zeros(0, np.float64))  # buckets, values
        self.piece_offsets, self.pieces = _offsets(), _growing(np.zeros(0, np.int64))
        self.number_offsets, self.numbers = _offsets(), _growing(np.zeros(0, np.int64))

    def snapshot(self) -> _Arrays:
        (hashes, probability), (buckets, values) = self.words.view(self.words.n), self.features.view(self.features.n)
        return _Arrays(hashes, probability, _whole(self.feature_offsets), buckets, values,
                       _whole(self.piece_offsets), _whole(self.pieces), _whole(self.number_offsets),
                       _whole(self.numbers))

    def add_words(self, table: static._Table, new: list[str]) -> None:
        """The lowercase words ``new``, numbered on from the words learned so far."""
        probability = np.array([_word_probability(table, word) for word in new], dtype=np.float64)
        sif = static.SIF_COEFFICIENT / (static.SIF_COEFFICIENT + probability)
        per_word = [word_features(word, CHAR_NGRAM) for word in new]
        lengths = np.fromiter(map(len, per_word), dtype=np.int64, count=len(per_word))
        hashes = np.concatenate(per_word)
        buckets, signs = signed_buckets(hashes, LEXICAL_DIMS)
        kind = np.full(len(hashes), CHAR_WEIGHT)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        kind[starts] = 1.0  # each word's own feature comes first
        self.words.append([hashes[starts], probability])
        _append_runs(self.feature_offsets, lengths)
        self.features.append([buckets, signs * kind * np.repeat(sif, lengths)])

    def add_entries(self, pieces: list, numbers: list) -> None:
        """Whitespace-separated words, numbered on: each one's pieces and lowercase word numbers."""
        for offsets, values, runs in ((self.piece_offsets, self.pieces, pieces),
                                      (self.number_offsets, self.numbers, numbers)):
            lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
            _append_runs(offsets, lengths)
            values.append([np.fromiter(itertools.chain.from_iterable(runs), dtype=np.int64,
                                       count=int(lengths.sum()))])


def _whole(grown: GrowingRows) -> np.ndarray:
    return grown.view(grown.n)[0]


def _append_runs(offsets: GrowingRows, lengths: np.ndarray) -> None:
    """CSR offsets for runs of ``lengths`` after those so far."""
    offsets.append([offsets.arrays[0][offsets.n - 1] + np.cumsum(lengths)])


def _word_probability(table: static._Table, word: str) -> float:
    """The word's probability as a sequence of the tokenizer's pieces, each as frequent as Zipf's law says."""
    ids = [i for i in table.tokenizer.encode(word, add_special_tokens=False).ids if i < table.vocab]
    return float(np.prod(table.probability[ids])) if ids else 0.0


@attrs.frozen
class _Split:
    """A batch as ids: every text's model pieces end to end and its lowercase word numbers end to end, with counts."""

    arrays: _Arrays
    pieces: np.ndarray
    piece_counts: np.ndarray
    numbers: np.ndarray
    number_counts: np.ndarray


def _per_text(offsets: np.ndarray, values: np.ndarray, entries: np.ndarray,
              words_per_text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs of ``entries`` end to end, and how many values fall in each text (texts hold ``words_per_text``)."""
    at, counts = _ranges(offsets, entries)
    ends = np.concatenate(([0], np.cumsum(counts)))[np.cumsum(words_per_text)]
    return values[at], np.diff(ends, prepend=0)


class _Lexicon:
    """What each whitespace-separated word is, remembered: its model pieces and its lowercase words' numbers.

    The pieces are the static model's (:meth:`static._Table.split_token_ids`
    tokenizes the same way, word by word). A word is tokenized for the
    lexical half (:func:`xerj_core.text.run_words`) once, so a text's
    lowercase words are its whitespace words' remembered numbers one after the
    other: a word character run never spans whitespace, and lowercasing is per
    character, so this is the text's own tokenization. Grown under a lock; a
    batch works on the snapshot it was numbered against.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._numbers: dict[str, int] = {}  # lowercase word -> its number
        self._entries: dict[str, int] = {}  # whitespace-separated word -> its entry
        self._grown = _Grown()
        self._arrays = self._grown.snapshot()

    def split(self, table: static._Table, texts: list[str]) -> _Split:
        words = [text.split() for text in texts]
        words_per_text = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        flat = list(itertools.chain.from_iterable(words))
        with self._lock:
            try:  # once the vocabulary is warm, every word is known and this is all
                entries = np.fromiter(map(self._entries.__getitem__, flat), dtype=np.int64, count=len(flat))
            except KeyError:
                unseen = list(set(flat).difference(self._entries))
                if len(self._entries) + len(unseen) > WORD_CACHE:
                    # A bound on memory: all of it is only a cache, so starting over loses only time.
                    self._reset()
                    unseen = list(set(flat))
                self._learn(table, unseen)
                entries = np.fromiter(map(self._entries.__getitem__, flat), dtype=np.int64, count=len(flat))
            arrays = self._arrays
        pieces, piece_counts = _per_text(arrays.piece_offsets, arrays.pieces, entries, words_per_text)
        numbers, number_counts = _per_text(arrays.number_offsets, arrays.numbers, entries, words_per_text)
        return _Split(arrays, pieces, piece_counts, numbers, number_counts)

    def _learn(self, table: static._Table, unseen: list[str]) -> None:
        numbers = self._numbers
        lowered = [run_words(word) for word in unseen]
        new = list(dict.fromkeys(w for tokens in lowered for w in tokens if w not in numbers))
        if new:
            numbers.update(zip(new, range(len(numbers), len(numbers) + len(new))))
            self._grown.add_words(table, new)
        encodings = table.tokenizer.encode_batch_fast(unseen, add_special_tokens=False)
        pieces = [np.clip(encoding.ids, 0, table.vocab - 1) for encoding in encodings]
        self._grown.add_entries(pieces, [list(map(numbers.__getitem__, tokens)) for tokens in lowered])
        self._arrays = self._grown.snapshot()
        self._entries.update(zip(unseen, range(len(self._entries), len(self._entries) + len(unseen))))


_lexicon = _Lexicon()


def lexical_rows(split: _Split) -> np.ndarray:
    """``(texts, LEXICAL_DIMS)`` float64 sums of each text's weighted word and word-pair features (unnormalised)."""
    known, ids, n_texts, n_words = split.arrays, split.numbers, len(split.number_counts), len(split.arrays.hashes)
    if not len(ids):
        return np.zeros((n_texts, LEXICAL_DIMS))
    rows = np.repeat(np.arange(n_texts, dtype=np.int64), split.number_counts)

    # Words: each distinct (text, word) once, weighted 1 + ln(tf), expanded into the word's features.
    pair_key, tf = np.unique(rows * n_words + ids, return_counts=True)
    text_of, word_of = np.divmod(pair_key, n_words)
    feature, per = _ranges(known.feature_offsets, word_of)
    slots = [np.repeat(text_of, per) * LEXICAL_DIMS + known.buckets[feature]]
    weights = [known.values[feature] * np.repeat(1.0 + np.log(tf), per)]

    # Adjacent word pairs within a text, sorted by (text, pair hash) so a pair repeated in a text counts 1 + ln(tf).
    adjacent = np.flatnonzero(rows[1:] == rows[:-1])
    if len(adjacent):
        left, right = ids[adjacent], ids[adjacent + 1]
        hashes = pair_hashes(known.hashes[left], known.hashes[right])
        order = np.lexsort((hashes, rows[adjacent]))
        text_sorted, hash_sorted = rows[adjacent][order], hashes[order]
        first = np.flatnonzero(np.concatenate(
            ([True], (text_sorted[1:] != text_sorted[:-1]) | (hash_sorted[1:] != hash_sorted[:-1]))))
        tf = np.diff(np.append(first, len(order)))
        probability = known.probability[left[order[first]]] * known.probability[right[order[first]]]
        buckets, signs = signed_buckets(hash_sorted[first], LEXICAL_DIMS)
        slots.append(text_sorted[first] * LEXICAL_DIMS + buckets)
        weights.append(signs * PAIR_WEIGHT * (1.0 + np.log(tf))
                       * static.SIF_COEFFICIENT / (static.SIF_COEFFICIENT + probability))

    flat = np.bincount(np.concatenate(slots), weights=np.concatenate(weights), minlength=n_texts * LEXICAL_DIMS)
    return flat.reshape(n_texts, LEXICAL_DIMS)


def hybrid_rows(texts: Sequence[str]) -> np.ndarray:
    """Each text's dense half and lexical half, each of unit norm times the square root of its share.

    A text with only one half (no word characters, say) gets that half at unit
    norm; a text with neither (blank) gets the zero row.
    """
    table = static._loaded_table(HYBRID_EMBEDDER)
    split = _lexicon.split(table, list(texts))
    weights = table.occurrence_weights(split.pieces, split.piece_counts)
    dense = table.pool_ids(split.pieces, split.piece_counts, weights)
    lexical = lexical_rows(split)
    dense_norm = np.sqrt(np.einsum("ij,ij->i", dense, dense, dtype=np.float64))
    lexical_norm = np.sqrt(np.einsum("ij,ij->i", lexical, lexical))
    both = (dense_norm > 0) & (lexical_norm > 0)
    dense_scale = np.where(both, np.sqrt(DENSE_SHARE), 1.0) / np.where(dense_norm > 0, dense_norm, 1.0)
    lexical_scale = np.where(both, np.sqrt(1.0 - DENSE_SHARE), 1.0) / np.where(lexical_norm > 0, lexical_norm, 1.0)
    # Copy, then scale in place: a casting multiply into the strided halves is about twice as slow.
    out = np.empty((len(texts), DIMS), dtype=np.float32)
    out[:, :static.DIMS] = dense
    out[:, :static.DIMS] *= dense_scale.astype(np.float32)[:, None]
    out[:, static.DIMS:] = lexical
    out[:, static.DIMS:] *= lexical_scale.astype(np.float32)[:, None]
    return out


class HybridEmbedder(static.StaticEmbedder):
    """WordLlama SIF pooling (256 dims) beside 2,048 hashed word, trigram and word-pair features; ``semantic`` extra."""

    id = HYBRID_EMBEDDER
    dims = DIMS
    license = "MIT"
    source = ("the wordllama package's l2_supercat 256-dimension model (weights and tokenizer inside its wheel), "
              "SIF and log-TF pooled, concatenated with 2,048 hashed word, character-trigram and word-pair "
              "features (xerj's own code); cosine = 0.4 of the model's + 0.6 of the words'")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 2304)`` float32 array of unit rows (zero rows for blank text)."""
        return hybrid_rows(texts)


def title_line(text: str) -> str | None:
    """The text's title: its first non-blank line, when text follows it and it has a word and at most ``TITLE_WORDS``.

    A first line of punctuation alone (a Markdown rule, front matter's ``---``) is no title.
    """
    head, newline, rest = text.lstrip().partition("\n")
    if newline and rest.strip() and len(head.split()) <= TITLE_WORDS and run_words(head):
        return head
    return None


def with_title_field(embed: Callable[[list[str]], np.ndarray], texts: Sequence[str],
                     share: float = TITLE_SHARE) -> np.ndarray:
    """``embed(texts)``, each titled text's row mixed with its title's own: ``sqrt(share) t + sqrt(1 - share) r``.

    The mix is renormalised, so the title's words hold a fixed part of the
    vector however long the text below it runs. A text without a title keeps
    its row as is.
    """
    rows = np.array(embed(list(texts)), dtype=np.float32)
    titled = [(n, head) for n, head in enumerate(map(title_line, texts)) if head is not None]
    if not titled:
        return rows
    at = np.fromiter((n for n, _ in titled), dtype=np.int64, count=len(titled))
    heads = np.asarray(embed([head for _, head in titled]), dtype=np.float64)
    mixed = np.sqrt(share) * heads + np.sqrt(1.0 - share) * rows[at].astype(np.float64)
    norms = np.linalg.norm(mixed, axis=1)
    keep = norms > 0
    rows[at[keep]] = (mixed[keep] / norms[keep, None]).astype(np.float32)
    return rows


class TitledHybridEmbedder(HybridEmbedder):
    """The hybrid vector with a text's title line weighed in as a field of its own; ``semantic`` extra.

    A cosine over one vector of a long note is diluted by every word the note
    holds, so a short note that mentions a query's words once outranks the
    long note named by them (on the READMEs' sections of
    ``tests/bench/recall_devsets.py``, in 138 of the hybrid's 156 misses the
    section ranked first was shorter). Search engines answer that with a title
    field; here a text's first line is its title when it is short (at most
    ``TITLE_WORDS`` words) and text follows it, as a Markdown note's heading,
    a docstring's summary line or a mail's subject are, and its own hybrid
    vector takes ``TITLE_SHARE`` of the whole. A single-line text (most
    memories) has no title and gets exactly the hybrid's vector.

    ``tests/bench/tune_hybrid.py --titles-only`` chose the constants on the
    same sets as the hybrid's, never the Foam vault: the mean is flat for
    shares 0.05 to 0.2 and titles of 16 to 32 words, and 0.1 and 16 ship
    (READMEs' sections 0.884 -> 0.969, docstrings 0.799 -> 0.857, paraphrase
    pairs unchanged). Most of that is the field, not the model: the lexical
    baseline given the same field goes from 0.782 to 0.939 and 0.746 to 0.852.
    """

    id = TITLED_HYBRID_EMBEDDER
    source = HybridEmbedder.source + f"; a short first line (a title) holds {TITLE_SHARE:.0%} of the vector"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 2304)`` float32 array of unit rows (zero rows for blank text)."""
        return with_title_field(hybrid_rows, texts)


@hookimpl
def xerj_register_embedders(register) -> None:
    register(HybridEmbedder())
    register(TitledHybridEmbedder())
