"""RemoteSink: an autoindex run's storage on a running xerj server, over HTTP with the standard library.

Nothing is opened locally: every operation of :class:`BrainSink` is one or a
few requests to the routes ``xerj_http`` serves for it (``/_xerj/autoindex/...``
and ``/_graph/{brain}/_standing|_claims|_invalidate|_detected``). A server that cannot
be reached, or that refuses a request, is a :class:`RemoteError` naming the URL.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Sequence, TypeVar

import attrs
import orjson

from xerj_core.autoindex import wire
from xerj_core.autoindex.parsecache import user_cache_dir
from xerj_core.autoindex.sink import (BrainState, EdgeWriteSummary, FileWrite, LiveClaims, RunFinish,
                                     StandingEdges)
from xerj_core.credentials import authorization_header
from xerj_core.errors import DocumentRefused, IllegalArgument, ParsingError, XerjError
from xerj_core.graph.idkeys import IdSet
from xerj_core.model import EdgeDraft
from xerj_core.text import CountedTerms

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 300.0
# A batch of files is one request (one transaction) unless its body would pass this; then it is split,
# whole files per request, so no file is ever half written. The server takes up to 100 MB.
MAX_REQUEST_BYTES = 16 * 1024 * 1024
EDGES_PER_REQUEST = 5_000
IDS_PER_REQUEST = 20_000


class RemoteError(XerjError):
    """The server could not be reached, or it refused a request (then ``status`` is its status)."""

    status = 502
    error_type = "remote_exception"


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@attrs.frozen
class _StandingIds:
    """The body of ``GET /_graph/{brain}/_standing`` (its ``brain`` aside)."""

    live: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()


class RemoteSink:
    """A :class:`~xerj_core.autoindex.sink.BrainSink` on the xerj server at ``url`` (``http://host:port``)."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT_S, api_key: str | None = None) -> None:
        parts = urllib.parse.urlsplit(url.strip()) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
                or parts.query or parts.fragment:
            raise IllegalArgument(f"[{url}] is not a server URL; give one such as http://127.0.0.1:9200")
        try:
            parts.port  # noqa: B018 - a bad port raises here rather than on the first request
        except ValueError:
            raise IllegalArgument(f"[{url}] is not a server URL: its port is not a number from 0 to 65535") from None
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        self.timeout = timeout
        # Sent on every request; a secured server answers 401 without it.
        self.headers = {"Accept": "application/json", "Content-Type": "application/json",
                        **authorization_header(api_key)}

    def __repr__(self) -> str:
        return f"RemoteSink({self.url!r})"

    # -- HTTP ----------------------------------------------------------------------------------

    def _path(self, *segments: str) -> str:
        return "/" + "/".join(urllib.parse.quote(segment, safe="") for segment in segments)

    def _call(self, method: str, path: str, body: bytes | None = None) -> Any:
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._refusal(method, path, exc) from None
        except urllib.error.URLError as exc:
            raise RemoteError(f"cannot reach the xerj server at {self.url}: {exc.reason}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise RemoteError(f"cannot reach the xerj server at {self.url}: {exc or type(exc).__name__}") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise RemoteError(f"the server at {self.url} answered {method} {path} with a body that is not JSON; "
                              f"is it a xerj server?") from None

    def _refusal(self, method: str, path: str, exc: urllib.error.HTTPError) -> XerjError:
        """What the server's refusal means here: a document it refused names its file (the run goes on without
        that file), anything else is a RemoteError with the server's status."""
        try:
            body = orjson.loads(exc.read() or b"null")
        except (orjson.JSONDecodeError, OSError):
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("reason"), str):
            refused = RemoteError(f"the server at {self.url} answered {method} {path} with HTTP {exc.code} "
                                  f"and no xerj error body; is it a xerj server?")
        else:
            kind = error.get("type") if isinstance(error.get("type"), str) else "error"
            hint = " (no such route there: check the URL, or the server is a xerj without autoindex routes)" \
                if kind == "resource_not_found_exception" else ""
            if exc.code == 401:
                hint = " (the server is secured: pass --api-key, set XERJ_API_KEY, or run where its data " \
                       "directory's admin.key can be read)"
            if path.endswith("/_batch") and isinstance(error.get("path"), str) and isinstance(error.get("doc_id"), str):
                return DocumentRefused(error["reason"], path=error["path"], doc_id=error["doc_id"], error_type=kind,
                                       status=exc.code)
            refused = RemoteError(f"the xerj server at {self.url} refused {method} {path}: {kind}: "
                                  f"{error['reason']}{hint}")
            refused.error_type = kind
        refused.status = exc.code
        return refused

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, path, None if body is None else orjson.dumps(body))

    def _read(self, answer: Any, cls: type[T], method: str, path: str) -> T:
        try:
            return wire.structure(answer, cls, where="response", converter=wire.lenient)
        except ParsingError as exc:
            raise RemoteError(f"the server at {self.url} answered {method} {path} with an unexpected body: "
                              f"{exc.reason}") from None

    # -- BrainSink -----------------------------------------------------------------------------

    def load(self, brain: str) -> BrainState:
        path = self._path("_xerj", "autoindex", brain)
        return self._read(self._json("GET", path), BrainState, "GET", path)

    def write_files(self, brain: str, files: Sequence[FileWrite], indexed_at: int,
                    counted: Sequence[Sequence[CountedTerms | None] | None] | None = None) -> int:
        # ``counted`` is not sent: the server's own sink tokenizes the texts (counts would only add bytes on the wire)
        path = self._path("_xerj", "autoindex", brain, "_batch")
        head = b'{"indexed_at":' + orjson.dumps(indexed_at) + b',"files":['
        written = 0
        for group in self._byte_groups([orjson.dumps(wire.unstructure(item)) for item in files], len(head) + 2):
            answer = self._call("POST", path, head + b",".join(group) + b"]}")
            written += self._count(answer, "documents", "POST", path)
        return written

    @staticmethod
    def _byte_groups(encoded: list[bytes], overhead: int) -> Iterator[list[bytes]]:
        group: list[bytes] = []
        size = overhead
        for item in encoded:
            if group and size + len(item) + 1 > MAX_REQUEST_BYTES:
                yield group
                group, size = [], overhead
            group.append(item)
            size += len(item) + 1
        if group:
            yield group

    def _count(self, answer: Any, field: str, method: str, path: str) -> int:
        value = answer.get(field) if isinstance(answer, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise RemoteError(f"the server at {self.url} answered {method} {path} without a count of [{field}]")
        return value

    def standing_edges(self, brain: str) -> StandingEdges:
        path = self._path("_graph", brain, "_standing")
        body = self._read(self._json("GET", path), _StandingIds, "GET", path)
        return StandingEdges(IdSet.of(body.live), IdSet.of(body.rejected))

    def live_claims(self, brain: str, files: Sequence[str]) -> LiveClaims:
        path = self._path("_graph", brain, "_claims")
        claims: list = []
        for chunk in _chunks(list(files), IDS_PER_REQUEST):
            claims += self._read(self._json("POST", path, {"files": list(chunk)}), LiveClaims, "POST", path).claims
        return LiveClaims(tuple(claims))

    def invalidate_edges(self, brain: str, edge_ids: Sequence[str], at: int) -> int:
        path = self._path("_graph", brain, "_invalidate")
        total = 0
        for chunk in _chunks(list(edge_ids), IDS_PER_REQUEST):
            answer = self._json("POST", path, {"edge_ids": list(chunk), "at": at})
            total += self._count(answer, "invalidated", "POST", path)
        return total

    def write_edges(self, brain: str, drafts: Sequence[EdgeDraft], *, created_at: int,
                    nodes_index: str | None) -> EdgeWriteSummary:
        path = self._path("_graph", brain, "_detected")
        total = EdgeWriteSummary()
        for chunk in _chunks(list(drafts), EDGES_PER_REQUEST):
            body = wire.unstructure(wire.EdgeBatch(created_at=created_at, edges=tuple(chunk), nodes_index=nodes_index))
            total += self._read(self._json("POST", path, body), EdgeWriteSummary, "POST", path)
        return total

    def finish(self, brain: str, finish: RunFinish) -> None:
        path = self._path("_xerj", "autoindex", brain, "_finish")
        self._json("POST", path, wire.unstructure(finish))

    def cache_dir(self) -> Path | None:
        # the run parses on this machine whatever server it writes to, and a parse does not depend on the server
        return user_cache_dir()
