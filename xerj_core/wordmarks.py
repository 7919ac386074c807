"""Combining marks that Python's ``\\w`` leaves out, as one regular-expression class: vowel signs, viramas, accents.

``\\w`` in ``re`` matches letters and digits but not most combining marks
(Unicode categories Mn, Mc, Me), so a word of an Indic script (``हिन्दी``: a
consonant, a vowel sign, a virama ...) or a decomposed Latin one (``Tu\u0308bingen``,
as macOS writes file names) fell apart at each mark. ``text``'s word pattern
adds this class. Variation selectors are left out: one after an emoji (``⚠️``)
is no word, and one after a letter leaves the letter's word as it is. Made from
``unicodedata`` 14.0.0 (Python 3.11) by
``python -m xerj_core.wordmarks``; ``tests/test_text.py`` checks it against the running Python's ``unicodedata``.
"""

from __future__ import annotations

UNICODE_VERSION = "14.0.0"
# Only the Basic Multilingual Plane's marks: a class reaching past it is a list of ranges that ``re`` tries one by
# one for every character, which made tokenizing any non-ASCII text three times slower (2 MB of Russian: 32 ms to
# 100 ms); within it ``re`` keeps a bitmap and the pace is ``\w``'s. The marks past it are of historic scripts
# (Brahmi, Kharoshthi, Grantha, ...) and musical notation.
_PLANE_ONE = 0x10000

MARKS = (
    r"\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1-\u05c2\u05c4-\u05c5\u05c7\u0610-\u061a"
    r"\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7-\u06e8\u06ea-\u06ed\u0711\u0730-\u074a"
    r"\u07a6-\u07b0\u07eb-\u07f3\u07fd\u0816-\u0819\u081b-\u0823\u0825-\u0827\u0829-\u082d\u0859-\u085b"
    r"\u0898-\u089f\u08ca-\u08e1\u08e3-\u0903\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962-\u0963"
    r"\u0981-\u0983\u09bc\u09be-\u09c4\u09c7-\u09c8\u09cb-\u09cd\u09d7\u09e2-\u09e3\u09fe\u0a01-\u0a03"
    r"\u0a3c\u0a3e-\u0a42\u0a47-\u0a48\u0a4b-\u0a4d\u0a51\u0a70-\u0a71\u0a75\u0a81-\u0a83\u0abc"
    r"\u0abe-\u0ac5\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2-\u0ae3\u0afa-\u0aff\u0b01-\u0b03\u0b3c\u0b3e-\u0b44"
    r"\u0b47-\u0b48\u0b4b-\u0b4d\u0b55-\u0b57\u0b62-\u0b63\u0b82\u0bbe-\u0bc2\u0bc6-\u0bc8\u0bca-\u0bcd"
    r"\u0bd7\u0c00-\u0c04\u0c3c\u0c3e-\u0c44\u0c46-\u0c48\u0c4a-\u0c4d\u0c55-\u0c56\u0c62-\u0c63"
    r"\u0c81-\u0c83\u0cbc\u0cbe-\u0cc4\u0cc6-\u0cc8\u0cca-\u0ccd\u0cd5-\u0cd6\u0ce2-\u0ce3\u0d00-\u0d03"
    r"\u0d3b-\u0d3c\u0d3e-\u0d44\u0d46-\u0d48\u0d4a-\u0d4d\u0d57\u0d62-\u0d63\u0d81-\u0d83\u0dca"
    r"\u0dcf-\u0dd4\u0dd6\u0dd8-\u0ddf\u0df2-\u0df3\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc"
    r"\u0ec8-\u0ecd\u0f18-\u0f19\u0f35\u0f37\u0f39\u0f3e-\u0f3f\u0f71-\u0f84\u0f86-\u0f87\u0f8d-\u0f97"
    r"\u0f99-\u0fbc\u0fc6\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074"
    r"\u1082-\u108d\u108f\u109a-\u109d\u135d-\u135f\u1712-\u1715\u1732-\u1734\u1752-\u1753\u1772-\u1773"
    r"\u17b4-\u17d3\u17dd\u1885-\u1886\u18a9\u1920-\u192b\u1930-\u193b\u1a17-\u1a1b\u1a55-\u1a5e"
    r"\u1a60-\u1a7c\u1a7f\u1ab0-\u1ace\u1b00-\u1b04\u1b34-\u1b44\u1b6b-\u1b73\u1b80-\u1b82\u1ba1-\u1bad"
    r"\u1be6-\u1bf3\u1c24-\u1c37\u1cd0-\u1cd2\u1cd4-\u1ce8\u1ced\u1cf4\u1cf7-\u1cf9\u1dc0-\u1dff"
    r"\u20d0-\u20f0\u2cef-\u2cf1\u2d7f\u2de0-\u2dff\u302a-\u302f\u3099-\u309a\ua66f-\ua672\ua674-\ua67d"
    r"\ua69e-\ua69f\ua6f0-\ua6f1\ua802\ua806\ua80b\ua823-\ua827\ua82c\ua880-\ua881\ua8b4-\ua8c5"
    r"\ua8e0-\ua8f1\ua8ff\ua926-\ua92d\ua947-\ua953\ua980-\ua983\ua9b3-\ua9c0\ua9e5\uaa29-\uaa36\uaa43"
    r"\uaa4c-\uaa4d\uaa7b-\uaa7d\uaab0\uaab2-\uaab4\uaab7-\uaab8\uaabe-\uaabf\uaac1\uaaeb-\uaaef"
    r"\uaaf5-\uaaf6\uabe3-\uabea\uabec-\uabed\ufb1e\ufe20-\ufe2f"
)


def _made() -> str:
    """The class as this Python's ``unicodedata`` gives it (slow: every code point is asked)."""
    import re
    import unicodedata

    ranges, start = [], None
    for cp in range(_PLANE_ONE + 1):
        mark = cp < _PLANE_ONE and unicodedata.category(chr(cp)).startswith("M") and not re.match(r"\w", chr(cp)) \
            and "VARIATION SELECTOR" not in unicodedata.name(chr(cp), "")
        if mark and start is None:
            start = cp
        elif not mark and start is not None:
            ranges.append((start, cp - 1))
            start = None

    def escaped(cp: int) -> str:
        return f"\\u{cp:04x}"

    return "".join(escaped(a) if a == b else f"{escaped(a)}-{escaped(b)}" for a, b in ranges)


if __name__ == "__main__":
    print(_made())
