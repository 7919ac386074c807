"""The console in headless Chromium (Playwright) against a real, secured ``xerj serve`` over the Foam corpus.

Screenshots of every page land in ``tests/screenshots/`` (gitignored) for a person to look at.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from xerj_core.cli import build_cli
from xerj_core.plugins import get_plugin_manager

from .conftest import CORPORA
from .test_autoindex import copy_corpus
from .test_http_serve import Server, request

FOAM = CORPORA / "foam-docs"
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).with_name("screenshots")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Each payload sets a different flag if it ever runs; the tests assert none of them is set.
XSS_TITLE = '<img src=x onerror="window.__xss=1">Hostile note'
XSS_BODY = '<script>window.__xss=2</script> links to [[wikilinks]] <img src=y onerror="window.__xss=4">'
XSS_MEMORY = '<img src=x onerror="window.__xss=3"> remember the hostile memory'

pytestmark = [
    pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A secured server over a copy of Foam plus one hostile note, indexed into brain ``foam``."""
    root = tmp_path_factory.mktemp("console")
    folder = copy_corpus(FOAM, root / "foam-docs")
    (folder / "hostile.md").write_text(f"# {XSS_TITLE}\n\n{XSS_BODY}\n", encoding="utf-8")
    data = root / "data"
    result = CliRunner().invoke(build_cli(get_plugin_manager()),
                                ["autoindex", str(folder), "--data-dir", str(data), "--brain", "foam", "--json"])
    assert result.exit_code == 0, result.output
    server = Server(data, root / "serve.log", workers=1, insecure=False)
    status, body = request(server.port, "POST", "/_memory/hostile", {"text": XSS_MEMORY}, headers=server.headers)
    assert status in (200, 201), body
    server.memory_id = body["_id"]
    yield server
    server.stop()


def mint(server, names: list[str]) -> str:
    status, body = request(server.port, "POST", "/_security/api_key", {
        "name": "console-" + "-".join(n.strip("*.") or "x" for n in names)[:40],
        "role_descriptors": {"r": {"indices": [{"names": names, "privileges": ["read"]}]}}},
        headers=server.headers)
    assert status == 200, body
    return body["encoded"]


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    # bypass_csp lets the test read app state with evaluate(); it also means the XSS test shows that
    # escaping alone stops the payloads, with the console's CSP switched off.
    context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def base(server) -> str:
    return f"http://127.0.0.1:{server.port}/_xerj-console/"


def sign_in(page, server, key: str) -> None:
    page.goto(base(server))
    page.wait_for_selector("[data-testid=api-key]")
    page.fill("[data-testid=api-key]", key)
    page.click("form[data-testid=sign-in] button")
    page.wait_for_function("window.xerjConsole.session && window.xerjConsole.session.signed_in")


FOAM_READ = ["ax-*", "autoindex-catalog", ".xerj-memory-foam-edges"]


