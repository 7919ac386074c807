"""The built-in HTTP plugin: xerj's own routes and the ``xerj serve`` command, through the ordinary hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xerj_core import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine


@hookimpl
def xerj_register_routes(app: Any, engine: Engine) -> None:
    from xerj_http.routes import add_routes

    add_routes(app, engine)


@hookimpl
def xerj_register_commands(cli: Any) -> None:
    from xerj_http.serve import serve_command

    cli.add_command(serve_command)
