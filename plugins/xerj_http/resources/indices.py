"""Index routes: ``PUT|GET|HEAD|DELETE /{index}``, mappings, ``_stats``, ``_forcemerge``, settings, ``_open``/``_close`` and aliases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon

from xerj_core.errors import IllegalArgument, IndexNotFound, ParsingError
from xerj_core.query.resolve import resolve_indices
from xerj_core.store import meta
from xerj_http.bodies import bool_param, json_body, refuse_unknown
from xerj_http.resources.common import concrete_names, send
from xerj_http.targets import default_expand

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

_CREATE_FIELDS = {"mappings", "settings", "aliases"}
# The index version an Elasticsearch 8.11 node writes into index.version.created.
VERSION_CREATED = "8500003"


def index_settings(info: Any) -> dict[str, Any]:
    """``{"index": {...}}`` as ES returns it: every value a string, the given settings kept."""
    flat = {key: meta.as_setting_string(value) for key, value in meta.flatten_settings(info.settings).items()}
    flat.update(meta.FIXED)
    flat.update({"index.creation_date": str(info.created), "index.uuid": info.uuid, "index.provided_name": info.name,
                 "index.version.created": VERSION_CREATED})
    if info.closed:
        flat["index.verified_before_close"] = "true"
    return meta.nest(flat)


def _aliases_of(store: Any, name: str, aliases: dict | None = None) -> dict[str, Any]:
    aliases = store.aliases() if aliases is None else aliases
    return {alias: dict(members[name]) for alias, members in sorted(aliases.items()) if name in members}


class Index:
    ops = {
        "PUT": ("indices.create", "manage"),
        "GET": ("indices.get", "read"),
        "HEAD": ("indices.exists", "read"),
        "DELETE": ("indices.delete", "manage"),
    }

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        body = json_body(req)
        refuse_unknown(body, _CREATE_FIELDS, "create_index")
        aliases = body.get("aliases") or {}
        if not isinstance(aliases, dict):
            raise ParsingError("[aliases] must be an object of alias names")
        settings = body.get("settings")
        if settings is not None and not isinstance(settings, dict):
            raise ParsingError("[settings] must be an object")
        self.store.create_index(index, body.get("mappings"), settings,
                                {alias: meta.alias_properties(alias, props) for alias, props in aliases.items()})
        send(resp, {"acknowledged": True, "shards_acknowledged": True, "index": index})

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        out = {}
        aliases = self.store.aliases()
        for name in self._resolve(req, index):
            info = self.store.index_info(name)
            out[name] = {"aliases": _aliases_of(self.store, name, aliases), "mappings": info.mapping,
                         "settings": index_settings(info)}
        send(resp, out)

    def on_head(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        try:
            found = self._resolve(req, index)
        except IndexNotFound:
            found = []
        resp.status = 200 if found else 404
        resp.content_type = falcon.MEDIA_JSON

    def on_delete(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        names = concrete_names(index, "index deletion")
        aliases = self.store.aliases()
        for name in names:
            if name in aliases:
                raise IllegalArgument(f"The provided expression [{name}] matches an alias, specify the "
                                      f"corresponding concrete indices instead.")
        missing = [n for n in names if not self.store.exists(n)]
        if missing and not bool_param(req, "ignore_unavailable"):
            raise IndexNotFound(missing[0])
        for name in names:
            if name not in missing:
                self.store.delete_index(name)
        send(resp, {"acknowledged": True})

    def _resolve(self, req: falcon.Request, index: str) -> list[str]:
        return resolve_indices(self.store, index, ignore_unavailable=bool_param(req, "ignore_unavailable"),
                               expand_wildcards=req.get_param("expand_wildcards") or "open")


class IndexMapping:
    ops = {"GET": ("indices.get_mapping", "read"), "PUT": ("indices.put_mapping", "manage"),
           "POST": ("indices.put_mapping", "manage")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        names = resolve_indices(self.store, index, ignore_unavailable=bool_param(req, "ignore_unavailable"),
                                allow_no_indices=bool_param(req, "allow_no_indices", True),
                                expand_wildcards=req.get_param("expand_wildcards") or "open")
        send(resp, {name: {"mappings": self.store.get_mapping(name)} for name in names})

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        body = json_body(req, required=True)
        names = resolve_indices(self.store, index)
        for name in names:
            self.store.put_mapping(name, body)
        send(resp, {"acknowledged": True})

    on_post = on_put


def _shards(count: int) -> dict[str, int]:
    return {"total": count, "successful": count, "failed": 0}


class IndexStats:
    """``GET /{index}/_stats``: rows and bytes in Elasticsearch's shape, plus what was left unindexed.

    ``docs.deleted`` counts dead rows (deleted and overwritten documents) and
    ``store.dead_in_bytes`` what they hold until a compaction (``_forcemerge``)
    gives it back. ``not_indexed`` counts the text terms and keyword values each
    index left out for their length (``xerj_core.store.limits``); they stay in
    ``_source``.
    """

    ops = {"GET": ("indices.stats", "monitor")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        names = resolve_indices(self.store, index, ignore_unavailable=bool_param(req, "ignore_unavailable"),
                                expand_wildcards=req.get_param("expand_wildcards") or "open")
        indices: dict[str, Any] = {}
        total = {"docs": {"count": 0, "deleted": 0}, "store": {"size_in_bytes": 0, "dead_in_bytes": 0},
                 "segments": {"count": 0}, "not_indexed": {"terms_too_long": 0, "keyword_values": 0}}
        for name in names:
            rows = self.store.index_stats(name)
            skipped = self.store.skipped_counts(name)
            stats = {"docs": {"count": rows.live_rows, "deleted": rows.dead_rows},
                     "store": {"size_in_bytes": rows.total_bytes, "dead_in_bytes": rows.dead_bytes},
                     "segments": {"count": rows.segments},
                     "not_indexed": {"terms_too_long": skipped["terms"], "keyword_values": skipped["keywords"]}}
            info = self.store.index_info(name)
            indices[name] = {"uuid": info.uuid, "health": "green", "status": "close" if info.closed else "open",
                             "primaries": stats,
                             "total": stats}
            for group, counts in stats.items():
                for key, value in counts.items():
                    total[group][key] += value
        send(resp, {"_shards": _shards(len(names)),
                    "_all": {"primaries": total, "total": total}, "indices": indices})


def _resolve(store: Any, req: falcon.Request, index: str | None) -> list[str]:
    return resolve_indices(store, index, ignore_unavailable=bool_param(req, "ignore_unavailable"),
                           allow_no_indices=bool_param(req, "allow_no_indices", True),
                           expand_wildcards=default_expand(req))


class IndexSettings:
    """``GET /_settings``, ``GET|PUT /{index}/_settings``: ES's string-valued settings; updates only the
    dynamic settings that hold here, refusing the rest by name."""

    ops = {"GET": ("indices.get_settings", "read"), "PUT": ("indices.put_settings", "manage")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        names = _resolve(self.store, req, index)
        send(resp, {name: {"settings": index_settings(self.store.index_info(name))} for name in names})

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        body = json_body(req, required=True)
        updates = meta.flatten_settings(body.get("settings", body) if isinstance(body, dict) else body)
        if not updates:
            raise IllegalArgument("Validation Failed: 1: no settings to update;")
        names = _resolve(self.store, req, index)
        for name in names:
            meta.check_dynamic_update(name, self.store.index_info(name).uuid, updates)
        for name in names:
            self.store.update_settings(name, updates)
        send(resp, {"acknowledged": True})


class IndexClose:
    """``POST /{index}/_close``: the index refuses reads and writes until ``_open``."""

    ops = {"POST": ("indices.close", "manage")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        names = _resolve(self.store, req, index)
        self.store.set_closed(names, True)
        send(resp, {"acknowledged": True, "shards_acknowledged": True,
                    "indices": {name: {"closed": True} for name in names}})


class IndexOpen:
    """``POST /{index}/_open``: a closed index serves again, its documents unchanged."""

    ops = {"POST": ("indices.open", "manage")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        names = _resolve(self.store, req, index)
        self.store.set_closed(names, False)
        send(resp, {"acknowledged": True, "shards_acknowledged": True})


def _alias_names(name: str | None) -> list[str]:
    return [n for n in (name or "").split(",") if n]


def _alias_matches(alias: str, wanted: list[str]) -> bool:
    import fnmatch

    return not wanted or any(w in ("_all", "*") or fnmatch.fnmatchcase(alias, w) for w in wanted)


def _alias_listing(store: Any, names: list[str] | None, wanted: list[str]) -> tuple[dict[str, Any], list[str]]:
    """``({index: {"aliases": {...}}}, wanted concrete alias names that matched nothing)``."""
    aliases = store.aliases()
    out: dict[str, Any] = {}
    matched: set[str] = set()
    for alias, members in sorted(aliases.items()):
        if not _alias_matches(alias, wanted):
            continue
        for index, props in members.items():
            if names is not None and index not in names:
                continue
            matched.add(alias)
            out.setdefault(index, {"aliases": {}})["aliases"][alias] = dict(props)
    if names is not None and not wanted:
        for index in names:
            out.setdefault(index, {"aliases": {}})
    missing = [w for w in wanted if "*" not in w and w != "_all" and w not in matched]
    return out, missing


def _narrowed(store: Any, index: str | None) -> list[str] | None:
    return None if index is None else resolve_indices(store, index, ignore_unavailable=True,
                                                      expand_wildcards="open,closed")


def _send_aliases(resp: falcon.Response, found: dict[str, Any], missing: list[str]) -> None:
    if missing:
        # ES's own shape for this one: the listing that was found, beside a plain-string error.
        send(resp, {"error": f"alias [{','.join(missing)}] missing", "status": 404, **found}, 404)
    else:
        send(resp, found)


class Aliases:
    """``GET|HEAD /_alias[/{name}]``: which indices carry which aliases."""

    ops = {"GET": ("indices.get_alias", "read"), "HEAD": ("indices.exists_alias", "read")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    # ``index`` is set only by the authorize slot, narrowing this fan-out to the indices the caller may read.
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str | None = None,
               index: str | None = None) -> None:
        _send_aliases(resp, *_alias_listing(self.store, _narrowed(self.store, index), _alias_names(name)))

    def on_head(self, req: falcon.Request, resp: falcon.Response, name: str | None = None,
                index: str | None = None) -> None:
        found, missing = _alias_listing(self.store, _narrowed(self.store, index), _alias_names(name))
        resp.status = 404 if missing or not found else 200
        resp.content_type = falcon.MEDIA_JSON


class IndexAliasList:
    """``GET|HEAD /{index}/_alias``: the aliases of some indices."""

    ops = {"GET": ("indices.get_alias", "read"), "HEAD": ("indices.exists_alias", "read")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str, name: str | None = None) -> None:
        names = _resolve(self.store, req, index)
        _send_aliases(resp, *_alias_listing(self.store, names, _alias_names(name)))

    def on_head(self, req: falcon.Request, resp: falcon.Response, index: str, name: str | None = None) -> None:
        names = _resolve(self.store, req, index)
        found, missing = _alias_listing(self.store, names, _alias_names(name))
        has_any = any(entry["aliases"] for entry in found.values())
        resp.status = 404 if missing or not has_any else 200
        resp.content_type = falcon.MEDIA_JSON


class IndexAliases(IndexAliasList):
    """``GET|HEAD|PUT|POST|DELETE /{index}/_alias/{name}``: read, add or remove named aliases."""

    ops = {**IndexAliasList.ops, "PUT": ("indices.put_alias", "manage"), "POST": ("indices.put_alias", "manage"),
           "DELETE": ("indices.delete_alias", "manage")}

    def on_put(self, req: falcon.Request, resp: falcon.Response, index: str, name: str | None = None) -> None:
        if not name:
            raise IllegalArgument("Validation Failed: 1: [name] is missing;")
        props = meta.alias_properties(name, json_body(req) or None)
        names = resolve_indices(self.store, index)
        self.store.update_aliases([("add", alias, idx, props) for alias in _alias_names(name) for idx in names])
        send(resp, {"acknowledged": True})

    on_post = on_put

    def on_delete(self, req: falcon.Request, resp: falcon.Response, index: str, name: str | None = None) -> None:
        names = resolve_indices(self.store, index)
        wanted = _alias_names(name)
        aliases = self.store.aliases()
        actions = [("remove", alias, idx, {"must_exist": False}) for alias in sorted(aliases)
                   if _alias_matches(alias, wanted) for idx in names if idx in aliases[alias]]
        if not actions:
            send(resp, {"error": {"root_cause": [{"type": "aliases_not_found_exception",
                                                  "reason": f"aliases [{name}] missing"}],
                                  "type": "aliases_not_found_exception", "reason": f"aliases [{name}] missing",
                                  "resource.type": "aliases", "resource.id": name}, "status": 404}, 404)
            return
        self.store.update_aliases(actions)
        send(resp, {"acknowledged": True})


_ACTION_KEYS = {"index", "indices", "alias", "aliases", "must_exist", *meta.ALIAS_PROPERTIES}


def parse_alias_actions(store: Any, body: Any) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The actions of a ``POST /_aliases`` body as ``(action, alias, index, properties)``, all checked first."""
    actions = body.get("actions") if isinstance(body, dict) else None
    if not isinstance(actions, list) or not actions:
        raise IllegalArgument("Validation Failed: 1: no action specified;")
    out = []
    for n, action in enumerate(actions):
        if not isinstance(action, dict) or len(action) != 1:
            raise ParsingError(f"[aliases] action [{n}] must be an object with one of [add, remove, remove_index]")
        ((kind, spec),) = action.items()
        if kind not in ("add", "remove", "remove_index") or not isinstance(spec, dict):
            raise ParsingError(f"[aliases] unknown action [{kind}]; expected [add], [remove] or [remove_index]")
        unknown = sorted(set(spec) - _ACTION_KEYS)
        if unknown:
            raise ParsingError(f"[{kind}] unknown field [{unknown[0]}]")
        index_spec = spec.get("indices", spec.get("index"))
        expressions = index_spec if isinstance(index_spec, list) else [index_spec]
        if not expressions or not all(isinstance(e, str) and e for e in expressions):
            raise IllegalArgument(f"Validation Failed: 1: One of [index] or [indices] is required for [{kind}];")
        indices = list(dict.fromkeys(i for e in expressions for i in resolve_indices(store, e)))
        if kind == "remove_index":
            out += [("remove_index", "", index, {}) for index in indices]
            continue
        alias_spec = spec.get("aliases", spec.get("alias"))
        alias_names = alias_spec if isinstance(alias_spec, list) else [alias_spec]
        if not alias_names or not all(isinstance(a, str) and a for a in alias_names):
            raise IllegalArgument(f"Validation Failed: 1: One of [alias] or [aliases] is required for [{kind}];")
        if kind == "add":
            for alias in alias_names:
                props = meta.alias_properties(alias, {k: v for k, v in spec.items()
                                                      if k in meta.ALIAS_PROPERTIES})
                out += [("add", alias, index, props) for index in indices]
        else:
            must_exist = spec.get("must_exist", True)
            known = store.aliases()
            for alias in alias_names:
                matching = [a for a in known if _alias_matches(a, [alias])] if "*" in alias else [alias]
                out += [("remove", a, index, {"must_exist": bool(must_exist) and "*" not in alias})
                        for a in matching for index in indices]
    return out


class AliasActions:
    """``POST /_aliases``: ``add``, ``remove`` and ``remove_index`` actions applied in one transaction."""

    ops = {"POST": ("indices.update_aliases", "manage")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.store.update_aliases(parse_alias_actions(self.store, json_body(req, required=True)))
        send(resp, {"acknowledged": True, "errors": False})


class ForceMerge:
    """``POST /{index}/_forcemerge``: compact each index now, dropping its dead rows (see ``Store.forcemerge``)."""

    ops = {"POST": ("indices.forcemerge", "manage")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        names = resolve_indices(self.store, index, ignore_unavailable=bool_param(req, "ignore_unavailable"),
                                expand_wildcards=req.get_param("expand_wildcards") or "open")
        for name in names:
            self.store.forcemerge(name)
        send(resp, {"_shards": _shards(len(names))})
