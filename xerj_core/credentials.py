"""Which API key a command-line client presents to a xerj server: ``--api-key``, ``XERJ_API_KEY``, ``admin.key``."""

from __future__ import annotations

import base64
import os
from pathlib import Path

ENV_VAR = "XERJ_API_KEY"
# Where a secured server writes its superuser credential (``<data_dir>/admin.key``, mode 0600).
ADMIN_KEY_FILE = "admin.key"


def api_key_for(explicit: str | None, data_dir: str | Path | None) -> str | None:
    """The encoded API key to send: the option, else the environment, else a local data dir's admin key.

    A value given as ``id:secret`` is encoded the way an ``ApiKey`` header
    carries it; the encoded form (what ``_security/api_key`` answers as
    ``encoded`` and what ``admin.key`` holds) passes through.
    """
    for value in (explicit, os.environ.get(ENV_VAR)):
        if value and value.strip():
            return _encoded(value.strip())
    if data_dir is not None:
        path = Path(data_dir) / ADMIN_KEY_FILE
        try:
            value = path.read_text().strip()
        except OSError:
            return None
        return value or None
    return None


def _encoded(value: str) -> str:
    if ":" in value:
        return base64.b64encode(value.encode()).decode()
    return value


def authorization_header(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"ApiKey {api_key}"} if api_key else {}
