"""Cluster-level routes: the root banner, ``_cat/indices``, ``_refresh`` and the OpenAPI document."""

from __future__ import annotations

import hashlib
import socket
import time
from typing import TYPE_CHECKING, Any

import falcon
import orjson

from xerj_core import __version__
from xerj_core.errors import IllegalArgument
from xerj_core.query.resolve import resolve_indices
from xerj_core.query.values import format_date
from xerj_http.bodies import bool_param
from xerj_http.resources.common import send
from xerj_http.targets import default_expand

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


_HEALTH_ORDER = {"green": 0, "yellow": 1, "red": 2}
_HEALTH_PARAMS = {"level", "local", "master_timeout", "timeout", "wait_for_active_shards", "wait_for_events",
                  "wait_for_nodes", "wait_for_no_initializing_shards", "wait_for_no_relocating_shards",
                  "wait_for_status", "expand_wildcards", "pretty", "human", "error_trace", "filter_path"}


class Health:
    """``GET /_cluster/health[/{index}]``: one node holding one primary per index and no replicas, so green.

    A named index that does not exist makes the answer red (as in ES); waiting
    cannot change anything on one node, so a ``wait_for_status`` the answer does
    not meet returns at once with ``timed_out: true`` and 408.
    """

    ops = {"GET": ("cluster.health", "monitor")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        for key in req.params:
            if key not in _HEALTH_PARAMS:
                raise IllegalArgument(f"request [{req.path}] contains unrecognized parameter: [{key}]")
        level = req.get_param("level") or "cluster"
        if level not in ("cluster", "indices", "shards"):
            raise IllegalArgument(f"level must be one of [cluster, indices, shards] but was [{level}]")
        wait_for = req.get_param("wait_for_status")
        if wait_for is not None and wait_for not in _HEALTH_ORDER:
            raise IllegalArgument(f"unknown cluster health status [{wait_for}]")
        expand = req.get_param("expand_wildcards") or "open"
        names = resolve_indices(self.store, index, ignore_unavailable=True, expand_wildcards=expand)
        missing = bool(index) and not names and not any("*" in p for p in index.split(","))
        status = "red" if missing else "green"
        shards = len(names)
        timed_out = wait_for is not None and _HEALTH_ORDER[status] > _HEALTH_ORDER[wait_for]
        body: dict[str, Any] = {
            "cluster_name": "xerj", "status": status, "timed_out": timed_out,
            "number_of_nodes": 1, "number_of_data_nodes": 1,
            "active_primary_shards": shards, "active_shards": shards,
            "relocating_shards": 0, "initializing_shards": 0, "unassigned_shards": 0,
            "delayed_unassigned_shards": 0, "number_of_pending_tasks": 0, "number_of_in_flight_fetch": 0,
            "task_max_waiting_in_queue_millis": 0, "active_shards_percent_as_number": 100.0,
        }
        if level in ("indices", "shards"):
            body["indices"] = {name: {"status": "green", "number_of_shards": 1, "number_of_replicas": 0,
                                      "active_primary_shards": 1, "active_shards": 1, "relocating_shards": 0,
                                      "initializing_shards": 0, "unassigned_shards": 0} for name in names}
        send(resp, body, 408 if timed_out else 200)


# _cat columns: (name, its short aliases, numeric for sorting). The defaults are Elasticsearch's.
CAT_INDICES = (
    ("health", ("h",), False), ("status", ("s",), False), ("index", ("i", "idx"), False),
    ("uuid", ("id",), False), ("pri", ("p", "shards.primary", "shardsPrimary"), True),
    ("rep", ("r", "shards.replica", "shardsReplica"), True), ("docs.count", ("dc", "docsCount"), True),
    ("docs.deleted", ("dd", "docsDeleted"), True), ("store.size", ("ss", "storeSize"), True),
    ("pri.store.size", (), True), ("creation.date", ("cd",), True), ("creation.date.string", ("cds",), False),
    ("store.dead", (), True),
)
CAT_INDICES_DEFAULT = ("health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted",
                       "store.size", "pri.store.size")
CAT_COUNT = (("epoch", ("t", "time"), True), ("timestamp", ("ts", "hms", "hhmmss"), False),
             ("count", ("dc", "docs.count", "docsCount"), True))
CAT_ALIASES = (("alias", ("a",), False), ("index", ("i", "idx"), False), ("filter", ("f", "fi"), False),
               ("routing.index", ("ri", "routingIndex"), False), ("routing.search", ("rs", "routingSearch"), False),
               ("is_write_index", ("w", "isWriteIndex"), False))
_BYTE_UNITS = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, "pb": 1 << 50}
_CAT_PARAMS = {"format", "h", "s", "v", "help", "bytes", "health", "expand_wildcards", "pri", "local",
               "master_timeout", "time", "include_unloaded_segments", "pretty", "human", "error_trace",
               "filter_path"}


