"""Console sessions: an API key exchanged for a signed, HttpOnly cookie naming that key, plus a CSRF token.

The cookie carries no secret of the key: ``key_id.expires.csrf.mac``, signed
with a per-data-directory secret so every gunicorn worker verifies it with no
shared memory. Each request re-reads the key's record, so invalidating or
expiring the key ends its sessions at once, and the principal is the key's own
(the console reads with the caller's key, through the same Authorize slot).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any, Mapping

from xerj_auth.keys import InvalidCredential, KeyStore
from xerj_auth.principal import Principal

COOKIE = "xerj_console"
CSRF_HEADER = "X-XERJ-CSRF"
SESSION_SECONDS = 8 * 3600
SECRET_FILE = "console-session.secret"


def load_secret(data_dir: Path) -> bytes:
    """The signing secret of ``data_dir``, created once; workers racing to create it all read the winner's."""
    path = Path(data_dir) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):
            data = path.read_bytes()
            if len(data) == 64:
                return data
            time.sleep(0.02)
        raise
    with os.fdopen(fd, "wb") as handle:
        handle.write(secrets.token_hex(32).encode())
        handle.flush()
        os.fsync(handle.fileno())
    return path.read_bytes()


class SessionAuthenticator:
    """The opened backend: verifies the console cookie (and its CSRF header) into the key's principal."""

    name = "console_session"

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.keys = None  # not the key store the _security routes manage; that stays the API-key backend's
        self._store = KeyStore(data_dir)
        self._secret = load_secret(self.data_dir)

    def _mac(self, payload: str) -> str:
        return hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()

    def issue(self, principal: Principal) -> tuple[str, str, int]:
        """``(cookie value, csrf token, expires)`` of a new session for an API key's principal."""
        expires = int(time.time()) + SESSION_SECONDS
        csrf = secrets.token_urlsafe(24)
        payload = f"{principal.key_id}.{expires}.{csrf}"
        return f"{payload}.{self._mac(payload)}", csrf, expires

    def session(self, cookie_header: str | None) -> tuple[Principal, str, int] | None:
        """``(principal, csrf, expires)`` of a valid session cookie, else ``None`` (absent, forged, expired, revoked)."""
        if not cookie_header:
            return None
        try:
            jar = SimpleCookie(cookie_header)
        except CookieError:
            return None
        morsel = jar.get(COOKIE)
        if morsel is None:
            return None
        parts = morsel.value.split(".")
        if len(parts) != 4:
            return None
        key_id, expires_s, csrf, mac = parts
        if not hmac.compare_digest(mac, self._mac(f"{key_id}.{expires_s}.{csrf}")):
            return None
        if not expires_s.isdigit() or int(expires_s) <= time.time():
            return None
        record = self._store.record(key_id)
        if record is None or record.get("invalidated"):
            return None
        expiration = record.get("expiration")
        if expiration is not None and expiration <= time.time() * 1000:
            return None
        return self._store.principal_of(record), csrf, int(expires_s)

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """The session's principal; ``None`` without the cookie; a 401 for a bad cookie or a missing CSRF header.

        The CSRF header is required on every cookie-authenticated call, writes
        included: a cross-site page can make the browser send the cookie (not
        with SameSite=Strict, but defence in depth) yet cannot set the header.
        """
        cookie = headers.get("COOKIE")
        if not cookie or COOKIE not in cookie:
            return None
        found = self.session(cookie)
        if found is None:
            raise InvalidCredential("console session expired or invalid; sign in again")
        principal, csrf, _expires = found
        offered = headers.get(CSRF_HEADER) or ""
        if not hmac.compare_digest(offered.encode(), csrf.encode()):
            raise InvalidCredential("console request without its CSRF token")
        return principal

    def close(self) -> None:
        self._store.close()


class SessionBackend:
    """What the plugin registers: ``open(data_dir)`` gives the session verifier for one data directory."""

    name = "console_session"

    def open(self, data_dir: str | Path) -> SessionAuthenticator:
        return SessionAuthenticator(data_dir)


def principal_summary(principal: Principal) -> dict[str, Any]:
    grants = None if principal.grants is None else [
        {"names": list(g.names), "privileges": sorted(g.privileges)} for g in principal.grants]
    return {"name": principal.name, "key_id": principal.key_id, "superuser": principal.superuser, "grants": grants}
