"""Edge drafts held as columns, each with its edge id: a detect batch's drafts from detection to the typed write.

A run detects 13 edges per note (133k on 10,000 notes). Held as
:class:`~xerj_core.model.EdgeDraft` objects they were taken apart into columns
where they were detected (to travel cheaply), rebuilt as objects by the writer,
then taken apart into columns again by the graph's typed edge path, which also
derived every edge id a second time. A :class:`DraftColumns` keeps one list
per draft field and the edge ids worked out once: the writer selects, sorts
and slices rows without an object per draft, and ``graph.edgebatch`` builds its
documents from the columns. It is still a ``Sequence[EdgeDraft]`` (an item is
made on demand), so any other consumer (a remote sink, the general write path)
reads drafts as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any, Iterable, Iterator, overload

from xerj_core.graph.brain import edge_id
from xerj_core.model import EdgeDraft, Evidence

# The columns, in this order: EdgeDraft's fields with its evidence as three (``quote`` None: no evidence).
FIELDS = ("src", "dst", "type", "detector", "weight", "confidence", "valid_at", "quote", "source", "offset",
          "src_format", "dst_format")
_DRAFT = ("src", "dst", "type", "detector", "weight", "confidence", "valid_at")
_FORMATS = ("src_format", "dst_format")
_EVIDENCE = ("quote", "source", "offset")


class DraftColumns(Sequence[EdgeDraft]):
    """Drafts as one list per field of :data:`FIELDS` (row ``i`` is draft ``i``) and ``ids``, their edge ids
    (``graph.brain.edge_id`` of each draft: whoever builds one vouches for that)."""

    __slots__ = (*FIELDS, "ids")

    src: list[str]
    dst: list[str]
    type: list[str]
    detector: list[str]
    weight: list[float]
    confidence: list[float]
    valid_at: list[int]
    quote: list[str | None]
    source: list[str | None]
    offset: list[int | None]
    src_format: list[str | None]
    dst_format: list[str | None]
    ids: list[str]

    def __init__(self, columns: Sequence[list[Any]], ids: list[str]) -> None:
        if len(columns) != len(FIELDS) or any(len(column) != len(ids) for column in columns):
            raise ValueError(f"draft columns must be {len(FIELDS)} lists of the ids' length ({len(ids)})")
        for name, column in zip(FIELDS, columns):
            setattr(self, name, column)
        self.ids = ids

    @classmethod
    def of(cls, drafts: Iterable[EdgeDraft], ids: list[str] | None = None) -> "DraftColumns":
        """``drafts`` (each with its ``evidence`` None or an Evidence) as columns; ``ids`` derived when None."""
        drafts = drafts if isinstance(drafts, list) else list(drafts)
        columns = [list(map(attrgetter(name), drafts)) for name in _DRAFT]
        evidence = list(map(attrgetter("evidence"), drafts))
        # by identity: ``None in evidence`` would call each Evidence's ``__eq__``
        if all(map(is_not, evidence, repeat(None))):
            columns += [list(map(attrgetter(name), evidence)) for name in _EVIDENCE]
        else:
            columns += [[None if e is None else getattr(e, name) for e in evidence] for name in _EVIDENCE]
        columns += [list(map(attrgetter(name), drafts)) for name in _FORMATS]
        if ids is None:
            ids = list(map(edge_id, columns[0], columns[2], columns[1], columns[6]))
        return cls(columns, ids)

    @classmethod
    def joined(cls, parts: Sequence["DraftColumns"]) -> "DraftColumns":
        """The rows of ``parts``, one after another."""
        if len(parts) == 1:
            return parts[0]
        columns: list[list[Any]] = [[] for _ in FIELDS]
        ids: list[str] = []
        for part in parts:
            for column, name in zip(columns, FIELDS):
                column += getattr(part, name)
            ids += part.ids
        return cls(columns, ids)

    def columns(self) -> list[list[Any]]:
        return [getattr(self, name) for name in FIELDS]

    def take(self, rows: Sequence[int]) -> "DraftColumns":
        """The drafts of ``rows`` (positions), in that order."""
        pick = rows.__iter__
        return DraftColumns([list(map(column.__getitem__, pick())) for column in self.columns()],
                            list(map(self.ids.__getitem__, pick())))

    def where(self, keep: Sequence[bool]) -> "DraftColumns":
        """The drafts whose ``keep`` is true, in order."""
        return DraftColumns([list(compress(column, keep)) for column in self.columns()], list(compress(self.ids, keep)))

    def claim_order(self) -> list[int]:
        """Positions in ``(src, type, dst)`` order (stable: ``list.sort(key=(src, type, dst))``'s order)."""
        claims = list(zip(self.src, self.type, self.dst))
        return sorted(range(len(claims)), key=claims.__getitem__)

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, at: int) -> EdgeDraft: ...

    @overload
    def __getitem__(self, at: slice) -> "DraftColumns": ...

    def __getitem__(self, at: int | slice) -> "EdgeDraft | DraftColumns":
        if isinstance(at, slice):
            return DraftColumns([column[at] for column in self.columns()], self.ids[at])
        quote = self.quote[at]
        return EdgeDraft(self.src[at], self.dst[at], self.type[at], self.detector[at], self.weight[at],
                         self.confidence[at], self.valid_at[at],
                         None if quote is None else Evidence(quote, self.source[at], self.offset[at]),  # type: ignore[arg-type]
                         self.src_format[at], self.dst_format[at])

    def __iter__(self) -> Iterator[EdgeDraft]:
        return map(self.__getitem__, range(len(self.ids)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DraftColumns):
            return self.ids == other.ids and self.columns() == other.columns()
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return DraftColumns, (self.columns(), self.ids)

    def __repr__(self) -> str:
        return f"DraftColumns({len(self)} drafts)"


__all__ = ["DraftColumns", "FIELDS"]