def human_bytes(size: int) -> str:
    """Elasticsearch's byte rendering: the largest unit that keeps a value of at least 1, one decimal."""
    for unit in ("pb", "tb", "gb", "mb", "kb"):
        if size >= _BYTE_UNITS[unit]:
            value = size / _BYTE_UNITS[unit]
            return f"{value:.1f}{unit}".replace(".0" + unit, unit)
    return f"{size}b"


def _bytes(size: int | None, unit: str | None) -> str:
    if size is None:
        return ""
    if unit is None:
        return human_bytes(size)
    return str(size // _BYTE_UNITS[unit])


def cat_table(req: falcon.Request, resp: falcon.Response, spec: tuple, default: tuple[str, ...],
              rows: list[dict[str, Any]]) -> None:
    """Render ``_cat`` rows: ``h`` picks columns (by name or alias, ``*`` wildcards), ``s`` sorts
    (``col:desc``, several keys), ``v`` adds the header, ``format=json`` gives the same column names."""
    for key in req.params:
        if key not in _CAT_PARAMS:
            raise IllegalArgument(f"request [{req.path}] contains unrecognized parameter: [{key}]")
    if "help" in req.params:
        # ES's help lists each column with its aliases; with no descriptions kept here, just those two.
        width = max(len(name) for name, _a, _n in spec)
        resp.content_type = "text/plain; charset=UTF-8"
        resp.text = "".join(f"{name.ljust(width)} | {','.join(aliases) or '-'}\n" for name, aliases, _n in spec)
        return
    by_name = {}
    for name, aliases, numeric in spec:
        for alias in (name, *aliases):
            by_name[alias] = (name, numeric)
    wanted = req.get_param("h")
    if wanted:
        columns: list[tuple[str, str]] = []  # (display, column)
        for item in (w.strip() for w in wanted.split(",") if w.strip()):
            if "*" in item:
                import fnmatch

                columns += [(name, name) for name, _a, _n in spec if fnmatch.fnmatchcase(name, item)]
            elif item in by_name:  # an unknown column is left out, as ES does
                columns.append((item, by_name[item][0]))
    else:
        columns = [(name, name) for name in default]
    sort = req.get_param("s")
    if sort:
        for item in reversed([p.strip() for p in sort.split(",") if p.strip()]):
            key, _, order = item.partition(":")
            if key not in by_name:
                raise IllegalArgument(f"Unable to sort by unknown sort key `{key}`")
            column, numeric = by_name[key]
            if order not in ("", "asc", "desc"):
                raise IllegalArgument(f"Unknown sort order [{order}]; use [asc] or [desc]")

            def sort_key(row: dict[str, Any], column: str = column, numeric: bool = numeric) -> Any:
                value = row.get(f"_{column}", row.get(column))
                if numeric:
                    return (value is None or value == "", value if isinstance(value, int | float) else 0)
                return (False, str(value))

            rows.sort(key=sort_key, reverse=order == "desc")
    if req.get_param("format") == "json":
        send(resp, [{display: row.get(column) for display, column in columns} for row in rows])
        return
    if req.get_param("format") not in (None, "text", "txt"):
        raise IllegalArgument(f"[format] must be [text] or [json], got [{req.get_param('format')}]")
    table = [[display for display, _c in columns]] if bool_param(req, "v") else []
    table += [["" if row.get(column) is None else str(row.get(column)) for _d, column in columns] for row in rows]
    widths = [max((len(line[i]) for line in table), default=0) for i in range(len(columns))]
    text = "".join(" ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() + "\n" for line in table)
    resp.content_type = "text/plain; charset=UTF-8"
    resp.text = text


def _bytes_unit(req: falcon.Request) -> str | None:
    unit = req.get_param("bytes")
    if unit is not None and unit not in _BYTE_UNITS:
        raise IllegalArgument(f"failed to parse [bytes]: [{unit}], expected one of [{', '.join(_BYTE_UNITS)}]")
    return unit


class CatIndices:
    """``GET /_cat/indices[/{index}]``: ES's default columns, ``h``/``s``/``v``/``bytes``/``health``/``format``."""

    ops = {"GET": ("cat.indices", "monitor")}

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        health = req.get_param("health")
        if health is not None and health not in _HEALTH_ORDER:
            raise IllegalArgument(f"unknown cluster health status [{health}]")
        unit = _bytes_unit(req)
        names = resolve_indices(self.store, index, expand_wildcards=default_expand(req))
        rows = []
        for name in names:
            info = self.store.index_info(name)
            size = None if info.closed else self.store.index_size(name)
            rows.append({"health": "green", "status": "close" if info.closed else "open", "index": name,
                         "uuid": info.uuid, "pri": "1", "_pri": 1, "rep": "0", "_rep": 0,
                         "docs.count": None if info.closed else str(info.doc_count),
                         "_docs.count": None if info.closed else info.doc_count,
                         "docs.deleted": None if info.closed else str(info.deleted_rows),
                         "_docs.deleted": None if info.closed else info.deleted_rows,
                         "store.size": _bytes(size, unit), "_store.size": size,
                         "pri.store.size": _bytes(size, unit), "_pri.store.size": size,
                         "creation.date": str(info.created), "_creation.date": info.created,
                         "creation.date.string": format_date(info.created)})
            if "store.dead" in (req.get_param("h") or "") and not info.closed:
                # Asked for by name only: the dead share costs a scan of every entry of the index.
                dead = self.store.index_stats(name).dead_bytes
                rows[-1].update({"store.dead": _bytes(dead, unit), "_store.dead": dead})
        if health is not None:
            rows = [row for row in rows if row["health"] == health]
        cat_table(req, resp, CAT_INDICES, CAT_INDICES_DEFAULT, rows)


class CatCount:
    """``GET /_cat/count[/{index}]``: ``epoch timestamp count`` of the live documents."""

    ops = {"GET": ("cat.count", "monitor")}

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response, index: str | None = None) -> None:
        count = self.engine.search.count(index, None)["count"]
        now = time.time()
        rows = [{"epoch": str(int(now)), "_epoch": int(now), "timestamp": time.strftime("%H:%M:%S", time.gmtime(now)),
                 "count": str(count), "_count": count}]
        cat_table(req, resp, CAT_COUNT, ("epoch", "timestamp", "count"), rows)


class CatAliases:
    """``GET /_cat/aliases[/{name}]``: one row per alias and index, ``-`` where a column does not apply."""

    ops = {"GET": ("cat.aliases", "monitor")}

    def __init__(self, engine: Any) -> None:
        self.store = engine.store

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str | None = None,
               index: str | None = None) -> None:
        import fnmatch

        # ``index`` is set only by the authorize slot, narrowing the listing to the indices the caller may read.
        visible = None if index is None else set(resolve_indices(self.store, index, ignore_unavailable=True,
                                                                 expand_wildcards="open,closed"))
        wanted = [n for n in (name or "").split(",") if n]
        rows = []
        for alias, members in sorted(self.store.aliases().items()):
            if wanted and not any(fnmatch.fnmatchcase(alias, w) for w in wanted):
                continue
            for member, props in sorted(members.items()):
                if visible is not None and member not in visible:
                    continue
                write = props.get("is_write_index")
                rows.append({"alias": alias, "index": member, "filter": "-", "routing.index": "-",
                             "routing.search": "-", "is_write_index": "-" if write is None else str(write).lower()})
        cat_table(req, resp, CAT_ALIASES, ("alias", "index", "filter", "routing.index", "routing.search",
                                           "is_write_index"), rows)


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
