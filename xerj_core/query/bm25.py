"""BM25 over ``text`` fields with Elasticsearch's formula, scored from LMDB postings with numpy.

Per term and row: ``idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with
``idf = ln(1 + (N - n + 0.5) / (n + 0.5))``, k1 1.2 and b 0.75 (Lucene's
BM25Similarity, which dropped the constant ``k1 + 1`` numerator factor). ``N``
is the number of live documents with at least one token in the field, ``n``
the live documents holding the term, ``dl`` a document's token count in the
field and ``avgdl`` the mean over live documents. Two deliberate differences
from Lucene: statistics count live documents only (Lucene keeps deleted ones
until a merge), and ``dl`` is exact rather than a one-byte quantised norm, so
scores reflect every committed write exactly.

Speed: each queried term's postings over the sealed segments, with the field
length of every posting, are kept in a bounded cache until the next seal (which
reuses them for the segments it left); statistics are sums kept per sealed
segment, so a write costs only the tail and the dead rows, never a pass over
every row. Per generation, each term's weights are three vectorised operations
over those arrays (cached until the next write), and a query is a ``bincount``
and a top-k that skips every block of rows whose best score cannot enter
(:func:`~xerj_core.query.ranking.top_k`). Right after a write, when the weights
are not kept, an ``or`` match of several terms is pruned instead (MaxScore,
:func:`_pruned_top`): its frequent terms' postings are weighted only at the few
rows that can still enter the top k, with the same scores, bit for bit. Where
pruning cannot show that, a generation's first such query ranks from weights
the sealed parts carry from an earlier generation, which bound this one's
(:func:`_carried_top`): one pass over the postings instead of three.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from typing import Iterable, Iterator, Sequence

import attrs
import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.query.ranking import Ranked, select_top, top_k
from xerj_core.store.columns import KIND_LEN, column_kind
from xerj_core.text import tokenize

K1 = 1.2
B = 0.75
# The length normalisation's constant part, ``k1 * (1 - b)``.
LENGTH_BASE = K1 * (1.0 - B)
# Budget of the per-generation term-weight cache of one field (rows int64 + weights float64).
TERM_CACHE_BYTES = 96 << 20
# Budget of one field's cache of postings (with field lengths) over the sealed segments, kept until a seal.
SEALED_CACHE_BYTES = 64 << 20
# Terms whose tail postings (a tail holds at most a segment's worth of rows) and document frequencies one
# generation keeps.
_TAIL_TERMS = 4096
_MISSING = object()


@attrs.frozen
class FieldStats:
    """BM25 statistics of one text field at one index generation."""

    doc_count: int  # live documents with at least one token in the field (Lucene's docCount)
    avgdl: float  # mean token count over those documents

    @property
    def slope(self) -> float:
        """The length normalisation's per-token part, ``k1 * b / avgdl``."""
        return K1 * B / self.avgdl


