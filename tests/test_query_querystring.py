"""The Lucene query string (q=, query_string): each form finds what the query DSL it stands for finds."""

from __future__ import annotations

import pytest

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.query import querystring
from xerj_core.query.service import SearchService
from xerj_core.store import Store

from .conftest import CORPORA

DOCS = {
    "a1": {"title": "Auth flow", "body": "login fails with an error", "year": 2019, "tag": "bug"},
    "a2": {"title": "Login page", "body": "the page renders", "year": 2020, "tag": "ui"},
    "a3": {"title": "Error budget", "body": "auth error rates and budgets", "year": 2021, "tag": "ops"},
    "a4": {"title": "Graph view", "body": "the graph view draws links", "year": 2022, "tag": "ui"},
    "a5": {"title": "Graph draft", "body": "a draft of the graph view", "year": 2023},
    "a6": {"body": "print(x) and what's more", "year": 2024, "tag": "code"},
}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    with Store(tmp_path_factory.mktemp("qs") / "s", tail_rows=2) as store:
        store.create_index("d", {"properties": {"title": {"type": "text"}, "body": {"type": "text"},
                                                "year": {"type": "long"}, "tag": {"type": "keyword"}}})
        for doc_id, doc in DOCS.items():
            store.put("d", doc, doc_id)
        yield SearchService(store)


def _hits(service, query) -> dict[str, float]:
    return {hit["_id"]: hit["_score"] for hit in service.search("d", {"query": query, "size": 50})["hits"]["hits"]}


def _q(service, q, **options):
    return _hits(service, {"query_string": {"query": q, **options}})


def _words(*words, field=None):
    return [{"match": {field: w}} if field else {"multi_match": {"query": w}} for w in words]


def _any(*words):
    return {"bool": {"should": _words(*words)}}


@pytest.mark.parametrize("q,body", [
    ("(auth OR login) AND error", {"bool": {"must": [_any("auth", "login"), *_words("error")]}}),
    ("error AND (auth OR login)", {"bool": {"must": [*_words("error"), _any("auth", "login")]}}),
    ("title:(graph view) -draft", {"bool": {"should": [{"bool": {"should": _words("graph", "view", field="title")}}],
                                            "must_not": _words("draft")}}),
    ("graph NOT (draft OR budget)", {"bool": {"should": _words("graph"),
                                              "must_not": [{"bool": {"should": _words("draft", "budget")}}]}}),
    ("!draft graph", {"bool": {"should": _words("graph"), "must_not": _words("draft")}}),
    ("year:[2020 TO 2022}", {"range": {"year": {"gte": 2020, "lt": 2022}}}),
    ("year:{2020 TO *]", {"range": {"year": {"gt": 2020}}}),
    ("year:>=2021 AND tag:ui", {"bool": {"must": [{"range": {"year": {"gte": 2021}}}, {"term": {"tag": "ui"}}]}}),
    ("year:<2020", {"range": {"year": {"lt": 2020}}}),
    ("-year:[2020 TO 2023]", {"bool": {"must_not": [{"range": {"year": {"gte": 2020, "lte": 2023}}}]}}),
    ("_exists_:tag", {"exists": {"field": "tag"}}),
    ("title:*", {"exists": {"field": "title"}}),
    ("graph(budget)", {"bool": {"should": [*_words("graph"), {"bool": {"should": _words("budget")}}]}}),
    ("title:(draws OR budget)", {"bool": {"should": [{"bool": {"should": _words("draws", "budget", field="title")}}]}}),
    ("what's", {"multi_match": {"query": "what's", "type": "phrase"}}),
    ('"graph view"', {"multi_match": {"query": "graph view", "type": "phrase"}}),
    ('"graph view"~0', {"multi_match": {"query": "graph view", "type": "phrase"}}),
    ("gra* -body:draft", {"bool": {"should": [{"bool": {"should": [{"prefix": {"title": "gra"}},
                                                                     {"prefix": {"body": "gra"}}]}}],
                                    "must_not": _words("draft", field="body")}}),
])
def test_a_query_string_finds_what_its_query_dsl_finds(service, q, body):
    expected = set(_hits(service, body))
    assert expected and set(_q(service, q)) == expected


