"""``xerj autoindex`` and ``xerj brain``: the main job, from the command line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.parse
import webbrowser
from pathlib import Path
from typing import Any, Iterator

import click

from xerj_core import hookimpl
from xerj_core.credentials import ADMIN_KEY_FILE, api_key_for, authorization_header
from xerj_core.engine import Engine, EngineConfig, default_data_dir
from xerj_core.storeopts import check_store, store_options
from xerj_core.errors import XerjError
from xerj_core.text import derive_brain_name


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
    kinds = ", ".join(f"{kind.replace('_', ' ')} {n}" for kind, n in s.skipped_by_kind.items())
    click.echo(f"  files: {s.files_seen} seen, {s.files_indexed} indexed, {s.files_unchanged} unchanged, "
               f"{len(s.files_skipped)} skipped{f' ({kinds})' if kinds else ''}, {len(s.files_failed)} failed; "
               f"{s.files_removed} removed since the last run")
    kept = f"; kept as they were in changed files: {s.documents_kept}" if s.documents_kept else ""
    click.echo(f"  documents written: {s.documents}{kept}  (datasets: {', '.join(s.datasets) or 'none'})")
    if s.formats_changed:
        click.echo("  the formats differ from the last run's (a format installed, removed or of a new version): "
                   "every file was read again")
    if s.graph:
        by_type = ", ".join(f"{t} {n}" for t, n in sorted(s.edges_by_type.items())) or "none"
        click.echo(f"  edges written: {s.edges_written} ({by_type})"
                   + (f"; kept as they were in changed files: {s.edges_continued}" if s.edges_continued else ""))
        click.echo(f"  edges_capped: {s.edges_capped}   invalidated by reconcile: {s.edges_invalidated}   "
                   f"suppressed by a person's rejection: {s.claims_suppressed}")
        if s.edges_too_long:
            click.echo(f"  edges left out for a node id too long to index: {s.edges_too_long}")
    for failure in s.files_failed:
        click.echo(f"  ! failed {failure['path']}: {failure['reason']}")
    if s.files_skipped:
        click.echo("  skipped files are listed by --json")
    click.echo(f"  elapsed: {s.elapsed_s:.2f}s")


def _run_once(target, folder: str, brain: str, graph: bool, as_json: bool, pm=None, workers: int | None = None,
              *, quiet: bool = False, executor=None, ignore_files: bool = True, warm: bool = False,
              max_file_bytes: int | None = None):
    """One run into ``target`` (an engine, or a sink such as a RemoteSink); its summary printed unless ``quiet``."""
    from xerj_core.autoindex.pipeline import run
    from xerj_core.autoindex.progress import RunProgress

    progress = None if quiet else RunProgress(sys.stderr, terminal=sys.stderr.isatty())
    try:
        summary = run(target, folder, brain=brain, graph=graph, pm=pm, workers=workers, executor=executor,
                      ignore_files=ignore_files, warm=warm,
                      **({"progress": progress} if progress is not None else {}),
                      **({"max_file_bytes": max_file_bytes} if max_file_bytes is not None else {}))
    except BaseException as exc:
        with contextlib.suppress(Exception):  # the sink logs its own failure; the run's error is the one to raise
            _audit_run(target, brain, None, exc)
        raise
    finally:
        if progress is not None:
            progress.close()
    if not quiet or summary.files_indexed or summary.files_removed or summary.files_failed:
        _audit_run(target, brain, summary, None)  # a watch's quiet polls that changed nothing are not events
    if not quiet:
        _print_summary(summary, as_json)
    return summary


def _audit_run(target, brain: str, summary, exc: BaseException | None) -> None:
    """Record an embedded run in the data directory's audit log, as a request through a server would be.

    A run through ``--url`` is audited by that server, request by request; here
    the writes go straight to the store, so the run itself is the event.
    """
    if not isinstance(target, Engine):
        return
    from xerj_core.audit import local_subject

    event: dict[str, Any] = {"op": "autoindex", "subject": local_subject(), "resource": brain,
                             "privilege": "write"}
    if exc is not None:
        reason = exc.reason if isinstance(exc, XerjError) else (str(exc) or type(exc).__name__)
        event.update(outcome="failure", note=f"{type(exc).__name__}: {reason}")
    else:
        event.update(outcome="failure" if summary.files_failed else "success",
                     note=f"{summary.root}: {summary.files_indexed} indexed, {summary.files_removed} removed, "
                          f"{len(summary.files_failed)} failed, {summary.edges_written} edges written, "
                          f"{summary.edges_invalidated} retired")
    target.audit.record(event)


NO_IGNORE = click.option("--no-ignore", is_flag=True, help="Index what .gitignore and .xerjignore files leave out, "
                         "too (by default they are honoured as git honours them).")
MAX_FILE_MIB = click.option("--max-file-mib", type=click.FloatRange(min=0, min_open=True), default=None, metavar="N",
                            help="Skip files larger than N MiB as too_large (default: 64), as a file is parsed "
                                 "whole; a mailbox is read a message at a time, at any size.")


def _max_file_bytes(mib: float | None) -> int | None:
    return None if mib is None else int(mib * (1 << 20))


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
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (skipped and failed files listed).")
@click.option("--allow-failures", is_flag=True,
              help="Exit 0 even when some files failed (they are still reported).")
@click.option("--watch", is_flag=True, help="Keep the brain current as files change (polls the folder); "
              "Ctrl-C or SIGTERM stops it.")
@click.option("--interval", type=float, default=2.0, show_default=True, help="Seconds between --watch polls.")
@NO_IGNORE
@MAX_FILE_MIB
@click.option("--workers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes that parse and detect (default: the CPU count on 4+ cores, else 1, "
              "which runs in this process). "
              "Runs with few files to parse or detect stay in this process either way, "
              "unless --executor names where they go.")
@click.option("--executor", "executor_spec", default=None, metavar="SPEC",
              help="Where per-file work runs: inline, process (a pool of --workers), dask (a Dask LocalCluster "
              "of --workers processes; the dask extra) or dask://HOST:PORT (that cluster's scheduler; its "
              "workers must see FOLDER at the same path). Writing stays in this process.")
@store_options
@click.pass_obj
def autoindex_command(pm, folder, brain, no_graph, data_dir, url, api_key, as_json, allow_failures, watch,
                      interval, no_ignore, max_file_mib, workers, executor_spec, store=None, read_url=None) -> None:
    """Index FOLDER and detect the relationships between its documents.

    Embedded on a data directory (--data-dir, or the default one), or against a
    running server (--url); parsing and detection run here either way. Exits 1
    when a file failed (unless --allow-failures).
    """
    if url is not None and data_dir is not None:
        raise click.UsageError("--url and --data-dir are mutually exclusive: write through a running server "
                               "or straight into a data directory, not both")
    if not Path(folder).is_dir():
        raise click.BadParameter(f"folder '{folder}' does not exist or is not a directory", param_hint="FOLDER")
    name = _check_brain(folder, brain)
    if url is not None:
        key = api_key_for(api_key, default_data_dir() if _is_local(url) else None)
        sink: Any = contextlib.nullcontext(_remote_sink(url, key))
    else:
        check_store("autoindex", store, read_url, pm)
    # an executor that cannot be opened is refused before the data directory is
    with _executor(executor_spec, pm, workers) as executor:
        target_cm = sink if url is not None else Engine(data_dir or default_data_dir(), pm,
                                                         config=EngineConfig(store_url=store, read_url=read_url))
        with target_cm as target:
            first = _follow(target, pm, folder, name, not no_graph, as_json, watch, interval, workers, executor,
                            ignore_files=not no_ignore, max_file_bytes=_max_file_bytes(max_file_mib))
    if first is not None and first.files_failed and not allow_failures and not watch:
        click.echo(f"{len(first.files_failed)} file(s) failed; exit status 1 (--allow-failures keeps 0)", err=True)
        sys.exit(1)


@contextlib.contextmanager
def _executor(spec: str | None, pm, workers: int | None):
    """The executor ``--executor`` names, shut down (its cluster too, if it started one) when the runs are over."""
    if spec is None:
        yield None
        return
    from xerj_core.autoindex.executors import open_executor

    try:
        executor = open_executor(spec, pm, workers)
    except XerjError as exc:
        raise click.BadParameter(exc.reason, param_hint="--executor") from None
    try:
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _remote_sink(url: str, api_key: str | None):
    from xerj_core.autoindex.remote import RemoteSink

    try:
        return RemoteSink(url, api_key=api_key)
    except XerjError as exc:
        raise click.BadParameter(exc.reason, param_hint="--url") from None


class _Stop(BaseException):
    """SIGINT or SIGTERM arrived while watching."""


@contextlib.contextmanager
def _stop_signals() -> Iterator[tuple[threading.Event, threading.Event]]:
    """SIGINT and SIGTERM stop a watch, whatever the process inherited.

    A process started from a non-interactive shell inherits SIGINT ignored, and
    Python then installs no KeyboardInterrupt handler; SIGTERM's default kills
    without a word. Both are handled here: between runs the wait ends at once,
    during a run the run is interrupted (every batch written so far is whole).
    """
    stop = threading.Event()
    busy = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        stop.set()
        if busy.is_set():
            raise _Stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop, busy
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _follow(target, pm, folder: str, brain: str, graph: bool, as_json: bool, watch: bool, interval: float,
            workers: int | None = None, executor=None, *, ignore_files: bool = True,
            max_file_bytes: int | None = None):
    """A first run, then with ``watch`` one quiet run per poll, printing those that changed something.

    Returns the first run's summary (None when it was stopped).
    """
    try:
        if not watch:
            return _run_once(target, folder, brain, graph, as_json, pm, workers, executor=executor,
                             ignore_files=ignore_files, max_file_bytes=max_file_bytes)
        with _stop_signals() as (stop, busy):
            first = None
            try:
                busy.set()
                first = _run_once(target, folder, brain, graph, as_json, pm, workers, executor=executor,
                                  ignore_files=ignore_files, max_file_bytes=max_file_bytes)
                busy.clear()
                # the first poll also fills the parse cache and the remembered detections if they miss the
                # folder (a first index keeps neither), so the first save costs what later ones do
                warm = graph
                while not stop.wait(interval):
                    busy.set()
                    summary = _run_once(target, folder, brain, graph, as_json, pm, workers, quiet=True,
                                        executor=executor, ignore_files=ignore_files, warm=warm,
                                        max_file_bytes=max_file_bytes)
                    warm = False
                    busy.clear()
                    if summary.files_indexed or summary.files_removed or summary.files_failed:
                        _print_summary(summary, as_json)
            except (_Stop, KeyboardInterrupt):
                pass
            click.echo("stopped; every file written so far is complete", err=True)
            return first
    except XerjError as exc:
        raise click.ClickException(exc.reason) from None
    except KeyboardInterrupt:
        click.echo("stopped; every file written so far is complete", err=True)
        return None


def _is_local(url: str) -> bool:
    """Whether ``url`` is a server on this machine, whose default data directory's admin key may be ours."""
    try:
        from xerj_http.serve import is_loopback
        host = urllib.parse.urlsplit(url).hostname
    except (ImportError, ValueError):
        return False
    return bool(host) and is_loopback(host)


