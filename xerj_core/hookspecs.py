"""Every xerj hook: the markers and the typed, documented hook specifications."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    import click

    from xerj_core.autoindex.detect import Detector
    from xerj_core.autoindex.executors import Opener as ExecutorOpener
    from xerj_core.autoindex.formats import Format
    from xerj_core.embedding import Embedder
    from xerj_core.engine import Engine
    from xerj_core.store.backends import Opener

hookspec = pluggy.HookspecMarker("xerj")
hookimpl = pluggy.HookimplMarker("xerj")

# A provider hook hands the plugin a ``register`` callback; the core builds the
# closure, validates what it receives and tags it with the plugin's name. Each
# hook's callback is typed with what it takes.
RegisterDetector = Callable[["Detector"], None]
RegisterEmbedder = Callable[["Embedder"], None]
RegisterFormat = Callable[["Format"], None]
RegisterAuthBackend = Callable[[Any], None]  # a backend: a unique name and open(data_dir) (xerj_auth is one)
RegisterAuditSink = Callable[[Any], None]  # the sink protocol arrives with the audit work
RegisterStorageBackend = Callable[[str, "Opener"], None]
RegisterExecutor = Callable[[str, "ExecutorOpener"], None]


@hookspec
def xerj_register_detectors(register: RegisterDetector) -> None:
    """Register relationship detectors by calling ``register(detector)``.

    ``detector`` satisfies :class:`xerj_core.autoindex.detect.Detector`: a unique
    ``name``, an edge ``type``, a versioned ``tag`` of the form ``name@N``, a
    default ``weight`` and ``confidence``, and the detection methods. The core
    refuses a duplicate name or a tag without ``@N``. Returns nothing.
    """


@hookspec
def xerj_register_embedders(register: RegisterEmbedder) -> None:
    """Register text embedders by calling ``register(embedder)``.

    ``embedder`` satisfies :class:`xerj_core.embedding.Embedder`: a unique ``id``
    (recorded by the memory namespaces it embeds), a fixed ``dims``, the
    ``license`` and ``source`` of its model, and ``embed(texts)`` returning an
    ``(n, dims)`` float32 array of L2-normalised rows. Optional
    ``unavailable()`` and ``configure(settings)`` are described there. Returns
    nothing.
    """


@hookspec
def xerj_register_formats(register: RegisterFormat) -> None:
    """Register document formats by calling ``register(fmt)``.

    ``fmt`` satisfies :class:`xerj_core.autoindex.formats.Format`: a unique
    ``name``, the ``dataset`` index its documents land in, ``accepts(path,
    head)`` and ``parse(...)`` yielding documents. Returns nothing.
    """


@hookspec
def xerj_register_auth_backends(register: RegisterAuthBackend) -> None:
    """Register authentication backends by calling ``register(backend)``.

    ``backend`` has a unique ``name`` and ``open(data_dir)`` returning the
    backend bound to one data directory. That object has ``name``,
    ``authenticate(headers)`` and ``close()``: ``headers`` maps upper-case header
    names to values; ``authenticate`` returns a
    :class:`xerj_auth.principal.Principal`, returns ``None`` when the request
    carries no credential of its kind, and raises an error with status 401 when
    it carries one that does not verify. A secured server asks the backends in
    registration order and the first principal wins. An opened backend may also
    offer ``keys`` (mint, find, invalidate: the ``_security/api_key`` routes)
    and ``ensure_admin_key(data_dir)``. Returns nothing.
    """


@hookspec
def xerj_register_audit_sinks(register: RegisterAuditSink) -> None:
    """Register audit sinks by calling ``register(sink)``.

    ``sink`` has a unique ``name`` and ``open(data_dir, config)`` returning the
    sink bound to one data directory (``config`` is the engine's
    :class:`~xerj_core.engine.EngineConfig`). That object has ``name``,
    ``append(event)`` and ``close()``: ``append`` returns once the event is
    durable (it survives a process crash) and raises when it cannot write, which
    refuses the request that caused the event with a 503 naming the sink. It is
    called from every worker process, so it must not rely on a descriptor opened
    before a fork. A sink may also offer ``search(query)`` and ``verify()``
    (the ``/_audit`` routes use the first that does). The core
    (:class:`xerj_core.audit.AuditTrail`) fans every event out to every sink.
    Returns nothing.
    """


@hookspec
def xerj_register_storage_backends(register: RegisterStorageBackend) -> None:
    """Register storage backends by calling ``register(scheme, opener)``.

    ``scheme`` is the URL scheme the backend answers (``lmdb`` is built in) and
    ``opener(location, **options)`` returns an open store: an object satisfying
    :class:`xerj_core.store.backends.OpenStore` (the engine refuses anything
    else, naming the scheme). Returns nothing.
    """


@hookspec
def xerj_register_executors(register: RegisterExecutor) -> None:
    """Register autoindex executors by calling ``register(scheme, opener)``.

    ``scheme`` is what ``xerj autoindex --executor`` names (``inline`` and
    ``process`` are built in, ``dask`` comes with the ``dask`` extra), bare or
    as ``scheme://address``. ``opener(request)`` takes an
    :class:`xerj_core.autoindex.executors.ExecutorRequest` (scheme, address,
    workers) and returns a ``concurrent.futures.Executor`` whose workers load
    the installed plugins themselves; the caller shuts it down. An executor
    that can place a value on every worker once may also offer
    ``broadcast(value) -> handle``
    (:class:`xerj_core.autoindex.parallel.Broadcasting`). Returns nothing.
    """


@hookspec
def xerj_register_routes(app: Any, engine: "Engine") -> None:
    """Add HTTP routes to the Falcon ``app`` serving ``engine``.

    Called once per app build, after the core middleware is installed. Resources
    should be thin classes over engine APIs. Returns nothing.
    """


@hookspec
def xerj_register_commands(cli: "click.Group") -> None:
    """Add subcommands to the ``xerj`` click group ``cli``. Returns nothing."""


@hookspec
def xerj_documents_written(index: str, ids: Sequence[str], deleted: Sequence[str]) -> None:
    """Observe a committed write: ``ids`` were put and ``deleted`` removed in ``index``.

    Called after the transaction committed, in the writing process only. An
    exception raised here is logged and never undoes the write. Returns nothing.
    """


@hookspec
def xerj_edges_written(brain: str, edges: Sequence[Mapping[str, Any]]) -> None:
    """Observe committed edge writes to ``brain`` (each edge as stored, with ``edge_id``).

    Called after commit for links, unlinks and detector batches alike. Returns
    nothing; exceptions are logged and never undo the write.
    """


@hookspec
def xerj_audit_event(event: Mapping[str, Any]) -> None:
    """Observe an audit event after every audit sink has appended it.

    ``event`` holds ``op``, ``subject``, ``resource`` (the index, namespace or
    brain acted on), ``privilege``, ``outcome`` (``success``, ``denied``,
    ``failure``), ``status``, ``remote_addr``, ``request_id``, and ``indices``
    and ``note`` when they say more. Events are recorded through
    ``engine.audit.record(event)``, which persists them in the sinks
    registered by ``xerj_register_audit_sinks`` and then calls this hook; an
    observer's exception is logged and refuses nothing. Returns nothing.
    """
