"""The routes a remote autoindex run uses: file batches, run close, standing edges, invalidation, detected edges."""

from __future__ import annotations

from falcon.testing import TestClient
from xerj_http import create_app

from xerj_core.autoindex.sink import derive_root_id
from xerj_core.graph.brain import edge_id

from .http_helpers import client, error_type  # noqa: F401 - the client fixture

STAMP = {"mtime_ns": 1_700_000_000_000_000_000, "size": 10, "hash": "abc"}


def note(doc_id: str, title: str, **extra) -> dict:
    return {"index": "ax-notes", "id": doc_id,
            "source": {"ax_path": doc_id.split("#")[0], "title": title, "text": title, "section": "",
                       "kind": "note", "mtime": 1_700_000_000_000, "format": "markdown", **extra}}


def batch(*files, indexed_at: int = 1_700_000_000_000) -> dict:
    return {"indexed_at": indexed_at, "files": list(files)}


def draft(src: str, dst: str, valid_at: int = 1_000, **extra) -> dict:
    return {"src": src, "dst": dst, "type": "wikilink", "detector": "wikilink@1", "weight": 1.0,
            "confidence": 0.9, "valid_at": valid_at,
            "evidence": {"quote": f"see [[{dst}]]", "source": src, "offset": 4}, **extra}


def test_a_batch_writes_whole_files_and_their_states(client, engine):
    one = {"path": "a.md", "stamp": STAMP, "documents": [note("a.md", "A"), note("a.md#intro", "Intro")]}
    two = {"path": "b.md", "stamp": {**STAMP, "hash": "def"}, "documents": [note("b.md", "B")]}
    done = client.simulate_post("/_xerj/autoindex/notes/_batch", json=batch(one, two))
    assert done.status_code == 200 and done.json == {"brain": "notes", "files": 2, "documents": 3}
    state = client.simulate_get("/_xerj/autoindex/notes").json
    assert state["files"]["a.md"] == {"mtime_ns": STAMP["mtime_ns"], "size": 10, "hash": "abc",
                                      "docs": ["ax-notes/a.md", "ax-notes/a.md#intro"]}
    assert state["run"] == {"dirty": True, "detectors": None, "finished_at": None, "formats": None}
    assert state["edges_index"] is False
    # The section went away, and then the file did: its stale documents and its state go with it.
    client.simulate_post("/_xerj/autoindex/notes/_batch", json=batch(
        {"path": "a.md", "stamp": STAMP, "documents": [note("a.md", "A")], "stale": ["ax-notes/a.md#intro"]}))
    assert engine.store.get("ax-notes", "a.md#intro") is None
    client.simulate_post("/_xerj/autoindex/notes/_batch", json=batch(
        {"path": "b.md", "stamp": None, "stale": ["ax-notes/b.md"]}))
    assert engine.store.get("ax-notes", "b.md") is None
    assert set(client.simulate_get("/_xerj/autoindex/notes").json["files"]) == {"a.md"}
    # A new stamp over the same bytes: the file's documents are kept as they are, not written again.
    restamped = {**STAMP, "mtime_ns": STAMP["mtime_ns"] + 1}
    done = client.simulate_post("/_xerj/autoindex/notes/_batch", json=batch(
        {"path": "a.md", "stamp": restamped, "kept": ["ax-notes/a.md"]}))
    assert done.status_code == 200 and done.json["documents"] == 0
    assert client.simulate_get("/_xerj/autoindex/notes").json["files"]["a.md"] == {
        "mtime_ns": restamped["mtime_ns"], "size": 10, "hash": "abc", "docs": ["ax-notes/a.md"]}
    assert engine.store.get("ax-notes", "a.md") is not None


def test_a_batch_is_one_transaction(client, engine):
    good = {"path": "good.md", "stamp": STAMP, "documents": [note("good.md", "Good")]}
    bad = {"path": "bad.md", "stamp": STAMP, "documents": [note("bad.md", "Bad", mtime="not a date")]}
    refused = client.simulate_post("/_xerj/autoindex/notes/_batch", json=batch(good, bad))
    assert refused.status_code == 400 and error_type(refused) == "mapper_parsing_exception"
    assert (refused.json["error"]["path"], refused.json["error"]["doc_id"]) == ("bad.md", "bad.md")  # what failed
    assert not engine.store.exists("ax-notes")  # not even the index the first file created
    assert client.simulate_get("/_xerj/autoindex/notes").json["files"] == {}


