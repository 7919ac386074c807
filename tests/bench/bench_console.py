"""Console benchmark: the map's time to first render at 500, 2,000 and 10,000 nodes in headless Chromium,
and the console's data calls (session cookie + CSRF header) against the same API calls made with the key.

Run: python tests/bench/bench_console.py [--repeat R]

Each brain is a ring over N nodes plus 2N random chords (capped at the map's 10,000 edges). Per size, in one
browser and one run:
- worker (the console's default): the map is drawn at once on a seed layout and ForceAtlas2 runs in a Web
  Worker; "interactive" is sigma drawn with its handlers bound, "settled" is the worker's layout applied.
- inline (the baseline, ``#/map?layout=inline``, the console's previous behaviour): ForceAtlas2 on the page's
  main thread before the first draw.
- cached: a second visit reusing the layout.
The longest main-thread task (PerformanceObserver "longtask") during each visit says whether the page stayed
responsive. Target from the console issue: the 2,000-node map interactive within 2 s on this machine.
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
# WebGL on SwiftShader in Chromium's GPU process (no GPU here): drawing stays off the page's main thread as it
# would with a GPU. With --disable-gpu (the browser tests' flags) every sigma frame is rasterised on the main
# thread and one frame of a 6,000-edge map blocks it for about a second on this machine.
ARGS = ["--headless", "--no-sandbox", "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def call(port: int, method: str, path: str, body: dict | None, headers: dict) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
    conn.close()
    return time.perf_counter() - started


LONGTASKS = """
window.__longtasks = [];
try {
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longtasks.push(e.duration); })
    .observe({ entryTypes: ["longtask"] });
} catch (error) { window.__longtasks = null; }
"""


def visit(page, root: str, n: int, inline: bool, fresh: bool) -> dict:
    """One visit to map{n}: wall and in-page times, the longest main-thread task, the layout used."""
    if fresh:  # a full reload with no cached layout
        page.goto(f"{root}?fresh={time.monotonic_ns()}#/corpus")
        page.wait_for_function("window.xerjConsole && window.xerjConsole.page === 'corpus'")
        page.evaluate("sessionStorage.clear()")
    else:
        page.goto(f"{root}#/corpus")
    page.evaluate("window.__longtasks && (window.__longtasks.length = 0)")
    started = time.perf_counter()
    page.goto(f"{root}#/map?brain=map{n}" + ("&layout=inline" if inline else ""))
    page.wait_for_function(f"window.xerjConsole.map && window.xerjConsole.map.brain === 'map{n}'"
                           " && window.xerjConsole.map.ready", timeout=300_000, polling=20)
    interactive = time.perf_counter() - started
    page.wait_for_function("window.xerjConsole.map.layout_done === true", timeout=300_000, polling=20)
    settled = time.perf_counter() - started
    page.wait_for_timeout(100)  # let the observer deliver the last entries
    state = page.evaluate("({n: xerjConsole.map.nodes, e: xerjConsole.map.edges, render: xerjConsole.map.render_ms,"
                          " fetch: xerjConsole.map.fetch_ms, layout: xerjConsole.map.layout,"
                          " layout_ms: xerjConsole.map.layout_ms, longest: Math.max(0, ...(window.__longtasks || [0]))})")
    return {"interactive": interactive, "settled": settled, **state}


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
            encoded = admin["Authorization"].split(" ", 1)[1]
            conn = http.client.HTTPConnection("127.0.0.1", server.port)
            conn.request("POST", "/_xerj-console/api/session", body=json.dumps({"api_key": encoded}),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            session = json.loads(resp.read())
            console = {"Cookie": resp.getheader("Set-Cookie").split(";")[0], "X-XERJ-CSRF": session["csrf"]}
            root = f"http://127.0.0.1:{server.port}/_xerj-console/"
            print("console benchmark (the machine is shared with other jobs: compare ratios within this run)")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})  # to read app state
                context.add_init_script(LONGTASKS)
                page = context.new_page()
                page.goto(root)
                page.fill("[data-testid=api-key]", encoded)
                page.click("form[data-testid=sign-in] button")
                page.wait_for_function("window.xerjConsole.session && window.xerjConsole.session.signed_in")
                for n in SIZES:
                    inline = visit(page, root, n, inline=True, fresh=True)
                    worker = visit(page, root, n, inline=False, fresh=True)
                    cached = visit(page, root, n, inline=False, fresh=False)
                    assert worker["layout"] == "worker", worker
                    print(f"map {worker['n']:>6,} nodes {worker['e']:>6,} edges"
                          + ("   [target: interactive < 2 s]" if n == 2000 else ""))
                    print(f"  inline (baseline): interactive {inline['interactive']:.2f} s"
                          f" (in page {inline['render'] / 1000:.2f} s, layout {inline['layout_ms'] / 1000:.2f} s),"
                          f" longest main-thread task {inline['longest']:.0f} ms")
                    print(f"  worker:            interactive {worker['interactive']:.2f} s"
                          f" (in page {worker['render'] / 1000:.2f} s), settled {worker['settled']:.2f} s"
                          f" (worker layout {worker['layout_ms'] / 1000:.2f} s), longest main-thread task {worker['longest']:.0f} ms")
                    print(f"  cached:            interactive {cached['interactive']:.2f} s, longest task {cached['longest']:.0f} ms")
                    print(f"  ratio worker/inline: interactive {worker['interactive'] / inline['interactive']:.2f},"
                          f" longest task {worker['longest'] / max(1.0, inline['longest']):.2f},"
                          f" settled {worker['settled'] / inline['interactive']:.2f}")
                browser.close()
            for n in SIZES:
                edges_path = f"/.xerj-memory-map{n}-edges/_search"
                calls = [
                    ("map edges", "POST", edges_path, {
                        "size": CAP, "track_total_hits": True, "_source": ["src", "dst", "type", "trust"],
                        "query": {"bool": {"must": [{"exists": {"field": "src"}}],
                                           "must_not": [{"exists": {"field": "invalid_at"}}]}}}),
                    ("overview", "GET", f"/_graph/map{n}/overview", None),
                    ("ego", "GET", f"/_graph/map{n}/ego?node=n0&hops=1&direction=both&include_evidence=true", None),
                    ("review page", "GET", f"/_graph/map{n}/_review?state=detected&size=20", None),
                ]
                for name, method, path, body in calls:
                    call(server.port, method, path, body, admin)  # warm the caches both ways share
                    direct, via = [], []
                    for _ in range(args.repeat):  # alternated, so load from other jobs hits both alike
                        direct.append(call(server.port, method, path, body, admin))
                        via.append(call(server.port, method, path, body, console))
                    direct, via = statistics.median(direct), statistics.median(via)
                    print(f"{name:<11} map{n:<6}: direct (ApiKey) {direct * 1000:7.1f} ms, console session "
                          f"{via * 1000:7.1f} ms, ratio {via / direct:.2f}x")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
