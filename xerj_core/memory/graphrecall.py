"""A recall's ``graph`` block: expanding the namespace's brain from the seeds, and what the response reports of it.

The brain of a namespace is the namespace itself, so the expansion runs over
``.xerj-memory-{ns}-edges`` through :meth:`GraphService.reachable`, which owns
the hop engine, the bitemporal filter and the proximity rule (1.0 for a seed,
otherwise the best ``0.5^hop * clamp(weight, 0, 1) * confidence`` over the
edges reaching a node). Seeds count as reachable from themselves, so a
``restrict`` recall may return the seed memories. A brain without an edges
index is not an error: recall proceeds ungated and ``not_shown.no_edges_index``
says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from xerj_core.errors import GraphError, XerjError
from xerj_core.memory.requests import GraphOptions

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.graph.service import GraphService

# The reachable set folded into a restrict filter is bounded so the prefilter stays bounded.
REACHABLE_CAP = 10_000
# Blend without seeds seeds from this many of the best base hits.
BLEND_SEEDS = 5


@attrs.frozen
class Expansion:
    """What the graph returned for one recall: node id → ``{"hop", "proximity"}``, and its counters."""

    nodes: dict[str, dict[str, Any]]
    not_shown: dict[str, Any]

    @property
    def no_edges_index(self) -> bool:
        return bool(self.not_shown.get("no_edges_index"))

    def ids(self) -> list[str]:
        return list(self.nodes)

    def proximity(self, node: str) -> float:
        entry = self.nodes.get(node)
        return 0.0 if entry is None else float(entry["proximity"])

    def report(self, options: GraphOptions, seeds: tuple[str, ...], as_of: int) -> dict[str, Any]:
        brain = {"brain": options.brain} if options.brain is not None else {}
        return {"mode": options.mode, **brain, "seeds": list(seeds), "hops": options.hops, "as_of": as_of,
                "reachable": len(self.nodes), "not_shown": dict(self.not_shown)}


def expand_graph(graph: "GraphService", ns: str, seeds: tuple[str, ...], options: GraphOptions,
                 as_of: int) -> Expansion:
    """Expand the brain ``ns`` from ``seeds`` as ``options`` ask, at ``as_of``."""
    try:
        nodes, not_shown = graph.reachable(
            options.brain or ns, seeds, hops=options.hops, types=options.types, as_of=as_of,
            min_confidence=options.min_confidence, limit=REACHABLE_CAP, trust=options.trust,
            known_at=options.known_at)
    except GraphError:
        raise
    except XerjError as exc:
        raise GraphError(f"[graph] {exc.reason}") from None
    return Expansion(nodes, not_shown)
