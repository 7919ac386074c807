"""The on-disk format version of an LMDB data directory: stamped when the environment opens, a newer one refused.

LMDB gives no schema of its own, so a data directory says which layout of
keys and values it holds in one record of the ``aux`` database. Code that
reads an older format upgrades the stamp as it opens (it reads every older
layout, and what it writes from then on is in its own); code that meets a
newer format stops before it reads or writes anything, naming both versions,
because guessing at records it does not know would lose data silently.
"""

from __future__ import annotations

import struct
from typing import Any

from xerj_core.errors import StoreFormatUnsupported

# 1: a JSON record per tail row (every data directory written before the stamp existed).
# 2: the tail as binary blocks, one per write transaction (store/tailblock.py).
# 3: a dictionary created from now on finds its terms' ordinals through runs of term hashes (store/dictruns.py);
#    code of format 2 would look its terms up in the per-term entries, find none, and number them again.
# 4: sealed postings of rare terms packed into hash buckets (store/postpack.py); a segment's record says so,
#    and code of format 3 would miss those terms.
# 5: the ids of a batch of new documents (the graph's edge ingest) are runs of id hashes (store/idmap.py), not
#    an entry each; code of format 4 would not find those documents by id.
FORMAT_VERSION = 5
UNSTAMPED = 1
FORMAT_KEY = b"\x00store-format"  # an exact key beside the node uuid's; no per-index aux key has its length and bytes
_STAMP = struct.Struct(">I")


def stamped(txn: Any, aux: Any) -> int:
    """The format a data directory declares (``UNSTAMPED`` when it declares none)."""
    blob = txn.get(FORMAT_KEY, db=aux)
    return UNSTAMPED if blob is None else _STAMP.unpack(bytes(blob))[0]


def check_and_stamp(txn: Any, aux: Any, path: str) -> int:
    """Refuse a newer format, else stamp this xerj's in ``txn`` (a write transaction); return what was found."""
    found = stamped(txn, aux)
    if found > FORMAT_VERSION:
        raise StoreFormatUnsupported(path, found, FORMAT_VERSION)
    if found != FORMAT_VERSION:
        txn.put(FORMAT_KEY, _STAMP.pack(FORMAT_VERSION), db=aux)
    return found
