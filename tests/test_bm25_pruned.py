"""bm25_top's pruned top-k (MaxScore) against scoring every posting: the same rows and the same scores, bit for bit.

The pruned path reads frequent terms' postings only at a few candidate rows; the dense path weights every
posting and adds them with one bincount. Compared on a Zipfian corpus over sealed segments and a tail, with
deletes, overwrites, identical documents (exact ties), repeated query words, filter masks and several k, after
writes that change the statistics; each comparison also checks the pruned path was the one that answered.
"""

from __future__ import annotations

import numpy as np
import pytest

from xerj_core.query import bm25
from xerj_core.query.ranking import top_k
from xerj_core.store import BulkOp, Store

VOCAB = 400


def zipf_texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, VOCAB + 1) ** 1.07
    weights /= weights.sum()
    lengths = rng.integers(3, 60, n)
    picks = rng.choice(VOCAB, int(lengths.sum()), p=weights)
    out, at = [], 0
    for length in lengths:
        out.append(" ".join(f"w{j}" for j in picks[at:at + length]))
        at += length
    return out


def queries(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(count):
        # a frequent word or two beside rarer ones, as real queries mix them; now and then a word twice
        words = [f"w{j}" for j in rng.integers(0, 8, rng.integers(1, 3))]
        words += [f"w{j}" for j in rng.integers(20, VOCAB, rng.integers(1, 4))]
        if rng.random() < 0.2:
            words.append(words[-1])
        found.append(" ".join(rng.permutation(words)))
    return found


def dense_top(reader, query: str, k: int, mask: np.ndarray | None) -> tuple[list[int], list[float]]:
    found, scores = bm25.match_text(reader, "text", query)
    if mask is not None:
        found = found & mask
    ranked = top_k(scores, found, k)
    return ranked.rows.tolist(), ranked.scores.tolist()


def answers(monkeypatch, name: str) -> list[bool]:
    """Whether each call of ``bm25.<name>`` (a shortcut that may give way with None) answered."""
    answered = []
    shortcut = getattr(bm25, name)

    def spy(*args, **kwargs):
        found = shortcut(*args, **kwargs)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(bm25, name, spy)
    return answered


@pytest.fixture
def spied(monkeypatch):
    return answers(monkeypatch, "_pruned_top")


def test_pruned_top_k_equals_scoring_every_posting(tmp_path, spied):
    texts = zipf_texts(6000, seed=5)
    texts[10] = texts[2010] = texts[4010] = "w300 w301 w1"  # identical documents tie exactly
    with Store(tmp_path / "data", tail_rows=512) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        for i in range(0, 6000, 97):
            store.delete("c", str(i))
        for i in range(3, 6000, 89):
            store.put("c", {"text": texts[i] + " w350 w0"}, str(i))  # overwritten: the old row dies
        rng = np.random.default_rng(1)
        for round_ in range(6):
            with store.reader("c") as reader:
                assert reader.segments and reader.tail_count and len(reader.dead_rows())
                mask = rng.random(reader.n_rows) < 0.7
                for query in queries(round_, 60) + ["w300 w301 w1", "w1 w300 w301 w300"]:
                    for k in (1, 10, 25):
                        for given in (None, mask):
                            got = bm25.bm25_top(reader, "text", query, k, given)
                            assert (got.rows.tolist(), got.scores.tolist()) == dense_top(reader, query, k, given), \
                                (query, k, round_)
            # each write changes N and avgdl: every weight and bound is of the new statistics
            store.put("c", {"text": f"w300 w301 w{round_ + 30} w1"}, f"new-{round_}")
            store.delete("c", str(round_ * 13 + 1))
    assert sum(spied) > len(spied) // 2, "most of these queries should be answered by the pruned path"
    assert not all(spied), "some should fall back to scoring every posting"


def test_a_bound_is_never_below_a_weight(tmp_path):
    with Store(tmp_path / "data", tail_rows=128) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(zipf_texts(700, seed=9))])
        with store.reader("c") as reader:
            stats = bm25.field_stats(reader, "text")
            for term in (f"w{j}" for j in range(0, VOCAB, 7)):
                for part in bm25.term_parts(reader, "text", term):
                    weights = part.weights(stats, 1.7)
                    assert weights.max() <= part.bound(stats, 1.7)
                    at = np.arange(0, len(part.rows), 3)
                    assert part.weights_at(at, stats, 1.7).tolist() == weights[at].tolist()


