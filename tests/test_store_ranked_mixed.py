"""A merge's term ranking when some terms are long (``tailblock._ranked``): short terms are ranked by integer
sorts, long ones by a dict, and the two merged; every distinct term and every posting's rank must be what one
plain sort of all the terms gives, and the merge's groups and postings those of the plain path."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from xerj_core.store import tailblock

_term = st.one_of(st.binary(min_size=1, max_size=12), st.binary(min_size=40, max_size=90)).filter(
    lambda t: b"\x00" not in t)


def _plain(runs):
    """The ranking by one sort of every term (the reference)."""
    every = [t for run in runs for t in (run[0].tolist() if isinstance(run[0], np.ndarray) else run[0])]
    names = sorted(set(every))
    number = {t: i for i, t in enumerate(names)}
    ranks = np.array([number[t] for t in every], np.int64)
    counts = [np.ones(len(run[0]), np.int64) if run[1] is None else run[1] for run in runs]
    return names, ranks.repeat(np.concatenate(counts)) if counts else ranks


def _run(terms, fixed, with_counts, rng):
    terms = sorted(set(terms))
    counts = rng.integers(1, 4, len(terms)) if with_counts else None
    n = int(counts.sum()) if with_counts else len(terms)
    rows = np.arange(n, dtype=np.int32)
    held = np.array(terms, dtype=bytes) if fixed and terms and max(map(len, terms)) <= tailblock.SHORT_TERM \
        else terms
    return (held, counts, rows, np.ones(n, np.float32))


@given(st.lists(st.tuples(st.lists(_term, max_size=40), st.booleans()), min_size=1, max_size=5),
       st.booleans(), st.integers(0, 2**32 - 1))
@settings(max_examples=150, deadline=None)
def test_long_terms_among_short_rank_as_one_sort_does(parts, with_counts, seed):
    rng = np.random.default_rng(seed)
    runs = [_run(terms, fixed, with_counts, rng) for terms, fixed in parts]
    want_names, want_ranks = _plain(runs)
    names, ranks = tailblock._ranked(runs)
    names = names.tolist() if isinstance(names, np.ndarray) else names
    assert names == want_names
    assert ranks.dtype == np.int32 and ranks.tolist() == want_ranks.tolist()


def test_a_long_term_takes_the_mixed_path_and_groups_as_the_plain_path(monkeypatch):
    # a merge of a stored short run (a fixed-width array), a fresh run with long words, and one without
    rng = np.random.default_rng(3)
    long_a, long_b = b"z" * 60 + b"a", b"b" * 49
    runs = [_run([b"alpha", b"beta", b"zz"], True, True, rng),
            _run([b"beta", long_a, b"gamma", long_b, b"a"], False, True, rng),
            _run([b"zz", long_b, b"c" * 48], False, False, rng)]
    calls = []
    mixed = tailblock._ranked_mixed
    monkeypatch.setattr(tailblock, "_ranked_mixed", lambda *a: calls.append(1) or mixed(*a))
    starts = np.array([0], np.int64)
    got = tailblock.grouped([tuple(r) for r in runs], starts)
    assert calls, "the long terms did not take the mixed ranking"
    names, ranks = _plain(runs)
    monkeypatch.setattr(tailblock, "_ranked", lambda runs: (names, ranks.astype(np.int32)))
    want = tailblock.grouped([tuple(r) for r in runs], starts)
    assert list(got[1]) == list(want[1]) and long_a in got[1] and long_b in got[1]
    for a, b in zip(got[:1] + got[2:], want[:1] + want[2:]):
        assert np.array_equal(a, b)
