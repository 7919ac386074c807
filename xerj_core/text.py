"""The one tokenizer every part of xerj shares, plus the slug helpers built on the same rules.

``tokenize`` is what the search engine indexes and what the ``sharedterm``
detector counts, so a word means the same thing everywhere: a run of Unicode
word characters, lowercased and composed (:func:`fold`), except in the scripts
written without spaces between words (Han, Hiragana, Katakana; Thai, Lao,
Khmer, Myanmar and the Tai scripts) and in Hangul, whose runs are cut into their
overlapping pairs of letters (see :data:`CJK_LETTERS` and :data:`SEA_LETTERS`).
It is deliberately tiny; callers on hot paths may bind it once
(``from xerj_core.text import tokenize``).
"""

from __future__ import annotations

import contextlib
import os
import re
import unicodedata
from array import array
from collections import _count_elements  # type: ignore[attr-defined]  # Counter's own C counting loop
from itertools import compress
from operator import add, not_
from typing import Callable, Iterator

from xerj_core.wordmarks import MARKS

# A word: a letter or digit, then letters, digits and the combining marks ``\w`` leaves out (a vowel sign, a
# virama, a decomposed accent), without which a Hindi word fell apart at each of them (see xerj_core.wordmarks).
# A mark follows what it marks: one after a space or a symbol is no word of its own.
WORD_CHAR = rf"[\w{MARKS}]"
_WORD = WORD = re.compile(rf"\w{WORD_CHAR}*")
_NOT_SLUG = re.compile(rf"[^\w{MARKS}\- ]+")
# Bumped whenever what tokenize or slugify make of some text changes (2: combining marks kept in words; 3: words
# and anchors composed, no word begun by a mark, variation selectors no marks; 4: runs of CJK letters cut into
# pairs; 5: runs of Thai, Lao, Khmer, Myanmar and Tai letters cut into pairs of letters with their marks): an
# autoindexed brain's documents are then all read and written again (see formats).
WORDS_VERSION = 5

# The letters of Han, Hiragana, Katakana (full and half width) and Hangul that are word characters (with the
# ideographic iteration marks and the kana's combining sound marks), and every code point of the supplementary
# ideographic planes. A sentence in these scripts is one run of word characters from punctuation to punctuation
# (Korean puts spaces between phrases, each a word and its particles), so a run taken whole as one word let a
# search for a word inside it find nothing (on Obsidian's help vault, 应用商店 found 1 of the 2 Chinese pages
# holding it). Each run is cut into its overlapping pairs of letters instead, a run of one letter kept as it is,
# as Lucene's CJK analyzer does: a query's pairs then meet a text's wherever the query's letters stand in it.
CJK_LETTERS = (
    r"\u1100-\u11FF\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303C\u3041-\u3096\u3099-\u309A\u309D-\u309F"
    r"\u30A1-\u30FA\u30FC-\u30FF\u3131-\u318E\u31F0-\u31FF\u3400-\u4DBF\u4E00-\u9FFF\uA960-\uA97C\uAC00-\uD7A3"
    r"\uD7B0-\uD7C6\uD7CB-\uD7FB\uF900-\uFA6D\uFA70-\uFAD9\uFF66-\uFF9F\U00020000-\U0003FFFF"
)
# The letters of the scripts of Southeast Asia written without spaces between words, Unicode's line-breaking
# class SA in the Basic Multilingual Plane: Thai, Lao, Myanmar (and its extensions), Khmer, Tai Le, New Tai Lue,
# Tai Tham and Tai Viet (:data:`SEA_BLOCKS`; their digits and symbols are left out). A Thai sentence was one word
# as a CJK one was: on Obsidian's help vault ไฟล์ ("file") was found in 21 sections, those where it stood alone,
# of the pages of 124 files holding it. A vowel sign or tone mark is a combining mark on the letter before it (จั in
# จัด), so a letter and the marks after it are one unit, and a run is cut into its overlapping pairs of units.
SEA_LETTERS = (
    r"\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0"
    r"\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061"
    r"\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\u1950-\u196d\u1970-\u1974"
    r"\u1980-\u19ab\u19b0-\u19c9\u1a20-\u1a54\u1aa7\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a"
    r"\uaa7e-\uaaaf\uaab1\uaab5-\uaab6\uaab9-\uaabd\uaac0\uaac2\uaadb-\uaadd"
)
# The Unicode blocks SEA_LETTERS are the letters of (``tests/test_text.py`` checks the class against them).
SEA_BLOCKS = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x1950, 0x19DF), (0x1A20, 0x1AAF),
              (0xA9E0, 0xA9FF), (0xAA60, 0xAADF))
