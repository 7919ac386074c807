"""The built-in embedders pass the conformance suite, declare their source and license, and never reach for a hub unasked."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from click.testing import CliRunner

from xerj_core import hookimpl
from xerj_core.cli import build_cli
from xerj_core.embedding import (DEFAULT_EMBEDDER, HYBRID_EMBEDDER, LEXICAL_EMBEDDER, STATIC_EMBEDDER,
                                 STATIC_MEAN_EMBEDDER, TITLED_HYBRID_EMBEDDER, EmbedderSettings,
                                 collect_embedders, default_embedder_id, get_embedder, installed)
from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.plugins import get_plugin_manager
from xerj_core.testing.embedders import AbstractEmbedderTests
from xerj_embedders import hybrid, static, transformer
from xerj_embedders.hybrid import HybridEmbedder, TitledHybridEmbedder
from xerj_embedders.lexical import LexicalFeatureHashEmbedder
from xerj_embedders.static import MeanStaticEmbedder, StaticEmbedder
from xerj_embedders.transformer import FastEmbedEmbedder

needs_semantic = pytest.mark.skipif(
    StaticEmbedder().unavailable() is not None, reason="the 'semantic' extra is not installed: pip install 'xerj[semantic]'"
)
needs_neural = pytest.mark.skipif(
    not transformer.fastembed_installed(), reason="the 'neural' extra is not installed: pip install 'xerj[neural]'"
)


class TestLexical(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    @classmethod
    def embedder(cls):
        return LexicalFeatureHashEmbedder()


@needs_semantic
class TestStatic(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    @classmethod
    def embedder(cls):
        return StaticEmbedder()


@needs_semantic
class TestStaticMean(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    @classmethod
    def embedder(cls):
        return MeanStaticEmbedder()


@needs_semantic
class TestHybrid(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    @classmethod
    def embedder(cls):
        return HybridEmbedder()


@needs_semantic
class TestTitledHybrid(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    @classmethod
    def embedder(cls):
        return TitledHybridEmbedder()


# -- the lexical embedder's own promises ------------------------------------


def test_lexical_is_the_default_and_fits_the_benchmark_vectors():
    embedder = LexicalFeatureHashEmbedder()
    assert embedder.id == DEFAULT_EMBEDDER == "lexical-feature-hash"
    assert embedder.dims == 384


def test_lexical_dims_are_configurable():
    vectors = LexicalFeatureHashEmbedder(dims=64).embed(["one two three"])
    assert vectors.shape == (1, 64)


@pytest.mark.parametrize("bad", [{"dims": 0}, {"char_ngram": 0}])
def test_lexical_refuses_nonsense_parameters(bad):
    with pytest.raises(ValueError):
        LexicalFeatureHashEmbedder(**bad)


def test_lexical_text_without_words_is_zero_row():
    vectors = LexicalFeatureHashEmbedder().embed(["!!! ... ---", "words"])
    assert not vectors[0].any()
    assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-6)


def test_lexical_ignores_case_and_punctuation():
    a, b = LexicalFeatureHashEmbedder().embed(["Hello, World!", "hello world"])
    np.testing.assert_array_equal(a, b)


def test_lexical_shares_word_pieces_without_stemming():
    embedder = LexicalFeatureHashEmbedder()
    ferments, fermented, unrelated = embedder.embed(["ferments", "fermented", "granite"])
    assert float(ferments @ fermented) > 0.3
    assert float(ferments @ fermented) > float(ferments @ unrelated)
    assert float(ferments @ fermented) < 0.99


def test_lexical_vector_is_pinned():
    """Stored vectors outlive releases: a change here means every stored lexical vector must be rebuilt.

    "hello" and "world" give one word feature (weight 1) and five padded
    trigrams (weight 0.5) each; twelve features in twelve distinct buckets.
    """
    vector = LexicalFeatureHashEmbedder().embed(["Hello world"])[0]
    buckets = np.flatnonzero(vector)
    assert buckets.tolist() == [10, 34, 53, 112, 145, 174, 192, 232, 244, 296, 309, 319]
    word, gram = 1 / np.sqrt(4.5), 0.5 / np.sqrt(4.5)
    expected = [gram, word, -gram, gram, gram, gram, -gram, gram, -gram, word, gram, gram]
    np.testing.assert_allclose(vector[buckets], expected, rtol=1e-6)


def test_lexical_vectors_are_stable_across_processes():
    """A fresh interpreter (its own hash seed) computes the very same bytes."""
    text = "Sourdough connects to kimchi: both say ferments."
    script = (
        "import sys; from xerj_embedders.lexical import LexicalFeatureHashEmbedder as E; "
        "sys.stdout.write(E().embed([sys.argv[1]]).tobytes().hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script, text],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {LexicalFeatureHashEmbedder().embed([text]).tobytes().hex()}


# -- the static (semantic) embedder -------------------------------------------


@needs_semantic
def test_static_ranks_a_paraphrase_without_shared_words_first():
    """Meaning across different words, the reason for the semantic extra (the example of issue #21)."""
    query = "automobile engine failed to turn over, dead accumulator"
    docs = ["The car would not start in the morning; the battery was flat.",
            "I planted tomatoes and basil in the garden.",
            "Quarterly revenue rose by ten percent after the merger."]
    vectors = StaticEmbedder().embed([query, *docs])
    scores = vectors[1:] @ vectors[0]
    assert int(np.argmax(scores)) == 0
    lexical = LexicalFeatureHashEmbedder().embed([query, *docs])
    assert scores[0] - max(scores[1:]) > (lexical[1:] @ lexical[0])[0] - max((lexical[1:] @ lexical[0])[1:])


@needs_semantic
def test_the_unweighted_static_id_keeps_wordllamas_own_vectors():
    """What namespaces made before the weighted pooling hold: wordllama's average pooling, to the float."""
    texts = [*AbstractEmbedderTests.sample_texts, "Backlinks  are\tone of\nFoam's features.", "é" * 3]
    reference = static._load(STATIC_MEAN_EMBEDDER).embed(texts, norm=True)
    embedder = MeanStaticEmbedder()
    assert (embedder.id, embedder.dims, embedder.license) == ("wordllama-l2-supercat-256", 256, "MIT")
    np.testing.assert_allclose(embedder.embed(texts), reference, atol=1e-5)


def _weighted_reference(text: str) -> np.ndarray:
    """The weighted pooling written the plain way: one text, its distinct tokens, sif * (1 + ln tf) each."""
    table = static._loaded_table(STATIC_EMBEDDER)
    ids = [i for word in text.split() for i in table.tokenizer.encode(word, add_special_tokens=False).ids]
    if not ids:
        return np.zeros(256, np.float32)
    tokens, counts = np.unique(ids, return_counts=True)
    row = ((1 + np.log(counts)) * table.sif[tokens]) @ table.vectors[tokens]
    return row / np.linalg.norm(row)


@needs_semantic
def test_the_weighted_static_pooling_matches_its_plain_definition_at_every_length(monkeypatch):
    texts = ["the the the cat", "cat", "a much longer passage " * 40, "Zürich 東京 🙂",
             " ".join(f"word{n % 997}" for n in range(6000)), "x y", "tabs\tand\nnewlines  and   runs"]
    # Small blocks, so grouping, padding and the slicing of a text longer than a block all run.
    monkeypatch.setattr(static, "BLOCK_TOKENS", 64)
    got = StaticEmbedder().embed(texts)
    want = np.vstack([_weighted_reference(text) for text in texts])
    np.testing.assert_allclose(got, want, atol=2e-5)
    monkeypatch.setattr(static, "BLOCK_TOKENS", 1 << 12)
    np.testing.assert_allclose(StaticEmbedder().embed(texts), want, atol=2e-5)


@needs_semantic
def test_words_tokenize_alone_as_in_the_whole_text_whitespace_aside():
    table = static._loaded_table(STATIC_EMBEDDER)
    single = ["The car would not start; the battery was flat.", "Backlinks are one of Foam's features",
              "naïve café, Zürich and 東京"]
    whole, whole_lengths = table.token_ids(single)
    words, word_lengths = table.word_token_ids(single)
    np.testing.assert_array_equal(words, whole)
    np.testing.assert_array_equal(word_lengths, whole_lengths)
    # Whitespace is not a token: runs of spaces, tabs and newlines change nothing.
    spaced, _ = table.word_token_ids(["The  car\twould\n\nnot start; the battery was flat."])
    np.testing.assert_array_equal(spaced, table.word_token_ids(single[:1])[0])


@needs_semantic
def test_sif_weights_damp_frequent_pieces_and_spare_rare_ones():
    table = static._loaded_table(STATIC_EMBEDDER)
    vocab = table.tokenizer.get_vocab()
    the, of, accumulator = vocab["▁the"], vocab["▁of"], vocab["▁accum"]
    assert table.sif[the] < 0.1 and table.sif[of] < 0.1 and table.sif[accumulator] > 0.5
    assert table.sif[vocab["<0x0A>"]] == table.sif.max()  # a byte token stands for a character with no piece
    assert np.all(np.diff(table.sif[300:]) >= 0)  # later merges are rarer pieces, so weigh at least as much


@needs_semantic
def test_static_loads_from_the_wheel_and_never_reaches_for_a_hub(monkeypatch, tmp_path):
    import socket

    import wordllama

    def refuse(*args, **kwargs):
        raise AssertionError("the static embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    # Nothing may come from, or go to, wordllama's own cache either.
    monkeypatch.setattr(wordllama.WordLlama, "DEFAULT_CACHE_DIR", tmp_path / "wordllama-cache")
    assert StaticEmbedder().embed(["offline please"]).shape == (1, 256)
    assert not (tmp_path / "wordllama-cache").exists()


@needs_semantic
def test_static_loading_leaves_the_process_logging_alone():
    """wordllama calls logging.basicConfig at import; the embedder takes that back off."""
    script = ("import logging, sys; from xerj_embedders.static import StaticEmbedder; "
              "StaticEmbedder().embed(['hello']); root = logging.getLogger(); "
              "sys.stdout.write(f'{len(root.handlers)} {root.level}')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == f"0 {logging.WARNING}"


def test_static_without_the_extra_registers_but_refuses_with_the_extra_named(monkeypatch):
    real_find_spec = static.importlib.util.find_spec
    monkeypatch.setattr(static.importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "wordllama" else real_find_spec(name, *a, **k))
    embedders = collect_embedders(get_plugin_manager())
    assert STATIC_EMBEDDER in embedders and STATIC_EMBEDDER not in installed(embedders)
    assert HYBRID_EMBEDDER in embedders and HYBRID_EMBEDDER not in installed(embedders)
    with pytest.raises(IllegalArgument) as refused:
        get_embedder(embedders, STATIC_EMBEDDER)
    assert "pip install 'xerj[semantic]'" in refused.value.reason and refused.value.status == 400
    # ... and new namespaces fall back to the lexical embedder.
    assert default_embedder_id(embedders) == LEXICAL_EMBEDDER


@needs_semantic
def test_new_namespaces_default_to_the_titled_hybrid_embedder_when_it_is_installed():
    embedders = collect_embedders(get_plugin_manager())
    assert default_embedder_id(embedders) == TITLED_HYBRID_EMBEDDER
    assert default_embedder_id(embedders, HYBRID_EMBEDDER) == HYBRID_EMBEDDER
    assert default_embedder_id(embedders, STATIC_EMBEDDER) == STATIC_EMBEDDER
    assert default_embedder_id(embedders, LEXICAL_EMBEDDER) == LEXICAL_EMBEDDER


# -- the hybrid (static meaning beside hashed terms) ----------------------------


def _hybrid_lexical_reference(text: str) -> np.ndarray:
    """The hybrid's lexical half written the plain way: one text, a dictionary of buckets, a loop per feature."""
    from xerj_core.text import tokenize
    from xerj_embedders.lexical import signed_buckets, word_features

    table = static._loaded_table(HYBRID_EMBEDDER)

    def sif(probability):
        return static.SIF_COEFFICIENT / (static.SIF_COEFFICIENT + probability)

    def probability(word):
        ids = table.tokenizer.encode(word, add_special_tokens=False).ids
        return float(np.prod([table.probability[i] for i in ids]))

    def add(row, hashes, weights):
        buckets, signs = signed_buckets(np.asarray(hashes, np.uint64), hybrid.LEXICAL_DIMS)
        for bucket, sign, weight in zip(buckets, signs, weights):
            row[bucket] += sign * weight

    row = np.zeros(hybrid.LEXICAL_DIMS)
    words = tokenize(text)
    for word in dict.fromkeys(words):
        features = word_features(word, 3)
        damped = (1 + np.log(words.count(word))) * sif(probability(word))
        add(row, features, [damped] + [damped * hybrid.CHAR_WEIGHT] * (len(features) - 1))
    pairs = list(zip(words, words[1:]))
    for left, right in dict.fromkeys(pairs):
        pair = hybrid.pair_hashes(word_features(left, 3)[:1], word_features(right, 3)[:1])
        weight = (hybrid.PAIR_WEIGHT * (1 + np.log(pairs.count((left, right))))
                  * sif(probability(left) * probability(right)))
        add(row, pair, [weight])
    return row


HYBRID_TEXTS = ["Code of conduct", "We follow the code of conduct; the CODE of Conduct applies.",
                "a much longer passage " * 40, "Zürich 東京 🙂 naïve café", "!!! ---", "x y",
                "tabs\tand\nnewlines  and   runs", "", "the the the the cat"]


@needs_semantic
@pytest.mark.parametrize("cache", [1 << 16, 8])
def test_the_hybrid_is_the_static_vector_beside_its_plain_lexical_definition(monkeypatch, cache):
    """Dense half: the static embedder's vector (so its own test covers pooling); lexical half: the plain loop.

    A tiny word cache makes the lexicon start over in the middle of a batch and between batches.
    """
    monkeypatch.setattr(hybrid, "WORD_CACHE", cache)
    monkeypatch.setattr(hybrid, "_lexicon", hybrid._Lexicon())
    got = np.vstack([HybridEmbedder().embed(HYBRID_TEXTS[:4]), HybridEmbedder().embed(HYBRID_TEXTS[4:])])
    dense = StaticEmbedder().embed(HYBRID_TEXTS)
    for n, text in enumerate(HYBRID_TEXTS):
        lexical = _hybrid_lexical_reference(text)
        if not text.strip():
            assert not got[n].any()
            continue
        if not lexical.any():  # no word characters: the meaning half alone, at unit norm
            np.testing.assert_allclose(got[n], np.concatenate([dense[n], np.zeros(hybrid.LEXICAL_DIMS)]), atol=1e-6)
            continue
        want = np.concatenate([np.sqrt(hybrid.DENSE_SHARE) * dense[n],
                               np.sqrt(1 - hybrid.DENSE_SHARE) * lexical / np.linalg.norm(lexical)])
        np.testing.assert_allclose(got[n], want, atol=2e-6, err_msg=text)


@needs_semantic
def test_the_lexicon_grows_in_place_and_a_batch_keeps_the_words_it_was_numbered_against(monkeypatch):
    """Words are appended into buffers of doubling capacity, so learning one copies only its own entries; a
    snapshot taken before (what a batch on another thread holds) is unchanged however far the lexicon grows, and
    a text's vector does not depend on what was learned before it."""
    monkeypatch.setattr(hybrid, "_lexicon", hybrid._Lexicon())
    HybridEmbedder().embed(HYBRID_TEXTS)
    held = hybrid._lexicon._arrays
    copies = {name: getattr(held, name).copy() for name in attrs.fields_dict(type(held))}
    fresh = [f"word{n} and{n}more{n} z{n}" for n in range(300)]  # 900 new words: every buffer grows again
    one_by_one = np.vstack([HybridEmbedder().embed([text]) for text in fresh])
    grown = hybrid._lexicon._arrays
    assert len(grown.hashes) >= len(held.hashes) + 900 and grown.hashes.base is not held.hashes.base
    for name, copy in copies.items():
        assert np.array_equal(getattr(held, name), copy), name
    words = hybrid._lexicon._grown.words
    assert len(words.arrays[0]) > words.n  # room left: the next word is written into the same buffer, not copied
    HybridEmbedder().embed(["onemoreword"])
    assert hybrid._lexicon._arrays.hashes.base is grown.hashes.base
    monkeypatch.setattr(hybrid, "_lexicon", hybrid._Lexicon())
    np.testing.assert_allclose(HybridEmbedder().embed(fresh[::-1])[::-1], one_by_one, atol=1e-6)


@needs_semantic
def test_one_hybrid_cosine_is_the_shares_of_both_cosines():
    query, *docs = ["Code of conduct", "We follow the code of conduct.", "Conduct your code reviews kindly.",
                    "The car would not start; the battery was flat."]
    vectors = HybridEmbedder().embed([query, *docs])
    dense = StaticEmbedder().embed([query, *docs])
    lexical = vectors[:, static.DIMS:] / np.linalg.norm(vectors[:, static.DIMS:], axis=1, keepdims=True)
    want = hybrid.DENSE_SHARE * (dense[1:] @ dense[0]) + (1 - hybrid.DENSE_SHARE) * (lexical[1:] @ lexical[0])
    np.testing.assert_allclose(vectors[1:] @ vectors[0], want, atol=1e-6)
    # Word pairs: the phrase itself beats the same words apart.
    assert vectors[1] @ vectors[0] > vectors[2] @ vectors[0]


@needs_semantic
def test_the_hybrid_keeps_most_of_the_static_models_paraphrase_recall():
    """Meaning across different words survives the lexical half: 30 pairs that share no content word.

    One pair alone can go either way when two hashed features of a short
    text collide, so the set is what is held: the hybrid stays far above
    hashing and near the model.
    """
    from tests.bench.recall_devsets import PARAPHRASES, mrr_at

    queries, answers = (list(column) for column in zip(*PARAPHRASES))

    def recall(embedder):
        return mrr_at(embedder.embed(answers), embedder.embed(queries))

    hybrid_mrr, static_mrr, lexical_mrr = recall(HybridEmbedder()), recall(StaticEmbedder()), recall(
        LexicalFeatureHashEmbedder())
    assert hybrid_mrr >= 0.8 and hybrid_mrr >= 3 * lexical_mrr and hybrid_mrr >= static_mrr - 0.1


@needs_semantic
def test_hybrid_vectors_are_stable_across_processes():
    """Seedless hashes and the packaged model: a fresh interpreter with another hash seed computes the same bytes."""
    text = "Sourdough connects to kimchi: both say ferments. Code of conduct!"
    script = ("import sys; from xerj_embedders.hybrid import HybridEmbedder as E; "
              "sys.stdout.write(E().embed([sys.argv[1]]).tobytes().hex())")
    outputs = {subprocess.run([sys.executable, "-c", script, text], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert outputs == {HybridEmbedder().embed([text]).tobytes().hex()}


@needs_semantic
def test_the_hybrid_declares_its_parts():
    embedder = HybridEmbedder()
    assert (embedder.id, embedder.dims, embedder.license) == ("wordllama-l2-supercat-256-sif-hash-2048", 2304, "MIT")
    assert "wordllama" in embedder.source and "2,048 hashed" in embedder.source


# -- the titled hybrid (a short first line weighed in as a title field) --------


@pytest.mark.parametrize("text, title", [
    ("Graph Visualization\nThe graph view shows notes.", "Graph Visualization"),
    ("\n  # Note Templates  \n\nTemplates start a note.", "# Note Templates  "),
    ("one line only", None),  # a memory of one line has no title
    ("Heading\n   \n", None),  # nothing below it
    ("---\ntitle: front matter\n---\nBody", None),  # no word on the first line
    (" ".join(["word"] * 17) + "\nbody", None),  # too long for a title
    (" ".join(["word"] * 16) + "\nbody", " ".join(["word"] * 16)),
    ("", None),
])
def test_a_title_is_a_short_first_line_with_text_below(text, title):
    assert hybrid.title_line(text) == title


@needs_semantic
def test_the_titled_vector_is_the_title_mixed_in_by_its_share():
    texts = ["Graph Visualization\nThe graph view transforms your notes into a visual network.",
             "one line, no title", "!!! ---\nA first line without words adds nothing.", "", "Daily Notes\n\nOne a day."]
    got = TitledHybridEmbedder().embed(texts)
    plain = HybridEmbedder().embed(texts)
    heads = HybridEmbedder().embed(["Graph Visualization", "Daily Notes"])
    for n, head in ((0, heads[0]), (4, heads[1])):
        mixed = np.sqrt(hybrid.TITLE_SHARE) * head + np.sqrt(1 - hybrid.TITLE_SHARE) * plain[n]
        np.testing.assert_allclose(got[n], mixed / np.linalg.norm(mixed), atol=1e-6)
        # The share is what the title holds: the title's cosine with the text rises to at least sqrt(share).
        assert got[n] @ head > plain[n] @ head and got[n] @ head >= np.sqrt(hybrid.TITLE_SHARE)
    for n in (1, 2, 3):  # untitled, a wordless title, blank: the hybrid's own bytes
        assert got[n].tobytes() == plain[n].tobytes()


@needs_semantic
def test_a_long_note_is_found_by_its_title_ahead_of_a_short_note_that_mentions_it():
    """The dilution the title field answers: one cosine over a long note weighs its title's words little."""
    body = ("Each note becomes a node and each link an edge; you can filter by tag, colour groups, "
            "drag nodes around and zoom into clusters of related ideas to see how your thinking connects. ") * 12
    notes = ["Graph Visualization\n" + body,
             "Keyboard Shortcuts\nOpen the graph visualization panel with a shortcut, or the daily note."]
    query = "Graph Visualization"
    plain, titled = HybridEmbedder(), TitledHybridEmbedder()
    assert np.argmax(plain.embed(notes) @ plain.embed([query])[0]) == 1  # the short mention wins without the field
    assert np.argmax(titled.embed(notes) @ titled.embed([query])[0]) == 0


@needs_semantic
def test_the_titled_hybrid_declares_its_parts():
    embedder = TitledHybridEmbedder()
    assert (embedder.id, embedder.dims, embedder.license) == (TITLED_HYBRID_EMBEDDER, 2304, "MIT")
    assert "wordllama" in embedder.source and "title" in embedder.source


def test_an_unknown_embedder_names_the_installed_ones():
    embedders = collect_embedders(get_plugin_manager())
    with pytest.raises(IllegalArgument) as refused:
        default_embedder_id(embedders, "no-such-model")
    assert refused.value.reason.startswith("unknown embedder [no-such-model]; installed: ")
    assert LEXICAL_EMBEDDER in refused.value.reason
    assert "minilm-l6-v2-int8" not in refused.value.reason  # retired ids are not "installed"


# -- retired ids ---------------------------------------------------------------


def test_the_old_neural_id_says_it_is_gone_and_names_its_replacement():
    embedders = collect_embedders(get_plugin_manager())
    with pytest.raises(IllegalArgument) as refused:
        get_embedder(embedders, "minilm-l6-v2-int8")
    assert "no longer installed" in refused.value.reason
    assert "sentence-transformers/all-MiniLM-L6-v2" in refused.value.reason
    assert "_reembed" in refused.value.reason
    with pytest.raises(IllegalArgument, match="no longer installed"):
        embedders["minilm-l6-v2-int8"].embed(["hello"])


# -- transformer models through fastembed ------------------------------------

TINY = "xerj-test/tiny-words"
TINY_WORDS = ["[PAD]", "[UNK]", "car", "engine", "battery", "garden", "tomato", "flower", "the"]
TINY_DIMS = 4


def _register_tiny_model() -> None:
    """Teach fastembed's catalogue the tiny model once per process (it refuses a second registration)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if any(m["model"] == TINY for m in TextEmbedding.list_supported_models()):
        return
    TextEmbedding.add_custom_model(model=TINY, pooling=PoolingType.MEAN, normalization=True,
                                   sources=ModelSource(hf=TINY), dim=TINY_DIMS, model_file="model.onnx",
                                   license="mit")


def build_tiny_model(cache: Path) -> np.ndarray:
    """A word-embedding "transformer" in ONNX and its tokenizer, laid out in the cache as the hub client does."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    revision = "0" * 40
    repo = cache / f"models--{TINY.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    table = np.random.default_rng(7).normal(size=(len(TINY_WORDS), TINY_DIMS)).astype(np.float32)
    table[0] = 0.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)], "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", TINY_DIMS])],
        [numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(snapshot / "model.onnx"))
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(TINY_WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(snapshot / "tokenizer.json"))
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32, "pad_token": "[PAD]"}))
    (snapshot / "special_tokens_map.json").write_text(json.dumps({"pad_token": "[PAD]", "unk_token": "[UNK]"}))
    (snapshot / "config.json").write_text(json.dumps({"pad_token_id": 0}))
    return table


