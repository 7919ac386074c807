"""Built-in core commands (``xerj plugins``), registered as a plugin like any other."""

from __future__ import annotations

import json

import click

from xerj_core import hookimpl
from xerj_core.plugins import XerjPluginManager, collect_registrations


def _embedders_by_plugin(pm: XerjPluginManager) -> dict[str, list[dict]]:
    """What each plugin's embedders declare: id, dims, license and source (nothing is loaded)."""
    found: dict[str, list[dict]] = {}
    for name, (embedder, *_rest) in collect_registrations(pm, "xerj_register_embedders"):
        found.setdefault(name, []).append({key: getattr(embedder, key, None)
                                           for key in ("id", "dims", "license", "source")})
    return found


def plugin_rows(pm: XerjPluginManager, *, include_builtins: bool, hook: str | None) -> list[dict]:
    """One row per registered plugin: ``{name, version, hooks}`` (and ``embedders`` for embedder plugins), by name."""
    embedders = _embedders_by_plugin(pm)
    rows = []
    for plugin in pm.get_plugins():
        origin = pm.origin(plugin)
        if origin.builtin and not include_builtins:
            continue
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or ())
        if hook is not None and hook not in hooks:
            continue
        row = {"name": origin.name, "version": origin.version, "hooks": hooks}
        if origin.name in embedders:
            row["embedders"] = embedders[origin.name]
        rows.append(row)
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
