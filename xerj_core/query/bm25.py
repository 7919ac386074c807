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

Speed: sealed segments' postings are decoded once per process by the store;
field statistics (and the per-row length normalisation) are memoised per index
generation; each term's per-row weights are computed once per generation and
kept in a bounded cache; a query is then a scatter or a ``bincount`` and a
block-pruned top-k, with no per-document Python.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from typing import Iterable, Sequence

import attrs
import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.query.ranking import Ranked, select_top, top_k
from xerj_core.store.columns import KIND_LEN, column_kind
from xerj_core.text import tokenize

K1 = 1.2
B = 0.75
# Budget of the per-generation term-weight cache of one field (rows int64 + weights float64).
TERM_CACHE_BYTES = 96 << 20


@attrs.frozen
class FieldStats:
    """BM25 statistics of one text field at one index generation."""

    doc_count: int  # live documents with at least one token in the field (Lucene's docCount)
    avgdl: float  # mean token count over those documents
    norm: np.ndarray  # per row: k1 * (1 - b + b * dl / avgdl), float64


class _TermCache:
    """Least-recently-used per-term ``(rows, weights)`` of one field, bounded in bytes."""

    def __init__(self, budget: int = TERM_CACHE_BYTES) -> None:
        self.budget = budget
        self.used = 0
        self.entries: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        with self.lock:
            found = self.entries.get(term)
            if found is not None:
                self.entries.move_to_end(term)
            return found

    def put(self, term: str, value: tuple[np.ndarray, np.ndarray]) -> None:
        size = value[0].nbytes + value[1].nbytes
        if size > self.budget // 4:
            return
        with self.lock:
            if term in self.entries:
                return
            self.entries[term] = value
            self.used += size
            while self.used > self.budget and self.entries:
                _, (rows, weights) = self.entries.popitem(last=False)
                self.used -= rows.nbytes + weights.nbytes


def is_text_field(reader, field: str) -> bool:
    spec = reader.mapping.fields.get(field)
    return spec is not None and column_kind(spec) == KIND_LEN


def require_text_field(reader, field: str) -> None:
    spec = reader.mapping.fields.get(field)
    if spec is not None and column_kind(spec) != KIND_LEN:
        raise IllegalArgument(f"field [{field}] of type [{spec.type}] is not a [text] field; BM25 needs one")


def field_stats(reader, field: str) -> FieldStats:
    """``field``'s :class:`FieldStats` for the reader's generation (memoised until the next write)."""

    def build() -> FieldStats:
        lengths = reader.column(field).values
        live = reader.live
        doc_count = int(np.count_nonzero(live & (lengths > 0)))
        # Dead rows are few: subtracting theirs is cheaper than a masked sum over every row.
        total = int(lengths.sum(dtype=np.int64))
        if reader.doc_count != reader.n_rows:
            total -= int(lengths[~live].sum(dtype=np.int64))
        avgdl = total / doc_count if doc_count else 1.0
        norm = K1 * (1.0 - B) + (K1 * B / avgdl) * lengths
        return FieldStats(doc_count, avgdl, norm)

    return reader.memo(("bm25-stats", field), build)


def idf(doc_count: int, doc_freq: int) -> float:
    return math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5))


def term_weights(reader, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
    """Live rows holding ``term`` in ``field`` (ascending) and each row's BM25 weight for it."""
    cache: _TermCache = reader.memo(("bm25-terms", field), _TermCache)
    found = cache.get(term)
    if found is not None:
        return found
    rows, tfs = reader.postings(field, term)
    if len(rows) and reader.doc_count != reader.n_rows:
        keep = reader.live[rows]
        if not keep.all():
            rows, tfs = rows[keep], tfs[keep]
    if len(rows) == 0:
        found = (np.empty(0, np.int64), np.empty(0, np.float64))
    else:
        stats = field_stats(reader, field)
        tf = tfs.astype(np.float64)
        found = (rows, idf(stats.doc_count, len(rows)) * tf / (tf + stats.norm[rows]))
    cache.put(term, found)
    return found


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
    parts = [(term_weights(reader, field, term), mult) for term, mult in terms.items()]
    parts = [(p, m) for p, m in parts if len(p[0])]
    scores = np.zeros(n, np.float64)
    if not parts:
        return scores, (np.zeros(n, np.int32) if need_counts else None)
    if len(parts) == 1:
        (rows, weights), mult = parts[0]
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
    if len(field_list) == 1 and len(terms) == 1 and operator == "or" and minimum_should_match is None:
        (term, mult), = terms.items()
        rows, weights = term_weights(reader, field_list[0], term)
        if filter_mask is not None and len(rows):
            keep = filter_mask[rows]
            rows, weights = rows[keep], weights[keep]
        return select_top(rows, weights * mult if mult != 1 else weights, k)
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
