"""The share-link plugin: registers the guest (bearer token) backend through ``xerj_register_auth_backends``."""

from __future__ import annotations

from xerj_core import hookimpl
from xerj_core.hookspecs import RegisterAuthBackend


@hookimpl
def xerj_register_auth_backends(register: RegisterAuthBackend) -> None:
    from xerj_auth.guest import GuestBackend

    register(GuestBackend())
