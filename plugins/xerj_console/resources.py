"""The console's routes: its static files, and sign-in (an API key or a share's passcode exchanged for a session cookie)."""

from __future__ import annotations

import mimetypes
import time
from pathlib import Path
from typing import Any

import falcon
import orjson

from xerj_core.errors import IllegalArgument, XerjError
from xerj_console.session import COOKIE, SESSION_SECONDS, Found, SessionAuthenticator, session_body
from xerj_http.bodies import json_body

PREFIX = "/_xerj-console"
STATIC = Path(__file__).with_name("static")
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".json": "application/json", ".txt": "text/plain; charset=utf-8"}
# Inline script and styles from data can never run: scripts only from this origin, no eval.
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def _send_json(resp: falcon.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(body)


class StaticFiles:
    """``GET /_xerj-console/…``: files under ``static/`` only (no ``..``), with a strict CSP."""

    ops = {"GET": ("console.static", "monitor"), "HEAD": ("console.static", "monitor")}

    def __init__(self, engine: Any) -> None:
        self.root = STATIC.resolve()

    def on_get(self, req: falcon.Request, resp: falcon.Response, path: str = "index.html") -> None:
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root) or not target.is_file():
            raise falcon.HTTPNotFound()
        resp.content_type = _TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        resp.set_header("Content-Security-Policy", _CSP)
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Cache-Control", "no-cache")
        resp.data = target.read_bytes()

    on_head = on_get


class Landing:
    """``GET /_xerj-console``: the app itself (its hash routes pick the page)."""

    ops = StaticFiles.ops

    def __init__(self, engine: Any) -> None:
        self.files = StaticFiles(engine)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.files.on_get(req, resp, "index.html")


def set_session_cookie(req: falcon.Request, resp: falcon.Response, value: str, max_age: int) -> None:
    """HttpOnly, SameSite=Strict, the whole server as its path (the console reads the API itself); Secure over TLS."""
    resp.set_cookie(COOKIE, value, max_age=max_age, path="/", http_only=True, same_site="Strict",
                    secure=req.scheme == "https")


def _sessions(app: Any) -> SessionAuthenticator | None:
    return next((b for b in getattr(app, "auth_backends", ()) if isinstance(b, SessionAuthenticator)), None)


class Session:
    """``/_xerj-console/api/session``: who the console is (GET), sign in (POST), sign out (DELETE).

    Sign-in takes ``{"api_key"}`` (the encoded key) or ``{"share", "passcode"}``
    (a share link's guest); either way the answer sets one session cookie.
    """

    ops = {"GET": ("console.session", "monitor"), "POST": ("console.sign_in", "monitor"),
           "DELETE": ("console.sign_out", "monitor")}
    _OPEN = {"mode": "open", "signed_in": True, "notice": "open mode: no sign-in, every caller is the superuser"}

    def __init__(self, app: Any) -> None:
        self.app = app

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.app.open_mode:
            _send_json(resp, self._OPEN)
            return
        sessions = _sessions(self.app)
        found = sessions.session(req.get_header("Cookie")) if sessions is not None else None
        _send_json(resp, {"mode": "secured", "signed_in": False} if found is None else session_body(found))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.app.open_mode:
            _send_json(resp, self._OPEN)
            return
        body = json_body(req, required=True)
        sessions = _sessions(self.app)
        if sessions is None:
            raise XerjError("console sign-in needs the console session backend")
        if "share" in body or "passcode" in body:
            unknown = sorted(set(body) - {"share", "passcode"})
            if unknown:
                raise IllegalArgument(f"unknown field [{unknown[0]}]: a guest signs in with [share] and [passcode]")
            # The share store's own exchange: 401 wrong passcode, 403 revoked or expired, 429 rate-limited.
            value, found = sessions.issue_guest(body.get("share"), body.get("passcode"))
            set_session_cookie(req, resp, value, max(1, found.expires - int(time.time())))
            _send_json(resp, session_body(found))
            return
        encoded = body.get("api_key")
        if not isinstance(encoded, str) or not encoded.strip():
            raise IllegalArgument("[api_key] is required: the encoded API key (base64 of id:key), "
                                  "or [share] and [passcode] for a share link")
        store = req.context.get("key_store")
        if store is None:
            raise XerjError("console sign-in needs the API-key backend")
        principal = store.verify(encoded.strip())  # a 401 for a key that does not verify
        value, csrf, expires = sessions.issue(principal)
        set_session_cookie(req, resp, value, SESSION_SECONDS)
        _send_json(resp, session_body(Found(principal, csrf, expires)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.unset_cookie(COOKIE, path="/", same_site="Strict")
        _send_json(resp, {"signed_in": False})


def add_console_routes(app: Any, engine: Any) -> None:
    files = StaticFiles(engine)
    app.add_route(PREFIX, Landing(engine))
    app.add_route(f"{PREFIX}/api/session", Session(app))
    app.add_route(PREFIX + "/{path}", files)
    app.add_route(PREFIX + "/vendor/{name}", _Vendor(files))
    public = getattr(app, "public_prefixes", None)
    if public is not None:
        public.append(PREFIX)


class _Vendor:
    ops = StaticFiles.ops

    def __init__(self, files: StaticFiles) -> None:
        self.files = files

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        self.files.on_get(req, resp, f"vendor/{name}")
