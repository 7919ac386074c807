"""Cluster-level routes: the root banner, ``_cat/indices``, ``_refresh`` and the OpenAPI document."""

from __future__ import annotations

import hashlib
import socket
from typing import TYPE_CHECKING, Any

import falcon
import orjson

from xerj_core import __version__
from xerj_core.query.resolve import resolve_indices
from xerj_http.bodies import bool_param
from xerj_http.resources.common import send

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

# The Elasticsearch wire version xerj speaks, so official-style clients accept the server.
ES_COMPAT_VERSION = "8.11.0"
TAGLINE = "xerj: documents, their links and their evidence, recalled locally"


def cluster_info(engine: Engine) -> dict[str, Any]:
    digest = hashlib.sha256(str(engine.data_dir.resolve()).encode()).hexdigest()
    return {
        "name": socket.gethostname(),
        "cluster_name": "xerj",
        "cluster_uuid": digest[:22],
        "version": {
            "number": ES_COMPAT_VERSION,
            "build_flavor": "default",
            "build_type": "xerj",
            "build_hash": digest[22:62],
            "build_snapshot": False,
            "minimum_wire_compatibility_version": "7.17.0",
            "minimum_index_compatibility_version": "7.0.0",
            "xerj_version": __version__,
        },
        "tagline": TAGLINE,
    }


OPEN_MODE_WARNING = ("OPEN MODE: no credential is checked and every caller is a superuser over every index, "
                     "brain and memory namespace")


class Root:
    """``GET /`` (cluster info, saying whether the server is in open mode) and ``HEAD /`` (ping).

    Both bodies are built once per app; the principal's mode picks one.
    """

    ops = {"GET": ("cluster.info", "monitor"), "HEAD": ("cluster.ping", "monitor")}

    def __init__(self, engine: Engine) -> None:
        info = cluster_info(engine)
        self.body = orjson.dumps({**info, "xerj_mode": "secured"})
        self.open_body = orjson.dumps({**info, "xerj_mode": "open", "xerj_warning": OPEN_MODE_WARNING})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self.open_body if req.context.principal.mode == "open" else self.body

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON


CAT_INDICES_COLUMNS = ("health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted")
# Asked for with ``h`` only: counting an index's bytes reads every entry it holds.
CAT_INDICES_SIZES = ("store.size", "store.dead")


class CatIndices:
    """``GET /_cat/indices[/{index}]``: aligned text (``v`` adds headers, ``h`` picks columns) or ``format=json``."""

    ops = {"GET": ("cat.indices", "monitor")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        expand = req.get_param("expand_wildcards") or "open"
        names = resolve_indices(self.store, index, expand_wildcards=expand)
        columns = list(CAT_INDICES_COLUMNS)
        wanted = req.get_param("h")
        if wanted:
            known = CAT_INDICES_COLUMNS + CAT_INDICES_SIZES
            columns = [c for c in (w.strip() for w in wanted.split(",")) if c in known] or columns
        rows = []
        for name in names:
            info = self.store.index_info(name)
            row = {"health": "green", "status": "open", "index": name, "uuid": info.uuid, "pri": "1",
                   "rep": "0", "docs.count": str(info.doc_count), "docs.deleted": str(info.deleted_rows)}
            if any(c in CAT_INDICES_SIZES for c in columns):
                stats = self.store.index_stats(name)
                row.update({"store.size": str(stats.total_bytes), "store.dead": str(stats.dead_bytes)})
            rows.append(row)
        rows = [{c: row[c] for c in columns} for row in rows]
        sort = req.get_param("s")
        if sort:
            key, _, order = sort.partition(":")
            if key in columns:
                numeric = key in ("docs.count", "docs.deleted", "pri", "rep", *CAT_INDICES_SIZES)
                rows.sort(key=lambda r: int(r[key]) if numeric else r[key], reverse=order == "desc")
        if req.get_param("format") == "json":
            send(resp, rows)
            return
        table = [columns] if bool_param(req, "v") else []
        table += [[row[c] for c in columns] for row in rows]
        widths = [max((len(line[i]) for line in table), default=0) for i in range(len(columns))]
        text = "".join(" ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() + "\n" for line in table)
        resp.content_type = "text/plain; charset=UTF-8"
        resp.text = text


class Refresh:
    """``POST|GET /_refresh`` and ``/{index}/_refresh``: accepted; every committed write is already visible."""

    ops = {"POST": ("indices.refresh", "read"), "GET": ("indices.refresh", "read")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_post(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        names = resolve_indices(self.store, index, expand_wildcards=req.get_param("expand_wildcards") or "open")
        send(resp, {"_shards": {"total": len(names), "successful": len(names), "failed": 0}})

    on_get = on_post


class OpenApiDocument:
    """``GET /_xerj/openapi.json``: the OpenAPI 3 description of every route this plugin serves."""

    ops = {"GET": ("xerj.openapi", "monitor")}

    def __init__(self) -> None:
        from xerj_http.openapi import document

        self.body = orjson.dumps(document())

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self.body
