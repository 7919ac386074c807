"""Conformance suites a plugin author subclasses: one ``Abstract*Tests`` mixin per plugin kind.

``from xerj_core.testing import AbstractDetectorTests, parse_files`` (or
``AbstractFormatTests``, ``AbstractEmbedderTests``, ``AbstractStorageBackendTests``); each module's docstring
says which fixtures to override.
"""

from xerj_core.testing.detectors import DEFAULT_MTIME_MS, AbstractDetectorTests, parse_files
from xerj_core.testing.embedders import AbstractEmbedderTests
from xerj_core.testing.formats import AbstractFormatTests
from xerj_core.testing.storage import AbstractStorageBackendTests

__all__ = ["DEFAULT_MTIME_MS", "AbstractDetectorTests", "AbstractEmbedderTests", "AbstractFormatTests",
           "AbstractStorageBackendTests", "parse_files"]
