"""``cratecite``: a crate's name in prose, linking to that crate's ``Cargo.toml``.

The names are the corpus's crates: each ``Cargo.toml``'s package name, or its
directory's name when it names no package (a workspace), at least 3
characters. A whole token of prose (``-`` and ``_`` are part of a token;
``xerj_api`` also names ``xerj-api``) that equals one links the document to
that manifest, the nearest one when several share the name. Every format but
``code`` is prose. Evidence is the line holding the name.

A name holding a ``-``, a ``_`` or a digit (``grep-cli``, ``pcre2``) is a crate
wherever it stands. A plain word is one only where the writer marked it as one:
as a code span of its own (`` `ignore` ``, where `` `grep -r` `` is a command),
beside the word ``crate`` or ``crates`` (the globset crate), or heading a path
(``ignore::WalkBuilder``). ripgrep names crates ``grep`` and ``ignore``:
unmarked, every "GNU grep" of its pages and each row of its benchmark tables
(``name: git grep (ignore)``, 2,164 edges) cited one. A word just after ``::``
is a path's segment, not a crate.

A corpus-wide detector: ``summarize`` reads each ``Cargo.toml`` card's names,
``combine`` builds the name → manifests index, ``detect`` reads prose against it.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from typing import Iterable, Sequence

from xerj_core.detectors import Corpus, DetectorState, EdgeDraft, SourceDocument, hookimpl, line_at, make_draft

_TOKEN = re.compile(rb"(?<![\w\-])[A-Za-z0-9_][\w\-]*[A-Za-z0-9_]")
MIN_NAME = 3
_PLAIN = re.compile(r"[A-Za-z]+")  # a name that could be a word of the prose: marked to count
# the word "crate(s)" right before a name (the crate `ignore`) or right after it (the ignore crate, `ignore` crates)
_CRATE_BEFORE = re.compile(rb"\bcrates?[\s`'\"(]*$", re.IGNORECASE)
_CRATE_AFTER = re.compile(rb"^[`'\")]*\s+crates?\b", re.IGNORECASE)
_NEAR = 16  # bytes either side read for those marks


class CrateciteDetector:
    name = "cratecite"
    type = "cratecite"
    tag = "cratecite@2"
    weight = 0.5
    confidence = 0.6

    def summarize(self, file_docs: Sequence[SourceDocument]) -> tuple[str, tuple[str, ...]] | None:
        """A manifest's path and the name it gives its crate (its package's, else its directory's)."""
        card = file_docs[0] if file_docs else None
        if card is None or posixpath.basename(card.ax_path) != "Cargo.toml":
            return None
        # A directory name beside a package name is not what prose cites: ripgrep keeps grep-regex in regex/, and
        # "the `regex` crate" of its pages is the regex library, not that directory.
        name = card.fields.get("crate")
        if not isinstance(name, str) or not name:
            name = posixpath.basename(posixpath.dirname(card.ax_path))
        return card.ax_path, (name,) if name else ()

    def combine(self, partials: Iterable[tuple[str, tuple[str, ...]] | None], corpus: Corpus) -> DetectorState:
        manifests: dict[str, list[str]] = defaultdict(list)
        for path, names in sorted(p for p in partials if p is not None):
            for name in names:
                manifests[name].append(path)
        return DetectorState(data={name: tuple(paths) for name, paths in manifests.items() if len(name) >= MIN_NAME})

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        manifests: dict[str, tuple[str, ...]] = state.data if state is not None and state.data else {}
        names = manifests.keys()
        if not names:
            return
        for doc in file_docs:
            if doc.format == "code" or not doc.text:
                continue
            data = doc.text.encode("utf-8")
            seen: set[str] = set()
            for match in _TOKEN.finditer(data):
                token = match.group(0).decode("ascii", "replace")
                name = next((n for n in (token, token.replace("_", "-"), token.replace("-", "_")) if n in names), None)
                if name is None or not _cited(data, match.start(), match.end(), token):
                    continue
                manifest = corpus.nearest(manifests[name], doc.ax_path)
                dst = corpus.card(manifest) if manifest else None
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                yield make_draft(self, doc, dst, quote=line_at(data, match.start()), offset=match.start())


def _cited(data: bytes, start: int, end: int, token: str) -> bool:
    """Does the token at ``data[start:end]`` cite a crate: not a path's segment, and a plain word only where
    marked as a crate (a code span of the name alone, the word crate beside it, the head of a path)?"""
    if data[max(0, start - 2):start] == b"::":
        return False
    if not _PLAIN.fullmatch(token):
        return True
    before, after = data[max(0, start - _NEAR):start], data[end:end + _NEAR]
    return (after.startswith(b"::") or (before.endswith(b"`") and after.startswith(b"`"))
            or _CRATE_BEFORE.search(before) is not None or _CRATE_AFTER.match(after) is not None)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(CrateciteDetector())
