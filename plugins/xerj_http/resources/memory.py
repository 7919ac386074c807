"""Agent-memory routes under ``/_memory/{namespace}``: create, store, list, drop, recall, forget and re-embed, over ``engine.memory``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import falcon

from xerj_core.errors import GraphError
from xerj_http.bodies import bool_param, contract_body, query_params
from xerj_http.resources.common import send

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine


class Namespace:
    """``PUT`` creates it with an embedder, ``POST`` stores a memory, ``GET`` lists them, ``DELETE`` drops it."""

    ops = {"PUT": ("memory.create", "manage"), "POST": ("memory.store", "write"), "GET": ("memory.list", "read"),
           "DELETE": ("memory.drop", "manage")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_put(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.create(namespace, contract_body(req, required=False)))

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        status, body = self.engine.memory.store(namespace, contract_body(req), by=req.context.principal.name)
        send(resp, body, status)

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.list(namespace, query_params(req)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.drop(namespace))


class Recall:
    """``POST /_memory/{namespace}/_recall``: exactly one of ``query`` or ``vector``; optional ``graph``."""

    ops = {"POST": ("memory.recall", "read")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.recall(namespace, contract_body(req)))


class Reembed:
    """``POST /_memory/{namespace}/_reembed``: every memory re-embedded with ``embedder``, in place, resumably."""

    ops = {"POST": ("memory.reembed", "manage")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.reembed(namespace, contract_body(req)))


class Memory:
    """``DELETE /_memory/{namespace}/{id}``: forget one memory (retired; ``?purge=true`` erases it;
    ``?reject=true`` also lays a tombstone refusing the same value later)."""

    ops = {"DELETE": ("memory.forget", "write")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str, id: str) -> None:
        purge = bool_param(req, "purge", error=GraphError)
        reject = bool_param(req, "reject", error=GraphError)
        send(resp, self.engine.memory.forget(namespace, id, purge=purge, reject=reject,
                                             by=req.context.principal.name))


class Tombstones:
    """``GET /_memory/{namespace}/_tombstones``: every rejection of a memory value, active and lifted."""

    ops = {"GET": ("memory.tombstones", "read")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.tombstones(namespace))


class Review:
    """``POST /_memory/{namespace}/_review``: approve memories and reject them (with tombstones), per id."""

    ops = {"POST": ("memory.review", "write")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        send(resp, self.engine.memory.review(namespace, contract_body(req),
                                             by=req.context.principal.name))