_PAIRED = re.compile(f"[{CJK_LETTERS}{SEA_LETTERS}]")
# A run of CJK letters (group 1), a run of Southeast Asian letters and their marks (group 2), or a word of the
# other letters (group 3) as _WORD finds them, cut where a run begins.
_PAIRED_OR_WORD = re.compile(
    rf"([{CJK_LETTERS}]+)|([{SEA_LETTERS}](?:[{SEA_LETTERS}]|[{MARKS}])*)"
    rf"|([^\W{CJK_LETTERS}{SEA_LETTERS}](?:[^\W{CJK_LETTERS}{SEA_LETTERS}]|[{MARKS}])*)")
# One unit of a Southeast Asian run: a letter and the marks on it.
_SEA_UNIT = re.compile(rf"[{SEA_LETTERS}][{MARKS}]*")
_NOT_BRAIN = re.compile(r"[^a-z0-9_.\-]+")

BRAIN_NAME_MAX = 200
BRAIN_FALLBACK = "brain"
_BRAIN_NAME = re.compile(r"[a-z0-9][a-z0-9_.\-]*")


def fold(text: str) -> str:
    """``text`` as words are compared: lowercased, then composed (Unicode NFC), so an accent typed as a letter
    and a combining mark (as macOS writes file names, and some PDFs their text) and its precomposed twin are one
    word. ASCII text is its lowercase (composition leaves it as it is); composed text costs one C check."""
    lowered = text.lower()
    return lowered if lowered.isascii() else unicodedata.normalize("NFC", lowered)


def tokenize(text: str) -> list[str]:
    """Lowercase, composed Unicode words of ``text`` (:func:`fold`), in order, repeats kept; a run of CJK letters
    as its overlapping pairs (see :data:`CJK_LETTERS`), a run of Thai, Lao, Khmer, Myanmar or Tai letters as its
    overlapping pairs of letters with their marks (:data:`SEA_LETTERS`)."""
    return _words(fold(text))


def _words(folded: str) -> list[str]:
    """:func:`tokenize` of text already folded."""
    if not paired_letters(folded):
        return _WORD.findall(folded)
    words: list[str] = []
    for cjk, sea, word in _PAIRED_OR_WORD.findall(folded):
        if word:
            words.append(word)
            continue
        units = cjk or _SEA_UNIT.findall(sea)
        if len(units) == 1:
            words.append(cjk or sea)
        else:
            words += map(add, units[:-1], units[1:])  # each letter (with its marks) with the next
    return words


def paired_letters(text: str) -> bool:
    """Whether ``text`` holds a letter of a script whose runs are cut into pairs (:data:`CJK_LETTERS`,
    :data:`SEA_LETTERS`)."""
    return not text.isascii() and _PAIRED.search(text) is not None


def word_spans(text: str) -> list[tuple[tuple[int, int], str]]:
    """Each word :func:`tokenize` finds in ``text`` as its span in ``text`` and the word: a highlighter's marks.
    Pairs overlap (``(0, 2)`` and ``(1, 3)`` in a run of three CJK letters)."""
    if not paired_letters(text):
        return [(m.span(), fold(m.group())) for m in _WORD.finditer(text)]
    found = []
    for m in _PAIRED_OR_WORD.finditer(text):
        start, end = m.span()
        if m.group(3) is not None:
            found.append(((start, end), fold(m.group())))
            continue
        if m.group(1) is not None:
            bounds = [(at, at + 1) for at in range(start, end)]
        else:
            bounds = [unit.span() for unit in _SEA_UNIT.finditer(text, start, end)]
        if len(bounds) == 1:
            found.append(((start, end), fold(m.group())))
        else:
            found += [((a, b), fold(text[a:b])) for (a, _), (_, b) in zip(bounds, bounds[1:])]
    return found


def run_words(text: str) -> list[str]:
    """The words of ``text`` as :data:`WORDS_VERSION` 3 made them: every maximal run of word characters, lowercased
    and composed, CJK and Southeast Asian runs whole. The built-in embedders' features are made of these, so that
    a vector stored before such runs were cut into pairs still meets the vectors of queries made after."""
    return _WORD.findall(fold(text))


# A text longer than this many characters has its words listed a slice at a time: a list of words costs about
# 60 bytes a word, so a 60 MB log file tokenized whole held 570 MB of words at once.
SLICE_CHARS = 1 << 20
_SPACE = re.compile(r"\s")


