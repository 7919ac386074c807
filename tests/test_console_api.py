"""The console's server side over HTTP, no browser: sign-in cookie, CSRF, revocation, open mode, `xerj brain`'s URL."""

from __future__ import annotations

import http.client
import json

import pytest
from click.testing import CliRunner

from xerj_core.autoindex import commands
from xerj_core.cli import build_cli
from xerj_core.plugins import get_plugin_manager

from .conftest import CORPORA
from .test_http_serve import Server, request

FOAM = CORPORA / "foam-docs"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    root = tmp_path_factory.mktemp("console-api")
    server = Server(root / "data", root / "serve.log", workers=2, insecure=False)
    yield server
    server.stop()


def sign_in(server, encoded: str):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/_xerj-console/api/session", body=json.dumps({"api_key": encoded}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Set-Cookie"), json.loads(resp.read())
    finally:
        conn.close()


def mint(server, name: str, names: list[str]) -> tuple[str, str]:
    status, body = request(server.port, "POST", "/_security/api_key", {
        "name": name, "role_descriptors": {"r": {"indices": [{"names": names, "privileges": ["read"]}]}}},
        headers=server.headers)
    assert status == 200, body
    return body["id"], body["encoded"]


def test_a_key_becomes_an_httponly_strict_session_bound_to_that_key(secured):
    request(secured.port, "PUT", "/mine", {}, headers=secured.headers)
    request(secured.port, "PUT", "/theirs", {}, headers=secured.headers)
    key_id, encoded = mint(secured, "reader-of-mine", ["mine"])
    status, cookie, body = sign_in(secured, encoded)
    assert status == 200 and body["principal"]["key_id"] == key_id
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    jar = cookie.split(";")[0]
    csrf = {"Cookie": jar, "X-XERJ-CSRF": body["csrf"]}
    # the session reads with the key's own privileges, through the same authorization as the API
    assert request(secured.port, "GET", "/mine/_search", headers=csrf)[0] == 200
    status, refused = request(secured.port, "GET", "/theirs/_search", headers=csrf)
    assert status == 403 and "[read,all]" in refused["error"]["reason"]
    # the cookie alone (no CSRF header, or a wrong one) is refused
    assert request(secured.port, "GET", "/mine/_search", headers={"Cookie": jar})[0] == 401
    assert request(secured.port, "GET", "/mine/_search", headers={"Cookie": jar, "X-XERJ-CSRF": "x"})[0] == 401
    # a tampered cookie is refused
    forged = jar.replace(key_id, "AAAAAAAAAAAAAAAAAAAA")
    assert request(secured.port, "GET", "/mine/_search", headers={**csrf, "Cookie": forged})[0] == 401
    # GET session reports it; invalidating the key ends the session at once
    status, who = request(secured.port, "GET", "/_xerj-console/api/session", headers={"Cookie": jar})
    assert who["signed_in"] is True and who["csrf"] == body["csrf"]
    request(secured.port, "DELETE", "/_security/api_key", {"ids": [key_id]}, headers=secured.headers)
    assert request(secured.port, "GET", "/mine/_search", headers=csrf)[0] == 401
    assert request(secured.port, "GET", "/_xerj-console/api/session", headers={"Cookie": jar})[1]["signed_in"] is False


def test_sign_in_refuses_a_bad_key_and_a_missing_one(secured):
    status, cookie, body = sign_in(secured, "bm90OmFrZXk=")
    assert status == 401 and cookie is None
    status, _cookie, body = sign_in(secured, "")
    assert status == 400 and "[api_key]" in body["error"]["reason"]


def test_the_console_files_are_public_and_grant_nothing(secured):
    status, text = request(secured.port, "GET", "/_xerj-console")
    assert status == 200 and "/_xerj-console/app.js" in text
    assert request(secured.port, "GET", "/_xerj-console/vendor/sigma.min.js")[0] == 200
    assert request(secured.port, "GET", "/_xerj-console/..%2F..%2Fpyproject.toml")[0] == 404
    assert request(secured.port, "GET", "/_search")[0] == 401


def test_open_mode_needs_no_sign_in_and_says_so(tmp_path):
    server = Server(tmp_path / "data", tmp_path / "serve.log", workers=1)
    try:
        status, body = request(server.port, "GET", "/_xerj-console/api/session")
        assert body["mode"] == "open" and "no sign-in" in body["notice"]
    finally:
        server.stop()


@pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")
def test_xerj_brain_prints_the_console_url_and_opens_it(secured, monkeypatch, tmp_path):
    opened = []
    monkeypatch.setattr(commands.webbrowser, "open", opened.append)
    base = f"http://127.0.0.1:{secured.port}"
    admin = secured.headers["Authorization"].split(" ", 1)[1]
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nsee [[b]]\n")
    (folder / "b.md").write_text("# B\n\nback to [[a]]\n")
    result = CliRunner().invoke(build_cli(get_plugin_manager()),
                                ["brain", str(folder), "--url", base, "--api-key", admin, "--open"])
    assert result.exit_code == 0, result.output
    url = f"{base}/_xerj-console/#/map?brain=notes"
    assert f"  console:  {url}" in result.output
    assert opened == [url]


def _guest_sign_in(server, share: str, passcode: str):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", "/_xerj-console/api/session", body=json.dumps({"share": share, "passcode": passcode}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Set-Cookie"), json.loads(resp.read())
    finally:
        conn.close()


def test_a_share_passcode_becomes_a_read_only_guest_session(secured):
    request(secured.port, "PUT", "/guestdocs", {}, headers=secured.headers)
    request(secured.port, "PUT", "/guestdocs/_doc/a", {"title": "A"}, headers=secured.headers)
    request(secured.port, "PUT", "/private", {}, headers=secured.headers)
    status, linked = request(secured.port, "POST", "/_graph/gb/link", {"src": "a", "dst": "b", "type": "cites"},
                             headers=secured.headers)
    assert status in (200, 201), linked
    status, share = request(secured.port, "POST", "/_xerj/share", {"brain": "gb"}, headers=secured.headers)
    assert status == 201, share
    # a wrong passcode is the share store's own 401 and sets no cookie
    status, cookie, body = _guest_sign_in(secured, share["id"], "wrong-pass")
    assert status == 401 and cookie is None
    status, cookie, body = _guest_sign_in(secured, share["id"], share["passcode"])
    assert status == 200, body
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert body["guest"]["share"] == share["id"] and body["guest"]["brain"] == "gb"
    assert body["guest"]["share_expires_at"] == share["expires_at"] and body["principal"]["name"] == f"guest:{share['id']}"
    jar = cookie.split(";")[0]
    assert share["passcode"] not in jar and "." + share["id"] not in jar  # the cookie names a token, carries no secret
    guest = {"Cookie": jar, "X-XERJ-CSRF": body["csrf"]}
    assert request(secured.port, "GET", "/_graph/gb/ego?node=a", headers=guest)[0] == 200
    # every write is refused by the server, whatever the page shows: the route allow-list runs first
    for method, path, payload in (("POST", "/_graph/gb/link", {"src": "a", "dst": "c", "type": "cites"}),
                                  ("POST", "/_graph/gb/_review", {"approve": [linked["edge_id"]]}),
                                  ("POST", "/_memory/gb", {"text": "x"}),
                                  ("PUT", "/private/_doc/x", {"a": 1})):
        status, refused = request(secured.port, method, path, payload, headers=guest)
        assert status == 403 and f"guest:{share['id']}" in refused["error"]["reason"], (path, refused)
    # the GET session reports the guest; revoking the share ends the session at once
    status, who = request(secured.port, "GET", "/_xerj-console/api/session", headers={"Cookie": jar})
    assert who["guest"]["indices"] == share["indices"]
    request(secured.port, "DELETE", f"/_xerj/share/{share['id']}", headers=secured.headers)
    assert request(secured.port, "GET", "/_graph/gb/ego?node=a", headers=guest)[0] == 401
    assert request(secured.port, "GET", "/_xerj-console/api/session", headers={"Cookie": jar})[1]["signed_in"] is False
    status, _cookie, body = _guest_sign_in(secured, share["id"], share["passcode"])
    assert status == 403 and "revoked" in body["error"]["reason"]


def test_guest_sign_in_refuses_a_malformed_body(secured):
    status, cookie, body = _guest_sign_in(secured, "", "")
    assert status == 400 and cookie is None
    conn = http.client.HTTPConnection("127.0.0.1", secured.port, timeout=10)
    conn.request("POST", "/_xerj-console/api/session", body=json.dumps({"share": "x", "passcode": "y", "extra": 1}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 400 and "[extra]" in json.loads(resp.read())["error"]["reason"]
