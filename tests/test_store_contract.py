"""The storage backend contract (xerj_core.testing.AbstractStorageBackendTests) on LMDB and on PostgreSQL."""

from __future__ import annotations

import pytest

from xerj_core.testing import AbstractStorageBackendTests

from .conftest import CORPORA


class TestLmdbBackend(AbstractStorageBackendTests):
    @pytest.fixture
    def store_url(self, tmp_path):
        return f"lmdb://{tmp_path / 'backend-data'}"

    @pytest.fixture
    def foam_corpus(self):
        return CORPORA / "foam-docs"


class TestPostgresBackend(AbstractStorageBackendTests):
    @pytest.fixture
    def store_url(self, pg_store_url):
        return pg_store_url

    @pytest.fixture
    def foam_corpus(self):
        return CORPORA / "foam-docs"
