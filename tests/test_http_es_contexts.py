"""Scroll, point in time and search_after in Elasticsearch's shapes: snapshots that later writes do not change."""

from __future__ import annotations

import time

import pytest

from .http_helpers import audit_log, client, ndjson  # noqa: F401  (fixtures)


def _load(client, index: str, n: int, start: int = 0) -> None:
    rows = []
    for i in range(start, start + n):
        rows += [{"index": {"_index": index, "_id": str(i)}}, {"n": i, "tag": f"t{i % 7}", "text": f"word{i % 3}"}]
    assert client.simulate_post("/_bulk", body=ndjson(*rows)).json["errors"] is False


@pytest.fixture
def engine(tmp_path, pm):
    """The shared engine, recording every read in the audit trail: a test below reads which indices a
    scroll or point-in-time page targeted from its audit event, and these are ordinary indices."""
    from xerj_core.engine import Engine, EngineConfig

    with Engine(tmp_path / "data", pm, config=EngineConfig(tail_rows=8, audit_reads="all")) as eng:
        yield eng


@pytest.fixture
def books(client):
    client.simulate_put("/books", json={"mappings": {"properties": {
        "n": {"type": "long"}, "tag": {"type": "keyword"}, "text": {"type": "text"}}}})
    _load(client, "books", 25)
    return client


def test_cluster_health_is_green_on_a_healthy_node(books):
    body = books.simulate_get("/_cluster/health").json
    assert body["status"] == "green" and body["timed_out"] is False
    assert body["number_of_nodes"] == 1 and body["number_of_data_nodes"] == 1
    assert body["active_primary_shards"] == body["active_shards"] >= 1
    assert body["unassigned_shards"] == 0 and body["active_shards_percent_as_number"] == 100.0
    per_index = books.simulate_get("/_cluster/health/books", params={"level": "indices"}).json
    assert per_index["indices"]["books"]["status"] == "green" and per_index["active_shards"] == 1
    assert books.simulate_get("/_cluster/health", params={"wait_for_status": "yellow"}).status_code == 200
    missing = books.simulate_get("/_cluster/health/nope", params={"wait_for_status": "green", "timeout": "1s"})
    assert missing.status_code == 408 and missing.json["status"] == "red" and missing.json["timed_out"] is True
    assert books.simulate_get("/_cluster/health", params={"level": "bogus"}).status_code == 400


def test_scroll_pages_through_a_snapshot_and_clears(books):
    first = books.simulate_post("/books/_search", params={"scroll": "1m"},
                                json={"size": 10, "sort": ["_doc"]}).json
    scroll_id = first["_scroll_id"]
    assert first["hits"]["total"] == {"value": 25, "relation": "eq"}
    seen = [h["_id"] for h in first["hits"]["hits"]]
    # Writes after the scroll opened are not part of it: a new document, an update and a delete.
    books.simulate_put("/books/_doc/new", json={"n": 999})
    books.simulate_put("/books/_doc/0", json={"n": -1, "changed": True})
    books.simulate_delete("/books/_doc/24")
    while True:
        page = books.simulate_post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id}).json
        assert page["_scroll_id"] == scroll_id and page["hits"]["total"]["value"] == 25
        if not page["hits"]["hits"]:
            break
        seen += [h["_id"] for h in page["hits"]["hits"]]
        if "24" in [h["_id"] for h in page["hits"]["hits"]]:
            deleted = next(h for h in page["hits"]["hits"] if h["_id"] == "24")
            assert deleted["_source"]["n"] == 24  # a document deleted since is still in the snapshot
    assert sorted(seen, key=int) == [str(i) for i in range(25)]
    assert len(seen) == len(set(seen))
    # GET with the id in the path works too, and DELETE frees it.
    assert books.simulate_get(f"/_search/scroll/{scroll_id}").status_code == 200
    cleared = books.simulate_delete("/_search/scroll", json={"scroll_id": [scroll_id]})
    assert cleared.status_code == 200 and cleared.json == {"succeeded": True, "num_freed": 1}
    gone = books.simulate_post("/_search/scroll", json={"scroll_id": scroll_id})
    assert gone.status_code == 404 and gone.json["error"]["type"] == "search_context_missing_exception"
    again = books.simulate_delete("/_search/scroll", json={"scroll_id": scroll_id})
    assert again.status_code == 404 and again.json == {"succeeded": True, "num_freed": 0}


