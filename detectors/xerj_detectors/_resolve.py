"""Resolution of written link targets to corpus documents, shared by the link detectors."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote

from xerj_core.autoindex.detect import Corpus
from xerj_core.model import SourceDocument

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
NOTE_EXTENSIONS = (".md", ".markdown", ".mdown", ".mkd", ".mdx")


def within_root(path: str) -> bool:
    return path not in ("", ".", "..") and not path.startswith("../") and not path.startswith("/")


def target_document(corpus: Corpus, path: str, fragment: str) -> SourceDocument | None:
    """The section of ``path`` named by ``fragment`` when there is one, else the file's card."""
    if fragment and not fragment.startswith("^"):
        section = corpus.section(path, fragment)
        if section is not None:
            return section
    return corpus.card(path)


def resolve_relative(
    corpus: Corpus, from_path: str, destination: str, *, index_names: tuple[str, ...] = ()
) -> SourceDocument | None:
    """A link destination written in the file ``from_path`` (relative, or ``/``-rooted) → document.

    URLs with a scheme, protocol-relative URLs and bare ``#fragments`` resolve to
    nothing. The query string is dropped and percent-escapes decoded. An exact
    path wins over a case-insensitive one; a destination without extension may
    name a note (``.md``); a folder destination names its ``index_names`` file.
    """
    destination = destination.strip()
    if destination.startswith("<") and destination.endswith(">"):
        destination = destination[1:-1].strip()
    if not destination or destination.startswith("#") or destination.startswith("//"):
        return None
    if _SCHEME.match(destination) and not re.match(r"[A-Za-z]:[\\/]", destination):
        return None
    raw_path, _, fragment = destination.partition("#")
    raw_path = unquote(raw_path.split("?", 1)[0]).replace("\\", "/")
    if not raw_path:
        return None
    if raw_path.startswith("/"):
        joined = raw_path.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(from_path), raw_path)
    path = posixpath.normpath(joined) if joined else ""
    if not within_root(path):
        return None
    tries = [path]
    if raw_path.endswith("/"):
        tries = [posixpath.join(path, name) for name in index_names]
    elif not posixpath.splitext(path)[1]:
        tries += [path + ext for ext in NOTE_EXTENSIONS] + [posixpath.join(path, name) for name in index_names]
    for candidate in tries:
        found = corpus.lookup_path(candidate)
        if found is not None:
            return target_document(corpus, found, unquote(fragment))
    return None
