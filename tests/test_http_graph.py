"""The second brain over HTTP: every status code and body of the spec's four /_graph routes."""

from __future__ import annotations

import re

import pytest

from .http_helpers import audit_log, client, error_type  # noqa: F401  (fixtures)

HOPS_SENTENCE = (
    "hops is capped at 2: XERJ's second brain is a relationship layer over documents, not a graph database "
    "(no Cypher, no shortest-path, no variable-depth traversal). Iterate: expand again from this response's "
    "'reachable' ids."
)
T0 = 1_700_000_000_000


def link(client, brain="notes", **body):
    body = {"src": "a", "dst": "b", "type": "relates_to", **body}
    return client.simulate_post(f"/_graph/{brain}/link", json=body)


def assert_graph_error(result, status, reason=None):
    assert result.status_code == status
    assert set(result.json) == {"error", "status"} and result.json["status"] == status
    assert set(result.json["error"]) == {"type", "reason"} and result.json["error"]["type"] == "graph_error"
    if reason is not None:
        assert result.json["error"]["reason"] == reason


def test_link_201_then_200_on_reassertion(client, engine):
    first = link(client, valid_at=T0, evidence={"quote": "a relates to b", "source": "notes/a.md", "offset": 4})
    assert first.status_code == 201
    body = first.json
    assert body["brain"] == "notes" and body["created"] is True
    assert re.fullmatch(r"[0-9a-f]{32}", body["edge_id"])
    edge = body["edge"]
    assert edge["src"] == "a" and edge["dst"] == "b" and edge["valid_at"] == T0
    assert edge["src_file"] == "notes/a.md" and edge["detector"] == "manual@1"
    assert engine.store.exists(".xerj-memory-notes-edges")
    again = link(client, valid_at=T0, evidence={"quote": "a relates to b", "source": "notes/a.md", "offset": 4})
    assert again.status_code == 200
    assert again.json["created"] is False and again.json["edge_id"] == body["edge_id"]
    later = link(client, valid_at="2024-01-01T00:00:00Z")
    assert later.status_code == 201 and later.json["edge_id"] != body["edge_id"]


@pytest.mark.parametrize("body, fragment", [
    ({"src": "a", "dst": "a", "type": "t"}, None),
    ({"dst": "b", "type": "t"}, "src"),
    ({"src": "a", "dst": "", "type": "t"}, "dst"),
    ({"src": "a", "dst": "b"}, "type"),
    ({"src": "a", "dst": "b", "type": "t", "wieght": 0.5}, "wieght"),
    ({"src": "a", "dst": "b", "type": "t", "evidence": "a quote"}, "evidence"),
    ({"src": "a", "dst": "b", "type": "t", "valid_at": "yesterday"}, "valid_at"),
])
def test_link_refusals_are_graph_errors(client, engine, body, fragment):
    result = client.simulate_post("/_graph/notes/link", json=body)
    assert_graph_error(result, 400)
    if fragment:
        assert fragment in result.json["error"]["reason"]
    assert not engine.store.exists(".xerj-memory-notes-edges")  # nothing half-written


def test_link_with_a_bad_brain_name_or_body(client):
    for brain in ("Notes", "notes-edges", "-x", "a..b"):
        assert_graph_error(link(client, brain=brain), 400)
    # the contract's one error shape for every malformed body, not the ES parsing_exception
    for body in (b'{"src": "a",', b"", b"[1,2]", b'{"src": "a", "dst": "b", "type": "t", "weight": NaN}', b"null"):
        assert_graph_error(client.simulate_post("/_graph/notes/link", body=body), 400)
    for route in ("/_graph/notes/_invalidate", "/_graph/notes/_detected"):
        for body in (b"", b"[1,2]", b"{"):
            assert_graph_error(client.simulate_post(route, body=body), 400)


def test_unlink_retires_then_reports_the_standing_fact(client):
    edge_id = link(client, valid_at=T0).json["edge_id"]
    retired = client.simulate_delete(f"/_graph/notes/link/{edge_id}", params={"invalid_at": "2025-07-01T00:00:00Z"})
    assert retired.status_code == 200
    assert retired.json["invalidated"] is True and retired.json["brain"] == "notes"
    assert retired.json["edge_id"] == edge_id
    again = client.simulate_delete(f"/_graph/notes/link/{edge_id}")
    assert again.status_code == 200
    assert again.json == {"brain": "notes", "edge_id": edge_id, "invalidated": False,
                          "already_invalid_at": 1751328000000}


