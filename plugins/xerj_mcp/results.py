"""The tools' structured results: pydantic models the SDK publishes as each tool's output schema.

The declared fields are what an agent can rely on; the server's other keys
ride along (``extra="allow"``), so a richer server answer is never cut.
A result made from the server's answer (``answer``) keeps that answer as its
wire form: the SDK validates a tool's structured content against this very
model before it leaves, so validating and dumping it here as well would walk
a 2-hop ego answer twice more for nothing.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, PrivateAttr, WithJsonSchema


def _array(value: Any) -> Any:
    if not isinstance(value, list):
        raise ValueError("not an array")
    return value


# A list of the server's objects. Its schema says "array" without an `items` schema: a validator (the SDK
# checks results on both ends) would otherwise walk every hit, edge and node, which on a 2-hop ego cost more
# than the call itself. The SDK's pydantic check of a result is held to the same: the list, not each row.
Rows = Annotated[list[dict[str, Any]], PlainValidator(_array), WithJsonSchema({"type": "array"})]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    _wire: dict[str, Any] | None = PrivateAttr(None)

    @classmethod
    def answer(cls, payload: Any) -> Self:
        """The server's JSON answer as this result, kept as the wire form (see the module docstring)."""
        if not isinstance(payload, dict):
            return cls.model_validate(payload)  # raises: not an object, so not this result
        result = cls.model_construct(**payload)
        result._wire = payload
        return result


def wire_form(result: BaseModel) -> dict[str, Any]:
    """What a tool result puts on the wire: the server's answer it was made from, else its JSON dump."""
    wire = getattr(result, "_wire", None)
    return wire if wire is not None else result.model_dump(mode="json", by_alias=True)


class MemoryStored(_Open):
    namespace: str = Field(description="the namespace written to")
    id: str | None = Field(None, alias="_id", description="the memory's id (the existing one when deduplicated)")
    created: bool = Field(description="false when nothing new was written (deduplicated or refused by a tombstone)")


class RecallResult(_Open):
    namespace: str
    mode: str = Field(description="bm25, semantic, hybrid or vector")
    k: int
    hits: Rows = Field(description="best first: _id, _score, text, metadata, stored_at, ...")


class _Page(_Open):
    total: int = Field(description="how many match, all pages")
    left_out: int = Field(description="how many lie beyond this page (total - from - returned)")


class MemoryList(_Page):
    namespace: str
    memories: Rows = Field(description="newest first: _id, text, metadata, stored_at, ...")


class MemoryForgotten(_Open):
    namespace: str
    id: str = Field(alias="_id")
    forgotten: bool = Field(description="false when it was already forgotten")


class ReviewResult(_Open):
    """A review queue page (``total``, ``items``) or the per-id outcome of decisions."""


class EgoResult(_Open):
    brain: str
    hops: int
    edges: Rows = Field(description="edge_id, src, dst, type, weight, hop, direction, valid_at, ...")
    neighbors: Annotated[list[Any], PlainValidator(_array), WithJsonSchema({"type": "array"})]
    not_shown: dict[str, Any] = Field(description="what was withheld and why (edges_clipped, expired_excluded, ...)")


class OverviewResult(_Open):
    brain: str
    exists: bool


class LinkResult(_Open):
    brain: str
    edge_id: str
    created: bool = Field(description="false when the same (src, type, dst, valid_at) was re-asserted")


class UnlinkResult(_Open):
    brain: str
    edge_id: str
    invalidated: bool = Field(description="false when the edge was already retired")


class SearchResult(_Page):
    index: str
    hits: Rows = Field(description="_index, _id, _score, _source, highlight when asked, and text_clipped "
                                   "({from, shown, chars}) when _source.text was cut")


class DocumentResult(_Open):
    index: str = Field(alias="_index")
    id: str = Field(alias="_id")
    found: bool
    source: dict[str, Any] | None = Field(None, alias="_source")
    text_clipped: dict[str, int] | None = Field(None, description=(
        "when _source.text is a window of the text: {from, shown, chars}, chars the whole text's length"))


class IndexInfo(BaseModel):
    index: str
    docs_count: int = Field(description="live documents")


class IndicesResult(BaseModel):
    indices: list[IndexInfo] = Field(description="every index this key can read, with its document count")
