"""The query DSL subset: ES JSON query clauses parsed into a small tree of frozen attrs nodes.

Parsing checks shapes only (unknown query types, malformed clauses, bad
parameter values); what depends on the mapping (a ``knn`` on a field that is
not a ``dense_vector``, a ``range`` on a ``text`` field) is checked when a node
meets an index, in :mod:`xerj_core.query.evaluate`. Every refusal is a
:class:`~xerj_core.errors.ParsingError` (``parsing_exception``) or an
:class:`~xerj_core.errors.IllegalArgument` (``illegal_argument_exception``)
whose reason names the clause; nothing malformed is ever read as match-all.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Union

import attrs
import numpy as np

from xerj_core import params
from xerj_core.errors import IllegalArgument, ParsingError

MAX_NUM_CANDIDATES = 10_000
# Clauses one bool list may hold (ES's indices.query.bool.max_clause_count floor): 100,000 should
# clauses took a worker 13 s to answer; a client that means it can use `terms`.
MAX_CLAUSE_COUNT = 4096
DEFAULT_RANK_CONSTANT = 60
DEFAULT_RANK_WINDOW = 100
FUSIONS = ("rrf", "linear")
NORMALIZERS = ("none", "minmax", "l2_norm")


@attrs.frozen
class MatchAll:
    boost: float = 1.0


@attrs.frozen
class MatchNone:
    pass


@attrs.frozen
class Match:
    """Analyzed full-text match on one field: one BM25 term clause per query token (repeats count)."""

    field: str
    query: Any
    operator: str = "or"
    minimum_should_match: str | None = None
    zero_terms_query: str = "none"
    boost: float = 1.0


@attrs.frozen
class MatchPhrase:
    """The query's words side by side, in order, in one text field (see :mod:`xerj_core.query.phrase`); on a
    keyword field, a match of the whole value. With ``prefix`` (``match_phrase_prefix``) the last word is a
    prefix, standing for the first ``max_expansions`` words of the field that start with it."""

    field: str
    query: Any
    zero_terms_query: str = "none"
    boost: float = 1.0
    prefix: bool = False
    max_expansions: int = 50


@attrs.frozen
class MatchBoolPrefix:
    """``match_bool_prefix``: a ``bool`` of the query's words, each a ``term``, the last a ``prefix`` (a word
    being typed); ``operator`` and ``minimum_should_match`` apply to those clauses."""

    field: str
    query: Any
    operator: str = "or"
    minimum_should_match: str | None = None
    boost: float = 1.0


@attrs.frozen
class MultiMatch:
    """``match`` over several fields (``type`` ``phrase``: ``match_phrase``; ``phrase_prefix``:
    ``match_phrase_prefix``; ``bool_prefix``: ``match_bool_prefix``); ``fields`` holds ``(pattern, boost)``, None
    meaning every text field."""

    query: Any
    fields: tuple[tuple[str, float], ...] | None = None
    type: str = "best_fields"
    operator: str = "or"
    minimum_should_match: str | None = None
    tie_breaker: float | None = None
    boost: float = 1.0
    max_expansions: int = 50  # phrase_prefix: see MatchPhrase


MULTI_MATCH_TYPES = ("best_fields", "most_fields", "phrase", "phrase_prefix", "bool_prefix")


@attrs.frozen
class Term:
    field: str
    value: Any
    case_insensitive: bool = False
    boost: float = 1.0


@attrs.frozen
class Pattern:
    """``prefix`` (``value`` starts the term) or ``wildcard`` (``*`` any run of characters, ``?`` one, ``\\``
    escapes the next) over a keyword field's values or a text field's words; a match scores ``boost``."""

    kind: str
    field: str
    value: str
    case_insensitive: bool = False
    boost: float = 1.0
    # From a query string (``gra*``): on a text field the pattern is lowercased first, as its words were indexed.
    lowercase_for_text: bool = False


@attrs.frozen
class FieldsPattern:
    """An unfielded ``gra*`` of a query string: a ``wildcard`` over ``fields`` (``(pattern, boost)`` pairs; None:
    every text field), scored by its best field, as an unfielded word is."""

    value: str
    fields: tuple[tuple[str, float], ...] | None = None
    boost: float = 1.0


@attrs.frozen
class Terms:
    field: str
    values: tuple[Any, ...]
    boost: float = 1.0


@attrs.frozen
class Ids:
    values: tuple[str, ...]
    boost: float = 1.0


@attrs.frozen
class Exists:
    field: str
    boost: float = 1.0


@attrs.frozen
class Range:
    field: str
    gt: Any = None
    gte: Any = None
    lt: Any = None
    lte: Any = None
    format: str | None = None
    boost: float = 1.0


@attrs.frozen
class Bool:
    must: tuple["Node", ...] = ()
    filter: tuple["Node", ...] = ()
    should: tuple["Node", ...] = ()
    must_not: tuple["Node", ...] = ()
    minimum_should_match: str | None = None
    boost: float = 1.0


@attrs.frozen
class DisMax:
    """The rows any of ``queries`` matches, scored by the best of them plus ``tie_breaker`` times the others'."""

    queries: tuple["Node", ...]
    tie_breaker: float = 0.0
    boost: float = 1.0


