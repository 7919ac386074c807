"""Search routes: ``_search``, ``_count``, ``_msearch`` and ``_delete_by_query``, over ``engine.search``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import falcon

from xerj_core.errors import IllegalArgument, ParsingError, XerjError
from xerj_core.query.contexts import parse_keep_alive
from xerj_http.bodies import bool_param, json_body, query_params
from xerj_http.resources.common import send
from xerj_http.targets import msearch_expression, parse_msearch

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine


class Search:
    """``GET|POST /_search`` and ``/{index}/_search``."""

    ops = {"GET": ("search", "read"), "POST": ("search", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        body = json_body(req)
        if req.uri_template == "/_search" and "pit" in body:
            # A point in time reads the indices it pinned (its targets); an index expression that
            # middleware may have put on the fan-out route is not the caller's and does not apply.
            index = None
        send(resp, self.engine.search.search(index, body, params=query_params(req), principal=principal_name(req)))

    on_get = on_post


def principal_name(req: falcon.Request) -> str | None:
    """Who opens or continues a search context: a scroll or point in time is bound to it.

    An API key by its id (names need not be unique, ids are), anyone else by name.
    """
    principal = req.context.get("principal")
    if principal is None:
        return None
    key_id = getattr(principal, "key_id", None)
    return f"api-key:{key_id}" if key_id else principal.name


def _ids(value: object, what: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, str) and i for i in items):
        raise ParsingError(f"[{what}] must be an id or an array of ids")
    return items


class Scroll:
    """``GET|POST /_search/scroll[/{scroll_id}]`` (the next page) and ``DELETE`` (clear scrolls, ``_all`` too)."""

    ops = {"GET": ("scroll", "read"), "POST": ("scroll", "read"), "DELETE": ("clear_scroll", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, scroll_id: str | None = None) -> None:
        body = json_body(req)
        for key in body:
            if key not in ("scroll_id", "scroll", "rest_total_hits_as_int"):
                raise ParsingError(f"Unknown key [{key}] in a scroll request")
        scroll_id = body.get("scroll_id", scroll_id or req.get_param("scroll_id"))
        if not isinstance(scroll_id, str) or not scroll_id:
            raise IllegalArgument("Validation Failed: 1: scrollId is missing;")
        keep_alive = req.get_param("scroll") or body.get("scroll")
        if keep_alive is not None:
            parse_keep_alive(keep_alive, "scroll")
        total_as_int = bool_param(req, "rest_total_hits_as_int") if "rest_total_hits_as_int" in req.params else None
        send(resp, self.engine.search.scroll(scroll_id, scroll=keep_alive, principal=principal_name(req),
                                             total_as_int=total_as_int))

    on_get = on_post

    def on_delete(self, req: falcon.Request, resp: falcon.Response, scroll_id: str | None = None) -> None:
        body = json_body(req)
        wanted = body.get("scroll_id", scroll_id.split(",") if scroll_id else None)
        if wanted is None:
            raise IllegalArgument("Validation Failed: 1: no scroll ids specified;")
        contexts = self.engine.search.contexts
        principal = principal_name(req)
        ids = _ids(wanted, "scroll_id")
        if ids == ["_all"]:
            ids = [c for c, _record in contexts.owned(principal, "scroll")]
        freed = contexts.close(ids, principal, "scroll")
        send(resp, {"succeeded": True, "num_freed": len(freed)}, 200 if freed or not ids else 404)


class PointInTime:
    """Elasticsearch's ``POST /{index}/_pit?keep_alive=``: ``{"id", "_shards"}``."""

    ops = {"POST": ("open_point_in_time", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        keep_alive = req.get_param("keep_alive")
        if not keep_alive:
            raise IllegalArgument("Validation Failed: 1: [keep_alive] is not specified;")
        millis = parse_keep_alive(keep_alive)
        search = self.engine.search
        names = search.resolve(index, ignore_unavailable=bool_param(req, "ignore_unavailable"),
                               expand_wildcards=req.get_param("expand_wildcards") or "open")
        context_id, record = search.contexts.open("pit", names, principal_name(req), millis)
        count = len(record["pins"])
        send(resp, self.opened(context_id, record, {"total": count, "successful": count, "skipped": 0,
                                                    "failed": 0}))

    @staticmethod
    def opened(context_id: str, record: dict, shards: dict) -> dict:
        return {"id": context_id, "_shards": shards}


class OpenSearchPit(PointInTime):
    """OpenSearch's ``POST /{index}/_search/point_in_time?keep_alive=``, as ``opensearch-py`` calls it:
    ``{"pit_id", "_shards", "creation_time"}``."""

    @staticmethod
    def opened(context_id: str, record: dict, shards: dict) -> dict:
        return {"pit_id": context_id, "_shards": shards, "creation_time": record["created"]}


class PointInTimeClose:
    """Elasticsearch's ``DELETE /_pit`` (body ``{"id": ...}``): ``{"succeeded", "num_freed"}``."""

    ops = {"DELETE": ("close_point_in_time", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_body(req, required=True)
        ids = _ids(body.get("id"), "id")
        freed = self.engine.search.contexts.close(ids, principal_name(req), "pit")
        send(resp, {"succeeded": True, "num_freed": len(freed)}, 200 if freed else 404)


class OpenSearchPitClose:
    """OpenSearch's ``DELETE /_search/point_in_time`` (body ``{"pit_id": [...]}``): ``{"pits": [...]}``."""

    ops = {"DELETE": ("close_point_in_time", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_body(req, required=True)
        close_pits(self.engine, req, resp, _ids(body.get("pit_id"), "pit_id"))


def close_pits(engine: Any, req: falcon.Request, resp: falcon.Response, ids: list[str]) -> None:
    freed = set(engine.search.contexts.close(ids, principal_name(req), "pit"))
    send(resp, {"pits": [{"pit_id": i, "successful": i in freed} for i in ids]}, 200 if freed or not ids else 404)


class OpenSearchPitAll:
    """``GET|DELETE /_search/point_in_time/_all``: the caller's own points in time, listed or closed."""

    ops = {"GET": ("list_points_in_time", "read"), "DELETE": ("close_point_in_time", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        owned = self.engine.search.contexts.owned(principal_name(req), "pit")
        send(resp, {"pits": [{"pit_id": c, "creation_time": r["created"], "keep_alive": r["keep_alive"]}
                             for c, r in owned]})

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        ids = [c for c, _r in self.engine.search.contexts.owned(principal_name(req), "pit")]
        close_pits(self.engine, req, resp, ids)


class Count:
    """``GET|POST /_count`` and ``/{index}/_count``."""

    ops = {"GET": ("count", "read"), "POST": ("count", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        send(resp, self.engine.search.count(index, json_body(req), params=query_params(req)))

    on_get = on_post


class DeleteByQuery:
    """``POST /{index}/_delete_by_query``: delete what a query matches (see ``SearchService.delete_by_query``)."""

    ops = {"POST": ("delete_by_query", "write")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        status, body = self.engine.search.delete_by_query(index, json_body(req), params=query_params(req))
        send(resp, body, status)


class MultiSearch:
    """``GET|POST /_msearch`` and ``/{index}/_msearch``: each search answers on its own, errors included."""

    ops = {"GET": ("msearch", "read"), "POST": ("msearch", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        started = time.perf_counter()
        pairs = parse_msearch(req)
        # How many searches run at once is a transport choice; they run in turn here, so the cap is met.
        params = {k: v for k, v in query_params(req).items() if k != "max_concurrent_searches"}
        responses = []
        for header, body in pairs:
            search_params = {**params, **{k: str(v).lower() if isinstance(v, bool) else str(v)
                                          for k, v in header.items() if k != "index"}}
            try:
                answer = self.engine.search.search(msearch_expression(header, index), body, params=search_params)
                responses.append({**answer, "status": 200})
            except XerjError as exc:
                responses.append(exc.to_body())
        send(resp, {"took": int((time.perf_counter() - started) * 1000), "responses": responses})

    on_get = on_post
