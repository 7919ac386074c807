"""The graph contract: brains, edge identity, link and unlink, ego and overview shapes, every refusal."""

from __future__ import annotations

import pytest
import xxhash

from xerj_core.errors import GraphError, GraphNotFound
from xerj_core.graph.brain import (
    CONTRACT,
    EDGE_MAPPING,
    HOPS_CAP_REASON,
    META_ID,
    edge_id,
    edges_index,
    nodes_index,
    parse_instant,
    rejection_id,
    validate_brain_name,
)
from xerj_core import hookimpl

SENTENCE = ("hops is capped at 2: XERJ's second brain is a relationship layer over documents, not a graph "
            "database (no Cypher, no shortest-path, no variable-depth traversal). Iterate: expand again from "
            "this response's 'reachable' ids.")

JAN = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def refusal(fn, *args, **kwargs) -> GraphError:
    with pytest.raises(GraphError) as caught:
        fn(*args, **kwargs)
    assert caught.value.status == 400
    assert caught.value.to_body() == {"error": {"type": "graph_error", "reason": caught.value.reason}, "status": 400}
    return caught.value


# -- brains ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["notes", "a", "0day", "my_brain-2.x", "a" * 200, "x-edge", "edges"])
def test_valid_brain_names(name):
    assert validate_brain_name(name) == name


@pytest.mark.parametrize("name, fragment", [
    ("", "non-empty"),
    (None, "non-empty"),
    ("a" * 201, "201 characters long, the limit is 200"),
    ("_notes", "first character"),
    (".notes", "first character"),
    ("-notes", "first character"),
    ("Notes", "first character"),
    ("noTes", "only lowercase letters"),
    ("no tes", "only lowercase letters"),
    ("no/tes", "only lowercase letters"),
    ("a..b", "'..'"),
    ("kb-edges", "'-edges'"),
])
def test_invalid_brain_names(name, fragment):
    err = refusal(validate_brain_name, name)
    assert fragment in err.reason


def test_index_names():
    assert edges_index("notes") == ".xerj-memory-notes-edges"
    assert nodes_index("notes") == ".xerj-memory-notes"


def test_hop_cap_sentence_is_the_contracts():
    assert HOPS_CAP_REASON == SENTENCE
    assert "\n" not in HOPS_CAP_REASON


def test_edge_identity_is_the_pinned_hash():
    expected = xxhash.xxh3_128(b"xg1\x00a\x00relates_to\x00b\x001751328000000").hexdigest()
    assert edge_id("a", "relates_to", "b", 1_751_328_000_000) == expected
    assert len(expected) == 32 and expected == expected.lower()
    assert edge_id("a", "t", "b", 1) != edge_id("a", "t", "b", 2)
    assert rejection_id("a", "t", "b") != rejection_id("b", "t", "a")


def test_instants():
    assert parse_instant(1_751_328_000_000, "x") == 1_751_328_000_000
    assert parse_instant("1751328000000", "x") == 1_751_328_000_000
    assert parse_instant("2025-07-01T00:00:00Z", "x") == 1_751_328_000_000
    assert parse_instant("2025-07-01T02:00:00.250+02:00", "x") == 1_751_328_000_250
    assert parse_instant("2025-07-01t00:00:00.123456z", "x") == 1_751_328_000_123
    for bad in ("yesterday", "2025-07-01", "2025-07-01T00:00:00", True, None, float("nan"), [1], 2**60):
        refusal(parse_instant, bad, "as_of")


# -- link --------------------------------------------------------------------------------------

