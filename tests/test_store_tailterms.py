"""A tail's postings are found by binary search over its blocks' sorted terms, the blocks' runs grouped a few at
a time as they come: exact however the blocks came, and for a reader of any generation."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from xerj_core.store import BulkOp, Store, tailblock
from xerj_core.store.mapping import Mapping
from xerj_core.store.read import Tail

# Terms whose UTF-8 byte order and code point order must agree for the search to find them.
WORDS = ["alpha", "beta", "zeta", "zz", "é", "éa", "ü", "日本", "日", "ω", "a1", "a10", "a2", "_x"]


def _recount(reader, term: str) -> dict[int, int]:
    want = {}
    for row in reader.live_rows():
        words = reader.document(int(row))[1].get("text", "").split()
        if term in words:
            want[int(row)] = words.count(term)
    return want


@pytest.fixture(params=["the new blocks alone", "the merged runs"])
def lookups(request, monkeypatch):
    """A term looked up within a few writes of its last lookup is found in the new blocks alone; the same
    tests run again with every lookup taking the merged runs."""
    from xerj_core.store import read

    if request.param == "the merged runs":
        monkeypatch.setattr(read, "_FEW_NEW_BLOCKS", -1)
    return request.param


def _found(reader, term: str) -> dict[int, int]:
    rows, tfs = reader.postings("text", term)
    return {int(r): int(t) for r, t in zip(rows, tfs) if reader.live[r]}


@pytest.mark.parametrize("reopen", [False, True])
def test_tail_postings_match_a_recount_over_bulks_puts_deletes_and_a_reopen(tmp_path, reopen, lookups):
    rng = np.random.default_rng(7)
    data = tmp_path / "data"
    store = Store(data, tail_rows=4096)  # nothing seals: every row stays in the tail
    try:
        for round_no in range(12):
            if round_no % 3 == 0:  # a bulk: one block of many rows, its terms grouped and sorted
                ops = [BulkOp("index", "t", str(int(i)), {"text": " ".join(rng.choice(WORDS, 1 + i % 5))})
                       for i in rng.integers(0, 60, 25)]
                store.bulk(ops)
            else:  # single puts: a block each; overwrites and deletes leave dead rows
                doc_id = str(int(rng.integers(0, 60)))
                store.put("t", {"text": " ".join(rng.choice(WORDS, 3))}, doc_id)
                if round_no % 4 == 1:
                    store.delete("t", str(int(rng.integers(0, 60))))
            if reopen:  # a new process reads the tail's blocks back from their stored form
                store.close()
                store = Store(data, tail_rows=4096)
            with store.reader("t") as reader:
                for term in [*WORDS, "absent", "日本語"]:
                    assert _found(reader, term) == _recount(reader, term), term
    finally:
        store.close()


def test_a_term_asked_before_later_blocks_arrive_takes_their_postings_too(tmp_path, lookups):
    with Store(tmp_path / "data", tail_rows=4096) as store:
        store.put("t", {"text": "beta"}, "1")
        with store.reader("t") as reader:
            assert reader.postings("text", "alpha")[0].tolist() == []
        for i in range(2, 6):
            store.put("t", {"text": f"alpha {'alpha ' * i}"}, str(i))
            with store.reader("t") as reader:
                assert _found(reader, "alpha") == _recount(reader, "alpha")
        with store.read_txn() as txn:
            older = store.open_reader(txn, "t")
            store.put("t", {"text": "alpha"}, "9")
            with store.reader("t") as newer:  # the newer reader's search must not show the older one its row
                assert len(_found(newer, "alpha")) == 5
            assert len(_found(older, "alpha")) == 4


def test_every_way_a_block_is_built_lists_its_terms_sorted():
    fields = list(Mapping.from_es({"properties": {"text": {"type": "text"}}}).fields.values())
    rng = np.random.default_rng(3)
    records = [{"c": {"text": 2}, "t": {"text": {w: 1 for w in rng.choice(WORDS, 4)}}} for _ in range(9)]
    built = {
        "one record": tailblock.from_records(0, records[:1], fields),
        "records": tailblock.from_records(0, records, fields),
        "concat": tailblock.concat([tailblock.from_records(0, records[:4], fields),
                                    tailblock.from_records(4, records[4:], fields)], fields),
    }
    built["decoded"] = tailblock.decode(built["records"].encode(), 0, {})
    built["sliced"] = built["records"].sliced(2, 7)
    built["selected"] = built["records"].select(np.arange(9) % 2 == 0, 0)
    for how, block in built.items():
        terms = list(block.run("text")[0])
        assert terms == sorted(terms) and len(set(terms)) == len(terms), how
        tail = Tail(block.start)
        tail.add([block])
        for word in WORDS:  # each term's postings found by the search equal a scan of the block
            wanted = word.encode()
            counts = block.run("text")[1]
            starts = np.concatenate(([0], np.cumsum(counts)))
            at = [i for i, t in enumerate(terms) if t == wanted]
            want = block.run("text")[2][starts[at[0]]:starts[at[0] + 1]].tolist() if at else None
            got = tail.postings("text", word, block.n)
            assert (got[0].tolist() if got is not None else None) == want, (how, word)


def test_tail_postings_stay_exact_as_many_blocks_are_grouped(tmp_path, lookups):
    """Hundreds of blocks (single puts, bulks, blocks holding none of the field's terms, overwrites and deletes)
    are grouped sixteen at a time and then merged: every term's postings equal a recount after each write, for
    the newest reader and for readers opened generations before, which share the tail but see fewer rows."""
    rng = np.random.default_rng(11)
    with Store(tmp_path / "data", tail_rows=1 << 16) as store, contextlib.ExitStack() as stack:
        store.create_index("t", {"properties": {"text": {"type": "text"}, "n": {"type": "long"}}})
        held = []
        for round_no in range(300):
            if round_no % 37 == 0:  # now and then a bulk big enough that its run stands as it comes
                store.bulk([BulkOp("index", "t", str(int(i)), {"text": " ".join(rng.choice(WORDS, 1 + i % 4))})
                            for i in rng.integers(0, 200, 30 if round_no % 74 else 500)])
            elif round_no % 11 == 0:
                store.put("t", {"n": round_no}, f"n{round_no}")  # a block without the field
            else:
                store.put("t", {"text": " ".join(rng.choice(WORDS, 1 + round_no % 5))},
                          str(int(rng.integers(0, 200))))
                if round_no % 7 == 3:
                    store.delete("t", str(int(rng.integers(0, 200))))
            if round_no % 50 == 0:  # readers of older generations, checked again at the end
                older = store.open_reader(stack.enter_context(store.read_txn()), "t")
                held.append((older, {term: _recount(older, term) for term in WORDS}))
            if round_no % 9 == 0 or round_no > 280:
                with store.reader("t") as reader:
                    assert not reader.segments
                    for term in [*WORDS, "absent"]:
                        assert _found(reader, term) == _recount(reader, term), (round_no, term)
        with store.reader("t") as reader:
            assert len(reader.snapshot.tail.blocks) > 250
        for older, want in held:
            for term in WORDS:
                assert _found(older, term) == want[term], term


def test_a_bulk_s_run_is_not_grouped_again_with_the_puts_after_it(tmp_path, monkeypatch):
    """Runs merge by postings: the many postings of a bulk's block stay as they are while puts after it add
    fewer, however many blocks those are (counted in blocks, it was grouped again with every sixteen puts)."""
    from xerj_core.store import read

    grouped = []
    group = tailblock.group
    monkeypatch.setattr(tailblock, "group", lambda runs: grouped.append(sum(len(r[2]) for r in runs)) or group(runs))
    # every lookup takes the merged runs (one within a few writes of the last reads the new blocks alone)
    monkeypatch.setattr(read, "_FEW_NEW_BLOCKS", -1)
    rng = np.random.default_rng(5)
    with Store(tmp_path / "data", tail_rows=1 << 16) as store:
        store.bulk([BulkOp("index", "t", f"b{i}", {"text": " ".join(rng.choice(WORDS, 4))}) for i in range(600)])
        grouped.clear()  # the bulk's own block, grouped as it was written
        for n in range(200):
            store.put("t", {"text": " ".join(rng.choice(WORDS, 3))}, f"p{n}")
            with store.reader("t") as reader:
                assert _found(reader, "beta") == _recount(reader, "beta")
        with store.reader("t") as reader:
            bulk = len(reader.snapshot.tail.blocks[0].run("text")[2])
    assert grouped and max(grouped) < bulk, (bulk, max(grouped))


def test_fresh_runs_are_always_the_newest_and_the_runs_stay_few(tmp_path):
    """Puts' runs wait to be grouped; a bulk's large run arriving among them has them grouped first, so no fresh
    run is left behind it, and the runs a term is searched in stay about FRESH_RUNS plus a logarithm."""
    from xerj_core.store.read import _TailRuns

    rng = np.random.default_rng(8)
    with Store(tmp_path / "data", tail_rows=1 << 16) as store:
        for n in range(700):
            if n % 97 == 5:  # a bulk among the puts: 400 documents, a run of over a thousand postings
                store.bulk([BulkOp("index", "t", f"b{n}-{i}", {"text": " ".join(rng.choice(WORDS, 4))})
                            for i in range(400)])
            else:
                store.put("t", {"text": " ".join(rng.choice(WORDS, 3))}, f"p{n}")
            if n % 50 == 0 or n > 690:
                with store.reader("t") as reader:
                    assert _found(reader, "zeta") == _recount(reader, "zeta")
                    runs = reader.snapshot.tail._runs["text"]
                    flags = [fresh for *_run, fresh in runs.runs]
                    assert flags == sorted(flags) and sum(flags) < _TailRuns.FRESH_RUNS, flags
                    assert len(runs.runs) <= _TailRuns.FRESH_RUNS + 12, len(runs.runs)