class _LRU:
    """Least-recently-used values by key, bounded in bytes (each value's ``nbytes``; None costs nothing)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.entries: OrderedDict[str, object] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str, default: object = None) -> object:
        with self.lock:
            found = self.entries.get(key, _MISSING)
            if found is _MISSING:
                return default
            self.entries.move_to_end(key)
            return found

    def take(self, key: str, default: object = None) -> object:
        """The value under ``key``, removed."""
        with self.lock:
            found = self.entries.pop(key, _MISSING)
            if found is _MISSING:
                return default
            self.used -= _size(found)
            return found

    def put(self, key: str, value: object) -> None:
        size = _size(value)
        if size > self.budget // 4:
            return
        with self.lock:
            if key in self.entries:
                return
            self.entries[key] = value
            self.used += size
            while self.used > self.budget and self.entries:
                _, old = self.entries.popitem(last=False)
                self.used -= _size(old)


def _size(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, list):
        return sum(_size(v) for v in value)
    if isinstance(value, tuple):
        return sum(v.nbytes for v in value)
    return value.nbytes  # type: ignore[attr-defined]


class TermPart:
    """One part's postings of one term: ``rows`` (absolute, ascending) and what a weight needs of each posting
    besides the generation's statistics, in the form that needs the fewest passes once those are known: with
    ``tf`` its term frequency and ``dl`` its field length, ``1 + k1 * (1 - b) / tf`` and ``dl / tf``."""

    __slots__ = ("rows", "fixed", "per_length", "nbytes", "carried", "_without", "_least")

    def __init__(self, rows: np.ndarray, tf: np.ndarray, dl: np.ndarray) -> None:
        self.rows = rows
        tf = tf.astype(np.float64)
        self.fixed = np.divide(LENGTH_BASE, tf)
        self.fixed += 1.0
        self.per_length = np.divide(dl, tf, dtype=np.float64)
        self.nbytes = rows.nbytes + self.fixed.nbytes + self.per_length.nbytes
        self.carried: tuple[float, np.ndarray] | None = None
        self._without: tuple[bytes, TermPart] | None = None
        self._least: tuple[float, float] | None = None

    @classmethod
    def of(cls, rows: np.ndarray, fixed: np.ndarray, per_length: np.ndarray) -> "TermPart":
        part = cls.__new__(cls)
        part.rows, part.fixed, part.per_length = rows, fixed, per_length
        part.nbytes = rows.nbytes + fixed.nbytes + per_length.nbytes
        part.carried = part._without = part._least = None
        return part

    def carry(self, slope: float) -> None:
        """Keep every posting's weight per unit of idf at ``slope`` (a generation's :attr:`FieldStats.slope`) in
        :attr:`carried`, with that slope, for the generations after it (see :func:`_carried_top`)."""
        units = np.multiply(self.per_length, slope)
        units += self.fixed
        np.reciprocal(units, out=units)
        if self.carried is None:  # another thread's, carried meanwhile, stays: its readers hold it already
            self.carried = (slope, units)
            self.nbytes += units.nbytes

    @classmethod
    def joined(cls, parts: list["TermPart"]) -> "TermPart":
        """Parts of ascending, disjoint row ranges, in order, as one."""
        if len(parts) == 1:
            return parts[0]
        return cls.of(*(np.concatenate([getattr(p, name) for p in parts]) for name in ("rows", "fixed", "per_length")))

    def between(self, start: int, end: int) -> "TermPart":
        """The postings of rows ``start`` to ``end`` (excluded), as views."""
        lo, hi = np.searchsorted(self.rows, [start, end]).tolist()
        return TermPart.of(self.rows[lo:hi], self.fixed[lo:hi], self.per_length[lo:hi])

    def without(self, at: np.ndarray) -> "TermPart":
        """This part less the postings at positions ``at`` (its dead rows). Kept for the last ``at`` asked: rows
        die rarely, so the sealed part's next generations find the same positions and copy nothing."""
        key = at.tobytes()
        found = self._without
        if found is None or found[0] != key:
            keep = np.ones(len(self.rows), bool)
            keep[at] = False
            found = self._without = (key, TermPart.of(self.rows[keep], self.fixed[keep], self.per_length[keep]))
        return found[1]

    def bound(self, stats: FieldStats, scale: float) -> float:
        """No posting's weight (as :meth:`weights` computes it, rounding included) exceeds this: the weight with
        the part's least ``fixed`` and least ``per_length``, each operation being monotonic. Both minima are kept
        with the part (a sealed part lives until the next seal, through every write's new statistics)."""
        if self._least is None:
            self._least = (float(self.fixed.min()), float(self.per_length.min()))
        fixed, per_length = self._least
        return scale / (per_length * stats.slope + fixed)

    def weights_at(self, at: np.ndarray, stats: FieldStats, scale: float) -> np.ndarray:
        """:meth:`weights` of the postings at positions ``at`` only, value for value the same."""
        out = np.multiply(self.per_length.take(at), stats.slope)
        out += self.fixed.take(at)
        np.divide(scale, out, out=out)
        return out

    def weights(self, stats: FieldStats, scale: float) -> np.ndarray:
        """BM25 weights (float64) of every posting, times ``scale`` (the term's idf)."""
        # ``idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` is ``idf / (1 + k1 * (1 - b) / tf + slope * dl / tf)``:
        # three passes over float64 arrays when a write changes the statistics (five, with two conversions from
        # float32, took twice as long)
        out = np.multiply(self.per_length, stats.slope)
        out += self.fixed
        np.divide(scale, out, out=out)
        return out


def is_text_field(reader, field: str) -> bool:
    spec = reader.mapping.fields.get(field)
    return spec is not None and column_kind(spec) == KIND_LEN


def require_text_field(reader, field: str) -> None:
    spec = reader.mapping.fields.get(field)
    if spec is not None and column_kind(spec) != KIND_LEN:
        raise IllegalArgument(f"field [{field}] of type [{spec.type}] is not a [text] field; BM25 needs one")


def _segment_sums(reader, segment, field: str) -> tuple[int, int]:
    """``(rows with a token, tokens)`` of ``field`` over a sealed segment, dead rows included (cached with it)."""
    key = ("bm25-sums", field)
    found = segment.derived.get(key)
    if found is None:
        column = reader.segment_column(segment, field)
        lengths = column.values if column is not None else np.zeros(0, np.int32)
        found = segment.derived[key] = (int(np.count_nonzero(lengths)), int(lengths.sum(dtype=np.int64)))
    return found


