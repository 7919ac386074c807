"""The memory API's request bodies, checked field by field into frozen records before anything is read or written.

Every refusal is a :class:`~xerj_core.errors.GraphError` (HTTP 400, the
``graph_error`` body) whose reason names the field. Unknown keys are refused,
never ignored: a typo'd key that silently dropped out of a recall would turn it
into plausible noise. A modifier without the mode it modifies (``fusion``
without ``hybrid``, ``dedup_threshold`` without ``dedup``) is refused for the
same reason.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import attrs

from xerj_core import params
from xerj_core.errors import GraphError
from xerj_core.graph.brain import parse_instant, validate_brain_name
from xerj_core.graph.requests import parse_hops, parse_trust
from xerj_core.store.mapping import FLOAT32_MAX

STORE_FIELDS = ("text", "vector", "metadata", "dedup", "dedup_threshold", "override_rejection",
                "about", "brain")
RECALL_FIELDS = ("query", "vector", "k", "semantic", "hybrid", "fusion", "filter", "recency_weight", "graph",
                 "as_of", "trust", "known_at")
GRAPH_FIELDS = ("mode", "seeds", "hops", "types", "weight", "as_of", "min_confidence", "trust", "brain",
                "known_at")
LIST_PARAMS = ("size", "from", "include_forgotten")

DEFAULT_DEDUP_THRESHOLD = 0.95
DEFAULT_K = 10
MAX_K = 10_000
DEFAULT_LIST_SIZE = 10
MAX_LIST_WINDOW = 10_000
MAX_VECTOR_DIMS = 4096
DEFAULT_GRAPH_HOPS = 1
DEFAULT_GRAPH_WEIGHT = 0.3
MAX_ABOUT = 64
MAX_SEEDS = 10_000  # the restrict cap; the hop engine clips and reports the frontier itself
GRAPH_MODES = ("restrict", "blend")
FUSIONS = ("rrf", "linear")
LEARNED_REFUSAL = (
    "[fusion] \"learned\" is not available: there is no learned ranker here, and substituting reciprocal rank "
    "(or linear) fusion would misrepresent the ranking asked for; use \"rrf\" or \"linear\""
)


@attrs.frozen
class StoreRequest:
    text: str | None
    vector: tuple[float, ...] | None
    metadata: dict[str, Any] | None
    dedup: bool
    dedup_threshold: float
    override_rejection: bool = False
    about: tuple[str, ...] = ()
    brain: str | None = None


@attrs.frozen
class ListRequest:
    size: int
    offset: int
    include_forgotten: bool


@attrs.frozen
class GraphOptions:
    mode: str
    seeds: tuple[str, ...] | None
    hops: int
    types: tuple[str, ...] | None
    weight: float
    as_of: int | None
    min_confidence: float | None
    trust: tuple[str, ...] | None = None
    brain: str | None = None
    known_at: int | None = None


@attrs.frozen
class RecallRequest:
    """``mode`` is ``vector``, ``semantic``, ``bm25`` or ``hybrid``; exactly one of query/vector is set."""

    mode: str
    query: str | None
    vector: tuple[float, ...] | None
    k: int
    fusion: str
    filter: dict[str, Any] | list[dict[str, Any]] | None
    recency_weight: float
    as_of: int | None
    graph: GraphOptions | None
    trust: tuple[str, ...] | None = None
    known_at: int | None = None


# -- field helpers ------------------------------------------------------------------------------

def _object(body: Any, what: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise GraphError(f"the {what} must be a JSON object")
    params.refuse_unknown(body, allowed, GraphError, what=f"the {what}", kind="field", ignored=frozenset())
    return body


def _bool(value: Any, field: str) -> bool:
    return params.flag(value, field, GraphError, source=params.JSON)


def _number(value: Any, field: str) -> float:
    return params.number(value, field, GraphError, source=params.JSON)


def _unit_interval(value: Any, field: str) -> float:
    return params.unit(value, field, GraphError, clamp=False, source=params.JSON)


def _int(value: Any, field: str, low: int, high: int) -> int:
    return params.integer(value, field, GraphError, low, high, source=params.JSON)


def parse_vector(value: Any, field: str = "vector") -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise GraphError(f"[{field}] must be a non-empty array of numbers")
    if len(value) > MAX_VECTOR_DIMS:
        raise GraphError(f"[{field}] has {len(value)} dimensions, the limit is {MAX_VECTOR_DIMS}")
    out = []
    for i, x in enumerate(value):
        # an int is finite (and math.isfinite of one too large for a float raises): only floats are asked
        if isinstance(x, bool) or not isinstance(x, (int, float)) or (isinstance(x, float) and not math.isfinite(x)):
            raise GraphError(f"[{field}] must hold finite numbers only; element {i} is [{x!r:.40}]")
        if abs(x) > FLOAT32_MAX:  # vectors are stored and scored as float32s, where it would be an infinity
            raise GraphError(f"[{field}] must hold numbers within the float32 range; element {i} is [{x!r:.40}]")
        out.append(float(x))
    return tuple(out)


def _strings(value: Any, field: str, limit: int | None = None) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise GraphError(f"[{field}] must be an array of non-empty strings")
    if limit is not None and len(value) > limit:
        raise GraphError(f"[{field}] holds {len(value)} ids, the limit is {limit} per call")
    return tuple(dict.fromkeys(value))


# -- bodies -------------------------------------------------------------------------------------

def parse_store(body: Any) -> StoreRequest:
    body = _object(body, "memory body", STORE_FIELDS)
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise GraphError(f"[text] must be a string, got [{text!r:.80}]")
    blank = text is not None and not text.strip()
    if blank:
        text = None
    vector = parse_vector(body["vector"]) if body.get("vector") is not None else None
    if text is None and vector is None:
        raise GraphError("a memory needs [text] or [vector]; the body has neither"
                         + (" ([text] is blank)" if blank else ""))
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise GraphError("[metadata] must be a JSON object")
    dedup = _bool(body["dedup"], "dedup") if body.get("dedup") is not None else False
    threshold = DEFAULT_DEDUP_THRESHOLD
    if body.get("dedup_threshold") is not None:
        if not dedup:
            raise GraphError("[dedup_threshold] applies only with [dedup] true")
        threshold = _unit_interval(body["dedup_threshold"], "dedup_threshold")
    override = _bool(body["override_rejection"], "override_rejection") \
        if body.get("override_rejection") is not None else False
    about = _strings(body["about"], "about", MAX_ABOUT) if body.get("about") is not None else ()
    brain = _brain(body.get("brain"), "brain")
    if brain is not None and not about:
        raise GraphError("[brain] applies only with [about]: it names the brain whose notes the memory is about")
    return StoreRequest(text, vector, metadata, dedup, threshold, override, about, brain)


def _brain(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise GraphError(f"[{field}] must be a brain name, got [{value!r:.80}]")
    try:
        return validate_brain_name(value)
    except GraphError as exc:
        raise GraphError(f"[{field}] {exc.reason}") from None


def parse_list(query: Mapping[str, Any] | None) -> ListRequest:
    query = dict(query or {})
    params.refuse_unknown(query, LIST_PARAMS, GraphError, what="listing memories")
    def count(name: str, default: int) -> int:
        value = query.get(name)
        return default if value is None else params.integer(value, name, GraphError, 0, MAX_LIST_WINDOW,
                                                            source=params.QUERY)

    size, offset = count("size", DEFAULT_LIST_SIZE), count("from", 0)
    if offset + size > MAX_LIST_WINDOW:
        raise GraphError(f"[from] + [size] must be at most {MAX_LIST_WINDOW}, got [{offset + size}]")
    include = params.flag(query["include_forgotten"], "include_forgotten", GraphError, source=params.QUERY) \
        if query.get("include_forgotten") is not None else False
    return ListRequest(size, offset, include)


def parse_graph(body: Any) -> GraphOptions:
    body = _object(body, "[graph] object", GRAPH_FIELDS)
    mode = body.get("mode")
    if mode not in GRAPH_MODES:
        raise GraphError(f"[graph.mode] must be \"restrict\" or \"blend\", got [{mode!r:.80}]")
    seeds = None
    if body.get("seeds") is not None:
        seeds = _strings(body["seeds"], "graph.seeds", MAX_SEEDS)
    if mode == "restrict" and not seeds:
        raise GraphError("[graph.seeds] is required for mode \"restrict\": it names where the restriction starts")
    if mode == "blend" and seeds is not None and not seeds:
        raise GraphError("[graph.seeds] must not be empty; omit it to seed from the top base hits")
    hops = body.get("hops")
    hops = DEFAULT_GRAPH_HOPS if hops is None else parse_hops(hops, engine_level=False, source=params.JSON)
    types = _strings(body["types"], "graph.types") if body.get("types") is not None else None
    weight = DEFAULT_GRAPH_WEIGHT
    if body.get("weight") is not None:
        weight = params.unit(body["weight"], "graph.weight", GraphError, clamp=True, source=params.JSON)
    as_of = parse_instant(body["as_of"], "graph.as_of") if body.get("as_of") is not None else None
    min_confidence = None
    if body.get("min_confidence") is not None:
        min_confidence = _unit_interval(body["min_confidence"], "graph.min_confidence")
    trust = tuple(parse_trust(body["trust"], "graph.trust")) if body.get("trust") is not None else None
    known_at = parse_instant(body["known_at"], "graph.known_at") if body.get("known_at") is not None else None
    return GraphOptions(mode, seeds, hops, types, weight, as_of, min_confidence, trust,
                        _brain(body.get("brain"), "graph.brain"), known_at)


def parse_recall(body: Any) -> RecallRequest:
    body = _object(body, "recall body", RECALL_FIELDS)
    has_query = body.get("query") is not None
    has_vector = body.get("vector") is not None
    if has_query == has_vector:
        raise GraphError("recall takes exactly one of [query] or [vector]"
                         + ("; the body has both" if has_query else "; the body has neither"))
    query = body.get("query")
    if has_query and (not isinstance(query, str) or not query.strip()):
        raise GraphError(f"[query] must be a non-empty string, got [{query!r:.80}]")
    vector = parse_vector(body["vector"]) if has_vector else None
    semantic = _bool(body["semantic"], "semantic") if body.get("semantic") is not None else False
    hybrid = _bool(body["hybrid"], "hybrid") if body.get("hybrid") is not None else False
    if has_vector and (semantic or hybrid):
        which = "semantic" if semantic else "hybrid"
        raise GraphError(f"[{which}] embeds [query] text; it cannot apply to a recall by [vector]")
    fusion = body.get("fusion")
    if fusion is not None:
        if fusion == "learned":
            raise GraphError(LEARNED_REFUSAL)
        if fusion not in FUSIONS:
            raise GraphError(f"[fusion] must be \"rrf\" or \"linear\", got [{fusion!r:.80}]")
        if not hybrid:
            raise GraphError("[fusion] applies only with [hybrid] true")
    mode = "vector" if has_vector else "hybrid" if hybrid else "semantic" if semantic else "bm25"
    k = _int(body["k"], "k", 1, MAX_K) if body.get("k") is not None else DEFAULT_K
    flt = body.get("filter")
    if flt is not None and not (isinstance(flt, dict) or (isinstance(flt, list) and flt
                                                          and all(isinstance(c, dict) for c in flt))):
        raise GraphError("[filter] must be a query clause object (or an array of them, all of which must match), "
                         "e.g. {\"term\": {\"metadata.tag\": \"x\"}}")
    recency = _unit_interval(body["recency_weight"], "recency_weight") \
        if body.get("recency_weight") is not None else 0.0
    as_of = parse_instant(body["as_of"], "as_of") if body.get("as_of") is not None else None
    graph = parse_graph(body["graph"]) if body.get("graph") is not None else None
    trust = tuple(parse_trust(body["trust"])) if body.get("trust") is not None else None
    known_at = parse_instant(body["known_at"], "known_at") if body.get("known_at") is not None else None
    return RecallRequest(mode, query if has_query else None, vector, k, fusion or "rrf", flt, recency, as_of, graph,
                         trust, known_at)
