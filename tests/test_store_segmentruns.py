"""A store keeps the postings of the small segments it sealed and merges them from memory: what it writes equals,
byte for byte, what a store that reads every segment back writes; a write by another store makes it read them."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from xerj_core.store import BulkOp, Store
from xerj_core.store import store as store_module
from xerj_core.store import write as write_module

WORDS = [f"w{i}" for i in range(60)] + ["日本語", "é", "x" * 300, "naïve"]
MAPPING = {"properties": {"text": {"type": "text"}, "kind": {"type": "keyword"}, "n": {"type": "long"}}}


def _doc(rng, n: int) -> dict:
    return {"text": " ".join(rng.choice(WORDS, int(rng.integers(1, 14)))), "kind": f"k{n % 5}", "n": n}


def _ops(seed: int) -> list[list[BulkOp]]:
    """Batches of new documents (the batch path), with overwrites and deletes (the general path) among them."""
    rng = np.random.default_rng(seed)
    batches, n = [], 0
    for i in range(40):
        size = int(rng.integers(20, 90))
        batch = [BulkOp("index", "c", f"d{n + j}", _doc(rng, n + j)) for j in range(size)]
        n += size
        if i % 7 == 3:
            batch += [BulkOp("index", "c", f"d{int(k)}", _doc(rng, int(k))) for k in rng.integers(0, n, 5)]
            batch += [BulkOp("delete", "c", f"d{int(k)}") for k in rng.integers(0, n, 3)]
        batches.append(batch)
    return batches


def _dump(store: Store) -> dict:
    """The stored segments: postings and columns as bytes, the segment records without their seal time."""
    dbs, found = store.env.dbs, {}
    with store.read_txn() as raw:
        for name in ("post", "cols", "segs", "tail", "src"):
            with raw.cursor(db=dbs[name]) as cur:
                items = [(bytes(key), bytes(value)) for key, value in cur]
            if name == "segs":
                items = [(key, {k: v for k, v in orjson.loads(value).items() if k != "sealed_at"})
                         for key, value in items]
            found[name] = items
    return found


@pytest.fixture
def stored_reads(monkeypatch):
    """Sealed segments read back from LMDB for a merge, as (index number, start)."""
    found = []
    original = write_module.IndexWrite._stored_postings

    def spy(self, start, path, renumber=None):
        found.append(start)
        return original(self, start, path, renumber)

    monkeypatch.setattr(write_module.IndexWrite, "_stored_postings", spy)
    return found


def _write(path, batches, **options) -> dict:
    with Store(path, tail_rows=64, merge_above=None, **options) as store:
        store.create_index("c", MAPPING)
        for batch in batches:
            store.bulk(batch)
        return _dump(store)


def test_merges_from_kept_runs_write_what_merges_from_lmdb_write(tmp_path, monkeypatch, stored_reads):
    batches = _ops(5)
    kept = _write(tmp_path / "kept", batches)
    kept_reads = len(stored_reads)
    monkeypatch.setattr(store_module, "SEGMENT_RUNS_BYTES", 0)
    stored_reads.clear()
    read_back = _write(tmp_path / "read", batches)
    assert stored_reads, "with nothing kept, every merge reads its segments back"
    assert kept_reads < len(stored_reads) / 4, "the kept runs spared most of the reads"
    assert kept == read_back
    assert kept["post"] and len(kept["segs"]) > 1


def test_a_write_by_another_store_makes_the_kept_runs_stale(tmp_path, monkeypatch, stored_reads):
    batches = _ops(9)
    with Store(tmp_path / "both", tail_rows=64, merge_above=None) as first, \
            Store(tmp_path / "both", tail_rows=64, merge_above=None) as second:
        first.create_index("c", MAPPING)
        for i, batch in enumerate(batches):
            if i % 10 == 9:  # another writer: it deletes, rewrites a segment's documents and compacts
                second.bulk(batch)
                second.bulk([BulkOp("delete", "c", f"d{k}") for k in range(i, 200, 11)])
                second.forcemerge("c")
            else:
                first.bulk(batch)
        both = _dump(first)
    with Store(tmp_path / "one", tail_rows=64, merge_above=None) as one:
        one.create_index("c", MAPPING)
        for i, batch in enumerate(batches):
            one.bulk(batch)
            if i % 10 == 9:
                one.bulk([BulkOp("delete", "c", f"d{k}") for k in range(i, 200, 11)])
                one.forcemerge("c")
        assert both == _dump(one)
        with one.reader("c") as reader:
            assert all(reader.row_of(f"d{k}") is None for k in range(9, 200, 11))


def test_the_kept_runs_stay_within_their_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SEGMENT_RUNS_BYTES", 20_000)
    with Store(tmp_path / "d", tail_rows=64, merge_above=None) as store:
        for name in ("a", "b", "c"):
            store.create_index(name, MAPPING)
        rng, kept_any = np.random.default_rng(1), False
        for i in range(30):
            for name in ("a", "b", "c"):
                store.bulk([BulkOp("index", name, f"{i}-{j}", _doc(rng, j)) for j in range(70)])
            assert sum(kept.size for kept in store._segment_runs.values()) <= 20_000
            kept_any |= bool(store._segment_runs)
        assert kept_any, "something small enough is kept"
