"""Rejections that last: a person's unlink is keyed on the claim, so re-detection cannot bring it back live."""

from __future__ import annotations

import pytest

from xerj_core.engine import Engine, EngineConfig
from xerj_core.errors import GraphError
from xerj_core.graph.brain import edge_id, edges_index, rejection_id
from xerj_core.model import EdgeDraft, Evidence

EDGES = ".xerj-memory-notes-edges"
T1 = 1_767_225_600_000  # 2026-01-01: a.md's mtime when first read
T2 = T1 + 86_400_000  # a.md saved again
T3 = T2 + 86_400_000
LATER = T3 + 365 * 86_400_000


def draft(valid_at: int, src: str = "a.md", dst: str = "b.md") -> EdgeDraft:
    return EdgeDraft(src, dst, "wikilink", "wikilink@2", 1.0, 0.95, valid_at,
                     Evidence(f"see [[{dst}]]", src, 10))


def live_ids(engine, node="a.md", **extra):
    body = engine.graph.ego("notes", {"node": node, "as_of": LATER, **extra})
    return [e["edge_id"] for e in body["edges"]], body


def test_rejection_survives_a_re_save_and_a_link_reinstates_it(engine):
    engine.graph.write_edges("notes", [draft(T1)], created_at=T1)
    first = edge_id("a.md", "wikilink", "b.md", T1)
    assert live_ids(engine)[0] == [first]

    unlinked = engine.graph.unlink("notes", first, invalid_at=T1 + 1000)
    rid = rejection_id("a.md", "wikilink", "b.md")
    assert unlinked["rejection"] == rid
    rejection = engine.store.get(EDGES, rid)[0]
    assert (rejection["claim_src"], rejection["claim_type"], rejection["claim_dst"]) == ("a.md", "wikilink", "b.md")
    assert "src" not in rejection and "lifted_at" not in rejection

    # The file is saved again: same claim, new mtime, new identity. It is stored, but already retired.
    summary = engine.graph.write_edges("notes", [draft(T2)], created_at=T2)
    assert summary["suppressed"] == 1 and summary["created"] == 1
    second = edge_id("a.md", "wikilink", "b.md", T2)
    stored = engine.store.get(EDGES, second)[0]
    assert stored["invalid_at"] == stored["valid_at"] == T2
    assert stored["trust"] == "rejected" and stored["rejection"] == rid and stored["expired_at"] >= T2
    ids, body = live_ids(engine)
    assert ids == [] and body["not_shown"]["expired_excluded"] == 2
    # Never live, at any instant.
    for as_of in (T1 + 1000, T2, T2 + 1, LATER):
        assert engine.graph.ego("notes", {"node": "a.md", "as_of": as_of})["edges"] == []
    assert sorted(live_ids(engine, include_expired="true")[0]) == sorted([first, second])
    _, overview = engine.graph.overview("notes", {"as_of": LATER})
    assert overview["edges"] == {"total": 2, "live": 0, "invalidated": 2}
    reach, _ = engine.graph.reachable("notes", ["a.md"], hops=1, as_of=LATER)
    assert reach == {"a.md": {"hop": 0, "proximity": 1.0}}

    # Re-detecting the very same id the person retired leaves their record alone.
    before = engine.store.get(EDGES, first)[0]
    assert engine.graph.write_edges("notes", [draft(T1)], created_at=T3)["suppressed"] == 1
    assert engine.store.get(EDGES, first)[0] == before

    # A person changing their mind: an explicit link lifts the rejection and says so.
    created, linked = engine.graph.link("notes", {"src": "a.md", "dst": "b.md", "type": "wikilink", "valid_at": T3})
    assert created and linked["reinstated"] is True and linked["edge"]["trust"] == "asserted"
    lifted = engine.store.get(EDGES, rid)[0]
    assert lifted["lifted_by"] == linked["edge_id"] and isinstance(lifted["lifted_at"], int)
    assert live_ids(engine)[0] == [linked["edge_id"]]
    # ... and later detections of the claim are live again.
    engine.graph.write_edges("notes", [draft(T3 + 5)], created_at=T3 + 5)
    assert sorted(live_ids(engine)[0]) == sorted([linked["edge_id"], edge_id("a.md", "wikilink", "b.md", T3 + 5)])
    again = engine.graph.link("notes", {"src": "a.md", "dst": "b.md", "type": "wikilink", "valid_at": T3})
    assert "reinstated" not in again[1]


