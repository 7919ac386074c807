"""Bulk writes: the batched write path (records, rows, seals, remembered tails) shows what single puts show."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.store import BulkOp, Store
from xerj_core.store.scope import RESERVED_PREFIX
from xerj_core.text import long_words, term_counts, term_counts_many, tokenize, tokenize_many

from .test_store_compaction import MAPPING, WORDS, _doc, _picture


def _ops(rng: random.Random, start: int, count: int, ids: int) -> list[BulkOp]:
    return [BulkOp("index", "t", f"d{rng.randrange(ids)}" if rng.random() < 0.3 else f"n{start + i}",
                   _doc(rng, start + i)) for i in range(count)]


def test_bulks_from_two_writers_equal_single_puts(tmp_path):
    """Two stores on one directory take turns writing bulks (each remembers the tail it committed, and must not
    use it once the other wrote); every seal, merge and overwrite ends as the same puts one by one would."""
    rng = random.Random(3)
    batches = [_ops(rng, i * 100, rng.randint(1, 30), 60) for i in range(40)]
    with Store(tmp_path / "bulk", tail_rows=8) as first, Store(tmp_path / "bulk", tail_rows=8) as second, \
            Store(tmp_path / "single", tail_rows=8) as single:
        for store in (first, single):
            store.create_index("t", MAPPING)
        writers = [first, second]
        for i, batch in enumerate(batches):
            # Runs of two or three bulks by one writer (its remembered tail is used), then the other's turn.
            writer = writers[(i // 3 + i % 2 * (i % 5 == 0)) % 2]
            items = writer.bulk(batch)
            assert all(item.error is None for item in items)
            for op in batch:
                single.put("t", op.doc, op.doc_id)
            assert _picture(writer, "t") == _picture(single, "t"), i
        with first.reader("t") as a, single.reader("t") as b:
            assert (a.n_rows, a.doc_count, len(a.segments)) == (b.n_rows, b.doc_count, len(b.segments))


def test_a_bulk_of_new_documents_equals_single_puts(tmp_path):
    """The all-new fast path (one getmulti, sources appended) gives the results, versions and rows of puts."""
    rng = random.Random(4)
    docs = [_doc(rng, i) for i in range(300)]
    with Store(tmp_path / "bulk", tail_rows=16) as bulk, Store(tmp_path / "single", tail_rows=16) as single:
        for store in (bulk, single):
            store.create_index("t", MAPPING)
        results = []
        for lo in range(0, 300, 70):
            results += [item.result for item in bulk.bulk([BulkOp("index", "t", f"x{i}", docs[i])
                                                           for i in range(lo, min(300, lo + 70))])]
        expected = [single.put("t", doc, f"x{i}") for i, doc in enumerate(docs)]
        assert results == expected
        assert _picture(bulk, "t") == _picture(single, "t")


def test_a_remembered_tail_is_not_used_after_another_writer_renumbered_it(tmp_path):
    """Another writer deletes a tail row, compacts and adds a row: the tail has the same bounds but other
    records, so the generation (not the bounds) must tell the first writer to read it again."""
    rng = random.Random(5)
    docs = [_doc(rng, i) for i in range(20)]
    with Store(tmp_path / "bulk", tail_rows=8) as first, Store(tmp_path / "bulk", tail_rows=8) as second, \
            Store(tmp_path / "single", tail_rows=8) as single:
        for store in (first, single):
            store.create_index("t", MAPPING)
        first.bulk([BulkOp("index", "t", f"x{i}", docs[i]) for i in range(12)])  # sealed 8, tail rows 8-11
        for store in (second, single):
            for i in range(12):
                if store is single:
                    store.put("t", docs[i], f"x{i}")
            store.delete("t", "x9")
            assert store.forcemerge("t")
            store.put("t", docs[12], "x12")
        with first.reader("t") as r:
            assert (r.tail_start, r.n_rows) == (8, 12)
        first.bulk([BulkOp("index", "t", f"x{i}", docs[i]) for i in range(13, 18)])  # seals rows 8-15
        for i in range(13, 18):
            single.put("t", docs[i], f"x{i}")
        assert _picture(first, "t") == _picture(single, "t")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=12), max_size=8))
def test_tokenizing_a_batch_equals_tokenizing_each_text(texts):
    """One lowercasing of the joined batch splits into exactly what each text alone gives (case mapping
    context, such as a final sigma, stops at the separator; a text holding a NUL takes the slow path)."""
    assert tokenize_many(texts) == [tokenize(t) for t in texts]
    assert term_counts_many([tokenize(t) for t in texts]) == [term_counts(tokenize(t)) for t in texts]
    greek = [t + "Σ" for t in texts] + ["ΑΣ", "ΑΣ'", "Σ"]
    assert tokenize_many(greek) == [tokenize(t) for t in greek]
    for text in texts + greek + ["İstanbul ab abc ΑΣΣ x_y1 ｆｕｌｌ"]:
        for shortest in (1, 3, 4):
            assert long_words(text, shortest) == [word for word in tokenize(text) if len(word) >= shortest]


def test_a_bulk_of_mixed_shapes_with_multi_fields_takes_the_batch_path_and_equals_single_puts(tmp_path, monkeypatch):
    """Like an autoindex file's card and its sections: documents holding different keys (one order holds them
    all) and a dynamic text field with its ``.keyword`` multi-field (values past ``ignore_above`` included) are
    written as one block, with the rows, dictionaries (ordinals in the same order), columns and postings of
    single puts."""
    from xerj_core.store import write as write_module

    rng = random.Random(5)

    def path(i: int) -> str:  # every seventh too long for a dictionary key: left out, and counted, at each place
        return f"p/{i}.md" + ("/x" * 300 if i % 7 == 3 else "")

    def card(i: int) -> dict:
        return {"title": f"note {i}", "path": path(i), "kind": "file", "ordinal": 0, "encoding": "utf-8"}

    def section(i: int, k: int) -> dict:
        anchor = rng.choice(WORDS) + ("-x" * 200 if rng.random() < 0.1 else f"-{k}")
        return {"title": f"note {i}", "path": path(i), "kind": "section", "text": " ".join(
            rng.choice(WORDS) for _ in range(rng.randint(0, 5))), "ordinal": k, "level": 2, "anchor": anchor}

    docs = [(card(i), f"{i}") for i in range(60)]
    docs = [item for i, item in enumerate(docs) for item in [item, *((section(i, k), f"{i}#{k}") for k in (1, 2, 3))]]
    mapping = {"properties": {"title": {"type": "text"}, "text": {"type": "text"}, "path": {"type": "keyword"},
                              "kind": {"type": "keyword"}, "encoding": {"type": "keyword"}}}
    blocks = []
    original = write_module.IndexWrite._batch_block
    monkeypatch.setattr(write_module.IndexWrite, "_batch_block",
                        lambda self, *a: blocks.append(1) or original(self, *a))
    with Store(tmp_path / "bulk", tail_rows=16) as bulk, Store(tmp_path / "single", tail_rows=16) as single:
        for store in (bulk, single):
            store.create_index("t", mapping)
        results = []
        for lo in range(0, len(docs), 50):
            results += [item.result for item in bulk.bulk([BulkOp("index", "t", doc_id, doc)
                                                           for doc, doc_id in docs[lo:lo + 50]])]
        expected = [single.put("t", doc, doc_id) for doc, doc_id in docs]
        assert results == expected
        assert len(blocks) == len(range(50, len(docs), 50))  # every bulk but the first, which maps new fields
        assert _picture(bulk, "t") == _picture(single, "t")
        assert bulk.skipped_counts("t") == single.skipped_counts("t")
        assert bulk.skipped_counts("t")["keywords"] > 8
        with bulk.reader("t") as a, single.reader("t") as b:
            assert a.mapping.fields.keys() == b.mapping.fields.keys()
            assert "anchor.keyword" in a.mapping.fields
            for path, spec in a.mapping.fields.items():
                if spec.type == "keyword":
                    assert a.field_dictionary(path).terms == b.field_dictionary(path).terms, path
            for path in a.text_fields():
                for word in ["note", *WORDS]:
                    assert [x.tolist() for x in a.postings(path, word)] == [x.tolist() for x in b.postings(path, word)]


def test_a_bulk_of_deletes_finds_its_put_runs_in_linear_work():
    """The one-pass check for an all-puts bulk runs from the bulk's start only: asked at every op of a bulk of
    deletes, a pass over the rest each time was quadratic (a 20k-delete bulk spent 16 s finding no put run)."""
    from xerj_core.store.store import _put_run_end

    class Counted(list):
        read = 0

        def __getitem__(self, at):
            found = super().__getitem__(at)
            Counted.read += len(found) if isinstance(at, slice) else 1
            return found

        def __iter__(self):
            Counted.read += len(self)
            return super().__iter__()

    ops = Counted(BulkOp("delete", "a", str(i)) for i in range(2_000))
    at = 0
    while at < len(ops):
        at = max(at + 1, _put_run_end(ops, at))
    assert Counted.read < 10 * len(ops)


def test_records_with_new_keywords_take_their_ordinals_together_and_equal_single_puts(tmp_path, monkeypatch):
    """The records path (like documents grouped, a lone shape made one at a time, a refusal in between): the
    grouped records' new keyword values get their ordinals by one pass per dictionary up to each record made
    one at a time, and every dictionary numbers its terms in the order single puts number them."""
    from xerj_core.store import write as write_module

    rng = random.Random(9)
    long_value = "v" * 600  # too long for a dictionary key: left out, and counted, at each place

    def like(i: int) -> dict:
        return {"path": f"p{rng.randrange(40)}" if i % 9 else long_value, "kind": rng.choice(["a", "b", f"k{i}"]),
                "text": " ".join(rng.choice(WORDS) for _ in range(3)), "n": i}

    docs: list[tuple[dict, str]] = []
    for i in range(120):
        docs.append((like(i), f"d{i}"))
        if i % 17 == 5:  # a shape of its own: made one at a time, its new values numbered in its place
            docs.append(({"kind": f"lone{i}", "path": f"p{i % 50}", f"extra{i}": "x"}, f"lone{i}"))
        if i % 29 == 7:  # refused (not a number): takes no ordinal, and the records around it keep their order
            docs.append(({"kind": f"bad{i}", "n": "not a number"}, f"bad{i}"))
    mapping = {"properties": {"path": {"type": "keyword"}, "kind": {"type": "keyword"}, "text": {"type": "text"},
                              "n": {"type": "long"}}}
    monkeypatch.setattr(write_module.IndexWrite, "_put_batch", lambda self, *a: None)  # the records path
    calls = []
    one_at_a_time = write_module.IndexWrite.ordinal
    monkeypatch.setattr(write_module.IndexWrite, "ordinal", lambda self, *a: calls.append(1) or one_at_a_time(self, *a))
    with Store(tmp_path / "bulk", tail_rows=16) as bulk, Store(tmp_path / "single", tail_rows=16) as single:
        for store in (bulk, single):
            store.create_index("t", mapping)
        results = bulked(bulk, "t", docs, 60)
        bulk_calls = len(calls)
        expected = put_one_by_one(single, "t", docs)
        assert outcomes(results) == outcomes(expected)
        assert sum(isinstance(r, Exception) for r in results) == 4
        assert _picture(bulk, "t") == _picture(single, "t")
        assert bulk.skipped_counts("t") == single.skipped_counts("t") and bulk.skipped_counts("t")["keywords"] >= 13
        with bulk.reader("t") as a, single.reader("t") as b:
            for path, spec in a.mapping.fields.items():
                if spec.type == "keyword":
                    assert a.field_dictionary(path).terms == b.field_dictionary(path).terms, path
        # one lookup per term only for the values of documents made one at a time (the lone shapes, the refused),
        # not for the grouped records' (about 200 new values)
        assert 0 < bulk_calls <= 3 * sum(1 for _doc, doc_id in docs if doc_id.startswith(("lone", "bad")))


def test_row_key_range_is_row_keys():
    """The numpy-made keys of a range of rows are ``row_keys``' byte for byte, trailing NUL bytes kept."""
    from xerj_core.store import keys
    for ix, start, stop in [(0, 0, 300), (7, 250, 260), (2**32 - 1, 2**40 - 3, 2**40 + 3), (3, 5, 5)]:
        assert keys.row_key_range(ix, start, stop) == keys.row_keys(ix, range(start, stop))


