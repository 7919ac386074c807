"""The write plan of one mapping version: each field path's column kind, dictionary and conversion, resolved once.

``IndexWrite.record_for`` asks the plan for a document's values first. The plan
only answers for documents whose every field is already mapped and every value
is a plain scalar (or a list of them): exactly the documents whose outcome the
generic path would reach without touching the mapping. Anything else (a new
field, an object where a value is mapped, nested arrays) returns None and takes
the generic path, which owns every refusal and every dynamic mapping rule.
"""

from __future__ import annotations

import math
from collections import _count_elements  # type: ignore[attr-defined]  # Counter's own C counting loop
from itertools import chain, compress
from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np

from xerj_core import termrank
from xerj_core.store import limits
from xerj_core.store.columns import KIND_LEN, KIND_ORD, KIND_VEC, column_kind
from xerj_core.store.mapping import FLOAT_TYPES, INT_TYPES, FieldSpec, Mapping, coerce
from xerj_core.store.tailblock import PostingRun, counted_run, empty_run, group, postings_of_tokens
from xerj_core.text import (SLICE_CHARS, ascii_words, counted_terms, slices, term_counts_many, tokenize, tokenize_many,
                            utf8_words)

# How a leaf converts a value of the expected Python type without calling ``coerce``.
_AS_STR, _AS_INT, _AS_DATE, _AS_FLOAT, _AS_OTHER = range(5)
# Values an unmapped field may hold and be passed by without the generic path (None is never indexed).
_UNMAPPED_SCALARS = frozenset((str, int, float, bool, type(None)))
# Characters a value of a text column needs on average for :func:`column_postings` to count the column with the
# compiled word count (:func:`counted_postings`) rather than cut it in one translation: bulks of 1,000 documents
# of real code took 0.89 of the time at 256 chars a value, 0.80 at 512, 0.62 at 4 KB; 1.04 at 96, 1.14 at 32.
COUNT_COLUMN_FROM_CHARS = 256


class Leaf:
    """One mapped field: where its values go and how a value is converted."""

    __slots__ = ("spec", "path", "kind", "dictionary", "convert", "low", "high", "subs")

    def __init__(self, spec: FieldSpec, subs: tuple[FieldSpec, ...]) -> None:
        self.spec = spec
        self.path = spec.path
        self.kind = column_kind(spec)
        self.dictionary = spec.dictionary_name
        self.low, self.high = INT_TYPES.get(spec.type, (0, 0))
        if spec.type in ("keyword", "text"):
            self.convert = _AS_STR
        elif spec.type in INT_TYPES:
            self.convert = _AS_INT
        elif spec.type == "date":
            self.convert = _AS_DATE
        elif spec.type in FLOAT_TYPES:
            self.convert = _AS_FLOAT
        else:
            self.convert = _AS_OTHER
        self.subs = subs

    def value(self, value: Any) -> Any:
        """``value`` converted for this field's column (``coerce`` when it is not of the plain type)."""
        convert, kind = self.convert, type(value)
        if convert == _AS_STR:
            if kind is str:
                return value
        elif convert == _AS_INT:
            if kind is int and self.low <= value <= self.high:
                return value
        elif convert == _AS_DATE:
            if kind is int:
                return value
        elif convert == _AS_FLOAT:
            if kind is float and math.isfinite(value):
                return value
        return coerce(self.spec, value)


class Plan:
    """The fields under one object level: leaves by key and nested objects by key."""

    __slots__ = ("leaves", "objects", "prefix")

    def __init__(self, prefix: str = "") -> None:
        self.leaves: dict[str, Leaf] = {}
        self.objects: dict[str, Plan] = {}
        self.prefix = prefix  # the dotted path of this level plus ".", "" at the root


