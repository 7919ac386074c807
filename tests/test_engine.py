"""The Engine facade: each service is built lazily from the collaborators it names, never from the engine itself."""

from __future__ import annotations

import inspect

from xerj_core.autoindex.sink import LocalSink
from xerj_core.engine import Engine


def test_services_hold_their_collaborators_not_the_engine(engine):
    services = {"search": engine.search, "graph": engine.graph, "memory": engine.memory,
                "sink": LocalSink(engine.store, engine.graph)}
    for name, service in services.items():
        held = vars(service).values()
        assert not any(value is engine for value in held), f"{name} keeps the whole engine"
    assert engine.graph.store is engine.store and engine.graph.search is engine.search
    assert engine.memory.graph is engine.graph and engine.memory.index_store is engine.store


def test_services_are_built_once_and_only_when_asked(tmp_path, pm):
    with Engine(tmp_path / "d", pm) as fresh:
        assert not {"search", "graph", "memory", "embedders"} & set(vars(fresh))
        assert fresh.search is fresh.search
        assert "embedders" not in vars(fresh)  # a search service does not collect embedders to exist


def test_engine_properties_are_typed():
    for name, expected in (("search", "SearchService"), ("graph", "GraphService"), ("memory", "MemoryService")):
        prop = inspect.getattr_static(Engine, name)
        assert inspect.signature(prop.func).return_annotation == expected
