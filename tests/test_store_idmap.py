"""The id map (xerj_core.store.idmap): B-tree entries plus runs of id hashes answer every lookup as a dict would."""

from __future__ import annotations

import random

import numpy as np
import pytest

from xerj_core.store import BulkOp, Store, dictruns, format as store_format, idmap, keys

FIELDS = {"properties": {"n": {"type": "long"}, "t": {"type": "text"}}}


def doc(i: int, v: int) -> dict:
    return {"n": i * 100 + v, "t": f"word{i % 13} v{v}"}


class Model:
    """What the index should hold: ``_id -> (n, version)``."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[int, int]] = {}

    def put(self, doc_id: str, n: int) -> None:
        self.docs[doc_id] = (n, self.docs.get(doc_id, (0, 0))[1] + 1)


def check(store: Store, model: Model, asked: list[str]) -> None:
    """Every id of ``asked`` found (or absent) as the model says, by the reader's and the writer's lookups."""
    with store.reader("o") as reader:
        rows = reader.rows_of(asked)
        assert set(rows) == {i for i in asked if i in model.docs}
        for doc_id in asked:
            found = reader.get(doc_id)
            if doc_id in model.docs:
                assert found is not None and (found[0]["n"], found[1]) == model.docs[doc_id]
                assert reader.row_of(doc_id) == rows[doc_id]
            else:
                assert found is None and reader.row_of(doc_id) is None
    written = store.transact(lambda txn: txn.index("o").rows_of(asked))
    assert written == rows
    assert store.count("o") == len(model.docs)


def random_ops(store: Store, model: Model, rng: random.Random, rounds: int, universe: int) -> list[str]:
    """Bulk writes of new and stored ids, single puts and deletes, a forced compaction now and then."""
    ids = [f"{rng.getrandbits(64):016x}-{i}" for i in range(universe)]
    for r in range(rounds):
        kind = rng.random()
        if kind < 0.5:  # a batch: mostly new ids (runs), sometimes some stored ones (the general path)
            batch = rng.sample(ids, rng.randrange(1, 400))
            store.bulk([BulkOp("index", "o", i, doc(ids.index(i), r)) for i in batch])
            for i in batch:
                model.put(i, ids.index(i) * 100 + r)
        elif kind < 0.7:
            for i in rng.sample(ids, 5):
                store.put("o", doc(ids.index(i), r), i)
                model.put(i, ids.index(i) * 100 + r)
        elif kind < 0.9:
            for i in rng.sample(ids, 20):
                result = store.delete("o", i)
                assert result.result == ("deleted" if i in model.docs else "not_found")
                model.docs.pop(i, None)
        else:
            store.forcemerge("o")
    return ids


@pytest.mark.parametrize("seed", [1, 2])
def test_the_id_map_answers_as_a_dict_through_writes_deletes_and_compactions(tmp_path, seed):
    rng = random.Random(seed)
    model = Model()
    with Store(tmp_path / "data") as store:
        store.create_index("o", FIELDS)
        ids = random_ops(store, model, rng, 80, 3000)
        check(store, model, ids + ["absent", "x" * 300])
        with store.read_txn() as raw:
            ix = store.open_reader(raw, "o").ix
            assert raw.get(idmap.IdRuns.key_prefix(ix, "") + b"m", db=store.env.dbs["ids"]) is not None
        # a reader's cache keeps only the runs of the newest bounds it opened (merged-away ones leave it)
        for k in range(4):
            with store.reader("o") as reader:
                reader.row_of("absent")
            store.bulk([BulkOp("index", "o", f"more-{k}-{i}", doc(i, k)) for i in range(300)])
            for i in range(300):
                model.put(f"more-{k}-{i}", i * 100 + k)
        with store.reader("o") as reader:
            reader.row_of("absent")
            bounds = reader._id_runs().bounds
            assert set(reader.cache.id_runs) <= {(ix, reader._id_runs().name, lo, hi) for lo, hi in bounds}
    with Store(tmp_path / "data") as store:  # cold caches: every run read back from disk
        check(store, model, ids)
        random_ops(store, model, rng, 30, 3000)
        check(store, model, ids)


def test_hash_collisions_are_told_apart(tmp_path, monkeypatch):
    """With a 3-bit hash almost every id shares its hash: the row's source record decides."""
    real = dictruns.hashes
    monkeypatch.setattr(dictruns, "hashes", lambda encoded: real(encoded) & np.uint64(7))
    model = Model()
    with Store(tmp_path / "data") as store:
        store.create_index("o", FIELDS)
        ids = random_ops(store, model, random.Random(3), 40, 800)
        check(store, model, ids + ["absent"])


