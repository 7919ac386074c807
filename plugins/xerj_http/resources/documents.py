"""Document routes: ``_doc``, ``_create``, ``_update``, ``_bulk`` and ``_mget``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import falcon

from xerj_core.errors import IllegalArgument, IndexNotFound, ParsingError, XerjError
from xerj_core.store import validate_index_name
from xerj_http.bodies import json_body, refuse_unknown
from xerj_http.resources.common import no_unsupported, send, write_result, write_status
from xerj_http.targets import BulkLine, parse_bulk, parse_mget

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

_OCC = ("if_seq_no", "if_primary_term", "version", "version_type")
_UPDATE_FIELDS = {"doc", "upsert", "doc_as_upsert", "detect_noop", "_source", "script", "scripted_upsert"}


def _single_index(index: str) -> str:
    if "," in index or "*" in index:
        raise IllegalArgument(f"a document request needs one concrete index, not [{index}]")
    return index


def source_view(source: dict[str, Any], spec: Any) -> Any:
    """Apply an ES ``_source`` spec: true/false or a list of top-level fields to keep."""
    if spec is None or spec is True or spec == "true":
        return source
    if spec is False or spec == "false":
        return None
    fields = spec.split(",") if isinstance(spec, str) else spec
    if isinstance(fields, dict):
        fields = fields.get("includes") or fields.get("include") or []
    if not isinstance(fields, list):
        raise ParsingError("[_source] must be a boolean, a field name or a list of field names")
    return {k: v for k, v in source.items() if k in fields}


def doc_body(index: str, doc_id: str, found: tuple[dict[str, Any], int] | None, spec: Any = None) -> dict[str, Any]:
    if found is None:
        return {"_index": index, "_id": doc_id, "found": False}
    body = {"_index": index, "_id": doc_id, "_version": found[1], "_primary_term": 1, "found": True}
    view = source_view(found[0], spec)
    if view is not None:
        body["_source"] = view
    return body


class Doc:
    """``/{index}/_doc/{id}``: index (PUT/POST), get, exists (HEAD), delete."""

    ops = {
        "PUT": ("doc.index", "write"),
        "POST": ("doc.index", "write"),
        "GET": ("doc.get", "read"),
        "HEAD": ("doc.exists", "read"),
        "DELETE": ("doc.delete", "write"),
    }

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        no_unsupported(req, *_OCC)
        op_type = req.get_param("op_type") or "index"
        if op_type not in ("index", "create"):
            raise IllegalArgument(f"opType must be 'create' or 'index', found: [{op_type}]")
        result = self.store.put(_single_index(index), json_body(req, required=True), id,
                                op_type=op_type)
        send(resp, write_result(result), write_status(result))

    on_post = on_put

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        index = _single_index(index)
        found = self.store.get(index, id)
        send(resp, doc_body(index, id, found, req.get_param("_source")), 200 if found else 404)

    def on_head(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        try:
            found = self.store.get(_single_index(index), id)
        except IndexNotFound:
            found = None
        resp.status = 200 if found else 404
        resp.content_type = falcon.MEDIA_JSON

    def on_delete(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        no_unsupported(req, *_OCC)
        result = self.store.delete(_single_index(index), id)
        send(resp, write_result(result), write_status(result))


class DocAutoId:
    """``POST /{index}/_doc``: index a document under a generated id."""

    ops = {"POST": ("doc.index", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        result = self.store.put(_single_index(index), json_body(req, required=True))
        send(resp, write_result(result), 201)


class DocCreate:
    """``PUT|POST /{index}/_create/{id}``: index only when the id is new (409 otherwise)."""

    ops = {"PUT": ("doc.create", "write"), "POST": ("doc.create", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        result = self.store.put(_single_index(index), json_body(req, required=True), id,
                                op_type="create")
        send(resp, write_result(result), 201)

    on_post = on_put


class DocUpdate:
    """``POST /{index}/_update/{id}``: merge a partial ``doc``; ``upsert``/``doc_as_upsert`` create it."""

    ops = {"POST": ("doc.update", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        no_unsupported(req, *_OCC)
        body = json_body(req, required=True)
        refuse_unknown(body, _UPDATE_FIELDS, "update")
        if "script" in body or "scripted_upsert" in body:
            raise IllegalArgument("script updates are not supported; send a partial [doc]")
        if "doc" not in body:
            raise IllegalArgument("Validation Failed: 1: script or doc is missing;")
        doc = body["doc"]
        upsert = body.get("upsert")
        if body.get("doc_as_upsert") is True and upsert is None:
            upsert = doc
        result = self.store.update(_single_index(index), id, doc, upsert=upsert)
        out = write_result(result)
        if body.get("_source"):
            found = self.store.get(result.index, id)
            if found is not None:
                out["get"] = {"_source": found[0], "found": True}
        send(resp, out, write_status(result))


def _bulk_item(line: BulkLine, result: Any = None, error: XerjError | None = None) -> dict[str, Any]:
    op = line.op
    if error is not None:
        cause = error.to_body()["error"]
        cause.pop("root_cause", None)
        cause.setdefault("index", op.index)
        item = {"_index": op.index, "_id": op.doc_id, "status": error.status, "error": cause}
    else:
        item = write_result(result)
        item["status"] = write_status(result)
    return {op.action: item}


class Bulk:
    """``POST|PUT /_bulk`` and ``/{index}/_bulk``: NDJSON actions applied in one transaction, per-item results."""

    ops = {"POST": ("bulk", "write"), "PUT": ("bulk", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        started = time.perf_counter()
        lines = parse_bulk(req, index)
        if not lines:
            raise ParsingError("request body is required")
        ready = [line for line in lines if line.error is None]
        done = iter(self.store.bulk([line.op for line in ready]) if ready else ())
        items, errors = [], False
        for line in lines:
            if line.error is not None:
                items.append(_bulk_item(line, error=line.error))
                errors = True
                continue
            item = next(done)
            errors = errors or item.error is not None
            items.append(_bulk_item(line, item.result, item.error))
        took = int((time.perf_counter() - started) * 1000)
        send(resp, {"took": took, "errors": errors, "items": items})

    on_put = on_post


class MultiGet:
    """``GET|POST /_mget`` and ``/{index}/_mget``: ``docs`` or ``ids``; a missing index is a per-doc error."""

    ops = {"GET": ("mget", "read"), "POST": ("mget", "read")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        default_spec = req.get_param("_source")
        docs = []
        for doc_index, doc_id, spec in parse_mget(req, index):
            if doc_index is None:
                raise IllegalArgument("Validation Failed: 1: index is missing for doc 0;")
            try:
                found = self.store.get(validate_index_name(doc_index), doc_id)
            except XerjError as exc:
                cause = exc.to_body()["error"]
                cause.pop("root_cause", None)
                docs.append({"_index": doc_index, "_id": doc_id, "error": cause})
                continue
            docs.append(doc_body(doc_index, doc_id, found, spec if spec is not None else default_spec))
        send(resp, {"docs": docs})

    on_get = on_post

