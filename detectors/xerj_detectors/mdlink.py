"""``mdlink``: Markdown links ``[text](relative/path.md)`` and images, and reference links ``[text][id]``.

Only Markdown documents are read (notes, and the Markdown a Jupyter notebook's
cells make), with code blocks and spans masked. A
destination resolves relative to the linking file (``/``-rooted: to the root,
else to the outermost folder above the file from which it names a file, as a
site's pages below the indexed folder link from the site's root);
URLs with a scheme, ``//host`` links and bare ``#anchors`` are not corpus
files. A destination without extension may name a note (``.md``); a folder
names its ``index.md``/``README.md`` (Hugo's ``_index.md``, Quarto's
``index.qmd``, MDX's ``index.mdx``), and a folder destination a site's page (``/guide/setup/``) that
no folder holds is the page named so (``guide/setup.md``), as static site
generators publish one; a page's ``.html`` address whose page is not in the
folder names the note it is rendered from. A page that declares the address
(its ``permalink``) comes first; failing all, ``/docs/x/`` is tried as the
Jekyll collection document ``_docs/x.md`` and a dated address
(``/2024/01/15/hello/``) as that post of ``_posts/``; Joplin's
``[text](:/<item id>)`` names the item it keeps as ``<item id>.md``, and a
Notion export's ``https://www.notion.so/Title-<id>`` the page it exported as
``Title <id>.md``, and the address of a file where the folder is published
(its git remotes' forge, ``https://github.com/<owner>/<repo>/blob/main/x.md``:
see :mod:`xerj_core.autoindex.published`) that file, from the folder's root;
such an address written as an autolink (``<https://...>``) too. The templates
Jekyll and Hugo write for an address are read as the path they stand for:
``{{ '/docs/x/' | relative_url }}``, ``{{ site.baseurl }}/x/``, ``{% link
_docs/x.md %}`` (from the site's source), ``{% post_url 2024-01-15-x %}`` (a
post of ``_posts/``) and ``{{< ref "x.md" >}}``. ``#fragment`` picks that section of the
target when it exists. Evidence is the line holding the link's ``[``.

A reference link (``[text][id]``, ``[id][]``, ``[id]``) takes its destination
from the file's ``[id]: path`` definition, wherever in the file it stands (the
labels compared as CommonMark compares them: case-folded, runs of spaces as
one), and links from the section that uses it: a file's definitions usually sit
together at its end, and its sections are what cite them. A definition nothing
uses links from where it stands, unless it is the one Foam writes for a
``[[wikilink]]`` (labelled with its inner text, or its target before a ``|``),
which the wikilink detector links.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

from xerj_core.detectors import (MARKDOWN_FORMATS, NOTE_EXTENSIONS, Corpus, DetectorState, EdgeDraft,
                                 SourceDocument, hookimpl, link_drafts, mask_code, resolve_relative, target_document)

# [text](dest "title") — text may hold one level of brackets; dest is <...> or has balanced parentheses
_INLINE = re.compile(
    rb"!?\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]"
    rb"\(\s*(<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))+)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_DEFINITION = re.compile(rb"^ {0,3}\[(?!\^)([^\]\n]+)\]:[ \t]*(<[^<>\n]*>|\S+)", re.M)
# [text][label], [label][] and [label]; which of them are links is decided by the file's definitions
_REFERENCE = re.compile(rb"!?\[((?:[^\[\]\n]|\[[^\[\]\n]*\])+)\](?:\[([^\[\]\n]*)\])?")
# an autolink, <https://...>: it names a file of the folder only by the address where the folder is published
# (not an inline link's <destination>, nor a definition's)
_AUTOLINK = re.compile(rb"(?<!\()<(https?://[^<>\s]+)>")
# a [[wikilink]], whose inner text may be the label of a definition Foam wrote for it
_WIKILINK = re.compile(rb"\[\[([^\[\]\n]+)\]\]")
# Joplin links an item by its id, [text](:/0123456789abcdef0123456789abcdef): the item kept as <id>.md
_JOPLIN_ITEM = re.compile(r"<?\s*:/([0-9a-f]{32})(?:#([^>\s]*))?\s*>?")
# A Notion export links a page it mentions by its address, notion.so/[workspace/]Title-<id>: the page exported as
# "Title <id>.md", when the export holds it
_NOTION_PAGE = re.compile(r"<?\s*https?://(?:www\.)?notion\.so/(?:[^/?#\s>]+/)?(?:[^/?#\s>]*-)?([0-9a-f]{32})"
                          r"(?:\?[^#\s>]*)?(?:#[^\s>]*)?\s*>?")
INDEX_NAMES = ("index.md", "README.md", "readme.md", "_index.md", "index.qmd", "index.Rmd", "index.mdx", "README.mdx",
               "readme.mdx")
# the templates static site generators write for a page's address, each as the path it stands for
_TEMPLATED = re.compile(
    # Jekyll: {{ '/x/' | relative_url }}
    rb"\{\{-?\s*(['\"])([^'\"\n]+)\1\s*\|\s*(?:relative_url|absolute_url)\s*-?\}\}"
    rb"|\{\{-?\s*site\.(?:baseurl|url)\s*-?\}\}"  # Jekyll: {{ site.baseurl }}/x/
    rb"|\{%-?\s*link\s+([^\s%]+)\s*-?%\}"  # Jekyll: {% link _docs/x.md %}, from the site's source
    rb"|\{%-?\s*post_url\s+([^\s%]+)\s*-?%\}"  # Jekyll: {% post_url 2024-01-15-x %}, a post by its name
    rb"|\{\{[<%]\s*(?:rel)?ref\s+(?:path=)?\"([^\"\n]+)\"[^}\n]*[>%]\}\}"  # Hugo: {{< ref "x.md" >}}
)


def _untemplated(data: bytes) -> bytes:
    """``data`` with each address template replaced by the path it stands for, padded to its length with spaces
    (offsets kept): ``[x]({{ '/docs/' | relative_url }})`` reads as ``[x](/docs/                     )``."""
    def path(match: re.Match[bytes]) -> bytes:
        quoted, source, post, hugo = match.group(2), match.group(3), match.group(4), match.group(5)
        written = quoted or (b"/" + source.lstrip(b"/") if source else b"/_posts/" + post if post else hugo) or b""
        return written.ljust(match.end() - match.start())
    return _TEMPLATED.sub(path, data) if b"{{" in data or b"{%" in data else data


def _resolve(corpus: Corpus, from_path: str, destination: str) -> SourceDocument | None:
    joplin = _JOPLIN_ITEM.fullmatch(destination)
    if joplin is not None:
        items = corpus.by_stem(joplin.group(1))
        found = corpus.nearest(items, from_path) if items else None
        return target_document(corpus, found, joplin.group(2) or "") if found else None
    notion = _NOTION_PAGE.fullmatch(destination) if "notion.so/" in destination else None
    if notion is not None:
        pages = [path for path in corpus.by_notion_id(notion.group(1)) if path.endswith(NOTE_EXTENSIONS)]
        found = corpus.nearest(pages, from_path) if pages else None
        return corpus.card(found) if found else None
    if destination.startswith(("http://", "https://", "<http")):
        published = corpus.published_path(destination)
        # a folder address (.../tree/main/docs/) names its index page, as a relative link to the folder does
        return resolve_relative(corpus, from_path, "/" + published, index_names=INDEX_NAMES) \
            if published is not None else None
    return resolve_relative(corpus, from_path, destination, index_names=INDEX_NAMES, site_roots=True)


def _label(raw: bytes) -> str:
    """A link label as CommonMark matches it: case-folded, its runs of white space one space."""
    return " ".join(raw.decode("utf-8", "replace").split()).casefold()


class MdlinkDetector:
    name = "mdlink"
    type = "mdlink"
    # 3: a reference link links from the section using it (it linked from its definition's section);
    # 4: a /-rooted destination naming nothing at the root is rooted at the folders above the file (a site's root),
    # and a definition Foam writes for a [[wikilink]] is not a link of its own;
    # 5: a site's folder URL (/guide/setup/) names the page guide/setup.md, and a folder its _index.md (Hugo); a
    # page's declared permalink; Jekyll's and Hugo's address templates
    # 6: Joplin's [text](:/<item id>) names the item kept as <item id>.md, and a Notion export's
    # notion.so/Title-<id> the page exported as "Title <id>.md"
    # 7: a folder's index.mdx (or README.mdx) is its index page, as MDX sites (Docusaurus, Astro) publish it
    # 8: the address of a file where the folder is published (a git remote's forge) names that file
    tag = "mdlink@8"
    weight = 0.9
    confidence = 0.9

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        markdown = [doc for doc in file_docs if doc.format in MARKDOWN_FORMATS]
        texts: dict[str, bytes] = {}
        masked: dict[str, bytes] = {}

        def read(doc: SourceDocument) -> None:
            if doc.doc_id not in texts:
                texts[doc.doc_id] = doc.text.encode("utf-8")
                masked[doc.doc_id] = _untemplated(mask_code(texts[doc.doc_id]))

        # the file's definitions, each label's first one (CommonMark), with where it stands
        definitions: dict[str, tuple[bytes, str, int]] = {}
        for doc in markdown:
            if "]:" in doc.text:
                read(doc)
                for m in _DEFINITION.finditer(masked[doc.doc_id]):
                    definitions.setdefault(_label(texts[doc.doc_id][m.start(1):m.end(1)]),
                                           (m.group(2), doc.doc_id, m.start()))
        # only a file with definitions has reference links to look for; without, only inline links ("](")
        docs = [doc for doc in markdown if "](" in doc.text or "<http" in doc.text or (definitions and "]" in doc.text)]
        for doc in docs:
            read(doc)
        used: set[str] = set()
        found: dict[str, list[tuple[int, bytes]]] = {}
        for doc in docs:
            scanned = masked[doc.doc_id]
            found[doc.doc_id] = [(m.start(), m.group(1)) for m in _INLINE.finditer(scanned)]
            if b"<http" in scanned:
                defined = {m.start(2) for m in _DEFINITION.finditer(scanned)} if b"]:" in scanned else set()
                found[doc.doc_id] += [(m.start(), m.group(1)) for m in _AUTOLINK.finditer(scanned)
                                      if m.start() not in defined]
            if definitions:
                found[doc.doc_id] += self._references(texts[doc.doc_id], scanned, definitions, used)
        if definitions:
            used.update(self._wikilinked(docs, masked))
        for label, (destination, doc_id, offset) in definitions.items():
            if label not in used:
                found[doc_id].append((offset, destination))
        for doc in docs:
            yield from link_drafts(self, doc, texts[doc.doc_id], (
                (offset, _resolve(corpus, doc.ax_path, destination.decode("utf-8", "replace")))
                for offset, destination in sorted(found[doc.doc_id])))

    @staticmethod
    def _wikilinked(docs: Sequence[SourceDocument], masked: dict[str, bytes]) -> Iterator[str]:
        """The labels the file's ``[[wikilinks]]`` spell: the ``[label]`` inside each (a shortcut reference to
        CommonMark), and its target before a ``|``. Foam writes a definition for each wikilink so that plain
        Markdown renders it as a link, under either label (Foam's own docs hold ``[list|foam list orphans]:
        cli/list.md`` and ``[daily]: ../tools/cli/daily.md`` for ``[[daily|CLI daily command]]``): the wikilink
        detector links it from where it stands, and its definition is no other link."""
        for doc in docs:
            for inner in _WIKILINK.findall(masked[doc.doc_id]):
                yield _label(inner)
                yield _label(inner.split(b"|", 1)[0])

    @staticmethod
    def _references(data: bytes, scanned: bytes, definitions: dict[str, tuple[bytes, str, int]],
                    used: set[str]) -> Iterator[tuple[int, bytes]]:
        starts = {m.start() for m in _DEFINITION.finditer(scanned)}
        for m in _REFERENCE.finditer(scanned):
            start, end = m.start(), m.end()
            if start in starts or scanned[end:end + 1] in (b"(", b":") or scanned[start - 1:start] == b"\\":
                continue  # a definition, an inline link, an escaped bracket ([[wikilinks]] match whole: no label)
            if m.group(2) is not None and m.group(2).strip():
                label = _label(data[m.start(2):m.end(2)])
            else:
                label = _label(data[m.start(1):m.end(1)])
            found = definitions.get(label)
            if found is not None:
                used.add(label)
                yield start, found[0]


@hookimpl
def xerj_register_detectors(register) -> None:
    register(MdlinkDetector())
