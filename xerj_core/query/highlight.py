"""ES ``highlight`` on search hits: fragments of text fields around the query's words, the words tagged."""

from __future__ import annotations

import html
import re
from typing import Any, Iterator

import attrs

from xerj_core.errors import IllegalArgument, ParsingError
from xerj_core.query import dsl, multiterm
from xerj_core.query.dsl import Node, as_int
from xerj_core.text import WORD as _WORD, fold, paired_letters, tokenize, word_spans
_FIELD_KEYS = {"fragment_size", "number_of_fragments", "pre_tags", "post_tags", "no_match_size", "type"}
_TOP_KEYS = _FIELD_KEYS | {"fields", "encoder", "require_field_match", "order"}


@attrs.frozen
class FieldSpec:
    """One entry of ``highlight.fields``: a field name or ``*`` pattern and its options (``None``: the top level's)."""

    pattern: str
    fragment_size: int | None = None
    number_of_fragments: int | None = None
    pre_tags: tuple[str, ...] | None = None
    post_tags: tuple[str, ...] | None = None
    no_match_size: int | None = None


@attrs.frozen
class Highlight:
    """A parsed ``highlight`` body. ES defaults: ``<em>``/``</em>``, 100-character fragments, 5 of them."""

    fields: tuple[FieldSpec, ...]
    fragment_size: int = 100
    number_of_fragments: int = 5
    pre_tags: tuple[str, ...] = ("<em>",)
    post_tags: tuple[str, ...] = ("</em>",)
    no_match_size: int = 0
    encoder: str = "default"
    require_field_match: bool = True
    order: str = "none"


def _tags(value: Any, what: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, str) for item in items):
        raise ParsingError(f"[highlight] [{what}] must be a string or a non-empty list of strings")
    return tuple(items)


