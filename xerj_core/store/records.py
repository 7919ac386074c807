"""Frozen attrs records made many at a time: one C-level pass per field instead of an ``__init__`` per record, or
none at all until they are read (:class:`Columns`)."""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import accumulate, chain, repeat
from typing import Any, Iterable, Iterator, Sequence, TypeVar, overload

import attrs

T = TypeVar("T")
_SETTERS: dict[type, list[Any]] = {}


def frozen_many(cls: type[T], n: int, *columns: Iterable[Any]) -> list[T]:
    """``n`` instances of the frozen, slotted attrs class ``cls`` (no validators, converters or post-init),
    equal to ``cls(*values)`` for each row of ``columns``: one iterable per field, in field order, the fields
    left out taking their defaults.

    A frozen class's ``__init__`` sets each field through ``object.__setattr__`` (its own ``__setattr__``
    refuses), which costs a bulk of a thousand writes about as much as encoding their sources; here each
    field's slot descriptor is mapped over the new instances instead, so the per-record work runs in C.
    """
    setters = _SETTERS.get(cls)
    if setters is None:
        setters = _SETTERS[cls] = [cls.__dict__[field.name].__set__ for field in attrs.fields(cls)]
    fields = attrs.fields(cls)
    made = list(map(object.__new__, repeat(cls, n)))
    for i, setter in enumerate(setters):
        if i < len(columns):
            deque(map(setter, made, columns[i]), 0)
        else:
            default = fields[i].default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                raise TypeError(f"frozen_many cannot fill the factory default of {cls.__name__}.{fields[i].name}")
            deque(map(setter, made, repeat(default, n)), 0)
    return made


@attrs.frozen
class Same:
    """A :class:`Columns` field whose value is the same in every record."""

    value: Any


class _ReadAsList(Sequence[T]):
    """A read-only sequence that answers, compares, prints and pickles as the list of its items would."""

    __slots__ = ()

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._item(at) for at in range(len(self))[i]]
        return self._item(range(len(self))[i])  # a negative index counts from the end; past either end: IndexError

    def _item(self, at: int) -> T:
        """The item at ``at`` (0 <= at < len)."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, _ReadAsList)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, which is unhashable

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)  # a copy elsewhere is the list it reads as


class Columns(_ReadAsList[T]):
    """``n`` records of a frozen attrs class held as their fields' columns, each record made when it is read.

    A bulk of a thousand new documents returns a thousand results, and most callers only look for a refusal (a
    bulk-ingest has none) or read none at all: made eagerly they cost a bulk about a tenth of its time, and as
    many more objects for the cyclic collector to walk. Each column is a sequence with one value per record, a
    :class:`Same`, or another :class:`Columns`; the fields left out take their defaults. Reading an item makes
    a new record, equal to the one :func:`frozen_many` (or ``cls(...)``) makes; iterating makes them all in one
    :func:`frozen_many`. It compares equal to a list of equal records, as a list would.
    """

    __slots__ = ("cls", "n", "columns")

    def __init__(self, cls: type[T], n: int, *columns: Sequence[Any] | Same) -> None:
        self.cls, self.n, self.columns = cls, n, columns

    def __len__(self) -> int:
        return self.n

    def _item(self, at: int) -> T:
        return self.cls(*[c.value if type(c) is Same else c[at] for c in self.columns])

    def __iter__(self) -> Iterator[T]:
        return iter(self.made())

    def made(self) -> list[T]:
        """Every record, made in one pass per field."""
        return frozen_many(self.cls, self.n, *[repeat(c.value) if type(c) is Same else c for c in self.columns])


class Chained(_ReadAsList[T]):
    """Sequences read as one, in order (a bulk's runs of results, some of them :class:`Columns`)."""

    __slots__ = ("parts", "ends")

    def __init__(self, parts: list[Sequence[T]]) -> None:
        self.parts = parts
        self.ends = list(accumulate(map(len, parts)))

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def _item(self, at: int) -> T:
        part = bisect_right(self.ends, at)
        return self.parts[part][at - (self.ends[part - 1] if part else 0)]

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self.parts)


def first_refusal(results: Sequence[Any]) -> Exception | None:
    """The first exception among write ``results`` (a refused item's place holds it), or None. :class:`Columns`
    of results hold none, and are not made to be looked at."""
    if isinstance(results, Columns):
        return None
    return next((result for result in results if isinstance(result, Exception)), None)


__all__ = ["Chained", "Columns", "Same", "first_refusal", "frozen_many"]
