"""Terms in C where there is a compiler (``_termrank``), else in Python: a batch's distinct terms ranked in bytes
order, the postings grouped by those ranks, and a NUL-joined run of terms made distinct.

Ranking numbers each posting's term by its place among a batch's distinct terms, which is how a write groups its
postings (``store.tailblock._ranked``, ``store.plan.column_postings``) and how ``sharedterm`` numbers a corpus's
words; the distinct run is a file's words for ``sharedterm``. The compiled loops are an optional extension (see
``setup.py``): an install without a C compiler runs the Python below, with the same answers.
``XERJ_TERMRANK_KERNEL=0`` switches the compiled loops off (for a comparison, or to rule them out);
``XERJ_REQUIRE_TERMRANK_KERNEL=1`` makes their absence an error at import (``scripts/test`` sets it, so a build
that silently left them out fails there).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

_compiled: Callable[[list[bytes]], tuple[list[bytes], bytearray]] | None
_compiled_joined: Callable[[bytes], tuple[list[bytes], bytearray]] | None
_compiled_distinct: Callable[[bytes, int, int], bytes] | None
_compiled_group: Callable[..., tuple[bytearray, bytearray, bytearray, bytearray] | None] | None
try:
    from xerj_core._termrank import distinct_joined as _compiled_distinct
    from xerj_core._termrank import group as _compiled_group
    from xerj_core._termrank import rank as _compiled
    from xerj_core._termrank import rank_joined as _compiled_joined
except ImportError:  # built without a C compiler: Python answers
    if os.environ.get("XERJ_REQUIRE_TERMRANK_KERNEL") == "1":
        raise
    _compiled = _compiled_joined = _compiled_distinct = _compiled_group = None

# Whether the compiled loops answer; a test or a benchmark may flip it to compare them with Python.
ENABLED = _compiled is not None and os.environ.get("XERJ_TERMRANK_KERNEL", "1") != "0"


def available() -> bool:
    """Whether the compiled loops were built (whatever :data:`ENABLED` says)."""
    return _compiled is not None


def rank(terms: list[bytes]) -> tuple[list[bytes], np.ndarray]:
    """The distinct ``terms`` in bytes order, and each term's place among them (int32, in ``terms``' order)."""
    if _compiled is not None and ENABLED:
        names, ranks = _compiled(terms)
        return names, np.frombuffer(ranks, np.int32)
    # Stored runs list their terms sorted, so a concatenation of them (first occurrences kept in order by
    # dict.fromkeys) is mostly sorted runs, which the sort merges instead of sorting from scratch.
    names = sorted(dict.fromkeys(terms))
    number = dict(zip(names, range(len(names))))
    return names, np.fromiter(map(number.__getitem__, terms), np.int32, len(terms))


def rank_joined(joined: bytes) -> tuple[list[bytes], np.ndarray]:
    """:func:`rank` of ``joined.split(b"\\0")``; compiled, the terms are read in place and no list of them is made."""
    if _compiled_joined is not None and ENABLED:
        names, ranks = _compiled_joined(joined)
        return names, np.frombuffer(ranks, np.int32)
    return rank(joined.split(b"\0"))


def rank_joined_packed(joined: bytes) -> tuple[bytes, np.ndarray, np.ndarray]:
    """:func:`rank_joined` with the distinct terms as one bytes object of them end to end and their bounds in it
    (int64, one more than the terms) instead of a list: no object per term, for a caller that reads few of them."""
    if _compiled_joined is not None and ENABLED:
        (names, bounds), ranks = _compiled_joined(joined, True)
        return names, np.frombuffer(bounds, np.int64), np.frombuffer(ranks, np.int32)
    listed, ranks = rank(joined.split(b"\0"))
    bounds = np.zeros(len(listed) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, listed), np.int64, len(listed)), out=bounds[1:])
    return b"".join(listed), bounds, ranks


def distinct_joined(joined: bytes, shortest: int, longest: int) -> bytes:
    """The NUL-separated terms of ``joined`` of ``shortest`` to ``longest`` bytes, each once in order of first
    appearance, NUL-joined; compiled, no object is made per term."""
    if _compiled_distinct is not None and ENABLED:
        return _compiled_distinct(joined, shortest, longest)
    return b"\0".join(dict.fromkeys(term for term in joined.split(b"\0") if shortest <= len(term) <= longest))


def group(ids: np.ndarray, rows: np.ndarray, tfs: np.ndarray | None, starts: np.ndarray, names: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray] | None:
    """Postings grouped by (part, term) in one counting sort in C: each group's key (``part * names + rank``,
    ascending), the rows (int32) and frequencies (float32; None when ``tfs`` is: rows grouped alone) in group
    order, each group's postings in their order, and the groups' bounds. ``ids`` are the postings' term ranks
    (below ``names``), ``starts`` the parts' first rows. None when the compiled loops are off, or a rank or row is
    outside the keys: the caller groups then."""
    if _compiled_group is None or not ENABLED:
        return None
    found = _compiled_group(np.ascontiguousarray(ids, np.int32), np.ascontiguousarray(rows, np.int32),
                            None if tfs is None else np.ascontiguousarray(tfs, np.float32),
                            np.ascontiguousarray(starts, np.int64), names)
    if found is None:
        return None
    keys, rows, tfs, bounds = found
    return (np.frombuffer(keys, np.int64), np.frombuffer(rows, np.int32),
            None if tfs is None else np.frombuffer(tfs, np.float32), np.frombuffer(bounds, np.int64))


def describe() -> dict[str, Any]:
    """What a benchmark prints about the term loops in use."""
    return {"compiled": _compiled is not None, "enabled": ENABLED}
