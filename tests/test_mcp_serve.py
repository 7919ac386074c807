"""`xerj init` and `xerj mcp` against a real secured `xerj serve`: the configured command, run over stdio."""

from __future__ import annotations

import json
import os
import stat

import anyio
import pytest
from click.testing import CliRunner

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402

from xerj_core.cli import build_cli  # noqa: E402
from xerj_core.plugins import get_plugin_manager  # noqa: E402

from .test_http_serve import Server, request  # noqa: E402

A, B = "alice", "bob"
OTHER = ('{\n    "mcpServers": {\n        "notes": {"command": "/opt/notes/bin/serve", "args": ["--x", "caf\\u00e9"],'
         ' "env": {"N": "1.50"}}\n    },\n    "theme": "dark"\n}\n')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-serve")
    srv = Server(root / "data", root / "serve.log", workers=1, insecure=False)
    srv.data_dir = root / "data"
    srv.url = f"http://127.0.0.1:{srv.port}"
    for who in (A, B):
        status, body = request(srv.port, "POST", f"/_memory/{who}", {"text": f"{who} feeds the starter at dawn"},
                               headers=srv.headers)
        assert status == 201, body
        status, body = request(srv.port, "POST", f"/_graph/{who}/link", {
            "src": f"{who}-starter", "dst": f"{who}-bread", "type": "feeds"}, headers=srv.headers)
        assert status == 201, body
    yield srv
    srv.stop()


def init(server, project, *args):
    cli = build_cli(get_plugin_manager())
    return CliRunner().invoke(cli, ["init", "--project-dir", str(project), "--url", server.url,
                                    "--data-dir", str(server.data_dir), *args], catch_exceptions=False)


def stdio_params(entry: dict) -> StdioServerParameters:
    return StdioServerParameters(command=entry["command"], args=entry["args"], env=entry.get("env"))


def over_stdio(params: StdioServerParameters, script):
    async def main():
        async with Client(params, read_timeout_seconds=60) as client:
            return await script(client)
    return anyio.run(main)


def test_init_mints_a_scoped_key_keeps_other_servers_byte_for_byte_and_the_entry_runs(server, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".mcp.json").write_text(OTHER)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text('{"enabledMcpjsonServers": ["notes"], "x": 1}\n')

    result = init(server, project, "--namespace", A)
    assert result.exit_code == 0, result.output
    written = (project / ".mcp.json").read_text()
    # The other server, the other key and the indentation are the file's own bytes.
    other_entry = OTHER[:OTHER.index("}\n    },") + 1]
    assert written.startswith(other_entry)
    assert written.endswith('\n    },\n    "theme": "dark"\n}\n')
    config = json.loads(written)
    assert config["mcpServers"]["notes"] == json.loads(OTHER)["mcpServers"]["notes"]
    entry = config["mcpServers"]["xerj"]
    assert entry["type"] == "stdio" and os.path.isabs(entry["command"])
    assert entry["args"][-3:] == ["mcp", "--url", server.url]
    key = entry["env"]["XERJ_API_KEY"]
    assert key not in result.output and key[:4] + "…" in result.output
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert settings == {"enabledMcpjsonServers": ["notes", "xerj"], "x": 1}

    # The key reaches exactly namespace alice and brain alice.
    status, who = request(server.port, "GET", "/_security/_authenticate", headers={"Authorization": f"ApiKey {key}"})
    assert status == 200, who
    status, keys = request(server.port, "GET", f"/_security/api_key?id={who['api_key']['id']}", headers=server.headers)
    grants = keys["api_keys"][0]["role_descriptors"]["xerj-mcp"]["indices"]
    assert grants == [{"names": [".xerj-memory-alice", ".xerj-memory-alice-edges"], "privileges": ["read", "write"]}]

    # What the client would start: the configured command, over stdio, against the real server.
    async def script(client):
        tools = (await client.list_tools()).tools
        stored = await client.call_tool("xerj_memory_store", {"namespace": A, "text": "alice proofs overnight"})
        recall = await client.call_tool("xerj_memory_recall", {"namespace": A, "query": "starter dawn"})
        ego = await client.call_tool("xerj_brain_ego", {"brain": A, "node": "alice-starter"})
        refused = await client.call_tool("xerj_memory_recall", {"namespace": B, "query": "starter"})
        hops = await client.call_tool("xerj_brain_ego", {"brain": A, "node": "alice-starter", "hops": 3})
        unknown = await client.call_tool("xerj_brain_ego", {"brain": A, "nod": "alice-starter"})
        return tools, stored, recall, ego, refused, hops, unknown

    tools, stored, recall, ego, refused, hops, unknown = over_stdio(stdio_params(entry), script)
    assert {t.name for t in tools} >= {"xerj_memory_store", "xerj_memory_recall", "xerj_brain_ego", "xerj_search"}
    assert stored.structured_content["created"] is True
    assert recall.structured_content["hits"][0]["text"] == "alice feeds the starter at dawn"
    assert [e["dst"] for e in ego.structured_content["edges"]] == ["alice-bread"]
    status, http = request(server.port, "POST", f"/_memory/{B}/_recall", {"query": "starter"},
                           headers={"Authorization": f"ApiKey {key}"})
    assert status == 403 and refused.is_error and refused.content[0].text == http["error"]["reason"]
    assert hops.is_error and hops.content[0].text.startswith("hops is capped at 2")
    assert unknown.is_error and "unknown argument(s) [nod]" in unknown.content[0].text

    # A second run is refused without --force and changes nothing; --force replaces only the xerj entry.
    before = written
    again = init(server, project, "--namespace", A)
    assert again.exit_code != 0 and "--force" in again.output
    assert (project / ".mcp.json").read_text() == before
    forced = init(server, project, "--namespace", A, "--force")
    assert forced.exit_code == 0, forced.output
    after = (project / ".mcp.json").read_text()
    assert after.startswith(other_entry) and after != before
    assert json.loads(after)["mcpServers"]["xerj"]["env"]["XERJ_API_KEY"] != key


