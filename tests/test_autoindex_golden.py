"""Autoindex writes the same documents and edges as the build before its fast paths (Foam, generated notes, real code).

The fixtures ``tests/fixtures/autoindex-golden-*.json.gz`` were written by
``python -m tests.test_autoindex_golden`` on the build before the Python outline
scan, the batched detectors and the streamed reconcile (main at acaaa68). Each
holds every live document of the brain's dataset indices (without ``mtime``,
which is the checkout's) and every live edge (claim, detector, weights, trust,
evidence; not the mtime-derived ids and clocks), plus the run's counters.
For real code, the run with the outline scan is compared with a run in which
every module goes through ``ast`` as before.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.bench.bench_autoindex import generate
from xerj_core.autoindex import pipeline
from xerj_core.autoindex.builtin_formats import code
from xerj_core.autoindex.pipeline import run
from xerj_core.engine import Engine
from xerj_core.graph.brain import edges_index

FIXTURES = Path(__file__).parent / "fixtures"
FOAM = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "foam-docs"
GENERATED_NOTES = 600


def dump(folder: Path, brain: str = "golden", workers: int | None = 1) -> dict[str, Any]:
    """A run's documents and edges, canonical and free of the files' mtimes."""
    with tempfile.TemporaryDirectory() as data, Engine(Path(data)) as engine:
        summary = run(engine, folder, brain=brain, clock=lambda: 1_000, workers=workers)
        out: dict[str, Any] = {"documents": {}, "edges": [],
                               "summary": {"edges_by_type": summary.edges_by_type, "documents": summary.documents,
                                           "edges_capped": summary.edges_capped}}
        with engine.store.read_txn() as raw:
            for index in summary.datasets:
                reader = engine.store.open_reader(raw, index)
                docs = []
                for row in np.flatnonzero(reader.live).tolist():
                    doc_id, source, _ = reader.document(row)
                    docs.append([doc_id, {k: v for k, v in source.items() if k != "mtime"}])
                out["documents"][index.rsplit("-", 1)[0]] = sorted(docs, key=lambda item: item[0])
            reader = engine.store.open_reader(raw, edges_index(brain))
            for row in np.flatnonzero(reader.live).tolist():
                _, edge, _ = reader.document(row)
                if "src" not in edge:
                    continue
                evidence = edge.get("evidence") or {}
                out["edges"].append([edge["src"], edge["type"], edge["dst"], edge.get("detector"), edge.get("weight"),
                                     edge.get("confidence"), edge.get("trust"), edge.get("invalid_at") is None,
                                     evidence.get("quote"), evidence.get("offset"), evidence.get("source")])
        out["edges"].sort()
    # through JSON, as the fixture was: tuples and lists compare alike
    return json.loads(json.dumps(out))


# Detector tags moved since the fixtures were written by changes that leave these corpora's edges as they were:
# mdlink@3 links a reference link from the section using it, and Foam's definitions are used by no [text][id]
# (its notes link with [[wikilinks]]), nor are the generated notes'; mdlink@4 and href@3 root a /-rooted link
# that names nothing at the root at the folders above its file, and these corpora hold no such link; wikilink@3
# lands a [[note#^id]] on the section holding the block and reads ((uuid)) block references, and Foam's block ids
# are all in code examples; wikilink@4 reads Dendron's [[label|target]] (a target naming no note, a label naming
# one), vault prefixes and note-reference ranges, and these corpora hold none of them; mdlink@5 reads a folder
# URL (/guide/setup/) as the page guide/setup.md and a folder's _index.md, and these corpora link no folder;
# wikilink@5 reads a bare number as the Zettelkasten id opening a file's name, and these corpora name none so;
# mdlink@6 reads Joplin's (:/<item id>) links, and samedir@3 leaves Joplin's items out: these corpora hold none;
# mdlink@7 reads a folder's index.mdx, and these corpora hold no .mdx file; mdlink@8 reads the forge address of a
# file of the git work tree the folder is in, and these corpora are indexed from copies outside one; wikilink@6
# links what a note's front matter properties name, and no note of these corpora names one there; sharedterm@2
# leaves a project's manifests and configs out, and these corpora hold none.
RETAGGED = {"mdlink@2": "mdlink@8", "href@2": "href@4", "wikilink@2": "wikilink@6", "samedir@2": "samedir@3",
            "sharedterm@1": "sharedterm@2"}
# mdlink@4 also no longer links from a reference definition Foam wrote for a [[wikilink]] (labelled with its inner
# text, or with its target before a '|'): the wikilink edge already links the two. Foam's notes hold 178 of them.
_DEFINITION = re.compile(r"\s*\[([^\]]+)\]:")
_WIKILINK = re.compile(r"\[\[([^\[\]\n]+)\]\]")


def _wikilink_labels(path: Path) -> set[str]:
    inner = _WIKILINK.findall(path.read_text(encoding="utf-8"))
    return {" ".join(text.split()).casefold() for whole in inner for text in (whole, whole.split("|", 1)[0])}


def _fixture(name: str) -> dict[str, Any]:
    fixture = json.loads(gzip.decompress((FIXTURES / f"autoindex-golden-{name}.json.gz").read_bytes()))
    for edge in fixture["edges"]:
        edge[3] = RETAGGED.get(edge[3], edge[3])
    if name == "foam":
        labels = {path: _wikilink_labels(FOAM / path) for path in {edge[10] for edge in fixture["edges"]
                                                                     if edge[1] == "mdlink"}}
        kept = [edge for edge in fixture["edges"] if not (
            edge[1] == "mdlink" and (defined := _DEFINITION.match(edge[8]))
            and " ".join(defined.group(1).split()).casefold() in labels[edge[10]])]
        fixture["summary"]["edges_by_type"]["mdlink"] -= len(fixture["edges"]) - len(kept)
        fixture["edges"] = kept
    fixture["edges"].sort()
    return fixture


def _compare(found: dict[str, Any], expected: dict[str, Any]) -> None:
    assert found["summary"] == expected["summary"]
    assert found["documents"].keys() == expected["documents"].keys()
    for dataset, docs in expected["documents"].items():
        assert found["documents"][dataset] == docs, dataset
    missing = [e for e in expected["edges"] if e not in found["edges"]][:3]
    extra = [e for e in found["edges"] if e not in expected["edges"]][:3]
    assert found["edges"] == expected["edges"], (missing, extra)


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("golden") / "notes"
    generate(folder, GENERATED_NOTES)
    return folder


@pytest.mark.skipif(not FOAM.is_dir(), reason="the Foam corpus is not beside the checkout")
def test_foam_documents_and_edges_are_those_of_the_previous_build():
    _compare(dump(FOAM), _fixture("foam"))


def test_generated_notes_documents_and_edges_are_those_of_the_previous_build(notes):
    _compare(dump(notes), _fixture("notes"))


@pytest.fixture
def companion(monkeypatch):
    """Runs with no ``workers`` get a companion process, whatever this machine's core count; the pools opened."""
    opened: list[int] = []
    real = pipeline.open_pool

    def open_pool(workers, **kw):
        opened.append(workers)
        return real(workers, **kw)

    monkeypatch.setattr(pipeline, "companion_default", lambda: True)
    monkeypatch.setattr(pipeline, "open_pool", open_pool)
    monkeypatch.setattr(pipeline, "POOL_MIN_FILES", 2)  # Foam's 87 files are fewer than a companion waits for
    return opened


