"""A memory's review state over system time: each decision it replaces is kept, and the state known at an instant.

A review decision (approve, reject) rewrites the memory's review fields:
``trust``, ``reviewed_by``, ``reviewed_at`` and ``review_note``. The state it
replaces is first appended to the memory's ``review_history`` with
``superseded_at``, so the state recorded at ``reviewed_at`` (or at
``stored_at`` before any review) holds over ``[recorded, superseded_at)``.
Text and embeddings never change in a review, so ranking at ``known_at`` is
today's ranking; only the trust filter and what a hit shows depend on the
instant. The history lives in the memory's own ``_source`` because it is a
handful of small entries read only for the few memories reviewed after
``known_at``; a separate index would cost a read per memory for nothing.

A memory reviewed before the history existed knows only its last decision;
before it, the memory counts as ``asserted``, as every stored memory starts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xerj_core.graph.brain import TRUST_ASSERTED
from xerj_core.memory.namespace import FORGOTTEN_AT, STORED_AT, TRUST
from xerj_core.store import IndexReader

REVIEW_HISTORY = "review_history"
REVIEWED_AT = "reviewed_at"
REVIEW_FIELDS = (TRUST, "reviewed_by", REVIEWED_AT, "review_note")
SUPERSEDED_AT = "superseded_at"


def restamp(source: dict[str, Any], stamp: dict[str, Any], at: int) -> dict[str, Any]:
    """``source`` with its review fields replaced by ``stamp``; the state replaced is kept in ``review_history``."""
    previous = {field: source[field] for field in REVIEW_FIELDS if source.get(field) is not None}
    previous.setdefault(TRUST, TRUST_ASSERTED)
    previous[SUPERSEDED_AT] = at
    updated = {k: v for k, v in source.items() if k not in REVIEW_FIELDS}
    updated[REVIEW_HISTORY] = [*source.get(REVIEW_HISTORY, []), previous]
    updated.update(stamp)
    return updated


def _recorded(state: dict[str, Any], source: dict[str, Any]) -> int:
    reviewed = state.get(REVIEWED_AT)
    return reviewed if isinstance(reviewed, int) else source.get(STORED_AT) or 0


def _changed_after(source: dict[str, Any], known_at: int) -> bool:
    reviewed = source.get(REVIEWED_AT)
    return isinstance(reviewed, int) and reviewed > known_at


def state_at(source: dict[str, Any], known_at: int) -> dict[str, Any]:
    """The review fields of ``source`` as they stood at system time ``known_at``."""
    if not _changed_after(source, known_at):
        return {field: source[field] for field in REVIEW_FIELDS if source.get(field) is not None}
    for entry in source.get(REVIEW_HISTORY, []):
        if _recorded(entry, source) <= known_at < entry.get(SUPERSEDED_AT, 0):
            return {field: entry[field] for field in REVIEW_FIELDS if entry.get(field) is not None}
    return {TRUST: TRUST_ASSERTED}


def as_known_at(source: dict[str, Any], known_at: int) -> dict[str, Any]:
    """``source`` as the namespace held it at ``known_at``: that instant's review state, nothing stamped later."""
    forgotten = source.get(FORGOTTEN_AT)
    if not _changed_after(source, known_at) and not (isinstance(forgotten, int) and forgotten > known_at):
        return source
    out = {k: v for k, v in source.items() if k not in REVIEW_FIELDS and k != REVIEW_HISTORY}
    out.update(state_at(source, known_at))
    earlier = [e for e in source.get(REVIEW_HISTORY, []) if e.get(SUPERSEDED_AT, 0) <= known_at]
    if earlier:
        out[REVIEW_HISTORY] = earlier
    if isinstance(forgotten, int) and forgotten > known_at:
        del out[FORGOTTEN_AT]
    return out


def reviewed_after(reader: IndexReader, known_at: int) -> np.ndarray:
    """Rows whose current review state was recorded after ``known_at`` (the only ones whose trust then differs)."""
    if reader.field(REVIEWED_AT) is None:
        return np.zeros(reader.n_rows, bool)
    column = reader.column(REVIEWED_AT)
    return column.present & (column.values.astype(np.int64) > known_at)
