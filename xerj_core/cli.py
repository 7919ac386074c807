"""The ``xerj`` command group; every subcommand arrives through ``xerj_register_commands``."""

from __future__ import annotations

import sys
from typing import Sequence

import click

from xerj_core import __version__
from xerj_core.plugins import XerjPluginManager, get_plugin_manager


def build_cli(pm: XerjPluginManager) -> click.Group:
    """Return a fresh ``xerj`` group with every plugin's commands added to it."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="xerj")
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        """xerj: a local second brain and agent memory."""
        ctx.obj = pm

    pm.hook.xerj_register_commands(cli=cli)
    return cli


def main(argv: Sequence[str] | None = None) -> None:
    try:
        pm = get_plugin_manager()
    except Exception as exc:  # a broken plugin must say which, not crash with a trace
        click.echo(f"xerj: could not load plugins: {exc}", err=True)
        sys.exit(2)
    from xerj_core.errors import StoreFormatUnsupported

    try:
        build_cli(pm).main(args=list(argv) if argv is not None else None, prog_name="xerj")
    except StoreFormatUnsupported as exc:  # met by whichever command opened the data directory first
        click.echo(f"xerj: {exc.reason}", err=True)
        sys.exit(2)