def test_bad_batches_are_refused_before_any_write(client, engine):
    cases = [
        (batch({"path": "a.md", "stamp": STAMP, "extra": 1}), "parsing_exception", "extra fields found (extra)"),
        ({"files": []}, "parsing_exception", "required field missing @ body.indexed_at"),
        (batch({"path": "a.md", "stamp": {**STAMP, "size": "10"}}), "parsing_exception",
         "expected a 64-bit integer, got a string @ body.files[0].stamp.size"),
        (batch({"path": "a.md", "stamp": STAMP, "documents": "nope"}), "parsing_exception", "expected an array"),
        (batch({"path": "", "stamp": STAMP}), "illegal_argument_exception", "root-relative path"),
        (batch({"path": "a.md", "stamp": None, "documents": [note("a.md", "A")]}), "illegal_argument_exception",
         "no documents"),
        (batch({"path": "a.md", "stamp": STAMP, "documents": [{**note("a.md", "A"), "index": ".xerj-memory-x"}]}),
         "illegal_argument_exception", "dataset indices only"),
        (batch({"path": "a.md", "stamp": STAMP, "documents": [{**note("a.md", "A"), "index": "autoindex-catalog"}]}),
         "illegal_argument_exception", "dataset indices only"),
        (batch({"path": "a.md", "stamp": STAMP, "stale": ["no-slash"]}), "illegal_argument_exception",
         "dataset/id"),
        (batch({"path": "a.md", "stamp": STAMP, "kept": ["no-slash"]}), "illegal_argument_exception",
         "[files[0].kept[0]] must be [dataset/id]"),
        (batch({"path": "a.md", "stamp": STAMP, "kept": [".xerj-memory-x/doc"]}), "illegal_argument_exception",
         "dataset indices only"),
        (batch({"path": "a.md", "stamp": STAMP}, indexed_at=2**60), "illegal_argument_exception", "out of range"),
        (batch({"path": "a.md", "stamp": {**STAMP, "size": -1}}), "illegal_argument_exception",
         "[files[0].stamp.size] must not be negative"),
        (batch({"path": "a.md", "stamp": {"mtime_ns": -1, "size": -1, "hash": "abc"}}), "illegal_argument_exception",
         "[files[0].stamp.size] must not be negative"),
        (batch({"path": "a.md", "stamp": None, "continues": True}), "illegal_argument_exception",
         "[files[0]] continues a file's state, so it must have a stamp"),
    ]
    for body, kind, words in cases:
        refused = client.simulate_post("/_xerj/autoindex/notes/_batch", json=body)
        assert refused.status_code == 400 and error_type(refused) == kind, (body, refused.json)
        assert words in refused.json["error"]["reason"], (words, refused.json)
    assert client.simulate_post("/_xerj/autoindex/notes/_batch", body=b"[1]").status_code == 400
    assert client.simulate_post("/_xerj/autoindex/Bad/_batch", json=batch()).json["error"]["type"] == "graph_error"
    assert not engine.store.exists(".xerj-autoindex-files")


