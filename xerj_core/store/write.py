"""One write transaction: document puts and deletes, dictionaries, tail records, sealing and merging segments."""

from __future__ import annotations

import base64
import os
import time
from bisect import bisect_left
from collections import deque
from itertools import islice, repeat, starmap
from operator import is_not, itemgetter
from typing import Any, Iterable, Sequence

import attrs
import lmdb
import numpy as np
import orjson

from xerj_core.errors import (DocumentMissing, IndexAlreadyExists, IndexClosed, IndexNotFound, InvalidIndexName,
                              MapperParsingError, VersionConflict, XerjError)
from xerj_core.store import dictruns, idmap, keys, limits, pins, postpack, tailblock
from xerj_core.store import meta as index_meta
from xerj_core.store.columns import KIND_LEN, KIND_ORD, NO_ORD, Column, column_kind, encode_postings_many
from xerj_core.store.mapping import FieldSpec, Mapping, coerce, dynamic_specs, flatten
from xerj_core.store.names import validate_index_name
from xerj_core.store.plan import Batched, Leaf, WritePlan, column_postings, emptied, plan_for, text_counts
from xerj_core.store.records import Columns, Same
from xerj_core.store.tailblock import Block, PostingRun
from xerj_core.store.scope import SCOPE_FIELD, SCOPE_SPEC, refuse_in_document, refuse_in_mapping, scope_of
from xerj_core.text import CountedTerms, counted_terms

MAX_ID_BYTES = limits.MAX_ID_BYTES
_MAX_KEY = limits.LMDB_MAX_KEY_BYTES
# One field's postings cut per segment: per segment of the layout, its bucket count and its postings' key suffixes
# and values (see xerj_core.store.postpack).
CutPostings = list[tuple[int, list[bytes], list[bytes]]]
_UNREAD = object()  # an id entry not read yet
_LATER = object()  # an ordinal left for IndexWrite._resolve_many (see _record_deferred)
_STRING_TYPES = frozenset(("keyword", "text"))


@attrs.frozen
class WriteResult:
    """What one document write did, in the terms an ES client expects."""

    index: str
    doc_id: str
    result: str  # "created", "updated", "deleted", "not_found", "noop"
    version: int
    seq_no: int


def new_doc_id() -> str:
    # 15 random bytes → 20 URL-safe characters, the length of an ES auto id.
    return base64.urlsafe_b64encode(os.urandom(15)).decode()


# A write that leaves this many dead rows, and at least COMPACT_DEAD_SHARE of the live count, compacts the
# index in the same transaction: the rewrite is O(live rows) and happens once per that many dead rows, so its
# cost per write stays constant while the data directory stays within a small multiple of the live data.
COMPACT_MIN_DEAD = 4096
COMPACT_DEAD_SHARE = 0.5

# The source record header of a new document (version 1) by the length of its id, made once.
_NEW_HEADERS = [keys.SRC_HEADER.pack(1, length) for length in range(MAX_ID_BYTES + 1)]

# Sources and ids a batch of puts gathers before writing them through one cursor each.
DEFERRED_CHUNK = 2048
# Characters a document of a batch of puts needs, on average, in one text field for :meth:`IndexWrite.put_many`
# to count that field's texts with the compiled word count (see ``IndexWrite._long_text_field``).
COUNT_FROM_CHARS = 256
_COUNTABLE = frozenset({str, type(None)})  # the values of a text field put_many_counted takes (None: absent)

# The largest segment, in tails: merges stop growing here, so the write that seals a tail
# rewrites at most this many rows (a bounded pause) instead of the whole index.
MAX_SEGMENT_TAILS = 128
# Segments of one size merge when this many of them are there: a row is rewritten about log(tails)/log(FANOUT)
# times (twice on the way to a full segment), where merging pairs rewrote it log2(tails) times; readers see at
# most FANOUT - 1 segments of each size.
FANOUT = 8


def segment_layout(sealed_rows: int, tail_rows: int, max_tails: int | None = None) -> list[tuple[int, int]]:
    """Sealed segments for ``sealed_rows`` rows: multiples of the tail size by powers of :data:`FANOUT`, largest
    first.

    Below ``max_tails`` tails the layout is the tail count written in base
    FANOUT (a digit ``d`` is ``d`` segments of that size), so sealing one more
    tail either adds a segment of one tail or merges the segments a base-FANOUT
    counter carries into. Full segments of ``max_tails`` tails are never merged again.
    """
    max_tails = max_tails or MAX_SEGMENT_TAILS
    units = sealed_rows // tail_rows
    full, units = divmod(units, max_tails)
    size = tail_rows * max_tails
    layout = [(i * size, (i + 1) * size) for i in range(full)]
    start = full * size
    power = 1
    while power * FANOUT <= units:
        power *= FANOUT
    while power:
        count, units = divmod(units, power)
        size = tail_rows * power
        for _ in range(count):
            layout.append((start, start + size))
            start += size
        power //= FANOUT
    return layout


