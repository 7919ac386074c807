"""The audit trail: collects the sinks plugins register and fans every audit event out to each of them.

A sink plugin registers a factory through ``xerj_register_audit_sinks``: it
has a unique ``name`` and ``open(data_dir, config)`` returning the sink bound to
one data directory, which has ``name``, ``append(event)`` (durable before it
returns) and ``close()``. A sink may also offer ``search(query)`` and
``verify()``; the ``/_audit`` routes and ``xerj audit verify`` use the first
sink that does.

``record(event)`` appends to every sink, then tells the ``xerj_audit_event``
observers. A sink that fails does not stop the others, and the failure is
raised as :class:`~xerj_core.errors.AuditSinkFailed` naming it, so the request
that caused the event is refused instead of going unrecorded.
"""

from __future__ import annotations

import getpass
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from xerj_core.errors import AuditSinkFailed, PluginError
from xerj_core.plugins import XerjPluginManager, collect_registrations

log = logging.getLogger(__name__)

# The fields of an event, in the order the HTTP audit slot fills them; sinks add their own (seq, ts, hashes).
EVENT_FIELDS = ("op", "subject", "resource", "privilege", "outcome", "status", "remote_addr", "request_id")
OUTCOMES = ("success", "denied", "failure")


def local_subject() -> str:
    """The subject of a command run on this machine against a data directory: ``local:<OS user>``.

    Such a run needs no key (whoever can open the files can write them), so the
    operating system's user is the only name there is to record.
    """
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (a bare container)
        return f"local:uid-{os.getuid()}"


@runtime_checkable
class AuditSink(Protocol):
    """A sink bound to one data directory."""

    name: str

    def append(self, event: Mapping[str, Any]) -> Any: ...

    def close(self) -> None: ...


class AuditTrail:
    """Every registered sink, opened on one data directory; ``record`` is the one way to audit an event."""

    def __init__(self, pm: XerjPluginManager, data_dir: str | Path, config: Any = None) -> None:
        self.pm = pm
        self.sinks: list[AuditSink] = []
        seen: dict[str, str] = {}
        for plugin, args in collect_registrations(pm, "xerj_register_audit_sinks"):
            factory = args[0] if args else None
            name = getattr(factory, "name", None)
            if not isinstance(name, str) or not name or not callable(getattr(factory, "open", None)):
                raise PluginError(f"plugin [{plugin}] registered an audit sink without a [name] and [open(data_dir, "
                                  f"config)]", plugin=plugin)
            if name in seen:
                raise PluginError(f"audit sink [{name}] is registered twice (plugins [{seen[name]}] and [{plugin}])",
                                  plugin=plugin)
            seen[name] = plugin
            self.sinks.append(factory.open(Path(data_dir), config))

    def record(self, event: Mapping[str, Any]) -> None:
        """Append ``event`` to every sink, then notify the observers; raise if any sink could not write."""
        failed: AuditSinkFailed | None = None
        for sink in self.sinks:
            try:
                sink.append(event)
            except Exception as exc:  # any cause: the event must not be dropped without a word
                log.error("audit sink [%s] could not record %s: %s", sink.name, dict(event), exc)
                if failed is None:
                    failed = AuditSinkFailed(sink.name, str(exc) or type(exc).__name__)
        # Each observer on its own, so one that raises neither silences the others nor refuses the request.
        for impl in reversed(self.pm.hook.xerj_audit_event.get_hookimpls()):
            try:
                impl.function(**{name: event for name in impl.argnames if name == "event"})
            except Exception:
                log.exception("xerj_audit_event observer [%s] failed", impl.plugin_name)
        if failed is not None:
            raise failed

    def readable(self) -> Any | None:
        """The first sink that can be searched and verified, or ``None``."""
        for sink in self.sinks:
            if callable(getattr(sink, "search", None)) and callable(getattr(sink, "verify", None)):
                return sink
        return None

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                log.exception("audit sink [%s] failed to close", sink.name)