@pytest.mark.skipif(not FOAM.is_dir(), reason="the Foam corpus is not beside the checkout")
def test_foam_with_a_companion_process_is_the_previous_build(companion):
    _compare(dump(FOAM, workers=None), _fixture("foam"))
    assert companion == [1]


def test_generated_notes_with_a_companion_process_are_the_previous_build(notes, companion):
    _compare(dump(notes, workers=None), _fixture("notes"))
    assert companion == [1]


def test_real_code_documents_and_edges_are_those_of_the_ast_path(tmp_path, monkeypatch):
    site = Path(sysconfig.get_paths()["purelib"])
    folder = tmp_path / "code"
    copied = 0
    for path in sorted(site.rglob("*.py"))[::9]:
        if path.is_file() and path.stat().st_size <= 256 * 1024 and copied < 500:
            target = folder / path.relative_to(site)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            copied += 1
    assert copied == 500
    scanned = dump(folder)
    monkeypatch.setattr(code, "outline", lambda text: None)  # every module through ast, as before the scan
    _compare(scanned, dump(folder))


if __name__ == "__main__":
    import sys

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp) / "notes", GENERATED_NOTES)
        for name, folder in (("foam", FOAM), ("notes", Path(tmp) / "notes")):
            blob = json.dumps(dump(folder), sort_keys=True, ensure_ascii=False).encode()
            (target / f"autoindex-golden-{name}.json.gz").write_bytes(gzip.compress(blob, 9, mtime=0))
            print(name, len(blob))
