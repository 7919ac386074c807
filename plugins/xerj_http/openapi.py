"""The OpenAPI 3 document of every route xerj's HTTP plugin serves (``GET /_xerj/openapi.json``)."""

from __future__ import annotations

from typing import Any

from xerj_core import __version__

JSON = "application/json"
NDJSON = "application/x-ndjson"


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Any] | None = None, *, required: list[str] | None = None,
         extra: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}, "additionalProperties": extra}
    if required:
        schema["required"] = required
    return schema


STRING = {"type": "string"}
NAME = {"type": "string", "minLength": 1}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
NUMBER = {"type": "number"}
ANY_OBJECT = {"type": "object", "additionalProperties": True}
TIME = {"oneOf": [{"type": "integer"}, {"type": "string"}]}
INSTANT = {"type": "integer", "minimum": -(2**53), "maximum": 2**53, "description": "epoch milliseconds"}
LONG = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
STRINGS = {"type": "array", "items": STRING}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}

SHARDS = _obj({"total": INT, "successful": INT, "failed": INT})

_INDEX_GRANT = _obj({"names": {"type": "array", "items": NAME, "minItems": 1},
                     "privileges": {"type": "array", "minItems": 1,
                                    "items": {"type": "string", "enum": ["read", "write", "manage", "all"]}},
                     "allow_restricted_indices": BOOL}, required=["names", "privileges"], extra=False)
_SHARE_FIELDS = {"id": STRING, "brain": STRING, "folder": nullable(STRING), "indices": STRINGS, "created": INT,
                 "expires_at": INT, "revoked": BOOL, "revoked_at": INT,
                 "state": {"type": "string", "enum": ["active", "expired", "revoked"]}}
_SHARE_REQUIRED = ["id", "brain", "indices", "created", "expires_at", "revoked", "state"]
_SHARE = _obj(_SHARE_FIELDS, required=_SHARE_REQUIRED)
_SECURITY_SCHEMAS: dict[str, Any] = {
    "ApiKeyCreate": _obj({
        "name": NAME,
        "expiration": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h|d)$"},
        "role_descriptors": {"type": "object", "additionalProperties": _obj(
            {"indices": {"type": "array", "items": _INDEX_GRANT}, "cluster": STRINGS, "metadata": ANY_OBJECT},
            extra=False)},
        "metadata": ANY_OBJECT,
    }, required=["name"], extra=False),
    "ApiKeyCreated": _obj({"id": STRING, "name": STRING, "api_key": STRING, "encoded": STRING, "expiration": INT},
                          required=["id", "name", "api_key", "encoded"]),
    "ApiKeys": _obj({"api_keys": {"type": "array", "items": _obj({
        "id": STRING, "name": STRING, "creation": INT, "expiration": INT, "invalidated": BOOL,
        "invalidation": INT, "username": STRING, "realm": STRING, "metadata": ANY_OBJECT,
        "role_descriptors": ANY_OBJECT}, required=["id", "name", "creation", "invalidated"])}},
        required=["api_keys"]),
    "ApiKeyInvalidate": _obj({"ids": STRINGS, "id": STRING, "name": NAME}, extra=False),
    "ApiKeysInvalidated": _obj({"invalidated_api_keys": STRINGS, "previously_invalidated_api_keys": STRINGS,
                                "error_count": INT},
                               required=["invalidated_api_keys", "previously_invalidated_api_keys", "error_count"]),
    "ShareCreate": _obj({"brain": NAME, "folder": NAME,
                         "expires": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h|d)$"}},
                        required=["brain"], extra=False),
    "Share": _SHARE,
    "ShareCreated": _obj({**_SHARE_FIELDS, "passcode": STRING}, required=[*_SHARE_REQUIRED, "passcode"]),
    "Shares": _obj({"shares": {"type": "array", "items": _SHARE}}, required=["shares"]),
    "ShareExchange": _obj({"share": NAME, "passcode": NAME}, required=["share", "passcode"], extra=False),
    "GuestToken": _obj({"token": STRING, "expires_at": INT, "share": STRING}, required=["token", "expires_at"]),
    "Authenticated": _obj({"username": STRING, "roles": STRINGS, "authentication_type": STRING,
                           "api_key": _obj({"id": STRING, "name": STRING})},
                          required=["username", "roles", "authentication_type"]),
}

