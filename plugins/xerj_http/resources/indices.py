"""Index routes: ``PUT|GET|HEAD|DELETE /{index}``, ``GET|PUT /{index}/_mapping``, ``_stats`` and ``_forcemerge``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon

from xerj_core.errors import IndexNotFound, ParsingError
from xerj_core.query.resolve import resolve_indices
from xerj_http.bodies import bool_param, json_body, refuse_unknown
from xerj_http.resources.common import concrete_names, send

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

_CREATE_FIELDS = {"mappings", "settings", "aliases"}


def index_settings(info: Any) -> dict[str, Any]:
    return {"index": {"creation_date": str(info.created), "uuid": info.uuid, "number_of_shards": "1",
                      "number_of_replicas": "0", "provided_name": info.name}}


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
        if body.get("aliases"):
            raise ParsingError("index aliases are not supported")
        settings = body.get("settings")
        if settings is not None and not isinstance(settings, dict):
            raise ParsingError("[settings] must be an object")
        self.store.create_index(index, body.get("mappings"), settings)
        send(resp, {"acknowledged": True, "shards_acknowledged": True, "index": index})

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str) -> None:
        out = {}
        for name in self._resolve(req, index):
            info = self.store.index_info(name)
            out[name] = {"aliases": {}, "mappings": info.mapping, "settings": index_settings(info)}
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
        names = resolve_indices(self.store, index, expand_wildcards=req.get_param("expand_wildcards") or "open")
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
            indices[name] = {"uuid": self.store.index_info(name).uuid, "health": "green", "status": "open",
                             "primaries": stats, "total": stats}
            for group, counts in stats.items():
                for key, value in counts.items():
                    total[group][key] += value
        send(resp, {"_shards": _shards(len(names)), "_all": {"primaries": total, "total": total},
                    "indices": indices})


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
