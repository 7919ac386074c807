"""frozen_many: records made field by field are the records ``__init__`` makes, and stay frozen."""

import pickle
from itertools import repeat

import attrs
import pytest

from xerj_core.store import BulkItem, BulkOp, Store, WriteResult
from xerj_core.errors import XerjError
from xerj_core.store.records import Chained, Columns, Same, first_refusal, frozen_many


def test_frozen_many_equals_init_and_stays_frozen():
    ids = [f"d{i}" for i in range(50)]
    made = frozen_many(WriteResult, 50, repeat("ix"), ids, repeat("created"), repeat(1), range(50))
    expected = [WriteResult("ix", doc_id, "created", 1, row) for row, doc_id in enumerate(ids)]
    assert made == expected
    assert list(map(hash, made)) == list(map(hash, expected)) and list(map(repr, made)) == list(map(repr, expected))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made[0].result = "updated"
    ops = [BulkOp("index", "ix", doc_id, {"n": 1}) for doc_id in ids]
    items = frozen_many(BulkItem, 50, ops, made)  # ``error`` left out: its default
    assert items == [BulkItem(op, result=result) for op, result in zip(ops, made)] and items[7].error is None


def test_frozen_many_refuses_a_factory_default():
    @attrs.frozen
    class WithFactory:
        a: int
        b: list = attrs.field(factory=list)

    with pytest.raises(TypeError):
        frozen_many(WithFactory, 2, [1, 2])


def test_bulk_results_of_the_batch_path_match_single_puts(tmp_path):
    docs = [{"title": f"note {i}", "n": i} for i in range(20)]
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        for store in (a, b):
            store.create_index("t", {"properties": {"title": {"type": "text"}, "n": {"type": "long"}}})
        batched = a.bulk([BulkOp("index", "t", f"d{i}", doc) for i, doc in enumerate(docs)])
        single = [BulkItem(BulkOp("index", "t", f"d{i}", doc), result=b.put("t", doc, f"d{i}"))
                  for i, doc in enumerate(docs)]
        assert batched == single


def test_columns_read_as_the_records_they_hold():
    ids = [f"d{i}" for i in range(30)]
    rows = range(100, 130)
    lazy = Columns(WriteResult, 30, Same("ix"), ids, Same("created"), Same(1), rows)
    expected = [WriteResult("ix", doc_id, "created", 1, row) for doc_id, row in zip(ids, rows)]
    assert len(lazy) == 30 and lazy == expected and expected == lazy and list(lazy) == expected
    assert [lazy[i] for i in range(30)] == expected and lazy[-1] == expected[-1] and lazy[-30] == expected[0]
    assert lazy[3:9] == expected[3:9] and lazy[::-7] == expected[::-7] and lazy[40:] == []
    for outside in (30, -31):
        with pytest.raises(IndexError):
            lazy[outside]
    assert lazy != expected[:-1] and lazy != [*expected[:-1], WriteResult("ix", "d29", "updated", 2, 129)]
    assert repr(lazy) == repr(expected) and pickle.loads(pickle.dumps(lazy)) == expected
    with pytest.raises(TypeError):
        hash(lazy)
    ops = [BulkOp("index", "ix", doc_id, {"n": 1}) for doc_id in ids]
    items = Columns(BulkItem, 30, ops, lazy)  # a column of records read from other columns; error: its default
    assert items == [BulkItem(op, result=result) for op, result in zip(ops, expected)] and items[29].error is None
    both = Chained([items[:2], items, []])
    assert len(both) == 32 and both == items[:2] + list(items) and both[31] == items[29] and both[-31] == items[1]
    assert both[1:4] == [items[1], items[0], items[1]]


def test_first_refusal_finds_the_first_error_without_making_columns():
    refused = XerjError("no")
    assert first_refusal([WriteResult("ix", "a", "created", 1, 0), refused, XerjError("later")]) is refused
    assert first_refusal([]) is None

    class Unread(list):
        def __getitem__(self, i):
            raise AssertionError("first_refusal made a record of columns")

        def __iter__(self):
            raise AssertionError("first_refusal made the records of columns")

    assert first_refusal(Columns(WriteResult, 2, Same("ix"), Unread("ab"), Same("created"), Same(1), range(2))) is None


def test_a_bulk_answers_each_op_in_order_when_runs_of_puts_and_single_ops_alternate(tmp_path):
    """A bulk-ingest's items are columns, made when read; mixed with single operations and refusals, the items
    still come in the order of the ops and equal what the same writes one by one report."""
    mapping = {"properties": {"title": {"type": "text"}, "n": {"type": "long"}}}
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        for store in (a, b):
            store.create_index("t", mapping)
        ingest = a.bulk([BulkOp("index", "t", f"d{i}", {"title": f"note {i}", "n": i}) for i in range(40)])
        assert type(ingest) is Columns and ingest[39].result.seq_no == 39
        b.bulk([BulkOp("index", "t", f"d{i}", {"title": f"note {i}", "n": i}) for i in range(40)])
        ops = [BulkOp("index", "t", f"e{i}", {"title": f"new {i}", "n": i}) for i in range(5)]
        ops += [BulkOp("delete", "t", "d3"), BulkOp("update", "t", "d4", {"doc": {"n": 44}}),
                BulkOp("delete", "t", "nowhere")]
        ops += [BulkOp("index", "t", f"f{i}", {"title": f"more {i}", "n": i}) for i in range(4)]
        ops += [BulkOp("delete", "t", "d6")]
        ops += [BulkOp("create", "t", "d5", {"n": 1}), BulkOp("index", "t", "g", {"n": "not a number"})]
        ops += [BulkOp("update", "t", "d7", {"doc": {"n": 77}})]
        ops += [BulkOp("index", "t", f"h{i}", {"title": f"last {i}", "n": i}) for i in range(3)]
        ops += [BulkOp("delete", "t", "e1")]
        got = a.bulk(ops)
        assert [type(part) for part in got.parts] == [Columns, list, Columns, list, Columns, list]
        expected = []
        for op in ops:
            try:
                if op.action == "delete":
                    result = b.delete(op.index, op.doc_id)
                elif op.action == "update":
                    result = b.update(op.index, op.doc_id, op.doc["doc"])
                else:
                    result = b.put(op.index, op.doc, op.doc_id, op_type=op.action)
                expected.append((op, result, None))
            except XerjError as exc:
                expected.append((op, None, type(exc)))
        assert len(got) == len(ops)
        assert [(item.op, item.result, item.error and type(item.error)) for item in got] == expected
        assert [got[i].op for i in range(-len(ops), 0)] == ops and [item.op for item in got[4:9]] == ops[4:9]
        assert [item.error is not None for item in got].count(True) == 2  # a stored create, a bad number
        assert got[7].result.result == "not_found" and got[-1].result.result == "deleted"
