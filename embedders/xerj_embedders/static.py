"""The offline semantic embedders: WordLlama's static token embeddings (MIT), shipped inside the ``wordllama`` wheel.

``pip install 'xerj[semantic]'`` is the only step. The wheel carries the
``l2_supercat`` 256-dimension weights and their tokenizer configuration, so
nothing is fetched, no PyTorch is needed, and embedding is a tokenization, a
table look-up and a weighted sum per text.

Loading has one trap (wordllama 0.4.0.post1): ``WordLlama.load`` looks for the
packaged tokenizer under ``wordllama/tokenizer/`` while the wheel ships it
under ``wordllama/tokenizers/``, so a plain load falls through to a download.
The loader here hands ``load`` a private cache directory whose ``tokenizers/``
folder holds the packaged file, with ``disable_download=True``: a missing file
is an error, never a network call.

Two embedders share the one loaded table and differ in how a text becomes
token vectors and how those are pooled:

* ``wordllama-l2-supercat-256-sif`` (the default for new namespaces): a text
  is tokenized word by word (whitespace left out, see ``word_token_ids``);
  each distinct token counts ``1 + ln(tf)`` times, so the words a long note
  repeats do not drown out the rest (as in the lexical embedder), times a SIF
  weight ``a / (a + p(token))`` (Arora, Liang and Ma, 2017) that damps
  frequent tokens such as "the" and "of". No corpus statistics ship with the
  model, so ``p`` is Zipf's law over the token's rank, which for this BPE
  vocabulary is its merge order (earlier merges are more frequent pieces),
  with ``a = 1e-4``, the coefficient model2vec uses by default; the byte
  tokens, which stand only for characters the vocabulary lacks, rank as the
  rarest. Nothing here was fitted to the benchmark's vault: ``a`` was left at
  that default (a sweep from 3e-5 to 1e-2 on other Markdown documents moved
  MRR@10 by under 0.01).
* ``wordllama-l2-supercat-256``: wordllama's own tokenization and average
  pooling, the vectors namespaces created before the weighted pooling hold.
  It stays registered with exactly those vectors, because a namespace's
  recall embeds its queries with the embedder the namespace records:
  changing what this id computes would silently compare new query vectors
  with old memory vectors.

Pooling is done here rather than by ``WordLlama.embed``, which pads every
batch to its longest text and sums the padding too: texts of similar length
are summed together by one gather and one batched matrix product. Rows are
L2-normalised; blank text embeds to the zero row, as the protocol asks. The
plugin always registers; without the extra, choosing either embedder is
refused with the extra named.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

import attrs
import numpy as np

from xerj_core import hookimpl
from xerj_core.embedding import STATIC_EMBEDDER, STATIC_MEAN_EMBEDDER, embed_non_blank
from xerj_core.errors import IllegalArgument

CONFIG = "l2_supercat"
DIMS = 256
TOKENIZER_FILE = "l2_supercat_tokenizer_config.json"
EXTRA_HINT = "it needs the 'semantic' extra: pip install 'xerj[semantic]'"
# SIF's smoothing coefficient: model2vec's default for the same Zipf estimate.
SIF_COEFFICIENT = 1e-4
# Texts pooled by one batched product, and the padded tokens gathered for it (4096 x 256 float32 is 4 MB):
# 20,000 vault sentences took least CPU at 64 and 4096, against 32 to all and 4096 to 16384 (largest: 1.6x).
GROUP_TEXTS = 64
BLOCK_TOKENS = 1 << 12
# Words whose token ids are remembered (about 10 MB at most).
WORD_CACHE = 1 << 16


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


def _load(embedder_id: str) -> Any:
    """The WordLlama inference object, loaded from the wheel's own files with downloads disabled."""
    try:
        wordllama = _import_quietly()
    except ImportError as exc:
        raise IllegalArgument(f"embedder [{embedder_id}] cannot load ({exc}); {EXTRA_HINT}",
                              embedder=embedder_id) from None
    packaged = Path(wordllama.__file__).parent / "tokenizers" / TOKENIZER_FILE
    if not packaged.is_file():
        raise IllegalArgument(f"embedder [{embedder_id}]: the wordllama wheel has no {TOKENIZER_FILE}; "
                              f"reinstall it: pip install --force-reinstall 'xerj[semantic]'",
                              embedder=embedder_id)
    with tempfile.TemporaryDirectory(prefix="xerj-wordllama-") as cache:
        (Path(cache) / "tokenizers").mkdir()
        shutil.copyfile(packaged, Path(cache) / "tokenizers" / TOKENIZER_FILE)
        try:
            # Weights and tokenizer are read into memory here, so the folder may go afterwards.
            return wordllama.WordLlama.load(CONFIG, cache_dir=Path(cache), dim=DIMS, disable_download=True)
        except (FileNotFoundError, OSError, ValueError) as exc:
            raise IllegalArgument(f"embedder [{embedder_id}] cannot load its packaged model: {exc}",
                                  embedder=embedder_id) from None


