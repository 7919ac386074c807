"""sharedterm's compiled candidate search (``xerj_detectors._meetings``) against numpy's dense blocks.

Both must name the same scored files in the same order and count the same pairs meeting from either end, on the
edge cases of the per-file limit (more than 16 files meeting a file on more than two terms, fewer, ties broken
by file order), on generated corpora of every size from none, on the Foam vault's real words, and through the
whole detector with the fallback switched in. A malformed array is an error, never a read out of bounds.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.autoindex.detect import Corpus
from xerj_detectors import sharedterm

pytestmark = pytest.mark.skipif(sharedterm._compiled_meetings is None,
                                reason="the compiled candidate search was not built")


@pytest.fixture
def checked(monkeypatch):
    """Makes every candidate search run both ways and check they agree; lists how many pairs each one scored."""
    original = sharedterm._meetings
    listed: list[int] = []

    def both(*arrays):
        monkeypatch.setattr(sharedterm, "COMPILED", True)
        fast = original(*arrays)
        dense = sharedterm._dense_meetings(*arrays)
        assert fast[0].dtype == dense[0].dtype == np.int64 and fast[1].dtype == dense[1].dtype == np.int64
        assert fast[0].tolist() == dense[0].tolist()
        assert fast[1].tolist() == dense[1].tolist()
        assert fast[2] == dense[2]
        listed.append(len(dense[0]))
        return fast

    monkeypatch.setattr(sharedterm, "_meetings", both)
    return listed


def units_of(files: list[set[str]]) -> list[tuple[str, bytes]]:
    return [(f"f{i:05d}.md", "\0".join(sorted(words)).encode()) for i, words in enumerate(files)]


def combined(files: list[set[str]]):
    state = sharedterm.SharedtermDetector().combine(units_of(files), Corpus({}))
    return state.data, state.counters


def zipf_corpus(rng: random.Random, files: int, vocabulary: int, words: int) -> list[set[str]]:
    weights = [1 / (rank + 1) ** 1.1 for rank in range(vocabulary)]
    names = [f"term{rank:05d}x" for rank in range(vocabulary)]
    return [set(rng.choices(names, weights, k=rng.randint(1, words))) for _ in range(files)]


@pytest.mark.parametrize("files", [0, 1, 2, 11, 40, 300, 1200])
def test_both_ways_agree_on_generated_corpora(checked, monkeypatch, files):
    corpus = zipf_corpus(random.Random(files), files, vocabulary=3000, words=120)
    data, counters = combined(corpus)
    assert len(checked) == 1
    if files >= 300:
        assert checked[0] > 0 and data and counters["edges_capped"] > 0  # the search had work to do
    monkeypatch.setattr(sharedterm, "COMPILED", False)  # the shared terms and scores too, numpy's way
    assert combined(corpus) == (data, counters)


def test_more_than_the_per_file_limit_meet_a_file(checked):
    # 60 of 600 files share four rare terms (each file meets 59 others on more than two terms: the first 16 in
    # file order are scored), 30 more share two (met on exactly two: listed only when fewer than 16 meet on more)
    files = [{f"filler{i}a", f"filler{i}b"} for i in range(600)]
    for i in range(0, 600, 10):
        files[i] |= {"alphaword", "betaword", "gammaword", "deltaword"}
    for i in range(5, 600, 20):
        files[i] |= {"epsilonword", "zetaword"}
    data, counters = combined(files)
    assert checked == [60 * 16 + 30 * 16]
    assert counters["edges_capped"] + sum(map(len, data.values())) == 60 * 59 // 2 + 30 * 29 // 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from([f"word{k:02d}" for k in range(40)]), max_size=12), max_size=60))
def test_both_ways_agree_on_any_small_corpus(files):
    original = sharedterm._meetings
    seen = []

    def both(*arrays):
        fast, dense = original(*arrays), sharedterm._dense_meetings(*arrays)
        assert [fast[0].tolist(), fast[1].tolist(), fast[2]] == [dense[0].tolist(), dense[1].tolist(), dense[2]]
        seen.append(True)
        return fast

    sharedterm._meetings = both
    try:
        fast = combined(files)
        sharedterm.COMPILED = False
        assert combined(files) == fast
    finally:
        sharedterm._meetings = original
        sharedterm.COMPILED = True
    assert seen


def test_the_detector_links_the_same_either_way(monkeypatch):
    files = zipf_corpus(random.Random(7), 800, vocabulary=5000, words=150)
    monkeypatch.setattr(sharedterm, "COMPILED", True)
    fast = combined(files)
    monkeypatch.setattr(sharedterm, "COMPILED", False)
    assert combined(files) == fast and fast[0]


def arrays(total: int = 3, width: int = 2) -> list[np.ndarray]:
    """Well-formed inputs: every file holds both terms, in its signature."""
    holders = np.tile(np.arange(total, dtype=np.int32), width)
    starts = np.arange(width + 1, dtype=np.int64) * total
    terms = np.tile(np.arange(width, dtype=np.int32), total)
    term_starts = np.arange(total + 1, dtype=np.int64) * width
    return [holders, starts, holders.copy(), starts.copy(), terms, term_starts, term_starts[1:].copy()]


def test_a_malformed_array_is_an_error():
    meetings = sharedterm._compiled_meetings
    good = arrays()
    scorers, scored, meeting = meetings(*good, 2, 16, 32)
    assert np.frombuffer(scorers, np.int64).tolist() == [0, 0, 1, 1, 2, 2]
    assert np.frombuffer(scored, np.int64).tolist() == [1, 2, 0, 2, 0, 1] and meeting == 3
    for at, bad in [(0, 7), (4, 5), (4, -1), (2, 3)]:  # a file, a term, a negative term, a file of a signature
        given_ = [a.copy() for a in good]
        given_[at][0] = bad
        with pytest.raises(ValueError):
            meetings(*given_, 2, 16, 32)
    given_ = [a.copy() for a in good]
    given_[1][-1] = 99  # past the holders' end
    with pytest.raises(ValueError):
        meetings(*given_, 2, 16, 32)
    with pytest.raises(ValueError):
        meetings(*good, 2, 16, 1)  # a signature longer than the signature_terms it claims
    with pytest.raises(TypeError):
        meetings(good[0].astype(np.int64), *good[1:], 2, 16, 32)
    with pytest.raises(ValueError):
        meetings(*good[:6], good[6][:1], 2, 16, 32)  # sig_ends of one file for three


def test_the_shared_terms_of_runs_of_any_lengths():
    common = sharedterm._compiled_common
    rng = random.Random(3)
    runs = [sorted(rng.sample(range(4000), size)) for size in (0, 1, 3, 40, 50, 900, 3000)]
    terms = np.array([t for run in runs for t in run], np.int32)
    term_starts = np.cumsum([0] + [len(run) for run in runs]).astype(np.int64)
    families = np.arange(4000, dtype=np.int64) // 2  # terms 2k and 2k + 1 are one family
    total = len(runs)
    pairs = np.array([a * total + b for a in range(total) for b in range(total) if a < b], np.int64)
    shared, ends, kinds = common(pairs, total, terms, term_starts, families, 2000)
    shared, ends, kinds = (np.frombuffer(shared, np.int32), np.frombuffer(ends, np.int64),
                           np.frombuffer(kinds, np.int64))
    start = 0
    for k, number in enumerate(pairs.tolist()):
        a, b = divmod(number, total)
        want = sorted(set(runs[a]) & set(runs[b]))  # 3 against 900 and 3000: searched, not walked
        assert shared[start:ends[k]].tolist() == want
        assert kinds[k] == len({t // 2 for t in want})
        start = ends[k]
    assert sum(kinds) > 0 and len(shared) > 100
    shared, ends, kinds = common(pairs, total, terms, term_starts, np.empty(0, np.int64), 1)
    assert np.frombuffer(kinds, np.int64).tolist() == [0] * len(pairs)  # no families given: none counted


def test_a_malformed_pair_or_term_is_an_error():
    common = sharedterm._compiled_common
    terms, term_starts = np.array([0, 1, 1, 2], np.int32), np.array([0, 2, 4], np.int64)
    families = np.array([0, 0, 1], np.int64)
    shared, ends, kinds = common(np.array([1], np.int64), 2, terms, term_starts, families, 2)
    assert np.frombuffer(shared, np.int32).tolist() == [1] and np.frombuffer(kinds, np.int64).tolist() == [1]
    for pairs, starts, fams, count in [
            ([4], term_starts, families, 2),  # a first file past the last
            ([-1], term_starts, families, 2),
            ([1], np.array([0, 2, 9], np.int64), families, 2),  # past the terms' end
            ([1], term_starts, np.array([0, 0], np.int64), 2),  # term 2 has no family
            ([1], term_starts, np.array([0, 0, 5], np.int64), 2)]:  # a family past family_count
        with pytest.raises(ValueError):
            common(np.array(pairs, np.int64), 2, terms, starts, fams, count)
    with pytest.raises(TypeError):
        common(np.array([1], np.int32), 2, terms, term_starts, families, 2)