def test_init_refuses_an_invalid_or_unreadable_config_and_changes_nothing(server, tmp_path):
    project = tmp_path / "bad"
    (project / ".cursor").mkdir(parents=True)
    broken = '{"mcpServers": {"notes": {}},'
    (project / ".cursor" / "mcp.json").write_text(broken)
    result = init(server, project, "--client", "cursor", "--namespace", A)
    assert result.exit_code != 0 and "is not valid JSON" in result.output and "Nothing was changed" in result.output
    assert (project / ".cursor" / "mcp.json").read_text() == broken
    status, keys = request(server.port, "GET", "/_security/api_key?name=xerj-mcp-cursor-alice", headers=server.headers)
    assert keys["api_keys"] == []  # refused before any key was minted

    (project / ".cursor" / "mcp.json").write_text("[1, 2]")
    result = init(server, project, "--client", "cursor", "--namespace", A)
    assert result.exit_code != 0 and "JSON object" in result.output

    (project / ".cursor" / "mcp.json").write_text("{}")
    os.chmod(project / ".cursor" / "mcp.json", 0)
    try:
        if not os.access(project / ".cursor" / "mcp.json", os.R_OK):  # root reads anything
            result = init(server, project, "--client", "cursor", "--namespace", A)
            assert result.exit_code != 0 and "cannot read" in result.output
    finally:
        os.chmod(project / ".cursor" / "mcp.json", 0o644)


def test_init_for_cursor_and_desktop_writes_their_files_privately(server, tmp_path, monkeypatch):
    project = tmp_path / "fresh"
    project.mkdir()
    result = init(server, project, "--client", "cursor", "--namespace", A, "--brain", A)
    assert result.exit_code == 0, result.output
    path = project / ".cursor" / "mcp.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a new file holding a key is the owner's alone
    entry = json.loads(path.read_text())["mcpServers"]["xerj"]
    assert "type" not in entry and entry["args"][-3:] == ["mcp", "--url", server.url]

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    result = init(server, project, "--client", "claude-desktop", "--namespace", A)
    assert result.exit_code == 0, result.output
    desktop = tmp_path / "home" / ".config" / "Claude" / "claude_desktop_config.json"
    assert json.loads(desktop.read_text())["mcpServers"]["xerj"]["env"]["XERJ_API_KEY"]
    refused = init(server, project, "--client", "claude-desktop", "--scope", "project")
    assert refused.exit_code != 0


