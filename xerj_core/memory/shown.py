"""What the memory API reads of a stored memory: its JSON decoded without the embeddings it holds.

A memory's stored source carries its text's embeddings, 2,304 numbers for the default embedder and most of
its bytes. A recall or a list shows a handful of other fields, yet decoding the whole source made a
float object of every number: about 50 us a memory, half of a warm BM25 recall of ten. msgspec decodes into a
struct of the fields read here and passes over every other value without building it (a third of the time);
orjson has no way to leave a value out.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import msgspec

from xerj_core.memory import reviews
from xerj_core.memory.namespace import FORGOTTEN_AT, METADATA, STORED_AT, TEXT_FIELD, TRUST
from xerj_core.store import keys

# Every field the API shows (see service._public) or the review state at an instant reads (see reviews).
FIELDS = tuple(dict.fromkeys((TEXT_FIELD, STORED_AT, TRUST, METADATA, FORGOTTEN_AT, *reviews.REVIEW_FIELDS,
                              reviews.REVIEW_HISTORY)))
_Shown = msgspec.defstruct("_Shown", [(name, Any, msgspec.UNSET) for name in FIELDS])
_decode = msgspec.json.Decoder(_Shown).decode
# Sources fetched at once by shown_documents (a page of hits is one batch; the rows a review-state mask reads may
# be many, and each source is ~11 KB with the default embedder).
BATCH = 256


def shown_source(json: bytes | memoryview) -> dict[str, Any]:
    """The :data:`FIELDS` of a stored source's JSON that it holds, as ``orjson.loads(json)`` has them."""
    found = _decode(json)
    return {name: value for name in FIELDS if (value := getattr(found, name)) is not msgspec.UNSET}


def shown_documents(reader: Any, rows: Sequence[int]) -> Iterator[tuple[str, dict[str, Any]] | None]:
    """``(_id, shown source)`` of each of ``rows`` in order (:func:`shown_source`), None for a row with no live
    document, as ``reader.document`` answers; the sources are fetched :data:`BATCH` at a time (a backend whose gets
    are round trips prefetches each batch), so a long list of rows holds one batch of them at once."""
    for lo in range(0, len(rows), BATCH):
        for record in reader.source_records(rows[lo:lo + BATCH]):
            if record is None:
                yield None
                continue
            _version, doc_id, offset = keys.unpack_source_header(record)
            yield doc_id, shown_source(memoryview(record)[offset:])
