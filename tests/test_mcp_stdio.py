"""`xerj mcp`'s stdio streams: the SDK's lines on the wire, a result larger than the pipe whole, a bad line skipped."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.types import (  # noqa: E402
    ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse,
)

from xerj_mcp.stdio import wire_line  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def sdk_line(message) -> bytes:
    """What the SDK's stdio transport writes for ``message``."""
    return (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


@settings(max_examples=200, deadline=None)
@given(result=st.dictionaries(st.text(), JSON, max_size=6), request_id=st.integers(0, 2**53) | st.text(max_size=8))
def test_a_result_line_is_the_json_the_sdk_writes(result, request_id):
    message = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
    line = wire_line(message)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert json.loads(line) == json.loads(sdk_line(message))


def test_what_orjson_would_write_otherwise_goes_through_pydantic():
    """Values pydantic writes its own way (a datetime, an int past 64 bits, a non-str key) get pydantic's bytes."""
    for result in ({"at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)}, {"n": 2**70}, {"m": {1: "x"}}):
        message = JSONRPCResponse(jsonrpc="2.0", id=7, result=result)
        assert wire_line(message) == sdk_line(message), result
    for message in (JSONRPCError(jsonrpc="2.0", id=3, error=ErrorData(code=-32602, message="bad")),
                    JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"),
                    JSONRPCRequest(jsonrpc="2.0", id=4, method="ping")):
        assert wire_line(message) == sdk_line(message)


SERVER = textwrap.dedent("""
    import anyio
    from xerj_mcp.commands import serve_stdio
    from xerj_mcp.server import build_server

    EDGES = [{"edge_id": f"e{i}", "src": f"n{i}", "dst": f"n{i + 1}", "type": "wikilink", "weight": 1.0,
              "evidence": {"quote": "caf\\u00e9 " * 8, "source": "a.md", "offset": i}} for i in range(EDGES_N)]

    class Answers:
        describe = "canned"

        async def request(self, method, path, params=None, body=None):
            node = (params or {}).get("node", "x")
            return 200, {"brain": "b", "hops": 2, "node": node, "edges": EDGES, "neighbors": [],
                         "not_shown": {}}

        async def aclose(self):
            return None

    async def main():
        await serve_stdio(await build_server(Answers(), open_mode=False, review=True))

    anyio.run(main)
""")


def test_results_larger_than_the_pipe_arrive_whole_and_each_to_its_call(tmp_path):
    """Three answers of 3 MiB each, asked for at once: the writer waits for the pipe, never mixes two lines."""
    script = tmp_path / "server.py"
    script.write_text(SERVER.replace("EDGES_N", "15000"))

    async def main():
        params = StdioServerParameters(command=sys.executable, args=[str(script)])
        async with Client(params, read_timeout_seconds=120) as client:
            results = {}

            async def ask(node):
                results[node] = await client.call_tool("xerj_brain_ego", {"brain": "b", "node": node})

            async with anyio.create_task_group() as tg:
                for node in ("a", "b", "c"):
                    tg.start_soon(ask, node)
            return results

    results = anyio.run(main)
    for node, result in results.items():
        assert not result.is_error, result.content
        assert result.structured_content["node"] == node
        assert len(result.structured_content["edges"]) == 15000
        assert result.structured_content["edges"][-1]["evidence"]["quote"].startswith("café")
        assert len(result.content[0].text) > 3 * 2**20 // 2
        assert json.loads(result.content[0].text) == result.structured_content


def test_a_line_that_is_not_json_is_skipped_and_the_session_goes_on(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER.replace("EDGES_N", "1"))
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    ran = subprocess.run([sys.executable, str(script)], input="not json\n" + json.dumps(initialize) + "\n",
                         capture_output=True, text=True, timeout=60)
    lines = ran.stdout.splitlines()
    assert len(lines) == 1, ran.stdout
    answer = json.loads(lines[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "xerj"
