"""Words with combining marks (Indic scripts' vowel signs and viramas, decomposed accents) stay whole on every
tokenizing path, and a search finds them."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

from xerj_core import text, wordmarks
from xerj_core.query.service import SearchService


def test_the_marks_table_is_this_pythons_unicode():
    assert wordmarks.MARKS == wordmarks._made()


@pytest.mark.parametrize(("written", "words"), [
    ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # Devanagari: vowel signs and a virama
    ("বাংলা ভাষা", ["বাংলা", "ভাষা"]),  # Bengali
    ("தமிழ் மொழி", ["தமிழ்", "மொழி"]),  # Tamil
    ("ภาษาไทย", ["ภาษาไทย"]),  # Thai (one run, as before)
    ("Tu\u0308bingen und Ko\u0308ln", ["tübingen", "und", "köln"]),  # decomposed, as macOS names files: composed
    ("café, naïve", ["café", "naïve"]),
    ("⚠️ Changes ❤️ a\ufe0f", ["changes", "a"]),  # a variation selector (an emoji's) is no mark of a word
    ("x \u0301 \u0301y", ["x", "y"]),  # a mark after a space marks nothing: no word of its own
])
def test_a_word_keeps_its_marks(written, words):
    assert text.tokenize(written) == words


# Pieces of text: marks on their own and in words of several scripts, ASCII, separators, a final sigma (no NUL:
# utf8_words keeps one as a word of its own).
PIECES = ["हिन्दी", "\u093f", "\u094d", "क", " ", "\n", ",", "a", "Z9", "\u0301", "e\u0301", "ΟΔΟΣ", "_", "-", "ﬁ",
          "İ", "\u20dd", "\u0e31", "ক্ষ"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_every_path_cuts_words_with_marks_alike(written):
    words = text.tokenize(written)
    assert [w.encode() for w in words] == text.utf8_words(written)
    assert text.tokenize_many([written, "x"])[0] == words
    assert text.long_words(written, 2) == [w for w in words if len(w) >= 2]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES + ["É", "Å", "\u030a", "\u0327", "ç", "ﬃ", "ǅ"]), max_size=30).map("".join))
def test_a_word_is_the_same_typed_composed_or_decomposed(written):
    """Words are compared composed: text typed with precomposed letters and the same text decomposed (as macOS
    names files) cut into the same words, by every path that cuts them."""
    words = text.tokenize(written)
    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, written)
        assert text.tokenize(other) == words
        assert text.utf8_words(other) == [w.encode() for w in words]
        assert text.tokenize_many([other])[0] == words
        assert text.long_words(other, 3) == [w for w in words if len(w) >= 3]
    assert all(unicodedata.is_normalized("NFC", w) for w in words)


def test_an_anchor_keeps_marks_and_is_composed():
    assert text.slugify("Cafe\u0301 Ole\u0301") == text.slugify("Café Olé") == "café-olé"
    assert text.slugify("हिन्दी भाषा") == "हिन्दी-भाषा"  # a vowel sign and a virama are not punctuation
    assert text.slugify("Tom & Jerry!") == "tom--jerry"
    assert text.slugify("⚠️ Changes") == "-changes"  # as GitHub anchors it: the emoji and its selector dropped
    assert text.fold("Plain ASCII") == "plain ascii"


def test_a_decomposed_note_is_found_by_composed_words_and_the_other_way(engine, tmp_path):
    """A note whose name and text are decomposed (macOS) is found by words typed composed, by a phrase, a
    wildcard and a word typed decomposed, and highlighted; a composed note by a decomposed query."""
    from xerj_core.autoindex.pipeline import run

    from .test_autoindex import index_of

    folder = tmp_path / "notes"
    folder.mkdir()
    decomposed = unicodedata.normalize("NFD", "Café Olé")
    (folder / f"{decomposed}.md").write_text(f"# {decomposed}\n\nA note about {decomposed}.\n")
    (folder / "crème.md").write_text("# Crème\n\nCrème brûlée.\n")
    run(engine, folder, brain="nfd")
    index = index_of(engine, "nfd")
    search = SearchService(engine.store).search

    def found(query):
        return sorted(hit["_id"] for hit in search(index, {"query": query})["hits"]["hits"])

    section = f"{decomposed}.md#café-olé"
    assert section in found({"match": {"text": "café"}})
    assert found({"match": {"text": "café"}}) == found({"match": {"text": unicodedata.normalize("NFD", "café")}})
    assert section in found({"match_phrase": {"text": "café olé"}})
    assert section in found({"query_string": {"query": "text:Cafe\u0301*"}})  # a pattern is composed too
    assert found({"match": {"text": unicodedata.normalize("NFD", "brûlée")}}) == ["crème.md#crème"]
    lit = search(index, {"query": {"match": {"text": "olé"}}, "highlight": {"fields": {"text": {}}}})
    assert any(f"<em>{unicodedata.normalize('NFD', 'Olé')}</em>" in fragment
               for hit in lit["hits"]["hits"] for fragment in hit.get("highlight", {}).get("text", []))


def test_a_hindi_note_is_found_by_its_words_and_highlighted(engine, tmp_path):
    from xerj_core.autoindex.pipeline import run

    from .test_autoindex import index_of

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "भाषा.md").write_text("# हिन्दी\n\nहिन्दी भारत की एक भाषा है।\n")
    (folder / "other.md").write_text("# Other\n\nह न द भ ष\n")  # the consonants alone, as the old cut made them
    run(engine, folder, brain="hi")
    found = SearchService(engine.store).search(index_of(engine, "hi"), {
        "query": {"match": {"text": "हिन्दी"}}, "highlight": {"fields": {"text": {}}}})
    hits = found["hits"]["hits"]
    # the note's section, its anchor whole, and nothing of the note holding the consonants alone, which the old
    # cut matched
    assert hits and all(hit["_id"].startswith("भाषा.md") for hit in hits)
    assert "भाषा.md#हिन्दी" in [hit["_id"] for hit in hits]
    # a phrase whose words end in vowel signs (no \b after them): found where they lie side by side
    phrase = SearchService(engine.store).search(index_of(engine, "hi"), {
        "query": {"match_phrase": {"text": "एक भाषा"}}})
    assert [hit["_id"] for hit in phrase["hits"]["hits"]] == ["भाषा.md#हिन्दी"]
    assert any("<em>हिन्दी</em>" in fragment for hit in hits for fragment in hit.get("highlight", {}).get("text", []))


def test_a_brain_whose_words_an_older_tokenizer_cut_is_written_again(engine, tmp_path, monkeypatch):
    """A brain indexed before words were composed keeps the decomposed terms its documents were stored with; the
    first run of this version reads every file again and writes every document, even one whose source is stored
    as it is now (a section of an unchanged note), so the words are found as they are typed. Later runs compare
    as before."""
    from xerj_core.autoindex import formats, sink
    from xerj_core.autoindex.pipeline import run

    from .test_autoindex import index_of

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text(f"# Notes\n\nA note about {unicodedata.normalize('NFD', 'café')}.\n\n## More\n\nText.\n")

    def found():
        hits = SearchService(engine.store).search(index_of(engine, "old"), {"query": {"match": {"text": "café"}}})
        return [hit["_id"] for hit in hits["hits"]["hits"]]

    with monkeypatch.context() as older:  # the build before: words lowercased only, runs marked by words@2
        older.setattr(text, "fold", str.lower)
        older.setattr(formats, "WORDS_MARK", "+words@2")
        older.setattr(sink, "WORDS_MARK", "+words@2")
        run(engine, folder, brain="old")
    assert found() == []
    upgraded = run(engine, folder, brain="old")
    assert upgraded.formats_changed and upgraded.files_indexed == 1
    assert found() == ["a.md#notes"]
    again = run(engine, folder, brain="old")
    assert not again.formats_changed and again.files_unchanged == 1

