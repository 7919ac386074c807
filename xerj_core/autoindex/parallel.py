"""Autoindex's per-file work in batches of files, for any ``concurrent.futures.Executor``.

The run's caller keeps storage (one writer); what runs here is pure: read and
parse a batch of files (with each file's ``summarize`` partials when detection
follows), and detect a batch of files against the corpus and the combined
states. Every task is a module-level function over picklable arguments, so a
spawned process pool or a Dask cluster (``xerj_dask``) can run it.

A task does not carry detector or format objects. It carries a
:class:`PluginsRef`, the fingerprint of the run's formats and detectors; the
worker builds its own plugin manager once (``get_plugin_manager()``, which
honours ``XERJ_DISABLE_PLUGINS`` / ``XERJ_LOAD_PLUGINS`` from the inherited
environment) and refuses a task whose fingerprint its plugins do not match, so
a worker never silently detects with other code than the run asked for. In
process (:class:`InlineExecutor`) the run's own :class:`Plugins` travel instead.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import types
import zlib
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import attrs
import xxhash

from xerj_core.autoindex import mapped, parsecache
from xerj_core.autoindex.detect import Corpus, DetectorState, collect_detectors, combine, detect_file, summarize
from xerj_core.autoindex.detectmemo import Answers, detect_files
from xerj_core.autoindex.formats import (SNIFF_BYTES, FormatDeclined, FormatError, appender, collect_formats,
                                         parse_appended, parse_file)
from xerj_core.autoindex.kept import Kept, file_stamp, open_spill, squeeze as _squeeze, unsqueeze as _unsqueeze
from xerj_core.autoindex.parsecache import Cached, ParseCache
from xerj_core.autoindex.sink import COUNTED_DATASETS, COUNTED_FIELD, Declined
from xerj_core.autoindex.walk import FileEntry
from xerj_core.errors import BatchFailed, PluginError, XerjError
from xerj_core.graph.brain import MAX_NODE_ID_BYTES, node_id_problem
from xerj_core.graph.draftcolumns import DraftColumns
from xerj_core.model import EdgeDraft, SourceDocument
from xerj_core.store.limits import MAX_TERM_BYTES
from xerj_core.text import CountedTerms, counted_terms, remembering_counts
from xerj_core.store.residency import trim_heap
from xerj_core.store.store import collector_paused

__all__ = [
    "Broadcast",
    "Broadcasting",
    "InlineExecutor",
    "Kept",
    "adopt_kept",
    "ParseOutcome",
    "Plugins",
    "PluginsRef",
    "detect_batch",
    "combine_kept",
    "with_counts",
    "detect_kept",
    "init_worker",
    "main_left_behind",
    "may_fork",
    "open_pool",
    "parse_and_keep",
    "parse_batch",
    "unpack_drafts",
    "unpack_outcomes",
    "with_entries",
    "rebuilds_alike",
    "share",
    "watch_batch",
]


class InlineExecutor(cf.Executor):
    """Runs each call when it is submitted, in this process: a small run pays for no pool.

    An ordinary exception lands in the returned future, as a pool would report
    it; ``KeyboardInterrupt`` and other ``BaseException`` propagate at once.
    """

    def __init__(self) -> None:
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True


def _fingerprint_formats(formats: Mapping[str, Any]) -> tuple:
    return tuple(sorted((name, getattr(fmt, "priority", 0), type(fmt).__module__, type(fmt).__qualname__)
                        for name, fmt in formats.items()))


def _fingerprint_detectors(detectors: Iterable[Any]) -> tuple:
    # order matters: detect_file keeps the first detector's draft of a claim
    return tuple((d.name, d.tag, type(d).__module__, type(d).__qualname__) for d in detectors)


@attrs.frozen
class PluginsRef:
    """What a worker must hold to run a task: formats, and detectors unless ``detectors`` is ``None``."""

    formats: tuple
    detectors: tuple | None


@attrs.frozen
class Plugins:
    """The formats and detectors of one run, as objects of this process."""

    formats: Mapping[str, Any]
    detectors: tuple[Any, ...]

    def ref(self, with_detectors: bool) -> PluginsRef:
        return PluginsRef(_fingerprint_formats(self.formats),
                          _fingerprint_detectors(self.detectors) if with_detectors else None)

    @classmethod
    def from_manager(cls, pm: Any) -> "Plugins":
        return cls(collect_formats(pm), tuple(collect_detectors(pm).values()))


def rebuilds_alike(plugins: Plugins, with_detectors: bool) -> bool:
    """True when ``get_plugin_manager()`` in a fresh process would give the formats and detectors of ``plugins``.

    False for a plugin manager with plugins registered by hand (a test fixture's):
    those exist only in this process, so the run must stay in it.
    """
    from xerj_core.plugins import get_plugin_manager

    try:
        fresh = Plugins.from_manager(get_plugin_manager())
    except Exception:
        return False
    return _matches(fresh, plugins.ref(with_detectors))


def _matches(plugins: Plugins, ref: PluginsRef) -> bool:
    if _fingerprint_formats(plugins.formats) != ref.formats:
        return False
    return ref.detectors is None or _fingerprint_detectors(plugins.detectors) == ref.detectors


# This process's plugins and the last broadcast it unpacked, when it works for a pool.
_WORKER: dict[str, Any] = {}


def init_worker(plugins: Plugins | None = None) -> None:
    """Pool initializer: load the plugins once (or take ``plugins``, a forked worker's copy of its parent's,
    which the parent checked a fresh load would match: see :func:`open_pool`), and leave Ctrl-C to the parent.

    The parent turns Ctrl-C into cancelling what is queued and shutting the pool
    down; a worker interrupted mid-batch would only break the pool under it.
    SIGTERM ends the worker as it ends a spawned one, even when it was forked
    from a process with a handler of its own (``autoindex --watch``'s), and a
    forked worker's signals no longer wake its parent's event loop (asyncio's
    wakeup pipe, which the fork shares).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    _WORKER["pool_worker"] = True
    if plugins is not None:
        _WORKER["plugins"] = plugins
    _worker_plugins()


def _worker_plugins() -> Plugins:
    plugins = _WORKER.get("plugins")
    if plugins is None:
        from xerj_core.plugins import get_plugin_manager

        plugins = _WORKER["plugins"] = Plugins.from_manager(get_plugin_manager())
    return plugins


def _resolve(source: Plugins | PluginsRef) -> Plugins:
    if isinstance(source, Plugins):
        return source
    plugins = _worker_plugins()
    if not _matches(plugins, source):
        raise PluginError(
            f"worker process {os.getpid()} loads other formats or detectors than the run uses "
            "(plugins registered by hand exist only in the process that registered them); "
            "run inline, or give the run an executor whose workers load the same plugins"
        )
    return plugins


def _task(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A task run with the cyclic garbage collector paused (``store.collector_paused``), wherever it runs.

    A task allocates a few containers per file and per document (outcomes,
    documents, counts, drafts) and makes no reference cycles: reference counting
    frees all of it. With the collector on, those allocations set off collections
    that walk the objects the task holds (a parse batch's documents, a combine's
    arrays and sets): 7% of a companion's CPU on 5,000 files of real code (same
    process, interleaved; the instructions differ by under 1%, so what it costs is
    mostly cache misses). The collector runs again when the task ends.
    """
    @functools.wraps(fn)
    def task(*args: Any, **kwargs: Any) -> Any:
        with collector_paused():
            return fn(*args, **kwargs)

    return task


@attrs.frozen
class ParseOutcome:
    """One file read and parsed: its documents (``()`` when no format takes it) or why it failed."""

    entry: FileEntry
    docs: tuple[SourceDocument, ...] = ()
    digest: str = ""
    failure: str | None = None
    partial: Mapping[str, Any] | None = None
    # the documents as the writer takes them, ``(dataset, id, source)``, when they travel so instead of ``docs``
    # (a companion's: plain dicts cost the writer less to unpickle than documents, and nothing to convert)
    sources: tuple[tuple[str, str, dict[str, Any]], ...] | None = None
    # per document of :meth:`for_writer`, ``text.counted_terms`` of its ``text`` (see ``sink.COUNTED_FIELD``), or
    # None for the whole file when they were not counted (the writer's store then tokenizes them)
    counted: tuple[CountedTerms | None, ...] | None = None
    # why its format declined the file once it read it (see formats.FormatDeclined): a skip
    declined: Declined | None = None
    # the file was walked but no longer existed when it was read (walk.VANISHED): ``failure`` says so, and the run
    # reports a skip, not a failure
    gone: bool = False
    # a file parsed for the corpus only, as detection keeps it (see kept.py): in place of ``docs`` when it came
    # from the parse cache, beside them when it was parsed and cached here
    kept: Kept | None = None

    @property
    def yields(self) -> bool:
        """Whether a format read the file into documents."""
        return bool(self.docs) or bool(self.sources) or self.kept is not None

    def for_writer(self) -> tuple[tuple[str, str, dict[str, Any]], ...]:
        """The documents as ``(dataset, id, source)``."""
        if self.sources is not None:
            return self.sources
        docs = self.docs if self.docs or self.kept is None else self.kept.documents()
        return tuple((doc.dataset, doc.doc_id, doc.to_source()) for doc in docs)


@_task
def parse_batch(source: Plugins | PluginsRef, entries: Sequence[FileEntry], with_partials: bool,
                count: bool = False, cache: ParseCache | None = None, corpus_only: bool = False
                ) -> list[ParseOutcome]:
    """Read and parse each file of the batch; with ``with_partials``, also each file's ``summarize`` map output;
    with ``count``, its documents also as the writer takes them, their texts counted (:func:`with_counts`).
    With ``cache``, a file whose parse it holds under the file's stamp is not read again, and each file parsed
    is kept there. With ``corpus_only`` (files parsed for detection's corpus, not to be written), a file found
    in the cache comes as it is kept there (``ParseOutcome.kept``, no ``docs``).

    A file that cannot be read or parsed is an outcome with its reason, never an
    exception: one bad file does not cost the batch.
    """
    if count:
        # counted before they are summarized: a detector may reuse the words counted (see text.counted_joined)
        with remembering_counts():
            return _parse_batch(_resolve(source), entries, with_partials, count, cache, corpus_only)
    return _parse_batch(_resolve(source), entries, with_partials, count, cache, corpus_only)


def _parse_batch(plugins: Plugins, entries: Sequence[FileEntry], with_partials: bool,
                 count: bool, cache: ParseCache | None, corpus_only: bool) -> list[ParseOutcome]:
    hits = cache.lookup(entries, with_partials) if cache is not None else {}
    parsed: list[tuple[FileEntry, Cached]] = []
    outcomes = []
    for entry in entries:
        hit = hits.get(entry.rel_path)
        if hit is not None:
            partial = hit.partial
            if corpus_only and not count and (partial is not None or not with_partials):
                # its texts stay compressed as the cache holds them, unless it is detected again
                # stamped as its documents are: under the mtime it was parsed under, when it was touched since
                kept = attrs.evolve(hit.kept, partial=partial or {},
                                    stamp=file_stamp(hit.digest, hit.mtime_ns or entry.mtime_ns))
                outcomes.append(ParseOutcome(entry, (), hit.digest, partial=partial, kept=kept))
                continue
            docs = hit.kept.documents()
            sources, counted = _for_writer_counted(docs) if count and docs else (None, None)
            if partial is None and with_partials and docs:
                # summarized under other detectors (or not at all): these detectors' partials are kept for next time
                partial = summarize(plugins.detectors, list(docs))
                parsed.append((entry, hit._replace(partial=partial)))
            outcomes.append(ParseOutcome(entry, docs, hit.digest, partial=partial, sources=sources, counted=counted))
            continue
        with contextlib.ExitStack() as reading:  # only reading the file is its own failure, not what parses it
            try:
                data = reading.enter_context(mapped.file_data(entry, plugins.formats, SNIFF_BYTES))
            except FileNotFoundError:
                outcomes.append(ParseOutcome(entry, failure="gone before it was read", gone=True))
                continue
            except OSError as exc:
                outcomes.append(ParseOutcome(entry, failure=f"unreadable: {exc.strerror or exc}"))
                continue
            outcomes.append(_parse_read(plugins, entry, data, with_partials, count, cache, corpus_only, parsed))
    if parsed:
        cache.store(parsed)  # type: ignore[union-attr]
    return outcomes


def _parse_read(plugins: Plugins, entry: FileEntry, data: Any, with_partials: bool, count: bool,
                cache: ParseCache | None, corpus_only: bool, parsed: list[tuple[FileEntry, Cached]]) -> ParseOutcome:
    """The outcome of one file of :func:`_parse_batch` once read (``data``: its bytes, or a map of them); what the
    cache is to keep of it is added to ``parsed``."""
    try:
        docs = _appended(plugins, cache, entry, data) or \
            tuple(parse_file(plugins.formats, entry.rel_path, data, entry.mtime_ms, limit=entry.limit) or ())
    except FormatDeclined as exc:  # remembered with its digest, as a file no format reads is
        return ParseOutcome(entry, (), mapped.digest(data), declined=Declined(exc.kind, exc.reason))
    except FormatError as exc:
        return ParseOutcome(entry, failure=exc.reason)
    too_long = next((doc.doc_id for doc in docs if node_id_problem("src", doc.doc_id)), None)
    if too_long is not None:
        return ParseOutcome(entry, failure=f"a document id is {len(too_long.encode())} bytes long "
                                         f"(at most {MAX_NODE_ID_BYTES}): {too_long[:80]}...")
    sources, counted = _for_writer_counted(docs) if count and docs else (None, None)
    digest = mapped.digest(data)
    partial = summarize(plugins.detectors, list(docs)) if with_partials and docs else None
    # one outcome made with every part (attrs.evolve walks every field per call: five of them per file were
    # a few percent of a companion's parse of real code)
    outcome = ParseOutcome(entry, docs, digest, partial=partial, sources=sources, counted=counted)
    if cache is not None and cache.keep and docs:
        # kept once, for the cache and (a file parsed for the corpus, which goes nowhere else) for detection
        kept = Kept.of(outcome)
        parsed.append((entry, Cached(kept, digest, partial)))
        if corpus_only:
            outcome = attrs.evolve(outcome, kept=kept)
    return outcome


def _appended(plugins: Plugins, cache: ParseCache | None, entry: FileEntry, data: bytes
              ) -> tuple[SourceDocument, ...] | None:
    """The documents of a file that grew at its end since the parse the cache holds of it, read from that parse
    and the new bytes alone (see ``formats.parse_appended``), when its format can: appending one message to a 70 MB
    mailbox had the whole of it read again. None when the cache holds no such parse or the file no longer opens
    with the bytes it was made from."""
    # the cache's header says whether it holds a shorter version at all, before the file is sniffed again
    if cache is None or cache.earlier_size(entry) is None:
        return None
    appending = appender(plugins.formats, entry.rel_path, data)
    found = cache.earlier(entry) if appending is not None else None
    if found is None:
        return None
    size, earlier = found
    if mapped.digest(data, size) != earlier.digest:
        return None
    docs = parse_appended(appending, entry.rel_path, data, entry.mtime_ms, size, earlier.kept.documents())
    return None if docs is None else tuple(docs)


def with_counts(outcome: ParseOutcome) -> ParseOutcome:
    """``outcome`` with its documents as the writer takes them and each one's text counted: a companion's work,
    done beside the writer, which then does not tokenize those texts on the run's critical path."""
    if not outcome.yields:
        return outcome
    if outcome.sources is not None:
        return attrs.evolve(outcome, docs=())
    sources, counted = _for_writer_counted(outcome.docs)
    return attrs.evolve(outcome, docs=(), sources=sources, counted=counted)


def _for_writer_counted(docs: Sequence[SourceDocument]) -> tuple[tuple[tuple[str, str, dict[str, Any]], ...],
                                                                  tuple[CountedTerms | None, ...] | None]:
    """``docs`` as the writer takes them (:meth:`ParseOutcome.for_writer`) and each one's text counted (None
    for them all when a document is of a dataset whose texts are not counted)."""
    sources = tuple((doc.dataset, doc.doc_id, doc.to_source()) for doc in docs)
    if any(dataset not in COUNTED_DATASETS for dataset, _id, _source in sources):
        return sources, None
    return sources, tuple(
        counted_terms(text, MAX_TERM_BYTES) if type(text := source.get(COUNTED_FIELD)) is str else None
        for _dataset, _id, source in sources)


# -- the companion: one worker process that keeps a run's detection state between its tasks ------------------
#
# A run's own pool of exactly one process (see pipeline._Runner) runs its tasks one at a time, in the order they
# were sent. So the worker can keep what detection needs of each file it parsed (a :class:`Kept`), combine the
# partials itself once the last file is parsed, and detect from what it kept: the run's process only writes, and
# never holds, ships or broadcasts the corpus. The state lives under the run's token and dies with the pool.


# How many files the companion parses between two returns of its heap's free pages (a call costs about a ms).
TRIM_EVERY_FILES = 1024


def _companion_state(token: str) -> dict[str, Any]:
    state = _WORKER.get("companion")
    if state is None or state["token"] != token:
        if state is not None and state["spill"]:
            state["spill"].close()
        state = _WORKER["companion"] = {"token": token, "kept": {}, "corpus": None, "states": None, "fields": {},
                                        "received": set(), "expect": None, "spill": None}
    return state


def _spilled(state: dict[str, Any], held: Kept, cache: ParseCache | None) -> Kept:
    """``held`` with its texts written to the run's spill (see :class:`~xerj_core.autoindex.kept.Spill`), made
    beside the parse cache on first use; as it is when the run keeps no parse cache (no data directory to use)."""
    if state["spill"] is None:
        if cache is None:
            return held
        state["spill"] = open_spill(cache.path) or False  # False: refused there, this run keeps texts in memory
    return held.spilled(state["spill"]) if state["spill"] else held


def pack_outcomes(outcomes: list[ParseOutcome]) -> bytes:
    """A batch's outcomes as the companion ships them: pickled and compressed, so a run can hold many batches
    that are parsed ahead of its writer without holding their documents as objects."""
    return _squeeze(pickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL))


def unpack_outcomes(blob: bytes) -> list[ParseOutcome]:
    return pickle.loads(_unsqueeze(blob))


@_task
def parse_and_keep(source: Plugins | PluginsRef, token: str, entries: Sequence[FileEntry], keep: bool,
                   ship: bool, batch: int | None = None, cache: ParseCache | None = None) -> bytes:
    """The companion's parse: :func:`parse_batch`, keeping each parsed file for detection when ``keep``.

    Returns the packed outcomes, without their partials (those stay here); with
    ``ship`` false (files parsed for the corpus only) just the failures. ``batch``
    numbers a kept batch for :func:`combine_kept` (each batch reaches the companion
    once: parsed here, or parsed by the run's process and adopted).
    """
    outcomes = parse_batch(source, entries, keep, ship, cache, not ship)
    if keep:
        state = _companion_state(token)
        state["received"].add(batch)
        kept, fields = state["kept"], state["fields"]
        for outcome in outcomes:
            if outcome.docs or outcome.kept is not None:
                kept[outcome.entry.rel_path] = _spilled(state, Kept.of(outcome, fields), cache)
        # a file's text is let go once parsed, between the kept files' objects: now and then the heap's free
        # pages go back, so the companion holds what it kept rather than every text it read
        state["parsed"] = state.get("parsed", 0) + len(entries)
        if state["parsed"] >= TRIM_EVERY_FILES:
            state["parsed"] = 0
            trim_heap()
        _keep_out_of_collections()
    if not ship:
        return pack_outcomes([o for o in outcomes if o.failure is not None])
    # every file's outcome, in the batch's order: the run puts back the entries it sent (see with_entries), which
    # cost its writer a path object each to unpickle
    return pack_outcomes([ParseOutcome(None, digest=o.digest, sources=o.sources,  # type: ignore[arg-type]
                                       counted=o.counted) if o.docs else attrs.evolve(o, entry=None) for o in outcomes])


def with_entries(outcomes: list[ParseOutcome], entries: Sequence[FileEntry]) -> list[ParseOutcome]:
    """:func:`parse_and_keep`'s shipped outcomes of the batch ``entries``, each with its entry put back."""
    if len(outcomes) != len(entries):
        raise PluginError(f"a parse batch of {len(entries)} files came back with {len(outcomes)} outcomes")
    return [o if o.entry is not None else attrs.evolve(o, entry=entry) for o, entry in zip(outcomes, entries)]


def _keep_out_of_collections() -> None:
    """The companion's kept files (and, once combined, its corpus and states) live until detection ends and
    hold no reference cycle: moved out of the cyclic collector's generations, so its full collections (a
    batch's allocations set them off) no longer walk the whole corpus each time. Freed as usual, by their
    reference counts, when let go (the companion is a process of its own and ends with the run; in any other
    process, where they would stay out of sight of ``gc.get_objects``, nothing is done)."""
    if _WORKER.get("pool_worker"):
        gc.freeze()


@_task
def adopt_kept(source: Plugins | PluginsRef, token: str, kept: Sequence[tuple[str, Kept]],
               batch: int | None = None) -> tuple[list[str], dict[str, int]] | None:
    """The companion keeps these files of ``batch``, parsed by the run's own process (which parses a batch the
    companion has not begun whenever it would otherwise wait for the companion).

    The run may have asked for the combine already (:func:`combine_kept`): when
    this is the last batch it waits for, the combine runs now, and its outcome is
    returned (else None).
    """
    state = _companion_state(token)
    state["kept"].update((path, _spilled(state, held.sharing(state["fields"]), None)) for path, held in kept)
    state["received"].add(batch)
    _keep_out_of_collections()
    if state["expect"] is not None and len(state["received"]) >= state["expect"]:
        state["expect"] = None
        return _combine(_resolve(source), state)
    return None


@_task
def combine_kept(source: Plugins | PluginsRef, token: str, batches: int | None = None, remember: bool = False,
                 published: tuple[str, ...] = ()) -> tuple[list[str], dict[str, int]] | None:
    """The companion's combine over every file it kept: the files in detection order, and the run's counters.

    With ``batches``, the combine waits until that many numbered batches are kept:
    a batch the run's process took back reaches the companion later (by
    :func:`adopt_kept`, which then combines and answers); until then None. The
    run asks for the combine as soon as every parse batch is sent, so it runs
    right after the last batch, wherever that batch was parsed. With ``remember``, the corpus carries the files'
    stamps, by which the detect batches remember detections (see :func:`corpus_of`); ``published``: where the
    folder is published (see :class:`Corpus`).
    """
    state = _companion_state(token)
    state["remember"], state["published"] = remember, published
    if batches is not None and len(state["received"]) < batches:
        state["expect"] = batches
        return None
    return _combine(_resolve(source), state)


def _combine(plugins: Plugins, state: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
    kept: dict[str, Kept] = state["kept"]
    state["fields"] = {}  # every file is kept: the maps stay shared, the table's keys go
    trim_heap()  # the last parses' texts, before combining adds its own peak
    ordered = sorted(kept)
    corpus = corpus_of(kept, state.get("remember", False), state.get("published", ()))
    states = combine(plugins.detectors, (kept[path].partial for path in ordered), corpus)
    for path in ordered:  # the partials are folded into the states: let them go
        kept[path] = attrs.evolve(kept[path], partial=None)
    state["corpus"], state["states"] = corpus, states
    _keep_out_of_collections()
    # combining frees the partials and many arrays and sets at once: hand the heap's free pages back, since the
    # companion holds the corpus (and its memory counts in the run's) until its last detect batch
    trim_heap()
    counters: dict[str, int] = {}
    for detector_state in states.values():
        for key, value in detector_state.counters.items():
            counters[key] = counters.get(key, 0) + int(value)
    return ordered, counters


def corpus_of(kept: Mapping[str, Kept], stamped: bool, published: tuple[str, ...] = ()) -> Corpus:
    """The corpus of the kept files; ``stamped``, with their stamps (for a run that remembers detections: a
    first run holds none, its peak memory being what it is measured by); ``published``: where the folder is."""
    ordered = sorted(kept)
    stamps = {path: kept[path].stamp for path in ordered if kept[path].stamp} if stamped else None
    return Corpus({path: kept[path].docs for path in ordered}, stamps=stamps, published=published)


def _detect(detectors: Sequence[Any], files: Sequence[tuple[str, Kept | Sequence[SourceDocument]]], corpus: Corpus,
            states: Mapping[str, DetectorState], cache: ParseCache | None) -> Sequence[EdgeDraft]:
    """Every detector over each file, in order; with ``cache``, a file whose detection is remembered there is not
    detected while what it asked still holds (see :mod:`.detectmemo`), and the others are remembered."""
    def documents(held: Kept | Sequence[SourceDocument]) -> Sequence[SourceDocument]:
        return held.documents() if isinstance(held, Kept) else held

    if cache is None or not corpus.stamps:
        drafts: list[EdgeDraft] = []
        for _path, held in files:
            drafts.extend(detect_file(detectors, list(documents(held)), corpus, states))
        return drafts
    answers = Answers.of(corpus, states)  # one per run: its batches share the answers
    found, fresh = detect_files(detectors, [(path, functools.partial(documents, held)) for path, held in files],
                                corpus, states, cache.recall_detections(path for path, _ in files), answers)
    cache.keep_detections(fresh)
    return found


@_task
def detect_kept(source: Plugins | PluginsRef, token: str, paths: Sequence[str], cache: ParseCache | None = None
                ) -> bytes:
    """The companion's detect batch: these kept files (let go once detected) against its combined states; the
    drafts and their edge ids (see ``graph.brain.edge_id``), which the writer reconciles by, packed
    (:func:`unpack_drafts`): the run sends every detect batch at once and holds their results compressed, so the
    companion detects ahead of the writer and exits, and its corpus with it, while the writer still writes."""
    plugins = _resolve(source)
    state = _companion_state(token)
    kept: dict[str, Kept] = state["kept"]
    corpus, states = state["corpus"], state["states"]
    if corpus is None:
        raise PluginError(f"worker process {os.getpid()} was asked to detect before it combined the run's files")
    drafts = _detect(plugins.detectors, [(path, kept.pop(path)) for path in paths], corpus, states, cache)
    # as columns of plain values (unpickling an attrs object per draft calls Python code, in the writer, the run's
    # busy process), with the edge ids worked out here once for the writer and its typed edge path (DraftColumns)
    batch = drafts if isinstance(drafts, DraftColumns) else DraftColumns.of(drafts)
    del drafts
    # the batch's kept files (their documents, texts) are let go: their pages go back while the writer still writes
    # (its edge transactions are its peak, and the run's RSS is the two processes' added up)
    trim_heap()
    # zlib rather than LZ4: a run holds up to DETECT_AHEAD_BATCHES of these (0.31 MB a batch of 512 notes; 0.47
    # with LZ4)
    return zlib.compress(pickle.dumps((batch.columns(), batch.ids), protocol=pickle.HIGHEST_PROTOCOL), 1)


def unpack_drafts(blob: bytes) -> tuple[DraftColumns, list[str]]:
    """:func:`detect_kept`'s drafts (as columns) and their edge ids."""
    columns, ids = pickle.loads(zlib.decompress(blob))
    return DraftColumns(columns, ids), ids


@attrs.frozen
class Broadcast:
    """The corpus and the combined states, pickled once by the caller and unpacked once per worker."""

    token: str
    payload: bytes

    @classmethod
    def pack(cls, corpus: Corpus, states: Mapping[str, DetectorState]) -> "Broadcast":
        payload = pickle.dumps((corpus, dict(states)), protocol=pickle.HIGHEST_PROTOCOL)
        return cls(xxhash.xxh3_128_hexdigest(payload), payload)

    def unpack(self) -> tuple[Corpus, Mapping[str, DetectorState]]:
        cached = _WORKER.get("broadcast")
        if cached is None or cached[0] != self.token:
            cached = _WORKER["broadcast"] = (self.token, pickle.loads(self.payload))
        return cached[1]


@_task
def detect_batch(source: Plugins | PluginsRef, shared: Broadcast | tuple[Corpus, Mapping[str, DetectorState]],
                 files: Sequence[tuple[str, Kept | Sequence[SourceDocument]]], cache: ParseCache | None = None
                 ) -> Sequence[EdgeDraft]:
    """Every detector over each file of the batch (its documents, or its :class:`Kept`), with the run's corpus and
    states; drafts in file order. With ``cache``, detections are remembered there (see :func:`_detect`)."""
    plugins = _resolve(source)
    corpus, states = shared.unpack() if isinstance(shared, Broadcast) else shared
    return _detect(plugins.detectors, files, corpus, states, cache)


@runtime_checkable
class Broadcasting(Protocol):
    """An executor that can place one value on every worker once (a cluster's broadcast).

    ``broadcast(value)`` returns a handle its tasks accept in place of the
    value, so the detect batches carry the handle instead of the corpus and
    states each time (the Dask executor sends them once, as a task every
    detect task depends on).
    """

    def broadcast(self, value: Any) -> Any: ...


def share(executor: cf.Executor, in_process: bool, corpus: Corpus, states: Mapping[str, DetectorState]) -> Any:
    """The corpus and combined states as ``detect_batch`` takes them on ``executor``.

    In process, the objects themselves; on a :class:`Broadcasting` executor, its
    handle; on any other executor, one :class:`Broadcast` pickled here and
    unpacked once per worker process.
    """
    if in_process:
        return (corpus, dict(states))
    if isinstance(executor, Broadcasting):
        return executor.broadcast((corpus, dict(states)))
    return Broadcast.pack(corpus, states)


def watch_batch(future: cf.Future, step: str, files: Sequence[str]) -> cf.Future:
    """A future with ``future``'s outcome, where a failure of the whole task names the batch's files.

    An :class:`~xerj_core.errors.XerjError` (a worker refusing the run's
    plugins, a detector breaking its contract) is the run's own answer and
    passes as it is. Anything else (a worker killed past the cluster's
    retries, a broken pool, a bug in a plugin) becomes
    :class:`~xerj_core.errors.BatchFailed` naming ``files``, chained to the cause.
    """
    outer: cf.Future = cf.Future()

    def settle(inner: cf.Future) -> None:
        # a task cancelled by the executor rather than by the run (a cluster that lost its input) is lost work too
        exc = cf.CancelledError("the executor cancelled the task") if inner.cancelled() else inner.exception()
        if exc is None:
            outer.set_result(inner.result())
        elif isinstance(exc, XerjError):
            outer.set_exception(exc)
        else:
            failed = BatchFailed(step, files, exc)
            failed.__cause__ = exc
            outer.set_exception(failed)

    future.add_done_callback(settle)
    return outer


def open_pool(workers: int, *, fork: bool = False, plugins: Plugins | None = None) -> cf.ProcessPoolExecutor:
    """A process pool whose workers load the installed plugins once each: spawned, or with ``fork`` (see
    :func:`may_fork`) forked from this process.

    A forked worker given ``plugins`` (the run's, which :func:`rebuilds_alike` found a fresh load matches) keeps
    its copy of them instead of loading the plugins again: on a small run the companion is the critical path,
    and a second plugin manager cost it some 15-25 ms before its first file. (Forked, they are not pickled.)

    Spawned by default: a worker never inherits the parent's open store or its
    threads, and behaves the same on every platform.
    """
    context = multiprocessing.get_context("fork" if fork else "spawn")
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=init_worker,
                                  initargs=(plugins,) if fork and plugins is not None else ())
    for queue in (getattr(pool, "_result_queue", None), getattr(pool, "_call_queue", None)):
        _widen(getattr(queue, "_reader", None))
    return pool


# Bytes a pool's pipes hold (Linux: F_SETPIPE_SZ; at most /proc/sys/fs/pipe-max-size, 1 MiB by default). A
# companion's parse batch comes back as about half a megabyte through a pipe of 64 KiB, and the thread of this
# process that reads it must take the interpreter's lock for each 64 KiB: while the writer computes, that waits up
# to the switch interval (5 ms) each time, and the companion, blocked in its write, waits with it. On 5,000 files
# of real code the companion spent 7-8% of its run so.
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031


def _widen(connection: Any) -> None:
    """Give the pipe under ``connection`` :data:`PIPE_BYTES` of room where the system allows it (else as is)."""
    if connection is None or not sys.platform.startswith("linux"):
        return
    import fcntl

    try:
        fcntl.fcntl(connection.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, ValueError, AttributeError):
        try:  # a lower system maximum: what it allows
            with open("/proc/sys/fs/pipe-max-size") as limit:
                fcntl.fcntl(connection.fileno(), _F_SETPIPE_SZ, min(PIPE_BYTES, int(limit.read())))
        except (OSError, ValueError, AttributeError):
            pass


def may_fork() -> bool:
    """Whether a companion may be forked from this process rather than spawned: on Linux, while this process
    runs one thread.

    A spawned companion is a fresh interpreter that imports numpy, the formats
    and the detectors before its first file: about 0.4 s of CPU, which on a
    2,000-note vault is a sixth of the run and all of it on the run's critical
    path. A forked one has all that already and parses at once. Forking with
    the store open is safe under two conditions, both held here: the child
    never touches the LMDB environment it inherits (its tasks are the pure
    functions of this module, it leaves by ``os._exit`` as multiprocessing's
    fork children do, so no finalizer closes or writes anything, and LMDB's
    ``fcntl`` liveness locks are not inherited by a child), and no other thread
    can hold a lock at the instant of the fork (a merge thread mid-merge, a
    server's threads): with a second thread alive the companion is spawned.
    Nor may this process hold a parse cache environment (an earlier run's
    lookups here, in ``--watch`` or a test): the companion could not open the
    cache then (:func:`~xerj_core.autoindex.parsecache.held_here`).
    macOS and Windows always spawn (their system libraries are not fork-safe,
    or there is no fork).
    """
    return sys.platform.startswith("linux") and threading.active_count() == 1 and not parsecache.held_here()


@contextlib.contextmanager
def main_left_behind() -> Any:
    """While a pool of the run's own spawns its workers: they do not run the caller's main script again.

    A spawned worker imports the parent's ``__main__`` from its path first, so a
    script calling ``run()`` at its top level, with no ``if __name__ ==
    "__main__"`` guard, would start a run in every worker (and break the pool).
    The run's tasks are functions of this package over plain values, so a
    worker needs nothing from the caller's main module: while the worker
    starts, ``__main__`` is an empty module, and the caller's is put back.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def batch_failure(step: str, files: Sequence[str], exc: BaseException) -> BaseException:
    """What an in-process batch's failure ``exc`` is reported as: an ``XerjError`` as it is, else ``BatchFailed``."""
    if isinstance(exc, XerjError):
        return exc
    failed = BatchFailed(step, files, exc)
    failed.__cause__ = exc
    return failed