def test_first_link_creates_the_brain_lazily(engine):
    store = engine.store
    assert not store.exists(".xerj-memory-notes-edges")
    created, body = engine.graph.link("notes", {
        "src": "note-fermentation", "dst": "note-sourdough", "type": "relates_to",
        "evidence": {"quote": "sourdough is a wild fermentation", "source": "notes/bread.md", "offset": 412}})
    assert created is True
    assert set(body) == {"brain", "edge_id", "created", "edge"}
    edge = body["edge"]
    assert body["brain"] == "notes" and body["created"] is True
    assert body["edge_id"] == edge["edge_id"] == edge_id("note-fermentation", "relates_to", "note-sourdough",
                                                          edge["valid_at"])
    assert edge["weight"] == 1.0 and edge["confidence"] == 1.0
    assert edge["detector"] == "manual@1" and edge["trust"] == "asserted"
    assert edge["src_file"] == "notes/bread.md"
    assert edge["valid_at"] == edge["created_at"] and isinstance(edge["valid_at"], int)
    for omitted in ("invalid_at", "expired_at"):
        assert omitted not in edge
    assert store.get(".xerj-memory-notes-edges", body["edge_id"])[0] == edge
    meta = store.get(".xerj-memory-notes-edges", META_ID)[0]
    assert meta["meta_version"] == 1 and meta["brain"] == "notes"
    assert meta["nodes_index"] == ".xerj-memory-notes" and isinstance(meta["created_at"], int)
    mapping = store.get_mapping(".xerj-memory-notes-edges")["properties"]
    assert mapping["src"] == {"type": "keyword", "dictionary": "nodes"} == mapping["dst"]
    assert mapping["valid_at"] == {"type": "date", "format": "epoch_millis"}
    assert mapping["evidence"]["properties"]["quote"] == {"type": "text"}
    assert set(mapping) == set(EDGE_MAPPING["properties"])


def test_link_defaults_clamps_and_reassertion(engine):
    body = {"src": "a", "dst": "b", "type": "t", "weight": 7, "confidence": -0.5, "valid_at": "2026-01-01T00:00:00Z",
            "created_at": 1_700_000_000_000, "detector": "agent@3"}
    created, first = engine.graph.link("notes", body)
    assert created
    edge = first["edge"]
    assert edge["weight"] == 1.0 and edge["confidence"] == 0.0
    assert edge["valid_at"] == JAN and edge["created_at"] == 1_700_000_000_000
    assert edge["detector"] == "agent@3" and "evidence" not in edge and "src_file" not in edge
    created, again = engine.graph.link("notes", {**body, "weight": 0.25})
    assert created is False and again["created"] is False
    assert again["edge_id"] == first["edge_id"] and again["edge"]["weight"] == 0.25
    assert engine.store.count(".xerj-memory-notes-edges") == 2  # the edge and the meta document


LINK_REFUSALS = [
    ([], "must be a JSON object"),
    ({"dst": "b", "type": "t"}, "missing required field [src]"),
    ({"src": "a", "type": "t"}, "missing required field [dst]"),
    ({"src": "a", "dst": "b"}, "missing required field [type]"),
    ({"src": "", "dst": "b", "type": "t"}, "[src] must be a non-empty string"),
    ({"src": "a", "dst": 5, "type": "t"}, "[dst] must be a non-empty string"),
    ({"src": "a", "dst": "b", "type": ""}, "[type] must be a non-empty string"),
    ({"src": "a", "dst": "a", "type": "t"}, "src and dst are the same node [a]"),
    ({"src": "a", "dst": "b", "type": "t", "wieght": 1}, "unknown field [wieght]"),
    ({"src": "a", "dst": "b", "type": "t", "weight": "heavy"}, "[weight] must be a number"),
    ({"src": "a", "dst": "b", "type": "t", "weight": float("inf")}, "[weight] must be finite"),
    ({"src": "a", "dst": "b", "type": "t", "confidence": float("nan")}, "[confidence] must be finite"),
    ({"src": "a", "dst": "b", "type": "t", "confidence": True}, "[confidence] must be a number"),
    ({"src": "a", "dst": "b", "type": "t", "valid_at": "last week"}, "[valid_at] must be an epoch-ms number"),
    ({"src": "a", "dst": "b", "type": "t", "created_at": {}}, "[created_at] must be an epoch-ms number"),
    ({"src": "a", "dst": "b", "type": "t", "detector": 3}, "[detector] must be a string"),
    ({"src": "a", "dst": "b", "type": "t", "evidence": "a quote"}, "[evidence] must be an object"),
    ({"src": "a", "dst": "b", "type": "t", "evidence": {"offset": "x"}}, "[evidence.offset] must be an integer"),
    ({"src": "a", "dst": "b", "type": "t", "evidence": {"quote": 1}}, "[evidence.quote] must be a string"),
]


