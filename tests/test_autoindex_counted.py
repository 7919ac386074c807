"""Texts counted outside the store's tokenizer: ``text.counted_terms`` against it, and
``IndexWrite.put_many_counted`` against ``put_many`` (the same stored bytes), alone, where ``put_many`` counts a
batch of long texts itself, and in autoindex runs whose parse counts the texts."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xerj_core import termrank
from xerj_core.autoindex import parallel, pipeline
from xerj_core.autoindex.parallel import InlineExecutor
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.sink import LocalSink, dataset_index
from xerj_core.engine import Engine
from xerj_core.plugins import get_plugin_manager
from xerj_core.store import Store, write
from xerj_core.store.env import DB_NAMES
from xerj_core.store.limits import MAX_TERM_BYTES
from xerj_core.model import SourceDocument
from xerj_core.query.service import SearchService
from xerj_core.text import counted_joined, counted_terms, counted_terms_split, remembering_counts, tokenize
from xerj_detectors import sharedterm

from .test_autoindex_executor import CLOCK, generate
from .test_store_batchpath import SITE, _texts

# Odd text: lone surrogates, NULs, Greek final sigma, a dotted capital I, the Kelvin sign, CJK, combining marks,
# non-ASCII separators, and words of 254 and 260 UTF-8 bytes (the first a key, the second too long to be one).
_ODD = "ΣΑσς İK\u212a—\u00a0\u0307\u0301é漢字かな_aZ09 .'-\t\x00\ud800\udfff"
_TEXT = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60),
    st.text(alphabet=st.sampled_from(_ODD), max_size=60),
    st.text(alphabet=st.characters(blacklist_categories=[]), max_size=30),
    st.builds(lambda a, n, b: f"{a} {'é' * n} {'x' * (2 * n)} {b}", st.text(max_size=10), st.integers(120, 135),
              st.text(max_size=10)),
)


def _words(text: str) -> tuple[Counter, int]:
    """The store's view of ``text``: its keyable terms counted (UTF-8), and how many words were too long."""
    words = [word.encode() for word in tokenize(text)]
    kept = Counter(word for word in words if len(word) <= MAX_TERM_BYTES)
    return kept, len(words) - sum(kept.values())


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_counted_terms_are_the_stores_tokens_counted(text):
    kept, dropped = _words(text)
    counted = counted_terms(text, MAX_TERM_BYTES)
    terms, counts = counted_terms_split(counted)
    assert counted[:2] == (sum(kept.values()), dropped)
    assert dict(zip(terms, counts)) == kept and len(terms) == len(kept)


MAPPING = {"properties": {"title": {"type": "text"}, "text": {"type": "text"}, "path": {"type": "keyword"},
                          "n": {"type": "long"}}}
# the counted field with multi-fields, as a dynamic mapping gives a string (short values indexed whole too)
MULTI = {"properties": {**MAPPING["properties"], "text": {"type": "text", "fields": {
    "raw": {"type": "keyword", "ignore_above": 12}, "again": {"type": "text"}}}}}

def _storable(text: str) -> str:
    return re.sub("[\ud800-\udfff]", "", text)


_DOC = st.fixed_dictionaries(
    {"path": st.sampled_from(["a", "b", "漢"])},
    # (a lone surrogate has no UTF-8 form: a source holding one is refused by both paths alike)
    # (a list or a number in the text field: the store indexes that document's values itself)
    optional={"title": st.text(max_size=8).map(_storable),
              "text": st.one_of(_TEXT.map(_storable), st.none(), st.lists(_TEXT.map(_storable), max_size=2),
                                st.integers(0, 99)),
              "tags": st.lists(st.sampled_from(["x", "y"]), max_size=2),  # a list: the write plan's per-record path
              "n": st.integers(0, 9)})


def _put_both(tmp_path: Path, batches: list[list[dict]], tail_rows: int = 4, mapping: dict = MAPPING
              ) -> tuple[Store, Store, list]:
    """The batches put through ``put_many`` into one store and ``put_many_counted`` into another, one
    transaction each (a small tail: rows are sealed and merged as they come); both stores and the outcomes."""
    plain, counted = Store(tmp_path / "plain", tail_rows=tail_rows), Store(tmp_path / "counted", tail_rows=tail_rows)
    outcomes = []
    for store in (plain, counted):
        store.create_index("t", mapping)
    for k, docs in enumerate(batches):
        items = [(doc, f"d{i % 5}", "index") for i, doc in enumerate(docs)]  # ids again, in a batch and after

        def apply_plain(txn):
            # count=False: the store's own tokenizer, which a batch of long texts would otherwise not take
            return [(r.doc_id, r.result, r.version, r.seq_no) for r in txn.index("t").put_many(items, count=False)]

        def apply_counted(txn):
            found = [counted_terms(doc["text"], MAX_TERM_BYTES) if type(doc.get("text")) is str else None
                     for doc in docs]
            return [(r.doc_id, r.result, r.version, r.seq_no)
                    for r in txn.index("t").put_many_counted(items, "text", found)]

        outcomes.append((plain.transact(apply_plain), counted.transact(apply_counted)))
    return plain, counted, outcomes


