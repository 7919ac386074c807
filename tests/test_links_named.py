"""Wikilink names resolve once per corpus (``links.note_candidates`` remembers a name's candidates on the corpus): the
same documents wherever a name is written, relative names by their linking file, and a bounded memory."""

from __future__ import annotations

from xerj_core.autoindex import links
from xerj_core.autoindex.detect import Corpus
from xerj_core.testing.detectors import parse_files


def _corpus() -> Corpus:
    return Corpus(parse_files({
        "a/x.md": b"# X of a", "b/x.md": b"# X of b", "b/deep/y.md": b"# Y", "top.md": b"# Top",
        "a/note.md": b"n", "b/note.md": b"n", "b/deep/note.md": b"n",
    }))


def _fresh(corpus: Corpus, from_path: str, name: str) -> str | None:
    """What a corpus that remembers nothing answers."""
    corpus.named_candidates.clear()
    return links.resolve_note(corpus, from_path, name)


def test_a_remembered_name_resolves_as_a_fresh_one_from_every_file():
    corpus = _corpus()
    names = ["x", "X.md", "deep/y", "top", "./x", "../x", "../a/x", ".\\x", " ./x", "nope", "", "b/x", "/top"]
    sources = ["a/note.md", "b/note.md", "b/deep/note.md"]
    expected = {(source, name): _fresh(corpus, source, name) for source in sources for name in names}
    corpus.named_candidates.clear()
    for _ in range(2):  # the second pass answers from what the first remembered
        for source in sources:
            for name in names:
                assert links.resolve_note(corpus, source, name) == expected[source, name], (source, name)
    # a relative name depends on the linking file: never remembered
    assert expected["a/note.md", "./x"] == "a/x.md" and expected["b/note.md", "./x"] == "b/x.md"
    assert expected["b/note.md", ".\\x"] == "b/x.md" and expected["a/note.md", " ./x"] == "a/x.md"
    assert not {"./x", "../x", "../a/x", ".\\x", " ./x"} & corpus.named_candidates.keys()
    assert {"x", "deep/y", "nope"} <= corpus.named_candidates.keys()


def test_a_corpus_remembers_a_bounded_number_of_names(monkeypatch):
    monkeypatch.setattr(links, "REMEMBERED_NAMES", 3)
    corpus = _corpus()
    for i in range(10):
        links.note_candidates(corpus, "a/note.md", f"name{i}")
    assert len(corpus.named_candidates) == 3
    assert links.resolve_note(corpus, "a/note.md", "x") == "a/x.md"
