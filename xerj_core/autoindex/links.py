"""Link targets resolved against a :class:`~xerj_core.autoindex.detect.Corpus`: relative paths and wikilink names.

The link detectors resolve what a file writes (``[text](../a.md#part)``,
``[[Note name|label]]``) through these functions, and so does everything else
that turns a name a person typed into a document (the graph's node names), so
a name means the same thing wherever it is written.

Wikilink names resolve as note-taking tools resolve them, case-insensitively:
a ``./``/``../`` name relative to the linking file; a name with a ``/`` as a
root-relative path without (or with) extension, then as a path suffix
(``[[house/todo]]`` finds ``notes/house/todo.md``); a bare name as a file name
without extension, then with it (``[[diagram.png]]``); failing those, a
front-matter alias. Several candidates: the nearest folder to the linking file
wins, then the smaller path.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterator
from urllib.parse import unquote

from xerj_core.autoindex.detect import Corpus, fold_name
from xerj_core.model import SourceDocument

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
NOTE_EXTENSIONS = (".md", ".markdown", ".mdown", ".mkd", ".mdx", ".qmd", ".rmd")
# The formats whose documents are Markdown text (a notebook's are the Markdown its cells make, code fenced).
MARKDOWN_FORMATS = frozenset({"markdown", "notebook", "joplin"})


def within_root(path: str) -> bool:
    return path not in ("", ".", "..") and not path.startswith("../") and not path.startswith("/")


# A blog post's address as Jekyll publishes it: categories, then /year/month/day/title (with .html, or a slash)
_POST_ADDRESS = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/([^/]+?)(?:\.html)?/?$")
# A PDF's open parameters (``paper.pdf#page=12&zoom=150``): the page, whose document is labelled ``page 12``.
_PDF_PAGE = re.compile(r"page=(\d+)(?:&|$)")


def target_document(corpus: Corpus, path: str, fragment: str) -> SourceDocument | None:
    """The section of ``path`` named by ``fragment`` (a heading, ``^id``: the one holding that block, or
    ``page=N``: that page of a PDF) when there is one, else the file's card."""
    if fragment:
        page = _PDF_PAGE.match(fragment)
        if page is not None:
            section = corpus.section(path, f"page {int(page.group(1))}")
            section = section if section is not None and section.kind == "page" else None  # not a note's heading
        elif fragment.startswith("^"):
            section = corpus.block(path, fragment[1:])
        else:
            section = corpus.section(path, fragment)
        if section is not None:
            return section
    return corpus.card(path)


def resolve_relative(
    corpus: Corpus, from_path: str, destination: str, *, index_names: tuple[str, ...] = (), site_roots: bool = False
) -> SourceDocument | None:
    """A link destination written in the file ``from_path`` (relative, or ``/``-rooted) → document.

    URLs with a scheme, protocol-relative URLs and bare ``#fragments`` resolve to
    nothing. The query string is dropped and percent-escapes decoded. An exact
    path wins over a case-insensitive one; a destination without extension may
    name a note (``.md``), and a page's ``.html`` address the note it is rendered from when the page is not there;
    a folder destination names its ``index_names`` file, else the note published as that folder
    (``guide/setup/``: ``guide/setup.md``);
    failing all, a path names its gzipped copy (``README.md`` -> ``README.md.gz``).

    A ``/``-rooted destination is rooted at the indexed folder. With
    ``site_roots``, one that a page declares as its address (front matter's ``permalink``) names that page, and
    one that names nothing there is rooted at each folder above
    ``from_path`` in turn, the outermost first: a site's pages link from the
    site's root (npm's docs write ``/commands/npm-config`` for
    ``docs/content/commands/npm-config.md``), which is rarely the folder indexed. Failing those, its first
    folder is tried as a Jekyll collection's (``/docs/setup/``: ``_docs/setup.md``), and a post's address
    (``/news/2024/01/15/hello/``) as the post of ``_posts/`` it is published from (``2024-01-15-hello.md``).
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
    if raw_path.startswith("/") and site_roots:
        declared = corpus.by_permalink(raw_path)  # a page that says it is published at this address
        if declared:
            return target_document(corpus, corpus.nearest(declared, from_path) or declared[0], unquote(fragment))
    if raw_path.startswith("/"):
        rooted = raw_path.lstrip("/")
        roots = [""] + (_folders_above(from_path) if site_roots else [])
        paths = [_within(root, posixpath.normpath(posixpath.join(root, rooted)) if rooted else "") for root in roots]
        first, _, rest = rooted.partition("/")
        if site_roots and first and rest.strip("/"):
            # Jekyll publishes a collection's documents (_docs/setup.md) under the collection's name: /docs/setup/
            paths += [_within(root, posixpath.normpath(posixpath.join(root, f"_{first}", rest))) for root in roots]

    else:
        joined = posixpath.join(posixpath.dirname(from_path), raw_path)
        paths = [posixpath.normpath(joined) if joined else ""]
    for path in paths:
        if path is None or not within_root(path):
            continue
        tries = [path]
        if raw_path.endswith("/"):
            # a site's folder URL: the folder's index page, else the page published there (Hugo, Jekyll and
            # MkDocs publish guide/setup.md as /guide/setup/)
            tries = [posixpath.join(path, name) for name in index_names] + [path + ext for ext in NOTE_EXTENSIONS]
        elif not posixpath.splitext(path)[1]:
            tries += [path + ext for ext in NOTE_EXTENSIONS] + [posixpath.join(path, name) for name in index_names]
        elif path.endswith(".html"):
            # a page's published address: the note it is rendered from (Quarto, MkDocs, Sphinx publish x.md as x.html)
            tries += [path[:-len(".html")] + ext for ext in NOTE_EXTENSIONS]
        # then each as a compressed copy: Debian ships a package's docs gzipped, and their links name the plain files
        for candidate in tries + [candidate + ".gz" for candidate in tries]:
            found = corpus.lookup_path(candidate)
            if found is not None:
                return target_document(corpus, found, unquote(fragment))
    post = _POST_ADDRESS.search(raw_path) if site_roots and raw_path.startswith("/") else None
    if post is not None:
        # a blog post's address, /news/2024/01/15/hello/: the post _posts/2024-01-15-hello.md, by its name
        posts = [path for path in corpus.by_stem("{}-{}-{}-{}".format(*post.groups())) if "_posts/" in f"/{path}"]
        if posts:
            return target_document(corpus, corpus.nearest(posts, from_path) or posts[0], unquote(fragment))
    return None


def _folders_above(path: str) -> list[str]:
    """The folders holding ``path``, below the root, the outermost first (``a/b/c.md``: ``a``, ``a/b``)."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[:depth]) for depth in range(1, len(parts) + 1)]


