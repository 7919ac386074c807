"""Index metadata beside the data: aliases, index settings and the open/closed state, changed in write transactions.

An index's settings and its ``closed`` flag live in its own record of the
``indices`` sub-database (with ``ix``, ``uuid`` and ``created``). Aliases live in
one record of that sub-database under a key no index name can have, as
``{alias: {index: properties}}``: looking an alias up is one read, and a change
of several aliases (``POST /_aliases``) is one transaction, so it applies whole
or not at all.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson

from xerj_core.errors import IllegalArgument, XerjError
from xerj_core.store.names import validate_index_name

ALIASES_KEY = b"\x00aliases"
ALIAS_PROPERTIES = {"is_write_index", "filter", "routing", "index_routing", "search_routing", "is_hidden"}


class InvalidAliasName(XerjError):
    status = 400
    error_type = "invalid_alias_name_exception"


class AliasesNotFound(XerjError):
    status = 404
    error_type = "aliases_not_found_exception"


def read_aliases(raw: Any, dbs: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    blob = raw.get(ALIASES_KEY, db=dbs["indices"])
    return orjson.loads(blob) if blob else {}


def write_aliases(raw: Any, dbs: dict[str, Any], aliases: Mapping[str, Mapping[str, Any]]) -> None:
    kept = {alias: dict(members) for alias, members in aliases.items() if members}
    if kept:
        raw.put(ALIASES_KEY, orjson.dumps(kept), db=dbs["indices"])
    else:
        raw.delete(ALIASES_KEY, db=dbs["indices"])


def alias_properties(alias: str, body: Any) -> dict[str, Any]:
    """The stored properties of one alias on one index; ``filter`` and routing are refused, not ignored."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise IllegalArgument(f"alias [{alias}] must be defined by an object")
    unknown = sorted(set(body) - ALIAS_PROPERTIES - {"index", "indices", "alias", "aliases", "must_exist"})
    if unknown:
        raise IllegalArgument(f"[alias] unknown field [{unknown[0]}]")
    for unsupported in ("filter", "routing", "index_routing", "search_routing"):
        if body.get(unsupported) is not None:
            raise IllegalArgument(f"alias [{alias}]: [{unsupported}] is not supported; an alias here names "
                                  f"whole indices")
    out: dict[str, Any] = {}
    for flag in ("is_write_index", "is_hidden"):
        if body.get(flag) is not None:
            if not isinstance(body[flag], bool):
                raise IllegalArgument(f"alias [{alias}]: [{flag}] must be a boolean")
            out[flag] = body[flag]
    return out


def validate_alias_name(alias: Any, index_exists) -> str:
    if not isinstance(alias, str) or not alias:
        raise InvalidAliasName("alias name must not be empty", alias=str(alias))
    if "*" in alias or "," in alias:
        raise InvalidAliasName(f"Invalid alias name [{alias}]: must not contain [*] or [,]", alias=alias)
    try:
        validate_index_name(alias)
    except XerjError as exc:
        raise InvalidAliasName(exc.reason.replace("index name", "alias name"), alias=alias) from None
    if index_exists(alias):
        raise InvalidAliasName(f"Invalid alias name [{alias}]: an index or data stream exists with the same name "
                               f"as the alias", alias=alias)
    return alias


def add_alias(aliases: dict[str, dict[str, Any]], alias: str, index: str, properties: dict[str, Any]) -> None:
    members = aliases.setdefault(alias, {})
    members[index] = properties
    if properties.get("is_write_index"):
        for other, props in members.items():
            if other != index and props.get("is_write_index"):
                raise IllegalArgument(f"alias [{alias}] has more than one write index [{other},{index}]")


def remove_alias(aliases: dict[str, dict[str, Any]], alias: str, index: str, *, must_exist: bool = True) -> bool:
    members = aliases.get(alias)
    if members is None or index not in members:
        if must_exist:
            raise AliasesNotFound(f"aliases [{alias}] missing", resource_type="aliases", resource_id=alias)
        return False
    del members[index]
    if not members:
        del aliases[alias]
    return True