def _contents(store: Store) -> dict:
    """Every key and value of the store's databases, with the wall clock left out of segment records."""
    out = {}
    with store.read_txn() as raw:
        for name in DB_NAMES:
            for key, value in raw.cursor(db=store.env.dbs[name]):
                if name == "segs":
                    value = re.sub(rb'"sealed_at":\d+', b"", bytes(value))
                elif name == "indices":
                    value = {k: v for k, v in json.loads(value).items() if k not in ("created", "uuid")} \
                        if not key.startswith(b"\x00") else bytes(value)
                out[(name, bytes(key))] = bytes(value) if not isinstance(value, dict) else value
    return out


@pytest.mark.parametrize("mapping", [MAPPING, MULTI], ids=["plain", "multi-fields"])
@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(_DOC, min_size=1, max_size=9), min_size=1, max_size=4))
def test_put_many_counted_stores_what_put_many_stores(tmp_path_factory, mapping, batches):
    """Documents of odd text (and absent ones, lists, overwrites, refusal-free mixes of shapes) written with
    their texts counted give the bytes put_many writes: sources, ids, tails, segments, postings, dictionaries
    and the count of words too long to be keys; with multi-fields on the counted field, theirs too."""
    plain, counted, outcomes = _put_both(tmp_path_factory.mktemp("s"), batches, mapping=mapping)
    with plain, counted:
        for want, got in outcomes:
            assert got == want
        assert _contents(counted) == _contents(plain)


def test_put_many_counted_on_real_text(tmp_path, monkeypatch):
    """Foam notes and .py files (CJK, words too long to be keys) in batches of 90 through the counted path, every
    batch taking it: the bytes put_many writes."""
    calls = []
    real = write.IndexWrite.put_many
    monkeypatch.setattr(write.IndexWrite, "put_many", lambda self, items, **kw: calls.append(self.uncounted) or real(
        self, items, **kw))
    docs = [{"title": Path(path).name, "text": text, "path": path, "n": len(text) % 10} for path, text in _texts()]
    batches = [docs[lo:lo + 90] for lo in range(0, len(docs), 90)]
    plain, counted, outcomes = _put_both(tmp_path, batches, tail_rows=32)
    with plain, counted:
        assert all(got == want for want, got in outcomes)
        assert _contents(counted) == _contents(plain)
    assert calls.count("text") == len(batches)  # no batch fell back to tokenizing


def test_put_many_counts_a_batch_of_long_texts_itself(tmp_path, monkeypatch):
    """Real notes and code, whole files and their paragraphs, put in batches beside a list field (the write plan's
    per-record path) and overwritten: a batch whose texts average ``COUNT_FROM_CHARS`` or more is indexed from
    the compiled count of its longest text field, any other by the store's tokenizer, and either way the store
    holds the bytes of a store that never counts."""
    seen: list[str] = []
    real = write.IndexWrite.put_many_counted
    monkeypatch.setattr(write.IndexWrite, "put_many_counted",
                        lambda self, items, path, counted, **kw: seen.append(path) or real(self, items, path, counted,
                                                                                           **kw))
    texts = _texts()
    docs = [{"title": Path(path).name, "text": text, "path": path, "tags": ["a", path[-1]], "n": len(text) % 10}
            for path, text in texts]
    batches = [docs[lo:lo + 40] for lo in range(0, len(docs), 40)]
    batches += [batches[0], [{"title": doc["text"], "text": doc["title"]} for doc in batches[1]]]  # overwrites
    longest = [max((sum(len(doc[path]) for doc in batch), path) for path in ("text", "title")) for batch in batches]
    long = [chars >= write.COUNT_FROM_CHARS * len(batch) for (chars, _path), batch in zip(longest, batches)]
    assert any(long) and not all(long) and longest[-1][1] == "title" and long[-1]
    stores = [Store(tmp_path / name, tail_rows=32) for name in ("counting", "tokenizing")]
    try:
        for store in stores:
            store.create_index("t", MAPPING)
        for batch in batches:
            items = [(doc, f"d{i}", "index") for i, doc in enumerate(batch)]
            for store, count in zip(stores, (True, False)):
                store.transact(lambda txn: txn.index("t").put_many(items, count=count))
        assert _contents(stores[0]) == _contents(stores[1])
    finally:
        for store in stores:
            store.close()
    # each long batch counted once, its longest text field (the swapped batch's titles), the others not at all
    assert seen == [path for (_chars, path), is_long in zip(longest, long) if is_long]


