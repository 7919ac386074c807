"""``/_security`` routes in Elasticsearch's shapes: mint, list and invalidate API keys; who am I."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon

from xerj_auth.principal import Principal
from xerj_core.errors import IllegalArgument
from xerj_http.bodies import bool_param, json_body
from xerj_http.errors import Forbidden
from xerj_http.resources.common import send

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

_INVALIDATE_FIELDS = {"ids", "id", "name"}


def _superuser(req: falcon.Request, action: str) -> Principal:
    principal = req.context.principal
    if not principal.superuser:
        who = (f"API key id [{principal.key_id}] of user [{principal.name}]" if principal.key_id
               else f"user [{principal.name}]")
        raise Forbidden(f"action [{action}] is unauthorized for {who}, this action is granted by the cluster "
                        f"privileges [manage_api_key,manage_security,all]")
    return principal


def _key_store(req: falcon.Request) -> Any:
    store = req.context.get("key_store")
    if store is None:
        raise IllegalArgument("API keys are not available: no auth backend that keeps keys is installed")
    return store


class ApiKeys:
    """``POST|PUT`` mints a key (superuser only), ``GET`` lists keys, ``DELETE`` invalidates them."""

    ops = {"POST": ("security.create_api_key", "cluster"), "PUT": ("security.create_api_key", "cluster"),
           "GET": ("security.get_api_key", "cluster"), "DELETE": ("security.invalidate_api_key", "cluster")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _superuser(req, "cluster:admin/xpack/security/api_key/create")
        send(resp, _key_store(req).create(json_body(req, required=True)))

    on_put = on_post

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        principal = req.context.principal
        key_id = req.get_param("id") or None
        name = req.get_param("name") or None
        if not principal.superuser:
            # Anyone else sees their own key and nothing else.
            if key_id is not None and key_id != principal.key_id:
                send(resp, {"api_keys": []})
                return
            key_id = principal.key_id or ""
        found = _key_store(req).find(key_id=key_id, name=name, active_only=bool_param(req, "active_only"))
        send(resp, {"api_keys": found})

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        _superuser(req, "cluster:admin/xpack/security/api_key/invalidate")
        body = json_body(req, required=True)
        unknown = sorted(set(body) - _INVALIDATE_FIELDS)
        if unknown:
            raise IllegalArgument(f"unknown field [{unknown[0]}] in an invalidate API key request; "
                                  f"expected [ids] or [name]")
        ids = body.get("ids", [])
        if "id" in body:
            ids = [*ids, body["id"]] if isinstance(ids, list) else ids
        name = body.get("name")
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise IllegalArgument("[ids] must be an array of API key ids")
        if name is not None and (not isinstance(name, str) or not name):
            raise IllegalArgument("[name] must be a non-empty string")
        if not ids and name is None:
            raise IllegalArgument("one of [ids] or [name] must be given")
        done, before = _key_store(req).invalidate(ids=ids, name=name)
        send(resp, {"invalidated_api_keys": done, "previously_invalidated_api_keys": before, "error_count": 0})


class Authenticate:
    """``GET /_security/_authenticate``: who the credential says you are."""

    ops = {"GET": ("security.authenticate", "cluster")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        principal: Principal = req.context.principal
        realm = {"name": "_es_api_key", "type": "_es_api_key"} if principal.key_id else \
            {"name": principal.mode, "type": principal.mode}
        body: dict[str, Any] = {
            "username": principal.name,
            "roles": ["superuser"] if principal.superuser else [],
            "full_name": None, "email": None, "metadata": {}, "enabled": True,
            "authentication_realm": realm, "lookup_realm": realm,
            "authentication_type": "api_key" if principal.key_id else principal.mode,
        }
        if principal.key_id:
            body["api_key"] = {"id": principal.key_id, "name": principal.name}
        send(resp, body)