def slices(text: str, size: int | None = None) -> Iterator[str]:
    """``text`` in consecutive pieces of ``size`` (default :data:`SLICE_CHARS`) characters or a few more, each
    but the last ending just after a whitespace character, so the words of the pieces, tokenized one by one, are
    ``tokenize(text)``'s: no word holds whitespace, and no case mapping context (the final sigma's) reaches
    across it. A stretch without whitespace stays whole inside its piece."""
    size = SLICE_CHARS if size is None else size
    start, end = 0, len(text)
    while end - start > size:
        space = _SPACE.search(text, start + size)
        if space is None:
            break
        yield text[start:space.end()]
        start = space.end()
    yield text[start:] if start else text


# ASCII bytes as ``tokenize`` sees them: a word character (in ASCII, ``\w`` is ``[0-9A-Za-z_]``) as itself
# lowercased, a NUL as itself (callers separate texts with it), anything else as a space.
_ASCII_WORDS = bytes(c if chr(c).isdigit() or chr(c).islower() or c in (0, 95) else
                     c + 32 if chr(c).isupper() else 32 for c in range(128)) + b" " * 128


def ascii_words(text: str) -> list[bytes]:
    """``tokenize`` of ASCII ``text`` as UTF-8 bytes, a NUL kept as a word of its own when spaced from its
    neighbours: one translation of the bytes (lowercase, every non-word byte a space) and one ``split``, about
    six times the regex's pace. ``text`` must be ASCII (``str.isascii``)."""
    return text.encode().translate(_ASCII_WORDS).split()


# UTF-8 bytes of lowercased text as the translation in ``utf8_words`` sees them: ASCII as in ``_ASCII_WORDS``,
# every byte of a non-ASCII character kept (it may be a word character; the regex decides).
_UTF8_WORDS = _ASCII_WORDS[:128] + bytes(range(128, 256))


# utf8_words cuts a text whole when its UTF-8 is longer than its characters by more than a fourth of them (a
# letter beyond ASCII is two to four bytes; German's umlauts add about 2%, Russian about 80%).
_MOSTLY_BEYOND_ASCII = 4


def utf8_words(text: str) -> list[bytes]:
    """``tokenize`` of any ``text`` as UTF-8 bytes (a NUL kept as in :func:`ascii_words`), mostly at the
    translation's pace. An ASCII non-word character separates words in Unicode too, so the lowercased
    text's UTF-8 bytes are cut at those by one translation and one ``split``: a piece of ASCII bytes only
    is a whole word as the regex finds it, and only the few pieces holding a non-ASCII character go
    through the regex (which cuts them the same way inside the whole text, since they are bounded by
    separators). Lowercasing the whole text first keeps ``str.lower``'s context rules (a final sigma).
    Text that cannot be UTF-8 (a lone surrogate) takes the regex throughout, and so does text written mostly in
    letters beyond ASCII (Cyrillic, Greek, CJK), where nearly every piece would go through it one at a time: 50
    Russian pages of Obsidian's help took 25 ms by pieces and 11 ms whole (50 German pages 8 ms by pieces, 10 ms
    whole)."""
    if text.isascii():
        return ascii_words(text)
    lowered = fold(text)
    try:
        encoded = lowered.encode()
    except UnicodeEncodeError:
        return list(map(str.encode, _words(lowered)))
    if len(encoded) - len(lowered) > len(lowered) // _MOSTLY_BEYOND_ASCII and "\x00" not in lowered:
        return list(map(str.encode, _words(lowered)))
    pieces = encoded.translate(_UTF8_WORDS).split()
    mixed = list(compress(range(len(pieces)), map(not_, map(bytes.isascii, pieces))))
    if not mixed:
        return pieces
    find = _words if paired_letters(lowered) else _WORD.findall  # asked once, not per piece
    words: list[bytes] = []
    done = 0
    for at in mixed:
        words += pieces[done:at]
        words += map(str.encode, find(pieces[at].decode()))
        done = at + 1
    words += pieces[done:]
    return words


def long_words(text: str, shortest: int) -> list[str]:
    """The words of ``tokenize(text)`` at least ``shortest`` characters long, in order, by one scan that makes no
    string of the shorter ones (the regex meets each run of word characters at its start, so a short run never
    yields its tail)."""
    folded = fold(text)
    if paired_letters(folded):
        return [word for word in _words(folded) if len(word) >= shortest]
    pattern = _LONG_WORDS.get(shortest)
    if pattern is None:
        pattern = _LONG_WORDS[shortest] = re.compile(rf"\w{WORD_CHAR}{{{max(shortest, 1) - 1},}}")
    return pattern.findall(folded)