@pytest.mark.parametrize("body, reason", LINK_REFUSALS)
def test_link_refusals_leave_nothing_behind(engine, body, reason):
    err = refusal(engine.graph.link, "notes", body)
    assert reason in err.reason
    assert not engine.store.exists(".xerj-memory-notes-edges")


def test_link_refusal_on_an_existing_brain_writes_nothing(engine):
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    before = engine.store.index_info(".xerj-memory-notes-edges")
    refusal(engine.graph.link, "notes", {"src": "a", "dst": "a", "type": "t"})
    refusal(engine.graph.link, "bad..name", {"src": "a", "dst": "b", "type": "t"})
    after = engine.store.index_info(".xerj-memory-notes-edges")
    assert (after.doc_count, after.deleted_rows) == (before.doc_count, before.deleted_rows)


def test_evidence_source_only_mirrors_when_it_is_a_string(engine):
    _, body = engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t",
                                          "evidence": {"quote": "q", "extra": {"k": 1}}})
    assert "src_file" not in body["edge"]
    assert body["edge"]["evidence"] == {"quote": "q", "extra": {"k": 1}}


# -- unlink ------------------------------------------------------------------------------------

def test_unlink_retires_and_second_unlink_is_a_noop(engine):
    _, linked = engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t", "valid_at": JAN})
    eid = linked["edge_id"]
    result = engine.graph.unlink("notes", eid, invalid_at="2026-07-01T00:00:00Z")
    assert result["invalidated"] is True and result["invalid_at"] == 1_782_864_000_000
    stored = engine.store.get(".xerj-memory-notes-edges", eid)[0]
    assert stored["invalid_at"] == 1_782_864_000_000 and stored["expired_at"] == result["expired_at"]
    assert stored["valid_at"] == JAN and stored["trust"] == "rejected"
    again = engine.graph.unlink("notes", eid)
    assert again == {"brain": "notes", "edge_id": eid, "invalidated": False, "already_invalid_at": 1_782_864_000_000}
    assert engine.store.get(".xerj-memory-notes-edges", eid)[0] == stored


def test_unlink_defaults_invalid_at_to_now(engine):
    _, linked = engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    result = engine.graph.unlink("notes", linked["edge_id"])
    assert result["invalid_at"] == result["expired_at"] >= linked["edge"]["created_at"]


@pytest.mark.parametrize("brain, eid", [("notes", "0" * 32), ("nobrain", "0" * 32), ("notes", META_ID),
                                        ("notes", "")])
def test_unlink_unknown_edge_or_brain(engine, brain, eid):
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    with pytest.raises(GraphNotFound) as caught:
        engine.graph.unlink(brain, eid)
    assert caught.value.status == 404
    assert caught.value.reason == f"edge '{eid}' does not exist in brain '{brain}'"


def test_unlink_refusals(engine):
    _, linked = engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    assert "[invalid_at]" in refusal(engine.graph.unlink, "notes", linked["edge_id"], invalid_at="soon").reason
    assert "invalid brain name" in refusal(engine.graph.unlink, "No", linked["edge_id"]).reason


# -- the hop cap and ego's refusals ------------------------------------------------------------

@pytest.mark.parametrize("hops", [3, "3", "two", "", 1.5, True])
def test_ego_hop_cap(engine, hops):
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    assert refusal(engine.graph.ego, "notes", {"node": "a", "hops": hops}).reason == SENTENCE


@pytest.mark.parametrize("hops", [0, -1, "0"])
def test_engine_level_ego_names_the_floor_like_reachable(engine, hops):
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    assert refusal(engine.graph.ego, "notes", {"node": "a", "hops": hops}).reason == "hops must be at least 1. " + SENTENCE


