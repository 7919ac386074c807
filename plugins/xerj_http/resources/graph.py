"""Second-brain routes under ``/_graph/{brain}``: link, unlink, ego and overview, over ``engine.graph``."""

from __future__ import annotations

from typing import Any

import falcon

from xerj_http.bodies import json_body, query_params
from xerj_http.resources.common import send


class Link:
    """``POST /_graph/{brain}/link``: 201 when the derived edge id is new, 200 when re-asserted."""

    ops = {"POST": ("graph.link", "write")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        created, body = self.engine.graph.link(brain, json_body(req, required=True))
        send(resp, body, 201 if created else 200)


class Unlink:
    """``DELETE /_graph/{brain}/link/{edge_id}``: retire an edge (``invalid_at`` defaults to now)."""

    ops = {"DELETE": ("graph.unlink", "write")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_delete(self, req: falcon.Request, resp: falcon.Response, brain: str, edge_id: str) -> None:
        invalid_at = query_params(req).get("invalid_at")
        send(resp, self.engine.graph.unlink(brain, edge_id, invalid_at=invalid_at))


class Ego:
    """``GET /_graph/{brain}/ego``: the bounded neighbourhood of one node or several seeds."""

    ops = {"GET": ("graph.ego", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        send(resp, self.engine.graph.ego(brain, query_params(req)))


class Overview:
    """``GET /_graph/{brain}/overview``: brain totals; a missing brain is a 404 with the short body."""

    ops = {"GET": ("graph.overview", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        exists, body = self.engine.graph.overview(brain, query_params(req))
        send(resp, body, 200 if exists else 404)
