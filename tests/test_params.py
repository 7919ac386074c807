"""One rule per spelling: every route family reads a flag, a number and an unknown key the same way (xerj_core.params)."""

from __future__ import annotations

import math

import pytest

from xerj_core import params
from xerj_core.errors import GraphError, IllegalArgument, ParsingError

from .http_helpers import client  # noqa: F401  (fixture)

# (query-string spelling, what it means; None = refused with the family's 400)
QUERY_FLAGS = [
    ("true", True),
    ("false", False),
    ("", True),  # present without a value: on, as ?pretty and ?v are in Elasticsearch
    ("1", None),
    ("0", None),
    ("TRUE", None),
    ("True", None),
    ("yes", None),
    (" true", None),
]


@pytest.fixture
def routes(client, engine):
    """Data every family's probe reads: an index, a brain with one edge, a namespace with one forgotten memory."""
    assert client.simulate_put("/books/_doc/1", json={"title": "Dune"}).status_code == 201
    engine.graph.link("notes", {"src": "a", "dst": "b", "type": "t"})
    kept = client.simulate_post("/_memory/agent", json={"text": "kept"}).json["_id"]
    gone = client.simulate_post("/_memory/agent", json={"text": "gone"}).json["_id"]
    assert client.simulate_delete(f"/_memory/agent/{gone}").status_code == 200
    return client, kept


def _search(client, value):
    result = client.simulate_get("/books/_search", params={"rest_total_hits_as_int": value})
    return result, (lambda body: isinstance(body["hits"]["total"], int))


def _cat(client, value):
    result = client.simulate_get("/_cat/indices", params={"v": value})
    return result, (lambda _body: result.text.startswith("health"))


def _ego(client, value):
    result = client.simulate_get("/_graph/notes/ego", params={"node": "a", "include_nodes": value})
    return result, (lambda body: "nodes" in body)


def _memory_list(client, value):
    result = client.simulate_get("/_memory/agent", params={"include_forgotten": value})
    return result, (lambda body: len(body["memories"]) == 2)