def test_engine_level_hops_zero_names_the_floor(engine):
    assert refusal(engine.graph.reachable, "notes", ["a"], hops=0).reason == "hops must be at least 1. " + SENTENCE
    assert refusal(engine.graph.reachable, "notes", ["a"], hops=3).reason == SENTENCE


EGO_REFUSALS = [
    ({}, "one of [node] or [nodes] is required"),
    ({"node": "a", "nodes": "b"}, "[node] and [nodes] are mutually exclusive"),
    ({"nodes": " , "}, "[nodes] must name at least one node id"),
    ({"node": ""}, "[node] must be a non-empty string"),
    ({"node": "a", "direction": "up"}, "[direction] must be one of out, in, both"),
    ({"node": "a", "limit": "many"}, "[limit] must be an integer"),
    ({"node": "a", "as_of": "now"}, "[as_of] must be an epoch-ms number or an RFC3339 string"),
    ({"node": "a", "include_expired": "yes"}, "[include_expired] must be true or false"),
    ({"node": "a", "include_nodes": "maybe"}, "[include_nodes] must be true or false"),
    ({"node": "a", "include_evidence": 2}, "[include_evidence] must be true or false"),
    ({"node": "a", "trust": "detected,gossip"}, "unknown trust state [gossip]"),
    ({"node": "a", "min_confidence": "high"}, "[min_confidence] must be a number"),
    ({"node": "a", "hop": "2"}, "unknown parameter [hop]"),
]


@pytest.mark.parametrize("params, reason", EGO_REFUSALS)
def test_ego_refusals(engine, params, reason):
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    assert reason in refusal(engine.graph.ego, "notes", params).reason


def test_ego_of_a_missing_brain_is_404(engine):
    with pytest.raises(GraphNotFound) as caught:
        engine.graph.ego("ghost", {"node": "a"})
    assert caught.value.status == 404 and "ghost" in caught.value.reason


# -- ego's shape -------------------------------------------------------------------------------

def test_ego_response_shape_and_hydration(engine):
    engine.store.put(".xerj-memory-notes", {"title": "Sourdough " + "x" * 300, "ax_path": "notes/bread.md"}, "b")
    engine.store.put(".xerj-memory-notes", {"text": "a hand-written note"}, "a")
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t", "valid_at": JAN, "confidence": 0.7,
                                "evidence": {"quote": "q", "source": "notes/bread.md", "offset": 1}})
    engine.graph.link("notes", {"src": "c", "dst": "a", "type": "u", "valid_at": JAN, "weight": 0.5})
    body = engine.graph.ego("notes", {"node": "a", "include_nodes": "true", "as_of": JAN})
    assert {"brain", "contract", "seeds", "node", "as_of", "hops", "direction", "edges", "neighbors",
            "not_shown", "nodes"} <= set(body)
    assert body["contract"] == CONTRACT == "xerj-second-brain/1"
    assert body["seeds"] == ["a"] and body["node"] == "a" and body["hops"] == 1 and body["direction"] == "both"
    assert body["as_of"] == JAN and body["neighbors"] == ["b", "c"]
    first, second = body["edges"]
    assert first["src"] == "a" and first["direction"] == "out" and first["hop"] == 1
    assert first["invalid_at"] is None and first["expired_at"] is None and first["confidence"] == 0.7
    assert first["evidence"] == {"quote": "q", "source": "notes/bread.md", "offset": 1}
    assert second["src"] == "c" and second["direction"] == "in" and second["weight"] == 0.5
    assert second["evidence"] is None and second["detector"] == "manual@1"
    assert body["nodes"]["b"] == {"index": ".xerj-memory-notes", "title": "Sourdough " + "x" * 300,
                                  "preview": ("Sourdough " + "x" * 300)[:160], "path": "notes/bread.md"}
    assert body["nodes"]["a"]["preview"] == "a hand-written note" and body["nodes"]["a"]["path"] is None
    assert "c" not in body["nodes"]
    ns = body["not_shown"]
    assert set(ns) >= {"edges_clipped", "frontier_clipped", "expired_excluded", "type_filtered",
                       "segments_without_columns", "memtable_docs_scanned", "dangling_nodes", "dangling_ids"}
    assert ns["dangling_nodes"] == 1 and ns["dangling_ids"] == ["c"]
    bare = engine.graph.ego("notes", {"node": "a", "include_evidence": "false", "as_of": JAN})
    assert set(bare["edges"][0]) == {"edge_id", "src", "dst", "type", "weight", "hop", "direction", "valid_at",
                                     "invalid_at", "trust"}
    assert bare["edges"][0]["edge_id"] == first["edge_id"] and "nodes" not in bare
    assert bare["not_shown"]["dangling_ids"] == []


