"""Dictionary runs (xerj_core.store.dictruns): every term's ordinal as a plain dict numbers them, on real text."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from xerj_core.store import Store, dictruns, keys

FOAM = Path("/work/shared/corpora/foam-docs")
FIELDS = {"properties": {"tag": {"type": "keyword"}}}


def real_terms() -> list[str]:
    """Words of the Foam vault's notes (and, when it is absent, of this venv's standard library), with repeats."""
    files = sorted(FOAM.rglob("*.md")) if FOAM.is_dir() else sorted(Path(re.__file__).parent.glob("*.py"))[:60]
    words: list[str] = []
    for path in files:
        words += re.findall(r"[\w\-\[\]#@./]+", path.read_text(errors="replace"))
    assert len(set(words)) > 2000
    return words


def numbered(store: Store, batches: list[list[str]], *, single: bool = False) -> list[list[int]]:
    """The ordinals ``IndexWrite.ordinals`` (or ``ordinal`` a term at a time) gives each batch, a transaction each."""
    out = []
    for batch in batches:
        def run(txn):
            target = txn.index("words")
            return [target.ordinal("tag", t) for t in batch] if single else target.ordinals("tag", batch)
        out.append(store.transact(run))
    return out


def model(batches: list[list[str]]) -> list[list[int]]:
    known: dict[str, int] = {}
    return [[known.setdefault(t, len(known)) for t in batch] for batch in batches]


def ordinals_of(batches: list[list[str]]) -> dict[str, int]:
    return {t: o for batch, found in zip(batches, model(batches)) for t, o in zip(batch, found)}


def batches_of(words: list[str], sizes: list[int]) -> list[list[str]]:
    out, at = [], 0
    for size in sizes:
        out.append(words[at:at + size])
        at += size
    return [b for b in out if b]


def bounds(store: Store, name: str = "tag") -> list[tuple[int, int]] | None:
    with store.read_txn() as raw:
        ix = store.open_reader(raw, "words").ix
        found = raw.get(dictruns.prefix(ix, name) + b"m", db=store.env.dbs["dict"])
    if found is None:
        return None
    flat = np.frombuffer(found, ">u4", offset=2).tolist()
    return list(zip(flat[0::2], flat[1::2]))


@pytest.mark.parametrize("single", [False, True])
def test_ordinals_match_a_dict_on_real_text(tmp_path, single):
    words = real_terms()[:12_000 if single else None]
    sizes = [1, 2, 700, 1, 3000, 50, 5, 9000, 1, 1, 20_000, 400] * 20
    batches = batches_of(words, sizes)
    path = tmp_path / "data"
    with Store(path) as store:
        store.create_index("words", FIELDS)
        got = numbered(store, batches, single=single)
        assert got == model(batches)
        runs = bounds(store)
        size = len(set(words))
        # the runs tile the ordinals, and there are O(log n) of them
        assert runs[0][0] == 0 and runs[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
        assert len(runs) <= 2 * size.bit_length()
    # A new store object knows no term: every lookup goes through the runs read back from disk.
    with Store(path) as store:
        known = ordinals_of(batches)
        again = [words[i:i + 5000] for i in range(0, len(words), 5000)][::-1]
        assert numbered(store, again) == [[known[t] for t in batch] for batch in again]
        with store.reader("words") as reader:
            dictionary = reader.field_dictionary("tag")
            assert dictionary.terms == list(dict.fromkeys(words))


def test_hash_collisions_are_told_apart(tmp_path, monkeypatch):
    """With a hash of 3 bits nearly every term shares its hash with others: the reverse records decide."""
    real = dictruns.hashes
    monkeypatch.setattr(dictruns, "hashes", lambda encoded: real(encoded) & np.uint64(7))
    words = real_terms()[:6000]
    batches = batches_of(words, [1, 300, 2, 2000, 7, 1500, 1, 4000])
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        assert numbered(store, batches) == model(batches)
    with Store(tmp_path / "data") as store:  # cold: through the runs
        known = ordinals_of(batches)
        assert numbered(store, [words[::-1]]) == [[known[t] for t in words[::-1]]]


def test_a_dictionary_in_the_per_term_layout_stays_in_it(tmp_path, monkeypatch):
    """A dictionary written before runs existed (one entry per term) keeps that layout and its ordinals."""
    words = real_terms()[:8000]
    batches = batches_of(words, [1, 1000, 3, 3000, 1, 4000])
    expected = model(batches)
    with monkeypatch.context() as m:
        m.setattr(dictruns.DictRuns, "open", classmethod(lambda cls, *args: None))
        with Store(tmp_path / "data") as store:
            store.create_index("words", FIELDS)
            assert numbered(store, batches[:3]) == expected[:3]
    with Store(tmp_path / "data") as store:
        assert numbered(store, batches[3:]) == expected[3:]
        assert bounds(store) is None
        with store.read_txn() as raw:
            ix = store.open_reader(raw, "words").ix
            assert raw.get(keys.dict_key(ix, "tag", words[-1]), db=store.env.dbs["dict"]) is not None


def test_an_aborted_transaction_leaves_no_run_behind(tmp_path):
    """Ordinals a failed transaction handed out go to other terms next time; no cache keeps the failed ones."""
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        assert numbered(store, [["a", "b", "c"]]) == [[0, 1, 2]]

        def fail(txn):
            txn.index("words").ordinals("tag", ["x", "y", "z"])
            raise RuntimeError("abort")
        with pytest.raises(RuntimeError):
            store.transact(fail)
        assert numbered(store, [["z", "q", "y", "a"]]) == [[3, 4, 5, 0]]
        assert numbered(store, [["x", "y", "z", "q", "c"]]) == [[6, 5, 3, 4, 2]]
    with Store(tmp_path / "data") as store:
        assert numbered(store, [["x", "y", "z", "q", "c", "b", "a"]]) == [[6, 5, 3, 4, 2, 1, 0]]
        assert bounds(store)[-1][1] == 7


@pytest.mark.parametrize("bits", [64, 3])
def test_known_terms_read_a_reverse_record_only_when_their_hash_is_shared(tmp_path, monkeypatch, bits):
    """Terms the caller knows are stored (a retired edge's id) take the one entry their hash matches; a hash
    matching several entries is still decided by the reverse records (3 bits: nearly all are shared)."""
    if bits < 64:
        real = dictruns.hashes
        monkeypatch.setattr(dictruns, "hashes", lambda encoded: real(encoded) & np.uint64((1 << bits) - 1))
    words = real_terms()[:6000]
    batches = batches_of(words, [1, 300, 2, 2000, 7, 1500, 1, 4000])
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        numbered(store, batches)
    asked: list[int] = []
    real_terms_of = dictruns.DictRuns._terms
    monkeypatch.setattr(dictruns.DictRuns, "_terms", lambda self, ordinals: asked.extend(ordinals) or
                        real_terms_of(self, ordinals))
    known = ordinals_of(batches)
    wanted = list(dict.fromkeys(words[::-1]))
    with Store(tmp_path / "data") as store:  # cold: every term through the runs
        got = store.transact(lambda txn: txn.index("words").ordinals("tag", wanted, known=True))
    assert got == [known[t] for t in wanted]
    if bits == 64:
        assert asked == []
    else:
        assert len(set(asked)) == len(wanted)


def test_the_term_cache_keeps_copies_of_new_terms_only_and_their_right_ordinals(tmp_path, monkeypatch):
    """What a writer remembers across transactions: each new term once, as its own copy (not the caller's string
    or the transaction's ordinal object), with the ordinal the dictionary gave it, up to the cache's limit."""
    from xerj_core.store import store as store_module

    monkeypatch.setattr(store_module, "TERM_CACHE_LIMIT", 1500)
    words = list(dict.fromkeys(real_terms()))[:4000]
    batches = [words[:1000], words[500:1200], words[1100:4000]]
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        given: list[dict[str, int]] = []

        def run(batch):
            def write(txn):
                target = txn.index("words")
                found = target.ordinals("tag", batch)
                given.append(target.dict_cache["tag"])
                return found
            return write

        got = [store.transact(run(batch)) for batch in batches]
        assert got == model(batches)
        cache = next(terms for (ix, name), terms in store._committed_terms.items() if name == "tag")
        known = ordinals_of(batches)
        assert len(cache) == 1500 and all(known[t] == o for t, o in cache.items())
        assert list(cache) == words[:1500]  # the first terms met, each once
        keys_kept = {id(t) for t in cache}
        assert not keys_kept & {id(t) for batch in batches for t in batch}
        assert not keys_kept & {id(t) for terms in given for t in terms}
        ords_kept = {id(o) for o in cache.values() if o > 256}
        assert ords_kept and not ords_kept & {id(o) for o in given[0].values()}  # the first transaction's, all new
        # fresh terms skip the cache, and those the dictionary holds still get their ordinals
        assert store.transact(lambda txn: txn.index("words").ordinals("tag", words[:10] + ["brand-new"], fresh=True)) \
            == [known[t] for t in words[:10]] + [len(words)]


@pytest.mark.parametrize("bits", [64, 3])
def test_sketched_runs_give_every_term_its_ordinal(tmp_path, monkeypatch, bits):
    """With every committed run sketched, new, stored and known terms get the ordinals a plain dict gives them,
    also when nearly every hash is shared (3 bits: the sketches then let everything through)."""
    monkeypatch.setattr(dictruns, "SKETCH_MIN", 1)
    if bits < 64:
        real = dictruns.hashes
        monkeypatch.setattr(dictruns, "hashes", lambda encoded: real(encoded) & np.uint64((1 << bits) - 1))
    words = real_terms()[:9000]
    batches = batches_of(words, [1, 300, 2, 2000, 7, 1500, 1, 4000, 1189])
    made = []
    real_sketch = dictruns.Sketch.__init__
    monkeypatch.setattr(dictruns.Sketch, "__init__", lambda self, h: made.append(h.size) or real_sketch(self, h))
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        assert numbered(store, batches) == model(batches)
        assert made  # the runs were sketched, and asked through their sketches
        known = ordinals_of(batches)
        wanted = list(dict.fromkeys(words[::-1]))
        assert store.transact(lambda txn: txn.index("words").ordinals("tag", wanted + ["brand-new"], fresh=True)) \
            == [known[t] for t in wanted] + [len(known)]
    with Store(tmp_path / "data") as store:  # cold: every run read and sketched again
        got = store.transact(lambda txn: txn.index("words").ordinals("tag", wanted, known=True))
        assert got == [known[t] for t in wanted]
        assert numbered(store, [words[::-1]]) == [[known[t] for t in words[::-1]]]


def test_new_terms_are_searched_for_only_where_a_run_may_hold_them(tmp_path, monkeypatch):
    """A batch of new terms against large committed runs: the sketches turn away nearly all of them, so the
    binary searches (several cache misses per term in a run larger than the caches) are for a few terms only."""
    terms = [f"edge-{i:08d}" for i in range(60_000)]
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        for lo in range(0, 50_000, 10_000):
            store.transact(lambda txn: txn.index("words").ordinals("tag", terms[lo:lo + 10_000], fresh=True))
    searched: list[int] = []

    class Numpy:
        """numpy, counting the hashes each binary search of a run is asked for."""

        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def searchsorted(run, asked, *args, **kwargs):
            searched.append(len(asked))
            return np.searchsorted(run, asked, *args, **kwargs)

    monkeypatch.setattr(dictruns, "np", Numpy())
    with Store(tmp_path / "data") as store:
        got = store.transact(lambda txn: txn.index("words").ordinals("tag", terms[50_000:], fresh=True))
        assert got == list(range(50_000, 60_000))
        assert bounds(store) is not None and len(bounds(store)) >= 2
        assert searched and sum(searched) < 0.05 * 10_000 * len(searched)
        # a stored term is still found in its run
        assert store.transact(lambda txn: txn.index("words").ordinals("tag", terms[7:9], known=True)) == [7, 8]


def test_a_sketch_goes_with_its_run(tmp_path):
    """Sketches are kept per run array: once the store that cached the runs is gone, so are their sketches."""
    import gc

    gc.collect()  # runs other tests' stores cached
    before = len(dictruns._SKETCHES)
    terms = [f"t{i}" for i in range(3 * dictruns.SKETCH_MIN)]
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        for lo in range(0, len(terms), dictruns.SKETCH_MIN):
            store.transact(lambda txn: txn.index("words").ordinals("tag", terms[lo:lo + dictruns.SKETCH_MIN]))
        assert store.transact(lambda txn: txn.index("words").ordinals("tag", ["t5", "new"])) == [5, len(terms)]
        assert len(dictruns._SKETCHES) > before
    del store
    gc.collect()
    assert len(dictruns._SKETCHES) == before


def test_runs_merge_by_tiers_of_fanout_and_a_large_run_absorbs_the_smaller_ones(tmp_path):
    """Equal batches merge FANOUT (4) runs at a time, so a term is rewritten about log4 times where merging pairs
    rewrote it log2 times; a batch of a higher tier takes in the smaller runs before it; every term keeps the
    ordinal a plain dict gives it."""
    words = list(dict.fromkeys(real_terms()))[:2000]
    with Store(tmp_path / "data") as store:
        store.create_index("words", FIELDS)
        batches = batches_of(words, [100] * 7)
        assert numbered(store, batches) == model(batches)
        assert [hi - lo for lo, hi in bounds(store)] == [400, 100, 100, 100]
        more = batches_of(words[700:], [100])
        assert numbered(store, more) == model(batches + more)[len(batches):]
        # the fourth run of a tier: four into one, a 400 beside the 400 before it (two runs of their tier)
        assert [hi - lo for lo, hi in bounds(store)] == [400, 400]
        large = batches_of(words[800:], [1100])
        assert numbered(store, large) == model(batches + more + large)[len(batches + more):]
        # 1100 is of a higher tier than 400: it takes in both runs before it
        assert [hi - lo for lo, hi in bounds(store)] == [1900]


def test_a_sketch_made_a_slice_at_a_time_is_the_sketch_made_at_once(monkeypatch):
    """Slices cut words of the sketch in two (sorted hashes), and unsorted hashes take the other path: the words
    are the same whatever the slice."""
    rng = np.random.default_rng(7)
    for n in (1, 4095, 4096, 50_000):
        hashes = np.sort(rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1))
        for data in (hashes, rng.permutation(hashes)):
            monkeypatch.setattr(dictruns, "_SKETCH_SLICE", 1 << 30)
            whole = dictruns.Sketch(data)
            for size in (1, 7, 1000, 1 << 14):
                monkeypatch.setattr(dictruns, "_SKETCH_SLICE", size)
                sliced = dictruns.Sketch(data)
                assert sliced.shift == whole.shift and np.array_equal(sliced.words, whole.words)
                assert sliced.may_hold(data).all()
