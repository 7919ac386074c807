"""Trust and review of a brain's claims: transitions that keep the evidence, claim-keyed decisions, the queue,
the routes (both server modes), overview and ego counts, and the blend's trust weighting."""

from __future__ import annotations

import pytest

from xerj_core.errors import GraphError, GraphNotFound
from xerj_core.graph.brain import edge_id, rejection_id
from xerj_core.model import EdgeDraft, Evidence

from .http_helpers import client  # noqa: F401  (fixture)


def principal_name(client) -> str:
    """Who a decision names: the caller's principal (the admin key's name, secured; open mode's otherwise)."""
    return "open-mode" if client.mode == "open" else "xerj-admin"

EDGES = ".xerj-memory-notes-edges"
T1 = 1_767_225_600_000
T2 = T1 + 86_400_000
LATER = T2 + 365 * 86_400_000


def draft(valid_at: int, src: str = "a.md", dst: str = "b.md", confidence: float = 0.6) -> EdgeDraft:
    return EdgeDraft(src, dst, "wikilink", "wikilink@2", 1.0, confidence, valid_at,
                     Evidence(f"see [[{dst}]]", src, 10))


def seeded(engine) -> list[str]:
    engine.graph.write_edges("notes", [draft(T1), draft(T1, dst="c.md", confidence=0.3),
                                       draft(T1, src="b.md", dst="c.md", confidence=0.9)], created_at=T1)
    return [edge_id("a.md", "wikilink", "b.md", T1), edge_id("a.md", "wikilink", "c.md", T1),
            edge_id("b.md", "wikilink", "c.md", T1)]


def test_approval_keeps_evidence_detector_and_valid_at(engine):
    ab, _, _ = seeded(engine)
    before = engine.store.get(EDGES, ab)[0]
    result = engine.graph.review("notes", {"approve": [ab], "note": "checked"}, by="ana")
    assert result["approved"] == 1 and result["results"] == [{"edge_id": ab, "result": "approved",
                                                               "trust": "approved"}]
    after = engine.store.get(EDGES, ab)[0]
    assert after["trust"] == "approved" and after["reviewed_by"] == "ana" and after["review_note"] == "checked"
    assert isinstance(after["reviewed_at"], int)
    for field in ("evidence", "detector", "valid_at", "src", "dst", "type", "confidence", "created_at"):
        assert after[field] == before[field]
    assert "invalid_at" not in after


def test_approval_survives_a_re_save_and_a_full_re_detection(engine):
    ab, _, _ = seeded(engine)
    engine.graph.review("notes", {"approve": [ab]}, by="ana")
    # the same detection again (a full re-detection), then a re-save under a new valid_at
    engine.graph.write_edges("notes", [draft(T1)], created_at=T2)
    assert engine.store.get(EDGES, ab)[0]["trust"] == "approved"
    engine.graph.invalidate_edges("notes", src_file="a.md", at=T2)
    engine.graph.write_edges("notes", [draft(T2)], created_at=T2)
    again = engine.store.get(EDGES, edge_id("a.md", "wikilink", "b.md", T2))[0]
    assert again["trust"] == "approved" and again["reviewed_by"] == "ana"
    assert again["detector"] == "wikilink@2" and again["evidence"]["quote"] == "see [[b.md]]"
    claim = engine.store.get(EDGES, rejection_id("a.md", "wikilink", "b.md"))[0]
    assert claim["kind"] == "approval" and "src" not in claim


def test_rejection_through_review_retires_and_survives_re_detection(engine):
    _, ac, _ = seeded(engine)
    engine.graph.review("notes", {"reject": [ac]}, by="ana")
    stored = engine.store.get(EDGES, ac)[0]
    assert stored["trust"] == "rejected" and stored["invalid_at"] is not None and stored["reviewed_by"] == "ana"
    assert stored["evidence"]["quote"] == "see [[c.md]]"
    summary = engine.graph.write_edges("notes", [draft(T2, dst="c.md")], created_at=T2)
    assert summary["suppressed"] == 1
    assert engine.graph.ego("notes", {"node": "a.md", "as_of": LATER})["neighbors"] == ["b.md"]
    # a later approval lifts the rejection and brings the claim back
    engine.graph.review("notes", {"approve": [ac]}, by="bo")
    assert sorted(engine.graph.ego("notes", {"node": "a.md", "as_of": LATER})["neighbors"]) == ["b.md", "c.md"]
    engine.graph.write_edges("notes", [draft(T2 + 5, dst="c.md")], created_at=T2)
    assert engine.store.get(EDGES, edge_id("a.md", "wikilink", "c.md", T2 + 5))[0]["trust"] == "approved"