SCHEMAS: dict[str, Any] = {
    **_SECURITY_SCHEMAS,
    "Error": _obj({
        "error": _obj({"type": STRING, "reason": STRING, "root_cause": {"type": "array", "items": ANY_OBJECT}},
                      required=["type", "reason"]),
        "status": INT,
    }, required=["error", "status"]),
    "Acknowledged": _obj({"acknowledged": BOOL, "shards_acknowledged": BOOL, "index": STRING},
                         required=["acknowledged"]),
    "ClusterInfo": _obj({
        "name": STRING, "cluster_name": STRING, "cluster_uuid": STRING,
        "version": _obj({"number": STRING, "build_flavor": STRING, "xerj_version": STRING}, required=["number"]),
        "tagline": STRING,
    }, required=["name", "cluster_name", "version", "tagline"]),
    "WriteResult": _obj({
        "_index": STRING, "_id": STRING, "_version": INT,
        "result": {"type": "string", "enum": ["created", "updated", "deleted", "not_found", "noop"]},
        "_shards": SHARDS, "_seq_no": INT, "_primary_term": INT,
    }, required=["_index", "_id", "_version", "result"]),
    "GetResult": _obj({"_index": STRING, "_id": STRING, "_version": INT, "found": BOOL, "_source": ANY_OBJECT},
                      required=["_index", "_id", "found"]),
    "IndexCreate": _obj({"mappings": ANY_OBJECT, "settings": ANY_OBJECT,
                         "aliases": {"type": "object", "additionalProperties": _obj({"is_write_index": BOOL,
                                                                                     "is_hidden": BOOL})}},
                        extra=False),
    "Settings": {"type": "object", "additionalProperties": _obj({"settings": ANY_OBJECT}, required=["settings"])},
    "SettingsUpdate": ANY_OBJECT,
    "Closed": _obj({"acknowledged": BOOL, "shards_acknowledged": BOOL, "indices": ANY_OBJECT},
                   required=["acknowledged"]),
    "AliasListing": {"type": "object", "additionalProperties": {}},
    "AliasBody": nullable(_obj({"is_write_index": BOOL, "is_hidden": BOOL})),
    "AliasActions": _obj({"actions": {"type": "array", "items": ANY_OBJECT}}, required=["actions"]),
    "AliasActionsResult": _obj({"acknowledged": BOOL, "errors": BOOL}, required=["acknowledged"]),
    "CatRows": {"type": "array", "items": ANY_OBJECT},
    "Mapping": _obj({"properties": ANY_OBJECT, "dynamic": {"oneOf": [BOOL, STRING]}}),
    "IndexDescriptions": {"type": "object", "additionalProperties": _obj(
        {"aliases": ANY_OBJECT, "mappings": ANY_OBJECT, "settings": ANY_OBJECT})},
    "Mappings": {"type": "object", "additionalProperties": _obj({"mappings": ANY_OBJECT}, required=["mappings"])},
    "Document": ANY_OBJECT,
    "UpdateBody": _obj({"doc": ANY_OBJECT, "upsert": ANY_OBJECT, "doc_as_upsert": BOOL, "detect_noop": BOOL,
                        "_source": BOOL}, required=["doc"], extra=False),
    "BulkBody": {"type": "array", "items": ANY_OBJECT, "maxItems": 8,
                 "description": "NDJSON: an action line ({index|create|update|delete: {_index, _id}}) followed, "
                                "except for delete, by a source line."},
    "BulkResponse": _obj({"took": INT, "errors": BOOL, "items": {"type": "array", "items": ANY_OBJECT}},
                         required=["took", "errors", "items"]),
    "MgetBody": _obj({
        "docs": {"type": "array", "items": _obj({"_index": STRING, "_id": STRING, "_source": {}},
                                                required=["_id"])},
        "ids": {"type": "array", "items": STRING},
    }, extra=False),
    "MgetResponse": _obj({"docs": {"type": "array", "items": ANY_OBJECT}}, required=["docs"]),
    "SearchBody": _obj({"query": ANY_OBJECT, "size": {"type": "integer", "minimum": 0, "maximum": 10000},
                        "from": {"type": "integer", "minimum": 0, "maximum": 10000}, "sort": {},
                        "_source": {}, "aggs": ANY_OBJECT, "knn": {}, "track_total_hits": {},
                        "search_after": {"type": "array"}, "pit": _obj({"id": STRING, "keep_alive": STRING})}),
    "SearchResponse": _obj({"took": INT, "timed_out": BOOL, "hits": _obj({
        "total": ANY_OBJECT, "max_score": {"type": "number", "nullable": True},
        "hits": {"type": "array", "items": ANY_OBJECT}}, required=["hits"]), "aggregations": ANY_OBJECT,
        "_scroll_id": STRING, "pit_id": STRING}, required=["hits"]),
    "CountBody": _obj({"query": ANY_OBJECT}),
    "CountResponse": _obj({"count": INT, "_shards": SHARDS}, required=["count"]),
    "DeleteByQueryBody": _obj({"query": ANY_OBJECT, "max_docs": {"type": "integer", "minimum": 1},
                               "conflicts": {"type": "string", "enum": ["abort", "proceed"]}}),
    "DeleteByQueryResponse": _obj({"took": INT, "timed_out": BOOL, "total": INT, "deleted": INT, "batches": INT,
                                   "version_conflicts": INT, "noops": INT, "failures": {"type": "array",
                                                                                       "items": ANY_OBJECT}},
                                  required=["total", "deleted", "version_conflicts", "failures"]),
    "MsearchBody": {"type": "array", "items": ANY_OBJECT, "maxItems": 8,
                    "description": "NDJSON: header line ({index?}) and search body line, repeated."},
    "MsearchResponse": _obj({"took": INT, "responses": {"type": "array", "items": ANY_OBJECT}},
                            required=["responses"]),
    "CatIndex": _obj({"health": STRING, "status": STRING, "index": STRING, "uuid": STRING, "pri": STRING,
                      "rep": STRING, "docs.count": nullable(STRING), "docs.deleted": nullable(STRING),
                      "store.size": STRING, "pri.store.size": STRING}),
    "Shards": _obj({"_shards": SHARDS}, required=["_shards"]),
    "ClusterHealth": _obj({
        "cluster_name": STRING, "status": {"type": "string", "enum": ["green", "yellow", "red"]},
        "timed_out": BOOL, "number_of_nodes": INT, "number_of_data_nodes": INT, "active_primary_shards": INT,
        "active_shards": INT, "relocating_shards": INT, "initializing_shards": INT, "unassigned_shards": INT,
        "delayed_unassigned_shards": INT, "number_of_pending_tasks": INT, "number_of_in_flight_fetch": INT,
        "task_max_waiting_in_queue_millis": INT, "active_shards_percent_as_number": NUMBER,
        "indices": ANY_OBJECT,
    }, required=["cluster_name", "status", "timed_out", "number_of_nodes", "active_shards"]),
    "ScrollBody": _obj({"scroll_id": STRING, "scroll": STRING, "rest_total_hits_as_int": BOOL}, extra=False),
    "ScrollResponse": _obj({"_scroll_id": STRING, "took": INT, "timed_out": BOOL, "_shards": SHARDS,
                            "hits": ANY_OBJECT}, required=["_scroll_id", "hits"]),
    "ClearScrollBody": _obj({"scroll_id": {"oneOf": [STRING, STRINGS]}}),
    "ClearScrollResponse": _obj({"succeeded": BOOL, "num_freed": INT}, required=["succeeded", "num_freed"]),
    "PitOpened": _obj({"id": STRING, "_shards": SHARDS}, required=["id", "_shards"]),
    "PitClose": _obj({"id": {"oneOf": [STRING, STRINGS]}}, required=["id"]),
    "OpenSearchPitOpened": _obj({"pit_id": STRING, "_shards": SHARDS, "creation_time": INT},
                                required=["pit_id", "_shards", "creation_time"]),
    "OpenSearchPitClose": _obj({"pit_id": {"oneOf": [STRING, STRINGS]}}, required=["pit_id"]),
    "OpenSearchPitsClosed": _obj({"pits": {"type": "array", "items": _obj({"pit_id": STRING, "successful": BOOL})}},
                                 required=["pits"]),
    "OpenSearchPits": _obj({"pits": {"type": "array", "items": _obj(
        {"pit_id": STRING, "creation_time": INT, "keep_alive": INT})}}, required=["pits"]),
    # -- the second brain
    "LinkBody": _obj({
        "src": NAME, "dst": NAME, "type": NAME, "weight": NUMBER, "confidence": NUMBER,
        "valid_at": TIME, "created_at": TIME, "detector": STRING,
        "evidence": _obj({"quote": STRING, "source": STRING, "offset": INT}),
    }, required=["src", "dst", "type"], extra=False),
    "LinkResult": _obj({"brain": STRING, "edge_id": STRING, "created": BOOL, "edge": ANY_OBJECT},
                       required=["brain", "edge_id", "created", "edge"]),
    "UnlinkResult": _obj({"brain": STRING, "edge_id": STRING, "invalidated": BOOL, "already_invalid_at": INT},
                         required=["brain", "edge_id", "invalidated"]),
    "Ego": _obj({
        "brain": STRING, "contract": STRING, "seeds": {"type": "array", "items": STRING}, "node": STRING,
        "as_of": INT, "hops": INT, "direction": STRING,
        "edges": {"type": "array", "items": ANY_OBJECT}, "neighbors": {"type": "array", "items": {}},
        "nodes": {}, "not_shown": ANY_OBJECT, "node_found": BOOL,
        "resolved": {"type": "object", "additionalProperties": STRING},
        "not_found": {"type": "object", "additionalProperties": {"type": "array", "items": ANY_OBJECT}},
    }, required=["brain", "contract", "seeds", "hops", "edges", "not_shown", "node_found"]),
    "Overview": _obj({
        "brain": STRING, "contract": STRING, "exists": BOOL, "as_of": INT, "nodes_index": STRING,
        "nodes": ANY_OBJECT, "embedder": STRING, "edges": ANY_OBJECT, "types": {}, "detectors": {},
        "hubs": ANY_OBJECT, "created_over_time": {}, "not_shown": ANY_OBJECT,
    }, required=["brain", "contract", "exists"]),
    "ReviewQueue": _obj({"brain": STRING, "contract": STRING, "state": STRINGS, "total": INT,
                         "items": {"type": "array", "items": ANY_OBJECT}},
                        required=["brain", "state", "total", "items"]),
    "ReviewBody": _obj({"approve": STRINGS, "reject": STRINGS, "note": STRING}, extra=False),
    "ReviewResult": _obj({"brain": STRING, "reviewed_by": STRING, "approved": INT, "rejected": INT,
                          "not_found": INT, "results": {"type": "array", "items": ANY_OBJECT}},
                         required=["brain", "results"]),
    "OverviewMissing": _obj({"brain": STRING, "contract": STRING, "exists": {"type": "boolean", "enum": [False]}},
                            required=["brain", "contract", "exists"]),
    # -- the machine writer (autoindex against a server)
    "StandingEdges": _obj({"brain": STRING, "live": STRINGS, "rejected": STRINGS},
                          required=["brain", "live", "rejected"]),
    "ClaimsQuery": _obj({"files": STRINGS}, required=["files"], extra=False),
    "LiveClaims": _obj({"brain": STRING, "claims": {"type": "array", "items": _obj({
        "edge_id": STRING, "src": STRING, "type": STRING, "dst": STRING, "detector": nullable(STRING),
        "weight": nullable(NUMBER), "confidence": nullable(NUMBER), "valid_at": nullable(LONG),
        "src_format": nullable(STRING), "dst_format": nullable(STRING), "quote": nullable(STRING),
        "source": nullable(STRING), "offset": nullable(LONG)}, required=["edge_id", "src", "type", "dst"])}},
        required=["brain", "claims"]),
    "Invalidation": _obj({"edge_ids": STRINGS, "at": INSTANT}, required=["edge_ids", "at"], extra=False),
    "InvalidationResult": _obj({"brain": STRING, "invalidated": INT}, required=["brain", "invalidated"]),
    "EdgeDraft": _obj({
        "src": NAME, "dst": NAME, "type": NAME, "detector": NAME, "weight": NUMBER, "confidence": NUMBER,
        "valid_at": INSTANT,
        "evidence": nullable(_obj({"quote": STRING, "source": STRING, "offset": LONG}, required=["quote", "source"],
                                  extra=False)),
        "src_format": nullable(STRING), "dst_format": nullable(STRING),
    }, required=["src", "dst", "type", "detector", "weight", "confidence", "valid_at"], extra=False),
    "EdgeBatch": _obj({"created_at": INSTANT, "edges": {"type": "array", "items": ref("EdgeDraft")},
                       "nodes_index": nullable(STRING)}, required=["created_at", "edges"], extra=False),
    "EdgeWriteResult": _obj({"brain": STRING, "edges_index": STRING, "written": INT, "created": INT, "updated": INT,
                             "suppressed": INT, "self_edges_skipped": INT},
                            required=["brain", "written", "created", "updated", "suppressed"]),
    "FileState": _obj({"mtime_ns": LONG, "size": LONG, "hash": STRING, "docs": STRINGS},
                      required=["mtime_ns", "size"]),
    "AutoindexState": _obj({
        "brain": STRING, "files": {"type": "object", "additionalProperties": ref("FileState")},
        "run": nullable(_obj({"dirty": BOOL, "detectors": nullable(STRINGS), "finished_at": nullable(INT),
                              "formats": nullable(STRINGS)})),
        "edges_index": BOOL, "root_id": STRING, "root": nullable(STRING),
    }, required=["brain", "files", "run", "edges_index"]),
    "FileBatch": _obj({
        "indexed_at": INSTANT,
        "files": {"type": "array", "items": _obj({
            "path": NAME,
            "stamp": nullable(_obj({"mtime_ns": LONG, "size": {**LONG, "minimum": 0}, "hash": STRING},
                                   required=["mtime_ns", "size", "hash"], extra=False)),
            "documents": {"type": "array", "items": _obj({"index": NAME, "id": NAME, "source": ANY_OBJECT},
                                                         required=["index", "id", "source"], extra=False)},
            "stale": {"type": "array", "items": STRING, "description": "dataset/id of documents the file no "
                                                                       "longer yields"},
        }, required=["path", "stamp"], extra=False)},
    }, required=["indexed_at", "files"], extra=False),
    "FileBatchResult": _obj({"brain": STRING, "files": INT, "documents": INT},
                            required=["brain", "files", "documents"]),
    "RunFinish": _obj({"root": NAME, "datasets": STRINGS, "detectors": STRINGS, "finished_at": INSTANT,
                       "root_id": STRING, "formats": nullable(STRINGS)},
                      required=["root", "datasets", "detectors", "finished_at"], extra=False),
    "RunFinishResult": _obj({"brain": STRING, "acknowledged": BOOL, "datasets": STRINGS},
                            required=["brain", "acknowledged"]),
    "IndexStats": _obj({"_shards": ANY_OBJECT, "_all": ANY_OBJECT, "indices": ANY_OBJECT},
                       required=["_shards", "_all", "indices"]),
    "NodeIdentity": _obj({"uuid": STRING, "data_dir": STRING, "xerj_version": STRING},
                         required=["uuid", "data_dir", "xerj_version"]),
    # -- agent memory
    "MemoryStore": _obj({"text": STRING, "vector": {"type": "array", "items": NUMBER}, "metadata": ANY_OBJECT,
                         "dedup": BOOL, "dedup_threshold": NUMBER, "override_rejection": BOOL, "about": STRINGS,
                         "brain": STRING}, extra=False),
    "MemoryRecall": _obj({
        "query": STRING, "vector": {"type": "array", "items": NUMBER}, "k": {"type": "integer", "minimum": 1,
                                                                            "maximum": 1000},
        "semantic": BOOL, "hybrid": BOOL, "fusion": STRING, "filter": ANY_OBJECT, "recency_weight": NUMBER,
        "as_of": TIME, "trust": STRINGS, "known_at": TIME,
        "graph": _obj({"mode": STRING, "seeds": {"type": "array", "items": STRING}, "hops": INT,
                       "types": {"type": "array", "items": STRING}, "weight": NUMBER, "as_of": TIME, "trust": STRINGS,
                       "brain": STRING, "known_at": TIME,
                       "min_confidence": NUMBER}, required=["mode"]),
    }, extra=False),
    "MemoryCreate": _obj({"embedder": STRING}, extra=False),
    "MemoryReembed": _obj({"embedder": STRING, "batch_size": {"type": "integer", "minimum": 1, "maximum": 10000}},
                          required=["embedder"], extra=False),
    "MemoryResult": ANY_OBJECT,
}


