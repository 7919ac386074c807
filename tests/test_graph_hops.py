"""The hop engine against a brute-force evaluation over the stored documents, on generated edge sets.

The store runs with an 8-row tail, so every generated graph spreads over sealed
segments (CSR offsets) and the scanned tail, with overwritten rows in both.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xerj_core.engine import Engine, EngineConfig
from xerj_core.graph.edges import is_edge
from xerj_core.model import EdgeDraft
from xerj_core.store import Store

pytestmark = pytest.mark.usefixtures("hop_loop")  # each test with either hop loop

T0 = 1_767_225_600_000
NODES = [f"n{i}" for i in range(7)]
TYPES = ["cites", "relates_to", "same_dir"]
EDGES = ".xerj-memory-b-edges"
INSTANTS = [T0 + k * 1000 for k in range(4)]
WEIGHTS = [0.0, 0.5, 0.7, 1.0]

write_op = st.one_of(
    st.tuples(st.just("link"), st.sampled_from(NODES), st.sampled_from(NODES), st.sampled_from(TYPES),
              st.sampled_from(INSTANTS), st.sampled_from(WEIGHTS), st.sampled_from(WEIGHTS)),
    st.tuples(st.just("detect"), st.sampled_from(NODES), st.sampled_from(NODES), st.sampled_from(TYPES),
              st.sampled_from(INSTANTS), st.sampled_from(WEIGHTS), st.sampled_from(WEIGHTS)),
    st.tuples(st.just("unlink"), st.integers(0, 50), st.sampled_from([None, *INSTANTS])),
    st.tuples(st.just("reconcile"), st.integers(0, 50), st.sampled_from(INSTANTS)),
)

query = st.fixed_dictionaries({
    "seeds": st.lists(st.sampled_from(NODES + ["ghost"]), min_size=1, max_size=4),
    "hops": st.sampled_from([1, 2]),
    "direction": st.sampled_from(["out", "in", "both"]),
    "types": st.none() | st.lists(st.sampled_from(TYPES + ["unused"]), min_size=1, max_size=2),
    "trust": st.none() | st.lists(st.sampled_from(["detected", "asserted", "rejected"]), min_size=1, max_size=2),
    "min_confidence": st.none() | st.sampled_from([0.25, 0.7, 1.0]),
    "as_of": st.sampled_from([T0 - 1, *INSTANTS, T0 + 10**12]),
    "include_expired": st.booleans(),
    "limit": st.integers(1, 14),
    "max_seeds": st.sampled_from([2, 64]),
    "frontier_cap": st.sampled_from([1, 2, 4096]),
    "edge_cap": st.sampled_from([3, 100_000]),
})


def apply(engine: Engine, op: tuple, ids: list[str]) -> None:
    graph = engine.graph
    kind = op[0]
    if kind in ("link", "detect"):
        _, src, dst, type_, valid_at, weight, confidence = op
        if src == dst:
            return
        if kind == "link":
            _, body = graph.link("b", {"src": src, "dst": dst, "type": type_, "valid_at": valid_at,
                                       "weight": weight, "confidence": confidence,
                                       "evidence": {"quote": f"{src} {dst}", "source": f"{src}.md"}})
            ids.append(body["edge_id"])
        else:
            graph.write_edges("b", [EdgeDraft(src, dst, type_, "d@1", weight, confidence, valid_at)],
                              created_at=valid_at)
    elif ids:
        target = ids[op[1] % len(ids)]
        if kind == "unlink":
            graph.unlink("b", target, invalid_at=op[2])
        else:
            graph.invalidate_edges("b", edge_ids=[target], at=op[2])


def stored_edges(store: Store) -> tuple[dict[str, tuple[dict, int]], int, object]:
    with store.reader(EDGES) as reader:
        docs = {}
        for row in reader.live_rows():
            doc_id, source, _ = reader.document(int(row))
            if is_edge(source):
                docs[doc_id] = (source, int(row))
        return docs, reader.tail_count, reader.field_dictionary("src")


def brute_ego(docs, tail_count, dictionary, q) -> dict:
    """The ego contract evaluated one document at a time."""
    counters = dict.fromkeys(["edges_clipped", "frontier_clipped", "expired_excluded", "type_filtered",
                              "trust_filtered", "confidence_filtered", "memtable_docs_scanned"], 0)
    seeds = list(dict.fromkeys(q["seeds"]))
    if len(seeds) > q["max_seeds"]:
        counters["frontier_clipped"] += len(seeds) - q["max_seeds"]
        seeds = seeds[: q["max_seeds"]]
    frontier = {s for s in seeds if dictionary.ordinal(s) is not None}
    visited = set(frontier)
    seen: set[str] = set()
    kept_total = 0
    found = []
    f32 = np.float32
    for hop in range(1, q["hops"] + 1):
        if not frontier:
            break
        counters["memtable_docs_scanned"] += tail_count
        candidates = []
        for eid, (doc, row) in docs.items():
            if eid in seen:
                continue
            out = q["direction"] in ("out", "both") and doc["src"] in frontier
            into = q["direction"] in ("in", "both") and doc["dst"] in frontier
            if out or into:
                candidates.append((eid, doc, row, out))
        seen |= {c[0] for c in candidates}
        kept = []
        for eid, doc, row, out in candidates:
            visible = doc["valid_at"] <= q["as_of"]
            if not q["include_expired"]:
                visible &= doc.get("invalid_at") is None or doc["invalid_at"] > q["as_of"]
            if not visible:
                counters["expired_excluded"] += 1
            elif q["types"] is not None and doc["type"] not in q["types"]:
                counters["type_filtered"] += 1
            elif q["trust"] is not None and doc["trust"] not in q["trust"]:
                counters["trust_filtered"] += 1
            elif q["min_confidence"] is not None and f32(doc["confidence"]) < f32(q["min_confidence"]):
                counters["confidence_filtered"] += 1
            else:
                kept.append((eid, doc, row, out))
        kept.sort(key=lambda k: (-f32(k[1]["weight"]), -k[1]["valid_at"], -k[2]))
        room = max(0, q["edge_cap"] - kept_total)
        if len(kept) > room:
            counters["edges_clipped"] += len(kept) - room
            kept = kept[:room]
        kept_total += len(kept)
        found.extend((eid, doc, hop, out) for eid, doc, _, out in kept)
        if hop == q["hops"]:
            break
        nxt: list[str] = []
        for _, doc, _, out in kept:
            other = doc["dst"] if out else doc["src"]
            if other not in visited and other not in nxt:
                nxt.append(other)
        if len(nxt) > q["frontier_cap"]:
            counters["frontier_clipped"] += len(nxt) - q["frontier_cap"]
            nxt = nxt[: q["frontier_cap"]]
        frontier = set(nxt)
        visited |= frontier
    if len(found) > q["limit"]:
        counters["edges_clipped"] += len(found) - q["limit"]
    returned = found[: q["limit"]]
    neighbors: list[str] = []
    for _, doc, _, out in returned:
        other = doc["dst"] if out else doc["src"]
        if other not in seeds and other not in neighbors:
            neighbors.append(other)
    return {"seeds": seeds, "edges": [(eid, hop, "out" if out else "in") for eid, _, hop, out in returned],
            "neighbors": neighbors, "counters": counters}


def run_query(engine: Engine, q: dict) -> dict:
    graph = engine.graph
    graph.max_seeds, graph.frontier_cap, graph.edge_cap = q["max_seeds"], q["frontier_cap"], q["edge_cap"]
    params = {"nodes": ",".join(q["seeds"]), "hops": str(q["hops"]), "direction": q["direction"],
              "as_of": str(q["as_of"]), "include_expired": "true" if q["include_expired"] else "false",
              "limit": str(q["limit"])}
    if q.get("include_evidence") is False:
        params["include_evidence"] = "false"
    if q["types"] is not None:
        params["types"] = ",".join(q["types"])
    if q["trust"] is not None:
        params["trust"] = ",".join(q["trust"])
    if q["min_confidence"] is not None:
        params["min_confidence"] = str(q["min_confidence"])
    return graph.ego("b", params)


def check(engine: Engine, q: dict) -> None:
    docs, tail_count, dictionary = stored_edges(engine.store)
    expected = brute_ego(docs, tail_count, dictionary, q)
    got = run_query(engine, q)
    assert got["seeds"] == expected["seeds"]
    assert [(e["edge_id"], e["hop"], e["direction"]) for e in got["edges"]] == expected["edges"]
    assert got["neighbors"] == expected["neighbors"]
    for name, value in expected["counters"].items():
        assert got["not_shown"][name] == value, name
    assert got["not_shown"]["segments_without_columns"] == 0
    for edge in got["edges"]:
        doc = docs[edge["edge_id"]][0]
        assert (edge["src"], edge["dst"], edge["type"], edge["trust"]) == (doc["src"], doc["dst"], doc["type"],
                                                                             doc["trust"])
        assert (edge["valid_at"], edge["invalid_at"], edge["expired_at"]) == (
            doc["valid_at"], doc.get("invalid_at"), doc.get("expired_at"))
        assert edge["weight"] == doc["weight"] and edge["confidence"] == doc["confidence"]
        assert edge["evidence"] == doc.get("evidence")
    # The column path (no evidence) lists the same edges, field for field, in the same order, whatever the
    # limit cuts from hops that met sealed and tail rows alike.
    lean = run_query(engine, {**q, "include_evidence": False})
    fields = ("edge_id", "src", "dst", "type", "weight", "hop", "direction", "valid_at", "invalid_at", "trust")
    assert [tuple(e[f] for f in fields) for e in lean["edges"]] == [tuple(e[f] for f in fields) for e in got["edges"]]
    assert (lean["neighbors"], lean["trust"], lean["not_shown"]) == (got["neighbors"], got["trust"], got["not_shown"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(write_op, min_size=1, max_size=40), queries=st.lists(query, min_size=2, max_size=6))
def test_ego_matches_brute_force(ops, queries):
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=8)) as engine:
            ids: list[str] = []
            half = len(ops) // 2
            for op in ops[:half]:
                apply(engine, op, ids)
            if engine.store.exists(EDGES):
                check(engine, queries[0])  # warms the caches before more writes seal and merge segments
            for op in ops[half:]:
                apply(engine, op, ids)
            if not engine.store.exists(EDGES):
                return
            for q in queries[1:]:
                check(engine, q)


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(write_op, min_size=1, max_size=30), seeds=st.lists(st.sampled_from(NODES), min_size=1,
                                                                         max_size=3),
       hops=st.sampled_from([1, 2]), as_of=st.sampled_from(INSTANTS))
def test_reachable_matches_brute_force(ops, seeds, hops, as_of):
    with tempfile.TemporaryDirectory() as tmp:
        with Engine(Path(tmp) / "data", config=EngineConfig(tail_rows=8)) as engine:
            ids: list[str] = []
            for op in ops:
                apply(engine, op, ids)
            if not engine.store.exists(EDGES):
                return
            docs, _, _ = stored_edges(engine.store)
            reach, not_shown = engine.graph.reachable("b", seeds, hops=hops, as_of=as_of)
            expected = {s: (0, 1.0) for s in seeds}
            frontier, f32 = set(seeds), np.float32
            for hop in range(1, hops + 1):
                nxt = set()
                for doc, _ in docs.values():
                    live = doc["valid_at"] <= as_of and (doc.get("invalid_at") is None or doc["invalid_at"] > as_of)
                    live &= doc.get("trust") != "rejected"  # a blend never counts a rejected claim
                    confidence = 1.0 if doc.get("trust") == "approved" else float(f32(doc["confidence"]))
                    for near, far in ((doc["src"], doc["dst"]), (doc["dst"], doc["src"])):
                        if live and near in frontier:
                            prox = 0.5 ** hop * float(f32(doc["weight"])) * confidence
                            best = expected.get(far)
                            if best is None:
                                expected[far] = (hop, prox)
                                nxt.add(far)
                            elif prox > best[1]:
                                expected[far] = (best[0], prox)
                frontier = nxt
            assert set(reach) == set(expected)
            for node, (hop, prox) in expected.items():
                assert reach[node]["hop"] == hop and reach[node]["proximity"] == pytest.approx(prox)


def test_segments_without_hop_columns_are_skipped_and_counted(engine):
    old_mapping = {"properties": {f: {"type": "keyword", "dictionary": "nodes"} for f in ("src", "dst")}
                   | {"type": {"type": "keyword"}, "weight": {"type": "float"}, "confidence": {"type": "float"},
                      "valid_at": {"type": "date"}, "invalid_at": {"type": "date"}}}
    engine.store.create_index(EDGES, old_mapping)
    for i in range(8):  # one sealed segment written before the index knew about trust
        engine.store.put(EDGES, {"src": "a", "dst": f"old{i}", "type": "t", "weight": 1.0, "confidence": 1.0,
                                 "valid_at": T0})
    engine.graph.link("b", {"src": "a", "dst": "new", "type": "t", "valid_at": T0})
    body = engine.graph.ego("b", {"node": "a", "as_of": T0})
    assert [e["dst"] for e in body["edges"]] == ["new"]
    assert body["not_shown"]["segments_without_columns"] == 1


def test_a_recreated_brain_never_reads_the_old_view(engine):
    for i in range(20):
        engine.graph.link("b", {"src": "a", "dst": f"old{i}", "type": "t", "valid_at": T0})
    assert len(engine.graph.ego("b", {"node": "a", "as_of": T0, "limit": 100})["edges"]) == 20
    engine.store.delete_index(EDGES)
    for i in range(20):
        engine.graph.link("b", {"src": "a", "dst": f"new{i}", "type": "t", "valid_at": T0})
    body = engine.graph.ego("b", {"node": "a", "as_of": T0, "limit": 100})
    assert sorted(e["dst"] for e in body["edges"]) == sorted(f"new{i}" for i in range(20))


def test_rows_dying_after_the_view_was_built_are_not_hopped(engine):
    """The sealed view leaves out rows dead when it was built; a row of it dying later (an overwrite that only
    grows the tail) must still vanish from hops, and the view must be reused, not rebuilt."""
    for i in range(16):  # two sealed 8-row segments
        engine.graph.link("b", {"src": "a", "dst": f"d{i}", "type": "t", "valid_at": T0})
    first = engine.graph.ego("b", {"node": "a", "as_of": T0, "limit": 100})
    assert len(first["edges"]) == 16
    with engine.store.reader(EDGES) as reader:
        view = engine.graph.views.sealed(reader)
    target = next(e["edge_id"] for e in first["edges"] if e["dst"] == "d3")
    with engine.store.reader(EDGES) as reader:
        assert reader.row_of(target) < reader.tail_start  # its row is sealed
    engine.graph.unlink("b", target, invalid_at=T0 + 5)  # rewrites the row into the tail: the sealed one dies
    for evidence in ("true", "false"):
        body = engine.graph.ego("b", {"node": "a", "as_of": T0 + 10, "limit": 100, "include_evidence": evidence})
        assert len(body["edges"]) == 15 and target not in {e["edge_id"] for e in body["edges"]}
    with engine.store.reader(EDGES) as reader:
        assert engine.graph.views.sealed(reader) is view
    assert body["not_shown"]["expired_excluded"] == 1  # the new version is retired; the dead row is not counted
    then = engine.graph.ego("b", {"node": "a", "as_of": T0, "limit": 100})
    assert sum(e["edge_id"] == target for e in then["edges"]) == 1  # still believed at T0, exactly once


def _file_backed(array) -> bool:
    """Whether ``array``'s memory is a mapped file (a memmap itself, or a plain view of one)."""
    import mmap

    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


