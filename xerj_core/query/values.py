"""Query operands in a field's column domain: term and range values, ES date math, and date rendering."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from xerj_core.errors import IllegalArgument, MapperParsingError
from xerj_core.store.columns import KIND_BOOL, KIND_F32, KIND_F64, KIND_I64, KIND_ORD, column_kind
from xerj_core.store.mapping import INT_TYPES, coerce, parse_date

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DAY_MS = 86_400_000
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "H": 3_600_000, "d": _DAY_MS, "w": 7 * _DAY_MS}
_MATH = re.compile(r"([+-])(\d+)([yMwdhHms])|/([yMwdhHms])")
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def now_ms() -> int:
    return int(time.time() * 1000)


def format_date(ms: int) -> str:
    """Epoch milliseconds as ES renders a date: ``2024-05-01T12:00:00.000Z``."""
    moment = _EPOCH + timedelta(milliseconds=int(ms))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _to_datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _to_ms(moment: datetime) -> int:
    delta = moment - _EPOCH
    return delta.days * _DAY_MS + delta.seconds * 1000 + delta.microseconds // 1000


def _add_months(ms: int, months: int) -> int:
    moment = _to_datetime(ms)
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    # Clamp the day to the target month's length, as java.time does.
    for day in range(moment.day, 27, -1):
        try:
            return _to_ms(moment.replace(year=year, month=month + 1, day=day))
        except ValueError:
            continue
    return _to_ms(moment.replace(year=year, month=month + 1, day=min(moment.day, 28)))


def floor_unit(ms: int, unit: str) -> int:
    """``ms`` rounded down to the start of its UTC ``unit`` (y, M, w (Monday), d, h/H, m, s)."""
    if unit in ("y", "M"):
        moment = _to_datetime(ms)
        start = moment.replace(month=1 if unit == "y" else moment.month, day=1, hour=0, minute=0, second=0,
                               microsecond=0)
        return _to_ms(start)
    if unit == "w":
        # 1970-01-01 was a Thursday; weeks start on Monday (ISO), three days earlier.
        shift = 3 * _DAY_MS
        return (ms + shift) // _UNIT_MS["w"] * _UNIT_MS["w"] - shift
    step = _UNIT_MS[unit]
    return ms // step * step


def _ceil_unit(ms: int, unit: str) -> int:
    """The last millisecond of ``ms``'s ``unit``."""
    start = floor_unit(ms, unit)
    if unit in ("y", "M"):
        return _add_months(start, 12 if unit == "y" else 1) - 1
    return start + _UNIT_MS[unit] - 1


def date_value(value: Any, field: str, *, round_up: bool = False, fmt: str | None = None,
               now: int | None = None) -> int:
    """Epoch-ms of a date operand: epoch-ms number, RFC3339 / ISO-8601 string, or date math.

    Date math is ``now`` or ``<date>||`` followed by ``+1d``, ``-2h``... and an
    optional rounding ``/d``. With ``round_up`` (``gt`` and ``lte`` bounds) a
    rounding goes to the unit's last millisecond and a date without a time to
    the day's last millisecond, as ES does. ``fmt`` ``epoch_second`` scales numbers.
    """
    scale = 1000 if fmt is not None and "epoch_second" in fmt and "epoch_millis" not in fmt else 1
    if isinstance(value, bool):
        raise IllegalArgument(f"failed to parse date field [{value}] of [{field}]")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise IllegalArgument(f"failed to parse date field [{value}] of [{field}]")
        return int(value * scale)
    if not isinstance(value, str):
        raise IllegalArgument(f"failed to parse date field [{value!r}] of [{field}]")
    text = value.strip()
    if text.startswith("now"):
        anchor, math_part = (now if now is not None else now_ms()), text[3:]
    elif "||" in text:
        head, math_part = text.split("||", 1)
        anchor = _plain_date(head, field, scale, round_up=False)
    else:
        return _plain_date(text, field, scale, round_up=round_up)
    ms = anchor
    pos = 0
    while pos < len(math_part):
        found = _MATH.match(math_part, pos)
        if found is None:
            raise IllegalArgument(f"failed to parse date field [{value}] of [{field}]: bad date math [{math_part}]")
        sign, amount, unit, rounding = found.groups()
        if rounding:
            ms = _ceil_unit(ms, rounding) if round_up else floor_unit(ms, rounding)
        else:
            count = int(amount) * (1 if sign == "+" else -1)
            if unit in ("y", "M"):
                ms = _add_months(ms, count * (12 if unit == "y" else 1))
            else:
                ms += count * _UNIT_MS[unit]
        pos = found.end()
    return ms


