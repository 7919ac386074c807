"""Long texts tokenized a slice at a time: the same words, counts and postings as whole, at every place that
counts a text (the store's per-document and column-wise paths, the parsing process's counts, sharedterm), and a
big plain-text file autoindexed with bounded memory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core import text as text_module
from xerj_core.store import Store, plan
from xerj_core.store.limits import MAX_TERM_BYTES
from xerj_core.text import counted_terms, distinct_long_words, long_words, slices, tokenize

from .test_autoindex_counted import _contents
from .test_store_batchpath import EDGES, _expected, _same_run, _texts

# Whitespace of several kinds (a no-break space, an ideographic space, a line separator) beside characters whose
# lowercasing depends on their neighbours (final sigma), CJK, a NUL, and ASCII word and non-word characters.
_ALPHABET = "ΣΑσς İK\u212a é漢_aZ09.'-\t\n\u00a0\u3000\u2028\x00"


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(_ALPHABET), max_size=80), st.integers(0, 12))
def test_slices_cut_after_whitespace_and_keep_every_word(text, size):
    pieces = list(slices(text, size))
    assert "".join(pieces) == text
    assert all(piece[-1].isspace() for piece in pieces[:-1])
    assert [word for piece in pieces for word in tokenize(piece)] == tokenize(text)


def test_a_text_within_a_slice_is_not_copied():
    text = "short text"
    assert next(slices(text)) is text


@pytest.fixture
def small_slices(monkeypatch):
    """Slices of 64 characters everywhere a text is sliced, so real files are long texts."""
    monkeypatch.setattr(text_module, "SLICE_CHARS", 64)
    monkeypatch.setattr(plan, "SLICE_CHARS", 64)


def _long_texts() -> list[str]:
    edges = [value for value in EDGES if value]
    return [text for _path, text in _texts()] + edges + [" ".join(edges * 40)]


def test_sliced_counts_equal_whole_counts_on_real_text(monkeypatch):
    texts = _long_texts()
    whole = [(counted_terms(text, MAX_TERM_BYTES), plan.text_counts(text), set(long_words(text, 3)))
             for text in texts]
    monkeypatch.setattr(text_module, "SLICE_CHARS", 64)
    for text, (counted, counts, words) in zip(texts, whole):
        assert len(list(slices(text))) >= len(text) // 200  # sliced indeed, where the text has whitespace
        assert counted_terms(text, MAX_TERM_BYTES) == counted
        assert plan.text_counts(text) == counts
        assert distinct_long_words(text, 3) == words
        kept = [word for word in tokenize(text) if len(word.encode()) <= MAX_TERM_BYTES]
        assert counts[0] == len(kept) and sum(counts[2].values()) == len(kept)


@pytest.mark.usefixtures("small_slices")
def test_a_fields_several_values_count_as_their_words_in_order():
    texts = _long_texts()
    for values in ((texts[0], texts[-1]), (texts[2], "", "x" * 300 + " ΟΔΟΣ", texts[1]), ()):
        words = [word for value in values for word in tokenize(value)]
        kept = [word for word in words if len(word.encode()) <= MAX_TERM_BYTES]
        kept_count, dropped, counts = plan.text_counts(*values)
        assert (kept_count, dropped) == (len(kept), len(words) - len(kept))
        assert list(counts.items()) == list(Counter(kept).items())  # the same words, in first-seen order


@pytest.mark.usefixtures("small_slices")
@pytest.mark.parametrize("size", [1, 3, 40])
def test_column_postings_with_long_values_equal_a_value_at_a_time(size):
    values = _long_texts()
    values[1:1] = [None, "", "tiny", None]
    for lo in range(0, len(values), size):
        batch = values[lo:lo + size]
        got_skipped, want_skipped = {"terms": 0}, {"terms": 0}
        got = plan.column_postings(batch, 7 + lo, got_skipped)
        want = _expected(batch, 7 + lo, want_skipped)
        _same_run(got, want)
        assert got[1][0] == want[1][0] and got_skipped == want_skipped


MAPPING = {"properties": {"title": {"type": "text"}, "text": {"type": "text"}, "path": {"type": "keyword"}}}


def _store(path: Path, docs: list[dict], bulk: bool) -> Store:
    store = Store(path, tail_rows=16)
    store.create_index("t", MAPPING)
    if bulk:
        for lo in range(0, len(docs), 30):
            store.transact(lambda txn, lo=lo: txn.index("t").put_many(
                [(doc, f"d{lo + i}", "index") for i, doc in enumerate(docs[lo:lo + 30])]))
    else:
        for i, doc in enumerate(docs):
            store.put("t", doc, f"d{i}")
    return store


@pytest.mark.parametrize("bulk", [False, True], ids=["one-by-one", "batches"])
def test_a_store_of_long_texts_holds_what_it_held_unsliced(tmp_path, monkeypatch, bulk):
    """Every key and value written (sources, columns, postings, the count of words too long to be keys) is the
    same whether the texts were sliced or tokenized whole."""
    docs = [{"title": Path(path).name, "text": text, "path": path} for path, text in _texts()]
    # a text field holding several values: their words counted as one run, in order
    docs += [{"title": "two", "text": [docs[0]["text"], docs[-1]["text"]], "path": "pair"},
             {"title": "three", "text": ["ΟΔΟΣ ΟΔΟΣ", docs[3]["text"], ""], "path": "triple"}]
    with _store(tmp_path / "whole", docs, bulk) as whole:
        want = _contents(whole)
    monkeypatch.setattr(text_module, "SLICE_CHARS", 64)
    monkeypatch.setattr(plan, "SLICE_CHARS", 64)
    with _store(tmp_path / "sliced", docs, bulk) as sliced:
        assert _contents(sliced) == want


_PEAK = """
import sys
from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine
from xerj_core.store.residency import peak_rss_mb
engine = Engine(sys.argv[2])
summary = run(engine, sys.argv[1], brain="big")
assert summary.files_indexed == 1 and not summary.files_failed, summary
peak = round(peak_rss_mb())
for word in ("firstword", "event99", "σίσυφος", "lastword"):
    found = engine.search.search(summary.datasets[0], {"query": {"match": {"text": word}}, "_source": False})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["server.log"], (word, found)
print(peak)
"""


def test_a_big_plain_text_file_is_indexed_in_bounded_memory(tmp_path):
    """A 24 MB log of 4 million words: its words are never listed all at once (they took about 230 MB as a
    list, on top of the text itself), and its words at the start, throughout and at the end are found."""
    folder = tmp_path / "logs"
    folder.mkdir()
    line = "".join(f"event{i} status ok Σίσυφος {i * 7}\n" for i in range(100))
    (folder / "server.log").write_text("firstword\n" + line * (24_000_000 // len(line.encode())) + "lastword\n")
    size_mb = (folder / "server.log").stat().st_size / 1e6
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _PEAK, str(folder), str(tmp_path / "data")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peak_mb = int(done.stdout.split()[-1])
    print(f"peak {peak_mb} MB for a {size_mb:.0f} MB file")
    assert peak_mb < 12 * size_mb
