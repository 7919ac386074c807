"""Where the MCP tools send their requests: a running xerj server over HTTP, or a data directory opened in-process.

Both backends speak the HTTP API's requests (method, path, query, JSON body) and
answer ``(status, body)``, so a tool gives the same answer whichever it uses:
the embedded one runs the very same Falcon app, in this process.
"""

from __future__ import annotations

import functools
import http.client
import json
import threading
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote, urlencode, urlsplit

import anyio
import orjson


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


class _OneWrite:
    """An ``http.client`` connection that hands a request to the socket in one write.

    ``http.client`` sends the head and the body with two ``sendall`` calls, and
    with ``TCP_NODELAY`` (which it sets) they leave as two segments: the server
    wakes for the head, reads, and sleeps again until the body comes. Holding
    the pieces until the response is awaited makes a POST one segment and one
    wake-up, which on a loaded machine measured about half a millisecond.
    """

    def send(self, data: Any) -> None:
        if not isinstance(data, (bytes, bytearray)):
            self._flush()
            super().send(data)  # type: ignore[misc]  # a file or iterable body: the library streams it
            return
        self.__dict__.setdefault("_held", []).append(bytes(data))

    def _flush(self) -> None:
        held = self.__dict__.pop("_held", None)
        if held:
            super().send(b"".join(held))  # type: ignore[misc]

    def getresponse(self) -> http.client.HTTPResponse:
        self._flush()
        return super().getresponse()  # type: ignore[misc]

    def close(self) -> None:
        self.__dict__.pop("_held", None)
        super().close()  # type: ignore[misc]


class _Connection(_OneWrite, http.client.HTTPConnection):
    pass


class _TlsConnection(_OneWrite, http.client.HTTPSConnection):
    pass


class HttpClient:
    """Blocking JSON requests to a xerj server over keep-alive connections, one per thread.

    The standard library's ``http.client``: measured about 2.5 ms per request
    cheaper than the SDK's async client (httpx2) on this machine, which is most
    of what an MCP round trip is allowed to add. JSON goes through orjson (a
    2-hop ego answer parses in a third of the time ``json`` takes).
    """

    def __init__(self, url: str, api_key: str | None, *, timeout: float = 60.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: [{url}]")
        self.url = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._headers = {"Authorization": f"ApiKey {api_key}"} if api_key else {}
        self._local = threading.local()

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            cls = _TlsConnection if self._scheme == "https" else _Connection
            conn = self._local.conn = cls(self._host, self._port, timeout=self._timeout)
        return conn

    def send(self, method: str, path: str, params: Mapping[str, Any] | None = None,
             body: Any = None) -> tuple[int, Any]:
        query = urlencode(_query(params))
        target = self._prefix + path + (f"?{query}" if query else "")
        data = orjson.dumps(body) if body is not None else None
        headers = {**self._headers, **({"Content-Type": "application/json"} if data is not None else {})}
        for attempt in (0, 1):
            conn = self._connection(fresh=attempt == 1)
            reused = conn.sock is not None
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                # A kept-alive connection the server closed while idle: the request never reached it.
                if attempt == 0 and reused:
                    continue
                raise BackendUnavailable(self._unreachable(exc)) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise BackendUnavailable(self._unreachable(exc)) from None
        try:
            payload = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            payload = {"raw": raw[:500].decode(errors="replace")}
        return resp.status, payload

    def _unreachable(self, exc: BaseException) -> str:
        return (f"the xerj server at {self.url} is not reachable ({type(exc).__name__}: {exc}); "
                f"is `xerj serve` running there?")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()


class HttpBackend:
    """A running xerj server at ``url``, called with ``Authorization: ApiKey <key>`` when a key is given."""

    def __init__(self, url: str, api_key: str | None, *, timeout: float = 60.0, in_thread: bool = True) -> None:
        self._client = HttpClient(url, api_key, timeout=timeout)
        self.url = self._client.url
        self.describe = f"the xerj server at {self.url}"
        self._in_thread = in_thread

    async def request(self, method: str, path: str, params: Mapping[str, Any] | None = None,
                      body: Any = None) -> tuple[int, Any]:
        call = functools.partial(self._client.send, method, path, params, body)
        if self._in_thread:
            # A worker thread, so one slow call does not stall the other sessions of `--http`.
            return await anyio.to_thread.run_sync(call)
        # stdio has one client, which waits for each answer; the thread hop would only add latency.
        return call()

    async def aclose(self) -> None:
        self._client.close()


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
