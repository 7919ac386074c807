"""The cross-cutting slots, in order: authenticate → resolve targets → authorize → (resource) → audit.

The audit slot lives in :mod:`xerj_http.audit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import attrs
import falcon

from xerj_auth.principal import ANONYMOUS_PRINCIPAL, OPEN_MODE_PRINCIPAL, RESERVED_PREFIX, Principal
from xerj_core.errors import XerjError
from xerj_core.query.resolve import resolve_indices
from xerj_http.errors import Forbidden, Unauthenticated
from xerj_http.targets import (FAN_OUT_ROUTES, concrete_targets, default_expand, parse_bulk, parse_msearch,
                               resolve_targets)

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine


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
    examined. A secured app asks each opened backend (from
    ``xerj_register_auth_backends``) in turn; the first principal wins, a
    credential a backend refuses is a 401, and so is a request with none.
    ``req.context.key_store`` is the first backend's key store, for the
    ``_security`` routes, and ``req.context.share_store`` the first backend's
    share store, for the share routes. A route a backend lists in its
    ``public_routes`` (trading a share passcode for a token) is reached with no
    credential, as an anonymous principal held to those routes alone.
    """

    def __init__(self, backends: Sequence[Any] = (), *, open_mode: bool = True,
                 public_prefixes: list[str] | None = None) -> None:
        self.backends = list(backends)
        self.open_mode = open_mode
        # Paths a plugin serves to anyone (the console's static files and sign-in); the caller is
        # the anonymous principal there, which holds no privilege on any index. Shared with the app.
        self.public_prefixes = public_prefixes if public_prefixes is not None else []
        self.key_store = next((b.keys for b in self.backends if getattr(b, "keys", None) is not None), None)
        self.share_store = next((b.shares for b in self.backends if getattr(b, "shares", None) is not None), None)
        public = frozenset().union(*(getattr(b, "public_routes", frozenset()) for b in self.backends))
        self.public_routes = public
        self.anonymous = Principal(name="anonymous", superuser=False, mode="anonymous", grants=(), routes=public)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.key_store = self.key_store
        req.context.share_store = self.share_store
        if self.open_mode:
            req.context.principal = OPEN_MODE_PRINCIPAL
            return
        if self.public_prefixes and req.path.startswith(tuple(self.public_prefixes)):
            req.context.principal = ANONYMOUS_PRINCIPAL
            return
        headers = req.headers
        for backend in self.backends:
            try:
                principal = backend.authenticate(headers)
            except XerjError as exc:
                if exc.status != 401:
                    raise
                raise _unauthenticated(req) from None
            if principal is not None:
                req.context.principal = principal
                return
        if (req.method, req.path) in self.public_routes:
            req.context.principal = self.anonymous
            return
        raise _unauthenticated(req)


def _unauthenticated(req: falcon.Request) -> Unauthenticated:
    # One answer for no credential, a malformed one, and an unknown, invalidated or expired key,
    # so a caller cannot tell which of its keys ever existed.
    return Unauthenticated(f"missing authentication credentials for REST request [{req.path}]")


class ResolveTargets:
    """Slot 2: every index the request touches (``req.context.targets``), through :func:`resolve_targets`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict) -> None:
        ctx = req.context
        ctx.engine = self.engine
        ctx.params = params
        ctx.targets = resolve_targets(req)


Policy = Callable[[Principal, str, str, Sequence[str]], None]

# The op one item of a bulk is authorized as (ES's shard-level bulk action), so its refusal says so.
BULK_ITEM_OP = "bulk.item"

# ES's names for the actions whose ES counterpart is well known; the others are named after xerj's op.
_ES_ACTIONS = {
    "search": "indices:data/read/search", "msearch": "indices:data/read/msearch",
    "count": "indices:data/read/search", "doc.get": "indices:data/read/get", "mget": "indices:data/read/mget",
    "doc.index": "indices:data/write/index", "doc.create": "indices:data/write/index",
    "doc.update": "indices:data/write/update", "doc.delete": "indices:data/write/delete",
    "bulk": "indices:data/write/bulk", BULK_ITEM_OP: "indices:data/write/bulk[s]", "indices.create": "indices:admin/create",
    "indices.delete": "indices:admin/delete", "indices.get": "indices:admin/get",
    "indices.exists": "indices:admin/get", "indices.get_mapping": "indices:admin/mappings/get",
    "indices.put_mapping": "indices:admin/mapping/put", "indices.refresh": "indices:admin/refresh",
    "cat.indices": "indices:monitor/stats",
}
_ACTION_PREFIX = {"read": "indices:data/read/", "write": "indices:data/write/", "manage": "indices:admin/"}


def action_name(op: str, privilege: str) -> str:
    known = _ES_ACTIONS.get(op)
    if known is not None:
        return known
    return _ACTION_PREFIX.get(privilege, "indices:monitor/") + op.replace(".", "/")


def index_privilege(privilege: str) -> str:
    """The index privilege a route's privilege needs on its targets (``monitor`` routes list what you may read)."""
    return "read" if privilege == "monitor" else privilege