def test_sign_in_with_a_scoped_key_sets_an_httponly_strict_cookie(page, served):
    page.goto(base(served))
    page.wait_for_selector("[data-testid=api-key]")
    shot(page, "sign-in")
    sign_in(page, served, mint(served, FOAM_READ))
    cookie = next(c for c in page.context.cookies() if c["name"] == "xerj_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # the page's scripts cannot read it
    assert "signed in as console-" in page.inner_text("[data-testid=mode]")


def test_a_wrong_key_is_refused_and_no_session_starts(page, served):
    page.goto(base(served))
    page.wait_for_selector("[data-testid=api-key]")
    page.fill("[data-testid=api-key]", "bm90OmFrZXk=")
    page.click("form[data-testid=sign-in] button")
    page.wait_for_selector("text=Sign-in refused")
    assert not [c for c in page.context.cookies() if c["name"] == "xerj_console"]


def test_the_corpus_page_shows_a_card_per_dataset(page, served):
    sign_in(page, served, mint(served, FOAM_READ))
    page.wait_for_selector("[data-testid=dataset-card]")
    cards = page.locator("[data-testid=dataset-card]")
    assert cards.count() == 1
    text = cards.first.inner_text()
    dataset = dataset_of(served)
    files = request(served.port, "POST", f"/{dataset}/_count", {"query": {"term": {"kind": "file"}}},
                    headers=served.headers)[1]["count"]
    assert files >= 87 and f"{files} files" in text
    assert "ax-notes-" in text and "documents" in text and "brain foam" in text
    shot(page, "corpus")


def test_a_key_that_reads_no_catalog_sees_the_refusal_not_an_empty_node(page, served):
    sign_in(page, served, mint(served, ["ax-*"]))
    page.wait_for_selector("[data-testid=refused]")
    assert "[read]" in page.inner_text("[data-testid=refused]")


def test_search_shows_highlighted_snippets(page, served):
    sign_in(page, served, mint(served, FOAM_READ))
    page.goto(base(served) + "#/search?q=wikilinks")
    page.wait_for_selector("[data-testid=snippet] mark")
    marks = page.locator("[data-testid=result] mark").all_inner_texts()
    assert marks and all(m.lower() == "wikilinks" for m in marks)
    state = page.evaluate("window.xerjConsole.search")
    assert state["hits"] == 10 and state["highlighted"] >= 1 and state["total"] > 10
    shot(page, "search")


def test_the_search_box_reads_a_query_string(page, served):
    """A wildcard, a phrase and an apostrophe, as people type them; a double quote left open is the server's 400
    shown, not an empty page."""
    sign_in(page, served, mint(served, FOAM_READ))
    page.goto(base(served) + "#/search?q=wikilinks")
    page.wait_for_function("window.xerjConsole.search && window.xerjConsole.search.q === 'wikilinks'")
    plural = page.evaluate("window.xerjConsole.search.total")
    page.goto(base(served) + "#/search?q=wikilink*")
    page.wait_for_function("window.xerjConsole.search && window.xerjConsole.search.q === 'wikilink*'")
    page.wait_for_selector("[data-testid=snippet] mark")
    marks = {m.lower() for m in page.locator("[data-testid=result] mark").all_inner_texts()}
    assert marks and all(m.startswith("wikilink") for m in marks)
    assert page.evaluate("window.xerjConsole.search.total") > plural  # "wikilink" too
    page.goto(base(served) + '#/search?q="graph view" -wikilinks')
    page.wait_for_function("window.xerjConsole.search && window.xerjConsole.search.q.startsWith('\"graph')")
    page.wait_for_selector("[data-testid=snippet] mark")
    texts = [m.lower() for m in page.locator("[data-testid=result] mark").all_inner_texts()]
    assert texts and set(texts) <= {"graph", "view"}
    page.goto(base(served) + "#/search?q=what's the graph")
    page.wait_for_function("window.xerjConsole.search && window.xerjConsole.search.q.startsWith('what')")
    assert page.evaluate("window.xerjConsole.search.total") > 0
    page.goto(base(served) + '#/search?q="graph view')
    page.wait_for_selector("[data-testid=results] >> text=double quote is not closed")
    assert not page.errors


def test_the_reader_shows_a_notes_wikilinks_with_their_quotes(page, served):
    sign_in(page, served, mint(served, FOAM_READ))
    status, body = request(served.port, "POST", "/autoindex-catalog/_search", {"size": 100}, headers=served.headers)
    dataset = next(h["_source"]["dataset"] for h in body["hits"]["hits"] if h["_source"].get("kind") == "dataset")
    page.goto(base(served) + f"#/reader?index={dataset}&id=user%2Ffeatures%2Fwikilinks.md%23related&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready")
    assert page.inner_text("[data-testid=record-title]") == "Wikilinks"
    groups = page.locator("[data-testid=link-group]").all_text_contents()
    assert any(g.startswith("wikilink") for g in groups)
    quotes = page.locator("[data-testid=quote]").all_inner_texts()
    assert "“- [[templates]] - Creating new notes”" in quotes
    assert page.locator("[data-testid=why]").first.inner_text().startswith("WHY — ")
    shot(page, "reader")
    # clicking a link opens that record
    page.click("[data-testid=link] a >> text=user/features/templates.md")
    page.wait_for_function("window.xerjConsole.reader.id === 'user/features/templates.md' && window.xerjConsole.reader.ready")


def test_the_reader_of_a_note_lists_the_links_its_sections_hold(page, served):
    """A note's links sit on its sections: the file's record lists them as its own, each naming its section."""
    sign_in(page, served, mint(served, FOAM_READ))
    page.goto(base(served) + f"#/reader?index={dataset_of(served)}&id=user%2Ffeatures%2Fwikilinks.md&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready"
                           " && window.xerjConsole.reader.id === 'user/features/wikilinks.md'")
    link = page.locator("[data-testid=link]", has=page.locator("a >> text=user/features/templates.md"))
    assert link.count() >= 1
    assert link.first.inner_text().startswith("→ user/features/templates.md (#related)")
    assert "“- [[templates]] - Creating new notes”" in link.first.inner_text()


def test_the_reader_names_the_missing_privilege_when_the_links_are_refused(page, served):
    sign_in(page, served, mint(served, ["ax-*", "autoindex-catalog"]))
    status, body = request(served.port, "POST", "/autoindex-catalog/_search", {"size": 100}, headers=served.headers)
    dataset = next(h["_source"]["dataset"] for h in body["hits"]["hits"] if h["_source"].get("kind") == "dataset")
    page.goto(base(served) + f"#/reader?index={dataset}&id=user%2Ffeatures%2Fwikilinks.md%23related&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready")
    refusal = page.inner_text("[data-testid=links] [data-testid=refused]")
    assert "refused" in refusal and "[read]" in refusal and ".xerj-memory-foam-edges" in refusal
    assert "no links" not in refusal.lower()
    assert page.evaluate("window.xerjConsole.reader.links") == "refused"


def test_an_asserted_link_without_evidence_says_so(page, served):
    status, body = request(served.port, "POST", "/_graph/foam/link",
                           {"src": "user/features/tags.md", "dst": "user/features/templates.md", "type": "see_also"},
                           headers=served.headers)
    assert status in (200, 201), body
    sign_in(page, served, mint(served, FOAM_READ))
    status, body = request(served.port, "POST", "/autoindex-catalog/_search", {"size": 100}, headers=served.headers)
    dataset = next(h["_source"]["dataset"] for h in body["hits"]["hits"] if h["_source"].get("kind") == "dataset")
    page.goto(base(served) + f"#/reader?index={dataset}&id=user%2Ffeatures%2Ftags.md&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready")
    assert "no evidence recorded — asserted, not detected" in page.locator("[data-testid=no-evidence]").all_inner_texts()


def test_the_map_draws_the_brain_and_reports_its_counts(page, served):
    sign_in(page, served, mint(served, FOAM_READ))
    page.goto(base(served) + "#/map?brain=foam")
    page.wait_for_function("window.xerjConsole.map && window.xerjConsole.map.ready", timeout=60_000)
    state = page.evaluate("({nodes: xerjConsole.map.nodes, edges: xerjConsole.map.edges,"
                          " total: xerjConsole.map.total_edges, capped: xerjConsole.map.capped})")
    status, overview = request(served.port, "GET", "/_graph/foam/overview", headers=served.headers)
    assert state["edges"] == state["total"] == overview["edges"]["live"]
    assert 500 <= state["nodes"] <= overview["nodes"]["total"] and state["capped"] is False
    assert page.evaluate("xerjConsole.map.hubs") >= 1  # the overview's hubs are labelled landmarks
    assert page.locator("[data-testid=map] canvas").count() >= 1
    assert not page.errors
    shot(page, "map")
    # the layout is computed once (in a worker, after the first draw): a second visit reuses it
    page.wait_for_function("window.xerjConsole.map.layout_done === true", timeout=60_000)
    assert page.evaluate("xerjConsole.map.layout") == "worker", page.evaluate("xerjConsole.map.worker_error")
    assert page.inner_text("[data-testid=map-layout]") == "layout: computed in a worker"
    page.goto(base(served) + "#/corpus")
    page.goto(base(served) + "#/map?brain=foam")
    page.wait_for_function("window.xerjConsole.map && window.xerjConsole.map.ready && window.xerjConsole.map.brain")
    assert page.evaluate("xerjConsole.map.layout_cached") is True


def test_nothing_hostile_runs_from_a_note_or_a_memory(page, served):
    sign_in(page, served, mint(served, [*FOAM_READ, ".xerj-memory-hostile"]))
    status, body = request(served.port, "POST", "/autoindex-catalog/_search", {"size": 100}, headers=served.headers)
    dataset = next(h["_source"]["dataset"] for h in body["hits"]["hits"] if h["_source"].get("kind") == "dataset")
    page.goto(base(served) + "#/search?q=hostile")
    page.wait_for_selector("[data-testid=result]")
    page.goto(base(served) + f"#/reader?index={dataset}&id=hostile.md&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready")
    assert XSS_TITLE in page.inner_text("[data-testid=record-title]")  # shown as text
    page.goto(base(served) + f"#/reader?index=.xerj-memory-hostile&id={served.memory_id}")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready && "
                           "window.xerjConsole.reader.index === '.xerj-memory-hostile'")
    assert XSS_MEMORY in page.inner_text("[data-testid=record]")
    # the review queue shows the hostile note's title and text in its previews and its name in evidence
    page.goto(base(served) + "#/review?brain=foam")
    page.wait_for_function("window.xerjConsole.review && window.xerjConsole.review.ready")
    page.select_option("[data-testid=review-type]", "same_dir")  # the type filter re-opens the queue
    page.wait_for_function("window.xerjConsole.review.ready && location.hash.includes('type=same_dir')")
    previews = " ".join(page.locator("[data-testid=preview]").all_inner_texts())
    assert XSS_TITLE in previews and "<script>window.__xss=2</script>" in previews
    page.wait_for_timeout(300)  # give a stray onerror a chance to fire
    assert page.evaluate("window.__xss") is None
    assert page.locator("#page img, #page script").count() == 0
    shot(page, "xss")


