"""A sorted list of a text field's terms kept compactly: their UTF-8 joined by newlines, and where each starts.

What ``prefix`` and ``wildcard`` look through (see ``xerj_core.query.multiterm``).
A list of ``str`` costs about 60 bytes a term; this costs the term's bytes and
five more, which matters because a reader keeps one per sealed segment for as
long as the segment lives, and a search of every index (an agent's ``_all``)
lists every text field's words. A term is a run of word characters, so it
never holds a newline. Bytes sort as code points do.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

_SEP = b"\n"


class Lexicon:
    """Sorted, distinct terms: :meth:`starting_with` a prefix (a binary search), or :meth:`all` of them."""

    __slots__ = ("blob", "starts")

    def __init__(self, terms: Iterable[bytes]) -> None:
        ordered = sorted(set(terms))
        self.blob = _SEP.join(ordered)
        lengths = np.fromiter(map(len, ordered), np.int64, len(ordered))
        # each term's first byte: the lengths and separators before it
        self.starts = (np.cumsum(lengths + 1) - lengths - 1).astype(np.int32 if len(self.blob) < 1 << 31 else np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.starts.nbytes

    def _term(self, at: int) -> bytes:
        start = int(self.starts[at])
        end = self.blob.find(_SEP, start)
        return self.blob[start:] if end < 0 else self.blob[start:end]

    def all(self) -> list[str]:
        return self.blob.decode().split("\n") if len(self) else []

    def starting_with(self, prefix: str) -> list[str]:
        """The terms that start with ``prefix``, in order."""
        if not prefix:
            return self.all()
        wanted = prefix.encode()
        lo, hi = 0, len(self)
        while lo < hi:  # the first term not below the prefix
            mid = (lo + hi) // 2
            if self._term(mid) < wanted:
                lo = mid + 1
            else:
                hi = mid
        start = lo
        hi = len(self)
        while lo < hi:  # the first term past every term with the prefix
            mid = (lo + hi) // 2
            if self._term(mid).startswith(wanted):
                lo = mid + 1
            else:
                hi = mid
        if lo == start:
            return []
        begin = int(self.starts[start])
        end = int(self.starts[lo]) - 1 if lo < len(self) else len(self.blob)
        return self.blob[begin:end].decode().split("\n")
