"""Second-brain routes under ``/_graph/{brain}``: link, unlink, ego and overview, over ``engine.graph``,
and the machine writer's three (standing edge ids, reconcile invalidation, detected edges) for autoindex."""

from __future__ import annotations

from typing import TYPE_CHECKING

import falcon

from xerj_core.autoindex import wire
from xerj_core.errors import GraphError, XerjError
from xerj_core.graph.requests import parse_ego
from xerj_core.store import MAX_ID_BYTES, validate_index_name
from xerj_http.bodies import contract_body, query_params
from xerj_http.resources.common import send

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine


class Link:
    """``POST /_graph/{brain}/link``: 201 when the derived edge id is new, 200 when re-asserted."""

    ops = {"POST": ("graph.link", "write")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        created, body = self.engine.graph.link(brain, contract_body(req))
        send(resp, body, 201 if created else 200)


class Unlink:
    """``DELETE /_graph/{brain}/link/{edge_id}``: retire an edge (``invalid_at`` defaults to now)."""

    ops = {"DELETE": ("graph.unlink", "write")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_delete(self, req: falcon.Request, resp: falcon.Response, brain: str, edge_id: str) -> None:
        invalid_at = query_params(req).get("invalid_at")
        send(resp, self.engine.graph.unlink(brain, edge_id, invalid_at=invalid_at))


class Ego:
    """``GET /_graph/{brain}/ego``: the bounded neighbourhood of one node or several seeds."""

    ops = {"GET": ("graph.ego", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        send(resp, self.engine.graph.ego(brain, parse_ego(query_params(req), engine_level=False)))


class Overview:
    """``GET /_graph/{brain}/overview``: brain totals; a missing brain is a 404 with the short body."""

    ops = {"GET": ("graph.overview", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        exists, body = self.engine.graph.overview(brain, query_params(req))
        send(resp, body, 200 if exists else 404)


class Review:
    """``GET /_graph/{brain}/_review``: the claims awaiting a person's word; ``POST``: approve and reject them."""

    ops = {"GET": ("graph.review_queue", "read"), "POST": ("graph.review", "write")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        send(resp, self.engine.graph.review_queue(brain, query_params(req)))

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        send(resp, self.engine.graph.review(brain, contract_body(req), by=req.context.principal.name))


class Standing:
    """``GET /_graph/{brain}/_standing``: ids of the live edges and of those retired by a person's rejection."""

    ops = {"GET": ("graph.standing", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        live, rejected = self.engine.graph.standing(brain)
        send(resp, {"brain": brain, "live": sorted(live), "rejected": sorted(rejected)})


class Claims:
    """``POST /_graph/{brain}/_claims``: the claims of the live edges whose evidence cites one of ``files``."""

    ops = {"POST": ("graph.claims", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        body = wire.structure(contract_body(req), wire.ClaimsQuery, error=GraphError)
        send(resp, {"brain": brain, "claims": self.engine.graph.live_claims(brain, body.files)})


class Invalidate:
    """``POST /_graph/{brain}/_invalidate``: a reconcile retires live edges; no rejection is recorded."""

    ops = {"POST": ("graph.invalidate", "write")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        body = wire.structure(contract_body(req), wire.Invalidation, error=GraphError)
        for n, edge_id in enumerate(body.edge_ids):
            if not edge_id or len(edge_id.encode()) > MAX_ID_BYTES:
                raise GraphError(f"[edge_ids[{n}]] is not an edge id: it must be 1 to {MAX_ID_BYTES} bytes long")
        count = self.engine.graph.invalidate_edges(brain, edge_ids=list(body.edge_ids), at=body.at)
        send(resp, {"brain": brain, "invalidated": count})


class Detected:
    """``POST /_graph/{brain}/_detected``: detector drafts written as a machine writer, in one transaction.

    Never a person's link: a claim a person rejected is stored retired and
    counted in ``suppressed``, whatever its ``valid_at``.
    """

    ops = {"POST": ("graph.detected", "write")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        body = wire.structure(contract_body(req), wire.EdgeBatch, error=GraphError)
        if body.nodes_index is not None:
            names = body.nodes_index.split(",")
            for name in names:
                try:
                    validate_index_name(name)
                except XerjError as exc:
                    raise GraphError(f"[nodes_index] must be a comma-separated list of index names: "
                                     f"{exc.reason}") from None
        send(resp, self.engine.graph.write_edges(brain, body.edges, created_at=body.created_at,
                                                 nodes_index=body.nodes_index))
