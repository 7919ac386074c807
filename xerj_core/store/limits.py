"""What the key layout can index: the byte limits on terms, keyword values and field names, applied at write.

Every term, keyword value and field name becomes part of an LMDB key, and an
LMDB key holds at most 511 bytes (``MDB_MAXKEYSIZE``). A posting key spends 12
bytes on the index and segment numbers, then the field path, a NUL and the
term; a dictionary key spends 4 bytes, the dictionary name, a NUL and the
value. Bounding the field path and the term so that both fit means no value a
document carries can make a write raise from LMDB:

- a text term longer than :data:`MAX_TERM_BYTES` is not indexed (Lucene skips
  terms over its 32,766-byte limit the same way; ours is smaller because it is
  a key); the document keeps it in ``_source`` and its other words stay
  searchable, and the index counts what it skipped;
- a keyword value longer than its field's ``ignore_above`` (characters, as in
  Elasticsearch), or too long to fit a dictionary key beside its dictionary's
  name (:func:`keyword_room`: 501 bytes for the edges' node dictionary, at least
  306 for any field), is not indexed either: it stays in ``_source`` and has no
  doc value, exactly like ``ignore_above``;
- a field path longer than :data:`MAX_FIELD_BYTES` is refused with a 400, as
  Elasticsearch refuses names over ``index.mapping.field_name_length.limit``.
"""

from __future__ import annotations

from typing import Any, Iterable

from xerj_core.errors import MapperParsingError

LMDB_MAX_KEY_BYTES = 511
# Elasticsearch allows 512 bytes; an id key spends 4 on the index number.
MAX_ID_BYTES = LMDB_MAX_KEY_BYTES - 4
MAX_TERM_BYTES = 256
MAX_FIELD_BYTES = 200
# The widest key prefix: index number, segment start, field path, NUL separator.
assert 4 + 8 + MAX_FIELD_BYTES + 1 + MAX_TERM_BYTES <= LMDB_MAX_KEY_BYTES


def term_fits(term: str) -> bool:
    """Whether a text term is short enough to be a key (cheap: a character count bounds the bytes)."""
    return len(term) * 4 <= MAX_TERM_BYTES or len(term.encode()) <= MAX_TERM_BYTES


def indexable_terms(tokens: list[str]) -> tuple[list[str], int]:
    """``tokens`` without the ones too long to index, and how many were left out."""
    if not tokens or max(map(len, tokens)) * 4 <= MAX_TERM_BYTES:  # the common case, one C-level pass
        return tokens, 0
    kept = [t for t in tokens if term_fits(t)]
    return kept, len(tokens) - len(kept)


def keyword_room(dictionary: str) -> int:
    """The longest keyword value (bytes) a dictionary key of ``dictionary`` holds: index number, name, NUL, value."""
    return LMDB_MAX_KEY_BYTES - 4 - len(dictionary.encode()) - 1


def keyword_sure_chars(params: dict[str, Any], dictionary: str) -> int:
    """The length in characters up to which any string gets a doc value (:func:`keyword_indexed` is true for it
    without encoding it): within ``ignore_above``, and four bytes a character within the key's room."""
    ignore_above = params.get("ignore_above")
    room = keyword_room(dictionary) // 4
    return min(room, ignore_above) if isinstance(ignore_above, int) else room


def keyword_indexed(value: Any, params: dict[str, Any], dictionary: str) -> bool:
    """Whether a keyword value gets a doc value: within ``ignore_above`` characters and its key's room."""
    if not isinstance(value, str):
        return True
    ignore_above = params.get("ignore_above")
    if isinstance(ignore_above, int) and len(value) > ignore_above:
        return False
    room = keyword_room(dictionary)
    return len(value) * 4 <= room or len(value.encode()) <= room


def check_field_paths(paths: Iterable[str]) -> None:
    """Refuse a document whose field path could not be part of a key."""
    for path in paths:
        if len(path) * 4 > MAX_FIELD_BYTES and len(path.encode()) > MAX_FIELD_BYTES:
            raise MapperParsingError(f"Field name [{path[:60]}...] is longer than the limit of "
                                     f"[{MAX_FIELD_BYTES}] bytes")


__all__ = ["MAX_FIELD_BYTES", "MAX_ID_BYTES", "MAX_TERM_BYTES", "check_field_paths", "indexable_terms",
           "keyword_indexed", "keyword_room", "keyword_sure_chars", "term_fits"]
