"""xerj's HTTP surface: a Falcon app over the Engine, served by ``xerj serve`` under gunicorn."""

from xerj_http.app import create_app
from xerj_http.targets import resolve_targets

__all__ = ["create_app", "resolve_targets"]