def test_an_id_map_written_by_format_4_still_answers(tmp_path, monkeypatch):
    """Format 4 gave every id a B-tree entry: such a data directory opens, is stamped 5, and its ids answer
    (overwritten, deleted and new ones alike)."""
    model = Model()
    rng = random.Random(4)
    with monkeypatch.context() as m:
        m.setattr(idmap, "runs_of", lambda *args: None)  # the B-tree entries format 4 wrote
        m.setattr(store_format, "FORMAT_VERSION", 4)
        with Store(tmp_path / "data") as store:
            store.create_index("o", FIELDS)
            ids = random_ops(store, model, rng, 30, 1500)
            with store.read_txn() as raw:
                ix = store.open_reader(raw, "o").ix
                prefix = keys.ix_key(ix)
                entries = [bytes(k) for k, _v in raw.cursor(db=store.env.dbs["ids"]) if bytes(k).startswith(prefix)]
                assert len(entries) == len(model.docs) and not any(k.startswith(prefix + b"\xff") for k in entries)
    with Store(tmp_path / "data") as store:
        with store.read_txn() as raw:
            assert store_format.stamped(raw, store.env.dbs["aux"]) == 5
        check(store, model, ids)
        random_ops(store, model, rng, 30, 1500)
        check(store, model, ids)


def test_an_aborted_transaction_leaves_no_id_behind(tmp_path):
    """Rows a failed transaction gave new ids are given to other ids next time; no cache keeps the failed ones."""
    with Store(tmp_path / "data") as store:
        store.create_index("o", FIELDS)
        store.bulk([BulkOp("index", "o", f"a{i}", doc(i, 0)) for i in range(50)])

        def fail(txn):
            txn.index("o").put_many([(doc(i, 1), f"b{i}", "index") for i in range(50)])
            assert txn.index("o").rows_of(["b3"]) == {"b3": 53}
            raise RuntimeError("abort")
        with pytest.raises(RuntimeError):
            store.transact(fail)
        store.bulk([BulkOp("index", "o", f"c{i}", doc(i, 2)) for i in range(50)])
        with store.reader("o") as reader:
            assert reader.rows_of(["b3", "c3", "a3"]) == {"c3": 53, "a3": 3}
        assert store.get("o", "b3") is None and store.get("o", "c3")[0]["n"] == 302


@pytest.mark.parametrize("bits", [64, 3])
def test_rows_hand_back_the_source_records_they_read_to_confirm_a_hash(tmp_path, monkeypatch, bits):
    """``rows_of(ids, sources)``: each id found through the runs has its row's stored source record in
    ``sources`` (read once to confirm the hash; a caller reading the document uses it), and every record there is
    the one stored for its row, also when hashes collide (3 bits) and rows of other ids were read."""
    real = dictruns.hashes
    monkeypatch.setattr(dictruns, "hashes", lambda encoded: real(encoded) & np.uint64((1 << bits) - 1))
    model = Model()
    with Store(tmp_path / "data") as store:
        store.create_index("o", FIELDS)
        ids = random_ops(store, model, random.Random(6), 40, 800)
        asked = ids + ["absent"]

        def look(txn):
            target = txn.index("o")
            sources: dict[int, bytes] = {}
            rows = target.rows_of(asked, sources)
            in_btree = {i for i in rows if txn.raw.get(keys.id_key(target.ix, i), db=txn.dbs["ids"]) is not None}
            stored = {row: txn.raw.get(keys.row_key(target.ix, row), db=txn.dbs["src"]) for row in sources}
            return rows, in_btree, sources, stored

        rows, in_btree, sources, stored = store.transact(look)
        assert rows == store.transact(lambda txn: txn.index("o").rows_of(asked))
        assert len(in_btree) < len(rows)  # most ids were written in batches: their rows are found in the runs
        assert {rows[i] for i in rows if i not in in_btree} <= set(sources)
        assert all(blob is not None and sources[row] == blob for row, blob in stored.items())


