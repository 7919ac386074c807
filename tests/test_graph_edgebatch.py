"""The typed batch paths of edge writes (ingest and retirement) store exactly what the general path stores, byte for
byte where it is bytes."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import orjson
import pytest

from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph import edgebatch, writing
from xerj_core.graph.brain import edge_id, edges_index, rejection_id
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.store.env import DB_NAMES

T0 = 1_735_689_600_000


def drafts(rng: random.Random, n: int, nodes: int) -> list[EdgeDraft]:
    out = []
    for i in range(n):
        src, dst = f"n{rng.randrange(nodes)}", f"n{rng.randrange(nodes)}"  # some self-edges
        evidence = None if i % 7 == 3 else Evidence(f"{src} Mentions {dst} here é", f"notes/{src}.md", i % 997)
        out.append(EdgeDraft(src, dst, rng.choice(["wikilink", "mdlink", "sequence"]), rng.choice(["d@1", "e@2"]),
                             round(rng.random(), 3), round(rng.random(), 3), T0 + rng.randrange(10**9), evidence,
                             src_format="md" if i % 5 == 0 else None, dst_format="pdf" if i % 11 == 0 else None))
    return out


def dump(engine: Engine) -> dict[str, list]:
    """Every key and value of the store; records parsed (their key order is not part of the format), the
    instants of index creation and sealing left out."""
    env = engine.store.env
    out = {}
    with env.env.begin() as txn:
        for name in DB_NAMES:
            rows = []
            for key, value in txn.cursor(db=env.dbs[name]):
                if name in ("tail", "segs", "indices", "mappings") and value[:1] == b"{":
                    value = orjson.loads(value)
                    for volatile in ("sealed_at", "created", "uuid"):
                        value.pop(volatile, None)
                rows.append((bytes(key), value))
            out[name] = rows
    return out


def run(tmp: Path, fast: bool, monkeypatch: pytest.MonkeyPatch, script) -> dict[str, list]:
    clock = itertools.count(T0 + 10**10, 1000)
    monkeypatch.setattr(writing, "now_ms", lambda: next(clock))
    monkeypatch.setattr(edgebatch, "ENABLED", fast)
    # history ids carry a random suffix: the same sequence on both sides
    monkeypatch.setattr("xerj_core.graph.history.uuid.uuid4", _Counter())
    with Engine(tmp, config=EngineConfig(tail_rows=64)) as engine:
        script(engine)
        return dump(engine)


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self):
        import uuid

        self.n += 1
        return uuid.UUID(int=self.n)


def test_batches_of_new_and_retired_edges_store_what_the_general_path_stores(tmp_path, monkeypatch):
    def script(engine: Engine) -> None:
        rng = random.Random(5)
        batches = [drafts(rng, n, 60) for n in (1, 40, 150, 300)]
        for batch in batches:
            engine.graph.write_edges("b", batch, created_at=T0)
        # a batch holding an edge already stored, then one with an edge twice: the general path decides
        engine.graph.write_edges("b", batches[2][:5] + drafts(rng, 30, 60), created_at=T0 + 1)
        twice = drafts(rng, 20, 60)
        engine.graph.write_edges("b", twice + twice[:3], created_at=T0 + 2)
        # a long detector name (no doc value), then a person's decision: every later batch takes the general path
        engine.graph.write_edges("b", [EdgeDraft("x", "y", "wikilink", "d" * 600, 0.5, 0.5, T0)], created_at=T0)
        engine.graph.write_edges("c", drafts(rng, 80, 30), created_at=T0)
        ids = [edge_id(d.src, d.type, d.dst, d.valid_at) for d in batches[3] if d.src != d.dst]
        # retiring: live edges, an unknown id, the brain's meta document, one twice over two calls
        engine.graph.invalidate_edges("b", edge_ids=ids[:40] + ["nope", "__xerj-brain-meta"], at=T0 + 50)
        engine.graph.invalidate_edges("b", edge_ids=ids[30:90], at=T0 + 60)
        engine.graph.invalidate_edges("c", src_file="notes/n3.md", at=T0 + 70)
        first = next(d for d in batches[1] if d.src != d.dst)  # live (batches[3] has retired ones)
        assert engine.graph.unlink("b", edge_id(first.src, first.type, first.dst, first.valid_at))["invalidated"]
        # the rejected claim re-detected at a new instant: stored retired, which only the general path knows
        again = EdgeDraft(first.src, first.dst, first.type, first.detector, 0.5, 0.5, first.valid_at + 1)
        engine.graph.write_edges("b", drafts(rng, 50, 60) + [again], created_at=T0 + 3)
        engine.graph.invalidate_edges("b", edge_ids=ids[90:200], at=T0 + 80)

    fast = run(tmp_path / "fast", True, monkeypatch, script)
    general = run(tmp_path / "general", False, monkeypatch, script)
    assert fast.keys() == general.keys()
    for name in fast:
        assert fast[name] == general[name], name


def test_the_typed_paths_are_taken_and_refuse_what_the_general_path_refuses(tmp_path, monkeypatch):
    taken = []
    original = edgebatch.write_new
    monkeypatch.setattr(edgebatch, "write_new", lambda *a: taken.append(r := original(*a)) or r)
    with Engine(tmp_path, config=EngineConfig()) as engine:
        summary = engine.graph.write_edges("b", drafts(random.Random(1), 50, 20), created_at=T0)
        assert taken and taken[0] is not None and summary["created"] == len(taken[0])
        bad = [EdgeDraft("a", "b", "wikilink", "d@1", float("nan"), 0.5, T0)]
        with pytest.raises(Exception, match="weight"):
            engine.graph.write_edges("b", bad, created_at=T0)
        retired = []
        original_retire = edgebatch.retire
        monkeypatch.setattr(edgebatch, "retire", lambda *a: retired.append(r := original_retire(*a)) or r)
        ids = [edge_id(d["src"], d["type"], d["dst"], d["valid_at"]) for d in taken[0][:10]]
        assert engine.graph.invalidate_edges("b", edge_ids=ids, at=T0 + 5) == 10
        assert retired and retired[0] is not None and len(retired[0]) == 10
        clamped = engine.graph.write_edges("b", [EdgeDraft("a", "b", "wikilink", "d@1", 7, 0.5, T0)],
                                           created_at=T0)
        assert clamped["created"] == 1
        assert engine.store.get(".xerj-memory-b-edges", edge_id("a", "wikilink", "b", T0))[0]["weight"] == 1.0


def test_retiring_reads_each_edge_source_once(tmp_path, monkeypatch):
    """The id map confirms a batch-written edge's row by reading its source; retire parses that record and
    reads no source of a found edge a second time."""
    reread = []
    original = edgebatch._sources
    monkeypatch.setattr(edgebatch, "_sources", lambda target, rows, read: reread.extend(
        row for row in rows if row not in read) or original(target, rows, read))
    with Engine(tmp_path, config=EngineConfig()) as engine:
        batch = [d for d in drafts(random.Random(2), 200, 40) if d.src != d.dst]
        engine.graph.write_edges("b", batch, created_at=T0)
        ids = list(dict.fromkeys(edge_id(d.src, d.type, d.dst, d.valid_at) for d in batch))
        assert engine.graph.invalidate_edges("b", edge_ids=ids[:120], at=T0 + 5) == 120
        assert engine.graph.invalidate_edges("b", edge_ids=ids[100:], at=T0 + 6) == len(ids) - 120
    assert reread == []


@pytest.mark.parametrize("stored_share", [0.0, 0.3, 1.0])
def test_fresh_ordinals_number_terms_as_lookups_do_when_some_are_stored_already(tmp_path, stored_share):
    """``IndexWrite.ordinals(fresh=True)`` (new edges' ids) inserts before it looks: terms a reopened store's caches
    do not know but its dictionary holds keep their ordinals, new ones are numbered in order of first appearance,
    and the dictionary ends as the lookup-first pass leaves it."""
    from xerj_core.store import Store

    rng = random.Random(int(stored_share * 10))
    old = [f"t{i:03d}" for i in range(60)]
    new = [f"u{i:03d}" for i in range(40)]
    asked = rng.sample(old, int(len(old) * stored_share)) + new
    rng.shuffle(asked)
    asked += asked[:7]  # repeats keep their first number
    found, dumps = {}, {}
    for fresh in (False, True):
        path = tmp_path / str(fresh)
        with Store(path) as store:
            store.create_index("ix", {"properties": {"f": {"type": "keyword"}}})
            store.transact(lambda txn: txn.index("ix").put_many([({"f": t}, t, "index") for t in old]))
        with Store(path) as store:  # reopened: no cache knows the stored terms
            found[fresh] = store.transact(lambda txn: txn.index("ix").ordinals("f", asked, fresh=fresh))
            with store.env.env.begin() as txn:
                dumps[fresh] = {name: list(txn.cursor(db=store.env.dbs[name])) for name in ("dict", "dictr", "dictn")}
    first_new = {t: len(old) + i for i, t in enumerate(dict.fromkeys(t for t in asked if t in new))}
    assert found[False] == [old.index(t) if t in old else first_new[t] for t in asked]
    assert found[True] == found[False]
    assert dumps[True] == dumps[False]


def test_a_claim_restored_through_bulk_still_turns_its_edge_away(tmp_path, monkeypatch):
    """A brain's edges index copied out and written back through ``_bulk`` (a restore) brings its claim documents
    along as batch-written ids; the typed path must still see them, so a rejected claim re-detected is stored
    retired, as the general path stores it."""
    from xerj_core.store.store import BulkOp

    def script(engine: Engine) -> None:
        batch = [d for d in drafts(random.Random(3), 60, 20) if d.src != d.dst]
        engine.graph.write_edges("b", batch, created_at=T0)
        edges = ".xerj-memory-b-edges"
        claims = []
        for one in batch[:2]:
            assert engine.graph.unlink("b", edge_id(one.src, one.type, one.dst, one.valid_at))["invalidated"]
            rid = rejection_id(one.src, one.type, one.dst)
            claims.append(BulkOp("index", edges, rid, engine.store.get(edges, rid)[0]))
            engine.store.delete(edges, rid)
        engine.store.bulk(claims)  # a run of new ids: the batch door
        first = batch[0]
        again = EdgeDraft(first.src, first.dst, first.type, first.detector, 0.5, 0.5, first.valid_at + 1)
        engine.graph.write_edges("b", drafts(random.Random(4), 30, 20) + [again], created_at=T0 + 3)
        stored = engine.store.get(edges, edge_id(again.src, again.type, again.dst, again.valid_at))[0]
        assert stored["trust"] == "rejected" and "invalid_at" in stored

    fast = run(tmp_path / "fast", True, monkeypatch, script)
    general = run(tmp_path / "general", False, monkeypatch, script)
    for name in fast:
        assert fast[name] == general[name], name


def test_the_writer_keeps_no_edge_id_in_its_term_cache_and_still_finds_every_edge(tmp_path, monkeypatch):
    """New edges' ids and retired ones are met about once each: the typed paths leave none of them in the store's term
    cache (nodes and other keywords it keeps), and retiring, retiring again and re-detecting edges in later
    transactions store what the general path stores."""
    def script(engine: Engine) -> None:
        batch = [d for d in drafts(random.Random(5), 600, 60) if d.src != d.dst]
        for part in range(0, len(batch), 200):
            engine.graph.write_edges("b", batch[part:part + 200], created_at=T0)
        ids = list(dict.fromkeys(edge_id(d.src, d.type, d.dst, d.valid_at) for d in batch))
        assert engine.graph.invalidate_edges("b", edge_ids=ids[:150], at=T0 + 5) == 150
        assert engine.graph.invalidate_edges("b", edge_ids=ids[100:300], at=T0 + 6) == 150
        sizes: dict[str, int] = {}  # per dictionary name, summed over the edges and the history index
        for (_ix, name), terms in engine.store._committed_terms.items():
            sizes[name] = sizes.get(name, 0) + len(terms)
        kept.append(sizes)
        engine.graph.write_edges("b", batch[:50], created_at=T0 + 7)  # stored already: the general path

    kept: list[dict[str, int]] = []
    fast = run(tmp_path / "fast", True, monkeypatch, script)
    assert kept[0].get("edge_id", 0) == 0
    assert kept[0]["nodes"] > 0 and kept[0]["src_file"] > 0
    assert fast == run(tmp_path / "general", False, monkeypatch, script)


def test_the_writer_keeps_no_source_file_of_a_new_batch_in_its_term_cache(tmp_path, monkeypatch):
    """A detector batch's source files (``src_file``, ``evidence.source``) are met again only when a file changes:
    the typed ingest path leaves none of them in the store's term cache, and a later batch from the same files
    (their terms then found in the dictionary's runs) stores what the general path stores."""
    def script(engine: Engine) -> None:
        batch = [d for d in drafts(random.Random(6), 600, 60) if d.src != d.dst]
        for part in range(0, 400, 200):
            engine.graph.write_edges("b", batch[part:part + 200], created_at=T0)
        sizes: dict[str, int] = {}
        for (_ix, name), terms in engine.store._committed_terms.items():
            sizes[name] = sizes.get(name, 0) + len(terms)
        kept.append(sizes)
        engine.graph.write_edges("b", batch[400:], created_at=T0 + 1)  # the same 60 nodes' files again

    kept: list[dict[str, int]] = []
    fast = run(tmp_path / "fast", True, monkeypatch, script)
    assert kept[0].get("src_file", 0) == 0 and kept[0].get("evidence.source", 0) == 0
    assert kept[0]["nodes"] > 0
    assert fast == run(tmp_path / "general", False, monkeypatch, script)


def test_retiring_in_passes_up_to_an_edge_past_the_plain_case_stores_what_the_general_path_stores(
        tmp_path, monkeypatch):
    """invalidate_edges retires plain edges a pass at a time; from the first pass holding an edge the typed path
    does not cover (one with a key written by hand), the general path does the rest, in the same transaction."""
    monkeypatch.setattr(writing, "RETIRE_PASS", 7)
    passes = []
    original = edgebatch.retire
    monkeypatch.setattr(edgebatch, "retire", lambda *a: passes.append(r := original(*a)) or r)

    def script(engine: Engine) -> None:
        batch = [d for d in drafts(random.Random(8), 80, 40) if d.src != d.dst]
        engine.graph.write_edges("b", batch, created_at=T0)
        ids = list(dict.fromkeys(edge_id(d.src, d.type, d.dst, d.valid_at) for d in batch))
        doc = engine.store.get(edges_index("b"), ids[20])[0]
        engine.store.put(edges_index("b"), {**doc, "note": "kept by hand"}, ids[20])
        assert engine.graph.invalidate_edges("b", edge_ids=ids[:45], at=T0 + 50) == 45
        assert engine.graph.invalidate_edges("b", edge_ids=ids[40:], at=T0 + 60) == len(ids) - 45

    fast = run(tmp_path / "fast", True, monkeypatch, script)
    assert [p is None for p in passes[:4]] == [False, False, True, False]  # typed, typed, then the rest general
    assert all(p is not None and len(p) <= 7 for p in passes[3:])
    general = run(tmp_path / "general", False, monkeypatch, script)
    assert fast.keys() == general.keys()
    for name in fast:
        assert fast[name] == general[name], name
