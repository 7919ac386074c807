"""A memory's shown fields decoded without its embeddings are what decoding the whole source gives."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.memory import shown
from xerj_core.memory.namespace import TEXT_VECTOR_FIELD

NS = "shown"

# JSON values as orjson writes and reads them (integers within 64 bits, finite floats)
scalars = st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False,
                                                                                   allow_infinity=False) | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from([*shown.FIELDS, TEXT_VECTOR_FIELD, "x", "é\"\\"]) | st.text(),
                                        inner, max_size=4), max_leaves=12)
sources = st.dictionaries(st.sampled_from([*shown.FIELDS, TEXT_VECTOR_FIELD, "vector", "other"]) | st.text(), values,
                          max_size=12)


@settings(max_examples=300, deadline=None)
@given(sources, st.lists(st.floats(-1, 1, width=32), max_size=50))
def test_the_shown_fields_are_those_of_the_whole_source(source, embedding):
    source = {**source, TEXT_VECTOR_FIELD: embedding} if embedding else source
    json = orjson.dumps(source)
    whole = orjson.loads(json)
    expected = {name: whole[name] for name in shown.FIELDS if name in whole}
    found = shown.shown_source(json)
    assert found == expected
    assert list(found) == [name for name in shown.FIELDS if name in found]  # and nothing else


def test_recall_and_list_show_what_the_stored_source_holds(engine):
    memory = engine.memory
    ids = []
    for n, text in enumerate(["paku humo one", "paku humo two", "coro three"]):
        status, body = memory.store(NS, {"text": text, "metadata": {"n": n, TEXT_VECTOR_FIELD: [1, 2], "nested": {}}})
        assert status == 201
        ids.append(body["_id"])
    memory.forget(NS, ids[2])
    recalled = memory.recall(NS, {"query": "paku", "k": 5})["hits"]
    assert {hit["_id"] for hit in recalled} == set(ids[:2])
    listed = memory.list(NS, {"include_forgotten": "true"})["memories"]
    assert [m["_id"] for m in listed] == ids[::-1]
    with engine.store.reader(f".xerj-memory-{NS}") as reader:
        for item in listed + recalled:
            row = reader.row_of(item["_id"])
            _doc_id, source, _version = reader.document(row)
            assert TEXT_VECTOR_FIELD in source  # stored, and not shown
            assert item["text"] == source["text"] and item["metadata"] == source["metadata"]
            assert item["stored_at"] == source["stored_at"] and item.get("forgotten_at") == source.get("forgotten_at")
            assert TEXT_VECTOR_FIELD not in item


def test_rows_come_back_in_order_batch_after_batch_and_none_where_no_memory_is(engine, monkeypatch):
    memory = engine.memory
    ids = [memory.store(NS, {"text": f"note {n}", "metadata": {"n": n}})[1]["_id"] for n in range(7)]
    memory.forget(NS, ids[2], purge=True)  # its row holds no live document
    monkeypatch.setattr(shown, "BATCH", 2)
    with engine.store.reader(f".xerj-memory-{NS}") as reader:
        rows = [6, 0, 2, 5, 1, 3, 4, 3]
        found = list(shown.shown_documents(reader, rows))
        expected = []
        for row in rows:
            whole = reader.document(row)
            expected.append(None if whole is None else
                            (whole[0], {k: whole[1][k] for k in shown.FIELDS if k in whole[1]}))
        assert found == expected and found[2] is None and sum(f is None for f in found) == 1
