"""The bulk path's column-wise text postings on real text: the batch tokenizer pass against one value at a time,
and a bulk-written index against the same documents put one by one (sources, columns, every term's postings)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.store import BulkOp, Store, plan, write
from xerj_core.store.columns import KIND_ORD, column_kind
from xerj_core.store.plan import column_postings, column_tokens
from xerj_core.store.tailblock import postings_of_tokens
from xerj_core.text import tokenize, tokenize_many, utf8_words

from .conftest import CORPORA

FOAM = CORPORA / "foam-docs"
SITE = Path(np.__file__).resolve().parents[1]  # this venv's site-packages
# Real .py files: ASCII ones, ones with CJK (charset_normalizer, pygments' test lexers), and ones with words too
# long to be keys (idna's tables).
PY_FILES = ["charset_normalizer/constant.py", "pygments/lexers/testing.py", "idna/uts46data.py",
            "idna/idnadata.py", "pygments/lexers/python.py", "click/core.py", "falcon/request.py"]
MAPPING = {"properties": {"title": {"type": "text"}, "body": {"type": "text"}, "path": {"type": "keyword"},
                          "size": {"type": "long"}}}


def _texts() -> list[tuple[str, str]]:
    """(path, text) of the Foam vault's notes and of the .py files, each file also cut into its paragraphs."""
    if not FOAM.is_dir():
        pytest.skip(f"the Foam vault is missing at {FOAM}")
    files = sorted(FOAM.rglob("*.md")) + [SITE / name for name in PY_FILES if (SITE / name).is_file()]
    out = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        out.append((str(path), text))
        out += [(f"{path}#{i}", part) for i, part in enumerate(text.split("\n\n")) if part.strip()]
    return out


# column_postings both ways: every batch cut in one translation, or every batch counted by the compiled word count
# (text.counted_terms, which it takes for long values)
WAYS = pytest.mark.parametrize("count_from", [float("inf"), 0], ids=["cut", "counted"])


def _column_postings(column, start, skipped, count_from):
    kept, plan.COUNT_COLUMN_FROM_CHARS = plan.COUNT_COLUMN_FROM_CHARS, count_from
    counted, calls = plan.counted_postings, []
    plan.counted_postings = lambda *args: calls.append(args) or counted(*args)
    try:
        found = column_postings(column, start, skipped)
    finally:
        plan.COUNT_COLUMN_FROM_CHARS, plan.counted_postings = kept, counted
    assert len(calls) == (count_from == 0 and len(column) > 0)
    return found


def _expected(column, start, skipped):
    tokens = column_tokens(column, skipped)
    return list(map(len, tokens)), postings_of_tokens(tokens, start)


def _same_run(got, want):
    assert list(got[0]) == list(want[0])
    for a, b in zip(got[1][1:], want[1][1:]):
        assert a.dtype == b.dtype and np.array_equal(a, b)


# Made-up values on the edges of the batch tokenizer: case, digits and underscores, a NUL inside a value,
# Greek final sigma, CJK, an empty value, an absent one, words too long to be keys.
# Words of 254 and 260 UTF-8 bytes (the first is indexed, the second too long), and ASCII and CJK ones too long.
EDGES = ["Hello_World 42 x", "ΟΔΟΣ ΟΔΟΣ.", "a\x00b c", "漢字 かな text", "", None, "z" * 300 + " short", "Tab\tNew\nline",
         "é" * 127 + " ok", "é" * 130, "漢" * 90 + " 漢", "mixed É word"]


@WAYS
@pytest.mark.parametrize("size", [1, 2, 7, 100, 1000])
def test_the_batch_tokenizer_pass_equals_a_value_at_a_time_on_real_text(size, count_from):
    values = [text for _path, text in _texts()]
    for lo in range(0, len(values), size):
        batch = values[lo:lo + size]
        got_skipped, want_skipped = {"terms": 0}, {"terms": 0}
        got = _column_postings(batch, 10 + lo, got_skipped, count_from)
        want = _expected(batch, 10 + lo, want_skipped)
        _same_run(got, want)
        assert got[1][0] == want[1][0]
        assert got_skipped == want_skipped


@WAYS
def test_the_batch_tokenizer_pass_on_edge_values(count_from):
    for i in range(len(EDGES)):
        for batch in (EDGES[i:], EDGES[:i + 1], [EDGES[i]] * 3, [v for v in EDGES if v is None or v.isascii()]):
            got_skipped, want_skipped = {"terms": 0}, {"terms": 0}
            got, want = _column_postings(batch, 3, got_skipped, count_from), _expected(batch, 3, want_skipped)
            _same_run(got, want)
            assert got[1][0] == want[1][0] and got_skipped == want_skipped


@WAYS
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.characters(max_codepoint=127), max_size=30),
                          st.text(alphabet=st.characters(codec="utf-8"), max_size=12)), min_size=1, max_size=8))
