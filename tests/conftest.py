"""Shared fixtures: a fresh data directory, an engine over it, and a plugin manager per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from xerj_core.engine import Engine, EngineConfig
from xerj_core.plugins import get_plugin_manager

REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"


@pytest.fixture
def pm():
    """xerj's built-in plugins only, built fresh for this test: whatever else the machine has installed
    is not loaded; a test registers the plugins it exercises itself (and unregisters them)."""
    return get_plugin_manager(builtins_only=True)


@pytest.fixture
def engine(tmp_path, pm):
    """An engine on an empty data directory, with a small tail so sealed segments get exercised."""
    with Engine(tmp_path / "data", pm, config=EngineConfig(tail_rows=8)) as eng:
        yield eng
