"""The compiled term ranking (``xerj_core.termrank``) against a dict and a sort in Python.

Ranking is how a write groups its postings (``tailblock._ranked``, ``tailblock.group_joined``,
``plan.column_postings``): the distinct terms in bytes order and each term's place among them. The compiled loop
must give exactly what Python's own order gives, on the orders' edge cases (prefixes, bytes of 0x80 and up, the
empty term, NULs inside a list's terms), on hash collisions (many terms), on the words of real files, and where
the writes use it, with the fallback switched in for comparison.
"""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core import termrank
from xerj_core.store import plan, tailblock
from xerj_core.text import ascii_words

pytestmark = pytest.mark.skipif(not termrank.available(), reason="the compiled term ranking was not built")


def python_rank(terms: list[bytes]) -> tuple[list[bytes], list[int]]:
    names = sorted(set(terms))
    return names, [names.index(term) for term in terms] if len(names) < 50 else \
        list(map(dict(zip(names, range(len(names)))).__getitem__, terms))


def check(terms: list[bytes]) -> None:
    names, ranks = termrank.rank(terms)
    want_names, want_ranks = python_rank(terms)
    assert names == want_names
    assert ranks.dtype == np.int32 and ranks.tolist() == want_ranks
    # each name is one of the caller's objects, not a copy
    given = set(map(id, terms))
    assert all(id(name) in given for name in names)


CASES = {
    "nothing": [],
    "one": [b"word"],
    "repeats": [b"b", b"a", b"b", b"b", b"a"],
    "a prefix sorts before its extensions": [b"ab", b"abc", b"a", b"abd", b"ab", b"b"],
    "bytes compare unsigned": [b"\x80", b"\x7f", b"\xff", b"\x00", b"z", "é".encode(), "e".encode()],
    "the empty term": [b"", b"a", b"", b"\x00"],
    "NULs inside terms": [b"a\x00b", b"a", b"a\x00", b"a\x00a", b"\x00\x00"],
    "long terms": [b"x" * 300, b"x" * 299 + b"y", b"x" * 300, b"x" * 301, b"x" * 299],
    "CJK and accents": ["検索".encode(), "検".encode(), "索引".encode(), "naïve".encode(), "naive".encode()],
}


@pytest.mark.parametrize("case", CASES)
def test_rank_orders_as_python_does(case):
    check(list(CASES[case]))


def test_rank_on_many_terms_and_their_collisions():
    rng = random.Random(5)
    alphabet = b"abcdefghij\x00\x80\xff"
    terms = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 7))) for _ in range(60_000)]
    check(terms)
    check(terms[:1] * 1000 + terms[1:2])


def test_rank_joined_is_rank_of_the_split():
    for joined in (b"", b"\x00", b"a", b"a\x00", b"\x00a", b"a\x00\x00b", b"b\x00a\x00b\x00\xff\x00a",
                   "検索\x00索引\x00検索".encode()):
        names, ranks = termrank.rank_joined(joined)
        want_names, want_ranks = python_rank(joined.split(b"\x00"))
        assert names == want_names and ranks.tolist() == want_ranks, joined


def test_rank_joined_packed_spells_the_names_end_to_end():
    """The packed names are ``rank_joined``'s names end to end with their bounds, compiled or not, and the ranks
    are the same."""
    rng = random.Random(8)
    many = b"\x00".join(b"%d" % rng.randrange(10**9) for _ in range(150_000))  # past the table's first slots
    for joined in (b"", b"\x00", b"a\x00\x00b", b"b\x00a\x00b\x00\xff\x00a", "検索\x00索引\x00検索".encode(), many):
        names, ranks = termrank.rank_joined(joined)
        for enabled in (True, False):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(termrank, "ENABLED", enabled)
                spelled, bounds, packed_ranks = termrank.rank_joined_packed(joined)
            assert [spelled[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())] == names
            assert len(spelled) == bounds[-1] and packed_ranks.tolist() == ranks.tolist()


def test_rank_grows_its_table_past_its_first_slots():
    """The table starts small and doubles as distinct terms come: far more distinct terms than its first slots
    are ranked as Python ranks them, from a list or a joined buffer."""
    rng = random.Random(6)
    terms = [b"%x" % rng.randrange(1 << 40) for _ in range(300_000)]
    terms += terms[:1000]
    check(terms)
    names, ranks = termrank.rank_joined(b"\x00".join(terms))
    assert (names, ranks.tolist()) == python_rank(terms)


