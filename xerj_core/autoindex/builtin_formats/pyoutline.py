"""A Python module's outline (its top-level definitions and the modules it imports) read without a syntax tree.

The code format needs two things of a module: where each top-level ``def`` /
``class`` starts (its first decorator) and ends (the last line of its body), and
the modules its ``import`` statements name. ``ast.parse`` answers both, but it
builds an object for every node of the file and costs about eight times reading
and tokenizing the text; this scan costs a fraction of that.

It finds the only things that can hide a bracket, a newline or a keyword (string
literals and comments), then bracket depth, which lines continue a statement
(inside brackets or a string, or after a backslash) and which lines start a
top-level statement (column 0). That byte-level pass is one walk of a small C
loop (``_pyscan.c``) where it was built; else one regular expression and numpy's
passes over the bytes, which give the same answers (a test compares them on every
installed module) and cost the outline about three times as much. Each
definition's last significant line is found walking back from the next
top-level statement. Import statements are the ``import`` keywords outside
strings and comments.

:func:`outline` answers ``None`` whenever the file is outside what the scan can
vouch for (a string that never closes, unbalanced brackets, a decorator not
followed by a definition, a NUL, a form feed, non-UTF-8 text, Python 2 forms such
as ``print "x"``, ...); the caller then parses the file with ``ast`` as before.
Where it answers, the answer is what the ``ast`` walk gives
(``tests/test_pyoutline.py`` checks every ``.py`` file of the installed packages).
A file with a grammar error the scan does not look for (the scan does not parse
expressions) gets an outline where ``ast`` would have refused the file.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import unicodedata
from typing import Any, NamedTuple

import numpy as np

_scan: Any
try:
    from xerj_core.autoindex.builtin_formats._pyscan import scan as _scan
except ImportError:  # built without a C compiler: the regular expression and numpy's passes answer
    if os.environ.get("XERJ_REQUIRE_PYSCAN_KERNEL") == "1":
        raise
    _scan = None


class Definition(NamedTuple):
    """A top-level definition: lines ``start`` (0-based, its first decorator) to ``end`` (exclusive), e.g.
    ``def``/``async def``/``class`` and its name."""

    start: int
    end: int
    keyword: str
    name: str


class Outline(NamedTuple):
    definitions: tuple[Definition, ...]
    imports: tuple[str, ...]


# String literals (triple-quoted ones may span lines; a backslash-newline continues a single-quoted one) and
# comments. A lone opener is a string that never closes. Prefixes (r, b, f, u) need no matching: in this
# interpreter's tokenizer they change neither where a literal ends nor what it may hold.
_TOKEN = re.compile(
    b"("
    + rb'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    + rb"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    + rb'|"""|' + rb"'''"  # a triple quote that never closes (tried before ``""`` reads as an empty string)
    + rb'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    + rb"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    + rb"|#[^\n]*"
    + rb'|"|' + rb"'"
    + b")",
    re.S,
)
_UNCLOSED = frozenset({b'"', b"'", b'"""', b"'''"})

# Python 2 statements that tokenize like Python 3 but do not parse (print/exec statements, ``except E, e``,
# ``raise E, "msg"``): a file showing one (even inside a string) is left to ``ast``; so is one with a backtick
# or ``<>`` outside strings and comments.
_PYTHON2_STATEMENT = (rb"[ \t]*+(?:(?:print|exec)[ \t]++(?!(?:if|else|and|or|in|is|not)(?![\w\x80-\xff]))"
                      rb"[\w\"'{~\x80-\xff]|(?:except|raise)[ \t]++[\w.]++[ \t]*+,)")
# (matched possessively: one that never backtracks fails fast on the many ``raise``/``except`` lines)
_PYTHON2_LINE = re.compile(_PYTHON2_STATEMENT)
# the statement's keywords, each followed by a space or a tab
_PYTHON2_KEYWORDS = (b"print", b"exec", b"except", b"raise")

