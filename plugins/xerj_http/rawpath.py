"""WSGI-level refusal of request paths whose percent-decoded bytes are not UTF-8, before Falcon decodes them.

Falcon replaces invalid bytes with U+FFFD, so ``/idx/_doc/%FF%FE`` and
``/idx/_doc/%FE%FF`` would name one document; they are refused instead.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import orjson

from xerj_core.errors import es_error_body


def invalid_path(environ: dict[str, Any]) -> str | None:
    """The reason the request path is refused, or None when it decodes as UTF-8."""
    path = environ.get("PATH_INFO", "")
    try:
        path.encode("latin-1").decode("utf-8")
    except UnicodeEncodeError:
        return None  # already text (not from a WSGI server's latin-1 bytes): nothing to check
    except UnicodeDecodeError as exc:
        return f"the request path is not valid UTF-8 once percent-decoded (byte {exc.start}): [{path!r}]"
    return None


def refuse(start_response: Callable[..., Any], reason: str) -> Iterable[bytes]:
    body = orjson.dumps(es_error_body(400, "illegal_argument_exception", reason))
    start_response("400 Bad Request", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
