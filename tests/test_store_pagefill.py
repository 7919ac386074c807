"""Seals and compactions append their postings and tail records in key order, so LMDB fills the pages they write
(a put that is not an append splits a full page in half); an append out of order refuses the transaction."""

from __future__ import annotations

import pytest

from xerj_core.errors import XerjError
from xerj_core.store import BulkOp, Store
from xerj_core.store import write as store_write

WORDS = [f"w{i}" for i in range(500)]


def _inline_fill(store: Store, name: str) -> float:
    """The share of the database's leaf pages its inline entries take (values LMDB keeps on leaf pages; larger
    ones have overflow pages of their own), counting each node's header and pointer."""
    with store.env.env.begin() as txn:
        stat = txn.stat(store.env.dbs[name])
        used = sum(len(key) + len(value) + 10 for key, value in txn.cursor(db=store.env.dbs[name])
                   if len(value) < 2000)
    return used / (stat["leaf_pages"] * stat["psize"])


def _bulk(store: Store, lo: int, hi: int) -> None:
    store.bulk([BulkOp("index", "o", f"doc-{i}", {"title": f"{WORDS[i % 500]} {WORDS[i * 7 % 500]} note", "n": i})
                for i in range(lo, hi)])


def test_sealed_postings_fill_their_pages(tmp_path):
    with Store(tmp_path / "data", sync=False, tail_rows=1024) as store:
        store.create_index("o", {"properties": {"title": {"type": "text"}, "n": {"type": "long"}}})
        for lo in range(0, 20_000, 1000):
            _bulk(store, lo, lo + 1000)
        # appended: 0.90; put one by one into the tree (the bucket puts split pages): 0.75
        assert _inline_fill(store, "post") > 0.85


def test_a_compaction_writes_the_tail_it_keeps_on_full_pages(tmp_path):
    with Store(tmp_path / "data", sync=False, tail_rows=4096) as store:
        store.create_index("o", {"properties": {"title": {"type": "text"}, "n": {"type": "long"}}})
        for lo in range(0, 10_000, 1000):
            _bulk(store, lo, lo + 1000)
        store.bulk([BulkOp("delete", "o", f"doc-{i}") for i in range(0, 8000, 2)])  # sealed rows only
        assert store.forcemerge("o")
        with store.reader("o") as r:
            assert r.n_rows - r.tail_start == 10_000 - 8192  # less than half a tail: it stays the tail
        # two values of up to 1,900 bytes a page: 0.93 appended, 0.47 when each put split the page before it
        assert _inline_fill(store, "tail") > 0.8
        _bulk(store, 10_000, 13_000)  # the moved tail reads back and seals
        assert store.count("o") == 10_000 - 4000 + 3000


def test_a_compaction_seals_a_tail_at_least_half_full(tmp_path):
    """So that the writes right after it do not seal: LMDB reuses a transaction's freed pages only from the
    transaction after next, and a seal's blobs then grew the file (the 20-overwrite test: 1.83x -> 1.79x)."""
    expected = {}
    with Store(tmp_path / "data", sync=False, tail_rows=1024) as store:
        store.create_index("o", {"properties": {"title": {"type": "text"}, "n": {"type": "long"}}})
        _bulk(store, 0, 2600)  # two tails sealed, 552 rows in the tail
        store.bulk([BulkOp("delete", "o", f"doc-{i}") for i in (*range(0, 2048, 3), 2100, 2599)])
        with store.reader("o") as r:
            live = r.doc_count
            for path in ("title",):
                for word in ("note", "w7", "w49"):
                    rows, tfs = r.postings(path, word)
                    expected[word] = sorted((r.id_of(int(x)), float(t)) for x, t in zip(rows, tfs)
                                            if r.live[int(x)])
            sources = {r.id_of(int(x)): r.get(r.id_of(int(x))) for x in r.live_rows()}
        assert store.forcemerge("o")
        with store.reader("o") as r:
            assert r.tail_start == r.n_rows == 2048 and live == 2600 - 683 - 2  # all live rows sealed, fillers after
            assert r.doc_count == live and r.n_rows - live < 1024
            for word, found in expected.items():
                rows, tfs = r.postings("title", word)
                assert sorted((r.id_of(int(x)), float(t)) for x, t in zip(rows, tfs) if r.live[int(x)]) == found
            assert {r.id_of(int(x)): r.get(r.id_of(int(x))) for x in r.live_rows()} == sources
            n = r.column("n")
            assert all(int(n.values[int(x)]) == int(r.id_of(int(x))[4:]) for x in r.live_rows())
        _bulk(store, 5000, 5100)
        assert store.count("o") == live + 100


def test_a_compaction_of_an_index_with_no_sealed_row_keeps_its_tail(tmp_path):
    with Store(tmp_path / "data", sync=False, tail_rows=1024) as store:
        store.create_index("o", {"properties": {"title": {"type": "text"}, "n": {"type": "long"}}})
        _bulk(store, 0, 1000)
        store.bulk([BulkOp("delete", "o", f"doc-{i}") for i in range(0, 1000, 10)])
        assert store.forcemerge("o")
        with store.reader("o") as r:
            assert (r.tail_start, r.n_rows, r.doc_count) == (0, 900, 900)  # no filler: nothing reads as deleted
        assert store.index_stats("o").dead_rows == 0


def test_an_append_out_of_key_order_refuses_the_transaction(tmp_path):
    shuffled = [(b"\xff\xfek1", b"1"), (b"\xff\xfek3", b"3"), (b"\xff\xfek2", b"2")]  # after every aux key
    with Store(tmp_path / "data", sync=False) as store:
        store.put("o", {"n": 1}, "a")
        aux = store.env.dbs["aux"]
        with pytest.raises(XerjError, match="ascending key order"):
            store.transact(lambda txn: store_write._put_all(txn.raw, aux, shuffled, ordered=True))
        with store.read_txn() as raw:
            assert raw.get(b"\xff\xfek1", db=aux) is None  # nothing of it was committed
        store.transact(lambda txn: store_write._put_all(txn.raw, aux, sorted(shuffled), ordered=True))
        with store.read_txn() as raw:
            assert [raw.get(key, db=aux) for key, _value in sorted(shuffled)] == [b"1", b"2", b"3"]