def lengths_at(reader, field: str, rows: np.ndarray) -> np.ndarray:
    """``field``'s token counts at ascending ``rows`` (zero where a part lacks the column)."""
    out = np.zeros(len(rows), np.int32)
    if not len(rows):
        return out
    parts = list(reader.column_parts(field))
    # every part's bounds in one search (a search per part: 32 us against 14 for 300 dead rows over 8 parts, which
    # BM25's statistics look up after each write that overwrites a document)
    bounds = np.searchsorted(rows, np.array([(start, end) for start, end, _column in parts]).ravel()).tolist()
    for (start, _end, column), lo, hi in zip(parts, bounds[::2], bounds[1::2]):
        if hi > lo and column is not None:
            out[lo:hi] = column.values[rows[lo:hi] - start]
    return out


def field_stats(reader, field: str) -> FieldStats:
    """``field``'s :class:`FieldStats` for the reader's generation (memoised until the next write).

    Sealed segments' sums are kept with the segment, so a write costs the tail
    and the dead rows, not a pass over every row.
    """

    def build() -> FieldStats:
        doc_count = total = 0
        for seg in reader.segments:
            count, tokens = _segment_sums(reader, seg, field)
            doc_count += count
            total += tokens
        if reader.tail_count:
            lengths = reader.tail_column(field).values
            doc_count += int(np.count_nonzero(lengths))
            total += int(lengths.sum(dtype=np.int64))
        dead = reader.dead_rows()
        if len(dead):
            split = int(np.searchsorted(dead, reader.tail_start))
            if split:
                count, tokens = _sealed_dead_sums(reader, field, dead[:split])
                doc_count -= count
                total -= tokens
            if split < len(dead):
                lengths = reader.tail_column(field).values[dead[split:] - reader.tail_start]
                doc_count -= int(np.count_nonzero(lengths))
                total -= int(lengths.sum(dtype=np.int64))
        return FieldStats(doc_count, total / doc_count if doc_count else 1.0)

    return reader.memo(("bm25-stats", field), build)


def _sealed_dead_sums(reader, field: str, dead: np.ndarray) -> tuple[int, int]:
    """``(rows with a token, tokens)`` of ``field`` over ``dead``, rows of sealed segments, kept until the next seal
    for the last few sets asked (keyed by the rows themselves). A write that kills no sealed row (a put, an
    overwrite of a tail row) leaves the set as it was: its next read looked every dead row up again (28 us at 300
    of them, a third of the statistics after each overwrite)."""
    kept: dict[bytes, tuple[int, int]] = reader.sealed_memo(("bm25-dead-sums", field), dict)
    key = dead.tobytes()
    found = kept.get(key)
    if found is None:
        lengths = lengths_at(reader, field, dead)
        found = (int(np.count_nonzero(lengths)), int(lengths.sum(dtype=np.int64)))
        if len(kept) >= 4:  # readers of a few generations at once; older sets are not asked again
            kept.clear()
        kept[key] = found
    return found


def idf(doc_count: int, doc_freq: int) -> float:
    return math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5))


def _sealed_part(reader, field: str, term: str) -> TermPart | None:
    """``term``'s postings over every sealed segment as one part, kept until the next seal (bounded cache).

    After a seal, the part the layout before it kept is reused for the segments the seal left as they were (most
    rows: a seal adds a small segment or merges the small ones), so only the new segments' postings are read."""
    cache: _LRU = reader.sealed_memo(("bm25-terms", field), lambda: _LRU(SEALED_CACHE_BYTES), carry=True)
    found = cache.get(term, _MISSING)
    if found is _MISSING:
        previous = reader.previous_sealed(("bm25-terms", field))
        kept, old = (), _MISSING
        if previous is not None:  # taken out of the old cache: it is held until the next seal, not twice over
            kept, old = frozenset(previous[0]), previous[1].take(term, _MISSING)
        pieces = []
        reader.prefetch_postings(field, term)
        for seg in reader.segments:
            if old is not _MISSING and (seg.start, seg.end, seg.sealed_at) in kept:
                if old is not None:
                    pieces.append(old.between(seg.start, seg.end))
                continue
            postings = reader.segment_postings(seg, field, term)
            if postings is None:
                continue
            column = reader.segment_column(seg, field)
            pieces.append(TermPart(postings[0], postings[1], column.values[postings[0] - seg.start]
                                   if column is not None else np.zeros(len(postings[0]), np.int32)))
        pieces = [piece for piece in pieces if len(piece.rows)]
        found = TermPart.joined(pieces) if pieces else None
        cache.put(term, found)
    return found  # type: ignore[return-value]


