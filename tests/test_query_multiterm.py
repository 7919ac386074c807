"""``prefix`` and ``wildcard`` on text fields, and ``gra*`` in a query string: against a scan of the words."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.query import multiterm, querystring
from xerj_core.query.service import SearchService
from xerj_core.store import BulkOp, Store
from xerj_core.store.lexicon import Lexicon
from xerj_core.text import tokenize

# 400 documents: 400 distinct "w..." words (w000 to w399), words shared by many, and some that are not ASCII.
EXTRA = ["graph", "graphs", "photograph", "grammar", "grüße", "日本語", "日本", "straße", "alpha"]


def _text(i: int) -> str:
    return f"W{i:03d} common {EXTRA[i % len(EXTRA)]} and {'odd' if i % 2 else 'even'}"


@pytest.fixture
def words(tmp_path):
    with Store(tmp_path / "w", tail_rows=64) as store:  # several sealed segments, and a tail
        store.create_index("w", {"properties": {"body": {"type": "text"}, "k": {"type": "keyword"}}})
        for lo in range(0, 400, 90):
            store.bulk([BulkOp("index", "w", f"d{i}", {"body": _text(i), "k": f"K{i}"})
                        for i in range(lo, min(400, lo + 90))])
        store.put("w", {"body": "Graphical last words"}, "tail")
        yield SearchService(store)


def _ids(service, query, size=1000) -> set[str]:
    return {hit["_id"] for hit in service.search("w", {"query": query, "size": size})["hits"]["hits"]}


def _scan(service, test) -> set[str]:
    """The ids of live documents with a word of ``body`` that passes ``test``, read from their sources."""
    with service.store.reader("w") as reader:
        return {doc_id for _row, doc_id, doc, _v in reader.documents(range(reader.n_rows))
                if any(test(word) for word in tokenize(doc.get("body", "")))}


PATTERNS = [
    ("prefix", "w0", False), ("prefix", "w12", False), ("prefix", "", False), ("prefix", "gra", False),
    ("prefix", "GRA", True), ("prefix", "日本", False), ("prefix", "W0", False), ("prefix", "nothing", False),
    ("wildcard", "w?5?", False), ("wildcard", "*graph*", False), ("wildcard", "*", False), ("wildcard", "gr*e", False),
    ("wildcard", "STRA?E", True), ("wildcard", "*本*", False), ("wildcard", "w3*9", False), ("wildcard", "?", False),
]


@pytest.mark.parametrize("share", [0, 2])  # each segment's postings read whole, and term by term
@pytest.mark.parametrize("kind,value,fold", PATTERNS)
def test_a_pattern_on_a_text_field_finds_the_documents_holding_a_matching_word(words, monkeypatch, share, kind,
                                                                                  value, fold):
    monkeypatch.setattr(multiterm, "SEGMENT_PASS_SHARE", share)
    monkeypatch.setattr(multiterm, "TAIL_PASS_SHARE", share)
    if kind == "prefix":
        test = (lambda w: w.lower().startswith(value.lower())) if fold else (lambda w: w.startswith(value))
    else:
        test = (lambda w: fnmatch.fnmatchcase(w.lower(), value.lower())) if fold else \
            (lambda w: fnmatch.fnmatchcase(w, value))
    expected = _scan(words, test)
    assert _ids(words, {kind: {"body": {"value": value, "case_insensitive": fold}}}) == expected
    if value in ("w0", "w12", "gra", "*graph*"):
        assert expected  # the cases that must find something do


def test_text_patterns_see_deletes_overwrites_new_writes_and_merges(words):
    store = words.store
    store.delete("w", "d5")
    store.put("w", {"body": "w005 rewritten wholly"}, "d6")  # d6's old words (w006) no longer match
    store.put("w", {"body": "zebra w999"}, "late")
    assert _ids(words, {"prefix": {"body": "w00"}}) == {f"d{i}" for i in range(10) if i != 5}
    assert _ids(words, {"wildcard": {"body": "w99?"}}) == {"late"}
    assert _ids(words, {"prefix": {"body": "rewri"}}) == {"d6"}
    store.bulk([BulkOp("index", "w", f"more{i}", {"body": f"w{i:03d}x"}) for i in range(300)])  # seals and merges
    store.wait_merges()
    assert _ids(words, {"prefix": {"body": "w00"}}) == ({f"d{i}" for i in range(10) if i != 5}
                                                       | {f"more{i}" for i in range(10)})
    assert _ids(words, {"wildcard": {"body": "w00?x"}}) == {f"more{i}" for i in range(10)}


def test_a_text_pattern_scores_its_boost_and_combines_with_other_clauses(words):
    hits = words.search("w", {"query": {"prefix": {"body": {"value": "grap", "boost": 2.5}}}, "size": 500})
    assert {hit["_score"] for hit in hits["hits"]["hits"]} == {2.5}
    both = {"bool": {"must": [{"match": {"body": "odd"}}], "filter": [{"wildcard": {"body": "w01?"}}]}}
    assert _ids(words, both) == {f"d{i}" for i in range(11, 20, 2)}
    excluded = {"bool": {"filter": [{"prefix": {"body": "w00"}}], "must_not": [{"prefix": {"body": "eve"}}]}}
    assert _ids(words, excluded) == {f"d{i}" for i in range(1, 10, 2)}


def test_a_query_string_reads_stars_as_wildcards_on_text_and_a_question_mark_as_punctuation(words):
    q = words.search("w", {"query": {"query_string": {"query": "body:W01*"}}, "size": 500})["hits"]["hits"]
    assert {hit["_id"] for hit in q} == {f"d{i}" for i in range(10, 20)}  # lowercased, as the words were
    assert _ids(words, {"query_string": {"query": "w01?* -odd"}}) == {f"d{i}" for i in range(10, 20, 2)}
    assert _ids(words, {"query_string": {"query": "w01?"}}) == set()  # a question about the word "w01"
    assert _ids(words, {"query_string": {"query": "k:K1*"}}) == {"d1", *(f"d{i}" for i in range(10, 20)),
                                                                 *(f"d{i}" for i in range(100, 200))}
    assert _ids(words, {"query_string": {"query": "k:k1*"}}) == set()  # a keyword keeps its case
    # "why?" and "graphical?" are questions: their words, as before, not one more character
    assert _ids(words, {"query_string": {"query": "graphical?"}}) == {"tail"}
    assert _ids(words, {"query_string": {"query": "graphical? OR w000"}}) == {"tail", "d0"}
    boosted = {"query_string": {"query": "w00*", "fields": ["body^3"]}}
    assert {hit["_score"] for hit in words.search("w", {"query": boosted})["hits"]["hits"]} == {3.0}


def test_pattern_words_are_highlighted(words):
    body = {"query": {"query_string": {"query": "GRAPH*"}}, "highlight": {"fields": {"body": {}}}, "size": 500}
    marked = {hit["_id"]: hit["highlight"]["body"] for hit in words.search("w", body)["hits"]["hits"]}
    assert marked["tail"] == ["<em>Graphical</em> last words"]
    assert marked["d0"] == ["W000 common <em>graph</em> and even"]
    wildcard = {"query": {"wildcard": {"body": "w00?"}}, "highlight": {"fields": {"body": {}}}}
    assert words.search("w", wildcard)["hits"]["hits"][0]["highlight"]["body"][0].startswith("<em>W00")


def test_a_segment_lists_its_words_once(words):
    with words.store.reader("w") as reader:
        segment = reader.segments[0]
        first = reader.segment_terms(segment, "body")
        listed = first.all()
        assert listed == sorted(listed) and "common" in listed and "w000" in listed and len(set(listed)) == len(first)
        assert reader.segment_terms(segment, "body") is first  # kept with the segment, not read again
        assert len(reader.segment_terms(segment, "k")) == 0  # a keyword field has no postings
        assert first.nbytes < 20 * len(first)  # not a str object a term


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), min_size=1,
                        max_size=6), max_size=40), st.text(st.characters(blacklist_categories=("Cs",)), max_size=3))
@settings(max_examples=300, deadline=None)
def test_a_lexicon_lists_the_terms_with_a_prefix_as_a_sorted_list_would(terms, prefix):
    lexicon = Lexicon(term.encode() for term in terms)
    ordered = sorted(set(terms), key=str.encode)
    assert lexicon.all() == ordered
    assert lexicon.starting_with(prefix) == [term for term in ordered if term.startswith(prefix)]


def test_a_literal_start_tests_only_the_terms_in_its_range():
    terms = Lexicon([b"alpha", b"beta", b"betamax", b"bet", b"gamma", b"zeta"])
    tested: list[str] = []
    found = multiterm.matching(terms, lambda term: tested.append(term) or term.endswith("a"), "bet")
    assert found == ["beta"] and tested == ["bet", "beta", "betamax"]
    node = multiterm.dsl.Pattern("wildcard", "f", "be\\*t?x*", case_insensitive=False)
    assert multiterm.literal_start(node) == "be*t"
    assert multiterm.literal_start(multiterm.dsl.Pattern("wildcard", "f", "Be*", case_insensitive=True)) == ""


def test_an_apostrophe_is_a_word_character_in_a_query_string_and_only_a_double_quote_quotes(words):
    """Before, q= was cut by shell rules: "what's the graph" was a 400 (an unclosed quotation), the question an
    agent's search sends most often."""
    store = words.store
    store.put("w", {"body": "what's the graph view"}, "q1")
    store.put("w", {"body": "graph the view what"}, "q2")
    assert _ids(words, {"query_string": {"query": "what's graph"}}) >= {"q1", "q2"}
    assert _ids(words, {"query_string": {"query": "\"what's the\" 'graph"}}) == {"q1"} | _ids(words, {
        "match": {"body": "graph"}})  # a phrase beside a word
    assert _ids(words, {"query_string": {"query": '"graph view"'}}) == {"q1"}
    assert _ids(words, {"query_string": {"query": 'body:"the graph" AND view'}}) == {"q1"}
    assert _ids(words, {"query_string": {"query": '"graph*"'}}) == _ids(words, {"match": {"body": "graph"}})
    assert _ids(words, {"query_string": {"query": "view NOT \"what's\""}}) == {"q2"}
    assert _ids(words, {"query_string": {"query": "what AND view NOT the"}}) == set()
    assert _ids(words, {"query_string": {"query": "+what +view -\"graph view\""}}) == {"q2"}
    with pytest.raises(ParsingError, match="a double quote is not closed"):
        words.search("w", {"query": {"query_string": {"query": 'what "graph'}}})