def test_unknown_ids_are_answered_and_the_rest_applies(engine):
    ab, ac, _ = seeded(engine)
    engine.graph.link("other", {"src": "x", "dst": "y", "type": "t"})
    foreign = engine.graph.ego("other", {"node": "x"})["edges"][0]["edge_id"]
    result = engine.graph.review("notes", {"approve": [ab, "nope", foreign], "reject": [ac]}, by="ana")
    assert [r["result"] for r in result["results"]] == ["approved", "not_found", "not_found", "rejected"]
    assert (result["approved"], result["rejected"], result["not_found"]) == (1, 1, 2)
    assert engine.store.get(".xerj-memory-other-edges", foreign)[0]["trust"] == "asserted"


@pytest.mark.parametrize("body, field", [
    ({"approve": ["AB"], "reject": ["AB"]}, "[approve] and [reject]"),
    ({"approve": "AB"}, "[approve]"),
    ({"approve": ["AB"], "reject": [3]}, "[reject]"),
    ({}, "at least one"),
    ({"approve": ["AB"], "trust": "approved"}, "trust"),
    ({"approve": ["AB"], "note": 4}, "[note]"),
])
def test_bad_review_bodies_are_refused_before_anything_applies(engine, body, field):
    ab, _, _ = seeded(engine)
    body = {k: ([ab if i == "AB" else i for i in v] if isinstance(v, list) else ab if v == "AB" else v)
            for k, v in body.items()}
    with pytest.raises(GraphError) as err:
        engine.graph.review("notes", body, by="ana")
    assert field in err.value.reason
    assert engine.store.get(EDGES, ab)[0]["trust"] == "detected"


def test_review_of_a_missing_brain_is_not_found(engine):
    with pytest.raises(GraphNotFound):
        engine.graph.review("ghost", {"approve": ["x"]}, by="ana")
    with pytest.raises(GraphNotFound):
        engine.graph.review_queue("ghost", {})


def test_queue_lists_detected_claims_least_confident_first_with_evidence(engine):
    ab, ac, bc = seeded(engine)
    queue = engine.graph.review_queue("notes", {})
    assert queue["total"] == 3 and [i["edge_id"] for i in queue["items"]] == [ac, ab, bc]
    item = queue["items"][0]
    assert item["evidence"] == {"quote": "see [[c.md]]", "source": "a.md", "offset": 10}
    assert item["trust"] == "detected" and item["confidence"] == pytest.approx(0.3)
    assert engine.graph.review_queue("notes", {"min_confidence": "0.5", "max_confidence": "0.8"})["total"] == 1
    page = engine.graph.review_queue("notes", {"size": "1", "from": "1"})
    assert page["total"] == 3 and [i["edge_id"] for i in page["items"]] == [ab]
    engine.graph.review("notes", {"approve": [ab], "reject": [ac]}, by="ana")
    assert [i["edge_id"] for i in engine.graph.review_queue("notes", {})["items"]] == [bc]
    assert [i["edge_id"] for i in engine.graph.review_queue("notes", {"state": "approved,rejected"})["items"]] \
        == sorted([ab, ac], key=[ac, ab].index)
    assert engine.graph.review_queue("notes", {"type": "other"})["total"] == 0
    with pytest.raises(GraphError, match=r"\[state\] has unknown trust state \[maybe\]"):
        engine.graph.review_queue("notes", {"state": "maybe"})
    with pytest.raises(GraphError, match=r"\[sort\]"):
        engine.graph.review_queue("notes", {"sort": "weight"})


