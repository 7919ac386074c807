"""Ego with evidence from the edge listings packed per sealed segment (``xerj_core.graph.rowdocs``).

A listing (``fragment``) closed by its ``TAILS`` entry must decode, key order included, to what the oracle makes
of the stored document, whatever the document holds (``hop`` or ``direction`` of its own included). Through the
engine, the lean path with evidence must read no stored record for an edge of a sealed segment (only the tail's,
and a listing too large for its span), answer as the general path does, and keep each segment's listings across
a rebuild of the view.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import hop, rowdocs
from xerj_core.store import IndexReader, keys

from tests.test_graph_evidence import records, shaped_one_at_a_time
from tests.test_graph_lean import answered_both_ways

T0 = 1_767_225_600_000
EDGES = ".xerj-memory-b-edges"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(found=records, data=st.data())
def test_a_listing_closed_by_its_tail_is_the_edge_the_oracle_shapes(found, data):
    stored = [None if entry is None else keys.pack_source(entry[2], entry[1], orjson.dumps(entry[0]))
              for entry in found]
    outs = data.draw(st.lists(st.booleans(), min_size=len(stored), max_size=len(stored)))
    hops = data.draw(st.lists(st.integers(1, 3), min_size=len(stored), max_size=len(stored)))
    kept = []
    for entry, record, out, hop in zip(found, stored, outs, hops):
        if record is None:
            continue
        made = rowdocs.record_fragment(record)
        assert made is not None  # every object has one, whatever keys it holds
        kept.append((record, out, hop, made[0] + rowdocs.TAILS[hop, out, made[1]]))
    if not kept:
        return
    listed = orjson.loads(b"[" + b"".join(text for *_, text in kept)[:-1] + b"]")
    expected = shaped_one_at_a_time([k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept])
    assert orjson.dumps(listed) == orjson.dumps(expected)


def _records_asked(monkeypatch) -> list[int]:
    asked: list[int] = []
    source_records = IndexReader.source_records

    def counted(self, rows):
        asked.extend(rows)
        return source_records(self, rows)

    monkeypatch.setattr(IndexReader, "source_records", counted)
    return asked


def test_sealed_edges_are_listed_with_evidence_without_reading_their_records(monkeypatch):
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=8)) as engine:
            for i in range(40):  # sealed segments, then a tail of a few rows; some edges without evidence
                body = {"src": f"n{i % 4}", "dst": f"m{i % 9}", "type": "t", "valid_at": T0, "weight": 0.5 + i / 100}
                if i % 3:
                    body["evidence"] = {"quote": f'm{i} "quoted" \\ here', "source": f"n{i}.md", "offset": i}
                engine.graph.link("b", body)
            for doc_id, extra in (("retires-later", {"invalid_at": T0 + 10**9}), ("expiry-null", {"expired_at": None})):
                engine.store.put(EDGES, {"src": "n1", "dst": doc_id, "type": "t", "weight": 0.9, "confidence": 1.0,
                                         "valid_at": T0, "trust": "detected", **extra}, doc_id)  # one null each
            big = "x" * 70_000  # a listing longer than a span can say: read from its record
            engine.store.put(EDGES, {"src": "n1", "dst": "far", "type": "t", "weight": 0.99, "confidence": 1.0,
                                     "valid_at": T0, "trust": "detected", "evidence": {"quote": big}}, "big-one")
            for i in range(10):
                engine.graph.link("b", {"src": f"n{i % 4}", "dst": f"late{i}", "type": "t", "valid_at": T0})
            with engine.store.reader(EDGES) as reader:
                tail_start, big_row = reader.tail_start, reader.row_of("big-one")
                assert reader.tail_count and big_row < tail_start
            query = {"node": "n1", "hops": 2, "as_of": T0 + 1, "limit": 100}
            asked = _records_asked(monkeypatch)
            fast, general, lean = answered_both_ways(engine, monkeypatch, query)
            assert lean and fast == general
            edges = orjson.loads(fast)["edges"]
            assert len(edges) > 20 and any(edge["evidence"] is None for edge in edges)
            assert any(edge["edge_id"] == "big-one" and edge["evidence"] == {"quote": big} for edge in edges)
            assert {"retires-later", "expiry-null"} <= {edge["edge_id"] for edge in edges}
            lean_asked = asked[:len(asked) - len(edges)]  # the general path asks every listed edge's record
            assert lean_asked and all(row >= tail_start or row == big_row for row in lean_asked)
            assert big_row in lean_asked


def test_each_segment_keeps_its_listings_when_the_view_is_rebuilt(monkeypatch):
    """A retirement changes the view (rows died) but no sealed segment: a process building the new view reads no
    segment's listings again, it maps them."""
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=64)) as engine:
            ids = [engine.graph.link("b", {"src": "a", "dst": f"d{i}", "type": "t", "valid_at": T0})[1]["edge_id"]
                   for i in range(70)]
            query = {"node": "a", "hops": 1, "as_of": T0 + 1, "limit": 100}
            before = engine.graph.ego("b", query)
            built = []
            read_segment = rowdocs._read_segment
            monkeypatch.setattr(rowdocs, "_read_segment", lambda *args: built.append(1) or read_segment(*args))
            engine.graph.invalidate_edges("b", edge_ids=ids[:3], at=T0 + 5)
            engine.graph.views = hop.ViewCache(engine.store.path / "views")  # a process that finds rows died
            fast, general, lean = answered_both_ways(engine, monkeypatch, query)
            assert lean and fast == general and not built
            after = orjson.loads(fast)
            retired = {edge["edge_id"]: edge["invalid_at"] for edge in after["edges"]}
            assert len(after["edges"]) == len(before["edges"]) and [retired[i] for i in ids[:3]] == [T0 + 5] * 3
