"""Which hop loop runs: the compiled one (``_hoprun``) when it was built and not switched off, else numpy's passes.

The compiled loop is an optional extension (see ``setup.py``): an install without a C compiler has numpy's
passes alone, which give the same answers. ``XERJ_HOP_KERNEL=0`` switches the compiled loop off (for a
comparison, or to rule it out); ``XERJ_REQUIRE_HOP_KERNEL=1`` makes its absence an error at import (CI sets it,
so a build that silently left it out fails there).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

_compiled: Callable[..., tuple[bytearray, bytearray, int, int]] | None
try:
    from xerj_core.graph._hoprun import runs as _compiled
except ImportError:  # built without a C compiler: numpy's passes answer
    if os.environ.get("XERJ_REQUIRE_HOP_KERNEL") == "1":
        raise
    _compiled = None

_NONE = np.empty(0, np.int64)

# Whether hops read their runs with the compiled loop; a test or a benchmark may flip it to compare the two.
ENABLED = _compiled is not None and os.environ.get("XERJ_HOP_KERNEL", "1") != "0"


def available() -> bool:
    """Whether the compiled loop was built (whatever :data:`ENABLED` says)."""
    return _compiled is not None


def read_runs(off: np.ndarray, packed: np.ndarray, frontier: np.ndarray, *, previous: np.ndarray | None,
              low: int, inbit: int, alive_from: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The entries of each ``frontier`` node's run ``packed[off[n]:off[n + 1]]``, in frontier order, less the
    edges met before and the expired: ``(their places, their packed entries, how many the expiry withheld)``.

    Met before: an edge whose far end (``entry & low``) is in ``previous`` (sorted), and, with ``inbit``
    non-zero (a both-ways run), an in-edge whose far end is in the frontier (that node's out-edge). Expired:
    an entry below ``alive_from`` (0 withholds none). ``frontier`` is sorted int64, each node below
    ``len(off) - 1``. Only call it when :data:`ENABLED`."""
    assert _compiled is not None
    places, entries, _kept, expired = _compiled(
        off, packed, np.ascontiguousarray(frontier, np.int64),
        _NONE if previous is None else np.ascontiguousarray(previous, np.int64), low, inbit, alive_from)
    return np.frombuffer(places, np.int64), np.frombuffer(entries, packed.dtype), expired


def describe() -> dict[str, Any]:
    """What a benchmark prints about the hop loop in use."""
    return {"compiled": _compiled is not None, "enabled": ENABLED}
