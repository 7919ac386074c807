"""SearchService: the ES ``_search`` / ``_count`` surface and the engine-level ranking calls other modules use.

Two layers, both documented here:

* **ES-shaped**: :meth:`SearchService.search` and :meth:`SearchService.count`
  take an index expression, a JSON body and URL parameters and return the ES
  response shapes. Every index a request names is resolved by the one
  function :func:`~xerj_core.query.resolve.resolve_indices`, and all of them are
  read in one LMDB snapshot, so a committed write is visible to the very next
  search with no refresh.
* **Engine-level** (agent-memory recall, the graph overview): work on an open
  :class:`~xerj_core.store.IndexReader` and numpy masks, and return
  :class:`~xerj_core.query.ranking.Ranked` rows (best first) or plain dicts::

      with engine.store.reader(index) as reader:
          allowed = search.filter_mask(reader, {"term": {"kind": "note"}})
          lexical = search.bm25_top(reader, ["title", "text"], "fermentation", 50, allowed)
          semantic = search.knn_top(reader, "embedding", vector, 50, allowed)
          fused = search.fuse([lexical, semantic], method="rrf", k=10)
          hits = search.hits(reader, fused)
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs
import numpy as np

from xerj_core.errors import IllegalArgument, IndexNotFound, SearchContextMissing
from xerj_core.query import aggs as aggs_module
from xerj_core.query import bm25, dsl, fusion, knn, sidebyside
from xerj_core.query.contexts import SearchContexts, parse_keep_alive
from xerj_core.query.evaluate import Evaluator
from xerj_core.query.evaluate import filter_mask as _filter_mask
from xerj_core.query.ranking import Ranked, rank_all, select_top, top_k
from xerj_core.query.request import (SearchRequest, SortKey, SourceFilter, parse_count_request,
                                     parse_search_request)
from xerj_core.query.resolve import resolve_indices
from xerj_core.query.highlight import highlight_hit, query_terms
from xerj_core.query.results import after_mask, filter_source, merge_key, shard_doc, sort_rows

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.embedding import Embedder
    from xerj_core.store import Store

_ROW_BITS = 40  # a row of index i in a multi-index ranking is keyed as (i << 40) | row
_ROW_MASK = (1 << _ROW_BITS) - 1


def _shards(count: int) -> dict[str, int]:
    return {"total": count, "successful": count, "skipped": 0, "failed": 0}


def _leg_k(node: dsl.Knn, window: int) -> int:
    """How many rows a hybrid's kNN leg ranks: its k (or num_candidates), at most the window."""
    return min(node.k or node.num_candidates or window, max(window, 1))


def _keyed(ranked: Ranked, index: int) -> Ranked:
    return Ranked(ranked.rows + (index << _ROW_BITS), ranked.scores)


def _merge(parts: list[Ranked], k: int) -> Ranked:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Ranked.empty()
    if len(parts) == 1:
        return parts[0].head(k)
    return rank_all(np.concatenate([p.rows for p in parts]), np.concatenate([p.scores for p in parts])).head(k)


