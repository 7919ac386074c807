"""A search or count request (JSON body plus URL parameters) parsed into one validated record."""

from __future__ import annotations

from typing import Any

import attrs

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.params import QUERY, flag, refuse_unknown
from xerj_core.query import dsl
from xerj_core.query.aggs import AggSpec, parse_aggs
from xerj_core.query.dsl import Node, as_bool, as_float, as_int
from xerj_core.query.querystring import parse_q
from xerj_core.query.highlight import Highlight, parse_highlight

MAX_RESULT_WINDOW = 10_000
DEFAULT_TRACK_TOTAL_HITS = 10_000

_UNSUPPORTED_BODY = {"collapse", "rescore", "suggest", "script_fields",
                     "indices_boost", "runtime_mappings", "docvalue_fields", "stored_fields", "fields", "slice",
                     "stats", "terminate_after", "ext", "sub_searches"}
_FALSE_ONLY_BODY = {"explain", "profile", "seq_no_primary_term"}
# URL parameters that shape transport or output formatting elsewhere; they do not change the answer.
_IGNORED_PARAMS = {"timeout", "request_cache", "preference", "routing", "search_type", "pretty", "human",
                   "filter_path", "error_trace", "batched_reduce_size", "ccs_minimize_roundtrips",
                   "allow_partial_search_results", "max_concurrent_shard_requests", "pre_filter_shard_size",
                   "format", "source", "refresh"}
_SEARCH_PARAMS = {"q", "df", "default_operator", "size", "from", "sort", "_source", "_source_includes",
                  "_source_excludes", "track_total_hits", "ignore_unavailable", "allow_no_indices",
                  "expand_wildcards", "version", "track_scores", "rest_total_hits_as_int", "min_score",
                  "lenient", "analyze_wildcard", "typed_keys", "scroll"}


@attrs.frozen
class SortKey:
    field: str  # a field path, "_score" or "_doc"
    descending: bool
    missing: Any = "_last"  # "_last", "_first" or a substitute value
    mode: str | None = None  # min / max for multi-valued fields (default: min ascending, max descending)
    unmapped_type: str | None = None


@attrs.frozen
class SourceFilter:
    enabled: bool = True
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()


@attrs.frozen
class PointInTime:
    id: str
    keep_alive: str | None = None


@attrs.frozen
class SearchRequest:
    query: Node | None = None
    knn: tuple[dsl.Knn, ...] = ()
    hybrid: dsl.Hybrid | None = None
    from_: int = 0
    size: int = 10
    sort: tuple[SortKey, ...] | None = None
    source: SourceFilter = SourceFilter()
    track_total_hits: bool | int = DEFAULT_TRACK_TOTAL_HITS
    total_as_int: bool = False
    typed_keys: bool = False
    aggs: tuple[AggSpec, ...] = ()
    post_filter: Node | None = None
    min_score: float | None = None
    track_scores: bool = False
    version: bool = False
    ignore_unavailable: bool = False
    allow_no_indices: bool = True
    expand_wildcards: str = "open"
    search_after: tuple[Any, ...] | None = None
    pit: PointInTime | None = None
    scroll: str | None = None  # the keep-alive of a scroll this search opens
    highlight: Highlight | None = None

    @property
    def window(self) -> int:
        return self.from_ + self.size

    @property
    def sorts_by_field(self) -> bool:
        return self.sort is not None and any(key.field != "_score" for key in self.sort)


# -- pieces ----------------------------------------------------------------------------------------

def parse_sort(value: Any) -> tuple[SortKey, ...]:
    """ES sort: ``"f"``, ``{"f": "desc"}``, ``{"f": {"order": "desc", "missing": "_first"}}`` or a list of them."""
    items = value if isinstance(value, list) else [value]
    keys = []
    for item in items:
        if isinstance(item, str):
            if item == "_score":
                keys.append(SortKey("_score", True))
            else:
                keys.append(SortKey(item, False))
            continue
        if not isinstance(item, dict) or len(item) != 1:
            raise ParsingError(f"[sort] malformed: expected a field name or an object with one field, got [{item!r}]")
        (field, spec), = item.items()
        default_desc = field == "_score"
        if isinstance(spec, str):
            keys.append(SortKey(field, _order(spec)))
            continue
        if not isinstance(spec, dict):
            raise ParsingError(f"[sort] malformed: [{field}] expects an order or an object")
        for key in spec:
            if key not in ("order", "missing", "mode", "unmapped_type", "format", "numeric_type"):
                raise ParsingError(f"[sort] [{field}] does not support [{key}]")
        mode = spec.get("mode")
        if mode is not None and mode not in ("min", "max"):
            raise IllegalArgument(f"[sort] mode [{mode}] is not supported on [{field}]; use [min] or [max]")
        keys.append(SortKey(field, _order(spec["order"]) if "order" in spec else default_desc,
                            missing=spec.get("missing", "_last"), mode=mode,
                            unmapped_type=spec.get("unmapped_type")))
    return tuple(keys)