def _probe(base: str, api_key: str | None) -> dict[str, Any] | None:
    """What answers at ``base``: None when nothing does, else ``{"xerj": bool, "node": identity or None, ...}``.

    A secured xerj server that refuses ``api_key`` is an error, not a server of another data directory.
    """
    # here, not at the top: every process that builds the plugin manager imports this module
    import http.client
    import urllib.error
    import urllib.request

    headers = authorization_header(api_key)
    try:
        request = urllib.request.Request(base + "/_xerj/node", headers=headers)
        with urllib.request.urlopen(request, timeout=2) as response:
            body = json.loads(response.read(65536))
            if isinstance(body, dict) and isinstance(body.get("uuid"), str):
                return {"xerj": True, "node": body}
            return {"xerj": False, "what": "a server whose /_xerj/node is not a xerj node identity"}
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise click.ClickException(
                f"the xerj server at {base} is secured and refused the API key "
                f"({'none was found' if api_key is None else 'the one given'}): pass --api-key or set "
                f"XERJ_API_KEY") from None
        try:
            with urllib.request.urlopen(urllib.request.Request(base + "/", headers=headers), timeout=2) as response:
                banner = response.read(4096).decode("utf-8", "replace").lower()
        except OSError:
            banner = ""
        if "xerj" in banner:
            return {"xerj": True, "node": None}
        return {"xerj": False, "what": f"an HTTP server that is not xerj (GET /_xerj/node answered {exc.code})"}
    except (OSError, ValueError, http.client.HTTPException):
        pass
    try:
        host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
        import socket

        with socket.create_connection((host, port), timeout=1):
            return {"xerj": False, "what": "something that is not an HTTP server"}
    except OSError:
        return None