def test_the_batch_tokenizer_pass_equals_a_value_at_a_time(count_from, values):
    """Any ASCII (control bytes, punctuation, digits, both cases) and other text, mixed with absent values: the
    bytes pass, its per-value mixing, and ``tokenize_many``'s ASCII path give what the regex gives."""
    texts = [value or "" for value in values]
    assert tokenize_many(texts) == [tokenize(text) for text in texts]
    got_skipped, want_skipped = {"terms": 0}, {"terms": 0}
    got, want = _column_postings(values, 5, got_skipped, count_from), _expected(values, 5, want_skipped)
    _same_run(got, want)
    assert got[1][0] == want[1][0] and got_skipped == want_skipped


# Characters whose lowercasing depends on their neighbours or changes the word's bytes (final sigma, a dotted
# capital I, the Kelvin sign), non-ASCII separators (em dash, no-break space, a combining mark) and word
# characters, mixed with ASCII word and non-word characters.
_TRICKY = "ΣΑσς İK\u212a—\u00a0\u0307é漢_aZ09 .'-\t"


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
                 st.text(alphabet=st.sampled_from(_TRICKY), max_size=40),
                 st.text(alphabet=st.characters(blacklist_categories=[]), max_size=20)))
def test_utf8_words_is_tokenize_as_utf8_bytes(text):
    """Any text (lone surrogates too, which cannot be UTF-8): the translation pass with the regex for pieces
    holding non-ASCII characters gives the regex's words of the whole text (a NUL is the callers' separator)."""
    text = text.replace("\x00", "")
    assert utf8_words(text) == [word.encode("utf-8", "surrogatepass") for word in tokenize(text)]


@WAYS
def test_the_batch_tokenizer_pass_beyond_sixteen_bit_terms_and_with_long_words_only(count_from):
    """A batch of more distinct terms than a 16-bit sort key holds takes the general grouping, and a batch whose
    only words are too long to be keys gives no postings: both equal one value at a time."""
    many = [" ".join(f"w{i * 7 + j}" for j in range(7)) + (" shared" if i % 3 else "") for i in range(10_000)]
    for batch in (many, ["x" * 300, None, "y" * 400 + " " + "z" * 300]):
        got_skipped, want_skipped = {"terms": 0}, {"terms": 0}
        got, want = _column_postings(batch, 11, got_skipped, count_from), _expected(batch, 11, want_skipped)
        _same_run(got, want)
        assert got[1][0] == want[1][0] and got_skipped == want_skipped
    assert len(column_postings(many, 0, {"terms": 0})[1][0]) > 1 << 16


def _everything(store: Store, index: str, vocabulary: set[str]) -> dict:
    """Every live document's source and column values and every term's postings, keyed by _id."""
    with store.reader(index) as r:
        ids = {int(row): r.id_of(int(row)) for row in r.live_rows()}
        out: dict = {doc_id: {"source": r.get(doc_id)} for doc_id in ids.values()}
        for path, spec in r.mapping.fields.items():
            column = r.column(path)
            for row, doc_id in ids.items():
                value = column.values[row].item() if column.present[row] else None
                if column_kind(spec) == KIND_ORD and value is not None:
                    value = r.field_dictionary(path).terms[value]
                out[doc_id][path] = value
        for path in r.text_fields():
            for word in sorted(vocabulary):
                rows, tfs = r.postings(path, word)
                for row, tf in zip(rows.tolist(), tfs.tolist()):
                    if r.live[row]:
                        out[ids[row]].setdefault(("postings", path), {})[word] = tf
        return out


def test_a_bulk_of_real_text_equals_single_puts(tmp_path, monkeypatch):
    """Foam notes and .py files (CJK, long words) written in bulks through the column-wise path, sealed and
    merged (a small tail), against the same documents put one at a time."""
    batched = []
    monkeypatch.setattr(write, "column_postings", lambda *args: batched.append(args) or column_postings(*args))
    texts = _texts()
    docs = [{"title": Path(path).name.replace("_", " ").upper(), "body": text, "path": path, "size": len(text)}
            for path, text in texts]
    vocabulary = {word for doc in docs for word in tokenize(doc["title"] + " " + doc["body"])}
    with Store(tmp_path / "bulk", tail_rows=32) as bulk, Store(tmp_path / "single", tail_rows=32) as single:
        for store in (bulk, single):
            store.create_index("t", MAPPING)
        for lo in range(0, len(docs), 90):
            items = bulk.bulk([BulkOp("index", "t", f"d{i}", docs[i]) for i in range(lo, min(len(docs), lo + 90))])
            assert all(item.error is None for item in items)
        for i, doc in enumerate(docs):
            single.put("t", doc, f"d{i}")
        assert len(batched) == 2 * -(-len(docs) // 90)  # every bulk took the column-wise path, both text fields
        assert _everything(bulk, "t", vocabulary) == _everything(single, "t", vocabulary)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
