"""``sharedterm``: two files that use the same distinctive words — shared vocabulary, not meaning.

The unit is the file (all its documents' text); edges join file cards. Terms
are :func:`xerj_core.text.tokenize` words of at least 3 characters holding a
letter (at most 40 characters), compared as exact strings: no stemming.

- A term found in more than 10% of the corpus's files is its everyday
  vocabulary and ignored; a term must also be in at least two files to be
  shared. So a corpus of ten files or fewer yields no ``shared_term`` edges.
- Two files become a candidate when they share terms from at least two word
  families; singular and plural (``trajectory``/``trajectories``,
  ``box``/``boxes``) are one family.
- Candidates are ranked by the summed rarity (``log(N/df)``, one term per
  family) of what they share, and accepted greedily while both files have
  fewer than 5 ``shared_term`` links; every refused candidate is counted as
  ``edges_capped``.

The edge goes from the file whose path sorts first to the other, and its
rationale (offset 0) names the shared terms rarest first:
``"<a> and <b> share N distinctive terms: t1, t2, …"`` (cut to 240 characters).

Executors: ``summarize`` (map, per file) yields the file's term set;
``combine`` counts document frequencies, builds an inverted index over the
distinctive terms only, scores candidate pairs through it and applies the
cap; ``detect`` (map, per file, with the state broadcast) emits the file's
accepted edges. No step compares every file with every other.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter, defaultdict
from typing import Iterable, Sequence

from xerj_core.autoindex.detect import Corpus, DetectorState, clip, make_draft
from xerj_core.hookspecs import hookimpl
from xerj_core.model import EdgeDraft, SourceDocument
from xerj_core.text import tokenize

MAX_SHARE_PERCENT = 10
MIN_FAMILIES = 2
MAX_LINKS = 5
MIN_TERM = 3
MAX_TERM = 40


def family(term: str) -> str:
    """The singular a term is counted under: ``trajectories`` → ``trajectory``, ``boxes`` → ``box``."""
    if len(term) > 4 and term.endswith("ies"):
        return term[:-3] + "y"
    if len(term) > 4 and term.endswith(("sses", "shes", "ches", "xes", "zes")):
        return term[:-2]
    if len(term) > 3 and term.endswith("s") and not term.endswith(("ss", "us", "is")):
        return term[:-1]
    return term


def file_terms(file_docs: Sequence[SourceDocument]) -> frozenset[str]:
    """The distinct eligible terms of one file."""
    words: set[str] = set()
    for doc in file_docs:
        if doc.text:
            words.update(tokenize(doc.text))
    return frozenset(
        w for w in words if MIN_TERM <= len(w) <= MAX_TERM and not w.isdigit() and any(c.isalpha() for c in w)
    )


class SharedtermDetector:
    name = "sharedterm"
    type = "shared_term"
    tag = "sharedterm@1"
    weight = 0.45
    confidence = 0.5

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, frozenset[str]] | None:
        if not file_docs:
            return None
        return (file_docs[0].ax_path, file_terms(file_docs))

    def combine(self, partials: Iterable[tuple[str, frozenset[str]] | None], corpus: Corpus) -> DetectorState:
        units = sorted(p for p in partials if p is not None)
        total = len(units)
        df: Counter[str] = Counter()
        for _, terms in units:
            df.update(terms)
        # df <= 10% of the files, in integers so no rounding decides a borderline term
        distinctive = [
            sorted(t for t in terms if df[t] >= 2 and df[t] * 100 <= total * MAX_SHARE_PERCENT) for _, terms in units
        ]
        postings: dict[str, list[int]] = defaultdict(list)
        for index, terms in enumerate(distinctive):
            for term in terms:
                postings[term].append(index)
        rarity = {term: math.log(total / df[term]) for term in postings}

        candidates: list[tuple[float, int, int, tuple[str, ...]]] = []
        for index, terms in enumerate(distinctive):
            overlap: Counter[int] = Counter()
            for term in terms:
                docs = postings[term]
                overlap.update(docs[bisect_right(docs, index) :])
            for other, count in overlap.items():
                if count < MIN_FAMILIES:
                    continue
                shared = set(terms).intersection(distinctive[other])
                best: dict[str, float] = {}
                for term in shared:
                    key = family(term)
                    best[key] = max(best.get(key, 0.0), rarity[term])
                if len(best) < MIN_FAMILIES:
                    continue
                ordered = tuple(sorted(shared, key=lambda t: (df[t], t)))
                # fsum is exact, so the score never depends on set iteration order (hash seed)
                candidates.append((-math.fsum(best.values()), index, other, ordered))
        candidates.sort()

        degree = [0] * total
        accepted: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
        capped = 0
        for _, a, b, terms in candidates:
            if degree[a] >= MAX_LINKS or degree[b] >= MAX_LINKS:
                capped += 1
                continue
            degree[a] += 1
            degree[b] += 1
            accepted[units[a][0]].append((units[b][0], terms))
        for links in accepted.values():
            links.sort()
        return DetectorState(data=dict(accepted), counters={"edges_capped": capped})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        if not file_docs or state is None or not state.data:
            return
        card = file_docs[0]
        for other, terms in state.data.get(card.ax_path, ()):
            dst = corpus.card(other)
            if dst is None or dst.doc_id == card.doc_id:
                continue
            rationale = f"{card.ax_path} and {other} share {len(terms)} distinctive terms: {', '.join(terms)}"
            yield make_draft(self, card, dst, quote=clip(rationale), offset=0)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(SharedtermDetector())
