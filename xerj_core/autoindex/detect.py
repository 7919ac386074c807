"""Relationship detectors: the protocol, the registry, the corpus view and the in-process runner.

A detector reads documents and proposes :class:`~xerj_core.model.EdgeDraft`
records; it never touches storage. The pipeline that walks a folder calls::

    detectors = collect_detectors(pm)                 # once per run
    corpus = Corpus(files)                            # files: {ax_path: [docs, card first]}
    result = run_detectors(detectors, files, corpus)  # DetectionResult
    result.edges     # tuple[EdgeDraft, ...], sorted, one per (src, type, dst)
    result.counters  # {"edges_capped": n, ...}, summed over detectors

``run_detectors`` is the in-process composition of three steps a distributed
executor can run itself (ARCHITECTURE.md, "Executors")::

    # map, per file (in batches):  partial = summarize(detectors, file_docs)
    # combine, once:                states = combine(detectors, partials, corpus)
    # broadcast corpus + states, then map, per file (in batches):
    #                               drafts = detect_file(detectors, file_docs, corpus, states)
    # finally sort all drafts by (src, type, dst): that is ``result.edges``

Everything handed between the steps (``Corpus``, partials, states, drafts) is
plain picklable data. The :class:`Corpus` holds every document of the run
*without its text* (lookups by path, file name, alias, directory; files'
mtimes), so broadcasting it is cheap; an index only one detector needs (crate
names, Message-IDs) is that detector's own, built in its ``combine``; a detector sees the text
only of the file it is detecting.

Incremental runs: a detector's output for a file depends on that file's
documents, on the corpus (a new file can make an old ``[[link]]`` resolve, a new
neighbour changes a ``same_dir`` chain) and on corpus-wide state. A run re-parses
only files whose stamp changed, rebuilds the corpus from every file's documents
(cached ones for unchanged files), combines the states anew, and reconciles the
edge set by id: unchanged files produce byte-identical drafts, so nothing
moves. An unchanged file is detected again only when a question its last
detection asked of the corpus or of a state is answered differently now
(:mod:`.detectmemo`); otherwise its remembered drafts are those drafts.

The contract every detector keeps (``xerj_core.testing.AbstractDetectorTests``):

- attributes ``name`` (unique; the entry-point name, so
  ``XERJ_DISABLE_PLUGINS=<name>`` switches it off), edge ``type``, ``tag`` of
  the form ``name@N`` (bump ``N`` on any behaviour change), default ``weight``
  and ``confidence`` in [0, 1]; optionally ``types``, every edge type it emits
  when there is more than one;
- ``detect(file_docs, corpus, state)`` yields drafts whose ``src`` is a
  document of ``file_docs`` (the documents of one file, card first) and whose
  ``dst`` is a document of the corpus, never ``src == dst``, at most one draft
  per ``(src, type, dst)``; ``detector`` is the tag, ``valid_at`` the source
  file's mtime (ms), and ``evidence`` is always set: ``source`` the source file's
  root-relative path, ``offset`` the UTF-8 byte offset within the source
  document's text and ``quote`` :func:`line_at` of that offset — or, for an edge
  read off layout or statistics, a generated rationale with offset 0;
- deterministic: the same documents, corpus and state give the same drafts;
- a corpus-wide detector also has ``summarize(file_docs) -> partial`` (map,
  per file) and ``combine(partials, corpus) -> DetectorState`` (reduce); its
  ``detect`` then receives that state (others receive ``None``). Counters in
  the state (``edges_capped``: candidates a cap refused) are reported by the run.

``detect_file`` checks every draft against the contract and raises
``PluginError`` naming the detector on a breach; a parse problem never reaches
this module (formats raise ``FormatError`` per file, see ``formats.py``).
"""

from __future__ import annotations

import functools
import operator
import pickle
import posixpath
import re
import unicodedata
from collections import defaultdict
from typing import Any, Collection, Iterable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import attrs
import xxhash

from xerj_core.autoindex import published
from xerj_core.errors import PluginError
from xerj_core.model import EdgeDraft, Evidence, SourceDocument
from xerj_core.plugins import collect_registrations
from xerj_core.store.store import release_cycles, young_count
from xerj_core.text import slugify