def test_ego_nodes_index_list_and_meta_default(engine):
    engine.store.put("docs-a", {"title": "in a"}, "x")
    engine.store.put("docs-b", {"body": "in b"}, "y")
    from xerj_core.model import EdgeDraft
    engine.graph.write_edges("lib", [EdgeDraft("x", "y", "t", "d@1", 1.0, 1.0, JAN)], created_at=JAN,
                             nodes_index="docs-a,docs-b")
    body = engine.graph.ego("lib", {"node": "x", "include_nodes": True, "as_of": JAN})
    assert body["nodes"]["x"]["index"] == "docs-a" and body["nodes"]["y"]["preview"] == "in b"
    assert body["not_shown"]["dangling_nodes"] == 0
    body = engine.graph.ego("lib", {"node": "x", "include_nodes": True, "as_of": JAN, "nodes_index": "docs-b"})
    assert body["not_shown"]["dangling_ids"] == ["x"]


def test_dangling_ids_are_capped_at_50(engine):
    from xerj_core.model import EdgeDraft
    drafts = [EdgeDraft("hub", f"n{i}", "t", "d@1", 1.0, 1.0, JAN) for i in range(60)]
    engine.graph.write_edges("notes", drafts, created_at=JAN)
    body = engine.graph.ego("notes", {"node": "hub", "include_nodes": "true", "as_of": JAN, "limit": 1000})
    assert body["not_shown"]["dangling_nodes"] == 61
    assert len(body["not_shown"]["dangling_ids"]) == 50


def test_seed_bounds_and_limit_clamps(engine):
    from xerj_core.model import EdgeDraft
    drafts = [EdgeDraft(f"s{i}", "hub", "t", "d@1", 1.0, 1.0, JAN) for i in range(70)]
    engine.graph.write_edges("notes", drafts, created_at=JAN)
    seeds = ",".join(f"s{i}" for i in range(70)) + ",s0,s1"
    body = engine.graph.ego("notes", {"nodes": seeds, "as_of": JAN, "limit": "0"})
    assert len(body["seeds"]) == 64 and "node" not in body
    assert body["not_shown"]["frontier_clipped"] == 6
    assert len(body["edges"]) == 1 and body["not_shown"]["edges_clipped"] == 63
    body = engine.graph.ego("notes", {"node": "hub", "as_of": JAN, "limit": 5000})
    assert len(body["edges"]) == 70 and body["not_shown"]["edges_clipped"] == 0
    assert engine.graph.ego("notes", {"node": "hub", "as_of": JAN})["not_shown"]["edges_clipped"] == 0


def test_frontier_cap_is_4096_per_hop(engine):
    from xerj_core.model import EdgeDraft
    drafts = [EdgeDraft("root", f"leaf{i}", "t", "d@1", 1.0, 1.0, JAN) for i in range(4100)]
    # Equal weights and valid_at: the newest write ranks first, so leaf0..leaf3 fall outside the frontier.
    drafts += [EdgeDraft("leaf4099", "far", "t", "d@1", 1.0, 1.0, JAN),
               EdgeDraft("leaf0", "beyond", "t", "d@1", 1.0, 1.0, JAN)]
    engine.graph.write_edges("notes", drafts, created_at=JAN)
    body = engine.graph.ego("notes", {"node": "root", "hops": 2, "direction": "out", "as_of": JAN, "limit": 1000})
    assert body["not_shown"]["frontier_clipped"] == 4
    assert body["not_shown"]["edges_clipped"] == 4101 - 1000
    reach, not_shown = engine.graph.reachable("notes", ["root"], hops=2, as_of=JAN)
    assert "far" in reach and "beyond" not in reach and not_shown["frontier_clipped"] == 4
    assert reach["far"] == {"hop": 2, "proximity": 0.25} and reach["leaf7"] == {"hop": 1, "proximity": 0.5}


