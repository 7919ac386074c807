"""The API-key backend: ``Authorization: ApiKey base64(id:key)`` verified against the data directory's keys."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from xerj_auth.keys import InvalidCredential, KeyStore
from xerj_auth.principal import Principal

SCHEME = "apikey"


def offered(headers: Mapping[str, str], scheme: str) -> str | None:
    """The credential of ``Authorization: <scheme> <credential>`` (scheme case-insensitive); ``None`` for another."""
    header = headers.get("AUTHORIZATION")
    if header is None:
        return None
    given, _, value = header.strip().partition(" ")
    return value.strip() if given.lower() == scheme else None


class ApiKeyAuthenticator:
    """An open API-key backend over one data directory; ``keys`` is its store (mint, list, invalidate)."""

    name = "api_key"

    def __init__(self, data_dir: str | Path) -> None:
        self.keys = KeyStore(data_dir)

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """The caller's principal; ``None`` when no ``ApiKey`` credential is offered.

        A credential of this kind that does not verify raises
        :class:`~xerj_auth.keys.InvalidCredential`, so no later backend gets a
        second chance at a key this one refused.
        """
        value = offered(headers, SCHEME)
        return None if value is None else self.keys.verify(value)

    def ensure_admin_key(self, data_dir: str | Path) -> Path:
        return self.keys.ensure_admin_key(data_dir)

    def close(self) -> None:
        self.keys.close()


class ApiKeyBackend:
    """What the plugin registers: ``open(data_dir)`` gives the backend bound to one data directory."""

    name = "api_key"

    def open(self, data_dir: str | Path) -> ApiKeyAuthenticator:
        return ApiKeyAuthenticator(data_dir)


__all__ = ["ApiKeyAuthenticator", "ApiKeyBackend", "InvalidCredential", "offered"]
