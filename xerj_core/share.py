"""``xerj share``: open, list and revoke read-only share links of a brain on a running secured server."""

from __future__ import annotations

import datetime
import json
import shlex
import urllib.parse
from pathlib import Path
from typing import Any

import click

from xerj_core.credentials import ADMIN_KEY_FILE, api_key_for, authorization_header
from xerj_core.engine import default_data_dir
from xerj_core import hookimpl

DEFAULT_URL = "http://127.0.0.1:9200"


def share_command_line(folder: str | Path, brain: str | None = None, url: str | None = None) -> str:
    """The ``xerj share`` command for ``folder``, each argument shell-quoted so it pastes as one argument."""
    argv = ["xerj", "share", str(folder)]
    if brain is not None:
        argv += ["--brain", brain]
    if url is not None and url.rstrip("/") != DEFAULT_URL:
        argv += ["--url", url.rstrip("/")]
    return " ".join(shlex.quote(arg) for arg in argv)


def guest_link(base: str, share_id: str) -> str:
    return f"{base.rstrip('/')}/_xerj-console/#/guest?{urllib.parse.urlencode({'share': share_id})}"


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _reason(body: Any, fallback: str) -> str:
    try:
        return body["error"]["reason"]
    except (KeyError, TypeError):
        return fallback


def _call(base: str, method: str, path: str, key: str | None, body: Any = None) -> Any:
    """One request to the server; an answer other than 2xx is a ClickException saying what to do."""
    # here, not at the top: every process that builds the plugin manager imports this module (~0.1 s)
    import http.client
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    headers = {**authorization_header(key), **({"Content-Type": "application/json"} if data else {})}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
        except ValueError:
            answer = None
        if exc.code == 401:
            raise click.ClickException(
                f"the xerj server at {base} refused the API key ({'none was found' if key is None else 'the one given'}"
                f"): sharing needs the admin key; pass --api-key, set XERJ_API_KEY, or run on the server's machine "
                f"with --data-dir where its {ADMIN_KEY_FILE} is") from None
        if exc.code == 403:
            raise click.ClickException(
                f"the API key given is not an admin key: the xerj server at {base} lets only a superuser share "
                f"({_reason(answer, 'forbidden')}); pass the admin key with --api-key") from None
        raise click.ClickException(_reason(answer, f"the server answered {exc.code}")) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise click.ClickException(f"no xerj server answers at {base} ({exc}); start one with `xerj serve` "
                                   f"or `xerj brain`, or pass --url") from None


@click.command("share")
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.option("--brain", default=None, help="The brain to share (default: the one `xerj brain` named after FOLDER).")
@click.option("--expires", default="7d", show_default=True, metavar="TIME",
              help="How long the link works: 30m, 12h, 7d ...")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The xerj server that serves the brain.")
@click.option("--api-key", default=None, metavar="KEY",
              help="The admin key; else XERJ_API_KEY, else the data directory's admin.key (a local server).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where a local server's admin.key is (default: the default data directory).")
@click.option("--list", "list_", is_flag=True, help="List every share link and its state.")
@click.option("--revoke", default=None, metavar="ID", help="Revoke a share link: its guests lose access at once.")
def share_command(folder, brain, expires, url, api_key, data_dir, list_, revoke) -> None:
    """Give one person read-only search over FOLDER's brain: prints a link and a passcode.

    FOLDER resolves the way `xerj brain` named it (the brain from the folder's
    name, or --brain); a folder never indexed on the server is an error.
    """
    chosen = [name for name, given in (("FOLDER", folder), ("--list", list_), ("--revoke", revoke)) if given]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of FOLDER, --list or --revoke ID")
    from xerj_core.autoindex.commands import _check_brain, _is_local

    base = url.rstrip("/")
    key = api_key_for(api_key, (data_dir or default_data_dir()) if _is_local(base) else None)
    if list_:
        shares = _call(base, "GET", "/_xerj/share", key)["shares"]
        if not shares:
            click.echo("no share links")
        for share in shares:
            click.echo(f"{share['id']}  {share['state']:<7}  brain '{share['brain']}'  until "
                       f"{_when(share['expires_at'])}  {share.get('folder') or ''}")
        return
    if revoke is not None:
        done = _call(base, "DELETE", f"/_xerj/share/{urllib.parse.quote(revoke, safe='')}", key)
        click.echo(f"revoked share {done['id']} of brain '{done['brain']}': its guests lose access now")
        return
    resolved = str(Path(folder).expanduser().resolve())
    name = _check_brain(resolved, brain)
    share = _call(base, "POST", "/_xerj/share", key, {"brain": name, "folder": resolved, "expires": expires})
    click.echo(f"shared brain '{share['brain']}' ({resolved}) read-only until {_when(share['expires_at'])}")
    click.echo(f"  link:     {guest_link(base, share['id'])}")
    click.echo(f"  passcode: {share['passcode']}")
    click.echo(f"  indices:  {', '.join(share['indices'])}")
    click.echo(f"  revoke:   xerj share --revoke {shlex.quote(share['id'])}"
               + (f" --url {shlex.quote(base)}" if base != DEFAULT_URL else ""))


@hookimpl
def xerj_register_commands(cli: click.Group) -> None:
    cli.add_command(share_command)


__all__ = ["DEFAULT_URL", "guest_link", "share_command", "share_command_line"]