def test_overview_and_ego_report_trust(engine):
    ab, ac, _ = seeded(engine)
    engine.graph.link("notes", {"src": "a.md", "dst": "d.md", "type": "see_also", "valid_at": T1})
    engine.graph.review("notes", {"approve": [ab], "reject": [ac]}, by="ana")
    _, overview = engine.graph.overview("notes", {"as_of": LATER})
    assert overview["trust"] == {"detected": 1, "asserted": 1, "approved": 1, "rejected": 1}
    assert overview["review_pending"] == 1
    _, approved_only = engine.graph.overview("notes", {"as_of": LATER, "trust": "approved"})
    assert approved_only["edges"]["live"] == 1 and approved_only["trust"] == overview["trust"]
    ego = engine.graph.ego("notes", {"node": "a.md", "as_of": LATER})
    assert ego["trust"] == {"detected": 0, "asserted": 1, "approved": 1, "rejected": 0}
    only = engine.graph.ego("notes", {"node": "a.md", "as_of": LATER, "trust": "approved"})
    assert [e["edge_id"] for e in only["edges"]] == [ab]


def test_blend_counts_approved_fully_detected_by_confidence_rejected_never(engine):
    ab, ac, bc = seeded(engine)
    reach, _ = engine.graph.reachable("notes", ["a.md"], hops=1, as_of=LATER)
    assert reach["b.md"]["proximity"] == pytest.approx(0.5 * 0.6)
    engine.graph.review("notes", {"approve": [ab]}, by="ana")
    reach, _ = engine.graph.reachable("notes", ["a.md"], hops=1, as_of=LATER)
    assert reach["b.md"]["proximity"] == pytest.approx(0.5)
    # a rejected edge never counts, even asked about an instant when it was still valid
    engine.graph.review("notes", {"reject": [ac, bc]}, by="ana")
    reach, not_shown = engine.graph.reachable("notes", ["a.md"], hops=2, as_of=T1 + 1)
    assert set(reach) == {"a.md", "b.md"} and not_shown["trust_filtered"] >= 1


# -- over HTTP, open and secured ----------------------------------------------------------------

def test_review_over_http_shows_in_the_next_ego_and_overview(client, engine):
    ab, ac, _ = seeded(engine)
    queue = client.simulate_get("/_graph/notes/_review", params={"sort": "valid_at"})
    assert queue.status_code == 200 and queue.json["total"] == 3
    done = client.simulate_post("/_graph/notes/_review", json={"approve": [ab], "reject": [ac, "missing"]})
    assert done.status_code == 200
    assert done.json["reviewed_by"] == principal_name(client)
    assert [r["result"] for r in done.json["results"]] == ["approved", "rejected", "not_found"]
    ego = client.simulate_get("/_graph/notes/ego", params={"node": "a.md", "as_of": str(LATER)}).json
    assert [(e["edge_id"], e["trust"], e["reviewed_by"]) for e in ego["edges"]] == [(ab, "approved", principal_name(client))]
    overview = client.simulate_get("/_graph/notes/overview", params={"as_of": str(LATER)}).json
    assert overview["review_pending"] == 1 and overview["trust"]["approved"] == 1


def test_review_bad_input_over_http(client, engine):
    ab, _, _ = seeded(engine)
    both = client.simulate_post("/_graph/notes/_review", json={"approve": [ab], "reject": [ab]})
    assert both.status_code == 400 and both.json["error"]["type"] == "graph_error"
    assert "[approve] and [reject]" in both.json["error"]["reason"]
    state = client.simulate_get("/_graph/notes/_review", params={"state": "trusted"})
    assert state.status_code == 400 and "[state]" in state.json["error"]["reason"]
    trust = client.simulate_get("/_graph/notes/ego", params={"node": "a.md", "trust": "trusted"})
    assert trust.status_code == 400 and "[trust]" in trust.json["error"]["reason"]
    missing = client.simulate_post("/_graph/ghost/_review", json={"approve": [ab]})
    assert missing.status_code == 404
    assert engine.store.get(EDGES, ab)[0]["trust"] == "detected"


def test_review_routes_declare_their_privileges_and_are_documented():
    from xerj_http.openapi import document
    from xerj_http.resources.graph import Review
    assert Review.ops == {"GET": ("graph.review_queue", "read"), "POST": ("graph.review", "write")}
    assert set(document()["paths"]["/_graph/{brain}/_review"]) == {"get", "post"}
