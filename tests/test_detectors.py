"""Detectors: the conformance suite for each built-in, the real Foam vault, and each detector's rules."""

from __future__ import annotations

import json
import mailbox
import posixpath
import re
from collections import Counter, defaultdict
from email.message import EmailMessage
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core import hookimpl, termrank
from xerj_core.autoindex.detect import (
    QUOTE_MAX,
    Corpus,
    DetectorState,
    collect_detectors,
    combine,
    detect_file,
    line_at,
    make_draft,
    mask_code,
    run_detectors,
    summarize,
)
from xerj_core.autoindex.builtin_formats import html as html_format
from xerj_core.autoindex.formats import collect_formats, parse_file
from xerj_core.errors import PluginError
from xerj_core.model import EdgeDraft, Evidence
from xerj_core.plugins import get_plugin_manager
from xerj_core.testing.detectors import AbstractDetectorTests, detect_directly, parse_files
from xerj_detectors import (
    adoclink,
    canvas,
    cratecite,
    emailthread,
    enexlink,
    href,
    imports,
    joplin,
    mdlink,
    orglink,
    pathcite,
    pyref,
    rstlink,
    samedir,
    sequence,
    sharedterm,
    wikilink,
)

FOAM = Path(__file__).parents[1].parent / "shared/corpora/foam-docs"
TEN = ("wikilink", "mdlink", "href", "pathcite", "cratecite", "sequence", "samedir", "sharedterm", "emailthread",
       "imports", "rstlink", "orglink", "canvas", "pyref", "adoclink", "enexlink", "joplin")
ALL = [
    wikilink.WikilinkDetector(), mdlink.MdlinkDetector(), href.HrefDetector(), pathcite.PathciteDetector(),
    cratecite.CrateciteDetector(), sequence.SequenceDetector(), samedir.SamedirDetector(),
    sharedterm.SharedtermDetector(), emailthread.EmailthreadDetector(), imports.ImportsDetector(),
    rstlink.RstlinkDetector(), orglink.OrglinkDetector(), canvas.CanvasDetector(), pyref.PyrefDetector(),
    adoclink.AdoclinkDetector(), enexlink.EnexlinkDetector(), joplin.JoplinDetector(),
]


# -- corpora ---------------------------------------------------------------------------


def message(subject, msgid, *, in_reply_to=None, references=(), attachment=None):
    msg = EmailMessage()
    msg["From"] = "ada@example.org"
    msg["To"] = "bob@example.org"
    msg["Subject"] = subject
    msg["Date"] = "Mon, 06 Jan 2025 10:00:00 +0000"
    msg["Message-ID"] = msgid
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = " ".join(references)
    msg.set_content(f"About {subject}.")
    if attachment:
        msg.add_attachment(attachment[1], filename=attachment[0])
    return msg


def mbox_bytes(tmp_path, messages) -> bytes:
    path = tmp_path / "thread.mbox"
    box = mailbox.mbox(str(path))
    for msg in messages:
        box.add(msg)
    box.close()
    return path.read_bytes()


def filler(index: int, words: str = "") -> bytes:
    """A note of words only it uses (so they are never distinctive across files), plus ``words``."""
    own = " ".join(f"w{index}x{k}" for k in range(6))
    return f"# Note {index}\n\n{own} {words}\n".encode()


def vocabulary_corpus(extra: dict[int, str], size: int = 30) -> dict[str, bytes]:
    return {f"notes/n{i:03d}.md": filler(i, extra.get(i, "")) for i in range(size)}


@pytest.fixture(scope="module")
def foam_files():
    formats = collect_formats(get_plugin_manager())
    files = {}
    for path in sorted(p for p in FOAM.rglob("*") if p.is_file()):
        rel = path.relative_to(FOAM).as_posix()
        docs = parse_file(formats, rel, path.read_bytes(), path.stat().st_mtime_ns // 1_000_000)
        if docs:
            files[rel] = docs
    return files


@pytest.fixture(scope="module")
def foam_result(foam_files):
    return run_detectors(ALL, foam_files)


def edges_of(result, edge_type):
    return [e for e in result.edges if e.type == edge_type]


# -- the conformance suite for each built-in -----------------------------------------------


class TestWikilinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return wikilink.WikilinkDetector()

    @pytest.fixture
    def plugin(self):
        return wikilink

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "a.md": b"# A\n\nSee [[b]], [[B#Part|the part]] and ![[sub/c.md]].\n\n`[[b]]` in code.\n",
            "b.md": b"# B\n\n## Part\n\nBack to [[a]].\n",
            "sub/c.md": "# C\n\nUnicode \u00e9 before [[A]].\n".encode(),
        })


class TestMdlinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return mdlink.MdlinkDetector()

    @pytest.fixture
    def plugin(self):
        return mdlink

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "a.md": b"# A\n\nRead [b](b.md), [the part](sub/c.md#part) and [web](https://x.org/b.md).\n\n[ref]: b.md\n",
            "b.md": b"# B\n\nUp: [a](/a.md \"title\").\n",
            "sub/c.md": b"# C\n\n## Part\n\n[back](../a.md)\n",
        })


class TestOrglinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return orglink.OrglinkDetector()

    @pytest.fixture
    def plugin(self):
        return orglink

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "a.org": b":PROPERTIES:\n:ID: a-id\n:END:\n#+title: A\n\n"
                     b"See [[id:b-id][B]] and [[file:sub/c.org::*Part]].\n",
            "b.org": b":PROPERTIES:\n:ID: b-id\n:END:\n#+title: B\n\nBack to [[id:a-id][A]].\n",
            "sub/c.org": b"#+title: C\n* Part\nUp: [[../a.org][a]], [[https://x.org][web]].\n",
        })


BOARD = (b'{"nodes": [{"id": "a", "type": "file", "file": "a.md"}, {"id": "b", "type": "file", "file": "sub/b.md",'
         b' "subpath": "#Part"}, {"id": "t", "type": "text", "text": "why"}, {"id": "n", "type": "file", "file": "a.md",'
         b' "subpath": "#Nowhere"}], "edges": [{"id": "e", "fromNode": "a", "toNode": "b", "label": "feeds"},'
         b' {"id": "f", "fromNode": "t", "toNode": "a"}]}')


class TestCanvasDetectorConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return canvas.CanvasDetector()

    @pytest.fixture
    def plugin(self):
        return canvas

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"boards/plan.canvas": BOARD, "a.md": b"# A\n", "sub/b.md": b"# B\n\n## Part\n"})


def test_canvas_links_a_board_to_what_it_shows_and_an_arrow_to_both_ends():
    files = {"boards/plan.canvas": BOARD, "a.md": b"# A\n", "sub/b.md": b"# B\n\n## Part\n"}
    drafts = run(canvas.CanvasDetector(), files)
    found = {(e.src, e.dst, e.evidence.quote) for e in drafts}
    # a.md and a.md#Nowhere (no such heading) are one target: detect's own one-draft-per-claim check holds it
    assert found == {("boards/plan.canvas", "a.md", "plan shows a.md"),
                     ("boards/plan.canvas", "sub/b.md#part", "plan shows sub/b.md#Part"),
                     ("boards/plan.canvas#arrow-1", "a.md", "a → b: feeds"),
                     ("boards/plan.canvas#arrow-1", "sub/b.md#part", "a → b: feeds")}
    # the vault indexed from one of its folders: the board's vault paths are found as path endings
    inner = {f"vault/{path}": data for path, data in files.items()}
    moved = {(e.src, e.dst) for e in run(canvas.CanvasDetector(), inner)}
    assert moved == {("vault/" + src, "vault/" + dst) for src, dst, _quote in found}


class TestHrefConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return href.HrefDetector()

    @pytest.fixture
    def plugin(self):
        return href

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "site/index.html": b"<p>Go to <a href='bread.html'>bread</a></p><p><a href='/site/img/'><img></a></p>",
            "site/bread.html": b"<p>Home is <a href=\"index.html?x=1\">here</a> and <a href='http://x.org/'>away</a>.</p>",
            "site/img/index.html": b"<p>pictures</p>",
        })


class TestPathciteConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return pathcite.PathciteDetector()

    @pytest.fixture
    def plugin(self):
        return pathcite

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "README.md": b"# Readme\n\nStart with `docs/setup.md`, then notes.txt.\n",
            "notes.txt": b"Setup is in docs/setup.md; see also https://x.org/docs/setup.md.\n",
            "docs/setup.md": b"# Setup\n\nBack to ../README.md please.\n",
        })


class TestCrateciteConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return cratecite.CrateciteDetector()

    @pytest.fixture
    def plugin(self):
        return cratecite

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "crates/xerj-api/Cargo.toml": b'[package]\nname = "xerj-api"\n',
            "crates/store/Cargo.toml": b'[package]\nname = "xerj-storage"\n',
            "ARCH.md": b"# Architecture\n\nxerj-api calls the store crate (xerj_storage).\n",
            "crates/xerj-api/src/lib.rs": b"// xerj-api: code never cites\n",
        })


class TestSequenceConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return sequence.SequenceDetector()

    @pytest.fixture
    def plugin(self):
        return sequence

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"guide.md": b"intro\n# One\n\ntext\n## Two\n\nmore\n# Three\n", "single.md": b"no sections\n"})


class TestSamedirConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return samedir.SamedirDetector()

    @pytest.fixture
    def plugin(self):
        return samedir

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"d/a.md": b"a", "d/b.md": b"b", "d/c.txt": b"c", "e/x.md": b"x", "top.md": b"t"})


class TestSharedtermConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return sharedterm.SharedtermDetector()

    @pytest.fixture
    def plugin(self):
        return sharedterm

    @pytest.fixture
    def corpus_files(self):
        return parse_files(vocabulary_corpus({3: "ferments lactobacillus", 17: "lactobacillus ferments cabbage"}))


class TestEmailthreadConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return emailthread.EmailthreadDetector()

    @pytest.fixture
    def plugin(self):
        return emailthread

    @pytest.fixture
    def corpus_files(self, tmp_path):
        root = message("Lunch?", "<1@x>", attachment=("menu.txt", "soup"))
        reply = message("Re: Lunch?", "<2@x>", in_reply_to="<1@x>")
        return parse_files({"mail/thread.mbox": mbox_bytes(tmp_path, [root, reply]),
                            "mail/late.eml": bytes(message("Re: Re", "<3@x>", in_reply_to="<2@x>"))})


SPHINX = {
    "docs/index.rst": b"""Project
=======

.. toctree::
   :maxdepth: 2
   :caption: Contents

   install
   Usage guide <guide/usage>
   /api/reference
   self
   guide/*
   https://example.org/elsewhere

See :doc:`the FAQ <faq>` and :doc:`/guide/usage`.
""",
    "docs/install.rst": b".. _install-guide:\n\nInstall\n=======\n\n.. include:: /snippets/note.txt\n\n"
                        b".. image:: logo.png\n\n.. _Proxy Setup:\n\nBehind a proxy\n--------------\n\nSee :ref:`faq`.\n",
    "docs/guide/usage.rst": b"Usage\n=====\n\nBack to :doc:`../index`, then :doc:`missing`.\n\n"
                            b".. literalinclude:: ../../src/app.py\n",
    "docs/api/reference.rst": b"Reference\n=========\n",
    "docs/faq.rst": b".. _faq:\n\nFAQ\n===\n\nRead :ref:`install-guide`, :ref:`the proxy <proxy  setup>` and "
                    b":ref:`nowhere`.\n",
    "docs/snippets/note.txt": b"Shared note.\n",
    "src/app.py": b"print('hi')\n",
}


class TestRstlinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return rstlink.RstlinkDetector()

    @pytest.fixture
    def plugin(self):
        return rstlink

    @pytest.fixture
    def corpus_files(self):
        return parse_files(SPHINX)


ANTORA = {
    "docs/modules/ROOT/pages/index.adoc": b"= Docs\n\nStart with xref:install.adoc[], the "
                                          b"xref:cli:options.adoc#verbose[flag],"
                                          b" xref:guide/setup.adoc#_run_it[] and <<install.adoc#,Install>>.\n\n"
                                          b"== More\n\nAn id here: <<install>>, xref:more[], xref:#more[].\n"
                                          b"include::partial$legal.adoc[]\ninclude::example$hello.rb[]\n"
                                          b"Another component: xref:asciidoc:toc:position.adoc[].\n",
    "docs/modules/ROOT/pages/install.adoc": b"= Install\n\n----\nxref:index.adoc[] is an example\n----\n"
                                            b"// xref:index.adoc[] commented\nSee `xref:index.adoc[]`.\n\n"
                                            b"```\nxref:index.adoc[] in a Markdown-style fence\n```\n",
    "docs/modules/ROOT/pages/guide/setup.adoc": b"= Setup\n\n== Run it\n\nBack: xref:./../index.adoc[].\n"
                                                b"include::snippet.adoc[]\n",
    "docs/modules/ROOT/pages/guide/snippet.adoc": b"Included beside its page.\n",
    "docs/modules/ROOT/partials/legal.adoc": b"Legal text.\n",
    "docs/modules/ROOT/examples/hello.rb": b"puts 'hello'\n",
    "docs/modules/ROOT/nav.adoc": b"* xref:index.adoc[]\n** xref:guide/setup.adoc[]\n",
    "docs/modules/cli/pages/options.adoc": b"= Options\n\n[#verbose]\n== -v\n\nMore output.\n",
    "book/main.adoc": b"= Book\n\ninclude::chapters/one.adoc[]\n\nSee <<chapters/one#_first_steps,one>> and "
                      b"<<chapters/one.adoc#,again>>.\n",
    "book/chapters/one.adoc": b"= One\n\n== First steps\n\nx\n",
}


def test_adoclink_follows_xrefs_angle_references_and_includes_of_antora_and_plain_trees():
    found = sorted((e.src, e.dst) for e in run(adoclink.AdoclinkDetector(), ANTORA))
    assert found == [
        ("book/main.adoc", "book/chapters/one.adoc"),  # include, and <<chapters/one.adoc#,again>>
        ("book/main.adoc", "book/chapters/one.adoc#first-steps"),  # the generated id of "First steps"
        ("docs/modules/ROOT/nav.adoc", "docs/modules/ROOT/pages/guide/setup.adoc"),
        ("docs/modules/ROOT/nav.adoc", "docs/modules/ROOT/pages/index.adoc"),
        ("docs/modules/ROOT/pages/guide/setup.adoc#run-it", "docs/modules/ROOT/pages/guide/snippet.adoc"),
        ("docs/modules/ROOT/pages/guide/setup.adoc#run-it", "docs/modules/ROOT/pages/index.adoc"),  # ./../
        ("docs/modules/ROOT/pages/index.adoc", "docs/modules/ROOT/pages/guide/setup.adoc#run-it"),
        ("docs/modules/ROOT/pages/index.adoc", "docs/modules/ROOT/pages/install.adoc"),
        ("docs/modules/ROOT/pages/index.adoc", "docs/modules/cli/pages/options.adoc#-v"),  # cli's, by its [#verbose]
        ("docs/modules/ROOT/pages/index.adoc#more", "docs/modules/ROOT/examples/hello.rb"),
        ("docs/modules/ROOT/pages/index.adoc#more", "docs/modules/ROOT/partials/legal.adoc"),
    ]


class TestAdoclinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return adoclink.AdoclinkDetector()

    @pytest.fixture
    def plugin(self):
        return adoclink

    @pytest.fixture
    def corpus_files(self):
        return parse_files(ANTORA)


def _enex(*notes: tuple[str, str]) -> bytes:
    """An Evernote export of ``(title, ENML body)`` notes."""
    return ("<?xml version=\"1.0\"?><en-export>" + "".join(
        f"<note><title>{title}</title><content><![CDATA[<en-note>{body}</en-note>]]></content></note>"
        for title, body in notes) + "</en-export>").encode()


def _note_link(guid: str, text: str) -> str:
    return f'<a href="evernote:///view/1/s1/{guid}/{guid}/">{text}</a>'


GUID_A, GUID_B, GUID_R = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002", \
    "cccccccc-0000-4000-8000-000000000003"
EVERNOTE_EXPORTS = {
    # two notebooks of one account, exported side by side; a copy of one elsewhere shares its titles
    "account/Kitchen.enex": _enex(
        ("Bread", f"<div>Start from {_note_link(GUID_A, 'Starter')}; oven in {_note_link(GUID_B, 'Oven notes')}.</div>"
                  f"<div>Old name: {_note_link(GUID_A, 'Levain')}; and {_note_link(GUID_R, 'Renamed since')}.</div>"),
        ("Starter", "<div>Fed at 8.</div>"),
        ("Untitled", f"<div>{_note_link(GUID_B, 'Untitled')}</div>")),
    "account/Appliances.enex": _enex(("Oven notes", f"<div>Back to {_note_link(GUID_R, 'Rye')}</div>"),
                                     ("Untitled", "<div>x</div>")),
    "account/Rye.enex": _enex(("Rye", "<div>Rye bread.</div>")),
    "copy/Appliances.enex": _enex(("Oven notes", "<div>an old copy</div>"), ("Starter", "<div>another</div>")),
}


def test_enexlink_follows_note_links_by_the_title_they_show_then_by_guid():
    found = sorted((e.src, e.dst, e.evidence.quote) for e in run(enexlink.EnexlinkDetector(), EVERNOTE_EXPORTS)
                   if e.type == "note_link")
    assert found == [
        # Starter: its own export's, over the copy's; Oven notes: the one in the same folder; Levain names no note
        # and Renamed since none either, but their guids are those of links that name one note each
        ("account/Appliances.enex#note-1", "account/Rye.enex#note-1", "Back to Rye"),
        ("account/Kitchen.enex#note-1", "account/Appliances.enex#note-1", "Start from Starter; oven in Oven notes."),
        ("account/Kitchen.enex#note-1", "account/Kitchen.enex#note-2", "Start from Starter; oven in Oven notes."),
        ("account/Kitchen.enex#note-1", "account/Rye.enex#note-1", "Old name: Levain; and Renamed since."),
    ]
    # "Untitled" names the linking note itself in its own export, and its guid no one note ("Oven notes" names two
    # in the corpus): no edge, rather than one to another export's Untitled note
    untitled = [(e.src, e.dst) for e in run(enexlink.EnexlinkDetector(), EVERNOTE_EXPORTS)
                if e.src == "account/Kitchen.enex#note-3"]
    assert untitled == []
    # a guid whose links name two notes names neither
    torn = {"a.enex": _enex(("One", _note_link(GUID_A, "Two")), ("Two", _note_link(GUID_A, "Three")),
                            ("Three", ""), ("Four", _note_link(GUID_A, "Gone")))}
    assert sorted((e.src, e.dst) for e in run(enexlink.EnexlinkDetector(), torn)) == [
        ("a.enex#note-1", "a.enex#note-2"), ("a.enex#note-2", "a.enex#note-3")]


def test_enexlink_joins_a_note_to_its_attachments():
    data = ("<en-export><note><title>Scan</title><content><![CDATA[<en-note><div>see</div></en-note>]]></content>"
            "<resource><data>aGk=</data><mime>text/plain</mime><resource-attributes><file-name>a.txt</file-name>"
            "</resource-attributes></resource></note></en-export>").encode()
    edges = run(enexlink.EnexlinkDetector(), {"n.enex": data})
    assert [(e.type, e.src, e.dst, e.evidence.quote, e.confidence) for e in edges] == [
        ("note_attachment", "n.enex#note-1", "n.enex#note-1.res-1", "Scan carries attachment a.txt", 0.99)]


class TestEnexlinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return enexlink.EnexlinkDetector()

    @pytest.fixture
    def plugin(self):
        return enexlink

    @pytest.fixture
    def corpus_files(self):
        return parse_files(EVERNOTE_EXPORTS)


def _joplin(item_id: str, kind: int, title: str = "", body: str = "", **props: str) -> tuple[str, bytes]:
    """A Joplin item as its sync target keeps it: ``(<id>.md, its bytes)``."""
    head = f"{title}\n\n{body}\n\n" if body else (f"{title}\n\n" if title else "")
    lines = [f"id: {item_id}", *(f"{key}: {value}" for key, value in props.items()), f"type_: {kind}"]
    return f"joplin/{item_id}.md", (head + "\n".join(lines)).encode()


J_NOTE, J_OTHER, J_BOOK, J_SUB, J_TAG, J_PHOTO = (f"{n:x}" * 32 for n in range(10, 16))
JOPLIN_SYNC = dict([
    _joplin(J_NOTE, 1, "Bread", f"Start from [the starter](:/{J_OTHER}#feeding) and ![photo](:/{J_PHOTO}).",
            parent_id=J_SUB),
    _joplin(J_OTHER, 1, "Starter", "Fed daily.\n\n## Feeding\n\nAt 8.", parent_id=J_BOOK),
    _joplin(J_BOOK, 2, "Kitchen", parent_id=""), _joplin(J_SUB, 2, "Baking", parent_id=J_BOOK),
    _joplin(J_TAG, 5, "sourdough"), _joplin(J_PHOTO, 4, "photo.jpg", mime="image/jpeg"),
    _joplin("1" * 32, 6, note_id=J_NOTE, tag_id=J_TAG), _joplin("2" * 32, 6, note_id=J_OTHER, tag_id=J_TAG),
    _joplin("3" * 32, 6, note_id=J_NOTE, tag_id="9" * 32),  # a tag that is not in the folder
    _joplin("4" * 32, 6, note_id=J_NOTE, tag_id=J_OTHER),  # a tag id naming a note: no tag
    ("joplin/0-start.md", b"# Before\n"), ("joplin/readme.md", b"# Readme\n"), ("joplin/zz.md", b"# After\n"),
])


def test_joplin_joins_notes_to_their_notebooks_and_tags():
    found = sorted((e.type, e.src, e.dst, e.evidence.quote) for e in run(joplin.JoplinDetector(), JOPLIN_SYNC))
    path = "joplin/{}.md".format
    assert found == [
        ("notebook", path(J_NOTE), path(J_SUB), "Bread is in notebook Baking"),
        ("notebook", path(J_OTHER), path(J_BOOK), "Starter is in notebook Kitchen"),
        ("notebook", path(J_SUB), path(J_BOOK), "Baking is in notebook Kitchen"),
        ("tagged", path(J_NOTE), path(J_TAG), "Bread is tagged sourdough"),
        ("tagged", path(J_OTHER), path(J_TAG), "Starter is tagged sourdough"),
    ]


def test_mdlink_follows_joplins_item_links_and_samedir_leaves_its_items_out():
    links = sorted((e.src, e.dst) for e in run(mdlink.MdlinkDetector(), JOPLIN_SYNC))
    assert links == [(f"joplin/{J_NOTE}.md", f"joplin/{J_OTHER}.md#feeding"),
                     (f"joplin/{J_NOTE}.md", f"joplin/{J_PHOTO}.md")]
    # the items' order in the folder is their random ids': only the two Markdown notes beside them are chained
    assert [(e.src, e.dst) for e in run(samedir.SamedirDetector(), JOPLIN_SYNC)] == [("joplin/readme.md",
                                                                                      "joplin/zz.md")]


def test_mdlink_follows_a_notion_exports_page_addresses_to_the_pages_it_exported():
    home, garden = "Home 1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6", "Garden 4d5e6f7a8b9c40d1e2f3a4b5c6d7e8f9"
    files = {
        f"{home}.md": (f"# Home\n\n[Projects](Home%201a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6/Projects%20"
                       f"2b3c4d5e6f7a48b9c0d1e2f3a4b5c6d7.md), [Garden](https://www.notion.so/Garden-"
                       f"4d5e6f7a8b9c40d1e2f3a4b5c6d7e8f9?pvs=21), [again](https://www.notion.so/acme/"
                       f"4d5e6f7a8b9c40d1e2f3a4b5c6d7e8f9#5e6f), [gone](https://notion.so/Gone-"
                       f"6f7a8b9c0d1e42f3a4b5c6d7e8f9a0b1) and [not a page](https://notion.so/x-{'0' * 31})"
                       f".\n").encode(),
        f"{home}/Projects 2b3c4d5e6f7a48b9c0d1e2f3a4b5c6d7.md": b"# Projects\n",
        f"{garden}.md": b"# Garden\n",
    }
    found = sorted((e.src, e.dst, e.evidence.offset) for e in run(mdlink.MdlinkDetector(), files))
    # the Garden page once (its two addresses), Projects by its relative path; a page not exported links nothing
    assert [(src, dst) for src, dst, _ in found] == [
        (f"{home}.md#home", f"{garden}.md"),
        (f"{home}.md#home", f"{home}/Projects 2b3c4d5e6f7a48b9c0d1e2f3a4b5c6d7.md")]


class TestJoplinDetectorConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return joplin.JoplinDetector()

    @pytest.fixture
    def plugin(self):
        return joplin

    @pytest.fixture
    def corpus_files(self):
        return parse_files(JOPLIN_SYNC)


PYTHON_DOCS = {
    "src/shop/__init__.py": b"from .cart import Cart\nfrom .money import total\n\ndef version():\n    return 1\n",
    "src/shop/cart.py": b"class Cart:\n    def add(self, item):\n        pass\n\n\ndef empty():\n    return Cart()\n",
    "src/shop/money.py": b"def total(items):\n    return sum(items)\n\n\ndef version():\n    return 0\n",
    "src/shop/base/__init__.py": b"",
    "src/shop/base/cart2.py": b"class Cart:\n    pass\n\n\nclass Basket:\n    pass\n",
    "examples/app/shop.py": b"def total():\n    return 0\n",
    "docs/api.rst": b"API\n===\n\n.. module:: shop\n\n.. autoclass:: Cart\n   :members:\n\n"
                    b"Money\n-----\n\n.. autofunction:: total\n\nUse :func:`~shop.money.total` or :py:meth:`Cart.add`, "
                    b"not :func:`!total`, :class:`os.PathLike` or :func:`version <shop.version>`.\n\n"
                    b"C API\n-----\n\n:c:func:`total`, :cpp:class:`Cart` and :func:`!shop.money.total` "
                    b"are not links.\n",
    "docs/guide.rst": b"Guide\n=====\n\n.. currentmodule:: shop\n\n"
                      b"Call :func:`empty`, :func:`cart.empty` and :func:`money.total()`; "
                      b":class:`Basket` lives in :mod:`shop.base`.\n",
    "docs/usage.md": b"# Usage\n\n```{currentmodule} shop.base\n```\n\n"
                     b"A {class}`Basket`, or a {py:class}`shop.Cart`.\n",
    "README.md": b"# Shop\n\nNot a reference: `shop.Cart`, :func:shop.total.\n",
}


def test_pyref_links_sphinx_python_references_to_the_code_defining_them():
    """Roles and directives of the Python domain (reST and MyST) land on the definition's section of the module
    its dotted name names, src/ layout and all; a package stands for its modules' definitions (the shallowest);
    a module set by a directive is tried first, beyond it only; outside names, !names and other domains' roles
    link nothing."""
    found = sorted((e.src, e.dst, e.evidence.quote) for e in run(pyref.PyrefDetector(), PYTHON_DOCS))
    assert [(src, dst) for src, dst, _quote in found] == sorted([
        ("docs/api.rst#api", "src/shop/__init__.py"),  # .. module:: shop
        ("docs/api.rst#api", "src/shop/cart.py#cart"),  # .. autoclass:: Cart, under shop: cart.py's, not deep's
        ("docs/api.rst#money", "src/shop/__init__.py#version"),  # Title <shop.version>: its own, not money's
        ("docs/api.rst#money", "src/shop/cart.py#cart"),  # :py:meth:`Cart.add` on its class
        ("docs/api.rst#money", "src/shop/money.py#total"),  # autofunction, and ~shop.money.total
        ("docs/guide.rst#guide", "src/shop/base/__init__.py"),  # :mod:`shop.base`
        ("docs/guide.rst#guide", "src/shop/base/cart2.py#basket"),
        ("docs/guide.rst#guide", "src/shop/cart.py#empty"),  # empty and cart.empty under shop
        ("docs/guide.rst#guide", "src/shop/money.py#total"),  # money.total()
        ("docs/usage.md#usage", "src/shop/cart.py#cart"),  # {py:class}`shop.Cart`
        ("docs/usage.md#usage", "src/shop/base/cart2.py#basket"),  # {class}`Basket` under shop.base
    ])
    quotes = {dst: quote for src, dst, quote in found if src == "docs/api.rst#money"}
    assert quotes["src/shop/money.py#total"] == ".. autofunction:: total"


def test_pyref_names_modules_from_their_package_and_the_nearest_of_two():
    """A file outside any package is a top-level module; of two files with one module name, the one nearest the
    document; a name under a set module that the code does not define links nothing, not the module."""
    files = {
        "a/docs/x.rst": b"X\n=\n\n.. currentmodule:: tool\n\n:func:`tool.run` and :func:`missing`.\n",
        "a/tool.py": b"def run():\n    pass\n\n\ndef other():\n    pass\n", "b/tool.py": b"def run():\n    pass\n",
        "b/my-tool/c.py": b"def run():\n    pass\n",
        "b/my-pkg/__init__.py": b"", "b/my-pkg/mod.py": b"def unnamed():\n    pass\n",  # no importable name
    }
    assert [(e.src, e.dst) for e in run(pyref.PyrefDetector(), files)] == [("a/docs/x.rst", "a/tool.py#run")]
    corpus_files = parse_files(files)
    detector = pyref.PyrefDetector()
    partials = [detector.summarize(docs) for docs in corpus_files.values()]
    names = detector.combine(partials, Corpus(corpus_files)).data
    assert names["m tool"] == ("a/tool.py", "b/tool.py") and names["m c"] == ("b/my-tool/c.py",)
    assert not any(key.startswith("m my-pkg") for key in names)
    assert not any(key.startswith("b ") for key in names)  # no importable package holds a module here
    assert "d a/tool.py run" in names and "d a/tool.py other" not in names  # only what a document names is kept
    without_docs = {path: data for path, data in files.items() if not path.endswith(".rst")}
    corpus_files = parse_files(without_docs)
    partials = [detector.summarize(docs) for docs in corpus_files.values()]
    assert detector.combine(partials, Corpus(corpus_files)).data == {}  # no document refers: no map is built


def test_pyref_reads_the_roles_docstrings_write_under_their_own_module():
    """A docstring's :class:`Cart` is looked up under its file's module first; a class naming itself is no edge;
    source files' directive-like lines and other languages' files are not read."""
    files = {
        "src/shop/__init__.py": b"",
        "src/shop/cart.py": b'class Cart:\n    """A cart; see :class:`Cart` and :func:`shop.money.total`."""\n\n\n'
                            b'def empty():\n    """An empty :class:`Cart` (:func:`~.total` is not here)."""\n'
                            b'    return Cart()\n',
        "src/shop/money.py": b'def total(items):\n    """Sums {class}`shop.cart.Cart` items.\n\n'
                             b'    .. autofunction:: shop.cart.empty\n    """\n    return sum(items)\n',
        "src/web.js": b"// :class:`shop.cart.Cart`\nexport const x = 1;\n",
    }
    found = sorted((e.src, e.dst) for e in run(pyref.PyrefDetector(), files))
    assert found == [("src/shop/cart.py#cart", "src/shop/money.py#total"),
                     ("src/shop/cart.py#empty", "src/shop/cart.py#cart"),
                     ("src/shop/money.py#total", "src/shop/cart.py#cart")]


class TestPyrefConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return pyref.PyrefDetector()

    @pytest.fixture
    def plugin(self):
        return pyref

    @pytest.fixture
    def corpus_files(self):
        return parse_files(PYTHON_DOCS)


MYST = {
    "docs/index.md": b"# Project\n\n```{toctree}\n:maxdepth: 2\n\ninstall\nUsage guide <guide/usage>\n```\n\n"
                     b"See {doc}`the FAQ <faq>`, {ref}`proxy <proxy-setup>`, {doc}`/guide/usage.md` and "
                     b"{doc}`more/extra.md`.\n\n"
                     b"```{include} ../CHANGES.md\n```\n\n(not-a-heading)=\nA paragraph's label.\n",
    "docs/install.md": b"(install-guide)=\n\n(setup)=\n# Install\n\nx\n\n(proxy-setup)=\n## Behind a proxy\n\n"
                       b"Back to {ref}`not-a-heading` and {ref}`Install <install-guide>`.\n",
    "docs/guide/usage.md": b"# Usage\n\n:::{toctree}\n../faq\n:::\n\n`{ref}` alone is no role; {ref}`nowhere`.\n",
    "docs/faq.rst": b".. _faq:\n\nFAQ\n===\n\nRead :ref:`setup` (a MyST label, from reStructuredText).\n",
    "CHANGES.md": b"# Changes\n", "docs/more/extra.md": b"# Extra\n",
}


def test_rstlink_reads_myst_markdown_as_sphinx_does():
    """A Sphinx project in Markdown (MyST): {doc} and {ref} roles, {toctree} and {include} fences, and the (label)=
    targets a {ref} names, before a heading (its section) or in a paragraph (the section holding it), found from
    Markdown and reStructuredText alike."""
    found = sorted((e.src, e.dst) for e in run(rstlink.RstlinkDetector(), MYST))
    assert found == [
        ("docs/faq.rst#faq", "docs/install.md#install"),
        ("docs/guide/usage.md#usage", "docs/faq.rst"),
        ("docs/index.md#project", "CHANGES.md"),
        ("docs/index.md#project", "docs/faq.rst"),
        ("docs/index.md#project", "docs/guide/usage.md"),
        ("docs/index.md#project", "docs/install.md"),
        ("docs/index.md#project", "docs/install.md#behind-a-proxy"),
        ("docs/index.md#project", "docs/more/extra.md"),  # a name written with its extension
        ("docs/install.md#behind-a-proxy", "docs/index.md#project"),  # (not-a-heading)= is in Project's section
        ("docs/install.md#behind-a-proxy", "docs/install.md#install"),
    ]
    labels = {doc.section: doc.fields.get("labels") for doc in parse_files(MYST)["docs/install.md"]}
    assert labels == {"": None, "Install": ["install-guide", "setup"], "Behind a proxy": ["proxy-setup"]}


def test_rstlink_follows_toctrees_doc_roles_and_directives_of_a_tree_below_the_folder():
    edges = run(rstlink.RstlinkDetector(), SPHINX)
    found = {(e.src, e.dst) for e in edges}
    assert found == {
        ("docs/index.rst#project", "docs/install.rst"),  # a toctree entry, relative
        ("docs/index.rst#project", "docs/guide/usage.rst"),  # a titled one (and a rooted :doc: to it)
        ("docs/index.rst#project", "docs/api/reference.rst"),  # rooted at the source folder, below the indexed one
        ("docs/index.rst#project", "docs/faq.rst"),  # :doc:`title <name>`
        ("docs/install.rst#install", "docs/snippets/note.txt"),  # a rooted include
        ("docs/guide/usage.rst#usage", "docs/index.rst"),  # :doc:`../index`
        ("docs/guide/usage.rst#usage", "src/app.py"),  # a literalinclude out of the tree
        ("docs/install.rst#behind-a-proxy", "docs/faq.rst#faq"),  # :ref: lands on the section its label opens
        ("docs/faq.rst#faq", "docs/install.rst#install"),
        ("docs/faq.rst#faq", "docs/install.rst#behind-a-proxy"),  # "the proxy <proxy  setup>": Sphinx's compare
    }  # self, a glob, a URL, an image not indexed, :doc:`missing` and :ref:`nowhere` name nothing
    quotes = {e.dst: e.evidence.quote for e in edges if e.src == "docs/index.rst#project"}
    assert quotes["docs/guide/usage.rst"] == "Usage guide <guide/usage>"
    assert quotes["docs/faq.rst"] == "See :doc:`the FAQ <faq>` and :doc:`/guide/usage`."
    assert all(e.type == "rstlink" and e.detector == "rstlink@3" for e in edges)


PEPS = {
    "peps/pep-0008.rst": b"PEP: 8\nTitle: Style Guide\n\nIntroduction\n============\n\n"
                         b"See :pep:`257` for docstrings.\n\nNaming Conventions\n==================\n\nNames.\n",
    "peps/pep-0257.rst": b"PEP: 257\n\nDocstrings\n==========\n\nAs :pep:`8` says, and :pep:`the naming part "
                         b"<8#naming-conventions>`; :pep:`0008` again, :pep:`9999` (no such file) and :pep:`abc`.\n",
    "peps/pep-0020.md": b"# Zen\n\nMyST: {pep}`257`.\n",
    "docs/whatsnew.rst": b"What's new\n==========\n\nThe walrus, :pep:`572`; the style, :pep:`8`.\n",
}


def test_rstlink_links_a_pep_role_to_the_peps_file():
    """:pep:`8` (also titled, zero-padded, with an anchor, and MyST's {pep}) names peps/pep-0008.*, or the section
    its anchor names; a PEP with no file and a role that is no number name nothing."""
    edges = run(rstlink.RstlinkDetector(), PEPS)
    assert sorted((e.src, e.dst) for e in edges) == [
        ("docs/whatsnew.rst#whats-new", "peps/pep-0008.rst"),
        ("peps/pep-0008.rst#introduction", "peps/pep-0257.rst"),
        ("peps/pep-0020.md#zen", "peps/pep-0257.rst"),
        ("peps/pep-0257.rst#docstrings", "peps/pep-0008.rst"),
        ("peps/pep-0257.rst#docstrings", "peps/pep-0008.rst#naming-conventions"),
    ]
    quote = {e.dst: e.evidence.quote for e in edges}["peps/pep-0008.rst#naming-conventions"]
    assert ":pep:`the naming part <8#naming-conventions>`" in quote


class TestImportsConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return imports.ImportsDetector()

    @pytest.fixture
    def plugin(self):
        return imports

    @pytest.fixture
    def corpus_files(self):
        return parse_files({
            "pkg/__init__.py": b"from .core import run\n",
            "pkg/core.py": b"import os\nfrom . import util\n\ndef run():\n    from pkg.util import helper\n",
            "pkg/util.py": b"def helper():\n    pass\n",
            "web/app.ts": b"import { run } from './lib/run';\n",
            "web/lib/run.ts": b"export const run = () => 1;\n",
        })


