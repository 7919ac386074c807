"""Agent-memory benchmark: recall p50 per mode against bm25s and numpy brute force; store throughput with and without dedup.

Run: python tests/bench/bench_memory.py [--n N] [--queries Q] [--stores S] [--blas-threads T] [--store-only]

One engine holds one namespace of N memories (default 100,000; synthetic text
over a Zipf-distributed vocabulary of pronounceable words, so character
n-grams behave like words do) and a brain over it (N/2 random edges, so blend
has a graph to read). In the same run and over the same queries it times:

* BM25 recall against the search engine's own ``match`` query on the backing
  index (target: within 1.2x) and against bm25s over the same texts;
* semantic recall against numpy brute force (embed the query, one matrix-vector
  product over the stored embeddings, argpartition);
* hybrid recall against the sum of its two legs (target: at most the sum),
  as a ratio of p50s and as the median of per-query ratios (each query times
  all modes back to back, so the paired figure is immune to load drift);
* blend recall (hops 2, seeds from the top 5) against plain BM25 recall;
* ``store`` throughput without dedup, and with dedup (target: at least 0.5 of
  the rate without): each dedup store proves no current memory reaches the
  threshold, scoring only the rows its per-segment sketches cannot rule out
  (``xerj_core.memory.dedup``); the three kinds of store are interleaved, and
  the first dedup store (once per process: decoding the stored vectors and
  building the sketches) is timed apart; against a numpy brute-force probe of
  the same matrix (every vector, one matrix-vector product).

``--store-only`` loads the corpus and runs the store part alone.

Every ratio is printed as xerj / baseline (lower is better for latencies).
The corpus is loaded with the documents ``MemoryService.store`` writes, in
batched transactions (the memory API itself stores one memory per call).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _blas_threads_from_argv(default: str = "1") -> str:
    """BLAS thread count, set before numpy loads: a threaded matvec on a busy small machine is mostly contention."""
    for i, arg in enumerate(sys.argv):
        if arg == "--blas-threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--blas-threads="):
            return arg.split("=", 1)[1]
    return default


BLAS_THREADS = _blas_threads_from_argv()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, BLAS_THREADS)

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from xerj_core.engine import Engine  # noqa: E402
from xerj_core.memory import requests as rq  # noqa: E402
from xerj_core.memory.namespace import TEXT_VECTOR_FIELD, memory_index, namespace_mapping  # noqa: E402
from xerj_core.memory.service import memory_document  # noqa: E402
from xerj_core.model import EdgeDraft  # noqa: E402
from xerj_core.text import tokenize  # noqa: E402

NS = "bench"
K = 10
LOAD_CHUNK = 5000
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["er", "an", "ot", "is"]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def corpus(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = vocabulary(rng, 30_000)
    rng.shuffle(words)
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    cumulative = np.cumsum(weights / weights.sum())
    nprng = np.random.default_rng(seed)
    lengths = nprng.integers(8, 24, n)
    picks = np.searchsorted(cumulative, nprng.random(int(lengths.sum())))
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(words[i] for i in picks[at: at + length]))
        at += length
    return texts, words


def queries(words: list[str], count: int, seed: int = 11) -> list[str]:
    # Two or three words from the mid-frequency band: rare enough to discriminate, common enough to match.
    rng = random.Random(seed)
    band = words[50:5000]
    return [" ".join(rng.sample(band, rng.choice((2, 3)))) for _ in range(count)]


def p50(fn, items) -> float:
    """Median milliseconds of ``fn(item)`` over ``items`` (after a warm-up pass over a tenth of them)."""
    return p50s({"only": fn}, items)["only"]


def p50s(fns: dict, items, raw: dict | None = None, seed: int = 17) -> dict[str, float]:
    """Median milliseconds per function, measured interleaved item by item, in a new random order each item.

    On a shared machine the load drifts; interleaving makes every function see the
    same drift, so the ratios between them hold even when absolute numbers move.
    The order is drawn afresh for each item, so no function always runs after the
    same other one: in a fixed rotation BM25 recall always followed the search
    engine's match of the same query (its postings warm in the processor's caches)
    and hybrid recall always followed numpy's scan of 0.9 GB of vectors (every cache
    cold), which tilted the hybrid's ratio to its legs by its lexical leg alone.
    """
    names = list(fns)
    order = random.Random(seed)
    for item in items[: max(1, len(items) // 10)]:
        for name in names:
            fns[name](item)
    times: dict[str, list[float]] = {name: [] for name in names}
    for item in items:
        for name in order.sample(names, len(names)):
            start = time.perf_counter()
            fns[name](item)
            times[name].append((time.perf_counter() - start) * 1000)
    if raw is not None:
        raw.update(times)
    return {name: statistics.median(values) for name, values in times.items()}


def paired_ratios(times: dict[str, list[float]], numerator: str, *denominator: str) -> np.ndarray:
    """Per item ``numerator_i / sum(denominator_i)``: timed back to back, so load drift cannot tilt them."""
    return np.array([n / sum(parts) for n, *parts in zip(times[numerator], *(times[d] for d in denominator))])


def median_ci(values: np.ndarray, resamples: int = 2000, seed: int = 5) -> tuple[float, float, float]:
    """The median and a bootstrap 95% interval of it."""
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, (resamples, len(values))), axis=1)
    return float(np.median(values)), float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def load(engine: Engine, texts: list[str]) -> float:
    """Write the corpus as memory documents in batched transactions; returns memories per second."""
    memory = engine.memory
    embedder = memory._embedder_for(None)
    index = memory_index(NS)
    engine.store.create_index(index, namespace_mapping(embedder.id, embedder.dims))
    base = memory.clock() - len(texts) * 1000
    start = time.perf_counter()
    for lo in range(0, len(texts), LOAD_CHUNK):
        chunk = texts[lo: lo + LOAD_CHUNK]
        vectors = embedder.embed(chunk)
        docs = [memory_document(rq.StoreRequest(text, None, {"n": lo + i, "tag": f"t{(lo + i) % 7}"}, False, 0.95),
                                base + (lo + i) * 1000, {TEXT_VECTOR_FIELD: vectors[i]})
                for i, text in enumerate(chunk)]

        def write(txn, docs=docs, lo=lo):
            for i, doc in enumerate(docs):
                txn.put(index, doc, f"m{lo + i}")

        engine.store.transact(write)
    return len(texts) / (time.perf_counter() - start)


def link_random(engine: Engine, n: int, edges: int, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, edges), rng.integers(0, n, edges)
    weight, confidence = rng.random(edges), 0.5 + rng.random(edges) / 2
    valid_at = engine.memory.clock() - 10 * 86_400_000
    for lo in range(0, edges, 20_000):
        drafts = [EdgeDraft(src=f"m{s}", dst=f"m{d}", type="relates", detector="bench@1", weight=float(w),
                            confidence=float(c), valid_at=valid_at)
                  for s, d, w, c in zip(src[lo:lo + 20_000], dst[lo:lo + 20_000], weight[lo:lo + 20_000],
                                        confidence[lo:lo + 20_000])]
        engine.graph.write_edges(NS, drafts, created_at=valid_at)


def stored_matrix(engine: Engine) -> np.ndarray:
    with engine.store.reader(memory_index(NS)) as reader:
        return reader.column(TEXT_VECTOR_FIELD).values.copy()


def recall_part(engine: Engine, args, texts: list[str], words: list[str], qs: list[str],
                ratios: list[tuple[str, float, str]]) -> None:
    """Recall p50 per mode against its baselines, over the loaded corpus and a brain of N/2 edges."""
    memory = engine.memory
    start = time.perf_counter()
    link_random(engine, args.n, args.n // 2)
    print(f"edges: {args.n // 2:,} in {time.perf_counter() - start:.1f}s")

    index = memory_index(NS)
    search = engine.search
    import bm25s

    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index([tokenize(t) for t in texts], show_progress=False)
    vocab = retriever.vocab_dict

    def bm25s_query(q: str):
        # bm25s's fastest single-query path: dense scores from its sparse matrix, then a top-k.
        tokens = [t for t in tokenize(q) if t in vocab]
        if not tokens:  # bm25s indexes past the end of an empty query; no known term scores nothing, as in xerj
            return np.empty(0, dtype=np.int64)
        scores = retriever.get_scores(tokens)
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])]

    def bm25s_retrieve(q: str):
        tokens = [t for t in tokenize(q) if t in vocab]
        if not tokens:
            return []
        return retriever.retrieve([tokens], k=K, show_progress=False, return_as="documents")

    embedder = memory._embedder_for(None)
    matrix = stored_matrix(engine)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    unit = (matrix / norms[:, None]).astype(np.float32)

    def brute(q: str):
        v = embedder.embed([q])[0]
        sims = unit @ v
        top = np.argpartition(-sims, K)[:K]
        return top[np.argsort(-sims[top])]

    def recall(**extra):
        return lambda q: memory.recall(NS, {"query": q, "k": K, **extra})

    per_query: dict[str, list[float]] = {}
    t = p50s({
        "search": lambda q: search.search(index, {"query": {"match": {"text": q}}, "size": K}),
        "bm25": recall(),
        "bm25s": bm25s_query,
        "bm25s_retrieve": bm25s_retrieve,
        "semantic": recall(semantic=True),
        "brute": brute,
        "hybrid": recall(hybrid=True),
        "linear": recall(hybrid=True, fusion="linear"),
        "blend": recall(graph={"mode": "blend", "hops": 2}),
        "recency": recall(recency_weight=0.3),
    }, qs, per_query)
    seeds = [f"m{i}" for i in range(0, args.n, max(1, args.n // len(qs)))][: len(qs)]
    t_restrict = p50(lambda s: memory.recall(NS, {"query": qs[int(s[1:]) % len(qs)], "k": K, "graph": {
        "mode": "restrict", "seeds": [s], "hops": 2}}), seeds)
    t_reach = p50(lambda s: engine.graph.reachable(NS, [s], hops=2), seeds)

    print(f"BM25      recall p50 {t['bm25']:7.2f} ms | search engine match {t['search']:7.2f} ms "
          f"| bm25s get_scores + top-k {t['bm25s']:7.2f} ms (bm25s.retrieve {t['bm25s_retrieve']:.2f} ms)")
    print(f"semantic  recall p50 {t['semantic']:7.2f} ms | numpy brute force (embed + matvec + top-k) "
          f"{t['brute']:7.2f} ms")
    print(f"hybrid    recall p50 {t['hybrid']:7.2f} ms (rrf) {t['linear']:7.2f} ms (linear) | legs summed "
          f"{t['bm25'] + t['semantic']:7.2f} ms | bm25s + brute force {t['bm25s'] + t['brute']:7.2f} ms")
    print(f"blend     recall p50 {t['blend']:7.2f} ms (hops 2, seeds = top 5) | restrict (hops 2, one seed) "
          f"{t_restrict:7.2f} ms | graph.reachable alone {t_reach:7.2f} ms | recency blend {t['recency']:7.2f} ms")
    ratios.append(("BM25 recall / search engine BM25", t["bm25"] / t["search"], "target <= 1.2"))
    ratios.append(("BM25 recall / bm25s", t["bm25"] / t["bm25s"], ""))
    ratios.append(("semantic recall / numpy brute force", t["semantic"] / t["brute"], ""))
    ratios.append(("hybrid (rrf) / (BM25 + semantic), p50s", t["hybrid"] / (t["bm25"] + t["semantic"]), ""))
    paired, low, high = median_ci(paired_ratios(per_query, "hybrid", "bm25", "semantic"))
    ratios.append(("hybrid (rrf) / (BM25 + semantic), paired median", paired,
                   f"target <= 1.0 (95% CI {low:.3f}-{high:.3f})"))
    ratios.append(("hybrid (rrf) / (bm25s + numpy brute force)", t["hybrid"] / (t["bm25s"] + t["brute"]), ""))
    ratios.append(("blend / BM25 recall", t["blend"] / t["bm25"], ""))
    ratios.append(("blend / bm25s", t["blend"] / t["bm25s"], ""))
    ratios.append(("recency blend / BM25 recall", t["recency"] / t["bm25"], ""))


def store_part(engine: Engine, args, texts: list[str], words: list[str],
               ratios: list[tuple[str, float, str]]) -> None:
    """Store throughput without and with dedup, and the numpy probe over the same matrix."""
    memory = engine.memory
    embedder = memory._embedder_for(None)
    # -- store throughput ------------------------------------------------------------------
    # Plain stores of new texts; near-repeats of the newest memories with dedup (most are duplicates at 0.95);
    # texts of fresh words with dedup (none is). One of each per round, in a rotating order, so load drift
    # and collector pauses fall on all three alike; the first dedup store (one-time work) is timed apart.
    fresh = [f"{texts[i]} {words[i % 977]}" for i in range(args.stores)]
    dedup_texts = [f"{texts[-1 - i]} {words[i % 991]} extra" for i in range(args.stores)]
    rng = random.Random(13)
    novel_texts = [" ".join(rng.choice(words[:5000]) for _ in range(rng.randint(8, 23))) for _ in range(args.stores)]
    start = time.perf_counter()
    memory.store(NS, {"text": f"{texts[0]} warm-up", "dedup": True})
    first_ms = (time.perf_counter() - start) * 1000
    sides = {
        "plain": lambda i: memory.store(NS, {"text": fresh[i], "metadata": {"kind": "bench"}})[0],
        "near": lambda i: memory.store(NS, {"text": dedup_texts[i], "dedup": True})[0],
        "novel": lambda i: memory.store(NS, {"text": novel_texts[i], "dedup": True})[0],
    }
    spent = {name: 0.0 for name in sides}
    skipped = {name: 0 for name in sides}
    names = list(sides)
    for i in range(args.stores):
        for name in names[i % 3:] + names[: i % 3]:
            start = time.perf_counter()
            status = sides[name](i)
            spent[name] += time.perf_counter() - start
            skipped[name] += status == 200
    plain, deduped, novel = (args.stores / spent[name] for name in names)
    skipped, novel_skipped = skipped["near"], skipped["novel"]
    # The same fresh-text dedup store with the sketch pruning turned off (the full scan of before), paired with
    # a plain store each, over a few rounds: what the pruning is worth, in this run.
    from xerj_core.memory import dedup

    rounds = min(args.stores, 30)
    rng = random.Random(17)
    others = [" ".join(rng.choice(words[:5000]) for _ in range(rng.randint(8, 23))) for _ in range(rounds)]
    unpruned = {"plain": 0.0, "full scan": 0.0}
    pruning = dedup.candidates
    try:
        for i in range(rounds):
            start = time.perf_counter()
            memory.store(NS, {"text": f"{fresh[i]} again", "metadata": {"kind": "bench"}})
            unpruned["plain"] += time.perf_counter() - start
            dedup.candidates = lambda *a: None
            start = time.perf_counter()
            memory.store(NS, {"text": others[i], "dedup": True})
            unpruned["full scan"] += time.perf_counter() - start
            dedup.candidates = pruning
    finally:
        dedup.candidates = pruning
    matrix = stored_matrix(engine)
    probe_ms = p50(lambda t: int(np.argmax(matrix @ embedder.embed([t])[0])), dedup_texts[:100])
    print(f"store     {plain:7.1f} memories/s without dedup | {deduped:7.1f} memories/s with dedup, near-repeats "
          f"({skipped} deduplicated) | {novel:7.1f} memories/s with dedup, fresh texts ({novel_skipped} deduplicated); "
          f"interleaved")
    print(f"          the first dedup store took {first_ms:.0f} ms (not in the rates): once per process it decodes the "
          f"stored vectors (as the first semantic recall does) and builds the segment sketches")
    print(f"          numpy brute-force probe alone (one matvec over all {len(matrix):,} vectors) {probe_ms:.2f} ms "
          f"= {1000 / probe_ms:,.0f} probes/s")
    ratios.append(("store with dedup / without, near-repeats", deduped / plain, "target >= 0.5"))
    ratios.append(("store with dedup / without, fresh texts", novel / plain, "target >= 0.5"))
    print(f"          unpruned (every vector scored, as before the sketches), {rounds} rounds paired with plain "
          f"stores: {rounds / unpruned['full scan']:7.1f} memories/s with dedup against "
          f"{rounds / unpruned['plain']:7.1f} without")
    ratios.append(("  the same without the sketch pruning", unpruned["plain"] / unpruned["full scan"], ""))
    ratios.append(("store-with-dedup time / numpy probe time", (1000 / deduped) / probe_ms, ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the namespace (default 100000)")
    parser.add_argument("--queries", type=int, default=200, help="recall queries per mode (default 200)")
    parser.add_argument("--stores", type=int, default=300, help="stores per throughput run (default 300)")
    parser.add_argument("--blas-threads", default="1", help="BLAS threads for both xerj and the baselines (default 1)")
    parser.add_argument("--store-only", action="store_true", help="skip the recall part (edges, BM25, kNN)")
    args = parser.parse_args()
    try:
        load_avg = os.getloadavg()[0]
    except OSError:
        load_avg = float("nan")
    print(f"memories={args.n} queries={args.queries} stores={args.stores} cpus={os.cpu_count()} "
          f"load_avg={load_avg:.2f} blas_threads={os.environ.get('OPENBLAS_NUM_THREADS')}")

    texts, words = corpus(args.n)
    qs = queries(words, args.queries)
    ratios: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "data") as engine:
        memory = engine.memory
        rate = load(engine, texts)
        print(f"load: {rate:,.0f} memories/s (batched transactions of {LOAD_CHUNK}); "
              f"embedder {memory._embedder_for(None).id} ({memory._embedder_for(None).dims} dims)")
        if not args.store_only:
            recall_part(engine, args, texts, words, qs, ratios)
        store_part(engine, args, texts, words, ratios)
    print("\nratios (xerj / baseline):")
    for name, value, target in ratios:
        verdict = ""
        if target.startswith("target >="):
            verdict = " ok" if value >= float(target.split(">=")[1].split()[0]) else " MISSED"
        if target.startswith("target <="):
            bound = float(target.split("<=")[1].split()[0])
            verdict = " ok" if value <= bound else " MISSED"
            if "CI" in target and value > bound:
                low = float(target.split("CI ")[1].split("-")[0])
                verdict = " parity (the interval holds the target)" if low <= bound else " MISSED"
        print(f"  {name:48s} {value:6.2f}  {target}{verdict}")


if __name__ == "__main__":
    main()