_WS = rb"(?:[ \t]|\\\n)"
_IDENT = rb"[A-Za-z_\x80-\xff][\w\x80-\xff]*"
_DOTTED = _IDENT + rb"(?:" + _WS + rb"*\." + _WS + rb"*" + _IDENT + rb")*"
_DEFINITION = re.compile(rb"(?:(async)[ \t]+)?(def|class)(?![\w\x80-\xff])[ \t]+(" + _IDENT + rb")")
_DEFINITION_KEYWORD = re.compile(rb"(?:async[ \t]|def|class)(?![\w\x80-\xff])")
_DECORATOR = re.compile(rb"@[ \t]*[^ \t\\\n#]")
# (the byte before is checked apart: a pattern opening with a lookbehind is not searched for by its literal)
_IMPORT_KEYWORD = re.compile(rb"import(?![\w\x80-\xff])")
_WORD_BYTE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(0x80, 0x100))
_WORD_BYTES = frozenset(bytes([byte]) for byte in _WORD_BYTE)
# what may precede ``import`` in an ``import x`` statement on its logical line: nothing, or an earlier
# statement ending in ``;``, or a compound header ending in ``:``
_STATEMENT_START = re.compile(rb"(?:.*[;:])?" + _WS + rb"*", re.S)
_FROM_TAIL = re.compile(rb"from(?![\w\x80-\xff])" + _WS + rb"*(\.*)" + _WS + rb"*("
                        + _DOTTED + rb")?" + _WS + rb"*")
_IMPORTED = re.compile(_WS + rb"*(" + _DOTTED + rb")(?:" + _WS + rb"+as" + _WS + rb"+" + _IDENT + rb")?" + _WS + rb"*")
_SPACING = re.compile(rb"[ \t\\\n]+")

# byte classes, as a table for ``bytes.translate`` (a byte each, read by numpy as int8: a pass over the file at
# memory speed, where indexing a numpy table by the bytes took about ten times as long): +1 for an opening
# bracket, -1 (255) for a closing one
_BRACKET = bytes(1 if c in b"([{" else 255 if c in b")]}" else 0 for c in range(256))
_LINE_OPENER_BLANK = np.zeros(256, bool)  # a line starting with one of these opens no top-level statement
_LINE_OPENER_BLANK[[ord(" "), ord("\t"), ord("\n"), ord("#")]] = True
_STRING, _COMMENT = 1, 2
# What each byte of a module is (0 code, _STRING, _COMMENT): the walk's bytes, or the numpy pass's array
Kinds = bytes | np.ndarray
_NESTED_FSTRINGS = sys.version_info >= (3, 12)
# Whether the byte-level pass is the compiled walk (``_pyscan.c``); both give the same answers (a test checks it
# on every installed module). ``XERJ_PYSCAN_KERNEL=0`` switches the walk off, to compare. The walk does not check
# Python 3.12's nested f-string quotes (:func:`_fstrings_closed`), so from 3.12 on the numpy pass runs.
ENABLED = _scan is not None and not _NESTED_FSTRINGS and os.environ.get("XERJ_PYSCAN_KERNEL", "1") != "0"


def _name(raw: bytes) -> str:
    """An identifier as ``ast`` reports it: spacing dropped, NFKC-normalized when it is not ASCII."""
    name = _SPACING.sub(b"", raw).decode("utf-8")
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def outline(text: str) -> Outline | None:
    """The outline of the module ``text`` (LF line ends, as the formats decode it), or ``None`` when the scan
    cannot vouch for it (then parse it with :func:`outline_from_tree`)."""
    if "\0" in text or "\f" in text or "\r" in text:
        return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if ENABLED:
        scanned = _scan(data)  # (which also looks for Python 2 statements, as _python2 does)
        if scanned is None:
            return None
        kind, newlines, top = scanned[0], np.frombuffer(scanned[1], np.int64), np.frombuffer(scanned[2], np.int64)
    else:
        found = None if _python2(data) else _numpy_scan(text, data)
        if found is None:
            return None
        kind, newlines, top = found
    definitions = _definitions(data, kind, newlines, top)
    if definitions is None:
        return None
    imports = _imports(data, kind)
    if imports is None:
        return None
    return Outline(definitions, imports)


