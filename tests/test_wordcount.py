"""The compiled word count (``xerj_core._wordcount``, behind ``text.counted_terms``) against Python's cut and count.

``counted_terms`` hands the store each text's distinct words, their counts and how many were too long to be keys;
the compiled loop must hand over exactly what the Python path does (the same words in the same order, the same
counts, the same words remembered for ``counted_joined``) on separators of every kind, long words, the slice
boundary, the texts it must leave to Python, and the texts of real files.
"""

from __future__ import annotations

import sysconfig
from array import array
from pathlib import Path

import pytest

from xerj_core import text
from xerj_core.store.limits import MAX_TERM_BYTES
from xerj_core.text import SLICE_CHARS, counted_joined, counted_terms, remembering_counts

pytestmark = pytest.mark.skipif(text._count_words is None, reason="the compiled word count was not built")


def both(value: str, longest: int = MAX_TERM_BYTES):
    """``counted_terms`` of ``value`` and the words it remembered, by the compiled loop, then by Python."""
    found = []
    for compiled in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(text, "WORDCOUNT", compiled)
            with remembering_counts():
                counted = counted_terms(value, longest)
                found.append((counted, counted_joined(value)))
    return found


CASES = {
    "empty": "",
    "separators only": " \t\n\r\x0b\x0c .,;:!?()[]{}<>+-*/=\"'`~@#$%^&|\\",
    "one word": "word",
    "repeats, in order of first appearance": "b a b c a b",
    "case and digits": "Foo foo FOO f00 _private __dunder__ x_1 1_x 42",
    "every separator": "a\tb\nc\rd\x0be\x0cf g.h,i;j",
    "separators at both ends": "  \n\tedge words\t\n ",
    "punctuation inside words": "self.items[0].get('key') -> dict[str, int]",
    "long words dropped and counted": "short " + "x" * 300 + " short " + "y" * 256 + " " + "x" * 300 + " z" * 3,
}


@pytest.mark.parametrize("case", CASES)
def test_the_compiled_count_is_pythons(case):
    compiled, python = both(CASES[case])
    assert compiled == python


@pytest.mark.parametrize("longest", [0, 1, 3, 255])
def test_words_longer_than_the_limit_are_left_out_and_counted(longest):
    value = "a bb ccc dddd a bb ccc eeeee " * 3
    compiled, python = both(value, longest)
    assert compiled == python
    kept, dropped, _joined, _tallies = compiled[0]
    assert kept + dropped == 24 and dropped == 3 * sum(len(word) > longest for word in value.split()[:8])


def test_texts_the_loop_leaves_to_python_count_alike():
    """Non-ASCII, a NUL, and a text past one slice go the Python way; the answers do not depend on it."""
    for value in ("naïve café words", "a\x00b a", "word " * (SLICE_CHARS // 5 + 10), "x " * (SLICE_CHARS // 2)):
        compiled, python = both(value)
        assert compiled == python


def test_the_texts_of_real_files_count_alike():
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))[:300]
    assert len(files) == 300
    for path in files:
        value = path.read_bytes().decode("utf-8", "replace")
        compiled, python = both(value)
        assert compiled == python, path


def test_the_loop_takes_bytes_only():
    with pytest.raises(TypeError):
        text._count_words("a b", 10)
    with pytest.raises(TypeError):
        text._count_words(bytearray(b"a b"), 10)


def test_the_loop_cuts_as_bytes_split_does():
    """Called on raw bytes the loop cuts words where ``bytes.split()`` does (every ASCII whitespace byte; a NUL and
    any other byte belong to words), whatever the translation before it leaves."""
    raw = b"a\tb\nc\rd\x0be\x0cf g\x00h \x80i  a\x1fb a"
    kept, dropped, joined, tallies = text._count_words(raw, 255)
    words = raw.split()
    distinct = list(dict.fromkeys(words))
    assert kept == len(words) and dropped == 0
    assert joined == b"\x00".join(distinct)
    assert tallies == array("I", [words.count(word) for word in distinct]).tobytes()
