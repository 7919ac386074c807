"""``xerj mcp``: serve the MCP tools over stdio (default) or streamable HTTP on loopback."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import click

from xerj_mcp.init import init_command

__all__ = ["init_command", "mcp_command"]

DEFAULT_URL = "http://127.0.0.1:9200"


async def serve_stdio(server) -> None:
    """``server`` on this process's stdin and stdout, through xerj's stdio streams (see ``xerj_mcp.stdio``)."""
    from xerj_mcp.stdio import stdio_streams

    low = server._lowlevel_server  # the SDK's run_stdio_async does the same, over its own stdio transport
    async with stdio_streams() as (read_stream, write_stream):
        await low.run(read_stream, write_stream, low.create_initialization_options())


def _require_sdk() -> None:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise click.ClickException("the MCP SDK is not installed; install xerj with the `mcp` extra: "
                                   "pip install 'xerj[mcp]'") from None


@click.command("mcp")
@click.option("--url", default=None, show_default=DEFAULT_URL, envvar="XERJ_URL", show_envvar=True,
              help="The running xerj server the tools call.")
@click.option("--api-key", default=None, help="The API key to present (else XERJ_API_KEY). Never the admin key: "
                                              "mint one scoped to your namespace with `xerj init`.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Open this data directory in-process instead of calling a server (one user, no key).")
@click.option("--http", "http_transport", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option("--port", default=9250, show_default=True, type=click.IntRange(0, 65535),
              help="The port --http listens on (loopback only).")
def mcp_command(url: str | None, api_key: str | None, data_dir: Path | None, http_transport: bool,
                port: int) -> None:
    """Serve xerj's memory, brain and document tools to an agent over MCP."""
    _require_sdk()
    import anyio

    from xerj_core.credentials import api_key_for
    from xerj_mcp.backend import HttpBackend, open_embedded
    from xerj_mcp.server import build_server

    if data_dir is not None and (url is not None or api_key is not None):
        raise click.UsageError("--data-dir opens the data directory in-process; it takes neither --url nor "
                               "--api-key")
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise click.UsageError(f"--data-dir [{data_dir}] is not a directory")

    async def main() -> None:
        if data_dir is not None:
            backend = open_embedded(Path(data_dir).expanduser())
        else:
            # --api-key, then XERJ_API_KEY; the data directory's admin.key is never read here.
            backend = HttpBackend(url or DEFAULT_URL, api_key_for(api_key, None), in_thread=http_transport)
        try:
            server = await build_server(backend, open_mode=True if data_dir is not None else None)
            # What is loaded by now (the SDK, pydantic's schemas, the tools) lives as long as the process; frozen, the
            # collector's full passes skip it instead of walking it all and stalling a call for tens of ms.
            gc.freeze()
            if http_transport:
                click.echo(f"xerj mcp: streamable HTTP on http://127.0.0.1:{port}/mcp, tools call "
                           f"{backend.describe}", err=True)
                await server.run_streamable_http_async(host="127.0.0.1", port=port)
            else:
                await serve_stdio(server)
        finally:
            await backend.aclose()

    try:
        anyio.run(main)  # asyncio: the stdio pipes are asyncio's
    except KeyboardInterrupt:  # pragma: no cover - interactive stop
        sys.exit(130)
