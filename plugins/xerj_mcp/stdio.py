"""The stdio transport of ``xerj mcp``: JSON-RPC lines on stdin and stdout, read and written by the server's own tasks.

The SDK's ``stdio_server`` sits a reader task and a writer task between the
pipes and the server, joined by memory streams, and dumps each outgoing
message with pydantic. Every message then costs two extra task switches, and
a result is walked once more by pydantic after the SDK's pipeline has already
made it plain JSON: on a 2-hop ego answer that was most of what MCP adds
beyond the transport (``tests/bench/bench_mcp.py``). Here the server's read
stream reads and parses the next line when the server asks for it, and its
write stream puts each message on the pipe from the task that sends it, a
result through orjson.

Like the SDK, the wire gets private copies of fds 0 and 1, and fd 0 then
reads the null device and fd 1 goes to stderr, so a stray print cannot
corrupt the protocol.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anyio
import orjson
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCResponse, jsonrpc_message_adapter

# Types orjson would write differently from pydantic (datetime, dataclass, str subclasses): left to pydantic.
_PLAIN_JSON_ONLY = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
                    | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_APPEND_NEWLINE)


def wire_line(message: Any) -> bytes:
    """``message`` as its line on the wire, the bytes the SDK's transport writes.

    A result the server pipeline made is plain JSON already, so orjson writes
    it; anything else, or anything orjson would not write as pydantic does,
    goes through the model as in the SDK.
    """
    if isinstance(message, JSONRPCResponse) and isinstance(message.result, dict):
        try:
            return orjson.dumps({"jsonrpc": message.jsonrpc, "id": message.id, "result": message.result},
                                option=_PLAIN_JSON_ONLY)
        except TypeError:  # orjson.JSONEncodeError is a TypeError: a non-JSON value, a non-str key, a huge int
            pass
    return (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


class _Stream:
    """What the SDK asks of either stream beyond moving messages: closing, also as an async context manager."""

    _closed = False

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> "_Stream":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class LineReadStream(_Stream):
    """The server's read stream: each item is the next stdin line as a JSON-RPC message, or the error parsing it."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def receive(self) -> SessionMessage | Exception:
        if self._closed:
            raise anyio.ClosedResourceError
        line = await self._reader.readline()
        if not line:
            raise anyio.EndOfStream
        try:
            message = jsonrpc_message_adapter.validate_json(line.decode("utf-8", errors="replace"), by_name=False)
        except Exception as exc:  # noqa: BLE001 - like the SDK's transport: the server answers a bad line
            return exc
        return SessionMessage(message)

    def __aiter__(self) -> "LineReadStream":
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Flow(asyncio.BaseProtocol):
    """Write-pipe protocol whose ``drain`` waits while the transport holds bytes the pipe has not taken."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None
        self.lost = False

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drain(self) -> None:
        if self._resumed is not None:
            await asyncio.shield(self._resumed)


class LineWriteStream(_Stream):
    """The server's write stream: ``send`` puts the message's line on the pipe and returns once the pipe has it.

    The transport writes at once when the pipe has room (it is widened to
    1 MiB), and otherwise keeps the bytes, in order, without blocking the
    event loop.
    """

    def __init__(self, transport: asyncio.WriteTransport, flow: _Flow) -> None:
        self._transport = transport
        self._flow = flow

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._flow.lost or self._transport.is_closing():
            raise anyio.BrokenResourceError
        self._transport.write(wire_line(item.message))
        await self._flow.drain()


def _widen_pipe(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (AttributeError, OSError):
        pass


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[LineReadStream, LineWriteStream]]:
    """The read and write streams for ``Server.run`` over this process's stdin and stdout; fds 0 and 1 are
    restored on exit."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    _widen_pipe(wire_out)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                     os.fdopen(wire_in, "rb", buffering=0))
    write_transport, flow = await loop.connect_write_pipe(_Flow, os.fdopen(wire_out, "wb", buffering=0))
    # Any byte the pipe has not taken pauses the writer: a send returns only once its line is in the pipe.
    write_transport.set_write_buffer_limits(high=0)
    try:
        yield LineReadStream(reader), LineWriteStream(write_transport, flow)
    finally:
        read_transport.close()
        write_transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