def test_the_static_files_are_served_without_a_key_and_the_api_is_not(served):
    status, text = request(served.port, "GET", "/_xerj-console/")
    assert status == 200 and "app.js" in text
    assert request(served.port, "GET", "/_search")[0] == 401
    # a forged cookie is refused, and a good cookie without its CSRF header is refused
    assert request(served.port, "GET", "/_search", headers={"Cookie": "xerj_console=a.1.b.c"})[0] == 401
    manifest = json.loads(Path(__file__).parents[1].joinpath(
        "plugins/xerj_console/static/vendor/manifest.json").read_text())
    assert {v["name"] for v in manifest["vendored"]} == {"sigma", "graphology", "graphology-library"}


def test_an_empty_open_mode_node_shows_the_one_command_and_says_open_mode(page, tmp_path):
    server = Server(tmp_path / "data", tmp_path / "serve.log", workers=1)
    try:
        page.goto(base(server))
        page.wait_for_selector("[data-testid=empty-corpus]")
        assert "xerj brain ~/notes" in page.inner_text("[data-testid=empty-corpus]")
        assert page.inner_text("[data-testid=mode]") == "open mode: no sign-in, every caller is the superuser"
        assert page.locator("[data-testid=api-key]").count() == 0
        shot(page, "corpus-empty-open-mode")
    finally:
        server.stop()


