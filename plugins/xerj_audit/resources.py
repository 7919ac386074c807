"""The superuser-only audit routes: ``GET /_audit/_search`` and ``GET /_audit/_verify``."""

from __future__ import annotations

from typing import Any

import falcon

from xerj_core import params
from xerj_core.audit_query import AuditQuery
from xerj_core.errors import IllegalArgument, XerjError
from xerj_http.bodies import query_params
from xerj_http.errors import Forbidden
from xerj_http.resources.common import send

class NoReadableSink(XerjError):
    status = 404
    error_type = "resource_not_found_exception"


def who(principal: Any) -> str:
    if principal is None:
        return "an unauthenticated caller"
    key_id = getattr(principal, "key_id", None)
    name = getattr(principal, "name", "?")
    return f"API key id [{key_id}] of user [{name}]" if key_id else f"user [{name}]"


def require_superuser(req: falcon.Request, op: str) -> None:
    """Refuse anyone but a superuser, whatever the authorize slot decided: the log is the evidence."""
    principal = req.context.get("principal")
    if not getattr(principal, "superuser", False):
        raise Forbidden(f"action [{op}] is unauthorized for {who(principal)}; only a superuser (the admin key) "
                        f"may read the audit log")


class _AuditRoute:
    # No index is a target of these routes, so a privilege on targets alone would admit anyone:
    # ``superuser_only`` tells the authorize slot, and the responder checks again.
    superuser_only = True
    op = ""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.ops = {"GET": (self.op, "all")}

    def sink(self) -> Any:
        sink = self.engine.audit.readable()
        if sink is None:
            raise NoReadableSink("no installed audit sink can be searched or verified "
                                 "(is the jsonl sink disabled through XERJ_DISABLE_PLUGINS?)")
        return sink


class AuditSearch(_AuditRoute):
    """Entries newest first, filtered by ``subject``, ``resource``, ``op``, ``outcome``, ``from``/``to``; ``size``."""

    op = "audit.search"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_superuser(req, self.op)
        query = AuditQuery.from_params(query_params(req))
        send(resp, self.sink().search(query))


class AuditVerify(_AuditRoute):
    """Walks every file of the chain: ``{valid, entries, files, first_broken?}``."""

    op = "audit.verify"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_superuser(req, self.op)
        params.refuse_unknown(query_params(req), (), IllegalArgument, what="/_audit/_verify")
        send(resp, self.sink().verify().to_dict())


def add_routes(app: falcon.App, engine: Any) -> None:
    app.add_route("/_audit/_search", AuditSearch(engine))
    app.add_route("/_audit/_verify", AuditVerify(engine))