def test_after_a_seal_a_term_part_reuses_the_segments_it_left_and_equals_one_read_afresh(tmp_path, monkeypatch):
    texts = zipf_texts(1500, seed=11)
    terms = [f"w{j}" for j in (0, 1, 5, 40, 200, 399)]
    with Store(tmp_path / "data", tail_rows=64) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        read = []
        for round_ in range(5):
            with store.reader("c") as reader:
                layout = reader.sealed_layout()
                for term in terms:
                    bm25._sealed_part(reader, "text", term)  # kept for this layout
            for i in range(70):  # past the tail: a seal, which may merge the small segments
                store.put("c", {"text": texts[(round_ * 70 + i) % 1500] + " w399"}, f"r{round_}-{i}")
            store.delete("c", str(round_ * 3))
            with store.reader("c") as reader:
                assert reader.sealed_layout() != layout
                reads = reader.segment_postings
                monkeypatch.setattr(reader, "segment_postings", lambda seg, *a: read.append(seg.start) or reads(seg, *a))
                parts = {term: bm25._sealed_part(reader, "text", term) for term in terms}
                left = {seg.start for seg in reader.segments if (seg.start, seg.end, seg.sealed_at) in set(layout)}
                assert left and not left & set(read), "segments the seal left are not read again"
                read.clear()
            with store.reader("c") as reader:
                for term in terms:  # the part read afresh, segment by segment, with no cache
                    pieces = []
                    for seg in reader.segments:
                        found = reader.segment_postings(seg, "text", term)
                        if found is not None:
                            lengths = reader.segment_column(seg, "text").values[found[0] - seg.start]
                            pieces.append((found[0], found[1], lengths))
                    assert (parts[term] is None) == (not pieces), term
                    if pieces:
                        again = bm25.TermPart(*(np.concatenate(a) for a in zip(*pieces)))
                        for name in ("rows", "fixed", "per_length"):
                            assert getattr(parts[term], name).tolist() == getattr(again, name).tolist(), (term, name)


@pytest.mark.parametrize("track", [True, False, 10, 300, 10_000])
def test_search_answers_a_plain_match_pruned_with_the_total_it_tracks(tmp_path, spied, track):
    from xerj_core.query.service import SearchService

    texts = zipf_texts(3000, seed=21)
    with Store(tmp_path / "data", tail_rows=256) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        for i in range(0, 3000, 71):
            store.delete("c", str(i))
        service = SearchService(store)
        for n, query in enumerate(queries(7, 40)):
            store.put("c", {"text": texts[n] + " w1"}, f"new-{n}")  # a new generation: no weights kept
            body = {"query": {"match": {"text": query}}, "size": 10, "track_total_hits": track}
            got = service.search("c", body)
            with store.reader("c") as reader:
                rows, scores = dense_top(reader, query, 10, None)
                matched = int(np.count_nonzero(bm25.match_text(reader, "text", query)[0]))
                assert [h["_id"] for h in got["hits"]["hits"]] == [reader.id_of(r) for r in rows], query
                assert [h["_score"] for h in got["hits"]["hits"]] == pytest.approx(scores, rel=1e-12)
            total = got["hits"].get("total")
            if track is True:
                assert total == {"value": matched, "relation": "eq"}
            elif track is False:
                assert total is None
            elif matched <= track:
                assert total == {"value": matched, "relation": "eq"}
            else:
                assert total == {"value": track, "relation": "gte"}
    if track is not True:
        assert any(spied), "the pruned path answered some of them"