# -- the review queue, the guest view, the as_of slider ---------------------------------------------

# Notes other tests read links of: the tests below retire or review no edge touching them.
PROTECTED = {"user/features/wikilinks.md#related", "user/features/templates.md", "user/features/tags.md", "hostile.md"}
WRITE_CONTROLS = ("[data-testid=approve], [data-testid=reject], [data-testid=approve-selected], "
                  "[data-testid=reject-selected], [data-testid=review-note], form[method=post], form[method=POST]")


def mint_grants(server, name: str, indices: list[dict]) -> str:
    status, body = request(server.port, "POST", "/_security/api_key",
                           {"name": name, "role_descriptors": {"r": {"indices": indices}}}, headers=server.headers)
    assert status == 200, body
    return body["encoded"]


def ego(server, node: str, **params) -> list[dict]:
    from urllib.parse import urlencode
    query = urlencode({"node": node, "hops": 1, "direction": "both", **params})
    status, body = request(server.port, "GET", f"/_graph/foam/ego?{query}", headers=server.headers)
    assert status == 200, body
    return body["edges"]


def dataset_of(server) -> str:
    status, body = request(server.port, "POST", "/autoindex-catalog/_search", {"size": 100}, headers=server.headers)
    return next(h["_source"]["dataset"] for h in body["hits"]["hits"] if h["_source"].get("kind") == "dataset")


