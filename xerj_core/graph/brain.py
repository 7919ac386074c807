"""What a brain is: its name rules, its two indices, the one edge mapping, edge identity and instants."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import xxhash

from xerj_core import params
from xerj_core.errors import GraphError
from xerj_core.store.idmap import RESERVED_ID_PREFIX
from xerj_core.store.limits import keyword_room
from xerj_core.store.names import RESERVED_PREFIX

CONTRACT = "xerj-second-brain/1"

# One line, carried over verbatim from the contract; every surface that refuses a hop count uses it.
HOPS_CAP_REASON = (
    "hops is capped at 2: XERJ's second brain is a relationship layer over documents, not a graph database "
    "(no Cypher, no shortest-path, no variable-depth traversal). Iterate: expand again from this response's "
    "'reachable' ids."
)
# Prepended when the engine itself is asked for fewer than one hop.
HOPS_MIN_PREFIX = "hops must be at least 1. "
MAX_HOPS = 2

# Ids of the reserved prefix keep exact id-map entries, so claims are found by one ordered lookup.
META_ID = RESERVED_ID_PREFIX + "brain-meta"
META_VERSION = 1
SCHEMA_VERSION = 1
REJECTION_PREFIX = RESERVED_ID_PREFIX + "rejection-"

TRUST_DETECTED = "detected"
TRUST_ASSERTED = "asserted"
TRUST_REJECTED = "rejected"
TRUST_APPROVED = "approved"
TRUST_STATES = (TRUST_DETECTED, TRUST_ASSERTED, TRUST_REJECTED, TRUST_APPROVED)

DEFAULT_DETECTOR = "manual@1"

_EPOCH_MS = {"type": "date", "format": "epoch_millis"}

# The mapping of every edges index, written by every writer (link, unlink, the detector pipeline).
# ``src`` and ``dst`` share one ordinal dictionary so a frontier of node ids is one ordinal set for
# both directions. Unmapped fields (extra evidence keys, the meta and rejection documents' own
# fields) stay in ``_source`` only: ``dynamic: false``.
EDGE_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "edge_id": {"type": "keyword"},
        "src": {"type": "keyword", "dictionary": "nodes"},
        "dst": {"type": "keyword", "dictionary": "nodes"},
        "type": {"type": "keyword"},
        "detector": {"type": "keyword"},
        "src_file": {"type": "keyword"},
        "src_format": {"type": "keyword"},
        "dst_format": {"type": "keyword"},
        "trust": {"type": "keyword"},
        "rejection": {"type": "keyword"},
        "weight": {"type": "float"},
        "confidence": {"type": "float"},
        "valid_at": dict(_EPOCH_MS),
        "invalid_at": dict(_EPOCH_MS),
        "created_at": dict(_EPOCH_MS),
        "expired_at": dict(_EPOCH_MS),
        "schema_version": {"type": "integer"},
        "evidence": {
            "properties": {
                "quote": {"type": "text"},
                "source": {"type": "keyword"},
                "offset": {"type": "long"},
            }
        },
    },
}

_NAME_MAX = 200
_NAME_FIRST = re.compile(r"[a-z0-9]")
_NAME_REST = re.compile(r"[a-z0-9_.\-]*")


def validate_brain_name(name: Any) -> str:
    """Return ``name`` when it is a valid brain name, else raise GraphError saying which rule it breaks."""
    if not isinstance(name, str) or not name:
        raise GraphError("invalid brain name: it must be a non-empty string")
    problem = None
    if len(name) > _NAME_MAX:
        problem = f"it is {len(name)} characters long, the limit is {_NAME_MAX}"
    elif not _NAME_FIRST.fullmatch(name[0]):
        problem = "the first character must be a lowercase letter or a digit"
    elif not _NAME_REST.fullmatch(name, 1):
        problem = "only lowercase letters, digits, '_', '-' and '.' are allowed"
    elif ".." in name:
        problem = "it must not contain '..'"
    elif name.endswith("-edges"):
        problem = "it must not end in '-edges' (that suffix names the edge index of another brain)"
    if problem:
        raise GraphError(f"invalid brain name [{name}]: {problem}")
    return name


def edges_index(brain: str) -> str:
    return f"{RESERVED_PREFIX}{brain}-edges"


def nodes_index(brain: str) -> str:
    return f"{RESERVED_PREFIX}{brain}"


def edge_id(src: str, type_: str, dst: str, valid_at_ms: int) -> str:
    """The derived ``_id`` of an edge: the same claim at the same ``valid_at`` is the same document."""
    # the hex digest is the 128-bit number in 32 lowercase hex digits, made in C (a third of format's cost)
    return xxhash.xxh3_128_hexdigest(f"xg1\0{src}\0{type_}\0{dst}\0{int(valid_at_ms)}".encode())


def rejection_id(src: str, type_: str, dst: str) -> str:
    """The ``_id`` of the rejection of a claim: keyed on ``(src, type, dst)``, never on ``valid_at``."""
    return REJECTION_PREFIX + xxhash.xxh3_128_hexdigest(f"xr1\0{src}\0{type_}\0{dst}".encode())


def hops_refusal(hops: Any, *, engine_level: bool) -> GraphError | None:
    """The refusal of ``hops`` (None when it is 1 or 2); the engine names the lower bound too."""
    if isinstance(hops, int) and not isinstance(hops, bool) and 1 <= hops <= MAX_HOPS:
        return None
    if engine_level and isinstance(hops, int) and not isinstance(hops, bool) and hops < 1:
        return GraphError(HOPS_MIN_PREFIX + HOPS_CAP_REASON)
    return GraphError(HOPS_CAP_REASON)


# -- instants ----------------------------------------------------------------------------------

def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_instant(value: Any, field: str) -> int:
    """Epoch milliseconds from an epoch-ms number or RFC3339 string; the graph contract's refusal otherwise."""
    return params.instant(value, field, GraphError)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def iso_ms(ms: int) -> str:
    """An epoch-ms instant as an RFC3339 UTC string with milliseconds."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# src and dst share the edges index's "nodes" dictionary, whose keys hold this much of a node id
# (see store.limits); a longer id could not be followed by a hop, so it is refused, not stored unreachable.
MAX_NODE_ID_BYTES = keyword_room("nodes")
MAX_TYPE_BYTES = keyword_room("type")


def node_id_problem(field: str, value: str) -> str | None:
    """Why ``value`` cannot be an edge's ``field`` (src, dst or type) for its length, or None."""
    limit = MAX_TYPE_BYTES if field == "type" else MAX_NODE_ID_BYTES
    size = len(value.encode())
    if size > limit:
        return f"[{field}] is {size} bytes long; a node id or edge type holds at most {limit} bytes"
    return None
