"""``xerj autoindex`` and ``xerj brain``: the main job, from the command line."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import click

from xerj_core.credentials import ADMIN_KEY_FILE, api_key_for, authorization_header
from xerj_core.engine import Engine, default_data_dir
from xerj_core.errors import XerjError
from xerj_core.hookspecs import hookimpl
from xerj_core.text import derive_brain_name


class _Ticker:
    """A one-line live count on a terminal (files, documents, edges); silent elsewhere."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.counts = {"files": 0, "documents": 0, "edges": 0}
        self._last = 0.0

    def __call__(self, event: str, count: int) -> None:
        self.counts[event] = self.counts.get(event, 0) + count
        now = time.monotonic()
        if self.enabled and now - self._last > 0.1:
            self._last = now
            click.echo("\r" + "  ".join(f"{k} {v:,}" for k, v in self.counts.items()), nl=False, err=True)

    def close(self) -> None:
        if self.enabled:
            click.echo("\r" + " " * 60 + "\r", nl=False, err=True)


def _check_brain(folder: str, brain: str | None) -> str:
    from xerj_core.graph.brain import validate_brain_name

    name = brain if brain is not None else derive_brain_name(Path(folder).resolve())
    try:
        validate_brain_name(name)
    except XerjError as exc:
        raise click.BadParameter(exc.reason, param_hint="--brain") from None
    return name


def _print_summary(summary, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2, sort_keys=True))
        return
    s = summary
    click.echo(f"{s.root} → brain '{s.brain}'")
    click.echo(f"  files: {s.files_seen} seen, {s.files_indexed} indexed, {s.files_unchanged} unchanged, "
               f"{s.files_removed} removed, {len(s.files_failed)} failed")
    click.echo(f"  documents written: {s.documents}  (datasets: {', '.join(s.datasets) or 'none'})")
    if s.graph:
        by_type = ", ".join(f"{t} {n}" for t, n in sorted(s.edges_by_type.items())) or "none"
        click.echo(f"  edges written: {s.edges_written} ({by_type})")
        click.echo(f"  edges_capped: {s.edges_capped}   invalidated by reconcile: {s.edges_invalidated}   "
                   f"suppressed by a person's rejection: {s.claims_suppressed}")
    for failure in s.files_failed:
        click.echo(f"  ! {failure['path']}: {failure['reason']}")
    click.echo(f"  elapsed: {s.elapsed_s:.2f}s")


def _run_once(target, folder: str, brain: str, graph: bool, as_json: bool, pm=None, workers: int | None = None):
    """One run into ``target`` (an engine, or a sink such as a RemoteSink), its summary printed."""
    from xerj_core.autoindex.pipeline import run

    ticker = _Ticker(enabled=sys.stderr.isatty() and not as_json)
    try:
        summary = run(target, folder, brain=brain, graph=graph, progress=ticker, pm=pm, workers=workers)
    finally:
        ticker.close()
    _print_summary(summary, as_json)
    return summary


@click.command("autoindex")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--brain", default=None, help="Second-brain name; edges land in .xerj-memory-<NAME>-edges "
              "(default: folder name slug).")
@click.option("--no-graph", is_flag=True, help="Skip relationship detection: no edges are written.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Data directory to write into directly (no server needed).")
@click.option("--url", default=None, metavar="URL",
              help="A running xerj server (http://host:port) to write through instead; nothing is opened locally.")
@click.option("--api-key", default=None, metavar="KEY",
              help="API key for a secured --url server (the encoded form); else XERJ_API_KEY, else the "
                   "default data directory's admin.key when the server is on this machine.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--watch", is_flag=True, help="Keep the brain current as files change (polls the folder).")
@click.option("--interval", type=float, default=2.0, show_default=True, help="Seconds between --watch polls.")
@click.option("--workers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes that parse and detect (default: the CPU count on 4+ cores, else 1, "
              "which runs in this process). "
              "Runs with few files to parse or detect stay in this process either way.")
@click.pass_obj
def autoindex_command(pm, folder, brain, no_graph, data_dir, url, api_key, as_json, watch, interval,
                      workers) -> None:
    """Index FOLDER and detect the relationships between its documents.

    Embedded on a data directory (--data-dir, or the default one), or against a
    running server (--url); parsing and detection run here either way.
    """
    if url is not None and data_dir is not None:
        raise click.UsageError("--url and --data-dir are mutually exclusive: write through a running server "
                               "or straight into a data directory, not both")
    if not Path(folder).is_dir():
        raise click.BadParameter(f"folder '{folder}' does not exist or is not a directory", param_hint="FOLDER")
    name = _check_brain(folder, brain)
    if url is not None:
        from xerj_core.autoindex.remote import RemoteSink

        try:
            sink = RemoteSink(url, api_key=api_key_for(api_key, default_data_dir() if _is_local(url) else None))
        except XerjError as exc:
            raise click.BadParameter(exc.reason, param_hint="--url") from None
        _follow(sink, pm, folder, name, not no_graph, as_json, watch, interval, workers)
        return
    with Engine(data_dir or default_data_dir(), pm) as engine:
        _follow(engine, pm, folder, name, not no_graph, as_json, watch, interval, workers)


