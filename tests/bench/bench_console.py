"""Console benchmark: the map's time to first render at 500, 2,000 and 10,000 nodes in headless Chromium,
and the console's data calls (session cookie + CSRF header) against the same API calls made with the key.

Run: python tests/bench/bench_console.py [--repeat R]

Each brain is a ring over N nodes plus 2N random chords (capped at the map's 10,000 edges). The first
visit computes the ForceAtlas2 layout; the second reuses the cached one. Target from the console issue:
the 2,000-node map interactive (sigma drawn, handlers bound) within 2 s on this machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.test_http_serve import Server  # noqa: E402
from xerj_core.engine import Engine  # noqa: E402
from xerj_core.model import EdgeDraft, Evidence  # noqa: E402
from xerj_core.plugins import get_plugin_manager  # noqa: E402

SIZES = (500, 2000, 10_000)
TYPES = ["wikilink", "mdlink", "sequence", "same_dir", "shared_term"]
CAP = 10_000
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def build(data: Path) -> None:
    rng = np.random.default_rng(7)
    with Engine(data, get_plugin_manager()) as engine:
        for n in SIZES:
            edges = min(CAP, 3 * n)
            drafts = []
            for i in range(edges):
                src = i % n
                dst = (src + 1) % n if i < n else int(rng.integers(0, n))
                if dst == src:
                    dst = (src + 2) % n
                kind = TYPES[i % len(TYPES)]
                drafts.append(EdgeDraft(f"n{src}", f"n{dst}", kind, f"{kind}@1", 1.0, 0.9, 1_735_689_600_000 + i,
                                        Evidence(f"n{src} cites n{dst}", f"n{src}.md", 0)))
            engine.graph.write_edges(f"map{n}", drafts, created_at=1_735_689_600_000)


def call(port: int, path: str, body: dict, headers: dict) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
    conn.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        build(data)
        server = Server(data, Path(tmp) / "serve.log", workers=1, insecure=False)
        try:
            admin = server.headers
            conn = http.client.HTTPConnection("127.0.0.1", server.port)
            conn.request("POST", "/_xerj-console/api/session",
                         body=json.dumps({"api_key": admin["Authorization"].split(" ", 1)[1]}),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            session = json.loads(resp.read())
            console = {"Cookie": resp.getheader("Set-Cookie").split(";")[0], "X-XERJ-CSRF": session["csrf"]}
            print("console benchmark (the machine is shared with other jobs: compare ratios within this run)")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{server.port}/_xerj-console/")
                page.fill("[data-testid=api-key]", admin["Authorization"].split(" ", 1)[1])
                page.click("form[data-testid=sign-in] button")
                page.wait_for_function("window.xerjConsole.session && window.xerjConsole.session.signed_in")
                for n in SIZES:
                    figures = []
                    for visit in ("first (layout computed)", "second (layout cached)"):
                        page.goto(f"http://127.0.0.1:{server.port}/_xerj-console/#/corpus")
                        started = time.perf_counter()
                        page.goto(f"http://127.0.0.1:{server.port}/_xerj-console/#/map?brain=map{n}")
                        page.wait_for_function(f"window.xerjConsole.map && window.xerjConsole.map.brain === 'map{n}'"
                                               " && window.xerjConsole.map.ready", timeout=300_000)
                        wall = time.perf_counter() - started
                        state = page.evaluate("({n: xerjConsole.map.nodes, e: xerjConsole.map.edges,"
                                              " ms: xerjConsole.map.render_ms, cached: xerjConsole.map.layout_cached})")
                        figures.append(f"{visit}: {wall:.2f} s wall, {state['ms'] / 1000:.2f} s in page")
                    print(f"map {state['n']:>6,} nodes {state['e']:>6,} edges: " + "; ".join(figures)
                          + ("  [target: interactive < 2 s]" if n == 2000 else ""))
                browser.close()
            for n in SIZES:
                body = {"size": CAP, "track_total_hits": True, "_source": ["src", "dst", "type", "trust", "confidence"],
                        "query": {"bool": {"must": [{"exists": {"field": "src"}}]}}}
                path = f"/.xerj-memory-map{n}-edges/_search"
                direct = statistics.median(call(server.port, path, body, admin) for _ in range(args.repeat))
                via = statistics.median(call(server.port, path, body, console) for _ in range(args.repeat))
                print(f"edges call map{n}: direct (ApiKey) {direct * 1000:.1f} ms, console session {via * 1000:.1f} ms, "
                      f"ratio {via / direct:.2f}x")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
