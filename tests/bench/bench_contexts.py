"""Paging benchmark: reading a whole index by scroll, by search_after (plain and in a point in time), against
from/size pages of the same size as the baseline, in one run; and a delete while a point in time pins the index
against a delete without one.

Run: python tests/bench/bench_contexts.py [--docs 20000] [--page 500]

Every reader reads the same ``--docs`` documents (a long ``n`` and a keyword) in
pages of ``--page`` hits sorted by ``n``. from/size can only reach the first
10,000 hits (Elasticsearch's result window), so its per-page cost is measured on
those and the others are reported per page as well. A scroll page and a
point-in-time page include the LMDB write that records the context's cursor or
keep-alive. Timings are the best of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from xerj_core.query.service import SearchService
from xerj_core.store import BulkOp, Store


class _Engine:
    def __init__(self, store: Store) -> None:
        self.store, self.pm, self.embedders = store, None, {}


def _best(rounds: int, run) -> tuple[float, int]:
    best, pages = float("inf"), 0
    for _ in range(rounds):
        started = time.perf_counter()
        pages = run()
        best = min(best, time.perf_counter() - started)
    return best, pages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "data", sync=False)
        store.create_index("docs", {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"}}})
        for start in range(0, args.docs, 5000):
            store.bulk([BulkOp("index", "docs", str(n), {"n": n, "tag": f"t{n % 50}"})
                        for n in range(start, min(start + 5000, args.docs))])
        search = SearchService(_Engine(store))
        body = {"size": args.page, "sort": [{"n": "asc"}]}

        def from_size() -> int:
            pages = 0
            for start in range(0, min(args.docs, 10_000), args.page):
                assert search.search("docs", {**body, "from": start})["hits"]["hits"]
                pages += 1
            return pages

        def scroll() -> int:
            page = search.search("docs", body, params={"scroll": "1m"})
            pages = 1
            while True:
                page = search.scroll(page["_scroll_id"], scroll="1m")
                if not page["hits"]["hits"]:
                    break
                pages += 1
            search.contexts.close([page["_scroll_id"]], None, "scroll")
            return pages

        def search_after(pit: bool) -> int:
            pit_id = search.contexts.open("pit", ["docs"], None, 60_000)[0] if pit else None
            after, pages = None, 0
            while True:
                page_body = dict(body)
                if pit_id:
                    page_body["pit"] = {"id": pit_id, "keep_alive": "1m"}
                if after is not None:
                    page_body["search_after"] = after
                hits = search.search(None if pit else "docs", page_body)["hits"]["hits"]
                if not hits:
                    break
                pages += 1
                after = hits[-1]["sort"]
            if pit_id:
                search.contexts.close([pit_id], None, "pit")
            return pages

        baseline, base_pages = _best(args.rounds, from_size)
        per_page = baseline / base_pages
        print(f"{args.docs} documents, pages of {args.page} sorted by n (best of {args.rounds})")
        print(f"{'reader':28} {'pages':>6} {'ms/page':>9} {'vs from/size':>13}")
        print(f"{'from/size (first 10k, base)':28} {base_pages:6d} {per_page * 1000:9.2f} {1.0:13.2f}")
        for name, run in (("scroll", scroll), ("search_after", lambda: search_after(False)),
                          ("search_after in a PIT", lambda: search_after(True))):
            seconds, pages = _best(args.rounds, run)
            print(f"{name:28} {pages:6d} {seconds / pages * 1000:9.2f} {seconds / pages / per_page:13.2f}")

        deletes = min(2000, args.docs // 4)

        def delete_run(pinned: bool, offset: int) -> float:
            pit_id = search.contexts.open("pit", ["docs"], None, 60_000)[0] if pinned else None
            started = time.perf_counter()
            for n in range(offset, offset + deletes):
                store.delete("docs", str(n))
            took = time.perf_counter() - started
            if pit_id:
                search.contexts.close([pit_id], None, "pit")
            return took

        plain = delete_run(False, 0)
        pinned = delete_run(True, deletes)
        print(f"{deletes} single deletes: {plain / deletes * 1e6:.0f} us each unpinned (base), "
              f"{pinned / deletes * 1e6:.0f} us each while a PIT keeps sources aside ({pinned / plain:.2f}x)")
        store.close()


if __name__ == "__main__":
    main()
