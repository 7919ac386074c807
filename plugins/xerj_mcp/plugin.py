"""The built-in MCP plugin: registers ``xerj mcp`` and ``xerj init`` through the ordinary command hook."""

from __future__ import annotations

from typing import Any

from xerj_core.hookspecs import hookimpl


@hookimpl
def xerj_register_commands(cli: Any) -> None:
    # The commands import the `mcp` SDK only when they run, so a build without the `mcp` extra still starts.
    from xerj_mcp.commands import init_command, mcp_command

    cli.add_command(mcp_command)
    cli.add_command(init_command)