def test_the_review_queue_approves_one_edge_and_rejects_another_and_ego_changes(page, served):
    reviewer = mint_grants(served, "console-reviewer", [
        {"names": FOAM_READ, "privileges": ["read"]},
        {"names": [".xerj-memory-foam-edges"], "privileges": ["write"]}])
    sign_in(page, served, reviewer)
    page.goto(base(served) + "#/review?brain=foam")
    page.wait_for_function("window.xerjConsole.review && window.xerjConsole.review.ready", timeout=60_000)
    queue = page.evaluate("xerjConsole.review.items")
    status, listed = request(served.port, "GET", "/_graph/foam/_review?size=20", headers=served.headers)
    assert queue == [item["edge_id"] for item in listed["items"]]  # least confident first, the route's order
    confidences = [item["confidence"] for item in listed["items"]]
    assert confidences == sorted(confidences)
    items = {item["edge_id"]: item for item in listed["items"]}
    chosen = [e for e in queue if not {items[e]["src"], items[e]["dst"]} & PROTECTED]
    approve, reject = chosen[0], chosen[1]
    a, r = items[approve], items[reject]
    row = page.locator(f"[data-testid=review-item][data-edge-id='{approve}']")
    assert row.locator("[data-testid=why], [data-testid=quote], [data-testid=no-evidence]").count() == 1
    assert row.locator("[data-testid=preview]").count() == 2
    assert any(e["edge_id"] == approve and e["trust"] == "detected" for e in ego(served, a["src"]))
    assert any(e["edge_id"] == reject for e in ego(served, r["src"]))
    shot(page, "review")
    # approve one with its button
    row.locator("[data-testid=approve]").click()
    page.wait_for_function("window.xerjConsole.review.ready && window.xerjConsole.review.last"
                           " && window.xerjConsole.review.last.approved === 1")
    assert page.evaluate("xerjConsole.review.last.reviewed_by") == "console-reviewer"
    assert approve not in page.evaluate("xerjConsole.review.items")
    # reject the other with the keyboard: j moves down to it, r rejects it
    position = page.evaluate("xerjConsole.review.items").index(reject)
    page.locator("body").click(position={"x": 5, "y": 5})
    for _ in range(position):
        page.keyboard.press("j")
    page.wait_for_function(f"window.xerjConsole.review.current === '{reject}'")
    page.keyboard.press("r")
    page.wait_for_function("window.xerjConsole.review.ready && window.xerjConsole.review.last"
                           " && window.xerjConsole.review.last.rejected === 1")
    assert reject not in page.evaluate("xerjConsole.review.items")
    assert "approved 0, rejected 1" in page.inner_text("[data-testid=review-result]")
    shot(page, "review-after")
    # ego's next answer: the approved edge is approved, the rejected one is gone
    assert [e["trust"] for e in ego(served, a["src"]) if e["edge_id"] == approve] == ["approved"]
    assert not [e for e in ego(served, r["src"]) if (e["src"], e["type"], e["dst"]) == (r["src"], r["type"], r["dst"])]
    # and the reader's links say the same
    dataset = dataset_of(served)
    for node, edge_id, present in ((a["src"], approve, True), (r["src"], reject, False)):
        page.goto(base(served) + f"#/reader?index={dataset}&id={quote(node, safe='')}&brain=foam")
        page.wait_for_function(f"window.xerjConsole.reader && window.xerjConsole.reader.ready"
                               f" && window.xerjConsole.reader.id === {json.dumps(node)}")
        link = page.locator(f"[data-testid=link][data-edge-id='{edge_id}']")
        assert link.count() == (1 if present else 0)
        if present:
            assert "trust: approved" in link.inner_text()
    # and the map: the rejected claim is not drawn, the approved one is
    page.goto(base(served) + "#/map?brain=foam")
    page.wait_for_function("window.xerjConsole.map && window.xerjConsole.map.ready && window.xerjConsole.map.edge_keys",
                           timeout=60_000)
    keys = set(page.evaluate("xerjConsole.map.edge_keys"))
    assert f"{a['src']}|{a['type']}|{a['dst']}" in keys and f"{r['src']}|{r['type']}|{r['dst']}" not in keys


def test_a_read_only_key_sees_its_decision_refused(page, served):
    sign_in(page, served, mint(served, FOAM_READ))
    page.goto(base(served) + "#/review?brain=foam")
    page.wait_for_function("window.xerjConsole.review && window.xerjConsole.review.ready", timeout=60_000)
    first = page.evaluate("xerjConsole.review.items[0]")
    page.locator(f"[data-testid=review-item][data-edge-id='{first}'] [data-testid=approve]").click()
    page.wait_for_selector("[data-testid=review-result] [data-testid=refused]")
    assert "[write]" in page.inner_text("[data-testid=review-result]")
    assert page.evaluate("xerjConsole.review.last.status") == 403
    assert _review_item(served, first)["trust"] == "detected"


def _review_item(server, edge_id: str) -> dict:
    status, listed = request(server.port, "GET", "/_graph/foam/_review?size=2000", headers=server.headers)
    return next(item for item in listed["items"] if item["edge_id"] == edge_id)


