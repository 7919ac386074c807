"""Registers the ``dask`` executor scheme; Dask itself is imported only when a run asks for it."""

from __future__ import annotations

import concurrent.futures as cf

from xerj_core import hookimpl
from xerj_core.autoindex.executors import ExecutorRequest


def open_dask(request: ExecutorRequest) -> cf.Executor:
    from xerj_dask.executor import open_dask_executor

    return open_dask_executor(request.address, request.workers)


@hookimpl
def xerj_register_executors(register) -> None:
    register("dask", open_dask)