__all__ = [
    "Corpus",
    "DetectionResult",
    "Detector",
    "DetectorState",
    "QUOTE_MAX",
    "clip",
    "collect_detectors",
    "combine",
    "detect_file",
    "edge_types",
    "group_by_file",
    "is_corpus_wide",
    "smallest_owners",
    "line_at",
    "make_draft",
    "mask_code",
    "run_detectors",
    "summarize",
]

QUOTE_MAX = 240
_TAG = re.compile(r"(?P<name>[^@\s]+)@(?P<version>[1-9][0-9]*)")


@attrs.frozen
class DetectorState:
    """What a corpus-wide detector's ``combine`` hands to every ``detect`` call.

    ``data`` is the detector's own (picklable) payload; ``counters`` are reported
    by the run and summed across detectors (``edges_capped``).
    """

    data: Any = None
    counters: Mapping[str, int] = attrs.field(factory=dict)


@runtime_checkable
class Detector(Protocol):
    """Proposes edges from the documents of one file, with the corpus for lookups."""

    name: str
    type: str
    tag: str
    weight: float
    confidence: float

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: "Corpus", state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        """Drafts whose ``src`` is one of ``file_docs``; see the module docstring for the contract."""
        ...


def smallest_owners(partials: Iterable[Iterable[tuple[str, str]] | None]) -> dict[str, str]:
    """A key → document index out of ``summarize`` outputs of ``(key, doc_id)`` pairs (a Message-ID, a label):
    where several documents carry a key, the smallest id, so the index does not depend on the order files were
    read in."""
    owners: dict[str, str] = {}
    for partial in partials:
        for key, doc_id in partial or ():
            current = owners.get(key)
            if current is None or doc_id < current:
                owners[key] = doc_id
    return owners


def labels_of(file_docs: Sequence[SourceDocument], formats: Collection[str]) -> tuple[tuple[str, str], ...] | None:
    """``summarize``'s output for an index of labels: ``(label, doc_id)`` for each label (the ``labels`` field, as
    the reStructuredText and LaTeX formats give it) of the documents of ``formats``, None when they have none."""
    found = tuple((label, doc.doc_id) for doc in file_docs if doc.format in formats
                  for label in doc.fields.get("labels") or () if isinstance(label, str))
    return found or None


def is_corpus_wide(detector: Detector) -> bool:
    """True when ``detector`` needs a map → combine pass over the corpus before ``detect``."""
    return callable(getattr(detector, "summarize", None)) and callable(getattr(detector, "combine", None))


def edge_types(detector: Detector) -> tuple[str, ...]:
    """Every edge type ``detector`` may emit (``types`` when it declares them, else ``(type,)``)."""
    declared = getattr(detector, "types", None)
    return tuple(declared) if declared else (detector.type,)


def collect_detectors(pm) -> dict[str, Detector]:
    """Every detector the plugins registered, keyed by name, in registration order.

    Refuses with a ``PluginError`` naming the plugin: something that is not a
    :class:`Detector`, a tag that is not ``<name>@<N>``, a weight or confidence
    outside [0, 1], and a duplicate name.
    """
    found: dict[str, Detector] = {}
    owner: dict[str, str] = {}
    for plugin, (detector, *_rest) in collect_registrations(pm, "xerj_register_detectors"):
        if not isinstance(detector, Detector):
            raise PluginError(f"plugin {plugin!r} registered {detector!r}, which is not a Detector")
        name = detector.name
        if not isinstance(name, str) or not name or "@" in name:
            raise PluginError(f"plugin {plugin!r} registered a detector with the invalid name {name!r}")
        tag = detector.tag if isinstance(detector.tag, str) else ""
        match = _TAG.fullmatch(tag)
        if match is None or match.group("name") != name:
            raise PluginError(
                f"plugin {plugin!r} registered detector {name!r} with tag {detector.tag!r}; "
                f"a detector tag must be versioned as {name}@N"
            )
        for attr in ("weight", "confidence"):
            value = getattr(detector, attr)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise PluginError(f"plugin {plugin!r} registered detector {name!r} with {attr} {value!r}; expected 0..1")
        if not all(isinstance(t, str) and t for t in edge_types(detector)):
            raise PluginError(f"plugin {plugin!r} registered detector {name!r} with an empty edge type")
        if name in found:
            raise PluginError(
                f"plugin {plugin!r} registered detector {name!r}, which is already registered by plugin {owner[name]!r}"
            )
        found[name] = detector
        owner[name] = plugin
    return found


