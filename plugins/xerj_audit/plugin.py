"""The built-in audit plugin: the JSONL sink, the ``/_audit`` routes and ``xerj audit``, through the ordinary hooks."""

from __future__ import annotations

from typing import Any

from xerj_core.hookspecs import hookimpl


@hookimpl
def xerj_register_audit_sinks(register: Any) -> None:
    from xerj_audit.jsonl import JsonlAuditSinkFactory

    register(JsonlAuditSinkFactory())


@hookimpl
def xerj_register_routes(app: Any, engine: Any) -> None:
    from xerj_audit.resources import add_routes

    add_routes(app, engine)


@hookimpl
def xerj_register_commands(cli: Any) -> None:
    from xerj_audit.commands import audit_group

    cli.add_command(audit_group)
