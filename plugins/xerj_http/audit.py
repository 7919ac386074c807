"""Slot 5 of the HTTP middleware: after the resource ran (or failed), audit what was done to which index.

The event names the index a request acted on, derived from the route's
parameters: a memory namespace as ``.xerj-memory-{ns}``, a brain as its edges
index ``.xerj-memory-{brain}-edges``, an index as itself (each with ``/{id}``
for one document), never the endpoint (``_memory``, ``_graph``). Its privilege
comes from the resource's ``ops`` table, so a recall, a search or an ego is a
``read``.

What is recorded: every request that is not a read (write, manage, all),
every denial (401 and 403, including a failed authentication, which names the
route it tried, and each index a bulk's items were refused, as its own entry), every key, share and audit operation, and the reads that
``--audit-reads`` asks for: ``all``, ``reserved`` (a read touching a ``.xerj-``
index: the reserved namespace and xerj's own indices; the default) or ``none``.

A sink that cannot write turns the response into a 503 naming the sink
(:class:`xerj_core.errors.AuditSinkFailed`): the request is not acknowledged
as if it had been recorded.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any, Sequence

import falcon

from xerj_core.graph.brain import edges_index, nodes_index
from xerj_http.middleware import operation

AUDIT_READS = ("all", "reserved", "none")
READ_PRIVILEGES = frozenset({"read", "monitor"})
RESERVED_PREFIX = ".xerj-"
# Key, share and audit routes are recorded whatever their privilege: who looked at the credentials or the
# evidence is what an auditor asks first.
ALWAYS_RECORDED = ("/_security", "/_xerj/share", "/_audit")
REQUEST_ID = "X-Request-Id"
_MAX_REQUEST_ID = 128


def outcome_of(status: int) -> str:
    if status < 400:
        return "success"
    if status in (401, 403):
        return "denied"
    return "failure"


def subject_of(principal: Any) -> str:
    """``anonymous``, ``guest:<share id>``, ``key:<key id>:<name>`` or the principal's name (``open-mode``)."""
    if principal is None:
        return "anonymous"
    share_id = getattr(principal, "share_id", None)
    if share_id:
        return f"guest:{share_id}"
    name = getattr(principal, "name", None) or "unnamed"
    key_id = getattr(principal, "key_id", None)
    return f"key:{key_id}:{name}" if key_id else name


def audit_resource(params: dict | None, targets: Sequence[str]) -> str:
    """What a request acted on, named from its route parameters: an index, with ``/{id}`` for one document."""
    if params:
        if "namespace" in params:
            name = nodes_index(params["namespace"])
            return f"{name}/{params['id']}" if "id" in params else name
        if "brain" in params:
            name = edges_index(params["brain"])
            return f"{name}/{params['edge_id']}" if "edge_id" in params else name
        if "index" in params:
            return f"{params['index']}/{params['id']}" if "id" in params else params["index"]
    return ",".join(targets)


def is_reserved(index: str) -> bool:
    return index.startswith(RESERVED_PREFIX)


def should_record(privilege: str, outcome: str, path: str, targets: Sequence[str], reads: str) -> bool:
    if outcome == "denied" or privilege not in READ_PRIVILEGES or path.startswith(ALWAYS_RECORDED):
        return True
    if reads == "all":
        return True
    return reads == "reserved" and any(is_reserved(name) for name in targets)


def credential_of(req: falcon.Request) -> str | None:
    """What an unauthenticated request presented, never its secret: ``ApiKey id [..]``, a scheme, or ``None``."""
    header = req.get_header("Authorization")
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "apikey":
        try:
            key_id = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return "ApiKey (malformed)"
        if key_id and len(key_id) <= _MAX_REQUEST_ID and key_id.isprintable():
            return f"ApiKey id [{key_id}]"
        return "ApiKey (malformed)"
    return scheme[:32] if scheme.isprintable() else "(unprintable)"


def request_id_of(req: falcon.Request) -> str:
    """The caller's ``X-Request-Id`` when it is a short printable token, else a fresh one."""
    given = req.get_header(REQUEST_ID)
    if given and len(given) <= _MAX_REQUEST_ID and given.isprintable() and not given.isspace():
        return given
    return uuid.uuid4().hex


class Audit:
    """Slot 5: one audit event per recorded request, through ``engine.audit`` (every registered sink).

    ``router`` is the app's router: a request refused before routing (a failed
    authentication) is looked up in it, so its entry names the route it tried.
    """

    def __init__(self, engine: Any, router: Any = None) -> None:
        self.engine = engine
        self.router = router
        self.reads = getattr(getattr(engine, "config", None), "audit_reads", "reserved")
        if self.reads not in AUDIT_READS:
            raise ValueError(f"audit_reads must be one of {list(AUDIT_READS)}, got [{self.reads}]")

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         req_succeeded: bool) -> None:
        ctx = req.context
        request_id = request_id_of(req)
        resp.set_header(REQUEST_ID, request_id)
        status = resp.status_code
        outcome = outcome_of(status)
        params, template = ctx.get("params"), req.uri_template
        if resource is None and self.router is not None and outcome == "denied":
            found = self.router.find(req.path, req)
            if found is not None:
                resource, _methods, params, template = found
        op, privilege = ctx.get("op"), ctx.get("privilege")
        if op is None or privilege is None:
            if resource is not None:
                op, privilege = operation(resource, req.method, template)
            else:
                op, privilege = "unrouted", "read" if req.method in ("GET", "HEAD", "OPTIONS") else "write"
        targets = list(ctx.get("targets") or ())
        if not should_record(privilege, outcome, req.path, targets, self.reads):
            return
        name = audit_resource(params, targets)
        event: dict[str, Any] = {
            "op": op,
            "subject": subject_of(ctx.get("principal")),
            "resource": name,
            "privilege": privilege,
            "outcome": outcome,
            "status": status,
            "remote_addr": req.remote_addr,
            "request_id": request_id,
        }
        if targets and targets != [name.split("/", 1)[0]]:
            event["indices"] = targets
        if event["subject"] == "anonymous":
            credential = credential_of(req)
            if credential is not None:
                event["credential"] = credential
        error_type = ctx.get("error_type")
        if error_type is not None:
            event["note"] = f"{error_type}: {ctx.get('error_reason')}"
        self.engine.audit.record(event)  # AuditSinkFailed → the error handler answers 503 naming the sink
        for denial in ctx.get("denials") or ():
            # a bulk's refused items: one denial per refused index, as a request refused whole records
            self.engine.audit.record({
                **{k: event[k] for k in ("op", "subject", "privilege", "remote_addr", "request_id")},
                "resource": denial.index, "outcome": "denied", "status": denial.error.status,
                "note": f"{denial.error.error_type}: {denial.error.reason}",
            })