def test_reserved_ids_keep_btree_entries_through_every_batch_door(tmp_path):
    """An id of the reserved prefix written in a batch gets its own B-tree entry, so one ordered lookup of the
    prefix finds it (the graph asks so whether a brain holds claims); a batch without one goes to the runs."""
    store = Store(tmp_path)
    try:
        store.bulk([BulkOp("index", "o", i, doc(n, 0)) for n, i in enumerate(["p1", "p2", "p3"])])
        store.bulk([BulkOp("index", "o", i, doc(n, 0)) for n, i in enumerate(["a", "__xerj-claim", "b"])])
        store.bulk([BulkOp("index", "o", i, doc(n, 1)) for n, i in enumerate(["p1", "__xerj-claim", "c"])])

        def btree(txn):
            target = txn.index("o")
            prefix = keys.id_key(target.ix, "")
            with txn.raw.cursor(db=txn.dbs["ids"]) as cur:
                cur.set_range(prefix)
                return {bytes(k)[len(prefix):].decode() for k in cur.iternext(values=False)
                        if bytes(k).startswith(prefix) and bytes(k)[len(prefix):len(prefix) + 1] != b"\xff"}

        assert store.transact(btree) == {"a", "__xerj-claim", "b", "p1", "c"}
        assert {idmap.RESERVED_ID_PREFIX + "claim", "p2"} <= set(store.transact(lambda t: t.index("o").rows_of(
            ["__xerj-claim", "p2", "p3", "c"])))
    finally:
        store.close()


def test_a_batch_of_new_ids_is_checked_without_a_lookup_per_id(tmp_path, monkeypatch):
    """``none_stored`` answers the bulk-ingest case (every id new) with their hashes, so a bulk of new documents
    never asks ``rows`` id by id; an id held by a B-tree entry (inside the batch's range), by a run, by this
    transaction's own batch or by a stale run entry (a deleted document) makes it answer None, and the
    exact lookup then decides: new ids are created, stored ones updated."""
    asked: list[int] = []
    real_rows = idmap.rows
    monkeypatch.setattr(idmap, "rows", lambda *args, **kw: asked.append(len(args[4])) or real_rows(*args, **kw))
    with Store(tmp_path / "data") as store:
        store.create_index("o", FIELDS)
        results = store.bulk([BulkOp("index", "o", f"k{i:03d}", doc(i, 0)) for i in range(200)])
        assert [item.result.result for item in results] == ["created"] * 200 and asked == []
        store.put("o", doc(7, 0), "k500")  # a B-tree entry, between the next batch's smallest and largest id
        store.delete("o", "k010")  # a stale run entry: the run keeps the hash of a row that lost its source

        def answer(txn, ids):
            target = txn.index("o")
            return idmap.none_stored(txn.raw, txn.dbs, target.ix, target.id_runs, [i.encode() for i in ids])

        fresh = [f"n{i}" for i in range(50)]
        hashed = store.transact(lambda txn: answer(txn, fresh))
        assert hashed is not None and hashed.tolist() == dictruns.hashes([i.encode() for i in fresh]).tolist()
        assert store.transact(lambda txn: answer(txn, ["k400", "k500", "k600"])) is None  # B-tree entry
        assert store.transact(lambda txn: answer(txn, ["k501", "k502"])) is not None  # none in that range
        assert store.transact(lambda txn: answer(txn, ["x1", "k005"])) is None  # a run holds k005
        assert store.transact(lambda txn: answer(txn, ["x1", "k010"])) is None  # stale: rows decides

        def same_transaction(txn):
            txn.index("o").put_many([(doc(1, 1), "t1", "index"), (doc(2, 1), "t2", "index")])
            return answer(txn, ["t2", "t3"])
        assert store.transact(same_transaction) is None
        asked.clear()
        results = store.bulk([BulkOp("index", "o", i, doc(k, 2)) for k, i in enumerate(["k010", "k600", "k601"])])
        assert [item.result.result for item in results] == ["created"] * 3 and asked == [3]
        results = store.bulk([BulkOp("index", "o", i, doc(k, 3)) for k, i in enumerate(["k005", "k602", "k500"])])
        assert [item.result.result for item in results] == ["updated", "created", "updated"]
        assert store.get("o", "k010")[0]["n"] == 2 and store.get("o", "k500")[0]["n"] == 203
        assert store.count("o") == 200 + 1 - 1 + 2 + 3 + 1
