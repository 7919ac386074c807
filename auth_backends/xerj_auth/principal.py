"""Who is calling and what they may do: the Principal record and the reach rules of index privileges."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable, Mapping

import attrs

# Every agent-memory namespace and every second brain lives under this prefix.
RESERVED_PREFIX = ".xerj-memory-"
# What a grant may name. ``all`` covers the other three; none of them implies another.
PRIVILEGES = ("read", "write", "manage", "all")


@attrs.frozen
class IndexGrant:
    """One ``{names, privileges}`` entry of a role descriptor: index patterns (``*`` wildcards) and privileges."""

    names: tuple[str, ...]
    privileges: frozenset[str]

    def covers(self, privilege: str, index: str) -> bool:
        if privilege not in self.privileges and "all" not in self.privileges:
            return False
        return any(name_pattern(name).fullmatch(index) for name in self.names)


@attrs.frozen
class Principal:
    """Who is calling.

    ``superuser`` reaches every index (open mode, the admin key). Otherwise
    ``grants`` is ``None`` for a key minted without role descriptors (every
    ordinary index, nothing under :data:`RESERVED_PREFIX`) or the tuple of
    :class:`IndexGrant` the key was minted with (exactly those).
    """

    name: str
    superuser: bool
    mode: str
    grants: tuple[IndexGrant, ...] | None = None
    key_id: str | None = None
    # ``(method, route template)`` pairs this principal is held to before any privilege is looked at
    # (a share-link guest's allow-list); ``None`` is no route limit.
    routes: frozenset[tuple[str, str]] | None = None

    def may(self, privilege: str, index: str) -> bool:
        """Whether this principal holds ``privilege`` (``read``, ``write``, ``manage``) on ``index``."""
        if self.superuser:
            return True
        if self.grants is None:
            return not index.startswith(RESERVED_PREFIX)
        return any(grant.covers(privilege, index) for grant in self.grants)


OPEN_MODE_PRINCIPAL = Principal(name="open-mode", superuser=True, mode="open")
# The caller on a public path of a secured server: no grants, so it may touch no index at all.
ANONYMOUS_PRINCIPAL = Principal(name="anonymous", superuser=False, mode="anonymous", grants=())


@lru_cache(maxsize=1024)
def name_pattern(name: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", name)))


def grants_of(role_descriptors: Mapping[str, Any] | None) -> tuple[IndexGrant, ...] | None:
    """The grants of validated role descriptors; ``None`` when there are none (an unscoped key)."""
    if not role_descriptors:
        return None
    grants: list[IndexGrant] = []
    for role in role_descriptors.values():
        for entry in role.get("indices", ()):
            grants.append(IndexGrant(tuple(entry["names"]), frozenset(entry["privileges"])))
    return tuple(grants)


def describe(names: Iterable[str]) -> str:
    return ",".join(names)