# -- the time-travel case ------------------------------------------------------------------------

def test_soft_invalidate_time_travel(engine):
    """Pinned instants, so a link and the as_of that reads it back never share a millisecond."""
    valid = "2026-01-01T00:00:00Z"
    before, invalidation, after = "2026-03-01T00:00:00Z", "2026-06-01T00:00:00Z", "2026-09-01T00:00:00Z"
    ids = {}
    for dst in ("b", "c", "d", "e"):
        _, body = engine.graph.link("notes", {"src": "a", "dst": dst, "type": "relates_to", "valid_at": valid})
        ids[dst] = body["edge_id"]
    engine.graph.unlink("notes", ids["e"], invalid_at=invalidation)

    believed = engine.graph.ego("notes", {"node": "a", "as_of": before})
    assert sorted(e["edge_id"] for e in believed["edges"]) == sorted(ids.values())
    assert believed["not_shown"]["expired_excluded"] == 0

    now = engine.graph.ego("notes", {"node": "a", "as_of": after})
    assert sorted(e["edge_id"] for e in now["edges"]) == sorted([ids["b"], ids["c"], ids["d"]])
    assert now["not_shown"]["expired_excluded"] == 1

    history = engine.graph.ego("notes", {"node": "a", "as_of": after, "include_expired": "true"})
    assert len(history["edges"]) == 4
    (retired,) = [e for e in history["edges"] if e["edge_id"] == ids["e"]]
    assert retired["invalid_at"] == parse_instant(invalidation, "x")
    assert retired["expired_at"] >= retired["created_at"] and retired["expired_at"] is not None
    assert history["not_shown"]["expired_excluded"] == 0

    # An edge asserted after as_of stays invisible either way, and is counted.
    future = engine.graph.ego("notes", {"node": "a", "as_of": "2025-01-01T00:00:00Z", "include_expired": True})
    assert future["edges"] == [] and future["not_shown"]["expired_excluded"] == 4


# -- overview ------------------------------------------------------------------------------------