def refusal(principal: Principal, op: str, privilege: str, indices: Sequence[str]) -> Forbidden:
    """The ES-shaped 403 naming the action, the caller, the indices and the privileges that would grant it."""
    needed = index_privilege(privilege)
    who = (f"API key id [{principal.key_id}] of user [{principal.name}]" if principal.key_id
           else f"user [{principal.name}]")
    return Forbidden(f"action [{action_name(op, privilege)}] is unauthorized for {who} on indices "
                     f"[{','.join(indices)}], this action is granted by the index privileges [{needed},all]")


def index_policy(principal: Principal, op: str, privilege: str, targets: Sequence[str]) -> None:
    """The reach rules: every target needs the route's privilege (see :meth:`Principal.may`)."""
    if principal.superuser:
        return
    needed = index_privilege(privilege)
    refused = [name for name in targets if not principal.may(needed, name)]
    if refused:
        raise refusal(principal, op, privilege, refused)


def open_mode_policy(principal: Principal, op: str, privilege: str, targets: Sequence[str]) -> None:
    """Allows everything; kept for callers that want an app with no authorization at all."""


# An expression that names no index at all (every index, then every index removed): what a
# fan-out narrows to when the caller may read none of the indices its wildcards matched.
NO_INDICES = "*,-*"


def _is_pattern(part: str) -> bool:
    return "*" in part or part == "_all"


def narrow_expression(store: Any, expression: str | None, allowed: Callable[[str], bool],
                      expand_wildcards: str) -> tuple[str, list[str], list[str]]:
    """``(rewritten, explicit, matched)`` of an index expression for a caller limited to ``allowed``.

    Wildcards (and ``_all``, and no expression at all) expand only to names
    ``allowed`` admits; concrete names stay as written so that authorization
    refuses an ungranted one rather than hiding it. ``rewritten`` is a comma
    list of concrete names the resource resolves exactly as before; ``matched``
    is every name a wildcard matched, admitted or not (none of them is refused).
    """
    parts = [p.strip() for p in (expression or "").split(",") if p.strip()] or ["_all"]
    explicit = [p for n, p in enumerate(parts) if not _is_pattern(p) and not (n > 0 and p.startswith("-"))]
    if len(explicit) == len(parts):
        return expression or "", explicit, []
    expression = ",".join(parts)
    try:
        kept = resolve_indices(store, expression, ignore_unavailable=True, expand_wildcards=expand_wildcards,
                               allowed=allowed)
        matched = resolve_indices(store, expression, ignore_unavailable=True, expand_wildcards=expand_wildcards)
    except XerjError:
        kept, matched = [], []
    # A concrete name that does not exist stays in the list so the resource still answers 404 for it.
    rewritten = list(dict.fromkeys([*kept, *(n for n in explicit if n not in kept and not store.exists(n))]))
    return ",".join(rewritten) or NO_INDICES, explicit, [name for name in matched if name not in explicit]


@attrs.frozen
class ItemDenial:
    """The items of one index a per-item request was refused: what the audit slot records as a denial."""

    index: str
    items: int
    error: XerjError


