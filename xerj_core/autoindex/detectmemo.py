"""Detection remembered per file: a file's drafts reused while every question its detection asked of the corpus
and of the detectors' states gets the same answer.

Detectors' drafts for a file depend on the file's documents, on what they look
up in the corpus (a ``[[link]]`` resolves to whichever note now bears the name)
and on the corpus-wide detectors' combined states. So an edit to one note of
ten thousand made every run detect over every file again: on 10k generated
notes a third of such a re-run went there, on 11k ``.py`` files nearly half.

A file's detection now runs against a :class:`ReadingCorpus` and states whose
``data`` mapping is a :class:`_StateView`: each notes every question asked
(``("card", "a.md")``, ``("state", "sharedterm", "get", "a.md")``) with a key
of the answer: paths, numbers and the values of a state as they are, a document
as its id and its file's stamp (the digest of the file's bytes and its mtime, so
any change to that file changes the key). The file's drafts (as columns, with
their edge ids) and its questions are kept in ``detections.mdb`` beside the
parse cache (see :mod:`.parsecache`), under the file's path, the formats' and
the detectors' fingerprints and the stamps of this package's code. The next run
reuses an unchanged file's drafts when every question, asked again of this
run's corpus and states, gets an answer with the same key, and every draft's
target is still a document: a detector is deterministic in its documents,
corpus and state (the contract every detector keeps), so the drafts are what
detecting again would give. :class:`Answers` asks each distinct question once
per run, however many files asked it; a question answered from names alone
(which path bears this stem, is this path in the corpus) is not asked at all
while the corpus's names digest (its paths and aliases) is the one it was asked
under.

A state read other than by key (its keys, its length, iterating it) is one
question, the state's digest; so is a state that is not a mapping. What cannot
be keyed makes a file's detection unkeepable, and that file is detected on every
run, as before: reading the corpus other than through its lookups (a private
attribute), an answer of a type the keys do not cover, an argument that cannot
be a dict key, a state that does not pickle.
"""

from __future__ import annotations

import pickle
import weakref
from typing import Any, Callable, Iterable, Mapping, Sequence

import xxhash

from xerj_core.autoindex.detect import Corpus, Detector, DetectorState, detect_file
from xerj_core.autoindex.links import note_candidates
from xerj_core.graph.draftcolumns import DraftColumns
from xerj_core.model import EdgeDraft, SourceDocument

__all__ = ["Answers", "Noted", "ReadingCorpus", "detect_files", "detect_noting"]

# The corpus lookups a detection may make, each a question. ``nearest`` is not one: its answer follows from its
# arguments (paths) alone.
_LOOKUPS = frozenset({"documents", "card", "document", "mtime", "lookup_path", "by_stem", "by_file_name",
                      "by_path_without_extension", "by_alias", "by_permalink", "by_zettel_id", "by_notion_id",
                      "published_path", "directory", "next_sibling", "section", "block", "by_block", "by_citekey",
                      "__contains__"})
_NAMED = "named"  # links.note_candidates(corpus, "", name): the corpus remembers those answers by name
_PATHS = "paths"  # every path (and so how many there are): its key is the names digest itself
# The questions answered from the corpus's names alone (its paths and aliases): while its names digest is the one
# they were asked under, their answers are the same without asking (note_candidates follows the name lookups).
_BY_NAME = frozenset({_NAMED, _PATHS, "by_stem", "by_file_name", "by_path_without_extension", "by_alias",
                      "by_permalink", "by_zettel_id", "by_notion_id", "published_path", "directory", "next_sibling",
                      "lookup_path", "__contains__"})
_STATE = "state"  # a state's mapping read: ("state", detector, "get" | "item" | "has" | "bool" | "stamp", key)
_UNKEYABLE = ...  # an answer no key stands for


def _key(answer: Any, stamps: Mapping[str, Any]) -> Any:
    """What must be the same for an answer to count as the same; ``_UNKEYABLE`` when nothing can stand for it."""
    kind = type(answer)
    if answer is None or kind in _PLAIN:
        return answer
    if kind is SourceDocument:
        return ("doc", answer.doc_id, stamps.get(answer.ax_path))
    if kind is tuple or kind is list:
        if all(map(_PLAIN.__contains__, map(type, answer))):  # paths, most often: their own key
            return (kind.__name__, tuple(answer) if kind is list else answer)
        keys = tuple(_key(item, stamps) for item in answer)
        return _UNKEYABLE if _UNKEYABLE in keys else (kind.__name__, keys)
    return _UNKEYABLE


