"""Packed postings: a segment's buckets and large terms give back every term's postings, by lookup and by merge."""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core.store import postpack


def _segment(rng: random.Random, n_terms: int) -> tuple[list[bytes], dict[bytes, tuple[list[int], list[float]]]]:
    words = sorted({("".join(rng.choice("abcdéz0_") for _ in range(rng.randint(1, 12)))).encode()
                    for _ in range(n_terms)})
    postings = {}
    for word in words:
        count = rng.choice([1, 1, 2, 3, postpack.OWN_KEY_POSTINGS, postpack.OWN_KEY_POSTINGS + 1, 200])
        rows = sorted(rng.sample(range(5_000, 9_000), count))
        postings[word] = (rows, [float(rng.randint(1, 9)) for _ in rows])
    return words, postings


def _packed(words, postings):
    bounds = np.concatenate(([0], np.cumsum([len(postings[w][0]) for w in words])))
    rows = np.concatenate([postings[w][0] for w in words]).astype(np.int32)
    tfs = np.concatenate([postings[w][1] for w in words]).astype(np.float32)
    return postpack.pack(words, rows, tfs, bounds)


def test_pack_find_and_unpack_give_back_every_posting():
    rng = random.Random(3)
    for n_terms in (1, 7, 300, 2_000):
        words, postings = _segment(rng, n_terms)
        buckets, suffixes, values = _packed(words, postings)
        assert suffixes == sorted(suffixes) and buckets >= 1
        stored = dict(zip(suffixes, values))
        big = [w for w in words if len(postings[w][0]) > postpack.OWN_KEY_POSTINGS]
        assert set(big) == {s for s in suffixes if s[:1] != b"\x00"}
        # most buckets stay inside an LMDB leaf page
        sizes = [len(v) for s, v in stored.items() if s[:1] == b"\x00"]
        assert np.median(sizes) < 2_000
        for word in words:
            found = postpack.find(stored[postpack.bucket_suffix(postpack.bucket_of(word, buckets))], word)
            if word in big:
                assert found is postpack.OWN
                continue
            assert found[0].tolist() == postings[word][0] and found[1].tolist() == postings[word][1]
        for absent in (b"zzzzzzzzzzzzzzz", words[0] + b"x", words[-1][:-1] or b"q"):
            if absent not in postings:
                blob = stored.get(postpack.bucket_suffix(postpack.bucket_of(absent, buckets)))
                assert blob is None or postpack.find(blob, absent) is None
        terms, counts, rows, tfs = postpack.unpack(suffixes, values)
        ends = np.cumsum(counts)
        got = {t: (rows[e - c:e].tolist(), tfs[e - c:e].tolist()) for t, c, e in zip(terms, counts, ends)}
        assert got == postings


def test_large_terms_are_packed_alike_a_run_at_a_time(monkeypatch):
    """The terms that keep keys of their own are gathered and encoded a bounded run of postings at a time (a
    term past the bound alone): the same keys and values as all at once."""
    from xerj_core.store import columns

    rng = random.Random(11)
    words, postings = _segment(rng, 600)
    whole = _packed(words, postings)
    assert sum(len(postings[w][0]) > postpack.OWN_KEY_POSTINGS for w in words) > 50
    monkeypatch.setattr(columns, "ENCODE_POSTINGS_AT_ONCE", 70)  # runs of a few 33s; each 200 alone
    assert _packed(words, postings) == whole


def test_a_term_inside_another_is_not_found_by_its_bytes():
    words = [b"ab", b"abc", b"bc", b"c"]
    postings = {w: ([10 + i], [1.0]) for i, w in enumerate(words)}
    buckets, suffixes, values = _packed(words, postings)
    assert buckets == 1 and len(values) == 1
    for i, word in enumerate(words):
        assert postpack.find(values[0], word)[0].tolist() == [10 + i]
    for part in (b"a", b"b", b"abcb", b"cc", b""):
        assert postpack.find(values[0], part) is None