@attrs.frozen
class ConstantScore:
    filter: "Node"
    boost: float = 1.0


@attrs.frozen
class Knn:
    """Exact nearest neighbours on a ``dense_vector`` field, among rows matching ``filter``.

    ``vector`` is None until a ``query_vector_builder`` (``builder`` =
    ``(model_id, model_text)``) has been embedded by the service. ``k`` None in a
    query clause means "as many as the request needs" (the evaluator's default).
    """

    field: str
    vector: tuple[float, ...] | None
    k: int | None = None
    num_candidates: int | None = None
    filter: tuple["Node", ...] = ()
    similarity: float | None = None
    boost: float = 1.0
    builder: tuple[str, str] | None = None


@attrs.frozen
class Hybrid:
    """Fusion of several ranked legs (a lexical query, a ``knn``, ...) into one ranking.

    ``fusion`` is ``rrf`` (reciprocal rank: sum of ``weight / (rank_constant +
    rank)``) or ``linear`` (sum of ``weight * normalized score``; ``normalizers``
    per leg). Each leg contributes its top ``rank_window_size`` hits.
    """

    legs: tuple["Node", ...]
    fusion: str = "rrf"
    rank_constant: int = DEFAULT_RANK_CONSTANT
    rank_window_size: int = DEFAULT_RANK_WINDOW
    weights: tuple[float, ...] | None = None
    normalizers: tuple[str, ...] | None = None


Node = Union[MatchAll, MatchNone, Match, MatchPhrase, MatchBoolPrefix, MultiMatch, Term, Pattern, FieldsPattern, Terms,
             Ids, Exists, Range, Bool, DisMax, ConstantScore, Knn, Hybrid]


# -- value helpers ------------------------------------------------------------------------------

def json_type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "START_OBJECT"
    if isinstance(value, list):
        return "START_ARRAY"
    if isinstance(value, bool):
        return "VALUE_BOOLEAN"
    if isinstance(value, (int, float)):
        return "VALUE_NUMBER"
    if value is None:
        return "VALUE_NULL"
    return "VALUE_STRING"


def as_float(value: Any, what: str) -> float:
    return params.number(value, what, ParsingError, source=params.ES_BODY)


def _vector(values: list, what: str) -> tuple[float, ...]:
    """A query vector's numbers: finite floats (JSON's) pass in one C-level check; anything else goes number by
    number through :func:`as_float`, which names the first it refuses."""
    if set(map(type, values)) == {float} and all(map(math.isfinite, values)):
        return tuple(values)
    return tuple(as_float(x, what) for x in values)


def as_int(value: Any, what: str) -> int:
    return params.integer(value, what, ParsingError, source=params.ES_BODY)


def as_bool(value: Any, what: str) -> bool:
    return params.flag(value, what, ParsingError, source=params.ES_BODY)


def _scalar(value: Any, what: str) -> Any:
    if isinstance(value, (dict, list)) or value is None:
        raise ParsingError(f"[{what}] expects a value, got [{json_type_name(value)}]")
    return value


_MSM = re.compile(r"^-?\d+%?$")


