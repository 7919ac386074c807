"""The built-in auth plugin: registers the API-key backend through ``xerj_register_auth_backends``."""

from __future__ import annotations

from xerj_core import hookimpl
from xerj_core.hookspecs import RegisterAuthBackend


@hookimpl
def xerj_register_auth_backends(register: RegisterAuthBackend) -> None:
    from xerj_auth.backend import ApiKeyBackend

    register(ApiKeyBackend())
