"""Engine-level search: the ES query DSL subset, BM25, exact kNN, fusion, aggregations, index resolution.

Modules: ``dsl`` (parse → nodes), ``evaluate`` (masks and scores over a reader),
``bm25``, ``knn``, ``fusion``, ``aggs``, ``ranking`` (top-k, :class:`Ranked`),
``postings`` (segment and incremental tail postings), ``request`` / ``results``
(request parsing, sorting, ``_source``), ``resolve`` (the one index-expression
resolver) and ``service`` (:class:`SearchService`, ``engine.search``).
"""