@pytest.mark.parametrize("q,expected", [
    ("gra*", ("gra*", "gra*", False)), ("why?", ("why?", None, False)), ("work??", ("work??", None, False)),
    ("w01?*", ("w01?*", "w01?*", False)), ("gr?ph", ("gr?ph", "gr?ph", False)), ('"gra*"', ("gra*", None, True)),
    ("a\\*b", ("a*b", None, False)), ("a\\*b*", ("a*b*", "a\\*b*", False)), ("a\\?b", ("a?b", None, False)),
    ("x\\", ("x\\", None, False)), ("what's", ("what's", None, False)), ("*", ("*", "*", False)),
    ('"what\'s"', ("what's", None, True)), ('ab"c d"', ("abc d", None, True)),
])
def test_a_query_string_value_is_a_wildcard_only_with_an_unquoted_unescaped_star_or_inner_question_mark(q, expected):
    assert querystring._value(q) == expected


@pytest.fixture
def typed(tmp_path):
    with Store(tmp_path / "t", tail_rows=2) as store:  # sealed rows and a tail
        store.create_index("t", {"properties": {"text": {"type": "text"}, "k": {"type": "keyword"}}})
        for doc_id, text in {"a": "Graph view of the notes", "b": "graph viewing and graphs", "c": "the graph vi",
                             "d": "view graph", "e": "graph", "f": "a photograph view", "g": "graph visual"}.items():
            store.put("t", {"text": text, "k": text}, doc_id)
        yield SearchService(store)


