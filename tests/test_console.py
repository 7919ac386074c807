"""The console in headless Chromium (Playwright) against a real, secured ``xerj serve`` over the Foam corpus.

Screenshots of every page land in ``tests/screenshots/`` (gitignored) for a person to look at.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
    assert page.locator("[data-testid=map] canvas").count() >= 1
    assert not page.errors
    shot(page, "map")
    # the layout is computed once (in a worker, after the first draw): a second visit reuses it
    page.wait_for_function("window.xerjConsole.map.layout_done === true", timeout=60_000)
    assert page.evaluate("xerjConsole.map.layout") == "worker"
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