@pytest.fixture
def tiny_cache(tmp_path):
    """A model cache holding the tiny model; returns ``(cache, embedding table)``."""
    cache = tmp_path / "models"
    table = build_tiny_model(cache)
    _register_tiny_model()
    return cache, table


@pytest.fixture
def no_network(monkeypatch):
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@needs_neural
def test_fastembed_loads_a_cached_model_offline(tiny_cache, no_network):
    cache, table = tiny_cache
    embedders = collect_embedders(get_plugin_manager(), EmbedderSettings(model_cache=cache, offline=True))
    embedder = get_embedder(embedders, TINY)
    assert isinstance(embedder, FastEmbedEmbedder)
    assert (embedder.dims, embedder.license) == (TINY_DIMS, "MIT") and TINY in embedder.source
    vectors = embedder.embed(["the car engine", "  ", "Tomato garden flower"])
    expected = table[[8, 2, 3]].mean(axis=0)
    np.testing.assert_allclose(vectors[0], expected / np.linalg.norm(expected), atol=1e-5)
    assert not vectors[1].any()
    np.testing.assert_allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, atol=1e-5)
    # A text embeds the same alone as in a batch (fastembed pads the batch; the pooling masks it).
    np.testing.assert_allclose(embedder.embed(["the car engine"])[0], vectors[0], atol=1e-5)