def most_linked_note(engine: Engine, brain: str) -> str | None:
    """The node most live link edges point to (structural edges aside), else the brain's busiest node."""
    from xerj_core.graph.brain import edges_index

    structural = ["sequence", "same_dir"]
    query = {"bool": {"filter": [{"exists": {"field": "src"}}],
                      "must_not": [{"exists": {"field": "invalid_at"}}, {"terms": {"type": structural}}]}}
    for body in ({"size": 0, "query": query, "aggs": {"hub": {"terms": {"field": "dst", "size": 1}}}},
                 {"size": 0, "query": {"bool": {"filter": [{"exists": {"field": "src"}}]}},
                  "aggs": {"hub": {"terms": {"field": "src", "size": 1}}}}):
        try:
            buckets = engine.search.search(edges_index(brain), body)["aggregations"]["hub"]["buckets"]
        except XerjError:
            return None
        if buckets:
            return buckets[0]["key"]
    return None


def console_url(base: str, name: str) -> str:
    """The console's map of brain ``name`` on the server at ``base``."""
    return f"{base}/_xerj-console/#/map?" + urllib.parse.urlencode({"brain": name})


# Run detached by `xerj brain --open`: waits (up to a minute) for the server the command is about to
# exec, then opens the console; the command itself becomes the server and cannot wait.
_OPEN_WHEN_UP = """
import socket, sys, time, webbrowser
url, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        socket.create_connection((host, port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.3)
webbrowser.open(url)
"""


