"""Embedder benchmark: recall quality (MRR@10) on the Foam vault and embedding speed (texts/s), every embedder in one run.

Run: python tests/bench/bench_embedders.py [--corpus DIR] [--texts N] [--model-cache DIR] [--threads T]

Quality. Every Markdown note of the vault is a document (its whole text). Each
note is then asked for twice, by its title and by its first sentence, and the
note itself is the one relevant answer: its reciprocal rank among all notes
by cosine similarity counts when it is in the top 10 (MRR@10). Speed. N short
texts (default 20,000: every distinct sentence of the vault, cycled) are
embedded in batches of 1,000; texts/s is the median of three passes after a
warm-up, beside texts per second of the process's CPU time, which a machine
shared with other work changes far less than wall time.

Embedders: ``lexical-feature-hash`` (the baseline), the static
``wordllama-l2-supercat-256-sif`` (``semantic`` extra; SIF and log-TF weighted
pooling), the same model averaged without weights (``wordllama-l2-supercat-256``,
what older namespaces hold), ``wordllama-l2-supercat-256-sif-hash-2048`` (that static vector beside hashed words, trigrams and
word pairs, one cosine of both), ``wordllama-l2-supercat-256-sif-hash-2048-title`` (the
default for new namespaces: that vector with a text's short first line, its title, weighed
in as a field holding 10% of the vector) and, when its model is in the model cache,
``sentence-transformers/all-MiniLM-L6-v2`` (``neural`` extra, read
offline: the benchmark never downloads). Ratios are against lexical in the same
run. Beside the vault, each embedder's MRR@10 on 30 hand-written paraphrase
pairs (``recall_devsets.PARAPHRASES``: no content word shared) shows what
meaning adds that terms cannot. Targets (issue #21): the offline semantic embedder's MRR@10 at least 1.2x
lexical, and at least 20,000 texts/s; checked for the static and the hybrid ids.

What the title field does alone is printed too: the baseline's own vectors with the same
field (``lexical-feature-hash + title field``, not an embedder xerj registers), so the share
of the gain that comes from weighing titles, rather than from the model, can be read off.
The speed texts are single sentences: no title, so the titled id does the hybrid's work there.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from xerj_core.embedding import (HYBRID_EMBEDDER, LEXICAL_EMBEDDER, STATIC_EMBEDDER,  # noqa: E402
                                 STATIC_MEAN_EMBEDDER, TITLED_HYBRID_EMBEDDER, EmbedderSettings,
                                 collect_embedders, unavailable)
from xerj_core.errors import XerjError  # noqa: E402
from xerj_core.plugins import get_plugin_manager  # noqa: E402

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
LEXICAL_TITLED = f"{LEXICAL_EMBEDDER} + title field"
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "foam-docs"
TOP = 10
BATCH = 1000

_FRONTMATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_FENCE = re.compile(r"```.*?```", re.S)
_HTML = re.compile(r"<[^>]+>")
_LINK = re.compile(r"!?\[\[([^\]|]+)(?:\|([^\]]+))?\]\]|!?\[([^\]]*)\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def _plain(text: str) -> str:
    """Markdown reduced to the words a person reads: links to their labels, no markup or HTML."""
    text = _LINK.sub(lambda m: m.group(2) or m.group(1) or m.group(3) or "", text)
    text = _HTML.sub(" ", text)
    return re.sub(r"[*_`>#|]+", " ", text).strip()


def load_notes(corpus: Path) -> list[tuple[str, str, str]]:
    """``(title, first sentence, whole text)`` of every note that has a title and a sentence."""
    notes = []
    for path in sorted(corpus.rglob("*.md")):
        raw = path.read_text(encoding="utf-8", errors="replace")
        body = _FENCE.sub(" ", _FRONTMATTER.sub("", raw))
        title, sentence = None, None
        for line in body.splitlines():
            stripped = line.strip()
            if title is None and stripped.startswith("# "):
                title = _plain(stripped[2:])
                continue
            if not stripped or stripped.startswith(("#", "|", "-", "*", "<", "!", ">")) and len(_plain(stripped)) < 30:
                continue
            words = _plain(stripped)
            if len(words.split()) >= 4:
                sentence = _SENTENCE_END.split(words, maxsplit=1)[0]
                break
        title = title or path.stem.replace("-", " ")
        if sentence:
            notes.append((title, sentence, _plain(body)))
    return notes


def vault_sentences(bodies: list[str]) -> list[str]:
    """Every sentence of at least four words in the notes, each once, in vault order."""
    seen: dict[str, None] = {}
    for body in bodies:
        for line in body.splitlines():
            for sentence in _SENTENCE_END.split(line.strip()):
                if len(sentence.split()) >= 4:
                    seen.setdefault(sentence.strip(), None)
    return list(seen)


def mrr_at(docs: np.ndarray, queries: np.ndarray, top: int = TOP) -> float:
    """Mean reciprocal rank of query i's own document i within the top ``top`` by cosine (rows are unit or zero)."""
    scores = queries @ docs.T
    own = scores[np.arange(len(queries)), np.arange(len(queries))]
    # Rank = 1 + documents scoring strictly higher than the note itself (ties go to the note).
    ranks = 1 + (scores > own[:, None]).sum(axis=1)
    return float(np.where(ranks <= top, 1.0 / ranks, 0.0).mean())


