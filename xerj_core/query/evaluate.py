"""Query nodes evaluated over one index snapshot: dense per-row match masks and scores from columns and postings.

Filters read doc-values columns (keyword ordinals, numbers, dates, presence
masks) and postings; ``_source`` is never parsed. A node's result is
``(mask, scores)``: both dense over ``reader.n_rows``; ``scores`` is None in
filter context and otherwise zero outside ``mask``. Masks of individual nodes
may include dead rows; :meth:`Evaluator.evaluate` intersects with the live mask
once at the top (``knn`` restricts itself to live rows before ranking).

Scoring follows ES: ``match``/``term`` on text fields score BM25, ``match_phrase`` BM25 of the phrase; ``bool`` sums
its ``must`` and matching ``should`` clauses; ``filter``/``must_not`` never
score; ``match_all`` scores 1; the other term-level queries (``term`` on
non-text fields, ``terms``, ``prefix``, ``wildcard``, ``ids``, ``exists``, ``range``) and
``constant_score`` score their boost; ``knn`` scores the similarity transform.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import attrs
import numpy as np

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.query import bm25, dsl, knn, multiterm, phrase
from xerj_core.query.dsl import Node
from xerj_core.query.ranking import top_k
from xerj_core.query.values import range_operand, term_operand
from xerj_core.store.columns import KIND_LEN, KIND_ORD, KIND_VEC, column_kind
from xerj_core.text import fold, tokenize

Result = tuple[np.ndarray, "np.ndarray | None"]


def keyword_mask(column, ords: np.ndarray) -> np.ndarray:
    """Rows of a keyword column holding any of ``ords`` (first value or any extra value of a multi-valued row)."""
    if len(ords) == 0:
        return np.zeros(len(column), bool)
    mask = column.values == ords[0] if len(ords) == 1 else np.isin(column.values, ords)
    if len(column.extra_rows):
        hits = np.isin(column.extra_ords, ords)
        if hits.any():
            mask[column.extra_rows[hits]] = True
    return mask


def _best_of(n: int, results: Iterable[Result], scoring: bool, tie_breaker: float | None, boost: float) -> Result:
    """The rows any of ``results`` matches, scored by the best of them plus ``tie_breaker`` times the others' (None:
    all of them summed, ``multi_match``'s ``most_fields``), times ``boost``."""
    mask = np.zeros(n, bool)
    total = best = None
    for m, s in results:
        mask |= m
        if scoring:
            total = s if total is None else total + s
            best = s if best is None else np.maximum(best, s)
    if not scoring:
        return mask, None
    if total is None:  # no clause at all
        return mask, np.zeros(n, np.float64)
    scores = total if tie_breaker is None else best + tie_breaker * (total - best) if tie_breaker else best
    return mask, scores * boost if boost != 1.0 else scores


# ES's metadata field holding the index's name: ``term``, ``terms``, ``prefix`` and ``wildcard`` queries and a
# ``terms`` aggregation read it, so one search over many indices can keep, drop or count each index.
INDEX_FIELD = "_index"


def _boosted(mask: np.ndarray, boost: float, scoring: bool) -> Result:
    if not scoring:
        return mask, None
    return mask, mask * float(boost)