def _open_console(url: str, host: str | None = None, port: int | None = None) -> None:
    if host is None:
        webbrowser.open(url)
        return
    subprocess.Popen([sys.executable, "-c", _OPEN_WHEN_UP, url, host, str(port)], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _print_urls(base: str, name: str, summary: Any, hub: str | None) -> None:
    click.echo("")
    click.echo(f"brain '{name}' is ready. Look at it:")
    click.echo(f"  console:  {console_url(base, name)}")
    click.echo(f"  overview: {base}/_graph/{name}/overview")
    if hub is not None:
        # sections: the note's own links sit on its sections
        click.echo(f"  ego:      {base}/_graph/{name}/ego?"
                   + urllib.parse.urlencode({"node": hub, "hops": 2, "include_nodes": "true", "sections": "true"}))
    if summary.datasets:
        # every dataset of the folder (notes, code, web pages, a plugin's), not only the first
        click.echo(f"  search:   {base}/{','.join(summary.datasets)}/_search?q=<words>")


def _print_share(folder: str, brain: str | None, base: str, open_mode: bool) -> None:
    """The closing summary's share line: the exact ``xerj share`` command, each argument shell-quoted."""
    from xerj_core.share import share_command_line

    command = share_command_line(Path(folder).resolve(), brain, base)
    if open_mode:
        click.echo(f"  share it: {command}   (needs a secured server: this one runs in open mode)")
        return
    click.echo(f"  share it: {command}   (read-only link + passcode for one person; "
               f"the documents stay on this machine)")


@click.command("brain")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--brain", default=None, help="Second-brain name (default: the folder's name).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Data directory.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9200, show_default=True)
@click.option("--url", default=None, metavar="URL",
              help="Index into the xerj server running at URL (whatever data directory it serves) and print its links.")
@click.option("--api-key", default=None, metavar="KEY",
              help="API key for attaching to a secured server; else XERJ_API_KEY, else the data directory's "
                   "admin.key.")
@click.option("--insecure", is_flag=True, envvar="XERJ_INSECURE",
              help="Serve in open mode (no credentials) when no server is running (also XERJ_INSECURE=1).")
@click.option("--open", "open_console", is_flag=True, help="Open the console in the browser once the server answers.")
@NO_IGNORE
@MAX_FILE_MIB
@store_options
@click.pass_obj
def brain_command(pm, folder, brain, data_dir, host, port, url, api_key, insecure, open_console, no_ignore,
                  max_file_mib, store=None, read_url=None) -> None:
    """Index FOLDER with graph detection on, then serve it.

    When a server already answers on --host/--port it is used only if it serves
    this data directory (asked through GET /_xerj/node); otherwise the command
    says what it found and exits 2. --url indexes into a given server instead.
    """
    if not Path(folder).is_dir():
        raise click.BadParameter(f"folder '{folder}' does not exist or is not a directory", param_hint="FOLDER")
    name = _check_brain(folder, brain)
    if url is not None:
        if data_dir is not None:
            raise click.UsageError("--url and --data-dir are mutually exclusive")
        key = api_key_for(api_key, default_data_dir() if _is_local(url) else None)
        sink = _remote_sink(url, key)
        summary = _follow(sink, pm, folder, name, True, False, False, 0.0, ignore_files=not no_ignore,
                          max_file_bytes=_max_file_bytes(max_file_mib))
        _print_urls(sink.url, name, summary, _remote_hub(sink.url, name, key))
        _print_share(folder, brain, sink.url, False)
        if open_console:
            _open_console(console_url(sink.url, name))
        return
    data = Path(data_dir or default_data_dir())
    base = f"http://{host}:{port}"
    found = _probe(base, api_key_for(api_key, data))
    check_store("brain", store, read_url, pm)
    with Engine(data, pm, config=EngineConfig(store_url=store, read_url=read_url)) as engine:
        if found is not None:
            mine = engine.store.node_uuid()
            node = found.get("node")
            if not found["xerj"]:
                _refuse(f"{base} is taken by {found['what']}; choose another --port")
            if node is None or node["uuid"] != mine:
                where = f"{node['data_dir']} (data directory uuid {node['uuid']})" if node else "another data directory"
                _refuse(f"the xerj server at {base} serves {where}, not {engine.data_dir.resolve()} "
                        f"(uuid {mine}); pass --url {base} to index into that server, or --port to serve this "
                        f"data directory elsewhere")
        try:
            summary = _run_once(engine, folder, name, True, False, ignore_files=not no_ignore,
                                max_file_bytes=_max_file_bytes(max_file_mib))
        except XerjError as exc:
            raise click.ClickException(exc.reason) from None
        hub = most_linked_note(engine, name)
        # the ego URL printed next answers at once: the server started below maps the view built here
        engine.graph.warm(name)
    _print_urls(base, name, summary, hub)
    _print_share(folder, brain, base, insecure and found is None)
    if found is not None:
        click.echo(f"attached to the server already running at {base}, which serves {data}")
        if open_console:
            _open_console(console_url(base, name))
        return
    click.echo(f"serving {data} at {base} (Ctrl-C to stop)")
    if not insecure:
        click.echo(f"  it is secured: send Authorization: ApiKey $(cat {data / ADMIN_KEY_FILE})")
    sys.stdout.flush()
    if open_console:
        _open_console(console_url(base, name), host, port)
    argv = [sys.executable, "-m", "xerj_core", "serve", "--data-dir", str(data), "--host", host,
            "--port", str(port), *(["--insecure"] if insecure else []), *(["--store", store] if store else []),
            *(["--read-url", read_url] if read_url else [])]
    os.execv(sys.executable, argv)


def _refuse(message: str) -> None:
    click.echo(f"xerj brain: {message}", err=True)
    sys.exit(2)


def _remote_hub(url: str, brain: str, api_key: str | None) -> str | None:
    """The most linked node of ``brain`` on the server at ``url``, from its overview's inbound hubs."""
    import urllib.request

    request = urllib.request.Request(f"{url}/_graph/{urllib.parse.quote(brain)}/overview?top=1",
                                     headers=authorization_header(api_key))
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            hubs = json.loads(r.read()).get("hubs", {}).get("in") or []
    except (OSError, ValueError):
        return None
    return hubs[0]["key"] if hubs and isinstance(hubs[0], dict) and "key" in hubs[0] else None


@hookimpl
def xerj_register_commands(cli: click.Group) -> None:
    cli.add_command(autoindex_command)
    cli.add_command(brain_command)


__all__ = ["autoindex_command", "brain_command"]