def _within(root: str, path: str) -> str | None:
    """``path`` when it stays inside the folder ``root``, else None (``/../x`` tried from ``docs`` is not ``x``)."""
    return path if not root or path == root or path.startswith(root + "/") else None


_NOTE_EXTENSION_SET = frozenset(NOTE_EXTENSIONS)


def _strip_note_extension(name: str) -> str:
    # no note extension holds a dot of its own, so the last dot is where one would start
    dot = name.rfind(".")
    return name[:dot] if dot > 0 and name[dot:].lower() in _NOTE_EXTENSION_SET else name


# How many names a corpus remembers the candidates of (see note_candidates): a long-lived corpus (a server's node
# names) meets whatever names requests bring, so its memory stops growing there.
REMEMBERED_NAMES = 1 << 16


def note_candidates(corpus: Corpus, from_path: str, name: str) -> tuple[str, ...]:
    """Every corpus path a wikilink target ``name`` written in ``from_path`` may name, at the first rule that finds any.

    The rules, in order: a ``./`` or ``../`` name relative to ``from_path``; a
    name with a ``/`` as a root-relative path (without or with extension), then
    as a path suffix; a bare name as a file name without extension, then with
    it; failing those, a front-matter alias; failing all, a bare name's spaces as
    hyphens (a GitHub wiki's ``[[Hosted assets]]`` is ``Hosted-assets.md``), and
    a bare number as the Zettelkasten id opening a file's name (``[[202010121234]]``
    is ``202010121234 Atomic notes.md``). Matching is case-insensitive.
    """
    # A name's candidates depend on the corpus alone unless the name is relative, and a corpus never changes: they
    # are remembered by the name as written (a vault links to the same notes over and over: 60,000 links name
    # 10,000 notes on 10,000 generated ones), so the rules run once per name.
    remembered = corpus.named_candidates
    found = remembered.get(name)
    if found is not None:
        return found
    found = _note_candidates(corpus, from_path, name)
    cleaned = name.strip().replace("\\", "/")
    if not (cleaned.startswith("./") or cleaned.startswith("../")) and len(remembered) < REMEMBERED_NAMES:
        remembered[name] = found
    return found


def _note_candidates(corpus: Corpus, from_path: str, written: str) -> tuple[str, ...]:
    name = written.strip().replace("\\", "/")  # a Windows path's separators; an alias is matched as written
    if not name:
        return ()
    bare = _strip_note_extension(name)
    candidates: tuple[str, ...] = ()
    if name.startswith("./") or name.startswith("../"):
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), bare))
        if within_root(joined):
            candidates = corpus.by_path_without_extension(joined) or tuple(
                p for p in [corpus.lookup_path(posixpath.normpath(posixpath.join(posixpath.dirname(from_path), name)))] if p
            )
    elif "/" in name.strip("/"):
        rooted = bare.strip("/")
        candidates = corpus.by_path_without_extension(rooted)
        if not candidates:
            exact = corpus.lookup_path(name.strip("/"))
            candidates = (exact,) if exact else ()
        if not candidates:
            suffix = "/" + fold_name(rooted)
            last = rooted.rsplit("/", 1)[-1]
            candidates = tuple(
                p for p in corpus.by_stem(last) + corpus.by_file_name(last)
                if fold_name(posixpath.splitext(p)[0]).endswith(suffix) or fold_name(p).endswith(suffix)
            )
    else:
        bare = bare.strip("/")
        candidates = corpus.by_stem(bare) or corpus.by_file_name(name.strip("/"))
    if not candidates:
        candidates = corpus.by_alias(written)
    if not candidates and " " in bare:
        # a GitHub (Gollum) wiki names the page [[Hosted assets]] in Hosted-assets.md
        candidates = corpus.by_stem(bare.strip().replace(" ", "-"))
    elif not candidates and bare.isdigit():
        # a Zettelkasten links [[202010121234]] to "202010121234 Atomic notes.md"
        candidates = corpus.by_zettel_id(bare)
    return candidates