def test_a_guest_link_opens_a_read_only_view_with_its_expiry(page, served):
    status, share = request(served.port, "POST", "/_xerj/share", {"brain": "foam", "expires": "2d"},
                            headers=served.headers)
    assert status == 201, share
    page.goto(base(served) + f"#/guest?share={share['id']}")
    page.wait_for_selector("[data-testid=passcode]")
    assert page.locator("[data-testid=api-key]").count() == 0
    shot(page, "guest-passcode")
    page.fill("[data-testid=passcode]", "wrong-wrong")
    page.click("form[data-testid=guest-sign-in] button")
    page.wait_for_selector("text=The share refused")
    page.fill("[data-testid=passcode]", share["passcode"])
    page.click("form[data-testid=guest-sign-in] button")
    page.wait_for_function("window.xerjConsole.guest && window.xerjConsole.guest.ready")
    cookie = next(c for c in page.context.cookies() if c["name"] == "xerj_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    expiry = page.inner_text("[data-testid=guest-expiry]")
    shown = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(share["expires_at"] / 1000))
    assert shown in expiry and "Read-only" in expiry
    assert shown in page.inner_text("[data-testid=mode]")
    cards = page.locator("[data-testid=shared-index]").all_inner_texts()
    assert len(cards) == len([i for i in share["indices"] if not i.startswith(".xerj-memory-")])
    shot(page, "guest")
    dataset = dataset_of(served)
    visits = [("guest", f"#/guest?share={share['id']}", "window.xerjConsole.guest.ready"),
              ("guest-search", "#/search?q=wikilinks", "document.querySelector('[data-testid=snippet] mark')"),
              ("guest-reader", f"#/reader?index={dataset}&id=user%2Ffeatures%2Fwikilinks.md%23related&brain=foam",
               "window.xerjConsole.reader && window.xerjConsole.reader.ready && window.xerjConsole.reader.links > 0"),
              ("guest-map", "#/map?brain=foam", "window.xerjConsole.map && window.xerjConsole.map.ready && window.xerjConsole.map.nodes > 0"),
              ("guest-review", "#/review?brain=foam", "document.querySelector('[data-testid=read-only]')")]
    for name, target, ready in visits:
        page.goto(base(served) + target)
        page.wait_for_function(ready, timeout=60_000)
        assert page.locator(WRITE_CONTROLS).count() == 0, name
        labels = " ".join(page.locator("button, input[type=submit], a").all_inner_texts()).lower()
        assert not re.search(r"\b(approve|reject|link it|unlink|forget|delete|save)\b", labels), (name, labels)
        assert page.locator("form").evaluate_all("fs => fs.filter(f => f.method.toLowerCase() !== 'get').length") == 0
        if name != "guest-review":
            shot(page, name)
    assert page.evaluate("xerjConsole.session.guest.share") == share["id"]
    # the search reached only the shared indices
    page.goto(base(served) + "#/search?q=hostile")
    page.wait_for_function("window.xerjConsole.search && window.xerjConsole.search.q === 'hostile'")
    indices = page.locator("[data-testid=result] .muted").all_inner_texts()
    assert indices and all(text.startswith(dataset) for text in indices)
    # a write with the guest's own session (cookie and CSRF header) is refused by the server
    answers = page.evaluate("""async () => {
        const headers = {'Content-Type': 'application/json', 'X-XERJ-CSRF': window.xerjConsole.csrf};
        const post = async (path, body) => (await fetch(path, {method: 'POST', headers, body: JSON.stringify(body)})).status;
        return [await post('/_graph/foam/link', {src: 'a.md', dst: 'b.md', type: 'see_also'}),
                await post('/_graph/foam/_review', {approve: ['x']}),
                await post('/_memory/foam', {text: 'guest note'}),
                (await fetch('/.xerj-memory-hostile/_search', {method: 'POST', headers, body: '{}'})).status];
    }""")
    assert answers == [403, 403, 403, 403]


def test_the_as_of_slider_shows_an_edge_retired_after_t_at_t_and_not_now(page, served):
    status, listed = request(served.port, "GET", "/_graph/foam/_review?state=detected&type=wikilink&size=500",
                             headers=served.headers)
    edge = next(e for e in listed["items"] if not {e["src"], e["dst"]} & PROTECTED)
    claim = f"{edge['src']}|{edge['type']}|{edge['dst']}"
    time.sleep(0.05)
    instant = int(time.time() * 1000)  # the edge is live at this instant...
    time.sleep(1.2)
    status, body = request(served.port, "DELETE", f"/_graph/foam/link/{edge['edge_id']}", headers=served.headers)
    assert status == 200, body  # ...and retired after it
    assert claim not in {f"{e['src']}|{e['type']}|{e['dst']}" for e in ego(served, edge["src"])}
    assert claim in {f"{e['src']}|{e['type']}|{e['dst']}" for e in ego(served, edge["src"], as_of=instant)}
    sign_in(page, served, mint(served, FOAM_READ))
    dataset = dataset_of(served)

    def drawn_links() -> set[str]:
        return {f"{e['src']}|{e['type']}|{e['dst']}" for e in page.evaluate("xerjConsole.reader.edges")}

    def slide_to(value: int) -> None:
        page.eval_on_selector("[data-testid=as-of]", """(input, value) => {
            input.value = String(value); input.dispatchEvent(new Event('input')); input.dispatchEvent(new Event('change')); }""",
                              value)

    page.goto(base(served) + f"#/reader?index={dataset}&id={quote(edge['src'], safe='')}&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready")
    assert claim not in drawn_links() and page.inner_text("[data-testid=as-of-label]") == "as of now"
    slide_to(instant)
    page.wait_for_function(f"window.xerjConsole.reader.ready && window.xerjConsole.reader.as_of === {instant}")
    assert claim in drawn_links()
    assert f"as_of={instant}" in page.url
    shot(page, "reader-as-of")
    page.click("[data-testid=as-of-now]")
    page.wait_for_function("window.xerjConsole.reader.ready && window.xerjConsole.reader.as_of === null")
    assert claim not in drawn_links()
    # the map: the same claim is drawn at the instant and not now
    page.goto(base(served) + "#/map?brain=foam")
    page.wait_for_function("window.xerjConsole.map && window.xerjConsole.map.ready && window.xerjConsole.map.edge_keys",
                           timeout=60_000)
    now_keys = set(page.evaluate("xerjConsole.map.edge_keys"))
    assert claim not in now_keys
    slide_to(instant)
    page.wait_for_function(f"window.xerjConsole.map.ready && window.xerjConsole.map.as_of === {instant}", timeout=60_000)
    then_keys = set(page.evaluate("xerjConsole.map.edge_keys"))
    assert claim in then_keys
    status, overview = request(served.port, "GET", f"/_graph/foam/overview?as_of={instant}", headers=served.headers)
    assert len(then_keys) <= page.evaluate("xerjConsole.map.edges") == overview["edges"]["live"]
    shot(page, "map-as-of")