def _param(name: str, where: str, schema: dict[str, Any], *, required: bool = False,
           description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "in": where, "required": required or where == "path", "schema": schema}
    if description:
        out["description"] = description
    return out


def path(name: str) -> dict[str, Any]:
    return _param(name, "path", NAME)


def query(name: str, schema: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return _param(name, "query", schema, description=description)


def json_response(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


ERROR = json_response(ref("Error"), "An ES-shaped error body with its status.")
EMPTY = {"description": "No body (HEAD)."}


def op(summary: str, responses: dict[str, Any], *, params: list[dict[str, Any]] | None = None,
       body: dict[str, Any] | None = None, body_required: bool = False, media: str = JSON) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": summary, "responses": {**responses, "default": ERROR}}
    if params:
        out["parameters"] = params
    if body is not None:
        out["requestBody"] = {"required": body_required, "content": {media: {"schema": body}}}
    return out


def ok(schema_name: str, description: str = "OK") -> dict[str, Any]:
    return {"200": json_response(ref(schema_name), description)}


IGNORE_UNAVAILABLE = query("ignore_unavailable", BOOL)
EXPAND = query("expand_wildcards", {"type": "string", "enum": ["open", "hidden", "all", "none", "closed"]})
SEARCH_PARAMS = [query("q", STRING, "query-string query"), query("size", {"type": "integer", "minimum": 0,
                                                                           "maximum": 10000}),
                 query("from", {"type": "integer", "minimum": 0, "maximum": 10000}),
                 query("scroll", STRING, "open a scroll kept alive this long (e.g. 1m)")]


def _search_ops(with_index: bool) -> dict[str, Any]:
    params = [path("index")] if with_index else []
    search = op("Search", ok("SearchResponse"), params=params + SEARCH_PARAMS, body=ref("SearchBody"))
    return {"get": search, "post": search}


def _count_ops(with_index: bool) -> dict[str, Any]:
    params = [path("index")] if with_index else []
    count = op("Count matching documents", ok("CountResponse"), params=params or None, body=ref("CountBody"))
    return {"get": count, "post": count}


def _bulk_ops(with_index: bool) -> dict[str, Any]:
    params = [path("index")] if with_index else None
    bulk = op("Index, create, update and delete documents in one request", ok("BulkResponse"), params=params,
              body=ref("BulkBody"), body_required=True, media=NDJSON)
    return {"post": bulk, "put": bulk}


def _mget_ops(with_index: bool) -> dict[str, Any]:
    params = [path("index")] if with_index else None
    mget = op("Get several documents", ok("MgetResponse"), params=params, body=ref("MgetBody"),
              body_required=True)
    return {"get": mget, "post": mget}


def _msearch_ops(with_index: bool) -> dict[str, Any]:
    params = [path("index")] if with_index else None
    msearch = op("Run several searches", ok("MsearchResponse"), params=params, body=ref("MsearchBody"),
                 body_required=True, media=NDJSON)
    return {"get": msearch, "post": msearch}


def _refresh_ops(with_index: bool) -> dict[str, Any]:
    params = [path("index")] if with_index else []
    refresh = op("Accepted and answered at once: every committed write is already visible", ok("Shards"),
                 params=params + [EXPAND])
    return {"get": refresh, "post": refresh}


CAT_PARAMS = [query("format", {"type": "string", "enum": ["json", "text"]}), query("v", BOOL), query("h", STRING)]


def _cat_rows(summary: str, name: str | None) -> dict[str, Any]:
    responses = {"200": {"description": summary, "content": {
        JSON: {"schema": ref("CatRows")}, "text/plain": {"schema": STRING}}}}
    return {"get": op(summary, responses, params=([path(name)] if name else []) + CAT_PARAMS)}


def _cat_ops(with_index: bool) -> dict[str, Any]:
    params = ([path("index")] if with_index else []) + [
        query("format", {"type": "string", "enum": ["json", "text"]}), query("v", BOOL),
        query("h", STRING), query("s", {"type": "string", "enum": ["index", "docs.count:desc", "i:asc"]}),
        query("bytes", {"type": "string", "enum": ["b", "kb", "mb"]}),
        query("health", {"type": "string", "enum": ["green", "yellow", "red"]}), EXPAND]
    responses = {"200": {"description": "One row per index", "content": {
        JSON: {"schema": {"type": "array", "items": ref("CatIndex")}},
        "text/plain": {"schema": STRING}}}}
    return {"get": op("List indices", responses, params=params)}


def _api_key_ops() -> dict[str, Any]:
    create = op("Mint an API key (superuser only); the only time its secret is shown", ok("ApiKeyCreated"),
                body=ref("ApiKeyCreate"), body_required=True)
    return {
        "post": create, "put": create,
        "get": op("List API keys (a non-superuser sees its own)", ok("ApiKeys"),
                  params=[query("id", STRING), query("name", STRING, "* wildcards"), query("active_only", BOOL)]),
        "delete": op("Invalidate API keys by id or by name (superuser only)", ok("ApiKeysInvalidated"),
                     body=ref("ApiKeyInvalidate"), body_required=True),
    }


def _health_ops(with_index: bool) -> dict[str, Any]:
    params = ([path("index")] if with_index else []) + [
        query("level", {"type": "string", "enum": ["cluster", "indices", "shards"]}),
        query("wait_for_status", {"type": "string", "enum": ["green", "yellow", "red"]}), query("timeout", STRING)]
    responses = {"200": json_response(ref("ClusterHealth"), "The health (green on a healthy node)"),
                 "408": json_response(ref("ClusterHealth"), "wait_for_status was not met (timed_out: true)")}
    return {"get": op("Cluster health", responses, params=params)}


def _scroll_ops(with_id: bool) -> dict[str, Any]:
    params = ([path("scroll_id")] if with_id else []) + [query("scroll", STRING, "extend the keep-alive"),
                                                         query("rest_total_hits_as_int", BOOL)]
    page = op("The next page of a scroll", ok("ScrollResponse"), params=params, body=ref("ScrollBody"))
    cleared = {"200": json_response(ref("ClearScrollResponse"), "Cleared"),
               "404": json_response(ref("ClearScrollResponse"), "None of the scrolls existed (num_freed: 0)")}
    clear = op("Clear scrolls (_all: every scroll of the caller)", cleared, params=[path("scroll_id")] if with_id
               else None, body=None if with_id else ref("ClearScrollBody"))
    return {"get": page, "post": page, "delete": clear}


def paths() -> dict[str, Any]:
    doc_params = [path("index"), path("id")]
    get_result = {"200": json_response(ref("GetResult"), "Found"),
                  "404": json_response({"anyOf": [ref("GetResult"), ref("Error")]},
                                       "No such document (found: false) or no such index")}
    write = {"200": json_response(ref("WriteResult"), "Updated"),
             "201": json_response(ref("WriteResult"), "Created")}
    put_doc = op("Index a document under an id", write, params=doc_params + [
        query("op_type", {"type": "string", "enum": ["index", "create"]}), query("refresh", STRING)],
        body=ref("Document"), body_required=True)
    create_doc = op("Index a document only if its id is new", {"201": write["201"]}, params=doc_params,
                    body=ref("Document"), body_required=True)
    put_mapping = op("Add fields to mappings", ok("Acknowledged"), params=[path("index")], body=ref("Mapping"),
                     body_required=True)
    return {
        "/": {
            "get": op("Cluster information", ok("ClusterInfo")),
            "head": op("Ping", {"200": EMPTY}),
        },
        "/_xerj/openapi.json": {"get": op("This document", {"200": json_response(ANY_OBJECT, "OpenAPI 3")})},
        "/_security/api_key": _api_key_ops(),
        "/_security/_authenticate": {
            "get": op("Who the credential says you are", ok("Authenticated")),
        },
        "/_xerj/share": {
            "post": op("Share a brain read-only with one guest (superuser, secured node); the only time the "
                       "passcode is shown", {"201": json_response(ref("ShareCreated"), "Created")},
                       body=ref("ShareCreate"), body_required=True),
            "get": op("List share links (superuser)", ok("Shares")),
        },
        "/_xerj/share/_exchange": {
            "post": op("Trade a share's passcode for a short-lived guest token (no credential needed)",
                       ok("GuestToken"), body=ref("ShareExchange"), body_required=True),
        },
        "/_xerj/share/{share_id}": {
            "delete": op("Revoke a share link (superuser); its tokens stop at once", ok("Share"),
                         params=[path("share_id")]),
        },
        "/_xerj/node": {"get": op("Which data directory this server serves: its stable uuid and path",
                                  ok("NodeIdentity"))},
        "/_cluster/health": _health_ops(False),
        "/_cluster/health/{index}": _health_ops(True),
        "/_search/scroll": _scroll_ops(False),
        "/_search/scroll/{scroll_id}": _scroll_ops(True),
        "/{index}/_pit": {"post": op("Open a point in time", ok("PitOpened"), params=[
            path("index"), query("keep_alive", STRING, "required, e.g. 1m")])},
        "/_pit": {"delete": op("Close a point in time", {
            "200": json_response(ref("ClearScrollResponse"), "Closed"),
            "404": json_response(ref("ClearScrollResponse"), "No such point in time (num_freed: 0)")},
            body=ref("PitClose"), body_required=True)},
        "/{index}/_search/point_in_time": {"post": op("Open a point in time (OpenSearch's form)",
                                                      ok("OpenSearchPitOpened"), params=[
            path("index"), query("keep_alive", STRING, "required, e.g. 1m")])},
        "/_search/point_in_time": {"delete": op("Close points in time (OpenSearch's form)", {
            "200": json_response(ref("OpenSearchPitsClosed"), "Closed"),
            "404": json_response(ref("OpenSearchPitsClosed"), "None of them existed")},
            body=ref("OpenSearchPitClose"), body_required=True)},
        "/_search/point_in_time/_all": {
            "get": op("The caller's points in time", ok("OpenSearchPits")),
            "delete": op("Close every point in time of the caller", {
                "200": json_response(ref("OpenSearchPitsClosed"), "Closed")}),
        },
        "/_cat/count": _cat_rows("Count live documents", None),
        "/_cat/count/{index}": _cat_rows("Count live documents", "index"),
        "/_cat/aliases": _cat_rows("List aliases", None),
        "/_cat/aliases/{name}": _cat_rows("List aliases", "name"),
        "/_settings": {"get": op("Settings of every index", ok("Settings")),
                       "put": op("Update dynamic settings of every index", ok("Acknowledged"),
                                 body=ref("SettingsUpdate"), body_required=True)},
        "/{index}/_settings": {
            "get": op("Settings, every value a string", ok("Settings"), params=[path("index"), IGNORE_UNAVAILABLE]),
            "put": op("Update dynamic settings", ok("Acknowledged"), params=[path("index")],
                      body=ref("SettingsUpdate"), body_required=True),
        },
        "/{index}/_close": {"post": op("Close indices: reads and writes refuse until opened", ok("Closed"),
                                       params=[path("index")])},
        "/{index}/_open": {"post": op("Open closed indices", ok("Closed"), params=[path("index")])},
        "/_alias": {"get": op("Every alias", ok("AliasListing")),
                    "head": op("Whether any alias exists", {"200": EMPTY, "404": EMPTY})},
        "/_alias/{name}": {
            "get": op("Aliases by name", {"200": json_response(ref("AliasListing"), "Found"),
                                          "404": json_response(ref("AliasListing"), "Some name is missing")},
                      params=[path("name")]),
            "head": op("Whether the aliases exist", {"200": EMPTY, "404": EMPTY}, params=[path("name")]),
        },
        "/{index}/_alias": {
            "get": op("Aliases of indices", ok("AliasListing"), params=[path("index")]),
            "head": op("Whether the indices have aliases", {"200": EMPTY, "404": EMPTY}, params=[path("index")]),
        },
        "/{index}/_alias/{name}": {
            "get": op("Aliases of indices by name", {"200": json_response(ref("AliasListing"), "Found"),
                                                     "404": json_response(ref("AliasListing"), "Missing")},
                      params=[path("index"), path("name")]),
            "head": op("Whether the alias exists on the indices", {"200": EMPTY, "404": EMPTY},
                       params=[path("index"), path("name")]),
            "put": op("Add an alias", ok("Acknowledged"), params=[path("index"), path("name")],
                      body=ref("AliasBody")),
            "post": op("Add an alias", ok("Acknowledged"), params=[path("index"), path("name")],
                       body=ref("AliasBody")),
            "delete": op("Remove an alias", ok("Acknowledged"), params=[path("index"), path("name")]),
        },
        "/_aliases": {"post": op("Add and remove aliases (and indices) in one transaction", ok("AliasActionsResult"),
                                 body=ref("AliasActions"), body_required=True)},
        "/_cat/indices": _cat_ops(False),
        "/_cat/indices/{index}": _cat_ops(True),
        "/_refresh": _refresh_ops(False),
        "/{index}/_refresh": _refresh_ops(True),
        "/{index}": {
            "put": op("Create an index", ok("Acknowledged"), params=[path("index")], body=ref("IndexCreate")),
            "get": op("Describe indices", ok("IndexDescriptions"),
                      params=[path("index"), IGNORE_UNAVAILABLE, EXPAND]),
            "head": op("Whether indices exist", {"200": EMPTY, "404": EMPTY}, params=[path("index")]),
            "delete": op("Delete indices", ok("Acknowledged"), params=[path("index"), IGNORE_UNAVAILABLE]),
        },
        "/{index}/_stats": {
            "get": op("Live and dead rows, bytes, and the terms and keyword values left unindexed for their "
                      "length", ok("IndexStats"), params=[path("index"), IGNORE_UNAVAILABLE, EXPAND]),
        },
        "/{index}/_mapping": {
            "get": op("Get mappings", ok("Mappings"), params=[path("index"), EXPAND]),
            "put": put_mapping,
            "post": put_mapping,
        },
        "/{index}/_forcemerge": {
            "post": op("Compact: drop dead rows now, renumbering the live ones", ok("Shards"),
                       params=[path("index"), IGNORE_UNAVAILABLE, EXPAND]),
        },
        "/{index}/_doc": {
            "post": op("Index a document under a generated id", {"201": write["201"]}, params=[path("index")],
                       body=ref("Document"), body_required=True),
        },
        "/{index}/_doc/{id}": {
            "put": put_doc,
            "post": put_doc,
            "get": op("Get a document", get_result, params=doc_params + [query("_source", STRING)]),
            "head": op("Whether a document exists", {"200": EMPTY, "404": EMPTY}, params=doc_params),
            "delete": op("Delete a document", {
                "200": json_response(ref("WriteResult"), "Deleted"),
                "404": json_response({"anyOf": [ref("WriteResult"), ref("Error")]},
                                     "No such document (result: not_found) or no such index")},
                params=doc_params),
        },
        "/{index}/_source/{id}": {
            "get": op("A document's _source alone", {"200": json_response(ref("Document"), "Found"),
                                                     "404": json_response(ref("Error"), "No such document or index")},
                      params=doc_params + [query("_source_includes", STRING), query("_source_excludes", STRING)]),
            "head": op("Whether a document's source exists", {"200": EMPTY, "404": EMPTY}, params=doc_params),
        },
        "/{index}/_create/{id}": {"put": create_doc, "post": create_doc},
        "/{index}/_update/{id}": {
            "post": op("Merge a partial document", write, params=doc_params, body=ref("UpdateBody"),
                       body_required=True),
        },
        "/_bulk": _bulk_ops(False),
        "/{index}/_bulk": _bulk_ops(True),
        "/_mget": _mget_ops(False),
        "/{index}/_mget": _mget_ops(True),
        "/_search": _search_ops(False),
        "/{index}/_search": _search_ops(True),
        "/_count": _count_ops(False),
        "/{index}/_count": _count_ops(True),
        "/{index}/_delete_by_query": {
            "post": op("Delete the documents a query matches", {
                "200": json_response(ref("DeleteByQueryResponse"), "Deleted"),
                "409": json_response(ref("DeleteByQueryResponse"),
                                     "A matched document changed before its delete (conflicts=abort)")},
                params=[path("index"), query("q", STRING, "query-string query"),
                        query("conflicts", {"type": "string", "enum": ["abort", "proceed"]}),
                        query("max_docs", {"type": "integer", "minimum": 1}),
                        query("scroll_size", {"type": "integer", "minimum": 1}), query("refresh", BOOL),
                        IGNORE_UNAVAILABLE, EXPAND],
                body=ref("DeleteByQueryBody")),
        },
        "/_msearch": _msearch_ops(False),
        "/{index}/_msearch": _msearch_ops(True),
        "/_graph/{brain}/link": {
            "post": op("Assert an edge", {"200": json_response(ref("LinkResult"), "Re-asserted"),
                                          "201": json_response(ref("LinkResult"), "Created")},
                       params=[path("brain")], body=ref("LinkBody"), body_required=True),
        },
        "/_graph/{brain}/link/{edge_id}": {
            "delete": op("Retire an edge", ok("UnlinkResult"), params=[path("brain"), path("edge_id"),
                                                                        query("invalid_at", STRING)]),
        },
        "/_graph/{brain}/ego": {
            "get": op("The bounded neighbourhood of a node or of seeds", ok("Ego"), params=[
                path("brain"),
                query("node", STRING, "a node id, or a title, alias or file stem (resolved as a wikilink is)"),
                query("nodes", STRING, "comma-separated seeds, each an id or a name"),
                query("hops", INT, "1 or 2"), query("direction", {"type": "string", "enum": ["out", "in", "both"]}),
                query("types", STRING), query("limit", INT), query("as_of", STRING),
                query("include_expired", BOOL), query("include_nodes", BOOL), query("nodes_index", STRING),
                query("include_evidence", BOOL), query("min_confidence", NUMBER), query("trust", STRING),
                query("known_at", STRING, "system time: what the brain believed then (default now)")]),
        },
        "/_graph/{brain}/overview": {
            "get": op("Brain totals and breakdowns", {
                **ok("Overview"), "404": json_response(ref("OverviewMissing"), "No such brain")},
                params=[path("brain"), query("as_of", STRING), query("top", INT),
                        query("histogram_interval", STRING, "day or hour"), query("trust", STRING),
                        query("known_at", STRING)]),
        },
        "/_graph/{brain}/_review": {
            "get": op("Claims awaiting review, least confident or newest first, with their evidence",
                      ok("ReviewQueue"), params=[
                          path("brain"), query("state", STRING, "comma-separated trust states (default detected)"),
                          query("type", STRING), query("min_confidence", NUMBER), query("max_confidence", NUMBER),
                          query("sort", {"type": "string", "enum": ["confidence", "valid_at"]}), query("size", INT),
                          query("from", INT), query("known_at", STRING)]),
            "post": op("Approve and reject claims in one transaction; each id answered", ok("ReviewResult"),
                       params=[path("brain")], body=ref("ReviewBody"), body_required=True),
        },
        "/_graph/{brain}/_standing": {
            "get": op("Ids of the live edges and of the edges a person rejected (for a reconcile)",
                      ok("StandingEdges"), params=[path("brain")]),
        },
        "/_graph/{brain}/_claims": {
            "post": op("The claims of the live edges whose evidence cites one of these files (for a reconcile)",
                       ok("LiveClaims"), params=[path("brain")], body=ref("ClaimsQuery"), body_required=True),
        },
        "/_graph/{brain}/_invalidate": {
            "post": op("Retire live edges as a reconcile does (no rejection is recorded)", ok("InvalidationResult"),
                       params=[path("brain")], body=ref("Invalidation"), body_required=True),
        },
        "/_graph/{brain}/_detected": {
            "post": op("Write detector drafts as a machine writer (a rejected claim is stored retired)",
                       ok("EdgeWriteResult"), params=[path("brain")], body=ref("EdgeBatch"), body_required=True),
        },
        "/_xerj/autoindex/{brain}": {
            "get": op("What an autoindex run reads first: file states, run marker, whether edges exist",
                      ok("AutoindexState"), params=[path("brain")]),
        },
        "/_xerj/autoindex/{brain}/_batch": {
            "post": op("Write whole files' documents and states in one transaction", ok("FileBatchResult"),
                       params=[path("brain")], body=ref("FileBatch"), body_required=True),
        },
        "/_xerj/autoindex/{brain}/_finish": {
            "post": op("Close a run: mark it clean and update the catalog, in one transaction",
                       ok("RunFinishResult"), params=[path("brain")], body=ref("RunFinish"), body_required=True),
        },
        "/_memory/{namespace}": {
            "put": op("Create the namespace with a chosen embedder (refused once it holds memories)",
                      ok("MemoryResult"), params=[path("namespace")], body=ref("MemoryCreate")),
            "post": op("Store a memory", {"200": json_response(ref("MemoryResult"), "Deduplicated"),
                                          "201": json_response(ref("MemoryResult"), "Stored")},
                       params=[path("namespace")], body=ref("MemoryStore"), body_required=True),
            "get": op("List memories, newest first", ok("MemoryResult"),
                      params=[path("namespace"), query("size", INT), query("from", INT),
                              query("include_forgotten", BOOL)]),
            "delete": op("Drop the namespace", ok("MemoryResult"), params=[path("namespace")]),
        },
        "/_memory/{namespace}/_recall": {
            "post": op("Recall memories", ok("MemoryResult"), params=[path("namespace")],
                       body=ref("MemoryRecall"), body_required=True),
        },
        "/_memory/{namespace}/_reembed": {
            "post": op("Re-embed every memory with another embedder, in place; resumable", ok("MemoryResult"),
                       params=[path("namespace")], body=ref("MemoryReembed"), body_required=True),
        },
        "/_memory/{namespace}/_tombstones": {
            "get": op("Every rejection of a memory value, active and lifted", ok("MemoryResult"),
                      params=[path("namespace")]),
        },
        "/_memory/{namespace}/_review": {
            "post": op("Approve memories and reject them (a rejection lays a tombstone); each id answered",
                       ok("MemoryResult"), params=[path("namespace")], body=ref("ReviewBody"), body_required=True),
        },
        "/_memory/{namespace}/{id}": {
            "delete": op("Forget one memory (retire it; purge=true erases it; reject=true also refuses its value "
                         "later)", ok("MemoryResult"),
                         params=[path("namespace"), path("id"), query("purge", BOOL), query("reject", BOOL)]),
        },
    }


def document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "xerj",
            "version": __version__,
            "description": "A local second brain and agent memory: Elasticsearch-compatible index, document and "
                           "search routes, the second brain under /_graph and agent memory under /_memory.",
        },
        "paths": paths(),
        "components": {"schemas": SCHEMAS},
    }
