"""Builds the plugin manager: entry points of group ``xerj``, allow/block lists, check_pending."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import Any, Callable, Iterable

import attrs
import pluggy

from xerj_core import hookspecs
from xerj_core.errors import PluginError

GROUP = "xerj"
# Distribution that ships the built-in plugins; only its entry points count as built-in.
BUILTIN_DIST = "xerj"


@attrs.frozen
class PluginOrigin:
    """Where a registered plugin came from, for ``xerj plugins`` and error messages."""

    name: str
    distribution: str | None
    version: str | None

    @property
    def builtin(self) -> bool:
        return (self.distribution or "").lower() == BUILTIN_DIST


class XerjPluginManager(pluggy.PluginManager):
    """A pluggy manager that also remembers each plugin's distribution and version."""

    def __init__(self) -> None:
        super().__init__(GROUP)
        self.add_hookspecs(hookspecs)
        self.origins: dict[str, PluginOrigin] = {}

    def register_origin(self, plugin: object, origin: PluginOrigin) -> None:
        self.register(plugin, name=origin.name)
        self.origins[origin.name] = origin

    def origin(self, plugin: object) -> PluginOrigin:
        name = self.get_name(plugin) or repr(plugin)
        return self.origins.get(name, PluginOrigin(name, None, None))


def _names(env_value: str | None) -> set[str] | None:
    if env_value is None:
        return None
    return {part.strip() for part in env_value.split(",") if part.strip()}


def get_plugin_manager(
    *,
    load_entrypoints: bool = True,
    builtins_only: bool = False,
    extra_plugins: Iterable[tuple[str, object]] = (),
) -> XerjPluginManager:
    """Return a fresh plugin manager with every allowed plugin registered and validated.

    ``XERJ_DISABLE_PLUGINS`` (comma list) blocks plugins by entry-point name,
    built-ins included. ``XERJ_LOAD_PLUGINS`` (comma list) is an allow-list for
    third-party plugins: when set, only those load; the built-ins always load
    unless blocked, so the command line keeps working. A hookimpl whose name
    matches no hookspec fails ``check_pending()`` with a clear error.

    ``builtins_only`` loads the entry points xerj itself ships and nothing the
    machine happens to have installed (tests register what they test by hand).
    """
    pm = XerjPluginManager()
    blocked = _names(os.environ.get("XERJ_DISABLE_PLUGINS")) or set()
    allowed = _names(os.environ.get("XERJ_LOAD_PLUGINS"))
    for name in blocked:
        pm.set_blocked(name)
    if load_entrypoints:
        # a distribution's name and version, read once per distribution: each read parses its METADATA file
        # again, and the entry points of one distribution share its object (36 entry points, 2 distributions:
        # 20 of a call's 27 ms went on 72 parses)
        named: dict[int, tuple[str | None, str | None]] = {}
        for ep in entry_points(group=GROUP):
            if ep.name in blocked or pm.has_plugin(ep.name):
                continue
            found = named.get(id(ep.dist))
            if found is None:
                found = named[id(ep.dist)] = (ep.dist.metadata["Name"], ep.dist.version) if ep.dist is not None \
                    else (None, None)
            origin = PluginOrigin(ep.name, *found)
            if not origin.builtin and (builtins_only or (allowed is not None and ep.name not in allowed)):
                continue
            pm.register_origin(ep.load(), origin)
    for name, plugin in extra_plugins:
        if name not in blocked:
            pm.register_origin(plugin, PluginOrigin(name, None, None))
    pm.check_pending()
    return pm


def collect_registrations(pm: pluggy.PluginManager, hook_name: str) -> list[tuple[str, tuple]]:
    """Call the provider hook ``hook_name`` plugin by plugin; return ``(plugin_name, args)`` per register call.

    The core, not pluggy, hands each plugin its own ``register`` closure so every
    registered thing is attributed to the plugin that registered it.
    """
    registered: list[tuple[str, tuple]] = []
    # pluggy calls implementations last-registered first; keep that order.
    for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls()):

        def register(*args: object, _plugin: str = impl.plugin_name) -> None:
            registered.append((_plugin, args))

        impl.function(**{name: register for name in impl.argnames if name == "register"})
    return registered


def collect_schemes(pm: pluggy.PluginManager, hook_name: str, kind: str) -> dict[str, Callable[..., Any]]:
    """``{scheme: opener}`` from a provider hook whose plugins call ``register(scheme, opener)``.

    ``kind`` names what is registered in the refusals (``storage``, ``executor``):
    a call of another shape, and a scheme registered twice (naming both plugins),
    raise ``PluginError``.
    """
    found: dict[str, tuple[str, Callable[..., Any]]] = {}
    for plugin, args in collect_registrations(pm, hook_name):
        if len(args) != 2 or not isinstance(args[0], str) or not callable(args[1]):
            raise PluginError(f"plugin {plugin!r} must call register(scheme, opener)")
        scheme, opener = args
        if scheme in found:
            raise PluginError(f"plugin {plugin!r} registered {kind} scheme {scheme!r}, "
                              f"already registered by {found[scheme][0]!r}")
        found[scheme] = (plugin, opener)
    return {scheme: opener for scheme, (_plugin, opener) in found.items()}
