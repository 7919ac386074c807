"""Document formats: the conformance suite for every built-in, their parsing rules, sniffing and the registry."""

from __future__ import annotations

import gc
import gzip
import io
import json
import email as email_module
import email.policy as email_policy
import mailbox
import re
import zipfile
import zlib
from email.message import EmailMessage
from pathlib import Path

import pytest

from xerj_core import hookimpl
from xerj_core.autoindex import formats as formats_module
from xerj_core.autoindex.builtin_formats import (asciidoc, canvas, code, docx, email, enex, epub, html, joplin,
                                                 kindle, markdown, notebook, odt, opml, org, pdf, pptx, rst, table,
                                                 text, tiddlywiki, xlsx)
from xerj_core.autoindex.detect import line_at
from xerj_core.autoindex.formats import (FormatDeclined, FormatError, collect_formats, format_identities, parse_file,
                                         sniff)
from xerj_core.errors import PluginError
from xerj_core.plugins import get_plugin_manager
from xerj_core.testing.formats import AbstractFormatTests
from xerj_core.text import derive_brain_name, is_valid_brain_name, slugify, tokenize

FOAM = Path(__file__).parents[1].parent / "shared/corpora/foam-docs"
MTIME = 1_700_000_000_000
# Bytes no text encoding reads (charset-normalizer finds none): the only text input that still fails.
UNDECODABLE = bytes(range(128, 256)) * 2


# -- sample builders ---------------------------------------------------------


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A small valid PDF with one line of Helvetica text per page (no PDF library needed)."""
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    kids = []
    for index, line in enumerate(pages):
        page, content = 4 + 2 * index, 5 + 2 * index
        kids.append(f"{page} 0 R")
        stream = f"BT /F1 12 Tf 72 720 Td ({line}) Tj ET".encode("latin-1")
        objects[page] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content
        )
        objects[content] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    objects[2] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode()
    info = None
    if title is not None:
        info = max(objects) + 1
        objects[info] = f"<< /Title ({title}) >>".encode("latin-1")
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (number, objects[number])
    xref = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    out += b"".join(b"%010d 00000 n \n" % offsets[n] for n in range(1, size))
    trailer = b"<< /Size %d /Root 1 0 R%s >>" % (size, b" /Info %d 0 R" % info if info else b"")
    out += b"trailer\n%s\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
    return bytes(out)


def make_message(subject, msgid, *, body="Hello.", in_reply_to=None, references=(), attachments=()):
    msg = EmailMessage()
    msg["From"] = "Ada <ada@example.org>"
    msg["To"] = "Bob <bob@example.org>"
    msg["Subject"] = subject
    msg["Date"] = "Mon, 06 Jan 2025 10:00:00 +0000"
    msg["Message-ID"] = msgid
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = " ".join(references)
    msg.set_content(body)
    for filename, payload, maintype, subtype in attachments:
        if maintype == "text":
            msg.add_attachment(payload, subtype=subtype, filename=filename)
        else:
            msg.add_attachment(payload, maintype=maintype, subtype=subtype, filename=filename)
    return msg


def make_mbox(tmp_path: Path, messages) -> bytes:
    path = tmp_path / "box.mbox"
    box = mailbox.mbox(str(path))
    for msg in messages:
        box.add(msg)
    box.flush()
    box.close()
    return path.read_bytes()


NOTE = b"""---
title: Sourdough basics
aliases: [levain, "wild yeast"]
tags:
  - baking
  - fermentation
---
A preamble before any heading.

# Starter

Feed it daily.

```
# not a heading, inside a fence
```

## Proofing ##

Long and cool.

## Proofing

A second section with the same heading.
"""


# -- the conformance suite for each built-in -----------------------------------


class TestMarkdownConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return markdown.MarkdownFormat()

    @pytest.fixture
    def sample_files(self):
        return {"notes/sourdough.md": NOTE, "index.md": b"# Home\n\nSee [[notes/sourdough]].\n", "empty.md": b""}

    @pytest.fixture
    def bad_files(self):
        return {"undecodable.md": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return markdown


# As org-roam writes a note: a file-level property drawer with its ID and aliases, then keywords and headings.
ORG = b"""\
:PROPERTIES:
:ID:       57ff3ce7-5bda-4825-8fca-c09f523e87ba
:ROAM_ALIASES: Batman "The Dark Knight"
:END:
#+title: Bruce Wayne
#+filetags: :hero:gotham:

Owner of [[id:884b2341-b7fe-434d-848c-5282c0727861][Wayne Manor]].