def test_finish_marks_the_run_clean_and_updates_the_catalog(client, engine):
    client.simulate_post("/_xerj/autoindex/notes/_batch", json=batch(
        {"path": "a.md", "stamp": STAMP, "documents": [note("a.md", "A"), note("a.md#x", "X")]}))
    body = {"root": "/home/me/notes", "datasets": ["ax-notes"], "detectors": ["samedir@1", "wikilink@1"],
            "finished_at": 1_700_000_000_500}
    done = client.simulate_post("/_xerj/autoindex/notes/_finish", json=body)
    assert done.status_code == 200 and done.json["acknowledged"] is True
    assert client.simulate_get("/_xerj/autoindex/notes").json["run"] == {
        "dirty": False, "detectors": ["samedir@1", "wikilink@1"], "finished_at": 1_700_000_000_500, "formats": None}
    # the formats a run read with, when the client says, come back to the next run (see test_autoindex)
    readers = ["markdown=xerj_core.autoindex.builtin_formats.markdown.MarkdownFormat"]
    assert client.simulate_post("/_xerj/autoindex/notes/_finish", json={**body, "formats": readers}).status_code == 200
    assert client.simulate_get("/_xerj/autoindex/notes").json["run"]["formats"] == readers
    catalog = engine.store.get("autoindex-catalog", "ax-notes")[0]
    rid = derive_root_id("notes")
    assert catalog == {"kind": "dataset", "dataset": "ax-notes", "source_dataset": "ax-notes", "root_id": rid,
                       "roots": ["/home/me/notes"], "brains": ["notes"], "documents": 2,
                       "updated_at": 1_700_000_000_500}
    root = engine.store.get("autoindex-catalog", f"root:{rid}")[0]
    assert root == {"kind": "root", "root_id": rid, "root": "/home/me/notes", "brain": "notes",
                    "datasets": ["ax-notes"], "updated_at": 1_700_000_000_500}
    state = client.simulate_get("/_xerj/autoindex/notes").json
    assert state["root_id"] == rid and state["root"] == "/home/me/notes"
    refused = client.simulate_post("/_xerj/autoindex/notes/_finish", json={**body, "datasets": ["Bad*"]})
    assert refused.status_code == 400
    assert client.simulate_post("/_xerj/autoindex/notes/_finish", json={**body, "more": 1}).status_code == 400


def test_detected_edges_are_a_machine_writer_never_a_persons_link(client):
    first = client.simulate_post("/_graph/notes/_detected", json={
        "created_at": 5, "nodes_index": "ax-notes", "edges": [draft("a.md", "b.md"), draft("a.md", "c.md"),
                                                              draft("a.md", "a.md")]})
    assert first.status_code == 200
    assert {k: first.json[k] for k in ("written", "created", "suppressed", "self_edges_skipped")} == {
        "written": 2, "created": 2, "suppressed": 0, "self_edges_skipped": 1}
    rejected_id = edge_id("a.md", "wikilink", "b.md", 1_000)
    assert client.simulate_delete(f"/_graph/notes/link/{rejected_id}").json["invalidated"] is True
    # The file is saved again: the same claim at a new valid_at stays retired.
    again = client.simulate_post("/_graph/notes/_detected", json={
        "created_at": 6, "edges": [draft("a.md", "b.md", valid_at=2_000)]})
    assert again.json["suppressed"] == 1
    standing = client.simulate_get("/_graph/notes/_standing").json
    assert rejected_id in standing["rejected"] and edge_id("a.md", "wikilink", "b.md", 2_000) in standing["rejected"]
    assert standing["live"] == [edge_id("a.md", "wikilink", "c.md", 1_000)]
    ego = client.simulate_get("/_graph/notes/ego", params={"node": "a.md"}).json
    assert [e["dst"] for e in ego["edges"]] == ["c.md"]
    meta = client.simulate_get("/.xerj-memory-notes-edges/_doc/__xerj-brain-meta").json["_source"]
    assert meta["nodes_index"] == "ax-notes"


def test_invalidate_retires_without_rejecting(client):
    client.simulate_post("/_graph/notes/_detected", json={"created_at": 5, "edges": [draft("a.md", "b.md")]})
    eid = edge_id("a.md", "wikilink", "b.md", 1_000)
    done = client.simulate_post("/_graph/notes/_invalidate", json={"edge_ids": [eid, "unknown"], "at": 9})
    assert done.status_code == 200 and done.json == {"brain": "notes", "invalidated": 1}
    assert client.simulate_get("/_graph/notes/_standing").json == {"brain": "notes", "live": [], "rejected": []}
    # No rejection was recorded: the corpus may teach the claim again.
    back = client.simulate_post("/_graph/notes/_detected", json={"created_at": 6,
                                                                 "edges": [draft("a.md", "b.md", valid_at=3_000)]})
    assert back.json["suppressed"] == 0
    assert client.simulate_get("/_graph/notes/_standing").json["live"] == [edge_id("a.md", "wikilink", "b.md", 3_000)]