def real_words(limit: int = 400) -> list[bytes]:
    """The words of the first ``limit`` .py files of this interpreter's standard library and site-packages."""
    words: list[bytes] = []
    for root in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]):
        for path in sorted(Path(root).rglob("*.py"))[:limit // 2]:
            text = path.read_bytes().decode("utf-8", "replace")
            words += ascii_words(text.encode("ascii", "ignore").decode())
    return words


def test_rank_on_the_words_of_real_files():
    words = real_words()
    assert len(words) > 10_000
    check(words)
    names, ranks = termrank.rank_joined(b"\x00".join(words))
    assert (names, ranks.tolist()) == python_rank(words)


def test_rank_refuses_what_is_not_a_list_of_bytes():
    with pytest.raises(TypeError):
        termrank._compiled((b"a", b"b"))
    with pytest.raises(TypeError):
        termrank._compiled([b"a", "b"])
    with pytest.raises(TypeError):
        termrank._compiled([b"a", bytearray(b"b")])
    with pytest.raises(TypeError):
        termrank._compiled_joined("a\x00b")


@pytest.fixture(params=[True, False], ids=["compiled", "python"])
def ranking(request, monkeypatch):
    monkeypatch.setattr(termrank, "ENABLED", request.param)
    return request.param


def test_the_writes_group_alike_with_either_ranking(ranking, monkeypatch):
    """The two places a write ranks terms give the same runs whichever ranking answers."""
    words = real_words(60)
    rng = random.Random(11)
    texts = [" ".join(w.decode() for w in rng.sample(words, 40)) for _ in range(300)]
    texts[7] = "ünïcode wörds " + texts[7]  # a batch with a non-ASCII value tokenizes value by value
    texts[9] = "x" * 600 + " short"  # a word too long to be a key
    skipped = {"terms": 0}
    got = plan.column_postings(texts, 1000, skipped)
    joined = b"\x00".join(words[:5000])
    rows = np.repeat(np.arange(50), 100)
    grouped = tailblock.group_joined(joined, rows, np.ones(5000, np.float32))
    monkeypatch.setattr(termrank, "ENABLED", not ranking)
    again = {"terms": 0}
    want = plan.column_postings(texts, 1000, again)
    assert skipped == again and skipped["terms"] == 1
    assert list(got[0]) == list(want[0]) and got[1][0] == want[1][0]
    for mine, theirs in zip(got[1][1:], want[1][1:]):
        assert np.array_equal(mine, theirs)
    want_grouped = tailblock.group([(joined.split(b"\x00"), None, rows, np.ones(5000, np.float32))])
    assert grouped[0] == want_grouped[0]
    for mine, theirs in zip(grouped[1:], want_grouped[1:]):
        assert np.array_equal(mine, theirs)
    assert tailblock.group_joined(b"", np.empty(0, np.int64), np.empty(0, np.float32))[0] == []


@pytest.mark.parametrize("distinct", [300, 200_000], ids=["16-bit keys", "wider keys"])
def test_group_lists_each_terms_rows_in_order_whichever_sort_orders_the_keys(distinct):
    """Grouping sorts (term, row) keys stably: as 16-bit keys while they fit, else wider; either way each term's
    postings keep their rows' order, as a plain-Python grouping lists them."""
    rng = random.Random(distinct)
    terms = [f"t{rng.randrange(distinct):06d}".encode() for _ in range(200_000)]
    assert (len(set(terms)) > 1 << 16) == (distinct > 1 << 16)
    rows = np.arange(len(terms), dtype=np.int64) // 3
    tfs = np.arange(len(terms), dtype=np.float32)
    names, counts, got_rows, got_tfs = tailblock.group_joined(b"\x00".join(terms), rows, tfs)
    want: dict[bytes, list[int]] = {}
    for at, term in enumerate(terms):
        want.setdefault(term, []).append(at)
    assert names == sorted(want)
    assert counts.tolist() == [len(want[name]) for name in names]
    places = [at for name in names for at in want[name]]
    assert got_rows.tolist() == (np.array(places) // 3).tolist() and got_tfs.tolist() == places


def test_distinct_joined_keeps_each_term_of_its_lengths_once_in_order():
    def python(joined: bytes, shortest: int, longest: int) -> bytes:
        return b"\x00".join(dict.fromkeys(t for t in joined.split(b"\x00") if shortest <= len(t) <= longest))

    words = real_words(40)
    cases = [b"", b"\x00", b"abc", b"abc\x00abc", b"ab\x00abc\x00abcd\x00abc\x00\x00ab", "検索\x00検索\x00索".encode(),
             b"\x00".join(words)]
    for joined in cases:
        for shortest, longest in ((0, 0), (0, 10), (1, 2), (3, 3), (3, 160), (5, 1000)):
            assert termrank._compiled_distinct(joined, shortest, longest) == python(joined, shortest, longest)
    with pytest.raises(TypeError):
        termrank._compiled_distinct("abc", 1, 3)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400), st.integers(1, 5), st.integers(1, 3_000), st.integers(0, 2**32 - 1), st.booleans())