_LONG_WORDS: dict[int, re.Pattern[str]] = {}


def distinct_long_words(text: str, shortest: int) -> set[str]:
    """The distinct words of :func:`long_words`, a slice of a long text at a time (:func:`slices`)."""
    words: set[str] = set()
    for piece in slices(text):
        words.update(long_words(piece, shortest))
    return words


def tokenize_many(texts: list[str]) -> list[list[str]]:
    """``tokenize`` of each text, lowercased as one string: for a batch of short texts (bulk writes) the
    per-call costs are most of the work. A NUL stops case mapping context like a text's end does. An ASCII
    batch is cut by one byte translation instead of the regex (:func:`ascii_words`)."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:  # a text holds a NUL itself
        return list(map(tokenize, texts))
    if joined.isascii():
        return list(map(str.split, joined.encode().translate(_ASCII_WORDS).decode().split("\x00")))
    folded = fold(joined)
    return list(map(_words if paired_letters(folded) else _WORD.findall, folded.split("\x00")))


def term_counts_many(token_lists: list[list[str]]) -> list[dict[str, int]]:
    """``term_counts`` of each token list, counted by C-level passes over the batch."""
    counts: list[dict[str, int]] = [{} for _ in token_lists]
    for _ in map(_count_elements, counts, token_lists):
        pass
    return counts


def term_counts(tokens: list[str]) -> dict[str, int]:
    """How often each token occurs, in first-seen order: ``Counter(tokens)`` as a plain dict, without
    Counter's per-call Python overhead (this runs once per text value written)."""
    counts: dict[str, int] = {}
    _count_elements(counts, tokens)
    return counts


# One text's indexable words as :func:`counted_terms` hands them over: how many were kept, how many were too long
# to be keys, the distinct kept terms (UTF-8) joined by NULs in order of first appearance, and their counts as
# native uint32 bytes. Plain bytes and ints: a batch of them pickles and unpickles at memory speed.
CountedTerms = tuple[int, int, bytes, bytes]


# The compiled word count (``_wordcount.c``), an optional extension like the other loops (see ``setup.py``): an
# install without a C compiler cuts and counts in Python, with the same answers. ``XERJ_WORDCOUNT_KERNEL=0``
# switches it off (to compare, or to rule it out); ``XERJ_REQUIRE_WORDCOUNT_KERNEL=1`` makes its absence an error
# at import (``scripts/test`` sets it).
_count_words: Callable[[bytes, int], tuple[int, int, bytes, bytes]] | None
try:
    from xerj_core._wordcount import count as _count_words
except ImportError:  # built without a C compiler: counted in Python
    if os.environ.get("XERJ_REQUIRE_WORDCOUNT_KERNEL") == "1":
        raise
    _count_words = None
# Whether counted_terms counts with the compiled loop; a test or a benchmark may flip it to compare.
WORDCOUNT = _count_words is not None and os.environ.get("XERJ_WORDCOUNT_KERNEL", "1") != "0"


# While a caller is remembering (:func:`remembering_counts`): each text :func:`counted_terms` counted, with its
# distinct terms NUL-joined, as the store is handed them.
_REMEMBERED: dict[str, bytes] | None = None


@contextlib.contextmanager
def remembering_counts() -> Iterator[None]:
    """While this lasts, :func:`counted_terms` remembers each text's distinct terms for :func:`counted_joined`:
    a parse that counts a file's texts for the store lets a detector's summary of the file (``sharedterm``)
    reuse those words instead of cutting the texts again. What is remembered goes when this ends."""
    global _REMEMBERED
    outer, _REMEMBERED = _REMEMBERED, {}
    try:
        yield
    finally:
        _REMEMBERED = outer


def counted_joined(text: str) -> bytes | None:
    """The distinct words (UTF-8, those of at most the ``longest`` bytes it was given) :func:`counted_terms` found
    in ``text`` while remembering, NUL-joined in order of first appearance as it made them for the store: one
    bytes object, no object per word. None when it did not count that text."""
    return None if _REMEMBERED is None else _REMEMBERED.get(text)


