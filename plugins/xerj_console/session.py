"""Console sessions: an API key (or a share's passcode) exchanged for a signed, HttpOnly cookie, plus a CSRF token.

The cookie carries no secret: ``subject.expires.csrf.mac``, where the subject
is the API key's id or ``guest:<token id>`` for a share guest, signed with a
per-data-directory secret so every gunicorn worker verifies it with no shared
memory. Each request re-reads the key's (or the guest token's and its share's)
record, so invalidating the key, revoking the share or reaching either's expiry
ends the session at once, and the principal is the credential's own (the
console reads with the caller's key, or the guest's read-only grant, through
the same Authorize slot and route allow-list as the API).
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

import attrs

from xerj_auth.keys import InvalidCredential, KeyStore
from xerj_auth.principal import Principal
from xerj_auth.shares import ShareRecord, ShareStore

COOKIE = "xerj_console"
CSRF_HEADER = "X-XERJ-CSRF"
SESSION_SECONDS = 8 * 3600
SECRET_FILE = "console-session.secret"
GUEST_PREFIX = "guest:"


@attrs.frozen
class Found:
    """A verified session: whose it is, its CSRF token, when it ends (epoch s), and the share of a guest's."""

    principal: Principal
    csrf: str
    expires: int
    share: ShareRecord | None = None


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
        self._shares = ShareStore(data_dir)
        self._secret = load_secret(self.data_dir)

    def _mac(self, payload: str) -> str:
        return hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()

    def _sign(self, subject: str, expires: int) -> tuple[str, str, int]:
        csrf = secrets.token_urlsafe(24)
        payload = f"{subject}.{expires}.{csrf}"
        return f"{payload}.{self._mac(payload)}", csrf, expires

    def issue(self, principal: Principal) -> tuple[str, str, int]:
        """``(cookie value, csrf token, expires)`` of a new session for an API key's principal."""
        return self._sign(principal.key_id, int(time.time()) + SESSION_SECONDS)

    def issue_guest(self, share_id: str, passcode: str) -> tuple[str, Found]:
        """``(cookie value, session)`` for a share's passcode: the guest token it trades for is named, not carried.

        The exchange is the share store's own (its rate limit, revocation and
        expiry refusals included); the session ends when that token does.
        """
        exchanged = self._shares.exchange(share_id, passcode)
        token_id = exchanged.token.partition(".")[0]
        value, csrf, expires = self._sign(GUEST_PREFIX + token_id, exchanged.expires_at // 1000)
        principal, _expires_at, share = self._shares.token_standing(token_id)
        return value, Found(principal, csrf, expires, share)

    def session(self, cookie_header: str | None) -> Found | None:
        """The valid session of a cookie header, else ``None`` (absent, forged, expired, revoked)."""
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
        subject, expires_s, csrf, mac = parts
        if not hmac.compare_digest(mac, self._mac(f"{subject}.{expires_s}.{csrf}")):
            return None
        if not expires_s.isdecimal() or int(expires_s) <= time.time():
            return None
        if subject.startswith(GUEST_PREFIX):
            try:
                principal, _expires_at, share = self._shares.token_standing(subject[len(GUEST_PREFIX):])
            except InvalidCredential:
                return None
            return Found(principal, csrf, int(expires_s), share)
        record = self._store.record(subject)
        if record is None or record.get("invalidated"):
            return None
        expiration = record.get("expiration")
        if expiration is not None and expiration <= time.time() * 1000:
            return None
        return Found(self._store.principal_of(record), csrf, int(expires_s))

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
        offered = headers.get(CSRF_HEADER) or ""
        if not hmac.compare_digest(offered.encode(), found.csrf.encode()):
            raise InvalidCredential("console request without its CSRF token")
        return found.principal

    def close(self) -> None:
        self._store.close()
        self._shares.close()


class SessionBackend:
    """What the plugin registers: ``open(data_dir)`` gives the session verifier for one data directory."""

    name = "console_session"

    def open(self, data_dir: str | Path) -> SessionAuthenticator:
        return SessionAuthenticator(data_dir)


def principal_summary(principal: Principal) -> dict[str, Any]:
    grants = None if principal.grants is None else [
        {"names": list(g.names), "privileges": sorted(g.privileges)} for g in principal.grants]
    return {"name": principal.name, "key_id": principal.key_id, "superuser": principal.superuser, "grants": grants}


def session_body(found: Found) -> dict[str, Any]:
    """What ``/_xerj-console/api/session`` answers for a signed-in session; a guest's names its share."""
    body: dict[str, Any] = {"mode": "secured", "signed_in": True, "csrf": found.csrf, "expires": found.expires,
                            "principal": principal_summary(found.principal)}
    if found.share is not None:
        share = found.share
        body["guest"] = {"share": share.id, "brain": share.brain, "indices": list(share.indices),
                         "share_expires_at": share.expires_at, "read_only": True}
    return body
