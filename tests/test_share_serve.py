"""Share links through a real `xerj serve` with two workers: a guest does what the share promises, nothing more.

A folder called ``case files`` is indexed into the server by ``xerj brain --url``,
whose closing summary prints the share command; that very line, split the way a
shell splits it, is run to open the share. A second brain (``other``) and a memory
namespace sit beside it. Every door a guest might try is then tried with the
guest token: the allowed ones must answer with the shared folder's words (the
positive control), every other one must refuse with no byte of the rest.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import urllib.parse

import pytest

from .test_http_serve import Server, request

XERJ = [sys.executable, "-m", "xerj_core"]
SHARED_WORD = "quokkashared"
OTHER_WORD = "wombatprivate"
MEMORY_WORD = "numbatmemory"
NDJSON = {"Content-Type": "application/x-ndjson"}


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*XERJ, *args], capture_output=True, text=True, timeout=180)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def call(server, method, path, body=None, headers=None):
    return request(server.port, method, path, body, headers=headers)


def parse_share(stdout: str) -> dict[str, str]:
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in stdout.splitlines()
             if ":" in line}
    link = lines["link"]
    return {"link": link, "id": link.rsplit("share=", 1)[1], "passcode": lines["passcode"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("share")
    srv = Server(root / "data", root / "serve.log", workers=2, insecure=False)
    srv.root = root
    srv.url = f"http://127.0.0.1:{srv.port}"
    srv.admin = (root / "data" / "admin.key").read_text().strip()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def world(server):
    root = server.root
    shared = root / "case files"
    shared.mkdir()
    (shared / "alpha.md").write_text(f"# Alpha\n\nThe {SHARED_WORD} note. See [[beta]].\n")
    (shared / "beta.md").write_text("# Beta\n\nBack to [[alpha]].\n")
    other = root / "other"
    other.mkdir()
    (other / "gamma.md").write_text(f"# Gamma\n\nThe {OTHER_WORD} note. See [[delta]].\n")
    (other / "delta.md").write_text("# Delta\n\nBack to [[gamma]].\n")
    built = run("brain", str(shared), "--url", server.url, "--api-key", server.admin)
    share_line = next(line for line in built.stdout.splitlines() if line.strip().startswith("share it:"))
    command = share_line.split("share it:", 1)[1].split("   (", 1)[0].strip()
    argv = shlex.split(command)
    run("autoindex", str(other), "--url", server.url, "--api-key", server.admin)
    admin = {"Authorization": f"ApiKey {server.admin}"}
    assert call(server, "POST", "/_memory/ns", {"text": f"{MEMORY_WORD} remembered"}, admin)[0] == 201
    # The folder's space survives the paste: the line splits into exactly these arguments.
    assert argv == ["xerj", "share", str(shared.resolve()), "--url", server.url], argv
    opened = run(*argv[1:], "--api-key", server.admin)
    share = parse_share(opened.stdout)
    assert share["link"] == f"{server.url}/_xerj-console/#/guest?share={share['id']}"
    status, overview = call(server, "GET", "/_graph/case-files/overview", headers=admin)
    assert status == 200, overview
    datasets = overview["nodes_index"].split(",")
    status, other_overview = call(server, "GET", "/_graph/other/overview", headers=admin)
    other_ds = other_overview["nodes_index"].split(",")[0]
    status, hits = call(server, "GET", f"/{datasets[0]}/_search?q={SHARED_WORD}", headers=admin)
    doc_id = next(h["_id"] for h in hits["hits"]["hits"] if SHARED_WORD in json.dumps(h["_source"]))
    status, other_hits = call(server, "GET", f"/{other_ds}/_search?q={OTHER_WORD}", headers=admin)
    other_id = other_hits["hits"]["hits"][0]["_id"]
    status, token = call(server, "POST", "/_xerj/share/_exchange", {"share": share["id"],
                                                                     "passcode": share["passcode"]})
    assert status == 200 and token["expires_at"] > time.time() * 1000, token
    edges = call(server, "POST", "/.xerj-memory-case-files-edges/_search", {"size": 50}, admin)[1]
    edge = next(h["_id"] for h in edges["hits"]["hits"] if not h["_id"].startswith("__"))
    return {"share": share, "token": token["token"], "guest": {"Authorization": f"Bearer {token['token']}"},
            "admin": admin, "ds": datasets[0], "doc": doc_id, "other_ds": other_ds, "other_doc": other_id,
            "edge": edge, "folder": shared, "other_folder": other}


def fill(value, world):
    if value is None:
        return None
    names = {"ds": world["ds"], "doc": urllib.parse.quote(world["doc"], safe=""), "other_ds": world["other_ds"],
             "other_doc": world["other_doc"],
             "edge": world["edge"], "share": world["share"]["id"]}
    text = value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else json.dumps(value)
    for name, filled in names.items():
        text = text.replace("{" + name + "}", filled)
    return text.encode() if isinstance(value, bytes) else text if isinstance(value, str) else json.loads(text)


# The doors a share opens, each answered with the shared folder's words: the positive controls.
ALLOWED = [
    ("GET", f"/{{ds}}/_search?q={SHARED_WORD}", None),
    ("POST", "/{ds}/_search", {"query": {"match": {"text": SHARED_WORD}}}),
    ("GET", "/{ds}/_count", None),
    ("POST", "/{ds}/_count", {"query": {"match_all": {}}}),
    ("GET", "/{ds}/_doc/{doc}", None),
    ("HEAD", "/{ds}/_doc/{doc}", None),
    ("GET", "/_graph/case-files/overview", None),
    ("GET", "/_graph/case-files/ego?node=alpha.md%23alpha&hops=2&include_nodes=true", None),
    ("GET", "/_graph/case-files/ego?node=alpha.md%23alpha&include_nodes=true&nodes_index={ds}", None),
    ("GET", "/.xerj-memory-case-files-edges/_search", None),
    ("GET", "/*/_search?q=" + SHARED_WORD, None),
]

# Every other door: route families the allow-list refuses, and reads the grants refuse.
REFUSED = [
    # the brain's write half and its machine-writer routes
    ("POST", "/_graph/case-files/link", {"src": "alpha.md", "dst": "beta.md", "type": "relates_to"}),
    ("DELETE", "/_graph/case-files/link/{edge}", None),
    ("GET", "/_graph/case-files/_standing", None),
    ("POST", "/_graph/case-files/_invalidate", {"edge_ids": ["0" * 32], "at": 1}),
    ("GET", "/_xerj/autoindex/case-files", None),
    # another brain, and hydration redirected at an index the share does not name, alone or in a list
    ("GET", "/_graph/other/overview", None),
    ("GET", "/_graph/other/ego?node=gamma.md&include_nodes=true", None),
    ("GET", "/_graph/case-files/ego?node=alpha.md&include_nodes=true&nodes_index={other_ds}", None),
    ("GET", "/_graph/case-files/ego?node=alpha.md&include_nodes=true&nodes_index={ds},{other_ds}", None),
    ("GET", "/_graph/case-files/ego?node=alpha.md&include_nodes=true&nodes_index=.xerj-memory-ns", None),
    # every /_memory/* route
    ("GET", "/_memory/ns", None),
    ("POST", "/_memory/ns", {"text": "planted"}),
    ("POST", "/_memory/ns/_recall", {"query": MEMORY_WORD}),
    ("PUT", "/_memory/ns", None),
    ("DELETE", "/_memory/ns", None),
    ("POST", "/_memory/ns/_reembed", {"embedder": "lexical-feature-hash"}),
    ("DELETE", "/_memory/ns/x", None),
    ("GET", "/_memory/case-files", None),
    # _security, the share routes themselves, and the audit routes
    ("GET", "/_security/_authenticate", None),
    ("GET", "/_security/api_key", None),
    ("POST", "/_security/api_key", {"name": "escalate"}),
    ("POST", "/_xerj/share", {"brain": "other"}),
    ("GET", "/_xerj/share", None),
    ("DELETE", "/_xerj/share/{share}", None),
    # writes to the shared index
    ("PUT", "/{ds}/_doc/planted", {"title": "planted"}),
    ("POST", "/{ds}/_doc", {"title": "planted"}),
    ("DELETE", "/{ds}/_doc/{doc}", None),
    ("POST", "/{ds}/_update/{doc}", {"doc": {"x": 1}}),
    ("PUT", "/{ds}/_create/planted", {"title": "x"}),
    ("POST", "/_bulk", b'{"index":{"_index":"{ds}","_id":"b"}}\n{"title":"x"}\n'),
    ("POST", "/{ds}/_bulk", b'{"index":{"_id":"b"}}\n{"title":"x"}\n'),
    ("PUT", "/{ds}/_mapping", {"properties": {"x": {"type": "keyword"}}}),
    ("DELETE", "/{ds}", None),
    ("PUT", "/planted-index", None),
    ("POST", "/{ds}/_refresh", None),
    ("POST", "/{ds}/_forcemerge", None),
    # other indices, and read routes outside the allow-list
    ("GET", f"/{{other_ds}}/_search?q={OTHER_WORD}", None),
    ("GET", "/{other_ds}/_doc/{other_doc}", None),
    ("POST", "/{other_ds}/_count", {}),
    ("GET", "/autoindex-catalog/_search", None),
    ("GET", "/.xerj-autoindex-files/_search", None),
    ("GET", f"/.xerj-memory-ns/_search?q={MEMORY_WORD}", None),
    ("GET", "/{ds},{other_ds}/_search", None),
    ("GET", f"/_search?q={OTHER_WORD}", None),
    ("GET", "/_count", None),
    ("POST", "/_mget", {"docs": [{"_index": "{ds}", "_id": "{doc}"}]}),
    ("POST", "/{ds}/_mget", {"ids": ["{doc}"]}),
    ("POST", "/_msearch", b'{"index":"{ds}"}\n{}\n'),
    ("GET", "/{ds}", None),
    ("GET", "/{ds}/_mapping", None),
    ("GET", "/{ds}/_stats", None),
    ("GET", "/_cat/indices?format=json", None),
    ("GET", "/", None),
    ("GET", "/_xerj/node", None),
]


def door_id(door) -> str:
    return f"{door[0]} {door[1]}"


def _headers(world, body):
    return {**world["guest"], **(NDJSON if isinstance(body, bytes) else {})}


@pytest.mark.parametrize("door", ALLOWED, ids=[door_id(d) for d in ALLOWED])
def test_an_allowed_door_answers_with_the_shared_folder(server, world, door):
    method, template, body = door
    status, answer = call(server, method, fill(template, world), fill(body, world), _headers(world, body))
    assert status == 200, (status, answer)
    if method == "HEAD":
        return
    text = json.dumps(answer)
    assert OTHER_WORD not in text and MEMORY_WORD not in text
    if "_count" in template:
        assert answer["count"] > 0
    elif "/overview" in template:
        assert answer["nodes"]["total"] > 0 and answer["nodes_index"] == world["ds"]
    elif "edges" in template:
        assert answer["hits"]["total"]["value"] > 0
    elif "/ego" in template:
        assert answer["edges"] and SHARED_WORD in text  # hydrated from the shared dataset index
    else:
        assert SHARED_WORD in text
        if "hits" in answer:
            assert {hit["_index"] for hit in answer["hits"]["hits"]} <= {world["ds"]}


@pytest.mark.parametrize("door", REFUSED, ids=[door_id(d) for d in REFUSED])
def test_every_other_door_refuses_the_guest(server, world, door):
    method, template, body = door
    status, answer = call(server, method, fill(template, world), fill(body, world), _headers(world, body))
    assert status == 403, (status, answer)
    text = json.dumps(answer)
    assert OTHER_WORD not in text and MEMORY_WORD not in text and SHARED_WORD not in text
    assert answer["error"]["type"] == "security_exception"
    assert f"guest:{world['share']['id']}" in answer["error"]["reason"]


def test_the_audit_routes_are_refused_when_served(server, world):
    status, answer = call(server, "GET", "/_audit/_search", headers=world["guest"])
    if status == 404 and "no handler found" in json.dumps(answer):
        pytest.skip("this build serves no /_audit routes")
    assert status == 403


def test_the_refused_writes_changed_nothing(server, world):
    status, hits = call(server, "GET", f"/{world['ds']}/_search?q=planted", headers=world["admin"])
    assert status == 200 and hits["hits"]["total"]["value"] == 0
    status, doc = call(server, "GET", fill("/{ds}/_doc/{doc}", world), headers=world["admin"])
    assert status == 200 and SHARED_WORD in json.dumps(doc)
    assert call(server, "HEAD", "/planted-index", headers=world["admin"])[0] == 404
    status, memories = call(server, "GET", "/_memory/ns", headers=world["admin"])
    assert status == 200 and MEMORY_WORD in json.dumps(memories)


def test_share_list_shows_the_share_and_never_its_passcode(server, world):
    listed = run("share", "--list", "--url", server.url, "--api-key", server.admin)
    assert world["share"]["id"] in listed.stdout and "active" in listed.stdout
    status, shares = call(server, "GET", "/_xerj/share", headers=world["admin"])
    assert status == 200
    text = json.dumps(shares)
    assert world["share"]["passcode"] not in text and "passcode" not in text
    mine = next(s for s in shares["shares"] if s["id"] == world["share"]["id"])
    assert mine["indices"] == [world["ds"], ".xerj-memory-case-files-edges"]


def _open(server, folder, *extra) -> dict[str, str]:
    return parse_share(run("share", str(folder), "--url", server.url, "--api-key", server.admin, *extra).stdout)


def _exchange(server, share, passcode):
    return call(server, "POST", "/_xerj/share/_exchange", {"share": share, "passcode": passcode})


def test_bad_input_is_a_clear_401_or_403_never_a_500(server, world):
    share = _open(server, world["folder"])
    good = _exchange(server, share["id"], share["passcode"])
    assert good[0] == 200
    token = good[1]["token"]
    # a wrong passcode and an unknown share id: the same 401
    wrong = _exchange(server, share["id"], "aaaaa-bbbbb-ccccc-ddddd")
    unknown = _exchange(server, "no-such-share", share["passcode"])
    assert wrong[0] == unknown[0] == 401 and wrong[1] == unknown[1]
    assert wrong[1]["error"]["reason"] == "unknown share or wrong passcode"
    # a guest token presented as an API key, a malformed bearer token, a forged one
    for header in (f"ApiKey {token}", "Bearer ", "Bearer not-a-token", f"Bearer {token}x",
                   f"Bearer {token.split('.')[0]}.{'A' * 43}"):
        status, answer = call(server, "GET", f"/{world['ds']}/_search", headers={"Authorization": header})
        assert status == 401 and answer["error"]["type"] == "security_exception", (header, answer)
    # malformed exchange bodies
    for body in ({}, {"share": share["id"]}, {"share": 1, "passcode": "x"}, {"share": "x", "passcode": "y", "z": 1},
                 b"not json", b"[]"):
        status, answer = call(server, "POST", "/_xerj/share/_exchange", body)
        assert status == 400, (body, answer)
    # revoked: the exchange is a 403 saying so, and the token replayed after revoke is a 401 in every worker
    assert call(server, "GET", f"/{world['ds']}/_count", headers={"Authorization": f"Bearer {token}"})[0] == 200
    run("share", "--revoke", share["id"], "--url", server.url, "--api-key", server.admin)
    revoked = _exchange(server, share["id"], share["passcode"])
    assert revoked[0] == 403 and "revoked" in revoked[1]["error"]["reason"]
    for _ in range(8):
        assert call(server, "GET", f"/{world['ds']}/_count", headers={"Authorization": f"Bearer {token}"})[0] == 401
    assert run("share", "--revoke", "no-such-share", "--url", server.url, "--api-key", server.admin,
               check=False).returncode == 1


def test_an_expired_share_stops_its_tokens_and_its_passcode(server, world):
    # Long enough that a loaded machine still exchanges and reads before the instant; the test waits it out.
    share = _open(server, world["folder"], "--expires", "6s")
    status, token = _exchange(server, share["id"], share["passcode"])
    assert status == 200
    guest = {"Authorization": f"Bearer {token['token']}"}
    assert call(server, "GET", f"/{world['ds']}/_count", headers=guest)[0] == 200
    time.sleep(max(0.0, token["expires_at"] / 1000 - time.time()) + 0.2)
    for _ in range(4):
        assert call(server, "GET", f"/{world['ds']}/_count", headers=guest)[0] == 401
    status, answer = _exchange(server, share["id"], share["passcode"])
    assert status == 403 and "expired" in answer["error"]["reason"]
    listed = run("share", "--list", "--url", server.url, "--api-key", server.admin).stdout
    assert f"{share['id']}  expired" in listed


def test_revoke_stops_a_token_every_worker_has_cached(server, world):
    share = _open(server, world["folder"])
    status, token = _exchange(server, share["id"], share["passcode"])
    guest = {"Authorization": f"Bearer {token['token']}"}
    # Enough requests on fresh connections that both workers verified (and cached) the token.
    for _ in range(12):
        assert call(server, "GET", f"/{world['ds']}/_count", headers=guest)[0] == 200
    status, _ = call(server, "DELETE", f"/_xerj/share/{share['id']}", headers=world["admin"])
    assert status == 200
    for _ in range(12):
        status, answer = call(server, "GET", f"/{world['ds']}/_count", headers=guest)
        assert status == 401, answer


def test_wrong_passcodes_are_rate_limited_per_share_across_workers(server, world):
    share = _open(server, world["folder"])
    spare = _open(server, world["folder"])
    answers = [_exchange(server, share["id"], f"wrong-{n}") for n in range(9)]
    statuses = [status for status, _ in answers]
    # Five failures in all, whichever worker each landed on, then the share refuses every attempt.
    assert statuses == [401] * 5 + [429] * 4, statuses
    assert "too many wrong passcodes" in answers[-1][1]["error"]["reason"]
    status, _ = _exchange(server, share["id"], share["passcode"])
    assert status == 429  # the right passcode too, until the window has passed
    # per share: another share of the same brain is not locked
    assert _exchange(server, spare["id"], spare["passcode"])[0] == 200


def test_the_command_reports_key_problems_and_unindexed_folders(server, world, tmp_path):
    never = tmp_path / "never indexed"
    never.mkdir()
    refused = run("share", str(world["folder"]), "--url", server.url, "--api-key", "bm90OmFrZXk=", check=False)
    assert refused.returncode == 1 and "refused the API key" in refused.stderr, refused.stderr
    status, key = call(server, "POST", "/_security/api_key", {"name": "reader"}, world["admin"])
    assert status == 200
    weak = run("share", str(world["folder"]), "--url", server.url, "--api-key", key["encoded"], check=False)
    assert weak.returncode == 1 and "not an admin key" in weak.stderr, weak.stderr
    # a key problem is reported as one even for a folder that was never indexed
    weak = run("share", str(never), "--url", server.url, "--api-key", key["encoded"], check=False)
    assert "not an admin key" in weak.stderr and "never indexed" not in weak.stderr
    missing = run("share", str(never), "--url", server.url, "--api-key", server.admin, check=False)
    assert missing.returncode == 1 and "was never indexed on this node" in missing.stderr, missing.stderr
    # the brain exists, but was built from another folder
    elsewhere = run("share", str(never), "--brain", "case-files", "--url", server.url, "--api-key", server.admin,
                    check=False)
    assert elsewhere.returncode == 1 and "was never indexed on this node" in elsewhere.stderr
    assert str(world["folder"].resolve()) in elsewhere.stderr

