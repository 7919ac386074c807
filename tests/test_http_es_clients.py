"""Elasticsearch client calls against a real ``xerj serve`` with two workers, through ``opensearch-py``.

Every continuation of a scroll or point in time may land on the other worker,
so these tests also prove that a context opened in one process is read in another.
"""

from __future__ import annotations

import threading

import pytest

from .test_http_serve import server  # noqa: F401  (a module-scoped xerj serve with two workers)

DOCS = 5000


def _pages(client, body: dict, **search) -> list[dict]:
    """Every hit of a search paged with ``search_after`` until a page comes back empty."""
    seen, after = [], None
    while True:
        page = dict(body, search_after=after) if after is not None else body
        answer = client.search(body=page, **search)
        if "pit" in body:
            assert answer["pit_id"] == body["pit"]["id"]
        hits = answer["hits"]["hits"]
        if not hits:
            return seen
        seen += hits
        after = hits[-1]["sort"]


@pytest.fixture(scope="module")
def client(server):
    from opensearchpy import OpenSearch, helpers

    client = OpenSearch(hosts=[{"host": "127.0.0.1", "port": server.port}], use_ssl=False, timeout=60)
    client.indices.create(index="many", body={"mappings": {"properties": {
        "n": {"type": "long"}, "group": {"type": "keyword"}, "text": {"type": "text"}}}})
    ok, errors = helpers.bulk(client, ({"_index": "many", "_id": str(n), "n": n, "group": f"g{n % 10}",
                                        "text": f"document number {n}"} for n in range(DOCS)), chunk_size=1000)
    assert ok == DOCS and errors == []
    return client


def test_cluster_health_through_the_client(client):
    health = client.cluster.health()
    assert health["status"] == "green" and health["number_of_nodes"] == 1 and health["timed_out"] is False
    assert client.cluster.health(index="many", wait_for_status="green")["active_primary_shards"] == 1


def test_helpers_scan_reads_every_document_once(client):
    from opensearchpy import helpers

    hits = list(helpers.scan(client, index="many", query={"query": {"match_all": {}}}, size=700, scroll="2m"))
    ids = [h["_id"] for h in hits]
    assert len(ids) == DOCS and set(ids) == {str(n) for n in range(DOCS)}
    assert all(h["_source"]["n"] == int(h["_id"]) for h in hits)
    # scan cleared its scroll on the way out
    assert client.clear_scroll(body={"scroll_id": "_all"})["num_freed"] == 0
    ordered = list(helpers.scan(client, index="many", query={"query": {"term": {"group": "g3"}},
                                                              "sort": [{"n": "desc"}]},
                                preserve_order=True, size=97))
    assert [h["_source"]["n"] for h in ordered] == list(range(DOCS - 7, -1, -10))


def _writer(client, stop: threading.Event, written: list[int]) -> None:
    n = DOCS
    while not stop.is_set():
        client.index(index="many", id=str(n), body={"n": n, "group": "new", "text": "written later"})
        # an update moves a document to a new row; its sort value stays, so paging must not meet it twice
        client.index(index="many", id=str(n % DOCS), body={"n": n % DOCS, "group": f"g{n % 10}", "text": "again"})
        written.append(n)
        n += 1


def test_search_after_visits_each_document_once_while_writes_continue(client):
    stop, written = threading.Event(), []
    writer = threading.Thread(target=_writer, args=(client, stop, written))
    writer.start()
    try:
        seen = _pages(client, {"size": 400, "sort": [{"n": "asc"}], "query": {"range": {"n": {"lt": DOCS}}}},
                      index="many")
    finally:
        stop.set()
        writer.join()
    assert written, "the writer ran while paging"
    assert [h["_source"]["n"] for h in seen] == list(range(DOCS))


def test_point_in_time_does_not_see_later_writes(client):
    pit = client.create_pit(index="many", params={"keep_alive": "2m"})
    pit_id = pit["pit_id"]
    assert pit["_shards"]["failed"] == 0
    before = client.count(index="many")["count"]
    client.index(index="many", id="pit-later", body={"n": -5, "group": "later"})
    client.index(index="many", id="7", body={"n": 7, "group": "changed"})
    client.delete(index="many", id="8")
    stop, written = threading.Event(), []
    writer = threading.Thread(target=_writer, args=(client, stop, written))
    writer.start()
    try:
        seen = _pages(client, {"size": 1000, "pit": {"id": pit_id, "keep_alive": "2m"}, "sort": [{"group": "asc"}]})
    finally:
        stop.set()
        writer.join()
    assert len(seen) == before and len({h["_id"] for h in seen}) == before
    by_id = {h["_id"]: h["_source"] for h in seen}
    assert "pit-later" not in by_id and by_id["7"]["group"] == "g7" and by_id["8"]["n"] == 8
    assert all(len(h["sort"]) == 2 for h in seen)  # the group, then the _shard_doc tiebreaker
    listed = client.get_all_pits()["pits"]
    assert pit_id in [p["pit_id"] for p in listed]
    assert client.delete_pit(body={"pit_id": [pit_id]})["pits"] == [{"pit_id": pit_id, "successful": True}]
    from opensearchpy.exceptions import NotFoundError

    with pytest.raises(NotFoundError):
        client.search(body={"pit": {"id": pit_id}})