def test_segments_with_a_key_per_term_and_packed_ones_answer_alike(tmp_path):
    """A compaction writes a key per term (as every segment sealed before buckets has); later seals merge such
    segments into packed ones. Every term's postings match a brute force over the documents throughout."""
    from xerj_core.store import BulkOp, Store
    from xerj_core.text import tokenize

    rng = random.Random(11)
    words = [f"w{i}" for i in range(60)] + ["common"] * 20
    docs: dict[str, str] = {}

    def check(store, want_packed: bool | None) -> None:
        with store.reader("p") as r:
            packed = [bool(seg.buckets) for seg in r.segments]
            if want_packed is not None:
                assert packed and all(p == want_packed for p in packed)
            live = {r.id_of(int(row)) for row in r.live_rows()}
            assert live == set(docs)
            for term in set(words) | {"absent"}:
                rows, _tfs = r.postings("text", term)
                found = {r.id_of(int(row)) for row in rows if r.live[row]}
                assert found == {d for d, text in docs.items() if term in tokenize(text)}, term

    with Store(tmp_path / "data", tail_rows=4) as store:
        store.create_index("p", {"properties": {"text": {"type": "text"}}})
        for batch in range(12):
            ops = []
            for _ in range(rng.randint(3, 9)):
                doc_id = f"d{rng.randint(0, 40)}"
                docs[doc_id] = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
                ops.append(BulkOp("index", "p", doc_id, {"text": docs[doc_id]}))
            store.bulk(ops)
        check(store, None)
        assert store.forcemerge("p")
        check(store, False)  # compacted: a key per term
        for batch in range(40):
            doc_id = f"n{batch}"
            docs[doc_id] = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
            store.bulk([BulkOp("index", "p", doc_id, {"text": docs[doc_id]})])
        with store.reader("p") as r:
            assert any(seg.buckets for seg in r.segments)
        check(store, None)


def _grouped_by_dicts(runs, starts):
    """``tailblock.grouped`` as a plain Python oracle: every (part, term)'s postings, in key order."""
    found: dict[tuple[int, bytes], list[tuple[int, float]]] = {}
    for terms, counts, rows, tfs in runs:
        per_posting = terms if counts is None else [t for t, c in zip(terms, counts.tolist()) for _ in range(c)]
        for term, row, tf in zip(per_posting, rows.tolist(), tfs.tolist()):
            part = int(np.searchsorted(starts, row, side="right")) - 1
            found.setdefault((part, term), []).append((row, tf))
    return sorted(found.items())


@pytest.mark.parametrize("first_as_array", [False, True])
def test_grouped_ranks_short_long_and_nul_terms_alike(first_as_array):
    # Runs that are all lists of bytes are ranked by a dict; once one run comes as a fixed-width numpy array
    # (a stored segment read back) the terms are ranked as such an array, which drops trailing NULs: long
    # terms, and lists holding a NUL beside it, must take their own ways and still group exactly.
    from xerj_core.store import tailblock

    rng = random.Random(5)
    for extra in ([], [b"x" * 200], [b"nul\x00"], [b"\x00"]):
        vocabulary = [f"t{i}".encode() for i in range(40)] + [b"t1\x01", "é".encode()] + extra
        runs, row = [], 0
        for _run in range(4):
            terms = sorted(rng.sample(vocabulary, 12))
            counts = np.array([rng.randint(1, 3) for _ in terms])
            rows = np.concatenate([np.sort(rng.sample(range(row, row + 50), c)) for c in counts.tolist()])
            tfs = rng.choices([1.0, 2.0, 3.0], k=len(rows))
            runs.append((terms, counts, rows, np.array(tfs, np.float32)))
            row += 50
        if first_as_array:  # as postpack.unpack gives one: short terms, no NUL
            terms, counts, rows, tfs = runs[0]
            keep = np.array([len(t) <= tailblock.SHORT_TERM and b"\x00" not in t for t in terms])
            at = np.repeat(keep, counts)
            runs[0] = (np.array([t for t, k in zip(terms, keep) if k], dtype=bytes), counts[keep], rows[at], tfs[at])
        starts = np.array([0, 70, 150], np.int64)
        expected = _grouped_by_dicts([(list(t) if isinstance(t, list) else t.tolist(), *rest) for t, *rest in runs],
                                     starts)
        part, names, rows, tfs, bounds = tailblock.grouped(list(runs), starts)
        names = names.tolist() if isinstance(names, np.ndarray) else names
        got = [((int(p), name), sorted(zip(rows[lo:hi].tolist(), tfs[lo:hi].tolist())))
               for p, name, lo, hi in zip(part.tolist(), names, bounds[:-1].tolist(), bounds[1:].tolist())]
        assert got == [(key, sorted(postings)) for key, postings in expected]


