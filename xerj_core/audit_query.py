"""What a readable audit sink is asked: the filters of `GET /_audit/_search`, parsed and checked, and the match."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Mapping

import attrs

from xerj_core import params
from xerj_core.audit import OUTCOMES
from xerj_core.errors import IllegalArgument

DEFAULT_SIZE = 10
MAX_SIZE = 10_000
PARAMS = ("subject", "resource", "op", "outcome", "from", "to", "size")


def _matches(pattern: str, value: str) -> bool:
    return fnmatchcase(value, pattern) if "*" in pattern or "?" in pattern else value == pattern


def subject_names(subject: str) -> list[str]:
    """The names a subject answers to: itself, and for ``key:<id>:<name>`` the key id and the name."""
    names = [subject]
    if subject.startswith("key:"):
        _kind, _, rest = subject.partition(":")
        key_id, _, name = rest.partition(":")
        names += [key_id, name]
    return names


def resource_names(entry: Mapping[str, Any]) -> list[str]:
    """The names an entry's resource answers to: the resource, each index it names, with and without an id."""
    resource = entry.get("resource")
    names = [resource] if isinstance(resource, str) else []
    for part in (resource or "").split(",") if isinstance(resource, str) else ():
        names += [part, part.split("/", 1)[0]]
    indices = entry.get("indices")
    if isinstance(indices, list):
        names += [name for name in indices if isinstance(name, str)]
    return names


@attrs.frozen
class AuditQuery:
    subject: str | None = None
    resource: str | None = None
    op: str | None = None
    outcome: str | None = None
    from_ms: int | None = None
    to_ms: int | None = None
    size: int = DEFAULT_SIZE

    @classmethod
    def from_params(cls, query: Mapping[str, Any]) -> "AuditQuery":
        """Parse query-string parameters (one value each); an unknown or malformed one is a 400 that names it."""
        params.refuse_unknown(query, PARAMS, IllegalArgument, what="/_audit/_search")
        outcome = query.get("outcome")
        if outcome is not None:
            outcome = params.choice(outcome, "outcome", OUTCOMES, IllegalArgument)
        size = DEFAULT_SIZE
        if "size" in query:
            size = params.integer(query["size"], "size", IllegalArgument, 0, MAX_SIZE, source=params.QUERY)
        instants = {name: params.instant(query[name], name, IllegalArgument) for name in ("from", "to")
                    if name in query}
        return cls(subject=query.get("subject"), resource=query.get("resource"), op=query.get("op"),
                   outcome=outcome, from_ms=instants.get("from"), to_ms=instants.get("to"), size=size)

    def matches(self, entry: Mapping[str, Any]) -> bool:
        if self.outcome is not None and entry.get("outcome") != self.outcome:
            return False
        if self.op is not None and not _matches(self.op, str(entry.get("op", ""))):
            return False
        ts = entry.get("ts")
        if self.from_ms is not None and not (isinstance(ts, int) and ts >= self.from_ms):
            return False
        if self.to_ms is not None and not (isinstance(ts, int) and ts <= self.to_ms):
            return False
        if self.subject is not None and not any(
                _matches(self.subject, name) for name in subject_names(str(entry.get("subject", "")))):
            return False
        if self.resource is not None and not any(
                _matches(self.resource, name) for name in resource_names(entry)):
            return False
        return True