def _order(value: Any) -> bool:
    order = str(value).lower()
    if order not in ("asc", "desc"):
        raise ParsingError(f"[sort] unknown order [{value}], expected [asc] or [desc]")
    return order == "desc"


def _sort_param(text: str) -> tuple[SortKey, ...]:
    keys = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        field, _, order = part.rpartition(":") if ":" in part else (part, "", "")
        if not field:
            field, order = order, ""
        if order:
            keys.append(SortKey(field, _order(order)))
        else:
            keys.append(SortKey(field, field == "_score"))
    return tuple(keys)


def parse_source(value: Any) -> SourceFilter:
    """``_source``: a bool, a pattern, a list of patterns, or ``{"includes": [...], "excludes": [...]}``."""
    if value is None or value is True:
        return SourceFilter()
    if value is False:
        return SourceFilter(enabled=False)
    if isinstance(value, str):
        return SourceFilter(includes=(value,))
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise ParsingError("[_source] patterns must be strings")
        return SourceFilter(includes=tuple(value))
    if isinstance(value, dict):
        for key in value:
            if key not in ("includes", "include", "excludes", "exclude"):
                raise ParsingError(f"[_source] unknown key [{key}]")

        def patterns(*names: str) -> tuple[str, ...]:
            for name in names:
                if name in value:
                    found = value[name]
                    found = [found] if isinstance(found, str) else found
                    if not isinstance(found, list) or not all(isinstance(v, str) for v in found):
                        raise ParsingError(f"[_source] [{name}] must be a pattern or a list of patterns")
                    return tuple(found)
            return ()

        return SourceFilter(includes=patterns("includes", "include"), excludes=patterns("excludes", "exclude"))
    raise ParsingError(f"[_source] malformed: [{value!r}]")


def _track_total_hits(value: Any) -> bool | int:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    number = as_int(value, "track_total_hits")
    if number < -1:
        raise IllegalArgument(f"[track_total_hits] parameter must be positive or equals to -1, got {number}")
    return True if number == -1 else number


# -- retrievers ------------------------------------------------------------------------------------

