"""Request bodies and query strings: read once, parse once, refuse clearly (invalid JSON names its parse error)."""

from __future__ import annotations

import os
from typing import Any

import falcon
import orjson

from xerj_core import params
from xerj_core.errors import GraphError, IllegalArgument, InvalidJson, ParsingError, XerjError
from xerj_http.errors import PayloadTooLarge

# Elasticsearch's default http.max_content_length; XERJ_MAX_BODY_BYTES (an integer) replaces it.
DEFAULT_MAX_BODY_BYTES = 100 * 1024 * 1024
MAX_BODY_BYTES = int(os.environ.get("XERJ_MAX_BODY_BYTES") or DEFAULT_MAX_BODY_BYTES)
_CHUNK = 1 << 20
_MISSING = object()


def raw_body(req: falcon.Request) -> bytes:
    """The request body as bytes, read from the stream at most once per request."""
    ctx = req.context
    found = ctx.get("raw_body")
    if found is not None:
        return found
    length = req.content_length
    if length is not None and length > MAX_BODY_BYTES:
        # Refused from the header alone, before a byte of the body is read.
        raise PayloadTooLarge(f"request body of {length} bytes exceeds the limit of {MAX_BODY_BYTES}")
    if length is None and _chunked(req):
        # No length to bound by: the server decodes the chunks, and reading stops one byte past the cap.
        data = _read_capped(req.stream)
    else:
        data = req.bounded_stream.read()
    ctx.raw_body = data
    return data


def _chunked(req: falcon.Request) -> bool:
    coding = req.get_header("Transfer-Encoding") or ""
    return "chunked" in coding.lower()


def _read_capped(stream: Any) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        part = stream.read(min(_CHUNK, MAX_BODY_BYTES + 1 - size))
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
        if size > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"request body exceeds the limit of {MAX_BODY_BYTES} bytes")


def parse_json(data: bytes | str, what: str = "request body") -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidJson(f"failed to parse {what}: {exc}") from None


def json_body(req: falcon.Request, *, required: bool = False) -> dict[str, Any]:
    """The body as a JSON object; ``{}`` when empty and not ``required``. Parsed once per request."""
    ctx = req.context
    found = ctx.get("json_body", _MISSING)
    if found is not _MISSING:
        return found
    data = raw_body(req)
    if not data.strip():
        if required:
            raise ParsingError("request body is required")
        body: Any = {}
    else:
        body = parse_json(data)
        if not isinstance(body, dict):
            raise ParsingError(f"request body must be a JSON object, not {_json_kind(body)}")
    ctx.json_body = body
    return body


def contract_body(req: falcon.Request, *, required: bool = True) -> Any:
    """The JSON body of a graph or memory route, refused in the contract's one shape (``graph_error``).

    Any JSON value comes back (the service refuses a non-object in its own
    words); a body that is empty or not JSON at all (``NaN`` included: JSON has
    no such number) is a :class:`~xerj_core.errors.GraphError`, never the ES
    ``parsing_exception`` the other routes give. An empty body is ``{}`` when
    not ``required``.
    """
    data = raw_body(req)
    if not data.strip():
        if not required:
            return {}
        raise GraphError("request body is required")
    try:
        return parse_json(data)
    except XerjError as exc:
        raise GraphError(exc.reason) from None


def ndjson_lines(data: bytes) -> list[tuple[int, bytes]]:
    """Non-blank lines of an NDJSON body with their 1-based line numbers."""
    return [(n, line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def query_params(req: falcon.Request) -> dict[str, str]:
    """Query-string values as single strings; a parameter given twice is refused rather than guessed at."""
    out: dict[str, str] = {}
    for key, value in req.params.items():
        if isinstance(value, list):
            raise IllegalArgument(f"request parameter [{key}] was given more than once")
        out[key] = value
    return out


def bool_param(req: falcon.Request, name: str, default: bool = False, *,
               error: type[XerjError] = IllegalArgument) -> bool:
    """A query-string flag by :func:`xerj_core.params.flag`'s rule: absent → default, ``?x`` → True.

    ``error`` is the route family's refusal (the memory routes pass ``GraphError``).
    """
    value = req.params.get(name)
    if value is None:
        return default
    if isinstance(value, list):
        raise error(f"request parameter [{name}] was given more than once")
    return params.flag(value, name, error, source=params.QUERY)


def refuse_unknown(body: dict[str, Any], allowed: set[str], what: str) -> None:
    """Refuse a body field outside ``allowed`` (``what`` names the request, as ES's parser does)."""
    params.refuse_unknown(sorted(body), allowed, ParsingError, what=what, kind="field", ignored=frozenset())
