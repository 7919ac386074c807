"""Timestamps at each hop of an MCP tool call, across the SDK's stdio client and `xerj mcp`, for bench_mcp.py.

Both processes stamp ``time.monotonic_ns()`` (CLOCK_MONOTONIC, one clock for
the whole machine) at the same points of every call:

client  call      the benchmark calls ``client.call_tool``
client  write     the request line goes into the pipe (the SDK's stdin writer), and returns
server  read      ``xerj mcp`` has the line (its stdio read stream, before the parse)
server  parsed    ... parsed into a JSON-RPC message
server  tool      the tool function starts (the SDK's dispatch and argument model are done)
server  sent      the HTTP request is on the socket to `xerj serve`
server  answered  the whole HTTP answer is in (httptools has parsed it)
server  loaded    ... and orjson has parsed its body
server  returned  the tool function returns its result
server  write     the wire line is being made (the SDK's sieve of the result is done), then written
client  chunk     each piece of the answer the SDK's stdout reader receives (the first and the last)
client  parse     the SDK's JSON-RPC parse of the line starts, and ends
client  done      ``client.call_tool`` returns (the SDK's result sieve, model, output schema check done)

Run as a script, it installs the server-side stamps and runs the ``xerj``
command line (``python mcp_hops.py mcp --url ...``); the stamps go to the file
named by ``XERJ_BENCH_HOPS`` when the process exits. ``client_hooks()``
installs the client-side stamps in the benchmark's own process.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
from typing import Any

now = time.monotonic_ns
STAMPS: list[tuple[str, int, int]] = []  # (event, ns, bytes or 0)


def stamp(event: str, size: int = 0) -> None:
    STAMPS.append((event, now(), size))


class _Timed:
    """``target`` whose method ``name`` is stamped ``before`` and ``after`` each call."""

    def __init__(self, target: Any, name: str, before: str, after: str) -> None:
        self._target, self._before, self._after = target, before, after
        self._call = getattr(target, name)
        setattr(self, name, self._timed)

    def _timed(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        stamp(self._before, len(first) if isinstance(first, (str, bytes)) else 0)
        try:
            return self._call(first, *args, **kwargs)
        finally:
            stamp(self._after)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def server_hooks(path: str) -> None:
    from xerj_mcp import backend, server, stdio

    stdio.jsonrpc_message_adapter = _Timed(stdio.jsonrpc_message_adapter, "validate_json", "server read",
                                           "server parsed")
    wire_line = stdio.wire_line

    def timed_wire_line(message: Any) -> bytes:
        stamp("server write")
        line = wire_line(message)
        STAMPS.append(("server line", now(), len(line)))
        return line

    stdio.wire_line = timed_wire_line
    init = stdio.LineWriteStream.__init__

    def timed_init(self: Any, transport: Any, flow: Any) -> None:
        init(self, _Timed(transport, "write", "server writes", "server written"), flow)

    stdio.LineWriteStream.__init__ = timed_init
    receive = backend.HttpClient._receive

    def timed_receive(sock: Any, response: Any) -> Any:
        stamp("server sent")
        try:
            return receive(sock, response)
        finally:
            stamp("server answered")

    backend.HttpClient._receive = staticmethod(timed_receive)
    parsed = backend._parsed

    def timed_parsed(raw: bytes) -> Any:
        try:
            return parsed(raw)
        finally:
            STAMPS.append(("server loaded", now(), len(raw)))

    backend._parsed = timed_parsed
    as_tool_result = server.as_tool_result

    def timed_as_tool_result(tool: Any) -> Any:
        @functools.wraps(tool)
        async def call(*args: Any, **kwargs: Any) -> Any:
            stamp("server tool")
            try:
                return await tool(*args, **kwargs)
            finally:
                stamp("server returned")
        return as_tool_result(call)

    server.as_tool_result = timed_as_tool_result

    def dump() -> None:
        with open(path, "w") as f:
            f.writelines(f"{event}\t{ns}\t{size}\n" for event, ns, size in STAMPS)

    atexit.register(dump)


def client_hooks() -> None:
    from mcp.client import stdio

    parse_line = stdio._parse_line

    def timed_parse_line(line: str) -> Any:
        STAMPS.append(("client parse", now(), len(line)))
        try:
            return parse_line(line)
        finally:
            stamp("client parsed")

    stdio._parse_line = timed_parse_line

    class TimedText(stdio.TextReceiveStream):
        async def receive(self) -> str:
            chunk = await super().receive()
            STAMPS.append(("client chunk", now(), len(chunk)))
            return chunk

    stdio.TextReceiveStream = TimedText
    create = stdio._create_platform_compatible_process

    async def timed_create(*args: Any, **kwargs: Any) -> Any:
        process = await create(*args, **kwargs)
        send = process.stdin.send

        async def timed_send(data: bytes) -> None:
            STAMPS.append(("client write", now(), len(data)))
            await send(data)
            stamp("client written")

        process.stdin.send = timed_send
        return process

    stdio._create_platform_compatible_process = timed_create


def read_stamps(path: str) -> list[tuple[str, int, int]]:
    with open(path) as f:
        return [(event, int(ns), int(size)) for event, ns, size in (line.rstrip("\n").split("\t") for line in f)]


if __name__ == "__main__":
    server_hooks(os.environ["XERJ_BENCH_HOPS"])
    from xerj_core.cli import main

    main(sys.argv[1:])