class WritePlan:
    """Everything ``record_for`` needs about a mapping, compiled once per mapping version."""

    __slots__ = ("root", "leaves", "ignores_unmapped", "object_paths", "claimed")

    def __init__(self, mapping: Mapping) -> None:
        self.root = Plan()
        self.leaves: dict[str, Leaf] = {}
        # Under ``dynamic: false`` (or runtime) an unmapped scalar stays in _source only, so the plan may pass
        # it by (an edge's ``recorded_at``, a file state's run fields) instead of sending the document down the
        # generic path; a key naming a mapped object still goes there, which refuses it.
        self.ignores_unmapped = mapping.dynamic in ("false", "runtime")
        self.object_paths = frozenset(mapping.objects)
        # Every mapped path and each of its parents: an unmapped object or list passes by only outside these
        # (an edge's archived version keeps its ``evidence`` object in a history index that maps none of it).
        self.claimed = frozenset(".".join(parts[:i]) for parts in (p.split(".") for p in (*mapping.fields,
                                                                                          *mapping.objects))
                                 for i in range(1, len(parts) + 1))
        for spec in mapping.fields.values():
            if spec.source_path is not None:
                continue
            level = self.root
            parts = spec.path.split(".")
            for part in parts[:-1]:
                nested = level.objects.get(part)
                if nested is None:
                    nested = level.objects[part] = Plan(level.prefix + part + ".")
                level = nested
            leaf = Leaf(spec, mapping.subfields_of(spec.path))
            level.leaves[parts[-1]] = leaf
            self.leaves[spec.path] = leaf
        for spec in mapping.fields.values():
            if spec.source_path is not None:
                self.leaves[spec.path] = Leaf(spec, ())

    def _pairs(self, doc: dict[str, Any]) -> list[tuple[Leaf, Any]] | None:
        """``(leaf, value)`` for every non-null value of ``doc`` (a list stays one value), or None when a
        field is unmapped or an object sits where a value is mapped (the generic path decides those)."""
        pairs: list[tuple[Leaf, Any]] = []
        stack = [(self.root, doc)]
        ignores = self.ignores_unmapped
        while stack:
            level, obj = stack.pop()
            leaves, objects = level.leaves, level.objects
            for key, value in obj.items():
                leaf = leaves.get(key)
                if leaf is None:
                    nested = objects.get(key)
                    if nested is None or type(value) is not dict:
                        if nested is not None and value is None:
                            continue
                        if ignores and nested is None and self._passes_by(level, key, (value,)):
                            continue
                        return None
                    stack.append((nested, value))
                elif value is not None:
                    if type(value) is dict:
                        return None
                    pairs.append((leaf, value))
        return pairs

    def _passes_by(self, level: Plan, key: Any, values: Sequence[Any], kinds: set[type] | None = None) -> bool:
        """Would the generic path, under ``dynamic: false``, leave the unmapped ``key``'s ``values`` in _source
        without refusing the document? Scalars do unless the key names a mapped object; objects and lists do
        where nothing below the key is mapped and they hold no nested array and no empty key."""
        if type(key) is not str or not key or "." in key:
            return False
        path = level.prefix + key
        if (kinds or set(map(type, values))) <= _UNMAPPED_SCALARS:
            return path not in self.object_paths
        return path not in self.claimed and all(map(_inert, values))

    def values(self, doc: dict[str, Any]) -> dict[str, list[Any]] | None:
        """Converted values per field path, or None when the document needs the generic path."""
        pairs = self._pairs(doc)
        if pairs is None:
            return None
        # The generic path refuses a nested list or an object anywhere in the document before it converts
        # any value, so those are looked for first: a document with both faults gets the generic refusal.
        for leaf, value in pairs:
            if type(value) is list and leaf.kind != KIND_VEC and any(
                    type(item) is dict or type(item) is list for item in value):
                return None
        values: dict[str, list[Any]] = {}
        for leaf, value in pairs:
            if type(value) is list and leaf.kind != KIND_VEC:
                for item in value:
                    if item is not None:
                        _add(values, leaf, item)
            else:
                _add(values, leaf, value)
        return values

    def record(self, doc: dict[str, Any], ordinal: Callable[[str, str], int],
               dict_cache: dict[str, dict[str, int]], skipped: dict[str, int],
               uncounted: str | None = None) -> dict[str, Any] | None:
        """The row record of a document of single scalar values in one pass (every edge document is one);
        None when a value is a list, a field has multi-fields, or the document needs the generic path.

        Every value is converted before any ordinal is assigned, so a refused
        document adds no term to a dictionary. Keyword values and terms too long
        to be keys are left out and counted in ``skipped``. The text of field ``uncounted`` (one its writer
        counts itself, see ``IndexWrite.put_many_counted``) is recorded as an empty text would be."""
        pairs = self._pairs(doc)
        if pairs is None:
            return None
        # Lists and multi-fields are the generic path's, and it must see them before any value is converted
        # here, so a document that one of them would refuse is never refused here for another field first.
        if any(type(value) is list or leaf.subs for leaf, value in pairs):
            return None
        converted = []
        for leaf, value in pairs:
            kind = type(value)
            convert = leaf.convert
            if not ((convert == _AS_STR and kind is str) or (convert == _AS_DATE and kind is int)
                    or (convert == _AS_FLOAT and kind is float and math.isfinite(value))):
                value = leaf.value(value)
            converted.append((leaf, value))
        columns: dict[str, Any] = {}
        terms: dict[str, dict[str, int]] = {}
        for leaf, value in converted:
            column = leaf.kind
            if column == KIND_ORD:
                cache = dict_cache.get(leaf.dictionary)
                found = cache.get(value) if cache is not None else None
                if found is None:
                    if not limits.keyword_indexed(value, leaf.spec.params, leaf.dictionary):
                        skipped["keywords"] += 1
                        columns[leaf.path] = []
                        continue
                    found = ordinal(leaf.dictionary, value)
                columns[leaf.path] = [found]
            elif column == KIND_LEN:
                kept, dropped, counts = text_counts("" if leaf.path == uncounted else value)
                skipped["terms"] += dropped
                columns[leaf.path] = kept
                terms[leaf.path] = counts  # stored as a plain JSON object
            else:
                columns[leaf.path] = value
        return {"c": columns, "t": terms}


    def records(self, docs: list[Any], dict_cache: dict[str, dict[str, int]], skipped: dict[str, int],
                committed: Callable[[str], dict[str, int] | None], uncounted: str | None = None
                ) -> list[Batched | None]:
        """Row records of many documents at once, one field at a time; None for a document that needs
        :meth:`record` (or the generic path), which the caller runs in document order.

        Documents are grouped by their keys. Within a group each field's values
        are gathered and type-checked in C-level passes (``map``, ``set``), so a
        batch of like documents (edges, bulk rows) costs a few list operations per
        field instead of a dozen Python steps per value. Only groups whose every
        value is of its field's plain type (nothing to convert, nothing to
        refuse) take this path. Keyword values neither in ``dict_cache`` nor in
        ``committed(dictionary)`` (ordinals known to be committed, copied into
        ``dict_cache`` as ``ordinal`` would) are left to the caller as misses, in the order :meth:`record` would assign them
        ordinals, so dictionaries grow exactly as they would document by document. ``uncounted``: as for
        :meth:`record`.
        """
        out: list[Batched | None] = [None] * len(docs)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, doc in enumerate(docs):
            if type(doc) is dict:
                groups.setdefault(tuple(doc), []).append(i)
        for members in groups.values():
            if len(members) < 2:
                continue  # a lone document gains nothing from columns
            group = [docs[i] for i in members]
            fields = self._columns(group)
            if fields is None:
                continue
            for i, batched in zip(members, _group_records(fields, len(group), dict_cache, skipped, committed,
                                                          uncounted)):
                out[i] = batched
        return out

    def batch_fields(self, docs: list[Any]) -> list[tuple[Leaf, list[Any]]] | None:
        """:meth:`_columns` of a whole batch when every document is an object and every value goes to its column
        as it is (the bulk-ingest case), else None. Documents may differ in which keys they hold (an autoindex
        file's card and its sections) when one key order holds each document's keys in its own order: a missing
        key reads as None, which is what one put at a time makes of it, and each document's keyword misses keep
        their order."""
        if len(docs) < 2 or set(map(type, docs)) != {dict}:
            return None
        shapes = set(map(tuple, docs))
        if len(shapes) == 1:
            return self._columns(docs)
        order = _common_order(shapes)
        return None if order is None else self._columns(docs, order)

    def _columns(self, group: list[dict[str, Any]],
                 order: tuple[Any, ...] | None = None) -> list[tuple[Leaf, list[Any]]] | None:
        """``(leaf, values)`` per mapped field of like documents (None where a document has no value), in the
        order :meth:`_pairs` visits them; None when any value needs converting or the generic path. ``order``:
        the top-level keys when the documents' shapes differ (see :meth:`batch_fields`). A text or keyword
        field's multi-fields follow it, each with the values it indexes."""
        fields: list[tuple[Leaf, list[Any]]] = []
        stack = [(self.root, group)]
        ignores = self.ignores_unmapped
        while stack:
            level, objs = stack.pop()
            at_root = level is self.root
            shape = order if at_root and order is not None else tuple(objs[0])
            if not at_root and len(set(map(tuple, objs))) != 1:
                return None
            leaves, objects = level.leaves, level.objects
            for key in shape:
                column = [obj.get(key) for obj in objs] if at_root and order is not None \
                    else list(map(itemgetter(key), objs))
                kinds = set(map(type, column))
                leaf = leaves.get(key)
                if leaf is None:
                    nested = objects.get(key)
                    if nested is not None:
                        if kinds != {dict}:
                            return None
                        stack.append((nested, column))
                        continue
                    if ignores and self._passes_by(level, key, column, kinds):
                        continue
                    return None
                if leaf.kind == KIND_VEC:
                    return None
                kinds.discard(type(None))
                if not kinds:
                    continue
                if len(kinds) > 1 or not _plain(leaf, kinds.pop(), column):
                    return None
                fields.append((leaf, column))
                if leaf.subs:
                    subs = self._sub_columns(leaf, column)
                    if subs is None:
                        return None
                    fields.extend(subs)
        return fields

    def _sub_columns(self, leaf: Leaf, column: list[Any]) -> list[tuple[Leaf, list[Any]]] | None:
        """The columns of ``leaf``'s multi-fields fed from its string ``column``, as :func:`_add` fills them (a
        value past a sub's ``ignore_above`` is not indexed there: None); None unless every sub is a plain text
        or keyword field."""
        if leaf.convert != _AS_STR:
            return None
        found = []
        for spec in leaf.subs:
            sub = self.leaves.get(spec.path)
            if sub is None or sub.subs or sub.convert != _AS_STR or sub.kind == KIND_VEC:
                return None
            ignore_above = spec.params.get("ignore_above")
            values = column if ignore_above is None or max(map(len, filter(None, column)), default=0) <= ignore_above \
                else [None if value is None or len(value) > ignore_above else value for value in column]
            found.append((sub, values))
        return found


