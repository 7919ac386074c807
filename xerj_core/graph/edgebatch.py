"""The typed write paths of edges: a detector batch, and the reconcile pass's retirement, prepared a batch at a time.

``write_edges`` of a batch of new edges (the common case: a detector run over
new or changed files) needs none of the generic store path's work per
document: every field's type and column are known from the edge mapping, so
there is nothing to flatten, coerce or map dynamically. This module checks a
whole batch with C-level passes (``map``, ``set``, ``min``/``max``) and builds
each document and its row record directly. Whenever a batch is not that plain
case (a draft the per-draft checks would refuse or convert, an edge already
stored, an edge id twice, a person's decision on any claim of the brain, a
mapping changed by hand), it answers None *before writing anything* and the
caller takes the general path, which decides as it always did. Retiring
(``invalidate_edges``) reads its candidates in two ordered passes and builds
both the archived and the retired version's records the same way. What these
paths write is what the general path writes: the same sources, ids, ordinals
(assigned in the same order) and column values; ``tests/test_graph_edgebatch.py``
compares the two stores whole.
"""

from __future__ import annotations

import math
from itertools import compress, repeat
from operator import attrgetter, is_not, itemgetter, ne
from typing import TYPE_CHECKING, Any, Sequence

import lmdb
import numpy as np
import orjson

from xerj_core.graph.brain import (
    EDGE_MAPPING,
    MAX_NODE_ID_BYTES,
    MAX_TYPE_BYTES,
    REJECTION_PREFIX,
    SCHEMA_VERSION,
    TRUST_DETECTED,
)
from xerj_core.graph.draftcolumns import DraftColumns
from xerj_core.graph.history import HISTORY_MAPPING, RECORDED_AT, SUPERSEDED_AT, archived_id, history_index
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.params import INSTANT_LIMIT
from xerj_core.store import keys, limits
from xerj_core.store.columns import KIND_LEN, KIND_ORD, NO_ORD, Column, column_kind
from xerj_core.store.mapping import INT_TYPES, Mapping
from xerj_core.store.plan import column_postings, column_tokens
from xerj_core.store.scope import SCOPE_FIELD, SCOPE_SPEC
from xerj_core.store.tailblock import Block
from xerj_core.text import term_counts_many

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.store.write import IndexWrite, WriteTxn

# False sends every batch down the general path (the equivalence test compares the two).
ENABLED = True
_LONG_LOW, _LONG_HIGH = INT_TYPES["long"]


