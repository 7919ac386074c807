"""Shared fixtures: a fresh data directory, an engine over it, and a plugin manager per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xerj_core.engine import Engine, EngineConfig
from xerj_core.plugins import get_plugin_manager

REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under XERJ_REQUIRE_CORPORA=1 (scripts/test) a run without the real corpora beside the checkout stops at
    once with the reason: their tests would otherwise skip or fail one by one, far from the cause."""
    if os.environ.get("XERJ_REQUIRE_CORPORA") == "1" and not (CORPORA / "foam-docs").is_dir():
        pytest.exit(f"the real corpora are missing: expected {CORPORA / 'foam-docs'} beside the checkout "
                    "(the README's layout: this checkout and shared/ side by side)", returncode=4)


@pytest.fixture(scope="session", autouse=True)
def _user_cache(tmp_path_factory):
    """Runs that write through a server keep their parse cache in the user's cache directory: the tests' (and
    the processes they start) in one of their own, not the home directory of whoever runs them."""
    before = os.environ.get("XERJ_CACHE_DIR")
    os.environ["XERJ_CACHE_DIR"] = str(tmp_path_factory.mktemp("user-cache"))
    yield
    if before is None:
        os.environ.pop("XERJ_CACHE_DIR", None)
    else:
        os.environ["XERJ_CACHE_DIR"] = before


@pytest.fixture(scope="module", params=["compiled", "numpy"])
def hop_loop(request):
    """Runs a module's tests once with each hop loop (see xerj_core.graph.hoprun): the compiled read, then numpy's
    passes, which must give the same answers. Without a build of the compiled one its half is skipped, unless
    XERJ_REQUIRE_HOP_KERNEL=1 (scripts/test) made the import fail already."""
    from xerj_core.graph import hoprun

    if request.param == "compiled" and not hoprun.available():
        pytest.skip("the compiled hop loop was not built (no C compiler at install)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hoprun, "ENABLED", request.param == "compiled")
        yield request.param


@pytest.fixture(scope="module", params=["int8 first pass", "float32 only"])
def knn_first_pass(request):
    """Runs a module's kNN tests once with the int8 first pass taken on every run of rows it can bound (see
    xerj_core.query.knnquant; by default it waits for 16 rows per k), then with every row scored in float32:
    both must give the same answers. Without a build of the C loop the first half is skipped, unless
    XERJ_REQUIRE_KNN_KERNEL=1 (scripts/test) made the import fail already."""
    from xerj_core.query import knnquant

    first = request.param == "int8 first pass"
    if first and not knnquant.available():
        pytest.skip("the kNN scan's int8 loop was not built (no C compiler at install)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(knnquant, "ENABLED", first)
        patch.setattr(knnquant, "MIN_ROWS_PER_K", 1)
        patch.setattr(knnquant, "MAX_LEFT_SHARE", 1.0)
        yield request.param


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


@pytest.fixture
def collections():
    """The generation of each cyclic collection started while the test runs, in order (after a full one)."""
    import gc

    started: list[int] = []

    def heard(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(heard)
    try:
        yield started
    finally:
        gc.callbacks.remove(heard)


# -- PostgreSQL (the postgres storage backend's tests) ------------------------------------------------------

@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL server: XERJ_TEST_PG_URL, else a throwaway loopback cluster started for this run.

    Without a server (no binaries, no psycopg) the PostgreSQL tests skip, unless XERJ_REQUIRE_PG=1 (CI),
    which turns that skip into a failure.
    """
    from tests.pg import server

    with server(os.environ.get("XERJ_TEST_PG_URL"), os.environ.get("XERJ_REQUIRE_PG") == "1") as url:
        yield url


@pytest.fixture
def pg_store_url(pg_url):
    """The URL of a fresh, empty store: a new schema of the test server, dropped after the test."""
    from tests.pg import fresh_schema

    with fresh_schema(pg_url) as url:
        yield url
