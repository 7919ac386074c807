"""A Zotero library: the ``zotero`` format, the ``zotero`` detector, and a Zotero data folder as autoindex walks it."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest

from xerj_core.autoindex.builtin_formats import zotero
from xerj_core.autoindex.detect import run_detectors
from xerj_core.autoindex.formats import FormatError
from xerj_core.autoindex.pipeline import run as run_pipeline
from xerj_core.autoindex.walk import IGNORED, Skipped, walk
from xerj_core.model import SourceDocument
from xerj_core.testing.detectors import AbstractDetectorTests, parse_files
from xerj_core.testing.formats import AbstractFormatTests
from xerj_detectors import citekey
from xerj_detectors import zotero as zotero_detector

MTIME = 1_700_000_000_000
LIBRARY = gzip.decompress((Path(__file__).parent / "fixtures/zotero/zotero.sqlite.gz").read_bytes())
STORED = {  # the attachments the real library stores, by the reference they belong to
    "C4GTCV2J": ["storage/JFE5RQFA/S0169433221010588.html"],
    "DV38XZPI": ["storage/5W4XGHII/Venturi et al. - 2024 - Selective Generation of Luminescent Defects in Hexagonal "
                 "Boron Nitride.pdf", "storage/ICIHC6DX/lpor.html"],
}
LISTED = {**STORED,  # and those it lists whose files the fetched copy lacks
          "27RSWZA6": ["storage/6R768WTJ/Innocenzi y Stagi - 2024 - From Defects to Photoluminescence in h-BN 2D and "
                       "0D Nanostructures.pdf"],
          "JRV6G92L": ["storage/V8EFRK9M/Moon et al. - 2023 - Hexagonal Boron Nitride for Next-Generation Photonics "
                       "and Electronics.pdf"],
          "KNYQCGJ4": ["storage/YZLVJXKY/adfm.html"]}


def enriched(tmp_path: Path) -> bytes:
    """The real library with what it lacks written in as Zotero writes it: a note on a reference and one on no
    reference, two annotations on a PDF (page 3's written first), a reference in the trash, a feed's item, a Better
    BibTeX citation key in Extra, and a collection inside the library's one collection."""
    path = tmp_path / "enriched.sqlite"
    path.write_bytes(LIBRARY)
    db = sqlite3.connect(path)
    types = dict(db.execute("SELECT typeName, itemTypeID FROM itemTypes"))

    def item(key: str, kind: str) -> int:
        added = db.execute("INSERT INTO items (itemTypeID, libraryID, key) VALUES (?, 1, ?)", (types[kind], key))
        return added.lastrowid

    note = item("NOTE0001", "note")
    db.execute("INSERT INTO itemNotes VALUES (?, 3, ?, 'Reading')",
               (note, "<div><h1>Reading</h1><p>Defects <b>emit</b> single photons.</p></div>"))
    loose = item("NOTE0002", "note")
    db.execute("INSERT INTO itemNotes VALUES (?, NULL, '<p>A loose idea</p>', '')", (loose,))
    for key, page, order, text, comment in (("ANNO0001", "3", "00002|000100|00200", "luminescent defects", "key claim"),
                                            ("ANNO0002", "1", "00000|000010|00020", "boron vacancies", None)):
        annotation = item(key, "annotation")
        db.execute("INSERT INTO itemAnnotations (itemID, parentItemID, type, text, comment, pageLabel, sortIndex, "
                   "position, isExternal) VALUES (?, 4, 1, ?, ?, ?, ?, '{}', 0)",
                   (annotation, text, comment, page, order))
    db.execute("INSERT INTO deletedItems (itemID) VALUES (10)")  # KNYQCGJ4 in the trash
    group = db.execute("INSERT INTO libraries (type, editable, filesEditable) VALUES ('group', 1, 1)").lastrowid
    db.execute("INSERT INTO groups (groupID, libraryID, name, description, version) "
               "VALUES (42, ?, 'Lab reading group', '', 1)", (group,))
    db.execute("INSERT INTO items (itemTypeID, libraryID, key) VALUES (?, ?, 'GROUP001')",
               (types["book"], group))  # a shared group's reference
    feed = db.execute("INSERT INTO libraries (type, editable, filesEditable) VALUES ('feed', 0, 0)").lastrowid
    db.execute("INSERT INTO items (itemTypeID, libraryID, key) VALUES (?, ?, 'FEED0001')",
               (types["journalArticle"], feed))  # an RSS feed's item: not the library's
    value = db.execute("INSERT INTO itemDataValues (value) VALUES ('Citation Key: kaur2021')").lastrowid
    db.execute("INSERT INTO itemData VALUES (1, (SELECT fieldID FROM fields WHERE fieldName = 'extra'), ?)", (value,))
    db.execute("INSERT INTO collections (collectionName, parentCollectionID, libraryID, key) "
               "VALUES ('Emitters', 1, 1, 'COLL0002')")
    db.execute("INSERT INTO collectionItems VALUES ((SELECT collectionID FROM collections WHERE key = 'COLL0002'), "
               "3, 0)")
    db.commit()
    db.close()
    return path.read_bytes()


class TestZoteroConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return zotero.ZoteroFormat()

    @pytest.fixture
    def sample_files(self):
        return {"zotero.sqlite": LIBRARY, "backup/zotero.sqlite": LIBRARY}

    @pytest.fixture
    def bad_files(self):
        empty = sqlite3.connect(":memory:")
        empty.execute("CREATE TABLE t (x)")
        return {"zotero.sqlite": b"SQLite format 3\x00" + b"\x00" * 100, "other/zotero.sqlite": empty.serialize()}

    @pytest.fixture
    def plugin(self):
        return zotero


def test_zotero_reads_each_reference_of_a_real_library_with_its_names_tags_collection_and_files():
    fmt = zotero.ZoteroFormat()
    assert fmt.accepts("Zotero/zotero.sqlite", LIBRARY[:1024])
    assert not fmt.accepts("Zotero/zotero.sqlite.bak", LIBRARY[:1024]) and not fmt.accepts("zotero.sqlite", b"{}")
    card, *references = fmt.parse("Zotero/zotero.sqlite", LIBRARY, MTIME)
    assert (card.kind, card.title, card.fields["items"], card.fields["notes"], card.fields["collection_count"]) == (
        "file", "Zotero library", 5, 0, 1)
    assert [doc.fields["zotero_key"] for doc in references] == ["C4GTCV2J", "DV38XZPI", "27RSWZA6", "JRV6G92L",
                                                                "KNYQCGJ4"]
    first = references[0]
    assert (first.doc_id, first.dataset, first.kind, first.title) == (
        "Zotero/zotero.sqlite#C4GTCV2J", "ax-refs", "entry",
        "Defect states induced luminescence and electrochemical studies of boron carbon nitride nanosheets")
    assert first.fields["authors"][:2] == ["Manjot Kaur", "Rameez Ahmad Mir"] and len(first.fields["authors"]) == 9
    assert {key: first.fields[key] for key in ("entry_type", "year", "venue", "doi", "collections")} == {
        "entry_type": "journalArticle", "year": "2021", "venue": "Applied Surface Science",
        "doi": "10.1016/j.apsusc.2021.149982", "collections": ["Boron-Nitride"]}
    assert first.fields["keywords"] == ["BCN", "Defect states", "Hydrogen evolution reaction", "Photoluminescence",
                                        "Thermo-chemical", "XPS"]
    assert first.text.splitlines()[2:4] == ["journalArticle 2021", "Applied Surface Science"]
    assert "A single-step thermochemical synthesis route" in first.text and "citekey" not in first.fields
    assert {doc.fields["zotero_key"]: doc.fields["files"] for doc in references} == {
        key: [f"Zotero/{path}" for path in paths] for key, paths in LISTED.items()}


def test_zotero_reads_notes_annotations_citation_keys_and_nested_collections_and_leaves_the_trash_out(tmp_path):
    docs = zotero.ZoteroFormat().parse("zotero.sqlite", enriched(tmp_path), MTIME)
    by_id = {doc.doc_id: doc for doc in docs}
    assert "zotero.sqlite#KNYQCGJ4" not in by_id and "zotero.sqlite#FEED0001" not in by_id
    assert docs[0].fields["items"] == 5
    assert by_id["zotero.sqlite#GROUP001"].fields["group"] == "Lab reading group"
    assert "group" not in by_id["zotero.sqlite#C4GTCV2J"].fields
    assert by_id["zotero.sqlite#C4GTCV2J"].fields["citekey"] == "kaur2021"
    assert by_id["zotero.sqlite#DV38XZPI"].fields["collections"] == ["Boron-Nitride", "Boron-Nitride/Emitters"]
    note = by_id["zotero.sqlite#NOTE0001"]
    assert (note.kind, note.dataset, note.title, note.fields["parent"]) == (
        "note", "ax-notes", "Reading", "zotero.sqlite#DV38XZPI")
    assert "Defects emit single photons." in note.text
    loose = by_id["zotero.sqlite#NOTE0002"]
    assert (loose.title, loose.text, loose.fields.get("parent")) == ("A loose idea", "A loose idea", None)
    marks = by_id["zotero.sqlite#5W4XGHII-annotations"]
    assert (marks.kind, marks.title, marks.fields["parent"], marks.fields["annotations"]) == (
        "annotations", "Annotations of Selective Generation of Luminescent Defects in Hexagonal Boron Nitride",
        "zotero.sqlite#DV38XZPI", 2)
    assert marks.text == "p. 1: “boron vacancies”\np. 3: “luminescent defects” key claim"  # in reading order
    assert marks.fields["file"] == STORED["DV38XZPI"][0]


def test_zotero_reads_a_library_in_wal_mode_and_refuses_what_is_not_one():
    wal = LIBRARY[:18] + b"\x02\x02" + LIBRARY[20:]
    assert len(zotero.ZoteroFormat().parse("zotero.sqlite", wal, MTIME)) == 6
    with pytest.raises(FormatError, match="not an SQLite database"):
        zotero.ZoteroFormat().parse("zotero.sqlite", b"not a database", MTIME)


def pdf_card(path: str) -> SourceDocument:
    return SourceDocument(path, "ax-pdfs", path, path, "", "", "file", MTIME, "pdf", {"ordinal": 0})


def test_zotero_detector_links_a_reference_to_its_files_notes_and_annotations(tmp_path):
    docs = parse_files({"Zotero/zotero.sqlite": LIBRARY}, MTIME)
    docs["Zotero/zotero.sqlite"] = zotero.ZoteroFormat().parse("Zotero/zotero.sqlite", enriched(tmp_path), MTIME)
    for path in (*STORED["C4GTCV2J"], *STORED["DV38XZPI"]):
        docs[f"Zotero/{path}"] = [pdf_card(f"Zotero/{path}")]
    found = {(e.type, e.src.partition("#")[2], e.dst, e.confidence)
             for e in run_detectors([zotero_detector.ZoteroDetector()], docs).edges}
    stored = {("entry_file", key, f"Zotero/{path}", 0.95) for key, paths in STORED.items() for path in paths}
    assert found == stored | {
        ("literature_note", "DV38XZPI", "Zotero/zotero.sqlite#NOTE0001", 0.95),
        ("literature_note", "DV38XZPI", "Zotero/zotero.sqlite#5W4XGHII-annotations", 0.95),
        ("annotates", "5W4XGHII-annotations", f"Zotero/{STORED['DV38XZPI'][0]}", 0.95)}


def test_a_note_citing_a_zotero_references_citation_key_links_to_it(tmp_path):
    docs = parse_files({"notes/draft.md": b"# Draft\nAs [@kaur2021] found.\n"}, MTIME)
    docs["Zotero/zotero.sqlite"] = zotero.ZoteroFormat().parse("Zotero/zotero.sqlite", enriched(tmp_path), MTIME)
    edges = run_detectors([citekey.CitekeyDetector()], docs).edges
    assert [(e.src, e.dst) for e in edges] == [("notes/draft.md#draft", "Zotero/zotero.sqlite#C4GTCV2J")]


def test_a_zotero_data_folder_is_walked_without_the_programs_parts_and_indexed(engine, tmp_path):
    folder = tmp_path / "Zotero"
    for path in ("storage/JFE5RQFA/S0169433221010588.html", "translators/Queensland State Archives.js",
                 "styles/apa.csl", "locate/engines.json"):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text("<html><body><h1>Snapshot</h1><p>boron nitride</p></body></html>"
                                   if path.endswith(".html") else "{}")
    (folder / "zotero.sqlite").write_bytes(LIBRARY)
    seen = {item.rel_path: item for item in walk(folder)}
    assert {rel for rel, item in seen.items() if isinstance(item, Skipped) and item.kind == IGNORED} == {
        "locate", "styles", "translators"}
    summary = run_pipeline(engine, folder, brain="zotero")
    assert not summary.files_failed and summary.files_indexed == 2
    (too_large,) = [item for item in walk(folder, max_file_bytes=1 << 20) if item.rel_path == "zotero.sqlite"]
    assert too_large.reason == "larger than 1 MiB (--max-file-mib 2 reads it)"
    other = tmp_path / "code"  # a folder without a library keeps its translators/ like any folder
    shutil.copytree(folder / "translators", other / "translators")
    assert [item.rel_path for item in walk(other)] == ["translators/Queensland State Archives.js"]


class TestZoteroDetectorConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return zotero_detector.ZoteroDetector()

    @pytest.fixture
    def plugin(self):
        return zotero_detector

    @pytest.fixture
    def corpus_files(self):
        docs = parse_files({"zotero.sqlite": LIBRARY})
        docs["storage/JFE5RQFA/S0169433221010588.html"] = [pdf_card("storage/JFE5RQFA/S0169433221010588.html")]
        return docs
