"""The hash chain of the JSONL audit log: canonical form, entry hashes, and the walk that verifies files.

An entry is one JSON object per line. ``hash`` is the hex sha256 of the
entry's canonical JSON without ``hash`` (keys sorted, no whitespace, UTF-8);
``prev_hash`` is the hash of the entry before it (64 zeros for ``seq`` 1), and
``seq`` counts up by one from 1 across every file of the log, oldest first.
Anyone can re-check a line with ``json.dumps(entry, sort_keys=True,
separators=(",", ":"), ensure_ascii=False)``: for the strings, integers and
booleans an entry holds, that is byte for byte what :func:`canonical` writes.
"""

from __future__ import annotations

import hashlib
from collections import deque
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import attrs
import orjson

GENESIS = "0" * 64
CHAIN_FIELDS = ("seq", "ts", "prev_hash", "hash")
LOOK_AHEAD = 64


def canonical(entry: Mapping[str, Any]) -> bytes:
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)


def entry_hash(entry: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``entry`` without its ``hash`` field."""
    body = {key: value for key, value in entry.items() if key != "hash"}
    return hashlib.sha256(canonical(body)).hexdigest()


def seal(event: Mapping[str, Any], *, seq: int, ts: int, prev_hash: str) -> dict[str, Any]:
    """The entry that chains ``event`` after ``prev_hash``; the chain fields win over any in the event."""
    entry = {**event, "seq": seq, "ts": ts, "prev_hash": prev_hash}
    entry["hash"] = entry_hash(entry)
    return entry


@attrs.frozen
class Broken:
    """Where a chain first fails: the ``seq`` that should be there, the file, and why."""

    seq: int
    file: str
    reason: str


@attrs.frozen
class Verdict:
    """What a walk over every file found (``first_broken`` is ``None`` when the chain holds)."""

    entries: int
    files: int
    last_seq: int
    last_hash: str
    first_broken: Broken | None = None

    @property
    def valid(self) -> bool:
        return self.first_broken is None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"valid": self.valid, "entries": self.entries, "files": self.files,
                                "last_seq": self.last_seq, "last_hash": self.last_hash}
        if self.first_broken is not None:
            body["first_broken"] = attrs.asdict(self.first_broken)
        return body


def _lines(path: Path) -> Iterator[tuple[bytes, bool]]:
    """Each line of ``path`` with whether it was terminated by a newline (only the last one may not be)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                yield line[:-1], True
            else:
                yield line, False


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return entry if isinstance(entry, dict) else None


def verify_files(files: Iterable[Path]) -> Verdict:
    """Walk ``files`` oldest first and report the first place the chain breaks.

    A line that is not a JSON object, a seq that skips or repeats, a
    ``prev_hash`` that is not the hash before it, a ``hash`` that does not match
    the entry, and a torn last line (an append interrupted before its newline)
    each break the chain at the seq that should have been there.
    """
    files = list(files)
    expected_seq, prev_hash, entries = 1, GENESIS, 0
    stream = ((path, _parse(raw), raw, ended) for path in files for raw, ended in _lines(path))
    # A short look-ahead tells a deleted entry from a reordered one without holding the log in memory.
    ahead: deque[tuple[Path, dict[str, Any] | None, bytes, bool]] = deque(islice(stream, LOOK_AHEAD))

    def verdict(broken: Broken | None) -> Verdict:
        return Verdict(entries, len(files), expected_seq - 1, prev_hash, broken)

    while ahead:
        path, entry, raw, ended = ahead.popleft()
        ahead.extend(islice(stream, 1))
        name = path.name
        if not ended:
            return verdict(Broken(expected_seq, name, f"torn last line: {len(raw)} bytes without a newline "
                                                      f"(an append was interrupted); the next append records "
                                                      f"and removes it"))
        if entry is None or not all(field in entry for field in CHAIN_FIELDS):
            return verdict(Broken(expected_seq, name, "line is not an audit entry (not a JSON object with "
                                                      "seq, ts, prev_hash and hash)"))
        seq = entry["seq"]
        if seq != expected_seq:
            later = {e.get("seq") for _p, e, _r, _x in ahead if e is not None}
            if isinstance(seq, int) and seq > expected_seq and expected_seq not in later:
                reason = f"seq {expected_seq} is missing (found seq {seq}): entries were deleted"
            elif isinstance(seq, int) and seq > expected_seq:
                reason = f"found seq {seq} where seq {expected_seq} belongs: entries were reordered"
            else:
                reason = f"found seq {seq!r} where seq {expected_seq} belongs: an entry repeats or was renumbered"
            return verdict(Broken(expected_seq, name, reason))
        if entry["prev_hash"] != prev_hash:
            return verdict(Broken(seq, name, f"prev_hash is not the hash of seq {seq - 1}: seq {seq - 1} was "
                                             f"rewritten, or this entry's link was"))
        if entry["hash"] != entry_hash(entry):
            return verdict(Broken(seq, name, "hash does not match the entry: the line was edited"))
        entries += 1
        expected_seq, prev_hash = seq + 1, entry["hash"]
    return verdict(None)