def test_put_new_takes_only_the_bulk_ingest_case_and_gives_put_many_results(tmp_path):
    """``IndexWrite.put_new`` writes a batch of new, like documents as ``put_many`` would (same results, same
    stored documents); for a stored id, a repeated id or a reserved (scoped) index it does nothing and says so
    (None), and ``Store.bulk`` then gives ``put_many`` the batch."""
    mapping = {"properties": {"t": {"type": "text"}, "k": {"type": "keyword"}, "n": {"type": "long"}}}
    docs = [{"t": f"word {i} w{i % 7}", "k": f"k{i % 5}", "n": i} for i in range(40)]
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        for store in (a, b):
            store.create_index("i", mapping)
        ids = [f"d{i}" for i in range(40)]
        got = a.transact(lambda txn: txn.index("i").put_new(docs, ids))
        want = b.transact(lambda txn: txn.index("i").put_many([(d, i, "index") for d, i in zip(docs, ids)]))
        assert got == want and [r.result for r in got] == ["created"] * 40
        for store in (a, b):
            assert store.transact(lambda txn: txn.index("i").put_new(docs[:2], ["d1", "x"])) is None  # stored id
            assert store.transact(lambda txn: txn.index("i").put_new(docs[:2], ["y", "y"])) is None  # repeated
        for i in range(40):
            assert a.get("i", f"d{i}") == b.get("i", f"d{i}")
        assert a.count("i") == b.count("i") == 40
        items = a.bulk([BulkOp("index", "i", f"d{i}", {**docs[i], "n": -i}) for i in range(3)])
        assert [item.result.result for item in items] == ["updated"] * 3 and a.get("i", "d2")[0]["n"] == -2
        reserved = RESERVED_PREFIX + "ns"
        a.create_index(reserved, mapping)
        assert a.transact(lambda txn: txn.index(reserved).put_new(docs[:2], ["r0", "r1"])) is None
        items = a.bulk([BulkOp("index", reserved, f"r{i}", docs[i]) for i in range(3)])
        assert [item.result.result for item in items] == ["created"] * 3 and a.get(reserved, "r1")[0] == docs[1]