def drop_index(aliases: dict[str, dict[str, Any]], index: str) -> None:
    for alias in list(aliases):
        aliases[alias].pop(index, None)
        if not aliases[alias]:
            del aliases[alias]


def write_index(aliases: Mapping[str, Mapping[str, Any]], alias: str) -> str:
    """The one index a write through ``alias`` goes to, or ES's refusal."""
    members = aliases[alias]
    chosen = [index for index, props in members.items() if props.get("is_write_index")]
    if chosen:
        return chosen[0]
    if len(members) == 1 and next(iter(members.values())).get("is_write_index") is not False:
        return next(iter(members))
    raise IllegalArgument(f"no write index is defined for alias [{alias}]. The write index may be explicitly "
                          f"disabled using is_write_index=false or the alias points to multiple indices without "
                          f"one being designated as a write index")


def single_index(aliases: Mapping[str, Mapping[str, Any]], alias: str) -> str:
    """The index a single-document read through ``alias`` reads, refused when the alias names several."""
    members = list(aliases[alias])
    if len(members) != 1:
        raise IllegalArgument(f"alias [{alias}] has more than one index associated with it "
                              f"[{', '.join(sorted(members))}], can't execute a single index op")
    return members[0]


# -- settings ----------------------------------------------------------------------------------

# Settings a live index accepts after creation, each because it is true here already or enforced:
# a single node keeps no replicas, and every committed write is visible at once (refresh_interval
# is kept for the clients that set it around a bulk load and read it back).
DYNAMIC_SETTINGS = {"index.number_of_replicas", "index.refresh_interval"}
STATIC_SETTINGS = {"index.number_of_shards", "index.codec", "index.routing_partition_size",
                   "index.soft_deletes.enabled", "index.sort.field", "index.sort.order", "index.hidden",
                   "index.mapping.total_fields.limit", "index.max_result_window", "index.analysis"}
# What the store reports itself, whatever a request says: one primary shard, no replica.
FIXED = {"index.number_of_shards": "1", "index.number_of_replicas": "0"}


def flatten_settings(body: Any, prefix: str = "") -> dict[str, Any]:
    """``{"index": {"a": {"b": 1}}}`` and ``{"index.a.b": 1}`` and ``{"a.b": 1}`` all as ``{"index.a.b": 1}``."""
    if not isinstance(body, dict):
        raise IllegalArgument("[settings] must be an object")
    flat: dict[str, Any] = {}
    for key, value in body.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_settings(value, f"{path}."))
        else:
            flat[path] = value
    if prefix:
        return flat
    return {(k if k.startswith("index.") else f"index.{k}"): v for k, v in flat.items()}


def as_setting_string(value: Any) -> Any:
    """Elasticsearch returns every setting as a string (lists as lists of strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [as_setting_string(v) for v in value]
    return None if value is None else str(value)


def check_dynamic_update(name: str, uuid: str, updates: dict[str, Any]) -> None:
    static = sorted(k for k in updates if k in STATIC_SETTINGS or k.startswith("index.analysis."))
    if static:
        raise IllegalArgument(f"Can't update non dynamic settings [[{', '.join(static)}]] for open indices "
                              f"[[{name}/{uuid}]]")
    unknown = sorted(k for k in updates if k not in DYNAMIC_SETTINGS)
    if unknown:
        raise IllegalArgument(f"unknown setting [{unknown[0]}] please check that any required plugins are "
                              f"installed, or check the breaking changes documentation for removed settings")
    replicas = updates.get("index.number_of_replicas")
    if replicas is not None and str(replicas) != "0":
        raise IllegalArgument(f"[index.number_of_replicas] can only be 0: this single node keeps no replicas, "
                              f"got [{replicas}]")


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"index.a.b": "1"}`` back to ``{"index": {"a": {"b": "1"}}}``."""
    out: dict[str, Any] = {}
    for key, value in sorted(flat.items()):
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return out