def test_sealed_views_are_mapped_files_that_other_processes_reuse(engine, monkeypatch):
    """The sealed view is built into files beside the data and mapped back (page cache, not private memory);
    a fresh cache (another worker) maps the published files instead of building, and answers alike."""
    from xerj_core.graph import hop, rowdocs, rowids

    for i in range(40):
        engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i}", "type": "t", "valid_at": T0})
    params = {"node": "n1", "hops": 2, "as_of": T0, "limit": 100, "include_evidence": "false"}
    first = engine.graph.ego("b", params)
    with engine.store.reader(EDGES) as reader:
        view = engine.graph.views.sealed(reader)
    assert all(_file_backed(a) for a in view.table.arrays().values())
    published = [p for p in (engine.store.path / "views").iterdir() if not p.name.startswith(".")]
    tables = [p for p in published if ".ids." not in p.name and ".docs." not in p.name]
    assert len(tables) == 1
    assert len([p for p in published if ".ids." in p.name]) == len(reader.segments)  # each segment's packed ids
    assert len([p for p in published if ".docs." in p.name]) == len(reader.segments)  # and its edge listings

    def refuse(*args, **kwargs):
        raise AssertionError("a published view must be mapped, not rebuilt")

    monkeypatch.setattr(hop.EdgeTable, "__init__", refuse)
    monkeypatch.setattr(rowids, "_read_segment", refuse)
    monkeypatch.setattr(rowdocs, "_read_segment", refuse)
    engine.graph.views = hop.ViewCache(engine.store.path / "views")
    assert engine.graph.ego("b", params) == {**first, "as_of": first["as_of"]}
    with_evidence = engine.graph.ego("b", {**params, "include_evidence": "true"})  # the listings mapped too
    assert [e["edge_id"] for e in with_evidence["edges"]] == [e["edge_id"] for e in first["edges"]]