class Evaluator:
    """Evaluates parsed query nodes against one :class:`~xerj_core.store.IndexReader`.

    ``default_knn_k`` is how many neighbours a ``knn`` query clause without
    ``k``/``num_candidates`` keeps (the service passes what the page needs).
    """

    def __init__(self, reader, *, default_knn_k: int = 10, shared: dict | None = None) -> None:
        """``shared``: filter masks already computed on this reader in the same request (keyed by the clause
        object), so the legs of a hybrid search evaluate a filter they share once."""
        self.reader = reader
        self.n = reader.n_rows
        self.default_knn_k = default_knn_k
        self.shared = shared

    # -- entry points --------------------------------------------------------------------------

    def evaluate(self, node: Node, *, scoring: bool = True) -> Result:
        """``(mask, scores)`` of ``node`` restricted to live rows."""
        mask, scores = self.matches(node, scoring)
        if self.reader.doc_count != self.n:  # without dead rows every mask is already live-only
            mask = mask & self.reader.live
            if scores is not None:
                scores = scores * mask
        return mask, scores

    def matches(self, node: Node, scoring: bool = True) -> Result:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            if isinstance(node, dsl.Hybrid):
                raise ParsingError("[hybrid] query must be the top-level query of a request")
            raise ParsingError(f"unknown query [{type(node).__name__}]")
        return handler(self, node, scoring)

    def filter(self, nodes) -> np.ndarray:
        """Rows matching every node of ``nodes`` (filter context), not yet restricted to live rows."""
        mask = np.ones(self.n, bool)
        for node in nodes:
            mask &= self.clause_mask(node)
        return mask

    def clause_mask(self, node: Node) -> np.ndarray:
        """``node``'s mask in filter context, from the request's shared masks when another leg computed it.
        The result may be shared: callers combine it into arrays of their own and never change it."""
        if self.shared is None:
            return self.matches(node, False)[0]
        found = self.shared.get(id(node))
        if found is None or found[0] is not node:
            found = self.shared[id(node)] = (node, self.matches(node, False)[0])
        return found[1]

    # -- helpers -------------------------------------------------------------------------------

    def _none(self, scoring: bool) -> Result:
        return np.zeros(self.n, bool), (np.zeros(self.n, np.float64) if scoring else None)

    def _spec(self, field: str):
        return self.reader.mapping.fields.get(field)

    def _keyword_ords(self, field: str, values, case_insensitive: bool = False) -> np.ndarray:
        dictionary = self.reader.field_dictionary(field)
        if case_insensitive:
            wanted = {str(v).lower() for v in values}
            return np.array([i for i, t in enumerate(dictionary.terms) if t.lower() in wanted], np.int64)
        return dictionary.lookup(values)

    # -- leaves --------------------------------------------------------------------------------

    def _match_all(self, node: dsl.MatchAll, scoring: bool) -> Result:
        return _boosted(np.ones(self.n, bool), node.boost, scoring)

    def _match_none(self, node: dsl.MatchNone, scoring: bool) -> Result:
        return self._none(scoring)

    def _match(self, node: dsl.Match, scoring: bool) -> Result:
        spec = self._spec(node.field)
        if spec is None:
            return self._none(scoring)
        kind = column_kind(spec)
        if kind == KIND_LEN:
            if not bm25.query_terms(node.query):
                if node.zero_terms_query == "all":
                    return _boosted(np.ones(self.n, bool), node.boost, scoring)
                return self._none(scoring)
            mask, scores = bm25.match_text(self.reader, node.field, node.query, operator=node.operator,
                                           minimum_should_match=node.minimum_should_match, scoring=scoring)
            if scores is not None and node.boost != 1.0:
                scores = scores * node.boost
            return mask, scores
        if kind == KIND_VEC:
            raise IllegalArgument(f"field [{node.field}] of type [dense_vector] does not support [match] queries; "
                                  f"use [knn]")
        return self._term(dsl.Term(node.field, node.query, boost=node.boost), scoring)

    def _match_phrase(self, node: dsl.MatchPhrase, scoring: bool) -> Result:
        spec = self._spec(node.field)
        if spec is None:
            return self._none(scoring)
        words = tokenize(str(node.query)) if column_kind(spec) == KIND_LEN else None
        if node.prefix and (words or words is None):
            if words is None:  # a keyword's whole value starts with the query
                return self._pattern(dsl.Pattern("prefix", node.field, str(node.query), boost=node.boost), scoring)
            last = multiterm.expansions(self.reader, node.field, words[-1], node.max_expansions)
            mask, scores = phrase.phrase_match(self.reader, node.field, words[:-1], scoring, last=last)
        elif words is None or len(words) < 2:  # a keyword's whole value, one word or none: what match does
            return self._match(dsl.Match(node.field, node.query, operator="and", zero_terms_query=node.zero_terms_query,
                                         boost=node.boost), scoring)
        else:
            mask, scores = phrase.phrase_match(self.reader, node.field, words, scoring)
        if scores is not None and node.boost != 1.0:
            scores *= node.boost
        return mask, scores

    def _expand_fields(self, patterns) -> list[tuple[str, float]]:
        fields = self.reader.mapping.fields
        if patterns is None:
            return [(path, 1.0) for path, spec in fields.items() if column_kind(spec) == KIND_LEN]
        out: dict[str, float] = {}
        for pattern, boost in patterns:
            if "*" in pattern:
                import fnmatch

                for path, spec in fields.items():
                    if fnmatch.fnmatchcase(path, pattern) and column_kind(spec) in (KIND_LEN, KIND_ORD):
                        out.setdefault(path, boost)
            elif pattern in fields:
                out.setdefault(pattern, boost)
        return list(out.items())

    def _match_bool_prefix(self, node: dsl.MatchBoolPrefix, scoring: bool) -> Result:
        spec = self._spec(node.field)
        if spec is None:
            return self._none(scoring)
        if column_kind(spec) != KIND_LEN:  # a keyword's whole value, as its prefix
            return self._pattern(dsl.Pattern("prefix", node.field, str(node.query), boost=node.boost), scoring)
        words = tokenize(str(node.query))
        if not words:
            return self._none(scoring)
        clauses = (*(dsl.Term(node.field, word) for word in words[:-1]), dsl.Pattern("prefix", node.field, words[-1]))
        required = str(len(clauses)) if node.operator == "and" else node.minimum_should_match
        return self.matches(dsl.Bool(should=clauses, minimum_should_match=required, boost=node.boost), scoring)

    def _multi_match(self, node: dsl.MultiMatch, scoring: bool) -> Result:
        fields = self._expand_fields(node.fields)
        if not fields:
            return self._none(scoring)
        if node.type in ("phrase", "phrase_prefix"):
            results = (self._match_phrase(dsl.MatchPhrase(field, node.query, boost=field_boost,
                                                          prefix=node.type == "phrase_prefix",
                                                          max_expansions=node.max_expansions), scoring)
                       for field, field_boost in fields)
        elif node.type == "bool_prefix":  # each field's scores summed, as ES's bool_prefix does
            results = (self._match_bool_prefix(dsl.MatchBoolPrefix(field, node.query, operator=node.operator,
                                                                   minimum_should_match=node.minimum_should_match,
                                                                   boost=field_boost), scoring)
                       for field, field_boost in fields)
            return _best_of(self.n, results, scoring, None, node.boost)
        else:
            results = (self._match(dsl.Match(field, node.query, operator=node.operator,
                                             minimum_should_match=node.minimum_should_match, boost=field_boost),
                                   scoring) for field, field_boost in fields)
        return _best_of(self.n, results, scoring, None if node.type == "most_fields" else node.tie_breaker or 0.0,
                        node.boost)

    def _index_named(self, test: Callable[[str], bool], boost: float, scoring: bool) -> Result:
        """A query on ``_index``, the one value every row of this index holds: all rows when ``test`` passes its
        name, none when not (a search over many indices keeps or drops each whole)."""
        return _boosted(np.full(self.n, bool(test(self.reader.name))), boost, scoring)

    def _term(self, node: dsl.Term, scoring: bool) -> Result:
        if node.field == INDEX_FIELD:
            value = str(node.value)
            return self._index_named((lambda name: name.lower() == value.lower()) if node.case_insensitive
                                     else value.__eq__, node.boost, scoring)
        spec = self._spec(node.field)
        if spec is None:
            return self._none(scoring)
        kind = column_kind(spec)
        if kind == KIND_LEN:
            rows, weights = bm25.term_weights(self.reader, node.field, str(node.value))
            mask = np.zeros(self.n, bool)
            mask[rows] = True
            if not scoring:
                return mask, None
            scores = np.zeros(self.n, np.float64)
            scores[rows] = weights * node.boost
            return mask, scores
        if kind == KIND_VEC:
            raise IllegalArgument(f"field [{node.field}] of type [dense_vector] does not support [term] queries")
        return _boosted(self._equal_mask(spec, [node.value], node.case_insensitive), node.boost, scoring)

    def _equal_mask(self, spec, values, case_insensitive: bool = False) -> np.ndarray:
        kind = column_kind(spec)
        column = self.reader.column(spec.path)
        if kind == KIND_ORD:
            operands = [term_operand(spec, v) for v in values]
            return keyword_mask(column, self._keyword_ords(spec.path, operands, case_insensitive))
        operands = [o for o in (term_operand(spec, v) for v in values) if o is not None]
        if not operands:
            return np.zeros(self.n, bool)
        if len(operands) == 1:
            return (column.values == operands[0]) & column.present
        return np.isin(column.values, np.array(operands, column.values.dtype)) & column.present

    def _pattern(self, node: dsl.Pattern, scoring: bool) -> Result:
        if node.field == "_id":
            raise IllegalArgument(f"[{node.kind}] queries on [_id] are not supported; use an [ids] query or a "
                                  f"keyword field")
        if node.field == INDEX_FIELD:
            return self._index_named(multiterm.pattern_test(node), node.boost, scoring)
        spec = self._spec(node.field)
        if spec is None:
            return self._none(scoring)
        kind = column_kind(spec)
        if kind not in (KIND_ORD, KIND_LEN):
            raise IllegalArgument(f"field [{node.field}] of type [{spec.type}] does not support [{node.kind}] "
                                  f"queries; use a keyword or text field")
        if kind == KIND_LEN:  # the field's words, as they were indexed
            if node.lowercase_for_text:
                node = attrs.evolve(node, value=fold(node.value))
            return _boosted(multiterm.text_mask(self.reader, node), node.boost, scoring)
        # The dictionary keeps first-seen order, so the terms are read through once (as a keyword range is).
        test = multiterm.pattern_test(node)
        terms = self.reader.field_dictionary(node.field).terms
        ords = np.array([at for at, term in enumerate(terms) if test(term)], np.int64)
        return _boosted(keyword_mask(self.reader.column(node.field), ords), node.boost, scoring)

    def _fields_pattern(self, node: dsl.FieldsPattern, scoring: bool) -> Result:
        fields = self._expand_fields(node.fields)
        if not fields:
            return self._none(scoring)
        results = (self._pattern(dsl.Pattern("wildcard", field, node.value, boost=field_boost,
                                             lowercase_for_text=True), scoring) for field, field_boost in fields)
        return _best_of(self.n, results, scoring, 0.0, node.boost)

    def _terms(self, node: dsl.Terms, scoring: bool) -> Result:
        if node.field == INDEX_FIELD:
            return self._index_named({str(value) for value in node.values}.__contains__, node.boost, scoring)
        spec = self._spec(node.field)
        if spec is None or not node.values:
            return self._none(scoring)
        kind = column_kind(spec)
        if kind == KIND_LEN:
            mask = np.zeros(self.n, bool)
            for value in node.values:
                mask[bm25.term_weights(self.reader, node.field, str(value))[0]] = True
            return _boosted(mask, node.boost, scoring)
        if kind == KIND_VEC:
            raise IllegalArgument(f"field [{node.field}] of type [dense_vector] does not support [terms] queries")
        return _boosted(self._equal_mask(spec, node.values), node.boost, scoring)

    def _ids(self, node: dsl.Ids, scoring: bool) -> Result:
        mask = np.zeros(self.n, bool)
        rows = [row for row in self.reader.rows_of(node.values).values() if row < self.n]
        mask[np.array(rows, np.int64)] = True
        return _boosted(mask, node.boost, scoring)

    def _exists(self, node: dsl.Exists, scoring: bool) -> Result:
        fields = self.reader.mapping.fields
        if node.field in fields:
            mask = self.reader.column(node.field).present.copy()
        else:
            prefix = node.field + "."
            mask = np.zeros(self.n, bool)
            for path, spec in fields.items():
                if path.startswith(prefix) and spec.source_path is None:
                    mask |= self.reader.column(path).present
        return _boosted(mask, node.boost, scoring)

    def _range(self, node: dsl.Range, scoring: bool) -> Result:
        spec = self._spec(node.field)
        if spec is None:
            return self._none(scoring)
        kind = column_kind(spec)
        if kind == KIND_LEN:
            raise IllegalArgument(f"field [{node.field}] of type [text] does not support range queries; "
                                  f"use a keyword, numeric or date field")
        if kind == KIND_VEC:
            raise IllegalArgument(f"field [{node.field}] of type [dense_vector] does not support range queries")
        bounds = {}
        for op in ("gt", "gte", "lt", "lte"):
            value = getattr(node, op)
            if value is not None:
                bounds[op] = range_operand(spec, value, round_up=op in ("gt", "lte"), fmt=node.format)
        column = self.reader.column(node.field)
        if kind == KIND_ORD:
            terms = self.reader.field_dictionary(node.field).terms
            ords = np.array([i for i, t in enumerate(terms) if _in_bounds(t, bounds)], np.int64)
            return _boosted(keyword_mask(column, ords), node.boost, scoring)
        mask = column.present.copy()
        values = column.values
        if "gt" in bounds:
            mask &= values > bounds["gt"]
        if "gte" in bounds:
            mask &= values >= bounds["gte"]
        if "lt" in bounds:
            mask &= values < bounds["lt"]
        if "lte" in bounds:
            mask &= values <= bounds["lte"]
        return _boosted(mask, node.boost, scoring)

    # -- compound ------------------------------------------------------------------------------

    def _bool(self, node: dsl.Bool, scoring: bool) -> Result:
        if not (node.must or node.filter or node.should or node.must_not):
            # ES turns a bool without clauses into match_all, whatever its minimum_should_match.
            return _boosted(np.ones(self.n, bool), node.boost, scoring)
        mask = np.ones(self.n, bool)
        scores = np.zeros(self.n, np.float64) if scoring else None
        for clause in node.must:
            m, s = self.matches(clause, scoring)
            mask &= m
            if scoring:
                scores += s
        for clause in node.filter:
            mask &= self.clause_mask(clause)
        for clause in node.must_not:
            mask &= ~self.clause_mask(clause)
        if node.should:
            default = 0 if (node.must or node.filter) else 1
            required = dsl.minimum_should_match(node.minimum_should_match, len(node.should), default)
            if required > len(node.should):
                return self._none(scoring)
            counts = np.zeros(self.n, np.int32) if required > 0 else None
            for clause in node.should:
                m, s = self.matches(clause, scoring)
                if counts is not None:
                    counts += m
                if scoring:
                    scores += s
            if counts is not None:
                mask &= counts >= required
        elif node.minimum_should_match is not None and dsl.minimum_should_match(node.minimum_should_match, 0, 0) > 0:
            return self._none(scoring)
        if not scoring:
            return mask, None
        if not (node.must or node.should):
            # Only filter / must_not clauses (or none at all): ES scores the empty bool 1, a pure filter 0.
            scores = mask * (1.0 if not (node.filter or node.must_not) else 0.0)
        scores *= mask
        if node.boost != 1.0:
            scores *= node.boost
        return mask, scores

    def _dis_max(self, node: dsl.DisMax, scoring: bool) -> Result:
        return _best_of(self.n, (self.matches(clause, scoring) for clause in node.queries), scoring,
                        node.tie_breaker, node.boost)

    def _constant_score(self, node: dsl.ConstantScore, scoring: bool) -> Result:
        return _boosted(self.matches(node.filter, False)[0], node.boost, scoring)

    def _knn(self, node: dsl.Knn, scoring: bool) -> Result:
        if node.vector is None:
            raise IllegalArgument(f"[knn] on field [{node.field}] has no query vector")
        k = node.k or node.num_candidates or self.default_knn_k
        candidates = self.filter(node.filter) if node.filter else None
        mask, scores = knn.knn_scores(self.reader, node.field, node.vector, candidates,
                                      min_similarity=node.similarity)
        ranked = top_k(scores, mask, k)
        out = np.zeros(self.n, bool)
        out[ranked.rows] = True
        if not scoring:
            return out, None
        result = np.zeros(self.n, np.float64)
        result[ranked.rows] = ranked.scores * node.boost
        return out, result