def test_boosts_multiply_a_clause_and_a_group(service):
    plain, boosted = _q(service, "graph view"), _q(service, "graph^3 view")
    words = {w: _hits(service, {"multi_match": {"query": w}}) for w in ("graph", "view")}
    for doc_id, score in boosted.items():
        assert score == pytest.approx(3 * words["graph"].get(doc_id, 0) + words["view"].get(doc_id, 0))
    grouped = _q(service, "(graph view)^2")
    assert grouped == pytest.approx({doc_id: 2 * score for doc_id, score in plain.items()})
    assert set(_q(service, "tag:ui^4")) == {"a2", "a4"} and set(_q(service, "tag:ui^4").values()) == {4.0}


def test_default_operator_and_conjunctions(service):
    assert set(_q(service, "graph view", default_operator="AND")) == {"a4", "a5"}
    # as the classic parser reads it: +graph draft budget (OR leaves the words on both sides optional)
    assert set(_q(service, "graph draft OR budget", default_operator="AND")) == set(_q(service, "graph"))
    assert set(_q(service, "login && error")) == {"a1"}
    assert set(_q(service, "login || page")) == {"a1", "a2"}


@pytest.mark.parametrize("q,error,words", [
    ("foo~", IllegalArgument, "fuzzy queries (foo~) are not supported"),
    ("foo~2 bar", IllegalArgument, "fuzzy queries"),
    ('"graph view"~2', IllegalArgument, "a phrase with slop"),
    ("(graph view", ParsingError, "a parenthesis is not closed"),
    ("graph view)", ParsingError, "a closing parenthesis has no opening one"),
    ('"graph view', ParsingError, "a double quote is not closed"),
    ("year:[2020 TO 2022", ParsingError, "a range's bracket is not closed"),
    ("year:[2020 2022]", ParsingError, "a range is written [from TO to]"),
    ("[2020 TO 2022]", ParsingError, "needs a field"),
    ("year:>abc", IllegalArgument, "For input string"),
    ("(" * 5000 + "a" + ")" * 5000, ParsingError, "groups nest more than 64 deep"),
    (" ".join(f"w{n}" for n in range(5000)), IllegalArgument, "too many clauses, maxClauseCount is set to 4096"),
])
def test_what_a_query_string_cannot_say_is_a_clear_refusal(service, q, error, words):
    with pytest.raises(error) as raised:
        _q(service, q)
    assert words in str(raised.value)


def test_natural_language_reads_as_words(service):
    """Questions, apostrophes, a tilde or a dash standing alone: what agents type, read as its words."""
    assert set(_q(service, "what's the graph view?")) >= {"a4", "a5", "a6"}
    assert set(_q(service, "auth - login ~5 !")) == set(_q(service, "auth login"))
    assert querystring.parse_q("") == querystring.parse_q("*:*")


@pytest.mark.parametrize("url", ["https://marketplace.visualstudio.com/items?itemName=foam.foam-vscode",
                                 "https://github.com/foambubble/foam/issues"])
def test_a_pasted_address_finds_the_notes_holding_it(tmp_path, url):
    """From the Foam vault: a URL is its words side by side, not a field ``https`` and a path of wildcards."""
    vault = CORPORA / "foam-docs"
    if not vault.is_dir():
        pytest.skip("shared/corpora/foam-docs is not beside the checkout")
    notes = {str(path.relative_to(vault)): path.read_text(encoding="utf-8") for path in vault.rglob("*.md")}
    with Store(tmp_path / "s", tail_rows=64) as store:
        store.create_index("v", {"properties": {"text": {"type": "text"}}})
        for name, text in notes.items():
            store.put("v", {"text": text}, name)
        found = {hit["_id"] for hit in SearchService(store).search(
            "v", {"query": {"query_string": {"query": url}}, "size": 500, "_source": False})["hits"]["hits"]}
    holding = {name for name, text in notes.items() if url in text}
    assert holding and holding <= found  # every note that holds it (and those holding its words side by side)
    assert len(found) < len(notes) / 4  # not every note with "https" in it
