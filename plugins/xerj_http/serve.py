"""``xerj serve``: the Falcon app under gunicorn threaded workers (see xerj_http.worker), one Engine per worker."""

from __future__ import annotations

import errno
import gc
import ipaddress
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import click
import platformdirs
from xerj_embedders.models import model_cache_option, offline_option

from xerj_core.storeopts import check_store, redact_url, store_options


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


# Request threads per worker, and seconds an idle connection (no request yet, or kept alive) stays open.
SERVER_THREADS = 8
IDLE_TIMEOUT = 30

# gunicorn's access log in the common log format: host, identity, user, time, request line, status, bytes.
COMMON_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s'


def bind_listener(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, handed to gunicorn, so a port in use is found before anything starts.

    Raises OSError (``EADDRINUSE`` and friends) from ``bind``; binding here
    rather than in gunicorn's arbiter leaves no window for another process to
    take the port between the check and the serve.
    """
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _gunicorn_application(options: dict[str, Any], load: Callable[[], Any]):
    from gunicorn.app.base import BaseApplication

    class XerjGunicorn(BaseApplication):
        """gunicorn driven from code; ``load`` runs in each worker after the fork (no preload)."""

        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return load()

    return XerjGunicorn()


def run_server(app_factory: Callable[[], tuple[Any, Callable[[], None]]], *, host: str, port: int, workers: int,
               extra: dict[str, Any] | None = None, listener: socket.socket | None = None,
               access_log: str | None = None) -> None:
    """Serve the WSGI app ``app_factory()`` builds (in each worker) under gunicorn threaded workers.

    ``app_factory`` returns ``(app, close)``; ``close`` runs when the worker exits.
    SIGTERM is gunicorn's graceful shutdown: workers finish their request and exit.
    ``listener`` is a socket already bound (see :func:`bind_listener`); gunicorn
    takes it over. ``access_log`` is a file, or ``-`` for stdout, in the common log format.
    """
    from xerj_http.worker import XerjThreadWorker

    closers: list[Callable[[], None]] = []

    def load() -> Any:
        app, close = app_factory()
        closers.append(close)
        # What the worker holds by now (imports, plugins, the engine, the app) lives as long as it does; frozen,
        # the collector's full passes skip it instead of walking it all (about 18 ms a pass, 4 ms frozen) in the
        # middle of whichever request set one off.
        gc.freeze()
        return app

    def on_exit() -> None:
        while closers:
            closers.pop()()

    options = {
        "bind": [f"fd://{listener.detach()}"] if listener is not None else [bind_address(host, port)],
        "workers": workers,
        # Threads serve requests while a poller holds idle connections, so idle or slow clients never
        # starve a request; the store is thread-safe (one write lock, map growth waits for readers).
        "worker_class": XerjThreadWorker,
        "threads": SERVER_THREADS,
        "worker_connections": 4096,
        "keepalive": IDLE_TIMEOUT,
        # gunicorn's control socket is one fixed path per user: two servers would take it from each other.
        "control_socket_disable": True,
        "preload_app": False,  # the Engine (an LMDB handle) must be opened after the fork
        "graceful_timeout": 10,
        "timeout": 60,
        "accesslog": access_log,
        "access_log_format": COMMON_LOG_FORMAT,
        "loglevel": "warning",
        "proc_name": "xerj",
        "worker_exit": lambda server, worker: on_exit(),
        **(extra or {}),
    }
    _gunicorn_application(options, load).run()


def _engine_config(embedder: str | None, model_cache: Path | None, offline: bool):
    """The engine settings from the command line; an embedder id that is not installed stops here, named."""
    from xerj_core.engine import EngineConfig

    if embedder:
        # Checked in a child process: listing the embedders imports fastembed, whose onnxruntime starts threads
        # at import, and gunicorn forks its workers from this process; a worker that inherits that state aborts
        # or segfaults on exit (joining threads only the master had), so nothing of it may load here.
        # (A plain child, not a multiprocessing pool: that would leave its resource tracker a child of the master.)
        child = subprocess.run(
            [sys.executable, "-c", _CHECK_EMBEDDER, embedder, str(model_cache or ""), "1" if offline else ""],
            capture_output=True, text=True)
        if child.returncode != 0:
            raise click.BadParameter(f"could not be checked: {(child.stderr.strip().splitlines() or ['?'])[-1]}",
                                     param_hint="--embedder")
        if child.stdout:
            raise click.BadParameter(child.stdout, param_hint="--embedder")
    return EngineConfig(embedder=embedder or None, model_cache=model_cache, offline=offline)


_CHECK_EMBEDDER = ("import sys; from pathlib import Path; from xerj_http.serve import _embedder_problem; "
                   "print(_embedder_problem(sys.argv[1], Path(sys.argv[2]) if sys.argv[2] else None, "
                   "bool(sys.argv[3])) or '', end='')")


def _embedder_problem(embedder: str, model_cache: Path | None, offline: bool) -> str | None:
    """Why ``embedder`` cannot be used (its error's reason), or None; run in a child process by _engine_config."""
    from xerj_core.embedding import EmbedderSettings, collect_embedders, get_embedder
    from xerj_core.errors import XerjError
    from xerj_core.plugins import get_plugin_manager

    try:
        get_embedder(collect_embedders(get_plugin_manager(), EmbedderSettings(model_cache, offline)), embedder)
    except XerjError as exc:
        return exc.reason
    return None


def prepare_admin_key(data_dir: Path) -> Path:
    """Mint ``<data_dir>/admin.key`` if needed, in the master before any worker forks; its path.

    The backends are closed again before the fork: an LMDB handle must not
    cross it, and each worker opens its own.
    """
    from xerj_core.plugins import get_plugin_manager
    from xerj_http.app import ensure_admin_key, open_auth_backends

    backends = open_auth_backends(get_plugin_manager(), data_dir)
    try:
        path = ensure_admin_key(backends, data_dir)
    finally:
        for backend in backends:
            backend.close()
    if path is None:
        raise click.UsageError("no installed auth backend can mint the admin key (is the auth_api_key plugin "
                               "disabled?); pass --insecure for open mode")
    return path


@click.command("serve")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=lambda: platformdirs.user_data_dir("xerj"), show_default="the user data directory",
              help="Where the indices live.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=9200, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--workers", type=click.IntRange(1, 256), default=default_workers, show_default="CPU count",
              help="gunicorn worker processes.")
@click.option("--insecure", is_flag=True, envvar="XERJ_INSECURE",
              help="Open mode: no credentials, every caller is a superuser (also XERJ_INSECURE=1). "
                   "Without it the server is secured: every request needs an API key.")
@click.option("--allow-cleartext-bind", is_flag=True,
              help="Allow a cleartext (non-TLS) bind on a non-loopback address.")
@click.option("--embedder", default=None, envvar="XERJ_EMBEDDER", show_envvar=True,
              help="Embedder id new memory namespaces get (default: the best installed; see `xerj models list`).")
@model_cache_option
@offline_option
@click.option("--access-log", default=None, metavar="FILE|-",
              help="Log every request in the common log format to FILE, or to stdout with '-'.")
@click.option("--audit-reads", type=click.Choice(["all", "reserved", "none"]), default="reserved",
              show_default=True,
              help="Which successful reads the audit log records (writes, denials and key operations always are): "
                   "every read, reads of reserved .xerj- indices, or none.")
@store_options
def serve_command(data_dir: Path, host: str, port: int, workers: int, insecure: bool,
                  allow_cleartext_bind: bool, embedder: str | None, model_cache: Path | None,
                  offline: bool, access_log: str | None, audit_reads: str, store: str | None,
                  read_url: str | None) -> None:
    """Serve the HTTP API (Elasticsearch-compatible routes, /_graph, /_memory) under gunicorn."""
    if not is_loopback(host) and not allow_cleartext_bind:
        raise click.UsageError(
            f"refusing a cleartext bind on the non-loopback address {host}: anyone who can reach it reads "
            f"and writes every index. Bind 127.0.0.1, or pass --allow-cleartext-bind to accept that.")
    config = _engine_config(embedder, model_cache, offline)
    config.audit_reads = audit_reads
    config.store_url, config.read_url = store, read_url
    data_dir = Path(data_dir).expanduser()
    check_store("serve", store, read_url, data_dir=data_dir)
    try:
        listener = bind_listener(host, port)
    except OSError as exc:
        in_use = exc.errno == errno.EADDRINUSE
        what = "is in use by another process" if in_use else f"cannot be bound: {exc.strerror or exc}"
        click.echo(f"xerj serve: {bind_address(host, port)} {what}; choose another --port (or stop that process)",
                   err=True)
        sys.exit(2)
    port = listener.getsockname()[1]  # the port given, or the one chosen for --port 0
    data_dir.mkdir(parents=True, exist_ok=True)
    if insecure:
        click.echo("xerj: running in OPEN MODE (--insecure): no credential is checked and every caller is a "
                   "superuser over every index, brain and memory namespace.", err=True)
    else:
        admin_key = prepare_admin_key(data_dir)
        click.echo(f"xerj: secured: every request needs an API key (Authorization: ApiKey ...); the admin key "
                   f"is in {admin_key} (readable by you only)", err=True)
    what = f"{redact_url(store)} (local files in {data_dir})" if store else data_dir
    click.echo(f"xerj: serving {what} on http://{bind_address(host, port)} with {workers} worker(s)", err=True)

    def app_factory():
        from xerj_core.engine import Engine
        from xerj_core.plugins import get_plugin_manager
        from xerj_http.app import create_app

        pm = get_plugin_manager()
        engine = Engine(data_dir, pm, config=config)
        app = create_app(engine, pm, insecure=insecure)

        def close() -> None:
            app.close()
            engine.close()

        return app, close

    warm_views(data_dir, config)
    sys.stdout.flush()
    run_server(app_factory, host=host, port=port, workers=workers, listener=listener, access_log=access_log)


def warm_views(data_dir: Path, config: Any) -> None:
    """Build (or map) every brain's graph view before the workers start, so that no first ego waits for one:
    each worker maps the files published here. An autoindex run leaves its view to the first read (its next run
    would replace it), and on 100k edges of real code that first ego waited 4-6 s.

    A brain whose view cannot be built is reported and served anyway: its first ego builds, or fails, as before.
    """
    import time

    from xerj_core.engine import Engine
    from xerj_core.plugins import get_plugin_manager

    started = time.perf_counter()
    with Engine(data_dir, get_plugin_manager(), config=config) as engine:
        brains = engine.graph.brains()
        for brain in brains:
            try:
                engine.graph.warm(brain)
            except Exception as exc:  # serving goes on: this brain's first ego meets the problem itself
                click.echo(f"xerj: the graph view of brain [{brain}] was not built ahead: {exc}", err=True)
    if brains:
        click.echo(f"xerj: graph views of {len(brains)} brain(s) ready in {time.perf_counter() - started:.1f} s",
                   err=True)
