"""The main job as a person runs it: `xerj brain` serving a folder, `xerj autoindex --watch` following edits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import lmdb
import pytest

from xerj_core.store import Store

from .conftest import CORPORA

XERJ = [sys.executable, "-m", "xerj_core"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float = 30.0, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every)
    raise AssertionError("condition not met in time")


def get_json(url: str, headers: dict[str, str] | None = None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2) as response:
            return json.loads(response.read())
    except OSError:
        return None


def stopped(proc: subprocess.Popen, how: int) -> str:
    """What a watcher printed once ``how`` stopped it; killed if it did not stop, so none is left behind even
    when the test's assertions fail."""
    proc.send_signal(how)
    try:
        return proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def make_notes(folder: Path) -> None:
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nSee [[beta]] for the rest.\n")
    (folder / "beta.md").write_text("# Beta\n\nThe rest.\n")


def test_xerj_brain_indexes_then_serves_the_folder(tmp_path):
    notes = tmp_path / "my notes"
    make_notes(notes)
    (notes / "rest.py").write_text('"""The rest, as code."""\n')  # a second dataset: code
    (notes / "gamma.md").write_text("# Gamma\n\nAlso [[beta]].\n")
    (notes / "beta.md").write_text("# Beta\n\nThe rest.\n\n## More\n\nSee [[gamma]].\n")  # beta links out too
    port = free_port()
    proc = subprocess.Popen([*XERJ, "brain", str(notes), "--data-dir", str(tmp_path / "data"), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    admin_key = tmp_path / "data" / "admin.key"
    printed = []

    def auth() -> dict[str, str]:
        # The server it starts is secured; the admin key appears once that server has started.
        return {"Authorization": "ApiKey " + admin_key.read_text().strip()} if admin_key.exists() else {}

    try:
        overview = wait_for(lambda: get_json(f"http://127.0.0.1:{port}/_graph/my-notes/overview", auth()))
        assert overview["exists"] and overview["edges"]["live"] >= 1
        assert get_json(f"http://127.0.0.1:{port}/_graph/my-notes/overview") is None  # 401 without the key
        ego = get_json(f"http://127.0.0.1:{port}/_graph/my-notes/ego?node=alpha.md&hops=2", auth())
        # The link sits in the section under "# Alpha", one sequence hop from the file card.
        assert any(e["dst"] == "beta.md" and e["type"] == "wikilink" for e in ego["edges"])
        while not printed or not printed[-1].startswith("it is secured"):  # the closing summary, read as printed
            printed.append(proc.stdout.readline().strip())
        # the printed ego URL works as printed: the most linked note, with its edges
        (ego_url,) = [line.split(None, 1)[1] for line in printed if line.startswith("ego:")]
        printed_ego = get_json(ego_url, auth())
        assert printed_ego["node"] == "beta.md" and printed_ego["node_found"] and printed_ego["edges"]
        # with the note's own links, which sit on its sections
        assert ("beta.md#more", "gamma.md", 1) in [(e["src"], e["dst"], e["hop"]) for e in printed_ego["edges"]]
        # and the printed search URL searches every dataset of the folder
        (search_url,) = [line.split(None, 1)[1] for line in printed if line.startswith("search:")]
        found = get_json(search_url.replace("<words>", "rest") + "&size=10", auth())
        assert {hit["_index"].split("-")[1] for hit in found["hits"]["hits"]} == {"notes", "code"}
    finally:
        proc.send_signal(signal.SIGTERM)
        output = "\n".join(printed) + proc.communicate(timeout=30)[0]
    assert "brain 'my-notes' is ready" in output
    assert f"http://127.0.0.1:{port}/_graph/my-notes/overview" in output
    assert str(admin_key) in output and admin_key.read_text().strip() not in output


def test_autoindex_watch_follows_edits(tmp_path):
    notes = tmp_path / "watched"
    make_notes(notes)
    data = tmp_path / "data"
    # Started as a non-interactive shell starts a background job: SIGINT ignored. --watch handles it anyway.
    proc = subprocess.Popen([*XERJ, "autoindex", str(notes), "--watch", "--interval", "0.2", "--data-dir", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))

    def live_claims():
        if not (data / "data.mdb").exists():
            return None
        with Store(data) as store:
            if not store.exists(".xerj-memory-watched-edges"):
                return None
            with store.reader(".xerj-memory-watched-edges") as r:
                claims = set()
                for row in r.live_rows():
                    source = r.document(int(row))[1]
                    if "src" in source and "invalid_at" not in source:
                        claims.add((source["src"].split("#")[0], source["type"], source["dst"]))
                return claims

    try:
        assert ("alpha.md", "wikilink", "beta.md") in wait_for(live_claims)
        (notes / "gamma.md").write_text("# Gamma\n\nBack to [[alpha]].\n")
        wait_for(lambda: ("gamma.md", "wikilink", "alpha.md") in (live_claims() or set()))
        (notes / "alpha.md").write_text("# Alpha\n\nNo links any more.\n")
        os.utime(notes / "alpha.md", ns=(time.time_ns(), time.time_ns() + 2_000_000_000))
        wait_for(lambda: ("alpha.md", "wikilink", "beta.md") not in (live_claims() or {("alpha.md", "wikilink", "beta.md")}))
    finally:
        output = stopped(proc, signal.SIGINT)
    assert proc.returncode == 0 and "stopped; every file written so far is complete" in output


def test_autoindex_watch_stops_on_sigterm(tmp_path):
    notes = tmp_path / "watched"
    make_notes(notes)
    proc = subprocess.Popen([*XERJ, "autoindex", str(notes), "--watch", "--interval", "0.2",
                             "--data-dir", str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    data = tmp_path / "data"

    def first_run_done():
        if not (data / "data.mdb").exists():
            return False
        with Store(data) as store:
            return store.exists(".xerj-memory-watched-edges")

    try:
        wait_for(first_run_done)
    finally:
        output = stopped(proc, signal.SIGTERM)
    assert proc.returncode == 0 and "stopped" in output


def test_autoindex_watch_warms_the_cache_on_its_first_poll(tmp_path):
    """A first index keeps no parses or detections (they would slow it); the watch's first poll keeps them for
    every file, with nothing edited, so the first save it sees detects only what that save touched."""
    notes = tmp_path / "watched"
    make_notes(notes)
    for k in range(3):
        (notes / f"more{k}.md").write_text(f"# More {k}\n\nBack to [[alpha]].\n")
    data = tmp_path / "data"
    proc = subprocess.Popen([*XERJ, "autoindex", str(notes), "--watch", "--interval", "0.2", "--data-dir", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def entries(name: str, **options) -> int:
        path = data / "autoindex-cache" / name
        if not path.exists():
            return 0
        with lmdb.open(str(path), readonly=True, lock=False, **options) as env:
            return env.stat()["entries"]

    try:
        # an entry for each of the five files, and the environment's schema mark
        wait_for(lambda: entries("detections.mdb", subdir=False) == 5 + 1 and entries("") >= 5 + 1)
    finally:
        output = stopped(proc, signal.SIGTERM)
    assert proc.returncode == 0 and "stopped" in output
    assert output.count("files:") == 1  # the warm-up changed nothing, so it printed nothing


@contextlib.contextmanager
def serving(data: Path):
    """A one-worker server on ``data``, its port yielded, stopped on the way out."""
    port = free_port()
    proc = subprocess.Popen([*XERJ, "serve", "--data-dir", str(data), "--port", str(port), "--workers", "1",
                             "--insecure"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: get_json(f"http://127.0.0.1:{port}/_xerj/node"))
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def xerj_brain(notes: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*XERJ, "brain", str(notes), *args], capture_output=True, text=True, timeout=60)


def printed_ego_url(stdout: str) -> str:
    return next(line.split()[-1] for line in stdout.splitlines() if line.strip().startswith("ego:"))


def test_xerj_brain_refuses_a_server_of_another_data_dir_and_uses_url(tmp_path):
    notes = tmp_path / "notes"
    make_notes(notes)
    with serving(tmp_path / "theirs") as port:
        refused = xerj_brain(notes, "--data-dir", str(tmp_path / "mine"), "--port", str(port))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"serves {(tmp_path / 'theirs').resolve()}" in refused.stderr and "--url" in refused.stderr
        assert get_json(f"http://127.0.0.1:{port}/_graph/notes/overview") is None  # nothing was written there
        url = f"http://127.0.0.1:{port}"
        used = xerj_brain(notes, "--url", url)
        assert used.returncode == 0, used.stderr
        ego_url = printed_ego_url(used.stdout)
        assert "<" not in ego_url
        ego = get_json(ego_url)
        assert ego["edges"] and ego["seeds"] == ["beta.md"]


def test_xerj_brain_attaches_to_a_server_of_its_own_data_dir(tmp_path):
    notes = tmp_path / "notes"
    make_notes(notes)
    with serving(tmp_path / "data") as port:
        attached = xerj_brain(notes, "--data-dir", str(tmp_path / "data"), "--port", str(port))
        assert attached.returncode == 0, attached.stderr
        assert "attached to the server already running" in attached.stdout
        assert any(e["dst"] == "beta.md" for e in get_json(printed_ego_url(attached.stdout))["edges"])


def test_xerj_brain_builds_the_graph_view_before_it_prints_the_ego_url(tmp_path):
    foam = CORPORA / "foam-docs"  # enough edges for sealed segments, whose view the first ego would build
    if not foam.is_dir():
        pytest.skip("shared/corpora/foam-docs is not beside the checkout")
    with serving(tmp_path / "data") as port:
        attached = xerj_brain(foam, "--data-dir", str(tmp_path / "data"), "--port", str(port))
        assert attached.returncode == 0, attached.stderr
    published = [p.name for p in (tmp_path / "data" / "views").iterdir() if not p.name.startswith(".")]
    assert any(".ids." in name for name in published) and any(".docs." in name for name in published)
    assert any("." not in name.split("@")[0] for name in published)  # the table, named by the index's uuid


def test_xerj_brain_refuses_a_port_taken_by_something_else(tmp_path):
    notes = tmp_path / "notes"
    make_notes(notes)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refused = xerj_brain(notes, "--data-dir", str(tmp_path / "data"), "--port", str(taken.getsockname()[1]))
    assert refused.returncode == 2 and "is taken by something that is not an HTTP server" in refused.stderr
    assert "is ready" not in refused.stdout  # refused before indexing


def test_an_embedded_run_is_recorded_in_the_audit_log(tmp_path):
    """A run straight into a data directory needs no key, so the run itself is the audited event."""
    notes, data = tmp_path / "notes", tmp_path / "data"
    make_notes(notes)
    env = {**os.environ, "USER": "ana", "LOGNAME": "ana"}
    for _ in range(2):
        subprocess.run([*XERJ, "autoindex", str(notes), "--brain", "kb", "--data-dir", str(data)],
                       check=True, capture_output=True, env=env, timeout=120)
    (notes / "gamma.md").write_text("# Gamma\n\nAfter [[alpha]].\n")
    subprocess.run([*XERJ, "autoindex", str(notes), "--brain", "kb", "--data-dir", str(data)],
                   check=True, capture_output=True, env=env, timeout=120)
    events = [json.loads(line) for line in (data / "audit.jsonl").read_text().splitlines()]
    runs = [e for e in events if e["op"] == "autoindex"]
    assert [(e["subject"], e["resource"], e["privilege"]) for e in runs] == [("local:ana", "kb", "write")] * 3
    assert runs[0]["outcome"] == "success" and runs[0]["note"].startswith(f"{notes}: 2 indexed, 0 removed, 0 failed")
    assert ": 0 indexed" in runs[1]["note"]  # a run that changed nothing is still a run someone made
    assert ": 1 indexed" in runs[2]["note"]
    verdict = subprocess.run([*XERJ, "audit", "verify", "--data-dir", str(data)], capture_output=True, timeout=60)
    assert verdict.returncode == 0, verdict.stderr


def test_xerj_brain_honours_ignore_files_unless_told_not_to(tmp_path):
    notes = tmp_path / "notes"
    make_notes(notes)
    (notes / "draft.md").write_text("# Draft\n\nnot for the brain yet\n")
    (notes / ".gitignore").write_text("draft.md\n")
    with serving(tmp_path / "data") as port:
        url = f"http://127.0.0.1:{port}"
        honoured = xerj_brain(notes, "--url", url)
        assert honoured.returncode == 0, honoured.stderr
        assert "ignored 1" in honoured.stdout + honoured.stderr
        everything = xerj_brain(notes, "--url", url, "--no-ignore")
        assert everything.returncode == 0, everything.stderr
        printed = everything.stdout + everything.stderr
        assert "ignored" not in printed and "1 indexed" in printed, printed
        # indexing into the data directory itself (attached to its server), another brain of the same folder
        local = ["--data-dir", str(tmp_path / "data"), "--port", str(port), "--brain", "local"]
        honoured = xerj_brain(notes, *local)
        assert honoured.returncode == 0 and "ignored 1" in honoured.stdout + honoured.stderr, honoured.stderr
        everything = xerj_brain(notes, *local, "--no-ignore")
        printed = everything.stdout + everything.stderr
        assert everything.returncode == 0 and "ignored" not in printed and "1 indexed" in printed, printed