@needs_neural
def test_offline_without_the_model_names_the_model_and_the_pull_command(tmp_path, no_network):
    _register_tiny_model()
    settings = EmbedderSettings(model_cache=tmp_path / "empty", offline=True)
    embedder = collect_embedders(get_plugin_manager(), settings)[TINY]
    with pytest.raises(IllegalArgument) as refused:
        embedder.embed(["car"])
    reason = refused.value.reason
    assert f"model [{TINY}] is not in the model cache" in reason
    assert f"xerj models pull {TINY} --model-cache {tmp_path / 'empty'}" in reason
    assert refused.value.status == 400


@needs_neural
def test_models_pull_fills_the_cache_and_says_so(tiny_cache, no_network, tmp_path):
    cache, _table = tiny_cache
    cli = build_cli(get_plugin_manager())
    pulled = CliRunner().invoke(cli, ["models", "pull", TINY, "--model-cache", str(cache)])
    assert pulled.exit_code == 0, pulled.output
    assert f"{TINY}: ready in the model cache {cache}" in pulled.output
    unknown = CliRunner().invoke(cli, ["models", "pull", "no-such-model"])
    assert unknown.exit_code == 1 and "unknown embedder [no-such-model]; installed: " in unknown.output
    packaged = CliRunner().invoke(cli, ["models", "pull", LEXICAL_EMBEDDER])
    assert packaged.exit_code == 0 and "nothing to fetch" in packaged.output
    listed = json.loads(CliRunner().invoke(cli, ["models", "list"]).output)
    tiny = next(row for row in listed if row["id"] == TINY)
    assert tiny["license"] == "MIT" and tiny["dims"] == TINY_DIMS and tiny["installed"] is True
    assert tiny["cached"] is False  # the default cache, not the test's
    listed = json.loads(CliRunner().invoke(cli, ["models", "list", "--model-cache", str(cache)]).output)
    assert next(row for row in listed if row["id"] == TINY)["cached"] is True
    retired = next(row for row in listed if row["id"] == "minilm-l6-v2-int8")
    assert retired["installed"] is False and "sentence-transformers/all-MiniLM-L6-v2" in retired["unavailable"]