def test_rejection_is_per_claim(engine):
    engine.graph.write_edges("notes", [draft(T1), draft(T1, dst="c.md")], created_at=T1)
    engine.graph.unlink("notes", edge_id("a.md", "wikilink", "b.md", T1))
    summary = engine.graph.write_edges("notes", [draft(T2), draft(T2, dst="c.md"), draft(T2, src="b.md", dst="a.md")],
                                       created_at=T2)
    assert summary["suppressed"] == 1 and summary["written"] == 3
    assert sorted(live_ids(engine)[0]) == sorted([edge_id("a.md", "wikilink", "c.md", T1),
                                                  edge_id("a.md", "wikilink", "c.md", T2),
                                                  edge_id("b.md", "wikilink", "a.md", T2)])


def test_machine_link_of_a_rejected_claim_is_suppressed(engine):
    _, body = engine.graph.link("notes", {"src": "a.md", "dst": "b.md", "type": "t", "valid_at": T1})
    engine.graph.unlink("notes", body["edge_id"])
    created, machine = engine.graph.link("notes", {"src": "a.md", "dst": "b.md", "type": "t", "valid_at": T2},
                                         machine=True)
    assert created and machine["suppressed"] is True and "reinstated" not in machine
    assert machine["edge"]["invalid_at"] == T2 and machine["edge"]["trust"] == "rejected"


def test_rejection_is_durable_across_processes(tmp_path):
    with Engine(tmp_path / "data", config=EngineConfig(tail_rows=8)) as first:
        first.graph.write_edges("notes", [draft(T1)], created_at=T1)
        first.graph.unlink("notes", edge_id("a.md", "wikilink", "b.md", T1))
    with Engine(tmp_path / "data", config=EngineConfig(tail_rows=8)) as second:
        assert second.graph.write_edges("notes", [draft(T2)], created_at=T2)["suppressed"] == 1
        assert live_ids(second)[0] == []


def test_reconcile_is_not_a_rejection(engine):
    engine.graph.write_edges("notes", [draft(T1)], created_at=T1)
    assert engine.graph.invalidate_edges("notes", src_file="a.md", at=T2) == 1
    assert engine.store.get(EDGES, rejection_id("a.md", "wikilink", "b.md")) is None
    assert engine.graph.write_edges("notes", [draft(T2)], created_at=T2)["suppressed"] == 0
    assert live_ids(engine)[0] == [edge_id("a.md", "wikilink", "b.md", T2)]


def test_detector_re_finding_a_persons_edge_keeps_their_trust(engine):
    engine.graph.link("notes", {"src": "a.md", "dst": "b.md", "type": "wikilink", "valid_at": T1})
    engine.graph.write_edges("notes", [draft(T1)], created_at=T2)
    assert engine.store.get(EDGES, edge_id("a.md", "wikilink", "b.md", T1))[0]["trust"] == "asserted"


def test_trust_and_confidence_filters(engine):
    engine.graph.write_edges("notes", [draft(T1, dst="b.md"),
                                       EdgeDraft("a.md", "c.md", "shared_term", "sharedterm@1", 0.45, 0.5, T1)],
                             created_at=T1)
    engine.graph.link("notes", {"src": "a.md", "dst": "d.md", "type": "t", "valid_at": T1, "confidence": 0.7})
    assert len(live_ids(engine)[0]) == 3
    ids, body = live_ids(engine, trust="asserted")
    assert ids == [edge_id("a.md", "t", "d.md", T1)] and body["not_shown"]["trust_filtered"] == 2
    ids, body = live_ids(engine, trust="detected,approved")
    assert len(ids) == 2
    ids, body = live_ids(engine, min_confidence="0.7")
    assert sorted(ids) == sorted([edge_id("a.md", "t", "d.md", T1), edge_id("a.md", "wikilink", "b.md", T1)])
    assert body["not_shown"]["confidence_filtered"] == 1
    ids, body = live_ids(engine, min_confidence=0.96)
    assert ids == [] and body["not_shown"]["confidence_filtered"] == 3
    reach, not_shown = engine.graph.reachable("notes", ["a.md"], hops=1, as_of=LATER, min_confidence=0.6)
    assert set(reach) == {"a.md", "b.md", "d.md"} and not_shown["confidence_filtered"] == 1
    assert abs(reach["b.md"]["proximity"] - 0.5 * 0.95) < 1e-6