def test_init_refuses_an_unknown_brain_and_grants_a_vault_brains_dataset_indices(server, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    result = init(server, project, "--namespace", A, "--brain", "no-such-brain")
    assert result.exit_code != 0 and "brain [no-such-brain] does not exist" in result.output
    assert not (project / ".mcp.json").exists()
    # bob's brain read-only, alice's namespace read-write.
    result = init(server, project, "--namespace", A, "--brain", B)
    assert result.exit_code == 0, result.output
    key = json.loads((project / ".mcp.json").read_text())["mcpServers"]["xerj"]["env"]["XERJ_API_KEY"]
    auth = {"Authorization": f"ApiKey {key}"}
    assert request(server.port, "GET", f"/_graph/{B}/ego?node=bob-starter", headers=auth)[0] == 200
    assert request(server.port, "POST", f"/_graph/{B}/link", {"src": "a", "dst": "b", "type": "t"},
                   headers=auth)[0] == 403
    assert request(server.port, "POST", f"/_memory/{B}", {"text": "x"}, headers=auth)[0] == 403


def test_mcp_never_falls_back_to_the_admin_key(server, tmp_path):
    # The admin key sits where `xerj serve` and `xerj brain` would find it (the default data directory).
    (tmp_path / "xerj").mkdir()
    (tmp_path / "xerj" / "admin.key").write_text((server.data_dir / "admin.key").read_text())
    params = StdioServerParameters(command=_xerj(), args=["mcp", "--url", server.url],
                                   env={"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)})

    async def script(client):
        return client.instructions, await client.call_tool("xerj_memory_recall", {"namespace": A, "query": "x"})

    instructions, result = over_stdio(params, script)
    assert result.is_error and result.content[0].text.startswith("missing authentication credentials")
    assert "OPEN MODE" not in instructions


def test_embedded_and_served_give_the_same_answers(server, tmp_path):
    """The same calls through `xerj mcp --data-dir` on a copy of the data and through the server."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(server.data_dir, copy)
    calls = [("xerj_memory_recall", {"namespace": B, "query": "starter dawn"}),
             ("xerj_brain_ego", {"brain": B, "node": "bob-starter", "hops": 2}),
             ("xerj_brain_ego", {"brain": B, "node": "bob-starter", "hops": 3}),
             ("xerj_memory_list", {"namespace": B})]

    async def script(client):
        return [await client.call_tool(name, args) for name, args in calls]

    embedded = over_stdio(StdioServerParameters(command=_xerj(), args=["mcp", "--data-dir", str(copy)]), script)
    admin = (server.data_dir / "admin.key").read_text().strip()
    served = over_stdio(StdioServerParameters(command=_xerj(), args=["mcp", "--url", server.url, "--api-key", admin]),
                        script)
    for (name, _), one, other in zip(calls, embedded, served):
        assert one.is_error == other.is_error, name
        if one.is_error:
            assert one.content[0].text == other.content[0].text
            continue
        assert _stable(one.structured_content) == _stable(other.structured_content), name


def _stable(body: dict) -> dict:
    """Drop what differs between two calls by nature: the clock."""
    return {k: v for k, v in body.items() if k not in ("as_of", "took")}


def _xerj() -> str:
    import shutil
    import sys

    found = shutil.which("xerj") or os.path.join(os.path.dirname(sys.executable), "xerj")
    return found


def test_streamable_http_on_loopback_with_the_key_from_the_environment(server, tmp_path):
    import subprocess
    import time

    from .test_http_serve import free_port

    status, minted = request(server.port, "POST", "/_security/api_key", {
        "name": "http-agent", "role_descriptors": {"a": {"indices": [
            {"names": [f".xerj-memory-{A}", f".xerj-memory-{A}-edges"], "privileges": ["read"]}]}}},
        headers=server.headers)
    assert status == 200, minted
    port = free_port()
    log = open(tmp_path / "mcp.log", "wb")
    proc = subprocess.Popen([_xerj(), "mcp", "--http", "--port", str(port), "--url", server.url],
                            env={**os.environ, "XERJ_API_KEY": minted["encoded"]}, stdout=log, stderr=log,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket_to(port):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "mcp.log").read_text()) from None
                time.sleep(0.1)

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return (await client.call_tool("xerj_memory_recall", {"namespace": A, "query": "starter"}),
                        await client.call_tool("xerj_memory_store", {"namespace": A, "text": "read only"}))

        recall, store = anyio.run(main)
        assert recall.structured_content["hits"][0]["text"] == "alice feeds the starter at dawn"
        assert store.is_error and "unauthorized" in store.content[0].text  # the key reads only
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    assert "127.0.0.1" in (tmp_path / "mcp.log").read_text()


def socket_to(port: int):
    import socket

    return socket.create_connection(("127.0.0.1", port), timeout=1)


def test_init_refuses_a_namespace_that_is_not_a_name(server, tmp_path):
    result = init(server, tmp_path, "--namespace", "Not A Name")
    assert result.exit_code != 0 and "--namespace" in result.output and "lowercase" in result.output
    assert not (tmp_path / ".mcp.json").exists()
