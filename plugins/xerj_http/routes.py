"""Every route xerj itself serves, added to an app through ``xerj_register_routes`` like any plugin's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon

from xerj_http.resources import autoindex, cluster, documents, graph, indices, memory, search, security, share

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine

# (template, resource factory). The OpenAPI document lists the same templates; a test holds them equal.
ROUTES: list[tuple[str, Any]] = [
    ("/", cluster.Root),
    ("/_cluster/health", cluster.Health),
    ("/_cluster/health/{index}", cluster.Health),
    ("/_xerj/openapi.json", lambda engine: cluster.OpenApiDocument()),
    ("/_cat/indices", cluster.CatIndices),
    ("/_cat/indices/{index}", cluster.CatIndices),
    ("/_cat/count", cluster.CatCount),
    ("/_cat/count/{index}", cluster.CatCount),
    ("/_cat/aliases", cluster.CatAliases),
    ("/_cat/aliases/{name}", cluster.CatAliases),
    ("/_refresh", cluster.Refresh),
    # API keys and who-am-I, in Elasticsearch's shapes
    ("/_security/api_key", security.ApiKeys),
    ("/_security/_authenticate", security.Authenticate),
    # share links: open, list, revoke (superuser); a passcode traded for a guest token (no credential)
    ("/_xerj/share", share.Shares),
    ("/_xerj/share/_exchange", share.Exchange),
    ("/_xerj/share/{share_id}", share.Share),
    ("/{index}/_refresh", cluster.Refresh),
    # ES-compatible index and document routes
    ("/{index}", indices.Index),
    ("/{index}/_mapping", indices.IndexMapping),
    ("/{index}/_stats", indices.IndexStats),
    ("/{index}/_forcemerge", indices.ForceMerge),
    ("/_settings", indices.IndexSettings),
    ("/{index}/_settings", indices.IndexSettings),
    ("/{index}/_open", indices.IndexOpen),
    ("/{index}/_close", indices.IndexClose),
    ("/_alias", indices.Aliases),
    ("/_alias/{name}", indices.Aliases),
    ("/{index}/_alias", indices.IndexAliasList),
    ("/{index}/_alias/{name}", indices.IndexAliases),
    ("/_aliases", indices.AliasActions),
    ("/{index}/_doc", documents.DocAutoId),
    ("/{index}/_doc/{id}", documents.Doc),
    ("/{index}/_source/{id}", documents.DocSource),
    ("/{index}/_create/{id}", documents.DocCreate),
    ("/{index}/_update/{id}", documents.DocUpdate),
    ("/_bulk", documents.Bulk),
    ("/{index}/_bulk", documents.Bulk),
    ("/_mget", documents.MultiGet),
    ("/{index}/_mget", documents.MultiGet),
    ("/_search", search.Search),
    ("/{index}/_search", search.Search),
    ("/_count", search.Count),
    ("/{index}/_count", search.Count),
    ("/{index}/_delete_by_query", search.DeleteByQuery),
    ("/_msearch", search.MultiSearch),
    ("/{index}/_msearch", search.MultiSearch),
    ("/_search/scroll", search.Scroll),
    ("/_search/scroll/{scroll_id}", search.Scroll),
    ("/{index}/_pit", search.PointInTime),
    ("/_pit", search.PointInTimeClose),
    ("/{index}/_search/point_in_time", search.OpenSearchPit),
    ("/_search/point_in_time", search.OpenSearchPitClose),
    ("/_search/point_in_time/_all", search.OpenSearchPitAll),
    # the second brain
    ("/_graph/{brain}/link", graph.Link),
    ("/_graph/{brain}/link/{edge_id}", graph.Unlink),
    ("/_graph/{brain}/ego", graph.Ego),
    ("/_graph/{brain}/overview", graph.Overview),
    ("/_graph/{brain}/_review", graph.Review),
    # the machine writer (autoindex against a server)
    ("/_graph/{brain}/_standing", graph.Standing),
    ("/_graph/{brain}/_claims", graph.Claims),
    ("/_graph/{brain}/_invalidate", graph.Invalidate),
    ("/_graph/{brain}/_detected", graph.Detected),
    ("/_xerj/node", autoindex.NodeIdentity),
    ("/_xerj/autoindex/{brain}", autoindex.BrainState),
    ("/_xerj/autoindex/{brain}/_batch", autoindex.FileBatch),
    ("/_xerj/autoindex/{brain}/_finish", autoindex.RunFinish),
    # agent memory
    ("/_memory/{namespace}", memory.Namespace),
    ("/_memory/{namespace}/_recall", memory.Recall),
    ("/_memory/{namespace}/_reembed", memory.Reembed),
    ("/_memory/{namespace}/_tombstones", memory.Tombstones),
    ("/_memory/{namespace}/_review", memory.Review),
    ("/_memory/{namespace}/{id}", memory.Memory),
]


def add_routes(app: falcon.App, engine: Engine) -> None:
    """Add every built-in route; resources that serve several templates are shared between them."""
    made: dict[Any, Any] = {}
    for template, factory in ROUTES:
        resource = made.get(factory)
        if resource is None:
            resource = made[factory] = factory(engine)
        app.add_route(template, resource)