def test_unlink_unknown_edge_or_brain_is_404(client):
    link(client)
    assert_graph_error(client.simulate_delete("/_graph/notes/link/" + "0" * 32), 404,
                       f"edge '{'0' * 32}' does not exist in brain 'notes'")
    assert_graph_error(client.simulate_delete("/_graph/nobrain/link/abc"), 404,
                       "edge 'abc' does not exist in brain 'nobrain'")


def test_ego_two_hops_with_nodes(client):
    client.simulate_put("/.xerj-memory-notes/_doc/a", json={"title": "Alpha", "text": "first"})
    for src, dst in (("a", "b"), ("b", "c"), ("x", "a")):
        assert link(client, src=src, dst=dst, valid_at=T0).status_code == 201
    result = client.simulate_get("/_graph/notes/ego", params={"node": "a", "hops": "2", "include_nodes": "true"})
    assert result.status_code == 200
    body = result.json
    assert body["brain"] == "notes" and body["contract"] == "xerj-second-brain/1"
    assert body["seeds"] == ["a"] and body["node"] == "a" and body["hops"] == 2 and body["direction"] == "both"
    assert {(e["src"], e["dst"]) for e in body["edges"]} == {("a", "b"), ("b", "c"), ("x", "a")}
    for edge in body["edges"]:
        assert {"edge_id", "src", "dst", "type", "weight", "hop", "direction", "valid_at", "invalid_at"} <= set(edge)
        assert edge["invalid_at"] is None
    assert body["nodes"]["a"]["preview"] == "Alpha" and body["nodes"]["a"]["path"] is None
    not_shown = body["not_shown"]
    for counter in ("edges_clipped", "frontier_clipped", "expired_excluded", "type_filtered",
                    "segments_without_columns", "memtable_docs_scanned", "dangling_nodes", "dangling_ids"):
        assert counter in not_shown
    assert sorted(not_shown["dangling_ids"]) == ["b", "c", "x"]
    one_hop = client.simulate_get("/_graph/notes/ego", params={"nodes": "a", "direction": "out"}).json
    assert [(e["src"], e["dst"]) for e in one_hop["edges"]] == [("a", "b")] and one_hop["seeds"] == ["a"]


@pytest.mark.parametrize("hops", ["0", "3", "10", "-1"])
def test_ego_hop_cap_carries_the_exact_sentence(client, hops):
    link(client)
    assert_graph_error(client.simulate_get("/_graph/notes/ego", params={"node": "a", "hops": hops}), 400,
                       HOPS_SENTENCE)


def test_ego_refusals_and_missing_brain(client):
    link(client)
    assert_graph_error(client.simulate_get("/_graph/notes/ego"), 400)
    assert_graph_error(client.simulate_get("/_graph/notes/ego", params={"node": "a", "nodes": "a,b"}), 400)
    assert_graph_error(client.simulate_get("/_graph/nobrain/ego", params={"node": "a"}), 404)
    twice = client.simulate_get("/_graph/notes/ego?node=a&node=b")
    assert twice.status_code == 400


def test_overview_and_its_404_short_body(client, engine):
    link(client, valid_at=T0)
    edge_id = link(client, src="b", dst="c", valid_at=T0).json["edge_id"]
    client.simulate_delete(f"/_graph/notes/link/{edge_id}")
    result = client.simulate_get("/_graph/notes/overview", params={"top": "5", "histogram_interval": "hour"})
    assert result.status_code == 200
    body = result.json
    assert body["exists"] is True and body["contract"] == "xerj-second-brain/1"
    assert body["edges"]["total"] == 2 and body["edges"]["live"] == 1 and body["edges"]["invalidated"] == 1
    # No memory has been stored in "notes": the overview names the embedder a new namespace would get.
    assert body["embedder"] == engine.default_embedder and body["nodes_index"] == ".xerj-memory-notes"
    missing = client.simulate_get("/_graph/nobrain/overview")
    assert missing.status_code == 404
    assert missing.json == {"brain": "nobrain", "contract": "xerj-second-brain/1", "exists": False}
    assert_graph_error(client.simulate_get("/_graph/notes/overview", params={"histogram_interval": "week"}), 400)


def test_graph_audit_names_the_brain(client, audit_log):
    edge_id = link(client).json["edge_id"]
    client.simulate_delete(f"/_graph/notes/link/{edge_id}")
    assert [(e["op"], e["resource"], e["outcome"]) for e in audit_log[-2:]] == [
        ("graph.link", ".xerj-memory-notes-edges", "success"),
        ("graph.unlink", f".xerj-memory-notes-edges/{edge_id}", "success")]
