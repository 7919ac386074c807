"""Words with combining marks (Indic scripts' vowel signs and viramas, decomposed accents) stay whole on every
tokenizing path, and a search finds them."""

from __future__ import annotations

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
    ("Tu\u0308bingen und Ko\u0308ln", ["tu\u0308bingen", "und", "ko\u0308ln"]),  # decomposed, as macOS names files
    ("café, naïve", ["café", "naïve"]),
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
    # the note's section (its anchor is slugify's, which still drops the marks: left as it is, see the note) and
    # nothing of the note holding the consonants alone, which the old cut matched
    assert hits and all(hit["_id"].startswith("भाषा.md") for hit in hits)
    assert any("<em>हिन्दी</em>" in fragment for hit in hits for fragment in hit.get("highlight", {}).get("text", []))
