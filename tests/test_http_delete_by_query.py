"""``POST /{index}/_delete_by_query``: what a query matches is deleted, a changed document is a conflict, keys hold."""

from __future__ import annotations

import pytest

from xerj_core.query import service as service_module

from .http_helpers import admin_headers, audit_log, client, error_type, ndjson  # noqa: F401

N = 30


@pytest.fixture
def books(client):
    client.simulate_put("/books", json={"mappings": {"properties": {"title": {"type": "text"},
                                                                    "tag": {"type": "keyword"}}}})
    body = ndjson(*(row for i in range(N) for row in (
        {"index": {"_index": "books", "_id": str(i)}}, {"title": f"book {i}", "tag": "odd" if i % 2 else "even"})))
    assert client.simulate_post("/_bulk", body=body).json["errors"] is False
    return client


def _ids(client, index="books") -> set[str]:
    found = client.simulate_post(f"/{index}/_search", json={"size": 100, "_source": False}).json
    return {hit["_id"] for hit in found["hits"]["hits"]}


def test_the_matching_documents_are_deleted_in_batches(books):
    answer = books.simulate_post("/books/_delete_by_query", params={"scroll_size": "4", "refresh": "true"},
                                 json={"query": {"term": {"tag": "odd"}}})
    assert answer.status_code == 200, answer.text
    body = answer.json
    assert (body["total"], body["deleted"], body["batches"], body["version_conflicts"]) == (15, 15, 4, 0)
    assert body["failures"] == [] and body["timed_out"] is False
    assert _ids(books) == {str(i) for i in range(0, N, 2)}
    again = books.simulate_post("/books/_delete_by_query", json={"query": {"term": {"tag": "odd"}}}).json
    assert (again["total"], again["deleted"], again["batches"]) == (0, 0, 0)


def test_q_max_docs_and_everything(books):
    by_q = books.simulate_post("/books/_delete_by_query", params={"q": "title:(1 OR 2 OR 3)"}).json
    assert by_q["deleted"] == 3 and not {"1", "2", "3"} & _ids(books)
    capped = books.simulate_post("/books/_delete_by_query", json={"query": {"match_all": {}}, "max_docs": 5}).json
    assert capped["deleted"] == 5 and len(_ids(books)) == N - 8
    rest = books.simulate_post("/books/_delete_by_query", json={"query": {"match_all": {}}}).json
    assert rest["deleted"] == N - 8 and _ids(books) == set()


@pytest.mark.parametrize("conflicts,status", [("abort", 409), ("proceed", 200)])
def test_a_document_changed_after_the_query_read_it_is_a_conflict(books, monkeypatch, conflicts, status):
    deletes = service_module._delete_unchanged

    def rewritten_first(txn, items):
        txn.put("books", {"title": "rewritten", "tag": "odd"}, items[0][1])  # as another writer would
        return deletes(txn, items)
    monkeypatch.setattr(service_module, "_delete_unchanged", rewritten_first)
    answer = books.simulate_post("/books/_delete_by_query", params={"conflicts": conflicts, "scroll_size": "5"},
                                 json={"query": {"term": {"tag": "odd"}}})
    assert answer.status_code == status, answer.text
    body = answer.json
    if conflicts == "abort":  # the first batch's other four deleted, then stopped
        assert (body["deleted"], body["version_conflicts"], body["batches"]) == (4, 1, 1)
        failure, = body["failures"]
        assert failure["status"] == 409 and failure["cause"]["type"] == "version_conflict_engine_exception"
        assert failure["id"] in _ids(books)
    else:  # one conflict a batch, every other document deleted
        assert (body["deleted"], body["version_conflicts"], body["batches"]) == (12, 3, 3) and body["failures"] == []
        kept = {hit["_id"]: hit["_source"]["title"] for hit in books.simulate_post(
            "/books/_search", json={"size": 100, "query": {"term": {"tag": "odd"}}}).json["hits"]["hits"]}
        assert set(kept.values()) == {"rewritten"} and len(kept) == 3


@pytest.mark.parametrize("params,body,words", [
    ({"conflicts": "maybe"}, {}, "conflicts may only be"),
    ({"wait_for_completion": "false"}, {}, "[wait_for_completion=false] is not supported"),
    ({"max_docs": "0"}, {}, "[max_docs] must be greater than 0"),
    ({"scroll_size": "x"}, {}, "[scroll_size] must be a whole number"),
    ({"nonsense": "1"}, {}, "nonsense"),
    ({}, {"query": {"match_all": {}}, "size": 3}, "request does not support [size]"),
    ({}, {"slice": {"id": 0, "max": 2}}, "[slice] is not supported"),
    ({"q": "title:(book"}, {}, "a parenthesis is not closed"),
])
def test_bad_input_is_a_400_and_deletes_nothing(books, params, body, words):
    answer = books.simulate_post("/books/_delete_by_query", params=params, json=body)
    assert answer.status_code == 400 and words in answer.json["error"]["reason"], answer.text
    assert len(_ids(books)) == N


def test_a_missing_index_is_a_404(books):
    answer = books.simulate_post("/nothing/_delete_by_query", json={"query": {"match_all": {}}})
    assert answer.status_code == 404 and error_type(answer) == "index_not_found_exception"


def test_it_needs_write_on_every_index_it_names_and_is_audited(books, audit_log):
    if books.mode == "open":
        pytest.skip("keys and their privileges are the secured mode's")
    books.simulate_put("/other", json={"mappings": {"properties": {"title": {"type": "text"}}}})
    books.simulate_put("/other/_doc/x", json={"title": "other book"})

    def key(privileges, names):
        minted = books.simulate_post("/_security/api_key", json={"name": "k", "role_descriptors": {"r": {
            "indices": [{"names": names, "privileges": privileges}]}}}).json
        return {"Authorization": f"ApiKey {minted['encoded']}"}

    reader, writer = key(["read"], ["books"]), key(["read", "write"], ["books"])
    refused = books.simulate_post("/books/_delete_by_query", headers=reader, json={"query": {"match_all": {}}})
    assert refused.status_code == 403 and "indices:data/write/delete_by_query" in refused.json["error"]["reason"]
    wide = books.simulate_post("/*/_delete_by_query", headers=writer, json={"query": {"match_all": {}}})
    assert wide.status_code == 403  # a wildcard a write matches must be granted in full
    assert len(_ids(books)) == N and _ids(books, "other") == {"x"}
    done = books.simulate_post("/books/_delete_by_query", headers=writer, json={"query": {"term": {"tag": "even"}}})
    assert done.status_code == 200 and done.json["deleted"] == 15
    entries = [(e["subject"].rpartition(":")[2], e["resource"], e["privilege"], e["outcome"], e["status"])
               for e in audit_log if e.get("op") == "delete_by_query"]
    assert entries == [("k", "books", "write", "denied", 403), ("k", "*", "write", "denied", 403),
                       ("k", "books", "write", "success", 200)]
