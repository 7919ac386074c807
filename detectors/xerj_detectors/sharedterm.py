"""``sharedterm``: two files that use the same distinctive words — shared vocabulary, not meaning.

The unit is the file (all its documents' text); edges join file cards. Terms
are :func:`xerj_core.text.tokenize` words of at least 3 characters holding a
letter (at most 40 characters), compared as exact strings: no stemming. A run
of CJK letters is cut into pairs of letters (``text.CJK_LETTERS``), and a run
of Thai, Lao, Khmer, Myanmar or Tai letters into pairs of letters with their
marks (``text.SEA_LETTERS``), which are no terms: such text takes part by its
words in other scripts only (a pair is no word, and one word of four letters
would be three pairs, three "families" on its own).

- A project's manifests and configs (``Cargo.toml``, ``package.json``, a
  tsconfig, an Obsidian base: :data:`MANIFESTS`) are no units: their words are
  their schema's keys.
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

Executors: ``summarize`` (map, per file) yields the file's words (NUL-joined bytes);
``combine`` counts document frequencies, builds the inverted index over the
signature terms, scores candidate pairs found through it and applies the cap; ``detect`` (map, per file, with the state broadcast) emits
the file's accepted edges. No step compares every file with every other.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from itertools import compress
from typing import Iterable, Iterator, Sequence

import numpy as np

from xerj_core import termrank
from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, make_draft
from xerj_core.text import ascii_joined_words, counted_joined, distinct_long_words, paired_letters

try:
    from xerj_detectors._meetings import common as _compiled_common
    from xerj_detectors._meetings import meetings as _compiled_meetings
except ImportError:  # built without a C compiler: numpy answers
    if os.environ.get("XERJ_REQUIRE_MEETINGS_KERNEL") == "1":
        raise
    _compiled_meetings = _compiled_common = None

# Whether the candidate search and the shared terms run compiled (``_meetings.c``): its work follows the posting
# lists' length where numpy's dense blocks grow with the square of the corpus (combine on 10k generated notes
# 0.58 s against 0.98 s, on 40k 5.4 s against 11.3 s). A test or a benchmark may flip it;
# ``XERJ_MEETINGS_KERNEL=0`` switches it off, ``XERJ_REQUIRE_MEETINGS_KERNEL=1`` makes its absence an error at
# import (``scripts/test`` sets it).
COMPILED = _compiled_meetings is not None and os.environ.get("XERJ_MEETINGS_KERNEL", "1") != "0"

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


# A project's manifests and configs: their words are their schema's keys (dependencies, scripts, devDependencies,
# edition, homepage, compilerOptions), so any two of them "shared" ten distinctive terms. In tRPC's repository
# 212 of its 2,622 shared_term edges joined its 52 package.json files to each other and to code, and in
# create-t3-turbo 50 of 205, each taking one of a file's 5 links. What they name is linked by cratecite and imports.
MANIFESTS = frozenset({"Cargo.toml", "go.mod", "package.json", "composer.json", "pubspec.yaml"})
MANIFEST_LANGUAGES = frozenset({"tsconfig", "obsidian-base"})


def _manifest(card: SourceDocument) -> bool:
    return card.format == "code" and (card.ax_path.rpartition("/")[2] in MANIFESTS
                                      or card.fields.get("language") in MANIFEST_LANGUAGES)


def _eligible(word: str) -> bool:
    # a CJK pair is shorter than MIN_TERM; a pair of Thai letters with their marks may not be
    return MIN_TERM <= len(word) <= MAX_TERM and _LETTER.search(word) is not None and not paired_letters(word)


# A word of MIN_TERM to MAX_TERM characters has MIN_TERM to 4 * MAX_TERM bytes of UTF-8: what a file's summary keeps
# before combine judges each distinct word of the corpus once.
_SHORTEST_BYTES, _LONGEST_BYTES = MIN_TERM, 4 * MAX_TERM


def file_terms(file_docs: Sequence[SourceDocument]) -> frozenset[str]:
    """The distinct eligible terms of one file."""
    words = _file_words(file_docs)
    return frozenset(filter(_eligible, words.decode().split("\0"))) if words else frozenset()


def _file_words(file_docs: Sequence[SourceDocument]) -> bytes:
    """The distinct words of one file that may be terms (by their UTF-8 length), NUL-joined, in no particular
    order: one bytes object, which a corpus of them holds compactly until combine and pickles at memory speed.

    When the parse counted the file's texts for the store (``text.counted_joined``), the union is taken over
    those words as they were joined for it, with no object per word (``termrank.distinct_joined``): the words'
    objects, unioned and judged one by one, were about a sixth of a parse process's time on real code."""
    texts = [doc.text for doc in file_docs if doc.text]
    counted = list(map(counted_joined, texts))
    if None in counted:
        # one pass over the file (a newline separates the documents' texts as their ends did): the compiled word
        # count's distinct words of ASCII text, else a regex that finds only the words of at least MIN_TERM
        # characters; either way the runs ``tokenize`` finds
        text = "\n".join(texts)
        joined = ascii_joined_words(text, _LONGEST_BYTES)
        if joined is None:
            joined = "\0".join(distinct_long_words(text, MIN_TERM)).encode()
    else:
        joined = b"\0".join(filter(None, counted))  # type: ignore[arg-type]
    return termrank.distinct_joined(joined, _SHORTEST_BYTES, _LONGEST_BYTES)