class SearchService:
    """Search over one store; built once per Engine (``engine.search``).

    ``embedders`` returns the installed embedders by id, called only when a
    query asks for text to be embedded (so a search that never does pays
    nothing for collecting them).
    """

    def __init__(self, store: "Store", embedders: Callable[[], Mapping[str, "Embedder"]] = dict) -> None:
        self.store = store
        self.embedders = embedders
        self.contexts = SearchContexts(store)

    # -- ES surface ------------------------------------------------------------------------------

    def resolve(self, index_expr: str | None, *, ignore_unavailable: bool = False, allow_no_indices: bool = True,
                expand_wildcards: str = "open") -> list[str]:
        """The index names an expression names (see :func:`~xerj_core.query.resolve.resolve_indices`)."""
        return resolve_indices(self.store, index_expr, ignore_unavailable=ignore_unavailable,
                               allow_no_indices=allow_no_indices, expand_wildcards=expand_wildcards)

    def search(self, index_expr: str | None, body: dict | None, *, params: dict | None = None,
               principal: str | None = None) -> dict:
        """Run an ES ``_search`` and return its response body.

        ``index_expr`` is a comma list with wildcards (None = every visible
        index); ``body`` the JSON request (``query``, ``knn``, ``retriever``,
        ``rank``, ``from``, ``size``, ``sort``, ``_source``, ``track_total_hits``,
        ``aggs``, ``post_filter``, ``min_score``, ``track_scores``, ``version``,
        ``search_after``, ``pit``);
        ``params`` the URL parameters (``q``, ``df``, ``default_operator``,
        ``size``, ``from``, ``sort``, ``_source``, ``_source_includes``,
        ``_source_excludes``, ``track_total_hits``, ``rest_total_hits_as_int``,
        ``ignore_unavailable``, ``allow_no_indices``, ``expand_wildcards``,
        ``scroll``), which win over the body. Bad input raises ParsingError /
        IllegalArgument / IndexNotFound; it never degrades to match-all.

        A ``pit`` searches the snapshot that point in time pinned; ``scroll``
        opens a scroll context (continued by :meth:`scroll`). Both belong to
        ``principal`` (the caller's name) and to no one else.
        """
        started = time.perf_counter()
        request = self._with_vectors(parse_search_request(body, params))
        if request.pit is not None:
            if index_expr:
                raise IllegalArgument("[indices] cannot be used with point in time. Do not specify any index "
                                      "with point in time.")
            record = self.contexts.use(request.pit.id, principal, "pit", request.pit.keep_alive)
            response, _cursor = self._execute(request, started, pins=record["pins"], tiebreak=True)
            return {"pit_id": request.pit.id, **response}
        names = resolve_indices(self.store, index_expr, ignore_unavailable=request.ignore_unavailable,
                                allow_no_indices=request.allow_no_indices, expand_wildcards=request.expand_wildcards)
        if request.scroll is None:
            return self._execute(request, started, names=names)[0]
        keep_alive = parse_keep_alive(request.scroll, "scroll")
        stored_params = {k: v for k, v in (params or {}).items() if k != "scroll"}
        context_id, record = self.contexts.open("scroll", names, principal, keep_alive,
                                                {"body": body or {}, "params": stored_params})
        response, cursor = self._execute(request, started, pins=record["pins"], tiebreak=True, hide_sort=True)
        record["cursor"] = cursor
        self.contexts.save(context_id, record)
        return {"_scroll_id": context_id, **response}

    def scroll(self, scroll_id: str, *, scroll: str | None = None, principal: str | None = None,
               total_as_int: bool | None = None) -> dict:
        """The next page of a scroll (``scroll`` extends its keep-alive); ES's scroll response shape."""
        started = time.perf_counter()
        record = self.contexts.use(scroll_id, principal, "scroll", scroll)
        request = self._with_vectors(parse_search_request(record["body"], record["params"]))
        request = attrs.evolve(request, aggs=(), from_=0)
        if total_as_int is not None:
            request = attrs.evolve(request, total_as_int=total_as_int)
        response, cursor = self._execute(request, started, pins=record["pins"], tiebreak=True, hide_sort=True,
                                         cursor=record.get("cursor"))
        if cursor is not None:
            record["cursor"] = cursor
            self.contexts.save(scroll_id, record)
        return {"_scroll_id": scroll_id, **response}

    def _execute(self, request: SearchRequest, started: float, *, names: Sequence[str] = (),
                 pins: Sequence[dict] | None = None, tiebreak: bool = False, hide_sort: bool = False,
                 cursor: list | None = None) -> tuple[dict, list | None]:
        """Run ``request`` over ``names`` (or the pinned snapshots ``pins``); ``(response, last hit's cursor)``.

        With ``tiebreak`` the order ends with ``_shard_doc`` (index position, row), so
        every hit has a unique place and ``cursor`` / ``search_after`` resume exactly.
        """
        sort, show_tiebreak, shown = request.sort, request.pit is not None, None
        if sort and sort[-1].field == "_shard_doc":
            # Alone, the tiebreaker leaves no keys: the order is index position, then row.
            sort, tiebreak, show_tiebreak, shown = sort[:-1], True, True, len(sort) - 1
        after = cursor if cursor is not None else request.search_after
        if (tiebreak or after is not None) and sort is None and request.hybrid is None:
            sort = (SortKey("_score", True),)
            # A scroll in score order shows no sort values, as ES's does; a point in time shows them.
            hide_sort = hide_sort and request.pit is None
        else:
            hide_sort = hide_sort and request.sort is None
        if shown is None:
            shown = len(sort) if sort is not None else 0
        if after is not None and request.hybrid is None:
            expected = len(sort) + (1 if tiebreak else 0)
            if len(after) != expected:
                raise IllegalArgument(f"search_after has {len(after)} value(s) but sort has {expected}.")
            if tiebreak and (not isinstance(after[-1], int) or isinstance(after[-1], bool) or after[-1] < 0):
                raise IllegalArgument(f"the last search_after value must be the [_shard_doc] tiebreaker, "
                                      f"got [{after[-1]}]")
        with self.store.read_txn() as raw:
            if pins is not None:
                try:
                    readers = [self.store.open_pinned_reader(raw, pin) for pin in pins]
                except IndexNotFound as exc:
                    raise SearchContextMissing(f"No search context found: index [{exc.index}] was deleted") from None
            else:
                readers = [self.store.open_reader(raw, name) for name in names]
            if request.hybrid is not None:
                page, total, max_score, contexts = self._fused_search(request, readers)
            else:
                page, total, max_score, contexts = self._ranked_search(request, readers, sort, after,
                                                                       tiebreak)
            hits = []
            for i in {i for i, *_rest in page}:  # one round trip per index on a database store
                readers[i].prefetch_documents([row for j, row, *_rest in page if j == i])
            for i, row, score, sort_values in page:
                if sort_values is not None:
                    sort_values = sort_values[:shown] + ([shard_doc(i, row)] if show_tiebreak and tiebreak else [])
                hits.append(self._render_hit(readers[i], row, score, None if hide_sort else sort_values,
                                             request))
            aggregations = (aggs_module.run_aggs(request.aggs, contexts, typed_keys=request.typed_keys)
                            if request.aggs else None)
        last = None
        if page and page[-1][3] is not None:
            i, row, _score, values = page[-1]
            last = [*values, shard_doc(i, row)] if tiebreak else list(values)
        response: dict[str, Any] = {
            "took": int((time.perf_counter() - started) * 1000),
            "timed_out": False,
            "_shards": _shards(len(readers)),
            "hits": {},
        }
        total_body = _total(total, request)
        if total_body is not None:
            response["hits"]["total"] = total_body
        response["hits"]["max_score"] = max_score
        response["hits"]["hits"] = hits
        if aggregations is not None:
            response["aggregations"] = aggregations
        return response, last

    def count(self, index_expr: str | None, body: dict | None = None, *, params: dict | None = None) -> dict:
        """Run an ES ``_count``: ``{"count": n, "_shards": ...}``; the body may hold only ``query``."""
        request = self._with_vectors(parse_count_request(body, params))
        names = resolve_indices(self.store, index_expr, ignore_unavailable=request.ignore_unavailable,
                                allow_no_indices=request.allow_no_indices, expand_wildcards=request.expand_wildcards)
        count = 0
        with self.store.read_txn() as raw:
            for name in names:
                reader = self.store.open_reader(raw, name)
                if request.query is None:
                    count += reader.doc_count
                    continue
                scoring = request.min_score is not None
                mask, scores = Evaluator(reader).evaluate(request.query, scoring=scoring)
                if scoring:
                    mask &= scores >= request.min_score
                count += int(np.count_nonzero(mask))
        return {"count": count, "_shards": _shards(len(names))}

    def delete_by_query(self, index_expr: str, body: dict | None = None, *, params: dict | None = None
                        ) -> tuple[int, dict]:
        """Run an ES ``_delete_by_query``: ``(status, response)``.

        The live documents the query matches in one snapshot are deleted in
        transactions of ``scroll_size`` (default 1,000), each only while its
        version is still the one the query saw: one written or deleted since is
        a version conflict, which stops the run with a 409 (``conflicts=abort``,
        the default) or is counted and passed over (``proceed``). ``max_docs``
        caps what is deleted. The snapshot's ids are listed before the first
        delete: no read transaction is held across the writes (a write that
        grows the map waits for every reader to leave)."""
        started = time.perf_counter()
        body, params = dict(body or {}), dict(params or {})
        for key in _DELETE_IGNORED:  # each write is committed and visible when it returns
            params.pop(key, None)
        if str(params.pop("wait_for_completion", "true")).lower() == "false":
            raise IllegalArgument("[wait_for_completion=false] is not supported: a delete by query runs in the "
                                  "request")
        if "slice" in body:
            raise IllegalArgument("[slice] is not supported by [_delete_by_query]")
        conflicts = str(body.pop("conflicts", params.pop("conflicts", "abort")))
        if conflicts not in ("abort", "proceed"):
            raise IllegalArgument(f"conflicts may only be \"proceed\" or \"abort\" but was [{conflicts}]")
        max_docs = _positive_int(body.pop("max_docs", params.pop("max_docs", None)), "max_docs")
        batch = _positive_int(params.pop("scroll_size", None), "scroll_size") or DELETE_BATCH
        request = self._with_vectors(parse_count_request(body, params))
        names = resolve_indices(self.store, index_expr, ignore_unavailable=request.ignore_unavailable,
                                allow_no_indices=request.allow_no_indices, expand_wildcards=request.expand_wildcards)
        matched: list[tuple[str, str, int]] = []  # (index, _id, version)
        with self.store.read_txn() as raw:
            for name in names:
                reader = self.store.open_reader(raw, name)
                mask = Evaluator(reader).evaluate(request.query or dsl.MatchAll(), scoring=False)[0]
                for row in np.flatnonzero(mask).tolist():
                    if max_docs is not None and len(matched) >= max_docs:
                        break
                    header = reader.document_header(row)
                    if header is not None:
                        matched.append((name, *header))
        deleted, conflicted, batches, failures = 0, 0, 0, []
        for at in range(0, len(matched), batch):
            gone, passed_over = self.store.transact(lambda txn: _delete_unchanged(txn, matched[at:at + batch]))
            deleted, conflicted, batches = deleted + gone, conflicted + len(passed_over), batches + 1
            if passed_over and conflicts == "abort":
                failures = [{"index": name, "id": doc_id, "status": 409,
                             "cause": {"type": "version_conflict_engine_exception", "index": name,
                                       "reason": f"[{doc_id}]: version conflict, the document changed after the "
                                                 f"query read it (version [{version}])"}}
                            for name, doc_id, version in passed_over]
                break
        response = {"took": int((time.perf_counter() - started) * 1000), "timed_out": False, "total": len(matched),
                    "deleted": deleted, "batches": batches, "version_conflicts": conflicted, "noops": 0,
                    "retries": {"bulk": 0, "search": 0}, "throttled_millis": 0, "requests_per_second": -1.0,
                    "throttled_until_millis": 0, "failures": failures}
        return (409 if failures else 200), response

    # -- engine-level calls ----------------------------------------------------------------------

    def bm25_top(self, reader, field_or_fields: str | Sequence[str], query_text: str, k: int,
                 filter_mask: np.ndarray | None = None, *, operator: str = "or",
                 minimum_should_match: str | None = None, combine: str = "best_fields",
                 tie_breaker: float = 0.0) -> Ranked:
        """The ``k`` best live rows for BM25 ``query_text`` over one or several text fields.

        Scores are Elasticsearch's (k1 1.2, b 0.75); with several fields a row
        gets its best field's score (``combine="most_fields"`` sums them). The
        query is tokenized like the documents (lowercase Unicode words, no
        stemming); ``operator="and"`` requires every token. ``filter_mask`` is a
        bool array over ``reader.n_rows`` applied before ranking. See
        :func:`xerj_core.query.bm25.bm25_top`.
        """
        return bm25.bm25_top(reader, field_or_fields, query_text, k, filter_mask, operator=operator,
                             minimum_should_match=minimum_should_match, tie_breaker=tie_breaker, combine=combine)

    def knn_top(self, reader, field: str, vector: Sequence[float] | np.ndarray, k: int,
                filter_mask: np.ndarray | None = None, *, min_similarity: float | None = None) -> Ranked:
        """The ``k`` live rows nearest to ``vector`` in the ``dense_vector`` ``field``, exact, filter applied first.

        Scores use the field's similarity (cosine by default: ``(1 + cos) / 2``).
        Raises IllegalArgument for an unmapped / non-vector field or a wrong
        dimension. See :func:`xerj_core.query.knn.knn_top`.
        """
        return knn.knn_top(reader, field, vector, k, filter_mask, min_similarity=min_similarity)

    def filter_mask(self, reader, clause: Any = None) -> np.ndarray:
        """Live rows matching an ES query clause in filter context (bool over ``reader.n_rows``).

        ``clause`` is a query dict, a parsed node, a list of them (all must
        match), or None for every live row. Evaluated on doc-values columns only.
        """
        return _filter_mask(reader, clause)

    def aggregate(self, reader, aggs_body: dict, mask: np.ndarray | None = None) -> dict:
        """An ES ``aggs`` body run over ``mask``'s rows (all live rows when None); returns the ``aggregations`` object.

        Supported: ``terms`` (``size``, ``min_doc_count``, ``order``), ``date_histogram``
        (``fixed_interval`` / ``calendar_interval``, ``min_doc_count``, ``extended_bounds``),
        ``value_count``, ``cardinality``, ``min``, ``max``, ``sum``, ``avg``; bucket aggregations
        accept sub-aggregations.
        """
        return aggs_module.aggregate(reader, aggs_body, mask)

    def evaluate(self, reader, query: Any, *, scoring: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """``(mask, scores)`` of an ES query (dict or parsed node) over ``reader``'s live rows, dense over rows."""
        node = dsl.parse_query(query) if isinstance(query, dict) else query
        return Evaluator(reader).evaluate(self._with_vectors_node(node), scoring=scoring)

    def top(self, reader, query: Any, k: int, filter_mask: np.ndarray | None = None) -> Ranked:
        """The ``k`` best live rows of any ES query (dict or node), optionally within ``filter_mask``."""
        mask, scores = self.evaluate(reader, query)
        if filter_mask is not None:
            mask = mask & filter_mask
        return top_k(scores, mask, k)

    @staticmethod
    def fuse(rankings: Sequence[Ranked], *, method: str = "rrf", rank_constant: int = dsl.DEFAULT_RANK_CONSTANT,
             weights: Sequence[float] | None = None, normalizers: Sequence[str] | str | None = None,
             window: int | None = None, k: int | None = None) -> Ranked:
        """Fuse rankings of the same reader: ``rrf`` (default, rank constant 60) or ``linear``.

        See :func:`xerj_core.query.fusion.fuse`; an unknown method (``learned``)
        is an IllegalArgument, never a silent substitute.
        """
        return fusion.fuse(rankings, method=method, rank_constant=rank_constant, weights=weights,
                           normalizers=normalizers, window=window, k=k)

    @staticmethod
    def hits(reader, ranked: Ranked, *, source: bool | SourceFilter = True) -> list[dict]:
        """ES-shaped hits (``_index``, ``_id``, ``_score``, ``_source``) of ``ranked`` rows of ``reader``."""
        spec = source if isinstance(source, SourceFilter) else SourceFilter(enabled=bool(source))
        out = []
        reader.prefetch_documents(ranked.rows.tolist())
        for row, score in ranked.pairs():
            found = reader.document(row)
            if found is None:
                continue
            hit = {"_index": reader.name, "_id": found[0], "_score": score}
            if spec.enabled:
                hit["_source"] = filter_source(found[1], spec)
            out.append(hit)
        return out

    # -- internals -------------------------------------------------------------------------------

    def _with_vectors_node(self, node):
        def embed(item):
            if isinstance(item, dsl.Knn) and item.vector is None and item.builder is not None:
                from xerj_core.embedding import get_embedder

                model, text = item.builder
                embedder = get_embedder(self.embedders(), model)
                vector = np.asarray(embedder.embed([text]), np.float32)[0]
                return attrs.evolve(item, vector=tuple(float(x) for x in vector))
            return item

        return None if node is None else dsl.transform(node, embed)

    def _with_vectors(self, request: SearchRequest) -> SearchRequest:
        nodes = [request.query, request.hybrid, request.post_filter, *request.knn]
        if not any(isinstance(n, dsl.Knn) and n.builder is not None
                   for node in nodes if node is not None for n in dsl.walk(node)):
            return request
        return attrs.evolve(
            request, query=self._with_vectors_node(request.query), hybrid=self._with_vectors_node(request.hybrid),
            post_filter=self._with_vectors_node(request.post_filter),
            knn=tuple(self._with_vectors_node(n) for n in request.knn))

    def _top_level_knn(self, request: SearchRequest, readers) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """Per reader, the rows the top-level ``knn`` sections found (ascending) and each one's score: every
        section's score times its boost, summed in section order (each section ranked across all indices)."""
        if not request.knn:
            return None
        found: list[dict[int, float]] = [{} for _ in readers]
        for node in request.knn:
            ranked = self._knn_global(node, readers, node.k or max(request.size, 1))
            for key, score in ranked.pairs():
                summed = found[key >> _ROW_BITS]
                row = key & _ROW_MASK
                summed[row] = summed.get(row, 0.0) + score * node.boost
        out = []
        for summed in found:
            rows = np.array(sorted(summed), np.int64)
            out.append((rows, np.array([summed[row] for row in rows.tolist()], np.float64)))
        return out

    def _knn_global(self, node: dsl.Knn, readers, k: int, shared: list[dict] | None = None, helper=None,
                    scans: list[knn.Scan] | None = None) -> Ranked:
        """A kNN node's best ``k`` over every reader (``scans``: :meth:`_knn_scans` already made)."""
        if scans is None:
            scans = self._knn_scans(node, readers, k, shared)
        return _merge([_keyed(scan.top(helper), index) for index, scan in enumerate(scans)], k)

    @staticmethod
    def _knn_scans(node: dsl.Knn, readers, k: int, shared: list[dict] | None = None) -> list[knn.Scan]:
        """A kNN node's scan planned over each reader: its filter and everything else it reads from the store."""
        if node.vector is None:
            raise IllegalArgument(f"[knn] on field [{node.field}] has no query vector")
        scans = []
        for index, reader in enumerate(readers):
            evaluator = Evaluator(reader, shared=shared[index] if shared is not None else None)
            candidates = evaluator.filter(node.filter) if node.filter else None
            scans.append(knn.Scan(reader, node.field, node.vector, k, candidates, min_similarity=node.similarity))
        return scans

    def _ranked_search(self, request: SearchRequest, readers, sort: tuple[SortKey, ...] | None = None,
                       after: Sequence[Any] | None = None, tiebreak: bool = False):
        need_scores = (sort is None or any(key.field == "_score" for key in sort) or request.track_scores
                       or request.min_score is not None)
        knn_parts = self._top_level_knn(request, readers)
        total = 0
        max_score = None
        contexts = []
        candidates: list[tuple[Any, int, int, float | None, list | None]] = []
        window = request.window
        # kNN sections alone, ranked by score: their rows are the hits, with no per-row arrays over the index (at
        # 100k rows, building them cost a kNN _search about 0.55 ms beyond its scan)
        knn_alone = (knn_parts is not None and request.query is None and sort is None and after is None
                     and not request.aggs and request.post_filter is None and request.min_score is None)
        # The pruned BM25 path ranks by score alone: not for a resumed (search_after, scroll) or sorted page.
        plain_match = self._plain_match(request) if knn_parts is None and sort is None and after is None else None
        for index, reader in enumerate(readers):
            if plain_match is not None and bm25.is_text_field(reader, plain_match[0].field):
                kept = Evaluator(reader).filter(plain_match[1]) if plain_match[1] else None
                ranked, matched = self._match_top(reader, plain_match[0], request, kept)
                contexts.append((reader, None))
                total += matched
                if len(ranked):
                    best = float(ranked.scores[0])
                    max_score = best if max_score is None else max(max_score, best)
                for row, score in ranked.pairs():
                    candidates.append(((-score, index, row), index, row, score, None))
                continue
            if knn_alone:
                rows, scores = knn_parts[index]
                contexts.append((reader, None))
                total += len(rows)
                if len(rows):
                    # as the maximum over every row's score would be: a row not found scores 0
                    best = max(float(scores.max()), 0.0) if len(rows) < reader.n_rows else float(scores.max())
                    max_score = best if max_score is None else max(max_score, best)
                for row, score in select_top(rows, scores, window).pairs():
                    candidates.append(((-score, index, row), index, row, score, None))
                continue
            evaluator = Evaluator(reader, default_knn_k=max(window, 1))
            if request.query is not None:
                mask, scores = evaluator.evaluate(request.query, scoring=need_scores)
            elif knn_parts is not None:
                mask, scores = np.zeros(reader.n_rows, bool), np.zeros(reader.n_rows, np.float64)
            else:
                mask = reader.live.copy()
                scores = mask.astype(np.float64) if need_scores else None
            if knn_parts is not None:
                krows, found = knn_parts[index]
                kmask, kscores = np.zeros(reader.n_rows, bool), np.zeros(reader.n_rows, np.float64)
                kmask[krows], kscores[krows] = True, found
                mask = mask | kmask
                if scores is None:
                    scores = np.zeros(reader.n_rows, np.float64)
                scores = scores + kscores
            if request.min_score is not None:
                mask &= scores >= request.min_score
            contexts.append((reader, mask))
            if request.post_filter is not None:
                mask = mask & evaluator.filter([request.post_filter])
            matched = int(np.count_nonzero(mask))
            total += matched
            if matched and scores is not None and (sort is None or request.track_scores
                                                   or any(k.field == "_score" for k in sort)):
                # Scores are zero outside the query's mask; only a post_filter narrows it further.
                best = float((scores * mask).max() if request.post_filter is not None else scores.max())
                max_score = best if max_score is None else max(max_score, best)
            if window == 0 or matched == 0:
                continue
            if after is not None:
                rows = np.flatnonzero(mask)
                keep = rows[after_mask(reader, rows, scores, sort, after[:len(sort)],
                                       after[-1] if tiebreak else None, index)]
                if not len(keep):
                    continue
                mask = np.zeros(reader.n_rows, bool)
                mask[keep] = True
            if sort is None:
                ranked = top_k(scores, mask, window)
                for row, score in ranked.pairs():
                    candidates.append(((-score, index, row), index, row, score, None))
            else:
                rows, sort_values = sort_rows(reader, np.flatnonzero(mask), scores, sort, window)
                show_scores = scores is not None and (request.track_scores or any(k.field == "_score" for k in sort))
                for row, values in zip(rows.tolist(), sort_values):
                    score = float(scores[row]) if show_scores else None
                    candidates.append(((merge_key(sort, values), index, row), index, row, score, values))
        if len(readers) > 1:
            candidates.sort(key=lambda c: c[0])
        elif sort is None:
            pass  # one index: already ordered by top_k
        page = [(index, row, score, values) for _key, index, row, score, values in
                candidates[request.from_:request.from_ + request.size]]
        if sort is not None and not (request.track_scores or any(k.field == "_score" for k in sort)):
            max_score = None
        if request.size == 0:
            max_score = None
        return page, total, max_score, contexts

    @staticmethod
    def _plain_match(request: SearchRequest) -> tuple[dsl.Match, tuple[dsl.Node, ...]] | None:
        """``(match, filters)`` when the request's query is an ``or`` match ranked by score alone, bare or as a
        ``bool``'s one ``must`` clause beside ``filter`` clauses (which do not score): BM25 can answer it pruned,
        its filters a mask its ranking and count keep to."""
        node, filters = request.query, ()
        if (isinstance(node, dsl.Bool) and len(node.must) == 1 and not node.should and not node.must_not
                and node.minimum_should_match is None and node.boost == 1.0):
            node, filters = node.must[0], node.filter  # scored as the match alone, within the filters
        if (isinstance(node, dsl.Match) and node.operator == "or" and node.minimum_should_match is None
                and node.boost > 0 and bm25.query_terms(node.query) and request.sort is None and not request.aggs
                and request.post_filter is None and request.min_score is None):
            return node, filters
        return None

    @staticmethod
    def _match_top(reader, node: dsl.Match, request: SearchRequest, filter_mask: np.ndarray | None = None
                   ) -> tuple[Ranked, int]:
        """The window's best rows of a plain match (among ``filter_mask``'s) and its hit count, without dense masks
        or a second pass."""
        track = request.track_total_hits  # True: an exact count; False: none is reported, any will do
        return bm25.top_and_count(reader, node.field, bm25.query_terms(node.query), request.window, boost=node.boost,
                                  count_past=0 if track is False else track if type(track) is int else None,
                                  filter_mask=filter_mask)

    def _rank_leg(self, node, readers, window: int, shared: list[dict]) -> tuple[Ranked, list[np.ndarray]]:
        """A leg's global ranking (keys ``index << 40 | row``, top ``window``) and its per-reader matches.

        ``shared`` holds, per reader, the filter masks the legs of one request have computed (one snapshot)."""
        if isinstance(node, dsl.Hybrid):
            legs = self._rank_legs(node.legs, readers, node.rank_window_size, shared)
            fused = fusion.fuse([ranking for ranking, _ in legs], method=node.fusion,
                                rank_constant=node.rank_constant, weights=node.weights,
                                normalizers=node.normalizers or "none", window=node.rank_window_size)
            masks = [np.logical_or.reduce([leg_masks[i] for _, leg_masks in legs]) for i in range(len(readers))]
            return fused.head(window), masks
        if isinstance(node, dsl.Knn):
            return self._rank_knn(node, readers, window, shared)
        parts, masks = [], []
        for index, reader in enumerate(readers):
            mask, scores = Evaluator(reader, default_knn_k=window, shared=shared[index]).evaluate(node)
            masks.append(mask)
            parts.append(_keyed(top_k(scores, mask, window), index))
        return _merge(parts, window), masks

    def _rank_knn(self, node: dsl.Knn, readers, window: int, shared: list[dict], helper=None, scans=None
                  ) -> tuple[Ranked, list[np.ndarray]]:
        """A kNN leg's ranking and matches (see :meth:`_rank_leg`); ``helper`` shares its scan (see knn_top), and
        ``scans`` are its :meth:`_knn_scans` when already made."""
        ranked = self._knn_global(node, readers, _leg_k(node, window), shared, helper, scans)
        masks = [np.zeros(r.n_rows, bool) for r in readers]
        for key in ranked.rows.tolist():
            masks[key >> _ROW_BITS][key & _ROW_MASK] = True
        return ranked, masks

    def _rank_legs(self, nodes, readers, window: int, shared: list[dict]) -> list[tuple[Ranked, list[np.ndarray]]]:
        """Each of a hybrid's legs ranked (see :meth:`_rank_leg`), in order; its kNN legs scan on this thread while
        a spare core runs the others (see :mod:`~xerj_core.query.sidebyside`), else one after another."""
        scans = [i for i, node in enumerate(nodes) if isinstance(node, dsl.Knn)]
        if scans and len(scans) < len(nodes):
            with sidebyside.spare_worker() as submit:
                if submit is not None:
                    return self._legs_side_by_side(nodes, scans, readers, window, shared, submit)
        return [self._rank_leg(node, readers, window, shared) for node in nodes]

    def _legs_side_by_side(self, nodes, scans: list[int], readers, window: int, shared: list[dict],
                           submit) -> list[tuple[Ranked, list[np.ndarray]]]:
        # The scans are planned first (their filter masks, which the other legs share, their vector columns, and
        # the Python that sets up their compiled pass): from then on only the worker reads the snapshot's
        # transaction, and this thread goes straight into the compiled pass, leaving the GIL to the worker.
        planned = {i: self._knn_scans(nodes[i], readers, _leg_k(nodes[i], window), shared) for i in scans}
        others = [i for i in range(len(nodes)) if i not in scans]
        future = submit(lambda: [self._rank_leg(nodes[i], readers, window, shared) for i in others])
        try:  # the worker, done with its legs, then takes runs of the scans' rows too (one thread, in order)
            found = {i: self._rank_knn(nodes[i], readers, window, shared, submit, planned[i]) for i in scans}
        finally:
            failed = future.exception()  # waits: the worker is done with the snapshot before it may close
        if failed is not None:
            raise failed
        found.update(zip(others, future.result()))
        return [found[i] for i in range(len(nodes))]

    def _fused_search(self, request: SearchRequest, readers):
        hybrid = request.hybrid
        ranked, masks = self._rank_leg(hybrid, readers, hybrid.rank_window_size, [{} for _ in readers])
        contexts = [(reader, masks[i]) for i, reader in enumerate(readers)]
        keep = np.ones(len(ranked), bool)
        if request.post_filter is not None:
            post = [Evaluator(r).filter([request.post_filter]) & r.live for r in readers]
            masks = [m & p for m, p in zip(masks, post)]
            keep &= np.array([bool(post[k >> _ROW_BITS][k & _ROW_MASK]) for k in ranked.rows.tolist()], bool)
        if request.min_score is not None:
            keep &= ranked.scores >= request.min_score
        ranked = Ranked(ranked.rows[keep], ranked.scores[keep])
        total = len(ranked) if request.min_score is not None else sum(int(np.count_nonzero(m)) for m in masks)
        page = [(key >> _ROW_BITS, key & _ROW_MASK, score, None)
                for key, score in ranked.pairs()[request.from_:request.from_ + request.size]]
        max_score = float(ranked.scores[0]) if len(ranked) and request.size else None
        return page, total, max_score, contexts

    @staticmethod
    def _render_hit(reader, row: int, score: float | None, sort_values: list | None,
                    request: SearchRequest) -> dict:
        if request.source.enabled or request.highlight is not None:
            found = reader.document(row)
            doc_id, source, version = found if found is not None else (reader.id_of(row), None, None)
        else:  # the source is not shown: its JSON (a vector's hundreds of numbers, say) is not decoded
            header = reader.document_header(row)
            (doc_id, version), source = header if header is not None else (None, None), None
        hit: dict[str, Any] = {"_index": reader.name, "_id": doc_id, "_score": score}
        if request.version:
            hit["_version"] = version
        if request.source.enabled and source is not None:
            hit["_source"] = filter_source(source, request.source)
        if sort_values is not None:
            hit["sort"] = sort_values
        if request.highlight is not None and source is not None:
            marked = highlight_hit(source, request.highlight, query_terms(request.query, request.hybrid))
            if marked:
                hit["highlight"] = marked
        return hit


# Documents a delete by query deletes per write transaction (its ``scroll_size``), as Elasticsearch's batches.
DELETE_BATCH = 1000
# Parameters of Elasticsearch's _delete_by_query that change nothing here: every write is committed, and visible,
# when it returns, on one node.
_DELETE_IGNORED = ("refresh", "timeout", "wait_for_active_shards", "scroll", "slices", "requests_per_second",
                   "search_timeout", "routing")


def _positive_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise IllegalArgument(f"[{what}] must be a whole number, got [{value}]") from None
    if number < 1 or isinstance(value, bool):
        raise IllegalArgument(f"[{what}] must be greater than 0, got [{value}]")
    return number


def _delete_unchanged(txn, items: Sequence[tuple[str, str, int]]) -> tuple[int, list[tuple[str, str, int]]]:
    """Delete each ``(index, _id, version)`` whose document still has that version: ``(deleted, the others)``."""
    deleted, changed = 0, []
    for name, doc_id, version in items:
        target = txn.index(name)
        row = target.row_of(doc_id)
        if row is None or target.version_of(row) != version:
            changed.append((name, doc_id, version))
            continue
        target.delete(doc_id)
        deleted += 1
    return deleted, changed


def _total(total: int, request: SearchRequest) -> Any:
    track = request.track_total_hits
    if track is False:
        return -1 if request.total_as_int else None
    if track is True or total <= track:
        body = {"value": total, "relation": "eq"}
    else:
        body = {"value": int(track), "relation": "gte"}
    return body["value"] if request.total_as_int else body