def counted_terms(text: str, longest: int) -> CountedTerms:
    """The terms of ``tokenize(text)`` counted, words of more than ``longest`` UTF-8 bytes left out (and counted):
    what the store makes of a text value, for a caller that counts a text in another process than the store's
    writer (``IndexWrite.put_many_counted``). The words are cut as :func:`utf8_words` cuts them (the store's
    batch tokenizer); a text holding a NUL (which that translation would keep inside a word) takes the regex.
    An ASCII text of one slice is cut and counted by the compiled loop when there is one (:data:`WORDCOUNT`)."""
    if WORDCOUNT and len(text) <= SLICE_CHARS and text.isascii() and "\x00" not in text:
        kept, dropped, joined, tallies = _count_words(text.encode().translate(_ASCII_WORDS), longest)
        if _REMEMBERED is not None:
            _REMEMBERED[text] = joined
        return kept, dropped, joined, tallies
    cut = utf8_words if "\x00" not in text else _regex_utf8_words
    counts: dict[bytes, int] = {}
    found = 0
    for piece in slices(text):  # a long text a slice at a time, as the store's plan.text_counts does
        words = cut(piece)
        found += len(words)
        _count_elements(counts, words)
    dropped = 0
    if counts and max(map(len, counts)) > longest:
        for word in [word for word in counts if len(word) > longest]:
            dropped += counts.pop(word)
    joined = b"\x00".join(counts)
    if _REMEMBERED is not None:
        _REMEMBERED[text] = joined
    return found - dropped, dropped, joined, array("I", counts.values()).tobytes()


def ascii_joined_words(text: str, longest: int) -> bytes | None:
    """The distinct words of ``tokenize(text)`` of at most ``longest`` UTF-8 bytes, NUL-joined in order of first
    appearance, as :func:`counted_terms` joins them (without their counts, and not remembered), when the
    compiled loop can cut ``text`` (ASCII without a NUL, one slice long); else None. A detector that wants a
    text's vocabulary (``sharedterm``) gets it in C at about seven times the pace of a regex pass that makes a
    string of every word."""
    if WORDCOUNT and len(text) <= SLICE_CHARS and text.isascii() and "\x00" not in text:
        return _count_words(text.encode().translate(_ASCII_WORDS), longest)[2]
    return None


def _regex_utf8_words(text: str) -> list[bytes]:
    return list(map(str.encode, tokenize(text)))


def counted_terms_split(counted: CountedTerms) -> tuple[list[bytes], array]:
    """The distinct terms and their counts held in one :data:`CountedTerms`."""
    _kept, _dropped, joined, counts = counted
    return (joined.split(b"\x00") if joined else []), array("I", counts)


def slugify(text: str) -> str:
    """A heading anchor as note and forge tools write it: lowercase, punctuation dropped, spaces to ``-``.

    Unicode letters and their marks survive, composed (``Über uns`` → ``über-uns``, ``हिन्दी`` as it is); the result
    may be empty.
    """
    return _NOT_SLUG.sub("", fold(text.strip())).replace(" ", "-")


def label_key(label: str) -> str:
    """A reStructuredText label as Sphinx compares them (``.. _Set  Up:`` and ``:ref:`set up```): lowercased,
    runs of whitespace made one space, enclosing backquotes dropped."""
    return " ".join(label.strip().strip("`").lower().split())


def is_valid_brain_name(name: str) -> bool:
    """True when ``name`` passes the brain-name rules (length, charset, no ``..``, no ``-edges`` suffix)."""
    return (
        0 < len(name) <= BRAIN_NAME_MAX
        and _BRAIN_NAME.fullmatch(name) is not None
        and ".." not in name
        and not name.endswith("-edges")
    )


def derive_brain_name(folder: str | os.PathLike[str]) -> str:
    """The brain name a folder gets when none is given: its basename as a valid slug, else ``brain``.

    Accents are folded (``Café`` → ``cafe``), then lowercased; characters outside ``a-z 0-9 _ - .`` become ``-`` (runs collapse);
    leading characters that may not start a name are dropped; ``..`` runs shrink
    to one dot; a trailing ``-edges`` (reserved for edge indices) is removed; the
    result is cut to 200 characters.
    """
    base = os.path.basename(os.path.normpath(os.fspath(folder)))
    folded = "".join(c for c in unicodedata.normalize("NFKD", base) if not unicodedata.combining(c))
    name = _NOT_BRAIN.sub("-", folded.lower())
    name = re.sub(r"\.{2,}", ".", name)
    name = re.sub(r"-{2,}", "-", name)
    name = re.sub(r"^[^a-z0-9]+", "", name)
    while True:
        name = name[:BRAIN_NAME_MAX].rstrip("-.")
        if name.endswith("-edges"):
            name = name[: -len("-edges")]
            continue
        break
    return name if is_valid_brain_name(name) else BRAIN_FALLBACK
