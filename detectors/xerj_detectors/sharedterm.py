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
- Candidates are found, not enumerated: each file's signature is its 32
  rarest distinctive terms, an inverted index maps each signature term to
  every file holding it, and each file scores exactly the (at most 16) files
  meeting it on two or more of its signature terms, those met most often first.
  Every distinctive term can seed (a term in 17 of 200 files finds its
  files), and a file's work is bounded by its own 32 posting lists, which are
  short because they are its rarest. A scored pair is judged and named on
  *all* its common distinctive terms, however frequent.
- Candidates are ranked by the summed rarity (``log(N/df)``) of the terms
  they share, and accepted greedily while both files have
  fewer than 5 ``shared_term`` links; every refused candidate is counted as
  ``edges_capped``, and so is every pair meeting on two signature terms that
  the 16-per-file limit left unscored from both ends: a candidate is linked or
  counted, never silently dropped.

The edge goes from the file whose path sorts first to the other, and its
rationale (offset 0) names the shared terms rarest first:
``"<a> and <b> share N distinctive terms: t1, t2, …"`` (cut to 240 characters).

Executors: ``summarize`` (map, per file) yields the file's term set;
``combine`` counts document frequencies, builds the inverted index over the
signature terms, scores candidate pairs found through it and applies the cap; ``detect`` (map, per file, with the state broadcast) emits
the file's accepted edges. No step compares every file with every other.
"""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict
from itertools import chain, count, repeat
from typing import Collection, Iterable, Sequence

import numpy as np

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft
from xerj_core.text import counted_words, distinct_long_words

MAX_SHARE_PERCENT = 10
MIN_FAMILIES = 2
MAX_LINKS = 5
MIN_TERM = 3
MAX_TERM = 40
# candidate search (see the module docstring): how many of a file's rarest terms seed it, and how many
# of the files found through them are scored exactly
SIGNATURE_TERMS = 32
CANDIDATES_PER_FILE = 16
_LETTER = re.compile(r"[^\W\d_]")
# File and term numbers in combine's arrays: a corpus has fewer than 2**31 of each, and the arrays over every
# file's terms are most of what combine holds at its peak, which the run's memory is measured by
_IDS = np.int32


def family(term: str) -> str:
    """The singular a term is counted under: ``trajectories`` → ``trajectory``, ``boxes`` → ``box``."""
    if term[-1:] != "s":  # every plural below ends so (and most terms do not)
        return term
    if len(term) > 4 and term.endswith("ies"):
        return term[:-3] + "y"
    if len(term) > 4 and term.endswith(("sses", "shes", "ches", "xes", "zes")):
        return term[:-2]
    if len(term) > 3 and term.endswith("s") and not term.endswith(("ss", "us", "is")):
        return term[:-1]
    return term


# Every word a process has judged, by verdict: a vocabulary's words repeat across files, so most of a file's words
# are judged by one set operation. Bounded: past the limit the memo starts again.
_ELIGIBLE: set[str] = set()
_INELIGIBLE: set[str] = set()
_MEMO_LIMIT = 1 << 20


def _eligible(word: str) -> bool:
    return MIN_TERM <= len(word) <= MAX_TERM and _LETTER.search(word) is not None


def file_terms(file_docs: Sequence[SourceDocument]) -> frozenset[str]:
    """The distinct eligible terms of one file."""
    return frozenset(_file_terms(file_docs)[0])


def _file_terms(file_docs: Sequence[SourceDocument]) -> tuple[Collection[str], bool]:
    """:func:`file_terms` as a collection of distinct terms, and whether they are interned already."""
    texts = [doc.text for doc in file_docs if doc.text]
    counted = list(map(counted_words, texts))
    if texts and None not in counted:
        return _counted_file_terms(counted), True  # type: ignore[arg-type]
    # one tokenizer pass over the file (a newline separates the documents' texts as their ends did) that finds
    # only its words of at least MIN_TERM characters: the same runs ``tokenize`` finds, without the short ones
    words = distinct_long_words("\n".join(texts), MIN_TERM)
    # the memo only ever holds true verdicts, so a concurrent run clearing it costs work, never a word
    known = words & _ELIGIBLE
    unknown = words - known - _INELIGIBLE
    if not unknown:
        return known, False
    good = {word for word in unknown if _eligible(word)}
    if len(_ELIGIBLE) + len(_INELIGIBLE) > _MEMO_LIMIT:
        _ELIGIBLE.clear()
        _INELIGIBLE.clear()
    _ELIGIBLE.update(good)
    _INELIGIBLE.update(unknown - good)
    return known | good, False


# The same verdicts on words as UTF-8, as the store's counts hold them: each word judged, to its string when it
# is eligible (interned, as summarize hands terms on) and to None when it is not.
_VERDICT_UTF8: dict[bytes, str | None] = {}
_UNJUDGED = object()


def _counted_file_terms(counted: Sequence[Collection[bytes]]) -> set[str]:
    """:func:`file_terms` of a file from each text's distinct words as the parse counted them for the store (no
    word spans two texts, so the file's words are their union): judged as UTF-8, so a word seen before is
    neither decoded nor judged again, and its verdict is one lookup (a distinct eligible word has a string of its
    own, so the set of the words' verdicts is the file's terms)."""
    if len(_VERDICT_UTF8) > _MEMO_LIMIT:
        _VERDICT_UTF8.clear()
    words = set().union(*counted)
    found = set(map(_VERDICT_UTF8.get, words, repeat(_UNJUDGED)))
    if _UNJUDGED in found:
        found.discard(_UNJUDGED)
        for word in words.difference(_VERDICT_UTF8):
            text = word.decode()
            found.add(verdict := sys.intern(text) if _eligible(text) else None)
            _VERDICT_UTF8[word] = verdict
    found.discard(None)
    return found  # type: ignore[return-value]


def _gather(values: np.ndarray, starts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``values[starts[k]:starts[k + 1]]`` for each of ``keys``, concatenated (one gather, no Python loop)."""
    lo = starts[keys]
    counts = starts[keys + 1] - lo
    before = np.cumsum(counts) - counts
    return values[np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(lo - before, counts)]