* TODO [#A] Patrol the city :night:
:PROPERTIES:
:ID:       0fa5bb3e-3d8c-4966-8bc9-78d32e505d69
:CUSTOM_ID: patrol
:END:
Nightly.
#+begin_src emacs-lisp
* not a heading
#+end_src
** Rooftops
See [[*Patrol the city][the patrol]].
"""


class TestOrgConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return org.OrgFormat()

    @pytest.fixture
    def sample_files(self):
        return {"roam/bruce.org": ORG, "plain.org": b"Just text, no headings.\n", "empty.org": b""}

    @pytest.fixture
    def bad_files(self):
        return {"bad.org": b"* Head\n" + UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return org


def test_org_reads_an_org_roam_note():
    card, patrol, rooftops = org.OrgFormat().parse("roam/bruce.org", ORG, MTIME)
    assert card.title == "Bruce Wayne" and card.fields["tags"] == ["hero", "gotham"]
    assert card.fields["aliases"] == ["Bruce Wayne", "Batman", "The Dark Knight"]
    assert card.fields["blocks"] == ["57ff3ce7-5bda-4825-8fca-c09f523e87ba"] and "Wayne Manor" in card.text
    assert (patrol.section, patrol.fields["level"]) == ("Patrol the city", 1)
    assert patrol.fields["anchor"] == "patrol-the-city"
    assert patrol.fields["blocks"] == ["0fa5bb3e-3d8c-4966-8bc9-78d32e505d69"]
    assert patrol.fields["custom_ids"] == ["patrol"] and "* not a heading" in patrol.text
    assert (rooftops.section, rooftops.fields["level"]) == ("Rooftops", 2) and "blocks" not in rooftops.fields
    plain = org.OrgFormat().parse("notes/plain.org", b"* One\n* One\n", MTIME)
    assert [d.doc_id for d in plain] == ["notes/plain.org", "notes/plain.org#one", "notes/plain.org#one-1"]
    assert plain[0].title == "One" and "aliases" not in plain[0].fields


ASCIIDOC = (b"// a comment\n= Install Guide\n:toc:\n\nBefore anything.\n\n[[prereq]]\n== Prerequisites\n\nRuby.\n\n"
            b"----\n== not a title (a listing)\n----\n\n////\n== nor this\n////\n\n=== Gems & more [[gems]]\n\n"
            b"[#setup.role]\n## Set up\n\n====\n....\n== in an example's literal\n....\n====\n\n"
            b"[[stale]]\nA paragraph took that id.\n\n= Part Two\n\nA book's part.\n")


class TestAsciiDocConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return asciidoc.AsciiDocFormat()

    @pytest.fixture
    def sample_files(self):
        return {"docs/install.adoc": ASCIIDOC, "plain.asciidoc": b"Only text.\n", "empty.adoc": b""}

    @pytest.fixture
    def bad_files(self):
        return {"bad.adoc": b"= Bad\n\n" + UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return asciidoc


def test_asciidoc_reads_titles_sections_and_the_ids_cross_references_name():
    card, prereq, gems, setup, part = asciidoc.AsciiDocFormat().parse("docs/install.adoc", ASCIIDOC, MTIME)
    assert (card.title, card.kind) == ("Install Guide", "file") and "Before anything." in card.text
    assert (prereq.section, prereq.fields["level"], prereq.fields["ids"]) == ("Prerequisites", 1,
                                                                               ["prereq", "_prerequisites"])
    assert "== not a title" in prereq.text and "== nor this" in prereq.text  # blocks hold no titles
    assert (gems.section, gems.fields["level"], gems.fields["ids"]) == ("Gems & more", 2, ["gems", "_gems_more"])
    assert (setup.section, setup.fields["ids"], setup.doc_id) == ("Set up", ["setup", "_set_up"],
                                                                 "docs/install.adoc#set-up")
    assert (part.section, part.fields["level"]) == ("Part Two", 0)  # a later level-0 title: a book's part
    assert part.fields["ids"] == ["_part_two"] and "== in an example's literal" in setup.text
    assert not asciidoc.AsciiDocFormat().accepts("dist/KEYS.asc", b"-----BEGIN PGP PUBLIC KEY BLOCK-----")
    plain, = asciidoc.AsciiDocFormat().parse("notes/plain.asciidoc", b"Only text.\n", MTIME)
    assert (plain.title, plain.text) == ("plain", "Only text.")


# A tiddler as a Node.js TiddlyWiki saves it: its title made safe for the file name, a header, a blank line, WikiText.
TIDDLER = (b"created: 20240102030405000\nmodified: 20240203040506000\ntags: [[Getting Started]] Concepts\n"
           b"title: Saving: on Android\ntype: text/vnd.tiddlywiki\n\nHow to save.\n\n! First steps\n\n"
           b"Install [[the app|TiddlyDesktop]].\n\n```\n! not a heading\n```\n\n!! Then\n\nMore.\n")


class TestTiddlyWikiConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return tiddlywiki.TiddlyWikiFormat()

    @pytest.fixture
    def sample_files(self):
        return {"tiddlers/Saving_ on Android.tid": TIDDLER, "tiddlers/bare.tid": b"No header here: just text.\n",
                "tiddlers/empty.tid": b"", "tiddlers/logo.tid": b"title: Logo\ntype: image/png\n\niVBORw0KGgo=\n"}

    @pytest.fixture
    def bad_files(self):
        return {"bad.tid": b"title: Bad\n\n" + UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return tiddlywiki


EVERNOTE = Path(__file__).parent / "fixtures/evernote"


def enex_export(*notes: str) -> bytes:
    """An Evernote export of ``notes`` (each a ``<note>`` element's inner XML), as Evernote writes one."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<!DOCTYPE en-export SYSTEM "http://xml.evernote.com/pub/evernote-export4.dtd">\n'
            '<en-export export-date="20240105T101010Z" application="Evernote" version="10.70.2">\n'
            + "".join(f"<note>{note}</note>\n" for note in notes) + "</en-export>\n").encode()


def enml(body: str) -> str:
    return ('<content><![CDATA[<?xml version="1.0" encoding="UTF-8" standalone="no"?>'
            '<!DOCTYPE en-note SYSTEM "http://xml.evernote.com/pub/enml2.dtd">'
            f"<en-note>{body}</en-note>]]></content>")


RECIPE = enex_export(
    "<title>Bread &amp; butter</title>"
    + enml('<h1>Dough</h1><div>Knead it; see <a href="evernote:///view/1/s1/3f89d36f-edad-4712-8aaa-a1399658b848/'
           '3f89d36f-edad-4712-8aaa-a1399658b848/">Starter log</a> and '
           '<a href="https://example.org/x">a site</a>.</div>'
           '<div>Then <a href="https://www.evernote.com/shard/s1/nl/1/60442084-0688-490e-a8e4-6ccd9b6ee544/">'
           'the oven note</a>.</div><en-crypt hint="pin">RU5DMI1mH6Tv3Ccc</en-crypt><en-media hash="ab" '
           'type="image/png"/>')
    + "<created>20240101T080000Z</created><updated>20240102T090000Z</updated><tag>baking</tag><tag>home</tag>"
      "<note-attributes><author>ada</author><source-url>https://example.org/bread</source-url></note-attributes>"
      "<task><title>Buy rye</title><taskStatus>open</taskStatus></task>"
      "<task><title>Feed starter</title><taskStatus>completed</taskStatus></task>"
      "<resource><data encoding=\"base64\">iVBORw0KGgo=</data><mime>image/png</mime>"
      "<recognition><![CDATA[<?xml version=\"1.0\"?><recoIndex><item><t w=\"80\">Rye</t><t w=\"20\">Pye</t></item>"
      "<item><t w=\"70\">flour</t></item></recoIndex>]]></recognition>"
      "<resource-attributes><file-name>label.png</file-name></resource-attributes></resource>"
      "<resource><data encoding=\"base64\">PHA+SHlkcmF0aW9uIDc1JTwvcD4=</data><mime>text/html</mime>"
      "<resource-attributes><file-name>ratios.html</file-name></resource-attributes></resource>",
    "<title>Starter log</title>" + enml("<div>Fed at 8.</div>") + "<created>20231201T080000Z</created>")


class TestEnexConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return enex.EnexFormat()

    @pytest.fixture
    def sample_files(self):
        return {"Recipes.enex": RECIPE, "empty.enex": enex_export(),
                "Linked/A.enex": (EVERNOTE / "LinkedInterNotebooks/test-internotebook_links_A.enex").read_bytes()}

    @pytest.fixture
    def bad_files(self):
        return {"page.enex": b"<html><body>not an export</body></html>", "nothing.enex": b"",
                "binary.enex": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return enex


def test_enex_reads_each_note_its_fields_tasks_and_links_and_each_attachment():
    card, bread, label, ratios, starter = enex.EnexFormat().parse("Recipes.enex", RECIPE, MTIME)
    assert (card.doc_id, card.kind, card.title, card.fields["notes"]) == ("Recipes.enex", "file", "Recipes", 2)
    assert card.fields["exported"] == "20240105T101010Z" and "malformed" not in card.fields
    assert (bread.doc_id, bread.kind, bread.title, bread.dataset) == ("Recipes.enex#note-1", "note", "Bread & butter",
                                                                      "ax-notes")
    assert bread.text.splitlines() == ["Dough", "Knead it; see Starter log and a site.", "Then the oven note.",
                                       "[encrypted]", "[ ] Buy rye", "[x] Feed starter"]
    assert "RU5DMI1mH6Tv3Ccc" not in bread.text  # the cipher text is no words of the note
    fields = bread.fields
    assert fields["tags"] == ["baking", "home"] and fields["author"] == "ada"
    assert fields["source_url"] == "https://example.org/bread"
    assert (fields["created"], fields["created_ms"]) == ("20240101T080000Z", 1704096000000)
    assert fields["updated_ms"] == 1704186000000
    assert fields["attachments"] == ["Recipes.enex#note-1.res-1", "Recipes.enex#note-1.res-2"]
    # note links only (the web link is none), each with the guid it names and where its anchor's text starts
    assert [(link["guid"], link["text"]) for link in fields["links"]] == [
        ("3f89d36f-edad-4712-8aaa-a1399658b848", "Starter log"),
        ("60442084-0688-490e-a8e4-6ccd9b6ee544", "the oven note")]
    data = bread.text.encode()
    assert [data[link["offset"]:].decode()[:len(link["text"])] for link in fields["links"]] == ["Starter log",
                                                                                                "the oven note"]
    # an image's text is what recognition read (each word's likeliest reading); an HTML file's its visible text
    assert (label.kind, label.title, label.text, label.fields["parent"]) == ("attachment", "label.png", "Rye flour",
                                                                             "Recipes.enex#note-1")
    assert (label.fields["content_type"], label.fields["size"]) == ("image/png", 8)
    assert (ratios.title, ratios.text) == ("ratios.html", "Hydration 75%")
    assert (starter.doc_id, starter.text, starter.fields["created_ms"]) == ("Recipes.enex#note-2", "Fed at 8.",
                                                                            1701417600000)


def test_enex_of_real_exports_reads_notes_tasks_and_a_pdf_attachment():
    pytest.importorskip("pypdf")
    fmt = enex.EnexFormat()
    todo = fmt.parse("todo.enex", (EVERNOTE / "test-things-to-do.enex").read_bytes(), MTIME)
    assert todo[1].title == "Things to do" and todo[1].text.splitlines()[-5:] == [
        "[ ] Simple task", "[x] Done", "[ ] Task with due date", "[ ] Task with a flag", "[ ] Task with a reminder"]
    card, note, attachment = fmt.parse("pdf.enex", (EVERNOTE / "test-noteWithPdf.enex").read_bytes(), MTIME)
    assert (attachment.title, attachment.fields["content_type"]) == ("sample.pdf", "application/pdf")
    assert note.fields["attachments"] == [attachment.doc_id]
    assert attachment.text.startswith("A Simple PDF File") and "unread" not in attachment.fields


def test_enex_whose_xml_breaks_keeps_what_it_can_read_and_says_where():
    card, note = enex.EnexFormat().parse("test.enex", (EVERNOTE / "test.enex").read_bytes(), MTIME)
    assert card.fields["malformed"].startswith("line 14: Opening and ending tag mismatch")
    assert note.title == "test" and note.text.startswith("Steps")
    cut = RECIPE[:RECIPE.index(b"<title>Starter log")]  # the file ends inside the second note
    card, *docs = enex.EnexFormat().parse("cut.enex", cut, MTIME)
    assert card.fields["malformed"] and docs[0].title == "Bread & butter" and "Rye flour" in docs[1].text


def test_enex_reads_no_entity_and_fetches_nothing():
    secret = enex_export("<title>t&x;</title>" + enml("<div>&x;</div>")).replace(
        b"<!DOCTYPE en-export SYSTEM \"http://xml.evernote.com/pub/evernote-export4.dtd\">",
        b'<!DOCTYPE en-export [<!ENTITY x SYSTEM "file:///etc/passwd">]>')
    bomb = enex_export("<title>&c;</title>").replace(
        b"<!DOCTYPE en-export SYSTEM \"http://xml.evernote.com/pub/evernote-export4.dtd\">",
        b'<!DOCTYPE en-export [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
        b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>')
    for data in (secret, bomb):
        docs = enex.EnexFormat().parse("x.enex", data, MTIME)
        assert all("root:" not in doc.text and "root:" not in doc.title and "aaaa" not in doc.title for doc in docs)


def joplin_item(item_id: str, kind: int, title: str = "", body: str = "", **props: str) -> tuple[str, bytes]:
    """A Joplin item as its sync target keeps it: ``(<id>.md, its bytes)``."""
    lines = [f"id: {item_id}", *(f"{key}: {value}" for key, value in props.items()), f"type_: {kind}"]
    head = f"{title}\n\n{body}\n\n" if body else (f"{title}\n\n" if title else "")
    return f"{item_id}.md", (head + "\n".join(lines)).encode()


NOTE_ID, FOLDER_ID, TAG_ID = "264606b4634f4fe58dda0e58a0dc64d9", "625eb45b911248028fecd94bdca86f61", \
    "1e55a346b1c3444996c3c9f52d4adc47"
JOPLIN_ITEMS = dict([
    joplin_item(NOTE_ID, 1, "Bread",
                "Knead it.\n\n## Proofing\n\nSee [the starter](:/0394074009f8454e86cbf935a03da973).",
                parent_id=FOLDER_ID, created_time="2021-08-07T17:03:33.725Z", updated_time="2021-08-07T17:03:33.833Z",
                user_created_time="2021-08-01T08:00:00.000Z", user_updated_time="2021-08-02T09:00:00.000Z",
                author="ada", source_url="https://example.org/bread", is_todo="1", todo_completed="1628355813725",
                markup_language="1", encryption_cipher_text="", encryption_applied="0"),
    joplin_item(FOLDER_ID, 2, "Kitchen", parent_id=""),
    joplin_item(TAG_ID, 5, "baking"),
    joplin_item("933cf209b0094d43884c03149f034128", 4, "photo.jpg", mime="image/jpeg", size="2720"),
    joplin_item("0394074009f8454e86cbf935a03da974", 6, note_id=NOTE_ID, tag_id=TAG_ID),
    joplin_item("5c0b421ac1e645e48dbdba4ed5328327", 1, "Oven", "<p>Heat to <b>250</b>.</p>", markup_language="2"),
])


class TestJoplinConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return joplin.JoplinFormat()

    @pytest.fixture
    def sample_files(self):
        return {**JOPLIN_ITEMS, "6b3b51468e8e44f1ba1b69e4d7e71613.md": b"# Not an item\n\nJust a note so named.\n"}

    @pytest.fixture
    def bad_files(self):
        return {"6b3b51468e8e44f1ba1b69e4d7e71614.md": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return joplin


def test_joplin_reads_notes_notebooks_tags_and_taggings_and_passes_its_own_items_by():
    fmt = joplin.JoplinFormat()
    assert fmt.accepts(f"sync/{NOTE_ID}.md", b"") and not fmt.accepts("sync/notes.md", b"")
    card, proofing = fmt.parse(f"{NOTE_ID}.md", JOPLIN_ITEMS[f"{NOTE_ID}.md"], MTIME)
    assert (card.title, card.kind, card.format, card.text) == ("Bread", "file", "joplin", "Knead it.")
    assert (proofing.section, proofing.format) == ("Proofing", "joplin") and "(:/0394074009f8" in proofing.text
    fields = card.fields
    assert (fields["joplin_type"], fields["joplin_id"], fields["parent_id"]) == ("note", NOTE_ID, FOLDER_ID)
    assert fields["aliases"] == ["Bread"] and fields["author"] == "ada" and fields["todo_completed"] is True
    assert (fields["created"], fields["created_ms"]) == ("2021-08-01T08:00:00.000Z", 1627804800000)
    assert fields["updated_ms"] == 1627894800000 and fields["source_url"] == "https://example.org/bread"
    oven, = fmt.parse("5c0b421ac1e645e48dbdba4ed5328327.md", JOPLIN_ITEMS["5c0b421ac1e645e48dbdba4ed5328327.md"], MTIME)
    assert oven.text == "Heat to 250." and "todo_completed" not in oven.fields  # an HTML note's visible text
    kinds = {}
    for path in (f"{FOLDER_ID}.md", f"{TAG_ID}.md", "933cf209b0094d43884c03149f034128.md",
                 "0394074009f8454e86cbf935a03da974.md"):
        only, = fmt.parse(path, JOPLIN_ITEMS[path], MTIME)
        kinds[only.fields["joplin_type"]] = (only.title, only.kind, only.text)
    assert kinds == {"notebook": ("Kitchen", "file", ""), "tag": ("baking", "file", ""),
                     "resource": ("photo.jpg", "file", ""), "tagging": ("", "file", "")}
    tagging, = fmt.parse("0394074009f8454e86cbf935a03da974.md", JOPLIN_ITEMS["0394074009f8454e86cbf935a03da974.md"],
                         MTIME)
    assert (tagging.fields["note_id"], tagging.fields["tag_id"]) == (NOTE_ID, TAG_ID)
    path, revision = joplin_item("8151f52ed31442cb9c9ca0a943845de5", 13, title_diff="[]", parent_id=NOTE_ID)
    with pytest.raises(FormatDeclined, match="revision") as declined:
        fmt.parse(path, revision, MTIME)
    assert declined.value.kind == "joplin_internal"
    path, secret = joplin_item("8151f52ed31442cb9c9ca0a943845de6", 1, encryption_cipher_text="JED01...",
                               encryption_applied="1")
    with pytest.raises(FormatDeclined, match="encrypted"):
        fmt.parse(path, secret, MTIME)
    plain = fmt.parse("6b3b51468e8e44f1ba1b69e4d7e71613.md", b"# Not an item\n\nid: x\n", MTIME)[0]
    assert (plain.title, "joplin_type" in plain.fields) == ("Not an item", False)  # no type_ line: read as Markdown


def make_epub(chapters: list[tuple[str, str]], *, version: int = 3, extra: dict[str, bytes] | None = None,
              title: str = "The Loaf") -> bytes:
    """An EPUB of ``(file name, XHTML body)`` chapters, with a navigation document (EPUB 3) or an NCX (EPUB 2)."""
    manifest = "".join(f'<item id="c{n}" href="text/{name}" media-type="application/xhtml+xml"/>'
                       for n, (name, _) in enumerate(chapters))
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
    nav = ('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>' if version == 3
           else '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
    toc = ' toc="ncx"' if version == 2 else ""
    opf = (f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="{version}.0">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f"<dc:title>{title}</dc:title><dc:creator>Ada Baker</dc:creator><dc:creator>Bo Miller</dc:creator>"
           "<dc:language>en</dc:language><dc:date>2024-03-01</dc:date><dc:subject>Baking</dc:subject></metadata>"
           f"<manifest>{nav}{manifest}</manifest><spine{toc}>{spine}</spine>"
           "</package>")
    files = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": b'<?xml version="1.0"?><container version="1.0" '
                                  b'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                                  b'<rootfile full-path="OEBPS/content.opf" '
                                  b'media-type="application/oebps-package+xml"/>'
                                  b"</rootfiles></container>",
        "OEBPS/content.opf": opf.encode(),
        "OEBPS/nav.xhtml": ('<html xmlns="http://www.w3.org/1999/xhtml"><body><nav><ol><li>'
                            '<a href="text/one.xhtml">Mixing the dough</a></li><li><a href="text/two.xhtml#bake">'
                            "Baking</a></li></ol></nav></body></html>").encode(),
        "OEBPS/toc.ncx": ('<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap><navPoint><navLabel><text>'
                          'Mixing the dough</text></navLabel><content src="text/one.xhtml"/></navPoint></navMap>'
                          "</ncx>").encode(),
        **{f"OEBPS/text/{name}": f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>'.encode()
           for name, body in chapters},
        **(extra or {}),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        for name, data in files.items():
            book.writestr(name, data)
    return out.getvalue()


LOAF = [("cover.xhtml", "<img src='c.jpg'/>"), ("one.xhtml", "<h1>One</h1><p>Flour, water and salt.</p>"),
        ("two.xhtml", "<h1 id='bake'>Two</h1><p>Bake at 250 degrees.</p>"),
        ("three.xhtml", "<h2>Cooling</h2><p>Wait an hour.</p>"), ("four.xhtml", "<p>The end.</p>")]


class TestEpubConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return epub.EpubFormat()

    @pytest.fixture
    def sample_files(self):
        return {"books/loaf.epub": make_epub(LOAF), "books/old.epub": make_epub(LOAF[:3], version=2)}

    @pytest.fixture
    def bad_files(self):
        return {"not-a-zip.epub": b"PK not really", "empty.epub": make_zip({"mimetype": b"application/epub+zip"}),
                "drm.epub": make_epub(LOAF, extra={"META-INF/encryption.xml": ENCRYPTION.format(
                    algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc", uri="OEBPS/text/one.xhtml").encode()})}

    @pytest.fixture
    def plugin(self):
        return epub


def make_zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


ENCRYPTION = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
              'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod '
              'Algorithm="{algorithm}"/><enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData>'
              "</enc:EncryptedData></encryption>")


def test_epub_reads_its_metadata_and_each_chapter_in_reading_order_titled_by_its_table_of_contents():
    card, *chapters = epub.EpubFormat().parse("books/loaf.epub", make_epub(LOAF), MTIME)
    assert (card.title, card.kind, card.dataset) == ("The Loaf", "file", "ax-books")
    assert card.fields["authors"] == ["Ada Baker", "Bo Miller"] and card.fields["chapters"] == 4
    assert (card.fields["language"], card.fields["published"], card.fields["subjects"]) == ("en", "2024-03-01",
                                                                                           ["Baking"])
    # the cover holds no text; the contents' labels, else a heading, else the chapter's number
    assert [(c.doc_id, c.title, c.kind) for c in chapters] == [
        ("books/loaf.epub#ch-1", "Mixing the dough", "chapter"), ("books/loaf.epub#ch-2", "Baking", "chapter"),
        ("books/loaf.epub#ch-3", "Cooling", "chapter"), ("books/loaf.epub#ch-4", "chapter 4", "chapter")]
    assert chapters[0].text == "One\nFlour, water and salt." and chapters[1].fields["member"] == "OEBPS/text/two.xhtml"
    old = epub.EpubFormat().parse("old.epub", make_epub(LOAF[:3], version=2), MTIME)
    assert [doc.title for doc in old] == ["The Loaf", "Mixing the dough", "Two"]  # EPUB 2's NCX labels the first


def test_epub_refuses_drm_and_a_zip_bomb_and_reads_a_book_whose_fonts_are_obfuscated():
    fonts = ENCRYPTION.format(algorithm="http://www.idpf.org/2008/embedding", uri="OEBPS/fonts/a.otf")
    assert len(epub.EpubFormat().parse("f.epub", make_epub(LOAF, extra={"META-INF/encryption.xml": fonts.encode()}),
                                       MTIME)) == 5
    locked = ENCRYPTION.format(algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc", uri="OEBPS/text/two.xhtml")
    with pytest.raises(FormatError, match=r"encrypted EPUB \(DRM\): 1 of its 5"):
        epub.EpubFormat().parse("d.epub", make_epub(LOAF, extra={"META-INF/encryption.xml": locked.encode()}), MTIME)
    bomb = make_epub(LOAF, extra={"OEBPS/zeros.bin": bytes(65 << 20)})  # 65 MiB of zeros, 64 KiB zipped
    assert len(bomb) < 1 << 20
    with pytest.raises(FormatError, match="expands to 65 MiB"):
        epub.EpubFormat().parse("b.epub", bomb, MTIME)
    with pytest.raises(FormatError, match="names OEBPS/content.opf, which it does not hold"):
        epub.EpubFormat().parse("x.epub", make_zip({"META-INF/container.xml": make_zip_member(make_epub(LOAF))}),
                                MTIME)


def make_zip_member(book: bytes) -> bytes:
    return zipfile.ZipFile(io.BytesIO(book)).read("META-INF/container.xml")


def clipping(title: str, meta: str, text: str = "") -> str:
    return f"\ufeff{title}\r\n- {meta}\r\n\r\n{text}\r\n==========\r\n"


CLIPPINGS = "".join([
    clipping("A Room of One’s Own (Woolf, Virginia)", "Your Highlight on page 3 | Location 34-36 | Added on Monday, "
             "October 23, 2017 2:08:30 PM", "The title women and fiction might mean"),
    clipping("Voyager (Outlander, Book 3) (Gabaldon, Diana)", "Your Bookmark on page 180 | Location 4103 | Added on "
             "Sunday, September 3, 2017 5:32:27 PM"),
    clipping("A Room of One’s Own (Woolf, Virginia)", "Your Highlight on page 3 | Location 34-37 | Added on Monday, "
             "October 23, 2017 2:09:01 PM", "The title women and fiction might mean, and you may have meant it"),
    clipping("A Room of One’s Own (Woolf, Virginia)", "Your Highlight on page 2 | Location 20-21 | Added on Tuesday, "
             "October 24, 2017 9:00:00 AM", "a room of her own"),
    clipping("A Room of One’s Own (Woolf, Virginia)", "Your Note on page 2 | Location 21 | Added on Tuesday, "
             "October 24, 2017 9:01:00 AM", "the thesis"),
    clipping("A Room of One’s Own (Woolf, Virginia)", "Your Highlight on page 2 | Location 20-21 | Added on Tuesday, "
             "October 24, 2017 9:05:00 AM", "a room of her own"),  # made twice
    clipping("Der Prozess (Franz Kafka)", "Ihre Markierung bei Position 610-612 | Hinzugefügt am Montag, 5. Januar "
             "2015 21:41:19", "Jemand musste Josef K. verleumdet haben."),
    clipping("知乎周刊·读书这件小事 (知乎)", "您在位置 #465-466的标注 | 添加于 2013年12月24日星期二 下午9:10:24",
             "背井离乡上大学之后再读"),
    clipping("知乎周刊·读书这件小事 (知乎)", "您在位置 #466 的笔记 | 添加于 2013年12月24日星期二 下午9:11:00", "同感"),
]).encode()


class TestKindleConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return kindle.KindleFormat()

    @pytest.fixture
    def sample_files(self):
        return {"kindle/My Clippings.txt": CLIPPINGS, "backup/clippings-2017.txt": CLIPPINGS,
                "kindle/my clippings.txt": b""}

    @pytest.fixture
    def bad_files(self):
        return {"My Clippings.txt": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return kindle


def test_kindle_clippings_are_a_document_per_book_in_reading_order_without_repeats():
    fmt = kindle.KindleFormat()
    assert fmt.accepts("backup/clippings-2017.txt", CLIPPINGS[:1024]) and not fmt.accepts("notes.txt", b"Notes\n")
    card, woolf, kafka, zhihu = fmt.parse("kindle/My Clippings.txt", CLIPPINGS, MTIME)
    assert (card.kind, card.title) == ("file", "My Clippings")
    assert {key: card.fields[key] for key in ("books", "highlights", "notes", "bookmarks")} == {
        "books": 3, "highlights": 4, "notes": 2, "bookmarks": 1}
    assert (woolf.doc_id, woolf.kind, woolf.title, woolf.fields["author"]) == (
        "kindle/My Clippings.txt#book-1", "book", "A Room of One’s Own", "Woolf, Virginia")
    # by location, the note after its highlight; the shorter copy of an extended highlight and a repeat left out
    assert woolf.text.split("\n\n") == ["a room of her own", "Note: the thesis",
                                         "The title women and fiction might mean, and you may have meant it"]
    assert (woolf.fields["highlights"], woolf.fields["notes"]) == (2, 1)
    assert (woolf.fields["added_first"], woolf.fields["added_last"]) == ("Monday, October 23, 2017 2:08:30 PM",
                                                                         "Tuesday, October 24, 2017 9:05:00 AM")
    assert (kafka.title, kafka.fields["author"], kafka.text) == ("Der Prozess", "Franz Kafka",
                                                                 "Jemand musste Josef K. verleumdet haben.")
    assert (zhihu.title, zhihu.text) == ("知乎周刊·读书这件小事", "背井离乡上大学之后再读\n\nNote: 同感")


WORD = Path(__file__).parent / "fixtures/word"
W_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def make_docx(body: str, *, styles: str = "", core: str = "", footnotes: str = "", comments: str = "") -> bytes:
    """A Word document of ``body`` (the XML inside ``w:body``), with these styles, properties, notes and comments."""
    files = {"[Content_Types].xml": b"<Types/>", "word/document.xml": f"<w:document {W_NS}><w:body>{body}</w:body>"
                                                                    "</w:document>".encode()}
    if styles:
        files["word/styles.xml"] = f"<w:styles {W_NS}>{styles}</w:styles>".encode()
    if core:
        files["docProps/core.xml"] = ('<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
                                      'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" '
                                      f'xmlns:dcterms="http://purl.org/dc/terms/">{core}</cp:coreProperties>').encode()
    if footnotes:
        files["word/footnotes.xml"] = f"<w:footnotes {W_NS}>{footnotes}</w:footnotes>".encode()
    if comments:
        files["word/comments.xml"] = f"<w:comments {W_NS}>{comments}</w:comments>".encode()
    return make_zip(files)


def para(text: str, style: str | None = None) -> str:
    styled = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{styled}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>"


# Word in German: the heading style is called Überschrift 1 (its id berschrift1), its built-in name heading 1
GERMAN_STYLES = ('<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>'
                 '<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/></w:style>'
                 '<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/></w:style>'
                 '<w:style w:type="paragraph" w:styleId="Kapitel"><w:name w:val="Kapitel"/><w:pPr>'
                 '<w:outlineLvl w:val="0"/></w:pPr></w:style>')
REPORT = make_docx(
    para("Brotbacken", "Titel") + para("Vorwort vor allem.") + para("Teig", "berschrift1")
    + "<w:p><w:r><w:t>Mehl</w:t><w:tab/><w:t>und Wasser</w:t><w:br/><w:t>mischen</w:t></w:r><w:ins><w:r>"
      "<w:t> gründlich</w:t></w:r></w:ins><w:del><w:r><w:delText> schnell</w:delText></w:r></w:del><w:r>"
      "<w:fldChar/><w:instrText> PAGEREF x </w:instrText></w:r><w:r><w:footnoteReference w:id=\"1\"/></w:r></w:p>"
    + "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Mehl</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>500 g</w:t></w:r></w:p>"
      "</w:tc></w:tr><w:tr><w:tc><w:p/></w:tc><w:tc><w:p/></w:tc></w:tr></w:tbl>"
    + para("Backen", "berschrift2") + "<w:sdt><w:sdtContent>" + para("Bei 250 Grad.") + "</w:sdtContent></w:sdt>"
    + para("Anhang", "Kapitel") + "<w:p><w:pPr><w:outlineLvl w:val=\"2\"/></w:pPr><w:r><w:t>Quellen</w:t></w:r></w:p>"
    + "<w:p><w:moveFrom><w:r><w:t>Verschoben.</w:t></w:r></w:moveFrom></w:p>" + "<w:p><w:moveTo><w:r>"
      "<w:t>Verschoben.</w:t></w:r></w:moveTo></w:p>",  # a move tracked: the text where it went
    styles=GERMAN_STYLES,
    core="<dc:title>Ignored: the Title paragraph wins</dc:title><dc:creator>Ada</dc:creator>"
         "<cp:keywords>brot, backen</cp:keywords><dcterms:created>2024-01-02T03:04:05Z</dcterms:created>",
    footnotes='<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:t>---</w:t></w:r></w:p></w:footnote>'
              '<w:footnote w:id="1"><w:p><w:r><w:t>Nach Omas Rezept.</w:t></w:r></w:p></w:footnote>',
    comments='<w:comment w:id="0" w:author="Bo"><w:p><w:r><w:t>Mehr Salz?</w:t></w:r></w:p><w:p><w:r>'
             "<w:t>Oder nicht.</w:t></w:r></w:p></w:comment>")


class TestDocxConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return docx.DocxFormat()

    @pytest.fixture
    def sample_files(self):
        return {"docs/bericht.docx": REPORT, **{f"word/{path.name}": path.read_bytes() for path in WORD.glob("*.docx")}}

    @pytest.fixture
    def bad_files(self):
        return {"not-a-zip.docx": b"PK\x03\x04 not really", "sheet.docx": make_zip({"xl/workbook.xml": b"<x/>"}),
                "broken.docx": make_zip({"word/document.xml": b"<w:document"})}

    @pytest.fixture
    def plugin(self):
        return docx


def test_docx_reads_headings_by_their_built_in_names_in_any_language_and_the_words_word_shows():
    card, dough, bake, appendix, sources = docx.DocxFormat().parse("docs/bericht.docx", REPORT, MTIME)
    assert (card.title, card.kind) == ("Brotbacken", "file")
    # the footnote, not the separator; a reviewer's comment, its paragraphs on one line
    assert card.text == "Vorwort vor allem.\n[1] Nach Omas Rezept.\nComment (Bo): Mehr Salz? Oder nicht."
    assert (card.fields["author"], card.fields["keywords"], card.fields["created"]) == ("Ada", "brot, backen",
                                                                                       "2024-01-02T03:04:05Z")
    assert [(doc.section, doc.fields["level"], doc.doc_id) for doc in (dough, bake, appendix, sources)] == [
        ("Teig", 1, "docs/bericht.docx#teig"), ("Backen", 2, "docs/bericht.docx#backen"),
        ("Anhang", 1, "docs/bericht.docx#anhang"), ("Quellen", 3, "docs/bericht.docx#quellen")]
    # a tab and a break as Word shows them, an insertion in, a deletion and a field's code out; an empty row left out
    assert dough.text == "Teig\nMehl und Wasser\nmischen gründlich\nMehl | 500 g"
    assert bake.text == "Backen\nBei 250 Grad."  # inside a content control
    assert sources.text == "Quellen\nVerschoben."


def test_docx_written_by_word_is_read_and_its_lock_file_is_no_document():
    fmt = docx.DocxFormat()
    card, heading = fmt.parse("styles.docx", (WORD / "par-known-styles.docx").read_bytes(), MTIME)
    assert (heading.section, heading.fields["level"], heading.text) == ("Heading 1", 1, "Heading 1\nBody Text")
    table, = fmt.parse("tables.docx", (WORD / "tbl-having-applied-style.docx").read_bytes(), MTIME)
    assert table.text.splitlines()[:3] == ["foobar | barfoo", "foo | bar", "bar | foo"]
    assert not fmt.accepts("docs/~$bericht.docx", b"") and fmt.accepts("docs/bericht.docm", b"")


ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
          'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"')
MINUTES = make_zip({
    "mimetype": b"application/vnd.oasis.opendocument.text",
    "content.xml": (f"<office:document-content {ODF_NS}><office:body><office:text>"
                    "<text:tracked-changes><text:changed-region><text:deletion><text:p>gestrichen</text:p>"
                    "</text:deletion></text:changed-region></text:tracked-changes>"
                    "<text:p>Anwesend: alle.<office:annotation><dc:creator>Bo</dc:creator><text:p>Wer fehlt?"
                    "</text:p></office:annotation></text:p>"
                    '<text:h text:outline-level="1"><text:number>1.</text:number>Beschlüsse</text:h>'
                    "<text:list><text:list-item><text:p>Mehl<text:s text:c=\"3\"/>kaufen<text:tab/>bald"
                    "<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>Roggen."
                    "</text:p></text:note-body></text:note></text:p></text:list-item></text:list>"
                    '<text:section><text:h text:outline-level="2">Offen</text:h><text:p>Ofen<text:line-break/>'
                    "reparieren</text:p></text:section>"
                    "<table:table><table:table-row><table:table-cell><text:p>Wer</text:p></table:table-cell>"
                    "<table:table-cell><text:p>Ada</text:p></table:table-cell></table:table-row></table:table>"
                    "</office:text></office:body></office:document-content>").encode(),
    "meta.xml": (f"<office:document-meta {ODF_NS}><office:meta><dc:title>Protokoll</dc:title>"
                 "<meta:initial-creator>Ada</meta:initial-creator><meta:keyword>verein</meta:keyword>"
                 "<meta:keyword>brot</meta:keyword><meta:creation-date>2024-01-02T03:04:05</meta:creation-date>"
                 "</office:meta></office:document-meta>").encode(),
})


class TestOdtConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return odt.OdtFormat()

    @pytest.fixture
    def sample_files(self):
        return {"docs/protokoll.odt": MINUTES}

    @pytest.fixture
    def bad_files(self):
        return {"not-a-zip.odt": b"PK\x03\x04 nope", "no-content.odt": make_zip({"mimetype": b"x"}),
                "sheet.odt": make_zip({"content.xml": f"<office:document-content {ODF_NS}><office:body>"
                                                      "<office:spreadsheet/></office:body>"
                                                      "</office:document-content>".encode()})}

    @pytest.fixture
    def plugin(self):
        return odt


def test_odt_reads_headings_lists_tables_and_notes_and_leaves_tracked_deletions_out():
    card, decisions, open_items = odt.OdtFormat().parse("docs/protokoll.odt", MINUTES, MTIME)
    assert (card.title, card.text) == ("Protokoll", "Anwesend: alle.\n[1] Roggen.\nComment (Bo): Wer fehlt?")
    assert (card.fields["author"], card.fields["keywords"], card.fields["created"]) == ("Ada", "verein, brot",
                                                                                       "2024-01-02T03:04:05")
    assert (decisions.section, decisions.fields["level"], decisions.text) == (
        "Beschlüsse", 1, "Beschlüsse\nMehl   kaufen bald")  # its numbering and its note's body apart
    assert (open_items.doc_id, open_items.fields["level"], open_items.text) == (
        "docs/protokoll.odt#offen", 2, "Offen\nOfen\nreparieren\nWer | Ada")
    assert not any("gestrichen" in doc.text for doc in (card, decisions, open_items))


PML = ('xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
       'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
       'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
RELS = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'


def shape(paragraphs: list[str], placeholder: str | None = None) -> str:
    ph = f'<p:nvSpPr><p:nvPr><p:ph type="{placeholder}"/></p:nvPr></p:nvSpPr>' if placeholder else "<p:nvSpPr/>"
    body = "".join(f"<a:p><a:r><a:t>{text}</a:t></a:r></a:p>" for text in paragraphs)
    return f"<p:sp>{ph}<p:txBody>{body}</p:txBody></p:sp>"


def make_pptx(slides: list[tuple[str, str | None]], core: str = "") -> bytes:
    """A deck of ``(shape tree XML, speaker notes or None)`` slides, listed in reverse of their part names."""
    files = {"_rels/.rels": f'<Relationships {RELS}><Relationship Id="r1" Type="http://schemas.openxmlformats.org/'
                            'officeDocument/2006/relationships/officeDocument" Target="ppt/presentation.xml"/>'
                            "</Relationships>".encode()}
    ids, rels = [], []
    for n, (tree, notes) in enumerate(slides, 1):
        part = len(slides) - n + 1  # the order is the presentation's, not the part names'
        ids.append(f'<p:sldId id="{255 + n}" r:id="rId{n}"/>')
        rels.append(f'<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                    f'relationships/slide" Target="slides/slide{part}.xml"/>')
        files[f"ppt/slides/slide{part}.xml"] = (f"<p:sld {PML}><p:cSld><p:spTree>{tree}</p:spTree></p:cSld>"
                                                "</p:sld>").encode()
        if notes is not None:
            files[f"ppt/slides/_rels/slide{part}.xml.rels"] = (
                f'<Relationships {RELS}><Relationship Id="rId9" Type="http://schemas.openxmlformats.org/'
                f'officeDocument/2006/relationships/notesSlide" Target="../notesSlides/notesSlide{part}.xml"/>'
                "</Relationships>").encode()
            files[f"ppt/notesSlides/notesSlide{part}.xml"] = (
                f"<p:notes {PML}><p:cSld><p:spTree>{shape(['slide image'], 'sldImg')}{shape([notes], 'body')}"
                f"{shape(['7'], 'sldNum')}</p:spTree></p:cSld></p:notes>").encode()
    files["ppt/presentation.xml"] = (f"<p:presentation {PML}><p:sldIdLst>{''.join(ids)}</p:sldIdLst>"
                                     "</p:presentation>").encode()
    files["ppt/_rels/presentation.xml.rels"] = f"<Relationships {RELS}>{''.join(rels)}</Relationships>".encode()
    if core:
        files["docProps/core.xml"] = ('<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
                                      'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                                      f"{core}</cp:coreProperties>").encode()
    return make_zip(files)


DECK = make_pptx([
    (shape(["Quarterly baking"], "ctrTitle") + shape(["Loaves and rolls"], "subTitle"), "Welcome everyone."),
    (shape(["Results"], "title") + "<p:grpSp>" + shape(["Rye up 20%"]) + "</p:grpSp>"
     + "<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Rye</a:t></a:r>"
       "</a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>120</a:t></a:r></a:p></a:txBody></a:tc></a:tr>"
       "</a:tbl></a:graphicData></a:graphic></p:graphicFrame>", None),
    (shape(["No title here"]), "Skip this one."),
], core="<dc:creator>Ada</dc:creator>")


class TestPptxConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return pptx.PptxFormat()

    @pytest.fixture
    def sample_files(self):
        return {"decks/q3.pptx": DECK, "decks/empty.pptx": make_pptx([])}

    @pytest.fixture
    def bad_files(self):
        return {"not-a-zip.pptx": b"nope", "document.pptx": make_zip({"word/document.xml": b"<x/>"})}

    @pytest.fixture
    def plugin(self):
        return pptx


def test_pptx_reads_each_slide_in_the_decks_order_with_its_title_tables_groups_and_notes():
    card, first, second, third = pptx.PptxFormat().parse("decks/q3.pptx", DECK, MTIME)
    assert (card.title, card.fields["slides"], card.fields["author"]) == ("Quarterly baking", 3, "Ada")
    assert [(doc.doc_id, doc.section, doc.kind) for doc in (first, second, third)] == [
        ("decks/q3.pptx#slide-1", "Quarterly baking", "slide"), ("decks/q3.pptx#slide-2", "Results", "slide"),
        ("decks/q3.pptx#slide-3", "slide 3", "slide")]
    assert first.text == "Quarterly baking\nLoaves and rolls\nNotes: Welcome everyone."  # not the notes' page number
    assert second.text == "Results\nRye up 20%\nRye | 120"
    assert not pptx.PptxFormat().accepts("decks/~$q3.pptx", b"")


OUTLINE = ("""<?xml version="1.0"?><opml version="2.0"><head><title>Garden plans</title></head><body>
<outline text="Spring"><outline text="Sow &lt;b&gt;peas&lt;/b&gt;" _note="After the last frost."/>
<outline text="Beds"><outline text="Raise the &lt;i&gt;north&lt;/i&gt; bed"/></outline></outline>
<outline text="Spring"/><outline title="Reading" type="rss" xmlUrl="https://example.org/feed.xml"/>
</body></opml>""").encode()


class TestOpmlConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return opml.OpmlFormat()

    @pytest.fixture
    def sample_files(self):
        return {"outlines/garden.opml": OUTLINE, "outlines/empty.opml": b"<opml><head/><body/></opml>"}

    @pytest.fixture
    def bad_files(self):
        return {"page.opml": b"<html><body>no</body></html>", "cut.opml": OUTLINE[:60]}

    @pytest.fixture
    def plugin(self):
        return opml


def test_opml_reads_each_top_level_item_as_a_section_holding_its_outline():
    card, spring, again, reading = opml.OpmlFormat().parse("outlines/garden.opml", OUTLINE, MTIME)
    assert (card.title, card.fields["items"]) == ("Garden plans", 3)
    assert (spring.doc_id, spring.section, spring.fields["level"]) == ("outlines/garden.opml#spring", "Spring", 1)
    # items written as HTML read for their words; a note on the line after its item
    assert spring.text == "Spring\n  Sow peas\n    After the last frost.\n  Beds\n    Raise the north bed"
    assert again.doc_id == "outlines/garden.opml#spring-1"
    assert (reading.section, reading.text) == ("Reading", "Reading\n  <https://example.org/feed.xml>")


READING_LIST = ("Book Id,Shelf,Title,My Rating,My Review\n"
                '1,to read this winter,"Village Christmas: And Other Notes",0,\n'
                '2,read in the autumn,A Poem for Every Autumn Day,2,"Fine, but oddly many were about war."\n'
                "\n"
                '3,to read this winter,"A Boy Called Christmas",5,\n').encode()
# figures, dates and codes, some cells of several numbers: data, not prose
FIGURES = "station;day;rain_mm\n" + "".join(f"S{n % 7};2024-01-{n % 28 + 1:02d};{n * 0.7:.1f} {n * 1.4:.1f} {n:d}\n"
                                            for n in range(40))


class TestTableConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return table.TableFormat()

    @pytest.fixture
    def sample_files(self):
        return {"exports/goodreads.csv": READING_LIST, "data/rain.csv": FIGURES.encode(), "empty.csv": b"",
                "exports/list.tsv": READING_LIST.replace(b",", b"\t")}

    @pytest.fixture
    def bad_files(self):
        return {"binary.csv": UNDECODABLE, "huge-field.csv": b'a,b\n"' + b"x" * (5 << 20) + b'",z\n'}

    @pytest.fixture
    def plugin(self):
        return table


def test_a_table_of_prose_is_a_document_per_row_and_a_table_of_figures_one_card():
    card, *rows = table.TableFormat().parse("exports/goodreads.csv", READING_LIST, MTIME)
    assert (card.title, card.fields["columns"], card.fields["rows"]) == (
        "goodreads", ["Book Id", "Shelf", "Title", "My Rating", "My Review"], 3)
    assert card.text == "Book Id, Shelf, Title, My Rating, My Review"
    # labelled by the Title column, not by the first column of prose
    assert [(row.doc_id, row.section, row.kind) for row in rows] == [
        ("exports/goodreads.csv#row-1", "Village Christmas: And Other Notes", "row"),
        ("exports/goodreads.csv#row-2", "A Poem for Every Autumn Day", "row"),
        ("exports/goodreads.csv#row-3", "A Boy Called Christmas", "row")]
    assert rows[1].text == ("Book Id: 2\nShelf: read in the autumn\nTitle: A Poem for Every Autumn Day\n"
                            "My Rating: 2\nMy Review: Fine, but oddly many were about war.")
    only, = table.TableFormat().parse("data/rain.csv", FIGURES.encode(), MTIME)  # semicolons, figures: data
    assert only.fields["rows"] == 40
    assert only.text.splitlines()[:2] == ["station | day | rain_mm", "S0 | 2024-01-01 | 0.0 0.0 0"]
    headless = b"".join(READING_LIST.splitlines(keepends=True)[1:])
    card, *rows = table.TableFormat().parse("list.csv", headless, MTIME)
    assert card.fields["columns"][0] == "column 1" and rows[0].text.splitlines()[:2] == ["1", "to read this winter"]
    assert rows[0].section == "to read this winter"  # no Title column: the first column of prose
    tabbed = table.TableFormat().parse("exports/list.tsv", READING_LIST.replace(b",", b"\t"), MTIME)
    assert len(tabbed) == 4 and tabbed[2].section == "A Poem for Every Autumn Day"


SML = ('xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
       'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')


def make_xlsx(sheets: dict[str, str], strings: list[str]) -> bytes:
    """A workbook of ``{sheet name: sheetData XML}`` sheets, their text cells in ``strings``."""
    names = list(sheets)
    files = {
        "_rels/.rels": f'<Relationships {RELS}><Relationship Id="r1" Type="http://schemas.openxmlformats.org/'
                       'officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>'
                       "</Relationships>".encode(),
        "xl/workbook.xml": (f"<workbook {SML}><sheets>" + "".join(
            f'<sheet name="{name}" sheetId="{n}" r:id="rId{n}"/>' for n, name in enumerate(names, 1))
            + "</sheets></workbook>").encode(),
        "xl/_rels/workbook.xml.rels": (f"<Relationships {RELS}>" + "".join(
            f'<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            f'worksheet" Target="worksheets/sheet{n}.xml"/>' for n in range(1, len(names) + 1))
            + '<Relationship Id="rS" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
              'sharedStrings" Target="sharedStrings.xml"/></Relationships>').encode(),
        "xl/sharedStrings.xml": (f"<sst {SML}>" + "".join(f"<si><t>{text}</t></si>" for text in strings)
                                 + "</sst>").encode(),
        **{f"xl/worksheets/sheet{n}.xml": f"<worksheet {SML}><sheetData>{sheets[name]}</sheetData></worksheet>".encode()
           for n, name in enumerate(names, 1)},
    }
    return make_zip(files)


WORKBOOK = make_xlsx({
    "Reading": '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="s"><v>2</v></c></row>'
               '<row r="2"><c r="A2" t="s"><v>3</v></c><c r="C2"><v>4</v></c></row>'
               '<row r="4"><c r="A4" t="inlineStr"><is><t>Emma</t></is></c><c r="B4" t="s"><v>5</v></c>'
               '<c r="C4"><v>5</v></c></row>',
    "Rain": '<row r="1"><c r="A1"><v>1.5</v></c><c r="B1"><v>45292</v></c></row>'
            '<row r="2"><c r="A2"><v>0.2</v></c><c r="D2" t="str"><v>dry</v></c><c r="XFD2" t="str"><v>far</v></c>'
            "</row>",
    "Empty": "",
}, ["Title", "Review", "Stars", "Dune", "Loved the desert planet and its politics", "Slow but rewarding in the end"])


class TestXlsxConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return xlsx.XlsxFormat()

    @pytest.fixture
    def sample_files(self):
        return {"sheets/books.xlsx": WORKBOOK}

    @pytest.fixture
    def bad_files(self):
        return {"not-a-zip.xlsx": b"nope", "deck.xlsx": make_zip({"ppt/presentation.xml": b"<x/>"})}

    @pytest.fixture
    def plugin(self):
        return xlsx


def test_xlsx_reads_each_sheet_as_a_table_its_rows_documents_when_it_holds_prose():
    card, reading, dune, emma, rain = xlsx.XlsxFormat().parse("sheets/books.xlsx", WORKBOOK, MTIME)
    assert (card.title, card.fields["sheets"]) == ("books", ["Reading", "Rain", "Empty"])
    assert (reading.doc_id, reading.kind, reading.section, reading.text) == (
        "sheets/books.xlsx#reading", "sheet", "Reading", "Title, Review, Stars")
    assert (dune.doc_id, dune.section, dune.text) == ("sheets/books.xlsx#reading-row-1", "Dune",
                                                      "Title: Dune\nStars: 4")
    assert (emma.section, emma.text) == ("Emma", "Title: Emma\nReview: Slow but rewarding in the end\nStars: 5")
    # figures, a date as Excel's serial number, a formula's text value: data, the sheet holds it; columns placed by
    # their references, none past the thousandth (XFD2)
    assert (rain.doc_id, rain.fields["rows"]) == ("sheets/books.xlsx#rain", 2)
    assert rain.text == "1.5 | 45292\n0.2 |  |  | dry"
    assert not xlsx.XlsxFormat().accepts("sheets/~$books.xlsx", b"")


def test_tiddlywiki_reads_a_tiddlers_header_title_tags_and_headings():
    card, first, then = tiddlywiki.TiddlyWikiFormat().parse("tiddlers/Saving_ on Android.tid", TIDDLER, MTIME)
    assert (card.title, card.text, card.kind) == ("Saving: on Android", "How to save.", "file")
    assert card.fields["aliases"] == ["Saving: on Android"]  # what a [[link]] finds it by: not its file name
    assert card.fields["tags"] == ["Getting Started", "Concepts"] and card.fields["modified"] == "20240203040506000"
    assert (first.section, first.fields["level"]) == ("First steps", 1)
    assert first.doc_id == "tiddlers/Saving_ on Android.tid#first-steps"
    assert "! not a heading" in first.text and (then.section, then.fields["level"]) == ("Then", 2)
    bare, = tiddlywiki.TiddlyWikiFormat().parse("t/bare.tid", b"Dear all: no header.\n", MTIME)
    assert (bare.title, bare.text, "aliases" in bare.fields) == ("bare", "Dear all: no header.", False)
    only, = tiddlywiki.TiddlyWikiFormat().parse("t/Tag.tid", b"title: Tag one\ntags: a\n", MTIME)  # no text at all
    assert (only.title, only.text, only.fields["tags"]) == ("Tag one", "", ["a"])
    logo, = tiddlywiki.TiddlyWikiFormat().parse("t/logo.tid", b"title: Logo\ntype: image/png\n\niVBORw0KGgo=\n",
                                                MTIME)
    assert (logo.title, logo.text, logo.fields["tiddler_type"]) == ("Logo", "", "image/png")


# A board as Obsidian saves it (JSON Canvas 1.0): file, text, link and group nodes, and arrows between them.
CANVAS = json.dumps({
    "nodes": [
        {"id": "a1", "type": "file", "file": "notes/starter.md", "x": 0, "y": 0, "width": 400, "height": 400},
        {"id": "b2", "type": "file", "file": "notes/loaf.md", "x": 500, "y": 0, "width": 400, "height": 400},
        {"id": "c3", "type": "text", "text": "Timing matters **a lot**", "x": 0, "y": 500, "width": 250, "height": 60},
        {"id": "d4", "type": "file", "file": "notes/starter.md", "subpath": "#Feeding", "x": 0, "y": 900,
         "width": 400, "height": 400},
        {"id": "e5", "type": "link", "url": "https://example.org", "x": 900, "y": 0, "width": 400, "height": 400},
        {"id": "g6", "type": "group", "label": "Sourdough", "x": -50, "y": -50, "width": 1000, "height": 1000},
    ],
    "edges": [
        {"id": "x1", "fromNode": "a1", "fromSide": "right", "toNode": "b2", "toSide": "left", "label": "leavens"},
        {"id": "x2", "fromNode": "c3", "toNode": "b2"},
        {"id": "x3", "fromNode": "d4", "toNode": "b2"},
    ],
}, indent="\t").encode()


class TestCanvasConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return canvas.CanvasFormat()

    @pytest.fixture
    def sample_files(self):
        return {"boards/Bread.canvas": CANVAS, "Empty.canvas": b"{}", "blank.canvas": b""}

    @pytest.fixture
    def bad_files(self):
        return {"broken.canvas": b'{"nodes": [', "list.canvas": b"[1, 2]"}

    @pytest.fixture
    def plugin(self):
        return canvas


def test_canvas_reads_a_boards_words_files_and_arrows():
    card, first, second = canvas.CanvasFormat().parse("boards/Bread.canvas", CANVAS, MTIME)
    assert card.text == "Timing matters **a lot**\n\nSourdough\n\nleavens" and card.kind == "file"
    assert card.fields["shows"] == ["notes/starter.md", "notes/loaf.md", "notes/starter.md#Feeding"]
    assert (first.doc_id, first.kind, first.text) == ("boards/Bread.canvas#arrow-1", "arrow", "starter → loaf: leavens")
    assert first.fields["connects"] == ["notes/starter.md", "notes/loaf.md"]
    assert second.fields["connects"] == ["notes/starter.md#Feeding", "notes/loaf.md"] and second.section == "arrow 2"


class TestTextConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return text.TextFormat()

    @pytest.fixture
    def sample_files(self):
        return {"todo.txt": b"buy flour\nfeed starter\n", "LICENSE": b"Permission is hereby granted.\n"}

    @pytest.fixture
    def bad_files(self):
        return {"bad.txt": b"ok then " + UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return text


RST = b"""\
.. title:: The Guide

Preamble words.

=========
 Install
=========

Run the installer.

Options
-------

A table is no title:

=====  =====
a      b
=====  =====

----

Some paragraph
that goes on.
-------------

Usage
-----

  Indented
  --------

Deeper
~~~~~~

Last words.
"""


class TestRstConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return rst.RstFormat()

    @pytest.fixture
    def sample_files(self):
        return {"docs/guide.rst": RST, "plain.rst": b"No titles at all.\n", "short.rest": b"A\n=\n\nx\n"}

    @pytest.fixture
    def bad_files(self):
        return {"bad.rst": b"Title\n=====\n" + UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return rst


def test_rst_sections_follow_titles_and_their_adornment_styles():
    card, install, options, usage, deeper = rst.RstFormat().parse("docs/guide.rst", RST, MTIME)
    assert (card.title, card.kind, card.text) == ("The Guide", "file", ".. title:: The Guide\n\nPreamble words.")
    assert [(d.doc_id, d.section, d.fields["level"], d.fields["ordinal"]) for d in (install, options, usage, deeper)] \
        == [("docs/guide.rst#install", "Install", 1, 1), ("docs/guide.rst#options", "Options", 2, 2),
            ("docs/guide.rst#usage", "Usage", 2, 3), ("docs/guide.rst#deeper", "Deeper", 3, 4)]
    assert install.text == "Install\n\nRun the installer."
    # a simple table's borders, a transition, a paragraph's second line underlined and an indented block are
    # the section's text, not titles
    assert "=====  =====" in options.text and "----" in options.text and "that goes on." in options.text
    assert "Indented\n  --------" in usage.text
    labelled = b""".. _top:\n\nIntro.\n\n.. _install-guide:\n.. _`Set  Up`:\n\nInstall\n=======\n\n.. _the-figure:\n\n""" \
        b""".. figure:: x.png\n\nUsage\n-----\n\n.. _python: https://python.org\n"""
    card, install, usage = rst.RstFormat().parse("l.rst", labelled, MTIME)
    # a label opens the section whose title follows it, else belongs where it is written; a URL target is no label
    assert (card.fields["labels"], install.fields["labels"]) == (["top"], ["install-guide", "set up", "the-figure"])
    assert "labels" not in usage.fields
    (only,) = rst.RstFormat().parse("plain.rst", b"No titles at all.\n", MTIME)
    assert (only.title, only.text) == ("plain", "No titles at all.")
    assert rst.RstFormat().accepts("x/README.rst", b"") and not rst.RstFormat().accepts("x.txt", b"")


class TestHtmlConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return html.HtmlFormat()

    @pytest.fixture
    def sample_files(self):
        page = b"<html><head><title>Recipes</title></head><body><p>See <a href='bread.html'>bread</a>.</p></body></html>"
        return {"site/index.html": page, "site/bread.htm": b"<h1>Bread</h1><p>Flour, water, salt.</p>"}

    @pytest.fixture
    def bad_files(self):
        return {"bad.html": b"<p>" + UNDECODABLE + b"</p>"}

    @pytest.fixture
    def plugin(self):
        return html


class TestEmailConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return email.EmailFormat()

    @pytest.fixture
    def sample_files(self, tmp_path):
        first = make_message("Lunch?", "<1@example.org>", attachments=[("menu.txt", "soup\nbread\n", "text", "plain")])
        reply = make_message("Re: Lunch?", "<2@example.org>", in_reply_to="<1@example.org>")
        return {
            "mail/lunch.eml": bytes(first),
            "mail/box.mbox": make_mbox(tmp_path, [first, reply]),
        }

    @pytest.fixture
    def bad_files(self):
        return {
            "broken.eml": b"this is not an email at all\nno headers here\n",
            "broken.mbox": b"Subject: missing separator\n\nbody\n",
        }

    @pytest.fixture
    def plugin(self):
        return email


class TestPdfConformance(AbstractFormatTests):
    @pytest.fixture(autouse=True)
    def _needs_pypdf(self):
        pytest.importorskip("pypdf")

    @pytest.fixture
    def fmt(self):
        return pdf.PdfFormat()

    @pytest.fixture
    def sample_files(self):
        return {"papers/study.pdf": make_pdf(["First page text", "Second page text"], title="A Study")}

    @pytest.fixture
    def bad_files(self):
        return {"papers/broken.pdf": b"%PDF-1.4\n1 0 obj garbage", "papers/fake.pdf": b"not a pdf at all"}

    @pytest.fixture
    def plugin(self):
        return pdf


def make_notebook(cells: list[dict], *, language: str | None = "python", version: int = 4) -> bytes:
    """An nbformat ``version`` notebook of ``cells`` (``{"cell_type", "source"}``, plus what a cell may carry)."""
    metadata = {"kernelspec": {"name": "python3", "language": language}} if language else {}
    if version == 3:
        return json.dumps({"nbformat": 3, "metadata": metadata, "worksheets": [{"cells": cells}]}).encode()
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells}).encode()


NOTEBOOK = make_notebook([
    {"cell_type": "markdown", "source": ["# Grouping\n", "\n", "Splitting data, see [pivots](pivots.ipynb)."]},
    {"cell_type": "code", "source": "df.groupby('key').sum()\n# not a heading\n```fence inside```",
     "outputs": [{"output_type": "stream", "text": ["an output never read\n"]}], "execution_count": 1},
    {"cell_type": "markdown", "source": "## Aggregates\n\nMin, max and [[pivots]]."},
    {"cell_type": "raw", "source": "raw words"},
    {"cell_type": "code", "source": ""},
])


class TestNotebookConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return notebook.NotebookFormat()

    @pytest.fixture
    def sample_files(self):
        return {"analysis/grouping.ipynb": NOTEBOOK, "empty.ipynb": make_notebook([], language=None),
                "old.ipynb": make_notebook([{"cell_type": "heading", "level": 2, "source": "Old"}], version=3)}

    @pytest.fixture
    def bad_files(self):
        return {"broken.ipynb": NOTEBOOK[:40], "list.ipynb": b"[1, 2]", "nocells.ipynb": b'{"nbformat": 4}'}

    @pytest.fixture
    def plugin(self):
        return notebook


def test_a_notebook_is_the_markdown_note_its_cells_make():
    card, grouping, aggregates = notebook.NotebookFormat().parse("analysis/grouping.ipynb", NOTEBOOK, MTIME)
    assert (card.title, card.format, card.dataset, card.fields["cells"]) == ("Grouping", "notebook", "ax-notes", 5)
    assert [d.doc_id for d in (grouping, aggregates)] == ["analysis/grouping.ipynb#grouping",
                                                         "analysis/grouping.ipynb#aggregates"]
    assert {d.fields["language"] for d in (card, grouping, aggregates)} == {"python"}
    # the code cell is fenced (longer than the backticks it holds), so its comment opens no section
    assert "````python\ndf.groupby('key').sum()\n# not a heading\n```fence inside```\n````" in grouping.text
    assert "an output never read" not in grouping.text + aggregates.text
    assert aggregates.text.endswith("Min, max and [[pivots]].\n\nraw words")
    old = notebook.NotebookFormat().parse("old.ipynb", make_notebook(
        [{"cell_type": "heading", "level": 2, "source": "Loading  data"},
         {"cell_type": "code", "input": ["x = load()\n"], "language": "python"}], language=None, version=3), MTIME)
    assert [(d.doc_id, d.section) for d in old] == [("old.ipynb", ""), ("old.ipynb#loading-data", "Loading data")]
    assert "```\nx = load()\n```" in old[1].text and "language" not in old[1].fields


@pytest.mark.parametrize(("data", "reason"), [
    (b"{not json", "malformed notebook: not JSON"),
    (b'"a string"', "malformed notebook: not a JSON object"),
    (b'{"cells": {"a": 1}}', "malformed notebook: no list of cells"),
])
def test_a_malformed_notebook_is_refused_with_a_reason(data, reason):
    with pytest.raises(FormatError) as caught:
        notebook.NotebookFormat().parse("n.ipynb", data, MTIME)
    assert caught.value.reason.startswith(reason)


class TestCodeConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return code.CodeFormat()

    @pytest.fixture
    def sample_files(self):
        return {
            "crates/xerj-api/Cargo.toml": b'[package]\nname = "xerj-api"\nversion = "0.1.0"\n\n[dependencies]\nserde = "1"\n',
            "tool/main.py": b'"""A tool."""\nimport os\n\n\n@decorator\ndef run():\n    return 1\n\n\nclass Thing:\n    pass\n',
            "src/lib.rs": b"pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
        }

    @pytest.fixture
    def bad_files(self):
        return {"Cargo.toml": b"[package\nname = ", "x.py": UNDECODABLE}

    @pytest.fixture
    def plugin(self):
        return code


# -- markdown ------------------------------------------------------------------


def test_markdown_card_and_sections():
    docs = markdown.MarkdownFormat().parse("notes/sourdough.md", NOTE, MTIME)
    card, *sections = docs
    assert card.doc_id == "notes/sourdough.md" and card.kind == "file" and card.section == ""
    assert card.title == "Sourdough basics"
    assert card.fields["aliases"] == ["levain", "wild yeast"]
    assert card.fields["tags"] == ["baking", "fermentation"]
    assert card.text == "A preamble before any heading."
    assert [s.section for s in sections] == ["Starter", "Proofing", "Proofing"]
    assert [s.doc_id for s in sections] == [
        "notes/sourdough.md#starter",
        "notes/sourdough.md#proofing",
        "notes/sourdough.md#proofing-1",
    ]
    assert [s.fields["ordinal"] for s in sections] == [1, 2, 3]
    assert [s.fields["level"] for s in sections] == [1, 2, 2]
    assert "# not a heading" in sections[0].text  # fenced code stays in its section
    assert sections[1].text.startswith("## Proofing ##")
    assert all(s.kind == "section" and s.title == "Sourdough basics" and s.dataset == "ax-notes" for s in sections)


def test_markdown_title_falls_back_to_first_h1_then_file_name():
    fmt = markdown.MarkdownFormat()
    assert fmt.parse("a.md", b"intro\n\n## Two\n\n# One\n", MTIME)[0].title == "One"
    assert fmt.parse("dir/my-note.md", b"no headings here\n", MTIME)[0].title == "my-note"


def test_markdown_front_matter_alias_string_and_unterminated_block():
    fmt = markdown.MarkdownFormat()
    card = fmt.parse("a.md", b"---\nalias: one, two\n---\nbody\n", MTIME)[0]
    assert card.fields["aliases"] == ["one", "two"] and card.text == "body"
    card = fmt.parse("b.md", b"---\ntitle: never closed\nbody\n", MTIME)[0]
    assert "aliases" not in card.fields and card.title == "b" and card.text.startswith("---")


def test_markdown_keeps_the_front_matter_properties_that_hold_links():
    """Obsidian's properties: a link in a string, in a list (named by its list's key), several on one line."""
    fmt = markdown.MarkdownFormat()
    card = fmt.parse("Book.md", b'---\nup: "[[Shelf]]"\ncategories:\n  - "[[Books]]"\n  - plain\n'
                                b'author: ["[[Ann]]", "[[Bo|B.]]"]\ncreated: 2024-01-01\n---\n# Book\n\n[[Text]]\n',
                     MTIME)[0]
    assert card.fields["property_links"] == ['up: "[[Shelf]]"', 'categories: "[[Books]]"',
                                             'author: ["[[Ann]]", "[[Bo|B.]]"]']
    assert "property_links" not in fmt.parse("a.md", b"---\ntags: [x]\n---\n[[b]]\n", MTIME)[0].fields
    assert "property_links" not in fmt.parse("b.md", b"no front matter [[c]]\n", MTIME)[0].fields


def test_markdown_keeps_the_address_a_page_declares():
    """Jekyll's permalink and Hugo's url name the page's address; a permalink pattern names no one page."""
    fmt = markdown.MarkdownFormat()
    jekyll = fmt.parse("_docs/setup.md", b'---\npermalink: "/docs/setup/"\n---\nx\n', MTIME)[0]
    hugo = fmt.parse("content/a.md", b"---\nurl: /about-us/\n---\nx\n", MTIME)[0]
    pattern = fmt.parse("_posts/p.md", b"---\npermalink: /:year/:title/\n---\nx\n", MTIME)[0]
    relative = fmt.parse("b.md", b"---\nurl: https://example.org/b\n---\nx\n", MTIME)[0]
    assert (jekyll.fields["permalink"], hugo.fields["permalink"]) == ("/docs/setup/", "/about-us/")
    assert "permalink" not in pattern.fields and "permalink" not in relative.fields


def test_markdown_reads_quarto_and_r_markdown_and_heading_attributes():
    """Quarto's .qmd and R Markdown's .Rmd are Markdown; a heading's {#id .class} attributes (Pandoc, kramdown's
    {: #id}) leave its label and give its id; braces that are no attributes stay."""
    fmt = markdown.MarkdownFormat()
    assert fmt.accepts("book/intro.qmd", b"") and fmt.accepts("report/analysis.Rmd", b"")
    data = (b"---\ntitle: Doc\n---\n# Intro {#sec-intro .unnumbered}\n\n```{r}\n# not a heading {#x}\n```\n\n"
            b"## Config {json}\n\n## Two {-}\n\n## Kram {: #kram }\n")
    card, intro, config, two, kram = fmt.parse("book/intro.qmd", data, MTIME)
    assert (intro.section, intro.fields["ids"], intro.doc_id) == ("Intro", ["sec-intro"], "book/intro.qmd#sec-intro")
    assert (config.section, "ids" in config.fields) == ("Config {json}", False)
    assert (two.section, "ids" in two.fields, kram.section, kram.fields["ids"]) == ("Two", False, "Kram", ["kram"])
    untitled = fmt.parse("t.md", b"# Title {#top}\n", MTIME)[0]
    assert untitled.title == "Title"  # the attributes are not the note's title either


def test_markdown_reads_a_logseq_pages_properties_and_names():
    fmt = markdown.MarkdownFormat()
    card = fmt.parse("pages/Project___Alpha.md", b"title:: Project/Alpha\nalias:: PA, [[Alpha project]]\n"
                     b"tags:: work, #[[sour dough]]\n\n- Alpha is the pilot.\n", MTIME)[0]
    assert card.title == "Project/Alpha" and card.fields["tags"] == ["work", "sour dough"]
    assert card.fields["aliases"] == ["Project/Alpha", "PA", "Alpha project"]
    # properties as a first block's, the older escaped namespace, and no title: the page name is the title
    card = fmt.parse("pages/Recipes%2FRye.md", b"- alias:: rye\n- Rye loaf notes.\n", MTIME)[0]
    assert card.title == "Recipes/Rye" and card.fields["aliases"] == ["rye", "Recipes/Rye"]
    day = fmt.parse("journals/2024_01_03.md", b"- Fed the starter\n", MTIME)[0]
    assert day.title == "Jan 3rd, 2024" and day.fields["aliases"] == ["Jan 3rd, 2024", "2024-01-03"]
    assert fmt.parse("journals/2024_01_11.md", b"", MTIME)[0].title == "Jan 11th, 2024"
    assert fmt.parse("journals/2024_02_22.md", b"", MTIME)[0].title == "Feb 22nd, 2024"
    # front matter wins; a property line after the first block, a date outside journals/, an impossible day and
    # a plain note name nothing
    card = fmt.parse("a.md", b"---\ntitle: Front\n---\ntitle:: Logseq\n", MTIME)[0]
    assert card.title == "Front" and card.fields["aliases"] == ["Logseq"]
    for path, body in (("b.md", b"# B\n\nalias:: late\n"), ("notes/2024_01_03.md", b"x\n"),
                       ("journals/2024_02_30.md", b"x\n"), ("100% done.md", b"x\n")):
        assert "aliases" not in fmt.parse(path, body, MTIME)[0].fields, path


def test_a_logseq_heading_block_opens_a_section():
    """Logseq writes a page's headings as blocks (``- ## Usage``, nested ones indented): each is a heading, as
    CommonMark reads a list item's heading, so a page is cut there as a note is at its ``## Usage`` lines. A list
    item that only starts with a hash (a tag, ``#5``) is none."""
    page = (b"type:: [[Command]]\n\n- ## Usage\n\t- Type `/cloze`.\n- ## Functionality\n\t- ### Cues\n"
            b"\t\t- A cue helps.\n- #flashcards and #5 are tags\n* # Starred\n```\n- # in code\n```\n")
    card, *sections = markdown.MarkdownFormat().parse("pages/Cloze.md", page, MTIME)
    assert card.text == "type:: [[Command]]"
    assert [(d.doc_id, d.fields["level"], d.text) for d in sections] == [
        ("pages/Cloze.md#usage", 2, "- ## Usage\n\t- Type `/cloze`."),
        ("pages/Cloze.md#functionality", 2, "- ## Functionality"),
        ("pages/Cloze.md#cues", 3, "- ### Cues\n\t\t- A cue helps.\n- #flashcards and #5 are tags"),
        ("pages/Cloze.md#starred", 1, "* # Starred\n```\n- # in code\n```")]


def _drawing(scene: str, heading: str = "## Drawing") -> bytes:
    """An Excalidraw drawing as the Obsidian plugin writes it, its scene block given."""
    return (f"---\n\nexcalidraw-plugin: parsed\ntags: [excalidraw]\n\n---\n==⚠  Switch to EXCALIDRAW VIEW in the "
            f"MORE OPTIONS menu of this document. ⚠== You can decompress Drawing data with the command palette.\n\n\n"
            f"# Excalidraw Data\n\n## Text Elements\nLoyalty engine ^iWFQyN0b\n\nPayments ledger ^AoCDpWg1\n\n"
            f"## Element Links\nAoCDpWg1: [[Payments]]\n\n%%\n{heading}\n{scene}\n%%\n").encode()


@pytest.mark.parametrize(("scene", "heading"), [
    ("```compressed-json\nN4KAkARALgngDgUwgLgAQQQDwMYEMA2AlgCYBOuA7hADTgQBuCpAzoQPYB2KqATLZMzYBXUtiRoIACyhQ\n```", "## Drawing"),
    ('```json\n{"type": "excalidraw", "elements": [{"type": "text", "text": "Loyalty engine"}]}\n```', "## Drawing"),
    ("```compressed-json\nN4KAkARALgngDgUwgLgAQQQDwMYEMA2AlgCYBOuA7hADTgQBuCpAzoQPYB2KqATLZMzYBXUtiRoIACyhQ\n```", "# Drawing"),
])
def test_an_excalidraw_drawing_is_read_as_its_text_not_its_scene(scene, heading):
    """A drawing's text elements and links are its text; the scene (base64 or JSON, some 100 KB a drawing, every
    run of it a junk word) and the plugin's banner are not."""
    docs = markdown.MarkdownFormat().parse("Architecture.excalidraw.md", _drawing(scene, heading), MTIME)
    texts = "\n".join(doc.text for doc in docs)
    assert "Loyalty engine" in texts and "[[Payments]]" in texts
    assert "N4KAk" not in texts and '"elements"' not in texts and "EXCALIDRAW VIEW" not in texts
    assert [doc.section for doc in docs[1:]] == ["Excalidraw Data", "Text Elements", "Element Links"]
    assert docs[2].fields["blocks"] == ["iWFQyN0b", "AoCDpWg1"]
    # a note that is no drawing keeps a section so named, and what it holds
    plain = markdown.MarkdownFormat().parse("n.md", b"# N\n\n%%\n## Drawing\n```json\n{}\n```\n%%\n", MTIME)
    assert plain[-1].section == "Drawing" and "```json" in plain[-1].text


def test_markdown_crlf_and_bom_are_normalised():
    docs = markdown.MarkdownFormat().parse("w.md", b"\xef\xbb\xbf# Title\r\n\r\nline\r\n", MTIME)
    assert docs[1].text == "# Title\n\nline"


def test_undecodable_text_is_a_format_error_with_a_reason():
    with pytest.raises(FormatError) as caught:
        markdown.MarkdownFormat().parse("bad.md", b"fine\n" + UNDECODABLE, MTIME)
    assert "undecodable" in caught.value.reason and "offset 5" in caught.value.reason
    with pytest.raises(FormatError) as caught:
        parse_file([text.TextFormat()], "bad.txt", UNDECODABLE, MTIME)
    assert caught.value.path == "bad.txt" and caught.value.to_body()["error"]["path"] == "bad.txt"


@pytest.mark.parametrize("note, encoding", [
    ("# Café\n\nUne note écrite en Latin-1, déjà vieille, à relire.\n", "latin-1"),
    ("# Grüße\n\nschöne Straße in Köln\n", "cp1252"),
    ("# Привет\n\nЭто заметка, написанная давно.\n", "cp1251"),
])
def test_text_that_is_not_utf8_is_read_in_the_encoding_detected(note, encoding):
    docs = markdown.MarkdownFormat().parse("old.md", note.encode(encoding), MTIME)
    assert docs[0].title == note.split("\n")[0][2:]
    assert docs[1].text == note.strip()
    assert docs[0].fields["encoding"] not in ("utf-8", "") and docs[1].text.encode(docs[0].fields["encoding"])
    plain = text.TextFormat().parse("old.txt", note.encode(encoding), MTIME)[0]
    assert plain.text == note.strip() and plain.fields["encoding"] == docs[0].fields["encoding"]
    assert markdown.MarkdownFormat().parse("new.md", note.encode(), MTIME)[0].fields["encoding"] == "utf-8"


# -- text, html ------------------------------------------------------------------


def test_text_sniffs_extensionless_text_but_not_binary():
    fmt = text.TextFormat()
    assert fmt.accepts("LICENSE", b"MIT License\n")
    assert not fmt.accepts("blob", b"\x00\x01binary")
    assert not fmt.accepts(".hidden", b"text")
    assert fmt.accepts("README", "caf\u00e9".encode()[:-1])  # a character cut by the sniff window


def test_html_title_text_and_link_offsets():
    page = (
        "<!doctype html><html><head><title>Bread  notes</title><style>p{}</style></head>"
        "<body><h1>Bread</h1><script>var x = 1;</script>"
        "<p>Start   with the <a href='starter.html#feeding'>starter</a> and\nflour.</p>"
        "<ul><li>Then <a href=\"/docs/proof.html\">proof</a></li></ul>"
        "<pre>keep\n  this</pre><p>caf&eacute;</p></body></html>"
    ).encode()
    doc = html.HtmlFormat().parse("site/bread.html", page, MTIME)[0]
    assert doc.title == "Bread notes"
    assert doc.text == "Bread\nStart with the starter and flour.\nThen proof\nkeep\n  this\ncafé"
    hrefs = [link["href"] for link in doc.fields["links"]]
    assert hrefs == ["starter.html#feeding", "/docs/proof.html"]
    quotes = [line_at(doc.text, link["offset"]) for link in doc.fields["links"]]
    assert quotes == ["Start with the starter and flour.", "Then proof"]
    assert "var x" not in doc.text


def test_html_is_cut_at_its_headings_each_section_with_its_links_and_the_ids_naming_it(monkeypatch):
    """As a Markdown note: the card holds what precedes the first heading (here a nav), each heading with text
    opens a section to the next one; a section lists the ids of its heading, of elements inside it and of those
    opened since the last text before it, not an id further down; link offsets are bytes of their own text."""
    monkeypatch.setattr(html, "MIN_SECTION_CHARS", 0)  # every heading opens a section (see the next test)
    page = (
        "<html><head><title>Bread</title></head><body><nav><a href='index.html'>Home</a></nav>"
        "<h1 id='top'>Bread</h1><p>Start with the <a href='starter.html#feeding'>starter</a>.</p>"
        "<section id='proof'><h2>Proofing &amp; <a id='shape' href='#shape'>shaping</a></h2>"
        "<p>Let it <a href='rest.html'>rest</a>,\ncaf&eacute; <a href='c.html'>c</a></p></section>"
        "<div id='mid'><p>middle</p></div><a name='old'></a><h3>Bake</h3><p>hot</p><h2> </h2><p>more</p>"
        "<h3>Bake</h3><script><h2>not a heading</h2></script>"
    ).encode()
    card, first, second, third, fourth = html.HtmlFormat().parse("site/bread.html", page, MTIME)
    assert (card.doc_id, card.text, card.fields["links"]) == ("site/bread.html", "Home", [{"href": "index.html",
                                                                                        "offset": 0}])
    assert [(d.doc_id, d.section, d.fields["level"], d.fields["ordinal"], d.fields.get("ids"), d.title)
            for d in (first, second, third, fourth)] == [
        ("site/bread.html#bread", "Bread", 1, 1, ["top"], "Bread"),
        ("site/bread.html#proofing--shaping", "Proofing & shaping", 2, 2, ["proof", "shape"], "Bread"),
        ("site/bread.html#bake", "Bake", 3, 3, ["old"], "Bread"),
        ("site/bread.html#bake-1", "Bake", 3, 4, None, "Bread")]
    assert second.text == "Proofing & shaping\nLet it rest, café c\nmiddle"
    assert third.text == "Bake\nhot\nmore" and "links" not in third.fields
    quoted = [(link["href"], second.text.encode()[link["offset"]:].decode().split("\n")[0])
              for link in second.fields["links"]]
    assert quoted == [("#shape", "shaping"), ("rest.html", "rest, café c"), ("c.html", "c")]
    assert [line_at(first.text, link["offset"]) for link in first.fields["links"]] == ["Start with the starter."]
    nested = html.HtmlFormat().parse("n.html", b"<h2 id='a'>Outer <h3 id='b'>inner</h3> tail</h2><p>x</p>", MTIME)
    assert [(d.section, d.fields.get("ids")) for d in nested] == [("", None), ("Outer inner tail", ["a", "b"])]
    marked = html.HtmlFormat().parse("m.html", "<h2>Install<a class='headerlink' href='#install'>¶</a></h2><p>x</p>"
                                     "<h2><a class='doc-anchor' href='#c'>§</a>Use C#</h2><p>y</p>".encode(), MTIME)
    assert [d.section for d in marked] == ["", "Install", "Use C#"]  # Sphinx's and rustdoc's marks, not C#'s


def test_a_heading_with_little_text_of_its_own_stays_in_the_part_before_it():
    """Generated pages head every method and impl (rustdoc: 132k sections of 2,617 std pages): a heading opens a
    section only when it heads MIN_SECTION_CHARS of text beyond its own, else it and its ids stay in the part
    before it; so a short page is one card, as before pages were cut."""
    long = "word " * (html.MIN_SECTION_CHARS // 5 + 1)
    page = (f"<h1>Vec</h1><p>A vector.</p><section id='method.len'><h4>len</h4><p>Its length.</p></section>"
            f"<h2 id='impls'>Impls</h2><p>{long}</p><h3 id='clone'>impl Clone</h3><p>clones</p>"
            f"<h3>impl Debug</h3><p>{long}</p><h4>fn fmt(&amp;self, {long.strip()})</h4><p>Formats.</p>").encode()
    card, impls, debug = html.HtmlFormat().parse("vec.html", page, MTIME)  # a long heading heads little text
    assert card.text == "Vec\nA vector.\nlen\nIts length." and "ids" not in card.fields
    assert (impls.section, impls.fields["ids"], impls.text.endswith("impl Clone\nclones")) == (
        "Impls", ["impls", "clone"], True)
    assert (debug.section, debug.text) == ("impl Debug", f"impl Debug\n{long.strip()}\nfn fmt(&self, "
                                                           f"{long.strip()})\nFormats.")
    (only,) = html.HtmlFormat().parse("short.html", b"<h1>Short</h1><p>one line</p><h2>More</h2><p>two</p>", MTIME)
    assert only.text == "Short\none line\nMore\ntwo"


def test_an_html_page_without_a_title_is_named_by_its_first_h1_with_text_else_its_file():
    fmt = html.HtmlFormat()
    page = "<h2>Intro</h2><h1></h1><p>x</p><h1>Bread<a href='#b'>¶</a></h1><h1>Later</h1>".encode()
    assert fmt.parse("site/bread.html", page, MTIME)[0].title == "Bread"
    assert fmt.parse("site/rye.html", b"<h2>Rye</h2><p>x</p>", MTIME)[0].title == "rye"
    assert fmt.parse("site/t.html", b"<title>Told</title><h1>Bread</h1>", MTIME)[0].title == "Told"


def test_a_link_offset_is_where_its_anchor_text_starts():
    """Not where its tag opened: the space between the text before and the anchor's text comes first (it is
    emitted with the words after it), and so does a line break."""
    page = ("<p>one <a href='a'>two</a> three<a href='b'>four</a></p><p><a href='c'>  five</a></p>"
            "<pre>x <a href='d'>six</a></pre><p>caf&eacute; <a href='e'>sept</a></p>").encode()
    (doc,) = html.HtmlFormat().parse("p.html", page, MTIME)
    data = doc.text.encode()
    assert [(link["href"], data[link["offset"]:].split(b"\n")[0].decode()) for link in doc.fields["links"]] == [
        ("a", "two threefour"), ("b", "four"), ("c", "five"), ("d", "six"), ("e", "sept")]


def test_an_anchor_without_text_carries_its_label():
    """An icon or image link has no text of its own, so the line at its offset is whatever follows it: the link
    says what it is called instead (title, aria-label, image alt), and a link with text says nothing more."""
    page = (
        '<div class="buttons"><a href="print.html" title="Print this book"><i class="fa-print"></i></a>'
        '<a href="index.html" aria-label="Home"></a><a href="next.html"><img src="n.svg" alt="Next"></a>'
        '<a href="up.html"><span class="icon"></span></a><a href="self.html"/></div>'
        '<h1>What is ownership?</h1><p>Read <a href="moves.html">moves</a> first.</p><a href="end.html">'
    ).encode()
    links = html.HtmlFormat().parse("ch04.html", page, MTIME)[0].fields["links"]
    assert [(link["href"], link.get("label")) for link in links] == [
        ("print.html", "Print this book"), ("index.html", "Home"), ("next.html", "Next"), ("up.html", ""),
        ("self.html", ""), ("moves.html", None), ("end.html", "")]


def test_html_is_read_as_a_browser_reads_a_broken_page():
    """End tags that close nothing are ignored, elements left open are closed, a NUL reads as U+FFFD, a text run of
    megabytes is kept whole, and an empty or tagless page is still a page."""
    fmt = html.HtmlFormat()

    def text(markup: bytes) -> str:
        return fmt.parse("p.html", markup, MTIME)[0].text

    assert text(b"<p>one</div> two</span></p><p>three") == "one two\nthree"
    assert text(b"<ul><li>a<li>b</ul><p>c\x00d") == "a\nb\nc\ufffdd"
    assert text(b"<p>" + b"word " * 400_000 + b"</p>") == ("word " * 400_000).strip()
    assert text(b"") == "" and text(b"just words") == "just words"
    assert text(b"<script>var s = '</div><p>not text';</script><p>text") == "text"


def test_html_pages_read_one_after_another_share_nothing_and_leave_no_garbage():
    """Each thread reuses one parser: a page left inside a script, a pre or an anchor does not leak into the next
    one, and reading pages leaves no parser or page text behind for the cyclic collector (a parser made per page
    did, and held every page's text until a collection)."""
    import gc

    fmt = html.HtmlFormat()
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            broken = fmt.parse("a.html", b"<pre>  kept\n<a href='x.html'><p>words<script>var t = '", MTIME)[0]
            plain = fmt.parse("b.html", b"<p>one <a href='y.html'>two</a></p>", MTIME)[0]
            assert (broken.text, plain.text) == ("  kept\nwords", "one two")
            assert plain.fields["links"] == [{"href": "y.html", "offset": 4}]  # where "two" starts
        assert sum(type(o).__name__ == "_Extractor" for o in gc.get_objects()) <= 1
    finally:
        gc.enable()


def test_html_declared_charset_is_honoured():
    page = b'<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head><body>cr\xe8me</body></html>'
    doc = html.HtmlFormat().parse("p.html", page, MTIME)[0]
    assert doc.title == "Café" and doc.text == "crème"


# -- email -------------------------------------------------------------------------


def test_eml_is_one_message_card_with_attachments():
    msg = make_message(
        "Plans", "<p@x>", body="See attached.", references=["<a@x>"],
        attachments=[("plan.txt", "step one\n", "text", "plain"), ("photo.jpg", b"\xff\xd8\xff", "image", "jpeg")],
    )
    docs = email.EmailFormat().parse("mail/plans.eml", bytes(msg), MTIME)
    card, first, second = docs
    assert card.doc_id == "mail/plans.eml" and card.kind == "message" and card.title == "Plans"
    assert card.text == "See attached."
    assert card.fields["message_id"] == "<p@x>" and card.fields["references"] == ["<a@x>"]
    assert card.fields["attachments"] == ["mail/plans.eml#att-1", "mail/plans.eml#att-2"]
    assert card.fields["date_ms"] == 1736157600000
    assert (first.kind, first.title, first.text, first.fields["parent"]) == ("attachment", "plan.txt", "step one", card.doc_id)
    assert (second.title, second.text, second.fields["content_type"], second.fields["size"]) == ("photo.jpg", "", "image/jpeg", 3)
    assert all(d.dataset == "ax-mail" for d in docs)


def test_a_pdf_attachment_is_read_for_its_text_and_a_damaged_one_costs_nothing_else(monkeypatch):
    pytest.importorskip("pypdf")
    msg = make_message("Invoice", "<i@x>", body="Attached.", attachments=[
        ("invoice.pdf", make_pdf(["Total due forty euros", "Thank you"]), "application", "pdf"),
        ("scan.PDF", b"%PDF-1.4 torn", "application", "octet-stream"),  # a name alone says PDF
        ("notes.txt", "plain words\n", "text", "plain"),
    ])
    card, pdf_part, torn, notes = email.EmailFormat().parse("mail/invoice.eml", bytes(msg), MTIME)
    assert card.text == "Attached." and card.fields["attachments"] == [pdf_part.doc_id, torn.doc_id, notes.doc_id]
    assert pdf_part.text == "Total due forty euros\n\nThank you" and "unread" not in pdf_part.fields
    assert torn.text == "" and torn.fields["unread"].startswith("malformed PDF")
    assert notes.text == "plain words" and "unread" not in notes.fields
    monkeypatch.setattr(pdf, "_load_pypdf", lambda: None)  # without the pdf extra: the reason names it
    _, pdf_part, _, _ = email.EmailFormat().parse("mail/invoice.eml", bytes(msg), MTIME)
    assert pdf_part.text == "" and pdf_part.fields["unread"] == pdf.MISSING_EXTRA


def test_a_forwarded_message_is_a_document_with_its_own_text_and_attachments():
    """Forwarded mail, bounces and digests enclose whole messages (message/rfc822): their text was lost."""
    inner = make_message("Budget 2025", "<b@x>", body="The budget is forty thousand.",
                         attachments=[("figures.txt", "rent 12000\n", "text", "plain")])
    outer = make_message("Fwd: Budget 2025", "<f@x>", body="See below.")
    outer.add_attachment(inner)  # as a mail program forwards "as attachment"
    card, forwarded, figures = email.EmailFormat().parse("mail/fwd.eml", bytes(outer), MTIME)
    assert card.text == "See below." and card.fields["attachments"] == [forwarded.doc_id, figures.doc_id]
    assert (forwarded.kind, forwarded.title, forwarded.text) == ("attachment", "Budget 2025",
                                                                 "The budget is forty thousand.")
    assert forwarded.fields["content_type"] == "message/rfc822" and forwarded.fields["size"] > 0
    assert (figures.title, figures.text, figures.fields["parent"]) == ("figures.txt", "rent 12000", card.doc_id)
    # a message that is nothing but an enclosed one (as some programs forward): that one's body is its body
    bare = email_module.message_from_bytes(
        b"From: a@x\nSubject: The enclosing message\nContent-Type: message/rfc822\n\n"
        b"From: b@x\nSubject: inside\n\nHere is the body of the message.\n", policy=email_policy.default)
    (only,) = email.EmailFormat().parse("bare.eml", bytes(bare), MTIME)
    assert (only.title, only.text) == ("The enclosing message", "Here is the body of the message.")


def test_mbox_messages_in_order_with_thread_headers(tmp_path):
    first = make_message("Lunch?", "<1@x>", body="From the kitchen: soup.")
    reply = make_message("Re: Lunch?", "<2@x>", in_reply_to="<1@x>", references=["<1@x>"])
    docs = email.EmailFormat().parse("box.mbox", make_mbox(tmp_path, [first, reply]), MTIME)
    card, one, two = docs
    assert card.kind == "file" and card.fields["messages"] == 2
    assert [one.doc_id, two.doc_id] == ["box.mbox#msg-1", "box.mbox#msg-2"]
    assert one.text == "From the kitchen: soup."  # the mbox ">From" escape is undone
    assert (two.section, two.fields["in_reply_to"], two.fields["references"]) == ("Re: Lunch?", "<1@x>", ["<1@x>"])


def test_a_mailbox_reads_each_kind_of_header_through_one_class_and_leaves_no_cycle_behind(tmp_path):
    """The standard library makes a class per header it reads, each in a reference cycle; the format's registry
    makes one per header name, so reading a mailbox's headers leaves nothing for the collector."""
    messages = [make_message(f"Batch {n}", f"<{n}@x>", in_reply_to=f"<{n - 1}@x>") for n in range(1, 30)]
    data = make_mbox(tmp_path, messages)
    email.EmailFormat().parse("box.mbox", data, MTIME)  # the classes made once
    raws = email.split_mbox(data)
    collecting = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        parsed = [email._parse_message(raw) for raw in raws]
        subjects = [email._header(msg, "subject") for msg in parsed]
        kinds = [{type(msg[name]) for msg in parsed} for name in ("from", "to", "subject")]
        del parsed
        assert gc.collect() == 0
    finally:
        if collecting:
            gc.enable()
    assert subjects == [f"Batch {n}" for n in range(1, 30)] and [len(kind) for kind in kinds] == [1, 1, 1]


def test_malformed_email_is_a_format_error_with_a_reason(tmp_path):
    fmt = email.EmailFormat()
    with pytest.raises(FormatError) as caught:
        fmt.parse("x.eml", b"just some words\n", MTIME)
    assert "no From, To, Subject, Date or Message-ID" in caught.value.reason
    with pytest.raises(FormatError) as caught:
        fmt.parse("x.mbox", b"Subject: hi\n\nbody\n", MTIME)
    assert "From " in caught.value.reason


def test_a_mailbox_keeps_its_messages_around_one_that_is_not_a_message(tmp_path):
    good = bytes(make_message("ok", "<ok@x>"))
    data = (b"From a@x Mon Jan 1 00:00:00 2024\n" + good + b"\nFrom b@x Mon Jan 1 00:00:01 2024\nnonsense here\n"
            b"\nFrom c@x Mon Jan 1 00:00:02 2024\n" + good)
    card, first, odd, last = email.EmailFormat().parse("y.mbox", data, MTIME)
    assert card.fields["messages"] == 3 and card.fields["malformed_messages"] == [2]
    assert (first.title, last.title, first.fields["message_id"]) == ("ok", "ok", "<ok@x>")
    assert (odd.doc_id, odd.kind, odd.title, odd.text) == ("y.mbox#msg-2", "message", "(no subject)", "nonsense here")
    assert "no From, To, Subject, Date or Message-ID" in odd.fields["malformed"]
    assert "malformed" not in first.fields


def test_a_mailbox_is_cut_only_at_separator_lines(tmp_path):
    """A body line opening with "From " (left unescaped by an mboxo or mboxcl writer) starts no message unless
    it follows a blank line and carries a time of day, as an envelope line does."""
    head = b"From: a@x\nSubject: plans\nMessage-ID: <p@x>\n\n"
    body = b"From 2019 on we met weekly.\n\nFrom the minutes:\nFrom 10 to noon, in room 4.\n"
    data = (b"From a@x  Tue Feb  4 09:30:00 2025\n" + head + body
            + b"\nFrom MAILER-DAEMON Tue Feb  4 09:31:00 2025\nSubject: second\n\nhi\n")
    card, plans, second = email.EmailFormat().parse("z.mbox", data, MTIME)
    assert card.fields["messages"] == 2 and "malformed_messages" not in card.fields
    assert plans.text == body.decode().strip() and second.title == "second"
    # the first line opens the first message even when it carries no date
    card, only = email.EmailFormat().parse("w.mbox", b"From someone\n" + head + b"words\n", MTIME)
    assert (card.fields["messages"], only.title, only.text) == (1, "plans", "words")


def test_extensionless_mbox_is_sniffed_as_email(tmp_path):
    data = make_mbox(tmp_path, [make_message("hi", "<h@x>")])
    assert email.EmailFormat().accepts("Inbox", data[:1024])


def test_a_large_mailbox_leaves_no_pile_of_garbage_while_a_run_pauses_the_collector(tmp_path):
    """The standard library makes a class per header it reads, each in a reference cycle, and a run parses with
    the cyclic collector paused: a 60 MiB mailbox once peaked at 3.6 GB. What a parse leaves for the collector must
    not grow with the mailbox."""
    import gc

    from xerj_core.store.store import collector_paused

    def left_after_parsing(count):
        data = make_mbox(tmp_path / str(count), [make_message(f"note {n}", f"<{n}@x>", body=f"Body {n}.",
                                                              attachments=[("a.txt", "words", "text", "plain")])
                                                 for n in range(count)])
        gc.collect()
        with collector_paused():
            docs = email.EmailFormat().parse("box.mbox", data, MTIME)
            left = gc.collect()
        assert len(docs) == 1 + 2 * count
        return left

    (tmp_path / "50").mkdir()
    (tmp_path / "600").mkdir()
    few, many = left_after_parsing(50), left_after_parsing(600)
    assert many < 2 * formats_module.RELEASE_AFTER_OBJECTS and many < 3 * few + 1000, (few, many)


def test_parse_file_counts_only_what_the_format_made(collections):
    """The objects a run holds itself (made outside the formats) never start a collection when a file is parsed:
    a collection would walk them all, for no garbage."""
    from xerj_core.store.store import collector_paused

    with collector_paused():
        held = [{} for _ in range(3 * formats_module.RELEASE_AFTER_OBJECTS)]
        docs = parse_file([text.TextFormat()], "c.txt", b"words", MTIME)
        during = list(collections)  # leaving the pause may start one: the collector's own
    assert held and docs and during == []


def test_parse_file_frees_the_cycles_a_format_leaves_while_a_run_pauses_the_collector():
    import gc

    from xerj_core.store.store import collector_paused

    class Cyclic:
        name, dataset = "cyclic", "ax-cyclic"

        def accepts(self, rel_path, head):
            return True

        def parse(self, rel_path, data, mtime_ms):
            for _ in range(2 * formats_module.RELEASE_AFTER_OBJECTS):
                node = {}
                node["self"] = node  # garbage only the cyclic collector frees
            return text.TextFormat().parse(rel_path, data, mtime_ms)

    gc.collect()
    with collector_paused():
        docs = parse_file([Cyclic()], "c.txt", b"words", MTIME)
        left = gc.collect()
    assert docs and left < formats_module.RELEASE_AFTER_OBJECTS


# -- pdf ---------------------------------------------------------------------------


def test_pdf_pages_become_documents():
    pytest.importorskip("pypdf")
    docs = pdf.PdfFormat().parse("p/study.pdf", make_pdf(["Alpha words", "Beta words"], title="Study"), MTIME)
    card, one, two = docs
    assert (card.title, card.kind, card.fields["pages"]) == ("Study", "file", 2)
    assert [(d.doc_id, d.section, d.kind, d.text) for d in (one, two)] == [
        ("p/study.pdf#page-1", "page 1", "page", "Alpha words"),
        ("p/study.pdf#page-2", "page 2", "page", "Beta words"),
    ]


def test_a_pdf_pages_text_ends_with_the_comments_readers_left_on_it():
    pypdf = pytest.importorskip("pypdf")
    from pypdf.annotations import FreeText, Link, Popup, Text
    from pypdf.generic import NameObject, TextStringObject

    reader = pypdf.PdfReader(io.BytesIO(make_pdf(["Alpha words", "Beta words"], title="Study")))
    writer = pypdf.PdfWriter(clone_from=reader)
    note = Text(rect=(10, 10, 30, 30), text="Check   this\nfigure")
    note[NameObject("/T")] = TextStringObject("Ada")
    writer.add_annotation(page_number=1, annotation=note)
    writer.add_annotation(page_number=1, annotation=FreeText(text="Boxed remark", rect=(40, 40, 90, 60)))
    writer.add_annotation(page_number=1, annotation=Popup(rect=(0, 0, 5, 5), open=False))
    link = Link(rect=(0, 0, 9, 9), url="https://example.org")
    link[NameObject("/Contents")] = TextStringObject("not a comment")
    writer.add_annotation(page_number=1, annotation=link)
    out = io.BytesIO()
    writer.write(out)
    _card, one, two = pdf.PdfFormat().parse("p/study.pdf", out.getvalue(), MTIME)
    assert one.text == "Alpha words"
    assert two.text == "Beta words\nComment (Ada): Check this figure\nComment: Boxed remark"


@pytest.mark.parametrize("pdfium", [True, False], ids=["PDFium's text", "pypdf's text"])
def test_a_pdf_reads_the_same_with_pdfium_or_without_it(monkeypatch, pdfium):
    """PDFium extracts the pages' text when it is installed; without it (or when it refuses the file) pypdf does,
    and the documents are the same."""
    pytest.importorskip("pypdf")
    if pdfium:
        pytest.importorskip("pypdfium2")
        used = []
        real = pdf._page_texts
        monkeypatch.setattr(pdf, "_page_texts", lambda data, fits: used.append(fits) or real(data, fits))
    else:
        monkeypatch.setattr(pdf, "_load_pdfium", lambda: None)
    docs = pdf.PdfFormat().parse("p/study.pdf", make_pdf(["Alpha words", "Beta words (2)"], title="Study"), MTIME)
    assert [d.text for d in docs] == ["", "Alpha words", "Beta words (2)"]
    assert docs[0].title == "Study"
    if pdfium:
        assert used == [[True, True]]
    # a file PDFium cannot open is read by pypdf, and so is one whose pages PDFium counts otherwise
    for stand_in in (_Refusing, _Miscounting):
        monkeypatch.setattr(pdf, "_load_pdfium", lambda: stand_in)
        assert [d.text for d in pdf.PdfFormat().parse("p/s.pdf", make_pdf(["Gamma"]), MTIME)] == ["", "Gamma"]


class _Refusing:
    """A PDFium whose every document fails to open."""

    @staticmethod
    def PdfDocument(data):
        raise RuntimeError("Failed to load document")


class _Miscounting:
    """A PDFium that finds three pages in every document, each reading "wrong"."""

    class PdfDocument:
        def __init__(self, data):
            pass

        def __len__(self):
            return 3

        def __getitem__(self, index):
            return self

        def get_textpage(self):
            return self

        def get_text_range(self):
            return "wrong"

        def close(self):
            pass


def _deflated_pdf(page_content: bytes, form_content: bytes) -> bytes:
    """A one-page PDF whose page content and the one form it draws are deflated streams."""
    page, form = zlib.compress(page_content, 9), zlib.compress(form_content, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /XObject << /Fm1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(page), page),
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 10 10] /Length %d /Filter /FlateDecode >>\nstream\n%s\n"
        b"endstream" % (len(form), form),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return bytes(out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))


def test_pdfium_is_not_given_a_page_whose_content_would_decode_past_the_bound(monkeypatch):
    """PDFium decodes a page's content whole when it loads it: a page whose streams (its own, or a form's it draws)
    decode to more than MAX_PAGE_CONTENT is read by pypdf instead, measured without holding what it decodes to."""
    pypdf = pytest.importorskip("pypdf")
    pytest.importorskip("pypdfium2")
    monkeypatch.setattr(pdf, "MAX_PAGE_CONTENT", 1 << 20)
    text = b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET\n"

    def fits(data: bytes) -> bool:
        return pdf._content_fits(pypdf.PdfReader(io.BytesIO(data)).pages[0])

    assert fits(_deflated_pdf(text, text))
    assert fits(_deflated_pdf(text + b" " * (900 << 10), text))  # its bound does not fit, what it inflates to does
    assert not fits(_deflated_pdf(text + b" " * (2 << 20), text))  # the page's own stream
    assert not fits(_deflated_pdf(text, b" " * (2 << 20)))  # the form it draws
    assert not fits(_deflated_pdf(text + b" " * (600 << 10), b" " * (600 << 10)))  # the two together
    given = []
    real = pdf._page_texts
    monkeypatch.setattr(pdf, "_page_texts", lambda data, fits: given.append(fits) or real(data, fits))
    pdf.PdfFormat().parse("bomb.pdf", _deflated_pdf(text, b" " * (2 << 20)), MTIME)
    assert given == [[False]]


def test_pdfium_is_called_by_one_thread_at_a_time(monkeypatch):
    """PDFium is not thread-safe: reading a PDF holds the module's lock, and threads reading PDFs at once get each
    its own text."""
    pytest.importorskip("pypdf")
    pytest.importorskip("pypdfium2")
    import concurrent.futures

    held = []
    real = pdf._read_pages
    monkeypatch.setattr(pdf, "_read_pages", lambda *args: held.append(pdf._PDFIUM.locked()) or real(*args))
    files = [make_pdf([f"Page {n} of file {i}" for n in range(3)]) for i in range(16)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        read = list(pool.map(pdf.read_pdf, files))
    assert read == [("", [f"Page {n} of file {i}" for n in range(3)]) for i in range(16)]
    assert held == [True] * 16


def test_a_pdfs_control_characters_are_spaces(monkeypatch):
    """A glyph PDFium maps to a control character (a ligature of a font without a Unicode map) is a space, so the
    stored text holds none; a tab and a newline stay, a NUL goes, a carriage return ends a line."""
    pytest.importorskip("pypdf")
    monkeypatch.setattr(pdf, "_page_texts", lambda data, fits: ["arti\x0ccially\tx\x00y\r\nz\x7f!"])
    _card, page = pdf.PdfFormat().parse("p/lig.pdf", make_pdf(["ignored"]), MTIME)
    assert page.text == "arti cially\txy\nz !"


def test_pdf_without_the_extra_names_it(monkeypatch):
    monkeypatch.setattr(pdf, "_load_pypdf", lambda: None)
    with pytest.raises(FormatError) as caught:
        pdf.PdfFormat().parse("p.pdf", make_pdf(["x"]), MTIME)
    assert "pdf extra" in caught.value.reason and "xerj[pdf]" in caught.value.reason


def test_malformed_pdf_is_a_format_error():
    pytest.importorskip("pypdf")
    with pytest.raises(FormatError) as caught:
        pdf.PdfFormat().parse("p.pdf", make_pdf(["x"])[:60], MTIME)
    assert caught.value.reason.startswith("malformed PDF")


# -- code --------------------------------------------------------------------------


def test_cargo_manifest_and_python_sections():
    fmt = code.CodeFormat()
    manifest = fmt.parse("crates/api/Cargo.toml", b'[package]\nname = "xerj-api"\n[dependencies]\nserde = "1"\n', MTIME)[0]
    assert (manifest.title, manifest.fields["crate"], manifest.fields["crate_dir"]) == ("xerj-api", "xerj-api", "crates/api")
    assert manifest.fields["dependencies"] == ["serde"]
    workspace = fmt.parse("Cargo.toml", b'[workspace]\nmembers = ["crates/*"]\n', MTIME)[0]
    assert workspace.title == "workspace ." and workspace.fields["members"] == ["crates/*"]
    source = b'"""Doc."""\nimport os\nfrom a.b import c\n\n@dec\ndef run():\n    pass\n\nX = 1\n\nclass Run:\n    pass\n'
    card, run, klass = fmt.parse("pkg/mod.py", source, MTIME)
    assert card.text == '"""Doc."""\nimport os\nfrom a.b import c\n\n\nX = 1' and card.fields["imports"] == ["a.b", "os"]
    assert (run.doc_id, run.section, run.text) == ("pkg/mod.py#run", "def run", "@dec\ndef run():\n    pass")
    assert (klass.doc_id, klass.section, klass.fields["line"]) == ("pkg/mod.py#run-1", "class Run", 11)
    broken = fmt.parse("pkg/broken.py", b"def (:\n", MTIME)
    assert len(broken) == 1 and broken[0].text == "def (:"


@pytest.mark.parametrize(("path", "head", "language"), [
    ("src/lib.rs", b"", "rust"), ("a/b.C", b"", "c"), ("x.hpp", b"", "cpp"), ("app.TSX", b"", "typescript"),
    ("q.sql", b"", "sql"), ("ci.yml", b"", "yaml"), ("CMakeLists.txt", b"", "cmake"), ("Dockerfile", b"", "dockerfile"),
    ("_ufuncs.pyx", b"", "cython"), ("lapack/dgesv.f90", b"", "fortran"),
    ("c++/12/algorithm", b"// <algorithm> -*- C++ -*-\n", "cpp"),
    ("run", b"# -*- mode: python; coding: utf-8 -*-\n", "python"),
    ("notes", b"# -*- coding: utf-8 -*-\n", None), ("notes", b"plain words\n-*- C++ -*-\n", None),
    ("run", b"#!/usr/bin/env python3\n", "python"), ("run", b"#! /usr/bin/env -S node --no-warnings\n", "javascript"),
    ("run", b"#!/usr/bin/python3.11 -u\n", "python"), ("run", b"#!/bin/bash\n", "shell"),
    ("run", b"#!/usr/bin/env\n", None), ("run", b"echo hi\n", None), ("x.m", b"", None), ("d.json", b"", None),
    ("vendor.min.css", b"", None), ("notes.txt", b"#!/bin/sh\n", None),
    ("test/exec.bats", b"", "shell"), ("test/run", b"#!/usr/bin/env bats\n", "shell"),
    ("src/Makefile.in", b"", "make"), ("meson.build", b"", "meson"), ("tools/x.psm1", b"", "powershell"),
    ("build", b"#!/usr/bin/env pwsh\n", "powershell"), ("defs.bzl", b"", "starlark"),
    ("tsconfig.json", b"", "tsconfig"), ("apps/web/tsconfig.app.json", b"", "tsconfig"),
    ("jsconfig.json", b"", "tsconfig"),
    ("tooling/typescript/base.json", b'{\n  "$schema": "x",\n  "compilerOptions": {}\n}', "tsconfig"),
    ("data/settings.json", b'{"options": {}}', None), ("package.json", b"", "npm"), ("package-lock.json", b"", None),
    ("composer.json", b"", "composer"), ("composer.lock", b"", None), ("src/components/Card.astro", b"", "astro"),
    ("Categories/Books.base", b"filters:\n  and:\n    - categories.contains(this)\nviews:\n", "obsidian-base"),
    ("Bases/All.base", b"formulas:\n  Date: created\n", "obsidian-base"), ("data/x.base", b"\x00\x01binary", None),
])
def test_a_source_file_s_language_comes_from_its_name_or_its_first_line(path, head, language):
    assert code.language_of(path, head) == language


def test_every_document_of_a_source_file_carries_its_language():
    fmt = code.CodeFormat()
    (card,) = fmt.parse("cmd/main.go", b"package main\r\n\r\nfunc main() {}\r\n", MTIME)
    assert (card.doc_id, card.kind, card.text, card.fields["language"]) == (
        "cmd/main.go", "file", "package main\n\nfunc main() {}", "go")
    script = fmt.parse("bin/report", b"#!/usr/bin/env python3\nimport os\n\ndef main():\n    return 0\n", MTIME)
    assert [(d.doc_id, d.fields["language"]) for d in script] == [
        ("bin/report", "python"), ("bin/report#main", "python")]
    assert script[0].fields["imports"] == ["os"]
    assert {d.fields["language"] for d in fmt.parse("m.py", b"def f():\n    pass\n", MTIME)} == {"python"}
    assert "language" not in fmt.parse("Cargo.toml", b'[package]\nname = "a"\n', MTIME)[0].fields
    latin = fmt.parse("old.c", "/* caf\u00e9 */\n".encode("latin-1"), MTIME)[0]
    assert latin.text == "/* caf\u00e9 */"


def test_malformed_cargo_manifest_is_a_format_error():
    with pytest.raises(FormatError) as caught:
        code.CodeFormat().parse("Cargo.toml", b"[package\n", MTIME)
    assert caught.value.reason.startswith("malformed Cargo.toml")

def _bundle(line: str, lines: int) -> bytes:
    return "\n".join([line] * lines).encode()


@pytest.mark.parametrize(("path", "data"), [
    # a documentation site's search index: one line of megabytes, JSON in a script
    ("searchindex.js", b"Search.setIndex({" + b'"docnames":["a","b"],' * 80 + b"})"),
    # a bundler's output: a licence comment, then the code on a few long lines
    ("assets/index-BwOPSdeb.js", b"/*! lib v1 | MIT */\n" + _bundle("var " + "a=b(c,d)," * 30 + "e;", 12)),
    ("report.css", _bundle(".a{color:red}" * 12, 10)),
    ("blob.c", _bundle("0x" + "12, 0x" * 40 + "00,", 8)),
    # counted in characters: 123 a line (363 bytes of UTF-8)
    ("gen.go", _bundle("// " + "\u6ce8\u91ca" * 60, 20)),
])
def test_a_minified_or_generated_source_file_is_declined_with_its_reason(path, data):
    with pytest.raises(FormatDeclined) as caught:
        code.CodeFormat().parse(path, data, MTIME)
    assert caught.value.kind == "generated" and caught.value.reason.startswith("minified or generated: its lines")
    with pytest.raises(FormatDeclined) as routed:  # parse_file keeps it a skip, naming the file
        parse_file(BUILTINS, path, data, MTIME)
    assert routed.value.path == path and routed.value.kind == "generated"


@pytest.mark.parametrize(("path", "data"), [
    ("run.sh", b"echo " + b"x" * 400),  # one long line, but a short file: a one-liner people write
    ("main.go", _bundle("\tfmt.Println(\"" + "\u4f60\u597d" * 30 + "\")", 40)),  # 75 characters, 195 bytes
    ("app.js", _bundle("const x = compute(alpha, beta, gamma);", 200)),
    ("m.py", _bundle("x = [" + "1, " * 60 + "]", 40)),  # Python is read by its outline, whatever its lines
])
def test_code_people_write_is_not_declined(path, data):
    assert code.CodeFormat().parse(path, data, MTIME)[0].doc_id == path


# -- sniffing, registry, hook ------------------------------------------------------------


BUILTINS = [markdown.MarkdownFormat(), text.TextFormat(), html.HtmlFormat(), email.EmailFormat(), pdf.PdfFormat(),
            code.CodeFormat(), notebook.NotebookFormat()]


@pytest.mark.parametrize(
    ("path", "head", "expected"),
    [
        ("a.md", b"# x", "markdown"),
        ("a.MD", b"# x", "markdown"),
        ("notes.txt", b"x", "text"),
        ("README", b"plain words", "text"),
        ("page.htm", b"<p>", "html"),
        ("page", b"  <!DOCTYPE html><html>", "html"),
        ("m.eml", b"From: a", "email"),
        ("Inbox", b"From a@b Sat Jan  1 00:00:00 2000\nSubject: x\n", "email"),
        ("doc.pdf", b"%PDF-1.7", "pdf"),
        ("scan", b"%PDF-1.7", "pdf"),
        ("Cargo.toml", b"[package]", "code"),
        ("x.py", b"import os", "code"),
        ("lab/analysis.ipynb", b'{"cells": []}', "notebook"),
        ("cmd/main.go", b"package main", "code"),
        ("Makefile", b"all:\n", "code"),
        ("bin/deploy", b"#!/bin/sh\nexit 0\n", "code"),
        ("bin/odd", b"#!/opt/odd/interpreter\n", "text"),
        # pyenv's own tree: its bats tests, a script bats runs, and autoconf's Makefile template
        ("test/exec.bats", b"#!/usr/bin/env bats\n\nload test_helper\n", "code"),
        ("test/run", b"#!/usr/bin/env bats\n", "code"),
        ("src/Makefile.in", b"CC = @CC@\n", "code"),
        ("meson.build", b"project('x', 'c')\n", "code"),  # an unknown interpreter: still text
        ("include/c++/12/vector", b"// <vector> -*- C++ -*-\n", "code"),  # an editor's mode line
        ("clip.ts", b"\x47\x40\x00\x10\x00", None),  # MPEG transport stream, not TypeScript
        ("app.min.js", b"var a=1;", None),
        ("README.Debian", b"Notes for Debian", "text"),
        ("changelog.Debian", b"pkg (1.0) unstable", "text"),
        ("notes.Debian", b"words", None),
        ("LICENSE.png", b"\x89PNG\r\n", None),
        ("image.png", b"\x89PNG\r\n", None),
        ("blob", b"\x00\x00", None),
    ],
)
def test_sniff_chooses_one_format(path, head, expected):
    chosen = sniff(BUILTINS, path, head)
    assert (chosen.name if chosen else None) == expected
    assert sniff(list(reversed(BUILTINS)), path, head) is chosen


def test_sniff_prefers_higher_priority_then_name():
    class Loud:
        name, dataset, priority = "loud", "ax-loud", 50

        def accepts(self, rel_path, head):
            return rel_path.endswith(".md")

        def parse(self, rel_path, data, mtime_ms):
            return []

    assert sniff([*BUILTINS, Loud()], "a.md", b"").name == "loud"
    assert sniff([*BUILTINS, Loud()], "a.txt", b"").name == "text"


def test_parse_file_skips_unknown_and_wraps_plugin_bugs():
    assert parse_file(BUILTINS, "image.png", b"\x89PNG", MTIME) is None

    class Buggy:
        name, dataset = "buggy", "ax-buggy"

        def accepts(self, rel_path, head):
            return True

        def parse(self, rel_path, data, mtime_ms):
            raise KeyError("oops")

    with pytest.raises(FormatError) as caught:
        parse_file([Buggy()], "a.bug", b"", MTIME)
    assert caught.value.path == "a.bug" and "buggy" in caught.value.reason and "KeyError" in caught.value.reason


def test_a_gzip_file_is_read_as_what_it_holds_under_its_own_path():
    guide = gzip.compress(b"# Guide\n\nSee [[setup]].\n\n## Part\n\ntext\n")
    docs = parse_file(BUILTINS, "docs/guide.md.gz", guide + gzip.compress(b"\n## Two\n\nmore\n"), MTIME)
    assert [(d.doc_id, d.section, d.format) for d in docs] == [
        ("docs/guide.md.gz", "", "markdown"), ("docs/guide.md.gz#guide", "Guide", "markdown"),
        ("docs/guide.md.gz#part", "Part", "markdown"), ("docs/guide.md.gz#two", "Two", "markdown")]
    assert {d.ax_path for d in docs} == {"docs/guide.md.gz"}  # every member read, the path the stored file's
    news = parse_file(BUILTINS, "pkg/NEWS.gz", gzip.compress("Version 2 — naïve fixes\n".encode()), MTIME)
    assert [(d.doc_id, d.format, d.title, d.text) for d in news] == [
        ("pkg/NEWS.gz", "text", "NEWS", "Version 2 — naïve fixes")]
    # a .gz that is not gzip is judged by its own name, as any file; and a name of nothing but .gz holds no name
    assert parse_file(BUILTINS, "notes.gz", b"plain words", MTIME) is None
    assert parse_file(BUILTINS, ".gz", gzip.compress(b"words"), MTIME) is None
    # content no format reads stays unread
    assert parse_file(BUILTINS, "image.png.gz", gzip.compress(b"\x89PNG\r\n"), MTIME) is None
    # an attachment's parent follows its message to the stored path
    message = EmailMessage()
    message["From"], message["Subject"], message["Message-ID"] = "a@example.org", "Hi", "<m1@example.org>"
    message.set_content("body")
    message.add_attachment(b"notes", maintype="text", subtype="plain", filename="n.txt")
    mail = parse_file(BUILTINS, "inbox/m.eml.gz", gzip.compress(message.as_bytes()), MTIME)
    parents = {d.fields["parent"] for d in mail if "parent" in d.fields}
    assert parents and all(p.startswith("inbox/m.eml.gz") for p in parents)
    assert all(d.doc_id.startswith("inbox/m.eml.gz") for d in mail)


def test_a_damaged_or_expanding_gzip_file_is_its_own_clear_error():
    whole = gzip.compress(b"# Title\n\nwords\n")
    for data, reason in ((b"\x1f\x8b\x08garbage", "not a readable gzip file"),
                         (whole[:-6], "cut short"),
                         (whole + b"junk", "trailing bytes")):
        with pytest.raises(FormatError) as caught:
            parse_file(BUILTINS, "a.md.gz", data, MTIME)
        assert caught.value.path == "a.md.gz" and reason in caught.value.reason
    assert parse_file(BUILTINS, "a.md.gz", whole + b"\0" * 512, MTIME)  # a tar-style zero padding ends it
    bomb = gzip.compress(b"a" * (4 * 1024 * 1024 + 1))  # four kilobytes that expand past the bound below
    with pytest.raises(FormatError, match="decompresses to more than 4 MiB") as caught:
        parse_file(BUILTINS, "big.txt.gz", bomb, MTIME, limit=4 * 1024 * 1024)
    assert caught.value.path == "big.txt.gz" and len(bomb) < 8192
    assert parse_file(BUILTINS, "big.txt.gz", bomb, MTIME)  # within the default bound, a plain file's 64 MiB


def test_hook_xerj_register_formats():
    class Csv:
        name, dataset = "csv", "ax-tables"

        def accepts(self, rel_path, head):
            return rel_path.endswith(".csv")

        def parse(self, rel_path, data, mtime_ms):
            return []

    class CsvPlugin:
        @hookimpl
        def xerj_register_formats(self, register):
            register(Csv())

    pm = get_plugin_manager(load_entrypoints=False, extra_plugins=[("format_csv", CsvPlugin())])
    found = collect_formats(pm)
    assert list(found) == ["csv"] and isinstance(found["csv"], Csv)


def _pm_with(*registrations):
    plugins = []
    for index, fmt in enumerate(registrations):
        class Plugin:
            @hookimpl
            def xerj_register_formats(self, register, _fmt=fmt):
                register(_fmt)

        plugins.append((f"plugin_{index}", Plugin()))
    return get_plugin_manager(load_entrypoints=False, extra_plugins=plugins)


def test_collect_formats_refuses_duplicates_and_bad_names():
    with pytest.raises(PluginError, match="'markdown', which is already registered by plugin 'plugin_[01]'"):
        collect_formats(_pm_with(markdown.MarkdownFormat(), markdown.MarkdownFormat()))

    class Shouting(text.TextFormat):
        dataset = "AX-Notes"

    with pytest.raises(PluginError, match="plugin_0.*dataset"):
        collect_formats(_pm_with(Shouting()))

    class Long(text.TextFormat):
        dataset = "a" * 201  # with a root id appended, longer than an index name may be

    with pytest.raises(PluginError, match="at most 200 characters"):
        collect_formats(_pm_with(Long()))
    with pytest.raises(PluginError, match="not a Format"):
        collect_formats(_pm_with(object()))
    for version in (True, 1.5, ("2",)):
        class Odd(text.TextFormat):
            pass

        Odd.version = version
        with pytest.raises(PluginError, match="format 'text' with a version that is neither an integer nor a string"):
            collect_formats(_pm_with(Odd()))


def test_a_format_s_version_is_part_of_what_a_run_records():
    class Renamed(text.TextFormat):
        version = "2b"

    builtin = format_identities({"text": text.TextFormat()})
    assert "text=xerj_core.autoindex.builtin_formats.text.TextFormat@2" in builtin
    marks = format_identities({"text": Renamed()})
    assert any(mark.endswith("Renamed@2b") for mark in marks)

    class Unversioned:
        name, dataset = "csv", "ax-tables"

        def accepts(self, rel_path, head):
            return False

        def parse(self, rel_path, data, mtime_ms):
            return []

    assert format_identities({"csv": Unversioned()})[0].endswith("Unversioned")


def test_installed_builtin_formats_are_collected():
    found = collect_formats(get_plugin_manager())
    assert {"markdown", "text", "html", "email", "pdf", "code", "notebook", "rst", "tiddlywiki",
            "asciidoc", "enex", "joplin", "epub", "kindle", "docx", "odt", "pptx", "opml", "table",
            "xlsx"} <= set(found)
    assert {found[n].dataset for n in ("markdown", "email", "pdf", "code")} == {"ax-notes", "ax-mail", "ax-pdfs", "ax-code"}


# -- the real vault ----------------------------------------------------------------------


def test_every_foam_file_parses():
    files = sorted(p for p in FOAM.rglob("*") if p.is_file())
    assert len([p for p in files if p.suffix == ".md"]) == 86
    parsed = {}
    for path in files:
        rel = path.relative_to(FOAM).as_posix()
        parsed[rel] = parse_file(BUILTINS, rel, path.read_bytes(), MTIME)
    assert all(docs for docs in parsed.values())
    assert parsed["LICENSE"][0].format == "text"
    index = parsed["index.md"]
    assert index[0].title == "What is Foam?" and index[1].section == "What is Foam?"
    assert sum(len(docs) for docs in parsed.values()) > 500


# -- text helpers ------------------------------------------------------------------------


def test_tokenize_is_lowercase_unicode_words():
    assert tokenize("Hello, Wörld_1 — naïve café!") == ["hello", "wörld_1", "naïve", "café"]
    assert tokenize("") == []


def test_slugify_like_forge_anchors():
    assert slugify("Key Features") == "key-features"
    assert slugify("What is Foam?") == "what-is-foam"
    assert slugify("Über uns") == "über-uns"
    assert slugify("!!!") == ""


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("/home/me/foam-docs", "foam-docs"),
        ("/home/me/My Notes/", "my-notes"),
        ("/x/Café Crème", "cafe-creme"),
        ("/x/a..b", "a.b"),
        ("/x/-._lead", "lead"),
        ("/x/project-edges", "project"),
        ("/x/日本", "brain"),
        ("/", "brain"),
    ],
)
def test_derive_brain_name(folder, expected):
    name = derive_brain_name(folder)
    assert name == expected and is_valid_brain_name(name)


def test_brain_name_is_cut_to_the_limit():
    assert len(derive_brain_name("/x/" + "a" * 300)) == 200


def test_formats_module_exports_the_error():
    assert formats_module.FormatError is FormatError


# -- bad input never escapes as anything but FormatError ----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ_PATHS = ["n.md", "t.txt", "README", "p.html", "m.eml", "b.mbox", "d.pdf", "Cargo.toml", "m.py", "l.rs", "m.go",
              "Makefile", "README.Debian", "n.ipynb"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(FUZZ_PATHS), data=st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_any_bytes_parse_or_raise_format_error(path, data):
    # the format itself, not parse_file (which would wrap a stray exception): only FormatError may escape
    for prefix in (b"", b"From x\n", b"%PDF-1.4\n", b"---\n", b"<html>", b"#!/bin/sh\n", b"#!/usr/bin/env python3\n"):
        fmt = sniff(BUILTINS, path, (prefix + data)[:1024])
        if fmt is None:
            continue
        try:
            docs = fmt.parse(path, prefix + data, MTIME)
        except FormatError as exc:
            assert exc.reason
        else:
            assert docs[0].doc_id == path


# The formats of whole exports and packages, each with what opens a file it reads: any bytes after that (or in the
# package's main part) parse or raise FormatError, never another exception.
PACKAGED = {
    "e.enex": (enex.EnexFormat(), lambda data: b"<?xml version='1.0'?><en-export><note><content><![CDATA[" + data),
    "o.opml": (opml.OpmlFormat(), lambda data: b"<opml><body><outline text='" + data),
    "My Clippings.txt": (kindle.KindleFormat(), lambda data: b"Book (A)\n- Your Highlight | Added on x\n\n" + data),
    f"{'a' * 32}.md": (joplin.JoplinFormat(), lambda data: b"T\n\n" + data + b"\n\nid: x\ntype_: 1"),
    "t.csv": (table.TableFormat(), lambda data: b"a,b\n" + data),
    "w.docx": (docx.DocxFormat(), lambda data: make_zip({"word/document.xml": f"<w:document {W_NS}><w:body>".encode()
                                                                           + data})),
    "w.odt": (odt.OdtFormat(), lambda data: make_zip({"content.xml": data})),
    "s.pptx": (pptx.PptxFormat(), lambda data: make_zip({"ppt/presentation.xml": data})),
    "b.epub": (epub.EpubFormat(), lambda data: make_zip({"META-INF/container.xml": data})),
    "x.xlsx": (xlsx.XlsxFormat(), lambda data: make_zip({"xl/workbook.xml": data})),
}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(sorted(PACKAGED)), data=st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_any_export_or_package_parses_or_raises_format_error(path, data):
    fmt, wrapped = PACKAGED[path]
    for payload in (data, wrapped(data)):
        try:
            docs = fmt.parse(path, payload, MTIME)
        except FormatError as exc:
            assert exc.reason
        else:
            assert docs[0].doc_id == path


# A mailbox's separator lines as one pattern finds them, a lookbehind tried at every byte (the reference).
SEPARATOR_LINES = re.compile(rb"(?:\A|(?<=\n\n)|(?<=\n\r\n))From \S+[ \t][^\n]*?\d{1,2}:\d{2}[^\n]*$", re.M)
MAILBOX_PIECES = [b"\n", b"\r\n", b"\r", b"\n\n", b"From ", b"From a@b Mon Jan  1 00:00:00 2024", b">From ", b"x", b" ",
                  b"\t", b"12:34", b"9:5"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(MAILBOX_PIECES), max_size=40).map(b"".join))
def test_a_mailbox_is_cut_where_the_reference_pattern_finds_separator_lines(data):
    assert list(email._separators(data)) == [m.start() for m in SEPARATOR_LINES.finditer(data)]


APPENDED_PIECES = [*MAILBOX_PIECES, b"Subject: s\n", b"Message-ID: <1@x>\n", b"In-Reply-To: <1@x>\n",
                   b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi\n--b--\n"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(APPENDED_PIECES), max_size=40).map(lambda pieces: b"From a@b Mon Jan  1 00:00:00 2024\n"
                                                                   + b"".join(pieces)),
       st.floats(min_value=0, max_value=1))
def test_a_mailbox_read_from_its_appended_bytes_is_what_reading_it_whole_gives(data, where):
    """Wherever a mailbox was cut when it was read before, reading the rest on its own gives the whole file's
    documents, or declines (and the whole file is read)."""
    fmt = email.EmailFormat()
    start = max(6, min(len(data) - 1, int(len(data) * where)))  # an earlier read began with "From "
    before = fmt.parse("box.mbox", data[:start], MTIME)
    got = fmt.parse_appended("box.mbox", data, start, before, MTIME + 1)
    assert got is None or got == fmt.parse("box.mbox", data, MTIME + 1)


# Pieces of address header values: names, quotes, comments, groups, encoded words, folds, bytes no charset reads.
ADDRESS_PIECES = ["Ada", " ", "Ada Lovelace", '"Lovelace, Ada"', "<ada@example.org>", "ada@example.org", ",", ", ",
                  "(comment)", "list:", ";", "=?utf-8?q?Ad=C3=A9?=", "=?utf-8?b?w6k=?=", "=?bogus?x?y?=", "\n ",
                  "\r\n\t", "<>", "<a@b", "@", "\"", "\\", "\u00e9", "\udce9", "[1.2.3.4]", ".",
                  "undisclosed-recipients:;"]


# ... and of the others read without the policy's parser: dates, message ids, subjects.
VALUE_PIECES = [*ADDRESS_PIECES, "Mon, 06 Jan 2025 10:00:00 +0000", "6 Jan 2025 10:00 -0000",
                "Mon, 31 Feb 2025 25:61:00 +9999", "Tue, 1 Jul 2003 10:52:37 +0200", "GMT", "UT", "+0000", "2025",
                "Jan", "<1@x>", "<a.b@c.d>", "<x>", "<", ">", "re:", "Re: [list] ", "\t", "  ", "=", "?", "'", "abc",
                "\x7f", "\x01", "\x1c", "Dec 99"]


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["From", "to", "Cc", "Reply-To", "Sender", "Date", "Subject", "Message-ID", "In-Reply-To",
                        "References"]),
       st.lists(st.sampled_from(VALUE_PIECES), max_size=12).map("".join))
def test_a_header_read_without_the_policy_reads_as_the_message_reads_it(name, value):
    msg = email_module.message_from_string(f"X-Seen: 1\n{name}: {value}\n\nbody\n", policy=email._POLICY)
    assert email._header(msg, name.lower()) == email._header_text(msg, name.lower())
    assert email._header(msg, name.lower()) == email._header(msg, name.lower())  # remembered: the same again


@pytest.mark.parametrize("value", ["6 Jan 2025 10:00 -0000", "Tue, 1 Jul 2003 10:52:37 +0200", "1 Jul 2003 10:52 GMT",
                                   "Tue,\n 1 Jul 2003\n\t10:52:37 +0200", "Mon, 31 Feb 2025 25:61:00 +9999",
                                   "Mon, 06 Jan 2025 10:00:00 +0000 (UTC)", "yesterday"])
def test_a_date_read_without_the_policy_is_formatted_as_the_policy_formats_it(value):
    msg = email_module.message_from_string(f"Date: {value}\n\nbody\n", policy=email._POLICY)
    assert email._header(msg, "date") == email._header_text(msg, "date")


def test_a_gmail_export_keeps_each_messages_labels_and_thread():
    data = (b"From 1781234567890123456@xxx Mon Dec 02 10:29:44 +0000 2024\n"
            b"X-GM-THRID: 1781234567890123456\n"
            b'X-Gmail-Labels: Inbox,Important,"Trips, 2024",Category Updates\n'
            b"From: Ada <ada@example.org>\nSubject: Rome\nMessage-ID: <1@x>\n\nthe tickets\n\n"
            b"From 1781234567890123457@xxx Mon Dec 02 11:00:00 +0000 2024\n"
            b"X-GM-THRID: 1781234567890123456\n"
            b"X-Gmail-Labels: Gesendet\n"
            b"From: Bob <bob@example.org>\nSubject: Re: Rome\nMessage-ID: <2@x>\n\nthanks\n\n"
            b"From a@b Mon Dec 02 12:00:00 2024\nFrom: Cy <cy@example.org>\nSubject: no labels\n\nhi\n")
    card, first, second, third = email.EmailFormat().parse("All mail Including Spam and Trash.mbox", data, MTIME)
    assert card.fields["messages"] == 3
    assert first.fields["labels"] == ["Inbox", "Important", "Trips, 2024", "Category Updates"]
    assert second.fields["labels"] == ["Gesendet"]
    assert first.fields["gmail_thread"] == second.fields["gmail_thread"] == "1781234567890123456"
    assert "labels" not in third.fields and "gmail_thread" not in third.fields


@pytest.mark.parametrize(("value", "labels"), [
    ("Inbox,Important,Opened,Category Updates", ["Inbox", "Important", "Opened", "Category Updates"]),
    (" Spam, Inbox ", ["Spam", "Inbox"]), ('"\\\\Sent"', ["\\Sent"]), ('a,"b \\"c\\", d",e', ["a", 'b "c", d', "e"]),
    ("", []), (",, ,", []), ('"open, x', ['"open', "x"])])
def test_gmail_labels_are_split_at_commas_outside_quotes(value, labels):
    assert email.gmail_labels(value) == labels


APPLE_MAIL = Path(__file__).parent / "fixtures/apple-mail"


def test_apple_mail_messages_are_read_as_eml_files():
    fmt = email.EmailFormat()
    assert fmt.accepts("Mail/V10/x/INBOX.mbox/Data/Messages/1.emlx", b"3685\n") and \
        fmt.accepts("Messages/1.partial.emlx", b"12\n")
    (message,) = fmt.parse("Messages/114862.emlx", (APPLE_MAIL / "Messages/114862.emlx").read_bytes(), MTIME)
    assert message.doc_id == "Messages/114862.emlx" and message.kind == "message" and message.title == "Lorem ipsum"
    assert message.fields["date"] == "Fri, 26 Jan 2018 17:44:31 +0100" and "plist" not in message.text
    assert message.text.startswith("Lorem ipsum dolor sit amet")
    # a partial message: Mail stored its attachment apart (Attachments/<id>/), the message names it
    card, attachment = fmt.parse("Messages/465622.partial.emlx",
                                 (APPLE_MAIL / "Messages/465622.partial.emlx").read_bytes(), MTIME)
    assert card.title.startswith("\u3010151\u59d4\u54e1\u4f1a\u3011") and attachment.kind == "attachment"
    assert attachment.title == "7.10_\u7b2c2\u56de\u7814\u7a76\u4f1a.pdf"
    assert attachment.fields["parent"] == "Messages/465622.partial.emlx" and attachment.fields["size"] == 0
    with pytest.raises(FormatError, match="opens with its message's length"):
        fmt.parse("x.emlx", b"this is an invalid .emlx structure\n", MTIME)
    # a count past the end keeps what there is; the property list after the message is not part of it
    (short,) = fmt.parse("y.emlx", b"999\nSubject: s\nMessage-ID: <1@x>\n\nbody\n", MTIME)
    assert short.title == "s" and short.text == "body"


def test_messages_appended_to_a_mailbox_are_read_alone_and_the_last_one_again(tmp_path):
    box = mailbox.mbox(tmp_path / "box.mbox")
    for n in range(1, 4):
        box.add(make_message(f"Note {n}", f"<{n}@x>"))
    box.flush()
    data = (tmp_path / "box.mbox").read_bytes()
    fmt = email.EmailFormat()
    before = fmt.parse("box.mbox", data, MTIME)
    box.add(make_message("Note 4", "<4@x>"))
    box.flush()
    grown = (tmp_path / "box.mbox").read_bytes() + b"\nFrom x Mon Jan  1 00:00:00 2001\nnot a header at all\n"
    read = []
    parse_message = email._parse_message
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(email, "_parse_message", lambda raw: read.append(raw) or parse_message(raw))
        got = fmt.parse_appended("box.mbox", grown, len(data), before, MTIME + 1)
    assert got == fmt.parse("box.mbox", grown, MTIME + 1)
    assert len(read) == 3 and got[0].fields["messages"] == 5 and got[0].fields["malformed_messages"] == [5]
    assert {doc.mtime_ms for doc in got} == {MTIME + 1}
    assert fmt.parse_appended("box.mbox", b"X" + grown[1:], len(data), before, MTIME) is None  # not a mailbox now
    eml = fmt.parse("one.eml", make_message("Hi", "<9@x>").as_bytes(), MTIME)
    assert fmt.parse_appended("one.eml", b"From a@b Mon Jan  1 00:00:00 2024\n\n", 5, eml, MTIME) is None


@pytest.mark.parametrize("markup", [b"<![\x00", b"a<![ bogus >b", b"x<!", b"<![CDATA[x]]>y"])
def test_html_survives_malformed_declarations(markup):
    (doc,) = html.HtmlFormat().parse("p.html", markup, MTIME)
    assert "<![ bogus" not in doc.text


# Lines a heading walk must tell apart: levels, too many hashes, indents of 0-4 spaces, tabs, closing hashes,
# empty labels, carriage returns and other line-like separators that only ``\n`` splits, and fence markers.
_HEADING_PIECES = ["#", "##", "######", "#######", " ", "   ", "    ", "\t", "\n", "\r", "\x0b", "\x85", "\u2028",
                   "a", "é", "x y", "#x", " #", "## T ##", "\\#", "`", "``", "```", "~~", "~~~", "````", "- ", "-",
                   "* ", "+\t", "\t- "]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_HEADING_PIECES), max_size=16).map("".join))
def test_headings_of_a_body_without_fences_are_the_line_walks(body):
    # an unclosed fence opened after the last line hides nothing before it, but sends the body down the line walk
    # (a body with no fence marker takes one regex pass): both must find the same headings at the same offsets
    assert markdown.headings(body) == markdown.headings(body + "\n```")


def test_markdown_sections_are_the_documents_document_makes():
    data = b"---\ntitle: T\naliases: [a, b]\n---\npre\n# One\ntext\n## Two ##\nmore\n### \n## One\n"
    docs = markdown.MarkdownFormat().parse("d/n.md", data, MTIME)
    fmt = markdown.MarkdownFormat()
    expected = [
        markdown.document(fmt, "d/n.md", MTIME, doc_id=f"d/n.md#{anchor}", title="T", text=text, section=label,
                          kind="section", ordinal=ordinal, level=level, anchor=anchor)
        for ordinal, (anchor, text, label, level) in enumerate([
            ("one", "# One\ntext", "One", 1), ("two", "## Two ##\nmore", "Two", 2), ("section", "###", "", 3),
            ("one-1", "## One", "One", 2)], 1)]
    assert docs[1:] == expected
    assert [list(doc.fields) for doc in docs[1:]] == [["ordinal", "level", "anchor"]] * 4


def test_an_eml_that_opens_with_an_envelope_line_is_one_message(tmp_path):
    """Thunderbird saves a message with its mbox envelope line on top: still a message whose card is the file."""
    msg = bytes(make_message("Saved", "<s@x>"))
    card, = email.EmailFormat().parse("saved.eml", b"From - Sat Dec 05 10:00:00 2026\n" + msg, MTIME)
    assert (card.doc_id, card.kind, card.title, card.fields["message_id"]) == ("saved.eml", "message", "Saved", "<s@x>")
    two = b"From - Sat Dec 05 10:00:00 2026\n" + msg + b"\nFrom - Sat Dec 05 10:01:00 2026\n" + msg
    card, *messages = email.EmailFormat().parse("two.eml", two, MTIME)
    assert card.kind == "file" and [m.doc_id for m in messages] == ["two.eml#msg-1", "two.eml#msg-2"]
    with pytest.raises(FormatError):
        email.EmailFormat().parse("bare.eml", b"From - Sat Dec 05 10:00:00 2026\njust words\n", MTIME)
