"""Autoindex routes under ``/_xerj/autoindex/{brain}``: what a remote run reads first, its batches, its close.

They are a :class:`~xerj_core.autoindex.sink.LocalSink` behind HTTP, so a run
against a server writes exactly what an embedded run writes, a batch of whole
files per transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import falcon

from xerj_core import __version__
from xerj_core.autoindex import wire
from xerj_core.autoindex.sink import LocalSink
from xerj_core.graph.brain import validate_brain_name
from xerj_http.resources.common import send
from xerj_http.targets import parse_file_batch, parse_run_finish

if TYPE_CHECKING:  # pragma: no cover
    from xerj_core.engine import Engine


class NodeIdentity:
    """``GET /_xerj/node``: the data directory this server serves, so ``xerj brain`` attaches only to its own.

    The uuid is stored in the data directory on first use and never changes, so
    it names the directory wherever it is mounted; the path is for people.
    """

    ops = {"GET": ("node.info", "monitor")}

    def __init__(self, engine: Any) -> None:
        self.body = {"uuid": engine.store.node_uuid(), "data_dir": str(engine.data_dir.resolve()),
                     "xerj_version": __version__}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send(resp, self.body)


class BrainState:
    """``GET /_xerj/autoindex/{brain}``: the brain's file states, run marker and whether it has edges yet."""

    ops = {"GET": ("autoindex.state", "read")}

    def __init__(self, engine: Engine) -> None:
        self.sink = LocalSink(engine.store, engine.graph)

    def on_get(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        validate_brain_name(brain)
        send(resp, {"brain": brain, **wire.unstructure(self.sink.load(brain))})


class FileBatch:
    """``POST /_xerj/autoindex/{brain}/_batch``: whole files' documents and states in one transaction."""

    ops = {"POST": ("autoindex.batch", "write")}

    def __init__(self, engine: Engine) -> None:
        self.sink = LocalSink(engine.store, engine.graph)

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        validate_brain_name(brain)
        batch = parse_file_batch(req)
        written = self.sink.write_files(brain, batch.files, batch.indexed_at)
        send(resp, {"brain": brain, "files": len(batch.files), "documents": written})


class RunFinish:
    """``POST /_xerj/autoindex/{brain}/_finish``: the run marker made clean and the catalog updated, at once."""

    ops = {"POST": ("autoindex.finish", "write")}

    def __init__(self, engine: Engine) -> None:
        self.sink = LocalSink(engine.store, engine.graph)

    def on_post(self, req: falcon.Request, resp: falcon.Response, brain: str) -> None:
        validate_brain_name(brain)
        finish = parse_run_finish(req)
        self.sink.finish(brain, finish)
        send(resp, {"brain": brain, "acknowledged": True, "datasets": list(finish.datasets)})
