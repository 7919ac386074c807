"""How the hybrid embedder's constants were chosen: recall on sets other than the Foam vault, over a grid around them.

Run: python tests/bench/tune_hybrid.py [--top N] [--titles-only]   (252 grid points: a few minutes, 7 at load 8)

The sets are :mod:`recall_devsets`' (installed READMEs' sections, installed
docstrings, hand-written paraphrase pairs); the Foam vault, which
``bench_embedders.py`` reports on, is never read here. Each lexical
configuration (buckets, trigram weight, word-pair weight) is embedded by the
real :mod:`xerj_embedders.hybrid` code with its constants patched, its lexical
half alone; the dense half is the static embedder's; a dense share s then
scores ``s * cos_dense + (1 - s) * cos_lexical``, which is exactly the
hybrid's cosine for texts that have both halves. The shipped constants are
the middle of the plateau of the mean over the three sets (the module
docstring of ``xerj_embedders.hybrid`` says which); this prints the grid so
that choice can be checked.

The titled hybrid's title field is swept first (``TITLE_SHARE`` and
``TITLE_WORDS``, the real ``with_title_field`` over the shipped hybrid),
beside the lexical baseline given the same field, so what the field adds
without the model shows too.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from recall_devsets import devsets, evaluate  # noqa: E402
from xerj_embedders import hybrid  # noqa: E402
from xerj_embedders.lexical import LexicalFeatureHashEmbedder  # noqa: E402
from xerj_embedders.static import StaticEmbedder  # noqa: E402

SHARES = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55)
BUCKETS = (512, 1024, 2048)
TRIGRAMS = (0.1, 0.15, 0.2, 0.3)
PAIRS = (0.0, 0.5, 1.0)
TITLE_SHARES = (0.0, 0.05, 0.1, 0.2, 0.3)
TITLE_WORDS = (8, 16, 32)


def _patched(buckets: int, trigram: float, pair: float) -> dict[str, object]:
    """Set the hybrid module's constants (returning the old ones) and forget the words it has learned."""
    old = {name: getattr(hybrid, name) for name in ("LEXICAL_DIMS", "DIMS", "CHAR_WEIGHT", "PAIR_WEIGHT",
                                                    "DENSE_SHARE", "_lexicon")}
    new = {"LEXICAL_DIMS": buckets, "DIMS": 256 + buckets, "CHAR_WEIGHT": trigram, "PAIR_WEIGHT": pair,
           "DENSE_SHARE": 0.0, "_lexicon": hybrid._Lexicon()}
    for name, value in new.items():
        setattr(hybrid, name, value)
    return old


def sweep_title_field(sets: dict, show) -> None:
    """The titled hybrid over title shares and title lengths, and the lexical baseline with the shipped field."""
    lexical = LexicalFeatureHashEmbedder()
    show(f"lexical-feature-hash + title field {hybrid.TITLE_SHARE}",
         evaluate(lambda texts: hybrid.with_title_field(lexical.embed, texts), sets))
    shipped_words = hybrid.TITLE_WORDS
    try:
        for words, share in itertools.product(TITLE_WORDS, TITLE_SHARES):
            hybrid.TITLE_WORDS = words
            mark = " *" if (words, share) == (shipped_words, hybrid.TITLE_SHARE) else ""
            show(f"title field: share {share} words {words}{mark}",
                 evaluate(lambda texts, s=share: hybrid.with_title_field(hybrid.hybrid_rows, texts, s), sets))
    finally:
        hybrid.TITLE_WORDS = shipped_words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="rows of the grid to print, best mean first")
    parser.add_argument("--titles-only", action="store_true", help="sweep the title field only, not the grid")
    args = parser.parse_args()
    sets = devsets()
    print("sets: " + ", ".join(f"{name} {sum(map(len, pools))} entries in {len(pools)} pools"
                               for name, pools in sets.items()))

    def show(label: str, figures: dict[str, float]) -> None:
        print(f"{label:44s} " + "  ".join(f"{k} {v:.3f}" for k, v in figures.items())
              + f"  mean {np.mean(list(figures.values())):.3f}")

    show("lexical-feature-hash", evaluate(LexicalFeatureHashEmbedder().embed, sets))
    static = StaticEmbedder()
    show("wordllama-l2-supercat-256-sif", evaluate(static.embed, sets))
    show(f"{hybrid.HYBRID_EMBEDDER} (shipped)", evaluate(hybrid.HybridEmbedder().embed, sets))
    sweep_title_field(sets, show)
    if args.titles_only:
        return

    # Cosines per pool, dense from the static model once, lexical per configuration; shares mix them.
    dense_cache: dict[tuple[str, ...], np.ndarray] = {}

    def dense(texts: list[str]) -> np.ndarray:
        key = tuple(texts)
        if key not in dense_cache:
            dense_cache[key] = static.embed(texts)
        return dense_cache[key]

    rows = []
    for buckets, trigram, pair in itertools.product(BUCKETS, TRIGRAMS, PAIRS):
        old = _patched(buckets, trigram, pair)
        try:
            lexical_cache: dict[tuple[str, ...], np.ndarray] = {}

            def lexical(texts: list[str]) -> np.ndarray:
                key = tuple(texts)
                if key not in lexical_cache:
                    lexical_cache[key] = hybrid.HybridEmbedder().embed(texts)[:, 256:]
                return lexical_cache[key]

            for share in SHARES:
                def mixed(texts: list[str], share: float = share) -> np.ndarray:
                    return np.hstack([np.sqrt(share) * dense(texts), np.sqrt(1 - share) * lexical(texts)])

                figures = evaluate(mixed, sets)
                rows.append((float(np.mean(list(figures.values()))), buckets, trigram, pair, share, figures))
        finally:
            for name, value in old.items():
                setattr(hybrid, name, value)
    rows.sort(key=lambda row: -row[0])
    print(f"grid ({len(rows)} points), best mean first:")
    for mean, buckets, trigram, pair, share, figures in rows[: args.top]:
        shipped = (buckets, trigram, pair, share) == (hybrid.LEXICAL_DIMS, hybrid.CHAR_WEIGHT, hybrid.PAIR_WEIGHT,
                                                      hybrid.DENSE_SHARE)
        show(f"buckets {buckets} trigram {trigram} pair {pair} share {share}{' *' if shipped else ''}", figures)


if __name__ == "__main__":
    main()