def test_fixed_width_terms_pack_and_unpack_as_bytes_terms_do():
    # The merge path carries short terms as one fixed-width numpy array: its crc32 buckets, packed bytes and
    # unpacked postings must be exactly those of a bytes object per term.
    import zlib

    rng = random.Random(11)
    terms = sorted({bytes(rng.randrange(1, 256) for _ in range(rng.randint(1, 20))) for _ in range(600)}
                   | {"é".encode(), b"a", b"ab", b"abc"})
    fixed = np.array(terms, dtype=bytes)
    matrix, lengths = postpack.term_bytes(fixed)
    assert lengths.tolist() == list(map(len, terms))
    assert postpack.crc32_many(matrix, lengths).tolist() == [zlib.crc32(t) for t in terms]
    for n_terms in (1, 7, 300, 2_000):
        words, postings = _segment(rng, n_terms)
        rows = np.array([r for w in words for r in postings[w][0]], np.int64)
        tfs = np.array([f for w in words for f in postings[w][1]], np.float32)
        bounds = np.concatenate(([0], np.cumsum([len(postings[w][0]) for w in words])))
        as_bytes = postpack.pack(words, rows, tfs, bounds)
        assert postpack.pack(np.array(words, dtype=bytes), rows, tfs, bounds) == as_bytes
        plain = postpack.unpack(as_bytes[1], as_bytes[2])
        short = postpack.unpack(as_bytes[1], as_bytes[2], short=48)
        assert isinstance(short[0], np.ndarray)
        assert short[0].tolist() == plain[0]
        assert all(np.array_equal(a, b) for a, b in zip(short[1:], plain[1:]))
        # a term too long for the width, or holding a NUL, keeps bytes objects
        for odd in (b"x" * 60, b"nul\x00in"):
            extra = postpack.pack([*words, odd], np.append(rows, 10**6), np.append(tfs, 1.0),
                                  np.append(bounds, bounds[-1] + 1))
            got = postpack.unpack(extra[1], extra[2], short=48)
            assert isinstance(got[0], list) and odd in got[0]


@given(st.lists(st.binary(min_size=1, max_size=48).filter(lambda t: b"\x00" not in t), min_size=1, max_size=300))
@settings(max_examples=300, deadline=None)
def test_unique_fixed_is_numpys_unique(terms):
    # a merge numbers its short terms by integer sorts over their bytes as big-endian words (one word up to
    # 8 bytes, a lexsort beyond): the distinct terms and every term's rank must be numpy's string unique's
    from xerj_core.store import tailblock

    fixed = np.array(terms, dtype=bytes)
    names, inverse = tailblock.unique_fixed(fixed)
    want_names, want_inverse = np.unique(fixed, return_inverse=True)
    assert names.dtype == want_names.dtype and names.tolist() == want_names.tolist()
    assert inverse.dtype == np.int32 and inverse.tolist() == want_inverse.reshape(-1).tolist()


def test_postings_encoded_a_bounded_run_at_a_time_are_the_blobs_of_one_scatter(monkeypatch):
    from xerj_core.store import columns

    rng = np.random.default_rng(5)
    # empty groups, groups of one, groups around the bound and one far past it
    counts = np.array([0, 1, 3, 0, 700, 64, 65, 63, 1, 5_000, 2, 0, 128, 129, 9, 0], np.int64)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    rows = rng.integers(0, 1 << 31, int(bounds[-1])).astype(np.int64)
    tfs = rng.integers(1, 50, int(bounds[-1])).astype(np.float32)
    whole = columns.encode_postings_many(rows, tfs, bounds)
    monkeypatch.setattr(columns, "ENCODE_POSTINGS_AT_ONCE", 64)
    runs = columns.encode_postings_many(rows, tfs, bounds)
    assert runs == whole and len(runs) == len(counts)
    got_counts, got_rows, got_tfs = columns.decode_postings_many(runs)
    assert got_counts.tolist() == counts.tolist()
    assert got_rows.tolist() == rows.tolist() and got_tfs.tolist() == tfs.tolist()
    assert columns.encode_postings_many(rows[:5_000], tfs[:5_000], np.array([0, 5_000])) == \
        [np.concatenate(([5_000], rows[:5_000], tfs[:5_000])).astype(np.uint32).tobytes()]


_PREFIX = b"p" * 47


@given(st.lists(st.lists(st.one_of(st.binary(min_size=1, max_size=6), st.binary(min_size=40, max_size=70),
                                   st.binary(max_size=24).map(_PREFIX.__add__)).filter(lambda t: b"\x00" not in t),
                         max_size=30), min_size=1, max_size=4),
       st.lists(st.booleans(), min_size=4, max_size=4))
