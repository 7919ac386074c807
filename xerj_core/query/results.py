"""Shaping results: field sorts over columns, the cross-index merge of sorted pages, and ``_source`` filtering."""

from __future__ import annotations

import bisect
import re
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.query.fielddata import is_keyword, keyword_order, render_value, require_doc_values
from xerj_core.query.request import SortKey, SourceFilter
from xerj_core.query.values import date_value
from xerj_core.store.columns import KIND_F32, KIND_F64, column_kind

# -- sorting -------------------------------------------------------------------------------------


def _sort_columns(reader, rows: np.ndarray, scores: np.ndarray | None, key: SortKey):
    """``(missing_flag, order_value, render)`` for ``rows`` under one sort key.

    ``order_value`` sorts ascending in the requested direction; ``render(i)``
    gives the i-th row's sort value as ES shows it (None when missing).
    """
    if key.field == "_score":
        values = scores[rows] if scores is not None else np.zeros(len(rows))
        return None, (-values if key.descending else values), lambda i: float(values[i])
    if key.field == "_doc":
        return None, (-rows if key.descending else rows), lambda i: int(rows[i])
    spec = require_doc_values(reader, key.field, "sorting")
    if spec is None:
        if key.unmapped_type is None:
            raise IllegalArgument(f"No mapping found for [{key.field}] in order to sort on")
        missing = np.ones(len(rows), bool)
        return _missing_flag(missing, key), np.zeros(len(rows)), lambda i: None
    column = reader.column(key.field)
    present = column.present[rows]
    if is_keyword(spec):
        ranks, order_of_rank = keyword_order(reader, key.field)
        terms = reader.field_dictionary(key.field).terms
        use_max = key.mode == "max" or (key.mode is None and key.descending)
        per_row = np.full(len(column.values), -1, np.int64)
        if len(ranks):
            per_row = np.where(column.present, ranks[np.maximum(column.values, 0)], -1).astype(np.int64)
        if len(column.extra_rows):
            extra = ranks[column.extra_ords]
            if use_max:
                np.maximum.at(per_row, column.extra_rows, extra)
            else:
                np.minimum.at(per_row, column.extra_rows, extra)
        chosen = per_row[rows]
        if not isinstance(key.missing, str) or key.missing not in ("_last", "_first"):
            raise IllegalArgument(f"[missing] on keyword sort [{key.field}] supports only [_last] and [_first]")
        values = -chosen if key.descending else chosen
        return (_missing_flag(~present, key), values,
                lambda i: terms[int(order_of_rank[chosen[i]])] if present[i] else None)
    values = column.values[rows]
    if column_kind(spec) in (KIND_F32, KIND_F64):
        values = values.astype(np.float64)
    if key.missing not in ("_last", "_first"):
        try:
            substitute = float(key.missing) if values.dtype.kind == "f" else int(key.missing)
        except (TypeError, ValueError):
            raise IllegalArgument(f"[missing] value [{key.missing}] is not a number for sort [{key.field}]") from None
        values = np.where(present, values, substitute)
        shown = values
        present_all = np.ones(len(rows), bool)
        order = -values if key.descending else values
        return None, order, lambda i: render_value(spec, shown[i]) if present_all[i] else None
    order = -values.astype(np.float64) if key.descending and values.dtype.kind == "f" else (
        -values if key.descending else values)
    return _missing_flag(~present, key), order, lambda i: render_value(spec, values[i]) if present[i] else None


def _missing_flag(missing: np.ndarray, key: SortKey) -> np.ndarray:
    # 0 sorts first: missing rows go last unless the key asks for them first.
    return (~missing).astype(np.int8) if key.missing == "_first" else missing.astype(np.int8)


def sort_rows(reader, rows: np.ndarray, scores: np.ndarray | None, keys: Sequence[SortKey],
              limit: int) -> tuple[np.ndarray, list[list[Any]]]:
    """``rows`` ordered by ``keys`` (ties: lower row first) and cut to ``limit``, with their rendered sort values."""
    columns, renders = [], []
    for key in keys:
        flag, order, render = _sort_columns(reader, rows, scores, key)
        if flag is not None:
            columns.append(flag)
        columns.append(order)
        renders.append(render)
    columns.append(rows)
    order = np.lexsort(tuple(reversed(columns)))[:limit]
    sort_values = [[render(i) for render in renders] for i in order.tolist()]
    return rows[order], sort_values


SHARD_DOC_BITS = 40  # a row's ``_shard_doc`` tiebreaker is ``(position of its index << 40) | row``


def shard_doc(position: int, row: int) -> int:
    return (position << SHARD_DOC_BITS) | row