def test_a_dynamic_text_field_with_its_keyword_is_counted(tmp_path, monkeypatch):
    """Long texts bulked into an index whose mapping is dynamic (each string a text field with a ``.keyword``
    multi-field, indexed whole up to 256 characters) are counted from the second batch on (the first makes the
    mapping), and the store holds what its own tokenizer makes: the keyword of each short value is there to
    find, and the long texts are found by their words."""
    seen: list[str] = []
    real = write.IndexWrite.put_many_counted
    monkeypatch.setattr(write.IndexWrite, "put_many_counted",
                        lambda self, items, path, counted, **kw: seen.append(path) or real(self, items, path, counted,
                                                                                           **kw))
    texts = [(path, text) for path, text in _texts() if len(text) > 2 * write.COUNT_FROM_CHARS][:120]
    docs = [{"body": text if i % 4 else f"short note {i}", "name": Path(path).name} for i, (path, text) in
            enumerate(texts)]
    batches = [docs[lo:lo + 30] for lo in range(0, len(docs), 30)]
    stores = [Store(tmp_path / name, tail_rows=16) for name in ("counting", "tokenizing")]
    try:
        for batch_no, batch in enumerate(batches):
            items = [(doc, f"d{batch_no}-{i}", "index") for i, doc in enumerate(batch)]
            for store, count in zip(stores, (True, False)):
                store.transact(lambda txn: txn.index("t", create=True).put_many(items, count=count))

        def then_one_more(txn, count):  # a put after a counted batch in the same transaction is tokenized
            index = txn.index("t")
            index.put_many([(doc, f"again-{i}", "index") for i, doc in enumerate(batches[1])], count=count)
            index.put({"body": "zebra crossing"}, "late")

        for store, count in zip(stores, (True, False)):
            store.transact(lambda txn: then_one_more(txn, count))
        assert _contents(stores[0]) == _contents(stores[1])
        body = stores[0].get_mapping("t")["properties"]["body"]
        assert body["fields"]["keyword"] == {"type": "keyword", "ignore_above": 256}
        search = SearchService(stores[0])
        assert [hit["_id"] for hit in search.search("t", {"query": {"term": {"body.keyword": "short note 4"}}})[
            "hits"]["hits"]] == ["d0-4"]
        word = next(w for w in tokenize(docs[33]["body"]) if len(w) > 6)
        found = {hit["_id"] for hit in search.search("t", {"query": {"match": {"body": word}}, "size": 200})[
            "hits"]["hits"]}
        assert "d1-3" in found
        assert [hit["_id"] for hit in search.search("t", {"query": {"match": {"body": "zebra"}}})["hits"]["hits"]] \
            == ["late"]
    finally:
        for store in stores:
            store.close()
    assert seen == ["body"] * len(batches)


@pytest.mark.parametrize("odd", ["list", "number", "refused", "absent"])
def test_put_many_counts_long_texts_beside_odd_values_as_it_tokenizes_them(tmp_path, odd):
    """A batch of long texts in which one document's text is a list or a number (not counted: the batch is
    tokenized as it is), is refused by a strict mapping, or is absent: every outcome and stored byte is that of
    the store's own tokenizer, and only the batches whose every text is a string or absent are counted."""
    long = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 8
    docs = [{"text": f"{long} {i}", "tags": ["a", str(i)]} for i in range(6)]
    docs[3] = {"list": {"text": [long, "short"]}, "number": {"text": 12345}, "refused": {"text": long, "bogus": 1},
               "absent": {"tags": ["b"]}}[odd]
    calls: list[int] = []
    real = write.IndexWrite.put_many_counted
    outcomes, contents = [], []
    for count in (True, False):
        with Store(tmp_path / str(count), tail_rows=4) as store, pytest.MonkeyPatch.context() as patch:
            patch.setattr(write.IndexWrite, "put_many_counted",
                          lambda self, *args, **kw: calls.append(count) or real(self, *args, **kw))
            store.create_index("t", {"dynamic": "strict", "properties": {"text": {"type": "text"},
                                                                         "tags": {"type": "keyword"}}})
            items = [(doc, f"d{i}", "index") for i, doc in enumerate(docs)]
            outcomes.append(store.transact(lambda txn: list(map(repr, txn.index("t").put_many(items, count=count)))))
            contents.append(_contents(store))
    assert outcomes[0] == outcomes[1] and contents[0] == contents[1]
    assert ("MapperParsingError" in outcomes[0][3]) == (odd == "refused")
    assert calls == ([True] if odd in ("refused", "absent") else [])


