"""Share links in process: the store (hash, rate limit across processes, revoke), the guest backend, the routes."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from click.testing import CliRunner
from falcon.testing import TestClient

from xerj_auth.shares import MAX_FAILURES, ShareRefused, ShareStore
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import IllegalArgument
from xerj_core.share import guest_link, share_command_line
from xerj_core.testing.auth import AbstractAuthBackendTests
from xerj_http import create_app

from .http_helpers import admin_headers, audit_log  # noqa: F401 (a fixture)

FAST = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


@pytest.fixture
def store(tmp_path):
    opened = ShareStore(tmp_path / "data", hasher=FAST)
    yield opened
    opened.close()


def test_only_an_argon2id_hash_of_the_passcode_is_kept(store):
    share = store.mint(brain="notes", nodes_indices=["ax-notes-1"], folder="/x")
    record = store.record(share["id"])
    assert record.passcode_hash.startswith("$argon2id$")
    assert share["passcode"] not in repr(record) and share["passcode"] not in repr(record.passcode_hash)
    assert record.indices == ("ax-notes-1", ".xerj-memory-notes-edges")
    assert "passcode_hash" not in record.public() and share["passcode"] not in str(record.public())


def test_a_share_never_grants_a_memory_namespace(store):
    with pytest.raises(IllegalArgument, match="reserved index"):
        store.mint(brain="notes", nodes_indices=[".xerj-memory-notes"])


def test_a_token_reads_exactly_the_shared_indices(store):
    share = store.mint(brain="notes", nodes_indices=["ax-notes-1"])
    token = store.exchange(share["id"], share["passcode"])
    principal = store.verify(token.token)
    assert principal.name == f"guest:{share['id']}" and principal.mode == "guest" and not principal.superuser
    assert principal.may("read", "ax-notes-1") and principal.may("read", ".xerj-memory-notes-edges")
    assert not principal.may("write", "ax-notes-1") and not principal.may("read", "ax-notes-2")
    assert not principal.may("read", ".xerj-memory-notes")
    assert ("POST", "/_graph/{brain}/link") not in principal.routes


def _fail_in_another_process(data_dir: Path, share_id: str, times: int) -> list[int]:
    code = (
        "import sys\n"
        "from argon2 import PasswordHasher\n"
        "from xerj_auth.shares import ShareStore, ShareRefused\n"
        "s = ShareStore(sys.argv[1], hasher=PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))\n"
        "out = []\n"
        "for n in range(int(sys.argv[3])):\n"
        "    try:\n"
        "        s.exchange(sys.argv[2], 'wrong'); out.append(200)\n"
        "    except ShareRefused as exc:\n"
        "        out.append(exc.status)\n"
        "print(','.join(map(str, out)))\n")
    done = subprocess.run([sys.executable, "-c", code, str(data_dir), share_id, str(times)], capture_output=True,
                          text=True, timeout=60, check=True)
    return [int(x) for x in done.stdout.strip().split(",")]


def test_the_rate_limit_is_shared_by_every_process(store, tmp_path):
    share = store.mint(brain="notes", nodes_indices=["ax-notes-1"])
    assert _fail_in_another_process(tmp_path / "data", share["id"], 3) == [401, 401, 401]
    for _ in range(MAX_FAILURES - 3):
        with pytest.raises(ShareRefused) as refused:
            store.exchange(share["id"], "wrong")
        assert refused.value.status == 401
    # This process saw two failures; the limit counts all five.
    with pytest.raises(ShareRefused) as refused:
        store.exchange(share["id"], share["passcode"])
    assert refused.value.status == 429
    assert _fail_in_another_process(tmp_path / "data", share["id"], 1) == [429]


def test_the_right_passcode_clears_the_count(store):
    share = store.mint(brain="notes", nodes_indices=["ax-notes-1"])
    for _ in range(MAX_FAILURES - 1):
        with pytest.raises(ShareRefused):
            store.exchange(share["id"], "wrong")
    store.exchange(share["id"], share["passcode"])
    for _ in range(MAX_FAILURES - 1):
        with pytest.raises(ShareRefused) as refused:
            store.exchange(share["id"], "wrong")
        assert refused.value.status == 401


def test_revoke_drops_a_cached_token_in_another_store(store, tmp_path):
    other = ShareStore(tmp_path / "data", hasher=FAST)
    try:
        share = store.mint(brain="notes", nodes_indices=["ax-notes-1"])
        token = store.exchange(share["id"], share["passcode"]).token
        assert other.verify(token).name == f"guest:{share['id']}"  # now cached in `other`
        store.revoke(share["id"])
        with pytest.raises(Exception) as refused:
            other.verify(token)
        assert getattr(refused.value, "status", None) == 401
    finally:
        other.close()


class TestGuestBackend(AbstractAuthBackendTests):
    bad_headers = (
        {"AUTHORIZATION": "Bearer "},
        {"AUTHORIZATION": "Bearer no-dot"},
        {"AUTHORIZATION": "Bearer unknown.secret"},
        {"AUTHORIZATION": "Bearer " + "A" * 10_000},
    )

    @pytest.fixture
    def backend(self):
        from xerj_auth.guest import GuestBackend

        return GuestBackend()

    @pytest.fixture
    def valid_headers(self, opened):
        share = opened.shares.mint(brain="notes", nodes_indices=["ax-notes-1"])
        return {"AUTHORIZATION": "Bearer " + opened.shares.exchange(share["id"], share["passcode"]).token}


# -- the routes, in process -------------------------------------------------------------------


@pytest.fixture
def brain(engine, pm, tmp_path):
    folder = tmp_path / "case files"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nsee [[b]] quokka\n")
    (folder / "b.md").write_text("# B\n\nback to [[a]]\n")
    run(engine, str(folder), brain="case-files", graph=True, pm=pm)
    return folder


def test_guest_denials_reach_the_audit_slot_under_the_share(engine, pm, brain, audit_log):
    app = create_app(engine, pm)
    try:
        http = TestClient(app)
        admin = admin_headers(engine)
        made = http.simulate_post("/_xerj/share", json={"brain": "case-files", "folder": str(brain.resolve())},
                                  headers=admin)
        assert made.status_code == 201, made.json
        share = made.json
        assert http.simulate_post("/_xerj/share/_exchange",
                                  json={"share": share["id"], "passcode": "wrong"}).status_code == 401
        token = http.simulate_post("/_xerj/share/_exchange",
                                   json={"share": share["id"], "passcode": share["passcode"]}).json["token"]
        guest = {"Authorization": f"Bearer {token}"}
        assert http.simulate_get("/_memory/x", headers=guest).status_code == 403
        assert http.simulate_get(f"/{share['indices'][0]}/_count", headers=guest).status_code == 200
        assert http.simulate_post("/_xerj/share/_exchange",
                                  json={"share": "no-such-share", "passcode": "x"}).status_code == 401
        subject = f"guest:{share['id']}"
        mine = [(e["op"], e["outcome"]) for e in audit_log if e["subject"] == subject]
        # (an allowed read of an ordinary index is not recorded under the default --audit-reads reserved)
        assert mine == [("share.exchange", "denied"), ("share.exchange", "success"), ("memory.list", "denied")], \
            audit_log
        assert (audit_log[-1]["subject"], audit_log[-1]["outcome"]) == ("anonymous", "denied")
    finally:
        app.close()


def test_open_mode_refuses_to_share_and_says_why(engine, pm, brain):
    app = create_app(engine, pm, insecure=True)
    try:
        answer = TestClient(app).simulate_post("/_xerj/share", json={"brain": "case-files"})
        assert answer.status_code == 400
        assert "open mode" in answer.json["error"]["reason"]
    finally:
        app.close()


def test_the_exchange_is_the_only_door_open_without_a_credential(engine, pm, brain):
    app = create_app(engine, pm)
    try:
        http = TestClient(app)
        for method, path in (("GET", "/_xerj/share"), ("POST", "/_xerj/share"), ("GET", "/_xerj/share/_exchange"),
                             ("GET", "/"), ("DELETE", "/_xerj/share/x")):
            assert http.simulate_request(method, path, json={}).status_code == 401, (method, path)
        assert http.simulate_post("/_xerj/share/_exchange", json={"share": "x", "passcode": "y"}).status_code == 401
        assert http.simulate_post("/_xerj/share/_exchange", json={"share": "x"}).status_code == 400
    finally:
        app.close()


def test_sharing_a_brain_built_over_http_grants_its_edges_only(engine, pm):
    app = create_app(engine, pm)
    try:
        http = TestClient(app)
        admin = admin_headers(engine)
        assert http.simulate_post("/_graph/api/link", json={"src": "a", "dst": "b", "type": "t"},
                                  headers=admin).status_code == 201
        made = http.simulate_post("/_xerj/share", json={"brain": "api"}, headers=admin)
        assert made.status_code == 201 and made.json["indices"] == [".xerj-memory-api-edges"]
        for expires in ("forever", "-1d", 7, "0s"):
            bad = http.simulate_post("/_xerj/share", json={"brain": "api", "expires": expires}, headers=admin)
            assert bad.status_code == 400 and "[expires]" in bad.json["error"]["reason"], bad.json
        missing = http.simulate_post("/_xerj/share", json={"brain": "ghost"}, headers=admin)
        assert missing.status_code == 404 and "was never indexed on this node" in missing.json["error"]["reason"]
    finally:
        app.close()


# -- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["/home/you/case files", "/home/you/it's mine", "/home/you/plain",
                                    "/tmp/$HOME `x`"])
def test_the_share_line_pastes_as_one_argument_per_argument(folder):
    line = share_command_line(folder)
    assert shlex.split(line) == ["xerj", "share", folder]
    line = share_command_line(folder, "my brain", "http://10.0.0.2:9201")
    assert shlex.split(line) == ["xerj", "share", folder, "--brain", "my brain", "--url", "http://10.0.0.2:9201"]


def test_the_default_url_is_left_out_of_the_share_line():
    assert share_command_line("/x", url="http://127.0.0.1:9200/") == "xerj share /x"
    assert guest_link("http://h:1/", "a_b-c") == "http://h:1/_xerj-console/#/guest?share=a_b-c"


def test_the_brain_summary_prints_the_share_line(tmp_path, monkeypatch):
    from xerj_core.autoindex.commands import _print_share

    import click

    folder = tmp_path / "case files"
    folder.mkdir()

    @click.command()
    def show():
        _print_share(str(folder), None, "http://127.0.0.1:9200", False)
        _print_share(str(folder), None, "http://127.0.0.1:9200", True)

    lines = CliRunner().invoke(show).output.splitlines()
    command = lines[0].split("share it:", 1)[1].split("   (", 1)[0].strip()
    assert shlex.split(command) == ["xerj", "share", str(folder.resolve())]
    assert "the documents stay on this machine" in lines[0]
    assert "open mode" in lines[1]


def test_the_command_needs_exactly_one_of_folder_list_revoke():
    from xerj_core.share import share_command

    assert CliRunner().invoke(share_command, []).exit_code == 2
    assert CliRunner().invoke(share_command, ["--list", "--revoke", "x"]).exit_code == 2
    refused = CliRunner().invoke(share_command, ["--list", "--url", "http://127.0.0.1:9"])
    assert refused.exit_code == 1 and "no xerj server answers" in refused.output


def test_an_exchange_drops_the_tokens_that_expired(store, monkeypatch):
    import xerj_auth.shares as shares

    share = store.mint(brain="notes", nodes_indices=["ax-notes-1"])
    monkeypatch.setattr(shares, "TOKEN_TTL_MS", 1)
    old = store.exchange(share["id"], share["passcode"])
    monkeypatch.setattr(shares, "TOKEN_TTL_MS", 3_600_000)
    time.sleep(0.01)
    fresh = store.exchange(share["id"], share["passcode"])
    with store.env.begin(db=store.tokens_db) as txn:
        kept = [key.decode() for key, _ in txn.cursor()]
    assert kept == [fresh.token.split(".")[0]] and old.token.split(".")[0] not in kept