def test_the_compiled_grouping_is_numpys_sort(names, parts, n, seed, in_row_order):
    """Postings grouped by (part, term) with one counting sort in C: the groups, their order, each group's
    postings in their given order and the bounds are those of the stable numpy sort, over one part or several,
    whether the postings come in row order (a seal's runs) or not (a put's, term by term)."""
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.choice(np.arange(0, 5_000), parts, replace=False)).astype(np.int64)
    starts[0] = 0
    ids = rng.integers(0, names, n).astype(np.int32)
    rows = rng.integers(0, 6_000, n).astype(np.int32)
    if in_row_order:
        rows.sort()
    tfs = rng.random(n).astype(np.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(termrank, "ENABLED", True)  # whatever XERJ_TERMRANK_KERNEL says
        found = termrank.group(ids, rows, tfs, starts, names)
    want = tailblock._sorted_groups(ids, rows, tfs, starts, names)
    keys, got_rows, got_tfs, bounds = found
    part, ranked = np.divmod(keys, names)
    assert part.tolist() == want[0].tolist() and ranked.tolist() == want[1].tolist()
    assert got_rows.tolist() == want[2].tolist() and got_tfs.tolist() == want[3].tolist()
    assert bounds.tolist() == want[4].tolist()
    got_rows[:1] = 7  # writable, as numpy's arrays are


def test_the_compiled_grouping_leaves_what_its_keys_cannot_hold_to_numpy(monkeypatch):
    monkeypatch.setattr(termrank, "ENABLED", True)
    rows, tfs = np.array([5, 9], np.int32), np.ones(2, np.float32)
    starts = np.array([3, 8], np.int64)
    assert termrank.group(np.array([0, 1], np.int32), rows, tfs, starts, 2) is not None
    assert termrank.group(np.array([0, 2], np.int32), rows, tfs, starts, 2) is None  # a rank past names
    assert termrank.group(np.array([-1, 0], np.int32), rows, tfs, starts, 2) is None
    assert termrank.group(np.array([0, 1], np.int32), np.array([1, 9], np.int32), tfs, starts, 2) is None
    with pytest.raises(ValueError):
        termrank.group(np.array([0], np.int32), rows, tfs, starts, 2)


def test_the_compiled_grouping_holds_its_answer_and_little_more(monkeypatch):
    """The grouping of a merge's millions of postings allocates its answer at its final size (the groups' keys
    and bounds per group, not per posting) and, with one part, no key per posting: about 8 bytes a posting
    (its rows and frequencies in group order), where it once held 32."""
    import tracemalloc

    monkeypatch.setattr(termrank, "ENABLED", True)
    rng = np.random.default_rng(2)
    n, names = 1_000_000, 1_000
    ids = rng.integers(0, names, n).astype(np.int32)
    rows, tfs = np.arange(n, dtype=np.int32), np.ones(n, np.float32)
    for starts, most in ((np.zeros(1, np.int64), 9.5 * n), (np.array([0, n // 2], np.int64), 13.5 * n)):
        tracemalloc.start()
        try:
            began = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            keys, got_rows, _tfs, bounds = termrank.group(ids, rows, tfs, starts, names)
            peak = tracemalloc.get_traced_memory()[1] - began
        finally:
            tracemalloc.stop()
        assert len(keys) == len(bounds) - 1 == len(starts) * names and len(got_rows) == n
        assert peak < most


def test_the_compiled_grouping_leaves_keys_past_int32_to_numpy(monkeypatch):
    monkeypatch.setattr(termrank, "ENABLED", True)
    rows, tfs = np.array([5, 9], np.int32), np.ones(2, np.float32)
    starts = np.array([0, 8], np.int64)
    assert termrank.group(np.array([0, 1], np.int32), rows, tfs, starts, 2**30 - 1) is not None
    assert termrank.group(np.array([0, 1], np.int32), rows, tfs, starts, 2**30 + 1) is None  # 2 parts past 2**31


def test_the_compiled_grouping_groups_rows_alone_without_frequencies(monkeypatch):
    """``tfs`` None: the rows grouped as with frequencies, and no frequencies made (a caller grouping files by
    term, sharedterm's inverted index)."""
    monkeypatch.setattr(termrank, "ENABLED", True)
    rng = np.random.default_rng(3)
    ids, rows = rng.integers(0, 50, 5_000).astype(np.int32), np.sort(rng.integers(0, 900, 5_000)).astype(np.int32)
    for starts in (np.zeros(1, np.int64), np.array([0, 300, 600], np.int64)):
        keys, got_rows, tfs, bounds = termrank.group(ids, rows, None, starts, 50)
        want = termrank.group(ids, rows, np.ones(len(ids), np.float32), starts, 50)
        assert tfs is None and keys.tolist() == want[0].tolist() and got_rows.tolist() == want[1].tolist()
        assert bounds.tolist() == want[3].tolist()
    with pytest.raises(ValueError):
        termrank.group(ids, rows, np.ones(3, np.float32), np.zeros(1, np.int64), 50)