def refuse_items(req: falcon.Request, principal: Principal, privilege: str, check: Policy) -> None:
    """Authorize a bulk item by item: an item naming an index ``check`` refuses gets that 403 as its result.

    ES answers a bulk with ungranted indices per item rather than as a whole,
    so the permitted items still run. Each distinct index an item names (an
    alias as its indices) goes through ``check``, the policy every other
    request goes through; a refused item keeps no other error (authorization
    comes before parsing its source) and never reaches the store. The
    refusals land on ``req.context.denials`` for the audit slot.
    """
    ctx = req.context
    try:
        lines = parse_bulk(req, ctx.params.get("index"))
    except XerjError:
        return  # a malformed body: the resource refuses it whole with the same parser
    store = ctx.engine.store
    verdicts: dict[str, XerjError | None] = {}
    counts: dict[str, int] = {}
    kept = []
    for line in lines:
        index = line.op.index
        if index not in verdicts:
            try:
                check(principal, BULK_ITEM_OP, privilege, concrete_targets(store, [index]))
                verdicts[index] = None
            except XerjError as exc:
                if exc.status != 403:
                    raise
                verdicts[index] = exc
        refused = verdicts[index]
        if refused is None:
            kept.append(line)
            continue
        counts[index] = counts.get(index, 0) + 1
        kept.append(attrs.evolve(line, error=refused))
    ctx.bulk_lines = kept
    ctx.denials = [ItemDenial(index, n, verdicts[index]) for index, n in counts.items()]


class Authorize:
    """Slot 3: may this principal exercise ``privilege`` on every target? Runs before any existence check.

    A superuser passes. For anyone else, a read that fans out (``/_search``,
    ``_cat/indices``, ``*``, ``_all``, a wildcard in a comma list or an
    ``_msearch`` header) is narrowed to the indices the caller may read before
    the resource runs; every name the request gives explicitly must be granted,
    or the request is a 403 naming it. A resource that ``authorizes_items``
    (``_bulk``) is answered per item instead (:func:`refuse_items`).
    """

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict) -> None:
        ctx = req.context
        op, privilege = operation(resource, req.method, req.uri_template)
        ctx.op, ctx.privilege = op, privilege
        principal = ctx.principal
        routes = getattr(principal, "routes", None)  # a plugin's principal need not carry the field
        if routes is not None and (req.method, req.uri_template) not in routes:
            # Held to an allow-list (a share-link guest): refused before any privilege is looked at.
            raise Forbidden(f"action [{action_name(op, privilege)}] is not open to [{principal.name}]: "
                            f"this credential reaches only "
                            f"{', '.join(sorted(f'{m} {t}' for m, t in routes))}")
        if getattr(resource, "authorizes_items", False):
            if self.policy is None and principal.superuser:
                return
            refuse_items(req, principal, privilege, self.policy or index_policy)
            return
        if self.policy is not None:
            self.policy(principal, op, privilege, ctx.targets)
            return
        if principal.superuser:
            return
        needed = index_privilege(privilege)
        targets = ctx.targets
        if needed == "read":
            expanded = self._narrow(req, params, principal)
            if expanded:
                targets = [name for name in targets if name not in expanded]
        if "brain" in params:
            # A brain refused as a whole is named alone: listing the nodes indices its meta document
            # names would tell a stranger about a brain that is not theirs, and a missing brain has none.
            edges = f"{RESERVED_PREFIX}{params['brain']}-edges"
            if not principal.may(index_privilege(privilege), edges):
                raise refusal(principal, op, privilege, [edges])
        index_policy(principal, op, privilege, targets)

    @staticmethod
    def _narrow(req: falcon.Request, params: dict, principal: Principal) -> set[str]:
        """Rewrite this read's index expressions to what ``principal`` may read; the names that came from wildcards."""
        ctx = req.context
        store = ctx.engine.store
        expand = default_expand(req)  # the route's own default, as its targets and resource use

        def allowed(name: str) -> bool:
            return principal.may("read", name)

        template = req.uri_template or ""
        expanded: set[str] = set()
        explicit: set[str] = set()
        if "index" in params or template in FAN_OUT_ROUTES:
            expression = params.get("index")
            rewritten, named, found = narrow_expression(store, expression, allowed, expand)
            explicit.update(named)
            if rewritten != (expression or ""):
                params["index"] = rewritten
            expanded.update(found)
        if template.endswith("/_msearch"):
            try:
                pairs = parse_msearch(req)
            except XerjError:
                pairs = []
            for header, _body in pairs:
                expression = header.get("index", params.get("index"))
                if isinstance(expression, list):
                    expression = ",".join(expression)
                rewritten, named, found = narrow_expression(store, expression, allowed, expand)
                explicit.update(named)
                header["index"] = rewritten
                expanded.update(found)
        return expanded - explicit
