"""Bear backups: each note of a ``.bear2bk`` read as a Markdown note, its links to notes and headings followed."""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from xerj_core.autoindex import compressed, mapped
from xerj_core.autoindex.builtin_formats import bear
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import FormatError
from xerj_core.testing.detectors import AbstractDetectorTests, parse_files, run_detectors
from xerj_core.testing.formats import AbstractFormatTests
from xerj_detectors import bearlink

from .test_autoindex import index_of

FIXTURES = Path(__file__).parent / "fixtures" / "bear"
BACKUP = (FIXTURES / "backup.bear2bk").read_bytes()
TAGS = (FIXTURES / "tags.bear2bk").read_bytes()
SAMPLES = (FIXTURES / "markdown-samples.bear2bk").read_bytes()
MTIME = 1_700_000_000_000


def notes(data: bytes, path: str = "Bear.bear2bk") -> dict[str, object]:
    """The backup's note documents (the notes' cards) by title."""
    card, *docs = bear.BearFormat().parse(path, data, MTIME)
    assert card.kind == "file" and card.doc_id == path
    found = {doc.title: doc for doc in docs if doc.kind == "note"}
    assert card.fields["notes"] == len(found)
    return found


def backup(notes_: dict[str, str], prefix: str = "Bear Notes.bear2bk/") -> bytes:
    """A backup of ``{bundle name: text}``, each note with an ``info.json`` as Bear writes it."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as made:
        for name, text in notes_.items():
            made.writestr(f"{prefix}{name}.textbundle/text.md", text)
            made.writestr(f"{prefix}{name}.textbundle/info.json",
                          '{"net.shinyfrog.bear": {"uniqueIdentifier": "%s", "trashed": 0}}' % name)
    return out.getvalue()


class TestBearFormatConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return bear.BearFormat()

    @pytest.fixture
    def sample_files(self):
        return {"backups/2023.bear2bk": BACKUP, "tags.bear2bk": TAGS, "samples.bear2bk": SAMPLES}

    @pytest.fixture
    def bad_files(self):
        return {"x.bear2bk": b"PK\x03\x04 not a zip after all"}

    @pytest.fixture
    def plugin(self):
        return bear


class TestBearlinkConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return bearlink.BearlinkDetector()

    @pytest.fixture
    def corpus_files(self):
        return parse_files({"samples.bear2bk": SAMPLES, "tags.bear2bk": TAGS})

    @pytest.fixture
    def plugin(self):
        return bearlink


def test_a_backups_notes_are_read_with_what_bear_knows_of_them():
    found = notes(BACKUP)
    # the note in Bear's trash is left out, and counted; one without a title line is named by its bundle
    assert bear.BearFormat().parse("Bear.bear2bk", BACKUP, MTIME)[0].fields["trashed"] == 1
    assert sorted(found) == ["2023-10-11T081102Z", "Archived File", "Encrypted File",
                             "File with asset, content, and a tag", "File with heading only, no content"]
    tagged = found["File with asset, content, and a tag"]
    assert tagged.doc_id == "Bear.bear2bk#File with asset, content, and a tag" and tagged.ax_path == "Bear.bear2bk"
    assert tagged.format == "bear" and tagged.fields["tags"] == ["Test-Tag"]
    assert tagged.fields["attachments"] == ["acorn.jpeg"]
    assert tagged.fields["bear_id"] == "C4FFAFCB-F102-4FDE-84AF-4A1B21C60672"
    assert tagged.fields["created_ms"] == 1697003013000 and tagged.fields["updated_ms"] == 1697011797000
    # an encrypted note is its title: its text is Bear's to open
    locked = found["Encrypted File"]
    assert locked.text == "" and locked.fields["encrypted"] is True
    # a note's headings are its sections, each naming its note
    card, *docs = bear.BearFormat().parse("Bear.bear2bk", BACKUP, MTIME)
    section = next(doc for doc in docs if doc.doc_id == "Bear.bear2bk#File with asset, content, and a tag"
                   "#file-with-asset-content-and-a-tag")
    assert section.kind == "section" and section.fields["note"] == tagged.doc_id
    assert "This is a test with a tag" in section.text


def test_tags_are_read_as_bear_writes_them():
    found = notes(TAGS)
    assert found["Tag forms Bear writes"].fields["tags"] == ["two words", "项目 计划", "中文，标签", "bad!tag"]
    assert found["Tags in other scripts"].fields["tags"] == ["中文", "标签/子标签", "仕事", "일정", "Ελλάδα", "русский"]
    # escaped, bold and heading hashes, code and URLs
    made = notes(backup({"N": "# N\n\n**\\#escaped** **#bold** `#code` https://x.org/#frag and #tag.\n## h2\n"}))
    assert made["N"].fields["tags"] == ["bold", "tag"]


def test_bearlink_follows_links_to_notes_and_to_their_headings():
    files = parse_files({"samples.bear2bk": SAMPLES})
    edges = {(e.src, e.dst): e.evidence.quote for e in run_detectors([bearlink.BearlinkDetector()], files).edges}
    welcome = "samples.bear2bk#Welcome to Bear 👋#get-started"
    assert edges[(welcome, "samples.bear2bk#Get started with Bear#meet-the-styles")] == \
        "* 🖍️ [[Get started with Bear/Meet the Styles|Formatting text]]"
    assert edges[("samples.bear2bk#Markdown sample#links", "samples.bear2bk#Get started with Bear")] == \
        "- internal link: [[Get started with Bear]]"
    # every one of the welcome note's 25 links lands, "Bear Pro" on the heading Bear shows so ("Bear ==Pro==")
    assert sum(1 for src, _ in edges if src.startswith("samples.bear2bk#Welcome to Bear")) == 25
    assert ("samples.bear2bk#Welcome to Bear 👋#work-faster-and-easier",
            "samples.bear2bk#Work faster and easier with Bear#bear-pro") in edges


def test_a_title_two_backups_hold_is_followed_within_the_linking_backup():
    def made(word):
        return backup({"Home": f"# Home\n\nsee [[Topic]] and [[Topic/Part]] ({word})\n",
                       "Topic": f"# Topic\n\n## Part\n{word}\n"})

    files = parse_files({"a.bear2bk": made("a"), "b.bear2bk": made("b"), "c.bear2bk": backup(
        {"Other": "# Other\n\n[[Topic]] [[Nowhere]] [[Other]]\n"})})
    edges = sorted((e.src, e.dst) for e in run_detectors([bearlink.BearlinkDetector()], files).edges)
    assert edges == [("a.bear2bk#Home#home", "a.bear2bk#Topic"), ("a.bear2bk#Home#home", "a.bear2bk#Topic#part"),
                     ("b.bear2bk#Home#home", "b.bear2bk#Topic"), ("b.bear2bk#Home#home", "b.bear2bk#Topic#part")]


def test_what_is_no_backup_is_refused(monkeypatch):
    with pytest.raises(FormatError, match="not a Bear backup"):
        bear.BearFormat().parse("x.bear2bk", b"plain text", MTIME)
    assert notes(backup({})) == {}  # a zip holding no note: a card and nothing else
    assert not bear.BearFormat().accepts("x.zip", b"PK\x03\x04")
    # notes that expand past the file limit are refused before one is read (its assets never count)
    monkeypatch.setattr(compressed, "MAX_FILE_BYTES", 4096)
    assert notes(BACKUP)  # 68 KB, nearly all of it an image
    with pytest.raises(FormatError, match="its notes expand to"):
        bear.BearFormat().parse("x.bear2bk", SAMPLES, MTIME)


def test_a_large_backup_is_read_through_a_map_its_notes_searchable(engine, tmp_path, monkeypatch):
    """A backup is mostly its images: one past the size limit is read all the same, a note at a time, and its
    notes are found and linked."""
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 20)
    folder = tmp_path / "bear"
    folder.mkdir()
    shutil.copy(FIXTURES / "markdown-samples.bear2bk", folder / "samples.bear2bk")
    with zipfile.ZipFile(folder / "big.bear2bk", "w") as made:
        made.writestr("Big.textbundle/text.md", "# Travel\n\nThe itinerary for Lisbon, and [[Packing]].\n")
        made.writestr("Big.textbundle/assets/photo.jpg", os.urandom(3 << 20))
        made.writestr("Packing.textbundle/text.md", "# Packing\n\nA raincoat.\n")
    summary = run(engine, folder, brain="bear", max_file_bytes=2 << 20)
    assert summary.files_indexed == 2 and not summary.files_failed and not summary.files_skipped
    assert summary.edges_by_type["note_link"] >= 27
    index = index_of(engine, "bear")
    hits = engine.search.search(index, {"query": {"match": {"text": "itinerary lisbon"}}})["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["big.bear2bk#Big#travel"]
    ego = engine.graph.ego("bear", {"node": "big.bear2bk#Packing", "hops": 1, "types": "note_link"})
    assert [edge["src"] for edge in ego["edges"]] == ["big.bear2bk#Big#travel"]
