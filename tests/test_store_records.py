"""frozen_many: records made field by field are the records ``__init__`` makes, and stay frozen."""

from itertools import repeat

import attrs
import pytest

from xerj_core.store import BulkItem, BulkOp, Store, WriteResult
from xerj_core.store.records import frozen_many


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
