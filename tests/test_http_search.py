"""Search over HTTP: _search, _count and _msearch through engine.search, with ES-shaped errors."""

from __future__ import annotations

import pytest

from .http_helpers import client, error_type, ndjson  # noqa: F401  (fixtures)


@pytest.fixture
def books(client):
    client.simulate_put("/books", json={"mappings": {"properties": {"title": {"type": "text"},
                                                                    "year": {"type": "long"},
                                                                    "tag": {"type": "keyword"}}}})
    rows = [("1", "Dune", 1965, "sf"), ("2", "Dune Messiah", 1969, "sf"), ("3", "Emma", 1815, "classic")]
    body = b"".join(ndjson({"index": {"_index": "books", "_id": i}}, {"title": t, "year": y, "tag": g})
                    for i, t, y, g in rows)
    assert client.simulate_post("/_bulk", body=body).json["errors"] is False
    return client


def test_search_by_body_and_query_string(books):
    result = books.simulate_post("/books/_search", json={"query": {"match": {"title": "dune"}}})
    assert result.status_code == 200
    hits = result.json["hits"]
    assert hits["total"]["value"] == 2
    assert {h["_id"] for h in hits["hits"]} == {"1", "2"}
    assert hits["hits"][0]["_index"] == "books" and "_score" in hits["hits"][0]
    by_get = books.simulate_get("/books/_search", json={"query": {"term": {"tag": "classic"}}})
    assert [h["_id"] for h in by_get.json["hits"]["hits"]] == ["3"]
    sized = books.simulate_get("/books/_search", params={"size": "1"})
    assert len(sized.json["hits"]["hits"]) == 1


def test_search_without_an_index_and_with_wildcards(books):
    books.simulate_put("/films/_doc/1", json={"title": "Dune"})
    everywhere = books.simulate_post("/_search", json={"query": {"match": {"title": "dune"}}})
    assert {h["_index"] for h in everywhere.json["hits"]["hits"]} == {"books", "films"}
    pattern = books.simulate_post("/fil*/_search", json={"query": {"match_all": {}}})
    assert [h["_index"] for h in pattern.json["hits"]["hits"]] == ["films"]


def test_search_errors_are_es_shaped(books):
    missing = books.simulate_post("/nope/_search", json={})
    assert missing.status_code == 404 and error_type(missing) == "index_not_found_exception"
    unknown = books.simulate_post("/books/_search", json={"query": {"no_such_query": {}}})
    assert unknown.status_code == 400 and unknown.json["status"] == 400
    invalid = books.simulate_post("/books/_search", body=b'{"query": ')
    assert invalid.status_code == 400 and error_type(invalid) == "parsing_exception"


def test_count(books):
    assert books.simulate_get("/books/_count").json["count"] == 3
    assert books.simulate_post("/books/_count", json={"query": {"range": {"year": {"gte": 1900}}}}).json["count"] == 2
    assert books.simulate_get("/_count").json["count"] == 3


def test_msearch(books):
    body = ndjson({"index": "books"}, {"query": {"match": {"title": "emma"}}},
                  {}, {"query": {"match_all": {}}},
                  {"index": "nope"}, {"query": {"match_all": {}}})
    result = books.simulate_post("/_msearch", body=body)
    assert result.status_code == 200
    first, second, third = result.json["responses"]
    assert first["status"] == 200 and [h["_id"] for h in first["hits"]["hits"]] == ["3"]
    assert second["hits"]["total"]["value"] == 3
    assert third["status"] == 404 and third["error"]["type"] == "index_not_found_exception"
    scoped = books.simulate_post("/books/_msearch", body=ndjson({}, {"query": {"match": {"title": "messiah"}}}))
    assert [h["_id"] for h in scoped.json["responses"][0]["hits"]["hits"]] == ["2"]
    odd = books.simulate_post("/_msearch", body=ndjson({"index": "books"}))
    assert odd.status_code == 400
    for bad in (ndjson({"index": 5}, {}), ndjson({"index": ["books", 5]}, {}), b""):
        refused = books.simulate_post("/_msearch", body=bad)
        assert refused.status_code == 400 and refused.json["status"] == 400


def test_a_write_is_searchable_at_once_and_a_delete_disappears(books):
    books.simulate_put("/books/_doc/4", json={"title": "Solaris", "year": 1961, "tag": "sf"})
    found = books.simulate_post("/books/_search", json={"query": {"match": {"title": "solaris"}}}).json
    assert [h["_id"] for h in found["hits"]["hits"]] == ["4"]
    books.simulate_delete("/books/_doc/4")
    assert books.simulate_post("/books/_count", json={"query": {"match": {"title": "solaris"}}}).json["count"] == 0


def test_prefix_and_wildcard_over_http(books):
    prefix = books.simulate_post("/books/_search", json={"query": {"prefix": {"tag": "s"}}})
    assert prefix.status_code == 200 and {h["_id"] for h in prefix.json["hits"]["hits"]} == {"1", "2"}
    wildcard = books.simulate_post("/books/_count", json={"query": {"wildcard": {"tag": {"value": "C*SS?C",
                                                                                          "case_insensitive": True}}}})
    assert wildcard.status_code == 200 and wildcard.json["count"] == 1
    on_text = books.simulate_post("/books/_search", json={"query": {"prefix": {"title": "mes"}}})
    assert on_text.status_code == 200 and [h["_id"] for h in on_text.json["hits"]["hits"]] == ["2"]
    typed = books.simulate_get("/books/_search", params={"q": "title:Mess*"})  # lowercased, as its words are
    assert typed.status_code == 200 and [h["_id"] for h in typed.json["hits"]["hits"]] == ["2"]
    unfielded = books.simulate_get("/books/_search", params={"q": "em?a OR du*"})
    assert {h["_id"] for h in unfielded.json["hits"]["hits"]} == {"1", "2", "3"}
    typing = books.simulate_post("/books/_search", json={"query": {"match_phrase_prefix": {"title": "dune mes"}}})
    assert typing.status_code == 200 and [h["_id"] for h in typing.json["hits"]["hits"]] == ["2"]
    on_number = books.simulate_post("/books/_search", json={"query": {"prefix": {"year": "19"}}})
    assert on_number.status_code == 400 and error_type(on_number) == "illegal_argument_exception"
    assert "use a keyword or text field" in on_number.json["error"]["reason"]
    no_value = books.simulate_post("/books/_search", json={"query": {"wildcard": {"tag": {"boost": 2}}}})
    assert no_value.status_code == 400 and error_type(no_value) == "parsing_exception"


def test_match_phrase_over_http(books):
    phrase = books.simulate_post("/books/_search", json={"query": {"match_phrase": {"title": "dune messiah"}}})
    assert phrase.status_code == 200 and [h["_id"] for h in phrase.json["hits"]["hits"]] == ["2"]
    backwards = books.simulate_post("/books/_count", json={"query": {"match_phrase": {"title": "messiah dune"}}})
    assert backwards.status_code == 200 and backwards.json["count"] == 0
    quoted = books.simulate_get("/books/_search", params={"q": 'title:"dune messiah"'})
    assert [h["_id"] for h in quoted.json["hits"]["hits"]] == ["2"]
    sloppy = books.simulate_post("/books/_search", json={"query": {"match_phrase": {"title": {"query": "dune x",
                                                                                             "slop": 1}}}})
    assert sloppy.status_code == 400 and error_type(sloppy) == "illegal_argument_exception"
