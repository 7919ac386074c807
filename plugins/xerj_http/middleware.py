"""The cross-cutting slots, in order: authenticate → resolve targets → authorize → (resource) → audit."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import attrs
import falcon

from xerj_http.targets import resolve_targets


@attrs.frozen
class Principal:
    """Who is calling. ``superuser`` reaches every index; ``grants`` will hold scoped privileges."""

    name: str
    superuser: bool
    mode: str
    grants: tuple[Any, ...] = ()


OPEN_MODE_PRINCIPAL = Principal(name="open-mode", superuser=True, mode="open")

# What each HTTP method does to its targets when a resource does not say otherwise.
_DEFAULT_PRIVILEGE = {"GET": "read", "HEAD": "read", "OPTIONS": "read"}


def operation(resource: Any, method: str, template: str | None) -> tuple[str, str]:
    """``(op, privilege)`` of a routed request: from the resource's ``ops`` table, else from the method."""
    ops = getattr(resource, "ops", None)
    if ops:
        found = ops.get(method)
        if found is not None:
            return found
    return f"{method} {template or '?'}", _DEFAULT_PRIVILEGE.get(method, "write")


class CompatHeaders:
    """Headers every response carries so Elasticsearch-flavoured clients accept the server."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("X-Elastic-Product", "Elasticsearch")


class Authenticate:
    """Slot 1: who is calling. Puts a :class:`Principal` on ``req.context.principal``.

    Open mode resolves every caller to the superuser before any credential is
    examined, so the backends registered through ``xerj_register_auth_backends``
    are held but not consulted; a secured mode will ask them in turn.
    """

    def __init__(self, backends: Sequence[Any] = (), *, open_mode: bool = True) -> None:
        self.backends = list(backends)
        self.open_mode = open_mode

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.open_mode:
            req.context.principal = OPEN_MODE_PRINCIPAL
            return
        raise NotImplementedError("only open mode exists until the auth backends land")  # pragma: no cover


class ResolveTargets:
    """Slot 2: every index the request touches (``req.context.targets``), through :func:`resolve_targets`."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict) -> None:
        ctx = req.context
        ctx.engine = self.engine
        ctx.params = params
        ctx.targets = resolve_targets(req)


Policy = Callable[[Principal, str, str, Sequence[str]], None]


def open_mode_policy(principal: Principal, op: str, privilege: str, targets: Sequence[str]) -> None:
    """Open mode: everything is allowed. A real policy raises :class:`xerj_http.errors.Forbidden`."""


class Authorize:
    """Slot 3: may this principal exercise ``privilege`` on every target? Runs before any existence check."""

    def __init__(self, policy: Policy = open_mode_policy) -> None:
        self.policy = policy

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict) -> None:
        ctx = req.context
        op, privilege = operation(resource, req.method, req.uri_template)
        ctx.op, ctx.privilege = op, privilege
        self.policy(ctx.principal, op, privilege, ctx.targets)


def outcome_of(status: int) -> str:
    if status < 400:
        return "success"
    if status in (401, 403):
        return "denied"
    return "failure"


def audit_resource(params: dict | None, targets: Sequence[str]) -> str:
    """What a request acted on, named from its route parameters (a namespace, a brain, an index)."""
    if params:
        if "namespace" in params:
            name = f"_memory/{params['namespace']}"
            return f"{name}/{params['id']}" if "id" in params else name
        if "brain" in params:
            name = f"_graph/{params['brain']}"
            return f"{name}/{params['edge_id']}" if "edge_id" in params else name
        if "index" in params:
            return f"{params['index']}/{params['id']}" if "id" in params else params["index"]
    return ",".join(targets)


class Audit:
    """Slot 5: one ``xerj_audit_event`` per request, after the resource ran (or failed)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         req_succeeded: bool) -> None:
        ctx = req.context
        status = resp.status_code
        principal = ctx.get("principal")
        op = ctx.get("op")
        if op is None:
            op = operation(resource, req.method, req.uri_template)[0] if resource is not None else "unrouted"
        error_type = ctx.get("error_type")
        note = f"{status}" if error_type is None else f"{status} {error_type}: {ctx.get('error_reason')}"
        self.engine.notify("xerj_audit_event", event={
            "op": op,
            "subject": principal.name if principal is not None else "anonymous",
            "resource": audit_resource(ctx.get("params"), ctx.get("targets") or ()),
            "outcome": outcome_of(status),
            "note": note,
        })
