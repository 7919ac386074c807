"""Aggregations on doc-values columns: terms, date_histogram and the numeric and distinct-count metrics.

Metrics: value_count, cardinality, min, max, sum, avg, stats, extended_stats and
percentiles. Every metric is computed exactly over the matched rows: cardinality
counts distinct values (no HyperLogLog error) and percentiles interpolate
linearly between the two nearest ranks (no t-digest compression error).

Every aggregation runs over a list of ``(reader, mask)`` contexts (one per
index a search touched) so a multi-index search merges exactly: bucket keys
are compared as values, never as per-index ordinals. Counts are exact (one
shard per index), so ``doc_count_error_upper_bound`` is always 0.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import attrs
import numpy as np

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.query.dsl import as_int
from xerj_core.query.evaluate import INDEX_FIELD, keyword_mask
from xerj_core.query.fielddata import (is_date, is_keyword, is_numeric, key_as_string, keyword_pairs, keyword_ranks,
                                       render_value, require_doc_values)
from xerj_core.query.values import date_value, format_date
from xerj_core.store.columns import KIND_F32, KIND_F64, column_kind
from xerj_core.store.mapping import FieldSpec

MAX_BUCKETS = 65_536
Context = tuple[Any, np.ndarray]  # (IndexReader, live mask of the matched rows)

_BUCKET_KINDS = {"terms", "date_histogram"}
_METRIC_KINDS = {"value_count", "cardinality", "min", "max", "sum", "avg", "stats", "extended_stats",
                 "percentiles"}
DEFAULT_PERCENTS = (1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0)
_NAME_FORBIDDEN = re.compile(r"[\[\]>]")


@attrs.frozen
class AggSpec:
    name: str
    kind: str
    params: dict[str, Any] = attrs.field(eq=False)
    subs: tuple["AggSpec", ...] = ()
    meta: Any = None


# -- parsing ---------------------------------------------------------------------------------------

def parse_aggs(body: Any, where: str = "aggregations") -> tuple[AggSpec, ...]:
    """Parse an ES ``aggs`` object; unknown types and malformed definitions are parsing_exceptions."""
    if not isinstance(body, dict):
        raise ParsingError(f"[{where}] must be an object of named aggregations")
    specs = []
    for name, definition in body.items():
        if not isinstance(name, str) or not name or _NAME_FORBIDDEN.search(name):
            raise ParsingError(f"Invalid aggregation name [{name}]. Aggregation names can contain any character "
                               f"except '[', ']', and '>'")
        if not isinstance(definition, dict):
            raise ParsingError(f"Expected [START_OBJECT] under [{name}], but got a [{type(definition).__name__}]")
        kinds = [k for k in definition if k not in ("aggs", "aggregations", "meta")]
        if not kinds:
            raise ParsingError(f"Missing definition for aggregation [{name}]")
        if len(kinds) > 1:
            raise ParsingError(f"Found two aggregation type definitions in [{name}]: [{kinds[0]}] and [{kinds[1]}]")
        kind = kinds[0]
        if kind not in _BUCKET_KINDS | _METRIC_KINDS:
            raise ParsingError(f"Unknown aggregation type [{kind}] in [{name}]; supported: "
                               f"[{', '.join(sorted(_BUCKET_KINDS | _METRIC_KINDS))}]")
        if "aggs" in definition and "aggregations" in definition:
            raise ParsingError(f"Found two sub aggregation definitions under [{name}]")
        sub_body = definition.get("aggs", definition.get("aggregations"))
        subs = parse_aggs(sub_body, f"{name}.aggs") if sub_body is not None else ()
        if subs and kind in _METRIC_KINDS:
            raise ParsingError(f"Aggregator [{name}] of type [{kind}] cannot accept sub-aggregations")
        params = definition[kind]
        if not isinstance(params, dict):
            raise ParsingError(f"Expected [START_OBJECT] under [{kind}] in [{name}]")
        specs.append(AggSpec(name, kind, _PARAM_PARSERS[kind](name, params), subs, definition.get("meta")))
    return tuple(specs)


def _field(name: str, kind: str, params: dict[str, Any], allowed: set[str]) -> str:
    for key in params:
        if key not in allowed:
            raise ParsingError(f"[{kind}] unknown field [{key}] in aggregation [{name}]")
    field = params.get("field")
    if not isinstance(field, str) or not field:
        raise ParsingError(f"[{kind}] aggregation [{name}] requires a [field]")
    return field


def _parse_order(name: str, value: Any) -> tuple[tuple[str, bool], ...]:
    """``({"_count": "desc"}, ...)`` as ``(("_count", descending), ...)``."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            raise ParsingError(f"[order] of aggregation [{name}] must be an object such as {{\"_count\": \"desc\"}}")
        (key, direction), = item.items()
        if key not in ("_count", "_key"):
            raise ParsingError(f"[order] of aggregation [{name}] supports only [_count] and [_key], got [{key}]")
        if str(direction).lower() not in ("asc", "desc"):
            raise ParsingError(f"Unknown order direction [{direction}] in aggregation [{name}]")
        out.append((key, str(direction).lower() == "desc"))
    return tuple(out)


def _terms_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    field = _field(name, "terms", params, {"field", "size", "shard_size", "min_doc_count", "order",
                                           "show_term_doc_count_error"})
    size = as_int(params.get("size", 10), "terms.size")
    if size < 1:
        raise IllegalArgument(f"[size] must be greater than 0. Found [{size}] in [{name}]")
    min_doc_count = as_int(params.get("min_doc_count", 1), "terms.min_doc_count")
    if min_doc_count < 0:
        raise IllegalArgument(f"[min_doc_count] must be greater than or equal to 0 in [{name}]")
    order = _parse_order(name, params["order"]) if "order" in params else (("_count", True),)
    return {"field": field, "size": size, "min_doc_count": min_doc_count, "order": order}


_CALENDAR = {"minute": "m", "1m": "m", "hour": "h", "1h": "h", "day": "d", "1d": "d", "week": "w", "1w": "w",
             "month": "M", "1M": "M", "quarter": "q", "1q": "q", "year": "y", "1y": "y"}
_FIXED = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_FIXED_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _histogram_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    field = _field(name, "date_histogram", params, {"field", "fixed_interval", "calendar_interval", "interval",
                                                    "min_doc_count", "extended_bounds", "order", "time_zone",
                                                    "keyed"})
    if "interval" in params:
        raise IllegalArgument(f"[interval] on [date_histogram] is not supported; use [fixed_interval] or "
                              f"[calendar_interval] in [{name}]")
    fixed, calendar = params.get("fixed_interval"), params.get("calendar_interval")
    if fixed is not None and calendar is not None:
        raise IllegalArgument(f"Cannot use [fixed_interval] with [calendar_interval] configuration option in [{name}]")
    if fixed is None and calendar is None:
        raise IllegalArgument(f"Required one of fields [fixed_interval, calendar_interval], but none were "
                              f"specified in [{name}]")
    if calendar is not None:
        unit = _CALENDAR.get(str(calendar))
        if unit is None:
            raise IllegalArgument(f"The supplied interval [{calendar}] could not be parsed as a calendar interval")
        step = None
    else:
        found = _FIXED.match(str(fixed))
        if found is None or int(found.group(1)) < 1:
            raise IllegalArgument(f"failed to parse setting [date_histogram.fixedInterval] with value [{fixed}] "
                                  f"as a time value")
        unit, step = None, int(found.group(1)) * _FIXED_MS[found.group(2)]
    tz = params.get("time_zone")
    if tz is not None and str(tz).upper() not in ("UTC", "Z", "+00:00", "ETC/UTC", "GMT"):
        raise IllegalArgument(f"only the UTC [time_zone] is supported by [date_histogram], got [{tz}]")
    if params.get("keyed"):
        raise IllegalArgument(f"[keyed] date_histogram responses are not supported in [{name}]")
    min_doc_count = as_int(params.get("min_doc_count", 0), "date_histogram.min_doc_count")
    if min_doc_count < 0:
        raise IllegalArgument(f"[min_doc_count] must be greater than or equal to 0 in [{name}]")
    bounds = params.get("extended_bounds")
    if bounds is not None and not isinstance(bounds, dict):
        raise ParsingError(f"[extended_bounds] of [{name}] must be an object with [min] and [max]")
    order = _parse_order(name, params["order"]) if "order" in params else (("_key", False),)
    return {"field": field, "unit": unit, "step": step, "min_doc_count": min_doc_count,
            "extended_bounds": bounds, "order": order}


def _metric_params(kind: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def parse(name: str, params: dict[str, Any]) -> dict[str, Any]:
        allowed = {"field", "precision_threshold"} if kind == "cardinality" else {"field"}
        return {"field": _field(name, kind, params, allowed)}

    return parse


def _extended_stats_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    field = _field(name, "extended_stats", params, {"field", "sigma"})
    sigma = params.get("sigma", 2.0)
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or sigma < 0:
        raise IllegalArgument(f"[sigma] must be greater than or equal to 0. Found [{sigma}] in [{name}]")
    return {"field": field, "sigma": float(sigma)}


def _percentiles_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    # tdigest / hdr tune an approximation; percentiles here are exact, so the options are accepted and moot.
    field = _field(name, "percentiles", params, {"field", "percents", "keyed", "tdigest", "hdr"})
    percents = params.get("percents", DEFAULT_PERCENTS)
    if not isinstance(percents, list | tuple) or not percents or not all(
            isinstance(p, int | float) and not isinstance(p, bool) for p in percents):
        raise ParsingError(f"[percents] must be a non-empty array of numbers in [{name}]")
    for p in percents:
        if not 0 <= p <= 100:
            raise IllegalArgument(f"percent must be in [0,100], got [{p}]: [{name}]")
    keyed = params.get("keyed", True)
    if not isinstance(keyed, bool):
        raise ParsingError(f"[keyed] must be a boolean in [{name}]")
    return {"field": field, "percents": tuple(float(p) for p in percents), "keyed": keyed}


_PARAM_PARSERS = {"terms": _terms_params, "date_histogram": _histogram_params,
                  **{kind: _metric_params(kind) for kind in _METRIC_KINDS},
                  "extended_stats": _extended_stats_params, "percentiles": _percentiles_params}


# -- running ---------------------------------------------------------------------------------------

def run_aggs(specs: Sequence[AggSpec], contexts: Sequence[Context], *, typed_keys: bool = False) -> dict[str, Any]:
    """The ``aggregations`` object of a response for ``specs`` over ``contexts``.

    With ``typed_keys`` each name is prefixed with its result type (``sterms#by_tag``),
    as ES does for clients that parse responses by type.
    """
    out = {}
    for spec in specs:
        result = _RUNNERS[spec.kind](spec, contexts, typed_keys)
        if spec.meta is not None:
            result = {"meta": spec.meta, **result}
        out[f"{_type_prefix(spec, contexts)}#{spec.name}" if typed_keys else spec.name] = result
    return out


def _type_prefix(spec: AggSpec, contexts: Sequence[Context]) -> str:
    if spec.kind == "percentiles":
        return "tdigest_percentiles"  # the type name ES clients parse a percentiles result by
    if spec.kind != "terms":
        return spec.kind
    for reader, _mask in contexts:
        field_spec = reader.mapping.fields.get(spec.params["field"])
        if field_spec is not None:
            if is_keyword(field_spec):
                return "sterms"
            return "dterms" if column_kind(field_spec) in (KIND_F32, KIND_F64) else "lterms"
    return "sterms"


def aggregate(reader, body: Any, mask: np.ndarray | None = None) -> dict[str, Any]:
    """Run an ES ``aggs`` body over the rows of ``reader`` selected by ``mask`` (all live rows when None)."""
    specs = parse_aggs(body)
    mask = reader.live.copy() if mask is None else mask & reader.live
    return run_aggs(specs, [(reader, mask)])


def _spec_for(reader, field: str, what: str):
    return require_doc_values(reader, field, what)


def _ordered(key_sort: np.ndarray, counts: np.ndarray, order: tuple[tuple[str, bool], ...],
             limit: int) -> np.ndarray:
    """Indices of the first ``limit`` buckets in response order.

    ``key_sort`` orders keys (keyword ranks, numeric keys, or ranks of merged keys).
    Ties on count go to the smaller key, as in ES. Under the default order only
    buckets whose count reaches the ``limit``-th largest are sorted.
    """
    n = len(counts)
    if n == 0:
        return np.empty(0, np.int64)
    candidates = None
    if order == (("_count", True),) and limit < n:
        kth = np.partition(counts, n - limit)[n - limit]
        candidates = np.flatnonzero(counts >= kth)
        counts, key_sort = counts[candidates], key_sort[candidates]
    columns = []
    for criterion, descending in order:
        values = counts if criterion == "_count" else key_sort
        columns.append(-values.astype(np.float64 if values.dtype.kind == "f" else np.int64) if descending else values)
    if all(c != "_key" for c, _ in order):
        columns.append(key_sort)
    picked = np.lexsort(tuple(reversed(columns)))[:limit]
    return picked if candidates is None else candidates[picked]


def _terms_parts(spec: AggSpec, reader, mask: np.ndarray, field: str, min_doc_count: int):
    """``(key_of, counts, key_sort, field_spec)`` of one index.

    ``key_of(indices)`` renders the keys of the chosen buckets only (a big keyword
    dictionary is never turned into a list of strings); ``key_sort`` orders them.
    """
    if field == INDEX_FIELD:  # one bucket, the index's name, holding every row the search kept here
        count = int(np.count_nonzero(mask))
        found = np.array([count] if count >= min_doc_count else [], np.int64)
        return (lambda idx: [reader.name] * len(idx)), found, np.zeros(len(found), np.int64), _INDEX_SPEC
    field_spec = _spec_for(reader, field, "aggregations")
    if field_spec is None:
        return (lambda idx: []), np.empty(0, np.int64), np.empty(0, np.int64), None
    column = reader.column(field)
    if is_keyword(field_spec):
        dictionary = reader.field_dictionary(field)
        size = len(dictionary.terms)
        _rows, ords = keyword_pairs(column, mask, size)
        counts = np.bincount(ords, minlength=size) if size else np.empty(0, np.int64)
        if min_doc_count == 0:
            _live_rows, live_ords = keyword_pairs(column, reader.live, size)
            present = np.zeros(size, bool)
            present[live_ords] = True
            chosen = np.flatnonzero(present)
        else:
            chosen = np.flatnonzero(counts >= min_doc_count)
        terms = dictionary.terms
        ranks = keyword_ranks(reader, field)
        return ((lambda idx: [terms[i] for i in chosen[idx].tolist()]), counts[chosen].astype(np.int64),
                ranks[chosen], field_spec)
    selected = mask & column.present
    values, counts = np.unique(column.values[selected], return_counts=True)
    if min_doc_count == 0:
        every = np.unique(column.values[reader.live & column.present])
        full = np.zeros(len(every), np.int64)
        full[np.searchsorted(every, values)] = counts
        values, counts = every, full
    else:
        keep = counts >= min_doc_count
        values, counts = values[keep], counts[keep]
    return ((lambda idx: [render_value(field_spec, v) for v in values[idx].tolist()]), counts.astype(np.int64),
            values, field_spec)


# What a terms aggregation on ``_index`` reads its keys as: a keyword (strings, rendered as they are).
_INDEX_SPEC = FieldSpec(INDEX_FIELD, "keyword")


def _run_terms(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    field = spec.params["field"]
    min_doc_count = spec.params["min_doc_count"]
    size = spec.params["size"]
    if len(contexts) == 1:
        key_of, counts, key_sort, field_spec = _terms_parts(spec, *contexts[0], field, min_doc_count)
        order = _ordered(key_sort, counts, spec.params["order"], size)
        keys = key_of(order)
        shown_counts = counts[order]
    else:
        # Keys are merged as values: the same term has different ordinals in different indices.
        parts = [_terms_parts(spec, reader, mask, field, min(min_doc_count, 1)) for reader, mask in contexts]
        field_spec = next((p[3] for p in parts if p[3] is not None), None)
        merged: dict[Any, int] = {}
        for key_of, part_counts, _, fs in parts:
            if fs is None:
                continue
            for key, count in zip(key_of(np.arange(len(part_counts))), part_counts.tolist()):
                merged[key] = merged.get(key, 0) + count
        all_keys = [k for k, c in merged.items() if c >= min_doc_count]
        counts = np.array([merged[k] for k in all_keys], np.int64)
        positions = sorted(range(len(all_keys)), key=lambda i: (type(all_keys[i]).__name__, all_keys[i]))
        key_sort = np.empty(len(all_keys), np.int64)
        key_sort[np.array(positions, np.int64)] = np.arange(len(all_keys))
        order = _ordered(key_sort, counts, spec.params["order"], size)
        keys = [all_keys[i] for i in order.tolist()]
        shown_counts = counts[order]
    total = int(counts.sum()) if len(counts) else 0
    buckets = []
    for key, count in zip(keys, shown_counts.tolist()):
        bucket: dict[str, Any] = {"key": key}
        as_string = key_as_string(field_spec, key) if field_spec is not None else None
        if as_string is not None:
            bucket["key_as_string"] = as_string
        bucket["doc_count"] = count
        if spec.subs:
            bucket.update(run_aggs(spec.subs, [(r, m & _term_bucket_mask(r, field, key)) for r, m in contexts],
                                   typed_keys=typed_keys))
        buckets.append(bucket)
    return {"doc_count_error_upper_bound": 0, "sum_other_doc_count": total - int(shown_counts.sum()),
            "buckets": buckets}


def _term_bucket_mask(reader, field: str, key: Any) -> np.ndarray:
    if field == INDEX_FIELD:
        return np.full(reader.n_rows, key == reader.name)
    field_spec = reader.mapping.fields.get(field)
    if field_spec is None:
        return np.zeros(reader.n_rows, bool)
    column = reader.column(field)
    if is_keyword(field_spec):
        return keyword_mask(column, reader.field_dictionary(field).lookup([key]))
    value = np.float32(key) if column_kind(field_spec) == KIND_F32 else key
    return column.present & (column.values == value)


def _bucket_keys(values: np.ndarray, unit: str | None, step: int | None) -> np.ndarray:
    if step is not None:
        return values // step * step
    if unit in ("m", "h", "d"):
        size = {"m": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]
        return values // size * size
    if unit == "w":
        week, shift = 7 * 86_400_000, 3 * 86_400_000
        return (values + shift) // week * week - shift
    months = values.astype("datetime64[ms]").astype("datetime64[M]")
    if unit == "q":
        months = (months.astype(np.int64) // 3 * 3).astype("datetime64[M]")
    elif unit == "y":
        months = months.astype("datetime64[Y]").astype("datetime64[M]")
    return months.astype("datetime64[ms]").astype(np.int64)


def _next_key(key: int, unit: str | None, step: int | None) -> int:
    if step is not None:
        return key + step
    if unit in ("m", "h", "d", "w"):
        return key + {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}[unit]
    months = {"M": 1, "q": 3, "y": 12}[unit]
    moment = np.datetime64(key, "ms").astype("datetime64[M]") + np.timedelta64(months, "M")
    return int(moment.astype("datetime64[ms]").astype(np.int64))


def _histogram_keys(name: str, p: dict[str, Any], merged: dict[int, int]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The buckets' keys as listed (empty ones filled when ``min_doc_count`` is 0), their counts and their order."""
    field, unit, step = p["field"], p["unit"], p["step"]
    keys_sorted = sorted(merged)
    if p["min_doc_count"] == 0:
        low = keys_sorted[0] if keys_sorted else None
        high = keys_sorted[-1] if keys_sorted else None
        bounds = p["extended_bounds"]
        if bounds:
            if bounds.get("min") is not None:
                bmin = int(_bucket_keys(np.array([date_value(bounds["min"], field)], np.int64), unit, step)[0])
                low = bmin if low is None else min(low, bmin)
            if bounds.get("max") is not None:
                bmax = int(_bucket_keys(np.array([date_value(bounds["max"], field)], np.int64), unit, step)[0])
                high = bmax if high is None else max(high, bmax)
        filled = []
        if low is not None and high is not None:
            key = low
            while key <= high:
                filled.append(key)
                if len(filled) > MAX_BUCKETS:
                    raise IllegalArgument(f"Trying to create too many buckets. Must be less than or equal to: "
                                          f"[{MAX_BUCKETS}] in aggregation [{name}]")
                key = _next_key(key, unit, step)
        keys_sorted = filled
    else:
        keys_sorted = [k for k in keys_sorted if merged[k] >= p["min_doc_count"]]
    if len(keys_sorted) > MAX_BUCKETS:
        raise IllegalArgument(f"Trying to create too many buckets. Must be less than or equal to: [{MAX_BUCKETS}] "
                              f"in aggregation [{name}]")
    counts = np.array([merged.get(k, 0) for k in keys_sorted], np.int64)
    order = _ordered(np.array(keys_sorted, np.int64), counts, p["order"], len(keys_sorted))
    return keys_sorted, counts, order


def date_histogram_of(name: str, params: dict[str, Any], values: np.ndarray) -> dict[str, Any]:
    """A ``date_histogram`` (``params`` as in a request, ``field`` aside) over epoch-millisecond ``values``.

    For answers built from documents rather than a reader's columns (a brain read at ``known_at``); the
    buckets are those the aggregation gives over a column holding the same values.
    """
    p = _histogram_params(name, {"field": "-", **params})
    uniq, counts = np.unique(_bucket_keys(np.asarray(values, np.int64), p["unit"], p["step"]), return_counts=True)
    keys_sorted, counts, order = _histogram_keys(name, p, dict(zip(uniq.tolist(), counts.tolist())))
    return {"buckets": [{"key_as_string": format_date(keys_sorted[i]), "key": keys_sorted[i],
                         "doc_count": int(counts[i])} for i in order.tolist()]}


def _run_date_histogram(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    p = spec.params
    field, unit, step = p["field"], p["unit"], p["step"]
    merged: dict[int, int] = {}
    per_reader_keys = []
    for reader, mask in contexts:
        field_spec = _spec_for(reader, field, "aggregations")
        if field_spec is None:
            per_reader_keys.append(None)
            continue
        if not is_date(field_spec):
            raise IllegalArgument(f"Field [{field}] of type [{field_spec.type}] is not supported for aggregation "
                                  f"[date_histogram]")
        column = reader.column(field)
        values = column.values.astype(np.int64)
        keys = np.zeros(reader.n_rows, np.int64)
        present = column.present
        keys[present] = _bucket_keys(values[present], unit, step)
        per_reader_keys.append(keys)
        selected = keys[mask & present]
        uniq, counts = np.unique(selected, return_counts=True)
        for key, count in zip(uniq.tolist(), counts.tolist()):
            merged[key] = merged.get(key, 0) + count
    keys_sorted, counts, order = _histogram_keys(spec.name, p, merged)
    buckets = []
    for i in order.tolist():
        key = keys_sorted[i]
        bucket: dict[str, Any] = {"key_as_string": format_date(key), "key": key, "doc_count": int(counts[i])}
        if spec.subs:
            bucket.update(run_aggs(spec.subs, [
                (r, (m & (k == key)) if k is not None else np.zeros(r.n_rows, bool))
                for (r, m), k in zip(contexts, per_reader_keys)], typed_keys=typed_keys))
        buckets.append(bucket)
    return {"buckets": buckets}


def _numeric_values(spec: AggSpec, reader, mask: np.ndarray):
    field = spec.params["field"]
    field_spec = _spec_for(reader, field, "aggregations")
    if field_spec is None:
        return None, None
    if not is_numeric(field_spec):
        raise IllegalArgument(f"Field [{field}] of type [{field_spec.type}] is not supported for aggregation "
                              f"[{spec.kind}]")
    column = reader.column(field)
    return field_spec, column.values[mask & column.present]


def _run_min_max(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    best = None
    field_spec = None
    for reader, mask in contexts:
        fs, values = _numeric_values(spec, reader, mask)
        if fs is None:
            continue
        field_spec = fs
        if len(values):
            found = values.min() if spec.kind == "min" else values.max()
            found = float(found)
            best = found if best is None else (min(best, found) if spec.kind == "min" else max(best, found))
    out: dict[str, Any] = {"value": best}
    if best is not None and field_spec is not None and is_date(field_spec):
        out["value_as_string"] = format_date(int(best))
    return out


def _run_sum_avg(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    total, count = 0.0, 0
    for reader, mask in contexts:
        fs, values = _numeric_values(spec, reader, mask)
        if fs is None:
            continue
        total += float(values.astype(np.float64).sum())
        count += len(values)
    if spec.kind == "sum":
        return {"value": total}
    return {"value": total / count if count else None}


def _all_values(spec: AggSpec, contexts: Sequence[Context]) -> tuple[Any, np.ndarray]:
    """``(field spec, float64 values)`` of the matched rows of every index (the last mapping's field spec)."""
    field_spec, parts = None, []
    for reader, mask in contexts:
        fs, values = _numeric_values(spec, reader, mask)
        if fs is not None:
            field_spec = fs
            parts.append(values.astype(np.float64))
    return field_spec, (np.concatenate(parts) if parts else np.empty(0, np.float64))


def _as_strings(field_spec: Any, body: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """ES adds ``<name>_as_string`` beside a date metric's numbers."""
    if field_spec is None or not is_date(field_spec):
        return body
    for name in names:
        if body.get(name) is not None:
            body[f"{name}_as_string"] = format_date(int(body[name]))
    return body


def _stats_body(values: np.ndarray) -> dict[str, Any]:
    count = len(values)
    if not count:
        return {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0}
    total = float(values.sum())
    return {"count": count, "min": float(values.min()), "max": float(values.max()), "avg": total / count,
            "sum": total}


def _run_stats(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    field_spec, values = _all_values(spec, contexts)
    return _as_strings(field_spec, _stats_body(values), ("min", "max", "avg", "sum"))


def _run_extended_stats(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    field_spec, values = _all_values(spec, contexts)
    body = _stats_body(values)
    count, sigma = len(values), spec.params["sigma"]
    names = ("sum_of_squares", "variance", "variance_population", "variance_sampling", "std_deviation",
             "std_deviation_population", "std_deviation_sampling")
    bounds = ("upper", "lower", "upper_population", "lower_population", "upper_sampling", "lower_sampling")
    if not count:
        body.update(dict.fromkeys(names))
        body["std_deviation_bounds"] = dict.fromkeys(bounds)
        return _as_strings(field_spec, body, ("min", "max", "avg", "sum"))
    avg = body["avg"]
    population = float(np.mean((values - avg) ** 2))
    # A sample of one has no sample variance; ES reports it as not-a-number, JSON can only say null.
    sampling = float(np.sum((values - avg) ** 2) / (count - 1)) if count > 1 else None
    std_pop = population ** 0.5
    std_samp = None if sampling is None else sampling ** 0.5
    body.update({
        "sum_of_squares": float(np.sum(values * values)),
        "variance": population, "variance_population": population, "variance_sampling": sampling,
        "std_deviation": std_pop, "std_deviation_population": std_pop, "std_deviation_sampling": std_samp,
        "std_deviation_bounds": {
            "upper": avg + sigma * std_pop, "lower": avg - sigma * std_pop,
            "upper_population": avg + sigma * std_pop, "lower_population": avg - sigma * std_pop,
            "upper_sampling": None if std_samp is None else avg + sigma * std_samp,
            "lower_sampling": None if std_samp is None else avg - sigma * std_samp,
        },
    })
    return _as_strings(field_spec, body, ("min", "max", "avg", "sum"))


def _run_percentiles(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    field_spec, values = _all_values(spec, contexts)
    percents = spec.params["percents"]
    found = np.percentile(values, percents).tolist() if len(values) else [None] * len(percents)
    dates = field_spec is not None and is_date(field_spec)
    if spec.params["keyed"]:
        out: dict[str, Any] = {}
        for p, v in zip(percents, found):
            out[str(p)] = v
            if dates and v is not None:
                out[f"{p}_as_string"] = format_date(int(v))
        return {"values": out}
    items = []
    for p, v in zip(percents, found):
        item: dict[str, Any] = {"key": p, "value": v}
        if dates and v is not None:
            item["value_as_string"] = format_date(int(v))
        items.append(item)
    return {"values": items}


def _distinct(spec: AggSpec, reader, mask: np.ndarray) -> tuple[Any, int]:
    """``(distinct values as a set or array, value count)`` of the masked rows of one index."""
    field = spec.params["field"]
    field_spec = _spec_for(reader, field, "aggregations")
    if field_spec is None:
        return None, 0
    column = reader.column(field)
    if is_keyword(field_spec):
        dictionary = reader.field_dictionary(field)
        _rows, ords = keyword_pairs(column, mask, len(dictionary.terms))
        return np.unique(ords), len(ords)
    values = column.values[mask & column.present]
    return np.unique(values), len(values)


def _run_value_count(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    return {"value": sum(_distinct(spec, reader, mask)[1] for reader, mask in contexts)}


def _run_cardinality(spec: AggSpec, contexts: Sequence[Context], typed_keys: bool = False) -> dict[str, Any]:
    if len(contexts) == 1:
        found, _ = _distinct(spec, *contexts[0])
        return {"value": 0 if found is None else int(len(found))}
    seen: set[Any] = set()
    for reader, mask in contexts:
        found, _ = _distinct(spec, reader, mask)
        if found is None:
            continue
        field_spec = reader.mapping.fields[spec.params["field"]]
        if is_keyword(field_spec):
            terms = reader.field_dictionary(spec.params["field"]).terms
            seen.update(terms[i] for i in found.tolist())
        else:
            seen.update(render_value(field_spec, v) for v in found.tolist())
    return {"value": len(seen)}


_RUNNERS: dict[str, Callable[[AggSpec, Sequence[Context], bool], dict[str, Any]]] = {
    "terms": _run_terms,
    "date_histogram": _run_date_histogram,
    "value_count": _run_value_count,
    "cardinality": _run_cardinality,
    "min": _run_min_max,
    "max": _run_min_max,
    "sum": _run_sum_avg,
    "avg": _run_sum_avg,
    "stats": _run_stats,
    "extended_stats": _run_extended_stats,
    "percentiles": _run_percentiles,
}