def term_parts(reader, field: str, term: str) -> list[TermPart]:
    """``term``'s postings in ``field``: one part for the sealed segments (cached until a seal), one for the tail
    (cached for the generation: a pruned top-k that gives way to scoring every posting reads it once)."""
    parts = []
    sealed = _sealed_part(reader, field, term)
    if sealed is not None:
        parts.append(sealed)
    if reader.tail_count:
        tails: dict[str, TermPart | None] = reader.memo(("bm25-tail-terms", field), dict)
        found = tails.get(term, _MISSING)
        if found is _MISSING:
            postings = reader.snapshot.tail.postings(field, term, reader.tail_count)
            found = None
            if postings is not None:
                lengths = reader.tail_column(field).values
                found = TermPart(postings[0], postings[1], lengths[postings[0] - reader.tail_start])
            if len(tails) < _TAIL_TERMS:
                tails[term] = found
        if found is not None:
            parts.append(found)
    return parts


def _dead_positions(reader, rows: np.ndarray) -> np.ndarray | None:
    """Positions in the ascending ``rows`` of rows the reader does not show; None when there are none (dead rows
    are few, so they are looked up in the postings rather than every posting in the live mask)."""
    dead = reader.dead_rows()
    if not len(dead) or not len(rows):
        return None
    lo, hi = np.searchsorted(dead, [rows[0], rows[-1] + 1])
    if hi == lo:
        return None
    if hi - lo > len(rows):
        at = np.flatnonzero(~reader.live[rows])
    else:
        candidates = dead[lo:hi]
        at = np.searchsorted(rows, candidates)  # every candidate lies within rows' range
        at = at[rows[at] == candidates]
    return at if len(at) else None


def _live_count(reader, parts: list[TermPart]) -> int:
    """How many of the parts' postings are of rows the reader shows: the term's document frequency."""
    return sum(len(p.rows) - (0 if (d := _dead_positions(reader, p.rows)) is None else len(d)) for p in parts)


def _doc_freq(reader, field: str, term: str, parts: list[TermPart]) -> int:
    """:func:`_live_count` of ``term``'s ``parts``, kept for the generation: a match's ranking and its hit count
    both need it, and after a write each took 28 us a term looking its dead rows up."""
    known: dict[str, int] = reader.memo(("bm25-doc-freq", field), dict)
    found = known.get(term)
    if found is None:
        found = _live_count(reader, parts)
        if len(known) < _TAIL_TERMS:
            known[term] = found
    return found


