"""The Lucene query string of ``q=`` and ``query_string``: cut into tokens, then parsed by recursive descent.

What it reads: words; ``field:value``; ``"phrases"``; ``gra*`` and ``gr?ph``
(wildcards); ``+must``, ``-must_not``, ``!x``; ``AND``, ``OR``, ``NOT`` (and
``&&``, ``||``) as the classic parser reads them: a conjunction binds the
clauses on both sides; ``(groups)`` and ``field:(groups)``; ``^boost`` on a
clause or a group; ranges ``field:[a TO b]``, ``{a TO b}`` (mixed brackets, ``*``
open) and ``field:>a``, ``>=``, ``<``, ``<=``; ``field:*`` and ``_exists_:field``;
``*`` / ``*:*``. A backslash escapes the next character; only a double quote
quotes (``what's`` is a word). A pasted address (``https://...``) is a phrase of
its words. Fuzzy ``word~`` and a sloppy ``"phrase"~2`` are a 400 that says so,
as a ``match_phrase`` slop is.

A ``?`` that only ends a word (``why?``) is a question mark, not a wildcard:
questions are what people and agents type into a search box, and ``work?`` as a
wildcard would miss "work" itself.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.query.dsl import (MAX_CLAUSE_COUNT, Bool, Exists, FieldsPattern, Ids, Match, MatchAll, MatchNone,
                                 MatchPhrase, MultiMatch, Node, Pattern, Range)

_OPERATORS = {"AND": "AND", "&&": "AND", "OR": "OR", "||": "OR", "NOT": "NOT", "!": "NOT"}
# What may stand right before a parenthesis, or a range's bracket, and belong to it: a sign and a field.
_PREFIX = re.compile(r"([+\-!]?)(?:([^\s:\"\\()\[\]{}]+):)?")
_CLAUSE = re.compile(r"([+\-!]?)(?:([^\s:\"\\()\[\]{}]+):)?(.*)", re.S)
_BOOST = re.compile(r"\^(\d+(?:\.\d+)?)")
_TILDE = re.compile(r"~(\d+(?:\.\d+)?)?$")
_COMPARE = re.compile(r"(>=|<=|>|<)(.+)", re.S)
# A URL as people paste it (``https://host/path?x=1``): Lucene would read a field ``https`` and, in the path, a
# regular expression and wildcards; a second brain's notes hold such addresses as text.
_ADDRESS = re.compile(r"([+\-!]?)(?:([^\s:\"\\()\[\]{}]+):(?=[A-Za-z][A-Za-z0-9+.\-]*://))?"
                      r"([A-Za-z][A-Za-z0-9+.\-]*://\S+)", re.S)
# Groups nest this deep at most: each is a frame of the parser's recursion (and of the evaluator's).
MAX_DEPTH = 64


@attrs.frozen
class _Token:
    kind: str  # "word" (a clause as written), "open" (text: its sign and field), "close" (text: its boost)
    text: str


def _fail(q: str, why: str) -> ParsingError:
    return ParsingError(f"Failed to parse query [{q}]: {why}")


def _lex(q: str) -> list[_Token]:
    """``q`` as tokens: cut at whitespace outside double quotes and range brackets, and at parentheses."""
    tokens: list[_Token] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            tokens.append(_Token("word", "".join(current)))
            current.clear()

    at, n = 0, len(q)
    while at < n:
        char = q[at]
        if char == "\\":
            current.append(q[at:at + 2])
            at += 2
        elif char == '"':  # to the next unescaped double quote
            end = at + 1
            while end < n and q[end] != '"':
                end += 2 if q[end] == "\\" else 1
            if end >= n:
                raise _fail(q, "a double quote is not closed")
            current.append(q[at:end + 1])
            at = end + 1
        elif char in "[{" and _PREFIX.fullmatch("".join(current)):  # a range, to its closing bracket
            end = at + 1
            while end < n and q[end] not in "]}":
                end += 2 if q[end] == "\\" else 1
            if end >= n:
                raise _fail(q, "a range's bracket is not closed")
            current.append(q[at:end + 1])
            at = end + 1
        elif char == "(":
            written = "".join(current)
            if _PREFIX.fullmatch(written):
                tokens.append(_Token("open", written))
            else:  # print(x): the word, then a group
                tokens += [_Token("word", written), _Token("open", "")]
            current.clear()
            at += 1
        elif char == ")":
            flush()
            boost = _BOOST.match(q, at + 1)
            tokens.append(_Token("close", boost.group(1) if boost else ""))
            at = boost.end() if boost else at + 1
        elif char.isspace():
            flush()
            at += 1
        else:
            current.append(char)
            at += 1
    flush()
    return tokens


@attrs.frozen
class _Context:
    default_field: str | None
    fields: tuple[tuple[str, float], ...] | None
    operator: str  # the default operator: "+" (and) or "?" (or)


def parse_q(q: str, *, default_field: str | None = None, default_operator: str = "or",
            fields: tuple[tuple[str, float], ...] | None = None) -> Node:
    """Parse a query string into a query node. A word without a field goes to ``default_field``, else to
    ``fields`` (``(pattern, boost)`` pairs), else to every text field."""
    text = q.strip()
    if text in ("", "*", "*:*"):
        return MatchAll()
    operator = str(default_operator).lower()
    if operator not in ("or", "and"):
        raise IllegalArgument(f"[default_operator] must be [AND] or [OR], got [{default_operator}]")
    field = default_field if default_field and default_field != "*" else None
    tokens = _lex(text)
    clauses = sum(token.kind == "word" for token in tokens)
    if clauses > MAX_CLAUSE_COUNT:
        raise IllegalArgument(f"[query_string] has {clauses} clauses: too many clauses, maxClauseCount is set to "
                              f"{MAX_CLAUSE_COUNT}")
    node, at = _group(q, tokens, 0, _Context(field, fields, "+" if operator == "and" else "?"))
    if at < len(tokens):
        raise _fail(q, "a closing parenthesis has no opening one")
    return node


def _group(q: str, tokens: list[_Token], at: int, context: _Context, depth: int = 0) -> tuple[Node, int]:
    """The clauses from ``tokens[at]`` to the end or a closing parenthesis (left for the caller), as one bool."""
    if depth > MAX_DEPTH:
        raise _fail(q, f"groups nest more than {MAX_DEPTH} deep")
    # Each clause's occurrence: "+" must, "-" must not, "?" should, "" the default operator's. AND makes the
    # unsigned clauses on both sides required, OR optional, NOT the next one excluded (Lucene's classic parser).
    clauses: list[list[Any]] = []  # [occurrence, node, signed]
    joiner = None
    while at < len(tokens) and tokens[at].kind != "close":
        token = tokens[at]
        if token.kind == "word" and token.text in _OPERATORS:
            joiner = _OPERATORS[token.text]
            if joiner != "NOT" and clauses and not clauses[-1][2]:
                clauses[-1][0] = "+" if joiner == "AND" else "?"
            at += 1
            continue
        if token.kind == "open":
            sign, field = _PREFIX.fullmatch(token.text).groups()  # type: ignore[union-attr]
            inner = attrs.evolve(context, default_field=field) if field else context
            node, at = _group(q, tokens, at + 1, inner, depth + 1)
            if at >= len(tokens):
                raise _fail(q, "a parenthesis is not closed")
            if tokens[at].text:
                node = _boosted(node, float(tokens[at].text))
            at += 1
        else:
            sign, node = _clause(q, token.text, context)
            at += 1
            if node is None:
                continue
        signed = bool(sign)
        if not signed and joiner is not None:
            sign, signed = {"AND": "+", "OR": "?", "NOT": "-"}[joiner], True
        joiner = None
        clauses.append(["-" if sign == "!" else sign, node, signed])
    must = tuple(node for sign, node, _ in clauses if (sign or context.operator) == "+")
    should = tuple(node for sign, node, _ in clauses if (sign or context.operator) == "?")
    must_not = tuple(node for sign, node, _ in clauses if sign == "-")
    if not (must or should or must_not):
        return MatchNone(), at
    return Bool(must=must, should=should, must_not=must_not), at


def _boosted(node: Node, boost: float) -> Node:
    if isinstance(node, MatchNone):
        return node
    return attrs.evolve(node, boost=node.boost * boost)


def _clause(q: str, written: str, context: _Context) -> tuple[str, Node | None]:
    """One clause as written (sign, field, value, boost): its sign and node (None: it holds no word)."""
    address = _ADDRESS.fullmatch(written)
    if address:  # a pasted address: its words side by side, not a field "https" and a path of wildcards
        sign, field, text = address.groups()
        return sign, _leaf(q, field or context.default_field, '"' + re.sub(r'(["\\])', r"\\\1", text) + '"',
                           context)
    sign, field, value = _CLAUSE.fullmatch(written).groups()  # type: ignore[union-attr]
    boost = None
    found = re.search(r"(?<!\\)\^(\d+(?:\.\d+)?)$", value)
    if found and found.start():
        value, boost = value[:found.start()], float(found.group(1))
    tilde = _TILDE.search(value)
    if tilde and tilde.start() and value[tilde.start() - 1] != "\\":
        if value.startswith('"') and value[tilde.start() - 1] == '"':
            if float(tilde.group(1) or 0) > 0:
                raise IllegalArgument(f"[query_string] a phrase with slop ({value}) is not supported: phrases "
                                      f"match their words side by side")
        else:
            raise IllegalArgument(f"[query_string] fuzzy queries ({value}) are not supported")
        value = value[:tilde.start()]
    field = field or context.default_field
    if field == "_exists_":
        node: Node | None = Exists(_unescaped(value))
    else:
        node = _leaf(q, field, value, context)
    if node is not None and boost is not None:
        node = _boosted(node, boost)
    return sign, node


def _leaf(q: str, field: str | None, raw: str, context: _Context) -> Node | None:
    if len(raw) > 1 and raw[0] in "[{" and raw[-1] in "]}":
        return _range(q, field, raw)
    compare = _COMPARE.fullmatch(raw)
    if compare:
        bound = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}[compare.group(1)]
        return Range(_range_field(q, field, raw), **{bound: _unescaped(compare.group(2))})
    value, pattern, quoted = _value(raw)
    if not value:
        return None
    if field == "_id":
        return Ids((value,))
    if raw == "*":
        return Exists(field) if field else MatchAll()
    if pattern is not None:
        return Pattern("wildcard", field, pattern, lowercase_for_text=True) if field else \
            FieldsPattern(pattern, context.fields)
    phrase = quoted or " " in value  # a quoted value is a phrase, as in Lucene's syntax: "what's" too
    if field:
        return MatchPhrase(field, value) if phrase else Match(field, value)
    return MultiMatch(value, context.fields, type="phrase" if phrase else "best_fields")


def _range_field(q: str, field: str | None, raw: str) -> str:
    if not field:
        raise _fail(q, f"the range [{raw}] needs a field (field:{raw})")
    return field


def _range(q: str, field: str | None, raw: str) -> Node:
    parts = re.split(r"\s+TO\s+", raw[1:-1].strip())
    if len(parts) != 2 or not all(parts):
        raise _fail(q, f"a range is written [from TO to], got {raw}")
    bounds: dict[str, Any] = {}
    low, high = (_unescaped(part.strip('"')) for part in parts)
    if low != "*":
        bounds["gte" if raw[0] == "[" else "gt"] = low
    if high != "*":
        bounds["lte" if raw[-1] == "]" else "lt"] = high
    return Range(_range_field(q, field, raw), **bounds)


def _unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text, flags=re.S)


def _value(raw: str) -> tuple[str, str | None, bool]:
    """A value as written: its text (quotes and escaping backslashes removed), its wildcard pattern (escapes kept)
    when it is one (unquoted, with an unescaped star, or an unescaped ``?`` other than at its end), and whether it
    was quoted (a phrase, however many words it holds)."""
    items: list[tuple[str, bool]] = []  # (character, escaped)
    quoted = False
    chars = iter(raw)
    for char in chars:
        if char == "\\":
            items.append((next(chars, "\\"), True))  # a trailing backslash stands for itself
        elif char == '"':
            quoted = True
        else:
            items.append((char, False))
    text = "".join(char for char, _ in items)
    end = len(items)
    while end and items[end - 1] == ("?", False):
        end -= 1
    wild = any(char == "*" and not escaped for char, escaped in items) or \
        any(char == "?" and not escaped for char, escaped in items[:end])
    if quoted or not wild:
        return text, None, quoted
    return text, "".join("\\" + char if escaped else char for char, escaped in items), False
