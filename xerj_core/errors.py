"""The one exception family; each error knows its HTTP status and the body it renders to."""

from __future__ import annotations

from typing import Any, Sequence


def es_error_body(status: int, error_type: str, reason: str, **extra: Any) -> dict[str, Any]:
    """Elasticsearch's error envelope: the cause twice (as root cause and as the error) and the status."""
    cause = {"type": error_type, "reason": reason, **extra}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


class XerjError(Exception):
    """Base of every error xerj raises on purpose; rendered as an ES-shaped body."""

    status: int = 500
    error_type: str = "exception"

    def __init__(self, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.extra = extra

    def to_body(self) -> dict[str, Any]:
        return es_error_body(self.status, self.error_type, self.reason, **self.extra)


class IllegalArgument(XerjError):
    status = 400
    error_type = "illegal_argument_exception"


class ParsingError(XerjError):
    status = 400
    error_type = "parsing_exception"


class InvalidJson(ParsingError):
    """A request body that is not JSON at all (the reason names the parse error)."""


class MapperParsingError(XerjError):
    status = 400
    error_type = "mapper_parsing_exception"


class InvalidIndexName(XerjError):
    status = 400
    error_type = "invalid_index_name_exception"


class IndexNotFound(XerjError):
    status = 404
    error_type = "index_not_found_exception"

    def __init__(self, index: str) -> None:
        super().__init__(f"no such index [{index}]", index=index)
        self.index = index


class IndexAlreadyExists(XerjError):
    status = 400
    error_type = "resource_already_exists_exception"

    def __init__(self, index: str) -> None:
        super().__init__(f"index [{index}] already exists", index=index)
        self.index = index


class DocumentMissing(XerjError):
    status = 404
    error_type = "document_missing_exception"


class VersionConflict(XerjError):
    status = 409
    error_type = "version_conflict_engine_exception"


class PluginError(XerjError):
    """A plugin handed the core something invalid (names the plugin)."""

    status = 500
    error_type = "plugin_exception"


class GraphError(XerjError):
    """A refusal of the graph or memory contract: ``{"error": {type, reason}, "status"}``."""

    status = 400
    error_type = "graph_error"

    def to_body(self) -> dict[str, Any]:
        return {"error": {"type": self.error_type, "reason": self.reason}, "status": self.status}


class GraphNotFound(GraphError):
    status = 404


class FormatError(XerjError):
    """A file its format could not parse (not UTF-8, a malformed message or PDF); ``reason`` says why.

    The autoindex pipeline catches it per file and reports ``path`` with the
    reason; the run goes on.
    """

    status = 400
    error_type = "format_exception"

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        if path is None:
            super().__init__(reason)
        else:
            super().__init__(reason, path=path)
        self.path = path


class FormatDeclined(FormatError):
    """A file its format took by its name and then, having read all of it, does not read: not a failure, a skip.

    A minified or generated bundle has a source file's extension, but it is
    not what people write, and its vocabulary would tie it to every document.
    ``kind`` is the skip kind the run reports (``generated``), ``reason`` what
    the format saw.
    """

    def __init__(self, reason: str, *, kind: str, path: str | None = None) -> None:
        super().__init__(reason, path=path)
        self.kind = kind


class DocumentRefused(FormatError):
    """A document a file's format made that the store refused (a field's value of another type than the index
    maps it to, a term too long): the file is reported failed, with the document and the store's reason, and
    the run goes on with the other files. Its type and status are the refusal's own (``mapper_parsing_exception``,
    400); ``path`` and ``doc_id`` beside them name the file and the document."""

    def __init__(self, reason: str, *, path: str, doc_id: str, error_type: str, status: int = 400) -> None:
        super().__init__(reason, path=path)
        self.extra["doc_id"] = self.doc_id = doc_id
        self.error_type, self.status = error_type, status

    @classmethod
    def of(cls, path: str, doc_id: str, cause: Exception) -> "DocumentRefused":
        kind, reason = getattr(cause, "error_type", type(cause).__name__), getattr(cause, "reason", str(cause))
        return cls(f"document [{doc_id}] was refused: {kind}: {reason}", path=path, doc_id=doc_id, error_type=kind,
                   status=getattr(cause, "status", 400))


class SearchContextMissing(XerjError):
    """A scroll or point in time that expired, was closed, or belongs to another caller (all read the same)."""

    status = 404
    error_type = "search_context_missing_exception"


class IndexClosed(XerjError):
    """A read or write of a closed index (``POST /{index}/_close``); ``_open`` brings it back."""

    status = 400
    error_type = "index_closed_exception"

    def __init__(self, index: str, uuid: str = "") -> None:
        super().__init__("closed", index_uuid=uuid, index=index)
        self.index = index


class ResourceNotFound(XerjError):
    status = 404
    error_type = "resource_not_found_exception"


class AuditSinkFailed(XerjError):
    """An audit sink could not record an event; the request that caused it answers 503 naming the sink.

    An audit log that silently drops is worse than none: the caller learns the
    request was not recorded and may retry once the sink can write again.
    """

    status = 503
    error_type = "audit_sink_exception"

    def __init__(self, sink: str, cause: str) -> None:
        super().__init__(f"audit sink [{sink}] could not record this request: {cause}", sink=sink)
        self.sink = sink
        self.cause = cause


class InsufficientStorage(XerjError):
    """A write the disk (or the LMDB map) had no room for; nothing of it was committed. Retry once space is freed."""

    status = 507
    error_type = "insufficient_storage"
    retry_after = 60  # seconds, the Retry-After a client gets


class BatchFailed(XerjError):
    """A batch of autoindex files whose task failed as a whole: a worker died past its retries, a pool broke.

    The run stops without recording itself as finished, so nothing it detected
    is reported as complete and the next run redoes the edges; ``files`` names
    every file of the batch.
    """

    status = 503
    error_type = "batch_failed_exception"

    def __init__(self, step: str, files: Sequence[str], cause: BaseException, batches: int = 1) -> None:
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        lost = (f"the {step} task of a batch of {len(files)} file(s)" if batches == 1
                else f"the {step} tasks of {batches} batches ({len(files)} files)")
        super().__init__(f"{lost} failed ({what}); the run stopped and is not recorded as finished, so the next "
                         f"run redoes it. Files: {', '.join(files)}", files=list(files), step=step)
        self.files = tuple(files)
        self.step = step
        self.batches = batches

    @classmethod
    def joined(cls, failures: Sequence["BatchFailed"]) -> "BatchFailed":
        """One error naming every file of ``failures`` (batches of one step), with the first one's cause."""
        if len(failures) == 1:
            return failures[0]
        first = failures[0]
        joined = cls(first.step, [path for failure in failures for path in failure.files],
                     first.__cause__ or first, batches=len(failures))
        joined.__cause__ = first.__cause__
        return joined


class StoreFormatUnsupported(XerjError):
    """A data directory written in a store format newer than this xerj reads; nothing in it was touched."""

    status = 500
    error_type = "store_format_exception"

    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(f"the data directory [{path}] holds store format {found}, and this xerj reads formats up "
                         f"to {supported}: upgrade xerj to open it (nothing in it was changed)",
                         found=found, supported=supported)
        self.found = found