def test_a_view_that_cannot_be_written_is_kept_in_memory(engine, monkeypatch):
    """A full or read-only disk under views/ costs the sharing, never the answer."""
    from xerj_core.graph import hop, mapped

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mapped.np.lib.format, "open_memmap", full)
    engine.graph.views = hop.ViewCache(engine.store.path / "views")
    for i in range(20):
        engine.graph.link("b", {"src": "a", "dst": f"d{i}", "type": "t", "valid_at": T0})
    assert len(engine.graph.ego("b", {"node": "a", "as_of": T0, "limit": 100})["edges"]) == 20
    assert not [p for p in (engine.store.path / "views").iterdir()]


def test_packed_ids_of_merged_away_segments_are_removed(engine):
    """A seal that merges segments leaves their packed ids behind; the next ego removes them from views/."""
    params = {"node": "n1", "hops": 2, "as_of": T0, "limit": 100, "include_evidence": "false"}
    for i in range(40):
        engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i}", "type": "t", "valid_at": T0})
    engine.graph.ego("b", params)
    views = engine.store.path / "views"
    before = {p.name for p in views.glob("*.ids.*")}
    assert before
    for i in range(40, 100):
        engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i}", "type": "t", "valid_at": T0})
    body = engine.graph.ego("b", params)
    assert len(body["edges"]) == 20
    with engine.store.reader(EDGES) as reader:
        layout = {f"{s.start}-{s.end}-{s.sealed_at}" for s in reader.segments}
    after = {p.name for p in views.glob("*.ids.*")}
    assert after and all(name.split(".ids.")[1].split("@")[0] in layout for name in after)
    assert before - after  # the merged-away segments' sets are gone


