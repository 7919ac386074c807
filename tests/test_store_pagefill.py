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
        for lo in range(0, 12_000, 1000):
            _bulk(store, lo, lo + 1000)
        store.bulk([BulkOp("delete", "o", f"doc-{i}") for i in range(0, 8000, 2)])  # sealed rows only
        assert store.forcemerge("o")
        with store.reader("o") as r:
            assert r.n_rows - r.tail_start > 3000  # the tail's live rows stayed in the tail
        # two values of up to 1,900 bytes a page: 0.93 appended, 0.47 when each put split the page before it
        assert _inline_fill(store, "tail") > 0.8
        _bulk(store, 12_000, 13_000)  # the moved tail reads back and seals
        assert store.count("o") == 12_000 - 4000 + 1000


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
