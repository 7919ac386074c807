"""The built-in audit sink: a hash-chained ``audit.jsonl`` in the data directory, shared by every process.

Every append opens the file, takes ``flock(LOCK_EX)`` on it, reads the seq and
hash of the last entry, writes one line, flushes it to disk (``fdatasync``)
and closes the file, which releases the lock. Nothing stays open between
appends, so a gunicorn worker never inherits a descriptor from before its fork,
and the workers and a CLI process share one chain with no gap and no fork.

Past ``max_bytes`` the file is renamed to the next numbered file
(``audit.000001.jsonl``, ``audit.000002.jsonl``, ...) and a new ``audit.jsonl``
starts; its first ``prev_hash`` is the last hash of the numbered file, so the
chain runs across files and nothing is dropped.

An append that finds a torn last line (a writer killed mid-line, a power loss)
removes those bytes and first appends an ``audit.repair`` entry quoting them,
so the damage is on the record rather than silently kept or silently lost.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

import orjson

from xerj_audit.chain import GENESIS, Verdict, canonical, seal, verify_files

ACTIVE = "audit.jsonl"
_NUMBERED = re.compile(r"audit\.(\d{6,})\.jsonl")
_TAIL_CHUNK = 8192
_TORN_QUOTE = 512
_sync = getattr(os, "fdatasync", os.fsync)


class AuditLogUnreadable(Exception):
    """The log's last entry cannot be read, so no entry can be chained after it."""


def numbered_files(directory: Path) -> list[tuple[int, Path]]:
    found = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        match = _NUMBERED.fullmatch(name)
        if match:
            found.append((int(match.group(1)), directory / name))
    return sorted(found)


def log_files(directory: Path) -> list[Path]:
    """Every file of the log, oldest first: the numbered files, then ``audit.jsonl`` if it exists."""
    files = [path for _n, path in numbered_files(directory)]
    active = directory / ACTIVE
    if active.exists():
        files.append(active)
    return files


def _read_tail(fd: int, size: int) -> tuple[bytes | None, int]:
    """The last complete line of the open file and the offset just past it (torn bytes lie beyond)."""
    buf, start = b"", size
    while start > 0:
        begin = max(0, start - _TAIL_CHUNK)
        buf = os.pread(fd, start - begin, begin) + buf
        start = begin
        last = buf.rfind(b"\n")
        if last < 0:
            continue
        previous = buf.rfind(b"\n", 0, last)
        if previous >= 0 or start == 0:
            return buf[previous + 1:last], start + last + 1
    return None, 0


def _chain_point(line: bytes, where: str) -> tuple[int, str]:
    try:
        entry = orjson.loads(line)
        seq, digest = entry["seq"], entry["hash"]
    except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
        raise AuditLogUnreadable(f"the last entry of {where} is unreadable ({exc}); run `xerj audit verify`") from exc
    if not isinstance(seq, int) or not isinstance(digest, str) or len(digest) != 64:
        raise AuditLogUnreadable(f"the last entry of {where} has no usable seq and hash; run `xerj audit verify`")
    return seq, digest