class IndexWrite:
    """The in-transaction view of one index: its state, its (possibly growing) mapping, pending tail rows."""

    def __init__(self, txn: "WriteTxn", name: str, ix: int, meta: dict[str, Any]) -> None:
        self.txn = txn
        self.name = name
        self.ix = ix
        self.meta = meta
        db = txn.dbs
        self.state = keys.IndexState.unpack(txn.raw.get(keys.ix_key(ix), db=db["state"]))
        mapping_blob = txn.raw.get(keys.ix_key(ix), db=db["mappings"])
        self.mapping = Mapping.stored(mapping_blob)
        self.mapping_changed = False
        # The text field whose values the caller counted (see put_many_counted): recorded as empty texts would be
        self.uncounted: str | None = None
        self._plan = plan_for(mapping_blob, self.mapping)
        self._plan_fields = len(self.mapping.fields)
        # This transaction's new rows in row order: ``(row, record)`` per row, or a Block of a batch's rows.
        self.pending: list[tuple[int, dict[str, Any]] | Block] = []
        self.dict_cache: dict[str, dict[str, int]] = {}
        self.dict_size: dict[str, int] = {}
        # Dictionaries whose terms this transaction met are not kept in the store's term cache after the commit
        # (see WriteTxn.remember_terms): a term per document, each looked up about once (an edge index's ids).
        self.unremembered: set[str] = set()
        self._dict_cursor: Any = None  # a cursor on the dictionaries (LMDB), opened at the first new term
        self._dict_runs: dict[str, dictruns.DictRuns | None] = {}  # per dictionary: its runs (None: per-term layout)
        self._id_runs: Any = _UNREAD  # the id map's runs (xerj_core.store.idmap), read at the first id lookup
        self.put_ids: list[str] = []
        self.deleted_ids: list[str] = []
        self.force_compact = False
        self.compacted = False
        self.merge_wanted = False  # a seal left its merge to the merge thread
        self.merged = False  # segments were swapped by a merge (xerj_core.store.merge)
        # The blocks of the committed tail rows when this process wrote them last (see WriteTxn.tails), and
        # those the tail holds after this transaction (set by finish when they are all known).
        self.known_tail = txn.known_tail(ix, self.state)
        self.tail_after: list[Block] | None = None
        # The postings of small sealed segments as this process wrote them, by (start, end) and field (see
        # WriteTxn.known_segment_runs): the merge that takes them reads these instead of their stored buckets.
        # (and each one's size in bytes, counted once when it is kept rather than at every commit that remembers it)
        self.segment_runs, self.segment_sizes = txn.known_segment_runs(ix, self.state)
        self.keep_runs_rows = txn.tail_rows if isinstance(txn.raw, lmdb.Transaction) else 0
        self.finished = False
        # Terms and keyword values too long to be keys, left out of this transaction's rows.
        self.skipped = {"terms": 0, "keywords": 0}
        # A reserved index's rows carry their tenant (see xerj_core.store.scope).
        self.scope = scope_of(name)
        if self.scope is not None and SCOPE_FIELD not in self.mapping.fields:
            self._migrate_scope()

    def _migrate_scope(self) -> None:
        """Give every live row of a reserved index written before scopes existed the index's scope.

        Runs in the transaction that first opens such an index for writing (the
        store opens one for each at start), so the field and every row's value
        commit together: no reader ever sees the field without the rows' values.
        Each live document is written again under its id, as an update would.
        """
        self.mapping.add_field(SCOPE_SPEC)
        self.mapping_changed = True
        prefix = keys.ix_key(self.ix)
        rows: list[tuple[str, Any]] = []
        with self.txn.raw.cursor(db=self.txn.dbs["src"]) as cursor:
            found = cursor.set_range(prefix)
            while found:
                key, blob = cursor.item()
                if not key.startswith(prefix):
                    break
                _version, doc_id, offset = keys.unpack_source_header(blob)
                rows.append((doc_id, orjson.loads(blob[offset:])))
                found = cursor.next()
        for doc_id, doc in rows:
            # A document that already had a field of this name keeps it in _source; the column is ours.
            self._put_row(doc, doc_id, "index", self.record_for({**doc, SCOPE_FIELD: self.scope}))

    # -- dictionaries --------------------------------------------------------------------------

    def ordinal(self, name: str, term: str) -> int:
        cache = self.dict_cache.get(name)
        if cache is None:
            cache = self.dict_cache[name] = {}
        found = cache.get(term)
        if found is not None:
            return found
        committed = self.txn.committed_terms.get((self.ix, name))
        if committed is not None:
            found = committed.get(term)
            if found is not None:
                cache[term] = found
                return found
        raw, db = self.txn.raw, self.txn.dbs
        size = self.dict_size.get(name)
        if size is None:
            stored = raw.get(keys.dictn_key(self.ix, name), db=db["dictn"])
            size = int.from_bytes(stored, "big") if stored else 0
            self.dict_size[name] = size
        runs = self._runs(name, size)
        if runs is not None:
            encoded = term.encode()
            (ordinal,), hashed = runs.lookup([encoded])
            if ordinal is None:
                ordinal = size
                self.dict_size[name] = size + 1
                raw.put(keys.dictr_key(self.ix, name, ordinal), encoded, db=db["dictr"])
                runs.add(hashed, ordinal)
            cache[term] = ordinal
            return ordinal
        key = keys.dict_key(self.ix, name, term)
        # One insert-if-absent: a new term (ingest: edge ids, nodes) is stored by it, and a term stored by an
        # earlier transaction (retiring an edge re-reads its id) is found by the same B-tree search, since a
        # refused cursor put leaves the cursor on the existing entry.
        if self._dict_cursor is None:
            self._dict_cursor = raw.cursor(db=db["dict"]) if isinstance(raw, lmdb.Transaction) else False
        if self._dict_cursor:
            added = self._dict_cursor.put(key, size.to_bytes(4, "big"), overwrite=False)
            existing = None if added else self._dict_cursor.value()
        else:
            added = raw.put(key, size.to_bytes(4, "big"), overwrite=False, db=db["dict"])
            existing = None if added else raw.get(key, db=db["dict"])
        if added:
            ordinal = size
            self.dict_size[name] = size + 1
            raw.put(keys.dictr_key(self.ix, name, ordinal), term.encode(), db=db["dictr"])
        else:
            ordinal = int.from_bytes(existing, "big")
        cache[term] = ordinal
        return ordinal

    def ordinals(self, name: str, terms: Sequence[str], *, fresh: bool = False, known: bool = False) -> list[int]:
        """:meth:`ordinal` of each of ``terms`` (values the caller checked fit a key, see ``limits``), in order: new
        terms numbered in order of first appearance, as one call per term numbers them; with LMDB the dictionary
        is read and added to in one ordered pass. ``fresh`` says the terms no cache knows are most likely new (a
        batch of new edges' ids): they are then stored by one insert-if-absent pass instead of looked up first.
        ``known`` says every term is in the dictionary already (values of stored documents read back): see
        ``DictRuns.lookup``."""
        cache = self.dict_cache.setdefault(name, {})
        committed = self.txn.committed_terms.get((self.ix, name))
        missing = [t for t in dict.fromkeys(terms) if t not in cache]
        # fresh terms are most likely new, so a probe of the cache (one cache miss each in a large dictionary) would
        # miss; a committed one is found by the lookup below all the same
        if committed and missing and not fresh:
            found = list(map(committed.get, missing))
            if found.count(None) != len(found):
                cache.update((t, o) for t, o in zip(missing, found) if o is not None)
                missing = [t for t, o in zip(missing, found) if o is None]
        raw, db = self.txn.raw, self.txn.dbs
        if len(missing) > 1 and isinstance(raw, lmdb.Transaction):
            ix = self.ix
            prefix = keys.dict_key(ix, name, "")  # the dictionary's keys and reverse keys, built by C-level maps
            size = self.dict_size.get(name)
            if size is None:
                stored = raw.get(keys.dictn_key(ix, name), db=db["dictn"])
                size = int.from_bytes(stored, "big") if stored else 0
            encoded = list(map(str.encode, missing))
            runs = self._runs(name, size)
            if runs is not None:  # looked up in the runs; the new terms numbered in order and added as one run
                found, hashed = runs.lookup(encoded, known=known)
                if found.count(None) != len(found):
                    cache.update((t, o) for t, o in zip(missing, found) if o is not None)
                    kept = [i for i, o in enumerate(found) if o is None]
                    missing, encoded = [missing[i] for i in kept], [encoded[i] for i in kept]
                    hashed = hashed[kept]
                runs.add(hashed, size)
                fixed = list(map(int.to_bytes, range(size, size + len(missing)), repeat(4), repeat("big")))
            else:
                fixed, missing, encoded = self._btree_ordinals(name, prefix, missing, encoded, size, fresh)
            cache.update(zip(missing, range(size, size + len(missing))))
            self.dict_size[name] = size + len(missing)
            _put_all(raw, db["dictr"], list(zip(map(prefix.__add__, fixed), encoded)))
        else:
            for term in missing:
                self.ordinal(name, term)
        return list(map(cache.__getitem__, terms))

    def _runs(self, name: str, size: int) -> "dictruns.DictRuns | None":
        """The runs of dictionary ``name`` (holding ``size`` terms) in this transaction; None for a dictionary
        in the per-term layout (written before runs existed, or by a database store)."""
        found = self._dict_runs.get(name, _UNREAD)
        if found is _UNREAD:
            raw = self.txn.raw
            found = self._dict_runs[name] = (dictruns.DictRuns.open(raw, self.txn.dbs, self.ix, name, size,
                                                                    self.txn.dict_runs)
                                             if isinstance(raw, lmdb.Transaction) else None)
        return found  # type: ignore[return-value]

    def _btree_ordinals(self, name: str, prefix: bytes, missing: list[str], encoded: list[bytes], size: int,
                        fresh: bool) -> tuple[list[bytes], list[str], list[bytes]]:
        """The per-term layout's part of :meth:`ordinals`: ``(fixed-width new ordinals, new terms, their bytes)``,
        the terms stored already put in the cache."""
        raw, db = self.txn.raw, self.txn.dbs
        cache = self.dict_cache[name]
        dict_keys = list(map(prefix.__add__, encoded))
        fixed = list(map(int.to_bytes, range(size, size + len(missing)), repeat(4), repeat("big")))
        with raw.cursor(db=db["dict"]) as cur:
            # Fresh terms are numbered as new and stored by one insert-if-absent pass (one B-tree descent each);
            # only when some were stored already are the numbers redone (the stored ones keep theirs).
            added = cur.putmulti(sorted(zip(dict_keys, fixed)), overwrite=False)[1] if fresh else 0
            if added != len(missing):
                found = {bytes(k): v for k, v in cur.getmulti(sorted(dict_keys))}
                ours = dict(zip(dict_keys, fixed)) if fresh else {}  # what the insert pass stored
                before = [k in found and found[k] != ours.get(k) for k in dict_keys]
                cache.update((t, int.from_bytes(found[k], "big"))
                             for t, k, was in zip(missing, dict_keys, before) if was)
                kept = [i for i, was in enumerate(before) if not was]
                missing, encoded = [missing[i] for i in kept], [encoded[i] for i in kept]
                fixed = fixed[:len(kept)]
                cur.putmulti(sorted((dict_keys[i], f) for i, f in zip(kept, fixed) if ours.get(dict_keys[i]) != f))
        return fixed, missing, encoded

    # -- documents -----------------------------------------------------------------------------

    @property
    def plan(self) -> WritePlan:
        """The compiled plan of the current mapping (fields only ever grow, so their count is its version)."""
        if self._plan_fields != len(self.mapping.fields):
            self._plan = plan_for(None, self.mapping)
            self._plan_fields = len(self.mapping.fields)
        return self._plan

    def record_for(self, doc: Any) -> dict[str, Any]:
        """The row record (column values and term frequencies) of ``doc``; grows the mapping dynamically.

        A document whose fields are all mapped takes the compiled plan; the rest
        take the generic path. New dynamic fields are committed to the mapping
        only when the whole document parsed, so a refused document leaves no
        trace in the mapping.
        """
        if not isinstance(doc, dict):
            raise MapperParsingError("failed to parse: the document must be a JSON object")
        plan = self.plan
        record = plan.record(doc, self.ordinal, self.dict_cache, self.skipped, self.uncounted)
        if record is not None:
            return record
        values = plan.values(doc)
        if values is None:
            values = self._generic_values(doc)
            plan = self.plan
        columns: dict[str, Any] = {}
        terms: dict[str, dict[str, int]] = {}
        ordinal, dict_cache, leaves = self.ordinal, self.dict_cache, plan.leaves
        for path, vals in values.items():
            leaf = leaves[path]
            kind = leaf.kind
            if kind == KIND_ORD:
                name = leaf.dictionary
                cache = dict_cache.get(name) or {}
                ords = []
                for v in vals:
                    known = cache.get(v)
                    if known is None:
                        if not limits.keyword_indexed(v, leaf.spec.params, name):
                            self.skipped["keywords"] += 1
                            continue
                        known = ordinal(name, v)
                    ords.append(known)
                columns[path] = ords
            elif kind == KIND_LEN:
                columns[path], terms[path] = self._text_values(path, vals)
            else:
                columns[path] = vals[0]
        return {"c": columns, "t": terms}

    def _text_values(self, path: str, vals: list[Any]) -> tuple[int, dict[str, int]]:
        """A text field's column value (its indexed token count) and term frequencies (a plain JSON object)."""
        kept, dropped, counts = text_counts(*(vals if path != self.uncounted else [""] * len(vals)))
        self.skipped["terms"] += dropped
        return kept, counts

    def _generic_values(self, doc: dict[str, Any]) -> dict[str, list[Any]]:
        """Values per field path by the generic rules: dynamic mapping, strictness, every refusal."""
        mapping = self.mapping
        fields = mapping.fields
        multi_fields = mapping.has_multi_fields()
        added: dict[str, FieldSpec] = {}
        values: dict[str, list[Any]] = {}
        for path, value in flatten(doc, mapping):
            spec = fields.get(path) or added.get(path)
            if spec is None:
                if path in mapping.objects:
                    raise MapperParsingError(f"object mapping for [{path}] tried to parse a value as an object")
                if mapping.dynamic == "strict":
                    raise MapperParsingError(
                        f"mapping set to strict, dynamic introduction of [{path}] within [_doc] is not allowed")
                if mapping.dynamic in ("false", "runtime"):
                    continue
                for new in dynamic_specs(path, value):
                    added[new.path] = new
                spec = added[path]
            coerced = value if type(value) is str and spec.type in _STRING_TYPES else coerce(spec, value)
            found = values.get(path)
            if found is None:
                values[path] = [coerced]
            else:
                found.append(coerced)
            if not (multi_fields or added):
                continue
            for sub in self._subfields(path, added):
                ignore_above = sub.params.get("ignore_above")
                if ignore_above is not None and isinstance(value, str) and len(value) > ignore_above:
                    continue
                values.setdefault(sub.path, []).append(coerce(sub, value))
        if added:
            limits.check_field_paths(added)
            mapping.add_dynamic(list(added.values()))
            self.mapping_changed = True
        return values

    def _subfields(self, path: str, added: dict[str, FieldSpec]) -> Iterable[FieldSpec]:
        found = self.mapping.subfields_of(path)
        if not added:
            return found
        return (*found, *(s for s in added.values() if s.source_path == path))

    def id_runs(self) -> idmap.IdRuns | None:
        """The id map's runs in this transaction (None: a database store, B-tree entries only)."""
        if self._id_runs is _UNREAD:
            self._id_runs = idmap.runs_of(self.txn.raw, self.txn.dbs, self.ix, self.state.epoch, self.txn.dict_runs)
        return self._id_runs  # type: ignore[no-any-return]

    def row_of(self, doc_id: str) -> int | None:
        return idmap.row(self.txn.raw, self.txn.dbs, self.ix, self.id_runs, doc_id.encode())

    def version_of(self, row: int) -> int:
        blob = self.txn.raw.get(keys.row_key(self.ix, row), db=self.txn.dbs["src"])
        return keys.unpack_source_header(blob)[0]

    def put(self, doc: Any, doc_id: str | None = None, *, op_type: str = "index",
            scope: str | None = None) -> WriteResult:
        """Write ``doc``; in a reserved index its row carries ``scope`` (the writer's tenant), by default
        the index's own. The scope is a column only: ``_source`` stays what the caller sent."""
        if self.scope is not None:
            refuse_in_document(doc, self.name)
            record = self.record_for({**doc, SCOPE_FIELD: scope or self.scope} if isinstance(doc, dict) else doc)
        else:
            record = self.record_for(doc)
        return self._put_row(doc, doc_id, op_type, record)

    def put_new(self, docs: list[Any], ids: list[Any]) -> Sequence[WriteResult] | None:
        """:meth:`put_many` of ``docs`` under ``ids`` (``index`` or ``create`` alike) when they are its bulk-ingest
        case (:meth:`_put_batch`: new documents with distinct ids and like fields) in an index without row
        scopes: their results. None, and nothing done, otherwise (then ``put_many(..., batch_tried=True)``).

        A bulk's puts given as two columns: no ``(doc, id, op_type)`` tuple per document and no refusal to look
        for among the results."""
        if self.scope is not None:
            return None
        return self._put_batch(docs, docs, ids)

    def put_many(self, items: Sequence[tuple[Any, str | None, str]], *,
                 scope: str | None = None, batch_tried: bool = False, count: bool = True
                 ) -> Sequence[WriteResult | XerjError]:
        """``put`` of each ``(doc, doc_id, op_type)`` in order, each refusal returned in its place (the results of
        a batch of new documents are :class:`Columns`, made when read).

        The outcome is that of calling :meth:`put` item by item (rows, versions,
        dictionary ordinals in the same order); the records of like documents are
        prepared together by the write plan (:meth:`WritePlan.records`). ``batch_tried``: :meth:`put_new` found
        the items are not the bulk-ingest case (not asked again). With ``count``, a batch of long texts is
        counted first (see :meth:`_long_text_field`).
        """
        if count and self.uncounted is None and scope is None and self.scope is None:
            path = self._long_text_field(items)
            if path is not None:
                return self.put_many_counted(items, path, [counted_terms(value, limits.MAX_TERM_BYTES)
                                                           if type(value := doc.get(path)) is str else None
                                                           for doc in map(itemgetter(0), items)],
                                             batch_tried=batch_tried)
        docs = sources = list(map(itemgetter(0), items))
        refused: dict[int, XerjError] = {}
        if self.scope is not None:
            docs = list(docs)
            for i, doc in enumerate(docs):
                try:
                    refuse_in_document(doc, self.name)
                except XerjError as exc:
                    refused[i] = exc
                docs[i] = {**doc, SCOPE_FIELD: scope or self.scope} if isinstance(doc, dict) else doc
        ids = list(map(itemgetter(1), items))
        if not refused and not (batch_tried and self.scope is None):
            done = self._put_batch(sources, docs, ids)
            if done is not None:
                return done
        committed = self.txn.committed_terms
        batched = self.plan.records(docs, self.dict_cache, self.skipped, lambda name: committed.get((self.ix, name)),
                                    self.uncounted)
        if None not in ids and len(set(ids)) == len(ids) and _batch_calls(self.txn.raw):
            # With every id given and distinct no item reads another's source or id, so every record is
            # prepared first (ordinals in item order, as one by one) and the rows are written together.
            if not refused and None not in batched and not any(map(itemgetter(1), batched)):
                # Every record prepared in the batch, no keyword value new to its dictionary.
                return self._put_rows(items, ids, list(map(itemgetter(0), batched)), refused)
            records: list[dict[str, Any] | None] = [None] * len(items)
            record_for = self.record_for
            # records with misses are resolved together up to the next record made one at a time, so every
            # dictionary still numbers its new terms in item order
            waiting: list[int] = []
            for i, (full, prepared) in enumerate(zip(docs, batched)):
                if i in refused:
                    continue
                if prepared is None:
                    # a record the plan does not batch (a list value: an autoindex card's imports) is still made
                    # here with its misses left for the next pass, so it does not cut the pass short
                    try:
                        prepared = batched[i] = self._record_deferred(full)
                    except XerjError as exc:
                        refused[i] = exc
                        continue
                if prepared is not None:
                    records[i] = prepared[0]
                    if prepared[1]:
                        waiting.append(i)
                    continue
                self._resolve_many([batched[k] for k in waiting])  # type: ignore[misc]
                waiting = []
                try:
                    records[i] = record_for(full)
                except XerjError as exc:
                    refused[i] = exc
            self._resolve_many([batched[k] for k in waiting])  # type: ignore[misc]
            return self._put_rows(items, ids, records, refused)
        results: list[WriteResult | XerjError] = []
        # With every id given and distinct, no item reads another's source or id: their puts are gathered and
        # written through one cursor each at the end.
        deferred: tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]] | None = (
            ([], []) if None not in ids and len(set(ids)) == len(ids) else None)
        for i, ((doc, doc_id, op_type), full, prepared) in enumerate(zip(items, docs, batched)):
            try:
                if i in refused:
                    raise refused[i]
                record = self.record_for(full) if prepared is None else self._resolve(prepared)
                results.append(self._put_row(doc, doc_id, op_type, record, deferred))
            except XerjError as exc:
                results.append(exc)
            if deferred is not None and len(deferred[0]) >= DEFERRED_CHUNK:
                # written a chunk at a time: a database store sends them to the server while the rest is prepared
                _put_all(self.txn.raw, self.txn.dbs["src"], deferred[0])
                self._put_ids(deferred[1])
                deferred = ([], [])
        if deferred is not None:
            _put_all(self.txn.raw, self.txn.dbs["src"], deferred[0])
            self._put_ids(deferred[1])
        return results

    def _long_text_field(self, items: Sequence[tuple[Any, str | None, str]]) -> str | None:
        """The top-level text field whose string values in the items' documents, all objects,
        hold the most characters, when they average at least :data:`COUNT_FROM_CHARS` a document: its texts are
        then worth counting by the compiled word count (``text.counted_terms``) and indexing from the counts
        (:meth:`put_many_counted`), which stores the same bytes. The store's own tokenizer is a Python pass per
        value wherever a batch is not the bulk-ingest case (a list value, an overwrite): on 1 KB values of code
        beside a list field, counting wrote a batch in 0.39 of the time (0.27 at 4 KB), and it costs more than it
        saves on short texts (1.03-1.37 at 16 chars)."""
        if len(items) < 2:
            return None
        fields = self.mapping.fields
        paths = [path for path, spec in fields.items() if "." not in path and column_kind(spec) == KIND_LEN]
        if not paths:
            return None
        docs = list(map(itemgetter(0), items))
        if set(map(type, docs)) != {dict}:
            return None
        best, most = None, 0
        for path in paths:
            values = [doc.get(path) for doc in docs]
            if set(map(type, values)) - _COUNTABLE:  # a list or a number there: put_many_counted would not count
                continue
            chars = sum(map(len, filter(None, values)))
            if chars > most:
                best, most = path, chars
        return best if most >= COUNT_FROM_CHARS * len(docs) else None

    def put_many_counted(self, items: Sequence[tuple[Any, str | None, str]], path: str,
                         counted: Sequence[CountedTerms | None], *,
                         batch_tried: bool = False) -> Sequence[WriteResult | XerjError]:
        """:meth:`put_many` of documents whose text field ``path`` (a top-level one) was tokenized and counted by
        the caller, often in another process: ``counted[i]`` is ``text.counted_terms`` of item ``i``'s string
        value there (None where it holds none). Those values are not tokenized here: each document is indexed
        as if an empty string were there (its multi-fields, ``text.keyword``, still take the value itself), and
        the new rows' length column and postings of ``path`` are then made from the counts. The outcome is
        :meth:`put_many`'s (rows, ordinals, stored bytes); it is simply called when ``path`` is not a top-level
        text field of the mapping or an item does not fit its count (a string not counted, or a value there that
        is no string: a list, a number, which the store indexes itself)."""
        spec = self.mapping.fields.get(path)
        docs = list(map(itemgetter(0), items))
        if (spec is None or column_kind(spec) != KIND_LEN or "." in path
                or self.scope is not None or len(counted) != len(items)
                or not all(type(doc) is dict and ((found is not None) if type(value := doc.get(path)) is str
                                                  else value is None and found is None)
                           for doc, found in zip(docs, counted))):
            return self.put_many(items, batch_tried=batch_tried, count=False)
        before = len(self.pending)
        self.uncounted = path
        try:
            results = self.put_many(items, batch_tried=batch_tried)
        finally:
            self.uncounted = None
        rows = {result.seq_no: found for result, found in zip(results, counted)
                if found is not None and type(result) is WriteResult}
        if not rows:
            return results
        pending, self.pending = self.pending, self.pending[before:]
        block = self.pending_block()
        self.pending = pending[:before]
        assert block is not None and not len(block.run(path)[2]), "every counted value was indexed empty"
        at = np.fromiter(rows, np.int64, len(rows))
        at.sort()
        found = list(map(rows.__getitem__, at.tolist()))
        column = block.columns[path]
        lengths = column.values.copy()
        lengths[at - block.start] = np.fromiter(map(itemgetter(0), found), lengths.dtype, len(found))
        self.skipped["terms"] += sum(map(itemgetter(1), found))
        self.pending.append(Block(block.start, block.n, {
            **block.columns, path: Column(column.kind, lengths, column.present, column.extra_rows, column.extra_ords)},
            {**block.postings, path: tailblock.counted_run(found, at)}))
        return results

    def _put_ids(self, entries: list[tuple[bytes, bytes]]) -> None:
        """The id map's entries of documents just written (rows ascending, ids distinct): runs, or B-tree entries."""
        if not idmap.put(self.id_runs(), self.txn.raw, self.txn.dbs, entries):
            _put_all(self.txn.raw, self.txn.dbs["ids"], sorted(entries))

    def _put_batch(self, sources: list[Any], docs: list[Any], ids: list[Any]) -> Sequence[WriteResult] | None:
        """The bulk-ingest case of :meth:`put_many` as whole columns: new documents with distinct ids and the same
        fields, every value of its field's plain type. Their rows become one tail block built field by field
        (one tokenizer pass, one dictionary pass, numpy for the rest) with no record per document. None (and
        nothing done) when the batch is not that case. ``sources``: the documents as sent (their JSON is stored);
        ``docs``: as indexed (with their row scope in a reserved index)."""
        if not isinstance(self.txn.raw, lmdb.Transaction) or None in ids or len(set(ids)) != len(ids):
            return None
        fields = self.plan.batch_fields(docs)
        if fields is None:
            return None
        try:
            encoded = list(map(str.encode, ids))
        except (TypeError, UnicodeEncodeError):
            return None
        if min(map(len, encoded)) == 0 or max(map(len, encoded)) > MAX_ID_BYTES:
            return None
        raw, dbs = self.txn.raw, self.txn.dbs
        hashed = idmap.none_stored(raw, dbs, self.ix, self.id_runs, encoded)
        if hashed is None and idmap.rows(raw, dbs, self.ix, self.id_runs, encoded).count(None) != len(encoded):
            return None  # an overwrite: the general path reads and kills the old rows
        block = self._batch_block(fields, len(docs), self.state.next_row)
        rows = self._append(ids, encoded, map(orjson.dumps, sources), block=block, hashed=hashed)
        return self._created(ids, rows)

    def _created(self, ids: list[str], rows: range) -> Columns[WriteResult]:
        """The results of new documents ``ids`` written on ``rows``, made only when read."""
        return Columns(WriteResult, len(ids), Same(self.name), ids, Same("created"), Same(1), rows)

    def _batch_block(self, fields: list[tuple[Leaf, list[Any]]], n: int, start: int) -> Block:
        """The tail block of ``n`` documents' ``fields`` (:meth:`WritePlan.batch_fields`) on rows ``start`` on:
        the block :meth:`pending_block` makes of their records, with the same ordinals given in the same order."""
        columns: dict[str, Column] = {}
        postings: dict[str, PostingRun] = {}
        ords: dict[str, list[int | None]] = {}
        misses: list[tuple[int, int, Leaf, Any]] = []
        committed = self.txn.committed_terms
        for order, (leaf, column) in enumerate(fields):
            path, kind = leaf.path, leaf.kind
            if kind == KIND_ORD:
                cache = self.dict_cache.setdefault(leaf.dictionary, {})
                known = committed.get((self.ix, leaf.dictionary))
                if known:
                    # A committed term's ordinal is fixed whatever the order: only new terms are misses.
                    for value in set(column).difference(cache):
                        found = known.get(value)
                        if found is not None:
                            cache[value] = found
                found_ords = ords[path] = list(map(cache.get, column))
                if None in found_ords:
                    misses.extend((i, order, leaf, value) for i, value, found in zip(range(n), column, found_ords)
                                  if found is None and value is not None)
            elif kind == KIND_LEN:
                lengths, postings[path] = column_postings(column if path != self.uncounted else emptied(column),
                                                          start, self.skipped)
                if None in column:
                    columns[path] = Column(kind, np.asarray(lengths, np.int32),
                                           np.fromiter(map(is_not, column, repeat(None)), bool, n))
                else:
                    columns[path] = Column(kind, np.asarray(lengths, np.int32), np.ones(n, bool))
            else:
                columns[path] = Column.build(leaf.spec, kind, column)
        # Ordinals for values new to their dictionary, document by document as one put at a time gives them: a
        # dictionary numbers its new terms in order of first appearance, whatever the other dictionaries do, so
        # each dictionary's misses (in document order) take one ``ordinals`` pass (one ordered lookup of the lot,
        # not one per term); a value too long to index is left out, and counted, at each of its places.
        misses.sort(key=itemgetter(0, 1))
        by_dictionary: dict[str, list[tuple[int, Leaf, Any]]] = {}
        for i, _order, leaf, value in misses:
            by_dictionary.setdefault(leaf.dictionary, []).append((i, leaf, value))
        for name, found_misses in by_dictionary.items():
            cache = self.dict_cache[name]
            indexed = [(i, leaf, value) for i, leaf, value in found_misses
                       if value in cache or limits.keyword_indexed(value, leaf.spec.params, name)]
            self.skipped["keywords"] += len(found_misses) - len(indexed)
            for (i, leaf, _value), found in zip(indexed, self.ordinals(name, [value for _i, _leaf, value in indexed])):
                ords[leaf.path][i] = found
        for leaf, _column in fields:
            found_ords = ords.get(leaf.path)
            if found_ords is not None:
                if None in found_ords:
                    values = np.fromiter((NO_ORD if o is None else o for o in found_ords), np.int32, n)
                    columns[leaf.path] = Column(KIND_ORD, values, values != NO_ORD)
                else:
                    columns[leaf.path] = Column(KIND_ORD, np.fromiter(found_ords, np.int32, n), np.ones(n, bool))
        return Block(start, n, {leaf.path: columns[leaf.path] for leaf, _column in fields}, postings)

    def _put_rows(self, items: Sequence[tuple[Any, str | None, str]], ids: list[str],
                  records: list[dict[str, Any] | None], refused: dict[int, XerjError]
                  ) -> Sequence[WriteResult | XerjError]:
        """The rows of ``items`` (distinct ids) whose ``records`` are prepared, in item order; ``refused`` in
        their places. New documents (the bulk-ingest case) are written by C-level passes over the batch:
        one ``getmulti`` finds which ids exist, and sources and ids go through one cursor each."""
        raw, db, prefix = self.txn.raw, self.txn.dbs, keys.ix_key(self.ix)
        try:
            encoded = list(map(str.encode, ids))
            valid = min(map(len, encoded)) > 0 and max(map(len, encoded)) <= MAX_ID_BYTES
        except (TypeError, UnicodeEncodeError, ValueError):
            valid = False
        if not valid:
            for i, doc_id in enumerate(ids):
                if i not in refused:
                    try:
                        check_doc_id(doc_id)
                    except XerjError as exc:
                        refused[i] = exc
            encoded = [doc_id.encode() if i not in refused else b"" for i, doc_id in enumerate(ids)]
        id_keys = list(map(prefix.__add__, encoded))
        asked = [i for i in range(len(ids)) if i not in refused]
        existing = {id_keys[i]: keys.u64(row) for i, row in
                    zip(asked, idmap.rows(raw, db, self.ix, self.id_runs, [encoded[i] for i in asked]))
                    if row is not None}
        if not existing and not refused:
            rows = self._append(ids, encoded, map(orjson.dumps, [doc for doc, _id, _op in items]), records)
            return self._created(ids, rows)
        deferred: tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]] = ([], [])
        results: list[WriteResult | XerjError] = []
        for i, ((doc, doc_id, op_type), record) in enumerate(zip(items, records)):
            found = refused.get(i)
            if found is not None:
                results.append(found)
                continue
            try:
                results.append(self._put_row(doc, doc_id, op_type, record, deferred, existing.get(id_keys[i])))
            except XerjError as exc:
                results.append(exc)
        _put_all(raw, db["src"], deferred[0], ordered=True)  # rows are taken in ascending order
        self._put_ids(deferred[1])
        return results

    def _append(self, ids: list[str], encoded: list[bytes], sources: Iterable[bytes],
                records: Iterable[dict[str, Any] | None] = (), block: Block | None = None,
                ids_stored: bool = False, hashed: np.ndarray | None = None) -> range:
        """Write new documents (version 1) on the next rows, in order, by C-level passes: ``ids`` (checked
        distinct and absent), their UTF-8 ``encoded`` forms, source JSONs and records (or their ``block``).
        Sources are appended (full pages rather than half-split ones); the ids become a run of the id map, or
        (a database store) are put sorted through one cursor (``ids_stored``: :meth:`claim_ids` stored them;
        ``hashed``: the ids' hashes, when the caller has them). Returns the rows."""
        raw, db, prefix, state = self.txn.raw, self.txn.dbs, keys.ix_key(self.ix), self.state
        rows = range(state.next_row, state.next_row + len(ids))
        headers = map(_NEW_HEADERS.__getitem__, map(len, encoded))  # ids are checked to fit MAX_ID_BYTES
        row_sources = zip(keys.row_key_range(self.ix, rows.start, rows.stop),
                          map(b"".join, zip(headers, encoded, sources)))
        state.next_row += len(ids)
        state.live += len(ids)
        if block is not None:
            self.pending.append(block)
        else:
            self.pending.extend(zip(rows, records))
        self.put_ids.extend(ids)
        _put_all(raw, db["src"], list(row_sources), ordered=True)
        if not ids_stored and not idmap.add(self.id_runs(), encoded, rows.start, hashed):
            _put_all(raw, db["ids"], sorted(zip(map(prefix.__add__, encoded), map(keys.u64, rows))))
        return rows

    def claim_ids(self, ids: list[str]) -> bool:
        """Give the new documents ``ids`` (distinct) the next rows in the id map, as :meth:`append_block` would,
        when none of them is stored: True (the entries are one run of id hashes, see xerj_core.store.idmap).
        When one is, or the store keeps B-tree entries only, nothing changes and the answer is False."""
        _check_ids(ids)
        return idmap.claim(self.id_runs(), self.txn.raw, self.txn.dbs, self.ix, list(map(str.encode, ids)),
                           self.state.next_row)

    def append_new(self, rows: Sequence[tuple[str, bytes, dict[str, Any]]]) -> None:
        """Write documents as :meth:`put` writes new ones (version 1, the next rows in order), for a caller that
        checked their ids are distinct and absent from this index and built each record itself:
        ``(doc_id, source JSON, record)`` per document."""
        ids = [doc_id for doc_id, _source, _record in rows]
        _check_ids(ids)
        self._append(ids, list(map(str.encode, ids)), map(itemgetter(1), rows), map(itemgetter(2), rows))

    def append_block(self, ids: list[str], sources: Iterable[bytes], block: Block, *, ids_stored: bool = False
                     ) -> None:
        """:meth:`append_new` for a caller that built the new rows' tail block itself (rows from the next row on,
        one per id, as :meth:`pending_block` would make of their records); ``ids_stored``: :meth:`claim_ids`
        stored their id entries."""
        if block.start != self.state.next_row or block.n != len(ids):
            raise XerjError(f"a block of rows {block.start} to {block.end} cannot be appended to index [{self.name}] "
                            f"at row {self.state.next_row} with {len(ids)} documents")
        _check_ids(ids)
        self._append(ids, list(map(str.encode, ids)), sources, block=block, ids_stored=ids_stored)

    def put_records(self, items: Sequence[tuple[Any, str, dict[str, Any]]],
                    stored: Sequence[tuple[int, int]] | None = None) -> None:
        """:meth:`put` (``index``) of each ``(doc, doc_id, record)`` with distinct ids, for a caller that built each
        document's record itself; sources and ids go through one cursor each. ``stored``: each id's current
        ``(row, version)`` when the caller read them in this transaction (the ids are then not read again).
        The replaced rows' sources are deleted last, in row order, and the ids put in key order: one cursor
        walks each B-tree once instead of a search from its root per row, in whatever order the ids came."""
        if stored is not None:
            self._overwrite_rows(items, stored)
            return
        deferred: tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]] = ([], [])
        replaced: list[bytes] = []
        for doc, doc_id, record in items:
            self._put_row(doc, doc_id, "index", record, deferred, replaced=replaced)
        _delete_all(self.txn.raw, self.txn.dbs["src"], sorted(replaced))
        _put_all(self.txn.raw, self.txn.dbs["src"], deferred[0])
        self._put_ids(deferred[1])

    def _overwrite_rows(self, items: Sequence[tuple[Any, str, dict[str, Any]]], stored: Sequence[tuple[int, int]]
                        ) -> None:
        """:meth:`put_records` of stored documents, each ``(row, version)`` read by the caller: what
        :meth:`_put_row` does for each, done a column at a time (the pins read once, the dead log, sources and
        ids written through one cursor each, no result per document)."""
        if len(items) != len(stored):
            raise ValueError("put_records: one (row, version) per item")
        ids = list(map(itemgetter(1), items))
        _check_ids(ids)
        raw, db, ix = self.txn.raw, self.txn.dbs, self.ix
        old_rows = list(map(itemgetter(0), stored))
        dead_from, self.state.dead_seq = self.state.dead_seq, self.state.dead_seq + len(old_rows)
        _put_all(raw, db["dead"], list(zip(keys.row_keys(ix, range(dead_from, self.state.dead_seq)),
                                           map(keys.u64, old_rows))))
        if pins.is_pinned(raw, db, ix):  # an open scroll or point in time may still show them
            for row in old_rows:
                pins.retire_source(raw, db, ix, row)
        _delete_all(raw, db["src"], sorted(keys.row_keys(ix, old_rows)))
        first, self.state.next_row = self.state.next_row, self.state.next_row + len(items)
        rows = range(first, self.state.next_row)
        versions = [version + 1 for _row, version in stored]
        dumps = orjson.dumps
        _put_all(raw, db["src"], list(zip(keys.row_keys(ix, rows), map(
            keys.pack_source, versions, ids, [dumps(doc) for doc, _id, _record in items]))))
        self._put_ids(list(zip(map(keys.id_key, repeat(ix), ids), map(keys.u64, rows))))
        self.pending.extend(zip(rows, map(itemgetter(2), items)))
        self.put_ids.extend(ids)

    def rows_of(self, doc_ids: Sequence[str], sources: dict[int, bytes] | None = None) -> dict[str, int]:
        """The rows of those of ``doc_ids`` stored in this index, found in one pass in key order. ``sources``:
        receives the source records read on the way (see ``idmap.rows``)."""
        # an id too long to be a key is stored nowhere (check_doc_id refuses it)
        wanted = list(map(str.encode, doc_ids))
        if wanted and max(map(len, wanted)) > _MAX_KEY - 4:
            wanted = [k for k in wanted if len(k) <= _MAX_KEY - 4]
        found = idmap.rows(self.txn.raw, self.txn.dbs, self.ix, self.id_runs, wanted, sources)
        return {k.decode(): row for k, row in zip(wanted, found) if row is not None}

    def _resolve_many(self, prepared: list[Batched]) -> None:
        """:meth:`_resolve` of each of ``prepared`` in order, each dictionary's misses given their ordinals by one
        :meth:`ordinals` pass (new terms numbered in order of first appearance, as one call per record numbers
        them), not one dictionary lookup per term. A miss is ``(leaf, value)`` (the field's one value: its column
        becomes ``[ordinal]``, or ``[]`` for a value too long to index) or, from :meth:`_record_deferred`,
        ``(leaf, value, ords, at)`` (a place in the field's list of ordinals, dropped when too long)."""
        by_dictionary: dict[str, list[tuple[dict[str, Any], tuple[Any, ...]]]] = {}
        for record, misses in prepared:
            columns = record["c"]
            for miss in misses:
                found_misses = by_dictionary.get(miss[0].dictionary)
                if found_misses is None:
                    by_dictionary[miss[0].dictionary] = [(columns, miss)]
                else:
                    found_misses.append((columns, miss))
        holed: list[list[Any]] = []
        for name, found_misses in by_dictionary.items():
            cache = self.dict_cache.setdefault(name, {})
            indexed = []
            # the characters a string value of each leaf surely fits in, so most misses need no call
            surely = {}
            for columns, miss in found_misses:
                leaf, value = miss[0], miss[1]
                fits = surely.get(leaf)
                if fits is None:
                    fits = surely[leaf] = limits.keyword_sure_chars(leaf.spec.params, name)
                if (type(value) is str and len(value) <= fits) or value in cache \
                        or limits.keyword_indexed(value, leaf.spec.params, name):
                    indexed.append((columns, miss))
                else:
                    self.skipped["keywords"] += 1
                    if len(miss) == 2:
                        columns[leaf.path] = []
                    else:
                        holed.append(miss[2])
            for (columns, miss), found in zip(indexed, self.ordinals(name, [miss[1] for _c, miss in indexed])):
                if len(miss) == 2:
                    columns[miss[0].path] = [found]
                else:
                    miss[2][miss[3]] = found
        for ords in holed:  # a value too long to index takes no place in its field's list
            ords[:] = [found for found in ords if found is not None]

    def _record_deferred(self, doc: Any) -> Batched | None:
        """:meth:`record_for` of ``doc`` with every keyword value new to its dictionary left as a miss for
        :meth:`_resolve_many` (the record as ``record_for`` makes it once those are resolved, the dictionaries
        numbering the same terms in the same order); None (nothing done) when ``doc`` needs the generic path.

        A document the plan prepares in one pass has its one value per field; one with a list value (an
        autoindex card's ``imports``) takes :meth:`WritePlan.values`, whose misses keep their places in the
        field's list of ordinals. Made one at a time, each such document's misses cost an ``ordinals`` pass
        for itself and cut the batched records' pass short before it."""
        if type(doc) is not dict:
            return None
        plan = self.plan
        asked: list[tuple[str, Any]] = []

        def later(name: str, value: Any) -> Any:
            asked.append((name, value))
            return _LATER

        record = plan.record(doc, later, self.dict_cache, self.skipped, self.uncounted)
        if record is not None:
            if not asked:
                return record, []
            leaves = plan.leaves
            # the plan gives each field its one ordinal in the order it asks for them, a field at a time
            holding = [path for path, found in record["c"].items() if type(found) is list and found
                       and found[0] is _LATER]
            return record, [(leaves[path], value) for path, (_name, value) in zip(holding, asked, strict=True)]
        values = plan.values(doc)
        if values is None:
            return None
        columns: dict[str, Any] = {}
        terms: dict[str, dict[str, int]] = {}
        misses: list[tuple[Any, ...]] = []
        dict_cache, leaves = self.dict_cache, plan.leaves
        for path, vals in values.items():
            leaf = leaves[path]
            kind = leaf.kind
            if kind == KIND_ORD:
                cache = dict_cache.get(leaf.dictionary) or {}
                ords: list[int | None] = list(map(cache.get, vals))
                if None in ords:
                    misses.extend((leaf, value, ords, at) for at, (value, found) in enumerate(zip(vals, ords))
                                  if found is None)
                columns[path] = ords
            elif kind == KIND_LEN:
                columns[path], terms[path] = self._text_values(path, vals)
            else:
                columns[path] = vals[0]
        return {"c": columns, "t": terms}, misses

    def _resolve(self, prepared: Batched) -> dict[str, Any]:
        """A batched record with its dictionary misses given ordinals, as :meth:`WritePlan.record` would."""
        record, misses = prepared
        columns = record["c"]
        for leaf, value in misses:
            name = leaf.dictionary
            found = self.dict_cache.get(name, {}).get(value)
            if found is None:
                if not limits.keyword_indexed(value, leaf.spec.params, name):
                    self.skipped["keywords"] += 1
                    columns[leaf.path] = []
                    continue
                found = self.ordinal(name, value)
            columns[leaf.path] = [found]
        return record

    def _put_row(self, doc: Any, doc_id: str | None, op_type: str, record: dict[str, Any],
                 deferred: tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]] | None = None,
                 stored: Any = _UNREAD, current: tuple[int, int] | None = None,
                 replaced: list[bytes] | None = None) -> WriteResult:
        """Write ``doc``'s source and id (into ``deferred``'s source and id lists instead, when given); ``stored``
        is the id's entry (None: absent) when the caller already read it; ``current`` the stored document's
        ``(row, version)`` when the caller read both; ``replaced`` collects the source key of the row it
        replaces, for the caller to delete, instead of deleting it."""
        if doc_id is None:
            doc_id = new_doc_id()
        check_doc_id(doc_id)
        if current is not None:
            old_row = current[0]
        elif stored is _UNREAD:
            old_row = self.row_of(doc_id)
        else:
            old_row = None if stored is None else keys.read_u64(stored)
        version = 1
        if old_row is not None:
            if op_type == "create":
                raise VersionConflict(
                    f"[{doc_id}]: version conflict, document already exists (current version "
                    f"[{self.version_of(old_row)}])", index=self.name)
            version = (current[1] if current is not None else self.version_of(old_row)) + 1
            self._kill(old_row, replaced)
        else:
            self.state.live += 1
        row = self.state.next_row
        self.state.next_row += 1
        source = (keys.row_key(self.ix, row), keys.pack_source(version, doc_id, orjson.dumps(doc)))
        id_entry = (keys.id_key(self.ix, doc_id), keys.u64(row))
        if deferred is not None:
            deferred[0].append(source)
            deferred[1].append(id_entry)
        else:
            raw, db = self.txn.raw, self.txn.dbs
            raw.put(*source, db=db["src"])
            raw.put(*id_entry, db=db["ids"])
        self.pending.append((row, record))
        self.put_ids.append(doc_id)
        return WriteResult(self.name, doc_id, "updated" if old_row is not None else "created", version, row)

    def delete(self, doc_id: str) -> WriteResult:
        row = self.row_of(doc_id)
        if row is None:
            return WriteResult(self.name, doc_id, "not_found", 1, -1)
        version = self.version_of(row) + 1
        self._kill(row)
        self.txn.raw.delete(keys.id_key(self.ix, doc_id), db=self.txn.dbs["ids"])
        self.state.live -= 1
        self.deleted_ids.append(doc_id)
        return WriteResult(self.name, doc_id, "deleted", version, row)

    def _kill(self, row: int, replaced: list[bytes] | None = None) -> None:
        """Mark ``row`` dead and delete its source (``replaced``: add its key there, for the caller to delete)."""
        raw, db = self.txn.raw, self.txn.dbs
        raw.put(keys.row_key(self.ix, self.state.dead_seq), keys.u64(row), db=db["dead"])
        self.state.dead_seq += 1
        pins.retire_source(raw, db, self.ix, row)  # an open scroll or point in time may still show it
        if replaced is None:
            raw.delete(keys.row_key(self.ix, row), db=db["src"])
        else:
            replaced.append(keys.row_key(self.ix, row))

    def get(self, doc_id: str) -> tuple[dict[str, Any], int] | None:
        row = self.row_of(doc_id)
        if row is None:
            return None
        blob = self.txn.raw.get(keys.row_key(self.ix, row), db=self.txn.dbs["src"])
        version, _, offset = keys.unpack_source_header(blob)
        return orjson.loads(blob[offset:]), version

    # -- commit --------------------------------------------------------------------------------

    def pending_block(self) -> Block | None:
        """This transaction's new rows (every one pending so far) as one tail block, or None when there are none."""
        parts: list[Block] = []
        records: list[tuple[int, dict[str, Any]]] = []
        specs = self.mapping.fields.values()
        for part in self.pending:
            if type(part) is tuple:
                records.append(part)
                continue
            if records:
                parts.append(tailblock.from_records(records[0][0], list(map(itemgetter(1), records)), specs))
                records = []
            parts.append(part)
        if records:
            parts.append(tailblock.from_records(records[0][0], list(map(itemgetter(1), records)), specs))
        return tailblock.concat(parts, specs) if parts else None

    def finish(self) -> None:
        raw, db = self.txn.raw, self.txn.dbs
        tail_rows = self.txn.tail_rows
        block = self.pending_block()
        self.pending.clear()
        known = self.known_tail
        if known is not None and block is not None:
            known = known + [block]  # every tail row's block, in row order
        target = self.state.next_row // tail_rows * tail_rows
        if target > self.state.sealed_rows:
            committed = self._take_tail(self.state.sealed_rows, self.state.next_row if block is None else block.start,
                                        self.known_tail)
            leaving = committed
            if block is not None:
                leaving = [*committed, block.sliced(block.start, min(target, block.end))]
                block = block.sliced(target, block.end) if block.end > target else None
            self._seal(target, leaving)
            known = [block] if block is not None else []
        if block is not None:
            _put_all(raw, db["tail"], tailblock.stored(self.ix, block), ordered=True)
        for name, size in self.dict_size.items():
            raw.put(keys.dictn_key(self.ix, name), size.to_bytes(4, "big"), db=db["dictn"])
        for runs in self._dict_runs.values():
            if runs is not None:
                runs.finish()
        if self._id_runs is not _UNREAD and self._id_runs is not None:
            self._id_runs.finish()
        if any(self.skipped.values()):
            self._count_skipped()
        if self.mapping_changed:
            raw.put(keys.ix_key(self.ix), orjson.dumps(self.mapping.to_es()), db=db["mappings"])
            self.state.mapping_version += 1
        dead = self.state.next_row - self.state.live
        if self.force_compact or (dead >= COMPACT_MIN_DEAD and dead >= self.state.live * COMPACT_DEAD_SHARE):
            self.compacted = self.compact()
        if known is not None and not self.compacted:
            self.tail_after = known
        self.finished = True
        self.state.generation += 1
        raw.put(keys.ix_key(self.ix), self.state.pack(), db=db["state"])

    def _count_skipped(self) -> None:
        raw, db = self.txn.raw, self.txn.dbs
        key = keys.skipped_key(self.ix)
        stored = raw.get(key, db=db["aux"])
        counts = orjson.loads(stored) if stored else {}
        for what, n in self.skipped.items():
            counts[what] = counts.get(what, 0) + n
        raw.put(key, orjson.dumps(counts), db=db["aux"])
        self.skipped = {"terms": 0, "keywords": 0}

    def _seal(self, target: int, leaving: list[Block]) -> None:
        """Turn rows up to ``target`` into sealed segments, rebuilding the segments the layout changed;
        ``leaving`` holds the rows leaving the tail (from the sealed rows to ``target``), in order."""
        tail_rows = self.txn.tail_rows
        old_sealed = self.state.sealed_rows
        # The segments as stored: the canonical layout of the sealed rows, unless merges were left to the
        # store's merge thread (see xerj_core.store.merge), which brings them back to it.
        old_layout = self.stored_layout()
        new_layout = segment_layout(target, tail_rows)
        keep = 0
        while keep < min(len(old_layout), len(new_layout)) and old_layout[keep] == new_layout[keep]:
            keep += 1
        region_start = new_layout[keep][0]
        old_segments = old_layout[keep:]
        above = self.txn.merge_above
        if above is not None and (sum(end - start for start, end in old_segments) > above
                                  or old_layout != segment_layout(old_sealed, tail_rows)):
            # A merge this big would pause the writer: the leaving rows become a segment of their own, and the
            # merge thread rewrites the segments from a snapshot, outside the write lock.
            new_layout, region_start, old_segments = [*old_layout, (old_sealed, target)], old_sealed, []
            keep = len(old_layout)
            self.merge_wanted = True
        fields = list(self.mapping.fields.values())
        built: dict[str, Column] = {}
        for spec in fields:
            kind = column_kind(spec)
            parts = [self._load_column(start, end, spec, kind) for start, end in old_segments]
            parts += [b.column(spec) for b in leaving]
            built[spec.path] = Column.concat(parts)
        text_fields = [s.path for s in fields if column_kind(s) == KIND_LEN]
        new_segments = new_layout[keep:]
        postings = {path: self._merge_postings(path, old_segments, new_segments, [b.run(path) for b in leaving])
                    for path in text_fields}
        for start, _end in old_segments:
            self._drop_segment(start)
        self._write_segments(new_segments, region_start, built, postings)
        self.state.sealed_rows = target

    def _take_tail(self, first: int, end: int, known: list[Block] | None = None) -> list[Block]:
        """The blocks of tail rows ``first`` to ``end``, deleted from the tail; ``known``: those blocks as this
        process committed them, when it knows them."""
        if end <= first:
            return []
        if known is not None and known and known[0].start == first and known[-1].end == end:
            # The blocks this process committed (same generation): not read and decoded again.
            found = known
        else:
            found = self._read_tail(first, end)
        with self.txn.raw.cursor(db=self.txn.dbs["tail"]) as cur:
            deleted = tailblock.delete(cur, self.ix, first, end)
        if deleted != len(found):
            raise XerjError(f"the tail of index [{self.name}] holds {deleted} blocks for rows {first} to {end}, "
                            f"not the {len(found)} expected")
        return found

    def _read_tail(self, first: int, end: int) -> list[Block]:
        """The stored tail blocks of rows ``first`` to ``end`` (a legacy JSON record is a one-row block)."""
        with self.txn.raw.cursor(db=self.txn.dbs["tail"]) as cur:
            blocks = tailblock.read(cur, self.ix, first, end, self.mapping.fields)
        at = first
        for block in blocks:
            if block.start != at:
                break
            at = block.end
        if at != end:
            raise XerjError(f"the tail of index [{self.name}] is missing rows between {first} and {end}")
        return blocks

    def _write_segments(self, segments: list[tuple[int, int]], region_start: int, built: dict[str, Column],
                        postings: dict[str, CutPostings], after: int = 0) -> None:
        """Store ``segments``: slices of the region's columns ``built`` (starting at ``region_start``) and the
        postings already cut per segment."""
        raw, db, ix = self.txn.raw, self.txn.dbs, self.ix
        for path, cut in postings.items():
            items: list[tuple[bytes, bytes]] = []
            for (start, _end), (_buckets, suffixes, values) in zip(segments, cut):
                items += zip(map(keys.post_prefix(ix, start, path).__add__, suffixes), values)
            # Appended (each segment's keys come in key order, segments in row order, and the segments written
            # are the index's last): pages filled instead of split in half, about 17% fewer posting pages.
            _put_all(raw, db["post"], items, ordered=True)
        for i, (start, end) in enumerate(segments):
            lo, hi = start - region_start, end - region_start
            for path, column in built.items():
                raw.put(keys.col_key(ix, start, path), _slice(column, lo, hi).encode(), db=db["cols"])
            # (start, end, sealed_at) names a segment's bytes for readers' caches: never reuse a stamp.
            sealed_at = max(int(time.time() * 1000), after + 1)
            record = {"end": end, "fields": list(built), "sealed_at": sealed_at}
            buckets = {path: cut[i][0] for path, cut in postings.items() if cut[i][0]}
            if buckets:
                record["buckets"] = buckets  # text fields whose postings are packed (xerj_core.store.postpack)
            raw.put(keys.seg_key(ix, start), orjson.dumps(record), db=db["segs"])

    # -- compaction ----------------------------------------------------------------------------

    def dead_rows(self) -> np.ndarray:
        """Every dead row (deleted or overwritten documents, compaction fillers), from the dead log."""
        raw, db = self.txn.raw, self.txn.dbs
        found = []
        with raw.cursor(db=db["dead"]) as cur:
            if cur.set_key(keys.row_key(self.ix, 0)):
                for _i, (_k, value) in zip(range(self.state.dead_seq), cur):
                    found.append(keys.read_u64(value))
        return np.array(found, np.int64)

    def compact(self) -> bool:
        """Drop dead rows: live rows are renumbered densely (in their order) and every structure kept by row
        (sources, ids, tail records, columns, postings, the dead log) is rewritten; False when nothing is dead.

        The sealed live rows are padded with dead filler rows up to a whole tail, so
        the tail's live records move as they are, or, when they fill at least half
        a tail, are sealed with them (the fillers after them); either way every
        stored value is copied, never recomputed. The epoch moves, so every process
        drops its row caches.
        """
        if pins.is_pinned(self.txn.raw, self.txn.dbs, self.ix):
            # A scroll or point in time rebuilds its snapshot from row numbers, which a compaction
            # renumbers: wait until the last context on this index closes or expires.
            return False
        state, tail_rows = self.state, self.txn.tail_rows
        n, sealed = state.next_row, state.sealed_rows
        live = np.ones(n, bool)
        live[self.dead_rows()] = False
        if live.all():
            return False
        raw, db, ix = self.txn.raw, self.txn.dbs, self.ix
        sealed_live = int(np.count_nonzero(live[:sealed]))
        tail_live = np.flatnonzero(live[sealed:]) + sealed
        # A tail at least half full is sealed with the rest (fillers after it), so the next writes do not seal
        # at once: LMDB reuses the pages a transaction frees only from the transaction after next, and the
        # compaction frees a whole copy of the index, so a seal right after it grew the file for its blobs. An
        # index with no sealed row keeps its tail (a forcemerge of a small index leaves no filler).
        absorb = sealed_live > 0 and 2 * len(tail_live) >= tail_rows
        kept = sealed_live + len(tail_live) if absorb else sealed_live
        new_sealed = -(-kept // tail_rows) * tail_rows
        renumber = np.full(n, -1, np.int64)
        renumber[np.flatnonzero(live[:sealed])] = np.arange(sealed_live)
        renumber[tail_live] = (sealed_live if absorb else new_sealed) + np.arange(len(tail_live))
        tail = self._take_tail(sealed, n) if n > sealed else []
        block = (tailblock.concat(tail, self.mapping.fields.values()).select(live[sealed:], renumber[tail_live[0]])
                 if tail_live.size else None)
        # Columns and postings of the whole sealed region, dead rows dropped, cut by the new layout. They go
        # first: their blobs need runs of contiguous free pages, which the many small copies of sources and ids
        # would break up (LMDB then grows the file for a run; 20 overwrites of 10k documents crept to 2.05x).
        old_segments = self.stored_layout()
        new_segments = segment_layout(new_sealed, tail_rows)
        keep = live[:sealed]
        built: dict[str, Column] = {}
        postings = {}
        for spec in self.mapping.fields.values():
            kind = column_kind(spec)
            whole = Column.concat([self._load_column(start, end, spec, kind) for start, end in old_segments]
                                  or [Column.empty(kind, 0, spec.dims or 0)])
            extra = renumber[whole.extra_rows] if len(whole.extra_rows) else whole.extra_rows
            filler = Column.empty(kind, new_sealed - kept, spec.dims or 0)
            built[spec.path] = Column.concat([
                Column(kind, whole.values[keep], whole.present[keep], extra[extra >= 0],
                       whole.extra_ords[extra >= 0]),
                *([block.column(spec)] if absorb and block is not None else []),
                filler])
            if kind == KIND_LEN:
                runs = [run for start, _end in old_segments
                        for run in self._stored_postings(start, spec.path, renumber)]
                if absorb and block is not None:
                    runs.append(block.run(spec.path))
                # A key per term here, not buckets: measured on the overwrite test (20 passes over 10k
                # documents), buckets in the one transaction that holds the old and the new copy of the index
                # ended at 2.01x of the first pass, keys per term at 1.99x (LMDB's free pages fit them better).
                postings[spec.path] = _cut_postings(runs, new_segments, packed=False)
        stamps = [orjson.loads(blob).get("sealed_at", 0) for blob in
                  (raw.get(keys.seg_key(ix, start), db=db["segs"]) for start, _end in old_segments) if blob]
        for start, _end in old_segments:
            self._drop_segment(start)
        self._write_segments(new_segments, 0, built, postings, after=max(stamps, default=0))
        # Sources and ids move down (a new number is never above the old), so moving rows in ascending order
        # never lands on a key still in use. The tail's blocks become one block of its live rows.
        src, ids = db["src"], db["ids"]
        id_runs = self.id_runs()
        # a row whose id is in the id runs keeps it there (renumbered below), not in a B-tree entry
        in_runs = np.zeros(n, bool)
        for lo, hi in id_runs.bounds if id_runs is not None else ():
            run_rows = id_runs.stored_run(lo, hi)[1]
            in_runs[run_rows[run_rows < n]] = True
        if block is not None and not absorb:
            # appended: its values of up to 1,900 bytes two to a page, not one to each half of a split page
            _put_all(raw, db["tail"], tailblock.stored(ix, block), ordered=True)
        moved = np.flatnonzero(live & (renumber != np.arange(n)))
        for old, new in zip(moved.tolist(), renumber[moved].tolist()):
            old_key, new_key = keys.row_key(ix, old), keys.row_key(ix, new)
            blob = raw.pop(old_key, db=src)
            raw.put(new_key, blob, db=src)
            if not in_runs[old]:
                raw.put(keys.id_key(ix, keys.unpack_source_header(blob)[1]), new_key[4:], db=ids)
        if id_runs is not None and id_runs.bounds:
            id_runs.renumber(live, renumber)
        # The dead log now holds only the fillers.
        _delete_prefix(raw, db["dead"], keys.ix_key(ix))
        for seq, row in enumerate(range(kept, new_sealed)):
            raw.put(keys.row_key(ix, seq), keys.u64(row), db=db["dead"])
        state.dead_seq = new_sealed - kept
        state.sealed_rows = new_sealed
        state.next_row = new_sealed if absorb else new_sealed + len(tail_live)
        state.epoch += 1
        return True

    def stored_layout(self) -> list[tuple[int, int]]:
        """``(start, end)`` of each stored sealed segment, in row order."""
        return [(keys.read_u64(key, 4), orjson.loads(value)["end"])
                for key, value in _range(self.txn.raw, self.txn.dbs["segs"], keys.ix_key(self.ix))]

    def _load_column(self, start: int, end: int, spec: FieldSpec, kind: int) -> Column:
        blob = self.txn.raw.get(keys.col_key(self.ix, start, spec.path), db=self.txn.dbs["cols"])
        if blob is None:
            return Column.empty(kind, end - start, spec.dims or 0)
        return Column.decode(blob)

    def _merge_postings(self, path: str, old_segments: list[tuple[int, int]], new_segments: list[tuple[int, int]],
                        leaving: list[PostingRun]) -> CutPostings:
        """``path``'s postings of the merged region, cut at the new segments and packed (see ``postpack``).

        The old segments' postings and the leaving tail rows' (``leaving``, each
        block's grouped by term) become flat arrays sorted once with numpy, so a
        merge costs one sort and a put per bucket and large term, not a decode
        and re-encode per term.
        """
        runs = [run for start, end in old_segments for run in self._segment_postings(start, end, path)]
        runs += leaving
        kept: dict[tuple[int, int], PostingRun] | None = {} if self.keep_runs_rows else None
        cut = _cut_postings(runs, new_segments, kept=kept, kept_rows=self.keep_runs_rows)
        for segment, run in (kept or {}).items():
            by_path = self.segment_runs.setdefault(segment, {})
            by_path[path] = run
            self.segment_sizes[segment] = sum(map(_run_bytes, by_path.values()))
        return cut

    def _segment_postings(self, start: int, end: int, path: str) -> list[PostingRun]:
        """A sealed segment's postings of ``path`` as runs: as this process wrote them when it kept them, else
        read."""
        run = self.segment_runs.get((start, end), {}).get(path)
        return [run] if run is not None else self._stored_postings(start, path)

    def _stored_postings(self, start: int, path: str, renumber: np.ndarray | None = None) -> list[PostingRun]:
        """A stored segment's postings of ``path`` as runs (terms as key bytes; see ``postpack.unpack_runs``);
        with ``renumber`` dead rows (-1) are dropped and the others take their new numbers."""
        prefix = keys.post_prefix(self.ix, start, path)
        items = _range(self.txn.raw, self.txn.dbs["post"], prefix)
        cut = len(prefix)
        suffixes, blobs = [key[cut:] for key, _ in items], [blob for _, blob in items]
        del items
        runs = postpack.unpack_runs(suffixes, blobs, short=tailblock.SHORT_TERM, consume=True)
        if renumber is None:
            return runs
        renumbered = []
        for terms, counts, rows, tfs in runs:
            rows = renumber[rows]
            keep = rows >= 0
            if not keep.all():
                counts = np.bincount(np.repeat(np.arange(len(terms)), counts)[keep], minlength=len(terms))
                rows, tfs = rows[keep], tfs[keep]
            renumbered.append((terms, counts, rows, tfs))
        return renumbered

    def _drop_segment(self, start: int) -> None:
        raw, db = self.txn.raw, self.txn.dbs
        for segment in [segment for segment in self.segment_runs if segment[0] == start]:
            del self.segment_runs[segment]
            self.segment_sizes.pop(segment, None)
        prefix = keys.seg_key(self.ix, start)
        for name in ("cols", "post"):
            _delete_prefix(raw, db[name], prefix)
        raw.delete(prefix, db=db["segs"])


@attrs.frozen
class SegmentRuns:
    """What a store keeps of one index's small sealed segments after a commit: the index's generation then,
    each segment's postings runs by field, and each segment's size in bytes."""

    generation: int
    runs: dict[tuple[int, int], dict[str, PostingRun]]
    sizes: dict[tuple[int, int], int]

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


def _run_bytes(run: PostingRun) -> int:
    terms, counts, rows, tfs = run
    # each bytes object: its 33-byte header and its 8-byte slot in the list
    names = terms.nbytes if isinstance(terms, np.ndarray) else sum(map(len, terms)) + 41 * len(terms)
    return names + sum(part.nbytes for part in (counts, rows, tfs) if part is not None)


def _cut_postings(runs: list[PostingRun], segments: list[tuple[int, int]], packed: bool = True,
                  kept: dict[tuple[int, int], PostingRun] | None = None, kept_rows: int = 0) -> CutPostings:
    """Runs of postings grouped per (segment, term) and packed per segment (``postpack.pack``; with ``packed``
    False a key per term), each segment's keys in key order, which LMDB inserts fastest; ``runs`` is emptied as
    it is read. ``kept``: where each segment of at most ``kept_rows`` rows gets its grouped postings as a run
    of its own (copies, so they do not hold the whole merge's arrays)."""
    seg, names, rows, tfs, bounds = tailblock.grouped(runs, np.array([start for start, _end in segments], np.int64))
    if not len(names):
        return [(0, [], []) for _segment in segments]
    firsts = np.searchsorted(seg, np.arange(len(segments) + 1)).tolist()
    cut: CutPostings = []
    for i in range(len(segments)):
        lo, hi = firsts[i], firsts[i + 1]
        if lo == hi:
            cut.append((0, [], []))
            continue
        p_lo, p_hi = int(bounds[lo]), int(bounds[hi])
        if kept is not None and segments[i][1] - segments[i][0] <= kept_rows:
            terms = names[lo:hi].copy() if isinstance(names, np.ndarray) else names[lo:hi]
            kept[segments[i]] = (terms, np.diff(bounds[lo:hi + 1]), rows[p_lo:p_hi].copy(), tfs[p_lo:p_hi].copy())
        if not packed:
            terms = names[lo:hi].tolist() if isinstance(names, np.ndarray) else names[lo:hi]
            cut.append((0, terms, encode_postings_many(rows[p_lo:p_hi], tfs[p_lo:p_hi], bounds[lo:hi + 1] - p_lo)))
            continue
        cut.append(postpack.pack(names[lo:hi], rows[p_lo:p_hi], tfs[p_lo:p_hi], bounds[lo:hi + 1] - p_lo))
    return cut


def _slice(column: Column, lo: int, hi: int) -> Column:
    mask = (column.extra_rows >= lo) & (column.extra_rows < hi)
    return Column(column.kind, column.values[lo:hi], column.present[lo:hi],
                  column.extra_rows[mask] - lo, column.extra_ords[mask])


def _batch_calls(raw: Any) -> bool:
    """Does ``raw`` take LMDB's batch cursor calls (``getmulti``; ``putmulti`` through :func:`_put_all`)? LMDB's
    transactions do, and a database store's that say so (``xerj_postgres.kv.Txn.batch_calls``)."""
    return isinstance(raw, lmdb.Transaction) or getattr(raw, "batch_calls", False)


def _put_all(txn: lmdb.Transaction, db: Any, items: Iterable[tuple[bytes, bytes]], *, ordered: bool = False) -> None:
    """Put every ``(key, value)`` of ``items`` through one LMDB cursor (``putmulti``: about 5x fewer cycles per
    item than a Python loop of puts); or another backend's ``putmulti``; else a loop of puts.

    With ``ordered`` (``items`` a list in ascending key order) the items are appended when all of them sort
    after the database's last key (new rows of the newest index): LMDB then fills each page instead of
    splitting it in half, so fewer pages are written and committed.
    """
    if isinstance(txn, lmdb.Transaction):
        with txn.cursor(db=db) as cur:
            append = bool(ordered and items and (not cur.last() or cur.key() < items[0][0]))
            _consumed, added = cur.putmulti(items, append=append)
        if append and added != len(items):
            # LMDB's append skips, without an error, a key that does not sort after the one before it: refuse the
            # transaction rather than commit a database missing those items.
            raise XerjError(f"{len(items) - added} of {len(items)} items to append were not in ascending key order")
        return
    putmulti = getattr(txn, "putmulti", None)  # a database store's own (xerj_postgres.kv.Txn)
    if putmulti is not None:
        putmulti(items, db=db)
        return
    for key, value in items:
        txn.put(key, value, db=db)


def _after(prefix: bytes) -> bytes | None:
    """The smallest key above every key starting with ``prefix`` (None when there is none)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


def _prefixed(cur: Any, prefix: bytes, *, values: bool = True) -> list[Any]:
    """From an LMDB cursor set at or before the first key with ``prefix``: every item (``(key, value)``, or the
    key alone) whose key starts with ``prefix``, read by C-level slices of the cursor's iterator."""
    upper = _after(prefix)
    bound = (upper,) if values else upper
    found: list[Any] = []
    items = cur.iternext(keys=True, values=values)
    size = 64
    while True:
        chunk = list(islice(items, size))
        if not chunk:
            return found
        last = chunk[-1][0] if values else chunk[-1]
        if last.startswith(prefix):
            found += chunk
            size = min(2 * size, 8192)
            continue
        if upper is None:  # pragma: no cover - a prefix of 0xff bytes only
            found += [item for item in chunk if (item[0] if values else item).startswith(prefix)]
        else:
            found += chunk[:bisect_left(chunk, bound)]
        return found


def _range(txn: Any, db: Any, prefix: bytes) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` whose key starts with ``prefix``, in key order."""
    with txn.cursor(db=db) as cur:
        if not cur.set_range(prefix):
            return []
        if isinstance(txn, lmdb.Transaction):
            return _prefixed(cur, prefix)
        found = []
        for key, value in cur:
            if not key.startswith(prefix):
                break
            found.append((key, value))
        return found


def _delete_all(txn: lmdb.Transaction, db: Any, found: list[bytes]) -> None:
    """Delete the stored keys ``found`` (ascending): with LMDB through one cursor, whose search from a key to the
    next one stays on the leaf page it is on when the next key is there."""
    if not isinstance(txn, lmdb.Transaction):
        for key in found:
            txn.delete(key, db=db)
        return
    with txn.cursor(db=db) as cur:
        for key in found:
            if cur.set_key(key):
                cur.delete()


def _delete_prefix(txn: lmdb.Transaction, db: Any, prefix: bytes) -> None:
    # A database store deletes a key range in one statement without reading it (xerj_postgres.kv.Txn).
    clear = getattr(txn, "delete_prefix", None)
    if clear is not None and clear(prefix, db=db):
        return
    with txn.cursor(db=db) as cur:
        if not cur.set_range(prefix):
            return
        if isinstance(txn, lmdb.Transaction):
            # Count the keys, then delete that many from the first: both loops run in C.
            count = len(_prefixed(cur, prefix, values=False))
            cur.set_range(prefix)
            deque(starmap(cur.delete, repeat((), count)), 0)
            return
        while cur.key().startswith(prefix):
            if not cur.delete():
                break


def _check_ids(ids: list[Any]) -> None:
    """:func:`check_doc_id` of each of ``ids``, after one C-level pass that passes the usual case (short ASCII)."""
    if not (set(map(type, ids)) <= {str} and all(map(str.isascii, ids)) and "" not in ids
            and max(map(len, ids), default=0) <= MAX_ID_BYTES):
        for doc_id in ids:
            check_doc_id(doc_id)


def check_doc_id(doc_id: Any) -> None:
    """Refuse an id the store cannot key (empty, or longer than :data:`MAX_ID_BYTES` in UTF-8)."""
    if not isinstance(doc_id, str) or not doc_id:
        raise MapperParsingError("document id must be a non-empty string")
    try:
        size = len(doc_id.encode())
    except UnicodeEncodeError:
        raise MapperParsingError("document id must be valid Unicode text; it holds a lone surrogate") from None
    if size > MAX_ID_BYTES:
        raise MapperParsingError(f"id [{doc_id[:40]}...] is too long, must be no longer than {MAX_ID_BYTES} bytes")


class WriteTxn:
    """Everything one write request does, applied in one LMDB transaction.

    Obtain one from :meth:`Store.transact`; the caller's function may be re-run
    if the map had to grow, so it must only act through this object.
    """

    def __init__(self, raw: lmdb.Transaction, dbs: dict[str, Any], tail_rows: int,
                 committed_terms: dict[tuple[int, str], dict[str, int]] | None = None,
                 tails: dict[int, tuple[int, int, list[Block]]] | None = None,
                 merge_above: int | None = None,
                 dict_runs: dict[tuple[int, str, int, int], Any] | None = None,
                 segment_runs: dict[int, SegmentRuns] | None = None) -> None:
        self.raw = raw
        # Sealed rows a seal may merge in the write; a bigger merge is left to the merge thread (None: none is).
        self.merge_above = merge_above
        self.dbs = dbs
        self.tail_rows = tail_rows
        # Dictionary ordinals known to be committed, shared by the store's transactions (read-only here).
        self.committed_terms = committed_terms if committed_terms is not None else {}
        # Committed dictionary runs (see xerj_core.store.dictruns), shared like committed_terms.
        self.dict_runs: dict[tuple[int, str, int, int], Any] = dict_runs if dict_runs is not None else {}
        # index number -> (generation, first tail row, the tail's blocks) as this process committed them
        # (read-only here; see remember_tails).
        self.tails = tails if tails is not None else {}
        # index number -> the small sealed segments' postings as this process committed them (read-only here;
        # see remember_segment_runs).
        self.segment_runs = segment_runs if segment_runs is not None else {}
        self._open: dict[str, IndexWrite] = {}
        self.dropped: list[str] = []

    def index(self, name: str, *, create: bool = False, mapping: Any = None, allow_closed: bool = False) -> IndexWrite:
        """The index ``name`` (or the write index of the alias ``name``); with ``create`` it is created
        (with ``mapping``) when neither exists. A closed index refuses unless ``allow_closed``."""
        found = self._open.get(name)
        if found is not None:
            return found
        if not name:
            if create:
                validate_index_name(name)  # raises: an index needs a name
            raise IndexNotFound(name)
        blob = self.raw.get(name.encode(), db=self.dbs["indices"])
        if blob is None:
            aliases = index_meta.read_aliases(self.raw, self.dbs)
            if name in aliases:
                return self.index(index_meta.write_index(aliases, name))
            if not create:
                raise IndexNotFound(name)
            return self.create_index(name, mapping)
        meta = orjson.loads(blob)
        if meta.get("closed") and not allow_closed:
            raise IndexClosed(name, meta["uuid"])
        found = self._open[name] = IndexWrite(self, name, meta["ix"], meta)
        return found

    def exists(self, name: str) -> bool:
        if not name:
            return False
        return name in self._open or self.raw.get(name.encode(), db=self.dbs["indices"]) is not None

    def create_index(self, name: str, mapping: Any = None, settings: dict[str, Any] | None = None) -> IndexWrite:
        validate_index_name(name)
        if self.exists(name):
            raise IndexAlreadyExists(name)
        if name in index_meta.read_aliases(self.raw, self.dbs):
            raise InvalidIndexName(f"Invalid index name [{name}], already exists as alias", index=name)
        parsed = Mapping.from_es(mapping)
        if scope_of(name) is not None:
            refuse_in_mapping(parsed.fields, name)
        limits.check_field_paths(parsed.fields)
        indices = self.dbs["indices"]
        counter = self.raw.get(keys.NEXT_IX_KEY, db=indices)
        ix = int.from_bytes(counter, "big") if counter else 1
        self.raw.put(keys.NEXT_IX_KEY, (ix + 1).to_bytes(4, "big"), db=indices)
        meta = {"ix": ix, "created": int(time.time() * 1000), "uuid": new_doc_id(), "settings": settings or {}}
        self.raw.put(name.encode(), orjson.dumps(meta), db=indices)
        self.raw.put(keys.ix_key(ix), orjson.dumps(parsed.to_es()), db=self.dbs["mappings"])
        self.raw.put(keys.ix_key(ix), keys.IndexState().pack(), db=self.dbs["state"])
        found = self._open[name] = IndexWrite(self, name, ix, meta)
        return found

    def delete_index(self, name: str) -> None:
        target = self.index(name, allow_closed=True)
        prefix = keys.ix_key(target.ix)
        for db_name in ("state", "mappings", "src", "ids", "tail", "segs", "cols", "post", "dead",
                        "dict", "dictr", "dictn", "aux"):
            _delete_prefix(self.raw, self.dbs[db_name], prefix)
        pins.drop_index(self.raw, self.dbs, target.ix)
        aliases = index_meta.read_aliases(self.raw, self.dbs)
        if any(name in members for members in aliases.values()):
            index_meta.drop_index(aliases, name)
            index_meta.write_aliases(self.raw, self.dbs, aliases)
        self.raw.delete(name.encode(), db=self.dbs["indices"])
        del self._open[name]
        self.dropped.append(name)

    # -- metadata (aliases, settings, open/closed; see xerj_core.store.meta) ------------------------

    def index_record(self, name: str) -> dict[str, Any]:
        blob = self.raw.get(name.encode(), db=self.dbs["indices"]) if name else None
        if blob is None:
            raise IndexNotFound(name)
        return orjson.loads(blob)

    def update_index_record(self, name: str, **changes: Any) -> dict[str, Any]:
        record = {**self.index_record(name), **changes}
        self.raw.put(name.encode(), orjson.dumps(record), db=self.dbs["indices"])
        if name in self._open:
            self._open[name].meta = record
        return record

    def put_mapping(self, name: str, body: Any) -> None:
        target = self.index(name)
        incoming = Mapping.from_es(body)
        if target.scope is not None:
            refuse_in_mapping(incoming.fields, name)
        limits.check_field_paths(incoming.fields)
        for spec in incoming.fields.values():
            target.mapping.add_field(spec)
        target.mapping.objects |= incoming.objects
        if isinstance(body, dict) and "dynamic" in body:
            target.mapping.dynamic = incoming.dynamic
        target.mapping_changed = True

    def set_field_params(self, name: str, path: str, params: dict[str, Any]) -> None:
        """Merge ``params`` into the mapped field ``path``'s parameters (a label such as an embedder id or a state).

        Parameters are kept for the caller and never change how values are stored,
        so the field's type, dims and dictionary cannot be set here.
        """
        structural = set(params) & {"type", "dims", "dictionary", "fields", "properties"}
        if structural:
            raise MapperParsingError(f"[{sorted(structural)}] of field [{path}] cannot be changed")
        target = self.index(name)
        spec = target.mapping.fields.get(path)
        if spec is None:
            raise MapperParsingError(f"no field [{path}] is mapped in index [{name}]")
        target.mapping.fields[path] = attrs.evolve(spec, params={**spec.params, **params})
        target.mapping_changed = True

    def put(self, index: str, doc: Any, doc_id: str | None = None, *, op_type: str = "index",
            auto_create: bool = True, scope: str | None = None) -> WriteResult:
        return self.index(index, create=auto_create).put(doc, doc_id, op_type=op_type, scope=scope)

    def delete(self, index: str, doc_id: str) -> WriteResult:
        return self.index(index).delete(doc_id)

    def get(self, index: str, doc_id: str) -> dict[str, Any] | None:
        if not self.exists(index):
            return None
        found = self.index(index).get(doc_id)
        return None if found is None else found[0]

    def prefetch(self, index: str, doc_ids: Iterable[str]) -> None:
        """Fetch the stored versions of ``doc_ids`` in ``index`` at once, before ``get`` asks one by one, where the
        store's gets are round trips (``xerj_postgres``); with LMDB there is nothing to do."""
        prefetch = getattr(self.raw, "prefetch", None)
        if prefetch is None or not self.exists(index):
            return
        ix = self.index(index).ix
        id_keys = [keys.id_key(ix, doc_id) for doc_id in doc_ids]
        prefetch(self.dbs["ids"], id_keys)
        rows = (self.raw.get(key, db=self.dbs["ids"]) for key in id_keys)
        prefetch(self.dbs["src"], [keys.ix_key(ix) + bytes(row) for row in rows if row is not None])

    def update(self, index: str, doc_id: str, partial: Any, *, upsert: Any = None) -> WriteResult:
        """Merge ``partial`` into the stored document (objects merge recursively, like ES)."""
        if not isinstance(partial, dict):
            raise MapperParsingError("failed to parse: [doc] must be a JSON object")
        target = self.index(index, create=upsert is not None)
        found = target.get(doc_id)
        if found is None:
            if upsert is None:
                raise DocumentMissing(f"[{doc_id}]: document missing", index=index, shard="0")
            return target.put(upsert, doc_id)
        merged = _merge(found[0], partial)
        if merged == found[0]:
            row = target.row_of(doc_id)
            return WriteResult(index, doc_id, "noop", found[1], row if row is not None else -1)
        return target.put(merged, doc_id)

    def forcemerge(self, name: str) -> None:
        """Compact ``name`` when this transaction finishes, whatever its share of dead rows."""
        self.index(name).force_compact = True

    def finish(self) -> None:
        for target in self._open.values():
            if (target.pending or target.mapping_changed or target.put_ids or target.deleted_ids or target.dict_size
                    or target.force_compact or target.merged):
                target.finish()

    def remember_terms(self, shared: dict[tuple[int, str], dict[str, int]], limit: int) -> None:
        """After the commit: every ordinal this transaction used is committed, so later ones may skip LMDB.

        A dictionary stops growing in the cache at ``limit`` terms; one a writer
        marked ``unremembered`` (a term per document, each looked up about once)
        is not kept at all."""
        for target in self._open.values():
            for runs in target._dict_runs.values():
                if runs is not None:
                    runs.remember()
            if target._id_runs is not _UNREAD and target._id_runs is not None:
                target._id_runs.remember()
            for name, terms in target.dict_cache.items():
                if name in target.unremembered:
                    continue
                known = shared.setdefault((target.ix, name), {})
                room = limit - len(known)
                if room <= 0:
                    continue
                new = [term for term in terms if term not in known][:room]
                # Kept as copies made together: the batch's own term and ordinal objects lie scattered among its
                # temporaries, and keeping them would leave the allocator's pools holed for good, so every later
                # batch's objects land farther apart (a 1M-edge ingest ran about a tenth slower per edge).
                known.update(zip(map("".join, zip(new, repeat(""))),
                                 map(int.__add__, map(terms.__getitem__, new), repeat(0))))

    def known_tail(self, ix: int, state: keys.IndexState) -> list[Block] | None:
        """The blocks of index ``ix``'s committed tail rows when this process committed them and nobody wrote
        the index since (same generation: every write moves it), else None (an empty tail is always known)."""
        if state.next_row == state.sealed_rows:
            return []
        found = self.tails.get(ix)
        if (found is None or found[0] != state.generation or found[1] != state.sealed_rows or not found[2]
                or found[2][-1].end != state.next_row or not isinstance(self.raw, lmdb.Transaction)):
            return None
        return found[2]

    def known_segment_runs(self, ix: int, state: keys.IndexState
                           ) -> tuple[dict[tuple[int, int], dict[str, PostingRun]], dict[tuple[int, int], int]]:
        """The postings runs this process kept of index ``ix``'s small sealed segments, when nobody wrote the
        index since it committed them (same generation), and each segment's size in bytes, as copies this
        transaction may change; else none."""
        found = self.segment_runs.get(ix)
        if found is None or found.generation != state.generation or not isinstance(self.raw, lmdb.Transaction):
            return {}, {}
        return {segment: dict(by_path) for segment, by_path in found.runs.items()}, dict(found.sizes)

    def remember_segment_runs(self, shared: dict[int, SegmentRuns], budget: int) -> None:
        """After the commit: the runs each written index keeps of its small segments, newest first within
        ``budget`` bytes over every index (other indices' are forgotten first)."""
        for target in self._open.values():
            if not target.finished:
                continue
            shared.pop(target.ix, None)
            if target.compacted or not target.segment_runs:
                continue
            kept, sizes, size = {}, {}, 0
            for segment in sorted(target.segment_runs, reverse=True):
                more = target.segment_sizes[segment]
                if size + more > budget:
                    break
                kept[segment], sizes[segment], size = target.segment_runs[segment], more, size + more
            while shared and size + sum(other.size for other in shared.values()) > budget:
                shared.pop(next(iter(shared)))
            if kept:
                shared[target.ix] = SegmentRuns(target.state.generation, kept, sizes)

    def remember_tails(self, shared: dict[int, tuple[int, int, list[Block]]], limit: int) -> None:
        """After the commit: the tail blocks each index now holds, when all of them are known (so the next seal
        in this process need not read them); at most ``limit`` indices are remembered."""
        for target in self._open.values():
            if not target.finished:
                continue  # not written: its generation, and what is remembered of it, did not move
            if target.tail_after is None:
                shared.pop(target.ix, None)
                continue
            if len(shared) >= limit:
                shared.clear()
            shared[target.ix] = (target.state.generation, target.state.sealed_rows, target.tail_after)

    def release(self) -> None:
        """After the commit and everything read from this transaction: drop the indices it opened. Each of them
        refers back to this transaction, a reference cycle only the cyclic collector would free, holding the
        transaction's blocks, records and built columns until its next collection of the older generations."""
        self._open.clear()

    def merges_wanted(self) -> list[str]:
        """The indices whose seals left a merge to the merge thread."""
        return [t.name for t in self._open.values() if t.merge_wanted and t.name not in self.dropped]

    def written(self) -> list[tuple[str, list[str], list[str]]]:
        return [(t.name, t.put_ids, t.deleted_ids) for t in self._open.values() if t.put_ids or t.deleted_ids]


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
