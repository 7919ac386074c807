"""Removing the mapped view files of indices that no longer exist (deleted, or recreated under a new uuid).

Every file set under ``<data>/views/`` is named after the uuid of the index
it was built from (``<uuid>@…``, ``<uuid>.ids.…``, ``<uuid>.docs.…``, and the build lock
``.<uuid>.build.lock``), and nothing else ever reads a set once its index
is gone: a recreated index has a new uuid. A 1M-edge brain's sets are about
200 MB, so they are removed when an index is dropped and, for drops this
process did not see (another program, a crash between the commit and the
sweep), whenever the graph service starts.

The directory is listed before the live uuids are read, in a snapshot that
begins after the listing: a set is published only after its index was
committed, so that snapshot sees the index of every listed set unless it was
dropped since. A process still mapping a removed set keeps its pages.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

# A set's owner: the uuid its name starts with (URL-safe base64, so no "." or "@"). Names of sets being
# written (".<key>.<pid>.<random>") are left alone: their writer renames or removes them.
_OWNED = re.compile(r"^(?:\.(?P<lock>[A-Za-z0-9_-]+)\.build\.lock|(?P<set>[A-Za-z0-9_-]+)(?:@|\.ids\.|\.docs\.).*)$")


def sweep(directory: Path, store: Any) -> int:
    """Remove every file set and build lock under ``directory`` whose index no longer exists; how many went.

    Best effort: a file another process removes first, or one that cannot be removed, is skipped.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    owned = [(name, _OWNED.match(name)) for name in names]
    owned = [(name, found["lock"] or found["set"], bool(found["lock"])) for name, found in owned if found]
    if not owned:
        return 0
    live = store.index_uuids()
    removed = 0
    for name, owner, is_lock in owned:
        if owner in live:
            continue
        path = directory / name
        try:
            if is_lock:
                path.unlink()
            else:
                shutil.rmtree(path)
        except OSError:
            continue
        removed += 1
    return removed
