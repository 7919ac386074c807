"""The MCP tools: memory, brain and documents, each one request (or two) to the HTTP API through a backend.

Argument names follow the HTTP API's. Optional arguments left out are not
sent, so the server's defaults apply and the server stays the one judge of
what is valid: its refusal (a 400's reason, a 403's reason) becomes the tool
error's text.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xerj_mcp.backend import BackendUnavailable, segment
from xerj_mcp.results import (
    DocumentResult, EgoResult, IndexInfo, IndicesResult, LinkResult, MemoryForgotten, MemoryList, MemoryStored,
    OverviewResult, RecallResult, ReviewResult, SearchResult, UnlinkResult,
)

# The most hits, memories or documents one call returns: an agent's context is not a bulk export.
MAX_RESULTS = 100
# Characters of a document's text a search hit shows, a document read shows, and the most either may ask for. A
# document can hold a whole file (a 60 MB log is one card; so is a long transcript): ten such hits in full
# would fill any agent's context, when the passages that matched are what it searched for.
SEARCH_TEXT_CHARS = 2_000
DOCUMENT_TEXT_CHARS = 20_000
MAX_TEXT_CHARS = 200_000
TrustState = Literal["detected", "asserted", "approved", "rejected"]
Instant = int | str


class Refused(Exception):
    """A call the tool cannot make or the server refused; its text is all the agent sees."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def server_reason(status: int, body: Any) -> str:
    """The sentence a refusal carries: ES's ``error.reason``, or the short bodies some routes answer."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("reason"):
            return str(error["reason"])
        if isinstance(error, str) and error:
            return error
        if body.get("exists") is False and body.get("brain"):
            return f"brain [{body['brain']}] does not exist"
        if body.get("found") is False and body.get("_id") is not None:
            return f"document [{body['_id']}] not found in index [{body.get('_index')}]"
    return f"the server answered HTTP {status}"


class GraphCoupling(BaseModel):
    """The ``graph`` option of recall."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["restrict", "blend"] = Field(
        description="restrict: only memories within the seeds' neighbourhood; blend: rank linked ones higher")
    seeds: list[str] | None = Field(None, description="node ids to start from (required for restrict)")
    hops: int | None = Field(None, description="1 (default) or 2; the server refuses deeper walks")
    types: list[str] | None = Field(None, description="edge types to follow; default all")
    weight: float | None = Field(None, ge=0, le=1, description="blend: how much proximity counts (default 0.3)")
    as_of: Instant | None = Field(None, description="the edges visible then (default: the recall's as_of)")
    min_confidence: float | None = Field(None, ge=0, le=1, description="ignore weaker edges")
    brain: str | None = Field(None, description="the brain to walk (default: the namespace's own)")


class Evidence(BaseModel):
    """Why an edge is believed: where it was read."""

    model_config = ConfigDict(extra="forbid")
    quote: str | None = Field(None, description="the words that show the relation")
    source: str | None = Field(None, description="where they are (a file path or URL)")
    offset: int | None = Field(None, ge=0, description="character offset of the quote in the source")


