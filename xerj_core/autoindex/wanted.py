"""The edge ids a run wants, held as 16-byte keys (see :mod:`xerj_core.graph.idkeys`) in a sorted array that grows.

A reconcile wants every edge its detection teaches (so that the live edges it
does not want are retired): one id per claim, 266k on 20,000 generated notes.
As a set of 128-bit Python ints they took about 60 bytes each (16 MB there,
alive through every edge write, where the first run's peak lies); as keys they
take 16, and a batch of drafts is checked and added by numpy passes (a search
of the sorted keys, one insertion). Only ids ``edge_id`` derives have a key:
any other id is never wanted.
"""

from __future__ import annotations

import numpy as np

from xerj_core.graph.idkeys import KEY, found_in


class WantedIds:
    """A set of keys (see :func:`~xerj_core.graph.idkeys.keys_of`): a sorted array, and a small sorted one of
    the latest additions that joins it once it holds an eighth as many, so that a run's additions cost a few
    copies of the whole, not one per batch."""

    # the latest additions held apart up to this many, or an eighth of the rest
    RECENT = 4096

    def __init__(self) -> None:
        self._keys = np.empty(0, KEY)
        self._recent = np.empty(0, KEY)

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def holds(self, keys: np.ndarray) -> np.ndarray:
        """Whether each of ``keys`` is held, as booleans."""
        return found_in(self._keys, keys) | found_in(self._recent, keys)

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


def _inserted(held: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Sorted ``held`` with sorted ``keys`` (none of them held) put in their places: one copy."""
    return np.insert(held, np.searchsorted(held, keys), keys)