def _plain_date(text: str, field: str, scale: int, *, round_up: bool) -> int:
    if re.fullmatch(r"-?\d+", text):
        return int(text) * scale
    try:
        ms = parse_date(text, field)
    except MapperParsingError as exc:
        raise IllegalArgument(exc.reason) from None
    if round_up and _DATE_ONLY.match(text):
        ms += _DAY_MS - 1
    return ms


def term_operand(spec, value: Any) -> Any:
    """``value`` as a column value of ``spec``'s field for an equality test, or None when nothing can equal it.

    Keyword: the string the store indexes; integers: an int (a decimal part
    matches nothing, as in ES); float/half_float: float32; double: float64;
    date: epoch-ms; boolean: 0/1. A value the field cannot hold is an IllegalArgument.
    """
    kind = column_kind(spec)
    try:
        if kind == KIND_ORD:
            return coerce(spec, value)
        if kind == KIND_I64 and spec.type in INT_TYPES:
            if isinstance(value, bool):
                raise MapperParsingError("boolean")
            number = float(value) if isinstance(value, (str, float)) else value
            if isinstance(number, float):
                if not math.isfinite(number) or not number.is_integer():
                    return None
                number = int(number)
            low, high = INT_TYPES[spec.type]
            return int(number) if low <= number <= high else None
        if kind == KIND_I64:
            return date_value(value, spec.path)
        if kind == KIND_F32:
            return np.float32(coerce(spec, value))
        if kind == KIND_F64:
            return np.float64(coerce(spec, value))
        if kind == KIND_BOOL:
            return int(coerce(spec, value))
    except (MapperParsingError, ValueError, TypeError) as exc:
        reason = exc.reason if isinstance(exc, MapperParsingError) else str(exc)
        raise IllegalArgument(f"failed to create query: cannot use [{value!r}] on field [{spec.path}] "
                              f"of type [{spec.type}]: {reason}") from None
    raise IllegalArgument(f"field [{spec.path}] of type [{spec.type}] does not support term queries")


def range_operand(spec, value: Any, *, round_up: bool, fmt: str | None) -> Any:
    """A range bound in ``spec``'s column domain (numbers stay exact; floats compare as float32)."""
    kind = column_kind(spec)
    if kind == KIND_ORD:
        return coerce(spec, value)
    if kind == KIND_I64 and spec.type not in INT_TYPES:
        return date_value(value, spec.path, round_up=round_up, fmt=fmt)
    if kind == KIND_BOOL:
        try:
            return int(coerce(spec, value))
        except MapperParsingError as exc:
            raise IllegalArgument(exc.reason) from None
    if isinstance(value, bool):
        raise IllegalArgument(f"failed to create query: [{value}] is not a number for field [{spec.path}]")
    try:
        number = value if isinstance(value, (int, float)) else float(value)
    except (TypeError, ValueError):
        raise IllegalArgument(f"failed to create query: For input string: \"{value}\" on field [{spec.path}]") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise IllegalArgument(f"failed to create query: [{value}] is not finite for field [{spec.path}]")
    if kind == KIND_F32:
        return np.float32(number)
    if kind == KIND_F64:
        return np.float64(number)
    return number