class Tools:
    """The tool functions, bound to one backend; ``register`` adds them to an MCPServer."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    async def _call(self, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None,
                    ok_statuses: tuple[int, ...] = ()) -> Any:
        try:
            status, payload = await self.backend.request(method, path, params, body)
        except BackendUnavailable as exc:
            raise Refused(str(exc)) from None
        if status >= 400 and status not in ok_statuses:
            raise Refused(server_reason(status, payload))
        return payload

    # -- memory -------------------------------------------------------------------------------------

    async def xerj_memory_store(
        self,
        namespace: Annotated[str, Field(description="the memory namespace (its index is .xerj-memory-{namespace})")],
        text: Annotated[str, Field(min_length=1, description="what to remember, in plain words")],
        metadata: Annotated[dict[str, Any] | None, Field(
            description="free keys stored with the memory, filterable in recall (e.g. {\"topic\": \"bread\"})")] = None,
        dedup: Annotated[bool, Field(
            description="when true and a current memory is this close already, nothing new is written")] = False,
        dedup_threshold: Annotated[float | None, Field(
            ge=0, le=1,
            description="cosine at which dedup treats two memories as the same (server default 0.95)")] = None,
        about: Annotated[list[str] | None, Field(
            description="node ids (or titles) in `brain` this memory is about; each gets an `about` edge")] = None,
        brain: Annotated[str | None, Field(description="the brain whose notes `about` names")] = None,
    ) -> MemoryStored:
        """Remember one thing in a namespace. Use dedup=true for facts you may learn again; name `about` and `brain`
        to anchor the memory to notes so graph-coupled recall finds it from them."""
        body: dict[str, Any] = {"text": text}
        _put(body, metadata=metadata, dedup_threshold=dedup_threshold, about=about, brain=brain)
        if dedup:
            body["dedup"] = True
        return MemoryStored.answer(await self._call("POST", f"/_memory/{segment(namespace)}", body=body))

    async def xerj_memory_recall(
        self,
        namespace: Annotated[str, Field(description="the memory namespace to recall from")],
        query: Annotated[str, Field(min_length=1, description="what to recall, in words")],
        mode: Annotated[Literal["bm25", "semantic", "hybrid"], Field(
            description="bm25: the words; semantic: the meaning (the namespace's embedder); hybrid: both fused"),
        ] = "bm25",
        fusion: Annotated[Literal["rrf", "linear"] | None, Field(
            description="how hybrid fuses its two legs (server default rrf); only with mode=hybrid")] = None,
        k: Annotated[int, Field(ge=1, le=MAX_RESULTS, description="how many memories to return, best first")] = 10,
        filter: Annotated[dict[str, Any] | list[dict[str, Any]] | None, Field(
            description="an ES query clause (or a list, all must match) that narrows without scoring, "
                        "e.g. {\"term\": {\"metadata.topic.keyword\": \"bread\"}}")] = None,
        recency_weight: Annotated[float | None, Field(
            ge=0, le=1, description="0 ranks by relevance only; 1 by how recent only")] = None,
        as_of: Annotated[Instant | None, Field(
            description="recall what was remembered at this instant (epoch ms or RFC3339); default now")] = None,
        trust: Annotated[list[TrustState] | None, Field(description="keep only memories in these trust states")] = None,
        graph: Annotated[GraphCoupling | None, Field(
            description="couple recall to the namespace's brain: restrict to, or blend with, a neighbourhood")] = None,
    ) -> RecallResult:
        """Recall memories from a namespace, best first. Pick `mode` by need (semantic finds paraphrases), narrow with
        `filter`, favour recent ones with `recency_weight`, look back with `as_of`, and use `graph` to stay near
        given notes (restrict) or to pull linked memories up (blend)."""
        body: dict[str, Any] = {"query": query, "k": k}
        if mode == "semantic":
            body["semantic"] = True
        elif mode == "hybrid":
            body["hybrid"] = True
        _put(body, fusion=fusion, filter=filter, recency_weight=recency_weight, as_of=as_of, trust=trust)
        if graph is not None:
            body["graph"] = graph.model_dump(exclude_none=True)
        payload = await self._call("POST", f"/_memory/{segment(namespace)}/_recall", body=body)
        return RecallResult.answer(payload)

    async def xerj_memory_list(
        self,
        namespace: Annotated[str, Field(description="the memory namespace")],
        size: Annotated[int, Field(ge=1, le=MAX_RESULTS, description="memories per page")] = 10,
        offset: Annotated[int, Field(ge=0, description="memories to skip (the HTTP API's `from`)")] = 0,
        include_forgotten: Annotated[bool, Field(description="also list forgotten memories")] = False,
    ) -> MemoryList:
        """List a namespace's memories, newest first, a page at a time; `left_out` says how many lie beyond."""
        payload = await self._call("GET", f"/_memory/{segment(namespace)}",
                                   {"size": size, "from": offset, "include_forgotten": include_forgotten})
        payload["left_out"] = max(0, int(payload.get("total", 0)) - offset - len(payload.get("memories", [])))
        return MemoryList.answer(payload)

    async def xerj_memory_forget(
        self,
        namespace: Annotated[str, Field(description="the memory namespace")],
        id: Annotated[str, Field(min_length=1, description="the memory's _id")],
        reject: Annotated[bool, Field(
            description="also leave a tombstone so the same memory is not stored again")] = False,
    ) -> MemoryForgotten:
        """Forget a memory: it is retired, not erased (recall with an earlier `as_of` still sees it). With
        reject=true the memory is refused from then on, so a later store of the same text writes nothing."""
        params = {"reject": True} if reject else None
        payload = await self._call("DELETE", f"/_memory/{segment(namespace)}/{segment(id)}", params)
        return MemoryForgotten.answer(payload)

    async def xerj_memory_review(
        self,
        namespace: Annotated[str, Field(description="the memory namespace")],
        approve: Annotated[list[str] | None, Field(description="ids of memories a person confirmed")] = None,
        reject: Annotated[list[str] | None, Field(description="ids of memories a person refused")] = None,
        note: Annotated[str | None, Field(description="why, recorded with the decisions")] = None,
    ) -> ReviewResult:
        """Record a person's review of memories: approve or reject by id; the answer reports each id."""
        body: dict[str, Any] = {}
        _put(body, approve=approve, reject=reject, note=note)
        return ReviewResult.answer(
            await self._call("POST", f"/_memory/{segment(namespace)}/_review", body=body))

    # -- brain --------------------------------------------------------------------------------------

    async def xerj_brain_ego(
        self,
        brain: Annotated[str, Field(description="the brain (a vault indexed by `xerj brain`, or a namespace)")],
        node: Annotated[str | None, Field(
            description="the node to expand from: its id (a title too, where the server resolves titles)")] = None,
        nodes: Annotated[list[str] | None, Field(
            description="several seed nodes instead of one (at most 64)")] = None,
        hops: Annotated[int, Field(description="1 or 2; the server refuses deeper walks")] = 1,
        direction: Annotated[Literal["out", "in", "both"], Field(description="which edges to follow")] = "both",
        types: Annotated[list[str] | None, Field(description="edge types to follow; default all")] = None,
        as_of: Annotated[Instant | None, Field(description="the graph as it stood then (epoch ms or RFC3339)")] = None,
        include_expired: Annotated[bool, Field(description="also return retired edges")] = False,
        trust: Annotated[list[TrustState] | None, Field(description="keep only edges in these trust states")] = None,
        min_confidence: Annotated[float | None, Field(ge=0, le=1, description="drop weaker edges")] = None,
        include_nodes: Annotated[bool, Field(description="add each node's title, preview and path")] = True,
        limit: Annotated[int | None, Field(
            ge=1, le=1000, description="most edges returned (server default 100)")] = None,
        sections: Annotated[bool, Field(
            description="a note's links sit on its sections: expand from them too, so the note's own links are "
                        "the first hop (the sections added are listed in `sections`)")] = True,
    ) -> EgoResult:
        """The neighbourhood of a note or node in a brain: its edges (with evidence) up to `hops` away and the
        neighbours they reach. `not_shown` counts everything withheld (clipped, expired, filtered)."""
        params: dict[str, Any] = {"hops": hops, "direction": direction, "include_nodes": include_nodes,
                                  "sections": sections}
        _put(params, node=node, nodes=nodes, types=types, as_of=as_of, trust=trust,
             min_confidence=min_confidence, limit=limit)
        if include_expired:
            params["include_expired"] = True
        return EgoResult.answer(await self._call("GET", f"/_graph/{segment(brain)}/ego", params))

    async def xerj_brain_overview(
        self,
        brain: Annotated[str, Field(description="the brain")],
        as_of: Annotated[Instant | None, Field(description="totals as they stood then")] = None,
        top: Annotated[int | None, Field(ge=1, le=50, description="how many types, detectors and hubs to list")] = None,
    ) -> OverviewResult:
        """What a brain holds: node and edge totals (live and retired), edge types, detectors, the hubs, the
        embedder, and what each list leaves out. A good first call on an unfamiliar brain."""
        params: dict[str, Any] = {}
        _put(params, as_of=as_of, top=top)
        return OverviewResult.answer(await self._call("GET", f"/_graph/{segment(brain)}/overview", params))

    async def xerj_brain_link(
        self,
        brain: Annotated[str, Field(description="the brain")],
        src: Annotated[str, Field(min_length=1, description="the node the edge leaves")],
        dst: Annotated[str, Field(min_length=1, description="the node the edge reaches (not src)")],
        type: Annotated[str, Field(min_length=1, description="the relation, e.g. relates_to, depends_on")],
        evidence: Annotated[Evidence | None, Field(description="why you believe it: a quote and its source")] = None,
        weight: Annotated[float | None, Field(ge=0, le=1, description="strength (default 1)")] = None,
        confidence: Annotated[float | None, Field(ge=0, le=1, description="how sure (default 1)")] = None,
        valid_at: Annotated[Instant | None, Field(
            description="since when it holds in the world (epoch ms or RFC3339); default now")] = None,
    ) -> LinkResult:
        """Assert an edge src -[type]-> dst in a brain, with evidence. Re-asserting the same edge at the same
        valid_at is not a duplicate (created=false). When it was recorded is set by the server."""
        body: dict[str, Any] = {"src": src, "dst": dst, "type": type}
        _put(body, weight=weight, confidence=confidence, valid_at=valid_at,
             evidence=evidence.model_dump(exclude_none=True) if evidence is not None else None)
        return LinkResult.answer(await self._call("POST", f"/_graph/{segment(brain)}/link", body=body))

    async def xerj_brain_unlink(
        self,
        brain: Annotated[str, Field(description="the brain")],
        edge_id: Annotated[str, Field(min_length=1, description="the edge's id (from link or ego)")],
        invalid_at: Annotated[Instant | None, Field(
            description="since when it no longer holds (epoch ms or RFC3339); default now")] = None,
    ) -> UnlinkResult:
        """Retire an edge: it stops holding from `invalid_at` but is kept, so `as_of` earlier still shows it."""
        params: dict[str, Any] = {}
        _put(params, invalid_at=invalid_at)
        path = f"/_graph/{segment(brain)}/link/{segment(edge_id)}"
        return UnlinkResult.answer(await self._call("DELETE", path, params))

    async def xerj_brain_review(
        self,
        brain: Annotated[str, Field(description="the brain")],
        approve: Annotated[list[str] | None, Field(description="edge ids a person confirmed")] = None,
        reject: Annotated[list[str] | None, Field(description="edge ids a person refused")] = None,
        note: Annotated[str | None, Field(description="why, recorded with the decisions")] = None,
        state: Annotated[TrustState | None, Field(
            description="when listing: the trust state to list (server default detected)")] = None,
        type: Annotated[str | None, Field(description="when listing: only this edge type")] = None,
        size: Annotated[int | None, Field(ge=1, le=MAX_RESULTS, description="when listing: claims per page")] = None,
    ) -> ReviewResult:
        """Review a brain's claims. Without approve or reject: list the claims awaiting review, with evidence.
        With them: apply a person's decisions; the answer reports each id (unknown ids too)."""
        path = f"/_graph/{segment(brain)}/_review"
        if approve or reject:
            body: dict[str, Any] = {}
            _put(body, approve=approve, reject=reject, note=note)
            return ReviewResult.answer(await self._call("POST", path, body=body))
        params: dict[str, Any] = {}
        _put(params, state=state, type=type, size=size)
        payload = await self._call("GET", path, params)
        if isinstance(payload, dict) and "total" in payload:
            payload["left_out"] = max(0, int(payload["total"]) - len(payload.get("items", [])))
        return ReviewResult.answer(payload)

    # -- documents ----------------------------------------------------------------------------------

    async def xerj_search(
        self,
        index: Annotated[str, Field(
            description="index name, comma list or pattern; `_all` searches every index this key can read")] = "_all",
        query: Annotated[str | None, Field(
            description="a query string (Lucene syntax: words, field:value, \"phrases\", gra*, AND/OR/NOT, "
                        "(groups), field:[a TO b])")] = None,
        body: Annotated[dict[str, Any] | None, Field(
            description="a query DSL body instead of `query` "
                        "(e.g. {\"query\": {\"match\": {\"title\": \"x\"}}})")] = None,
        size: Annotated[int, Field(ge=0, le=MAX_RESULTS, description="hits per page")] = 10,
        offset: Annotated[int, Field(ge=0, description="hits to skip (the HTTP API's `from`)")] = 0,
        highlight: Annotated[bool, Field(description="add the matching passages of each hit")] = True,
        text_chars: Annotated[int, Field(ge=0, le=MAX_TEXT_CHARS, description=(
            "characters of each hit's text shown; a hit whose text is longer says so in text_clipped, and "
            "xerj_get_document reads on"))] = SEARCH_TEXT_CHARS,
    ) -> SearchResult:
        """Search documents (notes, datasets, memories) in the indices this key can read: a query string or a query
        DSL body. Hits carry _index, _id, _score, _source (its text cut to text_chars, see text_clipped) and, by
        default, the passages that matched."""
        if query is not None and body is not None:
            raise Refused("give `query` (a query string) or `body` (a query DSL body), not both")
        request = dict(body or {})
        for key in ("size", "from"):
            if key in request:
                raise Refused(f"`{key}` belongs in the tool's own argument "
                                f"({'size' if key == 'size' else 'offset'}), not in `body`")
        request["size"] = size
        request["from"] = offset
        # Embeddings are numbers an agent cannot read, and a page's links are the href detector's input (hundreds
        # a page: 60% of the 456 KB ten hits of the Rust std docs' brain made), which the brain's href edges carry
        # with their evidence; both stay out unless the body asks for _source itself.
        request.setdefault("_source", {"excludes": list(SOURCE_LEFT_OUT)})
        if highlight:
            # The server marks what the query matched: a phrase only where its words lie side by side, the
            # words a wildcard matched, each field's own clauses' words in that field.
            request.setdefault("highlight", PASSAGES)
        params: dict[str, Any] = {"expand_wildcards": "all"}
        _put(params, q=query)
        payload = await self._call("POST", f"/{segment_list(index)}/_search", params, request)
        hits = payload.get("hits", {}).get("hits", [])
        for hit in hits:
            _put(hit, text_clipped=clip_text(hit.get("_source"), 0, text_chars))
        total = payload.get("hits", {}).get("total", {})
        total = int(total.get("value", 0)) if isinstance(total, dict) else int(total or 0)
        return SearchResult(index=index, total=total, hits=hits, left_out=max(0, total - offset - len(hits)))

    async def xerj_get_document(
        self,
        index: Annotated[str, Field(min_length=1, description="the index")],
        id: Annotated[str, Field(min_length=1, description="the document's _id")],
        text_from: Annotated[int, Field(ge=0, description="the first character of its text to show")] = 0,
        text_chars: Annotated[int, Field(ge=0, le=MAX_TEXT_CHARS, description=(
            "characters of its text shown from text_from; text_clipped says how long the whole text is"),
        )] = DOCUMENT_TEXT_CHARS,
    ) -> DocumentResult:
        """Read one document by index and id (a note found by search or ego, a memory, a dataset row); a long
        text is read a window at a time (text_from, text_chars)."""
        payload = await self._call("GET", f"/{segment(index)}/_doc/{segment(id)}")
        if isinstance(payload, dict):
            _put(payload, text_clipped=clip_text(payload.get("_source"), text_from, text_chars))
        return DocumentResult.answer(payload)

    async def xerj_list_indices(self) -> IndicesResult:
        """The indices this key can read, with their document counts: where to search, which brains exist."""
        rows = await self._call("GET", "/_cat/indices", {"format": "json", "h": "index,docs.count", "s": "index",
                                                    "expand_wildcards": "all"})
        return IndicesResult(indices=[IndexInfo(index=r["index"], docs_count=int(r.get("docs.count") or 0))
                                      for r in rows])