def zipf_probabilities(vocab: dict[str, int], size: int) -> np.ndarray:
    """Each token id's estimated frequency, by Zipf's law over its BPE merge rank (see the module docstring)."""
    byte_tokens = np.array(sorted(i for piece, i in vocab.items() if piece.startswith("<0x") and piece.endswith(">")),
                           dtype=np.int64)
    first_piece = int(byte_tokens.max()) + 1 if byte_tokens.size else 0
    rank = np.maximum(np.arange(size, dtype=np.float64) - first_piece, 0) + 1
    rank[byte_tokens] = size  # a character the vocabulary has no piece for: as rare as the rarest piece
    return (1.0 / rank) / np.sum(1.0 / np.arange(1, size + 1, dtype=np.float64))


def sif_weights(vocab: dict[str, int], size: int, coefficient: float = SIF_COEFFICIENT) -> np.ndarray:
    """``a / (a + p)`` per token id, ``p`` its Zipf frequency estimate."""
    probability = zipf_probabilities(vocab, size)
    return (coefficient / (coefficient + probability)).astype(np.float32)


@attrs.frozen
class _Table:
    """The loaded model as pooling needs it: token vectors (and a zero row after them), SIF weights, a tokenizer."""

    vectors: np.ndarray  # (vocab + 1, DIMS) float32; the last row is zeros, what padding gathers
    sif: np.ndarray  # (vocab,) float32
    probability: np.ndarray  # (vocab,) float64, the Zipf estimate the SIF weights come from
    tokenizer: Any
    words: dict[str, list[int]] = attrs.field(factory=dict)  # word -> its token ids, at most WORD_CACHE of them

    @property
    def vocab(self) -> int:
        return len(self.sif)

    def token_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every text's token ids end to end, and each text's count of them, exactly as wordllama tokenizes.

        No piece of this vocabulary holds a word boundary inside it, so a text
        whose words are separated by single spaces (no other whitespace, none
        at either end) tokenizes to its words' pieces one after the other, and
        takes the remembered words; any other text goes to the tokenizer whole.
        """
        words = [text.split() for text in texts]
        regular = [n for n, text in enumerate(texts) if words[n] == text.split(" ")]
        per_text = self._word_pieces([words[n] for n in regular])
        pieces: list[list[int]] = [[] for _ in texts]
        for n, ids in zip(regular, per_text):
            pieces[n] = ids
        irregular = [n for n, text in enumerate(texts) if words[n] != text.split(" ")]
        if irregular:
            encodings = self.tokenizer.encode_batch_fast([texts[n] for n in irregular], add_special_tokens=False)
            for n, encoding in zip(irregular, encodings):
                pieces[n] = encoding.ids
        return self._flatten(pieces)

    def word_token_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Like ``token_ids``, but a text is its whitespace-separated words, each tokenized alone and remembered.

        The BPE runs on a whole text as one sequence, so nothing it does is
        reused from text to text; its pieces never cross a word boundary, so
        tokenizing word by word gives the same pieces, except that whitespace
        itself (runs of spaces, newlines as byte tokens) is left out, which
        carries no meaning. A word seen before costs a dictionary look-up.
        """
        return self.split_token_ids([text.split() for text in texts])

    def split_token_ids(self, words: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """``word_token_ids`` of texts already split into their whitespace-separated words."""
        return self._flatten(self._word_pieces(words))

    def _word_pieces(self, words: list[list[str]]) -> list[list[int]]:
        cache = self.words
        unseen = list({word for text in words for word in text if word not in cache})
        if unseen:
            if len(cache) + len(unseen) > WORD_CACHE:
                cache.clear()  # a bound on memory; the pieces of a word never change, so nothing is lost but time
            for word, encoding in zip(unseen, self.tokenizer.encode_batch_fast(unseen, add_special_tokens=False)):
                cache[word] = encoding.ids
        return [[piece for word in text for piece in cache[word]] for text in words]

    def _flatten(self, per_text: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        lengths = np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text))
        ids = np.fromiter(itertools.chain.from_iterable(per_text), dtype=np.int64, count=int(lengths.sum()))
        np.clip(ids, 0, self.vocab - 1, out=ids)
        return ids, lengths

    def occurrence_weights(self, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Per token occurrence, ``sif * (1 + ln tf) / tf``: a text's tf occurrences of a token add up to its weight."""
        row = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        _, inverse, counts = np.unique(row * self.vocab + ids, return_inverse=True, return_counts=True)
        tf = counts[inverse].astype(np.float32)
        return self.sif[ids] * (1.0 + np.log(tf)) / tf

    def pool(self, texts: list[str], weighted: bool) -> np.ndarray:
        """``(len(texts), DIMS)`` sums of each text's (weighted) token vectors; a text without tokens is zero.

        Texts are taken shortest first in groups padded to their longest
        (padding gathers the zero row), so a group is one gather and one
        batched matrix product; a group holds at most ``BLOCK_TOKENS`` padded
        tokens, and a text longer than that is summed in slices of it.
        """
        if weighted:
            ids, lengths = self.word_token_ids(texts)
            weights = self.occurrence_weights(ids, lengths)
        else:
            ids, lengths = self.token_ids(texts)
            weights = np.ones(len(ids), dtype=np.float32)
        return self.pool_ids(ids, lengths, weights)

    def pool_ids(self, ids: np.ndarray, lengths: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``pool`` from the texts' token ids end to end, their counts per text and a weight per occurrence."""
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        order = np.argsort(lengths, kind="stable")
        out = np.zeros((len(lengths), DIMS), dtype=np.float32)
        lo = 0
        while lo < len(order):
            longest = int(lengths[order[lo]])
            if longest > BLOCK_TOKENS:  # sorted: every text left is this long or longer
                for text in order[lo:]:
                    at, end = int(starts[text]), int(starts[text] + lengths[text])
                    for cut in range(at, end, BLOCK_TOKENS):
                        piece = slice(cut, min(cut + BLOCK_TOKENS, end))
                        out[text] += weights[piece] @ self.vectors[ids[piece]]
                break
            hi = lo + 1
            while (hi < len(order) and hi - lo < GROUP_TEXTS
                   and (hi - lo + 1) * int(lengths[order[hi]]) <= BLOCK_TOKENS):
                hi += 1
            group = order[lo:hi]
            width = int(lengths[group[-1]])
            column = np.arange(width)
            present = column[None, :] < lengths[group][:, None]
            at = np.where(present, starts[group][:, None] + column[None, :], 0)
            gathered = self.vectors[np.where(present, ids[at], self.vocab)]
            out[group] = np.matmul(np.where(present, weights[at], 0.0)[:, None, :], gathered)[:, 0]
            lo = hi
        return out


_table: _Table | None = None
_table_lock = threading.Lock()


def _loaded_table(embedder_id: str) -> _Table:
    """The one table of the process, loaded on first use by whichever embedder needs it first."""
    global _table
    if _table is None:
        with _table_lock:
            if _table is None:
                model = _load(embedder_id)
                # A private copy of the tokenizer: wordllama's pads every batch, which pooling here never wants.
                tokenizer = type(model.tokenizer).from_str(model.tokenizer.to_str())
                tokenizer.no_padding()
                tokenizer.no_truncation()
                table = np.asarray(model.embedding, dtype=np.float32)
                vectors = np.vstack([table, np.zeros((1, table.shape[1]), dtype=np.float32)])
                vocab = tokenizer.get_vocab()
                _table = _Table(vectors, sif_weights(vocab, len(table)), zipf_probabilities(vocab, len(table)),
                                tokenizer)
    return _table


class StaticEmbedder:
    """WordLlama ``l2_supercat``, 256 dims, SIF- and log-TF-weighted pooling; ``semantic`` extra, never downloads."""

    id = STATIC_EMBEDDER
    dims = DIMS
    license = "MIT"
    source = ("the wordllama package (weights and tokenizer inside its wheel), l2_supercat 256-dimension model; "
              "token vectors pooled with SIF and log-TF weights")
    weighted = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    def unavailable(self) -> str | None:
        return None if importlib.util.find_spec("wordllama") is not None else EXTRA_HINT

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 256)`` float32 array of unit rows (zero rows for blank text)."""
        return embed_non_blank(texts, DIMS, lambda batch: _loaded_table(self.id).pool(batch, self.weighted))


class MeanStaticEmbedder(StaticEmbedder):
    """The same model with wordllama's plain average pooling: the vectors of namespaces made before weighting."""

    id = STATIC_MEAN_EMBEDDER
    source = ("the wordllama package (weights and tokenizer inside its wheel), l2_supercat 256-dimension model; "
              "token vectors averaged, as wordllama does")
    weighted = False


@hookimpl
def xerj_register_embedders(register) -> None:
    register(StaticEmbedder())
    register(MeanStaticEmbedder())