def _gather(values: np.ndarray, starts: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values[starts[k]:starts[k + 1]]`` for each of ``keys``, concatenated (one gather, no Python loop), and
    how many values each key gave."""
    lo = starts[keys]
    counts = starts[keys + 1] - lo
    before = np.cumsum(counts) - counts
    return values[np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(lo - before, counts)], counts


def _inverted(file_of: np.ndarray, terms: np.ndarray, keep: np.ndarray, width: int) -> tuple[np.ndarray,
                                                                                               np.ndarray]:
    """The files of the kept (file, term) entries grouped by term, each term's in file order, and where each
    term's files start (``width + 1`` offsets)."""
    term_of, files = terms[keep], file_of[keep]
    # one counting sort by term in C (termrank.group, the files as its rows): a stable argsort held an int64 order
    # and two gathers of every entry, about 76 MB on 22k files of code, where this holds the files once more
    found = termrank.group(term_of, files, None, _ONE_PART, width) if width else None
    if found is not None:
        groups, holders, _tfs, bounds = found
        starts = np.zeros(width + 1, np.int64)
        starts[groups + 1] = np.diff(bounds)
        return holders, np.cumsum(starts, out=starts)
    order = np.argsort(term_of, kind="stable")
    return files[order], np.searchsorted(term_of[order], np.arange(width + 1))


_ONE_PART = np.zeros(1, np.int64)  # termrank.group's parts: every file's row is at or past row 0


def _distinctive(units: Sequence[tuple[str, bytes]], total: int) -> tuple[list[str], list[int], np.ndarray,
                                                                       np.ndarray]:
    """The corpus's distinctive terms (eligible words in at least two of its ``total`` files, in at most
    MAX_SHARE_PERCENT of them), rarest first then by spelling; how many files hold each; and every file's
    distinctive terms as their numbers in that list, sorted within each file and laid end to end in file order,
    with where each file's start (``total + 1`` offsets).

    Every file's words (each listed once per file) are ranked in one pass over their joined bytes
    (``termrank.rank_joined_packed``): each distinct word of the corpus is then one number, decoded and judged
    once, and a word's rank counted over the files is how many files hold it. The rest is numpy over those
    numbers."""
    if not total:
        return [], [], np.empty(0, _IDS), np.zeros(1, np.int64)
    sizes = np.fromiter((blob.count(b"\0") + 1 if blob else 0 for _, blob in units), np.int64, total)
    joined = b"\0".join(filter(None, (blob for _, blob in units)))
    if not joined:
        return [], [], np.empty(0, _IDS), np.zeros(total + 1, np.int64)
    # in bytes order, which is the words' code point order; spelled end to end, not as an object each (the
    # corpus's million words, freed at once after a few were read, left the companion's heap scattered)
    spelled, bounds, found = termrank.rank_joined_packed(joined)
    del joined
    df = np.bincount(found, minlength=len(bounds) - 1)
    # df <= 10% of the files, in integers so no rounding decides a borderline term; only the words that pass are
    # decoded and judged (most words of a corpus are in one file: 308k of 451k on 11k .py files)
    where = np.flatnonzero((df >= 2) & (df * 100 <= total * MAX_SHARE_PERCENT))
    words = list(map(bytes.decode, map(spelled.__getitem__, map(slice, bounds[where].tolist(),
                                                                    bounds[where + 1].tolist()))))
    del spelled, bounds
    eligible = np.fromiter(map(_eligible, words), bool, len(words))
    words = list(compress(words, eligible))
    where = where[eligible]
    order = np.argsort(df[where], kind="stable")  # rarest first, ties by spelling
    where = where[order]
    names = list(map(words.__getitem__, order.tolist()))
    held_by = df[where].tolist()
    # int32 throughout, but for the one sort key: on 22k files of code a corpus holds 5.5 million (file, word)
    # entries, and each int64 array of them was 44 MB of the companion's peak
    number = np.full(df.size, -1, _IDS)
    number[where] = np.arange(len(where), dtype=_IDS)
    numbers = number[found]
    del words, found, df, number
    # each file's numbers sorted: one sort of (file, number) keys, the files' numbers staying apart
    keep = numbers >= 0
    numbers = numbers[keep]
    file_of = np.repeat(np.arange(total, dtype=_IDS), sizes)[keep]
    del keep
    starts = np.zeros(total + 1, np.int64)
    np.cumsum(np.bincount(file_of, minlength=total), out=starts[1:])
    width = max(len(names), 1)
    key = file_of.astype(np.int64)
    del file_of
    key *= width
    key += numbers
    del numbers
    key.sort()
    key %= width
    return names, held_by, key.astype(_IDS), starts


# How many cells one block of combine's dense counting spans: files x files for the meeting counts (int64, so
# 2 MiB, about what a core's cache holds: the bincounts scatter into it; 8 MiB blocks took 1.4x as long on 10k
# notes), files x terms for the shared-term marks (bool, 4 MiB); and how many terms one run of pairs looks up in
# the marks (each lookup takes about 30 bytes of temporary arrays).
_BLOCK_CELLS = 1 << 18
_MARK_CELLS = 1 << 22
_LOOKUPS = 1 << 19


def _meetings(holders: np.ndarray, starts: np.ndarray, sig_holders: np.ndarray, sig_starts: np.ndarray,
              terms: np.ndarray, term_starts: np.ndarray, sig_ends: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, int]:
    """Which files each file scores, and how many pairs meet on two signature terms from either end (see
    :func:`_dense_meetings`): compiled where it was built, each file counted against only the files its posting
    lists name."""
    if COMPILED:
        scorers, scored, meeting = _compiled_meetings(
            holders, starts, sig_holders, sig_starts, terms, term_starts, sig_ends, MIN_FAMILIES,
            CANDIDATES_PER_FILE, SIGNATURE_TERMS)
        return np.frombuffer(scorers, np.int64), np.frombuffer(scored, np.int64), meeting
    return _dense_meetings(holders, starts, sig_holders, sig_starts, terms, term_starts, sig_ends)


def _dense_meetings(holders: np.ndarray, starts: np.ndarray, sig_holders: np.ndarray, sig_starts: np.ndarray,
                    terms: np.ndarray, term_starts: np.ndarray, sig_ends: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """Which files each file scores, and how many pairs meet on two signature terms from either end.

    ``hits[i, j]``, how many of file i's signature terms file j holds, and its transpose ``met[i, j]`` (how
    many of file j's signature terms file i holds) are counted a block of files at a time, one bincount each
    over the block's gathered posting lists: no Python step per file. Returns each scoring file and its scored
    file (a file's first CANDIDATES_PER_FILE by most hits, then file order) and the number of unordered pairs
    with ``hits >= MIN_FAMILIES`` one way or the other: ``|A| - |A and its transpose| / 2``, A the pairs
    strong from their first file, counted without listing them (millions on 10k generated notes)."""
    total = term_starts.size - 1
    block = max(1, _BLOCK_CELLS // max(total, 1))
    scorers, scored = [np.empty(0, np.int64)], [np.empty(0, np.int64)]  # an empty corpus has no block
    strong_pairs = mutual = 0
    for first in range(0, total, block):
        last = min(total, first + block)
        rows = last - first
        # the block's signature terms, each to every file holding it
        lo, hi = term_starts[first], term_starts[last]
        signature = np.flatnonzero(np.arange(lo, hi) < np.repeat(sig_ends[first:last], np.diff(
            term_starts[first:last + 1])))
        row_of = np.repeat(np.arange(rows, dtype=np.int64), np.diff(term_starts[first:last + 1]))
        found, counts = _gather(holders, starts, terms[lo + signature])
        hits = np.bincount(np.repeat(row_of[signature] * total, counts) + found,
                           minlength=rows * total).reshape(rows, total)
        hits[np.arange(rows), np.arange(first, last)] = 0  # a file does not meet itself
        # the block's distinctive terms, each to every file holding it in its signature
        found, counts = _gather(sig_holders, sig_starts, terms[lo:hi])
        met = np.bincount(np.repeat(row_of * total, counts) + found, minlength=rows * total).reshape(rows, total)
        strong = hits >= MIN_FAMILIES
        strong_pairs += int(np.count_nonzero(strong))
        mutual += int(np.count_nonzero(strong & (met >= MIN_FAMILIES)))
        # A row's scored files are its strongest: when CANDIDATES_PER_FILE of them meet it on more than
        # MIN_FAMILIES signature terms, the rest need not be listed (on 10k generated notes a row meets 550
        # files, 72 of them on three terms or more).
        listed = hits > MIN_FAMILIES
        narrow = np.count_nonzero(listed, axis=1) < CANDIDATES_PER_FILE
        listed[narrow] = strong[narrow]
        # row by row, each row's files in file order (a flat nonzero: a 2-D one is ten times slower)
        row, other = np.divmod(np.flatnonzero(listed), total)
        # most hits first within each row, ties in file order (a stable sort of the row and the hits' complement)
        order = np.argsort(row * (SIGNATURE_TERMS + 1) + (SIGNATURE_TERMS - hits[row, other]), kind="stable")
        row, other = row[order], other[order]
        keep = np.arange(row.size) - np.searchsorted(row, row) < CANDIDATES_PER_FILE
        scorers.append(row[keep] + first)
        scored.append(other[keep])
    return np.concatenate(scorers), np.concatenate(scored), strong_pairs - mutual // 2


def _common(pairs: np.ndarray, total: int, terms: np.ndarray, term_starts: np.ndarray, width: int,
            families: np.ndarray | None = None, family_count: int = 1
            ) -> Iterator[tuple[slice, np.ndarray, np.ndarray, np.ndarray | None]]:
    """The distinctive terms each pair (numbers ``a * total + b``, a < b, sorted) shares, a run of pairs at a
    time: ``(the run's place in pairs, the shared terms, where each pair's end in them, how many word families
    each pair's make)``, a pair's terms in term order, the families counted when ``families`` (each term's, of
    ``family_count``) is given. ``width`` is how many terms are numbered. A run shares at most _LOOKUPS terms
    (but for one pair holding more). Compiled where it was built (two sorted runs intersected per pair), else
    :func:`_dense_common`."""
    first_of, second_of = np.divmod(pairs, total)
    if COMPILED:
        sizes = np.diff(term_starts)
        room = np.cumsum(np.minimum(sizes[first_of], sizes[second_of]))  # the most terms the pairs so far share
        begin = 0
        while begin < pairs.size:
            done = room[begin - 1] if begin else 0
            stop = max(begin + 1, int(np.searchsorted(room, done + _LOOKUPS, "right")))
            shared, ends, kinds = _compiled_common(
                pairs[begin:stop], total, terms, term_starts,
                families if families is not None else np.empty(0, np.int64), family_count)
            yield (slice(begin, stop), np.frombuffer(shared, np.int32), np.frombuffer(ends, np.int64),
                   np.frombuffer(kinds, np.int64) if families is not None else None)
            begin = stop
        return
    for run, shared, pair_of in _dense_common(first_of, second_of, terms, term_starts, width):
        size = run.stop - run.start
        kinds = None
        if families is not None:  # its distinct (pair, family) numbers
            kinds = np.sort(pair_of * family_count + families[shared])
            kinds = np.bincount(kinds[np.diff(kinds, prepend=-1) != 0] // family_count, minlength=size)
        yield run, shared, np.cumsum(np.bincount(pair_of, minlength=size)), kinds


def _dense_common(first_of: np.ndarray, second_of: np.ndarray, terms: np.ndarray, term_starts: np.ndarray,
                  width: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """:func:`_common`'s runs with numpy alone, each shared term with its pair within the run.

    Pairs are taken a block of first files at a time: the block's terms are marked in a files x terms bitmap,
    and each pair's second file's terms are looked up in its first file's row: no sort, no Python step per
    pair. A run looks up at most _LOOKUPS terms (but for one pair holding more), since a block's pairs can be
    many: a pair's first file is the lower-numbered, so the first blocks hold most of them."""
    total = term_starts.size - 1
    block = max(1, _MARK_CELLS // max(width, 1))
    marks = np.zeros(block * width, bool)
    looked_up = np.cumsum(np.diff(term_starts)[second_of])  # terms looked up by the pairs so far
    begin = 0
    for first in range(0, total, block):
        last = min(total, first + block)
        end = int(np.searchsorted(first_of, last))
        if end == begin:
            continue
        lo, hi = term_starts[first], term_starts[last]
        marked = np.repeat(np.arange(last - first, dtype=np.int64) * width, np.diff(term_starts[first:last + 1])) \
            + terms[lo:hi]
        marks[marked] = True
        while begin < end:
            done = looked_up[begin - 1] if begin else 0
            stop = min(end, max(begin + 1, int(np.searchsorted(looked_up, done + _LOOKUPS, "right"))))
            theirs, counts = _gather(terms, term_starts, second_of[begin:stop])
            common = marks[np.repeat((first_of[begin:stop] - first) * width, counts) + theirs]
            yield slice(begin, stop), theirs[common], np.repeat(np.arange(stop - begin), counts)[common]
            begin = stop
        marks[marked] = False


def _score(pairs: np.ndarray, total: int, terms: np.ndarray, term_starts: np.ndarray, rarity: np.ndarray,
           families: np.ndarray, family_count: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (numbers ``a * total + b``, a < b, sorted) that share terms of two word families at least, and
    their scores: the summed rarity of every distinctive term the two share."""
    kept, scores = [], []
    for run, shared, ends, kinds in _common(pairs, total, terms, term_starts, rarity.size, families, family_count):
        counts = np.diff(ends, prepend=0)
        good = np.flatnonzero((counts >= MIN_FAMILIES) & (kinds >= MIN_FAMILIES))
        rarities = rarity[shared].tolist()
        # fsum is exact, so the score never depends on the order terms are summed in
        scores += [math.fsum(rarities[start:stop]) for start, stop in zip((ends - counts)[good].tolist(),
                                                                          ends[good].tolist())]
        kept.append(pairs[run][good])
    return (np.concatenate(kept) if kept else np.empty(0, np.int64)), np.array(scores, np.float64)


class SharedtermDetector:
    name = "sharedterm"
    type = "shared_term"
    # 2: a project's manifests and configs take no part (see MANIFESTS)
    tag = "sharedterm@2"
    weight = 0.45
    confidence = 0.5

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, bytes] | None:
        if not file_docs or _manifest(file_docs[0]):
            return None
        return file_docs[0].ax_path, _file_words(file_docs)

    def combine(self, partials: Iterable[tuple[str, bytes] | None], corpus: Corpus) -> DetectorState:
        units = sorted((p for p in partials if p is not None), key=lambda unit: unit[0])
        total = len(units)
        # term numbers in one global order, rarest first: a file's distinctive terms are a sorted run of numbers
        # (compact, and its first SIGNATURE_TERMS are its signature)
        names, held_by, terms, term_starts = _distinctive(units, total)
        rarity = np.array([math.log(total / df) for df in held_by], np.float64)
        family_of: dict[str, int] = {}
        families = np.array([family_of.setdefault(family(term), len(family_of)) for term in names], np.int64)
        # the families' spellings (a string and a dict entry per family, 50 MB of 22k files of code) and the
        # counts as objects are numbers now: let go before the inverted indexes are built
        n_families = max(len(family_of), 1)
        del family_of, held_by
        sizes = np.diff(term_starts)
        sig_ends = term_starts[:-1] + np.minimum(sizes, SIGNATURE_TERMS)  # where each file's signature ends
        file_of = np.repeat(np.arange(total, dtype=_IDS), sizes)
        # each file's first SIGNATURE_TERMS entries, marked by their positions alone (a comparison of every entry's
        # position with its file's end held two int64 arrays of them all: 74 MB on 22k files of code)
        in_signature = np.zeros(terms.size, bool)
        sig_sizes = sig_ends - term_starts[:-1]
        in_signature[np.repeat(term_starts[:-1] - (np.cumsum(sig_sizes) - sig_sizes), sig_sizes)
                     + np.arange(int(sig_sizes.sum()))] = True
        # two inverted indexes, each term to its files in file order: every file holding a signature term
        # (df >= 2, so never alone), and every file holding the term in its signature
        seeding = np.zeros(len(names), bool)
        seeding[terms[in_signature]] = True
        holders, starts = _inverted(file_of, terms, seeding[terms], len(names))
        sig_holders, sig_starts = _inverted(file_of, terms, in_signature, len(names))
        del file_of, in_signature, seeding
        scorers, scored, meeting = _meetings(holders, starts, sig_holders, sig_starts, terms, term_starts, sig_ends)
        del holders, starts, sig_holders, sig_starts
        # a pair (a < b) is the number a * total + b, scored once whichever end (or both) scored it (distinct by
        # hand: numpy's unique imports numpy.ma on first use, about 10 ms on a run's critical path)
        pairs = np.sort(np.minimum(scorers, scored).astype(np.int64) * total + np.maximum(scorers, scored))
        pairs = pairs[np.diff(pairs, prepend=-1) != 0]
        # pairs meeting on two signature terms from either end that neither end scored are refused candidates
        unscored = meeting - pairs.size
        numbers, scores = _score(pairs, total, terms, term_starts, rarity, families, n_families)
        # best score first, then by pair (a, b): a pair number orders as (a, b) does
        candidates = numbers[np.lexsort((numbers, -scores))].tolist()
        del pairs, numbers, scores

        degree = [0] * total
        linked = []
        capped = unscored
        for number in candidates:
            a, b = divmod(number, total)
            if degree[a] >= MAX_LINKS or degree[b] >= MAX_LINKS:
                capped += 1
                continue
            degree[a] += 1
            degree[b] += 1
            linked.append(number)
        del candidates
        # each link named by all the terms its files share, rarest first (term numbers are in that order)
        accepted: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
        linked = np.sort(np.array(linked, np.int64))
        for run, shared, ends, _ in _common(linked, total, terms, term_starts, len(names)):
            spelled = list(map(names.__getitem__, shared.tolist()))
            start = 0
            for number, end in zip(linked[run].tolist(), ends.tolist()):
                a, b = divmod(number, total)
                accepted[units[a][0]].append((units[b][0], tuple(spelled[start:end])))
                start = end
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