# route family → (probe, error type of its 400)
FAMILIES = {
    "es-search": (_search, "illegal_argument_exception"),
    "es-cat": (_cat, "illegal_argument_exception"),
    "graph": (_ego, "graph_error"),
    "memory": (_memory_list, "graph_error"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("spelling, meaning", QUERY_FLAGS)
def test_query_string_flags_read_alike_on_every_route_family(routes, family, spelling, meaning):
    client, _kept = routes
    probe, refusal = FAMILIES[family]
    result, reads_true = probe(client, spelling)
    if meaning is None:
        assert result.status_code == 400, result.text
        assert result.json["error"]["type"] == refusal
        assert "must be true or false" in result.json["error"]["reason"]
    else:
        assert result.status_code == 200, result.text
        assert reads_true(result.json if family != "es-cat" else None) is meaning


def test_a_bare_flag_is_true_on_every_route_family(routes):
    client, _kept = routes
    assert "nodes" in client.simulate_get("/_graph/notes/ego", query_string="node=a&include_nodes").json
    assert len(client.simulate_get("/_memory/agent", query_string="include_forgotten").json["memories"]) == 2
    assert isinstance(client.simulate_get("/books/_search", query_string="rest_total_hits_as_int").json["hits"]
                      ["total"], int)
    assert client.simulate_get("/_cat/indices", query_string="v").text.startswith("health")


def test_memory_purge_flag_refuses_like_the_others(routes):
    client, kept = routes
    result = client.simulate_delete(f"/_memory/agent/{kept}", params={"purge": "1"})
    assert result.status_code == 400 and result.json["error"]["type"] == "graph_error"


# -- JSON bodies: JSON types, and text where Elasticsearch coerces it -----------------------------

BODY_FLAGS = [(True, True), (False, False), ("true", True), ("false", False), ("", None), (1, None), ("1", None),
              ("TRUE", None)]


@pytest.mark.parametrize("spelling, meaning", BODY_FLAGS)
def test_es_body_flags_follow_elasticsearch(routes, spelling, meaning):
    client, _kept = routes
    result = client.simulate_post("/books/_search", json={"version": spelling})
    if meaning is None:
        assert result.status_code == 400
    else:
        assert result.status_code == 200
        assert ("_version" in result.json["hits"]["hits"][0]) is meaning


@pytest.mark.parametrize("spelling, meaning", BODY_FLAGS)
def test_contract_body_flags_take_json_booleans_only(routes, spelling, meaning):
    client, _kept = routes
    result = client.simulate_post("/_memory/agent", json={"text": "again", "dedup": spelling})
    if isinstance(spelling, bool):
        assert result.status_code in (200, 201)
    else:
        assert result.status_code == 400 and result.json["error"]["type"] == "graph_error"


# -- the coercers themselves, source by source ----------------------------------------------------

INTEGERS = [
    (5, {"query": 5, "es_body": 5, "json": 5}),
    (5.0, {"query": 5, "es_body": 5, "json": 5}),
    ("5", {"query": 5, "es_body": 5, "json": None}),
    ("-3", {"query": -3, "es_body": -3, "json": None}),
    ("+3", {"query": 3, "es_body": 3, "json": None}),
    (" 5", {"query": None, "es_body": None, "json": None}),
    ("5.0", {"query": None, "es_body": None, "json": None}),
    ("1_000", {"query": None, "es_body": None, "json": None}),
    ("٥", {"query": None, "es_body": None, "json": None}),  # a non-ASCII digit
    (5.5, {"query": None, "es_body": None, "json": None}),
    (True, {"query": None, "es_body": None, "json": None}),
    (None, {"query": None, "es_body": None, "json": None}),
]


@pytest.mark.parametrize("value, by_source", INTEGERS)
@pytest.mark.parametrize("source", ["query", "es_body", "json"])
def test_integer_spellings(value, by_source, source):
    expected = by_source[source]
    if expected is None:
        with pytest.raises(ParsingError, match=r"\[n\] must be an integer"):
            params.integer(value, "n", ParsingError, source=source)
    else:
        assert params.integer(value, "n", ParsingError, source=source) == expected


NUMBERS = [
    (0.5, 0.5, 0.5), (2, 2.0, 2.0), ("0.5", 0.5, None), (".5", 0.5, None), ("1e3", 1000.0, None),
    ("nan", None, None), ("inf", None, None), (math.nan, None, None), (math.inf, None, None), (10**400, None, None),
    ("heavy", None, None), (False, None, None),
]


@pytest.mark.parametrize("value, from_text, from_json", NUMBERS)
def test_number_spellings(value, from_text, from_json):
    for source, expected in (("query", from_text), ("es_body", from_text), ("json", from_json)):
        if expected is None:
            with pytest.raises(GraphError):
                params.number(value, "w", GraphError, source=source)
        else:
            assert params.number(value, "w", GraphError, source=source) == expected


def test_number_reasons_say_which_rule_failed():
    with pytest.raises(GraphError, match=r"\[w\] must be a number"):
        params.number("heavy", "w", GraphError, source="query")
    with pytest.raises(GraphError, match=r"\[w\] must be finite"):
        params.number(math.inf, "w", GraphError, source="json")


def test_unit_clamps_or_refuses():
    assert params.unit(7, "w", GraphError, clamp=True, source="json") == 1.0
    assert params.unit(-1, "w", GraphError, clamp=True, source="json") == 0.0
    with pytest.raises(GraphError, match="between 0 and 1"):
        params.unit(7, "w", GraphError, clamp=False, source="json")


def test_instants_on_every_source():
    assert params.instant("1751328000000", "t", GraphError) == 1751328000000
    assert params.instant(1751328000000, "t", GraphError) == 1751328000000
    assert params.instant("2025-07-01T00:00:00Z", "t", GraphError) == 1751328000000
    assert params.instant("2025-07-01T02:00:00.5+02:00", "t", GraphError) == 1751328000500
    for bad in ("now", "2025-13-01T00:00:00Z", True, None, math.nan, 2**60):
        with pytest.raises(IllegalArgument):
            params.instant(bad, "t", IllegalArgument)


def test_lists_and_choices():
    assert params.names("a, b,,a", "l", GraphError) == ["a", "b"]
    assert params.names(["a", "b", "a"], "l", GraphError) == ["a", "b"]
    with pytest.raises(GraphError, match="comma-separated"):
        params.names(5, "l", GraphError)
    assert params.choice("in", "d", ("out", "in", "both"), GraphError) == "in"
    with pytest.raises(GraphError, match=r"\[d\] must be one of out, in, both"):
        params.choice("IN", "d", ("out", "in", "both"), GraphError)
    with pytest.raises(GraphError, match=r"\[i\] must be day or hour"):
        params.choice("week", "i", ("day", "hour"), GraphError)


def test_unknown_keys_are_worded_for_their_surface():
    with pytest.raises(GraphError, match=r"unknown parameter \[hop\] for ego; expected one of: hops, node"):
        params.refuse_unknown({"hop": 1, "pretty": ""}, ["node", "hops"], GraphError, what="ego")
    with pytest.raises(IllegalArgument, match=r"request \[_search\] contains unrecognized parameter: \[qq\]"):
        params.refuse_unknown({"qq": 1}, ["q"], IllegalArgument, what="_search")
    with pytest.raises(ParsingError, match=r"\[update\] unknown field \[dco\]"):
        params.refuse_unknown({"dco": 1}, ["doc"], ParsingError, what="update", kind="field", ignored=frozenset())
    params.refuse_unknown({"pretty": "", "node": "a"}, ["node"], GraphError, what="ego")


@pytest.mark.parametrize("route", ["/_graph/notes/ego?node=a&hop=2", "/_memory/agent?sise=3",
                                   "/books/_search?qq=x", "/books/_count?qq=x"])
def test_unknown_query_parameters_are_refused_on_every_route_family(routes, route):
    client, _kept = routes
    path, _, query = route.partition("?")
    result = client.simulate_get(path, query_string=query)
    assert result.status_code == 400
    assert ("unknown parameter" in result.json["error"]["reason"]
            or "unrecognized parameter" in result.json["error"]["reason"])