def test_scroll_in_score_order_shows_no_sort_values_and_sees_each_hit_once(books):
    first = books.simulate_post("/books/_search", params={"scroll": "30s", "size": "4"},
                                json={"query": {"match": {"text": "word1"}}}).json
    hits = list(first["hits"]["hits"])
    assert all("sort" not in h for h in hits)
    while True:
        page = books.simulate_post("/_search/scroll", json={"scroll_id": first["_scroll_id"]}).json
        if not page["hits"]["hits"]:
            break
        hits += page["hits"]["hits"]
    assert sorted(int(h["_id"]) for h in hits) == [i for i in range(25) if i % 3 == 1]
    scores = [h["_score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert books.simulate_delete("/_search/scroll/_all").json["num_freed"] == 1


def test_scroll_keep_alive_expires_and_is_validated(books, monkeypatch):
    first = books.simulate_post("/books/_search", params={"scroll": "1s"}, json={"size": 5}).json
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 5)
    gone = books.simulate_post("/_search/scroll", json={"scroll_id": first["_scroll_id"]})
    assert gone.status_code == 404 and gone.json["error"]["type"] == "search_context_missing_exception"
    monkeypatch.undo()
    too_long = books.simulate_post("/books/_search", params={"scroll": "2d"}, json={})
    assert too_long.status_code == 400 and "is too large" in too_long.json["error"]["reason"]
    bad = books.simulate_post("/books/_search", params={"scroll": "soon"}, json={})
    assert bad.status_code == 400
    mixed = books.simulate_post("/books/_search", params={"scroll": "1m"}, json={"search_after": [1], "sort": ["n"]})
    assert mixed.status_code == 400 and "scroll context" in mixed.json["error"]["reason"]


def test_search_after_pages_by_sort_values(books):
    seen, after = [], None
    while True:
        body = {"size": 7, "sort": [{"n": "desc"}]}
        if after is not None:
            body["search_after"] = after
        hits = books.simulate_post("/books/_search", json=body).json["hits"]["hits"]
        if not hits:
            break
        seen += [h["_source"]["n"] for h in hits]
        after = hits[-1]["sort"]
        assert after == [hits[-1]["_source"]["n"]]
    assert seen == list(range(24, -1, -1))
    keyword = books.simulate_post("/books/_search", json={"size": 100, "sort": [{"tag": "asc"}],
                                                         "search_after": ["t3"]}).json["hits"]["hits"]
    assert {h["_source"]["tag"] for h in keyword} == {"t4", "t5", "t6"}
    between = books.simulate_post("/books/_search", json={"size": 100, "sort": ["tag"],
                                                         "search_after": ["t35"]}).json["hits"]["hits"]
    assert {h["_source"]["tag"] for h in between} == {"t4", "t5", "t6"}
    wrong = books.simulate_post("/books/_search", json={"sort": ["n"], "search_after": [1, 2]})
    assert wrong.status_code == 400 and wrong.json["error"]["reason"] == "search_after has 2 value(s) but sort has 1."
    with_from = books.simulate_post("/books/_search", json={"from": 5, "sort": ["n"], "search_after": [1]})
    assert with_from.status_code == 400


def test_point_in_time_does_not_see_later_writes(books):
    opened = books.simulate_post("/books/_pit", params={"keep_alive": "1m"})
    assert opened.status_code == 200 and set(opened.json) == {"id", "_shards"}
    pit = opened.json["id"]
    books.simulate_put("/books/_doc/new", json={"n": 1000, "tag": "t1"})
    books.simulate_put("/books/_doc/3", json={"n": 3, "tag": "changed"})
    books.simulate_delete("/books/_doc/4")
    body = {"size": 100, "pit": {"id": pit, "keep_alive": "1m"}, "sort": [{"n": "asc"}],
            "query": {"match_all": {}}}
    found = books.simulate_post("/_search", json=body).json
    assert found["pit_id"] == pit
    hits = found["hits"]["hits"]
    assert [h["_id"] for h in hits] == [str(i) for i in range(25)]
    assert hits[3]["_source"]["tag"] == "t3" and hits[4]["_source"]["n"] == 4
    # the implicit _shard_doc tiebreaker closes every hit's sort values
    assert all(len(h["sort"]) == 2 and isinstance(h["sort"][1], int) for h in hits)
    count = books.simulate_post("/_search", json={"size": 0, "pit": {"id": pit}, "query": {"term": {"tag": "t3"}},
                                                  "aggs": {"n": {"stats": {"field": "n"}}}}).json
    assert count["hits"]["total"]["value"] == 4 and count["aggregations"]["n"]["count"] == 4
    # Paging with search_after inside the point in time, tiebreaker included.
    paged, after = [], None
    while True:
        body = {"size": 6, "pit": {"id": pit}, "sort": [{"tag": "asc"}]}
        if after:
            body["search_after"] = after
        hits = books.simulate_post("/_search", json=body).json["hits"]["hits"]
        if not hits:
            break
        paged += [h["_id"] for h in hits]
        after = hits[-1]["sort"]
    assert sorted(paged, key=int) == [str(i) for i in range(25)]
    refused = books.simulate_post("/books/_search", json={"pit": {"id": pit}})
    assert refused.status_code == 400 and "point in time" in refused.json["error"]["reason"]
    closed = books.simulate_delete("/_pit", json={"id": pit})
    assert closed.json == {"succeeded": True, "num_freed": 1}
    gone = books.simulate_post("/_search", json={"pit": {"id": pit}})
    assert gone.status_code == 404 and gone.json["error"]["type"] == "search_context_missing_exception"


def test_opensearch_point_in_time_routes(books):
    opened = books.simulate_post("/books/_search/point_in_time", params={"keep_alive": "5m"})
    assert opened.status_code == 200
    pit = opened.json["pit_id"]
    assert opened.json["_shards"]["successful"] == 1 and isinstance(opened.json["creation_time"], int)
    listed = books.simulate_get("/_search/point_in_time/_all").json["pits"]
    assert [p["pit_id"] for p in listed] == [pit] and listed[0]["keep_alive"] == 300_000
    closed = books.simulate_delete("/_search/point_in_time", json={"pit_id": [pit]})
    assert closed.json == {"pits": [{"pit_id": pit, "successful": True}]}
    assert books.simulate_post("/books/_search/point_in_time").status_code == 400  # keep_alive is required


def test_contexts_are_bound_to_the_principal_that_opened_them(books, engine):
    search = engine.search
    opened = search.search("books", {"size": 2}, params={"scroll": "1m"}, principal="alice")
    with pytest.raises(Exception) as refused:
        search.scroll(opened["_scroll_id"], principal="mallory")
    assert type(refused.value).__name__ == "SearchContextMissing"
    assert len(search.scroll(opened["_scroll_id"], principal="alice")["hits"]["hits"]) == 2
    assert search.contexts.close([opened["_scroll_id"]], "mallory", "scroll") == []


def test_deleted_index_ends_its_contexts(books):
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).json["id"]
    books.simulate_delete("/books")
    gone = books.simulate_post("/_search", json={"pit": {"id": pit}})
    assert gone.status_code == 404 and gone.json["error"]["type"] == "search_context_missing_exception"


