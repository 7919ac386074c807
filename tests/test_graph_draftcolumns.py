"""Edge drafts as columns (``graph.draftcolumns``): the drafts they hold, the typed write path reading them with the
edge ids they carry, and an autoindex run's choice of the drafts to write made on them."""

from __future__ import annotations

import pickle
import random

import pytest

from tests.test_graph_edgebatch import T0, drafts, run
from xerj_core.autoindex import pipeline
from xerj_core.autoindex.wanted import WantedIds
from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import edgebatch
from xerj_core.graph.brain import MAX_NODE_ID_BYTES, edge_id, edges_index, node_id_problem
from xerj_core.graph.draftcolumns import FIELDS, DraftColumns
from xerj_core.graph.idkeys import IdSet
from xerj_core.model import EdgeDraft, Evidence


def test_columns_hold_the_drafts_and_their_ids():
    batch = drafts(random.Random(3), 200, 25)  # some without evidence or formats, some self-edges
    columns = DraftColumns.of(batch)
    assert len(columns) == 200 and list(columns) == batch and columns == batch
    assert columns[7] == batch[7] and columns[-1] == batch[-1]
    assert columns.ids == [edge_id(d.src, d.type, d.dst, d.valid_at) for d in batch]
    assert list(columns[10:50]) == batch[10:50] and columns[10:50].ids == columns.ids[10:50]
    assert list(columns.take([5, 1, 1, 199])) == [batch[5], batch[1], batch[1], batch[199]]
    keep = [i % 3 == 0 for i in range(200)]
    assert list(columns.where(keep)) == [d for d, k in zip(batch, keep) if k]
    assert DraftColumns.joined([columns[:30], columns[30:]]) == columns
    assert len(DraftColumns.joined([])) == 0
    assert pickle.loads(pickle.dumps(columns)) == columns
    # the claim order is list.sort's on (src, type, dst), stable among equal claims
    by_claim = sorted(batch, key=lambda d: (d.src, d.type, d.dst))
    assert list(columns.take(columns.claim_order())) == by_claim
    # ids given are kept as they are
    assert DraftColumns.of(batch[:2], ["a", "b"]).ids == ["a", "b"]
    assert set(FIELDS) >= {"src", "quote", "source", "offset"}


def test_a_batch_given_as_columns_stores_what_its_drafts_store(tmp_path, monkeypatch):
    def script(as_columns: bool):
        def write(engine: Engine) -> None:
            rng = random.Random(9)
            for n in (1, 40, 150, 300):
                batch = drafts(rng, n, 60)
                engine.graph.write_edges("b", DraftColumns.of(batch) if as_columns else batch, created_at=T0)
        return write

    columns = run(tmp_path / "columns", True, monkeypatch, script(True))
    general = run(tmp_path / "general", False, monkeypatch, script(False))
    assert columns.keys() == general.keys()
    for name in columns:
        assert columns[name] == general[name], name


def test_the_typed_path_writes_the_ids_the_columns_carry(tmp_path, monkeypatch):
    # the ids travel with the drafts from where they were worked out (an autoindex run's companion): not derived
    # again by the writer
    batch = [EdgeDraft("a", "b", "wikilink", "w@1", 1.0, 0.9, T0, Evidence("a [[b]]", "a.md", 2)),
             EdgeDraft("a", "c", "wikilink", "w@1", 1.0, 0.9, T0, Evidence("a [[c]]", "a.md", 9))]
    carried = [edge_id("a", "wikilink", "b", T0 + 1), edge_id("a", "wikilink", "c", T0 + 1)]
    written = []
    original = edgebatch.write_new
    monkeypatch.setattr(edgebatch, "write_new", lambda *a: written.append(r := original(*a)) or r)
    with Engine(tmp_path, config=EngineConfig()) as engine:
        engine.graph.write_edges("g", DraftColumns.of(batch, carried), created_at=T0)
        assert written and written[0] is not None
        assert [doc["edge_id"] for doc in written[0]] == carried
        with engine.store.read_txn() as raw:
            stored = engine.store.open_reader(raw, edges_index("g")).get(carried[0])
        assert stored is not None and stored[0]["dst"] == "b"


def _chosen_one_by_one(batches, settled, renewed=frozenset(), retagged=frozenset()):
    """What a run wrote before drafts were columns: draft by draft, in order."""
    wanted: set[int] = set()
    too_long = 0
    out = []
    for batch in batches:
        chosen = []
        for draft, eid in zip(batch, batch.ids):
            if any(node_id_problem(f, getattr(draft, f)) for f in ("src", "dst", "type")):
                too_long += 1
                continue
            number = int(eid, 16)
            if number in wanted:
                continue
            wanted.add(number)
            if eid not in settled or (draft.detector in retagged and eid in renewed):
                chosen.append((draft, eid))
        out.append(chosen)
    return out, wanted, too_long


@pytest.mark.parametrize("retagged", [frozenset(), frozenset({"e@2"})])
def test_a_run_chooses_the_drafts_to_write_as_it_did_draft_by_draft(retagged):
    rng = random.Random(4)
    pool = drafts(rng, 400, 40)
    long_id = "x" * (MAX_NODE_ID_BYTES + 1)
    pool[117] = EdgeDraft(long_id, "n1", "wikilink", "d@1", 0.5, 0.5, T0)
    pool[118] = EdgeDraft("n1", "é" * (MAX_NODE_ID_BYTES // 2 + 1), "wikilink", "d@1", 0.5, 0.5, T0)  # bytes, not chars
    pool[119] = EdgeDraft("n1", "n2", "t" * 3000, "d@1", 0.5, 0.5, T0)
    columns = DraftColumns.of(pool)
    # batches with ids repeated within a batch (new to the run otherwise), too long (and new), repeated across
    # batches; some ids settled already
    batches = [columns.take(rows) for rows in ([*range(0, 60), 5, 6], range(60, 150), [*range(120, 260), 3],
                                               range(260, 400), [])]
    settled = frozenset(columns.ids[i] for i in range(0, 400, 9))
    # the live ones among them (a retagged detector's drafts of those are renewed), and an id no detection derives
    renewed = frozenset(list(settled)[::2]) if retagged else frozenset()
    expected, expected_wanted, expected_long = _chosen_one_by_one(batches, settled, renewed, retagged)
    assert sum(map(len, expected)) < sum(map(len, _chosen_one_by_one(batches, frozenset())[0]))
    summary = pipeline.RunSummary(root="/r", brain="b", graph=True)
    wanted = WantedIds()
    standing = IdSet.of(settled | {"rj-by-a-person"})
    for batch, chosen in zip(batches, expected):
        got = pipeline._wanted_fresh(batch, wanted, standing, summary, IdSet.of(renewed), retagged)
        assert list(zip(got, got.ids)) == chosen
    assert wanted.numbers() == expected_wanted and summary.edges_too_long == expected_long == 3
    # the common case (every draft fits and is new) takes the set passes and gives the same
    fresh = WantedIds()
    plain = columns.take(range(120, 400))
    assert pipeline._wanted_fresh(plain, fresh, IdSet(), summary) is plain
    assert fresh.numbers() == {int(eid, 16) for eid in plain.ids}