# -- the real vault -------------------------------------------------------------------------


def _dir_parts(path: str) -> list[str]:
    directory = posixpath.dirname(path)
    return directory.split("/") if directory else []


def _steps(a: str, b: str) -> int:
    x, y = _dir_parts(a), _dir_parts(b)
    common = 0
    while common < min(len(x), len(y)) and x[common] == y[common]:
        common += 1
    return len(x) + len(y) - 2 * common


def _strip_code(text: str) -> str:
    kept, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"``[^`]*``|`[^`]*`", "", line))
    return "\n".join(kept)


def expected_wikilink_pairs(root: Path) -> set[tuple[str, str]]:
    """An independent reading of the vault: (linking file, linked file) for every resolvable [[link]]."""
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    pairs = set()
    for src in paths:
        if not src.endswith(".md"):
            continue
        body = (root / src).read_text(encoding="utf-8")
        if body.startswith("---\n"):
            body = body[body.index("\n---", 3) + 4 :]
        for inner in re.findall(r"\[\[([^\[\]\n]+?)\]\]", _strip_code(body)):
            target = inner.split("|")[0].rstrip("\\").split("#")[0].strip().lower()
            if not target:
                continue
            if target.endswith(".md"):
                target = target[:-3]
            if "/" in target:
                found = [p for p in paths if p.lower().rsplit(".", 1)[0] == target]
                found = found or [p for p in paths if p.lower().rsplit(".", 1)[0].endswith("/" + target)]
            else:
                found = [p for p in paths if posixpath.basename(p).lower().rsplit(".", 1)[0] == target]
                found = found or [p for p in paths if posixpath.basename(p).lower() == target]
            if found:
                pairs.add((src, min(found, key=lambda p: (_steps(src, p), p))))
    return pairs


def test_foam_wikilinks_match_an_independent_resolution(foam_files, foam_result):
    corpus = Corpus(foam_files)
    found = {(e.evidence.source, corpus.document(e.dst).ax_path) for e in edges_of(foam_result, "wikilink")}
    expected = expected_wikilink_pairs(FOAM)
    assert len(expected) > 100
    assert found == expected


def test_foam_every_edge_has_evidence_and_provenance(foam_files, foam_result):
    docs = {d.doc_id: d for file_docs in foam_files.values() for d in file_docs}
    assert len(foam_result.edges) > 1000
    for edge in foam_result.edges:
        assert edge.src != edge.dst and edge.dst in docs
        source = docs[edge.src]
        assert edge.evidence.source == source.ax_path
        assert edge.valid_at == foam_files[source.ax_path][0].mtime_ms
        assert 0 < len(edge.evidence.quote) <= QUOTE_MAX
        if edge.evidence.offset:
            assert edge.evidence.quote == line_at(source.text, edge.evidence.offset)
        if edge.type in ("wikilink", "mdlink"):
            assert edge.evidence.offset > 0 or source.text.startswith(("[", "!"))
    types = Counter(e.type for e in foam_result.edges)
    assert {"wikilink", "mdlink", "sequence", "same_dir", "shared_term"} <= set(types)


def test_foam_tags_weights_and_confidences_follow_the_table(foam_result):
    table = {
        "wikilink": ("wikilink@6", 1.0, 0.95), "mdlink": ("mdlink@8", 0.9, 0.9), "href": ("href@4", 0.7, 0.85),
        "pathcite": ("pathcite@1", 0.6, 0.7), "cratecite": ("cratecite@1", 0.5, 0.6),
        "sequence": ("sequence@2", 0.8, 0.99), "same_dir": ("samedir@3", 0.3, 0.4),
        "shared_term": ("sharedterm@2", 0.45, 0.5),
    }
    for edge in foam_result.edges:
        assert (edge.detector, edge.weight, edge.confidence) == table[edge.type]
    by_name = {d.name: d for d in ALL}
    for name, edge_type in [("wikilink", "wikilink"), ("samedir", "same_dir"), ("sharedterm", "shared_term")]:
        assert by_name[name].type == edge_type


def _serialise(edges) -> bytes:
    rows = [
        {"src": e.src, "dst": e.dst, "type": e.type, "detector": e.detector, "weight": e.weight,
         "confidence": e.confidence, "valid_at": e.valid_at, "evidence": e.evidence.to_json()}
        for e in edges
    ]
    return json.dumps(rows, sort_keys=True, ensure_ascii=False).encode()