@settings(max_examples=300, deadline=None)
def test_grouped_ranks_terms_past_the_fixed_width_exactly(vocabularies, as_arrays):
    # Terms longer than tailblock.SHORT_TERM are ranked by their first SHORT_TERM bytes, then in full among
    # the terms sharing that prefix (here many do: 47 p's and more): grouping must be the dict oracle's,
    # whichever runs come as fixed-width arrays (a stored segment read back), however wide
    from xerj_core.store import tailblock

    runs, row = [], 0
    for terms, as_array in zip(vocabularies, as_arrays):
        terms = sorted(set(terms))
        counts = np.array([1 + len(t) % 3 for t in terms], np.int64)
        rows = np.arange(row, row + int(counts.sum()), dtype=np.int64)
        row += len(rows)
        runs.append((np.array(terms, dtype=bytes) if as_array and terms else terms, counts, rows,
                     np.ones(len(rows), np.float32)))
    starts = np.array([0, row // 2], np.int64)
    expected = _grouped_by_dicts([(list(t) if isinstance(t, list) else t.tolist(), *rest) for t, *rest in runs],
                                 starts)
    part, names, rows, tfs, bounds = tailblock.grouped(list(runs), starts)
    names = names.tolist() if isinstance(names, np.ndarray) else names
    got = [((int(p), name), sorted(zip(rows[lo:hi].tolist(), tfs[lo:hi].tolist())))
           for p, name, lo, hi in zip(part.tolist(), names, bounds[:-1].tolist(), bounds[1:].tolist())]
    assert got == [(key, sorted(postings)) for key, postings in expected]


@given(st.lists(st.binary(max_size=40).map(_PREFIX[:20].__add__) | st.binary(min_size=1, max_size=12),
                min_size=1, max_size=300).map(lambda terms: [t.replace(b"\x00", b"z") for t in terms]))
@settings(max_examples=300, deadline=None)
def test_unique_fixed_sorts_runs_tied_on_their_first_words_as_numpy(terms):
    # unique_fixed sorts by the first 8-byte word, then only runs still tied by the next words: many terms
    # here share 20 bytes (two words and a half) and go on for up to 40 more, or stop among them
    from xerj_core.store import tailblock

    fixed = np.array(terms, dtype=bytes)
    names, inverse = tailblock.unique_fixed(fixed)
    want_names, want_inverse = np.unique(fixed, return_inverse=True)
    assert names.tolist() == want_names.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


def _both_layouts(monkeypatch, terms, rows, tfs, bounds):
    monkeypatch.setattr(postpack, "ENABLED", False)
    by_numpy = postpack.pack(terms, rows, tfs, bounds)
    monkeypatch.setattr(postpack, "ENABLED", True)
    return postpack.pack(terms, rows, tfs, bounds), by_numpy


needs_kernel = pytest.mark.skipif(not postpack._compiled, reason="built without a C compiler")


@needs_kernel
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=70), st.integers(0, 40)), min_size=1, max_size=400,
                unique_by=lambda pair: pair[0]),
       st.integers(0, 2**32 - 1), st.booleans())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_compiled_layout_is_numpys_byte_for_byte(monkeypatch, pairs, seed, fixed):
    # Terms of any bytes (NULs, non-UTF-8, long), counts on both sides of OWN_KEY_POSTINGS (and none), rows past
    # 2**31: the C loop's buckets, suffixes and values must be numpy's exactly, as list or fixed-width terms.
    pairs.sort()
    rng = np.random.default_rng(seed)
    terms = [term for term, _count in pairs]
    counts = np.array([count for _term, count in pairs], np.int64)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    rows = rng.integers(0, 2**33, int(bounds[-1])).astype(np.int64)
    tfs = rng.random(int(bounds[-1])).astype(np.float32)
    if fixed:
        if any(b"\x00" in term for term in terms):
            return  # a fixed-width array cannot hold a NUL (tailblock makes none of such terms)
        terms = np.array(terms, dtype=bytes)
    ours, theirs = _both_layouts(monkeypatch, terms, rows, tfs, bounds)
    assert ours == theirs


