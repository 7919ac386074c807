"""``pathcite``: a bare file path written in prose (``see docs/setup.md``) that names a corpus file.

A candidate is a token with a file extension (``name.ext``, optionally behind
folders, ``./`` or ``../``), not part of a URL, a Markdown link destination, a
local Markdown link's text or a wikilink (their own detectors read those). It resolves, in order, relative
to the citing file's folder, from the root, and, when it has a folder part, as
a path suffix (nearest folder wins). Prose means every format but ``code``;
code spans count, since that is where paths are usually written. Evidence is
the line holding the path.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, line_at, make_draft,
                                 within_root)

# A scan anchored on extensions (".md" followed by no word character) is linear; the token around
# each one is then widened by hand and checked against the full shape of a path.
_EXTENSION = re.compile(rb"\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/\-])")
_PATH = re.compile(rb"(?:\.{1,2}/)*(?:[\w\-][\w.\-]*/)*[\w\-][\w.\-]*\.[A-Za-z][A-Za-z0-9]{0,7}")
_TOKEN_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
_NOT_AFTER = frozenset(b"\\@:%~")
_NOT_PROSE = re.compile(
    rb"[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>)\]]*"  # URLs
    # a local Markdown link whole, its text too: `[setup.md](setup.md)` is mdlink's edge, not a second one here
    rb"|\[[^\]\n]*\]\((?![A-Za-z][A-Za-z0-9+.\-]*:)[^)\n]*\)"
    rb"|\]\([^)\n]*\)"  # other link destinations: the text of a link to a URL is prose (`[x.py](https://...)`)
    rb"|\[\[[^\]\n]*\]\]"  # wikilinks
    rb"|^ {0,3}\[[^\]\n]+\]:[^\n]*"  # link reference definitions
    , re.M
)


_UNRESOLVED = object()


def _blank(match: re.Match[bytes]) -> bytes:
    return b" " * (match.end() - match.start())


def resolve_cited_path(corpus: Corpus, from_path: str, cited: str) -> str | None:
    # every way below ends at a corpus file of the cited name (any case): most path-shaped tokens of real prose
    # (``np.array``, ``e.g``, ``gcc.gnu.org``) name none, and one lookup settles them
    if not corpus.by_file_name(cited.rpartition("/")[2]):
        return None
    here = posixpath.dirname(from_path)
    for candidate in (posixpath.normpath(posixpath.join(here, cited)), posixpath.normpath(cited)):
        if within_root(candidate):
            found = corpus.lookup_path(candidate)
            if found is not None:
                return found
    plain = cited.lstrip("./")
    if "/" not in plain:
        return None
    suffix = "/" + plain.lower()
    matches = [p for p in corpus.by_file_name(plain.rsplit("/", 1)[-1]) if p.lower().endswith(suffix)]
    return corpus.nearest(matches, from_path)


class PathciteDetector:
    name = "pathcite"
    type = "pathcite"
    tag = "pathcite@1"
    weight = 0.6
    confidence = 0.7

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        # every document of a file cites from the same folder: a token resolves once per file (real HTML cites
        # the same few names over and over, 100 tokens a page)
        resolved: dict[str, str | None] = {}
        for doc in file_docs:
            if doc.format == "code" or "." not in doc.text:
                continue
            data = doc.text.encode("utf-8")
            scanned = _prose_only(data)
            seen: set[str] = set()
            for start, cited in _cited_paths(scanned):
                path = resolved.get(cited, _UNRESOLVED)
                if path is _UNRESOLVED:
                    path = resolved[cited] = resolve_cited_path(corpus, doc.ax_path, cited)
                if path is None or path == doc.ax_path:
                    continue
                dst = corpus.card(path)
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, start), offset=start)


# Every match of _NOT_PROSE holds one of these and lies within one line (none of its parts crosses a newline).
_LINK_MARKS = (b"://", b"](", b"[[", b"]:")


def _prose_only(data: bytes) -> bytes:
    """``data`` with every URL, link destination, wikilink and link definition blanked (offsets kept).

    Only the lines holding a link mark are swept: a match never crosses a line, so each line is swept on its own
    as the whole text would be, and the regex, which tries its branches at every byte (13 MB/s on real
    changelogs and HTML text), runs over a tenth of the bytes or less."""
    spans = []
    for mark in _LINK_MARKS:
        at = data.find(mark)
        while at >= 0:
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            spans.append((data.rfind(b"\n", 0, at) + 1, end))
            at = data.find(mark, end)
    if not spans:
        return data
    spans.sort()
    out, done = [], 0
    for start, end in spans:
        if start < done:  # a line met through a second mark
            continue
        out += (data[done:start], _NOT_PROSE.sub(_blank, data[start:end]))
        done = end
    out.append(data[done:])
    return b"".join(out)


def _cited_paths(data: bytes) -> Iterable[tuple[int, str]]:
    """``(byte offset, token)`` for every path-shaped token, in order."""
    for match in _EXTENSION.finditer(data):
        start = match.start()
        while start and data[start - 1] in _TOKEN_BYTES:
            start -= 1
        if start and data[start - 1] in _NOT_AFTER:
            continue
        token = data[start : match.end()]
        if _PATH.fullmatch(token):
            yield start, token.decode("ascii")


@hookimpl
def xerj_register_detectors(register) -> None:
    register(PathciteDetector())
