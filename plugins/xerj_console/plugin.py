"""The console plugin: its routes through ``xerj_register_routes``, its session cookie as an auth backend."""

from __future__ import annotations

from typing import Any

from xerj_core import hookimpl
from xerj_core.hookspecs import RegisterAuthBackend


@hookimpl
def xerj_register_routes(app: Any, engine: Any) -> None:
    from xerj_console.resources import add_console_routes

    add_console_routes(app, engine)


@hookimpl
def xerj_register_auth_backends(register: RegisterAuthBackend) -> None:
    from xerj_console.session import SessionBackend

    register(SessionBackend())