def _typed(service, query) -> dict[str, float]:
    body = {"query": query, "highlight": {"fields": {"text": {}}}}
    return {hit["_id"]: hit.get("highlight", {}).get("text", [""])[0] for hit in
            service.search("t", body)["hits"]["hits"]}


def test_match_phrase_prefix_reads_the_last_word_as_a_prefix(typed):
    found = _typed(typed, {"match_phrase_prefix": {"text": "graph vi"}})
    assert found == {"a": "<em>Graph</em> <em>view</em> of the notes",
                     "b": "<em>graph</em> <em>viewing</em> and graphs", "c": "the <em>graph</em> <em>vi</em>",
                     "g": "<em>graph</em> <em>visual</em>"}
    # the first expansions in word order: vi, view, viewing, visual; two of them leave viewing and visual out
    assert set(_typed(typed, {"match_phrase_prefix": {"text": {"query": "graph vi", "max_expansions": 2}}})) == \
        {"a", "c"}
    assert set(_typed(typed, {"match_phrase_prefix": {"text": "grap"}})) == {"a", "b", "c", "d", "e", "g"}
    assert set(_typed(typed, {"match_phrase_prefix": {"k": "graph v"}})) == {"b", "g"}  # a keyword: its start
    same = typed.search("t", {"query": {"multi_match": {"query": "graph vi", "type": "phrase_prefix",
                                                        "fields": ["text"]}}})["hits"]["hits"]
    assert {hit["_id"] for hit in same} == {"a", "b", "c", "g"}


def test_match_bool_prefix_is_a_bool_of_its_words_the_last_a_prefix(typed):
    assert set(_typed(typed, {"match_bool_prefix": {"text": "graph vi"}})) == {"a", "b", "c", "d", "e", "f", "g"}
    both = _typed(typed, {"match_bool_prefix": {"text": {"query": "graph vi", "operator": "and"}}})
    assert set(both) == {"a", "b", "c", "d", "g"} and both["d"] == "<em>view</em> <em>graph</em>"
    summed = typed.search("t", {"query": {"multi_match": {"query": "graph", "type": "bool_prefix",
                                                          "fields": ["text", "k"]}}})["hits"]["hits"]
    # each field's score summed, a prefix scoring 1: the word in the text, and the keyword's value's start
    assert {hit["_id"]: hit["_score"] for hit in summed} == {"b": 2.0, "e": 2.0, "g": 2.0, "a": 1.0, "c": 1.0,
                                                            "d": 1.0}


@pytest.mark.parametrize("query,words", [
    ({"match_phrase_prefix": {"text": {"query": "a", "max_expansions": 0}}}, "[max_expansions] must be a positive"),
    ({"match_phrase_prefix": {"text": {"query": "a b", "slop": 2}}}, "[slop] above 0 is not supported"),
    ({"match_bool_prefix": {"text": {"query": "a", "fuzziness": 1}}}, "fuzziness"),
    ({"multi_match": {"query": "a", "type": "cross_fields"}}, "is not supported; use one of"),
])
def test_prefix_queries_refuse_what_they_cannot_do(typed, query, words):
    with pytest.raises((ParsingError, IllegalArgument)) as raised:
        typed.search("t", {"query": query})
    assert words in str(raised.value)
