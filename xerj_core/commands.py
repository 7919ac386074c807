"""Built-in core commands (``xerj plugins``), registered as a plugin like any other."""

from __future__ import annotations

import json

import click

from xerj_core.hookspecs import hookimpl
from xerj_core.plugins import XerjPluginManager


def plugin_rows(pm: XerjPluginManager, *, include_builtins: bool, hook: str | None) -> list[dict]:
    """One row per registered plugin: ``{name, version, hooks}``, sorted by name."""
    rows = []
    for plugin in pm.get_plugins():
        origin = pm.origin(plugin)
        if origin.builtin and not include_builtins:
            continue
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or ())
        if hook is not None and hook not in hooks:
            continue
        rows.append({"name": origin.name, "version": origin.version, "hooks": hooks})
    return sorted(rows, key=lambda row: row["name"])


@click.command("plugins")
@click.option("--all", "include_builtins", is_flag=True, help="Include the built-in plugins.")
@click.option("--hook", default=None, help="Only plugins implementing this hook.")
@click.pass_obj
def plugins_command(pm: XerjPluginManager, include_builtins: bool, hook: str | None) -> None:
    """List installed plugins as JSON."""
    click.echo(json.dumps(plugin_rows(pm, include_builtins=include_builtins, hook=hook), indent=2))


@hookimpl
def xerj_register_commands(cli: click.Group) -> None:
    cli.add_command(plugins_command)