@needs_kernel
def test_the_compiled_layout_on_a_real_seal(monkeypatch):
    # The words of real files, a few thousand rows' postings: the layout a seal stores
    rng = random.Random(4)
    for n_terms in (1, 300, 5_000):
        words, postings = _segment(rng, n_terms)
        bounds = np.concatenate(([0], np.cumsum([len(postings[w][0]) for w in words])))
        rows = np.concatenate([postings[w][0] for w in words]).astype(np.int32)
        tfs = np.concatenate([postings[w][1] for w in words]).astype(np.float32)
        ours, theirs = _both_layouts(monkeypatch, words, rows, tfs, bounds)
        assert ours == theirs
        assert postpack.unpack(ours[1], ours[2])[0] == postpack.unpack(theirs[1], theirs[2])[0]
        # a seal's grouped rows are int32, read as they are; int64 ones lay out the same
        assert postpack.pack(words, rows.astype(np.int64), tfs, bounds) == ours
    with pytest.raises(TypeError, match="4- or 8-byte items"):
        postpack._compiled(words, 0, bounds, rows.astype(np.int16), tfs, postpack.OWN_KEY_POSTINGS, 1024)


@needs_kernel
def test_the_compiled_layout_refuses_what_it_cannot_lay_out():
    rows, tfs = np.zeros(3, np.int64), np.zeros(3, np.float32)
    with pytest.raises(ValueError):  # bounds past the postings
        postpack._compiled([b"a"], 0, np.array([0, 4], np.int64), rows, tfs, 32, 1024)
    with pytest.raises(ValueError):  # decreasing bounds
        postpack._compiled([b"a", b"b"], 0, np.array([0, 2, 1], np.int64), rows, tfs, 32, 1024)
    with pytest.raises(ValueError):  # a term too long for its u16 length
        postpack._compiled([b"a" * 70_000], 0, np.array([0, 1], np.int64), rows, tfs, 32, 1024)
    with pytest.raises(TypeError):
        postpack._compiled(["a"], 0, np.array([0, 1], np.int64), rows, tfs, 32, 1024)
    with pytest.raises(TypeError):
        postpack._compiled([b"a"], 0, np.array([0, 1], np.int32), rows, tfs, 32, 1024)
    with pytest.raises(ValueError):  # fixed-width terms of the wrong size
        postpack._compiled(np.array([b"ab"]), 3, np.array([0, 1], np.int64), rows, tfs, 32, 1024)


def _traced_peak(call):
    """``call()``'s answer and the most memory tracemalloc saw above what was allocated when it began."""
    import tracemalloc

    tracemalloc.start()
    try:
        began = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        found = call()
        return found, tracemalloc.get_traced_memory()[1] - began
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("at_once", [1, 7, 1 << 20])
def test_postings_decoded_a_bounded_run_at_a_time_are_those_of_one_gather(monkeypatch, at_once):
    from xerj_core.store import columns

    rng = np.random.default_rng(9)
    counts = np.array([1, 3, 700, 64, 65, 1, 5_000, 2, 128, 129, 9], np.int64)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    rows = rng.integers(0, 1 << 31, int(bounds[-1])).astype(np.int64)
    tfs = rng.integers(1, 50, int(bounds[-1])).astype(np.float32)
    blobs = columns.encode_postings_many(rows, tfs, bounds)
    monkeypatch.setattr(columns, "DECODE_POSTINGS_AT_ONCE", at_once)
    got_counts, got_rows, got_tfs = columns.decode_postings_many(blobs)
    assert got_counts.tolist() == counts.tolist()
    assert got_rows.tolist() == rows.tolist() and got_tfs.tolist() == tfs.tolist()
    assert [len(part) for part in columns.decode_postings_many([])] == [0, 0, 0]


def test_decoding_a_big_segments_postings_holds_little_beside_them(monkeypatch):
    """A merge of big segments decodes millions of postings of frequent terms: the positions it gathers by are
    made a bounded run at a time, so it holds little beyond the rows and frequencies it answers (12 bytes a
    posting; gathering every posting at once held about four times that)."""
    from xerj_core.store import columns

    n_terms, per_term = 400, 2_500
    rows = np.arange(n_terms * per_term, dtype=np.int64)
    bounds = np.arange(0, n_terms * per_term + 1, per_term, dtype=np.int64)
    blobs = columns.encode_postings_many(rows, np.ones(len(rows), np.float32), bounds)
    monkeypatch.setattr(columns, "DECODE_POSTINGS_AT_ONCE", 1 << 14)
    (_counts, got, _tfs), peak = _traced_peak(lambda: columns.decode_postings_many(blobs))
    assert got.tolist() == rows.tolist()
    assert peak < 1.3 * 12 * len(rows)


