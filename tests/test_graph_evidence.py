"""Ego with evidence: the listed edges read from their stored documents all at once.

``reading._documents_as_edges`` writes ``edge_id``, ``hop`` and ``direction`` into the stored JSON and decodes
every edge with one ``orjson.loads``; it must give, key order included, what decoding each document and
reshaping its dict gives (the oracle below), whatever the documents hold: keys ego sets or leaves out, at the top
or nested, ids JSON must escape, rows without a document. Through the engine, the lean path must answer with
evidence as the general path does, and documents written through the ES door must come out as the oracle says.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import orjson
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import reading
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.store import keys

from tests.test_graph_lean import answered_both_ways

T0 = 1_767_225_600_000
EDGES = ".xerj-memory-b-edges"
SPECIAL = ["edge_id", "hop", "direction", "schema_version", "src_file", "src_format", "dst_format", "invalid_at",
           "expired_at", "evidence", "src", "dst", "trust"]


def shaped_one_at_a_time(records: list[bytes | None], outs: list[bool], hops: list[int]) -> list[dict]:
    """The oracle: each stored document decoded, then reshaped as ego lists an edge."""
    edges = []
    for record, out, hop in zip(records, outs, hops):
        if record is None:
            continue
        _version, doc_id, offset = keys.unpack_source_header(record)
        edge = orjson.loads(record[offset:])
        for name in ("schema_version", "src_file", "src_format", "dst_format"):
            edge.pop(name, None)
        edge["edge_id"] = doc_id
        edge["hop"] = hop
        edge["direction"] = "out" if out else "in"
        for name in ("invalid_at", "expired_at", "evidence"):
            if name not in edge:
                edge[name] = None
        edges.append(edge)
    return edges


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # JSON text holds no lone surrogate
# strings that look like the JSON of the keys ego sets or leaves out, so a search of the text would meet them
tricky = st.sampled_from(['"schema_version":1,', '},"src_file":"x"', '\\"', '\\', '"', '{"edge_id":"', '}', '{'])
scalars = (st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1)
           | st.floats(allow_nan=False, allow_infinity=False) | text | tricky)
names = st.sampled_from(SPECIAL) | text
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=4),
                      max_leaves=8)
documents = st.dictionaries(names, values, max_size=8)
ids = st.sampled_from(["0123456789abcdef0123456789abcdef", "a", "note-1"]) | st.text(
    st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10)
records = st.lists(st.none() | st.tuples(documents, ids, st.integers(1, 2**40)), max_size=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(found=records, data=st.data())
def test_documents_decoded_at_once_are_the_documents_decoded_one_by_one(monkeypatch, found, data):
    stored = [None if entry is None else keys.pack_source(entry[2], entry[1], orjson.dumps(entry[0]))
              for entry in found]
    outs = data.draw(st.lists(st.booleans(), min_size=len(stored), max_size=len(stored)))
    hops = data.draw(st.lists(st.integers(1, 3), min_size=len(stored), max_size=len(stored)))
    fallback = []
    one_by_one = reading._shaped_one_by_one
    monkeypatch.setattr(reading, "_shaped_one_by_one", lambda *args: fallback.append(1) or one_by_one(*args))
    got = reading._documents_as_edges(stored, outs, hops)
    assert orjson.dumps(got) == orjson.dumps(shaped_one_at_a_time(stored, outs, hops))
    # only an empty document (no key to write the id after) is decoded one by one
    assert bool(fallback) == any(entry is not None and not entry[0] for entry in found)


def test_keys_the_document_holds_keep_their_place():
    doc = {"hop": "stored", "edge_id": "another", "schema_version": 1, "nested": {"schema_version": 2, "hop": 3},
           "direction": None, "src_file": "f.md", "invalid_at": 5}
    stored = [keys.pack_source(3, 'id "with" \\ quotes\n', orjson.dumps(doc)), None,
              keys.pack_source(1, "plain", orjson.dumps({"src": "a"}))]
    got = reading._documents_as_edges(stored, [False, True, True], [2, 1, 1])
    assert [list(edge) for edge in got] == [
        ["hop", "edge_id", "nested", "direction", "invalid_at", "expired_at", "evidence"],
        ["src", "edge_id", "hop", "direction", "invalid_at", "expired_at", "evidence"]]
    assert got[0]["hop"] == 2 and got[0]["edge_id"] == 'id "with" \\ quotes\n' and got[0]["direction"] == "in"
    assert got[0]["nested"] == {"schema_version": 2, "hop": 3}
    assert orjson.dumps(got) == orjson.dumps(shaped_one_at_a_time(stored, [False, True, True], [2, 1, 1]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(3, 20), edges=st.integers(5, 70))
def test_the_lean_path_answers_with_evidence_as_the_general_path(monkeypatch, seed, nodes, edges):
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=8)) as engine:
            drafts = [EdgeDraft(f"n{int(s)}", f"n{int(d)}", str(rng.choice(["cites", "relates_to"])), "d@1",
                                float(rng.choice([0.0, 0.5, 0.7, 1.0])), float(rng.choice([0.5, 1.0])),
                                T0 + int(rng.integers(0, 4)) * 1000,
                                Evidence(f"n{int(s)} says \"n{int(d)}\"", f"n{int(s)}.md", int(s))
                                if rng.random() < 0.7 else None)
                      for s, d in rng.integers(0, nodes, (edges, 2)) if s != d]
            assume(drafts)  # every pair a self-loop (left out): no edge, so no brain to ask
            for at in range(0, len(drafts), 5):  # several writes: sealed segments, then a tail
                engine.graph.write_edges("b", drafts[at:at + 5], created_at=T0)
            with engine.store.reader(EDGES) as found:
                live = [found.id_of(int(row)) for row in found.live_rows()]
            live = [edge_id for edge_id in live if not edge_id.startswith("__")]
            retire = [live[i] for i in rng.choice(len(live), len(live) // 4, replace=False)]
            engine.graph.invalidate_edges("b", edge_ids=retire, at=T0 + 1500)
            taken = 0
            for node in range(nodes + 1):
                for hops in (1, 2):
                    for limit in (1, 4, 100):
                        for as_of in (T0 + 1000, T0 + 10**9):
                            query = {"node": f"n{node}", "hops": hops, "direction": "both", "limit": limit,
                                     "as_of": as_of}  # include_evidence defaults to true
                            fast, general, lean = answered_both_ways(engine, monkeypatch, query)
                            assert fast == general, query
                            taken += lean
            assert taken  # the lean path answered some


def test_edges_written_through_the_es_door_come_out_as_their_documents_say(monkeypatch):
    """Documents no graph writer made (odd ids, a stored ``hop``, no ``edge_id``, nested keys ego leaves out at
    the top) listed by both paths, each as the oracle reshapes its stored document."""
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=4)) as engine:
            engine.graph.link("b", {"src": "a", "dst": "z", "type": "t", "valid_at": T0})  # makes the index
            odd = {'q"uote': {"hop": "stored", "schema_version": 7},
                   "back\\slash": {"evidence": {"schema_version": 1, "src_file": "nested.md"}, "src_file": "x.md"},
                   "ünï\tcode": {"edge_id": "not the id", "direction": "sideways", "expired_at": None},
                   "plain": {}}
            for i, (doc_id, extra) in enumerate(odd.items()):
                engine.store.put(EDGES, {"src": "a" if i % 2 else f"m{i}", "dst": f"m{i}" if i % 2 else "a",
                                         "type": "t", "weight": 0.5 + i / 10, "confidence": 1.0, "valid_at": T0,
                                         "trust": "detected", **extra}, doc_id)
            for i in range(8):  # seal the odd ones into a segment, and leave a tail behind
                engine.graph.link("b", {"src": f"m{i % 4}", "dst": f"far{i}", "type": "t", "valid_at": T0})
            with engine.store.reader(EDGES) as reader:
                assert reader.tail_count and reader.row_of("plain") < reader.tail_start
            for hops in (1, 2):
                query = {"node": "a", "hops": hops, "as_of": T0 + 1, "limit": 100}
                fast, general, lean = answered_both_ways(engine, monkeypatch, query)
                assert lean and fast == general
                body = orjson.loads(fast)
                with engine.store.reader(EDGES) as reader:
                    rows = [reader.row_of(edge["edge_id"]) for edge in body["edges"]]
                    stored = reader.source_records(rows)
                outs = [edge["direction"] == "out" for edge in body["edges"]]
                hop_numbers = [edge["hop"] for edge in body["edges"]]
                assert set(odd) <= {edge["edge_id"] for edge in body["edges"]}
                assert orjson.dumps(body["edges"]) == orjson.dumps(shaped_one_at_a_time(stored, outs, hop_numbers))


def test_source_records_are_the_stored_records_of_live_rows():
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=4)) as engine:
            ids = [engine.graph.link("b", {"src": "a", "dst": f"d{i}", "type": "t", "valid_at": T0})[1]["edge_id"]
                   for i in range(6)]
            with engine.store.reader(EDGES) as reader:
                old = reader.row_of(ids[2])
            engine.graph.unlink("b", ids[2], invalid_at=T0 + 1)  # rewritten: its old row dies
            with engine.store.reader(EDGES) as reader:
                rows = [reader.row_of(edge_id) for edge_id in ids] + [old, reader.n_rows + 5]
                found = reader.source_records(rows)
                assert found[-2:] == [None, None]
                for row, record in zip(rows[:-2], found):
                    _version, doc_id, offset = keys.unpack_source_header(record)
                    assert (doc_id, orjson.loads(record[offset:])) == reader.document(row)[:2]


def test_source_records_leave_out_a_stored_row_of_another_tenant():
    """A row whose record is stored but which another tenant wrote (misrouted into this brain's edges index) reads
    as no document, wherever it lies among the rows asked for; the scope check is one take over the rows."""
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=4)) as engine:
            ids = [engine.graph.link("b", {"src": "a", "dst": f"d{i}", "type": "t", "valid_at": T0})[1]["edge_id"]
                   for i in range(5)]
            stray = {"src": "a", "dst": "other-tenant", "type": "t", "valid_at": T0, "edge_id": "f" * 32}
            engine.store.transact(lambda txn: txn.put(EDGES, stray, "f" * 32, scope="someone-else"))
            with engine.store.reader(EDGES) as reader:
                own = [reader.row_of(edge_id) for edge_id in ids]
                stray_row = reader.n_rows - 1
                assert reader.txn.get(keys.row_key(reader.ix, stray_row), db=reader.dbs["src"]) is not None
                rows = [own[0], stray_row, *own[1:], stray_row]
                found = reader.source_records(rows)
                assert found[1] is None and found[-1] is None
                assert [keys.unpack_source_header(record)[1] for record in found[:1] + found[2:-1]] == ids
