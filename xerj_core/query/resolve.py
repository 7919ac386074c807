"""Index expressions (comma lists, wildcards, ``_all``, ``-exclusions``, aliases) to index names: the one resolver.

Every surface that names indices in a request goes through
:func:`resolve_indices`, so the authorization layer restricts expansion in one
place (its ``allowed`` predicate) rather than re-implementing the grammar. An
alias always comes out as the concrete indices it names, so authorization never
sees an alias: an alias cannot reach an index its caller could not name.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from xerj_core.errors import IllegalArgument, IndexNotFound

_EXPAND_CHOICES = {"open", "closed", "hidden", "all", "none"}


def _is_hidden(name: str) -> bool:
    # Dot-prefixed indices (the agent-memory namespaces among them) are hidden: only a
    # pattern that itself starts with a dot reaches them, unless expand_wildcards asks for hidden.
    return name.startswith(".")


def _pattern(expr: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", expr)))


def resolve_indices(store, expression: str | Iterable[str] | None, *, ignore_unavailable: bool = False,
                    allow_no_indices: bool = True, expand_wildcards: str = "open",
                    allowed: Callable[[str], bool] | None = None) -> list[str]:
    """The concrete index names an ES index expression names, in expression order, without duplicates.

    - ``None``, ``""``, ``_all`` and ``*`` mean every visible index.
    - ``a,b`` is a list; ``logs-*`` is a wildcard (``*`` matches any run of characters).
    - ``-pattern`` after other items removes what it matches from the names gathered so far.
    - Hidden (dot-prefixed) indices are matched only by a wildcard that starts with a dot
      (``.xerj-memory-*``), or by any wildcard when ``expand_wildcards`` includes ``hidden``/``all``;
      naming one exactly always works.
    - A concrete name that does not exist raises :class:`IndexNotFound` unless
      ``ignore_unavailable``; a wildcard that matches nothing raises it when
      ``allow_no_indices`` is false, and so does an empty result.
    - An alias (named, or matched by a wildcard) stands for the indices it names.
    - Wildcards match open indices (``expand_wildcards=open``), closed ones (``closed``) or
      both (``all``); a concrete closed index is kept (reading it then refuses with
      ``index_closed_exception``) unless ``ignore_unavailable``.
    - ``allowed``, when given, is applied to wildcard expansions only (ES's security
      model: wildcards expand to what the caller may see, while a concrete name is kept
      so that authorization can refuse it explicitly).
    """
    modes = {m.strip() for m in (expand_wildcards or "open").split(",") if m.strip()}
    if not modes <= _EXPAND_CHOICES:
        raise IllegalArgument(f"No enum constant for expand_wildcards [{expand_wildcards}]")
    expand = "none" not in modes
    with_hidden = bool(modes & {"hidden", "all"})

    if expression is None:
        parts: list[str] = []
    elif isinstance(expression, str):
        parts = [p.strip() for p in expression.split(",")]
    else:
        parts = [str(p).strip() for p in expression]
    parts = [p for p in parts if p]
    if not parts or parts == ["_all"]:
        parts = ["*"]

    with_open = bool(modes & {"open", "all"})
    with_closed = bool(modes & {"closed", "all"})
    loaded: tuple[dict, dict] | None = None

    def catalog() -> tuple[dict, dict]:
        nonlocal loaded
        if loaded is None:
            if hasattr(store, "catalog"):
                records, aliases = store.catalog()
            else:  # a backend without metadata: every index open, no aliases
                records, aliases = {name: {} for name in store.index_names()}, {}
            loaded = (dict(sorted(records.items())), aliases)
        return loaded

    def names() -> dict[str, dict]:
        return catalog()[0]

    def is_closed(name: str) -> bool:
        return bool(names().get(name, {}).get("closed"))

    def expand_pattern(expr: str) -> list[str]:
        if not expand:
            return []
        matcher = _pattern(expr)
        dot_pattern = expr.startswith(".")

        def wanted(n: str) -> bool:
            return dot_pattern or with_hidden or not _is_hidden(n)

        found = [n for n in names() if matcher.fullmatch(n) and wanted(n)]
        for alias, members in sorted(catalog()[1].items()):
            if matcher.fullmatch(alias) and wanted(alias):
                found += [m for m in members if m in names()]
        found = list(dict.fromkeys(n for n in found if (with_closed if is_closed(n) else with_open)))
        if allowed is not None:
            found = [n for n in found if allowed(n)]
        return found

    result: dict[str, None] = {}
    for position, part in enumerate(parts):
        if part.startswith("-") and position > 0:
            target = part[1:]
            matcher = _pattern(target)
            drop = {n for n in result if matcher.fullmatch(n)}
            for name in drop:
                result.pop(name, None)
            continue
        if part == "_all" or "*" in part:
            found = expand_pattern("*" if part == "_all" else part)
            if not found and not allow_no_indices:
                raise IndexNotFound(part)
            for name in found:
                result.setdefault(name, None)
            continue
        if part in names():
            if not (ignore_unavailable and is_closed(part)):
                result.setdefault(part, None)
        elif part in catalog()[1]:
            for member in catalog()[1][part]:
                if member in names() and not (ignore_unavailable and is_closed(member)):
                    result.setdefault(member, None)
        elif not ignore_unavailable:
            raise IndexNotFound(part)
    if not result and not allow_no_indices:
        raise IndexNotFound(",".join(parts))
    return list(result)
