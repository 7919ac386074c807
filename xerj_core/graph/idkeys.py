"""Edge ids as the 16-byte keys their 32 hex digits spell, and fixed sets of ids held that way.

``edge_id`` derives 32 lowercase hex digits. As the 16 bytes they spell,
big-endian so that byte order is number order, an id takes 16 bytes in a
sorted numpy array, where a Python string took about 80 and a set's slot more
(a brain of 20,000 notes stands on 266k edges), and a batch of ids is looked
up by one search of the sorted keys. Only derived ids have a key: any other id
(a brain's meta document, an edge written through the ES door) is held as the
string it is.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

import numpy as np

KEY = np.dtype("S16")
_DERIVED_ID = re.compile(r"[0-9a-f]{32}")
# each byte's value as a lowercase hex digit; 255 for any other byte (a capital, a space, a blank row's zero)
_DIGITS = np.full(256, 255, np.uint8)
_DIGITS[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)


def is_derived(eid: str) -> bool:
    """Whether ``edge_id`` could have derived ``eid`` (32 lowercase hex digits)."""
    return _DERIVED_ID.fullmatch(eid) is not None


def keys_of(ids: Sequence[str]) -> np.ndarray:
    """The key of each of ``ids``, every one derived (32 lowercase hex digits): a ``ValueError`` otherwise."""
    if not ids:
        return np.empty(0, KEY)
    joined = "".join(ids)
    if len(joined) != 32 * len(ids) or not joined.isalnum() or joined != joined.lower() \
            or max(map(len, ids)) != 32:  # the total alone would let one of 31 digits and one of 33 pass
        # fromhex skips spaces and reads capitals: neither may pass for a derived id
        raise ValueError("not every id is 32 lowercase hex digits")
    return np.frombuffer(bytes.fromhex(joined), KEY)


def derived(ids: Iterable[str]) -> tuple[list[str], np.ndarray]:
    """The ids among ``ids`` that ``edge_id`` could have derived, and their keys."""
    found = [eid for eid in ids if is_derived(eid)]
    return found, keys_of(found)


def keys_of_numbers(numbers: Iterable[int]) -> np.ndarray:
    """The keys of ids given as the 128-bit numbers they spell."""
    return np.frombuffer(b"".join(number.to_bytes(16, "big") for number in numbers), KEY)


def keys_of_text(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, spelled)`` of ids stored as text, one per row of ``rows`` (``(n, 32)`` bytes as uint8): the key
    of each row spelling 32 lowercase hex digits, in order, and which rows those are."""
    digits = _DIGITS[rows]
    spelled = (digits != 255).all(axis=1)
    digits = digits[spelled]
    keys = (digits[:, 0::2] << 4) | digits[:, 1::2]
    return np.ascontiguousarray(keys).view(KEY).reshape(-1), spelled


def ids_of_keys(keys: np.ndarray) -> list[str]:
    """The ids ``keys`` spell, as ``edge_id`` writes them."""
    text = keys.astype(KEY, copy=False).tobytes().hex()  # tobytes keeps a key's trailing zero bytes
    return [text[at:at + 32] for at in range(0, len(text), 32)]


def found_in(held: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is among the sorted keys ``held``, as booleans."""
    if not len(held) or not len(keys):
        return np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(held, keys), len(held) - 1)
    return held[at] == keys


def _distinct(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted, each once: a sort and one comparison of neighbours (``np.unique`` took 2.4x as long on
    266k keys)."""
    keys = np.sort(keys)
    keep = np.empty(len(keys), bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys if keep.all() else keys[keep]


class IdSet:
    """A fixed set of ids: the derived ones as sorted distinct keys (``keys``), any other as itself (``others``)."""

    __slots__ = ("keys", "others")

    def __init__(self, keys: np.ndarray | None = None, others: Iterable[str] = ()) -> None:
        self.keys = _distinct(keys) if keys is not None and len(keys) else np.empty(0, KEY)
        self.others = frozenset(others)

    @classmethod
    def of(cls, ids: Iterable[str]) -> "IdSet":
        """The set of ``ids`` (strings, derived or not)."""
        listed = list(ids)
        try:  # the usual list (a server's standing ids): every id derived, checked and read in one pass
            return cls(keys_of(listed))
        except ValueError:
            found, keys = derived(listed)
            return cls(keys, set(listed).difference(found))

    def __len__(self) -> int:
        return len(self.keys) + len(self.others)

    def __bool__(self) -> bool:
        return bool(len(self.keys) or self.others)

    def __iter__(self) -> Iterator[str]:
        """The ids: the derived ones in order, then the others."""
        yield from ids_of_keys(self.keys)
        yield from self.others

    def __contains__(self, eid: object) -> bool:
        if not isinstance(eid, str):
            return False
        if not is_derived(eid):
            return eid in self.others
        return bool(found_in(self.keys, keys_of([eid]))[0])

    def __or__(self, other: "IdSet") -> "IdSet":
        if len(self.keys) and len(other.keys):
            return IdSet(np.concatenate([self.keys, other.keys]), self.others | other.others)
        union = IdSet(others=self.others | other.others)
        union.keys = self.keys if len(self.keys) else other.keys  # sorted and distinct already: not sorted again
        return union

    def holds(self, keys: np.ndarray) -> np.ndarray:
        """Whether each of ``keys`` is held, as booleans."""
        return found_in(self.keys, keys)

    def __repr__(self) -> str:
        return f"IdSet({len(self.keys)} keys, {len(self.others)} others)"