def test_foam_run_twice_is_byte_identical(foam_files, foam_result):
    formats = collect_formats(get_plugin_manager())
    again = {}
    for rel in reversed(list(foam_files)):
        path = FOAM / rel
        again[rel] = parse_file(formats, rel, path.read_bytes(), path.stat().st_mtime_ns // 1_000_000)
    assert _serialise(run_detectors(ALL, again).edges) == _serialise(foam_result.edges)


def test_foam_shared_terms_are_the_same_whichever_ranking_finds_them(foam_files, foam_result, monkeypatch):
    """sharedterm unions a file's words and numbers the corpus's with the compiled term ranking when there is one
    (``xerj_core.termrank``); Python's dict and sort must give the same links, terms and rationales."""
    monkeypatch.setattr(termrank, "ENABLED", not termrank.ENABLED)
    again = run_detectors([sharedterm.SharedtermDetector()], foam_files)
    assert edges_of(foam_result, "shared_term")
    assert _serialise(edges_of(again, "shared_term")) == _serialise(edges_of(foam_result, "shared_term"))


def test_foam_shared_terms_are_the_same_whichever_candidate_search_finds_them(foam_files, foam_result, monkeypatch):
    """sharedterm counts its candidates compiled where it was built (``_meetings.c``); numpy's dense blocks must
    give the same links, terms, rationales and refused count."""
    first = run_detectors([sharedterm.SharedtermDetector()], foam_files)
    monkeypatch.setattr(sharedterm, "COMPILED", not sharedterm.COMPILED)
    again = run_detectors([sharedterm.SharedtermDetector()], foam_files)
    assert edges_of(foam_result, "shared_term") and first.counters["edges_capped"] > 0
    assert _serialise(edges_of(again, "shared_term")) == _serialise(edges_of(foam_result, "shared_term"))
    assert again.counters == first.counters


def test_foam_samedir_is_a_chain_in_path_order(foam_files, foam_result):
    same_dir = edges_of(foam_result, "same_dir")
    by_dir = defaultdict(list)
    for path in foam_files:
        by_dir[posixpath.dirname(path)].append(path)
    assert len(same_dir) == sum(len(v) - 1 for v in by_dir.values())
    out_degree = Counter(e.src for e in same_dir)
    in_degree = Counter(e.dst for e in same_dir)
    assert max(out_degree.values()) == 1 and max(in_degree.values()) == 1
    chain = {e.src: e.dst for e in same_dir}
    for directory, paths in by_dir.items():
        ordered = sorted(paths)
        assert [chain.get(p) for p in ordered] == ordered[1:] + [None]
    edge = next(e for e in same_dir if e.src == "user/features/backlinking.md")
    assert edge.dst == "user/features/block-anchors.md"
    assert edge.evidence.quote == "backlinking.md and block-anchors.md share directory user/features"
    assert edge.evidence.offset == 0


def test_foam_sequence_follows_reading_order(foam_files, foam_result):
    index = [d.doc_id for d in foam_files["index.md"]]
    seq = {e.src: e for e in edges_of(foam_result, "sequence") if e.evidence.source == "index.md"}
    walked, at = [index[0]], index[0]
    while at in seq:
        at = seq[at].dst
        walked.append(at)
    assert walked == index
    assert seq["index.md"].evidence.quote == "What is Foam? opens index.md"
    assert seq["index.md#what-is-foam"].evidence.quote == "What is Foam? precedes Key Features of index.md"
    assert all(e.evidence.offset == 0 for e in seq.values())


def test_foam_shared_terms_respect_the_cap_and_name_their_terms(foam_result):
    shared = edges_of(foam_result, "shared_term")
    degree = Counter([e.src for e in shared] + [e.dst for e in shared])
    assert shared and max(degree.values()) <= 5
    assert foam_result.counters["edges_capped"] > 0
    for edge in shared:
        assert "#" not in edge.src and "#" not in edge.dst  # file cards only
        assert edge.src < edge.dst
        assert re.fullmatch(rf"{re.escape(edge.src)} and {re.escape(edge.dst)} share \d+ distinctive terms: .+",
                            edge.evidence.quote)


def test_xerj_disable_plugins_turns_sharedterm_off(monkeypatch):
    monkeypatch.setenv("XERJ_DISABLE_PLUGINS", "sharedterm")
    names = set(collect_detectors(get_plugin_manager()))
    assert "sharedterm" not in names
    assert set(TEN) - {"sharedterm"} <= names


def test_a_files_map_output_leaves_out_what_gives_nothing_and_each_combine_still_gets_one_per_file():
    """A run holds one map output per file until it combines: a detector whose partial is None is left out of it
    (most files give most corpus-wide detectors nothing), and combine hands that detector None for the file."""
    files = parse_files({"a.md": b"# A\n\nsome words here\n", "b.py": b"import a\n"})
    outputs = [summarize(ALL, files[path]) for path in sorted(files)]
    assert all(None not in output.values() for output in outputs) and "pyref" in outputs[1]
    assert "pyref" not in outputs[0] and "rstlink" not in outputs[0]
    seen = []

    class Counting:
        name = "counting"

        def summarize(self, file_docs):
            return None

        def combine(self, partials, corpus):
            seen.extend(partials)
            return DetectorState(data={})

    combine([*ALL, Counting()], outputs, Corpus(files))
    assert seen == [None, None]


def test_installed_detectors_are_the_ten():
    assert set(TEN) <= set(collect_detectors(get_plugin_manager()))


def test_detection_over_a_thousand_linked_files():
    """Every note's wikilink resolves across 20 folders, and each folder is one same_dir chain.

    Its speed is measured by tests/bench/bench_autoindex.py, not asserted here: a timed assert fails on a
    loaded machine and says nothing about correctness.
    """
    files = {}
    for i in range(1000):
        body = f"# Note {i}\n\nLinks to [[n{(i * 7) % 1000}]] and [next](n{(i + 1) % 1000}.md).\n\n"
        body += f"## Detail\n\nWords w{i} w{i % 37} shared{i % 50} topic{i % 23} and more prose here.\n"
        files[f"d{i % 20}/n{i}.md"] = body.encode()
    formats = collect_formats(get_plugin_manager())
    parsed = {p: parse_file(formats, p, data, 1) for p, data in files.items()}
    edges = run_detectors(ALL, parsed).edges
    wikilinks = {(e.src.split("#")[0], e.dst) for e in edges if e.type == "wikilink"}
    assert wikilinks == {(f"d{i % 20}/n{i}.md", f"d{(i * 7) % 1000 % 20}/n{(i * 7) % 1000}.md") for i in range(1000)}
    assert sum(e.type == "same_dir" for e in edges) == 20 * (50 - 1)


# -- wikilink rules ----------------------------------------------------------------------------


def run(detector, files, mtime=1000):
    return run_detectors([detector], parse_files(files, mtime)).edges


def test_wikilink_resolution_rules():
    files = {
        "a/x/note.md": "---\ntitle: N\n---\n# Note\n\n[[todo]] [[Sourdough]] [[levain|bread]] [[b/todo]] "
                       "[[Missing]] [[sour#Proofing]] [[#Note]] [[../../c]] ![[pic.png]]\n".encode(),
        "a/todo.md": b"# a todo",
        "b/todo.md": b"# b todo",
        "c.md": b"c",
        "a/x/pic.png.md": b"not the image",
        "bake/sourdough.md": b"---\naliases: [levain]\n---\n# Sourdough\n\n## Proofing\n",
        "sour.md": b"# Sour\n\n## Proofing\n",
    }
    dsts = {e.dst for e in run(wikilink.WikilinkDetector(), files) if e.src.startswith("a/x/note.md")}
    assert dsts == {
        "a/todo.md",  # nearest of two todo.md
        "bake/sourdough.md",  # by name, case-insensitive
        "b/todo.md",  # by path
        "sour.md#proofing",  # heading → section
        "c.md",  # relative path
        "a/x/pic.png.md",  # name without the note extension
    } | ({"a/x/note.md#note"} - {"a/x/note.md#note"})  # [[#Note]] from inside #note itself is no edge
    alias = run(wikilink.WikilinkDetector(), {"n.md": b"[[levain]]", "s.md": b"---\naliases: [levain]\n---\n"})
    assert [(e.src, e.dst) for e in alias] == [("n.md", "s.md")]


def test_wikilink_finds_a_name_written_with_other_unicode_forms_or_holding_a_hash():
    """A file copied from macOS keeps its accents decomposed; a link typed to it has them composed. A note may be
    named "C# tips": its "#" is not a heading's when the text before it names no note."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "Café Crème.md")
    assert decomposed != "Café Crème.md"
    files = {
        decomposed: "# Café Crème\n\n## Mousse\n".encode(),
        "C# tips.md": b"# C# tips\n\n## Async\n",
        "C.md": b"# C\n\n## Pointers\n",
        "index.md": "[[café crème]] [[Café Crème#mousse]] [[C# tips]] [[C# tips#Async]] [[C#Pointers]] "
                    "[[c# TIPS#nowhere]] [[C# nothing]]".encode(),
    }
    dsts = sorted(e.dst for e in run(wikilink.WikilinkDetector(), files) if e.src.startswith("index.md"))
    # "c# TIPS#nowhere" lands on the file of the longest name that names a note (C# tips.md, linked already);
    # "C# nothing" names no note but "C", and lands on C.md, as it did before names could hold a "#"
    assert dsts == sorted([decomposed, f"{decomposed}#mousse", "C# tips.md", "C# tips.md#async", "C.md#pointers",
                           "C.md"])
    again = run(wikilink.WikilinkDetector(), {"C.md": b"# C\n\n## tips\n", "C#tips.md": b"x", "i.md": b"[[C#tips]]"})
    assert [e.dst for e in again if e.src == "i.md"] == ["C.md#tips"]  # a heading first, as note-taking tools read


def test_wikilink_lands_block_references_and_heading_paths_on_their_sections():
    """Obsidian's and Foam's ``[[note#^id]]`` (the id ending a line, outside code), Obsidian's heading path
    ``[[note#A#B]]`` and Logseq's ``((uuid))`` (a block's ``id::`` property, in any file) each land on the section
    holding what they name."""
    uuid = "64a1f2c3-0d4e-4f5a-9b6c-7d8e9f0a1b2c"
    files = {
        "b.md": b"# Top\n\nSome finding. ^x1\n\n## Sub\n\nBelow.\n\n"
                b"## Quotes\n\n> A quote\n> ^q-2\n\n```\nnot ^x3\n```\n",
        "pages/Sourdough.md": f"- Feed daily\n\t- Ratio 1:1:1\n\t  id:: {uuid}\n".encode(),
        "a.md": f"# A\n\n[[b#^x1]] [[b#Top#Sub]] [[b#^Q-2]] [[b#^x3]]\n\n## Log\n\nSee (({uuid})) and "
                f"((00000000-0000-0000-0000-000000000000)).\n".encode(),
    }
    found = sorted((e.src, e.dst, e.evidence.offset) for e in run(wikilink.WikilinkDetector(), files)
                   if e.src.startswith("a.md"))
    # [[b#^x3]] names an id only a code example holds: the note itself
    assert found == [("a.md#a", "b.md", 40), ("a.md#a", "b.md#quotes", 29),
                     ("a.md#a", "b.md#sub", 15), ("a.md#a", "b.md#top", 5),
                     ("a.md#log", "pages/Sourdough.md", 12)]


def test_wikilink_reads_dendrons_label_first_links_vault_prefixes_and_note_reference_ranges():
    """Dendron writes ``[[label|target]]`` (its notes named by dotted hierarchy), prefixes a note with its vault
    (``dendron://vault/``) and quotes a range of a note (``![[note#Start,1:#End]]``). A target that names a note
    keeps Obsidian's reading, whatever the label names; a target naming no note is read from the label only when
    it is a note's name, never for a same-file ``#heading``."""
    files = {
        "vault/dendron.topic.lookup.md": b"# Lookup\n\n## Create New Vault\n\nx\n",
        "vault/dendron.topic.md": b"# Topic\n\n## Motivation\n\nWhy.\n\n## Later\n\nz\n\n"
                                  b"## Part 1\n\n## Part 1, 2\n\ny\n",
        "vault/Label.md": b"# Label\n",
        "vault/root.md": b"# Root\n\n[[Lookup|dendron.topic.lookup]] "
                         b"[[New vault|dendron://dendron.site/dendron.topic.lookup#create-new-vault]]\n\n"
                         b"## Refs\n\n![[dendron.topic#motivation,1:#*]] "
                         b"![[dendron://other.vault/dendron.topic#later,1]]"
                         b" [[dendron.topic#Motivation, 2]] [[dendron.topic#part 1, 2]]\n\n"
                         b"## Obsidian\n\n[[dendron.topic|Label]] [[Nothing here|Label]] [[#No such heading|Label]]"
                         b" [[Nothing|Neither]]\n",
    }
    found = sorted((e.src, e.dst) for e in run(wikilink.WikilinkDetector(), files) if e.src.startswith("vault/root"))
    assert found == [
        ("vault/root.md#obsidian", "vault/Label.md"),  # [[Nothing here|Label]]: Dendron's reading
        ("vault/root.md#obsidian", "vault/dendron.topic.md"),  # [[dendron.topic|Label]]: the target, as written
        ("vault/root.md#obsidian", "vault/root.md"),  # [[#No such heading|Label]]: this file, as before
        ("vault/root.md#refs", "vault/dendron.topic.md#later"),
        ("vault/root.md#refs", "vault/dendron.topic.md#motivation"),  # the range's first heading; ", 2" too
        ("vault/root.md#refs", "vault/dendron.topic.md#part-1-2"),  # a heading that ends so is that heading
        ("vault/root.md#root", "vault/dendron.topic.lookup.md"),
        ("vault/root.md#root", "vault/dendron.topic.lookup.md#create-new-vault"),
    ]


def test_wikilink_reads_a_tiddlers_links_label_first_by_title():
    """TiddlyWiki writes [[label|Target]] and links by title, which the file name only approximates; links in
    code are examples; a transclusion {{Tiddler}} links too. A title holding a backslash is matched as written (not
    as a Windows path)."""
    files = {
        "tiddlers/Saving_ on Android.tid": b"tags: [[Filters]] Concepts $:/tags/Missing\ntitle: Saving: on Android"
                                           b"\n\nSee [[Filters]], [[filter|Filters]], "
                                           b"[[Pragma: \\procedure]] and [[the apps|Saving: on Android]].\n\n"
                                           b"```\n[[Nowhere]] [[Filters]]\n```\n",
        "tiddlers/Filters.tid": b"title: Filters\n\nAll about [[runs|Filter Run]]; `[[Filter]]` is code.\n",
        "tiddlers/Filter.tid": b"title: Filter\n\nOne.\n",
        "tiddlers/Pragma_ _procedure.tid": b"title: Pragma: \\procedure\n\nx\n",
        "tiddlers/Table.tid": b"title: Table\n\n{{ListopsData}} {{Card||CardTemplate}} {{Table!!caption}} "
                              b"{{$:/core/ui/Buttons/new}} `{{Filters}}`\n",
        "tiddlers/ListopsData.tid": b"title: ListopsData\n\nx\n", "tiddlers/Card.tid": b"title: Card\n\ny\n",
        "tiddlers/Concepts.tid": b"title: Concepts\n\nWhat is tagged so.\n",
        "tiddlers/CardTemplate.tid": b"title: CardTemplate\n\nz\n",
        "notes/md.md": b"[[filter|Filters]] in Markdown: Obsidian's order, the target first.\n",
    }
    edges = run(wikilink.WikilinkDetector(), files)
    found = sorted((e.src, e.dst, e.evidence.offset) for e in edges)
    assert found == [
        ("notes/md.md", "tiddlers/Filter.tid", 0),
        ("tiddlers/Saving_ on Android.tid", "tiddlers/Concepts.tid", 0),  # a tag: the tiddler of that title
        ("tiddlers/Saving_ on Android.tid", "tiddlers/Filters.tid", 4),  # [[Filters]] and [[filter|Filters]]
        ("tiddlers/Saving_ on Android.tid", "tiddlers/Pragma_ _procedure.tid", 37),
        ("tiddlers/Table.tid", "tiddlers/Card.tid", 16),  # {{Card||CardTemplate}}: the tiddler and its template
        ("tiddlers/Table.tid", "tiddlers/CardTemplate.tid", 16),
        ("tiddlers/Table.tid", "tiddlers/ListopsData.tid", 0),  # a field of itself, a system tiddler, code: none
    ]
    quotes = {e.dst: e.evidence.quote for e in edges if e.src == "tiddlers/Saving_ on Android.tid"}
    # a tag's rationale; a tag the text links too keeps the link's quote
    assert quotes["tiddlers/Concepts.tid"] == "Saving: on Android is tagged Concepts"
    assert quotes["tiddlers/Filters.tid"].startswith("See [[Filters]]")


def test_wikilink_finds_a_github_wiki_page_by_its_hyphenated_file_name():
    """A GitHub wiki (Gollum) names the page [[Hosted assets]] in Hosted-assets.md, anywhere in the wiki, and
    writes [[label|Page-Name]]; a file or alias named with the spaces wins, and a path is not guessed at."""
    files = {
        "Home.md": b"# Home\n\n[[Hosted assets]], [[JavaScript Tracker]], [[Setup Guide|Setting-up-snowplow]], "
                   b"[[Named Note]] and [[setup/Missing page]].\n",
        "setup/common/Hosted-assets.md": b"# Hosted assets\n", "trackers/Javascript-Tracker.md": b"# JS\n",
        "Setting-up-snowplow.md": b"# Setup\n", "Named Note.md": b"# spaces\n", "Named-Note.md": b"# hyphens\n",
        "setup/Missing-page.md": b"# not guessed from a path\n",
    }
    assert sorted(e.dst for e in run(wikilink.WikilinkDetector(), files) if e.src.startswith("Home.md")) == [
        "Named Note.md", "Setting-up-snowplow.md", "setup/common/Hosted-assets.md", "trackers/Javascript-Tracker.md"]


def test_wikilink_finds_a_zettel_by_the_id_opening_its_file_name():
    """A Zettelkasten (The Archive, zettelkasten.de's method, Zettlr) links [[202010121234]] to the note in
    "202010121234 Atomic notes.md"; a note named by the id alone wins, and a number that opens no file name
    before a separator (a date alone, a part of a longer id) names nothing."""
    files = {
        "inbox/202010121234 Atomic notes.md": b"# Atomic notes\n\n[[202010121235]], [[202010121236]], "
                                              b"[[2020101212]], [[20201012]], [[202010121237]] and [[202010121238]].\n",
        "202010121235_Linking-notes.md": b"# Linking\n", "202010121236.md": b"# the id alone\n",
        "202010121236 Other.md": b"# with a title\n", "20201012123799 Longer id.md": b"# not 202010121237\n",
        "2020101212.md": b"# ten digits\n", "202010121238notes.md": b"# no separator\n",
    }
    assert sorted(e.dst for e in run(wikilink.WikilinkDetector(), files) if e.src.startswith("inbox/")) == [
        "2020101212.md", "202010121235_Linking-notes.md", "202010121236.md"]


def test_wikilink_finds_a_textbundles_note_by_its_bundle():
    """Bear and Ulysses export a note as a TextBundle, Bread.textbundle/text.markdown, and link it [[Bread]]."""
    files = {"Bread.textbundle/text.markdown": b"# Bread\n\nUse the [[Sourdough starter]].\n",
             "Sourdough starter.textbundle/text.md": b"# Starter\n\nBack to [[bread]].\n",
             "notes/Bread.md": b"# Not the bundle\n", "notes/index.md": b"# Index\n\n[[Sourdough starter]]\n"}
    assert sorted((e.src, e.dst) for e in run(wikilink.WikilinkDetector(), files)) == [
        ("Bread.textbundle/text.markdown#bread", "Sourdough starter.textbundle/text.md"),
        ("Sourdough starter.textbundle/text.md#starter", "Bread.textbundle/text.markdown"),  # nearer than notes/
        ("notes/index.md#index", "Sourdough starter.textbundle/text.md"),
    ]


def test_wikilink_skips_code_and_quotes_the_full_line():
    files = {"a.md": "# A\n\n```\n[[b]]\n```\nInline `[[b]]` skipped.\n  Real one: [[b]] here é.  \n".encode(),
             "b.md": b"b"}
    (edge,) = run(wikilink.WikilinkDetector(), files)
    section_text = "# A\n\n```\n[[b]]\n```\nInline `[[b]]` skipped.\n  Real one: [[b]] here é."
    assert edge.evidence.quote == "Real one: [[b]] here é."
    assert edge.evidence.offset == section_text.encode().index(b"Real one: [[b]]") + len("Real one: ")


def test_wikilink_links_what_a_notes_properties_name_from_its_card():
    """kepano's vault keeps most of its links in properties (categories, author, up); Obsidian links them."""
    files = {
        "Books/Dune.md": (b'---\ncategories:\n  - "[[Books]]"\nauthor: ["[[Frank Herbert]]", "[[Nobody]]"]\n'
                          b'up: "[[Dune]]"\n---\n# Dune\n\nAs [[Books]] go, one.\n'),
        "Categories/Books.md": b"# Books\n",
        "People/Frank Herbert.md": b"# Frank Herbert\n",
    }
    found = {(e.src, e.dst): (e.evidence.quote, e.evidence.offset) for e in run(wikilink.WikilinkDetector(), files)}
    assert found == {
        ("Books/Dune.md#dune", "Categories/Books.md"): ("As [[Books]] go, one.", 11),  # the text's own link
        ("Books/Dune.md", "Categories/Books.md"): ('categories: "[[Books]]"', 0),
        ("Books/Dune.md", "People/Frank Herbert.md"): ('author: ["[[Frank Herbert]]", "[[Nobody]]"]', 0),
    }


def test_wikilink_lands_an_embedded_obsidian_base_on_its_file():
    files = {"Categories/Books.md": b"# Books\n\n![[Books.base]] and the view ![[Books.base#Shelf]]\n",
             "Templates/Bases/Books.base": b"filters:\n  and:\n    - categories.contains(this)\nviews:\n"}
    found = {(e.src, e.dst) for e in run(wikilink.WikilinkDetector(), files)}
    assert found == {("Categories/Books.md#books", "Templates/Bases/Books.base")}


def test_sharedterm_leaves_a_projects_manifests_and_configs_out():
    """tRPC's example apps each hold a package.json and a tsconfig whose keys (dependencies, scripts, private,
    compilerOptions) made them "share" distinctive terms with each other."""
    manifest = json.dumps({"name": "x", "private": True, "scripts": {"dev": "vite", "build": "tsc"},
                           "dependencies": {"zod": "3"}, "devDependencies": {"typescript": "5"}})
    config = json.dumps({"compilerOptions": {"strict": True, "moduleResolution": "bundler", "jsx": "preserve"}})
    files = vocabulary_corpus({0: "dependencies scripts private", 1: "dependencies scripts private"})
    for k in range(4):
        files[f"examples/e{k}/package.json"] = manifest.replace('"x"', f'"e{k}"').encode()
        files[f"examples/e{k}/tsconfig.json"] = config.encode()
        files[f"examples/e{k}/Cargo.toml"] = b'[package]\nname = "e"\nedition = "2021"\nhomepage = "h"\n'
    edges = run(sharedterm.SharedtermDetector(), files)
    assert {(e.src, e.dst) for e in edges} == {("notes/n000.md", "notes/n001.md")}


def test_mask_code_keeps_offsets():
    data = "a `x` b\n```py\ncode [[y]]\n```\nafter ``z`` é".encode()
    masked = mask_code(data)
    assert len(masked) == len(data)
    assert b"[[y]]" not in masked and b"`x`" not in masked and masked.endswith(("after" + " " * 7 + "é").encode())


# -- other link detectors ------------------------------------------------------------------------


def test_mdlink_resolves_relative_rooted_and_fragment_links():
    files = {
        "docs/guide.md": b"# Guide\n\n[a](../a.md) [b](/b.md) [c](sub/c.md#part-two) [x](https://e.org/a.md) "
                         b"[d](sub/) [n](a) ![img](pic.png)\n\n```\n[code](b.md)\n```\n",
        "a.md": b"a", "b.md": b"b", "docs/sub/c.md": b"# C\n\n## Part two\n", "docs/sub/index.md": b"i",
    }
    dsts = {e.dst for e in run(mdlink.MdlinkDetector(), files)}
    assert dsts == {"a.md", "b.md", "docs/sub/c.md#part-two", "docs/sub/index.md"}


def test_mdlink_leaves_the_definitions_foam_writes_for_wikilinks_to_the_wikilink_detector():
    """Foam ends a note with a definition per [[wikilink]], labelled with its inner text or its target, so that
    plain Markdown renders the wikilink as a link; such a definition is not a second link from the note's last
    section. A definition no wikilink spells still links, and a wikilink in code spells nothing."""
    files = {
        "index.md": b"# Foam\n\nRead our [[principles]], see [[list|foam list]] and [[daily|the daily command]].\n\n"
                    b"## License\n\nMIT, `[[other]]`.\n\n[principles]: principles.md 'Principles'\n"
                    b"[list|foam list]: list.md 'list'\n[daily]: daily.md 'daily'\n[other]: other.md 'Other'\n",
        "principles.md": b"# Principles\n", "list.md": b"# list\n", "daily.md": b"# daily\n", "other.md": b"# Other\n",
    }
    assert [(e.src, e.dst) for e in run(mdlink.MdlinkDetector(), files)] == [("index.md#license", "other.md")]
    assert {e.dst for e in run(wikilink.WikilinkDetector(), files)} == {"principles.md", "list.md", "daily.md"}


def test_mdlink_roots_a_site_link_at_the_folder_above_that_holds_its_target():
    """As npm's docs: pages in docs/content/ link /commands/npm-config, the site rooted at docs/content. The
    indexed folder's root still wins where it names a file; a rooted link climbing out of every folder names none."""
    files = {
        "docs/content/commands/npm-install.md": b"# npm install\n\nSee [config](/commands/npm-config), "
                                                 b"[folders](/configuring-npm/folders#prefix), [b](/b.md), "
                                                 b"[x](/../x.md), [gone](/commands/npm-gone) and [site](/).\n",
        "docs/content/commands/npm-config.md": b"# npm config\n",
        "docs/content/configuring-npm/folders.md": b"# folders\n\n## Prefix\n",
        "b.md": b"b", "docs/content/b.md": b"the site's b", "x.md": b"x",
    }
    dsts = {e.dst for e in run(mdlink.MdlinkDetector(), files)}
    assert dsts == {"docs/content/commands/npm-config.md", "docs/content/configuring-npm/folders.md#prefix", "b.md"}
    files["docs/content/commands/npm-install.md"] = b"# npm install\n\n[config](/commands/npm-config)\n"
    for outer in ("docs/commands/npm-config.md", "commands/npm-config.md"):  # the outermost folder naming one wins
        files[outer] = b"# config\n"
        assert [e.dst for e in run(mdlink.MdlinkDetector(), files)] == [outer]


def test_mdlink_reads_a_sites_folder_url_as_the_page_published_there():
    """As Hugo's docs: [format](/content-management/formats/) names content/en/content-management/formats.md (the
    page Hugo publishes at that URL), and a section's folder URL its _index.md. A folder holding an index page
    names that page first; a folder URL naming neither names nothing."""
    files = {
        "content/en/templates/lookup.md": b"# Lookup\n\n[format][f], [shortcodes](/shortcodes/), [docs](/docs/) "
                                          b"[intro](../intro/#why) and [gone](/gone/).\n\n"
                                          b"[f]: /content-management/formats/#list\n",
        "content/en/content-management/formats.md": b"# Formats\n\n## List\n",
        "content/en/shortcodes/_index.md": b"# Shortcodes\n", "content/en/shortcodes.md": b"# not the section\n",
        "content/en/docs/index.md": b"# Docs\n", "content/en/docs.md": b"# not the index\n",
        "content/en/intro.md": b"# Intro\n\n## Why\n",
    }
    dsts = sorted(e.dst for e in run(mdlink.MdlinkDetector(), files))
    assert dsts == ["content/en/content-management/formats.md#list", "content/en/docs/index.md",
                    "content/en/intro.md#why", "content/en/shortcodes/_index.md"]


def test_mdlink_reads_jekyll_and_hugo_address_templates_and_the_addresses_pages_declare():
    """A Jekyll site links pages by address, through templates: {{ '/x/' | relative_url }} and {{ site.baseurl }}
    (an address a page declares as its permalink, else a collection's document: /docs/x/ is _docs/x.md, and a
    post's dated address the post of _posts/ so named),
    {% link %} from the site's source, {% post_url %} a post by its name; Hugo writes {{< ref >}}."""
    files = {
        "site/index.md": b"# Home\n\n[Options]({{ '/docs/configuration/options/' | relative_url }}), "
                         b"[about]({{ site.baseurl }}/about/#team), [install]({% link _docs/install.md %}), "
                         b"[news]({% post_url 2024-01-15-hello %}), "
                         b"[tutorial]({{ '/tutorials/first/' | relative_url }})"
                         b" and [elsewhere]({{ site.repository }}/issues/1).\n\n[def]: {{ '/about' | relative_url }}\n"
                         b"\n## Posts\n\n[older](/news/2023/12/01/older-news/)\n\n## By html\n\n"
                         b"[older](/2023/12/01/older-news.html)\n",
        "site/_docs/configuration/options.md": b"---\npermalink: /docs/configuration/options/\n---\n# Options\n",
        "site/pages/about.md": b"---\npermalink: /about/\n---\n# About\n\n## Team\n\n[install]({% link "
                               b"_docs/install.md %}) and [options](/docs/configuration/options/index.html)\n",
        "site/_docs/install.md": b"# Install\n", "site/_posts/2024-01-15-hello.markdown": b"# Hello\n",
        "site/_tutorials/first.md": b"# First\n", "site/_posts/news/2023-12-01-older-news.md": b"# Older\n",
        "site/notes/2023-12-01-older-news.md": b"# not a post\n",
        "hugo/content/post.md": b"# Post\n\nSee [a]({{< ref \"about.md\" >}}) and [b]({{< relref \"/docs/b\" >}}).\n",
        "hugo/content/about.md": b"# About\n", "hugo/content/docs/b.md": b"# B\n",
    }
    found = sorted((e.src, e.dst, e.evidence.quote[:20]) for e in run(mdlink.MdlinkDetector(), files))
    assert [(src, dst) for src, dst, _quote in found] == sorted([
        ("hugo/content/post.md#post", "hugo/content/about.md"),
        ("hugo/content/post.md#post", "hugo/content/docs/b.md"),
        ("site/index.md#home", "site/_docs/configuration/options.md"),
        ("site/index.md#home", "site/_docs/install.md"),
        ("site/index.md#home", "site/_posts/2024-01-15-hello.markdown"),
        ("site/index.md#home", "site/_tutorials/first.md"),
        ("site/index.md#home", "site/pages/about.md"),  # [def]: {{ '/about' | relative_url }}: the page, declared
        ("site/index.md#home", "site/pages/about.md#team"),
        ("site/index.md#by-html", "site/_posts/news/2023-12-01-older-news.md"),
        ("site/index.md#posts", "site/_posts/news/2023-12-01-older-news.md"),  # a post's address, by its name
        ("site/pages/about.md#team", "site/_docs/configuration/options.md"),  # its .../index.html
        ("site/pages/about.md#team", "site/_docs/install.md"),  # from the site's source, not the page's folder
    ])
    # quoted as written, templates and all
    assert {quote for _src, _dst, quote in found if _src == "site/index.md#home"} == {"[Options]({{ '/docs/",
                                                                                       "[def]: {{ '/about' |"}


def test_mdlink_links_a_quarto_sites_pages_by_source_html_address_and_heading_id():
    """A Quarto site links its .qmd sources, their published .html addresses (the page is not in the folder,
    its source is) and a section by its {#id}; a folder's index.qmd is its index page."""
    files = {
        "docs/guide.qmd": b"# Guide\n\n[vars](authoring/variables.qmd#meta), [html](/docs/authoring/variables.html#url)"
                          b", [tools](tools/) and [built](built.html).\n",
        "docs/authoring/variables.qmd": b"# Variables\n\n## Meta {#meta}\n\n## URLs {#url .unnumbered}\n",
        "docs/tools/index.qmd": b"# Tools\n", "docs/built.html": b"<p>a page that is there</p>", "docs/built.md": b"x",
    }
    assert sorted(e.dst for e in run(mdlink.MdlinkDetector(), files)) == [
        "docs/authoring/variables.qmd#meta", "docs/authoring/variables.qmd#url", "docs/built.html",
        "docs/tools/index.qmd"]


def test_mdlink_reads_a_folders_index_mdx_as_its_index_page():
    """As MDX's own site: [Guides](/guides/) names docs/guides/index.mdx, and [packages]: /packages/ the folder
    docs/packages/ whose index.mdx stands beside its pages (a packages/ folder at the root has no index page)."""
    files = {
        "docs/blog/v2.mdx": b"# v2\n\nSee the [Guides](/guides/) and our [packages][].\n\n[packages]: /packages/\n",
        "docs/guides/index.mdx": b"# Guides\n", "docs/guides/gfm.mdx": b"# GFM\n",
        "docs/packages/index.mdx": b"# Packages\n", "packages/mdx/readme.md": b"# mdx\n",
        "site/tools/README.mdx": b"# Tools\n", "site/home.mdx": b"# Home\n\n[tools](tools/)\n",
    }
    assert sorted((e.src, e.dst) for e in run(mdlink.MdlinkDetector(), files)) == [
        ("docs/blog/v2.mdx#v2", "docs/guides/index.mdx"), ("docs/blog/v2.mdx#v2", "docs/packages/index.mdx"),
        ("site/home.mdx#home", "site/tools/README.mdx")]


def test_mdlink_reads_the_forge_address_of_a_file_of_the_folder_as_that_file():
    """A repository's pages link its own files by their address on the forge its remote names (tldr-pages: 87
    such links): the file, its section for a fragment, a folder's index page; another repository's address, and
    one outside the indexed folder (here docs/ of the work tree), name nothing."""
    files = parse_files({
        "README.md": b"# Readme\n\nRead the [spec](https://github.com/Tldr-Pages/tldr/blob/main/docs/spec.md#cli), the "
                     b"[pages](https://github.com/tldr-pages/tldr/tree/main/docs/pages/), [raw]"
                     b"(https://raw.githubusercontent.com/tldr-pages/tldr/main/docs/spec.md), [theirs]"
                     b"(https://github.com/other/tldr/blob/main/docs/spec.md) and [root]"
                     b"(https://github.com/tldr-pages/tldr/blob/main/LICENSE.md).\n\n## More\n\n"
                     b"Autolinked: <https://github.com/tldr-pages/tldr/blob/main/docs/spec.md>; a web page "
                     b"<https://example.com/docs/spec.md>; [inline](<https://github.com/tldr-pages/tldr/blob/main/"
                     b"docs/pages/index.md>).\n\n## Defs\n\n"
                     b"[def]: <https://github.com/tldr-pages/tldr/blob/main/docs/spec.md>\n",
        "spec.md": b"# Spec\n\n## CLI\n", "pages/index.md": b"# Pages\n"}, 1000)
    corpus = Corpus(files, published=("github.com/tldr-pages/tldr\0docs/",))
    edges = run_detectors([mdlink.MdlinkDetector()], files, corpus).edges
    assert sorted((e.src, e.dst) for e in edges) == [
        ("README.md#defs", "spec.md"), ("README.md#more", "pages/index.md"), ("README.md#more", "spec.md"),
        ("README.md#readme", "pages/index.md"), ("README.md#readme", "spec.md"), ("README.md#readme", "spec.md#cli")]
    assert run_detectors([mdlink.MdlinkDetector()], files).edges == ()  # published nowhere: web addresses


def test_mdlink_links_a_reference_from_the_section_using_it():
    """As in Node.js's API docs: a file's definitions at its end, each cited by the sections above them."""
    files = {
        "api/fs.md": b"# fs\n\n## readFile\n\nSee [`util.promisify()`][] and the [stream  Docs][Streams].\n\n"
                     b"## stat\n\nErrors are [common errors]; ![chart][img]. Not `[streams]` nor [[streams]] nor"
                     b" \\[streams] nor [streams](errors.md).\n\n## Notes\n\n[`util.promisify()`]: util.md#promisify\n"
                     b"[streams]: stream.md\n[Common   Errors]: errors.md\n[img]: chart.md\n[unused]: other.md\n",
        "api/util.md": b"# util\n\n## promisify\n", "api/stream.md": b"# stream\n", "api/errors.md": b"# errors\n",
        "api/chart.md": b"# chart\n", "api/other.md": b"# other\n",
    }
    drafts = run(mdlink.MdlinkDetector(), files)
    assert sorted((e.src, e.dst, e.evidence.offset) for e in drafts) == [
        ("api/fs.md#notes", "api/other.md", 116),
        ("api/fs.md#readfile", "api/stream.md", 48),
        ("api/fs.md#readfile", "api/util.md#promisify", 17),
        ("api/fs.md#stat", "api/chart.md", 37),
        ("api/fs.md#stat", "api/errors.md", 20),
    ]
    quotes = {e.dst: e.evidence.quote for e in drafts}
    assert quotes["api/errors.md"].startswith("Errors are [common errors]")
    assert quotes["api/other.md"] == "[unused]: other.md"


def test_orglink_resolves_ids_files_headings_and_custom_ids():
    """org-roam's [[id:...]] finds a note or heading by its :ID: in any file; file: links, headings, custom ids,
    roam: titles; URLs, a link inside a source block and an id nobody holds name nothing."""
    files = {
        "roam/bar.org": b":PROPERTIES:\n:ID:       440795d0-70c1-4165-993d-aebd5eef7a24\n:END:\n#+title: Bar\n\n"
                        b"[[id:884b2341-b7fe-434d-848c-5282c0727861][Foo]] and "
                        b"[[id:77a90980-1994-464e-901f-7e3d3df07fd3]] [[id:no-such-id][x]]\n"
                        b"* Refs\n[[file:../notes/plan.org::*Second step][the plan]] [[./../notes/plan.org::#intro]]\n"
                        b"[[https://orgmode.org][Org]] [[roam:The Dark Knight]] [[*Refs]] [[Later][later\non]]\n"
                        b"#+begin_src org\n[[file:../notes/other.org]]\n#+end_src\n"
                        b"[[Note: intro]] [[elisp:(foo)]]\n* Later\n* Note: intro\n",
        "roam/foo.org": b":PROPERTIES:\n:ID: 884b2341-b7fe-434d-848c-5282c0727861\n:END:\n#+title: Foo\n",
        "roam/family.org": b"#+title: Family\n* Grand-Parent\n:PROPERTIES:\n:ID: 77a90980-1994-464e-901f-7e3d3df07fd3\n"
                           b":END:\n",
        "roam/bruce.org": b":PROPERTIES:\n:ROAM_ALIASES: Batman \"The Dark Knight\"\n:END:\n#+title: Bruce\n",
        "notes/plan.org": b"* Intro\n:PROPERTIES:\n:CUSTOM_ID: intro\n:END:\n* Second step\n",
        "notes/other.org": b"* Other\n",
    }
    found = {(e.src, e.dst) for e in run(orglink.OrglinkDetector(), files)}
    assert found == {("roam/bar.org", "roam/foo.org"), ("roam/bar.org", "roam/family.org#grand-parent"),
                     ("roam/bar.org#refs", "notes/plan.org#second-step"), ("roam/bar.org#refs", "notes/plan.org#intro"),
                     ("roam/bar.org#refs", "roam/bruce.org"), ("roam/bar.org#refs", "roam/bar.org#later"),
                     ("roam/bar.org#refs", "roam/bar.org#note-intro")}


def test_a_link_to_a_pdf_page_lands_on_that_page():
    """``paper.pdf#page=2`` (a PDF's open parameters, as notes cite a page) links to the page's document; a page
    the PDF does not have, another fragment, or a note's heading named "Page 2", to its card."""
    pytest.importorskip("pypdf")
    from tests.test_formats import make_pdf

    files = {"paper.pdf": make_pdf(["Abstract", "Method", "Results"]),
             "notes.md": b"# Notes\n\nSee [the method](paper.pdf#page=2&zoom=150), [results](paper.pdf#page=3), "
                         b"[page 9](paper.pdf#page=9), [x](paper.pdf#pagemode=none), [y](log.md#page=2).\n",
             "log.md": b"# Log\n\n## Page 2\n\nmore\n"}
    assert sorted(e.dst for e in run(mdlink.MdlinkDetector(), files)) == ["log.md", "paper.pdf", "paper.pdf#page-2",
                                                                          "paper.pdf#page-3"]


def test_a_link_to_a_file_finds_its_gzipped_copy():
    """As Debian ships a package's docs: README.org.gz links ./USAGE.org, stored as USAGE.org.gz."""
    import gzip

    files = {"zutty/README.org.gz": gzip.compress(b"* Docs\nSee [[./USAGE.org][usage]] and [[./gone.org]].\n"),
             "zutty/USAGE.org.gz": gzip.compress(b"* Usage\nBack to [[../zutty/README.org]].\n"),
             "zutty/NEWS.md.gz": gzip.compress(b"# News\n\nSee [usage](USAGE.org#usage).\n")}
    org_links = {(e.src, e.dst) for e in run(orglink.OrglinkDetector(), files)}
    assert org_links == {("zutty/README.org.gz#docs", "zutty/USAGE.org.gz"),
                         ("zutty/USAGE.org.gz#usage", "zutty/README.org.gz")}
    assert [e.dst for e in run(mdlink.MdlinkDetector(), files)] == ["zutty/USAGE.org.gz#usage"]


def test_href_only_reads_html():
    files = {"p.html": b'<p><a href="q.html">q</a></p>', "q.html": b"<p>q</p>", "n.md": b'<a href="q.html">q</a>'}
    assert [(e.src, e.dst, e.evidence.quote) for e in run(href.HrefDetector(), files)] == [("p.html", "q.html", "q")]


def test_href_roots_a_site_link_at_the_folder_above_that_holds_its_target():
    files = {"site/blog/post.html": b'<p><a href="/about/">about</a> <a href="/blog/older.html#x">older</a> '
                                    b'<a href="/feed.xml">feed</a></p>',
             "site/about/index.html": b"<p>about</p>", "site/blog/older.html": b"<p>older</p>"}
    assert sorted(e.dst for e in run(href.HrefDetector(), files)) == ["site/about/index.html", "site/blog/older.html"]
    # a folder with no index page: the note published as that folder (a page rendered beside its Markdown)
    files["site/blog/post.html"] += b'<p><a href="/guide/setup/">setup</a></p>'
    files["site/guide/setup.md"] = b"# Setup\n"
    assert "site/guide/setup.md" in {e.dst for e in run(href.HrefDetector(), files)}


def test_href_links_from_the_section_holding_it_to_the_section_an_id_names(monkeypatch):
    """A page is cut at its headings: a link counts from the section holding it, and a #fragment finds the
    section whose heading (or the element wrapping it) bears that id, as rustdoc and Sphinx name them."""
    monkeypatch.setattr(html_format, "MIN_SECTION_CHARS", 0)  # these pages' sections are a line each
    files = {"guide.html": b"<nav><a href='vec.html'>Vec</a></nav><h1>Guide</h1><p>Use "
                           b"<a href='vec.html#method.push'>push</a> or <a href='vec.html#how-to-use'>usage</a>.</p>",
             "vec.html": b"<h1>Vec</h1><section id='usage'><h2 id='how-to-use'>How to use</h2><p>x</p></section>"
                         b"<section id='method.push'><h4>pub fn push</h4><p>y</p></section>"}
    assert sorted((e.src, e.dst, e.evidence.quote) for e in run(href.HrefDetector(), files)) == [
        ("guide.html", "vec.html", "Vec"),
        ("guide.html#guide", "vec.html#how-to-use", "Use push or usage."),
        ("guide.html#guide", "vec.html#pub-fn-push", "Use push or usage.")]


def test_href_evidence_of_an_anchor_without_text_is_the_link_not_the_text_after_it():
    files = {"ch04.html": b'<a href="print.html" title="Print this book"><i></i></a><a href="q.html"><i></i></a>'
                          b'<h1>What is ownership?</h1><p>See <a href="q.html#x">q</a>.</p>',
             "print.html": b"<p>all</p>", "q.html": b"<p>q</p>"}
    assert {(e.dst, e.evidence.quote, e.evidence.offset) for e in run(href.HrefDetector(), files)} == {
        ("q.html", "See q.", 23), ("print.html", 'ch04.html links to print.html ("Print this book")', 0)}
    files["ch04.html"] = b'<a href="q.html"><img alt="Next"></a><p>More.</p>'
    assert [(e.dst, e.evidence.quote) for e in run(href.HrefDetector(), files)] == [
        ("q.html", 'ch04.html links to q.html ("Next")')]


def test_pathcite_and_cratecite():
    files = {
        "README.md": b"# R\n\nSee `src/setup.md` and [link](src/setup.md) and http://x.org/src/setup.md.\n",
        "src/setup.md": b"setup",
        "crates/xerj-api/Cargo.toml": b'[package]\nname = "xerj-api"\n',
        "notes.md": b"The xerj-api crate and xerj_api module; not xerj-apis.\n",
    }
    cites = run(pathcite.PathciteDetector(), files)
    assert [(e.src, e.dst, e.evidence.quote) for e in cites] == [
        ("README.md#r", "src/setup.md", "See `src/setup.md` and [link](src/setup.md) and http://x.org/src/setup.md.")
    ]
    crates = run(cratecite.CrateciteDetector(), files)
    assert [(e.src, e.dst, e.evidence.offset) for e in crates] == [("notes.md", "crates/xerj-api/Cargo.toml", 4)]


def test_cratecite_takes_a_crate_named_by_a_plain_word_only_where_the_prose_marks_it():
    """ripgrep's layout: crates named ``grep`` and ``ignore``, ``grep-regex`` kept in ``regex/``, and prose and
    benchmark tables that say grep and ignore as words."""
    files = {
        "Cargo.toml": b'[package]\nname = "ripgrep"\n',
        "crates/grep/Cargo.toml": b'[package]\nname = "grep"\n',
        "crates/ignore/Cargo.toml": b'[package]\nname = "ignore"\n',
        "crates/regex/Cargo.toml": b'[package]\nname = "grep-regex"\n',
        "engine/Cargo.toml": b'[workspace]\nmembers = ["a"]\n',
        "words.md": b"ripgrep is faster than GNU grep; we ignore hidden files and the regex engine.\n",
        "bench.csv": b"name,time\ngit grep (ignore),1.2\nrg (ignore),0.4\n",
        "span.md": b"Not `grep -r` but the `grep` facade; see grep::regex::RegexMatcher too.\n",
        "command.md": b"Run `grep -r foo` or `rg --ignore`.\n",
        "beside.md": b"The ignore crate walks, and the crate engine holds it.\n",
        "path.md": b"Call ignore::WalkBuilder.\n",
        "segment.md": b"Not std::ignore::Thing, a path's segment.\n",
        "other.md": b"grep-regex wraps the `regex` crate.\n",
        "plural.md": b"Both the grep and `ignore` crates.\n",
    }
    crates = run(cratecite.CrateciteDetector(), files)
    assert sorted((e.src.split("#")[0], e.dst) for e in crates) == [
        ("beside.md", "crates/ignore/Cargo.toml"), ("beside.md", "engine/Cargo.toml"),
        ("other.md", "crates/regex/Cargo.toml"),
        ("path.md", "crates/ignore/Cargo.toml"),
        ("plural.md", "crates/ignore/Cargo.toml"),
        ("span.md", "crates/grep/Cargo.toml"),
    ]


def test_pathcite_leaves_a_local_links_text_to_mdlink_and_reads_a_url_links_text():
    """A README's `[docs/setup.md](docs/setup.md)` is one edge, mdlink's; a file name linked to its page on a forge
    names the corpus file no other detector links."""
    files = {
        "README.md": b"# R\n\nRead [docs/setup.md](docs/setup.md) and ![docs/shot.png](docs/shot.png), then "
                     b"[src/x.py](https://example.org/o/r/blob/main/src/x.py).\n",
        "docs/setup.md": b"setup", "docs/shot.png": b"\x89PNG", "src/x.py": b"x = 1\n",
    }
    cites = run(pathcite.PathciteDetector(), files)
    assert [e.dst for e in cites] == ["src/x.py"]
    assert cites[0].evidence.quote.startswith("Read [docs/setup.md]")
    assert [e.dst for e in run(mdlink.MdlinkDetector(), files)] == ["docs/setup.md"]


_LINKISH = st.lists(st.sampled_from([b"a", b"Z", b"1", b"+", b".", b"-", b":", b"/", b"://", b"](", b"[[", b"]]",
                                      b"]:", b"[", b"]", b"(", b")", b" ", b"   ", b"\n", b"<", b"\xc3\xa9"]),
                    max_size=60).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(_LINKISH)
def test_pathcite_sweeps_only_the_lines_holding_a_link_as_the_whole_text_would_be(data):
    """The sweep of lines holding a link mark blanks exactly what one sweep over the whole text blanks."""
    assert pathcite._prose_only(data) == pathcite._NOT_PROSE.sub(pathcite._blank, data)


def test_pathcite_sweep_on_the_real_vault():
    texts = [p.read_bytes() for p in sorted(FOAM.rglob("*.md"))]
    assert sum(b"](" in t or b"://" in t for t in texts) > 20
    for text in texts:
        assert pathcite._prose_only(text) == pathcite._NOT_PROSE.sub(pathcite._blank, text)


# -- sharedterm rules ------------------------------------------------------------------------------


def test_sharedterm_ten_documents_or_fewer_make_no_edges():
    files = {f"small/n{i}.md": b"lactobacillus ferments cabbage kimchi sourdough" for i in range(10)}
    result = run_detectors([sharedterm.SharedtermDetector()], parse_files(files))
    assert result.edges == () and result.counters == {"edges_capped": 0}


def test_sharedterm_needs_two_word_families_and_names_terms_rarest_first():
    extra = {
        1: "lactobacillus ferments",  # two families → linked
        2: "lactobacillus ferments cabbage",
        3: "cabbage brine",
        5: "trajectory trajectories",  # one family twice → not linked
        6: "trajectory trajectories",
        7: "8080 8080",  # numbers are not terms
        8: "8080",
    }
    edges = run(sharedterm.SharedtermDetector(), vocabulary_corpus(extra))
    assert [(e.src, e.dst) for e in edges] == [("notes/n001.md", "notes/n002.md")]
    assert edges[0].evidence.quote == "notes/n001.md and notes/n002.md share 2 distinctive terms: ferments, lactobacillus"
    assert edges[0].evidence.offset == 0 and edges[0].type == "shared_term"


def test_sharedterm_takes_no_pair_of_cjk_or_thai_letters_for_a_term():
    """Text in the scripts written without spaces is cut into pairs of letters (a Thai pair, a letter with its
    marks and the next, may be three characters long): pairs are no words, so two files sharing only such text
    are not linked, and files sharing words in other scripts beside it are, by those words alone."""
    extra = {1: "จัดการไฟล์และโฟลเดอร์ 应用商店进行更新", 2: "จัดการไฟล์และโฟลเดอร์ 应用商店进行更新",
             3: "จัดการไฟล์ lactobacillus ferments", 4: "จัดการไฟล์ lactobacillus ferments"}
    edges = run(sharedterm.SharedtermDetector(), vocabulary_corpus(extra))
    assert [(e.src, e.dst) for e in edges] == [("notes/n003.md", "notes/n004.md")]
    assert edges[0].evidence.quote.endswith("share 2 distinctive terms: ferments, lactobacillus")


@pytest.mark.parametrize("sharing", [17, 18, 20])
def test_sharedterm_terms_shared_above_the_old_seed_bound_are_linked_or_counted(sharing):
    # 200 files, ``sharing`` of them use two rare words: each term is in under 10% of the corpus, so every pair
    # of those files is a candidate the contract links (up to 5 links per file) or counts as capped
    extra = {i: "alphaterm betaterm" for i in range(0, 200, 200 // sharing)[:sharing]}
    result = run_detectors([sharedterm.SharedtermDetector()], parse_files(vocabulary_corpus(extra, size=200)))
    candidates = sharing * (sharing - 1) // 2
    assert result.edges, "files sharing two distinctive terms must be linked"
    assert len(result.edges) + result.counters["edges_capped"] == candidates
    assert all(degree <= 5 for degree in Counter(f for e in result.edges for f in (e.src, e.dst)).values())


def test_sharedterm_a_pair_the_per_file_search_limit_leaves_unscored_is_counted():
    # 40 of 400 files share three terms: each file meets 39 others on its signature, more than the 16 it scores
    extra = {i: "gammaterm deltaterm epsilonterm" for i in range(0, 400, 10)}
    result = run_detectors([sharedterm.SharedtermDetector()], parse_files(vocabulary_corpus(extra, size=400)))
    assert len(result.edges) + result.counters["edges_capped"] == 40 * 39 // 2


def test_sharedterm_terms_in_over_ten_percent_are_ignored():
    # 30 files: a term in 3 is at the limit (10%), a term in 4 is the corpus's own vocabulary
    extra = {i: "common1 common2" for i in range(4)}
    extra.update({10: "rare1 rare2", 11: "rare1 rare2", 12: "rare1 rare2"})
    pairs = {(e.src, e.dst) for e in run(sharedterm.SharedtermDetector(), vocabulary_corpus(extra))}
    assert pairs == {("notes/n010.md", "notes/n011.md"), ("notes/n010.md", "notes/n012.md"),
                     ("notes/n011.md", "notes/n012.md")}


def test_sharedterm_caps_links_per_document_and_counts_the_refused():
    extra = {i: "hubword1 hubword2" for i in range(10)}  # 10 of 130 files: 45 candidate pairs
    result = run_detectors([sharedterm.SharedtermDetector()], parse_files(vocabulary_corpus(extra, size=130)))
    degree = Counter([e.src for e in result.edges] + [e.dst for e in result.edges])
    assert max(degree.values()) == 5
    assert len(result.edges) + result.counters["edges_capped"] == 45


def test_sharedterm_map_combine_detect_matches_the_in_process_run():
    files = parse_files(vocabulary_corpus({1: "alpha beta gamma", 2: "alpha beta", 3: "beta gamma"}))
    detector = sharedterm.SharedtermDetector()
    corpus = Corpus(files)
    partials = [detector.summarize(files[p]) for p in reversed(sorted(files))]  # any order
    state = detector.combine(partials, corpus)
    assert isinstance(state, DetectorState)
    drafts = sorted((d for p in files for d in detector.detect(files[p], corpus, state)), key=lambda d: (d.src, d.dst))
    assert tuple(drafts) == run_detectors([detector], files).edges
    assert sharedterm.family("trajectories") == sharedterm.family("trajectory") == "trajectory"
    assert sharedterm.family("boxes") == "box" and sharedterm.family("glass") == "glass"


# -- emailthread ---------------------------------------------------------------------------------------


def test_mbox_thread_and_attachments(tmp_path):
    root = message("Lunch?", "<1@x>", attachment=("menu.txt", "soup"))
    reply = message("Re: Lunch?", "<2@x>", in_reply_to="<1@x>", references=["<1@x>"])
    by_references = message("Re: Re: Lunch?", "<3@x>", references=["<1@x>", "<2@x>", "<gone@x>"])
    orphan = message("Re: elsewhere", "<4@x>", in_reply_to="<unknown@x>")
    files = {
        "mail/thread.mbox": mbox_bytes(tmp_path, [root, reply, by_references, orphan]),
        "mail/later.eml": bytes(message("Re: Lunch? (late)", "<5@x>", in_reply_to="<1@x>")),
    }
    edges = run(emailthread.EmailthreadDetector(), files)
    got = [(e.src, e.type, e.dst, e.evidence.quote) for e in edges]
    assert got == [
        ("mail/later.eml", "email_thread", "mail/thread.mbox#msg-1", "Re: Lunch? (late) replies to Lunch? (In-Reply-To <1@x>)"),
        ("mail/thread.mbox#msg-1", "email_attachment", "mail/thread.mbox#msg-1.att-1", "Lunch? carries attachment menu.txt"),
        ("mail/thread.mbox#msg-2", "email_thread", "mail/thread.mbox#msg-1", "Re: Lunch? replies to Lunch? (In-Reply-To <1@x>)"),
        ("mail/thread.mbox#msg-3", "email_thread", "mail/thread.mbox#msg-2", "Re: Re: Lunch? replies to Re: Lunch? (References <2@x>)"),
    ]
    assert all(e.detector == "emailthread@1" and e.weight == 0.8 and e.evidence.offset == 0 for e in edges)
    assert [e.confidence for e in edges] == [0.95, 0.99, 0.95, 0.95]
    assert edges[0].valid_at == 1000 and edges[0].evidence.source == "mail/later.eml"


def test_a_notebook_s_markdown_cells_link_and_its_code_cells_do_not():
    import json

    def nb(*cells):
        return json.dumps({"nbformat": 4, "metadata": {}, "cells": [
            {"cell_type": kind, "source": source} for kind, source in cells]}).encode()

    files = {
        "lab/grouping.ipynb": nb(("markdown", "# Grouping\n\nSee [pivots](pivots.ipynb) and [[notes]]."),
                                 ("code", "# [[other]] and [x](other.ipynb) in code\nprint(1)")),
        "lab/pivots.ipynb": nb(("markdown", "# Pivots")),
        "lab/other.ipynb": nb(("markdown", "# Other")),
        "lab/notes.md": b"# Notes\n",
    }
    md = {(e.src, e.dst) for e in run(mdlink.MdlinkDetector(), files)}
    wiki = {(e.src, e.dst) for e in run(wikilink.WikilinkDetector(), files)}
    assert md == {("lab/grouping.ipynb#grouping", "lab/pivots.ipynb")}
    assert wiki == {("lab/grouping.ipynb#grouping", "lab/notes.md")}


# -- imports ---------------------------------------------------------------------------------------------


def imported(files):
    """``{(src, dst): quote}`` of the imports edges over ``files``."""
    edges = run(imports.ImportsDetector(), files)
    assert all(e.detector == "imports@2" and e.weight == 0.8 and e.src_format in ("code", "notebook") for e in edges)
    return {(e.src, e.dst): e.evidence.quote for e in edges}


def test_python_imports_resolve_as_the_interpreter_would():
    cart = (b'"""The cart.\n\nExample::\n\n    import shop.legacy\n"""\n'
            b"import os, shop.prices as p\n"
            b"from . import tax, rates\n"
            b"from .. import outside\n"
            b"from .vendor.six.moves import http\n"
            b"from shop import (\n    orders,  # a module\n    Thing,\n)\n\n"
            b"def total():\n    from inspect import signature\n    from shop.tax import rate\n")
    found = imported({
        "src/shop/__init__.py": b"from .cart import Cart\n",
        "src/shop/cart.py": cart,
        "src/shop/prices.py": b"P = 1\n",
        "src/shop/orders.py": b"O = 1\n",
        "src/shop/tax.py": b"RATE = 1\n",
        "src/shop/legacy.py": b"OLD = 1\n",
        "src/shop/inspect.py": b"X = 1\n",  # the package's own: never what an absolute ``inspect`` names
        "src/shop/rates/__init__.py": b"from ..Tax import RATE\n",  # no Tax.py: tax.py is another module
        "src/shop/vendor/__init__.py": b"V = 1\n",
        "src/tests/test_cart.py": b"from shop.cart import Cart\nimport pytest\n",
    })
    assert found == {
        ("src/shop/__init__.py", "src/shop/cart.py"): "from .cart import Cart",
        ("src/shop/cart.py", "src/shop/prices.py"): "import os, shop.prices as p",
        ("src/shop/cart.py", "src/shop/tax.py"): "from . import tax, rates",
        ("src/shop/cart.py", "src/shop/rates/__init__.py"): "from . import tax, rates",
        ("src/shop/cart.py", "src/shop/vendor/__init__.py"): "from .vendor.six.moves import http",
        ("src/shop/cart.py", "src/shop/orders.py"): "from shop import (",
        ("src/shop/cart.py", "src/shop/__init__.py"): "from shop import (",
        ("src/shop/cart.py#total", "src/shop/tax.py"): "from shop.tax import rate",
        ("src/shop/rates/__init__.py", "src/shop/__init__.py"): "from ..Tax import RATE",
        ("src/tests/test_cart.py", "src/shop/cart.py"): "from shop.cart import Cart",
    }


def test_a_notebooks_python_cells_import_the_modules_beside_it():
    """The Bayesian Methods for Hackers' chapters: a notebook's cell imports a module kept beside it."""
    def notebook(cells, language="python"):
        return json.dumps({"nbformat": 4, "metadata": {"kernelspec": {"language": language}}, "cells": [
            {"cell_type": kind, "source": source, "metadata": {}, **({"outputs": []} if kind == "code" else {})}
            for kind, source in cells]}).encode()

    found = imported({
        "ch2/Ch2.ipynb": notebook([("markdown", "# Chapter 2\n\nWe import separation_plot below."),
                                   ("code", "import numpy as np\nfrom separation_plot import separation_plot"),
                                   ("markdown", "## Later\n\nimport draw_sky  (prose, not code)"),
                                   ("code", '"""\nimport draw_sky\n"""\nimport lib.util')]),
        "ch2/separation_plot.py": b"def separation_plot(): pass\n",
        "ch2/draw_sky.py": b"",
        "lib/util.py": b"",
        "ch2/Ch2_R.ipynb": notebook([("code", "import draw_sky")], language="R"),
    })
    assert found == {
        ("ch2/Ch2.ipynb#chapter-2", "ch2/separation_plot.py"): "from separation_plot import separation_plot",
        ("ch2/Ch2.ipynb#later", "lib/util.py"): "import lib.util",
    }


def test_python_imports_find_a_workspace_members_package_as_installed():
    """pydantic-ai's uv workspace: its tests import pydantic_ai, kept in pydantic_ai_slim/pydantic_ai, and members
    import each other; a project's loose module or a package named as the standard library is never one."""
    found = imported({
        "pyproject.toml": b"[tool.uv.workspace]\nmembers = ['pydantic_ai_slim', 'libs/graph']\n",
        "pydantic_ai_slim/pyproject.toml": b"[project]\nname = 'pydantic-ai-slim'\n",
        "pydantic_ai_slim/pydantic_ai/__init__.py": b"from .agent import Agent\n",
        "pydantic_ai_slim/pydantic_ai/agent.py": b"from graph_pkg import Graph\n",
        "libs/graph/setup.py": b"from setuptools import setup\n",
        "libs/graph/src/graph_pkg/__init__.py": b"",
        "other/setup.cfg": b"[metadata]\nname = other\n",
        "other/config.py": b"", "other/logging/__init__.py": b"",
        "tests/test_agent.py": (b"import logging\nimport config\nfrom pydantic_ai import Agent\n"
                                b"from pydantic_ai.agent import Agent as A\nimport graph_pkg\n"),
    })
    assert found == {
        ("pydantic_ai_slim/pydantic_ai/__init__.py", "pydantic_ai_slim/pydantic_ai/agent.py"):
            "from .agent import Agent",
        ("pydantic_ai_slim/pydantic_ai/agent.py", "libs/graph/src/graph_pkg/__init__.py"):
            "from graph_pkg import Graph",
        ("tests/test_agent.py", "pydantic_ai_slim/pydantic_ai/__init__.py"): "from pydantic_ai import Agent",
        ("tests/test_agent.py", "pydantic_ai_slim/pydantic_ai/agent.py"): "from pydantic_ai.agent import Agent as A",
        ("tests/test_agent.py", "libs/graph/src/graph_pkg/__init__.py"): "import graph_pkg",
    }


def test_javascript_c_and_rust_imports():
    app = (b"import { a } from './lib/a';\nimport b from \"../web/lib/b.js\";\nexport * from './lib';\n"
           b"const c = require('./c');\nconst lazy = await import('./lazy.mjs');\nimport React from 'react';\n"
           b"const path = './notimport';\nimport './style.css';\n// import old from './notimport';\n"
           b" * import doc from './notimport';\n")
    found = imported({
        "web/app.ts": app,
        "web/lib/a.ts": b"export const a = 1;\n",
        "web/lib/b.ts": b"export default 2;\n",  # what ``b.js`` is compiled from
        "web/lib/index.ts": b"export const i = 3;\n",
        "web/c.js": b"module.exports = 4;\n",
        "web/lazy.mjs": b"export const l = 5;\n",
        "web/notimport.ts": b"export const n = 6;\n",
        "web/style.css": b"body { margin: 0 }\n",
        "src/main.c": b'#include <stdio.h>\n#include "util.h"\n# include <mylib/api.h>\n#include "../include/conf.h"\n',
        "src/util.h": b"int util(void);\n",
        "include/mylib/api.h": b"int api(void);\n",
        "vendor/other/mylib/api.h": b"int api(void);\n",  # farther from src/ than include/
        "include/conf.h": b"#define CONF 1\n",
        "src/app.cpp": b"#include <vector>\n",
        "include/c++/12/vector": b"// <vector> -*- C++ -*-\n#include <bits/stl_vector.h>\n",  # no extension
        "include/c++/12/bits/stl_vector.h": b"// stl_vector.h -*- C++ -*-\n",
        "crate/src/lib.rs": b"pub mod net;\nmod util;\n// mod commented;\n",
        "crate/src/net.rs": b"pub(crate) mod tcp;\n",
        "crate/src/net/tcp.rs": b"pub fn dial() {}\n",
        "crate/src/util/mod.rs": b"pub fn u() {}\n",
        "crate/src/commented.rs": b"pub fn c() {}\n",
    })
    assert found == {
        ("web/app.ts", "web/lib/a.ts"): "import { a } from './lib/a';",
        ("web/app.ts", "web/lib/b.ts"): 'import b from "../web/lib/b.js";',
        ("web/app.ts", "web/lib/index.ts"): "export * from './lib';",
        ("web/app.ts", "web/c.js"): "const c = require('./c');",
        ("web/app.ts", "web/lazy.mjs"): "const lazy = await import('./lazy.mjs');",
        ("web/app.ts", "web/style.css"): "import './style.css';",
        ("src/main.c", "src/util.h"): '#include "util.h"',
        ("src/main.c", "include/mylib/api.h"): "# include <mylib/api.h>",
        ("src/main.c", "include/conf.h"): '#include "../include/conf.h"',
        ("src/app.cpp", "include/c++/12/vector"): "#include <vector>",
        ("include/c++/12/vector", "include/c++/12/bits/stl_vector.h"): "#include <bits/stl_vector.h>",
        ("crate/src/lib.rs", "crate/src/net.rs"): "pub mod net;",
        ("crate/src/lib.rs", "crate/src/util/mod.rs"): "mod util;",
        ("crate/src/net.rs", "crate/src/net/tcp.rs"): "pub(crate) mod tcp;",
    }


def test_rust_use_trees_name_modules_of_the_crate_and_of_the_workspaces_other_crates():
    """ripgrep's shapes: a workspace of crates named apart from their folders, a binary whose root is not in
    ``src/``, use trees over several lines, test modules inside a file, integration tests using the crate."""
    found = imported({
        "Cargo.toml": b'[package]\nname = "ripgrep"\n',
        "crates/core/main.rs": b"mod search;\nmod flags;\n\nuse crate::flags::{HiArgs, parse};\n",
        "crates/core/index/mod.rs": (b'#[cfg(not(feature = "x"))]\n#[path = "off.rs"]\nmod imp;\n'
                                     b'#[path="../nope.rs"]\nmod b;\n'),
        "crates/core/index/off.rs": b"",
        "crates/core/search.rs": (b"use {\n    grep::matcher::Matcher, // the trait\n    termcolor::WriteColor,\n};\n"
                                  b"\nuse crate::flags::lowargs::{self, Mode};\n"),
        "crates/core/flags/mod.rs": b"mod lowargs;\npub(crate) use self::lowargs::LowArgs;\n",
        "crates/core/flags/lowargs.rs": (b"use super::super::search;\n\n#[cfg(test)]\nmod tests {\n"
                                         b"    use super::*;\n    use crate::flags::lowargs;\n}\n"),
        "crates/grep/Cargo.toml": b'[package]\nname = "grep"\n',
        "crates/grep/src/lib.rs": b"pub extern crate grep_searcher as searcher;\npub use grep_cli as cli;\n",
        "crates/searcher/Cargo.toml": b'[package]\nname = "grep-searcher"\n',
        "crates/searcher/src/lib.rs": b"mod sink;\nmod searcher;\npub use crate::sink::Sink;\n",
        "crates/searcher/src/sink.rs": b"use crate::searcher::{glue::Glue, Searcher};\n",
        "crates/searcher/src/searcher/mod.rs": b"mod glue;\nuse {self::glue::Glue, super::sink::*};\n",
        # a comment of two-byte letters: offsets are the file's bytes, not the decoded text's characters
        "crates/searcher/src/searcher/glue.rs": ("use crate::{\n    // " + "\u00e9" * 16 + "\n"
                                                 "    searcher::Searcher,\n    sink::Sink,\n};\n").encode(),
        "crates/searcher/tests/api.rs": b"mod util;\nuse grep_searcher::{sink::Sink, Searcher};\nuse util::Fake;\n",
        "crates/searcher/tests/util.rs": b"use std::io;\nuse ::grep_searcher::searcher;\n",
    })
    assert found == {
        ("crates/core/main.rs", "crates/core/search.rs"): "mod search;",
        ("crates/core/main.rs", "crates/core/flags/mod.rs"): "mod flags;",
        ("crates/core/index/mod.rs", "crates/core/index/off.rs"): "mod imp;",
        ("crates/core/search.rs", "crates/grep/src/lib.rs"): "grep::matcher::Matcher, // the trait",
        ("crates/core/search.rs", "crates/core/flags/lowargs.rs"): "use crate::flags::lowargs::{self, Mode};",
        ("crates/core/flags/mod.rs", "crates/core/flags/lowargs.rs"): "mod lowargs;",
        ("crates/core/flags/lowargs.rs", "crates/core/search.rs"): "use super::super::search;",
        ("crates/grep/src/lib.rs", "crates/searcher/src/lib.rs"): "pub extern crate grep_searcher as searcher;",
        ("crates/searcher/src/lib.rs", "crates/searcher/src/sink.rs"): "mod sink;",
        ("crates/searcher/src/lib.rs", "crates/searcher/src/searcher/mod.rs"): "mod searcher;",
        ("crates/searcher/src/sink.rs", "crates/searcher/src/searcher/glue.rs"):
            "use crate::searcher::{glue::Glue, Searcher};",
        ("crates/searcher/src/sink.rs", "crates/searcher/src/searcher/mod.rs"):
            "use crate::searcher::{glue::Glue, Searcher};",
        ("crates/searcher/src/searcher/mod.rs", "crates/searcher/src/searcher/glue.rs"): "mod glue;",
        ("crates/searcher/src/searcher/mod.rs", "crates/searcher/src/sink.rs"):
            "use {self::glue::Glue, super::sink::*};",
        ("crates/searcher/src/searcher/glue.rs", "crates/searcher/src/searcher/mod.rs"): "searcher::Searcher,",
        ("crates/searcher/src/searcher/glue.rs", "crates/searcher/src/sink.rs"): "sink::Sink,",
        ("crates/searcher/tests/api.rs", "crates/searcher/tests/util.rs"): "mod util;",
        ("crates/searcher/tests/api.rs", "crates/searcher/src/sink.rs"):
            "use grep_searcher::{sink::Sink, Searcher};",
        ("crates/searcher/tests/api.rs", "crates/searcher/src/lib.rs"): "use grep_searcher::{sink::Sink, Searcher};",
        ("crates/searcher/tests/util.rs", "crates/searcher/src/searcher/mod.rs"):
            "use ::grep_searcher::searcher;",
    }


def test_typescript_aliases_follow_the_nearest_config_as_the_compiler_reads_it():
    root_config = b"""{
  // what create-next-app writes, with a comment and trailing commas
  "compilerOptions": {
    "baseUrl": ".",
    "paths": {
      "@/*": ["./src/*"],
      "@ui/special/*": ["./special/*"],
      "@ui/*": ["./packages/ui/src/*", "./fallback/*"],
      "exact": ["./src/exact-target.ts"],
    },
    /* "rootDir": "src", */
  },
}"""
    found = imported({
        "tsconfig.json": root_config,
        "tsconfig.base.json": b'{"compilerOptions": {"paths": {"~/*": ["shared/*"]}}}',
        "src/app.ts": (b'import { db } from "@/lib/db";\nimport Button from "@ui/button";\n'
                       b'import type { O } from "@ui/other";\nimport { s } from "@ui/special/s";\n'
                       b'export * from "exact";\nimport React from "react";\nconst c = require("src/lib/c");\n'
                       b'// import { gone } from "@/lib/gone";\n'),
        "src/lib/db.ts": b"export const db = 1;\n",
        "src/lib/c.js": b"module.exports = 2;\n",
        "src/lib/gone.ts": b"",
        "src/exact-target.ts": b"",
        "packages/ui/src/button.tsx": b"",
        "fallback/other.ts": b"",
        "special/s.ts": b"",
        "packages/ui/src/special/s.ts": b"",  # a longer prefix's pattern wins
        "packages/app/tsconfig.json": b'{"extends": "../../tsconfig.base.json"}',
        "packages/app/main.ts": b'import { u } from "~/util";\nimport { db } from "@/lib/db";\n',
        "shared/util.ts": b"",
        "packages/plain/tsconfig.json": b'{"compilerOptions": {"strict": true}}',
        "packages/plain/x.ts": b'import { db } from "@/lib/db";\n',  # its own config declares no alias
        "loop/tsconfig.json": b'{"extends": "./tsconfig.other.json"}',  # configs extending each other
        "loop/tsconfig.other.json": b'{"extends": ["./tsconfig.json"]}',
        "loop/y.ts": b'import { db } from "@/lib/db";\n',
    })
    assert found == {
        ("src/app.ts", "src/lib/db.ts"): 'import { db } from "@/lib/db";',
        ("src/app.ts", "packages/ui/src/button.tsx"): 'import Button from "@ui/button";',
        ("src/app.ts", "fallback/other.ts"): 'import type { O } from "@ui/other";',
        ("src/app.ts", "special/s.ts"): 'import { s } from "@ui/special/s";',
        ("src/app.ts", "src/exact-target.ts"): 'export * from "exact";',
        ("src/app.ts", "src/lib/c.js"): 'const c = require("src/lib/c");',
        ("packages/app/main.ts", "shared/util.ts"): 'import { u } from "~/util";',
    }


def test_javascript_imports_name_a_monorepos_packages_through_their_exports():
    """create-t3-turbo's shapes: scoped workspace packages, ``exports`` with subpaths and conditions whose
    ``types`` target is a build's output the folder does not hold, and a tsconfig extending a package's."""
    found = imported({
        "packages/ui/package.json": json.dumps({"name": "@acme/ui", "exports": {
            ".": "./src/index.ts", "./button": "./src/button.tsx", "./icons/*": "./src/icons/*.tsx"}}).encode(),
        "packages/ui/src/index.ts": b"", "packages/ui/src/button.tsx": b"", "packages/ui/src/icons/star.tsx": b"",
        "packages/api/package.json": json.dumps({"name": "@acme/api", "exports": {
            ".": {"types": "./dist/index.d.ts", "default": "./src/index.ts"}}}).encode(),
        "packages/api/src/index.ts": b"",
        "packages/built/package.json": json.dumps({"name": "@acme/built", "main": "./dist/index.cjs", "exports": {
            ".": {"import": "./dist/index.mjs"}, "./observable": {"import": "./dist/observable/index.mjs"}}}).encode(),
        "packages/built/src/index.ts": b"", "packages/built/src/observable/index.ts": b"",
        "packages/legacy/package.json": b'{"name": "legacy", "main": "lib/main.js"}',
        "packages/legacy/lib/main.js": b"", "packages/legacy/lib/util.js": b"",
        "tooling/typescript/package.json": b'{"name": "@acme/tsconfig", "files": ["*.json"]}',
        "tooling/typescript/web.json": b'{"compilerOptions": {"paths": {"~/*": ["./shared/*"]}}}',
        "tooling/typescript/shared/env.ts": b"",
        "apps/web/tsconfig.json": b'{"extends": "@acme/tsconfig/web.json"}',
        "apps/web/page.tsx": (b'import { Button } from "@acme/ui/button";\n'
                              b'import { Star } from "@acme/ui/icons/star";\n'
                              b'import type { Router } from "@acme/api";\nimport * as ui from "@acme/ui";\n'
                              b'const legacy = require("legacy");\nimport { u } from "legacy/lib/util";\n'
                              b'import { env } from "~/env";\nimport React from "react";\n'
                              b'import { nope } from "@acme/ui/missing";\nimport { b } from "@acme/built";\n'
                              b'import { o } from "@acme/built/observable";\n'),
    })
    assert found == {
        ("apps/web/page.tsx", "packages/ui/src/button.tsx"): 'import { Button } from "@acme/ui/button";',
        ("apps/web/page.tsx", "packages/ui/src/icons/star.tsx"): 'import { Star } from "@acme/ui/icons/star";',
        ("apps/web/page.tsx", "packages/api/src/index.ts"): 'import type { Router } from "@acme/api";',
        ("apps/web/page.tsx", "packages/ui/src/index.ts"): 'import * as ui from "@acme/ui";',
        ("apps/web/page.tsx", "packages/legacy/lib/main.js"): 'const legacy = require("legacy");',
        ("apps/web/page.tsx", "packages/legacy/lib/util.js"): 'import { u } from "legacy/lib/util";',
        ("apps/web/page.tsx", "tooling/typescript/shared/env.ts"): 'import { env } from "~/env";',
        ("apps/web/page.tsx", "packages/built/src/index.ts"): 'import { b } from "@acme/built";',
        ("apps/web/page.tsx", "packages/built/src/observable/index.ts"): 'import { o } from "@acme/built/observable";',
    }


def test_php_imports_find_a_class_by_the_psr4_prefixes_composer_maps():
    """koel's shapes (a Laravel application): App\\ under app/, a dev prefix for tests, traits used inside a
    class, use function, group uses, and the front controller's require of __DIR__."""
    composer = json.dumps({"autoload": {"psr-4": {"App\\": "app/", "Database\\Seeders\\": "database/seeders/"}},
                           "autoload-dev": {"psr-4": {"Tests\\": ["tests/", "tests-extra/"]}}}).encode()
    controller = (b"<?php\n\nnamespace App\\Http\\Controllers;\n\nuse App\\Models\\Song;\n"
                  b"use \\App\\Models\\Album as A, App\\Services\\Missing;\n"
                  b"use App\\Http\\{Requests\\SongRequest, Kernel};\n"
                  b"use function App\\Helpers\\render;\nuse Illuminate\\Support\\Str;\n\nclass SongController\n{\n"
                  b"    use App\\Traits\\Loud;\n}\n")
    found = imported({
        "composer.json": composer,
        "app/Http/Controllers/SongController.php": controller,
        "app/Models/Song.php": b"<?php\n", "app/Models/Album.php": b"<?php\n", "app/Traits/Loud.php": b"<?php\n",
        "app/Http/Requests/SongRequest.php": b"<?php\n", "app/Http/Kernel.php": b"<?php\n",
        "app/Helpers/render.php": b"<?php\n",
        "tests/Feature/SongTest.php": b"<?php\nuse Tests\\TestCase;\nuse Tests\\Extra\\Fake;\n",
        "tests/TestCase.php": b"<?php\n", "tests-extra/Extra/Fake.php": b"<?php\n",
        "public/index.php": b"<?php\nrequire __DIR__.'/../bootstrap/app.php';\nrequire 'vendor/autoload.php';\n",
        "bootstrap/app.php": b"<?php\n",
    })
    assert found == {
        ("app/Http/Controllers/SongController.php", "app/Models/Song.php"): "use App\\Models\\Song;",
        ("app/Http/Controllers/SongController.php", "app/Models/Album.php"):
            "use \\App\\Models\\Album as A, App\\Services\\Missing;",
        ("app/Http/Controllers/SongController.php", "app/Http/Requests/SongRequest.php"):
            "use App\\Http\\{Requests\\SongRequest, Kernel};",
        ("app/Http/Controllers/SongController.php", "app/Http/Kernel.php"):
            "use App\\Http\\{Requests\\SongRequest, Kernel};",
        ("tests/Feature/SongTest.php", "tests/TestCase.php"): "use Tests\\TestCase;",
        ("tests/Feature/SongTest.php", "tests-extra/Extra/Fake.php"): "use Tests\\Extra\\Fake;",
        ("public/index.php", "bootstrap/app.php"): "require __DIR__.'/../bootstrap/app.php';",
    }


def test_ruby_requires_name_files_beside_or_on_the_load_path_of_lib():
    """jekyll's shapes: require and autoload under lib/, require_relative from a test, a gem's require."""
    found = imported({
        "lib/jekyll.rb": (b'require "json"\nrequire "jekyll/version"\n\nmodule Jekyll\n'
                          b'  autoload :Page, "jekyll/page"\n  autoload(:Site, "jekyll/site.rb")\n'
                          b'  require "jekyll/#{name}"\nend\n'),
        "lib/jekyll/version.rb": b"", "lib/jekyll/page.rb": b"", "lib/jekyll/site.rb": b"",
        "test/helper.rb": b"require_relative '../lib/jekyll'\nrequire_relative \"fixtures/site\"\n",
        "test/fixtures/site.rb": b"",
        "Rakefile": b"#!/usr/bin/env ruby\nrequire 'jekyll/version'\n",
    })
    assert found == {
        ("lib/jekyll.rb", "lib/jekyll/version.rb"): 'require "jekyll/version"',
        ("lib/jekyll.rb", "lib/jekyll/page.rb"): 'autoload :Page, "jekyll/page"',
        ("lib/jekyll.rb", "lib/jekyll/site.rb"): 'autoload(:Site, "jekyll/site.rb")',
        ("test/helper.rb", "lib/jekyll.rb"): "require_relative '../lib/jekyll'",
        ("test/helper.rb", "test/fixtures/site.rb"): 'require_relative "fixtures/site"',
        ("Rakefile", "lib/jekyll/version.rb"): "require 'jekyll/version'",
    }


def test_imports_ask_the_combined_state_by_key_so_a_manifest_elsewhere_keeps_a_files_detection():
    """A file's remembered detection depends on the questions it asked (see detectmemo): a JavaScript, Rust or
    PHP file asks for the keys it resolves by, never for the whole state, so editing an unrelated Cargo.toml,
    package.json or tsconfig does not make every source file be detected again."""
    from xerj_core.autoindex.detect import Corpus, combine, summarize
    from xerj_core.autoindex.detectmemo import detect_noting

    files = parse_files({
        "tsconfig.json": b'{"compilerOptions": {"paths": {"@/*": ["./web/*"]}}}',
        "web/app.ts": b'import { x } from "@/lib";\nimport React from "react";\n', "web/lib.ts": b"",
        "Cargo.toml": b'[package]\nname = "core"\n', "src/lib.rs": b"mod a;\nuse serde::Serialize;\n",
        "src/a.rs": b"use crate::b;\nuse serde::Serialize;\n", "src/b.rs": b"",
        "composer.json": b'{"autoload": {"psr-4": {"App\\\\": "app/"}}}',
        "app/A.php": b"<?php\nuse App\\B;\nuse Vendor\\C;\n", "app/B.php": b"<?php\n",
    }, 1000)
    detector = imports.ImportsDetector()
    corpus = Corpus(files)
    states = combine([detector], (summarize([detector], files[path]) for path in sorted(files)), corpus)
    for path, target in (("web/app.ts", "web/lib.ts"), ("src/a.rs", "src/b.rs"), ("app/A.php", "app/B.php")):
        drafts, noted = detect_noting([detector], files[path], corpus, states)
        assert [d.dst for d in drafts] == [target] and noted.kept
        assert ("state", "imports", "stamp", None) not in noted.asked
        assert any(question[:3] == ("state", "imports", "get") for question in noted.asked)


def test_dart_imports_name_a_packages_file_under_its_lib_and_relative_ones_beside():
    found = imported({
        "pubspec.yaml": b"name: wonders\ndescription: x\n",
        "packages/kit/pubspec.yaml": b"name: 'kit'\n",
        "lib/main.dart": (b"import 'dart:async';\nimport 'package:flutter/material.dart';\n"
                          b"import 'package:wonders/ui/home.dart';\nexport \"package:kit/kit.dart\";\n"
                          b"part 'main.g.dart';\nimport 'logic/a.dart' if (dart.library.io) 'logic/b.dart';\n"),
        "lib/ui/home.dart": b"part of '../main.dart';\nimport '../logic/a.dart';\n",
        "lib/main.g.dart": b"", "lib/logic/a.dart": b"", "lib/logic/b.dart": b"",
        "packages/kit/lib/kit.dart": b"",
    })
    assert found == {
        ("lib/main.dart", "lib/ui/home.dart"): "import 'package:wonders/ui/home.dart';",
        ("lib/main.dart", "packages/kit/lib/kit.dart"): 'export "package:kit/kit.dart";',
        ("lib/main.dart", "lib/main.g.dart"): "part 'main.g.dart';",
        ("lib/main.dart", "lib/logic/a.dart"): "import 'logic/a.dart' if (dart.library.io) 'logic/b.dart';",
        ("lib/ui/home.dart", "lib/main.dart"): "part of '../main.dart';",
        ("lib/ui/home.dart", "lib/logic/a.dart"): "import '../logic/a.dart';",
    }


def test_an_astro_components_front_matter_imports_link():
    """Starlight's components: an Astro component imports others and modules in its front matter."""
    found = imported({
        "src/components/Aside.astro": (b"---\nimport Icon from './Icon.astro';\n"
                                       b"import type { Variant } from '../lib/aside';\nimport 'virtual:starlight';\n"
                                       b"---\n<aside><Icon /></aside>\n"),
        "src/components/Icon.astro": b"---\n---\n<svg />\n",
        "src/lib/aside.ts": b"export type Variant = 'note';\n",
    })
    assert found == {
        ("src/components/Aside.astro", "src/components/Icon.astro"): "import Icon from './Icon.astro';",
        ("src/components/Aside.astro", "src/lib/aside.ts"): "import type { Variant } from '../lib/aside';",
    }


def test_go_imports_name_every_file_of_a_package_under_a_module_of_the_corpus():
    main = (b'package main\n\nimport (\n\t"fmt"\n\tst "example.com/shop/internal/store"\n'
            b'\t"example.com/shop/tax"\n)\n\nimport "example.com/other/lib"\n')
    found = imported({
        "go.mod": b"module example.com/shop\n\ngo 1.22\n",
        "main.go": main,
        "internal/store/store.go": b"package store\n",
        "internal/store/cache.go": b"package store\n",
        "internal/store/store_test.go": b'package store\n\nimport "example.com/shop/tax"\n',
        "internal/store/notes.md": b"# Notes\n",
        "tax/tax.go": b'package tax\n\nimport "example.com/shop/internal/store"\n',
        "tools/go.mod": b"module example.com/shop/tools\n",  # a module nested in another
        "tools/gen/gen.go": b"package gen\n",
        "tools/cmd/main.go": b'package main\n\nimport gen "example.com/shop/tools/gen"\n',
    })
    assert found == {
        ("main.go", "internal/store/store.go"): 'st "example.com/shop/internal/store"',
        ("main.go", "internal/store/cache.go"): 'st "example.com/shop/internal/store"',
        ("main.go", "tax/tax.go"): '"example.com/shop/tax"',
        ("tax/tax.go", "internal/store/store.go"): 'import "example.com/shop/internal/store"',
        ("tax/tax.go", "internal/store/cache.go"): 'import "example.com/shop/internal/store"',
        ("internal/store/store_test.go", "tax/tax.go"): 'import "example.com/shop/tax"',
        ("tools/cmd/main.go", "tools/gen/gen.go"): 'import gen "example.com/shop/tools/gen"',
    }


def test_jvm_imports_name_a_class_s_file_under_any_source_root():
    java = "app/src/main/java/com/shop"
    found = imported({
        f"{java}/Cart.java": (b"package com.shop;\n\nimport com.shop.tax.Rate;\n"
                              b"import static com.shop.util.Money.round;\nimport com.shop.model.*;\n"
                              b"import static com.shop.Consts.*;\nimport java.util.List;\n"
                              b"import com.shop.Outer.Inner;\n"),
        f"{java}/tax/Rate.java": b"package com.shop.tax;\npublic class Rate {}\n",
        f"{java}/util/Money.java": b"package com.shop.util;\npublic class Money {}\n",
        f"{java}/model/Item.java": b"package com.shop.model;\npublic class Item {}\n",
        f"{java}/Outer.java": b"package com.shop;\npublic class Outer { public static class Inner {} }\n",
        f"{java}/Consts.java": b"package com.shop;\npublic class Consts { public static int N = 1; }\n",
        "app/src/main/kotlin/com/shop/Checkout.kt": b"import com.shop.Cart\nimport com.shop.tax.Rate as TaxRate\n",
        "lib/other/com/shop/tax/Rate.java": b"package com.shop.tax;\npublic class Rate {}\n",  # farther away
    })
    assert found == {
        (f"{java}/Cart.java", f"{java}/tax/Rate.java"): "import com.shop.tax.Rate;",
        (f"{java}/Cart.java", f"{java}/util/Money.java"): "import static com.shop.util.Money.round;",
        (f"{java}/Cart.java", f"{java}/Outer.java"): "import com.shop.Outer.Inner;",
        (f"{java}/Cart.java", f"{java}/Consts.java"): "import static com.shop.Consts.*;",
        ("app/src/main/kotlin/com/shop/Checkout.kt", f"{java}/Cart.java"): "import com.shop.Cart",
        ("app/src/main/kotlin/com/shop/Checkout.kt", f"{java}/tax/Rate.java"): "import com.shop.tax.Rate as TaxRate",
    }


_CODEISH = st.lists(st.sampled_from([b"import", b"from", b"include", b"mod", b"require(", b"static", b" ", b"\t",
                                      b"\n", b".", b"..", b"./", b"../", b"/", b"*", b",", b"(", b")", b"'", b'"', b"<",
                                      b">", b"#", b";", b'"""', b"a", b"pkg", b"x", b"\xc3\xa9", b"as", b"//",
                                      b"use", b"extern crate", b"::", b"{", b"}", b"crate", b"self", b"super",
                                      b"pub(crate)", b"r#", b"/*", b"*/", b"@/", b"~", b"\\", b"App\\", b"__DIR__",
                                      b"require_once", b"function", b"require_relative", b"autoload :A,",
                                      b"package:a/", b"part of", b"export"]),
                    max_size=40).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(_CODEISH)
def test_imports_of_any_text_are_edges_to_corpus_files_or_nothing(data):
    """Whatever a source file holds, every language's finder yields edges to files of the corpus, never to the
    file itself, and raises nothing."""
    files = {"pkg/__init__.py": b"", "pkg/x.py": b"", "a.py": b"", "x.ts": b"", "a/x.h": b"", "lib.rs": b"",
             "x.rs": b"", "pkg/a/C.java": b"", "go.mod": b"module pkg\n", "a/x.go": b"package a\n",
             "Cargo.toml": b'[package]\nname = "a"\n', "src/a.rs": b"", "src/x/mod.rs": b"",
             "tsconfig.json": b'{"compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["./*", "../*"], "~": ["x"]}}}',
             "composer.json": b'{"autoload": {"psr-4": {"App\\\\": "app/", "X\\\\": "../out/"}}}', "app/x.php": b"",
             "lib/x.rb": b"", "pubspec.yaml": b"name: a\n", "lib/x.dart": b""}
    for path in ("pkg/mod.py", "src/app.ts", "src/main.c", "src/lib.rs", "src/pkg/App.java", "cmd/main.go",
                 "src/app.php", "src/app.rb", "lib/app.dart"):
        edges = run(imports.ImportsDetector(), {**files, path: data.decode("utf-8", "replace").encode()})
        assert all(e.dst in files and e.src.split("#")[0] == path for e in edges)


def test_imports_read_code_only_and_never_leave_the_root():
    found = imported({
        "notes/howto.md": b"# How\n\n    import tool\n\nfrom tool import run\n",  # prose, not code
        "tool.py": b"from ... import nothing\nfrom .. import above\nimport tool\n",
        "web/x.js": b"import a from '../../outside.js';\nimport self from './x.js';\n",
        "outside.js": b"export default 1;\n",
    })
    assert found == {}


# -- line_at, the registry, the runner's checks ----------------------------------------------------------


def test_line_at_returns_the_trimmed_line_clipped_to_240_characters():
    text = "first line\n   second line with é   \nthird"
    offset = text.encode().index("é".encode())
    assert line_at(text, offset) == "second line with é"
    assert line_at(text, 0) == "first line"
    assert line_at(text, len("first line")) == "first line"  # the newline belongs to the line it ends
    assert line_at(text, 10_000) == "third"
    long = "x" * 300 + "\n"
    assert line_at(long, 5) == "x" * 240
    assert line_at(text.encode(), offset) == "second line with é"


def _detector_pm(*detectors):
    plugins = []
    for index, detector in enumerate(detectors):
        class Plugin:
            @hookimpl
            def xerj_register_detectors(self, register, _detector=detector):
                register(_detector)

        plugins.append((f"plugin_{index}", Plugin()))
    return get_plugin_manager(load_entrypoints=False, extra_plugins=plugins)


class Fake:
    name, type, tag, weight, confidence = "fake", "fake", "fake@1", 0.5, 0.5

    def __init__(self, **overrides):
        for key, value in overrides.items():
            setattr(self, key, value)

    def detect(self, file_docs, corpus, state):
        for a, b in zip(corpus.paths, corpus.paths[1:]):
            if a == file_docs[0].ax_path:
                yield make_draft(self, file_docs[0], corpus.card(b), quote=f"{a} before {b}")


def test_hook_xerj_register_detectors():
    found = collect_detectors(_detector_pm(Fake()))
    assert list(found) == ["fake"]
    edges = run_detectors(found, parse_files({"a.md": b"a", "b.md": b"b"})).edges
    assert [(e.src, e.dst, e.detector) for e in edges] == [("a.md", "b.md", "fake@1")]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tag": "fake"}, "plugin_0.*'fake' with tag 'fake'.*fake@N"),
        ({"tag": "other@1"}, "must be versioned as fake@N"),
        ({"tag": "fake@0"}, "fake@N"),
        ({"weight": 1.5}, "plugin_0.*weight 1.5"),
        ({"confidence": -0.1}, "confidence"),
    ],
)
def test_collect_detectors_refuses_a_bad_detector_naming_the_plugin(overrides, message):
    with pytest.raises(PluginError, match=message):
        collect_detectors(_detector_pm(Fake(**overrides)))


def test_collect_detectors_refuses_a_duplicate_name():
    with pytest.raises(PluginError, match="'fake', which is already registered by plugin 'plugin_[01]'"):
        collect_detectors(_detector_pm(Fake(), Fake()))
    with pytest.raises(PluginError, match="not a Detector"):
        collect_detectors(_detector_pm(object()))


def test_the_runner_refuses_a_contract_breach_naming_the_detector():
    class SelfLinker(Fake):
        def detect(self, file_docs, corpus, state):
            yield make_draft(self, file_docs[0], file_docs[0], quote="me")

    class Mute(Fake):
        def detect(self, file_docs, corpus, state):
            yield make_draft(self, file_docs[0], corpus.card("b.md"), quote="")

    files = parse_files({"a.md": b"a", "b.md": b"b"})
    with pytest.raises(PluginError, match="'fake' proposed a self-edge"):
        run_detectors([SelfLinker()], files)
    with pytest.raises(PluginError, match="without evidence"):
        run_detectors([Mute()], files)


class _Shaped(Fake):
    """Yields one draft from a.md's card to b.md's, reshaped by ``shape`` (a breach of the contract, or none)."""

    def __init__(self, shape, **overrides):
        super().__init__(**overrides)
        self.shape = shape

    def detect(self, file_docs, corpus, state):
        if file_docs[0].ax_path == "a.md":
            yield self.shape(make_draft(self, file_docs[0], corpus.card("b.md"), quote="a to b"))


class _LaterDraft(EdgeDraft):
    """A draft type of a plugin's own: an EdgeDraft all the same."""


@pytest.mark.parametrize(("shape", "overrides", "message"), [
    (lambda d: (d.src, d.dst), {}, "yielded .* which is not an EdgeDraft"),
    (lambda d: "a.md", {}, "yielded 'a.md', which is not an EdgeDraft"),
    (lambda d: attrs.evolve(d, dst=d.src), {}, "proposed a self-edge on 'a.md'"),
    (lambda d: attrs.evolve(d, src="b.md", dst="a.md"), {}, "edge from 'b.md', which is not a document of the file being read"),
    (lambda d: attrs.evolve(d, dst="c.md"), {}, "edge to 'c.md', which is not a document of the corpus"),
    (lambda d: attrs.evolve(d, detector="other@1"), {}, "tagged an edge 'other@1' instead of 'fake@1'"),
    (lambda d: attrs.evolve(d, evidence=None), {}, "'a.md' -> 'b.md' without evidence"),
    (lambda d: attrs.evolve(d, evidence=Evidence("", "a.md")), {}, "without evidence"),
    (lambda d: attrs.evolve(d, type="other"), {}, "edge of undeclared type 'other'"),
    (lambda d: attrs.evolve(d, type="fake"), {"types": ("one", "two")}, "undeclared type 'fake'"),
    (lambda d: _LaterDraft(**attrs.asdict(d, recurse=False) | {"dst": "a.md"}), {},
     "proposed a self-edge"),
])
def test_detect_file_names_every_breach(shape, overrides, message):
    """Every condition of the contract is checked on every draft, whichever way a draft is checked."""
    files = parse_files({"a.md": b"a", "b.md": b"b"})
    corpus = Corpus(files)
    with pytest.raises(PluginError, match=f"detector 'fake' .*{message}"):
        detect_file([_Shaped(shape, **overrides)], files["a.md"], corpus)


def test_detect_file_frees_the_cycles_a_detector_leaves_while_a_run_pauses_the_collector():
    import gc

    from xerj_core.store.store import RELEASE_AFTER_OBJECTS, collector_paused

    def cyclic(draft):
        for _ in range(2 * RELEASE_AFTER_OBJECTS):
            node = {}
            node["self"] = node  # garbage only the cyclic collector frees
        return draft

    files = parse_files({"a.md": b"a", "b.md": b"b"})
    corpus = Corpus(files)
    gc.collect()
    with collector_paused():
        drafts = detect_file([_Shaped(cyclic)], files["a.md"], corpus)
        left = gc.collect()
    assert len(drafts) == 1 and left < RELEASE_AFTER_OBJECTS


def test_detect_file_counts_what_detectors_leave_over_many_files_and_nothing_else(collections):
    """Cycles a detector leaves a few at a time are freed once, over many files, they add up to a collection's
    worth; the objects a run holds itself (made outside the detectors) never start one, however many."""
    import gc

    from xerj_core.store.store import RELEASE_AFTER_OBJECTS, collector_paused

    def cyclic(draft):
        for _ in range(RELEASE_AFTER_OBJECTS // 8):
            node = {}
            node["self"] = node
        return draft

    files = parse_files({"a.md": b"a", "b.md": b"b"})
    corpus = Corpus(files)
    with collector_paused():  # an earlier run: what its detectors made is the collector's once it ends
        for _ in range(6):
            detect_file([_Shaped(cyclic)], files["a.md"], corpus)
    gc.collect()
    collections.clear()
    with collector_paused():
        held = [{} for _ in range(3 * RELEASE_AFTER_OBJECTS)]  # a run's own objects: no cycles
        for shape in [lambda d: d] * 4 + [cyclic] * 4:
            detect_file([_Shaped(shape)], files["a.md"], corpus)
        assert collections == []
        for _ in range(8):
            detect_file([_Shaped(cyclic)], files["a.md"], corpus)
        left = gc.collect()
    assert held and collections[0] == 0 and left < RELEASE_AFTER_OBJECTS


def test_detect_file_keeps_sound_drafts_of_any_draft_type():
    files = parse_files({"a.md": b"a", "b.md": b"b"})
    corpus = Corpus(files)
    plain = detect_file([_Shaped(lambda d: d)], files["a.md"], corpus)
    own = detect_file([_Shaped(lambda d: _LaterDraft(**attrs.asdict(d, recurse=False)))], files["a.md"], corpus)
    assert [attrs.asdict(d) for d in own] == [attrs.asdict(d) for d in plain] and len(plain) == 1
    assert type(own[0]) is _LaterDraft
    typed = detect_file([_Shaped(lambda d: attrs.evolve(d, type="two"), types=("one", "two"))], files["a.md"], corpus)
    assert [d.type for d in typed] == ["two"]


def test_corpus_lookups():
    files = parse_files({"A/Note.md": b"---\naliases: [Other Name]\n---\n# Head\n", "b/note.txt": b"x", "m.eml": bytes(message("s", "<m@x>"))})
    corpus = Corpus(files)
    assert corpus.paths == ("A/Note.md", "b/note.txt", "m.eml") and len(corpus) == 3
    assert corpus.lookup_path("a/note.md") == "A/Note.md" and corpus.lookup_path("nope.md") is None
    assert corpus.by_stem("NOTE") == ("A/Note.md", "b/note.txt")
    assert corpus.by_alias("other name") == ("A/Note.md",)
    # an index one detector needs is built in that detector's combine, not carried by every corpus
    thread = emailthread.EmailthreadDetector()
    owners = thread.combine([thread.summarize(files[path]) for path in corpus.paths], corpus).data
    assert owners == {"<m@x>": "m.eml"} and not hasattr(corpus, "by_message_id")
    assert corpus.section("A/Note.md", "head").doc_id == "A/Note.md#head"
    assert corpus.nearest(["b/note.txt", "A/Note.md"], "A/x.md") == "A/Note.md"
    assert corpus.document("A/Note.md#head").text == ""  # the corpus carries no text
    assert corpus.mtime("m.eml") == files["m.eml"][0].mtime_ms



def test_corpus_lookups_give_one_path_or_several_alike():
    files = parse_files({"d/Note.md": b"# x\n", "d/note.md": b"# y\n", "d/z.txt": b"z", "e/z.md": b"# z\n",
                         "e/solo.md": b"---\naliases: [Twice, once]\n---\n", "f/g/z.md": b"w"})
    corpus = Corpus(files)
    assert corpus.lookup_path("D/NOTE.MD") is None  # two files fold to it
    assert corpus.lookup_path("E/SOLO.md") == "e/solo.md" and corpus.lookup_path("e/z.md") == "e/z.md"
    assert corpus.by_stem("z") == ("d/z.txt", "e/z.md", "f/g/z.md") and corpus.by_stem("solo") == ("e/solo.md",)
    assert corpus.by_stem("nope") == () and corpus.by_file_name("Z.MD") == ("e/z.md", "f/g/z.md")
    assert corpus.by_path_without_extension("d/note") == ("d/Note.md", "d/note.md")
    assert corpus.by_path_without_extension("e/z") == ("e/z.md",)
    assert corpus.by_alias("twice") == ("e/solo.md",) and corpus.by_alias("nope") == ()
    assert corpus.directory("d") == ("d/Note.md", "d/note.md", "d/z.txt") and corpus.directory("f/g") == ("f/g/z.md",)
    assert corpus.directory("nope") == ()
    assert corpus.next_sibling("d/note.md") == "d/z.txt" and corpus.next_sibling("f/g/z.md") is None
    assert corpus.nearest(["f/g/z.md", "e/z.md"], "e/solo.md") == "e/z.md"
    # one lookup map's tuple is every answer's own
    assert isinstance(corpus.by_stem("z"), tuple) and isinstance(corpus.directory("e"), tuple)

# -- the example third-party plugin (contrib/xerj-detect-hashtag, pip-installed by CI) ----------------------


def test_contrib_hashtag_plugin_is_listed_and_its_edges_are_emitted():
    pytest.importorskip("xerj_detect_hashtag")
    from click.testing import CliRunner

    from xerj_core.cli import build_cli

    pm = get_plugin_manager()
    listed = json.loads(CliRunner().invoke(build_cli(pm), ["plugins"]).output)
    assert {"name": "hashtag", "version": "0.1.0", "hooks": ["xerj_register_detectors"]} in listed
    detectors = collect_detectors(pm)
    files = parse_files({"a.md": b"# A\n\nday one #bread\n", "b.md": b"# B\n\nday two #bread\n"})
    hashtag = [e for e in run_detectors(detectors, files).edges if e.type == "hashtag"]
    assert [(e.src, e.dst, e.evidence.quote) for e in hashtag] == [("a.md#a", "b.md", "day one #bread")]


_EDGE_DIGEST = """
import hashlib, json, sys
from pathlib import Path
from xerj_core.autoindex.detect import collect_detectors, run_detectors
from xerj_core.autoindex.builtin_formats import html as html_format
from xerj_core.autoindex.formats import collect_formats, parse_file
from xerj_core.plugins import get_plugin_manager
root = Path(sys.argv[1])
pm = get_plugin_manager()
formats = collect_formats(pm)
files = {}
for p in sorted(q for q in root.rglob("*") if q.is_file()):
    rel = p.relative_to(root).as_posix()
    files[rel] = parse_file(formats, rel, p.read_bytes(), p.stat().st_mtime_ns // 1_000_000)
edges = run_detectors(collect_detectors(pm), {k: v for k, v in files.items() if v}).edges
rows = [[e.src, e.dst, e.type, e.detector, e.weight, e.confidence, e.valid_at, e.evidence.to_json()] for e in edges]
print(len(rows), hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest())
"""


def test_edge_set_does_not_depend_on_the_hash_seed():
    """Separate processes (different str hashing) must produce the byte-identical edge set."""
    import os
    import subprocess
    import sys

    digests = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _EDGE_DIGEST, str(FOAM)], env=env, capture_output=True,
                             text=True, check=True).stdout
        digests.add(out.strip())
    assert len(digests) == 1, digests


def test_executor_steps_are_picklable_and_match_the_in_process_run(tmp_path):
    """map → combine → broadcast → map, with every hand-over pickled as a process pool would."""
    import pickle

    from xerj_core.autoindex.detect import combine, detect_file, group_by_file, summarize

    files = parse_files({
        **{k: v for k, v in vocabulary_corpus({1: "alpha beta", 2: "alpha beta"}).items()},
        "notes/links.md": b"# L\n\n[[n001]] and [two](n002.md)\n",
        "mail/t.mbox": mbox_bytes(tmp_path, [message("a", "<a@x>"), message("Re: a", "<b@x>", in_reply_to="<a@x>")]),
    })
    detectors = pickle.loads(pickle.dumps(ALL))
    corpus = Corpus.from_documents(d for docs in files.values() for d in docs)
    assert group_by_file(d for docs in files.values() for d in docs) == files
    partials = [pickle.loads(pickle.dumps(summarize(detectors, files[p]))) for p in files]
    states = pickle.loads(pickle.dumps(combine(detectors, partials, corpus)))
    shipped = pickle.loads(pickle.dumps(corpus))
    drafts = sorted((d for p in files for d in detect_file(detectors, files[p], shipped, states)),
                    key=lambda d: (d.src, d.type, d.dst))
    assert tuple(drafts) == run_detectors(ALL, files).edges
    assert {"shared_term", "wikilink", "mdlink", "email_thread", "sequence", "same_dir"} <= {d.type for d in drafts}


class TestInstalledHashtagConformance(AbstractDetectorTests):
    """The pip-installed contrib plugin, held to the same suite here since CI collects only tests/."""

    @pytest.fixture
    def plugin(self):
        return pytest.importorskip("xerj_detect_hashtag")

    @pytest.fixture
    def detector(self, plugin):
        return plugin.HashtagDetector()

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"a.md": b"# A\n\n#bread day\n", "b/b.md": b"more #bread", "c.txt": b"#bread #oven",
                            "d.md": b"#oven"})


# -- the conformance suite's own asserts can fail ---------------------------------------------------

class _Breaking:
    """A detector breaking exactly one rule of the contract, named by ``rule``."""

    name, type, tag, weight, confidence = "breaking", "rel", "breaking@1", 0.5, 0.5

    def __init__(self, rule: str) -> None:
        self.rule = rule

    def detect(self, file_docs, corpus, state):
        doc = file_docs[0]
        other = corpus.card("b.md") if doc.ax_path == "a.md" else corpus.card("a.md")
        good = make_draft(self, doc, other, quote="rationale")
        if self.rule == "self-edge":
            yield attrs.evolve(good, dst=doc.doc_id)
        elif self.rule == "tag":
            yield attrs.evolve(good, detector="someone-else@1")
        elif self.rule == "endpoint":
            yield attrs.evolve(good, dst="nowhere.md")


@pytest.mark.parametrize("rule, check", [
    ("self-edge", lambda suite, d, files, drafts: suite.test_no_self_edges(drafts)),
    ("tag", lambda suite, d, files, drafts: suite.test_every_edge_carries_the_versioned_tag_and_a_declared_type(
        d, drafts)),
    ("endpoint", lambda suite, d, files, drafts: suite.test_ids_resolve_to_documents_of_the_corpus(files, drafts)),
])
def test_the_conformance_suite_catches_each_breach_itself(rule, check):
    files = parse_files({"a.md": b"# A\n\nalpha\n", "b.md": b"# B\n\nbeta\n"})
    detector = _Breaking(rule)
    drafts = detect_directly(detector, files)
    assert drafts, "the breaking detector must yield its bad draft"
    with pytest.raises(AssertionError):
        check(AbstractDetectorTests(), detector, files, drafts)
    with pytest.raises(PluginError):  # the runner would have refused it before any assert could run
        run_detectors([detector], files)
