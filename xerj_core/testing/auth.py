"""The conformance suite every auth backend passes: subclass ``AbstractAuthBackendTests``, provide two fixtures.

Usage, in a plugin's own tests::

    from xerj_core.testing.auth import AbstractAuthBackendTests

    class TestMyBackend(AbstractAuthBackendTests):
        @pytest.fixture
        def backend(self):
            return MyBackend()            # what the plugin passes to register()

        @pytest.fixture
        def valid_headers(self, opened):
            return {"AUTHORIZATION": "..."}   # a credential `opened` accepts

The contract checked here (see ``xerj_register_auth_backends``): a non-empty
string ``name``; ``open(data_dir)`` returns an object with that ``name``,
``authenticate(headers)`` and ``close()``; no credential at all is ``None``;
a valid credential is a :class:`xerj_auth.Principal`, the same one every time;
each of ``bad_headers`` raises an error with status 401; one data directory
may be opened twice in a process; ``close`` may be called twice.
"""

from __future__ import annotations

from typing import Any

import pytest

from xerj_core.errors import XerjError


class AbstractAuthBackendTests:
    """Contract tests for an auth backend; needs the ``backend`` and ``valid_headers`` fixtures."""

    # Credentials of the backend's own kind that must not verify; override for another scheme.
    bad_headers: tuple[dict[str, str], ...] = (
        {"AUTHORIZATION": "ApiKey not-base64!!"},
        {"AUTHORIZATION": "ApiKey dW5rbm93bjpzZWNyZXQ="},  # base64("unknown:secret")
        {"AUTHORIZATION": "ApiKey " + "A" * 10_000},
    )

    @pytest.fixture
    def backend(self) -> Any:
        raise NotImplementedError("override the `backend` fixture to return what the plugin registers")

    @pytest.fixture
    def valid_headers(self, opened: Any) -> dict[str, str]:
        raise NotImplementedError("override the `valid_headers` fixture to return headers `opened` accepts")

    @pytest.fixture
    def opened(self, backend: Any, tmp_path: Any) -> Any:
        opened = backend.open(tmp_path / "data")
        yield opened
        opened.close()

    def test_names_itself(self, backend: Any, opened: Any) -> None:
        assert isinstance(backend.name, str) and backend.name
        assert opened.name == backend.name
        assert callable(opened.authenticate) and callable(opened.close)

    def test_no_credential_is_none(self, opened: Any) -> None:
        assert opened.authenticate({}) is None
        assert opened.authenticate({"ACCEPT": "application/json"}) is None

    def test_a_valid_credential_is_a_principal(self, opened: Any, valid_headers: dict[str, str]) -> None:
        from xerj_auth.principal import Principal

        first = opened.authenticate(valid_headers)
        assert isinstance(first, Principal) and isinstance(first.name, str) and first.name
        assert opened.authenticate(valid_headers) == first

    def test_bad_credentials_are_401(self, opened: Any) -> None:
        for headers in self.bad_headers:
            with pytest.raises(XerjError) as refused:
                opened.authenticate(headers)
            assert refused.value.status == 401, headers

    def test_one_data_directory_opens_twice_and_closes_twice(self, backend: Any, opened: Any, tmp_path: Any,
                                                             valid_headers: dict[str, str]) -> None:
        second = backend.open(tmp_path / "data")
        try:
            assert second.authenticate(valid_headers) == opened.authenticate(valid_headers)
        finally:
            second.close()
            second.close()
        assert opened.authenticate(valid_headers) is not None
