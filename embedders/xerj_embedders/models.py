"""``xerj models``: list the embedders with their license and source, and fetch model files into the model cache.

The options that choose where model files live (``--model-cache`` /
``XERJ_MODEL_CACHE``) and whether fetching is allowed (``--offline`` /
``XERJ_OFFLINE``) are defined here once and shared with ``xerj serve``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import click

from xerj_core import hookimpl
from xerj_core.embedding import EmbedderSettings, collect_embedders, describe, get_embedder
from xerj_core.errors import XerjError


def model_cache_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--model-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
                        envvar="XERJ_MODEL_CACHE", show_envvar=True,
                        help="Where model files are cached (default: the user cache directory).")(fn)


def offline_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--offline", is_flag=True, envvar="XERJ_OFFLINE", show_envvar=True,
                        help="Read models only from the model cache; a missing model is an error naming "
                             "the command that fetches it.")(fn)


@click.group("models")
def models_group() -> None:
    """Embedders and their model files."""


@models_group.command("list")
@model_cache_option
@click.pass_obj
def list_command(pm, model_cache: Path | None) -> None:
    """Every embedder as JSON: id, dims, license, source, whether it can run here, and if its files are cached."""
    embedders = collect_embedders(pm, EmbedderSettings(model_cache=model_cache))
    rows = []
    for embedder_id in sorted(embedders):
        row = describe(embedders[embedder_id])
        cached = getattr(embedders[embedder_id], "cached", None)
        if cached is not None:
            row["cached"] = cached()
        rows.append(row)
    click.echo(json.dumps(rows, indent=2))


@models_group.command("pull")
@click.argument("model_id")
@model_cache_option
@click.pass_obj
def pull_command(pm, model_id: str, model_cache: Path | None) -> None:
    """Fetch MODEL_ID's files into the model cache, so --offline can use it."""
    embedders = collect_embedders(pm, EmbedderSettings(model_cache=model_cache))
    try:
        embedder = get_embedder(embedders, model_id)
        pull = getattr(embedder, "pull", None)
        if pull is None:
            click.echo(f"{model_id}: nothing to fetch; it comes from {embedder.source}")
            return
        where = pull()
    except XerjError as exc:
        raise click.ClickException(exc.reason) from None
    click.echo(f"{model_id}: ready in the model cache {where}")


@hookimpl
def xerj_register_commands(cli: click.Group) -> None:
    cli.add_command(models_group)
