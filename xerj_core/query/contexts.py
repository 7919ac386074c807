"""Search contexts: scrolls and points in time, kept in the store so every worker process can continue them.

A context pins the generation of each index it reads (see
:mod:`xerj_core.store.pins` for why a pin and not a held LMDB transaction), is
owned by the principal that opened it, and expires ``keep_alive`` after its
last use. Expired contexts are closed, and their pins released, by the next
open, use or clear of any context. A context that expired, was closed, or was
opened by another principal reads as missing (404
``search_context_missing_exception``), so an id never tells a caller whose it is.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any, Sequence

from xerj_core.errors import IllegalArgument, SearchContextMissing, XerjError

# Elasticsearch's default search.max_keep_alive: a context cannot outlive a day without being used.
MAX_KEEP_ALIVE_MS = 24 * 3_600_000
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(nanos|micros|ms|s|m|h|d)\s*$")
_UNIT_MS = {"nanos": 1e-6, "micros": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


# Elasticsearch's search.max_open_scroll_context: open contexts pin sources, so their number is bounded.
MAX_OPEN_CONTEXTS = 500


class TooManyContexts(XerjError):
    status = 429
    error_type = "too_many_scroll_contexts_exception"


def parse_keep_alive(value: Any, name: str = "keep_alive") -> int:
    """Milliseconds of an ES time value (``30s``, ``1m``, ``2h``); above a day is refused as ES does."""
    found = _TIME.match(str(value)) if isinstance(value, str) else None
    if found is None:
        raise IllegalArgument(f"failed to parse setting [{name}] with value [{value}] as a time value: "
                              f"unit is missing or unrecognized")
    millis = int(float(found.group(1)) * _UNIT_MS[found.group(2)])
    if millis > MAX_KEEP_ALIVE_MS:
        raise IllegalArgument(f"Keep alive for request ({value}) is too large. It must be less than (1d). This "
                              f"limit can be set by changing the [search.max_keep_alive] cluster level setting.")
    if millis <= 0:
        raise IllegalArgument(f"[{name}] must be a positive time value, got [{value}]")
    return millis


def _now() -> int:
    return int(time.time() * 1000)


class SearchContexts:
    """Open, use and close scroll and point-in-time contexts of one store."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def open(self, kind: str, indices: Sequence[str], principal: str | None, keep_alive_ms: int,
             extra: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """A new context over ``indices`` as they are now; returns ``(id, record)``."""
        self.sweep()
        if sum(1 for _c, r in self.store.contexts() if r.get("kind") == kind) >= MAX_OPEN_CONTEXTS:
            setting = "search.max_open_scroll_context" if kind == "scroll" else "search.max_open_pit_context"
            raise TooManyContexts(f"Trying to create too many {'scroll' if kind == 'scroll' else 'point in time'} "
                                  f"contexts. Must be less than or equal to: [{MAX_OPEN_CONTEXTS}]. This limit can "
                                  f"be set by changing the [{setting}] setting.")
        context_id = secrets.token_urlsafe(24)
        now = _now()
        record = {"kind": kind, "principal": principal, "created": now, "keep_alive": keep_alive_ms,
                  "expires": now + keep_alive_ms, **(extra or {})}
        return context_id, self.store.open_context(context_id, list(indices), record)

    def use(self, context_id: str, principal: str | None, kind: str, keep_alive: str | None = None) -> dict[str, Any]:
        """The live context ``context_id`` of ``principal``, its expiry pushed by ``keep_alive`` when given."""
        record = self.store.context(context_id) if isinstance(context_id, str) and context_id else None
        now = _now()
        if record is not None and record["expires"] < now:
            self.store.close_contexts([context_id])
            record = None
        if record is None or record.get("kind") != kind or record.get("principal") != principal:
            raise SearchContextMissing(f"No search context found for id [{context_id}]")
        if keep_alive is not None:
            record["keep_alive"] = parse_keep_alive(keep_alive)
            record["expires"] = now + record["keep_alive"]
            self.store.save_context(context_id, record)
        return record

    def save(self, context_id: str, record: dict[str, Any]) -> None:
        self.store.save_context(context_id, record)

    def close(self, context_ids: Sequence[str], principal: str | None, kind: str) -> list[str]:
        """Close the given contexts the principal owns; returns the ids that were closed."""
        self.sweep()
        found = dict(self.store.contexts())
        mine = [c for c in context_ids if c in found and found[c].get("kind") == kind
                and found[c].get("principal") == principal]
        self.store.close_contexts(mine)
        return mine

    def owned(self, principal: str | None, kind: str) -> list[tuple[str, dict[str, Any]]]:
        self.sweep()
        return [(c, r) for c, r in self.store.contexts() if r.get("kind") == kind and r.get("principal") == principal]

    def indices_of(self, context_id: Any) -> list[str]:
        """The index names a context pins (for authorization; an unknown id pins nothing)."""
        record = self.store.context(context_id) if isinstance(context_id, str) and context_id else None
        return [] if record is None else [pin["index"] for pin in record.get("pins", ())]

    def sweep(self) -> int:
        now = _now()
        expired = [c for c, r in self.store.contexts() if r["expires"] < now]
        return self.store.close_contexts(expired) if expired else 0