def _options(body: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("fragment_size", "number_of_fragments", "no_match_size"):
        if key in body:
            value = as_int(body[key], f"{where}.{key}")
            if value < 0:
                raise IllegalArgument(f"[{where}.{key}] must be zero or more, got [{value}]")
            out[key] = value
    for key in ("pre_tags", "post_tags"):
        if key in body:
            out[key] = _tags(body[key], key)
    if body.get("type", "plain") not in ("plain", "unified", "fvh"):
        raise IllegalArgument(f"[{where}.type] unknown highlighter [{body['type']}]")
    return out


def parse_highlight(value: Any) -> Highlight:
    """Validate a ``highlight`` body (``fields`` as an object or a list of one-key objects)."""
    if not isinstance(value, dict):
        raise ParsingError("[highlight] must be an object")
    unknown = sorted(set(value) - _TOP_KEYS)
    if unknown:
        raise ParsingError(f"[highlight] unknown field [{unknown[0]}]")
    raw = value.get("fields")
    if isinstance(raw, list):
        entries: list[tuple[str, Any]] = []
        for item in raw:
            if not isinstance(item, dict) or len(item) != 1:
                raise ParsingError("[highlight] [fields] list entries must each be an object with one field")
            entries.extend(item.items())
    elif isinstance(raw, dict):
        entries = list(raw.items())
    else:
        raise ParsingError("[highlight] requires [fields], an object of field names to options")
    fields = []
    for name, options in entries:
        options = options or {}
        if not isinstance(options, dict):
            raise ParsingError(f"[highlight] options of field [{name}] must be an object")
        unknown = sorted(set(options) - _FIELD_KEYS)
        if unknown:
            raise ParsingError(f"[highlight] unknown field [{unknown[0]}] for field [{name}]")
        fields.append(FieldSpec(pattern=name, **_options(options, f"highlight.fields.{name}")))
    top = _options(value, "highlight")
    encoder = value.get("encoder", "default")
    if encoder not in ("default", "html"):
        raise IllegalArgument(f"[highlight.encoder] must be [default] or [html], got [{encoder}]")
    order = value.get("order", "none")
    if order not in ("none", "score"):
        raise IllegalArgument(f"[highlight.order] must be [none] or [score], got [{order}]")
    return Highlight(fields=tuple(fields), encoder=encoder, order=order,
                     require_field_match=bool(value.get("require_field_match", True)), **top)


# What a field's clauses look for: a word, a phrase (a tuple of two words or more, marked only side by side; a
# phrase prefix's last is a pattern), or a pattern (``prefix`` or ``wildcard``: each word it matches).
Sought = set["str | tuple[str | dsl.Pattern, ...] | dsl.Pattern"]


def query_terms(*nodes: Node | None) -> dict[str | None, Sought]:
    """The analyzed words, phrases and patterns each field's full-text clauses look for; key ``None`` is "any
    field" (``multi_match`` without fields)."""
    out: dict[str | None, Sought] = {}
    for item in (found for node in nodes if node is not None for found in _positive(node)):
        if isinstance(item, dsl.Pattern):
            out.setdefault(item.field, set()).add(_lowered(item))
            continue
        if isinstance(item, dsl.FieldsPattern):
            pattern = dsl.Pattern("wildcard", "", fold(item.value))
            for field in [None] if item.fields is None else [field for field, _boost in item.fields]:
                out.setdefault(field, set()).add(pattern)
            continue
        if not isinstance(item, (dsl.Match, dsl.MatchPhrase, dsl.MatchBoolPrefix, dsl.MultiMatch)) or \
                not isinstance(item.query, str):
            continue
        words: list[Any] = tokenize(item.query)
        kind = item.type if isinstance(item, dsl.MultiMatch) else None
        if words and (getattr(item, "prefix", False) or isinstance(item, dsl.MatchBoolPrefix)
                      or kind in ("phrase_prefix", "bool_prefix")):
            words[-1] = dsl.Pattern("prefix", "", words[-1])  # the word being typed
        phrase = isinstance(item, dsl.MatchPhrase) or kind in ("phrase", "phrase_prefix")
        sought: Sought = {tuple(words)} if phrase and len(words) > 1 else set(words)
        if isinstance(item, dsl.MultiMatch):
            for pattern in [None] if item.fields is None else [pattern for pattern, _boost in item.fields]:
                out.setdefault(pattern, set()).update(sought)
        else:
            out.setdefault(item.field, set()).update(sought)
    return out


def _lowered(pattern: dsl.Pattern) -> dsl.Pattern:
    return attrs.evolve(pattern, value=fold(pattern.value)) if pattern.lowercase_for_text else pattern


def _positive(node: Node) -> Iterator[Node]:
    """Every clause that can match, leaving out ``must_not`` (a word it excludes is never highlighted)."""
    yield node
    if isinstance(node, dsl.Bool):
        for child in (*node.must, *node.filter, *node.should):
            yield from _positive(child)
    elif isinstance(node, dsl.DisMax):
        for child in node.queries:
            yield from _positive(child)
    elif isinstance(node, dsl.ConstantScore):
        yield from _positive(node.filter)
    elif isinstance(node, dsl.Hybrid):
        for child in node.legs:
            yield from _positive(child)


def _string_fields(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield prefix, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from _string_fields(inner, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for inner in value:
            yield from _string_fields(inner, prefix)


def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern)))


def _words_for(field: str, terms: dict[str | None, Sought], require_field_match: bool) -> Sought:
    words = set(terms.get(None, ()))
    for pattern, found in terms.items():
        if pattern is None:
            continue
        if not require_field_match or _pattern(pattern).fullmatch(field):
            words |= found
    return words