def _sorted_terms(reader, field: str) -> list[str]:
    def build() -> list[str]:
        _ranks, order = keyword_order(reader, field)
        terms = reader.field_dictionary(field).terms
        return [terms[o] for o in order.tolist()]

    return reader.memo(("sorted-terms", field), build)


def _after_position(reader, key: SortKey, value: Any) -> tuple[int, float]:
    """``(missing flag, order value)`` of a ``search_after`` value in the space :func:`_sort_columns` orders by."""
    first = key.missing == "_first"
    if value is None:
        return (0 if first else 1), 0
    flag = 1 if first else 0
    sign = -1 if key.descending else 1
    if key.field in ("_score", "_doc"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise IllegalArgument(f"search_after value [{value}] for [{key.field}] must be a number")
        return flag, sign * value
    spec = reader.mapping.fields.get(key.field)
    if spec is None:
        return flag, 0
    if is_keyword(spec):
        if not isinstance(value, str):
            raise IllegalArgument(f"search_after value [{value}] for keyword sort [{key.field}] must be a string")
        terms = _sorted_terms(reader, key.field)
        at = bisect.bisect_left(terms, value)
        # A term this index does not hold sorts between its neighbours.
        rank = at if at < len(terms) and terms[at] == value else at - 0.5
        return flag, sign * rank
    if isinstance(value, str):
        try:
            number: float = float(value)
        except ValueError:
            number = date_value(value, key.field)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = value
    else:
        raise IllegalArgument(f"search_after value [{value}] for [{key.field}] must be a number")
    return flag, sign * number


def after_mask(reader, rows: np.ndarray, scores: np.ndarray | None, keys: Sequence[SortKey], after: Sequence[Any],
               tiebreak: int | None = None, position: int = 0) -> np.ndarray:
    """Which of ``rows`` sort strictly after the ``search_after`` values ``after`` (one per key).

    ``tiebreak`` is the ``_shard_doc`` value of the last hit when the order ends
    with that tiebreaker (point in time, scroll); without it rows equal on every
    key are not after, as in Elasticsearch.
    """
    later = np.zeros(len(rows), bool)
    equal = np.ones(len(rows), bool)
    for key, value in zip(keys, after):
        flag, order, _render = _sort_columns(reader, rows, scores, key)
        after_flag, after_order = _after_position(reader, key, value)
        if flag is not None:
            later |= equal & (flag > after_flag)
            equal &= flag == after_flag
            if value is None:
                continue  # both missing: equal on this key
        later |= equal & (order > after_order)
        equal &= order == after_order
    if tiebreak is not None:
        later |= equal & (shard_doc(position, 0) + rows > tiebreak)
    return later


def merge_key(keys: Sequence[SortKey], values: Sequence[Any]) -> tuple:
    """A tuple that orders rendered sort values across indices as the keys ask (missing last by default)."""
    out = []
    for key, value in zip(keys, values):
        missing = value is None
        first = key.missing == "_first"
        flag = 0 if (missing == first) else 1
        if missing:
            out.append((flag, 0, 0))
            continue
        out.append((flag, _Desc(value) if key.descending else value, 0))
    return tuple(out)


class _Desc:
    """Inverts comparisons so one tuple sort can mix ascending and descending keys."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: "_Desc") -> bool:
        return other.value < self.value

    def __gt__(self, other: "_Desc") -> bool:
        return other.value > self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and other.value == self.value

    def __le__(self, other: "_Desc") -> bool:
        return other.value <= self.value

    def __ge__(self, other: "_Desc") -> bool:
        return other.value >= self.value


# -- _source filtering ---------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern)))


def _matches(path: str, patterns: Sequence[str]) -> bool:
    return any(_pattern(p).fullmatch(path) for p in patterns)


def filter_source(source: Any, spec: SourceFilter) -> Any:
    """``source`` reduced to the fields ``spec`` includes and not excluded (ES semantics, dotted paths, ``*``)."""
    if not spec.includes and not spec.excludes:
        return source
    if not isinstance(source, dict):
        return source
    return _filter(source, "", spec.includes, spec.excludes, included=not spec.includes)


def _filter(obj: dict[str, Any], prefix: str, includes: Sequence[str], excludes: Sequence[str],
            included: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        path = prefix + key
        if excludes and _matches(path, excludes):
            continue
        here = included or _matches(path, includes)
        if isinstance(value, dict):
            sub = _filter(value, path + ".", includes, excludes, here)
            if sub or here:  # an object the filter reaches stays, even emptied by excludes (as ES does)
                out[key] = sub
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            items = []
            for item in value:
                if isinstance(item, dict):
                    sub = _filter(item, path + ".", includes, excludes, here)
                    if sub:
                        items.append(sub)
                elif here:
                    items.append(item)
            if items or here:
                out[key] = items
        elif here:
            out[key] = value
    return out