def test_a_match_and_its_count_look_each_terms_dead_rows_up_once_per_generation(tmp_path, monkeypatch):
    from xerj_core.query.service import SearchService

    texts = zipf_texts(2000, seed=23)
    with Store(tmp_path / "data", tail_rows=256) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        for i in range(0, 2000, 37):
            store.put("c", {"text": texts[i] + " w2"}, str(i))  # overwritten: dead rows in every part
        service = SearchService(store)
        counted = []
        live_count = bm25._live_count
        monkeypatch.setattr(bm25, "_live_count", lambda reader, parts: counted.append(1) or live_count(reader, parts))
        for n, query in enumerate(queries(9, 30)):
            store.put("c", {"text": texts[n]}, str(n))  # a new generation
            counted.clear()
            got = service.search("c", {"query": {"match": {"text": query}}, "size": 10, "track_total_hits": 500})
            assert len(counted) <= len(bm25.query_terms(query)), query  # ranking and count share it
            with store.reader("c") as reader:
                matched = int(np.count_nonzero(bm25.match_text(reader, "text", query)[0]))
                assert got["hits"]["total"]["value"] == min(matched, 500)


@pytest.mark.parametrize("track", [True, False, 25, 10_000])
def test_a_match_within_filters_is_answered_pruned_as_scoring_every_posting(tmp_path, monkeypatch, track):
    """A bool of one must match and filter clauses ranks and counts from postings, within the filters' mask; the
    same request with an aggregation scores every row, and both give the same hits, scores, total and max_score."""
    from xerj_core.query.service import SearchService

    texts = zipf_texts(3000, seed=31)
    with Store(tmp_path / "data", tail_rows=256) as store:
        for name in ("c", "d"):
            store.create_index(name, {"properties": {"text": {"type": "text"}, "kind": {"type": "keyword"},
                                                     "n": {"type": "long"}}})
        store.bulk([BulkOp("index", "c" if i % 3 else "d", str(i), {"text": t, "kind": "ab"[i % 2], "n": i})
                    for i, t in enumerate(texts)])
        for i in range(0, 3000, 53):
            store.delete("c" if i % 3 else "d", str(i))
        service = SearchService(store)
        pruned_within = []  # whether each pruned ranking given a filter mask answered
        pruned_top = bm25._pruned_top

        def spy(reader, field, terms, k, filter_mask):
            found = pruned_top(reader, field, terms, k, filter_mask)
            if filter_mask is not None:
                pruned_within.append(found is not None)
            return found

        monkeypatch.setattr(bm25, "_pruned_top", spy)
        few = []  # how many rows each selective filter kept, scored one by one
        top_of_rows = bm25._top_of_rows
        monkeypatch.setattr(bm25, "_top_of_rows", lambda reader, field, terms, k, rows, boost: few.append(len(rows))
                            or top_of_rows(reader, field, terms, k, rows, boost))
        filters = [[{"term": {"kind": "a"}}], [{"term": {"kind": "b"}}, {"range": {"n": {"lt": 1500}}}],
                   [{"term": {"kind": "none"}}], [], [{"range": {"n": {"lt": 150}}}]]
        for n, query in enumerate(queries(13, 36)):
            index = "c" if n % 3 else "d"
            store.put(index, {"text": texts[n] + " w2", "kind": "ab"[n % 2], "n": n}, str(n))  # a new generation
            match = {"text": {"query": query, "boost": 2.5}} if n % 3 == 0 else {"text": query}  # scores boosted
            body = {"query": {"bool": {"must": [{"match": match}], "filter": filters[n % 5]}},
                    "size": 10, "track_total_hits": track}
            for names in (index, "c,d"):
                pruned = service.search(names, body)
                every = service.search(names, {**body, "aggs": {"k": {"terms": {"field": "kind"}}}})
                del pruned["took"], every["took"], every["aggregations"]
                assert pruned == every, (query, filters[n % 5], names)
    if track is not True:  # an exact total is counted from every row's score
        assert any(pruned_within), "the pruned path answered some of them within their filters"
    assert 0 in few and any(few), "selective filters' rows were scored one by one, none kept or some"


@pytest.fixture
def carried(monkeypatch):
    return answers(monkeypatch, "_carried_top")


