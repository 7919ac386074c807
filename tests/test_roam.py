"""Roam Research JSON exports: a document per page, its outline searchable, its references followed as edges."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from xerj_core.autoindex.builtin_formats import roam
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import FormatDeclined, FormatError
from xerj_core.testing.detectors import AbstractDetectorTests, parse_files, run_detectors
from xerj_core.testing.formats import AbstractFormatTests
from xerj_detectors import roamlink

from .test_autoindex import index_of

FIXTURES = Path(__file__).parent / "fixtures" / "roam"
SHAPES = (FIXTURES / "shapes.json").read_bytes()
THEMES = (FIXTURES / "small-test-graph.json").read_bytes()
MTIME = 1_700_000_000_000


def pages(data: bytes = SHAPES, path: str = "graph.json") -> dict[str, object]:
    """The export's page documents by title."""
    card, *found = roam.RoamFormat().parse(path, data, MTIME)
    assert card.kind == "file" and card.fields["pages"] == len(found)
    return {doc.title: doc for doc in found}


class TestRoamFormatConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return roam.RoamFormat()

    @pytest.fixture
    def sample_files(self):
        return {"graph/shapes.json": SHAPES, "themes.json": THEMES}

    @pytest.fixture
    def bad_files(self):
        return {"cut.json": b'[{"title": "A", "children": [{"string": "[[B]]", "uid": "x'}

    @pytest.fixture
    def plugin(self):
        return roam


class TestRoamlinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return roamlink.RoamlinkDetector()

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"graph/shapes.json": SHAPES, "themes.json": THEMES})

    @pytest.fixture
    def plugin(self):
        return roamlink


def test_a_page_is_its_outline_with_its_references_and_blocks():
    found = pages()
    assert len(found) == 12
    sapiens = found["Sapiens"]
    assert sapiens.doc_id == "graph.json#page-sapiens" and sapiens.kind == "page" and sapiens.section == "Sapiens"
    assert sapiens.text.splitlines()[:6] == [
        "Author:: [[Yuval Noah Harari]]", "Status:: read", "Rating:: 8/10", "Reading notes", "  Priority:: high",
        "  The cognitive revolution is the turning point"]
    assert sapiens.fields["uid"] == "page-sapiens" and sapiens.fields["created_ms"] == 1600000000000
    assert sapiens.fields["updated_ms"] == 1600000100000
    assert "blk-cognitive" in sapiens.fields["blocks"] and len(sapiens.fields["blocks"]) == 9
    # each reference's offset is the UTF-8 byte where its markup starts in the page's text
    encoded = sapiens.text.encode()
    marks = [encoded[link["offset"]:link["offset"] + 2] for link in sapiens.fields["links"]]
    assert [link.get("page") for link in sapiens.fields["links"]] == [
        "Author", "Yuval Noah Harari", "Status", "Rating", "Priority", "Themes", "history"]
    assert marks == [b"Au", b"[[", b"St", b"Ra", b"Pr", b"Th", b"#h"]
    # a heading block's line carries its level; the daily note's uid is its date
    assert found["Headings"].text.splitlines()[0] == "## Community videos"
    assert found["January 1st, 2021"].doc_id == "graph.json#01-01-2021"


def test_components_code_and_parentheticals_name_nothing():
    links = {title: [(link.get("page"), link.get("block")) for link in doc.fields.get("links") or ()]
             for title, doc in pages().items()}
    assert links["Embeds"] == [(None, "blk-with-children"), (None, "blk-with-children"), (None, "blk-cognitive"),
                               ("Sapiens", None), (None, "nosuchblk")]
    assert ("TODO", None) not in links["References"] and (None, "and") not in links["References"]
    assert [page for page, _ in links["Queries"]].count("A") == 0  # the query written as code
    assert links["Queries"][:2] == [("Sapiens", None), ("Dune", None)]


def test_nested_and_tagged_references_and_unicode_offsets():
    export = orjson.dumps([{"title": "Étude", "uid": "p1", "children": [
        {"string": "Née à [[Paris [[France]]]] #[[Deux mots]] #tag. and ((b2))", "uid": "b1"}]},
        {"title": "Deux mots", "uid": "p2", "children": [{"string": "x", "uid": "b2"}]}])
    found = pages(export)
    links = found["Étude"].fields["links"]
    assert [(link.get("page") or link.get("block")) for link in links] == [
        "Paris [[France]]", "France", "Deux mots", "tag", "b2"]
    encoded = found["Étude"].text.encode()
    assert [encoded[link["offset"]:link["offset"] + 2] for link in links] == [b"[[", b"[[", b"[[", b"#t", b"(("]


# Values where the format looks for a page's and a block's keys: strings of Roam markup, and what an export
# edited by hand or written by another tool may hold instead.
_MARKUP = st.sampled_from(["[[", "]]", "((", "))", "#", "::", "`", "```", "{{", "}}", "[[TODO]]", "x", " ", "é",
                           "\n", "#[[", "a1-b"])
_VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                   st.lists(_MARKUP, max_size=12).map("".join))
_BLOCK = st.recursive(
    st.fixed_dictionaries({}, optional={"string": _VALUE, "uid": _VALUE, "heading": _VALUE}),
    lambda inner: st.fixed_dictionaries({}, optional={"string": _VALUE, "uid": _VALUE, "heading": _VALUE,
                                                      "children": st.one_of(_VALUE, st.lists(inner, max_size=4))}),
    max_leaves=12)