def line_at(text: str | bytes, offset: int) -> str:
    """The full line of ``text`` holding UTF-8 byte ``offset``, trimmed and clipped to 240 characters.

    Pass the encoded bytes when calling repeatedly on one text.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    offset = max(0, min(offset, len(data)))
    start = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    if end < 0:
        end = len(data)
    return data[start:end].decode("utf-8", "replace").strip()[:QUOTE_MAX]


def clip(text: str) -> str:
    """A generated rationale cut to the quote limit."""
    return text[:QUOTE_MAX]


_FENCE_LINE = re.compile(rb"^ {0,3}(`{3,}|~{3,})[^\n]*$", re.M)
# single-line spans only: a stray backtick must not swallow the paragraphs after it
_CODE_SPAN = re.compile(rb"(`+)(?!`)([^\n]+?)(?<!`)\1(?!`)")


def _blank(match: re.Match[bytes]) -> bytes:
    return re.sub(rb"[^\n]", b" ", match.group(0))


def mask_code(data: bytes) -> bytes:
    """Markdown ``data`` with fenced blocks and inline code spans blanked to spaces (offsets kept).

    Link detectors run on the masked bytes so an example inside code is not read
    as a link, as note-taking tools render it. Several detectors mask the same
    section one after another, so recent results are cached.
    """
    if b"`" not in data and b"~~~" not in data:
        return data
    return _mask_code(data)


@functools.lru_cache(maxsize=256)
def _mask_code(data: bytes) -> bytes:
    out = bytearray(data)
    fence: bytes | None = None
    fence_start = 0
    for match in _FENCE_LINE.finditer(data):
        marker = match.group(1)
        if fence is None:
            fence, fence_start = marker, match.start()
        elif marker[:1] == fence[:1] and len(marker) >= len(fence) and not data[match.start() : match.end()].strip(b" `~"):
            out[fence_start : match.end()] = re.sub(rb"[^\n]", b" ", data[fence_start : match.end()])
            fence = None
    if fence is not None:  # an unclosed fence runs to the end, as renderers treat it
        out[fence_start:] = re.sub(rb"[^\n]", b" ", data[fence_start:])
    masked = bytes(out)
    return _CODE_SPAN.sub(_blank_span, masked) if b"`" in masked else masked


def _blank_span(match: re.Match[bytes]) -> bytes:
    return b" " * (match.end() - match.start())  # spans are single-line


def site_address(url: str) -> str:
    """A site's page address as pages are told apart: ``/docs/setup/``, ``/docs/setup``, ``/docs/setup.html`` and
    ``/docs/setup/index.html`` are one page."""
    url = url.strip().split("#", 1)[0].split("?", 1)[0]
    for suffix in ("/index.html", ".html"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return "/" + url.strip("/")


# A Zettelkasten note's id opening its file name before its title (The Archive's and zettelkasten.de's
# "202010121234 Title.md", Zettlr's "20201012123456 Title.md"): a link names the note by the id alone.
_ZETTEL_ID = re.compile(r"(\d{8,})[ _-]+\S")
_BUNDLE = ".textbundle"
# A Notion export names a page's file (and its folder of subpages) after its title and its id.
_NOTION_ID = re.compile(r" ([0-9a-f]{32})\Z")


def _compact(index: Mapping[str, list[str]]) -> dict[str, str | tuple[str, ...]]:
    """A corpus lookup map as it is held: a key's one path itself, or its paths as a tuple."""
    return {key: paths[0] if len(paths) == 1 else tuple(paths) for key, paths in index.items()}


def _paths_of(found: str | tuple[str, ...]) -> tuple[str, ...]:
    return (found,) if isinstance(found, str) else found