def texts_per_second(embedder, texts: list[str], passes: int = 3) -> tuple[float, float]:
    """Texts per second of wall time and per second of this process's CPU time (all its threads): medians."""
    embedder.embed(texts[:BATCH])  # warm-up: model load, caches
    rates, cpu_rates = [], []
    for _ in range(passes):
        start, cpu = time.perf_counter(), time.process_time()
        for lo in range(0, len(texts), BATCH):
            embedder.embed(texts[lo: lo + BATCH])
        rates.append(len(texts) / (time.perf_counter() - start))
        cpu_rates.append(len(texts) / max(time.process_time() - cpu, 1e-9))
    return statistics.median(rates), statistics.median(cpu_rates)


class _TitleField:
    """An embedder's vectors with the titled hybrid's title field (xerj_embedders.hybrid.with_title_field)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def embed(self, texts):
        from xerj_embedders.hybrid import with_title_field

        return with_title_field(self.inner.embed, texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--model-cache", type=Path, default=os.environ.get("XERJ_MODEL_CACHE"))
    args = parser.parse_args()

    notes = load_notes(args.corpus)
    titles, sentences, bodies = (list(column) for column in zip(*notes))
    every_sentence = vault_sentences(bodies)
    speed_texts = [every_sentence[i % len(every_sentence)] for i in range(args.texts)]
    print(f"corpus: {args.corpus} ({len(notes)} notes with a title and a first sentence); "
          f"speed: {args.texts} texts ({len(every_sentence)} distinct) of "
          f"{np.mean([len(t) for t in speed_texts]):.0f} characters on average; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")

    # Not the vault: 30 hand-written pairs sharing no content word, what hashed terms cannot match (recall_devsets).
    from recall_devsets import PARAPHRASES

    queries, answers = (list(column) for column in zip(*PARAPHRASES))
    embedders = collect_embedders(get_plugin_manager(), EmbedderSettings(model_cache=args.model_cache, offline=True))
    results: dict[str, dict[str, float]] = {}
    if LEXICAL_EMBEDDER in embedders:
        embedders[LEXICAL_TITLED] = _TitleField(embedders[LEXICAL_EMBEDDER])
    for embedder_id in (LEXICAL_EMBEDDER, LEXICAL_TITLED, STATIC_MEAN_EMBEDDER, STATIC_EMBEDDER, HYBRID_EMBEDDER,
                        TITLED_HYBRID_EMBEDDER, MINILM):
        embedder = embedders.get(embedder_id)
        why = "not registered" if embedder is None else unavailable(embedder)
        if why is None:
            try:
                docs = embedder.embed(bodies)
            except XerjError as exc:
                why = exc.reason
        if why is not None:
            print(f"{embedder_id:42s} skipped: {why}")
            continue
        by_title = mrr_at(docs, embedder.embed(titles))
        by_sentence = mrr_at(docs, embedder.embed(sentences))
        paraphrase = mrr_at(embedder.embed(answers), embedder.embed(queries))
        rate, cpu_rate = texts_per_second(embedder, speed_texts)
        results[embedder_id] = {"title": by_title, "sentence": by_sentence, "mrr": (by_title + by_sentence) / 2,
                                "rate": rate}
        print(f"{embedder_id:42s} MRR@10 title {by_title:.3f}  first sentence {by_sentence:.3f}  "
              f"both {(by_title + by_sentence) / 2:.3f}   {rate:>10,.0f} texts/s ({cpu_rate:,.0f} per CPU second)"
              f"   paraphrase pairs {paraphrase:.3f}")

    base = results.get(LEXICAL_EMBEDDER)
    if base is None:
        return
    for embedder_id, found in results.items():
        if embedder_id == LEXICAL_EMBEDDER:
            continue
        print(f"{embedder_id} / lexical: MRR@10 x{found['mrr'] / base['mrr']:.2f} "
              f"(title x{found['title'] / base['title']:.2f}, first sentence x{found['sentence'] / base['sentence']:.2f}), "
              f"speed x{found['rate'] / base['rate']:.2f}")
    for embedder_id in (STATIC_EMBEDDER, HYBRID_EMBEDDER, TITLED_HYBRID_EMBEDDER):
        found = results.get(embedder_id)
        if found is None:
            continue
        print(f"targets for {embedder_id}: MRR@10 >= 1.20x lexical: "
              f"{'met' if found['mrr'] >= 1.2 * base['mrr'] else 'MISSED'} (x{found['mrr'] / base['mrr']:.2f}); "
              f">= 20,000 texts/s: {'met' if found['rate'] >= 20_000 else 'MISSED'} ({found['rate']:,.0f})")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