def test_without_fastembed_the_well_known_models_are_refused_with_the_extra_named(monkeypatch):
    monkeypatch.setattr(transformer, "fastembed_installed", lambda: False)
    embedders = collect_embedders(get_plugin_manager())
    with pytest.raises(IllegalArgument) as refused:
        get_embedder(embedders, "BAAI/bge-small-en-v1.5")
    assert "pip install 'xerj[neural]'" in refused.value.reason

# -- discovery and the hook --------------------------------------------------


def test_builtin_embedders_are_discovered_through_entry_points():
    pm = get_plugin_manager()
    embedders = collect_embedders(pm)
    assert isinstance(embedders["lexical-feature-hash"], LexicalFeatureHashEmbedder)
    assert isinstance(embedders[STATIC_EMBEDDER], StaticEmbedder)
    assert isinstance(embedders[HYBRID_EMBEDDER], HybridEmbedder)
    assert isinstance(embedders["BAAI/bge-small-en-v1.5"], FastEmbedEmbedder)
    assert isinstance(embedders["sentence-transformers/all-MiniLM-L6-v2"], FastEmbedEmbedder)
    for name in ("embedder_lexical", "embedder_static", "embedder_hybrid", "embedder_neural", "embedder_retired"):
        assert pm.origin(pm.get_plugin(name)).builtin


