"""A read after this process's own write takes the new tail rows from the blocks the write built, once a read has
shown the process the whole tail (a data directory opened with rows in its tail): what it then sees, and what
later seals write, equal what reading every block back from LMDB gives; a write by another store is read back."""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.store import BulkOp, Store, tailblock
from xerj_core.store import read as read_module

WORDS = [f"w{i}" for i in range(40)] + ["日本", "é"]


def _text(rng) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(1, 12))))


def _view(store: Store) -> dict:
    """Everything a reader derives from the tail and the segments, per document id."""
    with store.reader("c") as reader:
        seen = {}
        for row in reader.live_rows().tolist():
            doc_id, source, _version = reader.document(row)
            seen[doc_id] = (source["text"], int(reader.column("n").values[row]))
        postings = {}
        for word in WORDS:
            rows, tfs = reader.postings("text", word)
            postings[word] = sorted((reader.id_of(int(r)), float(t)) for r, t in zip(rows, tfs) if reader.live[r])
        return {"docs": seen, "postings": postings, "layout": [(s, e) for s, e, _at in reader.sealed_layout()],
                "tail": reader.tail_count}


@pytest.fixture
def reads(monkeypatch):
    """Rows the readers read back from LMDB's tail (start, end) per refresh."""
    found = []
    original = tailblock.read

    def spy(cur, ix, start, end, fields):
        found.append((start, end))
        return original(cur, ix, start, end, fields)

    monkeypatch.setattr(read_module.tailblock, "read", spy)
    return found


def test_reads_after_own_writes_use_the_written_blocks_and_see_what_lmdb_holds(tmp_path, reads):
    rng = np.random.default_rng(3)
    data, again = tmp_path / "data", tmp_path / "again"
    ops = [("put", str(i), _text(rng)) for i in range(300)]
    ops += [("delete", str(i), None) for i in range(0, 300, 17)]
    ops += [("put", str(i), _text(rng)) for i in range(0, 300, 13)]  # overwrites
    ops += [("put", f"n{i}", _text(rng)) for i in range(260)]  # past the tail: a seal
    with Store(data, tail_rows=128) as first:
        first.create_index("c", {"properties": {"text": {"type": "text"}, "n": {"type": "long"}}})
        first.bulk([BulkOp("index", "c", str(i), {"text": _text(rng), "n": i}) for i in range(200)])
    with Store(data, tail_rows=128) as store:  # a process opening a data directory with rows in its tail
        _view(store)
        assert reads, "the first read of this process reads the tail back"
        reads.clear()
        for n, (op, doc_id, text) in enumerate(ops):
            if op == "put":
                store.put("c", {"text": text, "n": n}, doc_id)
            else:
                store.delete("c", doc_id)
            with store.reader("c") as reader:
                reader.postings("text", "w1")
        assert not reads, "no read after a write of this process read the rows back"
        mine = _view(store)
    with Store(data, tail_rows=128) as fresh:  # read back whole from LMDB
        assert _view(fresh) == mine
    assert reads, "a store that did not write them reads them back"
    # the same writes by a store that never read before writing: the same segments and tail
    with Store(again, tail_rows=128) as other:
        other.create_index("c", {"properties": {"text": {"type": "text"}, "n": {"type": "long"}}})
        rng = np.random.default_rng(3)
        other.bulk([BulkOp("index", "c", str(i), {"text": _text(rng), "n": i}) for i in range(200)])
        for n, (op, doc_id, text) in enumerate(ops):
            if op == "put":
                other.put("c", {"text": text, "n": n}, doc_id)
            else:
                other.delete("c", doc_id)
        assert _view(other) == mine


def test_a_write_by_another_store_is_read_back(tmp_path, reads):
    data = tmp_path / "data"
    with Store(data, tail_rows=64) as one, Store(data, tail_rows=64) as two:
        one.create_index("c", {"properties": {"text": {"type": "text"}, "n": {"type": "long"}}})
        one.put("c", {"text": "w1 w2", "n": 1}, "a")
        _view(one)
        two.put("c", {"text": "w1 w3", "n": 2}, "b")  # another writer: this generation is not one's
        reads.clear()
        seen = _view(one)
        assert set(seen["docs"]) == {"a", "b"} and reads, "the other store's row is read back from LMDB"
        one.put("c", {"text": "w3", "n": 3}, "c")
        assert set(_view(one)["docs"]) == {"a", "b", "c"}
        assert _view(two) == _view(one)


def test_readers_on_other_threads_see_each_generation_whole_while_one_writes(tmp_path):
    """A writer thread puts, overwrites and deletes (seals included) while reader threads open readers: each
    reader's rows, postings and live count agree with its own generation, however the blocks reached it."""
    import threading

    data = tmp_path / "data"
    rng = np.random.default_rng(9)
    with Store(data, tail_rows=64) as store:
        store.create_index("c", {"properties": {"text": {"type": "text"}, "n": {"type": "long"}}})
        store.put("c", {"text": "w1", "n": -1}, "seed")
        stop, failures = threading.Event(), []

        def write() -> None:
            try:
                for n in range(400):
                    store.put("c", {"text": _text(rng), "n": n}, f"d{n % 150}")  # overwrites after 150
                    if n % 13 == 0:
                        store.delete("c", f"d{(n * 7) % 150}")
            finally:
                stop.set()

        def read() -> None:
            try:
                while not stop.is_set():
                    with store.reader("c") as reader:
                        live = reader.live_rows()
                        assert len(live) == reader.doc_count
                        texts = {int(r): reader.document(int(r))[1]["text"].split() for r in live.tolist()}
                        for word in ("w1", "w2", "日本"):
                            rows, tfs = reader.postings("text", word)
                            found = {int(r): int(t) for r, t in zip(rows, tfs) if reader.live[r]}
                            assert found == {r: t.count(word) for r, t in texts.items() if word in t}, word
            except Exception as exc:  # reported on the main thread
                failures.append(exc)
                stop.set()

        threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[0]
        mine = _view(store)
    with Store(data, tail_rows=64) as fresh:
        assert _view(fresh) == mine