def term_weight_parts(reader, field: str, term: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """``term``'s live rows in ``field`` and their BM25 weights, per part (sealed, tail): rows ascending across
    parts. Kept apart so a query over several terms concatenates every posting once."""
    cache: _LRU = reader.memo(("bm25-weight-parts", field), lambda: _LRU(TERM_CACHE_BYTES))
    found = cache.get(term)
    if found is not None:
        return found  # type: ignore[return-value]
    parts = term_parts(reader, field, term)
    dead = [_dead_positions(reader, p.rows) for p in parts]
    live = sum(len(p.rows) - (0 if d is None else len(d)) for p, d in zip(parts, dead))
    found = []
    if live:
        stats = field_stats(reader, field)
        scale = idf(stats.doc_count, live)
        for part, at in zip(parts, dead):
            if at is not None:
                part = part.without(at)
            if len(part.rows):
                found.append((part.rows, part.weights(stats, scale)))
    cache.put(term, found)
    return found


def term_weights(reader, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
    """Live rows holding ``term`` in ``field`` (ascending) and each row's BM25 weight for it."""
    parts = term_weight_parts(reader, field, term)
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def top_and_count(reader, field: str, terms: Counter[str], k: int, *, boost: float = 1.0,
                  count_past: int | None = None, filter_mask: np.ndarray | None = None) -> tuple[Ranked, int]:
    """The ``k`` best live rows of an ``or`` match of ``terms`` on text field ``field``, and how many rows match:
    exactly, or (given ``count_past``, a total tracked up to that many) any number above it when more do.
    ``filter_mask`` (bool over the reader's rows) keeps the rows it sets, for ranking and count alike."""
    if filter_mask is not None and np.count_nonzero(filter_mask) <= reader.n_rows * _MOST_CANDIDATES:
        rows = np.flatnonzero(filter_mask)  # its dead rows are dropped here, not by a pass over every row
        return _top_of_rows(reader, field, terms, k, rows if reader.doc_count == reader.n_rows
                            else rows[reader.live[rows]], boost)
    if count_past is not None and boost == 1.0 and len(terms) > 1 and k > 0 \
            and not _weights_kept(reader, field, terms):
        found = _pruned_top(reader, field, terms, k, filter_mask)
        if found is not None:
            return found, _match_count(reader, field, terms, count_past, filter_mask)
        carried = _carried_top(reader, field, terms, k, filter_mask) if _carry_first(reader, field) else None
        if carried is not None:
            return carried[0], int(np.count_nonzero(carried[1]))  # every live matching row sums above zero
    scores, _ = score_terms(reader, field, terms)
    if filter_mask is not None:
        scores *= filter_mask
    count = int(np.count_nonzero(scores))  # every matching row has a positive weight; dead rows have none
    if not count or k <= 0:
        return Ranked.empty(), count
    if boost != 1.0:
        scores *= boost  # a plain match's boost is positive (see SearchService._plain_match)
    return top_k(scores, None, k), count


def query_terms(text: object) -> Counter[str]:
    """The query's tokens with their multiplicity (``"a a b"`` scores ``a`` twice, as ES's match does)."""
    return Counter(tokenize(str(text)))


def score_terms(reader, field: str, terms: Counter[str] | Iterable[str], *,
                need_counts: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Dense per-row BM25 score of ``terms`` (a multiset) in ``field``, and optionally per-row matched clause counts.

    A row's score is the sum over query terms it holds of weight × multiplicity;
    the count is how many query clauses (tokens, repeats included) it matched.
    """
    if not isinstance(terms, Counter):
        terms = Counter(terms)
    n = reader.n_rows
    parts = [(part, mult) for term, mult in terms.items() for part in term_weight_parts(reader, field, term)]
    if not parts:
        return np.zeros(n, np.float64), (np.zeros(n, np.int32) if need_counts else None)
    if len(parts) == 1:
        (rows, weights), mult = parts[0]
        scores = np.zeros(n, np.float64)
        scores[rows] = weights * mult if mult != 1 else weights
        if not need_counts:
            return scores, None
        counts = np.zeros(n, np.int32)
        counts[rows] = mult
        return scores, counts
    rows = np.concatenate([p[0] for p, _ in parts])
    weights = np.concatenate([p[1] * m if m != 1 else p[1] for p, m in parts])
    scores = np.bincount(rows, weights, minlength=n)
    if not need_counts:
        return scores, None
    mults = np.concatenate([np.full(len(p[0]), m, np.int32) for p, m in parts])
    return scores, np.bincount(rows, mults, minlength=n).astype(np.int32)


def required_matches(operator: str, msm: str | None, clauses: int) -> int:
    """How many of ``clauses`` query tokens a document must hold under ``operator`` / ``minimum_should_match``."""
    from xerj_core.query.dsl import minimum_should_match

    if operator == "and":
        return clauses
    return max(1, minimum_should_match(msm, clauses, 1))


def match_text(reader, field: str, text: object, *, operator: str = "or", minimum_should_match: str | None = None,
               scoring: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """``(mask, scores)`` of an analyzed match of ``text`` on text field ``field`` (both dense over rows).

    ``mask`` may include dead rows only when it is a filter result; scores are
    zero outside the mask. An unmapped field or a text without tokens matches nothing.
    """
    n = reader.n_rows
    terms = query_terms(text)
    if not terms or field not in reader.mapping.fields:
        return np.zeros(n, bool), (np.zeros(n, np.float64) if scoring else None)
    require_text_field(reader, field)
    clauses = sum(terms.values())
    required = required_matches(operator, minimum_should_match, clauses)
    if required > clauses:
        return np.zeros(n, bool), (np.zeros(n, np.float64) if scoring else None)
    scores, counts = score_terms(reader, field, terms, need_counts=required > 1)
    if counts is None:
        mask = scores > 0
    else:
        mask = counts >= required
        scores *= mask
    return mask, (scores if scoring else None)


# Pruned top-k (:func:`_pruned_top`) gives way to scoring every posting when its candidates would exceed this share
# of the rows, or its rarest terms hold this share of the query's postings: past either, looking the candidates up
# costs about what scoring everything does.
_MOST_CANDIDATES = 1 / 16
_MOST_POSTINGS = 1 / 2
# Carried weights (:func:`_carried_top`) rank no query once their slope is this far from the generation's: the
# candidates their bounds leave grow with the distance (a seal, every tail's worth of rows, carries them anew).
_MOST_DRIFT = 1.05
# A part is searched for each candidate (a binary search, about this many postings' worth of a pass each) when that
# is cheaper than one pass over its postings through a map of the candidates' rows.
_SEARCH_COST = 24


def _weights_kept(reader, field: str, terms: Counter[str]) -> bool:
    """Are every term's weights of this generation kept already? Then summing them all (one bincount) costs less
    than pruning: pruning pays where a write left them to be computed again."""
    cache: _LRU = reader.memo(("bm25-weight-parts", field), lambda: _LRU(TERM_CACHE_BYTES))
    return all(cache.get(term) is not None for term in terms)


def _top_of_rows(reader, field: str, terms: Counter[str], k: int, rows: np.ndarray, boost: float
                 ) -> tuple[Ranked, int]:
    """:func:`top_and_count` among a few live ``rows`` (ascending; a selective filter's): each one's whole score,
    as the dense sum adds it (:func:`_scores_of`), and how many of them match. Pruning among them found too few
    candidates term after term (a filter keeping no row cost a match 1.9 ms after a write, against 1.4 ms for
    scoring every posting)."""
    stats = field_stats(reader, field)
    entries = [(parts, scale, mult, 0.0, 0) for _term, mult, parts, scale in _live_terms(reader, field, terms, stats)]
    if not entries or not len(rows):
        return Ranked.empty(), 0
    scores = _scores_of(rows, entries, stats, reader.n_rows)
    if boost != 1.0:
        scores *= boost  # as the dense path boosts its sums
    hit = (scores > 0).nonzero()[0]  # every matching row's weights are positive
    return select_top(rows.take(hit), scores.take(hit), k), len(hit)


def _match_count(reader, field: str, terms: Counter[str], count_past: int,
                 filter_mask: np.ndarray | None = None) -> int:
    """How many live rows hold one of ``terms`` (and are set in ``filter_mask``, when given): exactly, or the most
    any one term has when that is above ``count_past`` (then so is the count, and the caller reports it as more
    than that).

    The rows are marked in a mask over the index rather than joined by a union (a sort of every posting): 55
    against 204 us for postings of 30k, 8k and 300 rows over 100k, 145 against 1,315 us for 60k, 40k and 20k."""
    keep = None if reader.doc_count == reader.n_rows else reader.live
    if filter_mask is not None:
        keep = filter_mask if keep is None else filter_mask & keep
    rows = []
    most = 0
    for term in terms:
        parts = term_parts(reader, field, term)
        if filter_mask is None:
            live = _doc_freq(reader, field, term, parts)
        else:
            live = sum(int(np.count_nonzero(keep[part.rows])) for part in parts)
        most = max(most, live)
        if most > count_past:
            return most
        rows += [part.rows for part in parts]
    if len(terms) == 1 or not rows:
        return most
    marked = np.zeros(reader.n_rows, bool)
    for found in rows:
        marked[found] = True
    if keep is not None:
        marked &= keep
    return int(np.count_nonzero(marked))


def _union(arrays: list[np.ndarray]) -> np.ndarray:
    """The distinct values of ascending arrays, ascending.

    A stable sort, which numpy runs as timsort for these integers: it finds the ascending runs the arrays make
    and merges them: ten to twelve times faster on two or three posting lists than the default introsort,
    which sorts them as if they were shuffled (``np.unique`` is slower still: it hashes first)."""
    if len(arrays) == 1:
        return arrays[0]
    joined = np.concatenate(arrays)
    joined.sort(kind="stable")
    return joined[np.concatenate(([True], joined[1:] != joined[:-1]))]


def _scores_of(rows: np.ndarray, entries: list, stats: FieldStats, n_rows: int) -> np.ndarray:
    """The whole BM25 score of each of ``rows`` (ascending) over ``entries`` (see :func:`_pruned_top`), summed in
    the query's term order as ``score_terms``'s bincount adds them, value for value."""
    scores = np.zeros(len(rows), np.float64)
    slots = None  # each row's place in rows, by row, made once some part is cheaper to pass than to search
    for parts, scale, mult, _bound, _size in entries:
        for part in parts:
            if len(rows) * _SEARCH_COST < len(part.rows):
                at = np.searchsorted(part.rows, rows)
                hit = (at < len(part.rows)).nonzero()[0]
                hit = hit[part.rows.take(at.take(hit)) == rows.take(hit)]
                at = at.take(hit)
            else:
                if slots is None:
                    slots = np.full(n_rows, -1, np.int32)
                    slots[rows] = np.arange(len(rows), dtype=np.int32)
                found = slots.take(part.rows)
                at = (found >= 0).nonzero()[0]
                hit = found.take(at)
            if len(hit):
                weights = part.weights_at(at, stats, scale)
                scores[hit] += weights * mult if mult != 1 else weights
    return scores


def _live_terms(reader, field: str, terms: Counter[str], stats: FieldStats
                ) -> Iterator[tuple[str, int, list[TermPart], float]]:
    """``(term, multiplicity, parts, idf)`` of each query term some live row holds, in query order."""
    for term, mult in terms.items():
        parts = term_parts(reader, field, term)
        live = _doc_freq(reader, field, term, parts)
        if live:
            yield term, mult, parts, idf(stats.doc_count, live)


def _carried_top(reader, field: str, terms: Counter[str], k: int, filter_mask: np.ndarray | None,
                 ) -> tuple[Ranked, np.ndarray] | None:
    """:func:`bm25_top` of an ``or`` match on one field, the same rows and the same scores, from the weights the
    sealed parts carry from an earlier generation (:meth:`TermPart.carry`); with the dense sum of those weights it
    ranked from, which is positive exactly at the live matching rows the filter keeps. None when the carried
    weights are too far from this generation's to rank by, or their bounds leave too many candidates, and the
    caller takes another way.

    A carried weight differs from this generation's only in the length normalisation's slope (the idf is this
    generation's): ``idf / (per_length * slope + fixed)`` over the same with the slope it carries lies between 1
    and the ratio of the two slopes, whatever the posting. So every row's score lies between ``low`` and ``high``
    times its carried sum (the tail's weights are this generation's: a factor of 1). The k-th best carried sum
    times ``low`` is a score k rows reach, so only rows whose sum times ``high`` reaches it can enter the top k;
    those few get their whole score as the dense sum adds it, value for value (:func:`_scores_of`)."""
    stats = field_stats(reader, field)
    entries = []
    summed = []  # per part: the part, its carried (slope, units) as read once here, the term's idf x multiplicity
    low = high = 1.0
    for term, mult, parts, scale in _live_terms(reader, field, terms, stats):
        entries.append((parts, scale, mult, 0.0, 0))
        for part in parts:
            carried = None  # the tail's part lives for this generation only: weighted for it, below
            if part.rows[0] < reader.tail_start:
                if part.carried is None:
                    _carry(reader, field, term, part, stats.slope)
                carried = part.carried  # read once: a thread on another generation may carry it anew meanwhile
                ratio = carried[0] / stats.slope
                low, high = min(low, ratio), max(high, ratio)
            summed.append((part, carried, scale * mult))
    if high > low * _MOST_DRIFT:
        return None
    n = reader.n_rows
    size = sum(len(part.rows) for part, _carried, _scale in summed)
    rows, weights = np.empty(size, np.int64), np.empty(size, np.float64)
    at = 0
    for part, carried, scale in summed:
        end = at + len(part.rows)
        rows[at:end] = part.rows
        if carried is None:
            weights[at:end] = part.weights(stats, scale)
        else:
            np.multiply(carried[1], scale, out=weights[at:end])
        at = end
    sums = np.bincount(rows, weights, minlength=n)
    dead = reader.dead_rows()
    if len(dead):
        sums[dead] = 0.0
    if filter_mask is not None:
        sums *= filter_mask
    best = top_k(sums, None, k)
    if len(best) < k:
        candidates = np.flatnonzero(sums)
    else:
        # rounding moves each of these products and sums by far less than this margin
        candidates = np.flatnonzero(sums >= best.scores[-1] * low / high * (1 - 1e-9))
        if len(candidates) > n * _MOST_CANDIDATES:
            return None
    return select_top(candidates, _scores_of(candidates, entries, stats, n), k), sums


def _carry(reader, field: str, term: str, part: TermPart, slope: float) -> None:
    """:meth:`TermPart.carry` on ``term``'s sealed part, put back into its cache so the cache counts the bytes."""
    cache: _LRU = reader.sealed_memo(("bm25-terms", field), lambda: _LRU(SEALED_CACHE_BYTES), carry=True)
    held = cache.take(term, _MISSING) is part
    part.carry(slope)
    if held:
        cache.put(term, part)


def _carry_first(reader, field: str) -> bool:
    """Should this ranking, which neither kept weights nor pruning answer, be :func:`_carried_top`'s? Only a
    generation's first: carried weights cost a pass over the postings per query, weighting them anew three, which
    later queries of the generation reuse. A generation that serves a second such query is read more than it
    changes, and keeps the weights."""
    first = reader.memo(("bm25-carried", field), lambda: [True])
    found, first[0] = first[0], False
    return found


def _pruned_top(reader, field: str, terms: Counter[str], k: int, filter_mask: np.ndarray | None) -> Ranked | None:
    """:func:`bm25_top` of an ``or`` match of several terms on one field, the same rows and the same scores, from
    the postings of its rarest terms (MaxScore): None when that cannot be shown exact cheaply, and the caller
    scores every posting.

    Each term's weights are bounded by :meth:`TermPart.bound`. Terms are taken rarest bound first; the rows
    holding a taken term are the candidates, scored over the taken terms only. A row outside them holds only the
    other terms, so its score is at most the sum of their bounds (``rest``): once the k-th best candidate's
    partial score is above that, no other row enters the top k. A candidate whose partial score plus ``rest``
    stays below that k-th partial score cannot either; the few left get their whole score, the other terms'
    weights looked up at them, summed in the query's term order as the dense sum adds them (so each score is
    that sum's, value for value, and every sum below is an upper or lower bound of it: rounding is monotonic).
    The long posting lists of frequent terms are read at those few rows only, never weighted whole."""
    stats = field_stats(reader, field)
    entries = []  # per term with live postings, in query order: its parts, idf, multiplicity, bound, postings
    for _term, mult, parts, scale in _live_terms(reader, field, terms, stats):
        bound = max(part.bound(stats, scale) for part in parts)
        entries.append((parts, scale, mult, bound * mult if mult != 1 else bound, sum(len(p.rows) for p in parts)))
    if len(entries) < 2:
        return None
    rarest_first = sorted(range(len(entries)), key=lambda i: -entries[i][3])
    most_postings = sum(entry[4] for entry in entries) * _MOST_POSTINGS
    most_rows = reader.n_rows * _MOST_CANDIDATES
    for taken in range(1, len(entries)):
        chosen = set(rarest_first[:taken])
        if sum(entries[i][4] for i in chosen) > most_postings:
            return None
        if sum(entries[i][3] for i in chosen) <= sum(entries[i][3] for i in rarest_first[taken:]) * (1 + 1e-9):
            continue  # no candidate's partial score can pass the other terms' bounds: take one more term
        rows = _union([part.rows for i in chosen for part in entries[i][0]])
        if reader.doc_count != reader.n_rows:
            rows = rows[reader.live[rows]]
        if filter_mask is not None:
            rows = rows[filter_mask[rows]]
        if len(rows) > most_rows:
            return None
        if len(rows) < k:
            continue  # rows outside the candidates would fill the page
        partial = np.zeros(len(rows), np.float64)
        rest = 0.0
        for i, (parts, scale, mult, bound, _size) in enumerate(entries):  # in query order, as a score adds them
            if i not in chosen:
                rest += bound
                continue
            for part in parts:
                at = np.searchsorted(rows, part.rows)
                held = (at < len(rows)).nonzero()[0]
                held = held[rows.take(at.take(held)) == part.rows.take(held)]  # dead or filtered rows are not
                weights = part.weights_at(held, stats, scale)
                partial[at.take(held)] += weights * mult if mult != 1 else weights
        kth = np.partition(partial, len(partial) - k)[len(partial) - k]
        if kth <= rest:
            continue
        # rounding moves a sum of a few terms by far less than this share, so no row able to enter is left out
        rows = rows[partial + rest >= kth * (1 - 1e-9)]
        return select_top(rows, _scores_of(rows, entries, stats, reader.n_rows), k)
    return None


def bm25_top(reader, fields: str | Sequence[str], text: object, k: int, filter_mask: np.ndarray | None = None, *,
             operator: str = "or", minimum_should_match: str | None = None, tie_breaker: float = 0.0,
             combine: str = "best_fields") -> Ranked:
    """The ``k`` best live rows of ``reader`` for an analyzed BM25 match of ``text``.

    ``fields`` is one text field or several; with several, a row's score is
    its best field's score plus ``tie_breaker`` times the others'
    (``combine="best_fields"``, ES ``multi_match``'s default) or the sum
    (``combine="most_fields"``). ``filter_mask`` (bool over ``reader.n_rows``,
    e.g. from :func:`~xerj_core.query.evaluate.filter_mask`) restricts the
    candidates before ranking. Fields missing from the mapping match nothing;
    a mapped non-text field is an ``IllegalArgument``.
    """
    field_list = [fields] if isinstance(fields, str) else list(fields)
    for field in field_list:
        require_text_field(reader, field)
    field_list = [f for f in field_list if f in reader.mapping.fields]
    terms = query_terms(text)
    if not field_list or not terms or k <= 0:
        return Ranked.empty()
    if len(field_list) == 1 and operator == "or" and minimum_should_match is None:
        if len(terms) == 1:
            (term, mult), = terms.items()
            rows, weights = term_weights(reader, field_list[0], term)
            if filter_mask is not None and len(rows):
                keep = filter_mask[rows]
                rows, weights = rows[keep], weights[keep]
            return select_top(rows, weights * mult if mult != 1 else weights, k)
        if not _weights_kept(reader, field_list[0], terms):
            found = _pruned_top(reader, field_list[0], terms, k, filter_mask)
            if found is not None:
                return found
            carried = _carried_top(reader, field_list[0], terms, k, filter_mask) \
                if _carry_first(reader, field_list[0]) else None
            if carried is not None:
                return carried[0]
    mask = scores = None
    for field in field_list:
        m, s = match_text(reader, field, text, operator=operator, minimum_should_match=minimum_should_match)
        if scores is None:
            mask, scores, best = m, s, s
            continue
        mask = mask | m
        if combine == "most_fields":
            scores = scores + s
        else:
            best = np.maximum(best, s)
            scores = scores + s
    if len(field_list) > 1 and combine != "most_fields":
        scores = best + tie_breaker * (scores - best)
    if filter_mask is not None:
        mask = mask & filter_mask
    return top_k(scores, mask, k)