def bulked(store: Store, index: str, docs: list[tuple[dict, str]], size: int) -> list:
    """Each ``(doc, id)`` indexed through bulks of ``size``: its result, or its item's error."""
    results = []
    for lo in range(0, len(docs), size):
        ops = [BulkOp("index", index, doc_id, doc) for doc, doc_id in docs[lo:lo + size]]
        results += [item.error or item.result for item in store.bulk(ops)]
    return results


def put_one_by_one(store: Store, index: str, docs: list[tuple[dict, str]]) -> list:
    """Each ``(doc, id)`` put on its own: its result, or the exception refusing it."""
    expected = []
    for doc, doc_id in docs:
        try:
            expected.append(store.put(index, doc, doc_id))
        except Exception as exc:  # noqa: BLE001  the same refusal as a bulk's item
            expected.append(exc)
    return expected


def outcomes(results: list) -> list:
    """Results as compared across the two ways: a refusal by its type."""
    return [type(r) if isinstance(r, Exception) else r for r in results]


def test_a_committed_write_transaction_is_freed_without_the_cyclic_collector(tmp_path):
    """Writes run with the collector paused (``collector_paused``), on the promise that reference counting frees
    what a write made. An index opened in a transaction refers back to it, so the store breaks that cycle once it
    is done with the transaction: with the collector off, the transaction (its blocks, records and built columns)
    is gone when the write returns."""
    import gc
    import weakref

    with Store(tmp_path / "data", tail_rows=8) as store:
        store.create_index("t", MAPPING)
        seen: list[weakref.ref] = []

        def bulk(txn):
            seen.append(weakref.ref(txn))
            return txn.index("t").put_many([(_doc(random.Random(i), i), f"d{i}", "index") for i in range(20)])

        was = gc.isenabled()
        gc.disable()
        try:
            done = store.transact(bulk)  # a batch of new documents that seals the tail
            assert [r.seq_no for r in done] == list(range(20))
            assert seen[-1]() is None
            store.transact(lambda txn: (seen.append(weakref.ref(txn)), txn.put("t", _doc(random.Random(1), 1), "d1")))
            assert seen[-1]() is None
        finally:
            if was:
                gc.enable()
        assert store.count("t") == 20