# Fields of a document that only its own file's detection reads (``href`` reads the links of the page it detects,
# never another page's). A corpus holds its documents without them, as it holds them without their text: on the
# Rust core docs (41k pages) a page's links were 4 of the 6 KB a run held of it until detection.
OWN_FIELDS = frozenset({"links", "property_links"})


def corpus_view(doc: SourceDocument) -> SourceDocument:
    """``doc`` as a :class:`Corpus` holds it: without its text and its :data:`OWN_FIELDS` (itself when it has
    neither)."""
    fields = doc.fields
    if not OWN_FIELDS.isdisjoint(fields):
        fields = {name: value for name, value in fields.items() if name not in OWN_FIELDS}
    elif not doc.text:
        return doc
    return attrs.evolve(doc, text="", fields=fields)


def fold_name(name: str) -> str:
    """``name`` as the corpus's lookups compare names: lowercased, and composed (NFC) when it is not ASCII.

    A file named on macOS keeps its accents decomposed (``e`` then a combining accent) when it is copied
    elsewhere, while a link typed to it has them composed: the same name to a person, other code points.
    """
    return name.lower() if name.isascii() else unicodedata.normalize("NFC", name).lower()


class Corpus:
    """Every document of one run, without text and without the fields only its own file's detection reads
    (:data:`OWN_FIELDS`): the lookups detectors resolve targets with.

    ``files`` maps each root-relative path to its documents, file card first (as
    the format returned them). Name lookups are case-insensitive (keys are
    folded by :func:`fold_name`). ``published``: where the folder's files are
    published (:func:`xerj_core.autoindex.published.published_at`), for
    :meth:`published_path`. Picklable; build it once per run and share it.
    """

    def __init__(self, files: Mapping[str, Sequence[SourceDocument]],
                 stamps: Mapping[str, Any] | None = None, published: tuple[str, ...] = ()) -> None:
        self.published = tuple(published)
        # what names each file's content as the run read it (its bytes' digest and mtime), when the run knows it:
        # a file's detection is then remembered and reused while what it read still holds (see detectmemo)
        self.stamps: Mapping[str, Any] | None = stamps
        self._files: dict[str, tuple[SourceDocument, ...]] = {}
        self._docs: dict[str, SourceDocument] = {}
        self._folded: dict[str, list[str]] = defaultdict(list)
        self._stems: dict[str, list[str]] = defaultdict(list)
        self._names: dict[str, list[str]] = defaultdict(list)
        self._noext: dict[str, list[str]] = defaultdict(list)
        self._aliases: dict[str, list[str]] = defaultdict(list)
        self._permalinks: dict[str, list[str]] = defaultdict(list)
        self._dirs: dict[str, list[str]] = defaultdict(list)
        self._zettels: dict[str, list[str]] = defaultdict(list)
        self._notion: dict[str, list[str]] = defaultdict(list)
        self._dir_parts: dict[str, tuple[str, ...]] = {}
        self._blocks: dict[str, str] = {}  # a block id (case-folded) -> the first document holding it, by path
        self._citekeys: dict[str, list[str]] = defaultdict(list)  # a citation key (case-folded) -> entries' ids
        parts_of: dict[str, tuple[str, ...]] = {}  # a directory's parts, one tuple for all its files
        for path in sorted(files):
            docs = tuple(map(corpus_view, files[path]))
            if not docs:
                continue
            self._files[path] = docs
            for doc in docs:
                self._docs.setdefault(doc.doc_id, doc)
                for block in doc.fields.get("blocks") or ():
                    self._blocks.setdefault(str(block).casefold(), doc.doc_id)
                citekey = doc.fields.get("citekey")
                if isinstance(citekey, str) and citekey:
                    self._citekeys[citekey.casefold()].append(doc.doc_id)
            directory, name = posixpath.split(path)
            dot = name.rfind(".")
            base = name[:dot] if dot > 0 else name
            folded = fold_name(path)
            self._folded[path if folded == path else folded].append(path)
            self._stems[fold_name(base)].append(path)
            if base == "text" and directory.endswith(_BUNDLE):
                # a TextBundle (Bear's, Ulysses's export): the note is named by its folder, its text always "text"
                self._stems[fold_name(posixpath.basename(directory)[:-len(_BUNDLE)])].append(path)
            zettel = _ZETTEL_ID.match(base)
            if zettel is not None:
                self._zettels[zettel.group(1)].append(path)
            page = _NOTION_ID.search(base) if len(base) >= 33 else None
            if page is not None:
                self._notion[page.group(1)].append(path)
            self._names[fold_name(name)].append(path)
            self._noext[fold_name(posixpath.join(directory, base))].append(path)
            self._dirs[directory].append(path)
            found = parts_of.get(directory)
            if found is None:
                found = parts_of[directory] = _parts(directory)
            self._dir_parts[path] = found
            card = docs[0]
            for alias in card.fields.get("aliases") or ():
                if isinstance(alias, str) and alias.strip():
                    self._aliases[fold_name(alias.strip())].append(path)
            permalink = card.fields.get("permalink")
            if isinstance(permalink, str) and permalink:
                self._permalinks[site_address(permalink)].append(path)
        self.paths: tuple[str, ...] = tuple(self._files)
        # wikilink names' candidates as links.note_candidates found them (a corpus never changes, so a name that
        # is not relative to its linking file resolves alike wherever it is written)
        self.named_candidates: dict[str, tuple[str, ...]] = {}
        self._next_sibling: dict[str, str] = {}
        for siblings in self._dirs.values():
            for here, after in zip(siblings, siblings[1:]):
                self._next_sibling[here] = after
        # held as a run holds it until its last detect batch: a key of one file maps to the path itself (a list
        # of one costs 88 bytes, on 20k notes some 7 MB over these maps), a key of several to a tuple
        self._folded, self._stems, self._names, self._noext, self._aliases, self._permalinks, self._dirs, \
            self._zettels, self._notion, self._citekeys = map(_compact, (
                self._folded, self._stems, self._names, self._noext, self._aliases, self._permalinks, self._dirs,
                self._zettels, self._notion, self._citekeys))  # type: ignore[assignment]

    def names_digest(self) -> bytes:
        """A digest of what the name lookups answer from: the paths, the cards' aliases and permalinks, and where
        the folder is published. Corpora with the same digest give the same answer to each of ``lookup_path``,
        ``by_stem``, ``by_file_name``, ``by_path_without_extension``, ``by_alias``, ``by_permalink``,
        ``by_zettel_id``, ``by_notion_id``, ``published_path``, ``directory``, ``next_sibling`` and ``in``."""
        found = self.__dict__.get("_names_digest")
        if found is None:
            found = self.__dict__["_names_digest"] = xxhash.xxh3_128_digest(pickle.dumps(
                (self.paths, sorted(self._aliases.items()), sorted(self._permalinks.items()), self.published),
                protocol=pickle.HIGHEST_PROTOCOL))
        return found

    @classmethod
    def from_documents(cls, docs: Iterable[SourceDocument]) -> "Corpus":
        """A corpus from a flat stream of documents, grouped by ``ax_path`` in stream order."""
        return cls(group_by_file(docs))

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, path: object) -> bool:
        return path in self._files

    def documents(self, path: str) -> tuple[SourceDocument, ...]:
        """The documents of the file at ``path`` (text dropped), card first; ``()`` when absent."""
        return self._files.get(path, ())

    def card(self, path: str) -> SourceDocument | None:
        docs = self._files.get(path)
        return docs[0] if docs else None

    def document(self, doc_id: str) -> SourceDocument | None:
        return self._docs.get(doc_id)

    def mtime(self, path: str) -> int:
        """The file's mtime in epoch ms (what its edges carry as ``valid_at``)."""
        return self._files[path][0].mtime_ms

    def lookup_path(self, path: str) -> str | None:
        """``path`` itself when it is a corpus file, else its single case-insensitive match, else ``None``."""
        if path in self._files:
            return path
        found = self._folded.get(fold_name(path))
        return found if isinstance(found, str) else None

    def by_stem(self, stem: str) -> tuple[str, ...]:
        """Files whose name without extension is ``stem`` (case-insensitive); a TextBundle's text
        (``Bread.textbundle/text.md``) is named by its bundle, too."""
        return _paths_of(self._stems.get(fold_name(stem), ()))

    def by_file_name(self, name: str) -> tuple[str, ...]:
        """Files whose name (with extension) is ``name`` (case-insensitive)."""
        return _paths_of(self._names.get(fold_name(name), ()))

    def by_path_without_extension(self, path: str) -> tuple[str, ...]:
        """Files whose root-relative path minus extension is ``path`` (case-insensitive)."""
        return _paths_of(self._noext.get(fold_name(path), ()))

    def by_zettel_id(self, zettel_id: str) -> tuple[str, ...]:
        """Files whose name opens with the Zettelkasten id ``zettel_id`` (eight digits or more, a timestamp such as
        ``202010121234``) and goes on with a title after a space, ``-`` or ``_``: ``202010121234 Atomic notes.md``."""
        return _paths_of(self._zettels.get(zettel_id, ()))

    def published_path(self, address: str) -> str | None:
        """The path from the root (``#`` and a fragment kept) of the file a web ``address`` names where the folder
        is published (its git remotes' forge addresses: see :mod:`xerj_core.autoindex.published`), else None."""
        return published.published_path(address, self.published)

    def by_notion_id(self, page_id: str) -> tuple[str, ...]:
        """Files a Notion export named after the page ``page_id`` (32 lowercase hexadecimal digits): its title, a
        space, the id (``Projects 2b3c4d5e6f7a48b9c0d1e2f3a4b5c6d7.md``)."""
        return _paths_of(self._notion.get(page_id, ()))

    def by_alias(self, alias: str) -> tuple[str, ...]:
        """Files whose card lists ``alias`` in ``fields["aliases"]`` (case-insensitive)."""
        return _paths_of(self._aliases.get(fold_name(alias.strip()), ()))

    def by_permalink(self, address: str) -> tuple[str, ...]:
        """Files whose card declares ``address`` as its page's URL (``permalink``), compared as
        :func:`site_address` compares them."""
        return _paths_of(self._permalinks.get(site_address(address), ()))

    def directory(self, directory: str) -> tuple[str, ...]:
        """Files directly inside ``directory`` (``""`` is the root), in path order."""
        return _paths_of(self._dirs.get(directory, ()))

    def next_sibling(self, path: str) -> str | None:
        """The file after ``path`` in its directory, in path order (``None`` for the last)."""
        return self._next_sibling.get(path)

    def section(self, path: str, heading: str) -> SourceDocument | None:
        """The document of ``path`` whose anchor or label matches ``heading`` (case-insensitive), else the one an
        element id names (``ids``, as a page lists them: exactly), if any."""
        wanted = fold_name(heading.strip())
        slug = slugify(heading)
        for doc in self._files.get(path, ())[1:]:
            if fold_name(doc.section) == wanted or (slug and doc.fields.get("anchor") == slug):
                return doc
        for doc in self._files.get(path, ())[1:]:
            if heading in (doc.fields.get("ids") or ()):
                return doc
        return None

    def block(self, path: str, block_id: str) -> SourceDocument | None:
        """The document of ``path`` holding the block ``block_id`` (its ``blocks`` field; case-insensitive)."""
        wanted = block_id.strip().casefold()
        for doc in self._files.get(path, ()):
            if any(str(block).casefold() == wanted for block in doc.fields.get("blocks") or ()):
                return doc
        return None

    def by_block(self, block_id: str) -> SourceDocument | None:
        """The document holding the block ``block_id`` wherever it is (a Logseq block's uuid names it alone); the
        first by path when several do."""
        found = self._blocks.get(block_id.strip().casefold())
        return None if found is None else self._docs.get(found)

    def by_citekey(self, key: str) -> tuple[str, ...]:
        """The ids of the bibliography entries a citation's ``key`` names (their ``citekey`` field, as the
        ``bibtex`` format keeps it; case-insensitive, as BibTeX compares keys), in path order."""
        return _paths_of(self._citekeys.get(key.strip().casefold(), ()))

    def nearest(self, candidates: Iterable[str], from_path: str) -> str | None:
        """The candidate whose folder is fewest steps from ``from_path``'s folder; ties by path."""
        if isinstance(candidates, (tuple, list)) and len(candidates) < 2:
            return candidates[0] if candidates else None
        origin = self._dir_parts.get(from_path) or _parts(posixpath.dirname(from_path))
        best: tuple[int, str] | None = None
        for candidate in candidates:
            target = self._dir_parts.get(candidate)
            if target is None:
                target = _parts(posixpath.dirname(candidate))
            common = 0
            for a, b in zip(origin, target):
                if a != b:
                    break
                common += 1
            key = (len(origin) + len(target) - 2 * common, candidate)
            if best is None or key < best:
                best = key
        return best[1] if best is not None else None


