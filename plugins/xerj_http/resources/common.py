"""Response helpers shared by the resources (ES write results, shard headers, index expressions)."""

from __future__ import annotations

from typing import Any

import falcon
import orjson

from xerj_core.errors import IllegalArgument
from xerj_core.store import WriteResult

SHARDS_ONE = {"total": 1, "successful": 1, "failed": 0}


def send(resp: falcon.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(body)


def write_result(result: WriteResult, forced_refresh: bool = False) -> dict[str, Any]:
    body = {
        "_index": result.index,
        "_id": result.doc_id,
        "_version": result.version,
        "result": result.result,
        "_shards": SHARDS_ONE,
        "_seq_no": max(result.seq_no, 0),
        "_primary_term": 1,
    }
    if forced_refresh:
        body["forced_refresh"] = True
    return body


def forced_refresh(req: falcon.Request) -> bool:
    """Whether a write's ``refresh`` asks for a forced refresh (``true`` or empty), as ES reports it.

    Every committed write is already visible, so ``wait_for`` returns at once and
    ``true`` forces nothing; the flag only shapes the response.
    """
    if "refresh" not in req.params:
        return False
    value = req.params["refresh"]
    if isinstance(value, list):
        value = value[-1]
    if value in ("", "true"):
        return True
    if value in ("false", "wait_for"):
        return False
    raise IllegalArgument(f"Unknown value for refresh: [{value}].")


def write_status(result: WriteResult) -> int:
    return {"created": 201, "not_found": 404}.get(result.result, 200)


def concrete_names(expression: str, verb: str) -> list[str]:
    """A comma list of concrete index names; wildcards are refused for verbs that change indices."""
    names = [p.strip() for p in expression.split(",") if p.strip()]
    if not names or any("*" in n or n == "_all" or n.startswith("-") for n in names):
        raise IllegalArgument(f"Wildcard expressions or all indices are not allowed for {verb} [{expression}]")
    return names


def no_unsupported(req: falcon.Request, *names: str) -> None:
    for name in names:
        if name in req.params:
            raise IllegalArgument(f"request parameter [{name}] is not supported")