def test_graph_machine_routes_refuse_bad_bodies_in_the_graph_shape(client):
    cases = [
        ("/_graph/notes/_detected", {"created_at": 1, "edges": [], "extra": True}, "extra fields found (extra)"),
        ("/_graph/notes/_detected", {"created_at": 1, "edges": [{**draft("a", "b"), "weight": "heavy"}]},
         "expected a number, got a string @ body.edges[0].weight"),
        ("/_graph/notes/_detected", {"created_at": 1, "edges": [{**draft("a", "b"), "trust": "asserted"}]},
         "extra fields found (trust)"),
        ("/_graph/notes/_detected", {"created_at": 1, "edges": [draft("", "b")]}, "non-empty string"),
        ("/_graph/notes/_detected", {"created_at": 1, "nodes_index": "a,,b", "edges": []}, "[nodes_index]"),
        ("/_graph/notes/_invalidate", {"edge_ids": "abc", "at": 1}, "expected an array"),
        ("/_graph/notes/_invalidate", {"edge_ids": ["x" * 600], "at": 1}, "is not an edge id"),
        ("/_graph/notes/_invalidate", {"edge_ids": []}, "required field missing @ body.at"),
        ("/_graph/Bad/_detected", {"created_at": 1, "edges": []}, "invalid brain name"),
        ("/_graph/notes/_claims", {"files": "a.md"}, "expected an array"),
        ("/_graph/notes/_claims", {"files": ["a.md", 7]}, "expected a string, got a number @ body.files[1]"),
        ("/_graph/notes/_claims", {}, "required field missing @ body.files"),
        ("/_graph/notes/_claims", {"files": [], "since": 1}, "extra fields found (since)"),
        ("/_graph/Bad/_claims", {"files": ["a.md"]}, "invalid brain name"),
    ]
    for path, body, words in cases:
        refused = client.simulate_post(path, json=body)
        assert refused.status_code == 400 and refused.json["error"]["type"] == "graph_error", (body, refused.json)
        assert "root_cause" not in refused.json["error"]
        assert words in refused.json["error"]["reason"], (words, refused.json)
    assert client.simulate_get("/_graph/nobody/_standing").json == {"brain": "nobody", "live": [], "rejected": []}
    assert client.simulate_post("/_graph/nobody/_claims", json={"files": ["a.md"]}).json == {"brain": "nobody",
                                                                                          "claims": []}


def _targets(engine, pm, method, path, body=None):
    captured = []
    app = create_app(engine, pm, insecure=True, policy=lambda principal, op, privilege, targets: captured.append(
        (op, privilege, list(targets))))
    TestClient(app).simulate_request(method, path, json=body)
    return captured[-1]


def test_every_index_the_routes_touch_is_a_target(engine, pm):
    body = batch({"path": "a.md", "stamp": STAMP, "documents": [note("a.md", "A"), {**note("m", "M"),
                                                                                   "index": "ax-mail"}],
                  "stale": ["ax-pdfs/old.pdf"], "kept": ["ax-code/kept.py"]})
    assert _targets(engine, pm, "POST", "/_xerj/autoindex/notes/_batch", body) == (
        "autoindex.batch", "write", [".xerj-memory-notes-edges", ".xerj-autoindex-files", "ax-notes", "ax-mail",
                                     "ax-pdfs", "ax-code"])
    finish = {"root": "/r", "datasets": ["ax-notes", "ax-code"], "detectors": [], "finished_at": 1}
    assert _targets(engine, pm, "POST", "/_xerj/autoindex/notes/_finish", finish) == (
        "autoindex.finish", "write", [".xerj-memory-notes-edges", ".xerj-autoindex-files", "autoindex-catalog",
                                      "ax-notes", "ax-code"])
    assert _targets(engine, pm, "GET", "/_xerj/autoindex/notes") == (
        "autoindex.state", "read", [".xerj-memory-notes-edges", ".xerj-autoindex-files"])
    assert _targets(engine, pm, "GET", "/_graph/notes/_standing") == (
        "graph.standing", "read", [".xerj-memory-notes-edges"])
    assert _targets(engine, pm, "POST", "/_graph/notes/_claims", {"files": ["a.md"]}) == (
        "graph.claims", "read", [".xerj-memory-notes-edges"])
    assert _targets(engine, pm, "POST", "/_graph/notes/_invalidate", {"edge_ids": [], "at": 1})[1:] == (
        "write", [".xerj-memory-notes-edges"])
    assert _targets(engine, pm, "POST", "/_graph/notes/_detected", {"created_at": 1, "edges": []})[1:] == (
        "write", [".xerj-memory-notes-edges"])
