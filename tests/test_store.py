"""The storage engine: indices, documents, mappings, columns against _source, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xerj_core.errors import (IndexAlreadyExists, IndexNotFound, InvalidIndexName, MapperParsingError,
                              VersionConflict, XerjError)
from xerj_core.store import ABSENT_INT, BulkOp, Store, is_reserved, validate_index_name
from xerj_core.store.write import segment_layout

EDGE_LIKE = {
    "properties": {
        "src": {"type": "keyword", "dictionary": "nodes"},
        "dst": {"type": "keyword", "dictionary": "nodes"},
        "weight": {"type": "float"},
        "valid_at": {"type": "date", "format": "epoch_millis"},
        "invalid_at": {"type": "date", "format": "epoch_millis"},
        "n": {"type": "long"},
        "ok": {"type": "boolean"},
        "evidence": {"properties": {"quote": {"type": "text"}, "offset": {"type": "long"}}},
        "vec": {"type": "dense_vector", "dims": 3},
    }
}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data", tail_rows=4) as s:
        yield s


def test_index_lifecycle(store):
    store.create_index("notes", EDGE_LIKE)
    assert store.exists("notes")
    with pytest.raises(IndexAlreadyExists):
        store.create_index("notes")
    mapping = store.get_mapping("notes")
    assert mapping["properties"]["evidence"]["properties"]["quote"] == {"type": "text"}
    assert mapping["properties"]["src"]["dictionary"] == "nodes"
    assert "notes" in store.index_names()
    store.delete_index("notes")
    assert not store.exists("notes")
    with pytest.raises(IndexNotFound):
        store.delete_index("notes")
    with pytest.raises(IndexNotFound):
        store.get("notes", "x")


@pytest.mark.parametrize("name", ["UPPER", "a b", "_under", "-dash", "+plus", "..", ".", "a*", "a/b", "", "x" * 256])
def test_invalid_index_names(store, name):
    with pytest.raises(InvalidIndexName):
        store.create_index(name)


def test_reserved_prefix_and_dot_names(store):
    store.create_index(".xerj-memory-alice-edges")
    assert is_reserved(".xerj-memory-alice-edges")
    assert not is_reserved("xerj-memory-alice")
    assert validate_index_name(".hidden") == ".hidden"


def test_put_get_overwrite_delete(store):
    first = store.put("docs", {"title": "hello"}, "a")
    assert (first.result, first.version) == ("created", 1)
    second = store.put("docs", {"title": "again"}, "a")
    assert (second.result, second.version) == ("updated", 2)
    assert store.get("docs", "a") == ({"title": "again"}, 2)
    generated = store.put("docs", {"title": "auto"})
    assert len(generated.doc_id) == 20 and store.get("docs", generated.doc_id)[0] == {"title": "auto"}
    with pytest.raises(VersionConflict):
        store.put("docs", {"title": "x"}, "a", op_type="create")
    assert store.delete("docs", "a").result == "deleted"
    assert store.delete("docs", "a").result == "not_found"
    assert store.get("docs", "a") is None
    assert store.count("docs") == 1


def test_dynamic_mapping_follows_es(store):
    store.put("dyn", {"title": "Hello", "n": 3, "f": 1.5, "b": True, "when": "2026-07-01T00:00:00Z",
                      "metadata": {"tag": "x"}})
    props = store.get_mapping("dyn")["properties"]
    assert props["title"]["type"] == "text" and props["title"]["fields"]["keyword"]["type"] == "keyword"
    assert props["n"]["type"] == "long" and props["f"]["type"] == "float"
    assert props["b"]["type"] == "boolean" and props["when"]["type"] == "date"
    assert props["metadata"]["properties"]["tag"]["type"] == "text"


def test_mapping_conflicts_and_bad_documents_leave_nothing_behind(store):
    store.create_index("typed", EDGE_LIKE)
    with pytest.raises(MapperParsingError):
        store.put("typed", {"n": "not a number", "brand_new": 1}, "x")
    with pytest.raises(MapperParsingError):
        store.put("typed", ["not", "an", "object"], "y")
    with pytest.raises(MapperParsingError):
        store.put("typed", {"vec": [1, 2]}, "z")
    with pytest.raises(MapperParsingError):
        store.put("typed", {"weight": math.inf}, "w")
    assert store.count("typed") == 0
    assert "brand_new" not in store.get_mapping("typed")["properties"]
    # a transaction that grew the mapping and then failed grew it in memory alone: a later write, which parses
    # the same stored mapping (see Mapping.stored), does not carry the field

    def grows_then_fails(txn):
        txn.put("typed", {"brand_new": 1}, "x")
        raise RuntimeError("the caller gave up")

    with pytest.raises(RuntimeError):
        store.transact(grows_then_fails)
    store.put("typed", {"n": 1}, "ok")
    assert "brand_new" not in store.get_mapping("typed")["properties"]
    assert store.count("typed") == 1
    with pytest.raises(MapperParsingError):
        store.create_index("badmap", {"properties": {"x": {"type": "nonsense"}}})
    assert not store.exists("badmap")


def test_a_vector_is_refused_for_any_bad_entry_and_kept_exactly_otherwise(store):
    """Plain floats take a quick check (their sum): every bad entry still refuses the vector wherever it sits."""
    store.create_index("typed", EDGE_LIKE)
    bad = [[1.0, 2.0, math.inf], [-math.inf, 2.0, 3.0], [1.0, math.nan, 3.0], [1.0, True, 3.0], [1.0, 2.0],
           [1.0, None, 3.0], [1.0, 2.0, 3.0, 4.0], [math.inf, -math.inf, 1.0], [1.0, "x", 3.0]]
    for n, vector in enumerate(bad):
        with pytest.raises(MapperParsingError, match=r"expects 3 finite numbers|failed to parse"):
            store.put("typed", {"vec": vector}, f"bad{n}")
    assert store.count("typed") == 0
    # A finite number beyond float32 would be an infinity in the column: refused, on either path.
    for vector in ([1e308, 1.0, 2.0], [1, 2, 10**39], [3.5e38, -3.5e38, 1.0]):
        with pytest.raises(MapperParsingError, match=r"beyond the float32 range"):
            store.put("typed", {"vec": vector}, "huge")
    # Ints and numeric strings take the per-element path; the largest float32s and plain floats the quick one.
    good = {"edge": [3.4028234663852886e38, -3.4028234663852886e38, 0.0], "ints": [1, 2, 3],
            "mixed": [1, 2.5, "3.5"], "plain": [0.1, -0.2, 0.3]}
    for doc_id, vector in good.items():
        store.put("typed", {"vec": vector}, doc_id)
    assert store.count("typed") == len(good)
    with store.reader("typed") as reader:
        column = reader.column("vec")
        for doc_id, vector in good.items():
            row = reader.row_of(doc_id)
            assert column.present[row] and column.values[row].tolist() == [float(np.float32(x)) for x in vector]


def test_bulk_reports_items_and_applies_the_rest(store):
    store.create_index("typed", EDGE_LIKE)
    items = store.bulk([
        BulkOp("index", "typed", "1", {"n": 1}),
        BulkOp("index", "typed", "2", {"n": "nope"}),
        BulkOp("create", "typed", "1", {"n": 5}),
        BulkOp("update", "typed", "1", {"doc": {"ok": True}}),
        BulkOp("delete", "typed", "3"),
    ])
    assert [i.error is None for i in items] == [True, False, False, True, True]
    assert items[4].result.result == "not_found"
    assert store.get("typed", "1")[0] == {"n": 1, "ok": True}


def test_segment_layout_is_a_base_fanout_counter():
    from xerj_core.store.write import FANOUT

    assert FANOUT == 8
    assert segment_layout(0, 4) == []
    assert segment_layout(4 * 5, 4) == [(0, 4), (4, 8), (8, 12), (12, 16), (16, 20)]
    assert segment_layout(4 * 8, 4) == [(0, 32)]
    assert segment_layout(4 * 19, 4) == [(0, 32), (32, 64), (64, 68), (68, 72), (72, 76)]
    assert segment_layout(4 * 64, 4) == [(0, 256)]
    # Full segments stop merging: 11 tails of 4 rows with segments of at most 4 tails.
    assert segment_layout(4 * 11, 4, max_tails=4) == [(0, 16), (16, 32), (32, 36), (36, 40), (40, 44)]
    for max_tails in (4, 128):
        layouts = [segment_layout(4 * n, 4, max_tails=max_tails) for n in range(300)]
        for n, (before, after) in enumerate(zip(layouts, layouts[1:])):
            assert after[-1][1] == 4 * (n + 1) and all(a[1] == b[0] for a, b in zip(after, after[1:]))
            # one more tail never rewrites a full segment, and keeps every segment before the merged ones
            full = [s for s in before if s[1] - s[0] == 4 * max_tails]
            assert full == [s for s in after if s[1] - s[0] == 4 * max_tails][:len(full)]
            kept = [s for s in before if s in after]
            assert kept == before[:len(kept)]
            # at most FANOUT - 1 segments of each size below full
            sizes = [e - s for s, e in after if e - s < 4 * max_tails]
            assert all(sizes.count(size) < FANOUT for size in set(sizes))


def test_absent_is_distinct_from_every_value(store):
    store.create_index("e", EDGE_LIKE)
    store.put("e", {"valid_at": 0, "invalid_at": 0}, "zero")
    store.put("e", {"valid_at": 0}, "live")
    with store.reader("e") as r:
        col = r.column("invalid_at")
        rows = {r.id_of(i): i for i in range(r.n_rows)}
        assert col.present[rows["zero"]] and col.values[rows["zero"]] == 0
        assert not col.present[rows["live"]] and col.values[rows["live"]] == ABSENT_INT


@pytest.mark.parametrize("at_once", [3, 4096])
def test_ids_of_answers_as_id_of_row_by_row(store, monkeypatch, at_once):
    """Sealed and tail rows, overwritten and deleted ones, and rows past the last: each as ``id_of`` says,
    whatever the number of records read at once (each a whole document: never all of them)."""
    from xerj_core.store import read

    monkeypatch.setattr(read, "IDS_AT_ONCE", at_once)
    batches = []
    source_records = read.IndexReader.source_records
    monkeypatch.setattr(read.IndexReader, "source_records",
                        lambda self, rows: batches.append(len(rows)) or source_records(self, rows))
    store.create_index("e", EDGE_LIKE)
    for n in range(11):
        store.put("e", {"valid_at": n}, f"d{n}")
    store.put("e", {"valid_at": 99}, "d3")  # overwritten: its first row is dead
    store.delete("e", "d7")
    with store.reader("e") as r:
        rows = list(range(r.n_rows + 2))
        assert r.ids_of(rows) == [r.id_of(row) for row in rows]
        assert sorted(filter(None, r.ids_of(rows))) == sorted(f"d{n}" for n in range(11) if n != 7)
        assert r.ids_of([]) == []
    assert max(batches) == min(at_once, len(rows))


# -- columns agree with _source after random puts, overwrites and deletes -----------------------------

values = st.fixed_dictionaries({}, optional={
    "src": st.sampled_from(["a", "b", "c", "d", "e"]),
    "n": st.integers(-(2**40), 2**40),
    "weight": st.floats(0, 1, width=32),
    "valid_at": st.integers(0, 2**42),
    "invalid_at": st.integers(0, 2**42),
    "ok": st.booleans(),
    "evidence": st.fixed_dictionaries({"quote": st.sampled_from(["hello world", "world of words", "x"])}),
})
ops = st.lists(st.tuples(st.sampled_from(["put", "put", "put", "delete"]), st.integers(0, 12), values),
               min_size=1, max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, batch=st.integers(1, 7))
def test_columns_agree_with_source(tmp_path_factory, ops, batch):
    with Store(tmp_path_factory.mktemp("prop"), tail_rows=4) as store:
        store.create_index("p", EDGE_LIKE)
        for i in range(0, len(ops), batch):
            store.bulk([BulkOp("index", "p", f"d{k}", doc) if op == "put" else BulkOp("delete", "p", f"d{k}")
                        for op, k, doc in ops[i:i + batch]])
        expected: dict[str, dict] = {}
        for op, k, doc in ops:
            if op == "put":
                expected[f"d{k}"] = doc
            else:
                expected.pop(f"d{k}", None)
        with store.reader("p") as r:
            assert r.doc_count == len(expected)
            live_rows = np.flatnonzero(r.live)
            assert sorted(r.id_of(int(row)) for row in live_rows) == sorted(expected)
            nodes = r.field_dictionary("src")
            for row in live_rows:
                doc_id, source, _version = r.document(int(row))
                assert source == expected[doc_id]
                for path in ("n", "valid_at", "invalid_at"):
                    col = r.column(path)
                    assert bool(col.present[row]) == (path in source)
                    if path in source:
                        assert col.values[row] == source[path]
                col = r.column("src")
                assert bool(col.present[row]) == ("src" in source)
                if "src" in source:
                    assert nodes.terms[col.values[row]] == source["src"]
                col = r.column("weight")
                if "weight" in source:
                    assert col.values[row] == np.float32(source["weight"])
                else:
                    assert not col.present[row]
                col = r.column("ok")
                assert bool(col.present[row]) == ("ok" in source)
            for term in ("hello", "world", "words", "x"):
                rows, tfs = r.postings("evidence.quote", term)
                live_hits = {r.id_of(int(row)) for row in rows if r.live[row]}
                want = {i for i, d in expected.items() if term in d.get("evidence", {}).get("quote", "").split()}
                assert live_hits == want


def test_map_grows_on_demand(tmp_path):
    with Store(tmp_path / "small", map_size=1 << 20, tail_rows=64) as store:
        big = "word " * 2000
        store.bulk([BulkOp("index", "grow", str(i), {"text": big, "n": i}) for i in range(300)])
        assert store.count("grow") == 300
        assert store.env.env.info()["map_size"] > 1 << 20


def test_a_value_and_an_object_on_one_path_is_refused_whole(store):
    with pytest.raises(MapperParsingError):
        store.put("clash", {"a": 1, "a.b": 2})
    with pytest.raises(MapperParsingError):
        store.put("clash", {"a": {"b": 1}, "a.b.c": 2})
    store.put("clash", {"x": 1}, "ok")
    assert set(store.get_mapping("clash")["properties"]) == {"x"}


def test_ids_and_names_at_the_limits(store):
    with pytest.raises(MapperParsingError):
        store.put("ids", {"a": 1}, "x" * 508)
    assert store.put("ids", {"a": 1}, "x" * 507).result == "created"
    with pytest.raises(IndexNotFound):
        store.get("", "x")
    assert not store.exists("")


def test_tail_postings_and_columns_follow_every_write(tmp_path):
    """The tail is indexed incrementally; what a reader sees equals a recount from the sources."""
    with Store(tmp_path / "data", tail_rows=8) as store:
        for i in range(40):
            store.put("t", {"text": f"w{i % 5} common " * (1 + i % 3)}, str(i % 23))  # overwrites leave dead rows
            if i % 7 == 3:
                store.delete("t", str(i % 11))
            with store.reader("t") as reader:
                sources = {row: reader.document(int(row))[1] for row in reader.live_rows()}
                for term in ("common", "w1", f"w{i % 5}", "absent"):
                    rows, tfs = reader.postings("text", term)
                    live = {int(r): int(t) for r, t in zip(rows, tfs) if reader.live[r]}
                    want = {row: src["text"].split().count(term) for row, src in sources.items()
                            if term in src["text"].split()}
                    assert live == want
                lengths = reader.column("text").values
                assert {row: int(lengths[row]) for row in sources} == {
                    row: len(src["text"].split()) for row, src in sources.items()}


def test_tail_postings_looked_up_between_writes_are_the_recount(tmp_path):
    """A term looked up within a few writes is found in their blocks alone, one after the other (a put's block,
    a bulk's block of many documents, a block without the term, a delete's); looked up after more writes, in the
    merged runs. Either way a reader, new or older, sees what its sources say."""
    from xerj_core.store import read

    rng = np.random.default_rng(3)
    words = ["w0", "w1", "w2", "common", "rare"]
    with Store(tmp_path / "data", tail_rows=512) as store:
        for i in range(120):
            if i % 9 == 4:
                store.bulk([BulkOp("index", "t", f"b{i}-{j}", {"text": " ".join(rng.choice(words[:4], 3))})
                            for j in range(int(rng.integers(2, 6)))])
            elif i % 13 == 6:
                store.delete("t", f"p{i - 1}")
            else:
                store.put("t", {"text": " ".join(rng.choice(words, int(rng.integers(1, 5))))}, f"p{i}")
            looked = [term for k, term in enumerate(words) if i % (k + 1) == 0]  # every 1, 2, ... 5 writes
            with store.reader("t") as reader:
                assert reader.snapshot.tail.blocks  # nothing sealed: the tail holds every write
                texts = {int(row): reader.document(int(row))[1]["text"].split() for row in reader.live_rows()}
                for term in looked + ["absent"]:
                    rows, tfs = reader.postings("text", term)
                    assert (np.diff(rows) > 0).all()
                    got = {int(r): int(t) for r, t in zip(rows, tfs) if reader.live[r]}
                    assert got == {row: text.count(term) for row, text in texts.items() if term in text}, (i, term)
        assert read._FEW_NEW_BLOCKS < 5  # the lookups every 5 writes took the merged runs


def test_an_older_reader_keeps_its_snapshot(tmp_path):
    with Store(tmp_path / "data", tail_rows=64) as store:
        store.put("t", {"text": "apple", "n": 1}, "a")
        with store.read_txn() as old_txn:
            old = store.open_reader(old_txn, "t")
            store.put("t", {"text": "apple pie", "n": 2}, "b")
            store.delete("t", "a")
            with store.reader("t") as new:
                assert new.postings("text", "apple")[0].tolist() == [0, 1]
                assert new.live.tolist() == [False, True]
            # The newer generation loaded into the shared cache changes nothing for the older reader.
            assert old.postings("text", "apple")[0].tolist() == [0]
            assert old.live.tolist() == [True]
            assert old.column("n").values.tolist() == [1]
        with store.read_txn() as older_txn:
            store.put("t", {"n": 3}, "c")
            with store.reader("t") as newest:
                assert newest.doc_count == 2
            behind = store.open_reader(older_txn, "t")  # a transaction older than the cache
            assert behind.doc_count == 1 and behind.live.tolist() == [False, True]


def test_full_segments_stop_merging_and_stay_correct(tmp_path, monkeypatch):
    import xerj_core.store.write as write

    monkeypatch.setattr(write, "MAX_SEGMENT_TAILS", 2)
    with Store(tmp_path / "data", tail_rows=4) as store:
        store.create_index("p", EDGE_LIKE)
        expected = {}
        for i in range(60):
            doc = {"n": i, "src": "abcde"[i % 5], "evidence": {"quote": f"word{i % 3} shared"}}
            store.put("p", doc, f"d{i % 40}")
            expected[f"d{i % 40}"] = doc
        with store.reader("p") as r:
            sizes = [seg.end - seg.start for seg in r.segments]
            assert max(sizes) == 8 and sizes.count(8) >= 6
            for row in r.live_rows():
                doc_id, source, _ = r.document(int(row))
                assert source == expected[doc_id] and r.column("n").values[row] == source["n"]
            rows, _tfs = r.postings("evidence.quote", "shared")
            assert {r.id_of(int(x)) for x in rows if r.live[x]} == set(expected)


# -- the compiled write plan answers exactly as the generic path does ----------------------------------

STRICTLESS = {
    "dynamic": False,
    "properties": {
        "src": {"type": "keyword", "dictionary": "nodes"},
        "n": {"type": "long"},
        "w": {"type": "float"},
        "evidence": {"properties": {"quote": {"type": "text"}, "offset": {"type": "long"}}},
        "empty": {"type": "object"},
    },
}
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40), st.floats(allow_nan=False, width=32),
                     st.sampled_from(["a", "b c", "12", "2024-01-02"]))
# "quote" and "offset" are mapped only under "evidence": at the top level they are unmapped.
_keys = st.sampled_from(["src", "n", "w", "evidence", "empty", "recorded_at", "extra", "a.b", "evidence.quote",
                         "empty.x", "", "quote", "offset"])
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(_keys, inner, max_size=3)), max_leaves=6)


def _record_or_error(store, doc):
    try:
        return store.transact(lambda txn: txn.index("p").record_for(doc))
    except MapperParsingError as exc:
        return ("error", str(exc))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.dictionaries(_keys, _values, max_size=5), min_size=1, max_size=6))
# Two faults in one document: the generic path's nested-list refusal comes before n's conversion error.
@example(docs=[{"n": False, "src": [[]]}])
@example(docs=[{"n": "x", "src": ["a", {"b": 1}]}])
# Nested mapped fields: evidence's own leaves, and a top-level key that shares a leaf's last name.
@example(docs=[{"evidence": {"quote": "a b", "offset": 3}, "quote": "x", "offset": 1}])
def test_the_write_plan_answers_as_the_generic_path(tmp_path_factory, docs):
    """Under ``dynamic: false`` the plan passes unmapped scalars by; every record and refusal stays the same."""
    from xerj_core.store import plan as plan_module

    base = tmp_path_factory.mktemp("plan")
    with Store(base / "planned") as planned, Store(base / "generic") as generic:
        planned.create_index("p", STRICTLESS)
        generic.create_index("p", STRICTLESS)
        for doc in docs:
            want = _record_or_error(planned, doc)
            original = plan_module.WritePlan.record, plan_module.WritePlan.values
            plan_module.WritePlan.record = lambda self, *a: None
            plan_module.WritePlan.values = lambda self, *a: None
            try:
                got = _record_or_error(generic, doc)
            finally:
                plan_module.WritePlan.record, plan_module.WritePlan.values = original
            assert want == got, doc
        assert planned.get_mapping("p") == generic.get_mapping("p")


def test_an_edge_with_unmapped_fields_takes_the_plan(store):
    """An edge document's ``recorded_at`` (unmapped under ``dynamic: false``) does not send it down the generic
    path, whose per-document flattening the plan exists to skip."""
    from xerj_core.graph.brain import EDGE_MAPPING
    from xerj_core.store.write import IndexWrite

    store.create_index("edges", EDGE_MAPPING)
    doc = {"src": "a", "dst": "b", "type": "links_to", "weight": 1.0, "recorded_at": 5,
           "evidence": {"quote": "see b", "source": "a.md", "offset": 3, "line": 2}}
    calls = []
    original = IndexWrite._generic_values
    IndexWrite._generic_values = lambda self, d: calls.append(d) or original(self, d)
    try:
        store.put("edges", doc, "e1")
    finally:
        IndexWrite._generic_values = original
    assert calls == []
    assert store.get("edges", "e1")[0] == doc


# -- records prepared a batch at a time equal those prepared document by document ------------------------

_typed = {"src": st.sampled_from(["a", "b", "n1", "n2", "x" * 600]), "n": st.integers(-5, 2**40),
          "w": st.floats(0, 1, width=32), "recorded_at": st.integers(0, 9),
          "evidence": st.fixed_dictionaries({}, optional={"quote": st.sampled_from(["see b", "a b a", ""]),
                                                          "offset": st.integers(0, 9)})}


def _batch_state(store, items, batched):
    def run(txn):
        target = txn.index("p")
        if batched:
            results = target.put_many(items)
        else:
            results = []
            for doc, doc_id, op_type in items:
                try:
                    results.append(target.put(doc, doc_id, op_type=op_type))
                except XerjError as exc:
                    results.append(exc)
        shown = [r if not isinstance(r, XerjError) else ("error", type(r).__name__, str(r)) for r in results]
        stored = [target.get(doc_id) for _doc, doc_id, _op in items if doc_id]  # sources and versions written
        # Ordinals compared by term: new terms' numbers show the order they were given in. The pending rows are
        # compared as the tail block they become (column values and postings as stored).
        pending = target.pending_block()
        return shown, None if pending is None else pending.encode(), {k: sorted(v.items()) for k, v in target.dict_cache.items() if v}, \
            dict(target.skipped), stored, target.state
    return store.transact(run)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), shapes=st.lists(st.lists(st.one_of(st.sampled_from(list(_typed)), _keys), unique=True,
                                                max_size=4), min_size=1, max_size=3))
def test_records_prepared_in_a_batch_equal_one_by_one(tmp_path_factory, data, shapes):
    """``put_many`` (like documents' records prepared field by field) gives the same results, records,
    dictionary ordinals (same order) and skip counts as ``put`` item by item, whatever the documents hold."""
    items = []
    for i in range(data.draw(st.integers(1, 12))):
        shape = data.draw(st.sampled_from(shapes))
        typed = data.draw(st.integers(0, 3)) > 0
        doc = {k: data.draw(_typed[k] if typed and k in _typed else _values) for k in shape}
        doc_id = data.draw(st.sampled_from([f"d{i}", f"d{i % 3}", ""]))
        items.append((doc, doc_id, data.draw(st.sampled_from(["index", "create"]))))
    base = tmp_path_factory.mktemp("batch")
    with Store(base / "one") as one, Store(base / "many") as many:
        one.create_index("p", STRICTLESS)
        many.create_index("p", STRICTLESS)
        one.put("p", {"src": "n1"}, "seed")  # a committed ordinal, found through the shared cache
        many.put("p", {"src": "n1"}, "seed")
        assert _batch_state(many, items, True) == _batch_state(one, items, False)


def test_like_documents_take_the_batch_path(store):
    """A bulk of edge-like documents is prepared field by field (no document by document record)."""
    from xerj_core.graph.brain import EDGE_MAPPING
    from xerj_core.store.write import IndexWrite

    store.create_index("edges", EDGE_MAPPING)
    docs = [{"src": f"n{i}", "dst": f"n{i + 1}", "type": "links_to", "weight": 0.5, "recorded_at": i,
             "evidence": {"quote": f"see n{i + 1}", "source": "a.md", "offset": i}} for i in range(5)]
    calls = []
    original = IndexWrite.record_for
    IndexWrite.record_for = lambda self, d: calls.append(d) or original(self, d)
    try:
        items = store.bulk([BulkOp("index", "edges", f"e{i}", doc) for i, doc in enumerate(docs)])
    finally:
        IndexWrite.record_for = original
    assert calls == [] and all(item.error is None for item in items)
    with store.reader("edges") as r:
        nodes = r.field_dictionary("src").terms
        assert nodes[:6] == [f"n{i}" for i in range(6)]  # src then dst of each document, in order
        assert [r.get(f"e{i}")[0] for i in range(5)] == docs
        assert r.postings("evidence.quote", "see")[0].tolist() == list(range(5))


def test_every_stored_posting_key_belongs_to_a_current_segment(tmp_path):
    """A seal rewrites the segment at the start of the merged region without deleting it first: each sealed
    segment's posting keys are exactly the terms of its rows, and nothing is left under an old segment."""
    import random

    from xerj_core.store import keys, postpack
    from xerj_core.text import tokenize

    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    with Store(tmp_path / "data", tail_rows=4) as store:
        for batch in range(30):
            store.bulk([BulkOp("index", "p", f"d{batch}-{i}", {"text": " ".join(rng.sample(words, rng.randint(1, 4)))})
                        for i in range(rng.randint(1, 9))])
        with store.read_txn() as raw, store.reader("p") as r:
            assert len(r.segments) > 1
            bounds = [(s.start, s.end) for s in r.segments]
            assert [b for _a, b in bounds[:-1]] == [a for a, _b in bounds[1:]] and bounds[-1][1] == r.tail_start
            expected: dict = {}
            for seg in r.segments:
                for row in range(seg.start, seg.end):
                    for term in tokenize(r.get(r.id_of(row))[0]["text"]):
                        expected.setdefault((seg.start, term), set()).add(row)
            stored = {}
            prefix = keys.ix_key(r.ix)
            by_segment: dict = {}
            with raw.cursor(db=store.env.dbs["post"]) as cur:
                cur.set_range(prefix)
                for key, blob in cur:
                    if not key.startswith(prefix):
                        break
                    # a key is a bucket of terms or one large term (xerj_core.store.postpack)
                    start, suffix = keys.read_u64(key, 4), key[12:].split(b"\x00", 1)[1]
                    assert key[12:].split(b"\x00", 1)[0] == b"text"
                    by_segment.setdefault(start, ([], []))[0].append(suffix)
                    by_segment[start][1].append(blob)
            for start, (suffixes, blobs) in by_segment.items():
                segment = next(s for s in r.segments if s.start == start)
                terms, counts, rows, _tfs = postpack.unpack(suffixes, blobs)
                ends = np.cumsum(counts)
                for term, count, end in zip(terms, counts, ends):
                    assert (start, term.decode()) not in stored  # one entry per term and segment
                    stored[(start, term.decode())] = set(rows[end - count:end].tolist())
                    assert stored[(start, term.decode())] == set(
                        r.segment_postings(segment, "text", term.decode())[0].tolist())
            assert stored == expected


def test_a_reopened_store_finds_stored_terms_ordinals(tmp_path):
    """A term stored by an earlier process (not in this one's caches) gets its stored ordinal back from the
    same insert-if-absent that adds a new term, and new terms continue the numbering."""
    with Store(tmp_path / "data") as store:
        store.create_index("t", {"properties": {"tag": {"type": "keyword"}}})
        store.bulk([BulkOp("index", "t", f"a{i}", {"tag": f"t{i}"}) for i in range(5)])
    with Store(tmp_path / "data") as store:
        store.bulk([BulkOp("index", "t", f"b{i}", {"tag": f"t{4 - i}"}) for i in range(7)] +
                   [BulkOp("index", "t", "c", {"tag": "t3"})])
        with store.reader("t") as r:
            terms = r.field_dictionary("tag").terms
            assert terms == ["t0", "t1", "t2", "t3", "t4", "t-1", "t-2"]
            tags = r.column("tag")
            for doc_id in [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(7)] + ["c"]:
                row = r.row_of(doc_id)
                assert terms[tags.values[row]] == r.get(doc_id)[0]["tag"]