def test_overview(engine):
    from xerj_core.model import EdgeDraft
    engine.store.put(".xerj-memory-notes", {"text": "one"}, "a")
    hour = 3_600_000
    drafts = [EdgeDraft("a", f"n{i}", "wikilink" if i % 3 else "same_dir", "wikilink@2" if i % 3 else "samedir@2",
                        1.0, 0.9, JAN + i) for i in range(9)]
    engine.graph.write_edges("notes", drafts, created_at=JAN)
    engine.graph.write_edges("notes", [EdgeDraft("n1", "n2", "seq", "sequence@2", 0.8, 0.99, JAN)],
                             created_at=JAN + 30 * hour)
    _, linked = engine.graph.link("notes", {"src": "n2", "dst": "a", "type": "mention", "valid_at": JAN,
                                            "created_at": JAN + 2 * hour})
    engine.graph.unlink("notes", linked["edge_id"], invalid_at=JAN + 10)
    exists, body = engine.graph.overview("notes", {"as_of": JAN + 100, "top": "2"})
    assert exists
    assert body["brain"] == "notes" and body["contract"] == CONTRACT and body["exists"] is True
    assert body["as_of"] == JAN + 100 and body["nodes_index"] == ".xerj-memory-notes"
    # A nodes index that holds no memory vectors reports the embedder a new namespace would get.
    assert body["nodes"] == {"total": 1} and body["embedder"] == engine.default_embedder
    assert body["edges"] == {"total": 11, "live": 10, "invalidated": 1}
    assert body["types"] == [{"key": "wikilink", "doc_count": 6}, {"key": "same_dir", "doc_count": 3}]
    assert body["not_shown"]["types_not_listed"] == 2
    assert body["detectors"][0] == {"key": "wikilink@2", "doc_count": 6}
    assert body["hubs"]["out"] == [{"key": "a", "doc_count": 9}, {"key": "n1", "doc_count": 1}]
    assert body["not_shown"]["hubs_out_not_listed"] == 0
    assert body["hubs"]["in"][0] == {"key": "n2", "doc_count": 2}
    assert [b["doc_count"] for b in body["created_over_time"]] == [10, 1]
    _, hourly = engine.graph.overview("notes", {"as_of": JAN + 100, "histogram_interval": "hour"})
    timeline = hourly["created_over_time"]
    assert [(b["key"], b["doc_count"]) for b in timeline if b["doc_count"]] == [
        (JAN, 9), (JAN + 2 * hour, 1), (JAN + 30 * hour, 1)]
    assert len(timeline) == 31 and [b["key"] for b in timeline] == [JAN + i * hour for i in range(31)]
    assert hourly["created_over_time"][0]["key_as_string"] == "2026-01-01T00:00:00.000Z"
    _, early = engine.graph.overview("notes", {"as_of": JAN + 5, "top": 100})
    assert early["edges"] == {"total": 11, "live": 8, "invalidated": 3}
    assert len(early["types"]) == 4


def test_overview_refusals_and_missing_brain(engine):
    assert engine.graph.overview("ghost", {}) == (False, {"brain": "ghost", "contract": CONTRACT, "exists": False})
    assert "[histogram_interval] must be day or hour" in refusal(
        engine.graph.overview, "ghost", {"histogram_interval": "week"}).reason
    assert "[top] must be an integer" in refusal(engine.graph.overview, "ghost", {"top": "ten"}).reason
    assert "unknown parameter [size]" in refusal(engine.graph.overview, "ghost", {"size": 3}).reason
    assert "invalid brain name" in refusal(engine.graph.overview, "Ghost", {}).reason


def test_meta_document_is_never_an_edge(engine):
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t", "valid_at": JAN, "created_at": JAN})
    _, body = engine.graph.overview("notes", {"as_of": JAN})
    assert body["edges"]["total"] == 1
    assert sum(b["doc_count"] for b in body["created_over_time"]) == 1
    ego = engine.graph.ego("notes", {"nodes": f"a,{META_ID}", "as_of": JAN})
    assert [e["dst"] for e in ego["edges"]] == ["b"]


# -- the batch writer, reconcile, notifications ---------------------------------------------------

class Recorder:
    def __init__(self):
        self.calls = []

    @hookimpl
    def xerj_edges_written(self, brain, edges):
        self.calls.append((brain, [e["edge_id"] for e in edges]))


def test_hook_xerj_edges_written(engine):
    """Every graph writer notifies after its commit, with the edges as stored; a no-op or a refusal says nothing."""
    recorder = Recorder()
    engine.pm.register(recorder)
    try:
        _, body = engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
        engine.graph.unlink("notes", body["edge_id"])
        engine.graph.unlink("notes", body["edge_id"])  # a no-op writes nothing and says nothing
        refusal(engine.graph.link, "notes", {"src": "a"})
        from xerj_core.model import EdgeDraft
        summary = engine.graph.write_edges("notes", [EdgeDraft("x", "y", "t", "d@1", 1.0, 1.0, JAN)], created_at=JAN)
        engine.graph.invalidate_edges("notes", src_file=None, edge_ids=[edge_id("x", "t", "y", JAN)], at=JAN + 1)
    finally:
        engine.pm.unregister(recorder)
    batch = edge_id("x", "t", "y", JAN)
    assert summary["written"] == 1
    assert recorder.calls == [("notes", [body["edge_id"]]), ("notes", [body["edge_id"]]), ("notes", [batch]),
                              ("notes", [batch])]