def _follow(target, pm, folder: str, brain: str, graph: bool, as_json: bool, watch: bool, interval: float,
            workers: int | None = None) -> None:
    """A first run, then with ``watch`` one quiet run per poll, printing those that changed something."""
    try:
        _run_once(target, folder, brain, graph, as_json, pm, workers)
        while watch:
            time.sleep(interval)
            summary = _run_once_quiet(target, folder, brain, graph, pm, workers)
            if summary.files_indexed or summary.files_removed or summary.files_failed:
                _print_summary(summary, as_json)
    except XerjError as exc:
        raise click.ClickException(exc.reason) from None
    except KeyboardInterrupt:
        click.echo("stopped; every file written so far is complete", err=True)


def _run_once_quiet(target, folder: str, brain: str, graph: bool, pm=None, workers: int | None = None):
    from xerj_core.autoindex.pipeline import run

    return run(target, folder, brain=brain, graph=graph, pm=pm, workers=workers)


def _is_local(url: str) -> bool:
    """Whether ``url`` is a server on this machine, whose default data directory's admin key may be ours."""
    try:
        from xerj_http.serve import is_loopback
        host = urllib.parse.urlsplit(url).hostname
    except (ImportError, ValueError):
        return False
    return bool(host) and is_loopback(host)


def _server_answers(url: str, api_key: str | None) -> bool:
    """Whether a xerj server answers ``url`` with ``api_key``; a secured one refusing the key is an error."""
    request = urllib.request.Request(url, headers=authorization_header(api_key))
    try:
        with urllib.request.urlopen(request, timeout=1) as response:
            return response.status == 200 and "xerj" in response.read(4096).decode("utf-8", "replace").lower()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise click.ClickException(
                f"the xerj server at {url} is secured and refused the API key "
                f"({'none was found' if api_key is None else 'the one given'}): pass --api-key or set "
                f"XERJ_API_KEY") from None
        return False
    except OSError:
        return False


@click.command("brain")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--brain", default=None, help="Second-brain name (default: the folder's name).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Data directory.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9200, show_default=True)
@click.option("--api-key", default=None, metavar="KEY",
              help="API key for attaching to a secured server; else XERJ_API_KEY, else the data directory's "
                   "admin.key.")
@click.option("--insecure", is_flag=True, envvar="XERJ_INSECURE",
              help="Serve in open mode (no credentials) when no server is running (also XERJ_INSECURE=1).")
@click.pass_obj
def brain_command(pm, folder, brain, data_dir, host, port, api_key, insecure) -> None:
    """Index FOLDER with graph detection on, then serve it (or attach to the server already running)."""
    if not Path(folder).is_dir():
        raise click.BadParameter(f"folder '{folder}' does not exist or is not a directory", param_hint="FOLDER")
    name = _check_brain(folder, brain)
    data = Path(data_dir or default_data_dir())
    base = f"http://{host}:{port}"
    with Engine(data, pm) as engine:
        try:
            summary = _run_once(engine, folder, name, True, False)
        except XerjError as exc:
            raise click.ClickException(exc.reason) from None
    click.echo("")
    click.echo(f"brain '{name}' is ready. Look at it:")
    click.echo(f"  overview: {base}/_graph/{name}/overview")
    first = next(iter(summary.datasets), None)
    click.echo(f"  ego:      {base}/_graph/{name}/ego?node=<document id>&hops=2&include_nodes=true")
    if first:
        click.echo(f"  search:   {base}/{first}/_search?q=<words>")
    if _server_answers(base + "/", api_key_for(api_key, data)):
        click.echo(f"attached to the server already running at {base}")
        return
    click.echo(f"serving {data} at {base} (Ctrl-C to stop)")
    if not insecure:
        click.echo(f"  it is secured: send Authorization: ApiKey $(cat {data / ADMIN_KEY_FILE})")
    sys.stdout.flush()
    argv = [sys.executable, "-m", "xerj_core", "serve", "--data-dir", str(data), "--host", host,
            "--port", str(port), *(["--insecure"] if insecure else [])]
    os.execv(sys.executable, argv)


@hookimpl
def xerj_register_commands(cli: click.Group) -> None:
    cli.add_command(autoindex_command)
    cli.add_command(brain_command)


__all__ = ["autoindex_command", "brain_command"]
