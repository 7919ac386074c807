"""``xerj init``: mint a key scoped to one namespace and one brain, and add xerj to an MCP client's configuration.

The configuration is the person's file: it is read and checked before anything
happens (unreadable or invalid JSON refuses, and nothing changes), an existing
``xerj`` entry is kept unless ``--force``, other servers and keys are kept byte
for byte (the entry is spliced into the text), and the file is replaced
atomically. The minted key is printed masked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import click
import platformdirs

from xerj_mcp.jsonsplice import members, set_member

CLIENTS = ("claude-code", "cursor", "claude-desktop")
ENTRY = "xerj"


@attrs.frozen
class ConfigEdit:
    """One file ``xerj init`` changes: where, its current text, and the member path it sets."""

    path: Path
    text: str
    existed: bool
    member: tuple[str, ...]


def desktop_config_path(home: Path) -> Path:
    """Claude Desktop's configuration file on this platform."""
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform.startswith("win"):
        return Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Claude" / "claude_desktop_config.json"
    return Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / "Claude" / "claude_desktop_config.json"


def config_path(client: str, scope: str, project: Path, home: Path) -> Path:
    if client == "claude-code":
        return project / ".mcp.json" if scope == "project" else home / ".claude.json"
    if client == "cursor":
        return (project if scope == "project" else home) / ".cursor" / "mcp.json"
    return desktop_config_path(home)


def read_config(path: Path) -> ConfigEdit:
    """The file's text, checked to be a JSON object; a missing file is an empty object."""
    if not path.exists():
        return ConfigEdit(path, "{}\n", False, ())
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path} ({exc}); nothing was changed") from None
    if not text.strip():
        return ConfigEdit(path, "{}\n", True, ())
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.ClickException(f"{path} is not valid JSON ({exc}); fix or move it first. Nothing was "
                                   f"changed") from None
    if not isinstance(value, dict):
        raise click.ClickException(f"{path} does not hold a JSON object; nothing was changed")
    if "mcpServers" in value and not isinstance(value["mcpServers"], dict):
        raise click.ClickException(f"{path}: mcpServers is not a JSON object; nothing was changed")
    return ConfigEdit(path, text, True, ())


def write_atomically(path: Path, text: str, *, existed: bool) -> None:
    """Replace ``path`` with ``text`` in one rename; a new file is private (it holds a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if existed else 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def mask(key: str) -> str:
    return key[:4] + "…" + "*" * 8 if len(key) > 8 else "*" * 8


def xerj_command() -> list[str]:
    """How a client starts xerj: the absolute path of the ``xerj`` script, else this Python with ``-m``."""
    found = shutil.which("xerj")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "xerj_core"]


def default_namespace(project: Path) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", project.resolve().name.lower()).strip("-._") or "default"
    return re.sub(r"\.\.+", ".", name)[:200]


def role_descriptors(namespace: str, brain: str, brain_indices: list[str], brain_write: bool) -> dict[str, Any]:
    """Exactly the namespace (read and write, with its own edges) and the brain (read, or read and write)."""
    own = [f".xerj-memory-{namespace}", f".xerj-memory-{namespace}-edges"]
    brain_names = [n for n in dict.fromkeys([f".xerj-memory-{brain}-edges", *brain_indices]) if n not in own]
    grants = [{"names": own, "privileges": ["read", "write"]}]
    if brain_names:
        grants.append({"names": brain_names, "privileges": ["read", "write"] if brain_write else ["read"]})
    return {"xerj-mcp": {"indices": grants}}


class Server:
    """The few admin calls ``xerj init`` makes, with the admin key."""

    def __init__(self, url: str, admin_key: str) -> None:
        from xerj_mcp.backend import HttpClient

        self._client = HttpClient(url, admin_key, timeout=30)
        self.url = self._client.url

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        from xerj_mcp.backend import BackendUnavailable

        try:
            return self._client.send(method, path, None, body)
        except BackendUnavailable as exc:
            raise click.ClickException(f"{exc} Nothing was changed") from None

    def refused(self, what: str, status: int, body: Any) -> click.ClickException:
        from xerj_mcp.tools import server_reason

        return click.ClickException(f"{what}: {server_reason(status, body)} (HTTP {status}). Nothing was changed")


def brain_indices(server: Server, brain: str, namespace: str, brain_write: bool) -> list[str]:
    """The brain's dataset (nodes) indices, from its overview; an unknown brain is refused unless it is the
    namespace's own or --brain-write lets the key create it."""
    from xerj_mcp.backend import segment

    status, body = server.call("GET", f"/_graph/{segment(brain)}/overview")
    if status == 404 and isinstance(body, dict) and body.get("exists") is False:
        if brain == namespace or brain_write:
            return []
        raise click.ClickException(f"brain [{brain}] does not exist on {server.url}; index it first (xerj brain) "
                                   f"or pass --brain-write to let the key create it. Nothing was changed")
    if status >= 400:
        raise server.refused(f"reading brain [{brain}]", status, body)
    listed = body.get("nodes_index") or ""
    names = listed if isinstance(listed, list) else str(listed).split(",")
    return [n.strip() for n in names if n.strip()]


@click.command("init")
@click.option("--client", type=click.Choice(CLIENTS), default="claude-code", show_default=True,
              help="The MCP client whose configuration gets the xerj server.")