def test_continuing_a_context_targets_the_indices_it_pinned(books, client, audit_log):
    client.simulate_put("/other/_doc/1", json={"n": 1})
    opened = books.simulate_post("/books/_search", params={"scroll": "1m"}, json={"size": 1}).json
    books.simulate_post("/_search/scroll", json={"scroll_id": opened["_scroll_id"]})
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).json["id"]
    books.simulate_post("/_search", json={"pit": {"id": pit}})
    scroll_event, pit_event = audit_log[-3], audit_log[-1]
    assert scroll_event["op"] == "scroll" and scroll_event["resource"] == "books"
    assert pit_event["op"] == "search" and pit_event["resource"] == "books"


def test_sources_are_kept_aside_only_while_a_context_can_read_them(books, engine, monkeypatch):
    from xerj_core.store import pins

    def retired(row: int):
        with engine.store.read_txn() as raw:
            ix = engine.store.open_reader(raw, "books").ix
            return pins.retired_source(raw, engine.store.env.dbs, ix, row)

    with engine.store.reader("books") as reader:
        rows = {doc_id: reader.row_of(doc_id) for doc_id in ("1", "2", "3")}
    assert retired(rows["1"]) is None
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "2s"}).json["id"]
    books.simulate_delete("/books/_doc/1")
    assert retired(rows["1"]) is not None  # the point in time may still show it
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 10)
    books.simulate_delete("/books/_doc/2")
    assert retired(rows["2"]) is None  # past every keep-alive: nothing is kept, even before a sweep
    assert books.simulate_post("/_search", json={"pit": {"id": pit}}).status_code == 404
    books.simulate_delete("/books/_doc/3")
    assert retired(rows["1"]) is None and retired(rows["3"]) is None  # closing released what was kept


def test_shard_doc_sort_key(books):
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).json["id"]
    alone = books.simulate_post("/_search", json={"size": 3, "pit": {"id": pit}, "sort": ["_shard_doc"]}).json
    values = [h["sort"] for h in alone["hits"]["hits"]]
    assert all(len(v) == 1 for v in values) and values == sorted(values)
    rest = books.simulate_post("/_search", json={"size": 100, "pit": {"id": pit}, "sort": ["_shard_doc"],
                                                 "search_after": values[-1]}).json["hits"]["hits"]
    assert len(rest) == 22 and rest[0]["sort"][0] > values[-1][0]
    both = books.simulate_post("/_search", json={"size": 2, "pit": {"id": pit},
                                                 "sort": [{"tag": "desc"}, {"_shard_doc": "asc"}]}).json
    assert [len(h["sort"]) for h in both["hits"]["hits"]] == [2, 2]
    assert both["hits"]["hits"][0]["sort"][0] == "t6"
    desc = books.simulate_post("/_search", json={"pit": {"id": pit}, "sort": [{"_shard_doc": "desc"}]})
    assert desc.status_code == 400