def test_the_layout_worker_runs_under_the_consoles_own_csp(browser, served):
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # CSP enforced, as for a person
    try:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(base(served))  # signed in through the form; string predicates are eval, which the CSP refuses
        page.fill("[data-testid=api-key]", mint(served, FOAM_READ))
        page.click("form[data-testid=sign-in] button")
        page.wait_for_selector("[data-testid=sign-out]")
        page.goto(base(served) + "#/map?brain=foam")
        page.wait_for_selector("[data-testid=map-layout]:has-text('computed in a worker')", timeout=60_000)
        assert not errors
    finally:
        context.close()


def test_bad_input_gets_a_clear_page_not_a_broken_one(page, served, tmp_path):
    # a 20 MB note: drawn clipped, the rest counted
    status, body = request(served.port, "PUT", "/bignote/_doc/huge",
                           {"title": "Big", "text": "lorem ipsum dolor sit amet " * 800_000},
                           headers=served.headers, timeout=120)
    assert status in (200, 201), body
    status, key = request(served.port, "POST", "/_security/api_key", {
        "name": "console-bad-input", "role_descriptors": {"r": {"indices": [
            {"names": [*FOAM_READ, "bignote", ".xerj-memory-empty-edges", ".xerj-memory-empty"],
             "privileges": ["read"]}]}}},
        headers=served.headers)
    sign_in(page, served, key["encoded"])
    page.goto(base(served) + "#/reader?index=bignote&id=huge")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready", timeout=60_000)
    assert "more characters not drawn" in page.inner_text("[data-testid=record]")
    # a record id that does not exist
    dataset = dataset_of(served)
    page.goto(base(served) + f"#/reader?index={dataset}&id=no-such-note.md&brain=foam")
    page.wait_for_function("window.xerjConsole.reader && window.xerjConsole.reader.ready"
                           " && window.xerjConsole.reader.id === 'no-such-note.md'")
    assert "[no-such-note.md] is not in" in page.inner_text("[data-testid=not-found]")
    # a brain that does not exist, and a brain whose only edge was retired
    page.goto(base(served) + "#/map?brain=empty")
    page.wait_for_function("window.xerjConsole.map && window.xerjConsole.map.ready && window.xerjConsole.map.brain === 'empty'")
    assert "There is no brain [empty]" in page.inner_text("#page")
    status, linked = request(served.port, "POST", "/_graph/empty/link", {"src": "a", "dst": "b", "type": "cites"},
                             headers=served.headers)
    request(served.port, "DELETE", f"/_graph/empty/link/{linked['edge_id']}", headers=served.headers)
    page.goto(base(served) + "#/corpus")
    page.goto(base(served) + "#/map?brain=empty")
    page.wait_for_function("window.xerjConsole.map && window.xerjConsole.map.ready && window.xerjConsole.map.brain === 'empty'")
    assert "has no live edges (1 recorded in all)" in page.inner_text("[data-testid=map-empty]")
    page.goto(base(served) + "#/review?brain=empty")
    page.wait_for_function("window.xerjConsole.review && window.xerjConsole.review.ready")
    assert page.locator("[data-testid=error], [data-testid=refused], [data-testid=review-empty]").count() == 1
    # an expired session: the key is invalidated, the next call says so and the console asks to sign in again
    request(served.port, "DELETE", "/_security/api_key", {"ids": [key["id"]]}, headers=served.headers)
    page.goto(base(served) + "#/search?q=wikilinks")
    page.wait_for_selector("[data-testid=mode]:has-text('session expired')")
    page.goto(base(served) + "#/corpus")
    page.wait_for_selector("[data-testid=api-key]")
    assert page.locator("[data-testid=dataset-card]").count() == 0


