"""The JSON forms of the BrainSink records, for the HTTP routes and RemoteSink: strict in, plain out.

Request bodies are read with :data:`strict` (unknown keys refused, no
coercion: ``"5"`` is not an integer, ``5`` is not a string); responses are read
with :data:`lenient`, which ignores keys a newer server may add.
"""

from __future__ import annotations

from typing import Any, Callable, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.v import format_exception

from xerj_core.autoindex.sink import FileState, FileWrite, IndexedDocument, RunFinish
from xerj_core.errors import ParsingError, XerjError
from xerj_core.model import EdgeDraft

# Integers travel as a long column holds them (nanosecond mtimes, sizes, epoch milliseconds).
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class WireTypeError(TypeError):
    """A value of the wrong JSON type; its message is what the client is told."""


@attrs.frozen
class FileBatch:
    """``POST /_xerj/autoindex/{brain}/_batch``: whole files, written in one transaction."""

    indexed_at: int
    files: tuple[FileWrite, ...]


@attrs.frozen
class EdgeBatch:
    """``POST /_graph/{brain}/_detected``: detector drafts, written as a machine writer."""

    created_at: int
    edges: tuple[EdgeDraft, ...]
    nodes_index: str | None = None


@attrs.frozen
class ClaimsQuery:
    """``POST /_graph/{brain}/_claims``: the files whose live edges' claims a reconcile compares drafts with."""

    files: tuple[str, ...]


@attrs.frozen
class Invalidation:
    """``POST /_graph/{brain}/_invalidate``: live edges a reconcile retires (no rejection is recorded)."""

    edge_ids: tuple[str, ...]
    at: int


def _scalar(kind: str, accept: Callable[[Any], bool], cast: Callable[[Any], Any] = lambda v: v):
    def hook(value: Any, _type: Any) -> Any:
        if not accept(value):
            raise WireTypeError(f"expected {kind}, got {_json_kind(value)}")
        return cast(value)

    return hook


def _is_long(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and LONG_MIN <= value <= LONG_MAX


def _object_factory(cls: type, converter: cattrs.Converter):
    inner = make_dict_structure_fn(cls, converter)

    def hook(value: Any, _type: Any) -> Any:
        if not isinstance(value, dict):
            raise WireTypeError(f"expected an object, got {_json_kind(value)}")
        return inner(value, _type)

    return hook


def _is_homogeneous_tuple(type_: Any) -> bool:
    args = get_args(type_)
    return get_origin(type_) is tuple and len(args) == 2 and args[1] is Ellipsis


def _array_factory(type_: Any, converter: cattrs.Converter):
    inner = homogenous_tuple_structure_factory(type_, converter)

    def hook(value: Any, _type: Any) -> Any:
        if not isinstance(value, list):
            raise WireTypeError(f"expected an array, got {_json_kind(value)}")
        return inner(value, _type)

    return hook


def _dict_source(value: Any, _type: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireTypeError(f"expected an object, got {_json_kind(value)}")
    return value


def _build() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _scalar("a string", lambda v: isinstance(v, str)))
    conv.register_structure_hook(bool, _scalar("a boolean", lambda v: isinstance(v, bool)))
    conv.register_structure_hook(int, _scalar("a 64-bit integer", _is_long))
    conv.register_structure_hook(float, _scalar(
        "a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), float))
    conv.register_structure_hook_func(lambda type_: type_ == dict[str, Any], _dict_source)
    conv.register_structure_hook_factory(attrs.has, _object_factory)
    conv.register_structure_hook_factory(_is_homogeneous_tuple, _array_factory)
    conv.register_unstructure_hook_func(lambda type_: type_ is frozenset or get_origin(type_) is frozenset, sorted)
    # a file's ``skipped`` is sent only when a format declined it: a state or batch of read files is as it was
    for cls in (FileState, FileWrite):
        omitted = {"skipped": override(omit_if_default=True)}
        if cls is FileWrite:  # and ``continues`` only where a write continues the file's recorded state
            omitted["continues"] = override(omit_if_default=True)
        conv.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, conv, **omitted))
    return conv


strict = _build()
lenient = strict.copy(forbid_extra_keys=False)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _message(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, WireTypeError):
        return str(exc)
    return format_exception(exc, type_)


def structure(value: Any, cls: type, *, where: str = "body", error: type[XerjError] = ParsingError,
              converter: cattrs.Converter = strict) -> Any:
    """``value`` as a ``cls`` record, or ``error`` naming every field that is wrong (at most five)."""
    try:
        return converter.structure(value, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError, AttributeError) as exc:
        problems = cattrs.transform_error(exc, path=where, format_exception=_message)
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise error(f"malformed {where}: " + "; ".join(problems[:5]) + more) from None


def unstructure(record: Any) -> Any:
    """A record as plain JSON values (tuples and frozensets become arrays)."""
    return strict.unstructure(record)


__all__ = ["ClaimsQuery", "EdgeBatch", "FileBatch", "FileWrite", "IndexedDocument", "Invalidation", "RunFinish", "lenient",
           "strict", "structure", "unstructure"]