def test_packed_ids_of_an_older_file_layout_are_removed(engine):
    """Id sets an older layout of the files wrote are never read again: the next process to build a view (as
    one does after an upgrade, its table's layout having changed too) removes them, and keeps its own."""
    import shutil

    from xerj_core.graph import hop, rowids

    params = {"node": "n1", "hops": 2, "as_of": T0, "limit": 100, "include_evidence": "false"}
    for i in range(40):
        engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i}", "type": "t", "valid_at": T0})
    expected = engine.graph.ego("b", params)
    views = engine.store.path / "views"
    current = sorted(views.glob(f"*.ids.*@{rowids._FORMAT}"))
    assert current
    stale = current[0].with_name(current[0].name.rsplit("@", 1)[0] + f"@{rowids._FORMAT - 1}")
    shutil.copytree(current[0], stale)
    for table in [p for p in views.iterdir() if ".ids." not in p.name and ".docs." not in p.name]:
        shutil.rmtree(table)  # the published tables of another layout, as after an upgrade
    engine.graph.views = hop.ViewCache(views)  # a fresh process
    assert engine.graph.ego("b", params)["edges"] == expected["edges"]
    assert not stale.exists()
    assert sorted(views.glob(f"*.ids.*@{rowids._FORMAT}")) == current