def _common_order(shapes: set[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """One order of every key of ``shapes`` holding each shape's keys in that shape's order, or None."""
    ordered = sorted(shapes, key=len, reverse=True)
    order = list(dict.fromkeys(key for shape in ordered for key in shape))
    position = {key: i for i, key in enumerate(order)}
    for shape in ordered:
        places = [position[key] for key in shape]
        if places != sorted(places):
            return None
    return tuple(order)


def _inert(value: Any) -> bool:
    """Does an unmapped value flatten without a refusal (no nested array, no empty or non-text key)?"""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and k and _inert(v) for k, v in value.items())
    if kind is list:
        return all(type(item) is not list and _inert(item) for item in value)
    return kind in _UNMAPPED_SCALARS


# One document's record from :meth:`WritePlan.records`, and its keyword values still to be given ordinals:
# ``(record, [(leaf, value), ...])``, the misses in the order ``record`` would have assigned them.
Batched = tuple[dict[str, Any], list[tuple[Leaf, Any]]]


def _plain(leaf: Leaf, kind: type, column: list[Any]) -> bool:
    """Do the values of ``column`` (all of type ``kind`` or None) go to the column as they are?"""
    convert = leaf.convert
    if convert == _AS_STR:
        return kind is str
    if convert == _AS_DATE:
        return kind is int
    if convert == _AS_INT:
        if kind is not int:
            return False
        present = column if None not in column else [v for v in column if v is not None]
        return leaf.low <= min(present) and max(present) <= leaf.high
    if convert == _AS_FLOAT:
        return kind is float and all(map(math.isfinite, (v for v in column if v is not None)))
    return False


def _group_records(fields: list[tuple[Leaf, list[Any]]], n: int, dict_cache: dict[str, dict[str, int]],
                   skipped: dict[str, int], committed: Callable[[str], dict[str, int] | None],
                   uncounted: str | None = None) -> list[Batched]:
    """The records of ``n`` like documents from their fields' value columns, a field at a time.

    Each field's column is converted by C-level passes (``map`` over the
    batch: one tokenizer call per text value, one dictionary lookup per
    keyword value); the per-document dicts are then zipped together once.
    Absent values (None) and keyword misses are taken out afterwards, so a
    record holds exactly what :meth:`WritePlan.record` would put in it.
    """
    paths: list[str] = []
    value_columns: list[list[Any]] = []
    text_paths: list[str] = []
    term_columns: list[list[dict[str, int]]] = []
    absent: list[tuple[int, str]] = []
    misses: dict[int, list[tuple[Leaf, Any]]] = {}
    for leaf, column in fields:
        path, kind = leaf.path, leaf.kind
        if None in column:
            absent.extend((i, path) for i, value in enumerate(column) if value is None)
        if kind == KIND_ORD:
            cache = dict_cache.setdefault(leaf.dictionary, {})
            known = committed(leaf.dictionary)
            if known:
                # A committed term's ordinal is fixed whatever the order: only new terms are left as misses.
                for value in set(column).difference(cache):
                    found = known.get(value)
                    if found is not None:
                        cache[value] = found
            ords = list(map(cache.get, column))
            if None in ords:
                for i, value, found in zip(range(n), column, ords):
                    if found is None and value is not None:
                        misses.setdefault(i, []).append((leaf, value))
                        absent.append((i, path))
            values: list[Any] = [[found] for found in ords]
        elif kind == KIND_LEN:
            tokens = column_tokens(column if path != uncounted else emptied(column), skipped)
            values = list(map(len, tokens))
            text_paths.append(path)
            term_columns.append(term_counts_many(tokens))
        else:
            values = column
        paths.append(path)
        value_columns.append(values)
    columns = [dict(zip(paths, row)) for row in zip(*value_columns)] if paths else [{} for _ in range(n)]
    terms = [dict(zip(text_paths, row)) for row in zip(*term_columns)] if text_paths else [{} for _ in range(n)]
    for i, path in absent:
        columns[i].pop(path, None)
        terms[i].pop(path, None)
    if not misses:
        return [({"c": c, "t": t}, []) for c, t in zip(columns, terms)]
    return [({"c": c, "t": t}, misses.get(i, [])) for i, (c, t) in enumerate(zip(columns, terms))]


def emptied(column: list[Any]) -> list[str | None]:
    """A counted text column as the tokenizer is to see it: each value an empty text, absent ones absent (its
    writer puts the counted terms in their place; the values themselves still feed the field's multi-fields)."""
    return [None if value is None else "" for value in column]


def text_counts(*texts: str) -> tuple[int, int, dict[str, int]]:
    """What the store keeps of a text field's values: how many of their words it indexes, how many it leaves
    out as too long to be keys, and how often each indexed word occurs (in first-seen order). A long text is
    tokenized a slice at a time (``text.slices``), so only a slice's words are ever listed at once."""
    kept = dropped = 0
    counts: dict[str, int] = {}
    for text in texts:
        for piece in slices(text):
            words, left_out = limits.indexable_terms(tokenize(piece))
            kept += len(words)
            dropped += left_out
            _count_elements(counts, words)
    return kept, dropped, counts


def column_tokens(column: list[str | None], skipped: dict[str, int]) -> list[list[str]]:
    """The indexable tokens of each text value of ``column`` (None: none), by one tokenizer pass over the
    batch; terms too long to be keys are left out and counted in ``skipped``."""
    tokens = tokenize_many([value or "" for value in column])
    longest = max(map(len, chain.from_iterable(tokens)), default=0)
    if longest * 4 > limits.MAX_TERM_BYTES:
        kept = []
        for value, found in zip(column, tokens):
            found, dropped = limits.indexable_terms(found)
            if value is not None:
                skipped["terms"] += dropped
            kept.append(found)
        tokens = kept
    return tokens


def column_postings(column: list[str | None], start: int, skipped: dict[str, int]
                    ) -> tuple[np.ndarray | list[int], PostingRun]:
    """Each text value's token count (absent values: 0) and the grouped postings of the values of ``column`` as
    rows ``start`` on: what :func:`column_tokens` and ``tailblock.postings_of_tokens`` make of it (words too
    long to be keys left out and counted in ``skipped``).

    ASCII values (most text) are tokenized as one bytes string: a
    translation table lowercases it and blanks every non-word byte, and one
    ``split`` cuts the words (about 6x the regex's pace); other values are
    tokenized one by one, in their places. Each value ends with a NUL word, so a
    word's row is the count of NULs before it; terms are numbered once and the
    (term, row) pairs counted after one stable sort by term (a 16-bit radix
    sort when the batch's terms fit). A batch where a value holds a NUL itself
    takes the per-value path.
    """
    n = len(column)
    texts = column if None not in column else [value or "" for value in column]
    if n and sum(map(len, texts)) >= COUNT_COLUMN_FROM_CHARS * n:
        return counted_postings(texts, start, skipped)
    if max(map(len, texts), default=0) > SLICE_CHARS:
        return _long_column_postings(texts, start, skipped)
    joined = " \x00 ".join(texts)
    if joined.count("\x00") != n - 1:
        tokens = column_tokens(column, skipped)
        return list(map(len, tokens)), postings_of_tokens(tokens, start)
    flat = _ascii_words(joined) if joined.isascii() else _words(texts)
    names, ranks = termrank.rank(flat)  # b"\x00" first: every word's first byte sorts after it
    if len(names) == 1:
        return np.zeros(n, np.int64), empty_run()
    long = 0
    sizes = np.fromiter(map(len, names), np.int64, len(names))
    too_long = sizes > limits.MAX_TERM_BYTES
    dropping = bool(too_long.any())
    if dropping:  # the others numbered without them, each of their words -1
        renumber = np.cumsum(~too_long, dtype=np.int32) - 1
        renumber[too_long] = -1
        ranks = renumber[ranks]
        names = list(compress(names, (~too_long).tolist()))
    ends = ranks == 0
    row = np.cumsum(ends, dtype=np.int32)  # at a word: the NULs before it, its value's row
    if dropping:
        long = int(np.count_nonzero(ranks < 0))
        skipped["terms"] += long
        lengths = np.bincount(row[ranks > 0], minlength=n)
    else:
        lengths = np.diff(np.flatnonzero(ends), prepend=-1) - 1  # every value ends with its NUL
    if len(names) == 1:
        return lengths, empty_run()
    if len(names) < (1 << 16) - 1:
        # Words in value order have their rows ascending, so a stable sort by term alone (numpy's radix sort
        # for 16-bit keys, linear) leaves each term's rows ascending: (term, row) pairs are then runs. The
        # NULs (rank 0) sort first and the words too long to be keys (-1, wrapped to the largest key) last.
        key = ranks.astype(np.uint16)
        order = np.argsort(key, kind="stable")[n:len(flat) - long]
        by_term, by_row = key[order], row[order]
        first = np.empty(len(order), bool)
        first[0] = True
        np.not_equal(by_term[1:], by_term[:-1], out=first[1:])
        first[1:] |= by_row[1:] != by_row[:-1]
        at = np.flatnonzero(first)
        term, rows = by_term[at].astype(np.int64) - 1, by_row[at].astype(np.int64)
        tfs = np.diff(at, append=len(order))
    else:
        words = ranks > 0
        pairs, tfs = np.unique((ranks[words] - 1).astype(np.int64) * n + row[words], return_counts=True)
        term, rows = np.divmod(pairs, n)
    del names[0]
    return lengths, (names, np.bincount(term, minlength=len(names)), rows + start, tfs.astype(np.float32))


def counted_postings(texts: list[str], start: int, skipped: dict[str, int]) -> tuple[np.ndarray, PostingRun]:
    """:func:`column_postings` of ``texts`` (strings; absent values as empty ones), each counted by the compiled
    word count (``text.counted_terms``, which cuts a long text a slice at a time) and the counts grouped in C."""
    found = [counted_terms(text, limits.MAX_TERM_BYTES) for text in texts]
    skipped["terms"] += sum(map(itemgetter(1), found))
    names, counts, rows, tfs = counted_run(found, np.arange(start, start + len(found)))
    return np.fromiter(map(itemgetter(0), found), np.int64, len(found)), (names, counts, rows.astype(np.int64), tfs)


def _long_column_postings(texts: list[str], start: int, skipped: dict[str, int]) -> tuple[np.ndarray, PostingRun]:
    """:func:`column_postings` of values among which some are longer than a slice (``text.SLICE_CHARS``): each
    of those counted a slice at a time (:func:`text_counts`) into a run of its own, each stretch of values
    between them by :func:`column_postings`, and the runs grouped, so no list holds a long text's every word."""
    lengths: list[np.ndarray | list[int]] = []
    runs: list[PostingRun] = []
    done = 0
    for i, text in enumerate(texts):
        if len(text) <= SLICE_CHARS:
            continue
        if done < i:
            found, run = column_postings(texts[done:i], start + done, skipped)
            lengths.append(found)
            runs.append(run)
        kept, dropped, counts = text_counts(text)
        skipped["terms"] += dropped
        lengths.append([kept])
        names = sorted(counts)  # code point order, which is UTF-8 byte order
        runs.append((list(map(str.encode, names)), np.ones(len(names), np.int64),
                     np.full(len(names), start + i, np.int64), np.fromiter(map(counts.__getitem__, names),
                                                                            np.float32, len(names))))
        done = i + 1
    if done < len(texts):
        found, run = column_postings(texts[done:], start + done, skipped)
        lengths.append(found)
        runs.append(run)
    if len(runs) == 1:
        return np.asarray(lengths[0], np.int64), runs[0]
    terms, counts, rows, tfs = group(runs)
    return np.concatenate(lengths).astype(np.int64), (terms, counts, rows.astype(np.int64), tfs)


def _ascii_words(joined: str) -> list[bytes]:
    """The words of ASCII values joined by `` \\x00 ``, lowercased, each value closed by a NUL word."""
    return ascii_words(joined + " \x00")


def _words(texts: list[str]) -> list[bytes]:
    """:func:`_ascii_words` of ``texts`` with non-ASCII ones among them: each run of ASCII values as one string,
    each other value by ``utf8_words`` (``tokenize`` as UTF-8 bytes, which sort as its code points do)."""
    flat: list[bytes] = []
    run: list[str] = []
    for text in texts:
        if text.isascii():
            run.append(text)
            continue
        if run:
            flat += _ascii_words(" \x00 ".join(run))
            run = []
        flat += utf8_words(text)
        flat.append(b"\x00")
    if run:
        flat += _ascii_words(" \x00 ".join(run))
    return flat


def _add(values: dict[str, list[Any]], leaf: Leaf, value: Any) -> None:
    converted = leaf.value(value)
    found = values.get(leaf.path)
    if found is None:
        values[leaf.path] = [converted]
    else:
        found.append(converted)
    for sub in leaf.subs:
        ignore_above = sub.params.get("ignore_above")
        if ignore_above is not None and isinstance(value, str) and len(value) > ignore_above:
            continue
        values.setdefault(sub.path, []).append(coerce(sub, value))


_CACHE: dict[bytes, WritePlan] = {}
_CACHE_MAX = 64


def plan_for(blob: bytes | None, mapping: Mapping) -> WritePlan:
    """The plan of ``mapping``, shared by every transaction that read the same stored mapping ``blob``."""
    if blob is None:
        return WritePlan(mapping)
    found = _CACHE.get(blob)
    if found is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        found = _CACHE[blob] = WritePlan(mapping)
    return found


__all__ = ["KIND_LEN", "KIND_ORD", "Leaf", "WritePlan", "plan_for"]
