"""Which drafts continue which live edges, remembered from one run to the next so a continued claim is compared once.

An edge's id is derived from its claim and its ``valid_at`` (the file's
mtime), so a file edited without changing a link drafts that link under a new
id. The reconcile then finds the live edge making the same claim and keeps it
(``pipeline._continued``), but that takes reading the edge's document. The
draft keeps its new id for as long as the file keeps its mtime, so without a
memory of the match every later run read and compared the same claims again:
on 10,000 notes touched anew (a checkout, a copy: every file's mtime moved),
each run after compared all 133,355 claims, and a one-note edit took 4.6-5.3 s
instead of 3.3-3.5; in a folder lived in for a while, every note once edited
joined them.

This keeps, per folder, brain and server, the pairs (draft id, live id) the
last run found, in the parse cache's detections environment (a cache: lost,
it costs one comparison again). A pair is used only while its live edge is
still live, and never for a detector whose version changed (its edges are
renewed, not continued): a draft whose id stands remembered settles as a draft
whose id equals a live edge's already does, by identity alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from xerj_core.graph.idkeys import IdSet, is_derived, keys_of

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.graph.draftcolumns import DraftColumns

# An id as the two big-endian 64-bit halves its 32 hex digits spell; remembered ones are looked up by their first
# half (sorted), the second checked after: two ids sharing a first half cost one comparison again, never a wrong one.
_HALVES = np.dtype(">u8")


def _halves(keys: np.ndarray) -> np.ndarray:
    """Ids' keys (see :mod:`xerj_core.graph.idkeys`) as an ``(n, 2)`` array of native 64-bit halves."""
    return keys.view(_HALVES).astype(np.uint64).reshape(-1, 2)


def _positions(known: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each row of ``wanted``, its row in ``known`` (sorted by first half), or -1 when absent."""
    if not len(known) or not len(wanted):
        return np.full(len(wanted), -1, np.int64)
    at = np.minimum(np.searchsorted(known[:, 0], wanted[:, 0]), len(known) - 1)
    return np.where((known[at] == wanted).all(axis=1), at, -1)


def _numbers(halves: np.ndarray) -> list[int]:
    return [(hi << 64) | lo for hi, lo in halves.tolist()]


class Continuations:
    """The remembered pairs a run may settle drafts by, and the pairs it found or used, for the next run."""

    def __init__(self, drafts: np.ndarray, lives: np.ndarray, dropped: int = 0) -> None:
        self._dropped = dropped  # pairs recalled whose edge is no longer live: the next run need not see them
        order = np.argsort(drafts[:, 0], kind="stable")
        self._drafts, self._lives = drafts[order], lives[order]
        self._used = np.zeros(len(self._drafts), bool)
        # the pairs found this run, as the 32 bytes they spell each (a run may find one for each of its claims)
        self._found = bytearray()

    @classmethod
    def recalled(cls, blob: bytes | None, live: IdSet) -> "Continuations":
        """The pairs ``blob`` holds (as :meth:`dumps` wrote them) whose live edge is among ``live`` ids."""
        blob = blob or b""
        if len(blob) % 32:
            blob = b""  # not one this module wrote: nothing remembered
        pairs = np.frombuffer(blob, _HALVES).astype(np.uint64).reshape(-1, 4)
        drafts, lives = pairs[:, :2], pairs[:, 2:]
        if len(pairs):
            # the keys' order is their first halves' (the halves are big-endian): sorted as _positions wants
            standing = _halves(live.keys)
            held = _positions(standing, lives) >= 0
            drafts, lives = drafts[held], lives[held]
        return cls(drafts, lives, len(pairs) - len(drafts))

    def __len__(self) -> int:
        return len(self._drafts)

    def settle(self, drafts: "DraftColumns", retagged: frozenset[str]) -> tuple["DraftColumns", list[int]]:
        """``drafts`` without those remembered to continue a live edge, and the numbers of the edges they
        continue. A draft of a ``retagged`` detector is left in: its claim is compared (and renewed) anew."""
        if not len(self._drafts) or not len(drafts):
            return drafts, []
        found = _positions(self._drafts, _halves(keys_of(drafts.ids)))
        if retagged:
            found[[detector in retagged for detector in drafts.detector]] = -1
        hit = found >= 0
        if not hit.any():
            return drafts, []
        self._used[found[hit]] = True
        return drafts.where((~hit).tolist()), _numbers(self._lives[found[hit]])

    def found(self, draft_id: str, live_id: str) -> None:
        """Remember that the draft ``draft_id`` was found to continue the live edge ``live_id``."""
        if is_derived(draft_id) and is_derived(live_id):
            self._found += bytes.fromhex(draft_id + live_id)

    def dumps(self) -> bytes | None:
        """What to keep for the next run: the pairs this run used or found; None when that is what was recalled
        (nothing to write)."""
        if not self._found and not self._dropped and self._used.all():
            return None
        found = np.frombuffer(bytes(self._found), _HALVES).astype(np.uint64).reshape(-1, 4)
        kept = np.concatenate([np.hstack([self._drafts[self._used], self._lives[self._used]]), found])
        return kept.astype(_HALVES).tobytes()