def test_a_blocked_embedder_plugin_is_not_collected(monkeypatch):
    monkeypatch.setenv("XERJ_DISABLE_PLUGINS", "embedder_neural")
    embedders = collect_embedders(get_plugin_manager())
    assert "lexical-feature-hash" in embedders
    assert "BAAI/bge-small-en-v1.5" not in embedders


class _FakeEmbedder:
    id = "fake-constant"
    dims = 3
    license = "CC0-1.0"
    source = "this test"

    def embed(self, texts):
        return np.tile(np.array([1.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))


class _FakeEmbedderPlugin:
    @hookimpl
    def xerj_register_embedders(self, register):
        register(_FakeEmbedder())


@pytest.fixture
def fake_embedder_pm():
    plugin = _FakeEmbedderPlugin()
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(plugin, name="fake_embedder")
    try:
        yield pm
    finally:
        pm.unregister(plugin)


def test_hook_xerj_register_embedders(fake_embedder_pm):
    embedders = collect_embedders(fake_embedder_pm)
    assert list(embedders) == ["fake-constant"]
    assert embedders["fake-constant"].embed(["a", "b"]).shape == (2, 3)


def test_a_duplicate_embedder_id_names_the_plugin(fake_embedder_pm):
    second = _FakeEmbedderPlugin()
    fake_embedder_pm.register(second, name="fake_again")
    try:
        with pytest.raises(PluginError, match="fake"):
            collect_embedders(fake_embedder_pm)
    finally:
        fake_embedder_pm.unregister(second)


def test_the_fake_embedder_passes_nothing_it_should_not():
    """The suite has teeth: a constant embedder fails the similarity and blank-text checks."""
    suite = AbstractEmbedderTests()
    fake = _FakeEmbedder()
    with pytest.raises(AssertionError):
        suite.test_blank_text_is_zero_row(fake)
    with pytest.raises(AssertionError):
        suite.test_similar_text_is_closer_than_unrelated(fake)


def test_an_unimplemented_embedder_fixture_says_what_to_do():
    fixture = AbstractEmbedderTests.__dict__["embedder"]
    function = getattr(fixture, "__wrapped__", fixture)
    with pytest.raises(NotImplementedError, match="override the `embedder` fixture"):
        function(AbstractEmbedderTests())


def test_an_embedder_that_does_not_say_where_it_comes_from_is_refused(fake_embedder_pm, monkeypatch):
    monkeypatch.delattr(_FakeEmbedder, "license")
    with pytest.raises(PluginError, match="license"):
        collect_embedders(fake_embedder_pm)