def _fields(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a reserved index created with the mapping ``body`` (the store adds the scope field)."""
    mapping = Mapping.from_es(body)
    mapping.add_field(SCOPE_SPEC)
    return dict(mapping.fields)


_EDGE_FIELDS = _fields(EDGE_MAPPING)
_HISTORY_FIELDS = _fields(HISTORY_MAPPING)
# The dictionary of edge ids (in the edges index and in the history index alike): a term per edge version.
_EDGE_ID_DICT = _EDGE_FIELDS["edge_id"].dictionary_name
# The dictionaries of an edge's source file (``src_file`` and ``evidence.source``): a detector batch names the files
# it read, met again only when a file changes. Kept in the writer's term cache they grew it by two terms per file
# for good (200k at 1M edges of the benchmark), long-lived small objects among every later batch's temporaries.
_SOURCE_DICTS = frozenset(_EDGE_FIELDS[path].dictionary_name for path in ("src_file", "evidence.source"))


def _plain_strings(values: list[Any]) -> bool:
    return set(map(type, values)) == {str} and "" not in values


def _fits(values: list[str], limit: int) -> bool:
    """Every value within ``limit`` UTF-8 bytes (checked on characters first, one C-level pass)."""
    return max(map(len, values)) * 4 <= limit or max(len(v.encode()) for v in values) <= limit


def _units(values: list[Any]) -> bool:
    """Floats already in [0, 1] (what ``_unit`` would return unchanged)."""
    return set(map(type, values)) == {float} and 0.0 <= min(values) and max(values) <= 1.0 and all(
        map(math.isfinite, values))


class NewEdges:
    """A plain detector batch: its new edge documents (drafts' order, self-edges left out) and, field by field, the
    values their row records are built from (so nothing is read back out of the documents)."""

    __slots__ = ("docs", "self_edges", "values")

    def __init__(self, docs: list[dict[str, Any]], self_edges: int, values: dict[str, tuple[Any, list[Any]]]) -> None:
        self.docs = docs
        self.self_edges = self_edges
        # column path -> (positions of the documents holding it, their values); ``range(len(docs))`` when all do
        self.values = values


def _held(column: list[Any]) -> tuple[Sequence[int], list[Any]]:
    """Positions and values of ``column``'s values that are not None."""
    # by identity: ``count(None)`` would call each value's ``__eq__``
    held = list(map(is_not, column, repeat(None)))
    if not any(held):
        return [], []
    if all(held):
        return range(len(column)), column
    present = list(compress(range(len(column)), held))
    return present, list(compress(column, held))


_NO_EVIDENCE = frozenset({Evidence, type(None)})


def documents(drafts: Sequence[EdgeDraft], created_ms: int) -> NewEdges | None:
    """The batch's documents and column values when every draft is one ``draft_document`` would take as it is
    (strings, epoch-ms ints, weights and confidences in [0, 1], plain evidence and formats); None otherwise, so
    the caller runs the per-draft checks and their refusals (and the general path stores what they make).

    ``drafts`` held as :class:`DraftColumns` (an autoindex run's) are read column by column with the edge ids
    they carry; others are taken apart into columns first."""
    if not drafts:
        return None
    if isinstance(drafts, DraftColumns):
        batch = drafts
    else:
        if set(map(type, drafts)) != {EdgeDraft}:
            return None
        evidence = list(map(attrgetter("evidence"), drafts))
        # an Evidence whose quote is None would read as no evidence in columns: the general path takes it
        if not set(map(type, evidence)) <= _NO_EVIDENCE or any(e is not None and e.quote is None for e in evidence):
            return None
        batch = DraftColumns.of(drafts)
    keep = list(map(ne, batch.src, batch.dst))
    if not all(keep):
        batch = batch.where(keep)
    n = len(batch)
    if not n:
        return NewEdges([], len(drafts), {})
    srcs, dsts, types, detectors, valid, weights, confidences = (
        batch.src, batch.dst, batch.type, batch.detector, batch.valid_at, batch.weight, batch.confidence)
    if not (_plain_strings(srcs) and _plain_strings(dsts) and _plain_strings(types) and _plain_strings(detectors)
            and _fits(srcs, MAX_NODE_ID_BYTES) and _fits(dsts, MAX_NODE_ID_BYTES) and _fits(types, MAX_TYPE_BYTES)
            and set(map(type, valid)) == {int} and -INSTANT_LIMIT <= min(valid) and max(valid) <= INSTANT_LIMIT
            and _units(weights) and _units(confidences)):
        return None
    src_formats, dst_formats = _held(batch.src_format), _held(batch.dst_format)
    with_evidence, quotes = _held(batch.quote)
    if any(found and set(map(type, found)) != {str} for _at, found in (src_formats, dst_formats)):
        return None
    if quotes:
        every_one = len(quotes) == n
        sources = batch.source if every_one else list(map(batch.source.__getitem__, with_evidence))
        offsets = batch.offset if every_one else list(map(batch.offset.__getitem__, with_evidence))
        if (set(map(type, quotes)) != {str} or set(map(type, sources)) != {str} or set(map(type, offsets)) != {int}
                or min(offsets) < _LONG_LOW or max(offsets) > _LONG_HIGH):
            return None
    else:
        sources = offsets = []
    eids = batch.ids
    # the key order of draft_document's documents (the stored source bytes are the same)
    docs = [{"edge_id": e, "src": s, "dst": t, "type": k, "weight": w, "confidence": c, "valid_at": v,
             "created_at": created_ms, "detector": d, "trust": TRUST_DETECTED, "schema_version": SCHEMA_VERSION}
            for e, s, t, k, w, c, v, d in zip(eids, srcs, dsts, types, weights, confidences, valid, detectors)]
    for name, (present, found) in (("src_format", src_formats), ("dst_format", dst_formats)):
        for i, value in zip(present, found):
            docs[i][name] = value
    for i, quote, source, offset in zip(with_evidence, quotes, sources, offsets):
        doc = docs[i]
        doc["evidence"] = {"quote": quote, "source": source, "offset": offset}  # Evidence.to_json's
        doc["src_file"] = source
    every = range(n)
    values = {"edge_id": (every, eids), "src": (every, srcs), "dst": (every, dsts), "type": (every, types),
              "detector": (every, detectors), "trust": (every, [TRUST_DETECTED] * n), "src_format": src_formats,
              "dst_format": dst_formats, "src_file": (with_evidence, sources),
              "evidence.source": (with_evidence, sources), "weight": (every, weights),
              "confidence": (every, confidences), "valid_at": (every, valid), "created_at": (every, [created_ms] * n),
              "schema_version": (every, [SCHEMA_VERSION] * n), "evidence.quote": (with_evidence, quotes),
              "evidence.offset": (with_evidence, offsets)}
    return NewEdges(docs, len(drafts) - n, values)


def _claims_exist(target: "IndexWrite") -> bool:
    """Does the edges index hold any claim document (a person's rejection or approval)? One ordered lookup: claim
    ids are reserved ids, which keep their B-tree entries whichever door wrote them (xerj_core.store.idmap)."""
    prefix = keys.id_key(target.ix, REJECTION_PREFIX)
    with target.txn.raw.cursor(db=target.txn.dbs["ids"]) as cur:
        return bool(cur.set_range(prefix)) and bytes(cur.key()).startswith(prefix)


def _ordinal_numbers(target: "IndexWrite", field: str, values: list[Any], fresh: bool = False,
                     known: bool = False) -> list[int | None]:
    """The ordinal of each of ``field``'s values in order (None for one too long to index, counted as skipped),
    assigned as the record path assigns them: new terms numbered in order of first appearance (``fresh``: the
    values are most likely new to the dictionary; ``known``: every one indexed is in it, see
    ``IndexWrite.ordinals``)."""
    spec = _EDGE_FIELDS[field]
    name, params = spec.dictionary_name, spec.params
    cache = target.dict_cache.setdefault(name, {})
    unknown = set(values).difference(cache)
    skip: set[Any] = set()
    if unknown and (params.get("ignore_above") is not None
                    or max(map(len, unknown)) * 4 > limits.keyword_room(name)):
        skip = {v for v in unknown if not limits.keyword_indexed(v, params, name)}
    if not skip:
        return target.ordinals(name, values, fresh=fresh, known=known)  # type: ignore[return-value]
    found = iter(target.ordinals(name, [v for v in values if v not in skip], fresh=fresh, known=known))
    target.skipped["keywords"] += sum(1 for v in values if v in skip)
    return [None if v in skip else next(found) for v in values]


def _ordinals(target: "IndexWrite", field: str, values: list[Any], known: bool = False) -> list[list[int]]:
    """``[ordinal]`` of each of ``field``'s values in order, ``[]`` for one too long to index (a record's form)."""
    return [[] if o is None else [o] for o in _ordinal_numbers(target, field, values, known=known)]


def write_new(txn: "WriteTxn", name: str, brain: str, batch: NewEdges, now: int) -> list[dict[str, Any]] | None:
    """Write ``batch`` (new edges of a detector batch) to the edges index ``name`` in the general path's order and
    return the stored documents (``batch.docs``, stamped); None, having written nothing, when the batch is not the
    plain case."""
    target = txn.index(name)
    docs = batch.docs
    ids = batch.values["edge_id"][1]
    if (target.mapping.dynamic != "false" or target.mapping.fields != _EDGE_FIELDS or target.scope != brain
            or len(set(ids)) != len(ids)):
        return None
    if _claims_exist(target):
        return None
    # the ids stored on the next rows by one insert-if-absent pass, or (one stored already) nothing written
    claimed = target.claim_ids(ids)
    if not claimed and target.rows_of(ids):
        return None
    # An edge id is looked up again only when its edge is retired (the runs answer that): keeping every new id in
    # the writer's term cache held about 28 MB at 200k edges for nothing.
    target.unremembered.add(_EDGE_ID_DICT)
    target.unremembered.update(_SOURCE_DICTS)
    for doc in docs:  # the batch's own documents, stamped as put_version stamps a new version
        doc[RECORDED_AT] = now
    block = _block(target, brain, len(docs), batch.values, target.state.next_row)
    # the sources lazily: orjson's result holds a 4 KB buffer or more whatever its length, so a list of a
    # transaction's 4,096 of them held 16-32 MB at once; each is freed once joined into its row's source
    target.append_block(ids, map(orjson.dumps, docs), block, ids_stored=claimed)
    return docs


def _block(target: "IndexWrite", brain: str, n: int, values: dict[str, tuple[Any, list[Any]]], start: int
           ) -> Block:
    """The tail block of ``n`` plain edge documents on rows ``start`` on, from their ``values`` (column path ->
    positions, values): the block the store makes of the records :func:`_records` builds (the same columns,
    postings and ordinals, assigned in the same order), made a column at a time with no record per row."""
    nodes = [None] * (2 * n)
    nodes[0::2], nodes[1::2] = values["src"][1], values["dst"][1]
    numbers = _ordinal_numbers(target, "src", nodes)
    columns = {"src": _ord_column(n, range(n), numbers[0::2]), "dst": _ord_column(n, range(n), numbers[1::2]),
               SCOPE_FIELD: _ord_column(n, range(n), _ordinal_numbers(target, SCOPE_FIELD, [brain]) * n)}
    postings = {}
    for path, (present, found) in values.items():
        if not found or path in ("src", "dst"):
            continue
        spec = _EDGE_FIELDS[path]
        kind = column_kind(spec)
        if kind == KIND_ORD:
            # a new edge's id is new to the dictionary unless an edge of that id was stored and deleted
            columns[path] = _ord_column(n, present, _ordinal_numbers(target, path, found, fresh=path == "edge_id"))
            continue
        if kind == KIND_LEN:
            # the store's batch tokenizer, as a bulk of documents takes it (see IndexWrite._batch_block)
            column: list[Any] = found
            if len(present) != n:
                column = [None] * n
                for i, value in zip(present, found):
                    column[i] = value
            lengths, postings[path] = column_postings(column, start, target.skipped)
            held = np.ones(n, bool) if column is found else np.fromiter(map(is_not, column, repeat(None)), bool, n)
            columns[path] = Column(kind, np.asarray(lengths, np.int32), held)
            continue
        if len(found) != n:
            aligned_values: list[Any] = [None] * n
            for i, value in zip(present, found):
                aligned_values[i] = value
            found = aligned_values
        columns[path] = Column.build(spec, kind, found)
    return Block(start, n, columns, postings)


def _ord_column(n: int, present: Any, numbers: list[int | None]) -> Column:
    """A keyword column of ``n`` rows: ``numbers[k]`` (None: a value too long to index) on row ``present[k]``,
    as ``Column.build`` makes it of the records' ``[ordinal]`` lists."""
    if len(numbers) == n and None not in numbers:
        return Column(KIND_ORD, np.array(numbers, np.int32), np.ones(n, bool))
    ords = np.full(n, NO_ORD, np.int32)
    ords[np.fromiter(present, np.int64, len(numbers))] = [NO_ORD if o is None else o for o in numbers]
    return Column(KIND_ORD, ords, ords != NO_ORD)


# Every key a stored edge document may hold for the typed retire path, and the plain type of its value.
_EDGE_KEYS = {"edge_id": str, "src": str, "dst": str, "type": str, "detector": str, "trust": str, "src_file": str,
              "src_format": str, "dst_format": str, "rejection": str, "weight": float, "confidence": float,
              "valid_at": int, "invalid_at": int, "created_at": int, "expired_at": int, "schema_version": int,
              "evidence": dict, RECORDED_AT: int}
_EVIDENCE_KEYS = {"quote": str, "source": str, "offset": int}
_EDGE_COLUMNS = ("edge_id", "src", "dst", "type", "detector", "trust", "src_file", "src_format", "dst_format",
                 "rejection")
_NUMBERS = ("weight", "confidence", "valid_at", "invalid_at", "created_at", "expired_at", "schema_version")
# The columns of an edge row other than its scope (text: the quote's length; its terms go to the postings).
_COLUMN_PATHS = _EDGE_COLUMNS + _NUMBERS + ("evidence.source", "evidence.quote", "evidence.offset")
_NO_TERMS: dict[str, Any] = {}


# A stored edge's key tuple -> the plain type of each of its values in order (None: a key no edge holds). Edges
# come in a handful of shapes, so each document's check is one lookup and one C-level tuple of its types.
_SHAPES: dict[tuple[str, ...], tuple[type, ...] | None] = {}


def _plain_edge(doc: Any) -> bool:
    """Is ``doc`` a stored edge whose every value is its column's plain type (what the typed record covers)?"""
    if type(doc) is not dict:
        return False
    shape = tuple(doc)
    kinds = _SHAPES.get(shape, _SHAPES)
    if kinds is _SHAPES:
        found = tuple(map(_EDGE_KEYS.get, shape))
        kinds = None if None in found else found  # type: ignore[assignment]
        if len(_SHAPES) < 256:  # documents written by hand may come in any shape: those are not all kept
            _SHAPES[shape] = kinds  # type: ignore[assignment]
    if kinds is None or tuple(map(type, doc.values())) != kinds:
        return False
    low, high = INT_TYPES["integer"]
    if "schema_version" in doc and not low <= doc["schema_version"] <= high:
        return False
    if not (math.isfinite(doc["weight"]) and math.isfinite(doc["confidence"])):
        return False
    evidence = doc.get("evidence")
    if evidence is not None:
        if evidence.keys() != _EVIDENCE_KEYS.keys() or any(type(evidence[k]) is not t
                                                          for k, t in _EVIDENCE_KEYS.items()):
            return False
        if not _LONG_LOW <= evidence["offset"] <= _LONG_HIGH:
            return False
    return True


def _sources(target: "IndexWrite", rows: list[int], read: dict[int, bytes]) -> dict[int, tuple[int, dict[str, Any]]]:
    """``row -> (version, document)`` of stored rows: those ``read`` holds (row -> source record, read in this
    transaction) as they are, the others read in one ordered pass."""
    ix = target.ix
    wanted = sorted(keys.row_key(ix, row) for row in rows if row not in read)
    raw, db = target.txn.raw, target.txn.dbs["src"]
    if not wanted:
        found: Any = ()
    elif isinstance(raw, lmdb.Transaction):  # one C-level loop over the sorted keys
        with raw.cursor(db=db) as cur:
            found = cur.getmulti(wanted)
    else:  # a database store fetches them in one round trip first
        getattr(raw, "prefetch", lambda _db, _keys: None)(db, wanted)
        found = [(k, v) for k, v in ((k, raw.get(k, db=db)) for k in wanted) if v is not None]
    blobs = {row: read[row] for row in rows if row in read}
    blobs.update((keys.read_u64(key, 4), blob) for key, blob in found)
    out = {}
    header, start, loads = keys.SRC_HEADER.unpack_from, keys.SRC_HEADER.size, orjson.loads
    for row, blob in blobs.items():
        version, id_len = header(blob)
        out[row] = (version, loads(blob[start + id_len:]))
    return out


def _present(docs: list[dict[str, Any]], shapes: set[tuple[str, ...]], field: str) -> tuple[Any, list[Any]]:
    """``(positions, values)`` of the documents holding ``field`` (``evidence.*`` inside ``evidence``);
    ``shapes`` are the documents' distinct key lists."""
    if field.startswith("evidence."):
        present, found = _present(docs, shapes, "evidence")
        return present, list(map(itemgetter(field[9:]), found))
    if all(field in shape for shape in shapes):
        return range(len(docs)), list(map(itemgetter(field), docs))
    if not any(field in shape for shape in shapes):
        return (), []
    present = [i for i, d in enumerate(docs) if field in d]
    return present, [docs[i][field] for i in present]


def _values(docs: list[dict[str, Any]]) -> dict[str, tuple[Any, list[Any]]]:
    """``(positions, values)`` of each edge column held by any of ``docs`` (plain stored edges)."""
    shapes = set(map(tuple, docs))
    values = {}
    for path in _COLUMN_PATHS:
        present, found = _present(docs, shapes, path)
        if found:
            values[path] = (present, found)
    return values


def _records(target: "IndexWrite", brain: str, n: int, values: dict[str, tuple[Any, list[Any]]]
             ) -> list[dict[str, Any]]:
    """The row record of each of ``n`` plain edge documents from their ``values`` (column path -> positions,
    values), as the write plan makes it: the same columns and terms, and ordinals assigned in document order
    (each dictionary on its own; src and dst, which every edge holds, share ``nodes``). Built a column at a
    time: each dictionary is read and added to once, each row's record made by one C-level ``zip``."""
    srcs, dsts = values["src"][1], values["dst"][1]
    interleaved: list[Any] = [None] * (2 * n)
    interleaved[0::2], interleaved[1::2] = srcs, dsts
    nodes = _ordinals(target, "src", interleaved)
    full: dict[str, list[Any]] = {"src": nodes[0::2], "dst": nodes[1::2],
                                  SCOPE_FIELD: [_ordinals(target, SCOPE_FIELD, [brain])[0]] * n}
    partial: list[tuple[str, Any, list[Any]]] = []
    terms: list[dict[str, Any]] = [_NO_TERMS] * n
    for path, (present, found) in values.items():
        if not found or path in ("src", "dst"):
            continue
        if path == "evidence.quote":
            tokens = column_tokens(found, target.skipped)
            found = list(map(len, tokens))
            for i, counts in zip(present, term_counts_many(tokens)):
                terms[i] = {path: counts}
        elif _EDGE_FIELDS[path].type == "keyword":
            # A retired edge keeps its id, which its stored row indexed (the edge mapping has always held
            # edge_id as a keyword): the id's hash, when it matches one dictionary entry, names its ordinal.
            # An edge-id dictionary outgrows the writer's term cache, so most ids are found there, not cached.
            found = _ordinals(target, path, found, known=path == "edge_id")
        if len(found) == n:
            full[path] = found
        else:
            partial.append((path, present, found))
    names = list(full)
    columns = list(map(dict, map(zip, repeat(names), zip(*full.values()))))
    for path, present, found in partial:
        for i, value in zip(present, found):
            columns[i][path] = value
    return [{"c": c, "t": t} for c, t in zip(columns, terms)]


def retire(txn: "WriteTxn", name: str, brain: str, candidates: list[str], when: int, now: int
           ) -> list[dict[str, Any]] | None:
    """The reconcile pass's retirement of ``candidates`` (distinct edge ids) at ``when``, written as
    ``invalidate_edges``'s general path writes it: each live edge's current version archived to the brain's
    history index, then re-indexed with ``invalid_at`` and ``expired_at``. Returns the new versions; None,
    having written nothing, when a document or either index is not the plain case."""
    target = txn.index(name)
    if target.mapping.dynamic != "false" or target.mapping.fields != _EDGE_FIELDS or target.scope != brain:
        return None
    read: dict[int, bytes] = {}  # the sources the id map read to confirm a row: each is read once
    rows = target.rows_of(candidates, read)
    stored = _sources(target, list(rows.values()), read)
    current = []
    versions_of: list[tuple[int, int]] = []  # each current edge's (row, version), read above
    for eid in candidates:
        row = rows.get(eid)
        found = stored.get(row) if row is not None else None
        doc = found[1] if found is not None else None
        if not (doc is not None and type(doc.get("src")) is str and type(doc.get("dst")) is str):
            continue  # not an edge (the general path skips it too)
        if doc.get("invalid_at") is not None:
            continue  # already retired
        if not _plain_edge(doc):
            return None
        current.append((eid, doc))
        versions_of.append((row, found[0]))  # type: ignore[index]
    if not current:
        return []
    archive = history_index(brain)
    fresh_history = not txn.exists(archive)
    history = txn.create_index(archive, HISTORY_MAPPING) if fresh_history else txn.index(archive)
    if history.mapping.dynamic != "false" or history.mapping.fields != _HISTORY_FIELDS or history.scope is None:
        return None
    versions = [({**doc, "edge_id": eid, SUPERSEDED_AT: now}, archived_id(eid, now)) for eid, doc in current]
    if len({vid for _v, vid in versions}) != len(versions) or history.rows_of([vid for _v, vid in versions]):
        return None
    # the retired ids are met once here (an edge is retired once): not kept in the writer's term cache
    history.unremembered.add(_EDGE_ID_DICT)
    target.unremembered.add(_EDGE_ID_DICT)
    history_ids = _ordinals(history, "edge_id", [eid for eid, _doc in current])
    history_scope = _ordinals(history, SCOPE_FIELD, [history.scope])[0]
    dumps = orjson.dumps
    archived = []
    for (version, vid), edge_ord in zip(versions, history_ids):
        columns: dict[str, Any] = {"edge_id": edge_ord, SUPERSEDED_AT: now, SCOPE_FIELD: history_scope}
        if RECORDED_AT in version:
            columns[RECORDED_AT] = version[RECORDED_AT]
        archived.append((vid, dumps(version), {"c": columns, "t": {}}))
    history.append_new(archived)
    retired = []
    for eid, doc in current:
        doc = {**doc, "invalid_at": when, "expired_at": now}
        retired.append({**doc, RECORDED_AT: now})
    records = _records(target, brain, len(retired), _values(retired))
    same_ids = all(doc["edge_id"] == eid for doc, (eid, _doc) in zip(retired, current))
    target.put_records([(doc, doc["edge_id"], record) for doc, record in zip(retired, records)],
                       versions_of if same_ids else None)
    return retired
