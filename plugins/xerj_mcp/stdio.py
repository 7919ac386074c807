"""stdin and stdout for the SDK's ``stdio_server`` without a worker-thread hop per line.

The SDK wraps the standard streams in ``anyio.wrap_file``, so every line read
and every write and flush is a round trip through a worker thread: three per
tool call, the largest part of what MCP adds to a call on a loaded machine
(``tests/bench/bench_mcp.py`` prints that floor). Here stdin is an asyncio
pipe reader and stdout a direct write to the pipe. Like the SDK, the wire gets
private copies of fds 0 and 1, and fd 0 then reads the null device and fd 1
goes to stderr, so a stray print cannot corrupt the protocol.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from contextlib import asynccontextmanager
from typing import AsyncIterator


class PipeLines:
    """``async for line in stdin`` over an asyncio stream reader."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> "PipeLines":
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class PipeWriter:
    """``await stdout.write(text)`` straight to a file descriptor; ``flush`` has nothing left to do."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        data = text.encode("utf-8")
        while data:
            written = os.write(self._fd, data)
            data = data[written:]

    async def flush(self) -> None:
        return None


def _widen_pipe(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (AttributeError, OSError):
        pass


@asynccontextmanager
async def standard_pipes() -> AsyncIterator[tuple[PipeLines, PipeWriter]]:
    """The wire's ends for ``stdio_server(stdin, stdout)``; fds 0 and 1 are restored on exit."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    _widen_pipe(wire_out)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                os.fdopen(wire_in, "rb", buffering=0))
    try:
        yield PipeLines(reader), PipeWriter(wire_out)
    finally:
        transport.close()
        os.close(wire_out)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