# Dispatch by node type through the class, not a per-instance dict of bound methods: that would be a
# reference cycle keeping the reader (and its LMDB read slot) alive until a garbage collection.
_HANDLERS: dict[type, Callable[[Evaluator, Any, bool], Result]] = {
    dsl.MatchAll: Evaluator._match_all,
    dsl.MatchNone: Evaluator._match_none,
    dsl.Match: Evaluator._match,
    dsl.MatchPhrase: Evaluator._match_phrase,
    dsl.MatchBoolPrefix: Evaluator._match_bool_prefix,
    dsl.MultiMatch: Evaluator._multi_match,
    dsl.Term: Evaluator._term,
    dsl.Terms: Evaluator._terms,
    dsl.Pattern: Evaluator._pattern,
    dsl.FieldsPattern: Evaluator._fields_pattern,
    dsl.Ids: Evaluator._ids,
    dsl.Exists: Evaluator._exists,
    dsl.Range: Evaluator._range,
    dsl.Bool: Evaluator._bool,
    dsl.DisMax: Evaluator._dis_max,
    dsl.ConstantScore: Evaluator._constant_score,
    dsl.Knn: Evaluator._knn,
}


def _in_bounds(term: str, bounds: dict[str, Any]) -> bool:
    if "gt" in bounds and not term > bounds["gt"]:
        return False
    if "gte" in bounds and not term >= bounds["gte"]:
        return False
    if "lt" in bounds and not term < bounds["lt"]:
        return False
    if "lte" in bounds and not term <= bounds["lte"]:
        return False
    return True


def filter_mask(reader, clause: Any = None) -> np.ndarray:
    """Live rows of ``reader`` matching ``clause`` in filter context, as a bool array over ``reader.n_rows``.

    ``clause`` is an ES query dict (``{"term": {"kind": "note"}}``, a ``bool`` of
    filters, ...), an already parsed node, a list of either (all must match),
    or None (every live row). Evaluated on columns only; raises the same
    parsing/illegal-argument errors as a search.
    """
    if clause is None:
        return reader.live.copy()
    clauses = clause if isinstance(clause, list) else [clause]
    nodes = [c if not isinstance(c, dict) else dsl.parse_query(c, where="filter") for c in clauses]
    return Evaluator(reader).filter(nodes) & reader.live