def _distinctive(units: Sequence[tuple[str, Collection[str]]], total: int) -> tuple[list[str], list[int],
                                                                                   list[np.ndarray]]:
    """The corpus's distinctive terms (in at least two of its ``total`` files, in at most MAX_SHARE_PERCENT of
    them), rarest first then by spelling; how many files hold each; and each file's distinctive terms as their
    sorted numbers in that list.

    One dict pass over every term of every file numbers them (a term by where it first occurs): the terms'
    strings are scattered in memory, so each pass over them is mostly cache misses, and counting then looking
    up each one (two passes) was a quarter of combining 5,000 files of real code. The rest is numpy over those
    numbers."""
    if not total:
        return [], [], []
    every = list(chain.from_iterable(terms for _, terms in units))
    sizes = np.fromiter((len(terms) for _, terms in units), np.int64, total)
    found = np.fromiter(map({}.setdefault, every, count()), np.int64, len(every))
    df = np.bincount(found, minlength=len(every))
    # df <= 10% of the files, in integers so no rounding decides a borderline term
    where = np.flatnonzero((df >= 2) & (df * 100 <= total * MAX_SHARE_PERCENT))
    spelled = sorted(range(len(where)), key=list(map(every.__getitem__, where.tolist())).__getitem__)
    where = where[spelled]
    where = where[np.argsort(df[where], kind="stable")]  # rarest first, ties by spelling
    names = list(map(every.__getitem__, where.tolist()))
    held_by = df[where].tolist()
    number = np.full(len(every), -1, np.int64)
    number[where] = np.arange(len(where))
    numbers = number[found]
    del every, found, df, number
    # each file's numbers sorted: one sort of (file, number) keys, the files' numbers staying apart
    keep = numbers >= 0
    file_of = np.repeat(np.arange(total, dtype=np.int64), sizes)[keep]
    key = np.sort(file_of * max(len(names), 1) + numbers[keep])
    terms = (key % max(len(names), 1)).astype(_IDS)
    return names, held_by, np.split(terms, np.cumsum(np.bincount(file_of, minlength=total))[:-1].tolist())


