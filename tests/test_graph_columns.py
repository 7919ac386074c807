"""Ego's fast paths give the answers of its slow ones, on the Foam vault's brain.

Ego without evidence names its edges from per-segment packed ids and reads
every field from columns; with evidence it reads each edge's stored document.
The hop screens each edge through its packed far end and invalid_at rank.
Each fast path is checked against the slow one over every node, at several
``as_of`` instants, trust filters and ``include_expired``, with sealed
segments, a tail, retired and rejected edges all present.
"""

from __future__ import annotations

import contextlib
import shutil

import pytest

from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import hop, rowids
from xerj_core.graph.brain import edges_index

from .conftest import CORPORA

BRAIN = "foam"
FIELDS = ("edge_id", "src", "dst", "type", "weight", "hop", "direction", "valid_at", "invalid_at", "trust")


@pytest.fixture(scope="module")
def foam(tmp_path_factory):
    """The Foam vault as a brain over 64-row tails (many sealed segments and a tail), with some of its edges
    retired at an instant and some rejected by a person."""
    from xerj_core.plugins import get_plugin_manager

    root = tmp_path_factory.mktemp("columns")
    vault = root / "foam-docs"
    shutil.copytree(CORPORA / "foam-docs", vault)
    with Engine(root / "data", get_plugin_manager(builtins_only=True), config=EngineConfig(tail_rows=64)) as engine:
        run(engine, vault, brain=BRAIN)
        with engine.store.reader(edges_index(BRAIN)) as reader:
            ids = sorted(doc_id for _row, doc_id, doc, _v in reader.documents(reader.live_rows().tolist())
                         if "src" in doc and "dst" in doc)
            valid = [doc["valid_at"] for _r, _i, doc, _v in reader.documents(reader.live_rows().tolist())
                     if "valid_at" in doc]
        assert len(ids) > 500, "the vault should give the brain a few hundred edges at least"
        retire_at = max(valid) + 1000
        engine.graph.invalidate_edges(BRAIN, edge_ids=ids[::7], at=retire_at)
        for edge_id in ids[3::29]:
            engine.graph.unlink(BRAIN, edge_id)
        engine.instants = (min(valid) - 1, retire_at - 1, retire_at, retire_at + 1, None)
        yield engine


def _nodes(engine: Engine) -> list[str]:
    with engine.store.reader(edges_index(BRAIN)) as reader:
        return list(reader.field_dictionary("src").terms)


def _ego(engine: Engine, node: str, evidence: bool, limit: int = 1000, **params) -> dict:
    query = {"node": node, "hops": "2", "direction": "both", "limit": str(limit),
             "include_evidence": "true" if evidence else "false", **params}
    return engine.graph.ego(BRAIN, {k: v for k, v in query.items() if v is not None})


def _cases(engine: Engine):
    for as_of in engine.instants:
        for trust in (None, "detected", "rejected,asserted"):
            for expired in ("false", "true"):
                yield {"as_of": None if as_of is None else str(as_of), "trust": trust, "include_expired": expired}


def _projected(body: dict) -> list[tuple]:
    return [tuple(edge[f] for f in FIELDS) for edge in body["edges"]]


def test_ego_from_columns_matches_ego_from_documents(foam):
    """Every field the column path returns equals the stored document's, edge for edge, in the same order."""
    nodes = _nodes(foam)
    compared = 0
    with foam.store.reader(edges_index(BRAIN)) as reader:
        assert len(reader.segments) >= 2 and reader.tail_count > 0
    for params in _cases(foam):
        for node in nodes[::3]:
            fast, slow = _ego(foam, node, False, **params), _ego(foam, node, True, **params)
            assert _projected(fast) == _projected(slow), (node, params)
            assert fast["not_shown"] == slow["not_shown"] and fast["neighbors"] == slow["neighbors"]
            compared += len(fast["edges"])
    assert compared > 1000


def test_ego_from_columns_cut_by_a_limit_matches_ego_from_documents(foam):
    """A limit that cuts hops meeting sealed and tail rows alike: the best edges of both tables, ranked
    together and laid out in that order, are the document path's, field for field."""
    nodes = _nodes(foam)
    mixed = 0
    with foam.store.reader(edges_index(BRAIN)) as reader:
        tail_nodes = set(foam.graph.views.graph(reader).tail.nodes.tolist())
        ordinal = reader.field_dictionary("src").ordinal
    # the tail holds the retired versions: seen before they were retired, or with include_expired
    for params in ({"as_of": str(foam.instants[1])}, {"include_expired": "true"}):
        for limit in (3, 12, 40):
            for node in nodes:
                fast, slow = _ego(foam, node, False, limit, **params), _ego(foam, node, True, limit, **params)
                assert _projected(fast) == _projected(slow), (node, limit, params)
                # and they are the first edges of the uncut answer, which ranks each hop by sorting it whole
                assert _projected(fast) == _projected(_ego(foam, node, False, **params))[:limit]
                assert (fast["not_shown"], fast["neighbors"], fast["trust"]) == (
                    slow["not_shown"], slow["neighbors"], slow["trust"])
                mixed += len(fast["edges"]) > 1 and ordinal(node) in tail_nodes
    assert mixed > 20  # seeds the tail touches (their hops read both tables)


@contextlib.contextmanager
def engine_table_ids(engine):
    """The sealed tables of the engine's brain as ego reads them."""
    with engine.store.reader(edges_index(BRAIN)) as reader:
        yield [engine.graph.views.sealed(reader).table]


