"""`xerj autoindex --url` against a real `xerj serve`: the same brain as an embedded run, reconcile, rejections."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from xerj_core.autoindex import pipeline, remote
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink, dataset_index
from xerj_core.autoindex.remote import RemoteError, RemoteSink
from xerj_core.cli import build_cli
from xerj_core.engine import Engine
from xerj_core.plugins import get_plugin_manager

from .conftest import CORPORA
from .test_autoindex import (_site_with_generated_scripts, changed_claims_vault, copy_corpus, edges_of,
                             records_folder, records_manager, save_again)
from .test_autoindex_shares import mailbox_documents, write_mailbox
from .test_http_serve import Server, free_port, request

FOAM = CORPORA / "foam-docs"
pytestmark = pytest.mark.skipif(not FOAM.is_dir(), reason="shared/corpora/foam-docs is not beside the checkout")
XERJ = [sys.executable, "-m", "xerj_core"]
# Stamped by the writer's clock, so two runs at different moments differ there and nowhere else.
CLOCK_FIELDS = ("created_at", "expired_at", "recorded_at")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    srv = Server(root / "data", root / "serve.log", workers=2)
    yield srv
    srv.stop()


@pytest.fixture
def url(server) -> str:
    return f"http://127.0.0.1:{server.port}"


@pytest.fixture
def foam(tmp_path):
    return copy_corpus(FOAM, tmp_path / "foam-docs")


def autoindex(*args: str) -> dict:
    """``xerj autoindex ... --json`` in this process, with xerj's built-in plugins; the parsed summary."""
    result = CliRunner().invoke(build_cli(get_plugin_manager(builtins_only=True)), ["autoindex", *args, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    summary.pop("elapsed_s")
    return summary


def server_edges(server, brain: str) -> dict[str, dict]:
    """Every edge document of ``brain`` on the server, by edge id (read through the ES door)."""
    status, body = request(server.port, "POST", f"/.xerj-memory-{brain}-edges/_search",
                           {"size": 10000, "query": {"exists": {"field": "src"}}})
    assert status == 200, body
    assert body["hits"]["total"]["value"] < 10000
    return {hit["_id"]: hit["_source"] for hit in body["hits"]["hits"]}


def without_clock(edges: dict[str, dict]) -> dict[str, dict]:
    return {k: {f: v for f, v in e.items() if f not in CLOCK_FIELDS} for k, e in edges.items()}


def live(edges: dict[str, dict]) -> dict[str, dict]:
    return {k: e for k, e in edges.items() if "invalid_at" not in e}


def test_a_run_over_the_url_builds_the_same_brain_as_an_embedded_run(server, url, foam, tmp_path, pm):
    over_http = autoindex(str(foam), "--brain", "same", "--url", url)
    with Engine(tmp_path / "embedded", pm) as engine:
        embedded = run(engine, foam, brain="same").to_json()
        embedded.pop("elapsed_s")
        local_edges = edges_of(engine, "same")
        index = dataset_index("ax-notes", LocalSink(engine.store, engine.graph).load("same").root_id)
        catalog = engine.store.get("autoindex-catalog", index)[0]
    assert over_http == embedded
    assert over_http["edges_written"] > 1000 and over_http["documents"] > 600
    assert without_clock(server_edges(server, "same")) == without_clock(local_edges)
    status, remote_catalog = request(server.port, "GET", f"/autoindex-catalog/_doc/{index}")
    assert status == 200 and remote_catalog["_source"]["documents"] >= catalog["documents"]
    assert "same" in remote_catalog["_source"]["brains"]
    status, meta = request(server.port, "GET", "/.xerj-memory-same-edges/_doc/__xerj-brain-meta")
    assert meta["_source"]["nodes_index"] == index


def test_a_no_change_rerun_over_the_url_writes_nothing(server, url, foam):
    autoindex(str(foam), "--brain", "again", "--url", url)
    before = server_edges(server, "again")
    again = autoindex(str(foam), "--brain", "again", "--url", url)
    assert again["files_unchanged"] == again["files_seen"] == 87 and again["files_indexed"] == 0
    assert again["documents"] == 0 and again["edges_written"] == 0 and again["edges_invalidated"] == 0
    assert server_edges(server, "again") == before  # created_at included: nothing was rewritten


def test_a_touched_file_writes_nothing_but_its_stamp_over_the_url(server, url, foam):
    autoindex(str(foam), "--brain", "restamped", "--url", url)
    before = server_edges(server, "restamped")
    target = foam / "user/features/wikilinks.md"
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    summary = autoindex(str(foam), "--brain", "restamped", "--url", url)
    assert summary["files_indexed"] == 0 and summary["files_unchanged"] == summary["files_seen"]
    assert summary["edges_written"] == 0 and summary["edges_invalidated"] == 0
    assert server_edges(server, "restamped") == before
    status, state = request(server.port, "GET", "/_xerj/autoindex/restamped")
    assert state["files"]["user/features/wikilinks.md"]["mtime_ns"] == stat.st_mtime_ns + 5_000_000_000
    assert state["files"]["user/features/wikilinks.md"]["docs"]


def test_saving_a_file_again_keeps_the_edges_of_its_claims_over_the_url(server, url, foam):
    autoindex(str(foam), "--brain", "touched", "--url", url)
    before = server_edges(server, "touched")
    target = "user/features/wikilinks.md"
    taught = {k for k, e in live(before).items() if e["src_file"] == target}
    assert taught
    save_again(foam / target, 5)
    summary = autoindex(str(foam), "--brain", "touched", "--url", url)
    assert summary["files_indexed"] == 1 and summary["edges_invalidated"] == 0 and summary["edges_written"] == 0
    assert summary["edges_continued"] == len(taught)
    assert server_edges(server, "touched") == before
    # the next run remembers the match: only the file saved since is compared (see continuations)
    other = "user/features/tags.md"
    save_again(foam / other, 5)
    summary = autoindex(str(foam), "--brain", "touched", "--url", url)
    assert summary["edges_continued"] == sum(1 for e in live(before).values() if e["src_file"] == other) > 0
    assert server_edges(server, "touched") == before


def test_an_edited_note_writes_its_card_and_changed_section_only_over_the_url(server, url, foam):
    autoindex(str(foam), "--brain", "sections", "--url", url)
    target = "user/frequently-asked-questions.md"
    status, state = request(server.port, "GET", "/_xerj/autoindex/sections")
    refs = state["files"][target]["docs"]

    def stored() -> dict[str, dict]:
        found = {}
        for ref in refs:
            index, doc_id = ref.split("/", 1)
            status, body = request(server.port, "POST", f"/{index}/_search",
                                   {"query": {"ids": {"values": [doc_id]}}})
            assert status == 200, body
            found[doc_id] = body["hits"]["hits"][0]["_source"]
        return found

    before = stored()
    note = foam / target
    note.write_text(note.read_text() + "Fermenting kohlrabi answers this too.\n")
    summary = autoindex(str(foam), "--brain", "sections", "--url", url)
    after = stored()
    changed = {doc_id for doc_id in after if after[doc_id] != before[doc_id]}
    assert target in changed and len(changed) == 2 and len(refs) >= 5
    assert summary["documents"] == 2 and summary["documents_kept"] == len(refs) - 2


def test_a_changed_claim_is_taught_again_and_the_others_kept_over_the_url(server, url, tmp_path, pm):
    """The same reconcile over the url as embedded: the claims of the two runs agree edge for edge."""
    results = []
    for where in ("url", "embedded"):
        note, t1, t2 = changed_claims_vault(tmp_path / where)
        brain = f"claims-{where}"
        args = [str(note.parent), "--brain", brain] + (["--url", url] if where == "url" else
                                                      ["--data-dir", str(tmp_path / "data")])
        autoindex(*args)
        note.write_text("# A\n\nSee [[b]].\n\n## Two\n\nFirst [[d]]. Also [[c]].\n")
        os.utime(note, ns=(t2 * 1_000_000, t2 * 1_000_000))
        summary = autoindex(*args)
        if where == "url":
            edges = server_edges(server, brain)
        else:
            with Engine(tmp_path / "data", pm) as engine:
                edges = edges_of(engine, brain)
        results.append((summary["edges_continued"], summary["edges_invalidated"], summary["edges_by_type"],
                        sorted((e["src"], e["type"], e["dst"], e["valid_at"], "invalid_at" in e)
                               for e in edges.values())))
    assert results[0] == results[1]
    continued, invalidated, by_type, edges = results[0]
    assert continued >= 1 and invalidated == 1 and by_type["wikilink"] == 2
    assert ("a.md#a", "wikilink", "b.md", t1, False) in edges and ("a.md#two", "wikilink", "c.md", t2, False) in edges


def test_a_rejected_claim_stays_rejected_after_a_resave_and_a_rerun_over_the_url(server, url, foam):
    autoindex(str(foam), "--brain", "judged", "--url", url)
    edge_id, edge = next((k, e) for k, e in sorted(live(server_edges(server, "judged")).items())
                         if e["type"] == "wikilink")
    status, body = request(server.port, "DELETE", f"/_graph/judged/link/{edge_id}")
    assert status == 200 and body["invalidated"] is True
    save_again(foam / edge["src_file"], 7)
    summary = autoindex(str(foam), "--brain", "judged", "--url", url)
    assert summary["claims_suppressed"] >= 1
    claim = (edge["src"], edge["type"], edge["dst"])
    same_claim = [e for e in server_edges(server, "judged").values() if (e["src"], e["type"], e["dst"]) == claim]
    assert len(same_claim) == 2 and all("invalid_at" in e and e["trust"] == "rejected" for e in same_claim)
    # A third run over unchanged files still leaves it rejected.
    again = autoindex(str(foam), "--brain", "judged", "--url", url)
    assert again["edges_written"] == 0
    assert all("invalid_at" in e for e in server_edges(server, "judged").values()
               if (e["src"], e["type"], e["dst"]) == claim)


def test_removed_files_and_small_requests(server, url, foam, monkeypatch, pm):
    """Batches split into whole files per request, and edges in chunks, give the same brain."""
    monkeypatch.setattr(remote, "MAX_REQUEST_BYTES", 20_000)
    monkeypatch.setattr(remote, "EDGES_PER_REQUEST", 100)
    monkeypatch.setattr(remote, "IDS_PER_REQUEST", 7)
    sink = RemoteSink(url)
    calls: list[str] = []
    real_call = sink._call

    def counted(method, path, body=None):
        calls.append(path.rsplit("/", 1)[-1])
        return real_call(method, path, body)

    monkeypatch.setattr(sink, "_call", counted)
    first = run(sink, foam, brain="chunked", pm=pm)
    assert calls.count("_batch") > 5 and calls.count("_detected") == -(-first.edges_written // 100)
    assert first.edges_written == sum(1 for _ in server_edges(server, "chunked"))
    gone = "user/features/tags.md"
    taught = {k for k, e in live(server_edges(server, "chunked")).items() if e["src_file"] == gone}
    (foam / gone).unlink()
    second = run(sink, foam, brain="chunked", pm=pm)
    assert second.files_removed == 1 and second.edges_invalidated >= len(taught) > 7
    after = server_edges(server, "chunked")
    assert all("invalid_at" in after[k] for k in taught)
    index = dataset_index("ax-notes", sink.load("chunked").root_id)
    assert request(server.port, "GET", f"/{index}/_doc/{gone}")[0] == 404


def test_a_mailbox_written_in_shares_over_the_url_is_the_brain_an_embedded_run_makes(server, url, tmp_path, pm,
                                                                                      monkeypatch):
    monkeypatch.setattr(pipeline, "SHARE_DOCS", 4)
    folder = tmp_path / "mail"
    write_mailbox(folder, [f"Batch {n}" for n in range(14)])
    sink = RemoteSink(url)
    calls: list[str] = []
    real_call = sink._call
    monkeypatch.setattr(sink, "_call", lambda method, path, body=None: calls.append(path) or real_call(method, path,
                                                                                                      body))
    over_http = run(sink, folder, brain="shared-mail", pm=pm)
    assert sum(path.endswith("/_batch") for path in calls) == 5  # a request per share
    with Engine(tmp_path / "embedded", pm) as engine:
        embedded = run(engine, folder, brain="shared-mail")
        local_docs, local_edges = mailbox_documents(engine, "shared-mail"), edges_of(engine, "shared-mail")
    assert over_http.documents == embedded.documents == 20 and not over_http.files_failed
    index = dataset_index("ax-mail", sink.load("shared-mail").root_id)
    status, body = request(server.port, "POST", f"/{index}/_search", {"size": 100})
    assert status == 200 and {hit["_id"]: hit["_source"] for hit in body["hits"]["hits"]} == local_docs
    assert without_clock(server_edges(server, "shared-mail")) == without_clock(local_edges)


def test_the_command_line_opens_nothing_locally(server, url, foam, tmp_path):
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    done = subprocess.run([*XERJ, "autoindex", str(foam), "--brain", "cli", "--url", url, "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["edges_written"] > 0
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_an_unreachable_url_is_a_clear_error(foam, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run([*XERJ, "autoindex", str(foam), "--url", dead], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert dead in done.stderr and "cannot reach" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_url_and_data_dir_are_mutually_exclusive(foam, tmp_path):
    cli = build_cli(get_plugin_manager())
    both = CliRunner().invoke(cli, ["autoindex", str(foam), "--url", "http://127.0.0.1:9200",
                                    "--data-dir", str(tmp_path / "d")])
    assert both.exit_code == 2 and "mutually exclusive" in both.output
    assert not (tmp_path / "d").exists()
    bad = CliRunner().invoke(cli, ["autoindex", str(foam), "--url", "127.0.0.1:9200"])
    assert bad.exit_code == 2 and "--url" in bad.output and "http://" in bad.output


def test_a_refusal_names_the_server_and_says_why(server, url):
    with pytest.raises(RemoteError) as refused:
        RemoteSink(url).load("Not A Brain")
    assert refused.value.status == 400 and url in refused.value.reason and "invalid brain name" in refused.value.reason
    with pytest.raises(RemoteError) as missing:
        RemoteSink(url + "/not-here").load("x")
    assert missing.value.status == 404 and "no handler found" in missing.value.reason


def test_a_generated_script_is_skipped_as_generated_and_remembered_so_over_the_url(url, tmp_path):
    folder = tmp_path / "site"
    _site_with_generated_scripts(folder)
    first = autoindex(str(folder), "--brain", "generated", "--url", url)
    assert first["skipped_by_kind"] == {"generated": 2} and not first["files_failed"]
    again = autoindex(str(folder), "--brain", "generated", "--url", url)
    assert again["files_unchanged"] == 3 and again["files_skipped"] == first["files_skipped"]


def test_a_document_the_server_refuses_fails_its_file_over_the_url(server, url, tmp_path):
    """The server names the file whose document it refused; the run goes on without that file, as embedded."""
    pm = records_manager()
    folder = records_folder(tmp_path / "records")
    first = run(RemoteSink(url), folder, brain="remote-records", pm=pm)
    assert [f["path"] for f in first.files_failed] == ["b.rec"] and first.files_indexed == 3
    assert first.files_failed[0]["reason"].startswith("document [b.rec] was refused: mapper_parsing_exception:")
    (folder / "b.rec").write_text("7 fix the roof\n")
    fixed = run(RemoteSink(url), folder, brain="remote-records", pm=pm)
    assert not fixed.files_failed and fixed.files_indexed == 1 and fixed.files_unchanged == 3
