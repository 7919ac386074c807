"""Frozen attrs records made many at a time: one C-level pass per field instead of an ``__init__`` per record."""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any, Iterable, TypeVar

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


__all__ = ["frozen_many"]
