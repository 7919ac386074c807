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
- Candidates are found, not enumerated: each file looks up the other files
  holding its 32 rarest distinctive terms (through posting lists no longer
  than ``max(16, sqrt(N))``, so a term shared by many files seeds nothing on
  its own), and scores exactly the (at most 16) files holding two or more of
  them, those met most often first. A scored pair is judged and named on *all*
  its common distinctive terms, however frequent. Pairs whose common words are
  all middling are not found: they are the weakest evidence, and leaving them
  out keeps the search linear in the size of the corpus.
- Candidates are ranked by the summed rarity (``log(N/df)``) of the terms
  they share, and accepted greedily while both files have
  fewer than 5 ``shared_term`` links; every refused candidate is counted as
  ``edges_capped``.

The edge goes from the file whose path sorts first to the other, and its
rationale (offset 0) names the shared terms rarest first:
``"<a> and <b> share N distinctive terms: t1, t2, …"`` (cut to 240 characters).

Executors: ``summarize`` (map, per file) yields the file's term set;
``combine`` counts document frequencies, builds an inverted index over the
rare distinctive terms only, scores candidate pairs found through it and
applies the cap; ``detect`` (map, per file, with the state broadcast) emits
the file's accepted edges. No step compares every file with every other.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft
from xerj_core.text import tokenize

MAX_SHARE_PERCENT = 10
MIN_FAMILIES = 2
MAX_LINKS = 5
MIN_TERM = 3
MAX_TERM = 40
# candidate search (see the module docstring): how many of a file's rarest terms seed it, the longest
# posting list a seed may have (at least this, else the square root of the corpus size), and how many
# of the files found through them are scored exactly
SIGNATURE_TERMS = 32
SEED_MIN_DF = 16
CANDIDATES_PER_FILE = 16
_LETTER = re.compile(r"[^\W\d_]")


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
    has_letter = _LETTER.search
    return frozenset(w for w in words if MIN_TERM <= len(w) <= MAX_TERM and has_letter(w))


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
        allowed = {t for t, n in df.items() if n >= 2 and n * 100 <= total * MAX_SHARE_PERCENT}
        distinctive = [terms & allowed for _, terms in units]
        seed_df = max(SEED_MIN_DF, math.isqrt(total))
        seedable = {t for t in allowed if df[t] <= seed_df}
        postings: dict[str, list[int]] = defaultdict(list)
        for index, terms in enumerate(distinctive):
            for term in terms & seedable:
                postings[term].append(index)
        rarity = {term: math.log(total / df[term]) for term in allowed}
        families = {term: family(term) for term in allowed}
        # one global order, rarest first, so per-file sorts use a C-level key
        rank = {term: i for i, term in enumerate(sorted(allowed, key=lambda t: (df[t], t)))}.__getitem__

        pairs: dict[tuple[int, int], tuple[float, frozenset[str]]] = {}
        for index, terms in enumerate(distinctive):
            # seed candidates from the file's rarest terms only, through short posting lists
            seeds = sorted(terms & seedable, key=rank)[:SIGNATURE_TERMS]
            hits: Counter[int] = Counter()
            for term in seeds:
                hits.update(postings[term])
            hits.pop(index, None)
            ranked = sorted((-count, other) for other, count in hits.items() if count >= MIN_FAMILIES)
            for _, other in ranked[:CANDIDATES_PER_FILE]:
                key = (index, other) if index < other else (other, index)
                if key in pairs:
                    continue
                shared = terms & distinctive[other]
                if len(shared) < MIN_FAMILIES or len(set(map(families.__getitem__, shared))) < MIN_FAMILIES:
                    continue
                # fsum is exact, so the score never depends on set iteration order (hash seed)
                pairs[key] = (math.fsum(map(rarity.__getitem__, shared)), shared)
        candidates = sorted(pairs.items(), key=lambda item: (-item[1][0], item[0]))

        degree = [0] * total
        accepted: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
        capped = 0
        for (a, b), (_, shared_terms) in candidates:
            if degree[a] >= MAX_LINKS or degree[b] >= MAX_LINKS:
                capped += 1
                continue
            degree[a] += 1
            degree[b] += 1
            accepted[units[a][0]].append((units[b][0], tuple(sorted(shared_terms, key=rank))))
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