def resolve_note(corpus: Corpus, from_path: str, name: str) -> str | None:
    """The corpus path a wikilink target names (the nearest candidate to ``from_path``), or ``None``."""
    return corpus.nearest(note_candidates(corpus, from_path, name), from_path)


# Dendron names a note of another vault ``dendron://<vault>/<note>``; notes are found by name whatever folder holds
# their vault, so the prefix is dropped.
_DENDRON_VAULT = re.compile(r"^\s*dendron://[^/|#\]]*/")
# Dendron's note references quote a range: ``![[note#Start,1:#End]]`` is from heading Start on, to heading End.
_NOTE_REF_RANGE = re.compile(r",\s*\d+(?::#.*)?$")


def resolve_wikilink(corpus: Corpus, from_doc: SourceDocument, inner: str, *, label_first: bool = False
                     ) -> SourceDocument | None:
    """The document ``[[inner]]`` written in ``from_doc`` links to, or ``None``.

    ``[[target|label]]`` is read as Obsidian, Foam and Logseq write it; when its
    target names no note and its label does, as Dendron's ``[[label|target]]``.
    With ``label_first`` (TiddlyWiki's ``[[label|target]]``) the target is what follows the ``|``.
    """
    if label_first:
        label, bar, target = inner.partition("|")
        return _resolve_target(corpus, from_doc, target if bar else label)
    target, bar, label = inner.partition("|")
    found = _resolve_target(corpus, from_doc, target.rstrip("\\"))  # [[a\|b]] inside a table escapes its pipe
    return _resolve_target(corpus, from_doc, label) if found is None and bar else found


def _resolve_target(corpus: Corpus, from_doc: SourceDocument, target: str) -> SourceDocument | None:
    """The document a wikilink's target (a note's name, with any ``#heading``) names, or ``None`` when it names no
    note (a same-file ``#heading`` names the file)."""
    target = _DENDRON_VAULT.sub("", target, count=1)
    name, _, heading = target.partition("#")
    heading = heading.strip()
    if not name.strip():
        return target_document(corpus, from_doc.ax_path, heading) if heading else None
    path = resolve_note(corpus, from_doc.ax_path, name)
    if path is not None and _NOTE_REF_RANGE.search(heading) and corpus.section(path, heading) is None:
        # a Dendron note reference's range (Start,1:#End), read from its first heading
        return target_document(corpus, path, _NOTE_REF_RANGE.sub("", heading).strip())
    if "#" not in heading and (path is None) == (heading == ""):
        # the common cases, decided: a note and a heading (no other "#" to read otherwise), or no "#" at all
        return None if path is None else target_document(corpus, path, heading)
    return _resolve_hashed_name(corpus, from_doc.ax_path, target)


def name_readings(target: str) -> Iterator[tuple[str, str]]:
    """The ways to read a link target whose note's name may hold a "#" itself ("C# tips"), as ``(name,
    heading)``: each "#" in turn as the one opening the heading, then none. Resolvers take the first reading
    whose note and heading both exist (so a heading of the note named by the text before the first "#" comes
    first, as note-taking tools read it), failing that the longest name that names a note."""
    cut = target.find("#")
    while cut >= 0:
        yield target[:cut], target[cut + 1:].strip()
        cut = target.find("#", cut + 1)
    yield target, ""


def _resolve_hashed_name(corpus: Corpus, from_path: str, target: str) -> SourceDocument | None:
    """``[[target]]`` read as :func:`name_readings` says; failing an exact reading, a heading path
    (``[[note#Heading#Subheading]]``, as Obsidian writes one) lands on its last heading."""
    fallback: str | None = None
    nested: SourceDocument | None = None
    for name, heading in name_readings(target):
        path = resolve_note(corpus, from_path, name) if name.strip() else None
        if path is not None:
            if not heading or heading.startswith("^") or corpus.section(path, heading) is not None:
                return target_document(corpus, path, heading)
            if nested is None and "#" in heading:
                nested = corpus.section(path, heading.rsplit("#", 1)[1])
            fallback = path
    if nested is not None:
        return nested
    return None if fallback is None else corpus.card(fallback)
