"""brain_is_a_security_boundary, through a real `xerj serve` with two workers.

Two brains and two memory namespaces are seeded through the public API as
the admin; a key is minted for brain ``alice`` and namespace ``alice`` only.
Every door that reaches an index is then tried against ``bob`` (each must
refuse, and no response may carry bob's secrets) and against ``alice`` with
the same key (each must answer), so a door that refuses everything fails here
as surely as one that lets bob's rows through.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.parse

import pytest
from click.testing import CliRunner

from xerj_core.cli import build_cli
from xerj_core.plugins import get_plugin_manager

from .test_http_serve import Server, free_port, request

A, B = "alice", "bob"
SECRET = {A: "alice-secret-4b1d", B: "bob-secret-9f83"}
NDJSON = {"Content-Type": "application/x-ndjson"}


def edges(who: str) -> str:
    return f".xerj-memory-{who}-edges"


def nodes(who: str) -> str:
    return f".xerj-memory-{who}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("secured")
    srv = Server(root / "data", root / "serve.log", workers=2, insecure=False)
    srv.data_dir = root / "data"
    yield srv
    srv.stop()


def call(server, method, path, body=None, headers=None):
    return request(server.port, method, path, body, headers=headers)


@pytest.fixture(scope="module")
def world(server):
    """Seeded brains and namespaces (through the public API, as the admin) and the key scoped to alice."""
    admin = server.headers
    seeded = {}
    for who in (A, B):
        status, linked = call(server, "POST", f"/_graph/{who}/link", {
            "src": f"{who}-note-1", "dst": f"{who}-note-2", "type": "relates_to",
            "evidence": {"quote": SECRET[who], "source": f"{who}.md", "offset": 0}}, admin)
        assert status == 201, linked
        status, stored = call(server, "POST", f"/_memory/{who}", {"text": f"{SECRET[who]} remembered"}, admin)
        assert status == 201, stored
        status, _ = call(server, "PUT", f"/{nodes(who)}/_doc/{who}-note-1", {"title": SECRET[who]}, admin)
        assert status in (200, 201)
        seeded[who] = {"edge": linked["edge_id"], "memory": stored["_id"]}
    status, key = call(server, "POST", "/_security/api_key", {
        "name": "alice-agent", "role_descriptors": {"alice": {"indices": [
            {"names": [edges(A), nodes(A)], "privileges": ["all"]}]}}}, admin)
    assert status == 200, key
    seeded["key"] = key
    seeded["auth"] = {"Authorization": f"ApiKey {key['encoded']}"}
    return seeded


def test_starts_secured_and_says_where_the_admin_key_is_but_not_the_key(server):
    log = server.log_path.read_text()
    path = server.data_dir / "admin.key"
    assert f"the admin key is in {path}" in log and "OPEN MODE" not in log
    assert path.read_text().strip() not in log
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    status, body = call(server, "GET", "/")
    assert status == 401 and body["error"]["reason"] == "missing authentication credentials for REST request [/]"
    assert call(server, "GET", "/", headers=server.headers)[1]["xerj_mode"] == "secured"


# -- every door ----------------------------------------------------------------------------------
# (method, path template, body) with {who}, {edges}, {nodes}, {edge}, {memory} filled per brain.

DOORS = [
    # the four graph routes
    ("POST", "/_graph/{who}/link", {"src": "x", "dst": "y", "type": "t"}),
    ("GET", "/_graph/{who}/ego?node={who}-note-1&hops=2&include_nodes=true", None),
    ("GET", "/_graph/{who}/overview", None),
    ("DELETE", "/_graph/{who}/link/{edge}?invalid_at=2099-01-01T00:00:00Z", None),
    # the machine writer's graph routes
    ("GET", "/_graph/{who}/_standing", None),
    ("POST", "/_graph/{who}/_invalidate", {"edge_ids": ["0" * 32], "at": 1}),
    # the memory routes (drop is tried last, in its own test)
    ("POST", "/_memory/{who}", {"text": "another"}),
    ("GET", "/_memory/{who}", None),
    ("POST", "/_memory/{who}/_recall", {"query": "secret remembered"}),
    ("POST", "/_memory/{who}/_recall", {"query": "secret", "graph": {"mode": "blend"}}),
    ("DELETE", "/_memory/{who}/{memory}", None),
    ("PUT", "/_memory/{who}", None),
    ("POST", "/_memory/{who}/_reembed", {"embedder": "lexical-feature-hash"}),
    # _doc get, put, delete, head; _source; _update; _create
    ("GET", "/{edges}/_doc/{edge}", None),
    ("GET", "/{nodes}/_doc/{who}-note-1", None),
    ("GET", "/{nodes}/_doc/{who}-note-1?_source=title", None),
    ("HEAD", "/{edges}/_doc/{edge}", None),
    ("PUT", "/{nodes}/_doc/planted", {"title": "planted"}),
    ("POST", "/{nodes}/_doc", {"title": "planted"}),
    ("POST", "/{nodes}/_update/{who}-note-1", {"doc": {"extra": 1}}),
    ("PUT", "/{nodes}/_create/created-once-{who}", {"title": "x"}),
    ("DELETE", "/{nodes}/_doc/planted", None),
    # search verbs with the index in the path
    ("POST", "/{edges}/_search", {"query": {"match_all": {}}}),
    ("GET", "/{nodes}/_search?q=secret", None),
    ("POST", "/{edges}/_count", {}),
    ("POST", "/{edges}/_mget", {"ids": ["{edge}"]}),
    ("POST", "/{nodes}/_msearch", b"{}\n{}\n"),
    ("POST", "/{nodes}/_bulk", b'{"index":{"_id":"bulk-1"}}\n{"title":"x"}\n'),
    # ... and in the body
    ("POST", "/_mget", {"docs": [{"_index": "{edges}", "_id": "{edge}"}]}),
    ("POST", "/_msearch", b'{"index":"{edges}"}\n{}\n'),
    ("POST", "/_msearch", b'{"index":["{nodes}"]}\n{"query":{"match_all":{}}}\n'),
    ("POST", "/_bulk", b'{"index":{"_index":"{nodes}","_id":"bulk-2"}}\n{"title":"x"}\n'),
    ("POST", "/_bulk", b'{"delete":{"_index":"{edges}","_id":"{edge}"}}\n'),
    # index-level routes
    ("GET", "/{edges}", None),
    ("HEAD", "/{edges}", None),
    ("GET", "/{edges}/_mapping", None),
    ("PUT", "/{edges}/_mapping", {"properties": {"planted": {"type": "keyword"}}}),
    ("GET", "/_cat/indices/{edges}?format=json", None),
    ("POST", "/{edges}/_refresh", None),
    # percent-encoded spellings of the same names
    ("GET", "/%2Exerj-memory-{who}-edges/_search", None),
    ("GET", "/%2exerj-memory-{who}-edges/_search", None),
    ("GET", "/%2E%78erj-memory-{who}/_doc/{who}-note-1", None),
    ("GET", "/_graph/{who_encoded}/overview", None),
    ("GET", "/_memory/{who_encoded}", None),
]


def fill(value, who: str, world: dict):
    names = {"who": who, "who_encoded": "".join(f"%{ord(c):02X}" for c in who), "edges": edges(who),
             "nodes": nodes(who), "edge": world[who]["edge"], "memory": world[who]["memory"]}
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else json.dumps(value)
    for name, filled in names.items():
        text = text.replace("{" + name + "}", filled)
    return text.encode() if isinstance(value, bytes) else text if isinstance(value, str) else json.loads(text)


def door_id(door) -> str:
    method, path, body = door
    where = " body" if isinstance(body, bytes) or (isinstance(body, dict) and "docs" in body) else ""
    return f"{method} {path}{where}"


@pytest.mark.parametrize("door", DOORS, ids=[door_id(d) for d in DOORS])
def test_every_door_refuses_bob_and_opens_for_alice(server, world, door):
    method, template, body = door
    headers = {**world["auth"], **(NDJSON if isinstance(body, bytes) else {})}
    status, answer = call(server, method, fill(template, B, world), fill(body, B, world), headers)
    text = json.dumps(answer)
    assert SECRET[B] not in text
    # a bulk answers per item, as ES does: 200, and every item naming bob's index is its own 403
    refusals = ([next(iter(item.values())) for item in answer["items"]] if template.endswith("/_bulk")
                else [answer])
    assert status == (200 if template.endswith("/_bulk") else 403), (status, answer)
    for refused in refusals:
        if template.endswith("/_bulk"):
            assert refused["status"] == 403, answer
        if method != "HEAD":
            assert refused["error"]["type"] == "security_exception"
            assert f"API key id [{world['key']['id']}] of user [alice-agent]" in refused["error"]["reason"]
            assert "bob" in refused["error"]["reason"]
    # The positive control: the same key through the same door reaches alice.
    status, answer = call(server, method, fill(template, A, world), fill(body, A, world), headers)
    assert 200 <= status < 300, (status, answer)
    if isinstance(answer, dict):
        assert not answer.get("errors"), answer  # a bulk answers 200 with per-item errors
        for item in answer.get("responses", []):
            assert item.get("status") == 200, answer


def test_the_source_route_when_there_is_one(server, world):
    status, answer = call(server, "GET", f"/{nodes(A)}/_source/{A}-note-1", headers=world["auth"])
    if status == 404 and isinstance(answer, dict) and answer["error"]["type"] == "resource_not_found_exception" \
            and "no handler found" in answer["error"]["reason"]:
        pytest.skip("this build serves no /{index}/_source/{id} route")
    assert status == 200 and SECRET[A] in json.dumps(answer)
    status, answer = call(server, "GET", f"/{nodes(B)}/_source/{B}-note-1", headers=world["auth"])
    assert status == 403 and SECRET[B] not in json.dumps(answer)


def test_a_missing_brain_is_refused_exactly_like_a_foreign_one(server, world):
    for path in ("/_graph/{}/overview", "/_graph/{}/ego?node=x", "/_memory/{}"):
        bob = request(server.port, "GET", path.format(B), headers=world["auth"])
        ghost = request(server.port, "GET", path.format("ghost"), headers=world["auth"])
        assert bob[0] == ghost[0] == 403
        assert json.dumps(bob[1]).replace(B, "ghost") == json.dumps(ghost[1])


@pytest.mark.parametrize("path", [
    "/.xerj-memory-*/_search", "/.xerj-*/_search", "/_all/_search?expand_wildcards=all",
    "/*/_search?expand_wildcards=all", "/_search?expand_wildcards=all", "/.xerj-memory-a*,.xerj-memory-b*/_search",
])
def test_fan_out_returns_alices_rows_and_none_of_bobs(server, world, path):
    status, answer = call(server, "POST", path, {"size": 100, "query": {"match_all": {}}}, world["auth"])
    assert status == 200, answer
    found = {hit["_index"] for hit in answer["hits"]["hits"]}
    assert found == {edges(A), nodes(A)}, found  # alice's rows are there, so the filter is not "nothing"
    assert SECRET[B] not in json.dumps(answer) and SECRET[A] in json.dumps(answer)
    status, counted = call(server, "POST", path.replace("_search", "_count"), {}, world["auth"])
    assert status == 200 and counted["count"] == answer["hits"]["total"]["value"]


def test_cat_indices_lists_alice_and_not_bob(server, world):
    status, rows = call(server, "GET", "/_cat/indices?format=json&expand_wildcards=all", headers=world["auth"])
    assert status == 200
    listed = {row["index"] for row in rows}
    assert {edges(A), nodes(A)} <= listed and not any(B in name for name in listed)
    status, text = call(server, "GET", "/_cat/indices/.xerj-*", headers=world["auth"])
    assert status == 200 and edges(A) in text and B not in text


def test_an_explicit_bob_in_a_list_refuses_the_whole_request(server, world):
    status, answer = call(server, "POST", f"/.xerj-memory-a*,{edges(B)}/_search", {}, world["auth"])
    assert status == 403 and SECRET[B] not in json.dumps(answer)
    body = f'{{"index":".xerj-memory-*"}}\n{{}}\n{{"index":"{nodes(B)}"}}\n{{}}\n'.encode()
    assert call(server, "POST", "/_msearch", body, {**world["auth"], **NDJSON})[0] == 403


def test_case_variants_are_other_names_and_reach_nothing_of_bob(server, world):
    for path in ("/.XERJ-memory-bob-edges/_search", "/.Xerj-Memory-Bob/_search", "/_graph/BOB/overview",
                 "/_memory/Bob"):
        status, answer = call(server, "GET", path, headers=world["auth"])
        assert status in (400, 403, 404), (path, status)
        assert SECRET[B] not in json.dumps(answer)


def test_nodes_index_redirection_in_the_query_and_through_the_meta_document(server, world):
    auth = world["auth"]
    base = f"/_graph/{A}/ego?node={A}-note-1&include_nodes=true"
    status, answer = call(server, "GET", base, headers=auth)
    assert status == 200 and SECRET[A] in json.dumps(answer)
    for redirect in (nodes(B), f"{nodes(A)},{nodes(B)}", urllib.parse.quote(nodes(B), safe="")):
        status, answer = call(server, "GET", f"{base}&nodes_index={redirect}", headers=auth)
        assert status == 403 and SECRET[B] not in json.dumps(answer), redirect
    # The key can write alice's edges index, so it can rewrite the meta document; that widens nothing.
    status, meta = call(server, "GET", f"/{edges(A)}/_doc/__xerj-brain-meta", headers=auth)
    assert status == 200
    planted = {**meta["_source"], "nodes_index": nodes(B)}
    assert call(server, "PUT", f"/{edges(A)}/_doc/__xerj-brain-meta", planted, auth)[0] == 200
    try:
        for path in (base, f"/_graph/{A}/overview"):
            status, answer = call(server, "GET", path, headers=auth)
            assert status == 403 and SECRET[B] not in json.dumps(answer), path
    finally:
        assert call(server, "PUT", f"/{edges(A)}/_doc/__xerj-brain-meta", meta["_source"], auth)[0] == 200
    assert call(server, "GET", f"/_graph/{A}/overview", headers=auth)[0] == 200


# -- keys across workers ---------------------------------------------------------------------------


def mint(server, body) -> dict:
    status, key = call(server, "POST", "/_security/api_key", body, server.headers)
    assert status == 200, key
    return {"Authorization": f"ApiKey {key['encoded']}"}


def test_a_key_invalidated_through_one_worker_is_refused_by_both_at_once(server):
    auth = mint(server, {"name": "short-lived"})
    # Many new connections: both workers verify (and cache) the key.
    assert {call(server, "GET", "/", headers=auth)[0] for _ in range(40)} == {200}
    status, done = call(server, "DELETE", "/_security/api_key", {"name": "short-lived"}, server.headers)
    assert status == 200 and len(done["invalidated_api_keys"]) == 1
    assert {call(server, "GET", "/", headers=auth)[0] for _ in range(40)} == {401}


def test_a_new_key_works_in_both_workers_at_once(server):
    auth = mint(server, {"name": "fresh"})
    assert {call(server, "GET", "/", headers=auth)[0] for _ in range(40)} == {200}


def test_an_expired_key_is_refused(server):
    auth = mint(server, {"name": "brief", "expiration": "1s"})
    assert call(server, "GET", "/", headers=auth)[0] == 200
    time.sleep(1.2)
    status, answer = call(server, "GET", "/", headers=auth)
    assert status == 401 and answer["error"]["type"] == "security_exception"


def test_an_oversized_authorization_header_is_a_clean_refusal(server):
    status, _ = call(server, "GET", "/", headers={"Authorization": "ApiKey " + "A" * 10_000})
    assert status in (400, 401, 431)  # gunicorn refuses a header field past 8 kB itself


# -- clients -------------------------------------------------------------------------------------


def test_opensearch_py_with_an_api_key(server, world):
    from opensearchpy import OpenSearch
    from opensearchpy.exceptions import AuthenticationException, AuthorizationException

    key = world["key"]
    client = OpenSearch(hosts=[{"host": "127.0.0.1", "port": server.port}], use_ssl=False, timeout=10)
    with pytest.raises(AuthenticationException):
        client.info()
    as_alice = (key["id"], key["api_key"])
    assert client.info(api_key=as_alice)["version"]["number"] == "8.11.0"
    found = client.search(index=nodes(A), body={"query": {"match": {"title": SECRET[A]}}}, api_key=as_alice)
    assert [h["_id"] for h in found["hits"]["hits"]] == [f"{A}-note-1"]
    with pytest.raises(AuthorizationException):
        client.search(index=nodes(B), body={}, api_key=as_alice)
    admin = OpenSearch(hosts=[{"host": "127.0.0.1", "port": server.port}], use_ssl=False, timeout=10,
                       headers=server.headers)
    assert admin.indices.create(index="books")["acknowledged"] is True
    assert admin.index(index="books", id="1", body={"title": "Dune"})["result"] == "created"
    assert admin.get(index="books", id="1")["_source"] == {"title": "Dune"}
    with pytest.raises(AuthorizationException):  # scoped to alice's two indices: books is not among them
        client.get(index="books", id="1", api_key=key["encoded"])


def test_autoindex_url_reads_the_api_key_option_then_the_environment(server, tmp_path, monkeypatch):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSee [[b]].\n")
    (folder / "b.md").write_text("# B\n\nBack to [[a]].\n")
    url = f"http://127.0.0.1:{server.port}"
    key = server.headers["Authorization"].split()[1]
    runner = CliRunner()
    cli = build_cli(get_plugin_manager())
    monkeypatch.delenv("XERJ_API_KEY", raising=False)
    # No key: the default data directory is not this server's, so there is no admin.key to fall back on.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "elsewhere"))
    refused = runner.invoke(cli, ["autoindex", str(folder), "--url", url, "--brain", "notes", "--json"])
    assert refused.exit_code != 0 and "secured" in refused.output and "--api-key" in refused.output
    done = runner.invoke(cli, ["autoindex", str(folder), "--url", url, "--brain", "notes", "--json",
                               "--api-key", key])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["files_indexed"] == 2
    monkeypatch.setenv("XERJ_API_KEY", key)
    again = runner.invoke(cli, ["autoindex", str(folder), "--url", url, "--brain", "notes", "--json"])
    assert again.exit_code == 0, again.output
    status, overview = call(server, "GET", "/_graph/notes/overview", headers=server.headers)
    assert status == 200 and overview["edges"]["live"] >= 2


def test_xerj_brain_attaches_to_a_secured_server_with_the_local_admin_key(server, tmp_path, monkeypatch):
    folder = tmp_path / "attached"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSee [[b]].\n")
    (folder / "b.md").write_text("# B\n")
    monkeypatch.delenv("XERJ_API_KEY", raising=False)
    cli = build_cli(get_plugin_manager())
    args = ["brain", str(folder), "--data-dir", str(server.data_dir), "--port", str(server.port)]
    refused = CliRunner().invoke(cli, [*args, "--api-key", "bm90OmEta2V5"])
    assert refused.exit_code != 0 and "secured and refused the API key" in refused.output
    attached = CliRunner().invoke(cli, args)  # no option, no environment: the data directory's admin.key
    assert attached.exit_code == 0, attached.output
    assert f"attached to the server already running at http://127.0.0.1:{server.port}" in attached.output
    status, overview = call(server, "GET", "/_graph/attached/overview", headers=server.headers)
    assert status == 200 and overview["exists"]


def test_xerj_insecure_environment_variable_is_open_mode(tmp_path):
    port = free_port()
    env = {**os.environ, "XERJ_INSECURE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "xerj_core", "serve", "--data-dir", str(tmp_path / "d"),
                             "--port", str(port), "--workers", "1"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = request(port, "GET", "/", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        assert status == 200 and body["xerj_mode"] == "open"
        assert not (tmp_path / "d" / "admin.key").exists()
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0].decode()
    assert "OPEN MODE" in out


# Last: it drops alice's namespace, which the tests above read.
def test_dropping_a_namespace_refuses_bob_and_works_for_alice(server, world):
    status, answer = call(server, "DELETE", f"/_memory/{B}", headers=world["auth"])
    assert status == 403
    assert call(server, "GET", f"/_memory/{B}", headers=server.headers)[1]["total"] >= 1
    status, answer = call(server, "DELETE", f"/_memory/{A}", headers=world["auth"])
    assert status == 200, answer
