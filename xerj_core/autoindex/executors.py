"""Choosing autoindex's executor by name or URL: ``inline`` and ``process`` are built in; plugins add schemes.

``xerj autoindex --executor SPEC`` names where the per-file work of a run goes
(``--workers`` sizes it)::

    inline                  this process, one batch after another
    process                 a spawned process pool of this machine
    dask                    a Dask LocalCluster of this machine (the ``dask`` extra)
    dask://scheduler:8786   the Dask cluster whose scheduler is there

A plugin registers a scheme with ``register(scheme, opener)``; the opener takes
an :class:`ExecutorRequest` and returns a ``concurrent.futures.Executor`` that
the caller shuts down when the runs are over. Storage stays in the calling
process whichever executor runs the batches.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from typing import Any, Callable
from urllib.parse import urlsplit

import attrs

from xerj_core import hookimpl
from xerj_core.autoindex.parallel import InlineExecutor, open_pool
from xerj_core.errors import IllegalArgument, PluginError
from xerj_core.plugins import collect_schemes

__all__ = ["ExecutorRequest", "Opener", "collect_executors", "open_executor", "parse_spec"]


@attrs.frozen
class ExecutorRequest:
    """What ``--executor`` and ``--workers`` asked for.

    ``address`` is what follows ``scheme://`` (``None`` for a bare scheme such
    as ``dask``); ``workers`` is ``--workers`` (``None``: the executor's default).
    """

    scheme: str
    address: str | None = None
    workers: int | None = None


# ``opener(request)`` returns an executor for that request; the caller shuts it down.
Opener = Callable[[ExecutorRequest], cf.Executor]


def parse_spec(spec: str, workers: int | None = None) -> ExecutorRequest:
    """``inline``, ``process``, ``dask`` or ``scheme://address`` as a request; anything else is refused."""
    text = spec.strip()
    if "://" not in text:
        if not text.isidentifier():
            raise IllegalArgument(f"--executor [{spec}] is neither an executor name nor a scheme://address URL")
        return ExecutorRequest(text.lower(), None, workers)
    parts = urlsplit(text)
    if not parts.scheme or not parts.netloc:
        raise IllegalArgument(f"--executor [{spec}] has no address after {parts.scheme or '?'}://")
    return ExecutorRequest(parts.scheme.lower(), parts.netloc + parts.path, workers)


def collect_executors(pm) -> dict[str, Opener]:
    """Every executor scheme the plugins registered; a scheme registered twice names both plugins."""
    return collect_schemes(pm, "xerj_register_executors", "executor")


def open_executor(spec: str, pm: Any, workers: int | None = None) -> cf.Executor:
    """The executor ``spec`` names, opened by the plugin registered for its scheme."""
    request = parse_spec(spec, workers)
    openers = collect_executors(pm)
    opener = openers.get(request.scheme)
    if opener is None:
        known = ", ".join(sorted(openers)) or "none"
        raise IllegalArgument(f"no executor for [{spec}]; installed: {known}")
    executor = opener(request)
    if not isinstance(executor, cf.Executor):
        raise PluginError(f"the executor plugin for [{request.scheme}] opened {type(executor).__name__}, "
                          "which is not a concurrent.futures.Executor")
    return executor


def _no_address(request: ExecutorRequest) -> None:
    if request.address is not None:
        raise IllegalArgument(f"the {request.scheme} executor runs on this machine and takes no address "
                              f"({request.scheme}://{request.address})")


def _open_inline(request: ExecutorRequest) -> cf.Executor:
    _no_address(request)
    return InlineExecutor()


def _open_process(request: ExecutorRequest) -> cf.Executor:
    _no_address(request)
    return open_pool(request.workers or os.cpu_count() or 1)


@hookimpl
def xerj_register_executors(register) -> None:
    register("inline", _open_inline)
    register("process", _open_process)
