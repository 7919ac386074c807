"""Set one member of a JSON object in the file's own text, leaving every other byte where it was.

A client's configuration file belongs to the person: re-serialising it would
reformat their other servers (indentation, escapes, number spellings). So the
new member is spliced into the text: the object's span is found by a scanner
that knows JSON strings, and only that span changes.
"""

from __future__ import annotations

import json
import re
from typing import Any

_WS = re.compile(r"\s*")


def _skip_ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()


def _string_end(text: str, pos: int) -> int:
    """Index just past the JSON string starting at ``pos`` (a double quote)."""
    _value, end = json.decoder.scanstring(text, pos + 1)
    return end


def _value_end(text: str, pos: int) -> int:
    """Index just past the JSON value starting at ``pos``."""
    _value, end = json.JSONDecoder().raw_decode(text, pos)
    return end


def members(text: str, start: int) -> tuple[list[tuple[str, int, int, int]], int]:
    """The members of the object whose ``{`` is at ``start``: (key, key_start, value_start, value_end), and
    the index of its closing ``}``."""
    out: list[tuple[str, int, int, int]] = []
    pos = _skip_ws(text, start + 1)
    if text[pos] == "}":
        return out, pos
    while True:
        key_start = pos
        key_end = _string_end(text, pos)
        key = json.loads(text[key_start:key_end])
        pos = _skip_ws(text, key_end)
        assert text[pos] == ":"
        value_start = _skip_ws(text, pos + 1)
        value_end = _value_end(text, value_start)
        out.append((key, key_start, value_start, value_end))
        pos = _skip_ws(text, value_end)
        if text[pos] == "}":
            return out, pos
        assert text[pos] == ","
        pos = _skip_ws(text, pos + 1)


def _indent_of(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    return re.match(r"[ \t]*", text[line_start:pos]).group(0)


def _render(value: Any, indent: str, step: str) -> str:
    body = json.dumps(value, indent=len(step) or None, ensure_ascii=False)
    return body.replace("\n", "\n" + indent)


def set_member(text: str, path: tuple[str, ...], value: Any) -> str:
    """``text`` (a JSON object) with ``path`` set to ``value``, creating the objects on the way.

    The value of an existing member at ``path`` is replaced in place; a new
    member goes after the object's last one, indented like its siblings.
    """
    start = _skip_ws(text, 0)
    if text[start] != "{":
        raise ValueError("the file's top level is not a JSON object")
    for depth, key in enumerate(path):
        found, close = members(text, start)
        last = depth == len(path) - 1
        match = next((m for m in found if m[0] == key), None)
        if match is not None:
            _key, _ks, value_start, value_end = match
            if last:
                indent = _indent_of(text, _ks)
                return text[:value_start] + _render(value, indent, _step(text)) + text[value_end:]
            if text[value_start] != "{":
                raise ValueError(f"[{key}] in the file is not a JSON object")
            start = value_start
            continue
        # Not there: add the rest of the path as one new member of this object.
        nested: Any = value
        for inner in reversed(path[depth + 1:]):
            nested = {inner: nested}
        step = _step(text)
        if found:
            sibling_indent = _indent_of(text, found[-1][1])
            multiline = "\n" in text[start:close]
            sep = ",\n" + sibling_indent if multiline else ", "
            insert_at = found[-1][3]
            piece = sep + json.dumps(key) + ": " + _render(nested, sibling_indent if multiline else "", step)
            return text[:insert_at] + piece + text[insert_at:]
        outer = _indent_of(text, start)
        inner_indent = outer + step
        piece = "\n" + inner_indent + json.dumps(key) + ": " + _render(nested, inner_indent, step) + "\n" + outer
        return text[:start + 1] + piece + text[close:]
    raise ValueError("empty path")


def _step(text: str) -> str:
    """The file's indentation unit (two spaces when it does not show one)."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "
