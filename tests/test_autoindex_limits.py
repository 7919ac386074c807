"""No input a document carries makes a write raise from LMDB: long terms, keyword values, ids, node ids, names."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http_helpers import client  # noqa: F401 - fixture
from xerj_core.autoindex.pipeline import run
from xerj_core.store import limits

LONG_TOKEN = "x" * 2000
KEYWORD_40K = "k" * 40_000


def search_ids(client, index, query):  # noqa: F811 - the fixture is passed in
    result = client.simulate_post(f"/{index}/_search", json={"query": query, "size": 100})
    assert result.status_code == 200, result.json
    return sorted(hit["_id"] for hit in result.json["hits"]["hits"])


def skipped(client, index):  # noqa: F811
    """What ``GET /{index}/_stats`` says the index left unindexed."""
    stats = client.simulate_get(f"/{index}/_stats").json
    counts = stats["indices"][index]["primaries"]["not_indexed"]
    assert stats["_all"]["primaries"]["not_indexed"] == counts
    return {"terms": counts["terms_too_long"], "keywords": counts["keyword_values"]}


def test_a_2000_byte_token_is_skipped_and_the_rest_is_searchable(client, engine):  # noqa: F811
    for n in range(20):  # enough documents to seal segments (the engine fixture's tail holds 8 rows)
        body = {"text": f"ordinary words {n} {LONG_TOKEN} tail"} if n == 3 else {"text": f"ordinary words {n}"}
        assert client.simulate_put(f"/long/_doc/{n}", json=body).status_code == 201
    assert search_ids(client, "long", {"match": {"text": "tail"}}) == ["3"]
    assert search_ids(client, "long", {"match": {"text": LONG_TOKEN}}) == []
    assert client.simulate_get("/long/_doc/3").json["_source"]["text"].endswith(f"{LONG_TOKEN} tail")
    assert skipped(client, "long")["terms"] == 1


def test_a_40kb_keyword_value_stays_in_source_and_is_not_indexed(client, engine):  # noqa: F811
    assert client.simulate_put("/kw", json={"mappings": {"properties": {
        "tag": {"type": "keyword"}, "body": {"type": "text"}}}}).status_code == 200
    for n in range(12):
        tag = KEYWORD_40K if n == 5 else f"tag-{n}"
        result = client.simulate_put(f"/kw/_doc/{n}", json={"tag": tag, "body": f"words of document {n} shared"})
        assert result.status_code == 201, result.json
    assert client.simulate_get("/kw/_doc/5").json["_source"]["tag"] == KEYWORD_40K
    assert search_ids(client, "kw", {"match": {"body": "5"}}) == ["5"]
    assert search_ids(client, "kw", {"term": {"tag": KEYWORD_40K}}) == []
    assert search_ids(client, "kw", {"term": {"tag": "tag-4"}}) == ["4"]
    assert skipped(client, "kw")["keywords"] == 1


def test_a_dynamic_string_longer_than_ignore_above_gets_no_keyword_value(client, engine):  # noqa: F811
    assert client.simulate_put("/dyn/_doc/1", json={"note": "y" * 300 + " end"}).status_code == 201
    assert client.simulate_put("/dyn/_doc/2", json={"note": "short"}).status_code == 201
    assert search_ids(client, "dyn", {"term": {"note.keyword": "short"}}) == ["2"]
    assert search_ids(client, "dyn", {"match": {"note": "end"}}) == ["1"]


def test_explicit_ignore_above_is_honoured(client, engine):  # noqa: F811
    client.simulate_put("/ia", json={"mappings": {"properties": {"k": {"type": "keyword", "ignore_above": 5}}}})
    client.simulate_put("/ia/_doc/1", json={"k": "abcdef"})
    client.simulate_put("/ia/_doc/2", json={"k": "abc"})
    assert search_ids(client, "ia", {"term": {"k": "abcdef"}}) == []
    assert search_ids(client, "ia", {"term": {"k": "abc"}}) == ["2"]


def test_ids_and_names_too_long_are_clear_400s(client):  # noqa: F811
    long_id = "i" * 600
    result = client.simulate_put(f"/ids/_doc/{long_id}", json={"a": 1})
    assert result.status_code == 400 and "too long" in result.json["error"]["reason"]
    assert client.simulate_get(f"/ids/_doc/{long_id}").status_code == 404
    result = client.simulate_put("/ids/_doc/1", json={"f" * 300: "v"})
    assert result.status_code == 400 and "longer than the limit" in result.json["error"]["reason"]
    assert client.simulate_put("/" + "n" * 300, json={}).status_code == 400


def test_a_node_id_too_long_for_a_hop_is_a_clear_400(client):  # noqa: F811
    result = client.simulate_post("/_graph/b/link", json={"src": "s" * 600, "dst": "d", "type": "t"})
    assert result.status_code == 400
    assert "at most" in result.json["error"]["reason"]
    ok = client.simulate_post("/_graph/b/link", json={"src": "s" * 400, "dst": "d", "type": "t"})
    assert ok.status_code == 201
    ego = client.simulate_get("/_graph/b/ego", params={"node": "s" * 400})
    assert [e["dst"] for e in ego.json["edges"]] == ["d"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(min_size=0, max_size=700), field=st.text(min_size=1, max_size=80),
       doc_id=st.text(min_size=1, max_size=200) | st.text(min_size=500, max_size=700))
def test_no_string_a_document_carries_makes_a_write_raise(engine, value, field, doc_id):
    """Any text value, field name or id is either stored or refused with a XerjError (a 4xx), never LMDB."""
    from xerj_core.errors import XerjError

    for write in (lambda: engine.store.put("fuzz", {field: value, "k": value}, doc_id),
                  lambda: engine.store.get("fuzz", doc_id),
                  lambda: engine.search.search("fuzz", {"query": {"term": {"k": value}}}),
                  lambda: engine.search.search("fuzz", {"query": {"match": {"k": value}}})):
        try:
            write()
        except XerjError as exc:
            assert exc.status < 500


def test_a_folder_with_a_long_token_indexes_completely(tmp_path, engine):
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "long.md").write_text(f"# Long\n\nA file holding {LONG_TOKEN} and the word pumpernickel.\n")
    (folder / "other.txt").write_text("a line of " + "z" * 508 + " and a word quarkbread\n")
    # a 40 kB tag (a dynamic keyword) and a 40 kB heading (the mapped `section` keyword, and an anchor)
    (folder / "huge.md").write_text(f"---\ntags: [{KEYWORD_40K}]\n---\n# {'h' * 40_000} wholemeal\n\nrye\n")
    for n in range(10):
        (folder / f"n{n}.md").write_text(f"# Note {n}\n\nordinary note {n}\n")
    summary = run(engine, folder)
    assert summary.files_failed == [] and summary.files_indexed == 13
    index = summary.datasets[0]
    hits = engine.search.search(index, {"query": {"match": {"text": "pumpernickel"}}})["hits"]["hits"]
    assert {h["_source"]["ax_path"] for h in hits} == {"long.md"}
    hits = engine.search.search(index, {"query": {"match": {"text": "quarkbread"}}})["hits"]["hits"]
    assert {h["_source"]["ax_path"] for h in hits} == {"other.txt"}
    hits = engine.search.search(index, {"query": {"match": {"text": "wholemeal"}}})["hits"]["hits"]
    assert {h["_source"]["ax_path"] for h in hits} == {"huge.md"}
    assert hits[0]["_source"]["section"] == f"{'h' * 40_000} wholemeal"
    card = engine.store.get(index, "huge.md")[0]
    assert card["tags"] == [KEYWORD_40K]


def test_deep_paths_are_accounted_not_a_crash(tmp_path, engine):
    folder = tmp_path / "vault"
    deep = folder / "/".join(["d" * 60] * 7)  # a 427-byte directory path
    deep.mkdir(parents=True)
    (deep / "note.md").write_text("# Deep\n\nspelt\n")
    (deep / ("b" * 100 + ".bin")).write_bytes(bytes(range(256)))
    (deep / ("n" * 100 + ".md")).write_text("# Deeper\n\nemmer\n")
    summary = run(engine, folder, brain="b" * 150)
    assert summary.files_seen == 3 and summary.files_indexed == 1
    assert [f["kind"] for f in summary.files_skipped] == ["no_format"]
    assert ["a document id is" in f["reason"] for f in summary.files_failed] == [True]
    again = run(engine, folder, brain="b" * 150)
    assert again.files_unchanged == 1 and len(again.files_skipped) == 1 and again.files_indexed == 0


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
def test_a_file_name_that_is_not_utf8_is_indexed_under_an_escaped_id(tmp_path, engine):
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nfine\n")
    bad = os.fsencode(folder) + b"/bad\nname\xff\xfe.md"
    with open(bad, "wb") as fh:
        fh.write(b"# Bad name\n\nstill readable\n")
    summary = run(engine, folder)
    assert summary.files_failed == []
    assert summary.files_indexed == 2
    index = summary.datasets[0]
    doc = engine.store.get(index, "bad\nname\\xff\\xfe.md")
    assert doc is not None and doc[0]["title"] == "Bad name"
    assert summary.files_indexed == 2 and run(engine, folder).files_unchanged == 2


def test_limits_fit_the_key_layout():
    assert 12 + limits.MAX_FIELD_BYTES + 1 + limits.MAX_TERM_BYTES <= limits.LMDB_MAX_KEY_BYTES