def _parts(directory: str) -> tuple[str, ...]:
    return tuple(directory.split("/")) if directory else ()


def group_by_file(docs: Iterable[SourceDocument]) -> dict[str, list[SourceDocument]]:
    """``{ax_path: [docs...]}`` in stream order."""
    files: dict[str, list[SourceDocument]] = {}
    for doc in docs:
        files.setdefault(doc.ax_path, []).append(doc)
    return files


def make_draft(
    detector: Detector,
    src: SourceDocument,
    dst: SourceDocument,
    *,
    quote: str,
    offset: int = 0,
    type: str | None = None,
    weight: float | None = None,
    confidence: float | None = None,
) -> EdgeDraft:
    """A draft from ``src`` to ``dst`` with the detector's defaults, ``valid_at`` = the source file's mtime."""
    # positional: a run makes one per edge (133k on 10k notes), and attrs' __init__ takes them as they come
    return EdgeDraft(src.doc_id, dst.doc_id, type or detector.type, detector.tag,
                     detector.weight if weight is None else weight,
                     detector.confidence if confidence is None else confidence,
                     src.mtime_ms, Evidence(quote, src.ax_path, offset), src.format, dst.format)


def link_drafts(detector: Detector, src: SourceDocument, data: bytes,
                found: Iterable[tuple[int, SourceDocument | None]]) -> Iterator[EdgeDraft]:
    """A link detector's drafts from ``src`` (whose text is ``data``): for each ``(offset, target)`` in offset
    order, the first link to each target (a link to ``src`` itself, or to nothing, makes none), the line
    holding the offset quoted."""
    seen: set[str] = set()
    for offset, dst in found:
        if dst is None or dst.doc_id == src.doc_id or dst.doc_id in seen:
            continue
        seen.add(dst.doc_id)
        yield make_draft(detector, src, dst, quote=line_at(data, offset), offset=offset)


