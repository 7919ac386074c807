"""xerj's HTTP surface: a Falcon app over the Engine, served by ``xerj serve`` under gunicorn."""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "resolve_targets"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: every process that builds the plugin manager imports this package (its plugin
    # module lives here), and Falcon with the app's modules cost a third of a second that an autoindex
    # run or a worker process never uses.
    if name == "create_app":
        from xerj_http.app import create_app

        return create_app
    if name == "resolve_targets":
        from xerj_http.targets import resolve_targets

        return resolve_targets
    raise AttributeError(f"module 'xerj_http' has no attribute {name!r}")
