"""The conformance suite every embedder passes: subclass ``AbstractEmbedderTests`` and provide ``embedder``.

Usage, in a plugin's own tests::

    from xerj_core.testing.embedders import AbstractEmbedderTests

    class TestMyEmbedder(AbstractEmbedderTests):
        @pytest.fixture(scope="class")
        @classmethod  # a class-scoped fixture is a classmethod (pytest deprecates instance methods there)
        def embedder(cls):
            return MyEmbedder()

The mixin's name does not start with ``Test``, so pytest collects it only
through a subclass. ``fresh_embedder`` builds a second, independent instance
(by calling the class with no arguments) for the cross-instance determinism
check; override it when the constructor needs arguments. The example texts
are class attributes an implementer may replace when its embedder covers
another language or domain.

The contract checked here: a non-empty string ``id``; a positive int ``dims``;
non-empty ``license`` and ``source`` strings saying where the model comes from;
``embed`` returns ``(n, dims)`` float32 for any sequence of strings, zero rows
included; every row of a text with content has unit L2 norm, and empty or
whitespace-only text gives the zero row; the same text gives the identical
vector every time, in any instance; a text embeds the same alone as in a
batch; and a paraphrase is closer than an unrelated sentence.
"""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.embedding import Embedder

NORM_TOLERANCE = 1e-5
# Batching may change floating-point summation order, never the meaning.
BATCH_TOLERANCE = 1e-5


class AbstractEmbedderTests:
    """Contract tests for an :class:`~xerj_core.embedding.Embedder`; needs the ``embedder`` fixture."""

    anchor_text = "The cat sat on the mat by the door."
    similar_text = "A cat was sitting on the mat near the door."
    unrelated_text = "Quarterly revenue rose by ten percent after the merger."
    sample_texts = (
        "Sourdough needs a lively starter and a long, cool proof.",
        "Kimchi ferments with lactobacillus at room temperature.",
        "meeting notes: ship the graph overview on friday",
        "Zürich, São Paulo and Kraków are cities; 東京 too.",
        "x",
        "a much longer passage " * 20,
    )
    blank_texts = ("", " ", "\n\t  ")

    @pytest.fixture
    def embedder(self) -> Embedder:
        raise NotImplementedError("override the `embedder` fixture to return the embedder under test")

    @pytest.fixture
    def fresh_embedder(self, embedder: Embedder) -> Embedder:
        return type(embedder)()

    # -- identity --------------------------------------------------------

    def test_satisfies_protocol(self, embedder):
        assert isinstance(embedder, Embedder)

    def test_id_is_non_empty_string(self, embedder):
        assert isinstance(embedder.id, str)
        assert embedder.id.strip() == embedder.id != ""

    def test_declares_license_and_source(self, embedder):
        for declared in (embedder.license, embedder.source):
            assert isinstance(declared, str) and declared.strip() == declared != ""

    def test_dims_is_positive_int(self, embedder):
        assert isinstance(embedder.dims, int) and not isinstance(embedder.dims, bool)
        assert embedder.dims > 0

    # -- shape and values ----------------------------------------------

    def test_shape_and_dtype(self, embedder):
        vectors = embedder.embed(list(self.sample_texts))
        assert isinstance(vectors, np.ndarray)
        assert vectors.dtype == np.float32
        assert vectors.shape == (len(self.sample_texts), embedder.dims)
        assert np.isfinite(vectors).all()

    def test_no_texts_gives_no_rows(self, embedder):
        vectors = embedder.embed([])
        assert vectors.shape == (0, embedder.dims)
        assert vectors.dtype == np.float32

    def test_accepts_any_sequence(self, embedder):
        as_list = embedder.embed(list(self.sample_texts))
        as_tuple = embedder.embed(tuple(self.sample_texts))
        np.testing.assert_array_equal(as_list, as_tuple)

    def test_rows_have_unit_norm(self, embedder):
        norms = np.linalg.norm(embedder.embed(list(self.sample_texts)).astype(np.float64), axis=1)
        np.testing.assert_allclose(norms, 1.0, atol=NORM_TOLERANCE)

    def test_blank_text_is_zero_row(self, embedder):
        texts = [*self.blank_texts, self.anchor_text]
        vectors = embedder.embed(texts)
        assert not vectors[: len(self.blank_texts)].any()
        assert np.linalg.norm(vectors[-1]) == pytest.approx(1.0, abs=NORM_TOLERANCE)

    def test_blank_text_does_not_disturb_neighbours(self, embedder):
        alone = embedder.embed([self.anchor_text])
        mixed = embedder.embed(["", self.anchor_text, " "])
        np.testing.assert_allclose(mixed[1], alone[0], atol=BATCH_TOLERANCE)

    # -- determinism ---------------------------------------------------

    def test_same_text_same_vector(self, embedder):
        first = embedder.embed(list(self.sample_texts))
        second = embedder.embed(list(self.sample_texts))
        np.testing.assert_array_equal(first, second)

    def test_same_vector_in_a_fresh_instance(self, embedder, fresh_embedder):
        assert fresh_embedder is not embedder
        assert (fresh_embedder.id, fresh_embedder.dims) == (embedder.id, embedder.dims)
        np.testing.assert_array_equal(
            fresh_embedder.embed(list(self.sample_texts)), embedder.embed(list(self.sample_texts))
        )

    def test_duplicate_texts_in_a_batch_are_identical(self, embedder):
        vectors = embedder.embed([self.anchor_text, self.unrelated_text, self.anchor_text])
        np.testing.assert_array_equal(vectors[0], vectors[2])

    def test_batch_equals_single(self, embedder):
        texts = [*self.sample_texts, self.anchor_text, "", self.unrelated_text]
        batch = embedder.embed(texts)
        singles = np.vstack([embedder.embed([text]) for text in texts])
        np.testing.assert_allclose(batch, singles, atol=BATCH_TOLERANCE)

    # -- meaning (or at least overlap) ---------------------------------

    def test_similar_text_is_closer_than_unrelated(self, embedder):
        anchor, similar, unrelated = embedder.embed([self.anchor_text, self.similar_text, self.unrelated_text])
        assert float(anchor @ similar) > float(anchor @ unrelated)

    def test_identical_text_has_cosine_one(self, embedder):
        vectors = embedder.embed([self.anchor_text])
        assert float(vectors[0] @ vectors[0]) == pytest.approx(1.0, abs=NORM_TOLERANCE)
