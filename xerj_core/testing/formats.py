"""The conformance suite every document format passes: subclass ``AbstractFormatTests``, provide fixtures.

Usage, in a plugin's own tests::

    from xerj_core.testing.formats import AbstractFormatTests

    class TestMyFormat(AbstractFormatTests):
        @pytest.fixture
        def fmt(self):
            return MyFormat()

        @pytest.fixture
        def sample_files(self):      # {root-relative path: bytes}, each accepted and parsed
            return {"notes/a.xyz": b"..."}

        @pytest.fixture
        def bad_files(self):         # optional: {path: bytes} that must raise FormatError
            return {"broken.xyz": b"\\xff\\xfe"}

        @pytest.fixture
        def plugin(self):            # optional: the object whose hookimpl registers the format
            return my_plugin_module

The contract checked here: the protocol's attributes (lowercase ``name`` and
``dataset``, an integer ``priority`` if any); it accepts its samples; parsing
is deterministic; the file card comes first with ``doc_id == path``, every
other id starts with ``path#`` and ids are unique; every document carries the
path, the mtime, the format's name, a valid dataset, a kind and string
title/text/section; ``fields`` are JSON values; bad input raises
``FormatError`` with a reason, and garbage never raises anything else;
``parse_file`` routes the samples to it; and, with ``plugin``, the hook
registers a format the core accepts.
"""

from __future__ import annotations

import json
import re

import pytest

from xerj_core.autoindex.formats import SNIFF_BYTES, Format, FormatError, collect_formats, parse_file
from xerj_core.plugins import get_plugin_manager

__all__ = ["AbstractFormatTests"]

_NAME = re.compile(r"[a-z0-9][a-z0-9_.\-]*")


class AbstractFormatTests:
    """Contract tests for a :class:`~xerj_core.autoindex.formats.Format`."""

    mtime_ms = 1_700_000_000_000
    garbage = (b"", b"\x00\x01\x02\xff\xfe", b"\xff" * 64, bytes(range(256)) * 4, b"\n\n\n")

    @pytest.fixture
    def fmt(self) -> Format:
        raise NotImplementedError("override the `fmt` fixture to return the format under test")

    @pytest.fixture
    def sample_files(self) -> dict[str, bytes]:
        raise NotImplementedError("override `sample_files`: {root-relative path: bytes} the format parses")

    @pytest.fixture
    def bad_files(self) -> dict[str, bytes]:
        return {}

    @pytest.fixture
    def plugin(self) -> object | None:
        return None

    @pytest.fixture
    def parsed(self, fmt, sample_files):
        return {path: fmt.parse(path, data, self.mtime_ms) for path, data in sorted(sample_files.items())}

    # -- identity --------------------------------------------------------

    def test_satisfies_protocol(self, fmt):
        assert isinstance(fmt, Format)
        assert _NAME.fullmatch(fmt.name) and _NAME.fullmatch(fmt.dataset)
        priority = getattr(fmt, "priority", 0)
        assert isinstance(priority, int) and not isinstance(priority, bool)

    def test_registers_through_its_hook(self, fmt, plugin):
        if plugin is None:
            pytest.skip("no `plugin` fixture: the hook registration is not checked")
        pm = get_plugin_manager(load_entrypoints=False, extra_plugins=[(f"format_{fmt.name}", plugin)])
        assert fmt.name in collect_formats(pm)

    # -- samples ---------------------------------------------------------

    def test_accepts_its_samples(self, fmt, sample_files):
        assert sample_files, "provide at least one sample file"
        for path, data in sample_files.items():
            assert fmt.accepts(path, data[:SNIFF_BYTES]), f"{fmt.name} should accept {path}"

    def test_parse_is_deterministic(self, fmt, sample_files, parsed):
        for path, data in sample_files.items():
            assert fmt.parse(path, data, self.mtime_ms) == parsed[path]

    def test_card_first_and_ids_derived_from_the_path(self, parsed):
        for path, docs in parsed.items():
            assert docs, f"{path} gave no documents"
            assert docs[0].doc_id == path
            ids = [doc.doc_id for doc in docs]
            assert len(ids) == len(set(ids)), f"{path}: duplicate document ids"
            assert all(doc_id.startswith(path + "#") for doc_id in ids[1:])

    def test_standard_fields_on_every_document(self, fmt, parsed):
        for path, docs in parsed.items():
            for doc in docs:
                assert doc.ax_path == path
                assert doc.mtime_ms == self.mtime_ms
                assert doc.format == fmt.name
                assert _NAME.fullmatch(doc.dataset)
                assert isinstance(doc.kind, str) and doc.kind
                assert isinstance(doc.title, str) and isinstance(doc.text, str) and isinstance(doc.section, str)

    def test_fields_are_json_values(self, parsed):
        for docs in parsed.values():
            for doc in docs:
                assert json.loads(json.dumps(doc.to_source())) == doc.to_source()

    def test_parse_file_routes_the_samples_here(self, fmt, sample_files, parsed):
        for path, data in sample_files.items():
            assert parse_file({fmt.name: fmt}, path, data, self.mtime_ms) == parsed[path]

    # -- bad input -------------------------------------------------------

    def test_bad_files_raise_format_error_with_a_reason(self, fmt, bad_files):
        if not bad_files:
            pytest.skip("no `bad_files` fixture")
        for path, data in bad_files.items():
            with pytest.raises(FormatError) as caught:
                fmt.parse(path, data, self.mtime_ms)
            assert caught.value.reason.strip()

    def test_garbage_raises_nothing_but_format_error(self, fmt, sample_files):
        for path in sample_files:
            for data in self.garbage:
                try:
                    docs = fmt.parse(path, data, self.mtime_ms)
                except FormatError as exc:
                    assert exc.reason.strip()
                else:
                    assert docs and docs[0].doc_id == path
