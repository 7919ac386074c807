"""A reader's dead rows are kept as rows die, not found anew by a pass over every row: at every generation they
equal the rows its live mask leaves out, through overwrites of tail and sealed rows, deletes, seals and a
compaction, for readers left open across writes and for a second store reading the same directory; BM25's field
statistics, which keep the sealed dead rows' sums between writes, equal a count over the live documents."""

from __future__ import annotations

import numpy as np

from xerj_core.query import bm25
from xerj_core.store import BulkOp, Store
from xerj_core.text import tokenize

WORDS = [f"w{i}" for i in range(30)] + ["日本", "é"]


def _text(rng) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(0, 10))))  # some documents hold no token


def _check(store: Store) -> None:
    with store.reader("c") as reader:
        dead = reader.dead_rows()
        assert dead.dtype == np.int64
        assert dead.tolist() == np.flatnonzero(~reader.live).tolist()
        lengths = [len(tokenize(reader.document(row)[1]["text"])) for row in reader.live_rows().tolist()]
        with_tokens = [n for n in lengths if n]
        stats = bm25.field_stats(reader, "text")
        assert stats.doc_count == len(with_tokens)
        assert stats.avgdl == (sum(with_tokens) / len(with_tokens) if with_tokens else 1.0)


def test_dead_rows_and_field_statistics_follow_every_write(tmp_path):
    rng = np.random.default_rng(7)
    data = tmp_path / "data"
    with Store(data, tail_rows=64) as store:
        store.create_index("c", {"properties": {"text": {"type": "text"}}})
        store.bulk([BulkOp("index", "c", str(i), {"text": _text(rng)}) for i in range(300)])
        kinds = []
        for step in range(260):
            kind = rng.choice(["put", "overwrite tail", "overwrite sealed", "delete", "bulk"], p=[.3, .2, .2, .2, .1])
            if kind == "put":
                store.put("c", {"text": _text(rng)}, f"p{step}")
            elif kind == "overwrite tail":
                store.put("c", {"text": _text(rng)}, f"p{step - 1}")  # the put before, if any: a tail row
            elif kind == "overwrite sealed":
                store.put("c", {"text": _text(rng)}, str(int(rng.integers(0, 300))))
            elif kind == "delete":
                store.delete("c", str(int(rng.integers(0, 300))))
            else:  # several kills in one transaction, one of them twice over (written, then overwritten)
                ids = [str(i) for i in rng.integers(0, 300, 5)] + ["twice", "twice"]
                store.bulk([BulkOp("index", "c", doc_id, {"text": _text(rng)}) for doc_id in ids])
            kinds.append(kind)
            if step % 5 == 0:
                _check(store)
        _check(store)
        with store.reader("c") as reader:
            assert reader.segments and len(reader.dead_rows()) > 100
            before = len(reader.dead_rows())
        with Store(data, tail_rows=64) as other:  # its cache learns every kill at once
            _check(other)
        assert store.forcemerge("c")  # renumbers the rows (a new epoch): what the cache knew by row is dropped
        _check(store)
        with store.reader("c") as reader:
            after = len(reader.dead_rows())  # the rows left between the sealed rows and the tail, if any
            assert after < before
        store.delete("c", "5")
        store.put("c", {"text": "w1 w2"}, "7")
        _check(store)
        with store.reader("c") as reader:
            assert len(reader.dead_rows()) == after + 2
    assert {"overwrite sealed", "overwrite tail", "delete", "bulk"} <= set(kinds)


def test_a_reader_left_open_keeps_its_own_generations_dead_rows(tmp_path):
    with Store(tmp_path / "data", tail_rows=16) as store:
        store.create_index("c", {"properties": {"text": {"type": "text"}}})
        store.bulk([BulkOp("index", "c", str(i), {"text": f"w{i % 7} w1"}) for i in range(40)])
        store.delete("c", "3")
        with store.reader("c") as before:
            for i in range(10):
                store.put("c", {"text": "w2"}, str(i * 4))  # kills sealed rows while ``before`` is open
            assert before.dead_rows().tolist() == np.flatnonzero(~before.live).tolist() == [3]
            assert bm25.field_stats(before, "text").doc_count == 39
            with store.reader("c") as after:
                assert after.dead_rows().tolist() == np.flatnonzero(~after.live).tolist()
                assert len(after.dead_rows()) == 11  # row 3 and the ten overwritten rows
                assert bm25.field_stats(after, "text").doc_count == 39