@pytest.mark.parametrize("as_of", [T0 + 500, T0 + 10**12])
def test_large_frontier_hops_match_brute_force(tmp_path, as_of):
    """Frontiers past the sizes where a hop touches its runs first (16 nodes) and dedups both ways through a
    table lookup (2,048 nodes): out, in and both give the brute-force edges, each once, followed the way it
    was met, with expired_excluded counted once per edge; sealed rows and the tail alike."""
    from xerj_core.graph import hop

    rng = np.random.default_rng(12)
    n_nodes, n_edges = 3000, 12_000
    src = rng.integers(0, n_nodes, n_edges)
    dst = (src + rng.integers(1, n_nodes, n_edges)) % n_nodes  # never a self-edge
    valid = T0 + rng.integers(0, 1000, n_edges)
    with Engine(tmp_path / "data", config=EngineConfig(tail_rows=4096)) as engine:
        for lo in range(0, n_edges, 2000):
            engine.graph.write_edges("b", [EdgeDraft(f"n{src[i]}", f"n{dst[i]}", "cites", "d@1", 0.5, 0.9,
                                                     int(valid[i])) for i in range(lo, lo + 2000)],
                                     created_at=T0)
        retired = rng.choice(n_edges, 2000, replace=False)
        docs, _, _ = stored_edges(engine.store)
        by_claim = {(d["src"], d["dst"], d["valid_at"]): eid for eid, (d, _) in docs.items()}
        engine.graph.invalidate_edges("b", edge_ids=[by_claim[(f"n{src[i]}", f"n{dst[i]}", int(valid[i]))]
                                                     for i in retired], at=T0 + 700)
        docs, tail_count, dictionary = stored_edges(engine.store)
        assert tail_count > 0 and len(docs) > tail_count  # both the sealed view and the tail hold edges
        for size in (40, 2500):
            names = {f"n{i}" for i in rng.choice(n_nodes, size, replace=False)}
            frontier = np.sort(dictionary.lookup(sorted(names)))
            for direction in ("out", "in", "both"):
                expected, expired = {}, 0
                for eid, (doc, _row) in docs.items():
                    out = direction != "in" and doc["src"] in names
                    into = direction != "out" and doc["dst"] in names
                    if not (out or into):
                        continue
                    if doc["valid_at"] > as_of or (doc.get("invalid_at") is not None and doc["invalid_at"] <= as_of):
                        expired += 1
                    else:
                        expected[eid] = out
                counters = hop.new_counters()
                with engine.store.reader(EDGES) as reader:
                    view = engine.graph.views.graph(reader)
                    found = hop.expand(view, frontier, hops=1, direction=direction,
                                       filters=hop.Filters(as_of=as_of), counters=counters)
                    got = {reader.id_of(int(row)): bool(out) for row, out in
                           zip(found[0].column("row").tolist(), found[0].column("out").tolist())}
                    others = found[0].others
                assert len(got) == len(found[0])  # each edge once
                assert got == expected, (size, direction)
                assert counters["expired_excluded"] == expired
                ends = {docs[eid][0]["dst" if out else "src"] for eid, out in got.items()}
                assert set(dictionary.terms[o] for o in others.tolist()) == ends


