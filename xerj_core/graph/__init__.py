"""The second brain: edges between documents, bounded hops, bitemporal reads; see service.GraphService."""

from xerj_core.graph.brain import (
    CONTRACT,
    EDGE_MAPPING,
    HOPS_CAP_REASON,
    META_ID,
    TRUST_STATES,
    edge_id,
    edges_index,
    nodes_index,
    validate_brain_name,
)

__all__ = ["CONTRACT", "EDGE_MAPPING", "HOPS_CAP_REASON", "META_ID", "TRUST_STATES", "edge_id", "edges_index",
           "nodes_index", "validate_brain_name"]