def test_write_edges_and_reconcile(engine):
    from xerj_core.model import EdgeDraft, Evidence
    drafts = [EdgeDraft("a.md", "b.md", "mdlink", "mdlink@2", 0.9, 0.9, JAN, Evidence("see [b](b.md)", "a.md", 4)),
              EdgeDraft("a.md", "c.md", "mdlink", "mdlink@2", 0.9, 0.9, JAN, Evidence("see [c](c.md)", "a.md", 9)),
              EdgeDraft("a.md", "a.md", "mdlink", "mdlink@2", 0.9, 0.9, JAN),
              EdgeDraft("c.md", "b.md", "mdlink", "mdlink@2", 0.9, 0.9, JAN, Evidence("b", "c.md", 0), "md", "md")]
    summary = engine.graph.write_edges("docs", drafts, created_at=JAN + 5)
    assert summary == {"brain": "docs", "edges_index": ".xerj-memory-docs-edges", "written": 3, "created": 3,
                       "updated": 0, "suppressed": 0, "self_edges_skipped": 1}
    again = engine.graph.write_edges("docs", drafts, created_at=JAN + 6)
    assert (again["created"], again["updated"]) == (0, 3)
    stored = engine.store.get(".xerj-memory-docs-edges", edge_id("c.md", "mdlink", "b.md", JAN))[0]
    assert stored["trust"] == "detected" and stored["src_format"] == "md" and stored["created_at"] == JAN + 6
    ids = engine.graph.live_edge_ids_for_file("docs", "a.md")
    assert sorted(ids) == sorted(edge_id("a.md", "mdlink", d, JAN) for d in ("b.md", "c.md"))
    assert engine.graph.invalidate_edges("docs", src_file="a.md", at=JAN + 10) == 2
    assert engine.graph.live_edge_ids_for_file("docs", "a.md") == []
    assert engine.graph.invalidate_edges("docs", src_file="a.md", at=JAN + 10) == 0
    retired = engine.store.get(".xerj-memory-docs-edges", ids[0])[0]
    assert retired["invalid_at"] == JAN + 10 and retired["trust"] == "detected" and "rejection" not in retired
    # Reconcile is not a rejection: the file comes back and so do its edges.
    engine.graph.write_edges("docs", drafts[:1], created_at=JAN + 20)
    assert engine.graph.live_edge_ids_for_file("docs", "a.md") == [edge_id("a.md", "mdlink", "b.md", JAN)]
    only = edge_id("c.md", "mdlink", "b.md", JAN)
    assert engine.graph.invalidate_edges("docs", edge_ids=[only, "0" * 32], at=JAN + 30) == 1
    assert engine.graph.live_edge_ids_for_file("nothing", "a.md") == []
    assert engine.graph.invalidate_edges("nothing", src_file="a.md", at=JAN) == 0
    assert "needs src_file or edge_ids" in refusal(engine.graph.invalidate_edges, "docs", at=JAN).reason
    bad = [EdgeDraft("x", "y", "", "d@1", 1.0, 1.0, JAN)]
    assert "edge draft [type]" in refusal(engine.graph.write_edges, "docs", bad, created_at=JAN).reason


def test_overview_timeline_too_long_for_empty_buckets(engine):
    decade = 10 * 365 * 86_400_000
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t", "valid_at": JAN, "created_at": JAN})
    engine.graph.link("notes", {"src": "a", "dst": "c", "type": "t", "valid_at": JAN, "created_at": JAN + decade})
    _, daily = engine.graph.overview("notes", {"as_of": JAN})
    assert len(daily["created_over_time"]) == 3651
    assert "created_over_time_empty_buckets_omitted" not in daily["not_shown"]
    _, hourly = engine.graph.overview("notes", {"as_of": JAN, "histogram_interval": "hour"})
    assert [b["key"] for b in hourly["created_over_time"]] == [JAN, JAN + decade]
    assert hourly["not_shown"]["created_over_time_empty_buckets_omitted"] is True