_PLAIN = frozenset({str, int, bool, float})


class Noted:
    """The questions one file's detection asked, with their answers' keys: those answered from names alone (see
    ``Corpus.names_digest``) in ``by_name``, the others in ``asked``; ``kept`` false once one could not be keyed or
    something was read past the questions."""

    __slots__ = ("by_name", "asked", "kept")

    def __init__(self) -> None:
        self.by_name: dict[tuple, Any] = {}
        self.asked: dict[tuple, Any] = {}
        self.kept = True

    def note(self, question: tuple, key: Any) -> None:
        if key is _UNKEYABLE:
            self.kept = False
            return
        try:
            (self.by_name if question[0] in _BY_NAME else self.asked)[question] = key
        except TypeError:  # an argument that cannot be a key (a list): this detection cannot be remembered
            self.kept = False


class _NamedView:
    """``corpus.named_candidates`` as a detection reads it: an answer found remembered is a question (it is
    ``links.note_candidates`` of the name, whichever file's detection remembered it first)."""

    __slots__ = ("_names", "_questions")

    def __init__(self, names: dict[str, tuple[str, ...]], questions: Noted) -> None:
        self._names, self._questions = names, questions

    def get(self, name: str, default: Any = None) -> Any:
        found = self._names.get(name)
        if found is None:
            return default
        self._questions.note((_NAMED, name), found)
        return found

    def __setitem__(self, name: str, found: tuple[str, ...]) -> None:
        self._names[name] = found

    def __len__(self) -> int:
        return len(self._names)

    def __getattr__(self, name: str) -> Any:  # read otherwise (iterated, its items): cannot be remembered
        self._questions.kept = False
        return getattr(self._names, name)


class ReadingCorpus:
    """A :class:`~xerj_core.autoindex.detect.Corpus` that notes each lookup made through it as a question.
    Anything else read off it is answered from the corpus and makes the detection unkeepable."""

    def __init__(self, corpus: Corpus, questions: Noted) -> None:
        self._corpus = corpus
        self._stamps = corpus.stamps or {}
        self._questions = questions
        self.named_candidates = _NamedView(corpus.named_candidates, questions)

    def _asked(self, name: str, args: tuple) -> Any:
        answer = getattr(self._corpus, name)(*args)
        self._questions.note((name, *args), _key(answer, self._stamps))
        return answer

    def nearest(self, candidates: Iterable[str], from_path: str) -> str | None:
        return self._corpus.nearest(candidates, from_path)

    def __contains__(self, path: object) -> bool:
        return self._asked("__contains__", (path,))

    def __len__(self) -> int:
        self._questions.note((_PATHS,), self._corpus.names_digest())
        return len(self._corpus)

    @property
    def paths(self) -> tuple[str, ...]:
        self._questions.note((_PATHS,), self._corpus.names_digest())
        return self._corpus.paths

    def __getattr__(self, name: str) -> Any:
        self._questions.kept = False
        return getattr(self._corpus, name)


def _lookup(name: str) -> Callable[..., Any]:
    def asked(self: ReadingCorpus, *args: Any) -> Any:
        return self._asked(name, args)
    asked.__name__ = name
    return asked


for _name in _LOOKUPS - {"__contains__"}:
    setattr(ReadingCorpus, _name, _lookup(_name))


