"""``prefix`` and ``wildcard``: a pattern's test of a term, and on text fields the terms each segment and tail hold.

Text postings are found by term (hashed into buckets, see ``store.postpack``),
so no sorted term list is kept at write time. The reader lists a sealed
segment's terms once, sorted, the first time a pattern asks (a segment never
changes), and the tail's for its generation. A pattern with a literal start
looks at that range of each list only; any other reads each list through, as a
keyword's dictionary is. A match scores the clause's boost, as ES's constant
score rewrite of a multi-term query does.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from xerj_core.query import dsl
from xerj_core.store.lexicon import Lexicon


def pattern_test(node: dsl.Pattern) -> Callable[[str], bool]:
    """Does a term match ``node`` (a ``prefix`` or a ``wildcard``)?"""
    if node.kind == "prefix":
        if node.case_insensitive:  # character by character, as a wildcard's (so "ss" never matches "ß")
            starts = re.compile(re.escape(node.value), _WILDCARD_FLAGS | re.IGNORECASE).match
            return lambda term: starts(term) is not None
        return lambda term: term.startswith(node.value)
    return _wildcard_test(node.value, node.case_insensitive)


_WILDCARD_FLAGS = re.DOTALL


def _wildcard_test(pattern: str, case_insensitive: bool) -> Callable[[str], bool]:
    """A wildcard's test, in time linear in the term for each piece between its stars.

    A regular expression with ``.*`` for each star backtracks exponentially
    (``*a*a*a*a*a*a*a*a*a*a*a*a*c`` on 24 a's took 0.2 s, each further a about
    twice that). Instead the pattern is cut at its stars into pieces of fixed
    length (characters and ``?``): the first must start the term, the last end
    it, and each one between is found at its leftmost place after the one
    before, which is always safe for a star's "any run"."""
    pieces: list[list[str]] = [[]]
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            pieces[-1].append(re.escape(next(chars, "\\")))  # a trailing backslash stands for itself
        elif char == "*":
            pieces.append([])
        else:
            pieces[-1].append("." if char == "?" else re.escape(char))
    flags = _WILDCARD_FLAGS | (re.IGNORECASE if case_insensitive else 0)
    compiled = [(re.compile("".join(piece), flags), len(piece)) for piece in pieces]
    if len(compiled) == 1:
        whole = compiled[0][0].fullmatch
        return lambda term: whole(term) is not None
    (first, first_size), *middle, (last, last_size) = compiled

    def test(term: str) -> bool:
        start, end = first_size, len(term) - last_size
        if end < start or not first.match(term) or not last.fullmatch(term, end):
            return False
        for piece, size in middle:
            if size:
                found = piece.search(term, start, end)
                if found is None:
                    return False
                start = found.end()
        return True
    return test


# Past this share of a sealed segment's terms, a pattern reads the segment's postings in one pass rather than
# term by term: on 1,500 real .py files a lookup cost 19 us, a pass 0.6 us for each term the segment held. (A
# database store fetches every segment's matched terms in one round trip instead: a pass costs one per segment.)
SEGMENT_PASS_SHARE = 1 / 32
# The same for the tail, whose blocks are in memory: a first lookup cost 57 us, a pass 0.07 us a term.
TAIL_PASS_SHARE = 1 / 512


def literal_start(node: dsl.Pattern) -> str:
    """The characters every term ``node`` matches starts with (case-sensitive patterns only: terms are sorted by
    code point, and a case-insensitive start is many ranges)."""
    if node.case_insensitive:
        return ""
    if node.kind == "prefix":
        return node.value
    out = []
    chars = iter(node.value)
    for char in chars:
        if char in "*?":
            break
        out.append(next(chars, "\\") if char == "\\" else char)
    return "".join(out)


def matching(terms: Lexicon, test: Callable[[str], bool], start: str) -> list[str]:
    """The terms of ``terms`` that begin with ``start`` and pass ``test``."""
    return [term for term in terms.starting_with(start) if test(term)]


def text_mask(reader, node: dsl.Pattern) -> np.ndarray:
    """Rows (dead ones included, as every clause's mask) holding a word of text field ``node.field`` that ``node``
    matches."""
    field, test, start = node.field, pattern_test(node), literal_start(node)
    mask = np.zeros(reader.n_rows, bool)
    one_by_one = []
    for segment in reader.segments:
        if field not in segment.fields:
            continue
        terms = reader.segment_terms(segment, field)
        found = matching(terms, test, start)
        if len(found) > SEGMENT_PASS_SHARE * len(terms) and not reader.gets_are_round_trips:
            mask[reader.segment_rows_holding(segment, field, {term.encode() for term in found})] = True
        elif found:
            one_by_one.append((segment, found))
    reader.prefetch_terms(field, one_by_one)  # one round trip for a database store
    for segment, found in one_by_one:
        for term in found:
            postings = reader.segment_postings(segment, field, term)
            if postings is not None:
                mask[postings[0]] = True
    if reader.tail_count:
        tail, terms = reader.snapshot.tail, reader.tail_terms(field)
        found = matching(terms, test, start)
        if len(found) > TAIL_PASS_SHARE * len(terms):
            mask[tail.rows_holding(field, reader.tail_count, {term.encode() for term in found})] = True
        else:
            for term in found:
                postings = tail.postings(field, term, reader.tail_count)
                if postings is not None:
                    mask[postings[0]] = True
    return mask


def expansions(reader, field: str, prefix: str, limit: int) -> list[str]:
    """The first ``limit`` words of text field ``field`` (in code point order, over every segment and the tail)
    that start with ``prefix``: what a ``match_phrase_prefix``'s last word stands for."""
    found: set[str] = set()
    lists = [reader.segment_terms(segment, field) for segment in reader.segments if field in segment.fields]
    if reader.tail_count:
        lists.append(reader.tail_terms(field))
    for terms in lists:
        found.update(terms.starting_with(prefix)[:limit])  # each list is sorted: only its first ``limit`` count
    return sorted(found)[:limit]

