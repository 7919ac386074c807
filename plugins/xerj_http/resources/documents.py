"""Document routes: ``_doc``, ``_create``, ``_update``, ``_bulk`` and ``_mget``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import falcon

from xerj_core.errors import IllegalArgument, IndexNotFound, ParsingError, ResourceNotFound, XerjError
from xerj_core.query.request import SourceFilter, parse_source
from xerj_core.query.results import filter_source
from xerj_core.store import meta, validate_index_name
from xerj_http.bodies import json_body, refuse_unknown
from xerj_http.resources.common import forced_refresh, no_unsupported, send, write_result, write_status
from xerj_http.targets import BulkLine, parse_bulk, parse_mget

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

_OCC = ("if_seq_no", "if_primary_term", "version", "version_type")
_UPDATE_FIELDS = {"doc", "upsert", "doc_as_upsert", "detect_noop", "_source", "script", "scripted_upsert"}


def _single_index(index: str) -> str:
    if "," in index or "*" in index:
        raise IllegalArgument(f"a document request needs one concrete index, not [{index}]")
    return index


def read_index(store: Any, index: str) -> str:
    """The index a single-document read of ``index`` reads: itself, or the one index its alias names."""
    aliases = store.aliases()
    return meta.single_index(aliases, index) if index in aliases else index


def source_spec(spec: Any, includes: str | None = None, excludes: str | None = None) -> SourceFilter:
    """An ES ``_source`` spec (a bool, a comma list of patterns, a list, or ``{includes, excludes}``)
    with the ``_source_includes`` / ``_source_excludes`` parameters folded in, as search reads them."""
    if isinstance(spec, str):
        spec = {"true": True, "false": False}.get(spec, [p for p in spec.split(",") if p])
    parsed = parse_source(spec)
    if includes or excludes:
        parsed = SourceFilter(True, tuple(p for p in (includes or "").split(",") if p) or parsed.includes,
                              tuple(p for p in (excludes or "").split(",") if p) or parsed.excludes)
    return parsed


def doc_body(index: str, doc_id: str, found: tuple[dict[str, Any], int] | None,
             spec: SourceFilter | None = None) -> dict[str, Any]:
    if found is None:
        return {"_index": index, "_id": doc_id, "found": False}
    body = {"_index": index, "_id": doc_id, "_version": found[1], "_primary_term": 1, "found": True}
    spec = spec or SourceFilter()
    if spec.enabled:
        body["_source"] = filter_source(found[0], spec)
    return body


def _param_spec(req: falcon.Request) -> SourceFilter:
    return source_spec(req.get_param("_source"), req.get_param("_source_includes"),
                       req.get_param("_source_excludes"))


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
        forced = forced_refresh(req)
        result = self.store.put(_single_index(index), json_body(req, required=True), id,
                                op_type=op_type)
        send(resp, write_result(result, forced), write_status(result))

    on_post = on_put

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        index = read_index(self.store, _single_index(index))
        found = self.store.get(index, id)
        send(resp, doc_body(index, id, found, _param_spec(req)), 200 if found else 404)

    def on_head(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        try:
            found = self.store.get(_single_index(index), id)
        except IndexNotFound:
            found = None
        resp.status = 200 if found else 404
        resp.content_type = falcon.MEDIA_JSON

    def on_delete(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        no_unsupported(req, *_OCC)
        forced = forced_refresh(req)
        result = self.store.delete(_single_index(index), id)
        send(resp, write_result(result, forced), write_status(result))


class DocSource:
    """``GET|HEAD /{index}/_source/{id}``: the document's ``_source`` alone (filtered like a get)."""

    ops = {"GET": ("doc.get_source", "read"), "HEAD": ("doc.exists_source", "read")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def _found(self, index: str, doc_id: str) -> tuple[str, Any]:
        index = read_index(self.store, _single_index(index))
        return index, self.store.get(index, doc_id)

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        index, found = self._found(index, id)
        if found is None:
            raise ResourceNotFound(f"Document not found [{index}]/[{id}]")
        send(resp, filter_source(found[0], _param_spec(req)))

    def on_head(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        try:
            found = self._found(index, id)[1]
        except IndexNotFound:
            found = None
        resp.status = 200 if found else 404
        resp.content_type = falcon.MEDIA_JSON


class DocAutoId:
    """``POST /{index}/_doc``: index a document under a generated id."""

    ops = {"POST": ("doc.index", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        forced = forced_refresh(req)
        result = self.store.put(_single_index(index), json_body(req, required=True))
        send(resp, write_result(result, forced), 201)


class DocCreate:
    """``PUT|POST /{index}/_create/{id}``: index only when the id is new (409 otherwise)."""

    ops = {"PUT": ("doc.create", "write"), "POST": ("doc.create", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        forced = forced_refresh(req)
        result = self.store.put(_single_index(index), json_body(req, required=True), id,
                                op_type="create")
        send(resp, write_result(result, forced), 201)

    on_post = on_put


class DocUpdate:
    """``POST /{index}/_update/{id}``: merge a partial ``doc``; ``upsert``/``doc_as_upsert`` create it."""

    ops = {"POST": ("doc.update", "write")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str, id: str) -> None:
        no_unsupported(req, *_OCC)
        forced = forced_refresh(req)
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
        out = write_result(result, forced)
        if _wants_source(body):
            found = self.store.get(result.index, id)
            if found is not None:
                out["get"] = _get_part(result, found[0], body.get("_source"))
        send(resp, out, write_status(result))


def _wants_source(update: Any) -> bool:
    spec = update.get("_source") if isinstance(update, dict) else None
    return spec not in (None, False, "false")


def _get_part(result: Any, source: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The ``get`` an update returns when asked for ``_source`` (filtered by it when it names fields)."""
    view = filter_source(source, source_spec(True if spec in (True, "true") else spec))
    return {"_seq_no": max(result.seq_no, 0), "_primary_term": 1, "found": True, "_source": view}


def _bulk_item(line: BulkLine, result: Any = None, error: XerjError | None = None,
               forced: bool = False) -> dict[str, Any]:
    op = line.op
    if error is not None:
        cause = error.to_body()["error"]
        cause.pop("root_cause", None)
        cause.setdefault("index", op.index)
        item = {"_index": op.index, "_id": op.doc_id, "status": error.status, "error": cause}
    else:
        item = write_result(result, forced)
        item["status"] = write_status(result)
    return {op.action: item}


class Bulk:
    """``POST|PUT /_bulk`` and ``/{index}/_bulk``: NDJSON actions applied in one transaction, per-item results."""

    ops = {"POST": ("bulk", "write"), "PUT": ("bulk", "write")}
    # Each item is authorized against its own index: an ungranted one is that item's 403, not the request's.
    authorizes_items = True

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        started = time.perf_counter()
        forced = forced_refresh(req)
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
            entry = _bulk_item(line, item.result, item.error, forced)
            if item.error is None and line.op.action == "update" and _wants_source(line.op.doc):
                found = self.store.get(item.result.index, item.result.doc_id)
                if found is not None:
                    entry["update"]["get"] = _get_part(item.result, found[0], line.op.doc.get("_source"))
            items.append(entry)
        took = int((time.perf_counter() - started) * 1000)
        send(resp, {"took": took, "errors": errors, "items": items})

    on_put = on_post


class MultiGet:
    """``GET|POST /_mget`` and ``/{index}/_mget``: ``docs`` or ``ids``; a missing index is a per-doc error."""

    ops = {"GET": ("mget", "read"), "POST": ("mget", "read")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        default_spec = _param_spec(req)
        docs = []
        for doc_index, doc_id, spec in parse_mget(req, index):
            if doc_index is None:
                raise IllegalArgument("Validation Failed: 1: index is missing for doc 0;")
            try:
                doc_index = read_index(self.store, validate_index_name(doc_index))
                found = self.store.get(doc_index, doc_id)
            except XerjError as exc:
                cause = exc.to_body()["error"]
                cause.pop("root_cause", None)
                docs.append({"_index": doc_index, "_id": doc_id, "error": cause})
                continue
            docs.append(doc_body(doc_index, doc_id, found, source_spec(spec) if spec is not None else default_spec))
        send(resp, {"docs": docs})

    on_get = on_post

