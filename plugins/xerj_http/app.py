"""The Falcon app factory: middleware slots, one error serializer, then every plugin's routes."""

from __future__ import annotations

from typing import Any

import falcon

from xerj_core.plugins import XerjPluginManager, collect_registrations
from xerj_http import errors
from xerj_http.middleware import Audit, Authenticate, Authorize, CompatHeaders, Policy, ResolveTargets, open_mode_policy


def create_app(engine: Any, pm: XerjPluginManager, *, policy: Policy = open_mode_policy) -> falcon.App:
    """A WSGI app serving ``engine``; routes come from ``xerj_register_routes`` (ours included).

    ``policy(principal, op, privilege, targets)`` is what the authorize slot asks;
    it refuses by raising :class:`xerj_http.errors.Forbidden`. Open mode allows all.
    """
    backends = [args[0] for _plugin, args in collect_registrations(pm, "xerj_register_auth_backends")]
    app = falcon.App(
        middleware=[
            CompatHeaders(),
            Authenticate(backends),
            ResolveTargets(engine),
            Authorize(policy),
            Audit(engine),
        ],
        cors_enable=False,
    )
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_qs_csv = False
    app.req_options.strip_url_path_trailing_slash = True
    errors.install(app)
    pm.hook.xerj_register_routes(app=app, engine=engine)
    return app