def test_unpacked_runs_are_the_unpacked_run_and_let_the_values_go(monkeypatch):
    """``unpack_runs`` gives the buckets' run and the own keys' run apart (a merge groups them as they are);
    joined they are ``unpack``'s one run, whatever run of postings the buckets are gathered by at a time. With
    ``consume`` the values read are let go once joined."""
    rng = random.Random(11)
    words, postings = _segment(rng, 3_000)
    _buckets, suffixes, values = _packed(words, postings)
    whole = postpack.unpack(suffixes, values)
    for at_once in (1, 50, 1 << 20):
        monkeypatch.setattr(postpack, "GATHER_CHUNK", at_once)
        given = list(values)
        runs = postpack.unpack_runs(suffixes, given, consume=True)
        assert not given and len(runs) == 2
        assert [list(part) for part in zip(*[np.concatenate([np.asarray(r[i], object if i == 0 else None)
                                                             for r in runs]) for i in range(4)])] == \
            [list(part) for part in zip(*[np.asarray(whole[i], object if i == 0 else None) for i in range(4)])]
        got = {}
        for terms, counts, rows, tfs in runs:
            ends = np.cumsum(counts)
            got.update({t: (rows[e - c:e].tolist(), tfs[e - c:e].tolist()) for t, c, e in zip(terms, counts, ends)})
        assert got == postings


def test_unpacking_a_big_segments_buckets_holds_little_beside_its_postings(monkeypatch):
    """Bucketed postings are gathered a bounded run at a time: unpacking holds the joined buckets and what it
    answers, not the int64 positions of every posting at once (24 bytes a posting more, three times over)."""
    rng = np.random.default_rng(4)
    n_terms = 30_000
    words = sorted({f"w{i:06d}".encode() for i in range(n_terms)})
    counts = np.full(n_terms, postpack.OWN_KEY_POSTINGS)  # the most a bucket holds of a term
    bounds = np.concatenate(([0], np.cumsum(counts)))
    rows = np.concatenate([np.sort(rng.choice(1 << 20, c, replace=False)) for c in counts]).astype(np.int32)
    _buckets, suffixes, values = postpack.pack(words, rows, np.ones(len(rows), np.float32), bounds)
    stored = sum(map(len, values))
    monkeypatch.setattr(postpack, "GATHER_CHUNK", 1 << 14)
    runs, peak = _traced_peak(lambda: postpack.unpack_runs(suffixes, values, consume=True))
    (terms, got_counts, got_rows, _tfs), = runs  # terms in bucket order
    assert dict(zip(terms, got_counts.tolist())) == dict(zip(words, counts.tolist()))
    assert np.sort(got_rows).tolist() == np.sort(rows).tolist()
    # the joined buckets, the rows (8 bytes) and frequencies (4) answered, the terms (a bytes object each, and a
    # few numbers each while they are found)
    assert peak < stored + 12 * len(rows) + 250 * n_terms


def test_runs_of_short_bucket_terms_and_long_own_terms_group_as_their_joined_run():
    """A segment whose buckets hold short terms (a fixed-width array) and whose terms of their own are long (bytes):
    the merge groups the two runs as they come, and gets what it gets from the one joined run."""
    from xerj_core.store import tailblock

    short = [b"s%03d" % i for i in range(200)]
    long = [b"L" * 60 + b"%03d" % i for i in range(20)]
    words = sorted(short + long)
    counts = [postpack.OWN_KEY_POSTINGS + 5 if w in long else 2 for w in words]
    bounds = np.concatenate(([0], np.cumsum(counts)))
    rows = np.concatenate([np.arange(c) * 7 + i for i, c in enumerate(counts)]).astype(np.int32)
    _buckets, suffixes, values = postpack.pack(words, rows, np.ones(len(rows), np.float32), bounds)
    runs = postpack.unpack_runs(suffixes, values, short=tailblock.SHORT_TERM)
    assert isinstance(runs[0][0], np.ndarray) and isinstance(runs[1][0], list)
    starts = np.zeros(1, np.int64)
    got = tailblock.grouped(runs, starts)
    want = tailblock.grouped([postpack.unpack(suffixes, values, short=tailblock.SHORT_TERM)], starts)
    assert list(map(bytes, got[1])) == list(map(bytes, want[1])) == words
    assert all(np.array_equal(a, b) for a, b in zip(got[2:], want[2:]))
