"""Every index a request touches, from its path and its body: the one function authorization will trust.

``resolve_targets(req)`` is the only place that turns a request into index
names. It reads the route parameters Falcon matched (already percent-decoded,
so ``/%2Exerj-memory-x-edges/_search`` and ``/.xerj-memory-x-edges/_search``
name the same index) and, for the verbs that carry index names in their body
(``_bulk``, ``_mget``, ``_msearch``, an autoindex ``_batch`` or ``_finish``),
the parsed body, through the same parsers the resources use. Concrete names are
kept whether or not they exist (authorization runs before any existence check);
wildcards expand through :func:`xerj_core.query.resolve.resolve_indices`.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs
import falcon

from xerj_core.autoindex import wire
from xerj_core.autoindex.sink import CATALOG_INDEX, FILES_INDEX, UNFINISHED, split_ref
from xerj_core.errors import IllegalArgument, MapperParsingError, ParsingError, XerjError
from xerj_core.graph.brain import META_ID, edges_index, nodes_index
from xerj_core.graph.names import reads_nodes_indices
from xerj_core import params
from xerj_core.params import INSTANT_LIMIT
from xerj_core.query.resolve import resolve_indices
from xerj_core.store import BulkOp, check_doc_id, validate_index_name
from xerj_http.bodies import json_body, ndjson_lines, parse_json, raw_body

_BULK_ACTIONS = ("index", "create", "update", "delete")
_BULK_META = {"_index", "_id", "routing", "pipeline", "require_alias", "retry_on_conflict", "version",
              "version_type", "dynamic_templates", "_source", "if_seq_no", "if_primary_term", "op_type"}


# -- bodies that name indices ------------------------------------------------------------------


@attrs.frozen
class BulkLine:
    """One parsed bulk item: the op for the store, or the error the item already has."""

    op: BulkOp
    error: XerjError | None = None


def parse_bulk(req: falcon.Request, default_index: str | None) -> list[BulkLine]:
    """The NDJSON bulk body as items; a malformed action line refuses the whole request (as ES does)."""
    cached = req.context.get("bulk_lines")
    if cached is not None:
        return cached
    lines = ndjson_lines(raw_body(req))
    items: list[BulkLine] = []
    i = 0
    while i < len(lines):
        number, line = lines[i]
        action_line = parse_json(line, f"bulk action line [{number}]")
        if action_line == {}:
            raise IllegalArgument(f"Malformed action/metadata line [{number}], expected FIELD_NAME but found "
                                  f"[END_OBJECT]")
        if not isinstance(action_line, dict) or len(action_line) != 1:
            raise IllegalArgument(f"Malformed action/metadata line [{number}], expected an object with one "
                                  f"of {list(_BULK_ACTIONS)}")
        ((action, meta),) = action_line.items()
        if action not in _BULK_ACTIONS:
            raise IllegalArgument(f"Malformed action/metadata line [{number}], expected one of "
                                  f"{list(_BULK_ACTIONS)} but found [{action}]")
        if not isinstance(meta, dict):
            raise IllegalArgument(f"Malformed action/metadata line [{number}], [{action}] must be an object")
        unknown = sorted(set(meta) - _BULK_META)
        if unknown:
            raise IllegalArgument(f"Action/metadata line [{number}] contains an unknown parameter [{unknown[0]}]")
        for field in ("if_seq_no", "if_primary_term"):
            if field in meta:
                raise IllegalArgument(f"[{field}] is not supported on bulk line [{number}]")
        index = meta.get("_index", default_index)
        if not isinstance(index, str) or not index:
            raise IllegalArgument(f"Validation Failed: 1: index is missing for bulk line [{number}];")
        op_type = meta.get("op_type")
        if op_type is not None:
            if action != "index" or op_type not in ("index", "create"):
                raise IllegalArgument(f"Action/metadata line [{number}]: [op_type] must be [index] or [create] "
                                      f"on an [index] action, got [{op_type}] on [{action}]")
            action = op_type
        doc_id = meta.get("_id")
        if doc_id is not None and not isinstance(doc_id, str):
            doc_id = str(doc_id)
        i += 1
        try:
            if doc_id == "":
                raise IllegalArgument("if _id is specified it must not be empty")
            if doc_id is not None:
                check_doc_id(doc_id)  # the store's own rule, so the item fails alone, before any write
        except XerjError as exc:
            if action != "delete":
                i += 1
            items.append(BulkLine(BulkOp(action, index, doc_id), error=exc))
            continue
        if action == "delete":
            items.append(BulkLine(BulkOp("delete", index, doc_id)))
            continue
        if i >= len(lines):
            raise IllegalArgument(f"The bulk request must be terminated by a newline and action [{action}] on "
                                  f"line [{number}] needs a source line")
        source_number, source_line = lines[i]
        i += 1
        try:
            doc = parse_json(source_line, f"bulk source line [{source_number}]")
        except XerjError as exc:
            items.append(BulkLine(BulkOp(action, index, doc_id), error=_mapper_error(exc)))
            continue
        if action == "update":
            if not isinstance(doc, dict) or "script" in doc:
                reason = ("script updates are not supported" if isinstance(doc, dict)
                          else "update source must be an object")
                items.append(BulkLine(BulkOp(action, index, doc_id), error=IllegalArgument(reason)))
                continue
            if doc.get("doc_as_upsert") and "upsert" not in doc:
                doc = {**doc, "upsert": doc.get("doc")}
            if "_source" in meta and "_source" not in doc:
                doc = {**doc, "_source": meta["_source"]}
        items.append(BulkLine(BulkOp(action, index, doc_id, doc)))
    req.context.bulk_lines = items
    return items


def _mapper_error(exc: XerjError) -> XerjError:
    return MapperParsingError(f"failed to parse: {exc.reason}")


def parse_mget(req: falcon.Request, default_index: str | None) -> list[tuple[str | None, str, Any]]:
    """``(index, id, _source spec)`` per requested document, from ``docs`` or ``ids``."""
    body = json_body(req, required=True)
    unknown = sorted(set(body) - {"docs", "ids"})
    if unknown:
        raise ParsingError(f"unknown key [{unknown[0]}] for a mget request; expected [docs] or [ids]")
    wanted: list[tuple[str | None, str, Any]] = []
    if "docs" in body:
        docs = body["docs"]
        if not isinstance(docs, list):
            raise ParsingError("[docs] must be an array")
        for n, doc in enumerate(docs):
            if not isinstance(doc, dict) or "_id" not in doc:
                raise ParsingError(f"[docs][{n}] must be an object with an [_id]")
            index = doc.get("_index", default_index)
            if index is not None and not isinstance(index, str):
                raise ParsingError(f"[docs][{n}][_index] must be a string")
            wanted.append((index, str(doc["_id"]), doc.get("_source")))
    if "ids" in body:
        ids = body["ids"]
        if not isinstance(ids, list):
            raise ParsingError("[ids] must be an array")
        wanted.extend((default_index, str(i), None) for i in ids)
    if not wanted:
        raise IllegalArgument("Validation Failed: 1: no documents to get;")
    return wanted


def parse_msearch(req: falcon.Request) -> list[tuple[Any, Any]]:
    """``(header, body)`` pairs of an NDJSON multi-search (parsed once per request; authorization may narrow
    a header's ``index`` before the resource reads it)."""
    cached = req.context.get("msearch_pairs")
    if cached is not None:
        return cached
    lines = ndjson_lines(raw_body(req))
    if len(lines) % 2:
        raise IllegalArgument("msearch body must alternate header and search lines and end with a search line")
    pairs = []
    for k in range(0, len(lines), 2):
        (hn, header), (bn, body) = lines[k], lines[k + 1]
        head = parse_json(header, f"msearch header line [{hn}]")
        search = parse_json(body, f"msearch body line [{bn}]")
        if not isinstance(head, dict):
            raise ParsingError(f"msearch header line [{hn}] must be an object")
        if not isinstance(search, dict):
            raise ParsingError(f"msearch body line [{bn}] must be an object")
        index = head.get("index")
        if index is not None and not (isinstance(index, str) or (
                isinstance(index, list) and all(isinstance(name, str) for name in index))):
            raise ParsingError(f"[index] on msearch header line [{hn}] must be a string or an array of strings")
        pairs.append((head, search))
    if not pairs:
        raise IllegalArgument("Validation Failed: 1: no requests added;")
    req.context.msearch_pairs = pairs
    return pairs


def msearch_expression(header: dict[str, Any], default_index: str | None) -> str | None:
    index = header.get("index", default_index)
    if isinstance(index, list):
        index = ",".join(index)
    return index


def _dataset_name(name: str, where: str) -> str:
    """A dataset an autoindex batch may write: a valid index name, neither hidden nor the catalog."""
    validate_index_name(name)
    if name.startswith(".") or name == CATALOG_INDEX:
        raise IllegalArgument(f"[{where}] names [{name}]; an autoindex batch writes dataset indices only, "
                              f"not hidden indices or [{CATALOG_INDEX}]")
    return name


def _instant(value: int, where: str) -> None:
    if not -INSTANT_LIMIT <= value <= INSTANT_LIMIT:
        raise IllegalArgument(f"[{where}] is out of range: {value} (epoch milliseconds within +/-2^53)")


def parse_file_batch(req: falcon.Request) -> wire.FileBatch:
    """The body of ``POST /_xerj/autoindex/{brain}/_batch``, every rule checked before any write."""
    cached = req.context.get("file_batch")
    if cached is not None:
        return cached
    batch = wire.structure(json_body(req, required=True), wire.FileBatch)
    _instant(batch.indexed_at, "indexed_at")
    for n, item in enumerate(batch.files):
        where = f"files[{n}]"
        if not item.path or "\x00" in item.path:
            raise IllegalArgument(f"[{where}.path] must be a non-empty root-relative path without NUL")
        if item.stamp is None and item.documents:
            raise IllegalArgument(f"[{where}] has documents but no stamp; a file that left the corpus "
                                  f"(stamp: null) has no documents")
        if item.continues and item.stamp is None:
            raise IllegalArgument(f"[{where}] continues a file's state, so it must have a stamp")
        if item.stamp is not None and item.stamp.size < 0 and item.stamp != UNFINISHED:
            raise IllegalArgument(f"[{where}.stamp.size] must not be negative (but in the stamp of a file written "
                                  f"in several batches until its last: size -1, mtime_ns -1, hash \"\")")
        for k, doc in enumerate(item.documents):
            _dataset_name(doc.index, f"{where}.documents[{k}].index")
            if not doc.id:
                raise IllegalArgument(f"[{where}.documents[{k}].id] must not be empty")
        for field, refs in (("stale", item.stale), ("kept", item.kept)):
            for k, ref in enumerate(refs):
                index, doc_id = split_ref(ref)
                if not doc_id:
                    raise IllegalArgument(f"[{where}.{field}[{k}]] must be [dataset/id], got [{ref[:80]}]")
                _dataset_name(index, f"{where}.{field}[{k}]")
    req.context.file_batch = batch
    return batch


def file_batch_targets(batch: wire.FileBatch) -> list[str]:
    names: dict[str, None] = {FILES_INDEX: None}
    for item in batch.files:
        names.update((doc.index, None) for doc in item.documents)
        # a kept ref names a document the catalog goes on pointing at: the caller must be able to write it
        names.update((split_ref(ref)[0], None) for ref in (*item.stale, *item.kept))
    return list(names)


def parse_run_finish(req: falcon.Request) -> wire.RunFinish:
    """The body of ``POST /_xerj/autoindex/{brain}/_finish``."""
    cached = req.context.get("run_finish")
    if cached is not None:
        return cached
    finish = wire.structure(json_body(req, required=True), wire.RunFinish)
    _instant(finish.finished_at, "finished_at")
    if not finish.root:
        raise IllegalArgument("[root] must be the indexed folder's path")
    for k, name in enumerate(finish.datasets):
        _dataset_name(name, f"datasets[{k}]")
    req.context.run_finish = finish
    return finish


# -- expressions -------------------------------------------------------------------------------


def _is_pattern(part: str) -> bool:
    return "*" in part or part == "_all"


def concrete_targets(store: Any, names: Iterable[str]) -> list[str]:
    """``names`` with every alias replaced by the indices it names (an index name is kept as written)."""
    names = list(names)
    aliases = store.aliases() if names and hasattr(store, "aliases") else {}
    out: dict[str, None] = {}
    for name in names:
        out.update(dict.fromkeys(aliases[name]) if name in aliases else {name: None})
    return list(out)


def expression_targets(store: Any, expression: str | None, *, expand_wildcards: str = "open") -> list[str]:
    """Indices an index expression touches: each concrete name as written (an alias as its indices),
    each wildcard expanded."""
    parts = [p.strip() for p in (expression or "").split(",") if p.strip()]
    concrete = concrete_targets(store, [p for n, p in enumerate(parts)
                                        if not _is_pattern(p) and not (n > 0 and p.startswith("-"))])
    if concrete and all(not _is_pattern(p) and not (n > 0 and p.startswith("-")) for n, p in enumerate(parts)):
        return concrete
    try:
        expanded = resolve_indices(store, expression, ignore_unavailable=True, expand_wildcards=expand_wildcards)
    except XerjError:
        expanded = []
    return list(dict.fromkeys([*concrete, *expanded]))


def _nodes_indices(store: Any, brain: str, override: Any) -> list[str]:
    """The nodes indices a brain's ego hydration and overview read: ``nodes_index=``, else the meta document's.

    Both are comma lists of concrete names (the graph service opens each name as
    written, it never expands a wildcard), and each name is a target of its own.
    """
    if isinstance(override, str) and override.strip():
        return [name.strip() for name in override.split(",") if name.strip()]
    listed = None
    try:
        found = store.get(edges_index(brain), META_ID)
    except XerjError:
        found = None
    if found is not None:
        listed = found[0].get("nodes_index")
    if isinstance(listed, str) and listed:
        return [name for name in listed.split(",") if name]
    return [nodes_index(brain)]


def _names_read_nodes(store: Any, brain: str, qs: Any) -> bool:
    """Whether ego's ``node``/``nodes`` hold a name (not a node id) that resolution reads the nodes indices for."""
    given = [value for key in ("node", "nodes") if isinstance(value := qs.get(key), str)]
    names = [name.strip() for value in given for name in value.split(",") if name.strip()]
    try:
        return bool(names) and reads_nodes_indices(store, brain, names)
    except XerjError:
        return False


def _maybe_true(value: Any, name: str) -> bool:
    """Whether a flag may read as true to the service; a malformed one counts (the service then refuses it)."""
    if value is None:
        return False
    try:
        return params.flag(value, name, IllegalArgument, source=params.QUERY)
    except XerjError:
        return True


def resolve_targets(req: falcon.Request) -> list[str]:
    """Every index ``req`` touches, from the matched route's parameters and the body.

    Needs ``req.context.engine`` and ``req.context.params`` (the route
    parameters, set once Falcon has routed the request); an unrouted request
    touches nothing. Parameter names carry meaning for every route, ours and
    plugins': ``index`` is an index expression, ``brain`` a second brain,
    ``namespace`` an agent-memory namespace. A body that does not parse adds
    nothing here: the resource refuses it with the same parser before any
    index is touched.
    """
    ctx = req.context
    params = ctx.get("params")
    if params is None:
        return []
    store = ctx.engine.store
    template = req.uri_template or ""
    qs = req.params
    expand_wildcards = default_expand(req)
    found: dict[str, None] = {}

    def add(names: Iterable[str]) -> None:
        for name in names:
            found.setdefault(name, None)

    index_expr = params.get("index")
    context_indices = _context_targets(req, template, params)
    if index_expr is not None:
        add(expression_targets(store, index_expr, expand_wildcards=expand_wildcards))
    elif context_indices is not None:
        add(context_indices)  # a scroll page or point-in-time search reads exactly what its context pinned
    elif template in FAN_OUT_ROUTES:
        add(expression_targets(store, "_all", expand_wildcards=expand_wildcards))

    brain = params.get("brain")
    if brain is not None:
        add([edges_index(brain)])
        if template.endswith("/ego") and (_maybe_true(qs.get("include_nodes"), "include_nodes")
                                          or _names_read_nodes(store, brain, qs)):
            add(_nodes_indices(store, brain, qs.get("nodes_index")))
        elif template.endswith("/overview"):
            add(_nodes_indices(store, brain, None))

    namespace = params.get("namespace")
    if namespace is not None:
        add([nodes_index(namespace)])
        # the namespace's tombstones (.xerj-memory-{ns}-tombstones) are its own: reached through the namespace's
        # privilege, so a key scoped to the namespace keeps every door it had (override_rejection is a store: write)
        body = None
        if req.method == "POST":
            try:
                body = json_body(req)
            except XerjError:
                body = None
        graph = body.get("graph") if isinstance(body, dict) and template.endswith("/_recall") else None
        walked = graph.get("brain") if isinstance(graph, dict) else None
        if isinstance(walked, str) and walked:
            # graph.brain: that brain's edges are walked and its notes resolve the seeds
            add([edges_index(walked), *_nodes_indices(store, walked, None)])
        elif graph is not None:
            add([edges_index(namespace)])
            seeds = graph.get("seeds") if isinstance(graph, dict) else None
            # seeds given by name are resolved against the brain's nodes indices
            if isinstance(seeds, list) and reads_nodes_indices(
                    store, namespace, [s for s in seeds if isinstance(s, str)]):
                add(_nodes_indices(store, namespace, None))
        elif isinstance(body, dict) and template == "/_memory/{namespace}" and body.get("about") is not None:
            # a memory about notes writes its about edges into the brain
            anchored = body.get("brain") if isinstance(body.get("brain"), str) and body.get("brain") else namespace
            add([edges_index(anchored)])

    try:
        if template.startswith("/_xerj/autoindex/"):
            add([FILES_INDEX])
            if template.endswith("/_batch"):
                add(file_batch_targets(parse_file_batch(req)))
            elif template.endswith("/_finish"):
                add([CATALOG_INDEX, *parse_run_finish(req).datasets])
        elif template.endswith("/_bulk"):
            add(concrete_targets(store, dict.fromkeys(line.op.index for line in parse_bulk(req, index_expr))))
        elif template.endswith("/_mget"):
            add(concrete_targets(store, dict.fromkeys(index for index, _id, _src in parse_mget(req, index_expr)
                                                      if index)))
        elif template == "/_aliases":
            add(concrete_targets(store, alias_action_indices(store, json_body(req))))
        elif template.startswith("/_alias/"):
            add(concrete_targets(store, [n for n in params["name"].split(",") if n and not _is_pattern(n)]))
        elif template.endswith("/_msearch"):
            for header, _body in parse_msearch(req):
                add(expression_targets(store, msearch_expression(header, index_expr)
                                       or "_all", expand_wildcards=expand_wildcards))
    except XerjError:
        pass
    return list(found)


def alias_action_indices(store: Any, body: Any) -> list[str]:
    """Every index the actions of a ``POST /_aliases`` body name (wildcards expanded), for authorization.

    Adding an alias needs ``manage`` on each index it will name; removing one or an
    index needs it too, so every action's indices are targets of the one request.
    """
    actions = body.get("actions") if isinstance(body, dict) else None
    found: dict[str, None] = {}
    for action in actions if isinstance(actions, list) else ():
        if not isinstance(action, dict) or len(action) != 1:
            continue
        (spec,) = action.values()
        if not isinstance(spec, dict):
            continue
        names = spec.get("indices", spec.get("index"))
        for name in names if isinstance(names, list) else [names]:
            if isinstance(name, str) and name:
                found.update(dict.fromkeys(expression_targets(store, name)))
    return list(found)


# Where a route's wildcards expand to more than open indices by default; the resource resolves with the
# same default (through default_expand), so what authorization checks is what the resource reads.
EXPAND_DEFAULTS = {
    "/_cat/indices": "open,closed", "/_cat/indices/{index}": "open,closed",
    "/_settings": "open,closed", "/{index}/_settings": "open,closed",
    "/{index}/_alias": "open,closed", "/{index}/_alias/{name}": "open,closed",
    "/{index}/_open": "closed",
}


def default_expand(req: falcon.Request) -> str:
    """``expand_wildcards`` of a request, else its route's default (``open`` for most)."""
    value = req.params.get("expand_wildcards")
    if isinstance(value, str) and value:
        return value
    return EXPAND_DEFAULTS.get(req.uri_template or "", "open")


def _context_targets(req: falcon.Request, template: str, params: dict[str, Any]) -> list[str] | None:
    """The indices a scroll or point in time pinned, for the requests that continue one (None otherwise)."""
    contexts = req.context.engine.search.contexts
    if template.startswith("/_search/scroll") and req.method in ("GET", "POST"):
        try:
            scroll_id = json_body(req).get("scroll_id")
        except XerjError:
            scroll_id = None
        return contexts.indices_of(scroll_id or params.get("scroll_id") or req.params.get("scroll_id"))
    if template == "/_search":
        try:
            pit = json_body(req).get("pit")
        except XerjError:
            return None
        if isinstance(pit, dict):
            return contexts.indices_of(pit.get("id"))
    return None


# Routes without an index in the path that reach every index.
FAN_OUT_ROUTES = {"/_search", "/_count", "/_cat/indices", "/_cat/count", "/_cat/aliases", "/_refresh", "/_alias",
                  "/_settings"}