def parse_retriever(body: Any, where: str = "retriever") -> Node:
    """ES retrievers (``standard``, ``knn``, ``rrf``, ``linear``) as query nodes; compound ones become :class:`dsl.Hybrid`."""
    if not isinstance(body, dict) or len(body) != 1:
        raise ParsingError(f"[{where}] must be an object naming exactly one retriever")
    (kind, spec), = body.items()
    if not isinstance(spec, dict):
        raise ParsingError(f"[{where}] [{kind}] must be an object")
    if kind == "standard":
        for key in spec:
            if key not in ("query", "filter", "min_score"):
                raise ParsingError(f"[{where}.standard] does not support [{key}]")
        query = dsl.parse_query(spec["query"], where=f"{where}.standard.query") if "query" in spec else dsl.MatchAll()
        if "filter" in spec:
            filters = spec["filter"] if isinstance(spec["filter"], list) else [spec["filter"]]
            query = dsl.Bool(must=(query,), filter=tuple(dsl.parse_query(f, where=f"{where}.filter") for f in filters))
        return query
    if kind == "knn":
        node = dsl.parse_knn(spec, where=f"{where}.knn", top_level=True)
        if node.k is None:
            raise ParsingError(f"[{where}.knn] requires [k]")
        return node
    if kind in ("rrf", "linear"):
        allowed = {"retrievers", "rank_constant", "rank_window_size", "filter", "normalizer"}
        for key in spec:
            if key not in allowed:
                raise ParsingError(f"[{where}.{kind}] does not support [{key}]")
        children = spec.get("retrievers")
        if not isinstance(children, list) or not children:
            raise ParsingError(f"[{where}.{kind}] requires a non-empty [retrievers] array")
        legs, weights, normalizers = [], [], []
        for i, child in enumerate(children):
            if kind == "linear" and isinstance(child, dict) and "retriever" in child:
                for key in child:
                    if key not in ("retriever", "weight", "normalizer"):
                        raise ParsingError(f"[{where}.linear.retrievers] entry does not support [{key}]")
                legs.append(parse_retriever(child["retriever"], f"{where}.{kind}.retrievers[{i}]"))
                weights.append(as_float(child.get("weight", 1.0), "linear.weight"))
                normalizers.append(child.get("normalizer", spec.get("normalizer", "none")))
            else:
                legs.append(parse_retriever(child, f"{where}.{kind}.retrievers[{i}]"))
                weights.append(1.0)
                normalizers.append(spec.get("normalizer", "none"))
        options = dsl.parse_fusion_options({k: v for k, v in spec.items() if k in ("rank_constant",
                                                                                   "rank_window_size")} |
                                           {"fusion": kind}, len(legs), f"{where}.{kind}")
        options["weights"] = tuple(weights) if kind == "linear" else None
        options["normalizers"] = tuple(dsl.normalizer_name(n, f"{where}.linear") for n in normalizers) \
            if kind == "linear" else None
        if any(w < 0 for w in weights):
            raise IllegalArgument(f"[{where}.linear] weights must not be negative")
        hybrid = dsl.Hybrid(legs=tuple(legs), **options)
        if "filter" in spec:
            filters = spec["filter"] if isinstance(spec["filter"], list) else [spec["filter"]]
            parsed = tuple(dsl.parse_query(f, where=f"{where}.filter") for f in filters)
            hybrid = attrs.evolve(hybrid, legs=tuple(_with_filter(leg, parsed) for leg in hybrid.legs))
        return hybrid
    raise ParsingError(f"unknown retriever [{kind}]")


def _with_filter(leg: Node, filters: tuple[Node, ...]) -> Node:
    if isinstance(leg, dsl.Knn):
        return attrs.evolve(leg, filter=leg.filter + filters)
    if isinstance(leg, dsl.Hybrid):
        return attrs.evolve(leg, legs=tuple(_with_filter(child, filters) for child in leg.legs))
    return dsl.Bool(must=(leg,), filter=filters)


# -- the request -----------------------------------------------------------------------------------

def _params(query: dict[str, Any] | None, allowed: set[str], route: str) -> dict[str, Any]:
    query = dict(query or {})
    refuse_unknown(query, allowed, IllegalArgument, what=route, ignored=_IGNORED_PARAMS)
    return query


def _bool_param(query: dict[str, Any], name: str, default: bool) -> bool:
    value = query.get(name)
    return default if value is None else flag(value, name, IllegalArgument, source=QUERY)