def test_a_revoked_share_ends_the_guest_view(page, served):
    status, share = request(served.port, "POST", "/_xerj/share", {"brain": "foam"}, headers=served.headers)
    assert status == 201, share
    page.goto(base(served) + f"#/guest?share={share['id']}")
    page.fill("[data-testid=passcode]", share["passcode"])
    page.click("form[data-testid=guest-sign-in] button")
    page.wait_for_function("window.xerjConsole.guest && window.xerjConsole.guest.ready")
    request(served.port, "DELETE", f"/_xerj/share/{share['id']}", headers=served.headers)
    page.goto(base(served) + "#/search?q=wikilinks")
    page.wait_for_selector("[data-testid=mode]:has-text('session expired')")
    page.goto(base(served) + f"#/guest?share={share['id']}")
    page.wait_for_selector("[data-testid=passcode]")
    page.fill("[data-testid=passcode]", share["passcode"])
    page.click("form[data-testid=guest-sign-in] button")
    page.wait_for_selector("text=was revoked")
    assert page.locator("[data-testid=shared-index]").count() == 0


def test_a_slow_page_does_not_draw_over_the_next_one(page, served):
    sign_in(page, served, mint(served, FOAM_READ))
    page.wait_for_selector("[data-testid=dataset-card]")
    page.goto(base(served) + "#/search")
    page.wait_for_selector("[data-testid=search-box]")
    held = []
    # hold the corpus page's file counts until the search page has drawn its results
    page.route("**/_count", lambda route: held.append(route))
    page.goto(base(served) + "#/corpus")
    page.wait_for_function("window.xerjConsole.page === 'corpus'")
    page.wait_for_timeout(200)
    assert held
    page.goto(base(served) + "#/search?q=wikilinks")
    page.wait_for_selector("[data-testid=snippet] mark")
    for route in held:
        route.continue_()
    page.wait_for_timeout(500)
    assert page.locator("[data-testid=result]").count() == 10
    assert page.locator("[data-testid=dataset-card]").count() == 0
    assert not page.errors


def test_the_review_queue_approves_and_rejects_memories(page, served):
    ns = "console-mem"
    stored = []
    for text in ("the deploy key lives in the vault", "the build runs on fridays"):
        status, body = request(served.port, "POST", f"/_memory/{ns}", {"text": text}, headers=served.headers)
        assert status in (200, 201), body
        stored.append(body["_id"])
        time.sleep(0.01)
    keep, drop = stored
    sign_in(page, served, mint_grants(served, "console-memory-reviewer", [
        {"names": [f".xerj-memory-{ns}"], "privileges": ["read", "write"]}, {"names": FOAM_READ, "privileges": ["read"]}]))
    page.goto(base(served) + "#/review")
    page.wait_for_selector("[data-testid=review-ns]")
    page.fill("[data-testid=review-ns]", ns)
    page.press("[data-testid=review-ns]", "Enter")
    page.wait_for_function("window.xerjConsole.review && window.xerjConsole.review.ready && window.xerjConsole.review.ns")
    assert page.evaluate("xerjConsole.review.items") == [drop, keep]  # newest first
    assert "the build runs on fridays" in page.inner_text(f"[data-testid=review-item][data-edge-id='{drop}']")
    shot(page, "review-memories")
    page.click(f"[data-testid=review-item][data-edge-id='{keep}'] [data-testid=approve]")
    page.wait_for_function("window.xerjConsole.review.ready && window.xerjConsole.review.last"
                           " && window.xerjConsole.review.last.approved === 1")
    assert page.evaluate("xerjConsole.review.items") == [drop]  # approved ones leave the queue
    page.click(f"[data-testid=review-item][data-edge-id='{drop}'] [data-testid=reject]")
    page.wait_for_function("window.xerjConsole.review.ready && window.xerjConsole.review.last"
                           " && window.xerjConsole.review.last.rejected === 1")
    assert page.locator("[data-testid=review-empty]").count() == 1
    status, found = request(served.port, "POST", f"/.xerj-memory-{ns}/_search", {"query": {"ids": {"values": stored}}},
                            headers=served.headers)
    sources = {hit["_id"]: hit["_source"] for hit in found["hits"]["hits"]}
    assert sources[keep]["trust"] == "approved" and sources[keep]["reviewed_by"] == "console-memory-reviewer"
    assert sources[drop]["trust"] == "rejected" and sources[drop]["forgotten_at"]  # forgotten, with a tombstone
    status, again = request(served.port, "POST", f"/_memory/{ns}", {"text": "the build runs on fridays"},
                            headers=served.headers)
    assert again["rejected"] is True and again["created"] is False