# What xerj_search leaves out of each hit's _source unless the body asks for _source itself.
SOURCE_LEFT_OUT = ("*vector*", "links")
# The passages xerj_search's hits carry: up to three a string field, about 160 characters around what matched.
PASSAGES = {"fields": {"*": {}}, "fragment_size": 160, "number_of_fragments": 3}


def clip_text(source: Any, start: int, chars: int) -> dict[str, int] | None:
    """Cut ``source["text"]`` to its characters ``[start, start + chars)``, in place; what was cut as ``{"from",
    "shown", "chars"}`` (``chars`` the whole text's length), or None when the whole text is shown."""
    text = source.get("text") if isinstance(source, dict) else None
    if not isinstance(text, str) or (start == 0 and len(text) <= chars):
        return None
    source["text"] = text[start:start + chars]
    return {"from": start, "shown": len(source["text"]), "chars": len(text)}


def _put(target: dict[str, Any], **values: Any) -> None:
    """Copy the given values that are set; a value left out lets the server's default apply."""
    for key, value in values.items():
        if value is not None:
            target[key] = value


def segment_list(index: str) -> str:
    # Commas and wildcards are the index expression's own syntax; anything else is encoded.
    return ",".join(segment(part).replace("%2A", "*") for part in index.split(","))


TOOL_NAMES = [name for name in vars(Tools) if name.startswith("xerj_")]
REVIEW_TOOLS = ("xerj_memory_review", "xerj_brain_review")
READ_ONLY = {"xerj_memory_recall", "xerj_memory_list", "xerj_brain_ego", "xerj_brain_overview", "xerj_search",
             "xerj_get_document", "xerj_list_indices"}
