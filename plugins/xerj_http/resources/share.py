"""``/_xerj/share`` routes: open, list and revoke share links (superuser), and trade a passcode for a guest token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon

from xerj_auth.keys import parse_expiration
from xerj_auth.principal import RESERVED_PREFIX, Principal
from xerj_auth.shares import ShareRefused
from xerj_core.autoindex.sink import root_of
from xerj_core.errors import IllegalArgument, XerjError
from xerj_core.graph.brain import META_ID, edges_index, validate_brain_name
from xerj_http.bodies import json_body
from xerj_http.resources.common import send
from xerj_http.resources.security import _superuser

if TYPE_CHECKING:
    from xerj_core.engine import Engine

_CREATE_FIELDS = {"brain", "folder", "expires"}
_EXCHANGE_FIELDS = {"share", "passcode"}


class OpenMode(XerjError):
    status = 400
    error_type = "illegal_state_exception"


class NeverIndexed(XerjError):
    status = 404
    error_type = "resource_not_found_exception"


def _share_store(req: falcon.Request) -> Any:
    store = req.context.get("share_store")
    if store is None:
        raise IllegalArgument("share links are not available: the share_guest auth plugin is not installed")
    return store


def _fields(body: Any, allowed: set[str], what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise IllegalArgument("the request body must be an object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise IllegalArgument(f"unknown field [{unknown[0]}] in {what}; expected {sorted(allowed)}")
    return body


def _get(store: Any, index: str, doc_id: str) -> dict[str, Any] | None:
    try:
        found = store.get(index, doc_id)
    except XerjError:
        return None
    return None if found is None else found[0]


def resolve_share(store: Any, brain: str, folder: str | None) -> list[str]:
    """The nodes indices a share of ``brain`` (built from ``folder``) grants: its meta document's ``nodes_index``.

    A brain with no meta document, or a folder that is not the one the brain was
    built from, was never indexed here: that is an error, never a guess. Names in
    the reserved namespace are left out (a share never grants a memory namespace).
    """
    what = f"folder [{folder}]" if folder is not None else f"brain [{brain}]"
    meta = _get(store, edges_index(brain), META_ID)
    if meta is None:
        raise NeverIndexed(f"{what} was never indexed on this node (there is no brain [{brain}]); "
                           f"run `xerj brain` on it first")
    if folder is not None:
        _rid, root = root_of(lambda index, doc_id: _get(store, index, doc_id), brain)
        if root is None:
            raise NeverIndexed(f"{what} was never indexed on this node: brain [{brain}] was not built from a folder")
        if root != folder:
            raise NeverIndexed(f"{what} was never indexed on this node: brain [{brain}] was built from [{root}]; "
                               f"pass that folder, or --brain for the brain this folder was indexed into")
    listed = meta.get("nodes_index")
    names = [name for name in listed.split(",") if name] if isinstance(listed, str) else []
    return [name for name in names if not name.startswith(RESERVED_PREFIX)]


class Shares:
    """``POST`` opens a share of a brain (superuser, secured node only); ``GET`` lists every share."""

    ops = {"POST": ("share.create", "cluster"), "GET": ("share.list", "cluster")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        principal: Principal = _superuser(req, "cluster:admin/xerj/share/create")
        if principal.mode == "open":
            raise OpenMode("sharing is refused on a node in open mode: no credential is examined there and every "
                           "caller is the superuser, so a guest's read-only reach could not be enforced; restart "
                           "the server without --insecure")
        body = _fields(json_body(req, required=True), _CREATE_FIELDS, "a share request")
        brain, folder, expires = body.get("brain"), body.get("folder"), body.get("expires")
        if not isinstance(brain, str):
            raise IllegalArgument("[brain] is required: the brain to share")
        validate_brain_name(brain)
        if folder is not None and (not isinstance(folder, str) or not folder):
            raise IllegalArgument("[folder] must be a non-empty string")
        if expires is not None:
            try:
                parse_expiration(expires)
            except IllegalArgument as exc:
                raise IllegalArgument(exc.reason.replace("[expiration]", "[expires]")) from None
        store = _share_store(req)
        nodes = resolve_share(self.engine.store, brain, folder)
        send(resp, store.mint(brain=brain, nodes_indices=nodes, folder=folder, expires=expires), status=201)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _superuser(req, "cluster:admin/xerj/share/list")
        send(resp, {"shares": [record.public() for record in _share_store(req).records()]})


class Share:
    """``DELETE /_xerj/share/{share_id}`` revokes a share (superuser); its tokens stop in every worker."""

    ops = {"DELETE": ("share.revoke", "cluster")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_delete(self, req: falcon.Request, resp: falcon.Response, share_id: str) -> None:
        _superuser(req, "cluster:admin/xerj/share/revoke")
        send(resp, _share_store(req).revoke(share_id))


class Exchange:
    """``POST /_xerj/share/_exchange {share, passcode}``: a guest token ``{token, expires_at}``; needs no credential."""

    ops = {"POST": ("share.exchange", "cluster")}

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = _fields(json_body(req, required=True), _EXCHANGE_FIELDS, "a passcode exchange")
        store = _share_store(req)
        share_id = body.get("share")
        if isinstance(share_id, str) and store.record(share_id) is not None:
            # The audit slot names who tried: a failed attempt at a share is the share's guest's.
            req.context.principal = Principal(name=f"guest:{share_id}", superuser=False, mode="guest", grants=())
        try:
            done = store.exchange(share_id, body.get("passcode"))
        except ShareRefused as exc:
            if exc.status == 429:
                resp.set_header("Retry-After", exc.reason.rsplit(" ", 1)[-1].rstrip("s"))
            raise
        send(resp, {"token": done.token, "expires_at": done.expires_at, "share": done.share})