def _msm_spec(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ParsingError(f"[{what}] [minimum_should_match] must be an integer or a percentage, got [{value!r}]")
    spec = str(value).strip()
    if not _MSM.match(spec):
        raise ParsingError(f"[{what}] unsupported [minimum_should_match] [{value}]: use an integer or a percentage")
    return spec


def minimum_should_match(spec: str | None, optional_clauses: int, default: int) -> int:
    """How many optional clauses must match under an ES ``minimum_should_match`` spec (never below 0)."""
    if spec is None:
        return default
    if spec.endswith("%"):
        # Single-precision, like the reference implementation, so rounding edges agree.
        computed = float(np.float32(optional_clauses * int(spec[:-1])) * np.float32(0.01))
        result = optional_clauses + math.trunc(computed) if computed < 0 else math.trunc(computed)
    else:
        count = int(spec)
        result = optional_clauses + count if count < 0 else count
    return max(result, 0)


def _check_keys(body: dict[str, Any], allowed: set[str], query: str) -> None:
    for key in body:
        if key not in allowed:
            raise ParsingError(f"[{query}] query does not support [{key}]")


def _single_field(body: Any, query: str, extra: set[str] = frozenset()) -> tuple[str, Any, dict[str, Any]]:
    """``(field, value, other_keys)`` of a one-field query body such as ``{"title": "x"}``."""
    if not isinstance(body, dict):
        raise ParsingError(f"[{query}] query malformed, no start_object after query name")
    fields = [k for k in body if k not in extra]
    others = {k: v for k, v in body.items() if k in extra}
    if not fields:
        raise ParsingError(f"[{query}] query malformed, no field specified")
    if len(fields) > 1:
        raise ParsingError(f"[{query}] query doesn't support multiple fields, found [{fields[0]}] and [{fields[1]}]")
    return fields[0], body[fields[0]], others


def _clauses(value: Any, where: str) -> tuple[Node, ...]:
    items = value if isinstance(value, list) else [value]
    if len(items) > MAX_CLAUSE_COUNT:
        raise IllegalArgument(f"[{where}] has {len(items)} clauses: too many clauses, maxClauseCount is set "
                              f"to {MAX_CLAUSE_COUNT}")
    return tuple(parse_query(item, where=where) for item in items)


# -- parsers -------------------------------------------------------------------------------------

def _match_all(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[match_all] query malformed, no start_object after query name")
    _check_keys(body, {"boost", "_name"}, "match_all")
    return MatchAll(boost=as_float(body.get("boost", 1.0), "match_all.boost"))


def _match_none(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[match_none] query malformed, no start_object after query name")
    _check_keys(body, {"boost", "_name"}, "match_none")
    return MatchNone()


def _operator(value: Any, query: str) -> str:
    op = str(value).lower()
    if op not in ("or", "and"):
        raise ParsingError(f"[{query}] unknown operator [{value}], expected [or] or [and]")
    return op


def _match(body: Any) -> Node:
    field, value, _ = _single_field(body, "match")
    if not isinstance(value, dict):
        return Match(field, _scalar(value, "match"))
    _check_keys(value, {"query", "operator", "minimum_should_match", "boost", "zero_terms_query", "_name",
                        "lenient"}, "match")
    return Match(
        field,
        _match_query(value, field, "match"),
        operator=_operator(value.get("operator", "or"), "match"),
        minimum_should_match=_msm_spec(value.get("minimum_should_match"), "match"),
        zero_terms_query=_zero_terms(value, "match"),
        boost=as_float(value.get("boost", 1.0), "match.boost"),
    )


def _query_string(body: Any) -> Node:
    """``query_string`` as ``q=`` reads it (see ``xerj_core.query.querystring``), with ``default_field``,
    ``default_operator``, ``fields`` and ``boost``."""
    if not isinstance(body, dict):
        raise ParsingError("[query_string] query malformed, no start_object after query name")
    _check_keys(body, {"query", "default_field", "default_operator", "fields", "boost", "_name", "lenient"},
                "query_string")
    if not isinstance(body.get("query"), str):
        raise ParsingError("[query_string] requires a [query] string")
    default_field = body.get("default_field")
    if default_field is not None and not isinstance(default_field, str):
        raise ParsingError("[query_string] [default_field] must be a field name")
    fields = parse_field_patterns(body["fields"], "query_string") if body.get("fields") is not None else None
    from xerj_core.query.querystring import parse_q  # it builds this module's nodes

    node = parse_q(body["query"], default_field=default_field, default_operator=body.get("default_operator", "or"),
                   fields=fields)
    boost = as_float(body.get("boost", 1.0), "query_string.boost")
    return attrs.evolve(node, boost=boost) if boost != 1.0 and not isinstance(node, MatchNone) else node


def _dis_max(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[dis_max] query malformed, no start_object after query name")
    _check_keys(body, {"queries", "tie_breaker", "boost", "_name"}, "dis_max")
    if not isinstance(body.get("queries"), list) or not body["queries"]:
        raise ParsingError("[dis_max] requires [queries]: a list of one query or more")
    tie = as_float(body.get("tie_breaker", 0.0), "dis_max.tie_breaker")
    if not 0.0 <= tie <= 1.0:
        raise IllegalArgument(f"[dis_max] [tie_breaker] must be between 0 and 1, got [{tie}]")
    return DisMax(_clauses(body["queries"], "dis_max.queries"), tie_breaker=tie,
                  boost=as_float(body.get("boost", 1.0), "dis_max.boost"))


def _match_query(value: dict[str, Any], field: str, query: str) -> Any:
    """The ``query`` of a match-like clause's object form, which it requires."""
    if "query" not in value:
        raise ParsingError(f"[{query}] requires query value for field [{field}]")
    return _scalar(value["query"], f"{query}.query")


def _zero_terms(value: dict[str, Any], query: str) -> str:
    zero = str(value.get("zero_terms_query", "none")).lower()
    if zero not in ("none", "all"):
        raise ParsingError(f"[{query}] unsupported zero_terms_query value [{zero}]")
    return zero


def _slop(value: Any, query: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ParsingError(f"[{query}] [slop] must be a non-negative integer, got [{value}]")
    return value


def _match_phrase(body: Any, name: str = "match_phrase") -> Node:
    field, value, _ = _single_field(body, name)
    prefix = name == "match_phrase_prefix"
    if not isinstance(value, dict):
        return MatchPhrase(field, _scalar(value, name), prefix=prefix)
    _check_keys(value, {"query", "slop", "boost", "zero_terms_query", "_name",
                        *(("max_expansions",) if prefix else ())}, name)
    query, zero = _match_query(value, field, name), _zero_terms(value, name)
    if _slop(value.get("slop", 0), name):
        raise IllegalArgument(f"[{name}] [slop] above 0 is not supported: the words must be side by side")
    boost = as_float(value.get("boost", 1.0), f"{name}.boost")
    return MatchPhrase(field, query, zero_terms_query=zero, boost=boost, prefix=prefix,
                       max_expansions=_max_expansions(value.get("max_expansions", 50), name))


def _max_expansions(value: Any, query: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParsingError(f"[{query}] [max_expansions] must be a positive integer, got [{value}]")
    return value


def _match_bool_prefix(body: Any) -> Node:
    field, value, _ = _single_field(body, "match_bool_prefix")
    if not isinstance(value, dict):
        return MatchBoolPrefix(field, _scalar(value, "match_bool_prefix"))
    _check_keys(value, {"query", "operator", "minimum_should_match", "boost", "_name"}, "match_bool_prefix")
    return MatchBoolPrefix(field, _match_query(value, field, "match_bool_prefix"),
                           operator=_operator(value.get("operator", "or"), "match_bool_prefix"),
                           minimum_should_match=_msm_spec(value.get("minimum_should_match"), "match_bool_prefix"),
                           boost=as_float(value.get("boost", 1.0), "match_bool_prefix.boost"))


def parse_field_patterns(fields: Any, query: str) -> tuple[tuple[str, float], ...]:
    """``["title^2", "body"]`` as ``(("title", 2.0), ("body", 1.0))``; patterns may hold ``*``."""
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
        raise ParsingError(f"[{query}] [fields] must be a list of field names")
    out = []
    for spec in fields:
        name, _, boost = spec.partition("^")
        out.append((name, as_float(boost, f"{query}.fields boost") if boost else 1.0))
    return tuple(out)


def _multi_match(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[multi_match] query malformed, no start_object after query name")
    _check_keys(body, {"query", "fields", "type", "operator", "minimum_should_match", "tie_breaker", "boost",
                       "_name", "lenient", "slop", "max_expansions"}, "multi_match")
    if "query" not in body:
        raise ParsingError("[multi_match] requires query value")
    kind = str(body.get("type", "best_fields")).lower()
    if kind not in MULTI_MATCH_TYPES:
        raise ParsingError(f"[multi_match] query type [{kind}] is not supported; use one of "
                           f"[{', '.join(MULTI_MATCH_TYPES)}]")
    if _slop(body.get("slop", 0), "multi_match") and kind in ("phrase", "phrase_prefix"):  # others ignore it, as ES
        raise IllegalArgument("[multi_match] [slop] above 0 is not supported: the words must be side by side")
    fields = parse_field_patterns(body["fields"], "multi_match") if body.get("fields") is not None else None
    tie = body.get("tie_breaker")
    return MultiMatch(
        query=_scalar(body["query"], "multi_match.query"),
        fields=fields,
        type=kind,
        max_expansions=_max_expansions(body.get("max_expansions", 50), "multi_match"),
        operator=_operator(body.get("operator", "or"), "multi_match"),
        minimum_should_match=_msm_spec(body.get("minimum_should_match"), "multi_match"),
        tie_breaker=None if tie is None else as_float(tie, "multi_match.tie_breaker"),
        boost=as_float(body.get("boost", 1.0), "multi_match.boost"),
    )


def _term(body: Any) -> Node:
    field, value, _ = _single_field(body, "term")
    if not isinstance(value, dict):
        node = Term(field, _scalar(value, "term"))
        # _id is a metadata field, not a column: a term on it is an ids query, as in ES.
        return Ids((str(node.value),)) if field == "_id" else node
    _check_keys(value, {"value", "boost", "case_insensitive", "_name"}, "term")
    if "value" not in value:
        raise ParsingError("[term] query requires a [value]")
    if field == "_id":
        return Ids((str(_scalar(value["value"], "term.value")),), boost=as_float(value.get("boost", 1.0), "term.boost"))
    return Term(field, _scalar(value["value"], "term.value"),
                case_insensitive=as_bool(value.get("case_insensitive", False), "term.case_insensitive"),
                boost=as_float(value.get("boost", 1.0), "term.boost"))


def _pattern(kind: str) -> Callable[[Any], Node]:
    """The parser of ``prefix`` or ``wildcard``: ``{field: value}`` or ``{field: {value, case_insensitive, boost,
    rewrite}}`` (``wildcard`` also takes its pattern as ``wildcard``)."""
    names = ("value", "wildcard") if kind == "wildcard" else ("value",)

    def parse(body: Any) -> Node:
        field, value, _ = _single_field(body, kind)
        options: dict[str, Any] = {}
        if isinstance(value, dict):
            _check_keys(value, {*names, "boost", "case_insensitive", "rewrite", "_name"}, kind)
            given = [name for name in names if name in value]
            if len(given) != 1:
                raise ParsingError(f"[{kind}] query requires a [value]" if not given
                                   else f"[{kind}] query takes one of [value] and [wildcard], not both")
            options, value = value, value[given[0]]
        if not isinstance(value, str):
            raise ParsingError(f"[{kind}] query on [{field}] needs a string, got a [{json_type_name(value)}]")
        return Pattern(kind, field, value,
                       case_insensitive=as_bool(options.get("case_insensitive", False), f"{kind}.case_insensitive"),
                       boost=as_float(options.get("boost", 1.0), f"{kind}.boost"))
    return parse


def _terms(body: Any) -> Node:
    field, values, others = _single_field(body, "terms", extra={"boost", "_name"})
    if isinstance(values, dict):
        raise ParsingError("[terms] query lookup is not supported; give the values as an array")
    if not isinstance(values, list):
        raise ParsingError(f"[terms] query does not support [{field}] with a [{json_type_name(values)}]; expected an array")
    if field == "_id":
        return Ids(tuple(str(_scalar(v, "terms")) for v in values), boost=as_float(others.get("boost", 1.0),
                                                                                  "terms.boost"))
    return Terms(field, tuple(_scalar(v, "terms") for v in values),
                 boost=as_float(others.get("boost", 1.0), "terms.boost"))


def _ids(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[ids] query malformed, no start_object after query name")
    _check_keys(body, {"values", "boost", "_name"}, "ids")
    values = body.get("values", [])
    if not isinstance(values, list):
        raise ParsingError("[ids] [values] must be an array")
    return Ids(tuple(str(_scalar(v, "ids.values")) for v in values), boost=as_float(body.get("boost", 1.0), "ids.boost"))


def _exists(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[exists] query malformed, no start_object after query name")
    _check_keys(body, {"field", "boost", "_name"}, "exists")
    field = body.get("field")
    if not isinstance(field, str) or not field:
        raise ParsingError("[exists] must be provided with a [field]")
    return Exists(field, boost=as_float(body.get("boost", 1.0), "exists.boost"))


def _range(body: Any) -> Node:
    field, value, _ = _single_field(body, "range")
    if not isinstance(value, dict):
        raise ParsingError(f"[range] query malformed, [{field}] must be an object")
    _check_keys(value, {"gt", "gte", "lt", "lte", "format", "boost", "_name", "time_zone", "relation"}, "range")
    tz = value.get("time_zone")
    if tz is not None and str(tz).upper() not in ("UTC", "Z", "+00:00", "00:00", "ETC/UTC", "GMT"):
        raise ParsingError(f"[range] only the UTC [time_zone] is supported, got [{tz}]")
    relation = value.get("relation")
    if relation is not None and str(relation).lower() != "intersects":
        raise ParsingError(f"[range] [relation] [{relation}] is only meaningful on range fields")
    bounds = {}
    for key in ("gt", "gte", "lt", "lte"):
        if value.get(key) is not None:
            bounds[key] = _scalar(value[key], f"range.{key}")
    fmt = value.get("format")
    return Range(field, format=None if fmt is None else str(fmt), boost=as_float(value.get("boost", 1.0), "range.boost"),
                 **bounds)


def _bool(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[bool] query malformed, no start_object after query name")
    _check_keys(body, {"must", "filter", "should", "must_not", "minimum_should_match", "boost", "_name",
                       "adjust_pure_negative"}, "bool")
    return Bool(
        must=_clauses(body.get("must", []), "bool.must"),
        filter=_clauses(body.get("filter", []), "bool.filter"),
        should=_clauses(body.get("should", []), "bool.should"),
        must_not=_clauses(body.get("must_not", []), "bool.must_not"),
        minimum_should_match=_msm_spec(body.get("minimum_should_match"), "bool"),
        boost=as_float(body.get("boost", 1.0), "bool.boost"),
    )


def _constant_score(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[constant_score] query malformed, no start_object after query name")
    _check_keys(body, {"filter", "boost", "_name"}, "constant_score")
    if "filter" not in body:
        raise ParsingError("[constant_score] requires a 'filter' element")
    return ConstantScore(parse_query(body["filter"], where="constant_score.filter"),
                         boost=as_float(body.get("boost", 1.0), "constant_score.boost"))


def parse_knn(body: Any, *, where: str = "knn", top_level: bool = False) -> Knn:
    """A ``knn`` clause (top-level section, retriever or query); checks shapes and bounds, not the mapping."""
    if not isinstance(body, dict):
        raise ParsingError(f"[{where}] malformed, expected an object")
    _check_keys(body, {"field", "query_vector", "query_vector_builder", "k", "num_candidates", "filter",
                       "similarity", "boost", "_name"}, "knn")
    field = body.get("field")
    if not isinstance(field, str) or not field:
        raise ParsingError(f"[{where}] requires a [field]")
    vector = body.get("query_vector")
    builder = body.get("query_vector_builder")
    if (vector is None) == (builder is None):
        raise IllegalArgument(f"[{where}] requires exactly one of [query_vector] or [query_vector_builder]")
    parsed_vector = None
    parsed_builder = None
    if vector is not None:
        if not isinstance(vector, list) or not vector:
            raise ParsingError(f"[{where}] [query_vector] must be a non-empty array of numbers")
        parsed_vector = _vector(vector, f"{where}.query_vector")
    else:
        embed = builder.get("text_embedding") if isinstance(builder, dict) else None
        if not isinstance(embed, dict) or len(builder) != 1:
            raise ParsingError(f"[{where}] [query_vector_builder] supports only [text_embedding]")
        model, text = embed.get("model_id"), embed.get("model_text")
        if not isinstance(model, str) or not isinstance(text, str):
            raise ParsingError(f"[{where}] [text_embedding] requires [model_id] and [model_text] strings")
        parsed_builder = (model, text)
    k = body.get("k")
    k = None if k is None else as_int(k, f"{where}.k")
    nc = body.get("num_candidates")
    nc = None if nc is None else as_int(nc, f"{where}.num_candidates")
    if k is not None and k < 1:
        raise IllegalArgument(f"[k] must be greater than 0 in [{where}]")
    if nc is not None:
        if nc < 1:
            raise IllegalArgument(f"[num_candidates] must be greater than 0 in [{where}]")
        if nc > MAX_NUM_CANDIDATES:
            raise IllegalArgument(f"[num_candidates] cannot exceed [{MAX_NUM_CANDIDATES}]")
        if k is not None and nc < k:
            raise IllegalArgument("[num_candidates] cannot be less than [k]")
    if top_level and k is not None and k > MAX_NUM_CANDIDATES:
        raise IllegalArgument(f"[k] cannot exceed [{MAX_NUM_CANDIDATES}]")
    filters = _clauses(body["filter"], f"{where}.filter") if body.get("filter") is not None else ()
    similarity = body.get("similarity")
    return Knn(field=field, vector=parsed_vector, k=k, num_candidates=nc, filter=filters,
               similarity=None if similarity is None else as_float(similarity, f"{where}.similarity"),
               boost=as_float(body.get("boost", 1.0), f"{where}.boost"), builder=parsed_builder)


def _knn(body: Any) -> Node:
    return parse_knn(body, where="knn")


def parse_fusion_options(body: dict[str, Any], legs: int, where: str) -> dict[str, Any]:
    """The shared fusion parameters of ``hybrid`` and the retrievers, validated."""
    fusion = str(body.get("fusion", "rrf")).lower()
    if fusion not in FUSIONS:
        raise IllegalArgument(f"[{where}] unsupported fusion [{body.get('fusion')}]; supported: [rrf, linear]")
    rank_constant = as_int(body.get("rank_constant", DEFAULT_RANK_CONSTANT), f"{where}.rank_constant")
    if rank_constant < 1:
        raise IllegalArgument(f"[rank_constant] must be greater than or equal to [1] for [{where}]")
    window = as_int(body.get("rank_window_size", body.get("window_size", DEFAULT_RANK_WINDOW)),
                    f"{where}.rank_window_size")
    if window < 1:
        raise IllegalArgument(f"[rank_window_size] must be greater than or equal to [1] for [{where}]")
    weights = body.get("weights")
    if weights is not None:
        if not isinstance(weights, list) or len(weights) != legs:
            raise IllegalArgument(f"[{where}] [weights] must be an array with one number per leg ({legs})")
        weights = tuple(as_float(w, f"{where}.weights") for w in weights)
        if any(w < 0 for w in weights):
            raise IllegalArgument(f"[{where}] [weights] must not be negative")
    normalizer = body.get("normalizer")
    normalizers = None
    if normalizer is not None:
        normalizer = normalizer_name(normalizer, where)
        normalizers = (normalizer,) * legs
    return {"fusion": fusion, "rank_constant": rank_constant, "rank_window_size": window, "weights": weights,
            "normalizers": normalizers}


def normalizer_name(value: Any, where: str) -> str:
    name = str(value).lower().replace("min_max", "minmax")
    if name not in NORMALIZERS:
        raise IllegalArgument(f"[{where}] unknown normalizer [{value}]; supported: [none, minmax, l2_norm]")
    return name


def _hybrid(body: Any) -> Node:
    if not isinstance(body, dict):
        raise ParsingError("[hybrid] query malformed, no start_object after query name")
    _check_keys(body, {"queries", "fusion", "rank_constant", "rank_window_size", "window_size", "weights",
                       "normalizer"}, "hybrid")
    queries = body.get("queries")
    if not isinstance(queries, list) or len(queries) < 1:
        raise ParsingError("[hybrid] requires [queries]: an array of at least one query")
    legs = tuple(parse_query(q, where="hybrid.queries") for q in queries)
    options = parse_fusion_options(body, len(legs), "hybrid")
    if options["normalizers"] is None and options["fusion"] == "linear":
        options["normalizers"] = ("minmax",) * len(legs)
    return Hybrid(legs=legs, **options)


_PARSERS: dict[str, Callable[[Any], Node]] = {
    "match_all": _match_all,
    "match_none": _match_none,
    "match": _match,
    "match_phrase": _match_phrase,
    "match_phrase_prefix": lambda body: _match_phrase(body, "match_phrase_prefix"),
    "match_bool_prefix": _match_bool_prefix,
    "multi_match": _multi_match,
    "term": _term,
    "terms": _terms,
    "prefix": _pattern("prefix"),
    "wildcard": _pattern("wildcard"),
    "ids": _ids,
    "exists": _exists,
    "range": _range,
    "bool": _bool,
    "dis_max": _dis_max,
    "query_string": _query_string,
    "constant_score": _constant_score,
    "knn": _knn,
    "hybrid": _hybrid,
}

QUERY_TYPES = tuple(_PARSERS)


def parse_query(obj: Any, *, where: str = "query", top_level: bool = False) -> Node:
    """Parse one ES query clause (``{"match": {...}}``) into a node, or raise a parsing_exception.

    ``hybrid`` is accepted only when ``top_level`` is true: fusion ranks a whole
    request, it is not a clause with a per-document score.
    """
    if not isinstance(obj, dict):
        raise ParsingError(f"[{where}] query malformed, must start with start_object")
    if not obj:
        raise ParsingError(f"[{where}] query malformed, empty clause found")
    kinds = list(obj)
    if len(kinds) > 1:
        raise ParsingError(f"[{kinds[0]}] malformed query, expected [END_OBJECT] but found [FIELD_NAME]")
    kind = kinds[0]
    parser = _PARSERS.get(kind)
    if parser is None:
        raise ParsingError(f"unknown query [{kind}]")
    node = parser(obj[kind])
    if isinstance(node, Hybrid) and not top_level:
        raise ParsingError("[hybrid] query must be the top-level query of a request")
    return node


def transform(node: Node, fn: Callable[[Node], Node]) -> Node:
    """A copy of the tree with ``fn`` applied to every node, children first."""
    if isinstance(node, Bool):
        node = attrs.evolve(node, must=tuple(transform(c, fn) for c in node.must),
                            filter=tuple(transform(c, fn) for c in node.filter),
                            should=tuple(transform(c, fn) for c in node.should),
                            must_not=tuple(transform(c, fn) for c in node.must_not))
    elif isinstance(node, DisMax):
        node = attrs.evolve(node, queries=tuple(transform(c, fn) for c in node.queries))
    elif isinstance(node, ConstantScore):
        node = attrs.evolve(node, filter=transform(node.filter, fn))
    elif isinstance(node, Knn):
        node = attrs.evolve(node, filter=tuple(transform(c, fn) for c in node.filter))
    elif isinstance(node, Hybrid):
        node = attrs.evolve(node, legs=tuple(transform(c, fn) for c in node.legs))
    return fn(node)


def walk(node: Node):
    """Every node of a tree, parents first."""
    yield node
    if isinstance(node, Bool):
        for child in (*node.must, *node.filter, *node.should, *node.must_not):
            yield from walk(child)
    elif isinstance(node, DisMax):
        for child in node.queries:
            yield from walk(child)
    elif isinstance(node, ConstantScore):
        yield from walk(node.filter)
    elif isinstance(node, Knn):
        for child in node.filter:
            yield from walk(child)
    elif isinstance(node, Hybrid):
        for child in node.legs:
            yield from walk(child)
