"""The one place HTTP errors take shape: every error body is ES-shaped, no traceback ever reaches a client."""

from __future__ import annotations

import errno
import logging
import uuid
from typing import Any

import falcon
import orjson

from xerj_core.errors import InsufficientStorage, XerjError, es_error_body

log = logging.getLogger("xerj_http")


class Forbidden(XerjError):
    """The authorize slot refused the principal a privilege on a target (ES ``security_exception``)."""

    status = 403
    error_type = "security_exception"


class Unauthenticated(XerjError):
    """No credential, or one no auth backend accepts; the response carries ``WWW-Authenticate: ApiKey``."""

    status = 401
    error_type = "security_exception"

    def __init__(self, reason: str) -> None:
        super().__init__(reason, header={"WWW-Authenticate": CHALLENGE})


CHALLENGE = "ApiKey"


class PayloadTooLarge(XerjError):
    status = 413
    error_type = "content_too_long_exception"


def _remember(req: falcon.Request, error_type: str, reason: str) -> None:
    # The audit slot reads these to say why a request failed.
    req.context.error_type = error_type
    req.context.error_reason = reason


def _send(resp: falcon.Response, status: int, body: dict[str, Any]) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(body)
    resp.media = None


def handle_xerj_error(req: falcon.Request, resp: falcon.Response, exc: XerjError, params: dict) -> None:
    if exc.status >= 500:
        log.error("%s %s failed: %s: %s", req.method, req.path, exc.error_type, exc.reason)
    _remember(req, exc.error_type, exc.reason)
    if exc.status == 401:
        resp.set_header("WWW-Authenticate", CHALLENGE)
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        resp.set_header("Retry-After", str(retry_after))
    _send(resp, exc.status, exc.to_body())


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict) -> None:
    """Any exception nobody raised on purpose: logged in full here, a short 500 for the client."""
    if isinstance(exc, (falcon.HTTPError, falcon.HTTPStatus)):  # falcon's own; rendered by its handlers
        raise exc
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        # A file beside the LMDB environment (a view, a model) found the disk full: the client's cue to wait.
        handle_xerj_error(req, resp, InsufficientStorage(
            f"the disk is full: {exc.strerror} [{exc.filename}]; free some space and retry"), params)
        return
    ref = uuid.uuid4().hex[:12]
    log.exception("unexpected error on %s %s (ref %s)", req.method, req.path, ref)
    reason = f"internal server error (ref {ref}); the server log has the details"
    _remember(req, "internal_server_error", reason)
    _send(resp, 500, es_error_body(500, "internal_server_error", reason))


def _falcon_error_type(exc: falcon.HTTPError) -> str:
    if isinstance(exc, falcon.HTTPRouteNotFound):
        return "resource_not_found_exception"
    if isinstance(exc, falcon.HTTPMethodNotAllowed):
        return "method_not_allowed_exception"
    if isinstance(exc, falcon.HTTPPayloadTooLarge):
        return "content_too_long_exception"
    if exc.status_code == 400:
        return "illegal_argument_exception"
    return (exc.title or "error").lower().replace(" ", "_") + "_exception"


def _falcon_reason(req: falcon.Request, exc: falcon.HTTPError) -> str:
    if isinstance(exc, falcon.HTTPRouteNotFound):
        return f"no handler found for uri [{req.path}] and method [{req.method}]"
    if isinstance(exc, falcon.HTTPMethodNotAllowed):
        allowed = exc.headers.get("Allow", "") if exc.headers else ""
        return f"Incorrect HTTP method for uri [{req.path}] and method [{req.method}], allowed: [{allowed}]"
    return exc.description or exc.title or "error"


def serialize_falcon_error(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError) -> None:
    """Falcon's own errors (no route, wrong method, bad parameter) in the same ES shape as ours."""
    error_type, reason = _falcon_error_type(exc), _falcon_reason(req, exc)
    _remember(req, error_type, reason)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(es_error_body(exc.status_code, error_type, reason))


def install(app: falcon.App) -> None:
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(XerjError, handle_xerj_error)
    app.set_error_serializer(serialize_falcon_error)
