"""Search routes: ``_search``, ``_count`` and ``_msearch``, over ``engine.search``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import falcon

from xerj_core.errors import XerjError
from xerj_http.bodies import json_body, query_params
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
        send(resp, self.engine.search.search(index, json_body(req), params=query_params(req)))

    on_get = on_post


class Count:
    """``GET|POST /_count`` and ``/{index}/_count``."""

    ops = {"GET": ("count", "read"), "POST": ("count", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        send(resp, self.engine.search.count(index, json_body(req), params=query_params(req)))

    on_get = on_post


class MultiSearch:
    """``GET|POST /_msearch`` and ``/{index}/_msearch``: each search answers on its own, errors included."""

    ops = {"GET": ("msearch", "read"), "POST": ("msearch", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        started = time.perf_counter()
        pairs = parse_msearch(req)
        params = query_params(req)
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