_PAGE = st.fixed_dictionaries({}, optional={"title": _VALUE, "uid": _VALUE, "create-time": _VALUE,
                                            "edit-time": _VALUE, "children": st.one_of(_VALUE,
                                                                                       st.lists(_BLOCK, max_size=4))})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PAGE, max_size=4))
def test_any_export_shape_is_read_or_refused_and_its_offsets_hold(export):
    try:
        docs = roam.RoamFormat().parse("graph.json", json.dumps(export).encode(), MTIME)
    except FormatError:
        return
    for doc in docs[1:]:
        encoded = doc.text.encode()
        for link in doc.fields.get("links") or ():
            assert 0 <= link["offset"] < len(encoded)
            assert encoded[link["offset"]:link["offset"] + 1] in (b"[", b"(", b"#") or link["offset"] == 0 \
                or encoded[link["offset"] - 1:link["offset"]] in (b" ", b"\n")


def test_only_roam_exports_are_accepted():
    fmt = roam.RoamFormat()
    assert fmt.accepts("x.json", SHAPES[:1024]) and fmt.accepts("x.json", THEMES[:1024])
    assert fmt.accepts("x.json", b'[{"title":"A","children":[{"string":"b","uid":"c"}],"edit-time":1}]')
    assert not fmt.accepts("x.txt", SHAPES[:1024])
    chat = b'[{"title": "Sourdough", "create_time": 1754375326.1, "mapping": {"root": {}}}]'
    assert not fmt.accepts("conversations.json", chat)  # a ChatGPT export is the chats format's
    assert not fmt.accepts("package.json", b'{"name": "x", "children": []}')
    assert not fmt.accepts("data.json", b'[{"title": "a row", "value": 3}]')
    with pytest.raises(FormatDeclined, match="not a Roam export"):
        fmt.parse("x.json", b'{"title": "A", "children": [{"string": "b"}]}', MTIME)


def test_roamlink_follows_references_to_pages_and_to_the_pages_holding_blocks():
    files = parse_files({"graph/shapes.json": SHAPES, "themes.json": THEMES})
    found = sorted((e.type, e.src.split("#")[1], e.dst.split("#")[1], e.evidence.quote)
                   for e in run_detectors([roamlink.RoamlinkDetector()], files).edges if e.src.startswith("graph/"))
    assert found == [
        ("block_ref", "page-embeds", "page-sapiens", "{{embed-path: ((blk-cognitive))}}"),
        ("block_ref", "page-embeds", "page-source", "{{embed: ((blk-with-children))}}"),
        ("block_ref", "page-references", "page-sapiens", "A reference to a block on another page: ((blk-cognitive))"),
        ("block_ref", "page-references", "page-source", "A reference to a block of several lines: ((blk-fenced))"),
        ("block_ref", "page-references", "page-tables",
         "A reference to a table marker, which has nowhere to carry an anchor: ((table-simple))"),
        ("page_ref", "01-01-2021", "page-sapiens", "It links to [[January 2nd, 2021]] and to [[Sapiens]]"),
        ("page_ref", "page-embeds", "page-sapiens", "{{[[embed]]: [[Sapiens]]}}"),
        ("page_ref", "page-queries", "01-01-2021", "{{query: {between: [[January 1st, 2021]] [[today]]}}}"),
        ("page_ref", "page-queries", "page-dune", "{{query: {and: [[Sapiens]] [[Dune]]}}}"),
        ("page_ref", "page-queries", "page-sapiens", "{{query: {and: [[Sapiens]] [[Dune]]}}}"),
    ]


def test_a_title_two_exports_hold_is_followed_within_the_citing_export():
    def export(note):
        return orjson.dumps([{"title": "Home", "uid": "h", "children": [{"string": f"see [[Topic]] {note}"}]},
                             {"title": "Topic", "uid": "t", "children": [{"string": note}]}])

    files = parse_files({"work.json": export("work"), "home.json": export("home"), "solo.json": orjson.dumps(
        [{"title": "Elsewhere", "uid": "e", "children": [{"string": "and [[Topic]] #Home"}]}])})
    edges = sorted((e.src, e.dst) for e in run_detectors([roamlink.RoamlinkDetector()], files).edges
                   if e.type == "page_ref")
    # each export's Home to its own Topic; a third export naming a title two hold links to neither
    assert edges == [("home.json#h", "home.json#t"), ("work.json#h", "work.json#t")]


def test_a_roam_export_becomes_searchable_pages_linked_by_their_references(engine, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    shutil.copy(FIXTURES / "shapes.json", folder / "shapes.json")
    (folder / "notes.md").write_text("# Notes\n\nNothing of Roam's.\n")
    summary = run(engine, folder, brain="roam")
    assert summary.files_indexed == 2 and not summary.files_failed and not summary.files_skipped
    assert summary.edges_by_type["page_ref"] == 5 and summary.edges_by_type["block_ref"] == 5
    index = index_of(engine, "roam")
    hits = engine.search.search(index, {"query": {"match_phrase": {"text": "shared fiction"}}})["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["shapes.json#page-sapiens"]
    cited = engine.search.search(index, {"query": {"term": {"blocks.keyword": "blk-fenced"}}})["hits"]["hits"]
    assert [hit["_id"] for hit in cited] == ["shapes.json#page-source"]
    ego = engine.graph.ego("roam", {"node": "shapes.json#page-sapiens", "hops": 1, "types": "page_ref,block_ref"})
    assert {edge["src"] for edge in ego["edges"]} == {
        "shapes.json#01-01-2021", "shapes.json#page-embeds", "shapes.json#page-queries", "shapes.json#page-references"}