def test_put_many_counted_falls_back_where_a_value_is_not_its_count(tmp_path):
    """A string the caller did not count, or a field that is not a text field, is indexed by put_many as it is,
    and a text field with a sub-field is counted with its sub-field fed the values: the bytes put_many writes."""
    mapping = {"properties": {"text": {"type": "text"}, "k": {"type": "keyword"},
                              "multi": {"type": "text", "fields": {"raw": {"type": "keyword"}}}}}
    docs = [{"text": "Alpha beta", "k": "Gamma", "multi": "Delta delta"}, {"text": "beta", "k": "x", "multi": "y"}]
    stores = []
    for name in ("plain", "counted"):
        store = Store(tmp_path / name)
        store.create_index("t", mapping)
        stores.append(store)

        def apply(txn, name=name):
            index = txn.index("t")
            for path in ("text", "k", "multi"):
                items = [(doc, f"{path}{i}", "index") for i, doc in enumerate(docs)]
                counted = [counted_terms(doc[path], MAX_TERM_BYTES) for doc in docs]
                if name == "plain":
                    index.put_many(items)
                elif path == "text":
                    index.put_many_counted(items, path, [None, counted[1]])  # a string left uncounted
                else:
                    index.put_many_counted(items, path, counted)  # a keyword; a text field with a sub-field

        store.transact(apply)
    with stores[0], stores[1]:
        assert _contents(stores[1]) == _contents(stores[0])


@pytest.mark.parametrize("how", ["inline", "companion", "pool"])
def test_a_run_counts_the_code_it_parses_and_stores_what_the_stores_tokenizer_stores(tmp_path, monkeypatch, how):
    """Notes and real .py files (CJK, long words) autoindexed inline, with a companion (which counts the code's
    texts it parses, and the writer those it takes back) or with a pool, give the dataset indices a run whose
    store tokenizes every text gives, byte for byte; every write of the code's documents took the counted path.
    Inline and pool runs tokenized in the writer until they counted too: on 5,000 real .py files an inline
    run's CPU fell from 15.4 s to 8.5 s, and a pool's writer from 11.3 s to 6.7 s."""
    folder = generate(tmp_path / "gen", pipeline.POOL_MIN_FILES + 40)
    for name in ("charset_normalizer/constant.py", "pygments/lexers/testing.py", "idna/uts46data.py", "click/core.py"):
        if (SITE / name).is_file():
            shutil.copy(SITE / name, folder / name.replace("/", "_"))
    calls: list[tuple[str, bool]] = []
    real = write.IndexWrite.put_many_counted

    def put_many_counted(self, items, path, counted):
        calls.append((self.name, None not in counted))
        return real(self, items, path, counted)

    contents = {}
    for name in ("tokenized", how):
        monkeypatch.setattr(pipeline, "BATCH_FILES", 40)
        monkeypatch.setattr(write.IndexWrite, "put_many_counted", put_many_counted)
        # the store counts no long text itself: what is counted here is what the parse counted
        monkeypatch.setattr(write, "COUNT_FROM_CHARS", float("inf"))
        if name == "tokenized":  # the oracle: no dataset's texts counted, so the store tokenizes them all
            monkeypatch.setattr(parallel, "COUNTED_DATASETS", frozenset())
        if name == "companion":
            monkeypatch.setattr(pipeline, "companion_default", lambda: True)
        with Engine(tmp_path / name, get_plugin_manager()) as eng:
            how_run = {"companion": {}, "pool": {"workers": 2}}.get(name, {"executor": InlineExecutor()})
            run(eng, folder, brain="b", clock=CLOCK, **how_run)
            rid = LocalSink(eng.store, eng.graph).load("b").root_id
            indices = [dataset_index(dataset, rid) for dataset in ("ax-notes", "ax-code")]
            assert all(map(eng.store.exists, indices))
            contents[name] = {index: _index_contents(eng.store, index) for index in indices}
        monkeypatch.undo()
        if name == "tokenized":
            assert not calls
    # only the code's texts are counted (see sink.COUNTED_DATASETS), and every write of them took the counts
    assert calls and all(ok for _name, ok in calls) and {name.rsplit("-", 1)[0] for name, _ok in calls} == {"ax-code"}
    assert contents[how] == contents["tokenized"]