@attrs.frozen
class DetectionResult:
    """The drafts of one run (sorted by ``(src, type, dst)``) and the run's counters."""

    edges: tuple[EdgeDraft, ...]
    counters: Mapping[str, int]


def summarize(detectors: Iterable[Detector], file_docs: Sequence[SourceDocument]) -> dict[str, Any]:
    """Map step for one file: ``{detector name: partial}`` for every corpus-wide detector whose partial is not
    ``None`` (a name left out stands for ``None``: most files give most of them nothing, and a run holds a map per
    file until it combines, 20,000 of them for 20,000 notes)."""
    found = {}
    for d in detectors:
        if is_corpus_wide(d):
            partial = d.summarize(file_docs)  # type: ignore[attr-defined]
            if partial is not None:
                found[d.name] = partial
    return found


def combine(
    detectors: Iterable[Detector], partials: Iterable[Mapping[str, Any]], corpus: Corpus
) -> dict[str, DetectorState]:
    """Combine step: fold every file's ``summarize`` output into one state per corpus-wide detector."""
    wide = [d for d in detectors if is_corpus_wide(d)]
    per_detector: dict[str, list[Any]] = {d.name: [] for d in wide}
    for partial in partials:  # each detector still gets one partial per file, None where the map leaves it out
        for name, found in per_detector.items():
            found.append(partial.get(name))
    states = {}
    for d in wide:
        state = d.combine(per_detector[d.name], corpus)  # type: ignore[attr-defined]
        if not isinstance(state, DetectorState):
            raise PluginError(f"detector {d.name!r}: combine() must return a DetectorState, got {type(state).__name__}")
        states[d.name] = state
    return states


