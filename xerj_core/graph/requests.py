"""The graph routes' requests (ego and overview parameters, the link body), checked into frozen records first.

Every refusal is a :class:`~xerj_core.errors.GraphError` naming the parameter
(HTTP 400, the contract's ``graph_error`` body), raised before anything is
read or written. Values go through :mod:`xerj_core.params`, so a flag or a
number is spelled the same way here as on every other route.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from xerj_core import params
from xerj_core.errors import GraphError
from xerj_core.graph.brain import DEFAULT_DETECTOR, TRUST_STATES, hops_refusal, node_id_problem, now_ms
from xerj_core.graph.hop import BOTH, DIRECTIONS
from xerj_core.graph.stats import INTERVALS

EGO_PARAMS = frozenset({"node", "nodes", "hops", "direction", "types", "limit", "as_of", "include_expired",
                        "include_nodes", "nodes_index", "include_evidence", "trust", "min_confidence",
                        "known_at", "sections"})
OVERVIEW_PARAMS = frozenset({"as_of", "top", "histogram_interval", "trust", "known_at"})
LINK_FIELDS = ("src", "dst", "type", "weight", "confidence", "valid_at", "created_at", "detector", "evidence")

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
DEFAULT_TOP = 10
MAX_TOP = 50


@attrs.frozen
class EgoRequest:
    """``seeds`` in the order given, deduplicated; ``single`` when they came as ``node``; ``sections``: a seed
    that is a file expands from its sections too (see :meth:`GraphReading.ego`)."""

    seeds: tuple[str, ...]
    single: bool
    hops: int
    direction: str
    types: tuple[str, ...] | None
    trust: tuple[str, ...] | None
    limit: int
    as_of: int
    include_expired: bool
    include_nodes: bool
    include_evidence: bool
    min_confidence: float | None
    nodes_index: str | None
    known_at: int | None = None
    sections: bool = False


@attrs.frozen
class OverviewRequest:
    as_of: int
    top: int
    interval: str
    trust: tuple[str, ...] | None = None
    known_at: int | None = None


@attrs.frozen
class LinkRequest:
    """A person's (or a machine writer's) assertion of one edge, every field checked."""

    src: str
    dst: str
    type: str
    weight: float
    confidence: float
    valid_at: int
    created_at: int
    detector: str
    evidence: dict[str, Any] | None


# -- shared pieces ------------------------------------------------------------------------------

def parse_hops(value: Any, *, engine_level: bool, source: params.Source) -> int:
    """``1`` or ``2`` (a query string's digits read as the number); anything else is the contract's refusal."""
    if isinstance(value, str) and source != params.JSON:
        try:
            value = params.integer(value, "hops", GraphError, source=source)
        except GraphError:
            pass  # not a number at all: the cap sentence below still applies
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    refusal = hops_refusal(value, engine_level=engine_level)
    if refusal is not None:
        raise refusal
    return value


def parse_trust(value: Any, name: str = "trust") -> list[str]:
    states = params.names(value, name, GraphError)
    for state in states:
        if state not in TRUST_STATES:
            raise GraphError(f"[{name}] has unknown trust state [{state}]; expected any of: {', '.join(TRUST_STATES)}")
    return states


def parse_known_at(query: Mapping[str, Any], name: str = "known_at") -> int | None:
    """System time to read the brain as it stood at; None (the default) is now, the current versions."""
    value = query.get(name)
    return None if value is None else params.instant(value, name, GraphError)


def parse_direction(value: Any) -> str:
    return params.choice(value, "direction", DIRECTIONS, GraphError)


# -- the requests -------------------------------------------------------------------------------

def parse_ego(query: Mapping[str, Any], *, engine_level: bool = True) -> EgoRequest:
    """``GET /_graph/{brain}/ego`` parameters, from a query string (strings) or natively (Python values).

    ``engine_level`` is the contract's distinction for ``hops`` below 1: asked
    of the engine directly, the refusal names the floor (``hops must be at
    least 1.``) before the cap sentence; through HTTP it is the sentence alone.

    Requests differ mostly in their node: what the other parameters parse to is
    remembered (by their exact values and types), so a repeated shape costs a
    lookup; ``as_of`` left out is still read from the clock on every call.
    """
    if not EGO_PARAMS.issuperset(query):
        params.refuse_unknown(query, EGO_PARAMS, GraphError, what="ego")
    node, nodes = query.get("node"), query.get("nodes")
    if node is not None and nodes is not None:
        raise GraphError("[node] and [nodes] are mutually exclusive: give one node, or a comma-separated list")
    if node is None and nodes is None:
        raise GraphError("one of [node] or [nodes] is required")
    if node is not None:
        if not isinstance(node, str) or not node:
            raise GraphError("[node] must be a non-empty string")
        seeds = [node]
    else:
        seeds = params.names(nodes, "nodes", GraphError)
        if not seeds:
            raise GraphError("[nodes] must name at least one node id")
    try:
        key = (engine_level, *((name, type(value), value) for name, value in query.items()
                               if name != "node" and name != "nodes"))
        options = _EGO_OPTIONS.get(key)
    except TypeError:  # a value that cannot be a key (a list of names): parsed every time
        key, options = None, None
    if options is None:
        options = _ego_options(query, engine_level)
        if key is not None:
            if len(_EGO_OPTIONS) >= _EGO_OPTIONS_KEPT:
                _EGO_OPTIONS.clear()
            _EGO_OPTIONS[key] = options
    as_of = options["as_of"]
    return EgoRequest(seeds=tuple(seeds), single=node is not None, **{
        **options, "as_of": now_ms() if as_of is None else as_of})


_EGO_OPTIONS: dict[tuple[Any, ...], dict[str, Any]] = {}  # see parse_ego
_EGO_OPTIONS_KEPT = 256


def _ego_options(query: Mapping[str, Any], engine_level: bool) -> dict[str, Any]:
    """Every ego parameter but the seeds, checked; ``as_of`` None when left out (now, read per call)."""

    def flag(name: str, default: bool) -> bool:
        value = query.get(name)
        return default if value is None else params.flag(value, name, GraphError, source=params.QUERY)

    def optional(name: str, parse: Any) -> Any:
        value = query.get(name)
        return None if value is None else parse(value)

    types = optional("types", lambda v: tuple(params.names(v, "types", GraphError)))
    trust = optional("trust", lambda v: tuple(parse_trust(v)))
    nodes_index = optional("nodes_index", lambda v: ",".join(params.names(v, "nodes_index", GraphError)))
    return dict(
        hops=parse_hops(query.get("hops", 1), engine_level=engine_level, source=params.QUERY),
        direction=parse_direction(query.get("direction", BOTH)),
        types=types, trust=trust,
        limit=min(MAX_LIMIT, max(1, params.integer(query.get("limit", DEFAULT_LIMIT), "limit", GraphError,
                                                    source=params.QUERY))),
        as_of=None if query.get("as_of") is None else params.instant(query["as_of"], "as_of", GraphError),
        include_expired=flag("include_expired", False),
        include_nodes=flag("include_nodes", False),
        include_evidence=flag("include_evidence", True),
        min_confidence=optional("min_confidence", lambda v: params.unit(v, "min_confidence", GraphError,
                                                                        clamp=True, source=params.QUERY)),
        nodes_index=nodes_index or None,
        known_at=parse_known_at(query),
        sections=flag("sections", False),
    )


def parse_overview(query: Mapping[str, Any]) -> OverviewRequest:
    """``GET /_graph/{brain}/overview`` parameters."""
    params.refuse_unknown(query, OVERVIEW_PARAMS, GraphError, what="overview")
    as_of = params.instant(query["as_of"], "as_of", GraphError) if query.get("as_of") is not None else now_ms()
    top = min(MAX_TOP, max(1, params.integer(query.get("top", DEFAULT_TOP), "top", GraphError, source=params.QUERY)))
    interval = params.choice(query.get("histogram_interval", "day"), "histogram_interval", INTERVALS, GraphError)
    trust = tuple(parse_trust(query["trust"])) if query.get("trust") is not None else None
    return OverviewRequest(as_of, top, interval, trust, parse_known_at(query))


def _required_text(body: dict[str, Any], field: str) -> str:
    if field not in body or body[field] is None:
        raise GraphError(f"missing required field [{field}]")
    value = body[field]
    if not isinstance(value, str) or not value:
        raise GraphError(f"[{field}] must be a non-empty string")
    problem = node_id_problem(field, value)
    if problem is not None:
        raise GraphError(problem)
    return value


def _check_evidence(evidence: dict[str, Any]) -> None:
    """The mapped evidence fields must fit their column types, so the write cannot fail half-way."""
    quote, source, offset = evidence.get("quote"), evidence.get("source"), evidence.get("offset")
    if quote is not None and not isinstance(quote, str):
        raise GraphError("[evidence.quote] must be a string")
    if source is not None and not isinstance(source, str):
        raise GraphError("[evidence.source] must be a string")
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int)
                               or not -(2**63) <= offset < 2**63):
        raise GraphError("[evidence.offset] must be an integer")


def parse_link(body: Any, *, now: int) -> LinkRequest:
    """``POST /_graph/{brain}/link``'s body; unset instants default to ``now``."""
    if not isinstance(body, dict):
        raise GraphError("the link body must be a JSON object")
    params.refuse_unknown(body, LINK_FIELDS, GraphError, what="the link body", kind="field", ignored=frozenset())
    src = _required_text(body, "src")
    dst = _required_text(body, "dst")
    type_ = _required_text(body, "type")
    if src == dst:
        raise GraphError(f"src and dst are the same node [{src}]: an edge must join two different nodes")

    def unit(name: str) -> float:
        value = body.get(name)
        return 1.0 if value is None else params.unit(value, name, GraphError, clamp=True, source=params.JSON)

    def when(name: str) -> int:
        value = body.get(name)
        return now if value is None else params.instant(value, name, GraphError)

    detector = body.get("detector")
    if detector is None:
        detector = DEFAULT_DETECTOR
    elif not isinstance(detector, str):
        raise GraphError(f"[detector] must be a string, got [{detector!r:.80}]")
    evidence = body.get("evidence")
    if evidence is not None:
        if not isinstance(evidence, dict):
            raise GraphError("[evidence] must be an object; {quote, source, offset} is the shape readers expect")
        _check_evidence(evidence)
    return LinkRequest(src, dst, type_, unit("weight"), unit("confidence"), when("valid_at"), when("created_at"),
                       detector, evidence)
