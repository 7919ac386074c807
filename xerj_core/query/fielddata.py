"""Per-document field data for sorting and aggregations: keyword ranks, value rendering, aggregatable checks."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from xerj_core.errors import IllegalArgument
from xerj_core.query.values import format_date
from xerj_core.store.columns import KIND_BOOL, KIND_F32, KIND_F64, KIND_I64, KIND_LEN, KIND_ORD, KIND_VEC, column_kind
from xerj_core.store.mapping import INT_TYPES

# Dictionaries only grow and ordinals never change, so the sorted rank of each
# ordinal is cached per index cache and dictionary, rebuilt only when terms were added.
_RANKS: "weakref.WeakKeyDictionary[Any, dict[str, tuple[int, np.ndarray, np.ndarray]]]" = weakref.WeakKeyDictionary()
_RANKS_LOCK = threading.Lock()


def keyword_ranks(reader, field: str) -> np.ndarray:
    """``ranks[ordinal]`` = position of the term in code-point (= UTF-8 byte) order, as int64."""
    return keyword_order(reader, field)[0]


def keyword_order(reader, field: str) -> tuple[np.ndarray, np.ndarray]:
    """``(ranks, ordinals)``: each ordinal's rank in term order, and the ordinal at each rank."""
    dictionary = reader.field_dictionary(field)
    name = reader.mapping.fields[field].dictionary_name
    size = len(dictionary.terms)
    with _RANKS_LOCK:
        per_index = _RANKS.setdefault(reader.cache, {})
        found = per_index.get(name)
        if found is not None and found[0] == size:
            return found[1], found[2]
    terms = np.array(dictionary.terms[:size], dtype=str) if size else np.empty(0, dtype=str)
    order = np.argsort(terms, kind="stable")
    ranks = np.empty(size, np.int64)
    ranks[order] = np.arange(size)
    with _RANKS_LOCK:
        _RANKS.setdefault(reader.cache, {})[name] = (size, ranks, order)
    return ranks, order


def require_doc_values(reader, field: str, what: str):
    """The FieldSpec of ``field`` when it can be sorted or aggregated (None when unmapped)."""
    spec = reader.mapping.fields.get(field)
    if spec is None:
        return None
    kind = column_kind(spec)
    if kind == KIND_LEN:
        hint = f"; use [{field}.keyword]" if f"{field}.keyword" in reader.mapping.fields else "; use a keyword field"
        raise IllegalArgument(f"Text fields are not optimised for {what}: [{field}] is a [text] field and has no "
                              f"per-document field data{hint}")
    if kind == KIND_VEC:
        raise IllegalArgument(f"field [{field}] of type [dense_vector] does not support {what}")
    return spec


def render_value(spec, value: Any) -> Any:
    """A column value as ES renders it in sort values and bucket keys."""
    kind = column_kind(spec)
    if kind == KIND_I64:
        return int(value)
    if kind in (KIND_F32, KIND_F64):
        return float(value)
    if kind == KIND_BOOL:
        return int(value)
    return value


def key_as_string(spec, value: Any) -> str | None:
    kind = column_kind(spec)
    if kind == KIND_I64 and spec.type not in INT_TYPES:
        return format_date(int(value))
    if kind == KIND_BOOL:
        return "true" if value else "false"
    return None


def is_date(spec) -> bool:
    return column_kind(spec) == KIND_I64 and spec.type not in INT_TYPES


def is_numeric(spec) -> bool:
    return column_kind(spec) in (KIND_I64, KIND_F32, KIND_F64, KIND_BOOL)


def is_keyword(spec) -> bool:
    return column_kind(spec) == KIND_ORD


def keyword_pairs(column, mask: np.ndarray, dictionary_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, ords)`` of every distinct keyword value of the masked rows (multi-valued rows give several)."""
    first = np.flatnonzero(mask & column.present)
    rows, ords = first, column.values[first].astype(np.int64)
    if len(column.extra_rows):
        sel = mask[column.extra_rows]
        if sel.any():
            er = column.extra_rows[sel]
            eo = column.extra_ords[sel].astype(np.int64)
            rows = np.concatenate([rows, er])
            ords = np.concatenate([ords, eo])
            keys = np.unique(rows * max(dictionary_size, 1) + ords)
            rows, ords = keys // max(dictionary_size, 1), keys % max(dictionary_size, 1)
    return rows, ords
