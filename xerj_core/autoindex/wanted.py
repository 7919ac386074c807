"""The edge ids a run wants, held as 16-byte keys in one sorted array rather than as a set of Python numbers.

A reconcile wants every edge its detection teaches (so that the live edges it
does not want are retired): one id per claim, 266k on 20,000 generated notes.
As a set of 128-bit Python ints they took about 60 bytes each (16 MB there,
alive through every edge write, where the first run's peak lies); as the 16
bytes each id's 32 hex digits spell, big-endian so that byte order is number
order, they take 16, and a batch of drafts is checked and added by numpy
passes (a search of the sorted keys, one insertion). Only ids ``edge_id``
derives (32 lowercase hex digits) have a key: any other id is never wanted.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np

KEY = np.dtype("S16")
_DERIVED_ID = re.compile(r"[0-9a-f]{32}")


def is_derived(eid: str) -> bool:
    """Whether ``edge_id`` could have derived ``eid`` (32 lowercase hex digits)."""
    return _DERIVED_ID.fullmatch(eid) is not None


def keys_of(ids: Sequence[str]) -> np.ndarray:
    """The key of each of ``ids``, every one derived (32 lowercase hex digits): a ``ValueError`` otherwise."""
    if not ids:
        return np.empty(0, KEY)
    joined = "".join(ids)
    if len(joined) != 32 * len(ids) or not joined.isalnum() or joined != joined.lower():
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


class WantedIds:
    """A set of keys (see :func:`keys_of`): a sorted array, and a small sorted one of the latest additions that
    joins it once it holds an eighth as many, so that a run's additions cost a few copies of the whole, not one
    per batch."""

    # the latest additions held apart up to this many, or an eighth of the rest
    RECENT = 4096

    def __init__(self) -> None:
        self._keys = np.empty(0, KEY)
        self._recent = np.empty(0, KEY)

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def holds(self, keys: np.ndarray) -> np.ndarray:
        """Whether each of ``keys`` is held, as booleans."""
        return _found(self._keys, keys) | _found(self._recent, keys)

    def add(self, keys: np.ndarray) -> None:
        """Hold ``keys`` too (any order; duplicates and keys held already are held once)."""
        keys = np.unique(keys)
        self._hold(keys[~self.holds(keys)])

    def take_new(self, keys: np.ndarray) -> np.ndarray:
        """For each of ``keys`` in order, whether it is neither held nor met earlier in ``keys`` (the positions a
        run that wanted them one at a time would have added); those are held from now on."""
        distinct, first = np.unique(keys, return_index=True)
        fresh = ~self.holds(distinct)
        new = np.zeros(len(keys), bool)
        new[first[fresh]] = True
        self._hold(distinct[fresh])
        return new

    def _hold(self, keys: np.ndarray) -> None:
        """Hold ``keys``: sorted, distinct and none held yet."""
        if not len(keys):
            return
        self._recent = _inserted(self._recent, keys)
        if len(self._recent) > max(self.RECENT, len(self._keys) // 8):
            self._keys, self._recent = _inserted(self._keys, self._recent), np.empty(0, KEY)

    def numbers(self) -> set[int]:
        """The ids held, as the 128-bit numbers they spell (for a check: a run never lists them)."""
        halves = np.concatenate([self._keys, self._recent]).view(">u8").reshape(-1, 2).tolist()
        return {(hi << 64) | lo for hi, lo in halves}


def _found(held: np.ndarray, keys: np.ndarray) -> np.ndarray:
    if not len(held) or not len(keys):
        return np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(held, keys), len(held) - 1)
    return held[at] == keys


def _inserted(held: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Sorted ``held`` with sorted ``keys`` (none of them held) put in their places: one copy."""
    return np.insert(held, np.searchsorted(held, keys), keys)
