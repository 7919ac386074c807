"""The Falcon app factory: middleware slots, one error serializer, then every plugin's routes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import falcon

from xerj_core.errors import PluginError
from xerj_core.plugins import XerjPluginManager, collect_registrations
from xerj_http import errors, rawpath
from xerj_http.audit import Audit
from xerj_http.middleware import Authenticate, Authorize, CompatHeaders, Policy, ResolveTargets

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

class XerjApp(falcon.App):
    """A Falcon app that also holds the authentication backends it opened, closed with :meth:`close`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_mode = True
        self.auth_backends: list[Any] = []
        self.admin_key_path: Path | None = None
        # Path prefixes served without a credential (see :class:`Authenticate`); plugins append to it
        # from ``xerj_register_routes``.
        self.public_prefixes: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        reason = rawpath.invalid_path(environ)
        if reason is not None:
            return rawpath.refuse(start_response, reason)
        return super().__call__(environ, start_response)

    def close(self) -> None:
        while self.auth_backends:
            self.auth_backends.pop().close()


def open_auth_backends(pm: XerjPluginManager, data_dir: Path) -> list[Any]:
    """Every registered auth backend, opened on ``data_dir``, in registration order; names must be unique."""
    opened: list[Any] = []
    seen: dict[str, str] = {}
    for plugin, (backend, *_rest) in collect_registrations(pm, "xerj_register_auth_backends"):
        name = getattr(backend, "name", None)
        if not isinstance(name, str) or not name or not callable(getattr(backend, "open", None)):
            raise PluginError(f"plugin [{plugin}] registered an auth backend without a name or an open(data_dir)")
        if name in seen:
            raise PluginError(f"plugin [{plugin}] registered the auth backend [{name}] that plugin "
                              f"[{seen[name]}] already registered")
        seen[name] = plugin
        opened.append(backend.open(data_dir))
    return opened


def ensure_admin_key(backends: list[Any], data_dir: Path) -> Path | None:
    """``<data_dir>/admin.key``, minted by the first backend that can, or ``None`` when none can."""
    for backend in backends:
        ensure = getattr(backend, "ensure_admin_key", None)
        if ensure is not None:
            return ensure(data_dir)
    return None


def create_app(engine: Engine, pm: XerjPluginManager, *, insecure: bool = False,
               policy: Policy | None = None) -> XerjApp:
    """A WSGI app serving ``engine``; routes come from ``xerj_register_routes`` (ours included).

    Secured unless ``insecure``: every request needs a credential one of the
    auth backends accepts, and ``<data_dir>/admin.key`` is minted if it is
    missing. ``insecure`` is open mode: every caller is the superuser.
    ``policy(principal, op, privilege, targets)``, when given, replaces the
    reach rules in the authorize slot; it refuses by raising
    :class:`xerj_http.errors.Forbidden`.
    """
    backends = open_auth_backends(pm, engine.data_dir)
    # Our own router instance, so the audit slot can name the route of a request refused before routing.
    router = falcon.routing.CompiledRouter()
    public_prefixes: list[str] = []
    app = XerjApp(
        router=router,
        middleware=[
            CompatHeaders(),
            Authenticate(backends, open_mode=insecure, public_prefixes=public_prefixes),
            ResolveTargets(engine),
            Authorize(policy),
            Audit(engine, router),
        ],
        cors_enable=False,
    )
    app.open_mode = insecure
    app.public_prefixes = public_prefixes
    app.auth_backends = backends
    if not insecure:
        app.admin_key_path = ensure_admin_key(backends, engine.data_dir)
        if app.admin_key_path is None:
            app.close()
            raise PluginError("a secured server needs an auth backend that can mint the admin key, and none is "
                              "registered (is the auth_api_key plugin disabled?); pass --insecure for open mode")
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_qs_csv = False
    app.req_options.strip_url_path_trailing_slash = True
    errors.install(app)
    pm.hook.xerj_register_routes(app=app, engine=engine)
    return app
