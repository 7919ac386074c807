"""The hashtag detector passes xerj's detector conformance suite, and chains notes per tag."""

from __future__ import annotations

import pytest

import xerj_detect_hashtag
from xerj_core.autoindex.detect import collect_detectors, run_detectors
from xerj_core.plugins import get_plugin_manager
from xerj_core.testing import AbstractDetectorTests, parse_files
from xerj_detect_hashtag import HashtagDetector

NOTES = {
    "a.md": b"# A\n\nBaking day #sourdough #Bread.\n\n`#notatag` and a [link](#anchor), colour #fff.\n",
    "b/b.md": b"# B\n\n## Starter\n\nFeeding notes #sourdough\n",
    "c.txt": b"plain text about #bread and #sourdough",
    "d.md": b"# D\n\nNothing tagged here, https://x.org/page#frag\n",
}


class TestHashtagConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return HashtagDetector()

    @pytest.fixture
    def plugin(self):
        return xerj_detect_hashtag

    @pytest.fixture
    def corpus_files(self):
        return parse_files(NOTES)


def test_notes_sharing_a_tag_are_chained_in_path_order():
    edges = run_detectors([HashtagDetector()], parse_files(NOTES)).edges
    got = [(e.src, e.dst, e.evidence.quote) for e in edges]
    assert got == [
        ("a.md#a", "b/b.md", "Baking day #sourdough #Bread."),  # sourdough: a.md → b/b.md → c.txt
        ("a.md#a", "c.txt", "Baking day #sourdough #Bread."),  # bread: a.md → c.txt
        ("b/b.md#starter", "c.txt", "Feeding notes #sourdough"),
    ]
    assert all(e.type == "hashtag" and e.detector == "hashtag@1" for e in edges)


def test_installed_plugin_is_discovered():
    assert "hashtag" in collect_detectors(get_plugin_manager())