def test_packed_ids_name_rows_as_the_id_index_does(foam, monkeypatch):
    """The ids a view's table keeps in its order, and the per-segment packed ids (one width, or with the odd
    lengths listed apart), against the per-edge id-index path they replace."""
    nodes = _nodes(foam)[::5]
    expected = {node: _projected(_ego(foam, node, False)) for node in nodes}
    with engine_table_ids(foam) as tables:
        assert tables and all(t.ids is not None for t in tables)  # the table path is the one measured above
    monkeypatch.setattr(hop.EdgeTable, "named", lambda self, position: [None] * len(position))
    assert {node: _projected(_ego(foam, node, False)) for node in nodes} == expected  # per-segment packed ids
    monkeypatch.setattr(rowids.RowIds, "ids", lambda self, reader, rows: [None] * len(rows))
    assert {node: _projected(_ego(foam, node, False)) for node in nodes} == expected  # the id index alone
    monkeypatch.undo()

    original = rowids._read_segment

    def varied(every: int):
        """As if every ``every``-th row's id had another length: those rows are listed apart (all of them,
        with no width left, when ``every`` is 1)."""

        def read(reader, segment):
            import numpy as np

            width, arrays = original(reader, segment)
            size = segment.end - segment.start
            ids = arrays["blob"][:size * width].reshape(-1, width) if width else np.zeros((size, 0), np.uint8)
            odd = np.arange(0, size, every)
            blob = ids.copy()
            blob[odd] = 0
            return (0 if every == 1 else width), {
                "blob": blob.reshape(-1) if every != 1 else np.zeros(0, np.uint8), "odd_rows": odd,
                "odd_offsets": np.arange(odd.size + 1, dtype=np.int64) * width,
                "odd_blob": ids[odd].reshape(-1)}

        return read

    for every, few in ((1, 0), (3, 0), (3, 10**9)):  # few: odd ids kept in a dict, or searched for
        monkeypatch.setattr(rowids, "_read_segment", varied(every))
        monkeypatch.setattr(rowids, "_FEW_ODD", few)
        foam.graph.views = hop.ViewCache(None)  # a cache of this process alone, built afresh through the lists
        assert {node: _projected(_ego(foam, node, False)) for node in nodes} == expected


def test_hops_through_packed_values_match_hops_through_columns(foam, monkeypatch):
    """The hop screens each edge through its packed far end and invalid_at rank (int32 when they fit); the
    answers equal screening the far-end and invalid_at columns themselves, and stay so when forced to int64."""
    nodes = _nodes(foam)[::4]
    cases = list(_cases(foam))[::2]

    def answers():
        foam.graph.views = hop.ViewCache(None)  # tables built afresh in this process
        return [[_projected(_ego(foam, node, False, **params)) for node in nodes] for params in cases]

    packed = hop.EdgeTable.candidates

    def unpacked(self, *args, **kwargs):
        parts = packed(self, *args, **kwargs)
        for part in parts:
            part.hot = None  # read far ends and invalid_at from the columns
        return parts

    with monkeypatch.context() as patch:
        patch.setattr(hop.EdgeTable, "candidates", unpacked)
        expected = answers()
    assert answers() == expected
    monkeypatch.setattr(hop, "_INT32_BITS", 0)
    assert answers() == expected
    with foam.store.reader(edges_index(BRAIN)) as reader:
        assert foam.graph.views.sealed(reader).table.hot_out.dtype.itemsize == 8


def test_hop_ranking_by_table_places_matches_the_three_key_sort(foam, monkeypatch):
    """A hop ranked through its table's precomputed places (best_out / best_in) is the sort on weight desc,
    valid_at desc, newest row first (the Foam brain's weights tie a lot), for every k, on both sides of a
    retirement; a hop mixing the sealed table and the tail sorts the columns themselves."""
    with foam.store.reader(edges_index(BRAIN)) as reader:
        view = foam.graph.views.graph(reader)
        dictionary = reader.field_dictionary("src")
        ranked_by_places = 0
        for as_of in foam.instants[1:4]:
            for node in _nodes(foam)[::4]:
                found = hop.expand(view, dictionary.lookup([node]), hops=2, direction="both",
                                   filters=hop.Filters(as_of=as_of), counters=hop.new_counters())
                for edges in found:
                    ranked_by_places += edges._best() is not None
                    for k in (None, 1, 3, len(edges) // 2, len(edges)):
                        fresh = hop.HopEdges(edges.hop, edges.parts, edges.frontier)
                        monkeypatch.setattr(hop.HopEdges, "_best", lambda self: None)
                        slow = hop.HopEdges(edges.hop, edges.parts, edges.frontier).order(k)
                        monkeypatch.undo()
                        assert fresh.order(k).tolist() == slow.tolist()
        assert ranked_by_places > 50


def test_a_view_built_into_files_keeps_no_private_grouping(foam, tmp_path):
    """A view built into files is mapped back from them, so the per-segment groupings it was built from go with
    the build (they were the building process's only private copy of the edges); a view kept in private memory
    keeps them with the segments for its next build. Both answer alike."""
    with foam.store.reader(edges_index(BRAIN)) as reader:
        segments = [seg for seg in reader.segments if seg.start < seg.end]
        assert len(segments) > 3

        def kept() -> int:
            return sum(hop._CSR_KEY in seg.derived for seg in segments)

        for seg in segments:
            seg.derived.pop(hop._CSR_KEY, None)
        mapped = hop.ViewCache(tmp_path / "views").sealed(reader)
        assert kept() == 0 and any((tmp_path / "views").iterdir())
        private = hop.ViewCache(None).sealed(reader)
        assert kept() == len(segments) - private.skipped
        for name, values in private.table.arrays().items():
            assert (mapped.table.arrays()[name] == values).all(), name