class _StateView:
    """A corpus-wide detector's ``state.data`` mapping as its ``detect`` reads it: reads by key are questions;
    anything else (its keys, its length, iterating it) is answered and makes the whole state one question, its
    digest (the same state answers every read alike)."""

    def __init__(self, detector: str, state: DetectorState, questions: Noted, stamps: Mapping[str, Any],
                 digests: dict[str, Any]) -> None:
        self._detector, self._state, self._data = detector, state, state.data
        self._questions, self._stamps, self._digests = questions, stamps, digests

    def _whole(self) -> Mapping[Any, Any]:
        self._questions.note((_STATE, self._detector, "stamp", None), _digest_of(self._detector, self._state,
                                                                                 self._digests))
        return self._data

    def _note(self, how: str, key: Any, answer: Any) -> Any:
        self._questions.note((_STATE, self._detector, how, key), _key(answer, self._stamps))
        return answer

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._data.get(key, _MISSING)
        if found is _MISSING:
            self._questions.note((_STATE, self._detector, "get", key), _ABSENT)
            return default
        return self._note("get", key, found)

    def __getitem__(self, key: Any) -> Any:
        return self._note("item", key, self._data[key])

    def __contains__(self, key: Any) -> bool:
        return self._note("has", key, key in self._data)

    def __bool__(self) -> bool:
        return self._note("bool", None, bool(self._data))

    def __len__(self) -> int:
        return len(self._whole())

    def __getattr__(self, name: str) -> Any:  # keys(), items(), values() and the rest
        return getattr(self._whole(), name)

    def __iter__(self):
        return iter(self._whole())


_MISSING = object()
_ABSENT = ("absent",)  # the key of a state's answer to ``get`` when it has no such key (no answer's key is it)