def _numpy_scan(text: str, data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """What ``_pyscan.scan`` returns for a module :func:`_python2` passes, found with a regular expression and
    numpy's passes (the kind of each byte as an array rather than bytes), or None when the outline cannot vouch
    for the module."""
    parts = _TOKEN.split(data)
    tokens = parts[1::2]
    if not _UNCLOSED.isdisjoint(tokens):
        return None
    if _NESTED_FSTRINGS and not _fstrings_closed(data, parts):
        return None
    size = len(data)
    arr = np.frombuffer(data, np.uint8)
    lengths = np.fromiter(map(len, parts), np.int64, len(parts))
    ends = np.cumsum(lengths)
    part_kind = np.zeros(len(parts), np.uint8)
    token_starts = ends[1::2] - lengths[1::2]
    part_kind[1::2] = np.where(arr[token_starts] == ord("#"), _COMMENT, _STRING)
    kind = np.repeat(part_kind, lengths)
    code = kind == 0
    if not text.isascii() and ((arr >= 0x80) & code).any():
        return None  # a non-ASCII identifier: only the parser knows whether its characters are allowed
    if b"`" in data and ((arr == ord("`")) & code).any():
        return None
    if b"<>" in data and ((arr[:-1] == ord("<")) & (arr[1:] == ord(">")) & code[:-1]).any():
        return None
    depth = np.cumsum(np.frombuffer(data.translate(_BRACKET), np.int8) * code, dtype=np.int32)
    if size and (depth[-1] != 0 or depth.min() < 0):
        return None
    newlines = np.flatnonzero(arr == ord("\n"))
    starts = newlines + 1
    starts = starts[starts < size]
    # a line continues its statement after a newline inside a string or brackets, or after a backslash in code
    continued = (kind[starts - 1] == _STRING) | (depth[starts - 1] > 0)
    before = starts - 2
    slashed = before >= 0
    slashed[slashed] = (arr[before[slashed]] == ord("\\")) & code[before[slashed]]
    continued |= slashed
    top = starts[~continued & ~_LINE_OPENER_BLANK[arr[starts]]]
    if size and not _LINE_OPENER_BLANK[arr[0]]:
        top = np.concatenate(([0], top))
    return kind, newlines, top


def _python2(data: bytes) -> bool:
    """Whether a line of ``data`` opens with a Python 2 statement (``_PYTHON2_STATEMENT``), tried only at the lines
    where one of its keywords follows the indentation: those are found by ``bytes.find`` (memchr), where searching
    the pattern from every newline set the regex engine up once a line, a tenth of the scan."""
    for keyword in _PYTHON2_KEYWORDS:
        at = data.find(keyword)
        while at >= 0:
            if data.startswith((b" ", b"\t"), at + len(keyword)):
                line = data.rfind(b"\n", 0, at) + 1
                if not data[line:at].strip(b" \t") and _PYTHON2_LINE.match(data, line) is not None:
                    return True
            at = data.find(keyword, at + 1)
    return False


def _fstrings_closed(data: bytes, parts: list[bytes]) -> bool:
    """Where f-strings may nest quotes (3.12+), every f-string literal as scanned closes its replacement
    fields: a quote inside a field ends the scanned literal with a ``{`` open."""
    position = 0
    for index, part in enumerate(parts):
        if index % 2 and part[:1] != b"#":
            prefix = data[max(0, position - 2):position].lower()
            if b"f" in prefix and b"{" in part:
                plain = part.replace(b"{{", b"").replace(b"}}", b"")
                if plain.count(b"{") != plain.count(b"}"):
                    return False
        position += len(part)
    return True


def _definitions(data: bytes, kind: Kinds, newlines: np.ndarray,
                 top: np.ndarray) -> tuple[Definition, ...] | None:
    """Each top-level def/class (decorators first) with the line of its body's last significant byte."""
    if not len(top):
        return ()
    lines = np.searchsorted(newlines, top) + 1  # 1-based line of each top-level statement
    found: list[tuple[int, int, str, str, int]] = []  # (first line, line, keyword, name, index in top)
    decorated: int | None = None
    positions = top.tolist()
    numbers = lines.tolist()
    for index, position in enumerate(positions):
        first = data[position]
        if first == 64:  # "@"
            if _DECORATOR.match(data, position) is None:
                return None
            if decorated is None:
                decorated = numbers[index]
            continue
        match = _DEFINITION.match(data, position) if first in b"acd" else None
        if match is None:
            if decorated is not None or (first in b"acd" and _DEFINITION_KEYWORD.match(data, position)):
                return None  # a decorator on something else, or ``def`` without a name: not Python
            continue
        keyword = "class" if match.group(2) == b"class" else ("async def" if match.group(1) else "def")
        found.append((decorated or numbers[index], numbers[index], keyword, _name(match.group(3)), index))
        decorated = None
    if decorated is not None:
        return None
    if not found:
        return ()
    last = [_last_significant_line(data, kind, positions[i + 1] if i + 1 < len(positions) else len(data))
            for *_, i in found]
    end_lines = (np.searchsorted(newlines, last) + 1).tolist()
    return tuple(Definition(first - 1, end, keyword, name)
                 for (first, _, keyword, name, _), end in zip(found, end_lines))


def _last_significant_line(data: bytes, kind: Kinds, boundary: int) -> int:
    """Where the last line before ``boundary`` (a line start) holding a significant byte starts: a byte of a
    string, or of code other than a space, tab or newline. A definition's body ends there; the lines after it
    and before the next top-level statement are blank or comments, a few, so they are walked back one by one
    (marking every significant byte of the file cost 4% of the scan)."""
    stop = boundary
    while stop > 0:
        start = data.rfind(b"\n", 0, stop - 1) + 1  # the line holding the byte before ``stop``
        if kind[start] == _STRING:  # inside a string that began on an earlier line
            return start
        line = data[start:stop]
        rest = line.lstrip(b" \t\n")
        if rest and kind[start + len(line) - len(rest)] != _COMMENT:
            return start
        stop = start
    return 0


def _imports(data: bytes, kind: Kinds) -> tuple[str, ...] | None:
    """The modules named by ``import a.b`` and (without leading dots) ``from a.b import c``, sorted."""
    names: set[str] = set()
    for match in _IMPORT_KEYWORD.finditer(data):
        position = match.start()
        if (position and data[position - 1] in _WORD_BYTE) or kind[position]:
            continue
        line = data.rfind(b"\n", 0, position) + 1
        while line >= 2 and data[line - 2] == 92 and not kind[line - 2]:  # a backslash-continued line
            line = data.rfind(b"\n", 0, line - 1) + 1
        prefix = data[line:position]
        if _STATEMENT_START.fullmatch(prefix):
            at = match.end()
            while True:
                name = _IMPORTED.match(data, at)
                if name is None:
                    return None
                names.add(_name(name.group(1)))
                at = name.end()
                if data[at:at + 1] != b",":
                    break
                at += 1
            if at < len(data) and data[at] not in b";\n#":
                return None
            continue
        keyword = len(prefix)
        while True:  # the last ``from`` keyword (``from`` also sits inside names: ``a.from_x``, ``frommer``)
            keyword = prefix.rfind(b"from", 0, keyword)
            if keyword < 0 or ((keyword == 0 or prefix[keyword - 1] not in _WORD_BYTE)
                               and prefix[keyword + 4:keyword + 5] not in _WORD_BYTES):
                break
        tail = _FROM_TAIL.fullmatch(prefix, keyword) if keyword >= 0 else None
        if tail is None:
            return None
        if not tail.group(1):
            if tail.group(2) is None:
                return None
            names.add(_name(tail.group(2)))
    return tuple(sorted(names))


# Statement lists a nested import can sit in; expressions never hold one, so they are not walked.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def outline_from_tree(tree: ast.Module) -> Outline:
    """The outline of a parsed module: what :func:`outline` answers, from ``ast`` (the reference)."""
    definitions = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            keyword = {ast.ClassDef: "class", ast.AsyncFunctionDef: "async def"}.get(type(node), "def")
            definitions.append(Definition(first - 1, node.end_lineno or node.lineno, keyword, node.name))
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module and not node.level:
                names.add(node.module)
        else:
            for field in _BODIES:
                found = getattr(node, field, None)
                if found:
                    stack.extend(found)
    return Outline(tuple(definitions), tuple(sorted(names)))


__all__ = ["Definition", "Outline", "outline", "outline_from_tree"]
