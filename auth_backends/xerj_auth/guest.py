"""The share-link guest backend: ``Authorization: Bearer <token>`` verified against the data directory's shares.

A guest token stands for a :class:`~xerj_auth.principal.Principal` with ``read``
on exactly the shared indices and held to :data:`GUEST_ROUTES`, the route
allow-list the authorize slot applies before any privilege check. Trading a
passcode for a token (:data:`EXCHANGE_ROUTE`) needs no credential at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from xerj_auth.backend import offered
from xerj_auth.principal import Principal
from xerj_auth.shares import EXCHANGE_ROUTE, GUEST_ROUTES, ShareStore

SCHEME = "bearer"


class GuestAuthenticator:
    """An open guest backend over one data directory; ``shares`` is its store (mint, list, revoke, exchange)."""

    name = "share_guest"
    public_routes = frozenset({EXCHANGE_ROUTE})

    def __init__(self, data_dir: str | Path) -> None:
        self.shares = ShareStore(data_dir)

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """The guest's principal; ``None`` when no ``Bearer`` credential is offered.

        A bearer token that does not verify (unknown, revoked, expired, malformed)
        raises :class:`~xerj_auth.keys.InvalidCredential`.
        """
        value = offered(headers, SCHEME)
        return None if value is None else self.shares.verify(value)

    def close(self) -> None:
        self.shares.close()


class GuestBackend:
    """What the plugin registers: ``open(data_dir)`` gives the backend bound to one data directory."""

    name = "share_guest"

    def open(self, data_dir: str | Path) -> GuestAuthenticator:
        return GuestAuthenticator(data_dir)


__all__ = ["EXCHANGE_ROUTE", "GUEST_ROUTES", "GuestAuthenticator", "GuestBackend"]