class JsonlAuditSink:
    """The hash-chained JSONL sink bound to one data directory."""

    name = "jsonl"

    def __init__(self, directory: str | Path, *, max_bytes: int = 64 * 2**20) -> None:
        self.directory = Path(directory)
        self.path = self.directory / ACTIVE
        self.max_bytes = max_bytes
        # (inode, size) of audit.jsonl after this process's last append, and the chain point it ended at:
        # when nobody else appended since, the tail need not be read again.
        self._tail: tuple[int, int, int, str] | None = None
        self.directory.mkdir(parents=True, exist_ok=True)

    # -- writing -------------------------------------------------------------------------------

    def append(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Chain ``event`` onto the log and return the entry once it is on disk."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                stat = os.fstat(fd)
                if not self._still_active(stat):
                    continue  # another process rotated the file while this one waited for the lock
                entry = self._append_locked(fd, stat, event)
                # Rotate after a complete append, never before one: a torn line is repaired first,
                # so a numbered file always ends on a whole entry.
                if self._tail is not None and self._tail[1] >= self.max_bytes:
                    self._rotate()
                return entry
            finally:
                os.close(fd)  # releases the lock

    def _still_active(self, stat: os.stat_result) -> bool:
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            return False
        return (current.st_dev, current.st_ino) == (stat.st_dev, stat.st_ino)

    def _append_locked(self, fd: int, stat: os.stat_result, event: Mapping[str, Any]) -> dict[str, Any]:
        size = stat.st_size
        cached = self._tail
        if cached is not None and cached[:2] == (stat.st_ino, size):
            seq, prev_hash = cached[2], cached[3]
            torn = b""
        else:
            seq, prev_hash, size, torn = self._read_chain_point(fd, size)
        lines = []
        if torn:
            repair = seal(repair_event(torn, ACTIVE), seq=seq + 1, ts=_now_ms(), prev_hash=prev_hash)
            lines.append(canonical(repair) + b"\n")
            seq, prev_hash = repair["seq"], repair["hash"]
            os.ftruncate(fd, size)
        entry = seal(clean(event), seq=seq + 1, ts=_now_ms(), prev_hash=prev_hash)
        lines.append(canonical(entry) + b"\n")
        data = b"".join(lines)
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        _sync(fd)
        self._tail = (stat.st_ino, size + len(data), entry["seq"], entry["hash"])
        return entry

    def _read_chain_point(self, fd: int, size: int) -> tuple[int, str, int, bytes]:
        """``(seq, hash, size to keep, torn bytes)`` at the end of the active file (or the newest numbered one)."""
        line, complete = _read_tail(fd, size) if size else (None, 0)
        torn = os.pread(fd, size - complete, complete) if complete < size else b""
        if line is not None:
            return (*_chain_point(line, ACTIVE), complete, torn)
        numbered = numbered_files(self.directory)
        if not numbered:
            return 0, GENESIS, complete, torn
        last = numbered[-1][1]
        with open(last, "rb") as handle:
            line, _end = _read_tail(handle.fileno(), os.fstat(handle.fileno()).st_size)
        if line is None:
            raise AuditLogUnreadable(f"{last.name} holds no complete entry; run `xerj audit verify`")
        return (*_chain_point(line, last.name), complete, torn)

    def _rotate(self) -> None:
        """Rename the full ``audit.jsonl`` (locked by the caller) to the next numbered file."""
        numbered = numbered_files(self.directory)
        number = numbered[-1][0] + 1 if numbered else 1
        os.rename(self.path, self.directory / f"audit.{number:06d}.jsonl")
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename must survive a crash, or the chain would fork on restart
        finally:
            os.close(dir_fd)
        self._tail = None

    # -- reading -------------------------------------------------------------------------------

    def files(self) -> list[Path]:
        return log_files(self.directory)

    def verify(self) -> Verdict:
        return verify_files(self.files())

    def entries_newest_first(self) -> Iterator[dict[str, Any]]:
        """Every readable entry, newest first (a torn or unparsable line is verify's business, not search's)."""
        for path in reversed(self.files()):
            with open(path, "rb") as handle:
                lines = handle.read().split(b"\n")
            for raw in reversed(lines):
                if not raw:
                    continue
                try:
                    entry = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(entry, dict):
                    yield entry

    def search(self, query: Any) -> dict[str, Any]:
        """``{total, entries}`` matching ``query`` (an :class:`xerj_core.audit_query.AuditQuery`), newest first."""
        total, entries = 0, []
        for entry in self.entries_newest_first():
            if query.matches(entry):
                total += 1
                if len(entries) < query.size:
                    entries.append(entry)
        return {"total": total, "entries": entries}

    def close(self) -> None:
        self._tail = None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def clean(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event as plain JSON values (anything else as its string), so the canonical form is well defined."""
    def plain(value: Any) -> Any:
        if value is None or isinstance(value, (str, bool, int)):
            return value
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return str(value)

    return {str(key): plain(value) for key, value in event.items()}


def repair_event(torn: bytes, file: str) -> dict[str, Any]:
    """The entry that records a torn last line: its length, its sha256 and its first bytes."""
    return {
        "op": "audit.repair",
        "subject": "xerj",
        "resource": file,
        "privilege": "write",
        "outcome": "failure",
        "note": (f"removed a torn last line of {len(torn)} bytes (sha256 {hashlib.sha256(torn).hexdigest()}): "
                 f"an earlier append was interrupted before its newline"),
        "torn": torn[:_TORN_QUOTE].decode("utf-8", "replace"),
    }


class JsonlAuditSinkFactory:
    """What the plugin registers: ``open(data_dir, config)`` binds the sink to ``<data_dir>/audit.jsonl``."""

    name = JsonlAuditSink.name

    def open(self, data_dir: str | Path, config: Any = None) -> JsonlAuditSink:
        max_bytes = getattr(config, "audit_max_bytes", None) or 64 * 2**20
        return JsonlAuditSink(data_dir, max_bytes=max_bytes)