def highlight_hit(source: Any, spec: Highlight, terms: dict[str | None, Sought]) -> dict[str, list[str]]:
    """The ``highlight`` object of one hit: field name to its tagged fragments; fields with no match are left out."""
    out: dict[str, list[str]] = {}
    if not isinstance(source, dict):
        return out
    for field_spec in spec.fields:
        matcher = _pattern(field_spec.pattern)
        for field, text in _string_fields(source):
            if field in out or not matcher.fullmatch(field):
                continue
            words = _words_for(field, terms, spec.require_field_match)
            fragments = _fragments(text, words, field_spec, spec)
            if fragments:
                out.setdefault(field, []).extend(fragments)
    return out


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def _fragments(text: str, words: Sought, field: FieldSpec, spec: Highlight) -> list[str]:
    size = _pick(field.fragment_size, spec.fragment_size)
    count = _pick(field.number_of_fragments, spec.number_of_fragments)
    pre = _pick(field.pre_tags, spec.pre_tags)
    post = _pick(field.post_tags, spec.post_tags)
    no_match = _pick(field.no_match_size, spec.no_match_size)
    hits = _marks(text, words) if words else []
    if not hits:
        return [_encode(text[:no_match], spec)] if no_match else []
    if count == 0:
        windows = [(0, len(text), hits)]
    else:
        windows = []
        for start, end in hits:
            if windows and start < windows[-1][1]:
                lo, hi, marks = windows[-1]
                windows[-1] = (lo, max(hi, end), marks + [(start, end)])
                continue
            # Centre the fragment on the word, then widen it to word boundaries so no word is cut in two.
            lo = max(0, start - max(0, size - (end - start)) // 2)
            if windows:
                lo = max(lo, windows[-1][1])
            while lo > 0 and text[lo - 1].isalnum() and lo < start:
                lo -= 1
            hi = min(len(text), max(end, lo + size))
            while hi < len(text) and text[hi - 1].isalnum() and text[hi].isalnum():
                hi += 1
            windows.append((lo, hi, [(start, end)]))
        if spec.order == "score":
            windows.sort(key=lambda w: -len(w[2]))
        windows = windows[:count]
    out = []
    for lo, hi, marks in windows:
        parts, cursor = [], lo
        for n, (start, end) in enumerate(marks):
            tag = n % len(pre)
            parts.append(_encode(text[cursor:start], spec))
            parts.append(pre[tag] + _encode(text[start:end], spec) + post[min(tag, len(post) - 1)])
            cursor = end
        parts.append(_encode(text[cursor:hi], spec))
        out.append("".join(parts).strip())
    return out


def _marks(text: str, sought: Sought) -> list[tuple[int, int]]:
    """The spans of ``text``'s words to mark, in order: each sought word wherever it is, each word of a sought
    phrase only where the whole phrase lies side by side (as ``match_phrase`` finds it)."""
    phrases = [item for item in sought if isinstance(item, tuple)]
    tests = [multiterm.pattern_test(item) for item in sought if isinstance(item, dsl.Pattern)]
    wanted = (lambda word: word in sought or any(test(word) for test in tests)) if tests else sought.__contains__
    if not phrases and not paired_letters(text):  # words alone: no list of every word of a long text
        return [m.span() for m in _WORD.finditer(text) if wanted(fold(m.group()))]
    found = word_spans(text)
    marked = {at for at, (_span, word) in enumerate(found) if wanted(word)}
    for phrase in phrases:
        size = len(phrase)
        # a word of the phrase, or its last being typed (a phrase prefix's pattern)
        fits = [item.__eq__ if isinstance(item, str) else multiterm.pattern_test(item) for item in phrase]
        for at in range(len(found) - size + 1):
            if fits[0](found[at][1]) and all(fits[i](found[at + i][1]) for i in range(1, size)):
                marked.update(range(at, at + size))
    return _joined([found[at][0] for at in sorted(marked)])


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (in order) with each run of overlapping ones made one: the pairs a run of CJK or Thai letters
    is cut into overlap, and a text's letters are marked once."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def _encode(text: str, spec: Highlight) -> str:
    return html.escape(text, quote=True) if spec.encoder == "html" else text
