"""The remembered continuations: which drafts continue which live edges, kept from one run for the next."""

from __future__ import annotations

from xerj_core.autoindex.continuations import Continuations
from xerj_core.graph.brain import edge_id
from xerj_core.graph.draftcolumns import DraftColumns
from xerj_core.graph.idkeys import IdSet
from xerj_core.model import EdgeDraft, Evidence


def draft(dst: str, valid_at: int, detector: str = "wikilink@4") -> EdgeDraft:
    return EdgeDraft("a.md", dst, "wikilink", detector, 1.0, 0.95, valid_at, Evidence("see", "a.md", 0),
                     "markdown", "markdown")


def columns(*drafts: EdgeDraft) -> DraftColumns:
    return DraftColumns.of(drafts, [edge_id(d.src, d.type, d.dst, d.valid_at) for d in drafts])


def test_pairs_found_are_kept_and_settle_the_same_drafts_next_run():
    old_b, old_c = edge_id("a.md", "wikilink", "b.md", 1), edge_id("a.md", "wikilink", "c.md", 1)
    batch = columns(draft("b.md", 2), draft("c.md", 2), draft("d.md", 2))
    first = Continuations.recalled(None, IdSet.of({old_b, old_c}))
    assert len(first) == 0 and first.settle(batch, frozenset()) == (batch, [])
    first.found(batch.ids[0], old_b)
    first.found(batch.ids[1], old_c)
    first.found("not an id", old_c)  # only derived ids are kept
    blob = first.dumps()
    assert blob is not None and len(blob) == 2 * 32

    second = Continuations.recalled(blob, IdSet.of({old_b, old_c, "a person's id"}))
    left, continued = second.settle(batch, frozenset())
    assert list(left.dst) == ["d.md"] and continued == [int(old_b, 16), int(old_c, 16)]
    assert second.dumps() is None  # every pair used, none found: nothing to write

    # a pair whose edge is no longer live is dropped when recalled, and the drop is written
    third = Continuations.recalled(blob, IdSet.of({old_b}))
    left, continued = third.settle(batch, frozenset())
    assert list(left.dst) == ["c.md", "d.md"] and continued == [int(old_b, 16)]
    recalled = Continuations.recalled(third.dumps(), IdSet.of({old_b, old_c}))
    assert recalled.settle(batch, frozenset())[1] == [int(old_b, 16)]


def test_a_retagged_detectors_drafts_and_unused_pairs_are_not_settled():
    old = edge_id("a.md", "wikilink", "b.md", 1)
    batch = columns(draft("b.md", 2))
    kept = Continuations.recalled(None, IdSet.of({old}))
    kept.found(batch.ids[0], old)
    blob = kept.dumps()
    assert Continuations.recalled(blob, IdSet.of({old})).settle(batch, frozenset({"wikilink@4"})) == (batch, [])
    # a run that drafted it not at all keeps it no more
    unused = Continuations.recalled(blob, IdSet.of({old}))
    assert unused.dumps() == b""
    assert Continuations.recalled(b"\x00" * 31, IdSet.of({old})).settle(batch, frozenset()) == (batch, [])  # not ours


def test_a_draft_sharing_only_the_first_half_of_a_remembered_id_is_not_settled():
    live = "f" * 32
    remembered, twin = "1" * 16 + "2" * 16, "1" * 16 + "3" * 16  # looked up by first half, checked whole
    kept = Continuations.recalled(None, IdSet.of({live}))
    kept.found(remembered, live)
    batch = DraftColumns.of([draft("b.md", 2)], [twin])
    assert Continuations.recalled(kept.dumps(), IdSet.of({live})).settle(batch, frozenset()) == (batch, [])