def test_reachable_credits_both_ends_of_an_edge_inside_one_frontier(engine):
    """s-a and s-b put a and b at hop 1; a-b is a 2-hop path to each of them, whichever way it points."""
    for brain, (src, dst) in (("fwd", ("a", "b")), ("rev", ("b", "a"))):
        engine.graph.link(brain, {"src": "s", "dst": "a", "type": "t", "valid_at": T1, "weight": 0.8,
                                  "confidence": 0.5})
        engine.graph.link(brain, {"src": "s", "dst": "b", "type": "t", "valid_at": T1, "weight": 0.2})
        engine.graph.link(brain, {"src": src, "dst": dst, "type": "t", "valid_at": T1})
        reach, _ = engine.graph.reachable(brain, ["s"], hops=2, as_of=LATER)
        assert reach == {"s": {"hop": 0, "proximity": 1.0}, "a": {"hop": 1, "proximity": 0.25},
                         "b": {"hop": 1, "proximity": 0.25}}
        out_only, _ = engine.graph.reachable(brain, ["s"], hops=2, as_of=LATER, direction="out")
        assert out_only[dst]["proximity"] == 0.25 and out_only[src]["proximity"] < 0.25


def test_standing_is_the_graph_services_answer(engine):
    """Live and rejected edge ids come from engine.graph, the one API every surface (HTTP, the sink) asks."""
    keep = engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})[1]["edge_id"]
    drop = engine.graph.link("notes", {"src": "a", "dst": "c", "type": "t"})[1]["edge_id"]
    engine.graph.unlink("notes", drop)
    live, rejected = engine.graph.standing("notes")
    assert live == {keep} and rejected == {drop}
    assert engine.graph.standing("nobody") == (set(), set())
    with pytest.raises(GraphError):
        engine.graph.standing("Bad..Name")


def test_standing_names_sealed_edges_from_their_packed_ids_not_their_documents(engine, monkeypatch):
    """A reconcile asks for every live edge id of the brain: those of sealed rows come from the segments' packed
    ids (mapped, 32 bytes a row); only the tail's rows are named from their stored documents."""
    from xerj_core.store import IndexReader

    drafts = [draft(T1 + n, dst=f"n{n}.md") for n in range(60)]
    engine.graph.write_edges("notes", drafts, created_at=T1)
    rejected_id = edge_id("a.md", "wikilink", "n3.md", T1 + 3)
    engine.graph.unlink("notes", rejected_id)
    engine.graph.invalidate_edges("notes", edge_ids=[edge_id("a.md", "wikilink", "n4.md", T1 + 4)], at=T2)
    last = engine.graph.link("notes", {"src": "a.md", "dst": "z.md", "type": "t", "valid_at": T2})[1]["edge_id"]
    expected = {edge_id("a.md", "wikilink", f"n{n}.md", T1 + n) for n in range(60) if n not in (3, 4)} | {last}
    asked = []
    ids_of = IndexReader.ids_of

    def counted(self, rows):
        asked.extend(rows)
        return ids_of(self, rows)

    monkeypatch.setattr(IndexReader, "ids_of", counted)
    live, rejected = engine.graph.standing("notes")
    assert live == expected and rejected == {rejected_id}
    assert 0 < len(asked) < 8  # the newest rows (the tail holds fewer than 8, the fixture's tail_rows)


def test_standing_keys_read_sealed_ids_as_keys_without_naming_them(engine, monkeypatch):
    """A reconcile's standing ids are 16-byte keys: a sealed row's is read from the segment's packed text (no
    string made for it); only rows no packed text spells (the tail's, an id not derived) are named."""
    from xerj_core.graph.rowids import RowIds

    drafts = [draft(T1 + n, dst=f"n{n}.md") for n in range(60)]
    engine.graph.write_edges("notes", drafts, created_at=T1)
    engine.graph.invalidate_edges("notes", edge_ids=[edge_id("a.md", "wikilink", "n4.md", T1 + 4)], at=T2)
    mine = "an id of its own"  # an edge written through the ES door
    engine.store.put(edges_index("notes"), {"src": "a.md", "dst": "z.md", "type": "t", "valid_at": T2}, mine)
    expected = {edge_id("a.md", "wikilink", f"n{n}.md", T1 + n) for n in range(60) if n != 4} | {mine}
    named = []
    ids = RowIds.ids

    def counted(self, reader, rows):
        named.extend(rows.tolist())
        return ids(self, reader, rows)

    monkeypatch.setattr(RowIds, "ids", counted)
    live, rejected = engine.graph.standing_keys("notes")
    assert set(live) == expected and not rejected and mine in live.others and len(live.keys) == 59
    assert 0 < len(named) < 8  # the tail's rows (fewer than the fixture's tail_rows), not the 52 sealed ones
