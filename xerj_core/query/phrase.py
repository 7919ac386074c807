"""Phrase matching (``match_phrase``): rows whose text field holds the query's words side by side, in order.

Postings keep how often a word occurs in a row, not where, so a phrase is
found in two steps: the postings give the live rows holding every word of the
phrase, then the phrase is counted in each of those rows' stored text. The
writer's words are the maximal runs of word characters in the lowercased
text, so words side by side have only other characters between them: one
regular expression over the lowercased text finds them, without listing the
text's words. A field's values are searched one by one: as in Elasticsearch
(whose ``position_increment_gap`` is 100), a phrase never runs from the end of
one value of an array into the next.

The score is Lucene's for a phrase: BM25 with the phrase's count in the row as
the frequency and the sum of its words' idf (a repeated word counted each
time) as the weight. The cost follows the rows holding every word, each of
whose sources is read and searched once.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

import numpy as np

from xerj_core.query import bm25
from xerj_core.store.mapping import FieldSpec, coerce, flatten
from xerj_core.text import WORD_CHAR, fold, paired_letters, tokenize


def phrase_match(reader: Any, field: str, words: list[str], scoring: bool, *, last: list[str] | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(mask, scores)`` of the phrase ``words`` (as :func:`~xerj_core.text.tokenize` gives them) in text field
    ``field``: dense over the reader's rows, scores None unless ``scoring``. With ``last`` (a phrase prefix's
    expansions), the phrase is ``words`` followed by any one of ``last``; else ``words`` are two or more."""
    n = reader.n_rows
    mask = np.zeros(n, bool)
    scores = np.zeros(n, np.float64) if scoring else None
    holding = {word: bm25.term_weights(reader, field, word)[0] for word in dict.fromkeys([*words, *(last or ())])}
    required = [holding[word] for word in dict.fromkeys(words)]
    if last is not None:
        last = [word for word in last if holding[word].size]  # a word only dead rows held stands for nothing
        if not last:
            return mask, scores
        required.append(_union([holding[word] for word in last]))
    rows = None
    for found in sorted(required, key=len):  # the rarest word first: the intersection only shrinks
        rows = found if rows is None else np.intersect1d(rows, found, assume_unique=True)
        if not rows.size:
            break
    if rows is None or not rows.size:
        return mask, scores
    spec = reader.mapping.fields[field]
    counts = np.zeros(rows.size, np.int64)
    at = {row: i for i, row in enumerate(rows.tolist())}
    starts = phrase_starts(words, last)
    for row, _id, source, _version in reader.documents(rows.tolist()):
        counts[at[row]] = sum(len(starts(fold(text))) for text in _texts(source, reader.mapping, spec))
    kept = counts > 0
    rows, counts = rows[kept], counts[kept]
    mask[rows] = True
    if scoring and rows.size:
        # Lucene's: the idf of every word the phrase may hold summed (each of a prefix's expansions too)
        stats = bm25.field_stats(reader, field)
        weight = sum(bm25.idf(stats.doc_count, len(holding[word])) for word in [*words, *(last or ())])
        lengths = bm25.lengths_at(reader, field, rows)
        norm = bm25.LENGTH_BASE + stats.slope * lengths
        scores[rows] = weight * counts / (counts + norm)
    return mask, scores


def _union(arrays: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate(arrays)) if arrays else np.empty(0, np.int64)


def phrase_starts(words: list[str], last: list[str] | None = None) -> Callable[[str], list]:
    """A function listing one item per place ``words`` start side by side in a lowercased text, overlaps included
    (``a a`` is twice in ``a a a``, as Lucene's exact phrase counts it): the pattern takes the first word alone
    and looks ahead for the rest, so the search goes on right after it. No character of a word (a letter, a digit
    or a mark: ``text.WORD_CHAR``) touches the phrase, so it lies where the tokenizer's maximal runs do (a word boundary
    would not do: a mark is no word character to it, and a Hindi word ending in a vowel sign had no boundary after it).
    ``last``: one more word, any one of these.

    A phrase holding CJK or Southeast Asian letters (``text.paired_letters``) is sought among the text's words
    instead (:func:`_word_starts`): its words are pairs of letters that overlap, which no pattern of whole words
    side by side describes."""
    if any(map(paired_letters, words)) or any(map(paired_letters, last or ())):
        return _word_starts(words, last)
    pieces = [re.escape(word) for word in words]
    if last is not None:
        pieces.append("(?:" + "|".join(map(re.escape, sorted(last, key=len, reverse=True))) + ")")
    first, *rest = pieces
    apart = "[^" + WORD_CHAR[1:] + "+"  # what no word holds, between two words
    return re.compile(rf"(?<!{WORD_CHAR}){first}(?=" + "".join(rf"{apart}{word}" for word in rest)
                      + rf"(?!{WORD_CHAR}))").findall


def _word_starts(words: list[str], last: list[str] | None) -> Callable[[str], list[int]]:
    """A function listing the positions in a lowercased text's words (``tokenize``) where ``words`` (then one of
    ``last``, when given) stand one after another, overlaps included."""
    size = len(words)
    ends = frozenset(last) if last is not None else None

    def starts(text: str) -> list[int]:
        found = tokenize(text)
        whole = size + (ends is not None)
        return [at for at in range(len(found) - whole + 1)
                if found[at:at + size] == words and (ends is None or found[at + size] in ends)]
    return starts


def _texts(source: Any, mapping: Any, spec: FieldSpec) -> Iterator[str]:
    """The values a document's source gives text field ``spec`` (a multi-field from its parent's), each as the
    writer converted it before tokenizing it."""
    if not isinstance(source, dict):
        return
    path = spec.source_path or spec.path
    for found, value in flatten(source, mapping):
        if found == path:
            yield coerce(spec, value)
