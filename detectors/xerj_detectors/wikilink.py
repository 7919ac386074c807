"""``wikilink``: ``[[Target]]``, ``[[Target|alias]]``, ``[[Target#Heading]]`` and embeds ``![[…]]``.

Resolution follows what note-taking tools do and lives in
:mod:`xerj_core.autoindex.links` (the graph resolves a typed node name the same
way). The target (before ``|`` and ``#``) is matched case-insensitively, and
with its accents composed (NFC) on both sides, so a link typed to a file named
on macOS (whose name keeps them decomposed) finds it:

1. with a ``/`` in it: against the root-relative path without extension (or
   with it), then as a path suffix (``[[house/todo]]`` finds ``notes/house/todo.md``);
   a target starting ``./`` or ``../`` is taken relative to the linking file;
2. without one: against file names without extension, then with extension
   (``[[diagram.png]]``); a TextBundle's note is named by its bundle
   (``[[Bread]]``: ``Bread.textbundle/text.markdown``);
3. failing both, against the front-matter ``aliases`` of every note;
4. failing all, a bare name's spaces as hyphens (a GitHub wiki keeps
   ``[[Hosted assets]]`` in ``Hosted-assets.md``), and a bare number as the
   Zettelkasten id opening a file's name (``[[202010121234]]``:
   ``202010121234 Atomic notes.md``).

Several candidates: the one in the folder nearest the linking file wins
(fewest steps up and down the tree), then the smaller path. ``#Heading`` picks
that section of the target when it exists (``[[#Heading]]`` alone: of the same
file), ``#Heading#Subheading`` its last heading; ``#^block`` lands on the section
holding that block id (else the file), and a Logseq block reference ``((uuid))``
on the section holding that block, in whichever file it is. ``[[a|b]]`` whose
``a`` names no note while ``b`` does is Dendron's ``[[label|target]]``; Dendron's
``dendron://vault/`` prefix is dropped, and a note reference's range
(``#Start,1:#End``) lands on its first heading. A TiddlyWiki tiddler's
``[[label|target]]`` is always read label first, as TiddlyWiki writes it, and
its transclusions ``{{Tiddler}}`` (``{{Tiddler||Template}}``: both) link too,
as do its tags, each the title of the tiddler listing what it tags (with the
rationale ``"<title> is tagged <tag>"`` as evidence: the header is not the
text). A note may have a ``#`` in its
name (``[[C# tips]]``, ``[[C# tips#Async]]``): when the text before the first
``#`` names no note, or names one without that heading, each later ``#`` and
then none is tried as the one opening the heading. Links inside fenced or inline
code are examples, not links, and are skipped; source files (format ``code``)
are not read. Edge: from the document holding the link to the target document;
evidence is the line holding ``[[``. A note's front matter properties link too,
as Obsidian links them (``up: "[[Parent]]"``, a list of ``categories``): from
the note's card, the property's line quoted at offset 0.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from xerj_core.detectors import (MARKDOWN_FORMATS, Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl,
                                 link_drafts, make_draft, mask_code, resolve_wikilink)

# Source files hold no wikilinks; an Org file's [[target][description]] links are orglink's.
NOT_WIKI = frozenset({"code", "org"})
# formats whose code spans and fenced blocks hold examples, not links (TiddlyWiki's WikiText fences as Markdown does)
CODE_MASKED = MARKDOWN_FORMATS | {"tiddlywiki"}
# TiddlyWiki writes [[label|target]]
LABEL_FIRST = frozenset({"tiddlywiki"})
_WIKILINK = re.compile(rb"!?\[\[([^\[\]\n]+?)\]\]")
# TiddlyWiki's transclusion: {{Tiddler}}, {{Tiddler||Template}} (both named), {{Tiddler!!field}}, {{||Template}}
_TRANSCLUSION = re.compile(rb"\{\{([^{}|!\n]*)(?:!![^{}|\n]*)?(?:\|\|([^{}|\n]+))?\}\}")
_BLOCK_REF = re.compile(rb"\(\(([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\)\)")


class WikilinkDetector:
    name = "wikilink"
    type = "wikilink"
    # 3: [[note#^id]] on the section holding the block, ((uuid)) block references, [[note#A#B]] on heading B
    # 4: Dendron's [[label|target]], dendron://vault/ prefixes and note-reference ranges; TiddlyWiki's tiddlers
    # 5: a bare number names the Zettelkasten note whose file name it opens ([[202010121234]]); a TextBundle's
    # note (Bread.textbundle/text.md) is named by its bundle
    # 6: a note's front matter properties link what their [[links]] name (``categories: "[[Books]]"``)
    tag = "wikilink@6"
    weight = 1.0
    confidence = 0.95

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            tiddler = doc.format in LABEL_FIRST
            if doc.format not in NOT_WIKI and ("[[" in doc.text or "((" in doc.text or (tiddler and "{{" in doc.text)):
                yield from self._links(doc, corpus, tiddler)
            if tiddler and doc is file_docs[0] and doc.fields.get("tags"):
                yield from _tagged(self, doc, corpus)  # after its links: a link to a tag keeps its own quote
            if doc is file_docs[0] and doc.fields.get("property_links"):
                yield from _properties(self, doc, corpus)  # after its text's: a link in both keeps the text's quote

    def _links(self, doc: SourceDocument, corpus: Corpus, tiddler: bool) -> Iterable[EdgeDraft]:
        data = doc.text.encode("utf-8")
        scanned = mask_code(data) if doc.format in CODE_MASKED else data
        found = [(m.start(), resolve_wikilink(corpus, doc, m.group(1).decode("utf-8", "replace"), label_first=tiddler))
                 for m in _WIKILINK.finditer(scanned)]
        if b"((" in scanned:
            found += [(m.start(), corpus.by_block(m.group(1).decode())) for m in _BLOCK_REF.finditer(scanned)]
        if tiddler and b"{{" in scanned:
            found += [(m.start(), resolve_wikilink(corpus, doc, name.decode("utf-8", "replace"), label_first=True))
                      for m in _TRANSCLUSION.finditer(scanned) for name in m.groups() if name and name.strip()]
        found.sort(key=lambda item: item[0])
        yield from link_drafts(self, doc, data, found)


def _tagged(detector: WikilinkDetector, card: SourceDocument, corpus: Corpus) -> Iterable[EdgeDraft]:
    """A tiddler's tags, each the title of a tiddler (the one listing what it tags): from the tiddler's card to
    that tiddler's, with a rationale at offset 0 (the header holding the tags is not the card's text)."""
    seen: set[str] = set()
    for tag in card.fields["tags"]:
        if not isinstance(tag, str):
            continue
        dst = resolve_wikilink(corpus, card, tag, label_first=True)
        if dst is None or dst.doc_id == card.doc_id or dst.doc_id in seen:
            continue
        seen.add(dst.doc_id)
        yield make_draft(detector, card, dst, quote=clip(f"{card.title} is tagged {tag}"), offset=0)


def _properties(detector: WikilinkDetector, card: SourceDocument, corpus: Corpus) -> Iterable[EdgeDraft]:
    """A note's front matter properties' links (``property_links``, ``key: value`` lines): from the note's card,
    each property line quoted at offset 0 (the front matter is not the card's text)."""
    seen: set[str] = set()
    for line in card.fields["property_links"]:
        if not isinstance(line, str):
            continue
        for match in _WIKILINK.finditer(line.encode("utf-8")):
            dst = resolve_wikilink(corpus, card, match.group(1).decode("utf-8", "replace"))
            if dst is None or dst.doc_id == card.doc_id or dst.doc_id in seen:
                continue
            seen.add(dst.doc_id)
            yield make_draft(detector, card, dst, quote=clip(line), offset=0)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(WikilinkDetector())