class SharedtermDetector:
    name = "sharedterm"
    type = "shared_term"
    tag = "sharedterm@1"
    weight = 0.45
    confidence = 0.5

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, tuple[str, ...]] | None:
        if not file_docs:
            return None
        # a tuple of interned strings, in no particular order (combine numbers and sorts them): a whole corpus
        # of these is held until combine, and a vocabulary's words repeat across files
        terms, interned = _file_terms(file_docs)
        return (file_docs[0].ax_path, tuple(terms) if interned else tuple(map(sys.intern, terms)))

    def combine(self, partials: Iterable[tuple[str, Iterable[str]] | None], corpus: Corpus) -> DetectorState:
        units = sorted((p for p in partials if p is not None), key=lambda unit: unit[0])
        total = len(units)
        # term numbers in one global order, rarest first: a file's distinctive terms are a sorted int array
        # (compact, and its first SIGNATURE_TERMS entries are its signature)
        names, held_by, distinctive = _distinctive(units, total)
        rarity = np.array([math.log(total / df) for df in held_by], np.float64)
        family_of: dict[str, int] = {}
        families = np.array([family_of.setdefault(family(term), len(family_of)) for term in names], np.int64)
        family_count = max(len(family_of), 1)
        signatures = [terms[:SIGNATURE_TERMS] for terms in distinctive]
        # the inverted index over the signature terms: each to every file holding it (df >= 2, so never alone)
        seeding = np.zeros(len(names), bool)
        for signature in signatures:
            seeding[signature] = True
        file_of = np.repeat(np.arange(total, dtype=_IDS), [len(terms) for terms in distinctive])
        term_of = np.concatenate(distinctive) if distinctive else np.empty(0, _IDS)
        keep = seeding[term_of]
        file_of, term_of = file_of[keep], term_of[keep]
        order = np.argsort(term_of, kind="stable")  # each term's files stay in file order
        file_of, term_of = file_of[order], term_of[order]
        starts = np.searchsorted(term_of, np.arange(len(names) + 1))

        # the files holding each signature term in their signature, the other way round: how many of file j's
        # signature terms file i holds, for every j at once, is then one bincount over i's distinctive terms
        sig_file = np.repeat(np.arange(total, dtype=_IDS), [len(s) for s in signatures])
        sig_term = np.concatenate(signatures) if signatures else np.empty(0, _IDS)
        order = np.argsort(sig_term, kind="stable")
        sig_file, sig_term = sig_file[order], sig_term[order]
        sig_starts = np.searchsorted(sig_term, np.arange(len(names) + 1))
        del order

        # a pair of files (a < b) is the number a * total + b: one array entry per scored pair, not an object
        pair_numbers: list[int] = []
        pair_scores: list[float] = []
        # each file's scored files (its first CANDIDATES_PER_FILE, -1 past them): a pair was examined when
        # either file has the other here
        scored = np.full((total, CANDIDATES_PER_FILE), -1, _IDS)
        # pairs meeting on two signature terms from either end that neither end scored, counted once: a pair
        # (j, i), j < i, is settled when i is reached, since both files' scored lists are known then
        unscored = 0
        times_scored = np.zeros(total, np.int64)  # how many earlier files have each file in their scored list
        mine = np.zeros(len(names), bool)  # the current file's terms, marked (and cleared after use)
        for index, terms in enumerate(distinctive):
            signature = signatures[index]
            met_by = np.bincount(_gather(sig_file, sig_starts, terms), minlength=total)
            if len(signature) >= MIN_FAMILIES:
                hits = np.bincount(_gather(file_of, starts, signature), minlength=total)
                hits[index] = 0
                others = np.flatnonzero(hits >= MIN_FAMILIES)
                ranked = others[np.argsort(-hits[others], kind="stable")]  # most hits first, then file order
                best = ranked[:CANDIDATES_PER_FILE]
                scored[index, :len(best)] = best
            else:
                hits = np.zeros(total, np.int64)
                best = ranked = np.empty(0, np.int64)
            # the earlier files meeting this one (from either end) that neither end scored, counted without
            # listing them: every file of ``best`` meets it, and so does every earlier file that scored it (its
            # hits on this file are this file's ``met_by`` on it), which ``times_scored`` counts
            earlier = int(np.count_nonzero((hits[:index] >= MIN_FAMILIES) | (met_by[:index] >= MIN_FAMILIES)))
            before = best < index
            scored_me = before & (scored[best] == index).any(axis=1)
            unscored += earlier - int(np.count_nonzero(before)) - int(times_scored[index]) \
                + int(np.count_nonzero(scored_me))
            times_scored[best[~before]] += 1
            # a pair examined from the other end is not scored again
            fresh = best[~scored_me].tolist()
            if not fresh:
                continue
            # each fresh file's terms that this file holds, in one pass over them all: their sorted terms, masked,
            # stay grouped by file in ``fresh`` order
            theirs = [distinctive[other] for other in fresh]
            mine[terms] = True
            joined = np.concatenate(theirs)
            common = mine[joined]
            mine[terms] = False
            shared = joined[common]
            # how many each fresh file shares, summed over its stretch of the mask (every file's list is
            # non-empty: it met this one on signature terms); the owner of each shared term then comes from these
            # few counts, not from an owner array as long as every fresh file's terms
            counts = np.add.reduceat(common, np.cumsum([0] + [len(t) for t in theirs[:-1]]), dtype=np.int64)
            owner = np.repeat(np.arange(len(fresh)), counts)
            # how many word families each fresh file shares with this one: its distinct (file, family) pairs
            pairs = np.sort(owner * family_count + families[shared])
            # distinct by hand: numpy's unique imports numpy.ma on first use (about 10 ms in the companion's
            # combine, on a run's critical path)
            kinds = np.bincount(pairs[np.diff(pairs, prepend=-1) != 0] // family_count, minlength=len(fresh))
            ends = np.cumsum(counts).tolist()
            rarities = rarity[shared].tolist()
            for k in np.flatnonzero((counts >= MIN_FAMILIES) & (kinds >= MIN_FAMILIES)).tolist():
                other = fresh[k]
                # fsum is exact, so the score never depends on the order terms are summed in
                pair_numbers.append(min(index, other) * total + max(index, other))
                pair_scores.append(math.fsum(rarities[ends[k] - counts[k]:ends[k]]))
        numbers = np.array(pair_numbers, np.int64)
        scores = np.array(pair_scores, np.float64)
        del pair_numbers, pair_scores, scored, sig_file, sig_term
        # best score first, then by pair (a, b): a pair number orders as (a, b) does
        candidates = numbers[np.lexsort((numbers, -scores))].tolist()
        del numbers, scores

        degree = [0] * total
        accepted: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
        # pairs the per-file limit left unscored from both ends are refused candidates too
        capped = unscored
        for number in candidates:
            a, b = divmod(number, total)
            if degree[a] >= MAX_LINKS or degree[b] >= MAX_LINKS:
                capped += 1
                continue
            degree[a] += 1
            degree[b] += 1
            shared_terms = np.intersect1d(distinctive[a], distinctive[b], assume_unique=True)
            accepted[units[a][0]].append((units[b][0], tuple(map(names.__getitem__, shared_terms.tolist()))))
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
