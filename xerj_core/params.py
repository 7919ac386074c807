"""Request-parameter coercion: one rule per kind of value (flag, integer, number, instant, list, choice), for every surface.

Each coercer takes the value as it arrived, the parameter's name for the
reason, the error class to raise (the Elasticsearch-compatible routes raise
their ES exception types, the graph and memory contract raises
:class:`~xerj_core.errors.GraphError`) and where the value came from, because
that, not the route, decides which spellings can arrive:

* ``QUERY``: a query string, where every value is text;
* ``ES_BODY``: an Elasticsearch-compatible JSON body, where Elasticsearch
  coerces text to numbers and booleans (``"size": "10"``);
* ``JSON``: the graph and memory contract's JSON bodies, which take JSON types
  only (``{"hops": "2"}`` is refused: the contract says 1 or 2).

The spellings are decided here once, so ``?include_nodes=1`` cannot work on one
route and fail on the next:

* **flags** follow Elasticsearch: a JSON boolean; ``true`` and ``false``
  exactly (lowercase, as ``Booleans.parseBoolean`` reads them) wherever text
  arrives; and in a query string an empty value meaning true (``?pretty``,
  ``?v``: the parameter's presence turns it on, as ``RestRequest.paramAsBoolean``
  does). ``1``, ``0``, ``TRUE`` and ``yes`` are refused on every route rather
  than read as whatever one parser guessed.
* **integers** are JSON integers, integral JSON floats (``5.0``) and, where
  text arrives, ASCII digits with an optional sign; ``" 5"``, ``"5.0"`` and
  ``"1_000"`` are refused, as ``Integer.parseInt`` refuses them.
* **numbers** are finite JSON numbers and, where text arrives, decimal
  strings; ``NaN`` and ``Infinity`` are refused in either spelling.
* **instants** are epoch milliseconds (a number or a string of digits) or an
  RFC3339 string, on every source (the contract's own rule), inside +/-2^53 so
  every instant is exact in JSON.
* **lists** are a comma-separated string or an array of strings; blank entries
  drop out and the first occurrence of a repeated entry is kept.
* **choices** are one string of a closed set, compared exactly.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import AbstractSet, Any, Iterable, Literal, Sequence

from xerj_core.errors import GraphError, XerjError

ErrorClass = type[XerjError]
Source = Literal["query", "es_body", "json"]
QUERY: Source = "query"
ES_BODY: Source = "es_body"
JSON: Source = "json"

# Elasticsearch's response-formatting parameters ride along on any request and change nothing here.
RESPONSE_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "format"})

INSTANT_LIMIT = 2**53
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _shown(value: Any) -> str:
    return f"{value!r:.80}"


def flag(value: Any, name: str, error: ErrorClass, *, source: Source) -> bool:
    """A boolean: ``true``/``false`` where text arrives, and an empty query-string value as true."""
    if isinstance(value, bool):
        return value
    if source != JSON:
        if value == "true" or (source == QUERY and value == ""):
            return True
        if value == "false":
            return False
    raise error(f"[{name}] must be true or false, got [{_shown(value)}]")


def integer(value: Any, name: str, error: ErrorClass, low: int | None = None, high: int | None = None, *,
            source: Source) -> int:
    """An integer, optionally refused outside ``low..high`` (callers that clamp leave the bounds out)."""
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and source != JSON and _INTEGER.fullmatch(value):
        number = int(value)
    if number is None:
        raise error(f"[{name}] must be an integer, got [{_shown(value)}]")
    if (low is not None and number < low) or (high is not None and number > high):
        raise error(f"[{name}] must be between {low} and {high}, got [{number}]")
    return number


def number(value: Any, name: str, error: ErrorClass, *, source: Source) -> float:
    """A finite number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value) if isinstance(value, float) or abs(value) < 2**1000 else math.inf
    elif isinstance(value, str) and source != JSON and _DECIMAL.fullmatch(value):
        result = float(value)
    else:
        raise error(f"[{name}] must be a number, got [{_shown(value)}]")
    if not math.isfinite(result):
        raise error(f"[{name}] must be finite, got [{_shown(value)}]")
    return result


def unit(value: Any, name: str, error: ErrorClass, *, clamp: bool, source: Source) -> float:
    """A finite number in ``[0, 1]``: clamped into it, or refused outside it."""
    result = number(value, name, error, source=source)
    if clamp:
        return min(1.0, max(0.0, result))
    if not 0.0 <= result <= 1.0:
        raise error(f"[{name}] must be between 0 and 1, got [{value!r}]")
    return result


def instant(value: Any, name: str, error: ErrorClass) -> int:
    """Epoch milliseconds from an epoch-ms number (or a string of digits) or an RFC3339 string."""
    ms: int | None = None
    if isinstance(value, bool):
        ms = None
    elif isinstance(value, int):
        ms = value
    elif isinstance(value, float):
        ms = int(value) if math.isfinite(value) else None
    elif isinstance(value, str):
        text = value.strip()
        ms = int(text) if _INTEGER.fullmatch(text) else _rfc3339(text)
    if ms is None:
        raise error(f"[{name}] must be an epoch-ms number or an RFC3339 string, got [{_shown(value)}]")
    if not -INSTANT_LIMIT <= ms <= INSTANT_LIMIT:
        raise error(f"[{name}] is out of range: {ms} (epoch milliseconds within +/-2^53)")
    return ms


def _rfc3339(text: str) -> int | None:
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), min(int(second), 59),
                          tzinfo=timezone.utc)
    except ValueError:
        return None
    if not zulu:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        moment -= offset if sign == "+" else -offset
    delta = moment - _EPOCH
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    return (delta.days * 86_400 + delta.seconds) * 1000 + millis


def names(value: Any, name: str, error: ErrorClass) -> list[str]:
    """A comma-separated string (or an array of strings) as its non-blank entries, first occurrence kept."""
    if isinstance(value, str):
        items: Sequence[str] = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = value
    else:
        raise error(f"[{name}] must be a comma-separated string, got [{_shown(value)}]")
    return list(dict.fromkeys(item.strip() for item in items if item.strip()))


def choice(value: Any, name: str, choices: Sequence[str], error: ErrorClass) -> str:
    """One of ``choices``, compared exactly."""
    if isinstance(value, str) and value in choices:
        return value
    listed = " or ".join(choices) if len(choices) == 2 else "one of " + ", ".join(choices)
    raise error(f"[{name}] must be {listed}, got [{_shown(value)}]")


def refuse_unknown(keys: Iterable[str], known: Iterable[str], error: ErrorClass, *, what: str,
                   kind: str = "parameter", ignored: AbstractSet[str] = RESPONSE_PARAMS) -> None:
    """Refuse the first key not in ``known``: a typo'd key must not silently drop out of a request.

    ``kind`` is ``parameter`` for a query string (the response-formatting
    parameters in ``ignored`` pass) or ``field`` for a body (pass
    ``ignored=frozenset()``). The reason is worded for the surface the error
    class belongs to: Elasticsearch's own sentence on the ES-compatible routes
    (``what`` is then the route, such as ``_search``), the contract's (naming
    what was expected) on the graph and memory routes.
    """
    allowed = set(known)
    for key in keys:
        if key in allowed or key in ignored:
            continue
        if issubclass(error, GraphError):
            raise error(f"unknown {kind} [{key}] for {what}; expected one of: {', '.join(sorted(allowed))}")
        if kind == "parameter":  # RestController's sentence
            raise error(f"request [{what}] contains unrecognized parameter: [{key}]")
        raise error(f"[{what}] unknown {kind} [{key}]")  # ObjectParser's sentence