def test_carried_weights_rank_a_new_generation_as_scoring_every_posting(tmp_path, carried):
    # Frequent words only: pruning cannot show these exact, so each new generation's first query is ranked from the
    # weights the sealed parts carry from the generation that first needed them, whose slope drifts with each write.
    texts = zipf_texts(5000, seed=31)
    texts[7] = texts[3007] = "w0 w1 w2"  # identical documents tie exactly
    rng = np.random.default_rng(4)
    with Store(tmp_path / "data", tail_rows=512) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        for i in range(0, 5000, 83):
            store.delete("c", str(i))
        for n in range(80):
            words = [f"w{j}" for j in rng.integers(0, 6, rng.integers(2, 5))]
            query = " ".join(words)
            # a long document moves the average length (the slope) more than a typical one
            store.put("c", {"text": " ".join(["w1"] * int(rng.integers(1, 200)))}, f"new-{n}")
            if n % 9 == 0:
                store.put("c", {"text": texts[n] + " w0"}, str(n + 1))  # an overwrite: a dead row in a sealed part
            with store.reader("c") as reader:
                mask = rng.random(reader.n_rows) < 0.6 if n % 2 else None
                k = (1, 10, 40)[n % 3]
                got = bm25.bm25_top(reader, "text", query, k, mask)
                assert (got.rows.tolist(), got.scores.tolist()) == dense_top(reader, query, k, mask), (query, n)
                again = bm25.bm25_top(reader, "text", query + " w3", k, mask)  # the generation's second: weighted
                assert (again.rows.tolist(), again.scores.tolist()) == dense_top(reader, query + " w3", k, mask)
    assert carried.count(True) >= 60, "a new generation's first query is ranked from carried weights"
    assert len(carried) == 80, "the second query of a generation weights the postings anew and keeps them"


def test_carried_weights_give_way_when_the_slope_has_moved_too_far(tmp_path, carried):
    with Store(tmp_path / "data", tail_rows=64) as store:
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(zipf_texts(200, seed=3))])
        for n in range(3):
            with store.reader("c") as reader:
                got = bm25.bm25_top(reader, "text", "w0 w1", 5)
                assert (got.rows.tolist(), got.scores.tolist()) == dense_top(reader, "w0 w1", 5, None)
            # documents far longer than the rest: the average length, and the slope, move by far more than 5%
            # (into the tail: 28, then 48 of its 64 rows, so no seal carries the weights anew in between)
            store.bulk([BulkOp("index", "c", f"long-{n}-{i}", {"text": "w2 " * 400}) for i in range(20)])
    assert len(carried) == 3, "each generation's first query tries the carried weights"
    assert carried[0] and not any(carried[1:]), "the slope moved too far from the carried one"


def test_readers_of_generations_written_meanwhile_rank_as_scoring_every_posting(tmp_path):
    """Reader threads rank new generations' first queries from carried weights while a writer thread adds
    documents; a part carried by one thread at its generation's slope is read whole by the others."""
    import threading

    texts = zipf_texts(4000, seed=13)
    with Store(tmp_path / "data", tail_rows=4096) as store:  # one sealed layout throughout: its parts carry on
        store.bulk([BulkOp("index", "c", str(i), {"text": t}) for i, t in enumerate(texts)])
        store.bulk([BulkOp("index", "c", f"t{i}", {"text": t}) for i, t in enumerate(texts[:100])])
        stop, failures, ranked = threading.Event(), [], []

        def write() -> None:
            try:
                for n in range(150):
                    store.put("c", {"text": " ".join(["w1"] * (n % 40 + 1))}, f"new-{n}")
            finally:
                stop.set()

        def read(seed: int) -> None:
            rng = np.random.default_rng(seed)
            try:
                while not stop.is_set():
                    query = " ".join(f"w{j}" for j in rng.integers(0, 6, 3))
                    with store.reader("c") as reader:
                        got = bm25.bm25_top(reader, "text", query, 10)
                        assert (got.rows.tolist(), got.scores.tolist()) == dense_top(reader, query, 10, None)
                        ranked.append(query)
            except Exception as exc:  # reported on the main thread
                failures.append(exc)
                stop.set()

        threads = [threading.Thread(target=write)] + [threading.Thread(target=read, args=(s,)) for s in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[0]
        assert len(ranked) > 20