def _state_stamp(state: DetectorState) -> Any:
    """A digest of a state's data as pickled; ``_UNKEYABLE`` when it does not pickle."""
    try:
        return xxhash.xxh3_128_digest(pickle.dumps(state.data, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return _UNKEYABLE


def _digest_of(detector: str, state: DetectorState, digests: dict[str, Any]) -> Any:
    """:func:`_state_stamp` of ``detector``'s state, worked out once per run (``digests``)."""
    found = digests.get(detector)
    if found is None:
        found = digests[detector] = _state_stamp(state)
    return found


class Answers:
    """This run's answers to remembered questions, each asked once: of the corpus, of the states."""

    @classmethod
    def of(cls, corpus: Corpus, states: Mapping[str, DetectorState]) -> "Answers":
        """The answers of the run whose corpus and states these are, shared by its detect batches in this process
        for as long as the corpus lives."""
        found = _RUNS.get(corpus)
        if found is None or found.states is not states:
            found = _RUNS[corpus] = cls(corpus, states)
        return found

    def __init__(self, corpus: Corpus, states: Mapping[str, DetectorState]) -> None:
        # weakly: held under the corpus in _RUNS, a strong reference would keep the corpus alive for good
        self.corpus = weakref.proxy(corpus)
        self.states = states
        self.stamps = corpus.stamps or {}
        self.names = corpus.names_digest()
        self.digests: dict[str, Any] = {}  # the states' digests, by detector, for the runs' questions about them
        self._known = _Known(self)

    def _ask(self, question: tuple) -> Any:
        try:
            return self._answer(question)
        except Exception:  # a lookup that raises now (it answered when it was noted): the file is detected again
            return _UNKEYABLE

    def _answer(self, question: tuple) -> Any:
        name = question[0]
        if name in _LOOKUPS:
            return _key(getattr(self.corpus, name)(*question[1:]), self.stamps)
        if name == _NAMED:
            return note_candidates(self.corpus, "", question[1])
        if name == _PATHS:
            return self.names
        if name == _STATE:
            _, detector, how, key = question
            state = self.states.get(detector)
            if how == "stamp":
                return _UNKEYABLE if state is None else _digest_of(detector, state, self.digests)
            data = state.data if state is not None else None
            if not isinstance(data, Mapping):
                return _UNKEYABLE
            if how == "bool":
                return bool(data)
            if how == "has":
                return key in data
            if key not in data:
                # "get": absent, as noted when it was; "item" raised when asked, and would raise again
                return _ABSENT if how == "get" else _UNKEYABLE
            return _key(data[key], self.stamps)
        return _UNKEYABLE

    def hold(self, entry: tuple) -> bool:
        """Whether each question of a remembered ``entry`` gets an answer with the key noted; those answered by
        names alone are not asked when the corpus's names are those they were asked under."""
        _, names, by_name, questions, keys, _columns, _ids = entry
        known = self._known.__getitem__
        if names != self.names:
            try:
                by_name, name_keys = pickle.loads(by_name)
            except Exception:
                return False
            if tuple(map(known, by_name)) != name_keys:
                return False
        return tuple(map(known, questions)) == keys

    def agree(self, noted: Noted) -> bool:
        """Whether every question ``noted`` holds gets an answer with the key noted, all asked."""
        return all(self._known[question] == key for question, key in (*noted.by_name.items(), *noted.asked.items()))


class _Known(dict):
    """Questions' keys as this run answers them, each asked on first use."""

    def __init__(self, answers: Answers) -> None:
        super().__init__()
        # weakly: a cycle with its Answers would leave a run's questions (160k tuples for 10k notes) to the
        # collector, which walked them all once the run was over (0.1 s of an edit's run)
        self._answers = weakref.ref(answers)

    def __missing__(self, question: tuple) -> Any:
        key = self[question] = self._answers()._ask(question)
        return key


# A remembered file: (its stamp, the names digest, the questions by name and their keys pickled apart, the other
# questions and theirs, its drafts' columns, their edge ids). The questions by name are most of a file's (an
# import's candidate modules, ``path in corpus`` each) and are read only when a name changed. An entry of another
# length (an older layout) is not used.
_ENTRY_FIELDS = 7

_RUNS: "weakref.WeakKeyDictionary[Corpus, Answers]" = weakref.WeakKeyDictionary()


def _reading_states(states: Mapping[str, DetectorState], questions: Noted, stamps: Mapping[str, Any],
                    digests: dict[str, Any]) -> dict[str, DetectorState]:
    """The states as one file's detection reads them: a mapping's reads are questions; any other data is one
    question, its digest."""
    reading = {}
    for name, state in states.items():
        if isinstance(state.data, Mapping):
            reading[name] = DetectorState(_StateView(name, state, questions, stamps, digests), state.counters)
        else:
            if state.data is not None:
                questions.note((_STATE, name, "stamp", None), _digest_of(name, state, digests))
            reading[name] = state
    return reading


def detect_noting(detectors: Sequence[Detector], file_docs: Sequence[SourceDocument], corpus: Corpus,
                  states: Mapping[str, DetectorState], digests: dict[str, Any] | None = None
                  ) -> tuple[list[EdgeDraft], Noted]:
    """``detect_file`` of one file through the views that note what the detectors ask: its drafts, and the
    questions (``kept`` false when a detector read past the questions: that file cannot be remembered).
    ``digests`` holds the states' digests worked out so far this run (see :class:`Answers`)."""
    noted = Noted()
    drafts = detect_file(detectors, list(file_docs), corpus,
                         _reading_states(states, noted, corpus.stamps or {}, {} if digests is None else digests),
                         reading=ReadingCorpus(corpus, noted))
    return drafts, noted


def detect_files(detectors: Sequence[Detector], files: Sequence[tuple[str, Callable[[], Sequence[SourceDocument]]]],
                 corpus: Corpus, states: Mapping[str, DetectorState], remembered: Mapping[str, Any],
                 answers: Answers) -> tuple[DraftColumns, dict[str, Any]]:
    """``detect_file`` over each of ``files`` (``(path, documents)``: ``documents()`` reads a file's documents,
    texts included, only when it must be detected), in order, as one batch of columns; a file whose entry in
    ``remembered`` still holds is not detected. Returns the drafts and the entries to keep for the files that
    were detected."""
    stamps = corpus.stamps or {}
    document = corpus.document
    parts: list[DraftColumns] = []
    fresh: dict[str, Any] = {}
    for path, documents in files:
        stamp = stamps.get(path)
        entry = remembered.get(path)
        if (type(entry) is tuple and len(entry) == _ENTRY_FIELDS and stamp is not None and entry[0] == stamp
                and answers.hold(entry) and all(document(dst) is not None for dst in entry[-2][1])):
            parts.append(DraftColumns(entry[-2], entry[-1]))
            continue
        drafts, questions = detect_noting(detectors, documents(), corpus, states, answers.digests)
        batch = DraftColumns.of(drafts)
        parts.append(batch)
        if questions.kept and stamp is not None:
            by_name = pickle.dumps((tuple(questions.by_name), tuple(questions.by_name.values())),
                                   protocol=pickle.HIGHEST_PROTOCOL)
            fresh[path] = (stamp, answers.names, by_name, tuple(questions.asked), tuple(questions.asked.values()),
                           batch.columns(), batch.ids)
    return (DraftColumns.joined(parts) if parts else DraftColumns.of([])), fresh
