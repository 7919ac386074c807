"""Words with combining marks (Indic scripts' vowel signs and viramas, decomposed accents) stay whole on every
tokenizing path, runs of CJK letters and of Thai, Lao, Khmer and Myanmar letters are cut into pairs on every path,
and a search finds them all."""

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
    ("น้ำ", ["น้ำ"]),  # Thai: a tone mark stays on its letter (one pair of units: น้ and the vowel ำ)
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
          "İ", "\u20dd", "\u0e31", "ক্ষ",
          # CJK letters: Han, kana (a voiced one, its combining mark alone), half-width kana, Hangul, an iteration
          # mark, an ideograph beyond the first plane, and the punctuation between them
          "应用", "商", "が", "\u3099", "ｶﾀ", "한국", "々", "\U00020B9F", "。", "・",
          # Southeast Asian letters: Thai (a letter with a tone mark, a leading vowel, a Thai digit), Lao, Khmer (a
          # subscript consonant), Myanmar (a letter composed from a letter and a mark) and a Thai mark alone
          "ก็", "ไทย", "๒", "ພາສາ", "ស្រ", "ဦ", "\u1025\u102e", "\u0e49"]


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


@pytest.mark.parametrize(("written", "words"), [
    ("通过设备的应用商店进行更新。", ["通过", "过设", "设备", "备的", "的应", "应用", "用商", "商店", "店进", "进行",
                                    "行更", "更新"]),
    ("東京都に住む", ["東京", "京都", "都に", "に住", "住む"]),  # Han and Hiragana in one run
    ("カタカナ・テスト", ["カタ", "タカ", "カナ", "テス", "スト"]),  # a middle dot is punctuation
    ("한국어 텍스트입니다", ["한국", "국어", "텍스", "스트", "트입", "입니", "니다"]),
    ("第3章 中", ["第", "3", "章", "中"]),  # a run of one letter is that letter
    ("Obsidian通过 apps商店", ["obsidian", "通过", "apps", "商店"]),  # other letters touching a run are a word
    # Southeast Asian scripts: a letter and the marks after it are one unit, and a run is its overlapping pairs
    ("คุณจัดการไฟล์", ["คุณ", "ณจั", "จัด", "ดก", "กา", "าร", "รไ", "ไฟ", "ฟล์"]),  # คุ ณ จั ด ก า ร ไ ฟ ล์
    ("ภาษาไทย café", ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย", "café"]),
    ("๒๕๖๗ปี 5นาที ก็", ["๒๕๖๗", "ปี", "5", "นา", "าที", "ก็"]),  # digits are a word; a run of one unit is kept
    ("ພາສາລາວ", ["ພາ", "າສ", "ສາ", "າລ", "ລາ", "າວ"]),  # Lao
    ("ដំឡើង Obsidian", ["ដំឡើ", "ឡើង", "obsidian"]),  # Khmer: ដំ ឡើ ង
    ("မြန်မာဘာသာ", ["မြန်", "န်မာ", "မာဘာ", "ဘာသာ"]),  # Myanmar: မြ န် မာ ဘာ သာ
])
def test_a_run_of_cjk_or_southeast_asian_letters_is_cut_into_overlapping_pairs(written, words):
    assert text.tokenize(written) == words
    assert text.utf8_words(written) == [w.encode() for w in words]
    assert [word for _span, word in text.word_spans(written)] == words
    assert [written[a:b].lower() for (a, b), _word in text.word_spans(written)] == words


@pytest.mark.parametrize("written", [
    "Привет, мир! Это тест: ΟΔΟΣ и 3,5 км.",  # mostly beyond ASCII: cut whole
    "Ein Text über Straßen, mostly ASCII, with one Ölfeld.",  # mostly ASCII: cut by pieces
    "한국어 텍스트입니다, mixed with English words and 应用商店.",
    "คุณสามารถจัดการไฟล์และโฟลเดอร์ได้หลายวิธี โดยใช้ Ctrl+N",
    "Mostly English, with one Thai word: ภาษาไทย.",
])
def test_the_stores_cut_agrees_with_tokenize_however_much_of_a_text_is_ascii(written):
    assert text.utf8_words(written) == [word.encode() for word in text.tokenize(written)]
    assert text.counted_terms(written, 100)[0] == len(text.tokenize(written))


def test_the_southeast_asian_letters_are_those_of_their_blocks():
    """SEA_LETTERS is every letter (no digit, symbol or mark) of the blocks it names, as this Python's unicodedata
    gives them; every mark of those blocks is a word mark, so it stays on its letter."""
    letters = {chr(cp) for lo, hi in text.SEA_BLOCKS for cp in range(lo, hi + 1)
               if unicodedata.category(chr(cp)).startswith("L")}
    marks = {chr(cp) for lo, hi in text.SEA_BLOCKS for cp in range(lo, hi + 1)
             if unicodedata.category(chr(cp)).startswith("M")}
    import re

    assert {chr(cp) for cp in range(0x10000) if re.fullmatch(f"[{text.SEA_LETTERS}]", chr(cp))} == letters
    assert all(re.fullmatch(f"[{wordmarks.MARKS}]", mark) for mark in marks)


def test_embedders_keep_the_words_their_stored_vectors_were_made_of():
    """The built-in embedders' features are made of whole runs (text.run_words), as before CJK runs were cut:
    a memory stored earlier is still met by a query embedded now."""
    import numpy as np
    from xerj_embedders import lexical

    assert text.run_words("应用商店 Obsidian通过") == ["应用商店", "obsidian通过"]
    assert text.run_words("จัดการไฟล์") == ["จัดการไฟล์"]
    embedder = lexical.LexicalFeatureHashEmbedder(dims=64)
    buckets, signs = lexical.signed_buckets(lexical.word_features("应用商店", embedder.char_ngram), 64)
    expected = np.zeros(64)
    np.add.at(expected, buckets, signs * np.array([lexical.WORD_WEIGHT] + [lexical.CHAR_WEIGHT] * (len(buckets) - 1)))
    assert np.allclose(embedder.embed(["应用商店"])[0], expected / np.linalg.norm(expected), atol=1e-6)


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


def searched_notes(engine, folder, brain: str, notes: dict[str, str]):
    """``notes`` (name: text) autoindexed from ``folder`` as ``brain``; returns a search of its notes' index that
    answers a query's hits."""
    from xerj_core.autoindex.pipeline import run

    from .test_autoindex import index_of

    folder.mkdir()
    for name, written in notes.items():
        (folder / name).write_text(written)
    run(engine, folder, brain=brain)
    search, index = SearchService(engine.store).search, index_of(engine, brain)
    return lambda query, **extra: search(index, {"query": query, **extra})["hits"]["hits"]


def test_cjk_notes_are_found_by_a_word_inside_a_sentence_by_phrase_and_highlighted(engine, tmp_path):
    """Chinese, Japanese and Korean notes are found by a word standing inside a sentence (with no space around
    it), a phrase only where its letters stand together, and the word is highlighted once, whole."""
    found = searched_notes(engine, tmp_path / "notes", "cjk", {
        "更新.md": "# 更新\n\n在移动端，Obsidian 通过设备的应用商店进行更新。\n",
        "apart.md": "# 分开\n\n这个应用不在商店里。\n",  # both words, not side by side
        "日本.md": "# 東京\n\n東京都に住んでいます。\n", "한국.md": "# 한국어\n\n한국어 텍스트입니다.\n"})

    words = [hit["_id"] for hit in found({"match": {"text": {"query": "应用商店", "operator": "and"}}})]
    assert words == ["更新.md#更新"]
    assert {hit["_id"] for hit in found({"match": {"text": "应用商店"}})} == {"更新.md#更新", "apart.md#分开"}
    assert [hit["_id"] for hit in found({"match_phrase": {"text": "应用商店"}})] == ["更新.md#更新"]
    assert found({"match_phrase": {"text": "应用 商店"}}) == []  # two words side by side: not in either note
    assert [hit["_id"] for hit in found({"match_phrase_prefix": {"text": "应用商"}})] == ["更新.md#更新"]
    assert [hit["_id"] for hit in found({"match": {"text": "京都"}})] == ["日本.md#東京"]
    assert [hit["_id"] for hit in found({"match": {"text": "텍스트"}})] == ["한국.md#한국어"]
    lit = found({"match_phrase": {"text": "应用商店"}}, highlight={"fields": {"text": {}}})
    [fragment] = lit[0]["highlight"]["text"]
    assert fragment.endswith("在移动端，Obsidian 通过设备的<em>应用商店</em>进行更新。") and fragment.count("<em>") == 1


def test_thai_and_khmer_notes_are_found_by_a_word_inside_a_sentence_by_phrase_and_highlighted(engine, tmp_path):
    """Thai and Khmer put no space between words either (Obsidian's help in Thai: "you can manage files and
    folders in many ways"): a word inside a sentence is found, by phrase only where its letters stand together
    (its vowel signs and tone marks included), and is highlighted once, whole."""
    found = searched_notes(engine, tmp_path / "notes", "thai", {
        "จัดการโน้ต.md": "# จัดการโน้ต\n\nคุณสามารถจัดการไฟล์และโฟลเดอร์ได้หลายวิธี\n",
        "apart.md": "# แยก\n\nไฟ ล์\n",  # the word's letters apart
        "ไฟ.md": "# ไฟ\n\nไฟไหม้บ้าน\n",  # "fire": the word's first pair, then other letters
        "sync.md": "# Sync\n\nដំឡើង Obsidian Sync នៅលើឧបករណ៍របស់អ្នក\n"})

    assert [hit["_id"] for hit in found({"match_phrase": {"text": "ไฟล์"}})] == ["จัดการโน้ต.md#จัดการโน้ต"]
    assert [hit["_id"] for hit in found({"match_phrase": {"text": "จัดการ"}})] == ["จัดการโน้ต.md#จัดการโน้ต"]
    assert [hit["_id"] for hit in found({"match": {"text": {"query": "โฟลเดอร์", "operator": "and"}}})] == [
        "จัดการโน้ต.md#จัดการโน้ต"]
    assert [hit["_id"] for hit in found({"match_phrase": {"text": "ไฟไหม้"}})] == ["ไฟ.md#ไฟ"]
    assert [hit["_id"] for hit in found({"match_phrase_prefix": {"text": "โฟลเด"}})] == ["จัดการโน้ต.md#จัดการโน้ต"]
    assert [hit["_id"] for hit in found({"match_phrase": {"text": "ឧបករណ៍"}})] == ["sync.md#sync"]  # Khmer
    lit = found({"match_phrase": {"text": "ไฟล์"}}, highlight={"fields": {"text": {}}})
    [fragment] = lit[0]["highlight"]["text"]
    assert fragment.endswith("\nคุณสามารถจัดการ<em>ไฟล์</em>และโฟลเดอร์ได้หลายวิธี") and fragment.count("<em>") == 1


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

