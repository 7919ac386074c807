"""Where the MCP tools send their requests: a running xerj server over HTTP, or a data directory opened in-process.

Both backends speak the HTTP API's requests (method, path, query, JSON body) and
answer ``(status, body)``, so a tool gives the same answer whichever it uses:
the embedded one runs the very same Falcon app, in this process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

import httpx2


class BackendUnavailable(Exception):
    """The server could not be reached at all (refused, timed out, not an HTTP answer)."""


def segment(value: str) -> str:
    """One path segment, percent-encoded so an argument cannot reach another route."""
    return quote(value, safe="")


def _query(params: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = str(value)
    return out


class HttpBackend:
    """A running xerj server at ``url``, called with ``Authorization: ApiKey <key>`` when a key is given."""

    def __init__(self, url: str, api_key: str | None, *, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.describe = f"the xerj server at {self.url}"
        headers = {"Authorization": f"ApiKey {api_key}"} if api_key else {}
        self._client = httpx2.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)

    async def request(self, method: str, path: str, params: Mapping[str, Any] | None = None,
                      body: Any = None) -> tuple[int, Any]:
        try:
            resp = await self._client.request(method, path, params=_query(params),
                                              json=body if body is not None else None)
        except httpx2.HTTPError as exc:
            raise BackendUnavailable(f"{self.describe} is not reachable ({type(exc).__name__}: {exc}); "
                                     f"is `xerj serve` running there?") from None
        try:
            payload = resp.json() if resp.content else {}
        except ValueError:
            payload = {"raw": resp.text[:500]}
        return resp.status_code, payload

    async def aclose(self) -> None:
        await self._client.aclose()


class AppBackend:
    """xerj's own WSGI app called in this process: every middleware and route runs, as over HTTP."""

    def __init__(self, app: Any, api_key: str | None = None, *, describe: str = "the in-process xerj app",
                 on_close: Any = None) -> None:
        self._app = app
        self._headers = {"Authorization": f"ApiKey {api_key}"} if api_key else {}
        self._on_close = on_close
        self.describe = describe

    async def request(self, method: str, path: str, params: Mapping[str, Any] | None = None,
                      body: Any = None) -> tuple[int, Any]:
        from falcon import testing

        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        # Falcon's WSGI simulator is a complete WSGI call; the engine is not thread-safe to share across the
        # SDK's worker threads, so requests run here, one at a time, on the event loop's thread.
        result = testing.simulate_request(self._app, method, path, params=_query(params),
                                          body=json.dumps(body) if body is not None else None, headers=headers)
        try:
            payload = result.json if result.content else {}
        except ValueError:
            payload = {"raw": result.text[:500]}
        return result.status_code, payload

    async def aclose(self) -> None:
        if self._on_close is not None:
            self._on_close()


def open_embedded(data_dir: Path) -> AppBackend:
    """A data directory opened in this process and served in open mode: one user, no key, every namespace."""
    from xerj_core.engine import Engine
    from xerj_core.plugins import get_plugin_manager
    from xerj_http.app import create_app

    pm = get_plugin_manager()
    engine = Engine(Path(data_dir), pm)
    app = create_app(engine, pm, insecure=True)

    def close() -> None:
        app.close()
        engine.close()

    return AppBackend(app, describe=f"the data directory {data_dir}", on_close=close)