def test_open_contexts_are_bounded(books, monkeypatch):
    from xerj_core.query import contexts

    monkeypatch.setattr(contexts, "MAX_OPEN_CONTEXTS", 2)
    for _ in range(2):
        assert books.simulate_post("/books/_search", params={"scroll": "1m"}, json={}).status_code == 200
    refused = books.simulate_post("/books/_search", params={"scroll": "1m"}, json={})
    assert refused.status_code == 429 and refused.json["error"]["type"] == "too_many_scroll_contexts_exception"
    assert "search.max_open_scroll_context" in refused.json["error"]["reason"]
    assert books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).status_code == 200  # counted apart
    books.simulate_delete("/_search/scroll/_all")
    assert books.simulate_post("/books/_search", params={"scroll": "1m"}, json={}).status_code == 200


def test_a_point_in_time_scores_with_its_own_statistics(books):
    query = {"size": 100, "query": {"match": {"text": "word1"}}}
    before = books.simulate_post("/books/_search", json=query).json["hits"]["hits"]
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).json["id"]
    books.simulate_delete(f"/books/_doc/{before[0]['_id']}")
    books.simulate_put("/books/_doc/extra", json={"n": 500, "text": "word1 word1 word1"})
    _load(books, "books", 30, start=100)  # enough new rows to seal the tail in small configurations
    inside = books.simulate_post("/_search", json={**query, "pit": {"id": pit}}).json["hits"]["hits"]
    assert [(h["_id"], round(h["_score"], 6)) for h in inside] == \
        [(h["_id"], round(h["_score"], 6)) for h in before]
    after = books.simulate_post("/books/_search", json=query).json["hits"]["hits"]
    assert {h["_id"] for h in after} != {h["_id"] for h in before}  # the live index did change


def test_a_compaction_waits_while_a_point_in_time_pins_the_index(books):
    # A context rebuilds its snapshot from row numbers; a compaction renumbers rows, so it must wait.
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).json["id"]
    for i in range(10):
        books.simulate_delete(f"/books/_doc/{i}")
    assert books.simulate_post("/books/_forcemerge").status_code == 200
    assert books.simulate_get("/books/_stats").json["indices"]["books"]["primaries"]["docs"]["deleted"] == 10
    body = {"size": 100, "pit": {"id": pit}, "sort": [{"n": "asc"}]}
    hits = books.simulate_post("/_search", json=body).json["hits"]["hits"]
    assert [h["_id"] for h in hits] == [str(i) for i in range(25)]
    assert hits[0]["_source"]["n"] == 0
    books.simulate_delete("/_pit", json={"id": pit})
    books.simulate_post("/books/_forcemerge")
    stats = books.simulate_get("/books/_stats").json["indices"]["books"]["primaries"]["docs"]
    assert stats["count"] == 15 and stats["deleted"] < 10  # what is left are fillers padding a tail
    found = books.simulate_post("/books/_search", json={"size": 100, "sort": [{"n": "asc"}]}).json["hits"]["hits"]
    assert [h["_id"] for h in found] == [str(i) for i in range(10, 25)]


def test_hits_without_their_source_name_the_same_documents_and_versions(books):
    # _source false reads each hit's id and version without decoding its JSON; in a point in time, a document
    # overwritten or deleted since comes from the copy kept aside, as with its source shown
    pit = books.simulate_post("/books/_pit", params={"keep_alive": "1m"}).json["id"]
    books.simulate_put("/books/_doc/3", json={"n": 3, "tag": "t3", "text": "changed"})
    books.simulate_delete("/books/_doc/4")
    for scope in ({"pit": {"id": pit}}, {}):
        path = "/_search" if scope else "/books/_search"
        for query in ({"match": {"text": "word1 word0"}}, {"match_all": {}}):
            body = {**scope, "size": 30, "version": True, "query": query, "sort": [{"n": "asc"}]}
            shown = books.simulate_post(path, json=body).json["hits"]["hits"]
            hidden = books.simulate_post(path, json={**body, "_source": False}).json["hits"]["hits"]
            assert shown and all("_source" in h for h in shown) and not any("_source" in h for h in hidden)
            strip = [{k: v for k, v in h.items() if k != "_source"} for h in shown]
            assert strip == hidden
            assert ("4" in [h["_id"] for h in hidden]) == bool(scope)  # the PIT still sees the deleted document
