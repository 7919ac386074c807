"""`xerj mcp`'s per-call savings: the server's own JSON text as the text twin, and no no-op tracing span."""

from __future__ import annotations

import json

import anyio
from mcp import Client

from xerj_mcp.backend import HttpBackend
from xerj_mcp.server import build_server, tracing_configured

EGO = (b'{"brain": "a",  "hops": 1, "edges": [{"src": "x", "dst": "y", "weight": 1.0, "note": "caf\\u00e9"}],'
       b' "neighbors": ["y"], "not_shown": {}}')


class _Wire:
    """A socket stand-in that answers every request with one canned HTTP response."""

    def __init__(self, body: bytes) -> None:
        self.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                       + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.pending = b""

    def sendall(self, data) -> None:
        self.pending += self.answer

    def recv(self, size: int) -> bytes:
        piece, self.pending = self.pending[:size], self.pending[size:]
        return piece

    def close(self) -> None:
        return None


def _run(backend, script):
    async def main():
        server = await build_server(backend, open_mode=False, review=True)
        async with Client(server) as client:
            return server, await script(client)
    return anyio.run(main)


def test_the_text_twin_is_the_servers_own_answer_text_and_the_structured_content_its_value():
    backend = HttpBackend("http://127.0.0.1:1", "k", in_thread=False)
    backend._client._local.sock = _Wire(EGO)

    async def script(client):
        return await client.call_tool("xerj_brain_ego", {"brain": "a", "node": "x"})

    _server, result = _run(backend, script)
    assert not result.is_error
    assert result.content[0].text == EGO.decode()  # the server's bytes, spacing and escapes kept
    assert result.structured_content == json.loads(EGO)


def test_a_result_not_made_from_the_last_answer_is_dumped_as_json():
    backend = HttpBackend("http://127.0.0.1:1", "k", in_thread=False)
    backend._client._local.sock = _Wire(b'[{"index": "notes", "docs.count": "3"}]')

    async def script(client):
        return await client.call_tool("xerj_list_indices", {})

    _server, result = _run(backend, script)
    assert not result.is_error
    assert result.structured_content == {"indices": [{"index": "notes", "docs_count": 3}]}
    assert json.loads(result.content[0].text) == result.structured_content


def test_the_tracing_middleware_is_dropped_only_while_no_tracer_provider_is_installed(monkeypatch):
    from mcp.server._otel import OpenTelemetryMiddleware
    from opentelemetry import trace

    async def script(client):
        return None

    def spans(server):
        return [m for m in server.middleware if isinstance(m, OpenTelemetryMiddleware)]

    assert not tracing_configured()
    server, _ = _run(HttpBackend("http://127.0.0.1:1", "k"), script)
    assert not spans(server)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    assert tracing_configured()
    server, _ = _run(HttpBackend("http://127.0.0.1:1", "k"), script)
    assert len(spans(server)) == 1