def test_metric_aggregations_through_the_client(client):
    aggs = client.search(index="many", body={"size": 0, "query": {"range": {"n": {"gte": 10, "lt": 110}}}, "aggs": {
        "s": {"stats": {"field": "n"}}, "e": {"extended_stats": {"field": "n"}},
        "c": {"cardinality": {"field": "group"}}, "p": {"percentiles": {"field": "n", "percents": [50]}}}},
        )["aggregations"]
    assert aggs["s"] == {"count": 100, "min": 10.0, "max": 109.0, "avg": 59.5, "sum": 5950.0}
    assert aggs["e"]["variance_population"] == pytest.approx(833.25)
    assert aggs["c"]["value"] >= 10 and aggs["p"]["values"]["50.0"] == pytest.approx(59.5)


def test_index_administration_through_the_client(client):
    from opensearchpy import helpers
    from opensearchpy.exceptions import NotFoundError, RequestError

    client.indices.create(index="adm-1", body={"settings": {"index": {"refresh_interval": "2s"}},
                                               "aliases": {"adm-read": {}}})
    client.indices.create(index="adm-2")
    ok, errors = helpers.bulk(client, ({"_op_type": "create", "_index": "adm-2", "_id": str(n), "v": n}
                                       for n in range(5)))
    assert ok == 5 and errors == []
    ok, errors = helpers.bulk(client, [{"_op_type": "create", "_index": "adm-2", "_id": "0", "v": 0}],
                              raise_on_error=False)
    assert ok == 0 and errors[0]["create"]["status"] == 409
    client.indices.put_alias(index="adm-2", name="adm-read")
    client.indices.update_aliases(body={"actions": [{"add": {"index": "adm-2", "alias": "adm-write",
                                                             "is_write_index": True}}]})
    assert client.indices.exists_alias(name="adm-read")
    assert set(client.indices.get_alias(name="adm-read")) == {"adm-1", "adm-2"}
    client.index(index="adm-write", id="via-alias", body={"v": 99})
    found = client.search(index="adm-read", body={"query": {"range": {"v": {"gte": 3}}}})
    assert sorted(h["_id"] for h in found["hits"]["hits"]) == ["3", "4", "via-alias"]
    settings = client.indices.get_settings(index="adm-1")["adm-1"]["settings"]["index"]
    assert settings["refresh_interval"] == "2s" and settings["number_of_shards"] == "1"
    client.indices.put_settings(index="adm-1", body={"index": {"refresh_interval": "-1"}})
    assert client.indices.get_settings(index="adm-1")["adm-1"]["settings"]["index"]["refresh_interval"] == "-1"
    with pytest.raises(RequestError):
        client.indices.put_settings(index="adm-1", body={"index": {"number_of_shards": 3}})
    client.indices.close(index="adm-2")
    with pytest.raises(RequestError) as closed:
        client.search(index="adm-2", body={})
    assert closed.value.error == "index_closed_exception"
    rows = client.cat.indices(index="adm-*", format="json", h="index,status,docs.count")
    assert sorted(rows, key=lambda r: r["index"]) == [
        {"index": "adm-1", "status": "open", "docs.count": "0"},
        {"index": "adm-2", "status": "close", "docs.count": None}]
    client.indices.open(index="adm-2")
    assert client.count(index="adm-read")["count"] == 6
    aliases = client.cat.aliases(format="json", h="alias,index")
    assert {"alias": "adm-write", "index": "adm-2"} in aliases
    assert client.cat.count(index="adm-2", format="json")[0]["count"] == "6"
    client.indices.delete_alias(index="adm-1", name="adm-read")
    with pytest.raises(NotFoundError):
        client.indices.get_alias(index="adm-1", name="adm-read")


def test_a_scroll_opened_in_one_worker_continues_in_the_other(server, client):
    """Every request below is a new connection, so gunicorn hands each to whichever worker wins the accept.

    The kernel decides that, and on an idle machine one worker may win every accept of a 40-page scroll;
    so whole scrolls are repeated (each must be exact) until one of them was served by both workers.
    """
    from opensearchpy import helpers

    from .test_http_serve import _cpu_ticks, request

    helpers.bulk(client, ({"_index": "cross", "_id": str(n), "n": n} for n in range(1000)))
    workers = server.workers()
    for _attempt in range(20):
        before = {pid: _cpu_ticks(pid) for pid in workers}
        status, page = request(server.port, "POST", "/cross/_search?scroll=1m", {"size": 25, "sort": ["_doc"]})
        assert status == 200
        seen = [h["_id"] for h in page["hits"]["hits"]]
        while page["hits"]["hits"]:
            status, page = request(server.port, "POST", "/_search/scroll", {"scroll_id": page["_scroll_id"],
                                                                            "scroll": "1m"})
            assert status == 200, page
            seen += [h["_id"] for h in page["hits"]["hits"]]
        assert sorted(map(int, seen)) == list(range(1000))
        if all(_cpu_ticks(pid) > before[pid] for pid in workers):
            return
    raise AssertionError("in 20 scrolls of 40 pages, no scroll was served by both workers")