def _check(detector: Detector, draft: EdgeDraft, sources: set[str], corpus: Corpus) -> None:
    problem = None
    if not isinstance(draft, EdgeDraft):
        problem = f"yielded {draft!r}, which is not an EdgeDraft"
    elif draft.src == draft.dst:
        problem = f"proposed a self-edge on {draft.src!r}"
    elif draft.src not in sources:
        problem = f"proposed an edge from {draft.src!r}, which is not a document of the file being read"
    elif corpus.document(draft.dst) is None:
        problem = f"proposed an edge to {draft.dst!r}, which is not a document of the corpus"
    elif draft.detector != detector.tag:
        problem = f"tagged an edge {draft.detector!r} instead of {detector.tag!r}"
    elif draft.evidence is None or not draft.evidence.quote:
        problem = f"proposed an edge {draft.src!r} -> {draft.dst!r} without evidence"
    elif draft.type not in edge_types(detector):
        problem = f"proposed an edge of undeclared type {draft.type!r}"
    if problem is not None:
        raise PluginError(f"detector {detector.name!r} {problem}")


def detect_file(
    detectors: Iterable[Detector],
    file_docs: Sequence[SourceDocument],
    corpus: Corpus,
    states: Mapping[str, DetectorState] | None = None,
    reading: Any = None,
) -> list[EdgeDraft]:
    """Map step: every detector over one file's documents; checked, one draft per claim, sorted.

    A draft that breaks the contract (self-edge, unknown endpoint, missing
    evidence, wrong tag) raises ``PluginError`` naming the detector. ``reading``
    is the corpus the detectors are handed when not ``corpus`` itself (a view
    noting what they look up: see :mod:`.detectmemo`); drafts are checked
    against ``corpus``.
    """
    states = states or {}
    handed = corpus if reading is None else reading
    sources = {doc.doc_id for doc in file_docs}
    seen: set[tuple[str, str, str]] = set()
    drafts: list[EdgeDraft] = []
    document = corpus.document
    began = young_count()
    for detector in detectors:
        tag, types = detector.tag, edge_types(detector)
        for draft in detector.detect(file_docs, handed, states.get(detector.name)):
            # _check's conditions in its order, inline for a draft that meets them all (every draft of a sound
            # detector: a run checks one per edge); anything else goes to _check, which names the breach
            if type(draft) is not EdgeDraft:
                _check(detector, draft, sources, corpus)
            src, dst, kind = draft.src, draft.dst, draft.type
            if not (src != dst and src in sources and document(dst) is not None and draft.detector == tag
                    and (evidence := draft.evidence) is not None and evidence.quote and kind in types):
                _check(detector, draft, sources, corpus)
            claim = (src, kind, dst)
            if claim not in seen:
                seen.add(claim)
                drafts.append(draft)
    release_cycles(began=began)  # detectors are plugin code: they may make cycles while a run pauses the collector
    drafts.sort(key=_CLAIM)
    return drafts


_CLAIM = operator.attrgetter("src", "type", "dst")


def run_detectors(
    detectors: Mapping[str, Detector] | Iterable[Detector],
    files: Mapping[str, Sequence[SourceDocument]],
    corpus: Corpus | None = None,
) -> DetectionResult:
    """Run every detector over every file in process: summarize → combine → detect, sorted output."""
    chosen = list(detectors.values()) if isinstance(detectors, Mapping) else list(detectors)
    corpus = corpus if corpus is not None else Corpus(files)
    ordered = [path for path in sorted(files) if files[path]]
    states = combine(chosen, (summarize(chosen, files[path]) for path in ordered), corpus)
    edges: list[EdgeDraft] = []
    for path in ordered:
        # a draft's src belongs to its file, so files never duplicate each other's claims
        edges.extend(detect_file(chosen, files[path], corpus, states))
    edges.sort(key=lambda d: (d.src, d.type, d.dst))
    counters: dict[str, int] = {}
    for state in states.values():
        for key, value in state.counters.items():
            counters[key] = counters.get(key, 0) + int(value)
    return DetectionResult(edges=tuple(edges), counters=counters)