def test_a_view_an_older_layout_published_is_rebuilt_not_mapped(engine, monkeypatch):
    """Run offsets are int32 now; files an older layout wrote (int64 offsets, under that layout's key) are never
    mapped by this code: a fresh process builds its own table, answers alike, and removes the older set."""
    from xerj_core.graph import hop

    for i in range(40):
        engine.graph.link("b", {"src": f"n{i % 5}", "dst": f"m{i}", "type": "t", "valid_at": T0})
    params = {"node": "n1", "hops": 2, "as_of": T0, "limit": 100, "include_evidence": "false"}
    views = engine.store.path / "views"

    def tables() -> list[Path]:
        return [p for p in views.iterdir() if ".ids." not in p.name and ".docs." not in p.name and not p.name.startswith(".")]

    with monkeypatch.context() as older:  # the layout before: int64 offsets, the format number before
        older.setattr(hop, "_FORMAT", hop._FORMAT - 1)
        older.setattr(hop, "_offsets_dtype", lambda edges: np.int64)
        engine.graph.views = hop.ViewCache(views)
        expected = engine.graph.ego("b", params)
        with engine.store.reader(EDGES) as reader:
            old_key = hop.view_key(reader)
            assert engine.graph.views.sealed(reader).table.both_off.dtype == np.int64
    assert [p.name for p in tables()] == [old_key]
    engine.graph.views = hop.ViewCache(views)  # a fresh process of this layout
    assert engine.graph.ego("b", params) == expected
    with engine.store.reader(EDGES) as reader:
        table = engine.graph.views.sealed(reader).table
        assert all(off.dtype == np.int32 for off in (table.out_off, table.in_off, table.both_off))
        assert [p.name for p in tables()] == [hop.view_key(reader)] != [old_key]