@click.option("--namespace", default=None, help="The memory namespace the key reaches (default: the project "
                                                "directory's name).")
@click.option("--brain", default=None, help="The brain the key reads (default: the namespace's own).")
@click.option("--brain-write", is_flag=True, help="Let the key also link and unlink in the brain.")
@click.option("--url", default="http://127.0.0.1:9200", show_default=True, envvar="XERJ_URL",
              help="The xerj server the agent will call.")
@click.option("--scope", type=click.Choice(["project", "user"]), default=None,
              help="Project configuration (default; Claude Desktop has only user) or your user's.")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default="the current directory", help="The project whose configuration is written.")
@click.option("--admin-key", default=None, envvar="XERJ_ADMIN_KEY",
              help="The admin key that mints the scoped key (default: <data-dir>/admin.key).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=lambda: platformdirs.user_data_dir("xerj"), show_default="the user data directory",
              help="Where the server's admin.key is, when --admin-key is not given.")
@click.option("--expiration", default=None, help="The key's lifetime (e.g. 90d); default: no expiry.")
@click.option("--force", is_flag=True, help="Replace an existing xerj entry.")
def init_command(client: str, namespace: str | None, brain: str | None, brain_write: bool, url: str,
                 scope: str | None, project_dir: Path, admin_key: str | None, data_dir: Path,
                 expiration: str | None, force: bool) -> None:
    """Mint an API key for one namespace and brain, and add xerj to an MCP client's configuration."""
    from xerj_core.credentials import api_key_for

    if client == "claude-desktop":
        if scope == "project":
            raise click.UsageError("Claude Desktop has one configuration per user; drop --scope project")
        scope = "user"
    scope = scope or "project"
    project = project_dir.expanduser().resolve()
    home = Path.home()
    namespace = namespace or default_namespace(project)
    brain = brain or namespace
    from xerj_core.errors import XerjError
    from xerj_core.graph import validate_brain_name

    for option, name in (("--namespace", namespace), ("--brain", brain)):
        try:
            validate_brain_name(name)
        except XerjError as exc:
            raise click.BadParameter(exc.reason, param_hint=option) from None

    # 1. Every file is read and checked before a key exists.
    target = read_config(config_path(client, scope, project, home))
    edits = [attrs.evolve(target, member=("mcpServers", ENTRY))]
    found, _close = members(target.text, target.text.index("{"))
    servers = next((m for m in found if m[0] == "mcpServers"), None)
    if servers is not None and not force:
        inner, _ = members(target.text, servers[2])
        if any(key == ENTRY for key, *_ in inner):
            raise click.ClickException(f"{target.path} already has an mcpServers.{ENTRY} entry; pass --force to "
                                       f"replace it. Nothing was changed")
    settings = None
    if client == "claude-code" and scope == "project":
        settings = read_config(project / ".claude" / "settings.local.json")
        enabled = json.loads(settings.text).get("enabledMcpjsonServers")
        if enabled is not None and not isinstance(enabled, list):
            raise click.ClickException(f"{settings.path}: enabledMcpjsonServers is not a list; nothing was changed")

    # 2. The key: scoped to exactly this namespace and brain, minted with the admin key.
    admin = api_key_for(admin_key, None) or api_key_for(None, data_dir.expanduser())
    if admin is None:
        raise click.ClickException(f"no admin key: pass --admin-key, or --data-dir where the server wrote "
                                   f"admin.key ({data_dir}). Nothing was changed")
    server = Server(url, admin)
    indices = brain_indices(server, brain, namespace, brain_write)
    body: dict[str, Any] = {"name": f"xerj-mcp-{client}-{namespace}",
                            "role_descriptors": role_descriptors(namespace, brain, indices, brain_write),
                            "metadata": {"created_by": "xerj init", "client": client, "namespace": namespace,
                                         "brain": brain}}
    if expiration:
        body["expiration"] = expiration
    status, minted = server.call("POST", "/_security/api_key", body)
    if status >= 400 or not isinstance(minted, dict) or not minted.get("encoded"):
        raise server.refused("minting the key", status, minted)
    key = minted["encoded"]

    # 3. The entry, spliced into each file and written atomically.
    command = xerj_command()
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "mcp", "--url", url],
                             "env": {"XERJ_API_KEY": key}}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    for edit in edits:
        write_atomically(edit.path, set_member(edit.text, edit.member, entry), existed=edit.existed)
        shown = {**entry, "env": {"XERJ_API_KEY": mask(key)}}
        click.echo(f"wrote {edit.path}: mcpServers.{ENTRY} = {json.dumps(shown)}")
    if settings is not None:
        enabled = json.loads(settings.text).get("enabledMcpjsonServers") or []
        if ENTRY not in enabled:
            text = set_member(settings.text, ("enabledMcpjsonServers",), [*enabled, ENTRY])
            write_atomically(settings.path, text, existed=settings.existed)
            click.echo(f"wrote {settings.path}: enabledMcpjsonServers += {ENTRY}")
    click.echo(f"key [{minted.get('id')}] ({mask(key)}) reaches namespace [{namespace}] read/write and brain "
               f"[{brain}] {'read/write' if brain_write else 'read'}; nothing else.")
    if scope == "project":
        click.echo(f"the key is in {target.path}: keep that file out of version control.")