def parse_search_request(body: Any, params: dict[str, Any] | None = None) -> SearchRequest:
    """Validate and parse a ``_search`` body and its URL parameters (parameters win where both are given)."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ParsingError("request body must be a JSON object")
    params = _params(params, _SEARCH_PARAMS, "_search")
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in _UNSUPPORTED_BODY:
            raise IllegalArgument(f"[{key}] is not supported by this search engine")
        if key in _FALSE_ONLY_BODY:
            if value not in (False, None):
                raise IllegalArgument(f"[{key}] is not supported by this search engine")
            continue
        if key == "query":
            out["query"] = dsl.parse_query(value, where="query", top_level=True)
        elif key == "knn":
            items = value if isinstance(value, list) else [value]
            out["knn"] = tuple(dsl.parse_knn(item, where="knn", top_level=True) for item in items)
        elif key == "retriever":
            out["retriever"] = parse_retriever(value)
        elif key == "rank":
            out["rank"] = value
        elif key == "from":
            out["from_"] = as_int(value, "from")
        elif key == "size":
            out["size"] = as_int(value, "size")
        elif key == "sort":
            out["sort"] = parse_sort(value) or None  # an empty sort is the default order, as in ES
        elif key == "_source":
            out["source"] = parse_source(value)
        elif key == "track_total_hits":
            out["track_total_hits"] = _track_total_hits(value)
        elif key in ("aggs", "aggregations"):
            if "aggs" in body and "aggregations" in body:
                raise ParsingError("Found two aggregation definitions: [aggs] and [aggregations]")
            out["aggs"] = parse_aggs(value)
        elif key == "post_filter":
            out["post_filter"] = dsl.parse_query(value, where="post_filter")
        elif key == "highlight":
            out["highlight"] = parse_highlight(value)
        elif key == "min_score":
            out["min_score"] = as_float(value, "min_score")
        elif key == "track_scores":
            out["track_scores"] = as_bool(value, "track_scores")
        elif key == "version":
            out["version"] = as_bool(value, "version")
        elif key == "search_after":
            if not isinstance(value, list) or not value:
                raise ParsingError("[search_after] must be a non-empty array of sort values")
            out["search_after"] = tuple(value)
        elif key == "pit":
            out["pit"] = _parse_pit(value)
        elif key == "timeout":
            continue
        else:
            raise ParsingError(f"Unknown key for a {dsl.json_type_name(value)} in [{key}].")

    if "q" in params and params["q"] is not None:
        if "query" in out:
            raise IllegalArgument("cannot use the [q] parameter together with a request body [query]")
        out["query"] = parse_q(str(params["q"]), default_field=params.get("df"),
                               default_operator=params.get("default_operator", "or"))
    if params.get("size") is not None:
        out["size"] = as_int(params["size"], "size")
    if params.get("from") is not None:
        out["from_"] = as_int(params["from"], "from")
    if params.get("sort"):
        out["sort"] = _sort_param(str(params["sort"]))
    if params.get("_source") is not None:
        raw = str(params["_source"])
        out["source"] = SourceFilter(enabled=False) if raw == "false" else (
            SourceFilter() if raw == "true" else SourceFilter(includes=tuple(p for p in raw.split(",") if p)))
    if params.get("_source_includes") or params.get("_source_excludes"):
        base = out.get("source", SourceFilter())
        includes = tuple(p for p in str(params.get("_source_includes") or "").split(",") if p) or base.includes
        excludes = tuple(p for p in str(params.get("_source_excludes") or "").split(",") if p) or base.excludes
        out["source"] = SourceFilter(True, includes, excludes)
    if params.get("track_total_hits") is not None:
        out["track_total_hits"] = _track_total_hits(params["track_total_hits"])
    if params.get("min_score") is not None:
        out["min_score"] = as_float(params["min_score"], "min_score")
    out["track_scores"] = _bool_param(params, "track_scores", out.get("track_scores", False))
    out["version"] = _bool_param(params, "version", out.get("version", False))
    out["total_as_int"] = _bool_param(params, "rest_total_hits_as_int", False)
    if out["total_as_int"]:
        track = out.get("track_total_hits")
        if track is None:
            out["track_total_hits"] = True  # an integer total must be exact
        elif track is not True and track is not False:
            raise IllegalArgument(f"[rest_total_hits_as_int] cannot be used if the tracking of total hits is not "
                                  f"accurate, got {track}")
    out["typed_keys"] = _bool_param(params, "typed_keys", False)
    out["ignore_unavailable"] = _bool_param(params, "ignore_unavailable", False)
    out["allow_no_indices"] = _bool_param(params, "allow_no_indices", True)
    out["expand_wildcards"] = str(params.get("expand_wildcards") or "open")

    if params.get("scroll") is not None:
        out["scroll"] = str(params["scroll"])

    _assemble_ranking(out)
    request = SearchRequest(**out)
    _check_paging(request)
    if request.size < 0:
        raise IllegalArgument(f"[size] parameter cannot be negative, found [{request.size}]")
    if request.from_ < 0:
        raise IllegalArgument(f"[from] parameter cannot be negative, found [{request.from_}]")
    if request.window > MAX_RESULT_WINDOW:
        raise IllegalArgument(f"Result window is too large, from + size must be less than or equal to: "
                              f"[{MAX_RESULT_WINDOW}] but was [{request.window}]")
    if request.hybrid is not None:
        if request.sort is not None and request.sorts_by_field:
            raise IllegalArgument("a fused ranking (hybrid / rrf / linear) cannot be combined with a field [sort]")
        if request.size > request.hybrid.rank_window_size:
            raise IllegalArgument(f"[rank_window_size] ({request.hybrid.rank_window_size}) must be greater than or "
                                  f"equal to [size] ({request.size})")
    return request


def _parse_pit(value: Any) -> PointInTime:
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not value["id"]:
        raise ParsingError("[pit] must be an object with a non-empty [id]")
    for key in value:
        if key not in ("id", "keep_alive"):
            raise ParsingError(f"[pit] unknown field [{key}]")
    keep_alive = value.get("keep_alive")
    if keep_alive is not None and not isinstance(keep_alive, str):
        raise ParsingError("[pit.keep_alive] must be a time value such as [1m]")
    return PointInTime(value["id"], keep_alive)


def _check_paging(request: SearchRequest) -> None:
    """The combinations of scroll, point in time, search_after and from that Elasticsearch refuses."""
    if request.scroll is not None:
        if request.pit is not None:
            raise IllegalArgument("using [point in time] is not allowed in a scroll context")
        if request.search_after is not None:
            raise IllegalArgument("[search_after] cannot be used in a scroll context")
        if request.hybrid is not None:
            raise IllegalArgument("a fused ranking (hybrid / rrf / linear) cannot be used in a scroll context")
    if request.search_after is not None:
        if request.from_ > 0:
            raise IllegalArgument("[from] parameter must be set to 0 when [search_after] is used")
        if request.hybrid is not None:
            raise IllegalArgument("[search_after] cannot be used with a fused ranking (hybrid / rrf / linear)")
    if request.sort:
        for n, key in enumerate(request.sort):
            if key.field == "_shard_doc" and (n != len(request.sort) - 1 or key.descending):
                raise IllegalArgument("[_shard_doc] is supported only as the last sort key, ascending")


def _assemble_ranking(out: dict[str, Any]) -> None:
    """Fold ``retriever``, a top-level ``hybrid`` query and ``rank.rrf`` into ``hybrid`` / ``query`` / ``knn``."""
    retriever = out.pop("retriever", None)
    rank = out.pop("rank", None)
    if retriever is not None:
        for key in ("query", "knn"):
            if key in out:
                raise IllegalArgument(f"cannot specify [retriever] and [{key}]")
        if rank is not None:
            raise IllegalArgument("cannot specify [retriever] and [rank]")
        if isinstance(retriever, dsl.Hybrid):
            out["hybrid"] = retriever
        elif isinstance(retriever, dsl.Knn):
            out["knn"] = (retriever,)
        else:
            out["query"] = retriever
        return
    query = out.get("query")
    if isinstance(query, dsl.Hybrid):
        if "knn" in out or rank is not None:
            raise IllegalArgument("a [hybrid] query cannot be combined with a top-level [knn] or [rank]")
        out["hybrid"] = out.pop("query")
        return
    if rank is not None:
        if not isinstance(rank, dict) or list(rank) != ["rrf"] or not isinstance(rank["rrf"], dict):
            raise ParsingError("[rank] supports only {\"rrf\": {...}}")
        legs = ([query] if query is not None else []) + list(out.pop("knn", ()))
        if len(legs) < 2:
            raise IllegalArgument("[rank] requires a [query] and at least one [knn], or several [knn]")
        options = dsl.parse_fusion_options({**rank["rrf"], "fusion": "rrf"}, len(legs), "rank.rrf")
        out.pop("query", None)
        out["hybrid"] = dsl.Hybrid(legs=tuple(legs), **options)


def parse_count_request(body: Any, params: dict[str, Any] | None = None) -> SearchRequest:
    """A ``_count`` request: only ``query`` in the body, or ``q`` in the parameters."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ParsingError("request body must be a JSON object")
    for key in body:
        if key not in ("query",):
            raise ParsingError(f"request does not support [{key}]")
    params = _params(params, {"q", "df", "default_operator", "ignore_unavailable", "allow_no_indices",
                              "expand_wildcards", "min_score", "lenient", "analyze_wildcard"}, "_count")
    query = dsl.parse_query(body["query"], where="query") if "query" in body else None
    if params.get("q") is not None:
        if query is not None:
            raise IllegalArgument("cannot use the [q] parameter together with a request body [query]")
        query = parse_q(str(params["q"]), default_field=params.get("df"),
                        default_operator=params.get("default_operator", "or"))
    return SearchRequest(query=query, size=0,
                         min_score=as_float(params["min_score"], "min_score") if params.get("min_score") else None,
                         ignore_unavailable=_bool_param(params, "ignore_unavailable", False),
                         allow_no_indices=_bool_param(params, "allow_no_indices", True),
                         expand_wildcards=str(params.get("expand_wildcards") or "open"))
