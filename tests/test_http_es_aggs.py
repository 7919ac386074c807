"""The stats, extended_stats, cardinality and percentiles aggregations in Elasticsearch's response shapes."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from .http_helpers import client, ndjson  # noqa: F401  (fixtures)

VALUES = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]


@pytest.fixture
def shop(client):
    client.simulate_put("/shop", json={"mappings": {"properties": {
        "price": {"type": "double"}, "sku": {"type": "keyword"}, "day": {"type": "date"}}}})
    rows = []
    for i, v in enumerate(VALUES):
        rows += [{"index": {"_index": "shop", "_id": str(i)}},
                 {"price": v, "sku": f"s{i % 3}", "day": f"2026-01-0{1 + i % 3}"}]
    rows += [{"index": {"_index": "shop", "_id": "none"}}, {"sku": "s9"}]
    assert client.simulate_post("/_bulk", body=ndjson(*rows)).json["errors"] is False
    return client


def _aggs(client, aggs, query=None, params=None):
    body = {"size": 0, "aggs": aggs}
    if query:
        body["query"] = query
    answer = client.simulate_post("/shop/_search", json=body, params=params or {})
    assert answer.status_code == 200, answer.json
    return answer.json["aggregations"]


def test_stats(shop):
    got = _aggs(shop, {"p": {"stats": {"field": "price"}}})["p"]
    assert got == {"count": 8, "min": 1.0, "max": 9.0, "avg": sum(VALUES) / 8, "sum": sum(VALUES)}
    empty = _aggs(shop, {"p": {"stats": {"field": "price"}}}, query={"term": {"sku": "nothing"}})["p"]
    assert empty == {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0}
    dates = _aggs(shop, {"d": {"stats": {"field": "day"}}})["d"]
    assert dates["min_as_string"].startswith("2026-01-01") and dates["max_as_string"].startswith("2026-01-03")


def test_extended_stats(shop):
    got = _aggs(shop, {"p": {"extended_stats": {"field": "price", "sigma": 3}}})["p"]
    mean = sum(VALUES) / 8
    assert got["count"] == 8 and got["sum_of_squares"] == sum(v * v for v in VALUES)
    assert math.isclose(got["variance"], statistics.pvariance(VALUES))
    assert math.isclose(got["variance_population"], statistics.pvariance(VALUES))
    assert math.isclose(got["variance_sampling"], statistics.variance(VALUES))
    assert math.isclose(got["std_deviation"], statistics.pstdev(VALUES))
    assert math.isclose(got["std_deviation_sampling"], statistics.stdev(VALUES))
    bounds = got["std_deviation_bounds"]
    assert set(bounds) == {"upper", "lower", "upper_population", "lower_population", "upper_sampling",
                           "lower_sampling"}
    assert math.isclose(bounds["upper"], mean + 3 * statistics.pstdev(VALUES))
    assert math.isclose(bounds["lower_sampling"], mean - 3 * statistics.stdev(VALUES))
    empty = _aggs(shop, {"p": {"extended_stats": {"field": "price"}}}, query={"term": {"sku": "x"}})["p"]
    assert empty["count"] == 0 and empty["variance"] is None and empty["std_deviation_bounds"]["upper"] is None
    assert shop.simulate_post("/shop/_search", json={"aggs": {"p": {"extended_stats": {
        "field": "price", "sigma": -1}}}}).status_code == 400


def test_cardinality(shop):
    assert _aggs(shop, {"c": {"cardinality": {"field": "sku"}}})["c"] == {"value": 4}
    assert _aggs(shop, {"c": {"cardinality": {"field": "price", "precision_threshold": 100}}})["c"] == {"value": 7}
    shop.simulate_put("/shop2", json={"mappings": {"properties": {"sku": {"type": "keyword"}}}})
    across = shop.simulate_put("/shop2/_doc/1", json={"sku": "s0"})
    assert across.status_code == 201
    both = shop.simulate_post("/shop,shop2/_search", json={"size": 0, "aggs": {
        "c": {"cardinality": {"field": "sku"}}}}).json["aggregations"]["c"]
    assert both == {"value": 4}


def test_percentiles(shop):
    got = _aggs(shop, {"p": {"percentiles": {"field": "price"}}})["p"]["values"]
    assert list(got) == ["1.0", "5.0", "25.0", "50.0", "75.0", "95.0", "99.0"]
    assert got["50.0"] == float(np.percentile(VALUES, 50)) and got["1.0"] >= 1.0 and got["99.0"] <= 9.0
    listed = _aggs(shop, {"p": {"percentiles": {"field": "price", "percents": [50, 99.9], "keyed": False}}})["p"]
    assert listed == {"values": [{"key": 50.0, "value": float(np.percentile(VALUES, 50))},
                                 {"key": 99.9, "value": float(np.percentile(VALUES, 99.9))}]}
    empty = _aggs(shop, {"p": {"percentiles": {"field": "price", "percents": [50]}}}, query={"term": {"sku": "x"}})
    assert empty["p"] == {"values": {"50.0": None}}
    typed = _aggs(shop, {"p": {"percentiles": {"field": "price"}}, "s": {"stats": {"field": "price"}}},
                  params={"typed_keys": "true"})
    assert set(typed) == {"tdigest_percentiles#p", "stats#s"}
    assert shop.simulate_post("/shop/_search", json={"aggs": {"p": {"percentiles": {
        "field": "price", "percents": [101]}}}}).status_code == 400
    assert shop.simulate_post("/shop/_search", json={"aggs": {"p": {"percentiles": {
        "field": "sku"}}}}).status_code == 400


def test_metrics_under_a_bucket(shop):
    buckets = _aggs(shop, {"by": {"terms": {"field": "sku"}, "aggs": {
        "s": {"stats": {"field": "price"}}, "p": {"percentiles": {"field": "price", "percents": [50]}}}}})["by"]
    s0 = next(b for b in buckets["buckets"] if b["key"] == "s0")
    prices = [v for i, v in enumerate(VALUES) if i % 3 == 0]
    assert s0["s"]["count"] == len(prices) and s0["s"]["sum"] == sum(prices)
    assert s0["p"]["values"]["50.0"] == float(np.percentile(prices, 50))