def _index_contents(store: Store, index: str) -> dict:
    """Every key and value of one index in the store's databases (its own prefix), segments without the wall
    clock; the mtime column of each document is the file's, so equal on both runs."""
    with store.read_txn() as raw:
        ix = json.loads(raw.get(index.encode(), db=store.env.dbs["indices"]))["ix"]
    prefix = ix.to_bytes(4, "big")
    return {key: value for key, value in _contents(store).items() if key[1].startswith(prefix)}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_TEXT, st.text(alphabet=st.characters(max_codepoint=127), max_size=80)), min_size=1,
                max_size=4))
def test_sharedterm_takes_a_files_terms_from_its_counted_texts_as_from_the_texts(texts):
    """A file's shared-vocabulary terms from the words counted for the store (a companion's parse), and from the
    compiled count of an uncounted ASCII file's texts, are those the detector's regex finds in the texts."""
    docs = [SourceDocument(f"d{i}", "notes", "a.md", "A", text, "", "section", 0, "markdown", {})
            for i, text in enumerate(texts)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sharedterm, "ascii_joined_words", lambda text, longest: None)
        want = sharedterm.file_terms(docs)
    assert sharedterm.file_terms(docs) == want
    with remembering_counts():
        for text in texts:
            counted_terms(text, MAX_TERM_BYTES)
        assert all(counted_joined(text) is not None for text in texts)
        for compiled in (True, False):  # the file's words found with the compiled union and without
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(termrank, "ENABLED", compiled)
                assert sharedterm.file_terms(docs) == want


def test_sharedterm_takes_a_real_files_terms_from_the_compiled_count_as_from_its_regex(monkeypatch):
    """Foam notes and .py files (CJK, words too long to be keys), each as a file of its paragraphs: the terms the
    compiled word count gives the detector for the ASCII files are those its regex finds, file by file."""
    files: dict[str, list[str]] = {}
    for path, text in _texts():
        files.setdefault(path.split("#")[0], []).append(text)
    docs = {path: [SourceDocument(f"d{i}", "notes", "a.md", "A", text, "", "section", 0, "markdown", {})
                   for i, text in enumerate(texts[1:] or texts)] for path, texts in files.items()}
    compiled = {path: sharedterm.file_terms(file_docs) for path, file_docs in docs.items()}
    cut: list[str] = []
    monkeypatch.setattr(sharedterm, "ascii_joined_words", lambda text, longest: cut.append(text) or None)
    assert {path: sharedterm.file_terms(file_docs) for path, file_docs in docs.items()} == compiled
    assert len(cut) == len(docs) and sum(map(str.isascii, cut)) > len(cut) // 2  # most took the compiled count


def test_counts_out_of_step_with_their_documents_refuse_the_batch_rather_than_drop_documents(tmp_path):
    """``LocalSink.write_files`` pairs each file's documents with their counts; a count list shorter than the
    documents (a bug upstream) refuses the batch instead of writing the paired documents alone."""
    from xerj_core.autoindex.sink import FileStamp, FileWrite, IndexedDocument

    texts = ["alpha beta", "gamma delta"]
    docs = tuple(IndexedDocument("ax-code-test", f"d{i}", {"text": text}) for i, text in enumerate(texts))
    counts = tuple(counted_terms(text, MAX_TERM_BYTES) for text in texts)
    with Engine(tmp_path / "data", get_plugin_manager()) as eng:
        sink = LocalSink(eng.store, eng.graph)
        stamp = FileStamp(1, 1, "h")
        assert sink.write_files("b", [FileWrite("a.py", stamp, docs)], 0, counted=[counts]) == 2
        with pytest.raises(ValueError):
            sink.write_files("b", [FileWrite("b.py", stamp, docs)], 0, counted=[counts[:1]])
        with pytest.raises(ValueError):
            sink.write_files("b", [FileWrite("b.py", stamp, docs)], 0, counted=[])
        assert eng.store.count("ax-code-test") == 2
